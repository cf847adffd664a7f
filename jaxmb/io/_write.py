"""The file writers: TRC, ``.forces`` and MOT. Atomic (:mod:`jaxmb._files`), exact
in float64, and refusing before writing anything what their readers would reject."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np

from .._files import atomic_write
from ._markers import ForcePlates, Markers, Table
from ._mot import _COUNTED
from ._text import _LENGTH_UNITS, _check_increasing, _check_time_column, _scale


def _exact(x: float, fmt: Optional[str] = None) -> str:
    """``x`` as text that reads back as the same float64: ``fmt % x`` when that is
    exact (``"100"`` for a rate of 100 Hz, as files usually have it), otherwise the
    shortest text that is (``repr``: ``"333.3333333333333"``)."""
    x = float(x)
    if fmt is not None:
        text = fmt % x
        if float(text) == x:
            return text
    return repr(x)


def _value_format(decimals: Optional[int]):
    """Formatter of data values: exact (:func:`_exact`) when ``decimals`` is None,
    else fixed-point with ``decimals`` digits after the point."""
    if decimals is None:
        return lambda x: repr(float(x))
    if int(decimals) != decimals or decimals < 0:
        raise ValueError(f"decimals must be None or a non-negative integer, got {decimals!r}")
    fmt = f"%.{int(decimals)}f"
    return lambda x: fmt % x


def write_trc(path, markers: Markers, *, units: str = "mm", decimals: Optional[int] = None,
              overwrite: bool = False) -> None:
    """Write markers to a TRC file (atomically).

    The rate, the times and (by default) the coordinates are written with the digits
    that read back as the same float64 numbers (a rate of 100 Hz as ``100``, 1000/3 Hz
    as ``333.3333333333333``). Markers that :func:`read_trc` would reject are refused
    before anything is written.

    Args:
        path: the ``.trc`` file to write (replaced if it exists).
        markers: the trajectories (m); NaN is written as an empty field (a gap).
        units: length units of the file (``"mm"``, ``"cm"``, ``"m"``, ...).
        decimals: digits after the decimal point, in ``units``; None (default) writes
            each coordinate exactly (the shortest text that reads back as the same
            float64 in ``units``; converted back to metres, a coordinate may change in
            its last bit unless ``units="m"``).
        overwrite: replace ``path`` even where it is a read-only file (no write
            permission bit: root may replace any file, so the bits are checked);
            by default such a file is refused, as the shell's ``>`` refuses it.

    Raises:
        OSError: ``path`` is not a regular file (a folder: ``IsADirectoryError``; a
            named pipe, a device or a socket, which would otherwise be replaced by a
            regular file), or is a read-only file and ``overwrite`` is False
            (``PermissionError``); naming the path, before anything is written. A
            symbolic link is written through, to the file it points to (the link
            stays: a link into a data store or a shared folder is not replaced by
            a copy).
        ValueError: unknown units; a marker label that is empty, has a tab or a line
            break, or white space at either end (the file could not keep it); a time
            that is not finite, or times that do not advance by 1/``rate`` (as
            :func:`read_trc` checks them: within 0.1 % on average or within the
            rounding of the times as written, half a frame at every frame); an infinite coordinate, or a marker with one or two of its
            three coordinates NaN (naming the frame and the marker).
    """
    scale = _scale(units, _LENGTH_UNITS, "length", "write_trc")
    path = Path(path)
    where = f"write_trc({path.name})"
    T, M, _ = markers.xyz.shape
    for j, label in enumerate(markers.labels):
        if not label.strip() or label != label.strip() or any(c in label for c in "\t\n\r"):
            raise ValueError(
                f"{where}: marker {j + 1} label {label!r} cannot be written to a TRC file "
                "(empty, a tab or a line break in it, or white space at either end)"
            )
    time = np.asarray(markers.time, dtype=float)
    _check_time_column(
        time, markers.rate, where, list(range(1, T + 1)),
        column="Markers.time", rate_name="Markers.rate", rate_short="rate", row="frame",
        written=[repr(float(t)) for t in time],  # as written below: read_trc judges that text
    )
    infinite = np.argwhere(np.isinf(markers.xyz))
    if infinite.size:
        t, j, c = (int(k) for k in infinite[0])
        raise ValueError(
            f"{where}: frame {t + 1}, marker {markers.labels[j]} {'XYZ'[c]} = "
            f"{float(markers.xyz[t, j, c])!r}: a coordinate must be finite (NaN for a gap)"
        )
    nans = np.isnan(markers.xyz).sum(axis=-1)
    partial = np.argwhere((nans > 0) & (nans < 3))
    if partial.size:
        t, j = (int(k) for k in partial[0])
        raise ValueError(
            f"{where}: frame {t + 1}, marker {markers.labels[j]} has NaN in {int(nans[t, j])} of its 3 "
            f"coordinates: a gap is NaN in all three, as read_trc reads it ({len(partial)} such marker "
            "frame(s) in all)"
        )
    rate = _exact(markers.rate, "%g")
    out = [
        f"PathFileType\t4\t(X/Y/Z)\t{path.name}",
        "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames",
        f"{rate}\t{rate}\t{T}\t{M}\t{units}\t{rate}\t1\t{T}",
        "Frame#\tTime\t" + "\t\t\t".join(markers.labels),
        "\t\t" + "\t".join(f"{c}{j + 1}" for j in range(M) for c in "XYZ"),
        "",
    ]
    value = _value_format(decimals)
    xyz = markers.xyz / scale
    for t in range(T):
        values = "\t".join("" if math.isnan(x) else value(x) for x in xyz[t].ravel())
        out.append(f"{t + 1}\t{float(time[t])!r}\t{values}")  # exact time
    atomic_write(path, "\n".join(out) + "\n", overwrite)


def write_forces(path, plates: ForcePlates, *, decimals: Optional[int] = None, overwrite: bool = False) -> None:
    """Write force plates to a Cortex ``.forces`` file (atomically).

    The format has no time column: sample ``n`` is at ``(n - 1) / SampleRate``. The
    sample numbers are written from ``round(time[0] * rate) + 1``, so the times must
    be ``time[0] + k / rate`` with ``time[0]`` a whole number of samples (to
    round-off): :func:`read_forces` then gives them back, and other times are refused
    rather than silently moved. The rate is written exactly (``1000`` as
    ``1000.000000``, 1000/3 as ``333.3333333333333``), the centre of pressure in mm
    and the free moment in N mm; NaN is written as ``nan``.

    Args:
        path: the ``.forces`` file to write (replaced if it exists).
        plates: the force-plate data (SI units).
        decimals: digits after the decimal point; None (default) writes each value
            exactly (the shortest text that reads back as the same float64 in the
            file's units: the centre of pressure and the free moment, in mm and
            N mm, may come back changed in their last bit).
        overwrite: replace ``path`` even where it is a read-only file (no write
            permission bit: root may replace any file, so the bits are checked);
            by default such a file is refused, as the shell's ``>`` refuses it.

    Raises:
        ValueError: no samples (:func:`read_forces` refuses such a file); times that
            are not finite, not on the sample grid of ``rate`` from a whole sample, or
            not uniform (naming the first sample that is off).
        OSError: ``path`` is not a regular file (a folder: ``IsADirectoryError``; a
            named pipe, a device or a socket, which would otherwise be replaced by a
            regular file), or is a read-only file and ``overwrite`` is False
            (``PermissionError``); naming the path, before anything is written. A
            symbolic link is written through, to the file it points to (the link
            stays: a link into a data store or a shared folder is not replaced by
            a copy).
    """
    path = Path(path)
    where = f"write_forces({path.name})"
    T, P, _ = plates.force.shape
    if T == 0:
        raise ValueError(f"{where}: no samples (a .forces file must hold at least one)")
    rate = plates.rate
    time = np.asarray(plates.time, dtype=float)
    samples = time * rate  # sample - 1, a whole number at every sample
    if not np.isfinite(samples).all():
        j = int(np.flatnonzero(~np.isfinite(samples))[0])
        raise ValueError(f"{where}: time[{j}] = {float(time[j])!r} is not a finite time")
    first = round(float(samples[0]))
    grid = first + np.arange(T)
    off = np.flatnonzero(~(np.abs(samples - grid) <= 1e-9 * np.maximum(1.0, np.abs(grid))))
    if off.size:
        j = int(off[0])
        if j == 0:
            raise ValueError(
                f"{where}: time[0] = {float(time[0])!r} s is {float(samples[0])!r} samples at "
                f"{rate:g} Hz, not a whole number: a .forces file stores sample numbers, "
                "the time of sample n being (n - 1) / SampleRate"
            )
        raise ValueError(
            f"{where}: time[{j}] = {float(time[j])!r} s, but a sample every 1/{rate:g} s "
            f"from time[0] = {float(time[0])!r} s gives {float(grid[j] / rate)!r} s: a "
            ".forces file stores sample numbers, uniform times only"
        )
    columns = ["#Sample"] + [f"{n}{k}" for k in range(1, P + 1) for n in ("FX", "FY", "FZ", "X", "Y", "Z", "MZ")]
    out = [
        "[Force Data]",
        f"NumberOfForcePlates={P}",
        f"SampleRate={_exact(rate, '%.6f')}",
        f"NumberOfSamples={T}",
        "\t".join(columns),
    ]
    block = np.concatenate(
        [plates.force, plates.cop * 1e3, plates.free_moment[:, :, None] * 1e3], axis=2
    ).reshape(T, P * 7)
    value = _value_format(decimals)
    for t in range(T):
        out.append(f"{first + 1 + t}\t" + "\t".join("nan" if math.isnan(x) else value(x) for x in block[t]))
    atomic_write(path, "\n".join(out) + "\n", overwrite)


def write_mot(path, table: Table, *, decimals: Optional[int] = None, overwrite: bool = False) -> None:
    """Write a table as an OpenSim ``.mot`` / ``.sto`` file (atomically).

    The header holds the table's name (or the file name), ``version=1``, ``nRows``,
    ``nColumns`` (with time), ``inDegrees`` when the table's is not None, the other
    header entries of ``table.header`` and the description's lines. Tables that
    :func:`read_mot` would read differently, or not at all, are refused before anything
    is written.

    Args:
        path: the file to write (replaced if it exists).
        table: the table.
        decimals: digits after the decimal point; None (default) writes each time and
            value exactly (the shortest text that reads back as the same float64:
            ``1e-09``, ``0.008333333333333333``).
        overwrite: replace ``path`` even where it is a read-only file (no write
            permission bit: root may replace any file, so the bits are checked);
            by default such a file is refused, as the shell's ``>`` refuses it.

    Raises:
        ValueError: a name or a description line with ``=`` (it would be read as a
            ``key=value`` field), a line break, white space at an end, or that is
            ``endheader``; an empty description line; a header key that is empty or
            has ``=`` or a line break, a value with a line break, either with white
            space at an end; a column label that is empty, has a tab or a line
            break, or white space at an end, or is ``time``; times that are not
            finite or do not increase.
        OSError: ``path`` is not a regular file (a folder: ``IsADirectoryError``; a
            named pipe, a device or a socket, which would otherwise be replaced by a
            regular file), or is a read-only file and ``overwrite`` is False
            (``PermissionError``); naming the path, before anything is written. A
            symbolic link is written through, to the file it points to (the link
            stays: a link into a data store or a shared folder is not replaced by
            a copy).
    """
    path = Path(path)
    where = f"write_mot({path.name})"
    T, C = table.values.shape

    def header_line(text, what):
        if "=" in text or "\n" in text or "\r" in text or text.strip().lower() == "endheader":
            raise ValueError(
                f"{where}: {what} {text!r} cannot be written to the header: a line with '=' "
                "is read as a key=value field, and 'endheader' ends the header"
            )
        if text != text.strip():
            raise ValueError(f"{where}: {what} {text!r} has white space at an end, which read_mot drops")
        return text

    if table.name is not None and table.name.strip():
        name = header_line(table.name, "Table.name")
    else:  # the file name, as a name line that reads back as one
        name = path.name.replace("=", "_")
        name = "table" if name.strip().lower() == "endheader" else name
    out = [name]
    header = {"version": "1"}
    for key, value in table.header.items():
        key, value = str(key), str(value)
        if not key.strip() or any(c in key for c in "=\n\r") or any(c in value for c in "\n\r"):
            raise ValueError(f"{where}: header entry {key!r}: {value!r} cannot be written as one key=value line")
        if key != key.strip() or value != value.strip():
            raise ValueError(f"{where}: header entry {key!r}: {value!r} has white space at an end, which "
                             "read_mot drops")  # fmt: skip
        if key.lower() not in _COUNTED:
            header[key] = value
    header["nRows"] = str(T)
    header["nColumns"] = str(C + 1)
    if table.in_degrees is not None:
        header["inDegrees"] = "yes" if table.in_degrees else "no"
    out += [f"{k}={v}" for k, v in header.items()]
    if table.description:
        lines = table.description.split("\n")
        if not all(line.strip() for line in lines):
            raise ValueError(f"{where}: Table.description {table.description!r} has an empty line, which read_mot "
                             "drops")  # fmt: skip
        out += [""] + [header_line(line, "a description line") for line in lines] + [""]
    out.append("endheader")
    for label in table.labels:
        if not label.strip() or label != label.strip() or any(c in label for c in "\t\n\r"):
            raise ValueError(f"{where}: column label {label!r} cannot be written (empty, a tab or line break in "
                             "it, or white space at an end)")  # fmt: skip
        if label == "time":  # Table.get("time") is the time column: the data column would be out of reach
            raise ValueError(f"{where}: a data column cannot be labelled 'time' (the first column is the time; "
                             "rename it)")  # fmt: skip
    out.append("\t".join(("time",) + table.labels))
    _check_increasing(table.time, where, list(range(1, T + 1)), column="time", row="row")
    value = _value_format(decimals)
    for t in range(T):
        row = np.concatenate([[table.time[t]], table.values[t]])
        out.append("\t".join("nan" if math.isnan(x) else value(x) for x in row))
    atomic_write(path, "\n".join(out) + "\n", overwrite)
