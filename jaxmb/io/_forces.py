"""The reader of Motion Analysis Cortex ``.forces`` files (force, centre of pressure
and free moment per plate)."""

from __future__ import annotations

import numpy as np

from ._markers import ForcePlates
from ._text import _header_number, _read_lines, _refuse_infinite, _refuse_repeated_key, _whitespace_rows


def read_forces(path) -> ForcePlates:
    """Read a Motion Analysis Cortex ``.forces`` file.

    The file has a ``[Force Data]`` line, ``NumberOfForcePlates=``, ``SampleRate=`` and
    ``NumberOfSamples=`` lines, a header ``#Sample FX1 FY1 FZ1 X1 Y1 Z1 MZ1 FX2 ...``
    (force N, centre of pressure mm in the lab frame, free moment N mm) and one row per
    sample. Samples are numbered from 1 (as TRC frames are), and sample ``n`` is at time
    ``(n - 1) / SampleRate``; the sample numbers must be consecutive integers.

    Args:
        path: the ``.forces`` file.

    Returns:
        :class:`ForcePlates`: ``force`` ``(T, plates, 3)`` N, ``cop`` ``(T, plates, 3)``
        m, ``free_moment`` ``(T, plates)`` N m, ``rate`` Hz, ``time`` s.

    Raises:
        ValueError: malformed file (naming the file and the line or field): a missing
            header field or column, a header field given twice (naming both lines),
            a row with the wrong number of fields, a value that
            is not a number, a header count or rate that is not a finite number
            (``inf``, ``nan``), an infinite value in the data (``inf``, or a number
            beyond float64's range; NaN is read as a gap), sample numbers that are
            not integers or that skip, a row count that disagrees with
            ``NumberOfSamples``, no samples at all, or an empty file.
            A last line without a line break at its end whose field count is
            wrong, or whose last number has fewer digits than the same column's
            other rows, all written with a fixed number of digits (a file cut
            inside its last number: ``-250.61433`` read as ``-250.6``), is an
            error saying that the file may be truncated.
    """
    lines, source = _read_lines(path)
    i = 0
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or lines[i].strip().lower() != "[force data]":
        raise ValueError(f"{source}, line {i + 1}: expected '[Force Data]'")
    i += 1
    header = {}
    header_line = {}
    while i < len(lines) and not lines[i].lstrip().startswith("#"):
        text = lines[i].strip()
        if text:
            if "=" not in text:
                raise ValueError(f"{source}, line {i + 1}: expected 'key=value' or the '#Sample' header, got {text[:40]!r}")
            key, value = (s.strip() for s in text.split("=", 1))
            _refuse_repeated_key(key, key, value, header, header_line, source, i + 1)
            header[key] = value
            header_line[key] = i + 1
        i += 1
    if i == len(lines):
        raise ValueError(f"{source}: no '#Sample FX1 FY1 ...' header line")

    def field(key, kind):
        if key not in header:
            raise ValueError(f"{source}: header field {key} missing")
        return _header_number(header[key], f"{source}, line {header_line[key]}: header field {key}", kind)

    n_plates = field("NumberOfForcePlates", int)
    rate = field("SampleRate", float)
    n_samples = field("NumberOfSamples", int)

    columns = lines[i].strip().lstrip("#").split()
    header_lineno = i + 1
    if not columns or columns[0] != "Sample":
        raise ValueError(f"{source}, line {header_lineno}: expected '#Sample' as the first column")
    index = {}
    for j, name in enumerate(columns):
        if name in index:
            raise ValueError(f"{source}, line {header_lineno}: column {name} appears twice")
        index[name] = j
    names = ("FX", "FY", "FZ", "X", "Y", "Z", "MZ")
    take = []
    for k in range(1, n_plates + 1):
        for name in names:
            if f"{name}{k}" not in index:
                raise ValueError(
                    f"{source}, line {header_lineno}: column {name}{k} missing "
                    f"(NumberOfForcePlates={n_plates})"
                )
            take.append(index[f"{name}{k}"])
    extra = sorted({int(c[len(n):]) for c in columns for n in names
                    if c.startswith(n) and c[len(n):].isdigit() and int(c[len(n):]) > n_plates})  # fmt: skip
    if extra:
        raise ValueError(
            f"{source}, line {header_lineno}: columns of plate {extra[0]} but NumberOfForcePlates={n_plates} "
            f"(line {header_line['NumberOfForcePlates']}): the plates beyond it would be ignored"
        )

    rows, row_lines = _whitespace_rows(lines, header_lineno, columns, source)
    if len(rows) != n_samples:
        raise ValueError(
            f"{source}: {len(rows)} data rows, header field NumberOfSamples says {n_samples}"
        )
    if n_samples == 0:
        raise ValueError(
            f"{source}, line {header_line['NumberOfSamples']}: NumberOfSamples=0: the file holds no samples"
        )
    data = np.array(rows, dtype=float).reshape(n_samples, len(columns))
    sample = data[:, 0]
    fractional = np.flatnonzero(~(np.isfinite(sample) & (sample == np.round(sample))))
    if fractional.size:  # 1.5, 2.5, ... would shift every time by half a sample
        j = int(fractional[0])
        raise ValueError(
            f"{source}, line {row_lines[j]}, column 1 (Sample): sample number {float(sample[j])!r} "
            "is not an integer"
        )
    if n_samples > 1 and not np.all(np.diff(sample) == 1):
        j = int(np.flatnonzero(np.diff(sample) != 1)[0])
        raise ValueError(
            f"{source}, line {row_lines[j + 1]}: sample numbers are not consecutive: "
            f"{sample[j]:g} then {sample[j + 1]:g}"
        )
    _refuse_infinite(data, columns, row_lines, lines, source)  # after the sample numbers' own checks
    per_plate = data[:, take].reshape(n_samples, n_plates, len(names))
    return ForcePlates(
        rate=rate,
        time=(sample - 1.0) / rate,
        force=per_plate[:, :, 0:3],
        cop=per_plate[:, :, 3:6] * 1e-3,
        free_moment=per_plate[:, :, 6] * 1e-3,
        source=source,
    )
