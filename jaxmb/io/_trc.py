"""The TRC reader (OpenSim / Motion Analysis marker trajectories)."""

from __future__ import annotations

import warnings

import numpy as np

from ._markers import _MAX_LISTED, Markers, _unique_labels, _warn_gaps
from ._text import (_LENGTH_UNITS, _check_time_column, _cut_hint, _header_number, _parse_last_line_too, _read_lines,
                    _refuse_cut_number, _scale, _split_tabs)


def read_trc(path, *, warn_gaps: bool = True, zeros_as_gaps: bool = True) -> Markers:
    """Read a TRC marker file (OpenSim, Motion Analysis).

    The file has a ``PathFileType`` line; a line of header names (``DataRate``,
    ``CameraRate``, ``NumFrames``, ``NumMarkers``, ``Units``, ...) and a line of their
    values; a ``Frame#  Time  M1 <tab> <tab> M2 ...`` label line; an ``X1 Y1 Z1 X2 ...``
    line; then one row per frame: the frame number, the time and three coordinates per
    marker. Empty fields are gaps. A label repeated on the label line is renamed
    (``RKNE``, ``RKNE_2``, ...) with a warning naming the line, as :func:`read_c3d` does.

    Args:
        path: the ``.trc`` file.
        warn_gaps: warn (``UserWarning``) naming the markers with gaps and their frame
            counts.
        zeros_as_gaps: read a marker at exactly (0, 0, 0) as a gap, with a warning
            naming the markers (some exporters write a gap as zeros: read as a
            position at the lab's origin, three such frames in a stance turned the
            ankle by 10 degrees, silently); False keeps them as positions.

    Returns:
        :class:`Markers` with ``rate`` = ``DataRate`` (Hz), ``time`` from the Time column
        (s), ``xyz`` ``(NumFrames, NumMarkers, 3)`` in metres (converted from ``Units``:
        mm, cm, m, ...), NaN in gaps.

    Raises:
        ValueError: malformed file (a message naming the file and the line or header
            field): missing header fields, a header field named twice (naming both),
            a header values line with more or fewer values than the names above it,
            a header number that is not finite
            (``inf``, ``nan``), unknown units, a label count or row count that
            disagrees with ``NumMarkers`` / ``NumFrames``, a row with the wrong number
            of fields, a value that is not a number, an infinite coordinate, a marker
            with one or two of its three coordinates empty (a gap leaves all three
            empty: a row missing a value; a coordinate written as ``nan``, or as C
            runtimes print NaN, ``-nan(ind)``, ``1.#QNAN``, is read as a gap of its
            marker, all three NaN), a Time column that is not finite or does
            not advance by 1/``DataRate`` (on average within 0.1 % or within the
            rounding of the times as written: Cortex writes them to 1 ms; and at
            every row within half a frame), an empty file.
            A last line without a line break at its end whose field count is
            wrong, or whose last number has fewer digits than the same column's
            other rows, all written with a fixed number of digits (a file cut
            inside its last number: ``-250.61433`` read as ``-250.6``), is an
            error saying that the file may be truncated.
    """
    lines, source = _read_lines(path)
    if len(lines) < 5:
        raise ValueError(f"{source}: too short for a TRC file ({len(lines)} lines)")
    if not lines[0].startswith("PathFileType"):
        raise ValueError(f"{source}, line 1: expected 'PathFileType', got {lines[0][:40]!r}")
    keys = _trim_fields([k.strip() for k in _split_tabs(lines[1])])
    values = _trim_fields([v.strip() for v in _split_tabs(lines[2])])
    if len(values) != len(keys):
        # zipped, the values would land under the wrong names ('Units' = '50.00')
        raise ValueError(
            f"{source}, line 3 has {len(values)} values for {len(keys)} fields "
            f"(line 2: {', '.join(keys)})"
        )
    _refuse_repeated_trc_keys(keys, values, source)
    header = dict(zip(keys, values))
    for key in ("DataRate", "NumFrames", "NumMarkers", "Units"):
        if key not in header or not header[key]:
            raise ValueError(f"{source}, line 2-3: header field {key} missing")

    def header_number(key, kind):
        return _header_number(header[key], f"{source}, line 3: header field {key}", kind)

    rate = header_number("DataRate", float)
    n_frames = header_number("NumFrames", int)
    n_markers = header_number("NumMarkers", int)
    scale = _scale(header["Units"], _LENGTH_UNITS, "length", f"{source}, line 3, header field Units")

    label_fields = _split_tabs(lines[3])
    if len(label_fields) < 2 or label_fields[0].strip() != "Frame#" or label_fields[1].strip() != "Time":
        raise ValueError(f"{source}, line 4: expected 'Frame#<tab>Time<tab>labels...'")
    labels = [f.strip() for f in label_fields[2:] if f.strip()]
    if len(labels) != n_markers:
        raise ValueError(
            f"{source}, line 4: {len(labels)} marker labels, header field NumMarkers says {n_markers}"
        )
    # repeats renamed RKNE_2, ... with a warning, as read_c3d does (a TRC exported from
    # such a C3D file was refused)
    labels = list(_unique_labels(labels, None, f"{source}, line 4", stacklevel=3))

    coordinate_fields = [f.strip() for f in _split_tabs(lines[4]) if f.strip()]
    if coordinate_fields and not coordinate_fields[0].upper().startswith("X"):
        raise ValueError(
            f"{source}, line 5: expected the coordinate labels 'X1 Y1 Z1 ...', "
            f"got {lines[4].strip()[:40]!r}"
        )

    n_fields = 2 + 3 * n_markers
    columns = ["Frame#", "Time"] + [f"{label} {c}" for label in labels for c in "XYZ"]
    rows, row_lines, written, last = [], [], [], []
    for i in range(5, len(lines)):  # line 5 holds X1 Y1 Z1 ...; data may follow blank lines
        line = lines[i].rstrip("\r")
        if not line.strip():
            continue
        fields = line.split("\t") if "\t" in line else line.split()
        # Writers may end a row with a tab; extra empty fields at the end carry nothing.
        while len(fields) > n_fields and not fields[-1].strip():
            fields.pop()
        if len(fields) != n_fields:
            raise ValueError(
                f"{source}, line {i + 1}: expected {n_fields} fields "
                f"(Frame#, Time, {n_markers} markers x 3), got {len(fields)}{_cut_hint(lines, i)}"
            )
        if not fields[0].strip() or not fields[1].strip():
            column = 1 if not fields[0].strip() else 2
            raise ValueError(f"{source}, line {i + 1}, column {column} ({columns[column - 1]}): empty value")
        row = _parse_last_line_too(fields, source, lines, i, columns, empty_is_nan=True)
        if not np.isfinite(row).all():
            _check_trc_row(row, fields, source, i + 1, columns, labels)
        rows.append(row)
        row_lines.append(i + 1)
        written.append(fields[1])
        last.append(fields[-1])
    if rows:
        _refuse_cut_number(last, lines, row_lines, source, n_fields, columns[-1])
    if len(rows) != n_frames:
        raise ValueError(
            f"{source}: {len(rows)} data rows, header field NumFrames says {n_frames}"
        )
    data = np.array(rows, dtype=float).reshape(n_frames, n_fields)
    _check_time_column(data[:, 1], rate, source, row_lines, written=written)
    xyz = data[:, 2:].reshape(n_frames, n_markers, 3) * scale
    # a marker with a coordinate written as nan is a gap: all three NaN, as empty
    # fields give it and as write_trc writes gaps (it refuses a partial one)
    xyz[np.isnan(xyz).any(-1)] = np.nan
    zero = (xyz == 0.0).all(-1)
    if zeros_as_gaps and zero.any():
        xyz[zero] = np.nan
        counts = zero.sum(0)
        named = [f"{labels[j]} ({counts[j]} frames)" for j in np.flatnonzero(counts)]
        more = f" and {len(named) - _MAX_LISTED} more" if len(named) > _MAX_LISTED else ""
        warnings.warn(f"{source}: markers at exactly (0, 0, 0), read as gaps: {', '.join(named[:_MAX_LISTED])}{more} "
                      "(zeros_as_gaps=False reads them as positions)", stacklevel=2)  # fmt: skip
    markers = Markers(
        rate=rate,
        time=data[:, 1],
        labels=tuple(labels),
        xyz=xyz,
        source=source,
    )
    if warn_gaps:
        _warn_gaps(markers, source)
    return markers


def _refuse_repeated_trc_keys(keys: list, values: list, source: str) -> None:
    """A header field named twice on a TRC file's line 2 is an error naming both
    fields and their values on line 3 (zipped into one dict, the second silently
    won: ``DataRate`` twice, and the times were read at the wrong rate)."""
    first = {}
    for j, key in enumerate(keys):
        if key and key in first:
            k = first[key]
            raise ValueError(
                f"{source}, line 2: header field {key} appears twice (fields {k + 1} and {j + 1}; "
                f"line 3 gives {values[k]!r} and {values[j]!r}): which one holds is unclear"
            )
        first[key] = j


def _trim_fields(fields: list) -> list:
    """Fields without the empty ones at the end (a line ending with tabs)."""
    while fields and not fields[-1]:
        fields = fields[:-1]
    return fields


def _check_trc_row(row, fields, source, line, columns, labels) -> None:
    """A TRC data row with a value that is not finite: Frame# and Time must be
    finite, a coordinate may be NaN (a gap) but not infinite, and a gap leaves all
    three coordinates of its marker empty: one or two empty (a row with a value
    missing and a tab at its end) is an error."""
    not_finite = np.isinf(row)
    not_finite[:2] |= np.isnan(row[:2])
    bad = np.flatnonzero(not_finite)
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"{source}, line {line}, column {j + 1} ({columns[j]}): "
            f"{fields[j].strip()!r} is not a finite number"
        )
    empty = np.array([not f.strip() for f in fields[2:]]).reshape(len(labels), 3)
    partial = np.flatnonzero(empty.any(axis=1) & ~empty.all(axis=1))
    if partial.size:
        k = int(partial[0])
        n_values = sum(1 for f in fields if f.strip())
        raise ValueError(
            f"{source}, line {line} has {n_values} values for {len(fields)} fields "
            f"(Frame#, Time, {len(labels)} markers x 3): marker {labels[k]} has "
            f"{int(empty[k].sum())} of its 3 coordinates empty (a gap leaves all three empty)"
        )
