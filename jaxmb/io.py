"""Readers and writers for motion-capture files, as plain NumPy arrays in SI units.

Every reader returns lengths in metres, forces in newtons and moments in newton metres,
whatever units the file uses, and raises ``ValueError`` naming the file and the line
(or the header field) when a file is malformed: a row with too few or too many fields,
a value that is not a number, or a row count that disagrees with the header. Nothing is
silently truncated. Text files are read as UTF-8, or as Latin-1 with a warning when
they are not UTF-8. Gaps in marker data (empty fields, or invalid C3D points) become
NaN and are reported with a warning and by :meth:`Markers.gaps`.

Formats:

- TRC (OpenSim / Motion Analysis marker trajectories): :func:`read_trc`,
  :func:`write_trc`.
- Motion Analysis Cortex ``.forces`` (force-plate force, centre of pressure and free
  moment per plate): :func:`read_forces`, :func:`write_forces`.
- OpenSim ``.mot`` / ``.sto`` tables: :func:`read_mot`, :func:`read_sto`,
  :func:`write_mot`.
- C3D, through the optional ``ezc3d`` package (``pip install "jaxmb[c3d]"``):
  :func:`read_c3d`.

The results are NumPy arrays, not JAX arrays: convert with ``jnp.asarray`` where a
jitted computation needs them. Writers are atomic: they write a temporary file in the
target directory and rename it over the target, so a failed write leaves no partial
file.
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

__all__ = [
    "Markers",
    "ForcePlates",
    "Table",
    "C3DTrial",
    "read_trc",
    "write_trc",
    "read_forces",
    "write_forces",
    "read_mot",
    "read_sto",
    "write_mot",
    "read_c3d",
]

# Metres per unit of length, for the units that marker and force-plate files declare.
_LENGTH_UNITS = {
    "mm": 1e-3,
    "millimeter": 1e-3,
    "millimeters": 1e-3,
    "millimetre": 1e-3,
    "millimetres": 1e-3,
    "cm": 1e-2,
    "centimeter": 1e-2,
    "centimeters": 1e-2,
    "centimetre": 1e-2,
    "centimetres": 1e-2,
    "dm": 1e-1,
    "m": 1.0,
    "meter": 1.0,
    "meters": 1.0,
    "metre": 1.0,
    "metres": 1.0,
    "in": 0.0254,
    "inch": 0.0254,
    "inches": 0.0254,
}
_FORCE_UNITS = {"n": 1.0, "kn": 1e3}
# Newton metres per unit of moment.
_MOMENT_UNITS = {"nmm": 1e-3, "n.mm": 1e-3, "n*mm": 1e-3, "nm": 1.0, "n.m": 1.0, "n*m": 1.0}

_MAX_LISTED = 10  # markers named in one gap warning before "and N more"


# --------------------------------------------------------------------------------------
# Containers
# --------------------------------------------------------------------------------------


def _label_error(kind: str, label: str, labels: tuple[str, ...]) -> KeyError:
    return KeyError(f"no {kind} {label!r}; the labels are: {', '.join(labels)}")


@dataclasses.dataclass(frozen=True, eq=False)
class Markers:
    """Marker trajectories.

    Attributes:
        rate: sampling rate (Hz).
        time: ``(T,)`` sample times (s).
        labels: marker names, ``markers`` of them, unique.
        xyz: ``(T, markers, 3)`` positions in the file's lab frame (m); NaN in gaps.
        descriptions: marker descriptions (C3D ``POINT:DESCRIPTIONS``) or None.
        source: the name of the file read (set by the readers; named in the errors of
            :func:`jaxmb.gait.sagittal`), or None.
    """

    rate: float
    time: np.ndarray
    labels: tuple
    xyz: np.ndarray
    descriptions: Optional[tuple] = None
    source: Optional[str] = None

    def __post_init__(self):
        xyz = np.asarray(self.xyz, dtype=float)
        time = np.asarray(self.time, dtype=float)
        labels = tuple(str(label) for label in self.labels)
        if xyz.ndim != 3 or xyz.shape[2] != 3:
            raise ValueError(f"Markers: xyz must have shape (T, markers, 3), got {xyz.shape}")
        if time.shape != (xyz.shape[0],):
            raise ValueError(
                f"Markers: time must have shape ({xyz.shape[0]},) to match xyz, got {time.shape}"
            )
        if len(labels) != xyz.shape[1]:
            raise ValueError(
                f"Markers: {len(labels)} labels for {xyz.shape[1]} markers in xyz"
            )
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"Markers: duplicate labels {', '.join(duplicates)}")
        if not (math.isfinite(float(self.rate)) and float(self.rate) > 0):
            raise ValueError(f"Markers: rate must be positive, got {self.rate}")
        if self.descriptions is not None and len(self.descriptions) != len(labels):
            raise ValueError(
                f"Markers: {len(self.descriptions)} descriptions for {len(labels)} markers"
            )
        object.__setattr__(self, "xyz", xyz)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "rate", float(self.rate))
        if self.descriptions is not None:
            object.__setattr__(self, "descriptions", tuple(str(d) for d in self.descriptions))

    def get(self, label: str) -> np.ndarray:
        """Trajectory of one marker.

        Args:
            label: marker name.

        Returns:
            ``(T, 3)`` positions (m), NaN in gaps.

        Raises:
            KeyError: no marker of that name (the message lists the labels).
        """
        try:
            return self.xyz[:, self.labels.index(label)]
        except ValueError:
            raise _label_error("marker", label, self.labels) from None

    def gaps(self) -> dict:
        """The gaps of each marker that has any.

        A frame is a gap for a marker when any of its coordinates is NaN.

        Returns:
            ``{label: ((start, stop), ...)}``: zero-based frame index ranges, ``stop``
            exclusive, in order, for every marker with at least one gap.
        """
        missing = np.isnan(self.xyz).any(axis=2)  # (T, markers)
        out = {}
        for j, label in enumerate(self.labels):
            if missing[:, j].any():
                out[label] = _runs(missing[:, j])
        return out

    def replace(self, **changes) -> "Markers":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class ForcePlates:
    """Force-plate data in the lab frame.

    Attributes:
        rate: sampling rate (Hz).
        time: ``(T,)`` sample times (s).
        force: ``(T, plates, 3)`` force that the plate exerts on the subject (N).
        cop: ``(T, plates, 3)`` centre of pressure in the lab frame (m). NaN where the
            file has none (e.g. an unloaded plate in C3D, see :func:`read_c3d`).
        free_moment: ``(T, plates)`` free moment about the vertical at the centre of
            pressure (N m).
        corners: ``(plates, 4, 3)`` plate corners in the lab frame (m), or None when the
            file does not give them.
        source: the name of the file read (set by the readers), or None.
    """

    rate: float
    time: np.ndarray
    force: np.ndarray
    cop: np.ndarray
    free_moment: np.ndarray
    corners: Optional[np.ndarray] = None
    source: Optional[str] = None

    def __post_init__(self):
        force = np.asarray(self.force, dtype=float)
        cop = np.asarray(self.cop, dtype=float)
        free_moment = np.asarray(self.free_moment, dtype=float)
        time = np.asarray(self.time, dtype=float)
        if force.ndim != 3 or force.shape[2] != 3:
            raise ValueError(f"ForcePlates: force must have shape (T, plates, 3), got {force.shape}")
        if cop.shape != force.shape:
            raise ValueError(f"ForcePlates: cop has shape {cop.shape}, force {force.shape}")
        if free_moment.shape != force.shape[:2]:
            raise ValueError(
                f"ForcePlates: free_moment must have shape {force.shape[:2]}, got {free_moment.shape}"
            )
        if time.shape != (force.shape[0],):
            raise ValueError(f"ForcePlates: time must have shape ({force.shape[0]},), got {time.shape}")
        if not (math.isfinite(float(self.rate)) and float(self.rate) > 0):
            raise ValueError(f"ForcePlates: rate must be positive, got {self.rate}")
        if self.corners is not None:
            corners = np.asarray(self.corners, dtype=float)
            if corners.shape != (force.shape[1], 4, 3):
                raise ValueError(
                    f"ForcePlates: corners must have shape ({force.shape[1]}, 4, 3), got {corners.shape}"
                )
            object.__setattr__(self, "corners", corners)
        object.__setattr__(self, "force", force)
        object.__setattr__(self, "cop", cop)
        object.__setattr__(self, "free_moment", free_moment)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "rate", float(self.rate))

    @property
    def n_plates(self) -> int:
        """Number of plates."""
        return self.force.shape[1]

    def replace(self, **changes) -> "ForcePlates":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class Table:
    """An OpenSim table (``.mot`` / ``.sto``): time and labelled columns.

    Attributes:
        time: ``(T,)`` times (s).
        labels: column names, not including ``time``.
        values: ``(T, columns)`` values, in the file's units (angles in degrees when
            ``in_degrees`` is True: OpenSim's convention, kept as the file has it).
        in_degrees: the header's ``inDegrees`` (True/False), or None when absent.
        name: the name line that some files start with, or None.
        header: the other ``key=value`` header lines, as strings.
    """

    time: np.ndarray
    labels: tuple
    values: np.ndarray
    in_degrees: Optional[bool] = None
    name: Optional[str] = None
    header: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        time = np.asarray(self.time, dtype=float)
        values = np.asarray(self.values, dtype=float)
        labels = tuple(str(label) for label in self.labels)
        if values.ndim != 2 or values.shape[1] != len(labels):
            raise ValueError(
                f"Table: values must have shape (T, {len(labels)}) for {len(labels)} labels, "
                f"got {values.shape}"
            )
        if time.shape != (values.shape[0],):
            raise ValueError(f"Table: time must have shape ({values.shape[0]},), got {time.shape}")
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "header", dict(self.header))

    def get(self, label: str) -> np.ndarray:
        """One column.

        Args:
            label: column name (the first column of that name).

        Returns:
            ``(T,)`` values.

        Raises:
            KeyError: no column of that name (the message lists the labels).
        """
        if label == "time":
            return self.time
        try:
            return self.values[:, self.labels.index(label)]
        except ValueError:
            raise _label_error("column", label, self.labels) from None

    def replace(self, **changes) -> "Table":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class C3DTrial:
    """The contents of a C3D file, in SI units.

    Attributes:
        markers: marker trajectories at ``point_rate`` (m).
        forces: force platforms at ``analog_rate`` in the lab frame, or None when the
            file has no force platform.
        point_rate: marker sampling rate (Hz).
        analog_rate: analog sampling rate (Hz).
        analog: ``(T_analog, channels)`` analog channels as ezc3d scales them, in the
            units of ``ANALOG:UNITS`` (e.g. V for EMG).
        analog_labels: analog channel names.
        analog_units: analog channel units (empty strings when the file has none).
    """

    markers: Markers
    forces: Optional[ForcePlates]
    point_rate: float
    analog_rate: float
    analog: np.ndarray
    analog_labels: tuple
    analog_units: tuple


# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------


def _runs(mask: np.ndarray) -> tuple:
    """``((start, stop), ...)`` of the True runs of a 1-D boolean mask."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return tuple((int(a), int(b)) for a, b in zip(edges[::2], edges[1::2]))


def _warn_gaps(markers: Markers, source: str, stacklevel: int = 3) -> None:
    gaps = markers.gaps()
    if not gaps:
        return
    items = [
        f"{label} {sum(b - a for a, b in runs)} frames" for label, runs in gaps.items()
    ]
    listed = ", ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        listed += f", and {len(items) - _MAX_LISTED} more"
    warnings.warn(
        f"{source}: gaps (NaN) in {len(gaps)} of {len(markers.labels)} markers "
        f"({markers.xyz.shape[0]} frames): {listed}; see Markers.gaps()",
        stacklevel=stacklevel,
    )


def _scale(units: str, table: dict, what: str, source: str) -> float:
    key = units.strip().lower().replace(" ", "")
    if key not in table:
        raise ValueError(
            f"{source}: unknown {what} units {units!r} (known: {', '.join(sorted(table))})"
        )
    return table[key]


def _number(text: str, source: str, line: int, column: int, label: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"{source}, line {line}, column {column} ({label}): "
            f"{text!r} is not a number"
        ) from None


def _parse_row(fields: list, source: str, line: int, labels: list, empty_is_nan: bool) -> np.ndarray:
    """Floats of one row of fields; an error names the line, column and label."""
    try:
        if empty_is_nan:
            return np.array([f if f.strip() else "nan" for f in fields], dtype=float)
        return np.array(fields, dtype=float)
    except ValueError:
        pass
    # Find the offending field for the message.
    for j, text in enumerate(fields):
        if empty_is_nan and not text.strip():
            continue
        if not text.strip():
            raise ValueError(f"{source}, line {line}, column {j + 1} ({labels[j]}): empty value")
        _number(text, source, line, j + 1, labels[j])
    raise AssertionError("unreachable")  # pragma: no cover


def _whitespace_rows(lines: list, start: int, columns: list, source: str) -> list:
    """Parsed rows of whitespace-separated numbers from line index ``start`` on; blank
    lines skipped, a row with the wrong number of fields an error naming its line."""
    rows = []
    for i in range(start, len(lines)):
        text = lines[i].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != len(columns):
            raise ValueError(f"{source}, line {i + 1}: expected {len(columns)} fields, got {len(fields)}")
        rows.append(_parse_row(fields, source, i + 1, columns, empty_is_nan=False))
    return rows


def _read_lines(path) -> tuple[list, str]:
    """The lines of a text file and its name. UTF-8 (with or without a byte-order
    mark); a file that is not UTF-8 (a Windows export in Latin-1 or cp1252, say) is
    read as Latin-1 with a warning naming the file and the first line that is not
    UTF-8. An empty file (nothing but white space) is an error naming the file."""
    path = Path(path)
    source = path.name
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        warnings.warn(
            f"{source}, line {line}: not UTF-8 text (byte 0x{raw[error.start]:02x}); read as Latin-1",
            stacklevel=3,
        )
        text = raw.decode("latin-1")
    if not text.strip():
        raise ValueError(f"{source}: the file is empty")
    # universal newlines, as open(..., newline=None) reads them
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), source


def _umask() -> int:
    mask = os.umask(0o022)  # reading the mask means setting it: put it straight back
    os.umask(mask)
    return mask


def _write_files(files: dict) -> None:
    """Write ``{path: bytes or str}`` as one set: every file goes to a temporary name
    in its folder first (flushed to disk, with the mode a new file gets under the
    process's umask: ``mkstemp`` alone gives 0600), then each is renamed into place.
    A failure while writing removes the temporary files and leaves every path as it
    was; the renames, done last, are each atomic."""
    staged = []
    try:
        mode = 0o666 & ~_umask()
        for path, data in files.items():
            path = Path(path)
            directory = path.parent if str(path.parent) else Path(".")
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
        for tmp, path in staged:
            if path.is_dir():
                raise IsADirectoryError(f"{path} is a folder")
        for k, (tmp, path) in enumerate(staged):
            os.replace(tmp, path)
            staged[k] = (None, path)
    except BaseException:
        for tmp, _ in staged:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
        raise


def _png(fig, dpi: int = 100) -> bytes:
    """A matplotlib figure rendered as PNG bytes (for :func:`_write_files`)."""
    from io import BytesIO  # this module is jaxmb.io: the standard library's, by name

    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _atomic_write(path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``."""
    _write_files({path: text})


def _format(x: float, fmt: str) -> str:
    return "" if math.isnan(x) else fmt % x


# --------------------------------------------------------------------------------------
# TRC
# --------------------------------------------------------------------------------------


def _split_tabs(line: str) -> list:
    """Fields of a tab-separated line (whitespace-separated when it has no tab)."""
    line = line.rstrip("\r")
    return line.split("\t") if "\t" in line else line.split()


def read_trc(path, *, warn_gaps: bool = True) -> Markers:
    """Read a TRC marker file (OpenSim, Motion Analysis).

    The file has a ``PathFileType`` line; a line of header names (``DataRate``,
    ``CameraRate``, ``NumFrames``, ``NumMarkers``, ``Units``, ...) and a line of their
    values; a ``Frame#  Time  M1 <tab> <tab> M2 ...`` label line; an ``X1 Y1 Z1 X2 ...``
    line; then one row per frame: the frame number, the time and three coordinates per
    marker. Empty fields are gaps.

    Args:
        path: the ``.trc`` file.
        warn_gaps: warn (``UserWarning``) naming the markers with gaps and their frame
            counts.

    Returns:
        :class:`Markers` with ``rate`` = ``DataRate`` (Hz), ``time`` from the Time column
        (s), ``xyz`` ``(NumFrames, NumMarkers, 3)`` in metres (converted from ``Units``:
        mm, cm, m, ...), NaN in gaps.

    Raises:
        ValueError: malformed file (a message naming the file and the line or header
            field): missing header fields, unknown units, a label count or row count
            that disagrees with ``NumMarkers`` / ``NumFrames``, a row with the wrong
            number of fields, a value that is not a number, a Time column that does
            not advance by 1/``DataRate`` (on average within 0.1 %, and at every row
            within half a frame), an empty file.
    """
    lines, source = _read_lines(path)
    if len(lines) < 5:
        raise ValueError(f"{source}: too short for a TRC file ({len(lines)} lines)")
    if not lines[0].startswith("PathFileType"):
        raise ValueError(f"{source}, line 1: expected 'PathFileType', got {lines[0][:40]!r}")
    keys = [k.strip() for k in _split_tabs(lines[1])]
    values = [v.strip() for v in _split_tabs(lines[2])]
    header = dict(zip(keys, values))
    for key in ("DataRate", "NumFrames", "NumMarkers", "Units"):
        if key not in header or not header[key]:
            raise ValueError(f"{source}, line 2-3: header field {key} missing")

    def header_number(key, kind):
        try:
            value = kind(float(header[key])) if kind is int else float(header[key])
        except ValueError:
            raise ValueError(
                f"{source}, line 3: header field {key} = {header[key]!r} is not a number"
            ) from None
        if kind is int and float(header[key]) != value:
            raise ValueError(f"{source}, line 3: header field {key} = {header[key]!r} is not an integer")
        return value

    rate = header_number("DataRate", float)
    n_frames = header_number("NumFrames", int)
    n_markers = header_number("NumMarkers", int)
    if not rate > 0:
        raise ValueError(f"{source}, line 3: header field DataRate = {header['DataRate']!r} must be positive")
    scale = _scale(header["Units"], _LENGTH_UNITS, "length", f"{source}, line 3, header field Units")

    label_fields = _split_tabs(lines[3])
    if len(label_fields) < 2 or label_fields[0].strip() != "Frame#" or label_fields[1].strip() != "Time":
        raise ValueError(f"{source}, line 4: expected 'Frame#<tab>Time<tab>labels...'")
    labels = [f.strip() for f in label_fields[2:] if f.strip()]
    if len(labels) != n_markers:
        raise ValueError(
            f"{source}, line 4: {len(labels)} marker labels, header field NumMarkers says {n_markers}"
        )
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise ValueError(f"{source}, line 4: duplicate marker labels {', '.join(duplicates)}")

    coordinate_fields = [f.strip() for f in _split_tabs(lines[4]) if f.strip()]
    if coordinate_fields and not coordinate_fields[0].upper().startswith("X"):
        raise ValueError(
            f"{source}, line 5: expected the coordinate labels 'X1 Y1 Z1 ...', "
            f"got {lines[4].strip()[:40]!r}"
        )

    n_fields = 2 + 3 * n_markers
    columns = ["Frame#", "Time"] + [f"{label} {c}" for label in labels for c in "XYZ"]
    rows, row_lines = [], []
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
                f"(Frame#, Time, {n_markers} markers x 3), got {len(fields)}"
            )
        if not fields[0].strip() or not fields[1].strip():
            column = 1 if not fields[0].strip() else 2
            raise ValueError(f"{source}, line {i + 1}, column {column} ({columns[column - 1]}): empty value")
        rows.append(_parse_row(fields, source, i + 1, columns, empty_is_nan=True))
        row_lines.append(i + 1)
    if len(rows) != n_frames:
        raise ValueError(
            f"{source}: {len(rows)} data rows, header field NumFrames says {n_frames}"
        )
    data = np.array(rows, dtype=float).reshape(n_frames, n_fields)
    _check_time_column(data[:, 1], rate, source, row_lines)
    markers = Markers(
        rate=rate,
        time=data[:, 1],
        labels=tuple(labels),
        xyz=data[:, 2:].reshape(n_frames, n_markers, 3) * scale,
        source=source,
    )
    if warn_gaps:
        _warn_gaps(markers, source)
    return markers


def _check_time_column(time: np.ndarray, rate: float, source: str, row_lines: list) -> None:
    """The Time column of a TRC file must advance by 1/DataRate: on average (within
    0.1 %: a column rounded to a few decimals still passes) and at every row (within
    half a frame: a dropped or repeated frame, or a time that goes back, is an error
    naming its line)."""
    if len(time) < 2:
        return
    step = np.diff(time) * rate  # frames per row, 1 when the column agrees with DataRate
    bad = np.flatnonzero(~(np.abs(step - 1.0) <= 0.5))
    mean = (time[-1] - time[0]) / (len(time) - 1)
    if not abs(mean * rate - 1.0) <= 1e-3:
        raise ValueError(
            f"{source}: the Time column advances {mean:.6g} s a frame ({1 / mean:.6g} Hz) "
            f"but header field DataRate = {rate:g} Hz (a frame every {1 / rate:.6g} s)"
        )
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"{source}, line {row_lines[j + 1]}: the Time column goes from {time[j]:.6g} to "
            f"{time[j + 1]:.6g} s, but DataRate = {rate:g} Hz gives a frame every {1 / rate:.6g} s"
        )


def write_trc(path, markers: Markers, *, units: str = "mm", decimals: int = 6) -> None:
    """Write markers to a TRC file (atomically).

    Args:
        path: the ``.trc`` file to write (replaced if it exists).
        markers: the trajectories (m); NaN is written as an empty field (a gap).
        units: length units of the file (``"mm"``, ``"cm"``, ``"m"``, ...).
        decimals: digits after the decimal point, in ``units``.
    """
    scale = _scale(units, _LENGTH_UNITS, "length", "write_trc")
    path = Path(path)
    T, M, _ = markers.xyz.shape
    out = [
        f"PathFileType\t4\t(X/Y/Z)\t{path.name}",
        "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames",
        f"{markers.rate:g}\t{markers.rate:g}\t{T}\t{M}\t{units}\t{markers.rate:g}\t1\t{T}",
        "Frame#\tTime\t" + "\t\t\t".join(markers.labels),
        "\t\t" + "\t".join(f"{c}{j + 1}" for j in range(M) for c in "XYZ"),
        "",
    ]
    fmt = f"%.{decimals}f"
    xyz = markers.xyz / scale
    for t in range(T):
        values = "\t".join(_format(x, fmt) for x in xyz[t].ravel())
        out.append(f"{t + 1}\t{float(markers.time[t])!r}\t{values}")  # exact time
    _atomic_write(path, "\n".join(out) + "\n")


# --------------------------------------------------------------------------------------
# Cortex .forces
# --------------------------------------------------------------------------------------


def read_forces(path) -> ForcePlates:
    """Read a Motion Analysis Cortex ``.forces`` file.

    The file has a ``[Force Data]`` line, ``NumberOfForcePlates=``, ``SampleRate=`` and
    ``NumberOfSamples=`` lines, a header ``#Sample FX1 FY1 FZ1 X1 Y1 Z1 MZ1 FX2 ...``
    (force N, centre of pressure mm in the lab frame, free moment N mm) and one row per
    sample. Samples are numbered from 1 (as TRC frames are), and sample ``n`` is at time
    ``(n - 1) / SampleRate``; the sample numbers must be consecutive.

    Args:
        path: the ``.forces`` file.

    Returns:
        :class:`ForcePlates`: ``force`` ``(T, plates, 3)`` N, ``cop`` ``(T, plates, 3)``
        m, ``free_moment`` ``(T, plates)`` N m, ``rate`` Hz, ``time`` s.

    Raises:
        ValueError: malformed file (naming the file and the line or field): a missing
            header field or column, a row with the wrong number of fields, a value that
            is not a number, sample numbers that skip, a row count that disagrees
            with ``NumberOfSamples``, no samples at all, or an empty file.
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
            header[key] = value
            header_line[key] = i + 1
        i += 1
    if i == len(lines):
        raise ValueError(f"{source}: no '#Sample FX1 FY1 ...' header line")

    def field(key, kind):
        if key not in header:
            raise ValueError(f"{source}: header field {key} missing")
        try:
            value = float(header[key])
        except ValueError:
            raise ValueError(
                f"{source}, line {header_line[key]}: header field {key} = {header[key]!r} is not a number"
            ) from None
        if kind is int:
            if value != int(value) or value < 0:
                raise ValueError(
                    f"{source}, line {header_line[key]}: header field {key} = {header[key]!r} "
                    "is not a non-negative integer"
                )
            return int(value)
        if not value > 0:
            raise ValueError(f"{source}, line {header_line[key]}: header field {key} = {header[key]!r} must be positive")
        return value

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

    rows = _whitespace_rows(lines, header_lineno, columns, source)
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
    if n_samples > 1 and not np.all(np.diff(sample) == 1):
        j = int(np.flatnonzero(np.diff(sample) != 1)[0])
        raise ValueError(
            f"{source}: sample numbers are not consecutive: {sample[j]:g} then {sample[j + 1]:g} "
            f"(data row {j + 2})"
        )
    per_plate = data[:, take].reshape(n_samples, n_plates, len(names))
    return ForcePlates(
        rate=rate,
        time=(sample - 1.0) / rate,
        force=per_plate[:, :, 0:3],
        cop=per_plate[:, :, 3:6] * 1e-3,
        free_moment=per_plate[:, :, 6] * 1e-3,
        source=source,
    )


def write_forces(path, plates: ForcePlates, *, decimals: int = 6) -> None:
    """Write force plates to a Cortex ``.forces`` file (atomically).

    Sample numbers are written from ``round(time[0] * rate) + 1``, so that
    :func:`read_forces` gives the times back. The centre of pressure is written in mm and
    the free moment in N mm; NaN is written as ``nan``.

    Args:
        path: the ``.forces`` file to write (replaced if it exists).
        plates: the force-plate data (SI units).
        decimals: digits after the decimal point.
    """
    T, P, _ = plates.force.shape
    first = int(round(plates.time[0] * plates.rate)) + 1 if T else 1
    columns = ["#Sample"] + [f"{n}{k}" for k in range(1, P + 1) for n in ("FX", "FY", "FZ", "X", "Y", "Z", "MZ")]
    out = [
        "[Force Data]",
        f"NumberOfForcePlates={P}",
        f"SampleRate={plates.rate:.6f}",
        f"NumberOfSamples={T}",
        "\t".join(columns),
    ]
    block = np.concatenate(
        [plates.force, plates.cop * 1e3, plates.free_moment[:, :, None] * 1e3], axis=2
    ).reshape(T, P * 7)
    fmt = f"%.{decimals}f"
    for t in range(T):
        out.append(f"{first + t}\t" + "\t".join("nan" if math.isnan(x) else fmt % x for x in block[t]))
    _atomic_write(path, "\n".join(out) + "\n")


# --------------------------------------------------------------------------------------
# OpenSim .mot / .sto
# --------------------------------------------------------------------------------------


def _read_opensim_table(path) -> Table:
    lines, source = _read_lines(path)
    end = None
    for i, line in enumerate(lines):
        if line.strip().lower() == "endheader":
            end = i
            break
    if end is None:
        raise ValueError(f"{source}: no 'endheader' line")
    header = {}
    header_line = {}
    name = None
    for i in range(end):
        text = lines[i].strip()
        if not text:
            continue
        if "=" in text:
            key, value = (s.strip() for s in text.split("=", 1))
            header[key] = value
            header_line[key] = i + 1
        elif name is None and not header:
            name = text
        else:
            raise ValueError(f"{source}, line {i + 1}: expected 'key=value' in the header, got {text[:40]!r}")

    i = end + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines):
        raise ValueError(f"{source}: no column labels after 'endheader'")
    labels_lineno = i + 1
    columns = [c.strip() for c in _split_tabs(lines[i])]
    columns = [c for c in columns if c]
    if not columns or columns[0].lower() != "time":
        raise ValueError(
            f"{source}, line {labels_lineno}: the first column must be 'time', got "
            f"{(columns[0] if columns else '')!r}"
        )

    def integer(key):
        try:
            value = float(header[key])
            if value != int(value) or value < 0:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"{source}, line {header_line[key]}: header field {key} = {header[key]!r} "
                "is not a non-negative integer"
            ) from None
        return int(value)

    lowered = {k.lower(): k for k in header}
    if "ncolumns" in lowered:
        n_columns = integer(lowered["ncolumns"])
        if n_columns != len(columns):
            raise ValueError(
                f"{source}, line {labels_lineno}: {len(columns)} column labels, "
                f"header field {lowered['ncolumns']} says {n_columns}"
            )
    in_degrees = None
    if "indegrees" in lowered:
        text = header[lowered["indegrees"]].strip().lower()
        if text not in ("yes", "no", "true", "false"):
            raise ValueError(
                f"{source}, line {header_line[lowered['indegrees']]}: header field inDegrees = "
                f"{header[lowered['indegrees']]!r}, expected yes or no"
            )
        in_degrees = text in ("yes", "true")

    rows = _whitespace_rows(lines, labels_lineno, columns, source)
    if "nrows" in lowered:
        n_rows = integer(lowered["nrows"])
        if n_rows != len(rows):
            raise ValueError(
                f"{source}: {len(rows)} data rows, header field {lowered['nrows']} says {n_rows}"
            )
    data = np.array(rows, dtype=float).reshape(len(rows), len(columns))
    other = {
        k: v for k, v in header.items() if k.lower() not in ("nrows", "ncolumns", "indegrees")
    }
    return Table(
        time=data[:, 0],
        labels=tuple(columns[1:]),
        values=data[:, 1:],
        in_degrees=in_degrees,
        name=name,
        header=other,
    )


def read_mot(path) -> Table:
    """Read an OpenSim motion file (``.mot``).

    The header runs up to an ``endheader`` line: an optional name line and ``key=value``
    lines (``nRows``, ``nColumns`` counting the time column, ``inDegrees``, ...), checked
    against the data where present. Then a line of column labels, the first ``time``,
    and one row per time.

    Args:
        path: the ``.mot`` file.

    Returns:
        :class:`Table` with ``time`` ``(T,)`` s, ``labels``, ``values`` ``(T, columns)``
        in the file's units (degrees when ``in_degrees``), ``in_degrees``.

    Raises:
        ValueError: malformed file (naming the file and the line or field): no
            ``endheader``, a first column other than ``time``, a row with the wrong
            number of fields, a value that is not a number, or counts that disagree with
            ``nRows`` / ``nColumns``.
    """
    return _read_opensim_table(path)


def read_sto(path) -> Table:
    """Read an OpenSim storage file (``.sto``); the same format as :func:`read_mot`.

    Args:
        path: the ``.sto`` file.

    Returns:
        :class:`Table`, as :func:`read_mot` returns it.

    Raises:
        ValueError: malformed file, as for :func:`read_mot`.
    """
    return _read_opensim_table(path)


def write_mot(path, table: Table, *, decimals: int = 8) -> None:
    """Write a table as an OpenSim ``.mot`` / ``.sto`` file (atomically).

    The header holds the table's name (or the file name), ``version=1``, ``nRows``,
    ``nColumns`` (with time), ``inDegrees`` when the table's is not None, and the other
    header entries of ``table.header``.

    Args:
        path: the file to write (replaced if it exists).
        table: the table.
        decimals: digits after the decimal point.
    """
    path = Path(path)
    T, C = table.values.shape
    out = [table.name or path.name]
    header = {"version": "1", **table.header}
    header["nRows"] = str(T)
    header["nColumns"] = str(C + 1)
    if table.in_degrees is not None:
        header["inDegrees"] = "yes" if table.in_degrees else "no"
    out += [f"{k}={v}" for k, v in header.items()]
    out.append("endheader")
    out.append("\t".join(("time",) + table.labels))
    fmt = f"%.{decimals}f"
    for t in range(T):
        row = np.concatenate([[table.time[t]], table.values[t]])
        out.append("\t".join("nan" if math.isnan(x) else fmt % x for x in row))
    _atomic_write(path, "\n".join(out) + "\n")


# --------------------------------------------------------------------------------------
# C3D
# --------------------------------------------------------------------------------------


def _parameter(parameters: dict, group: str, name: str, default=None):
    try:
        return parameters[group][name]["value"]
    except KeyError:
        return default


def read_c3d(path, *, min_force: float = 20.0, warn_gaps: bool = True) -> C3DTrial:
    """Read a C3D file: markers, force platforms and analog channels, in SI units.

    Uses ``ezc3d`` (``pip install "jaxmb[c3d]"``), and its own force-platform
    extraction (``extract_forceplat_data=True``: the ``FORCE_PLATFORM`` parameters'
    calibration matrices, corners, origins and channel maps), which gives the force,
    the centre of pressure and the free moment in the lab frame at the analog rate.

    Marker positions are converted with ``POINT:UNITS``; invalid points (negative
    residual) are NaN (gaps, reported as :func:`read_trc` reports them). Markers whose
    label repeats an earlier one (e.g. a medial knee marker also labelled ``RKNE``) are
    renamed ``RKNE_2``, ``RKNE_3``, ... with a warning; ``Markers.descriptions`` keeps
    ``POINT:DESCRIPTIONS`` to tell them apart. Forces, positions and moments of the
    platforms are converted with the units ezc3d reports (``unit_force``,
    ``unit_position``, ``unit_moment``).

    The centre of pressure and the free moment are undefined on an unloaded plate
    (ezc3d divides by a vertical force near zero and returns values metres off the
    plate): where the vertical force is below ``min_force`` they are NaN.

    Args:
        path: the ``.c3d`` file.
        min_force: vertical force (N) below which a plate counts as unloaded; None
            keeps ezc3d's values everywhere.
        warn_gaps: warn naming the markers with gaps.

    Returns:
        :class:`C3DTrial`: ``markers`` (m, at ``point_rate``), ``forces``
        (:class:`ForcePlates` at ``analog_rate``, lab frame, or None without
        platforms), ``point_rate``, ``analog_rate`` (Hz), ``analog`` channels.

    Raises:
        ImportError: ezc3d is not installed.
        ValueError: a file that ezc3d cannot read, unknown units, or data that
            disagrees with the parameters (naming the file).
        FileNotFoundError: no such file.
    """
    try:
        import ezc3d
    except ImportError as error:  # pragma: no cover - exercised without the extra
        raise ImportError(
            'read_c3d needs the ezc3d package: pip install "jaxmb[c3d]" '
            "(or pip install ezc3d)"
        ) from error
    path = Path(path)
    source = path.name
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    try:
        c3d = ezc3d.c3d(str(path), extract_forceplat_data=True)
    except (OSError, RuntimeError, ValueError, IndexError) as error:
        if isinstance(error, OSError) and error.errno is not None:  # the system's: permissions, ...
            raise
        # ezc3d's own "File must be a valid c3d file: iostream error", ...
        raise ValueError(f"{source}: ezc3d cannot read it: {error}") from None
    parameters = c3d["parameters"]
    header = c3d["header"]
    data = c3d["data"]

    # Markers.
    point_rate = float(_parameter(parameters, "POINT", "RATE", [header["points"]["frame_rate"]])[0])
    units = _parameter(parameters, "POINT", "UNITS", ["mm"])
    units = units[0] if len(units) else "mm"
    scale = _scale(units, _LENGTH_UNITS, "length", f"{source}, parameter POINT:UNITS")
    points = np.asarray(data["points"], dtype=float)  # (4, markers, T)
    n_markers, n_frames = points.shape[1], points.shape[2]
    labels = list(_parameter(parameters, "POINT", "LABELS", []))
    if len(labels) < n_markers:
        raise ValueError(f"{source}, parameter POINT:LABELS: {len(labels)} labels for {n_markers} points")
    labels = [label.strip() for label in labels[:n_markers]]
    descriptions = list(_parameter(parameters, "POINT", "DESCRIPTIONS", []))
    descriptions = (
        tuple(d.strip() for d in descriptions[:n_markers]) if len(descriptions) >= n_markers else None
    )
    seen = {}
    renamed = []
    for j, label in enumerate(labels):
        if label in seen:
            seen[label] += 1
            new = f"{label}_{seen[label]}"
            while new in labels:
                seen[label] += 1
                new = f"{label}_{seen[label]}"
            what = f" ({descriptions[j]})" if descriptions else ""
            renamed.append(f"{label}{what} -> {new}")
            labels[j] = new
        else:
            seen[label] = 1
    if renamed:
        warnings.warn(
            f"{source}: duplicate marker labels renamed: {', '.join(renamed)}", stacklevel=2
        )
    first = int(header["points"]["first_frame"])
    markers = Markers(
        rate=point_rate,
        time=(first + np.arange(n_frames)) / point_rate,
        labels=tuple(labels),
        xyz=np.transpose(points[:3], (2, 1, 0)) * scale,
        descriptions=descriptions,
        source=source,
    )
    if warn_gaps:
        _warn_gaps(markers, source)

    # Analog channels.
    analog_rate = float(_parameter(parameters, "ANALOG", "RATE", [header["analogs"]["frame_rate"]])[0])
    analogs = np.asarray(data["analogs"], dtype=float)  # (1, channels, T_analog)
    analog = analogs[0].T if analogs.size else np.zeros((0, 0))
    analog_labels = tuple(s.strip() for s in _parameter(parameters, "ANALOG", "LABELS", []))
    analog_units = tuple(s.strip() for s in _parameter(parameters, "ANALOG", "UNITS", []))
    if len(analog_units) != len(analog_labels):
        analog_units = ("",) * len(analog_labels)

    # Force platforms, through ezc3d's extraction.
    platforms = data.get("platform", [])
    forces = None
    if len(platforms):
        n_analog = analog.shape[0]
        force, cop, free_moment, corners = [], [], [], []
        for k, plate in enumerate(platforms):
            where = f"{source}, force platform {k + 1}"
            f_scale = _scale(plate["unit_force"], _FORCE_UNITS, "force", where)
            p_scale = _scale(plate["unit_position"], _LENGTH_UNITS, "position", where)
            m_scale = _scale(plate["unit_moment"], _MOMENT_UNITS, "moment", where)
            for key in ("force", "center_of_pressure", "Tz"):
                shape = np.shape(plate[key])
                if shape != (3, n_analog):
                    raise ValueError(f"{where}: {key} has shape {shape}, expected (3, {n_analog})")
            force.append(np.asarray(plate["force"], dtype=float).T * f_scale)
            cop.append(np.asarray(plate["center_of_pressure"], dtype=float).T * p_scale)
            free_moment.append(np.asarray(plate["Tz"], dtype=float)[2] * m_scale)
            corners.append(np.asarray(plate["corners"], dtype=float).T * p_scale)
        force = np.stack(force, axis=1)
        cop = np.stack(cop, axis=1)
        free_moment = np.stack(free_moment, axis=1)
        if min_force is not None:
            unloaded = ~(force[:, :, 2] >= min_force)
            cop = np.where(unloaded[:, :, None], np.nan, cop)
            free_moment = np.where(unloaded, np.nan, free_moment)
        first_analog = int(header["analogs"]["first_frame"])
        forces = ForcePlates(
            rate=analog_rate,
            time=(first_analog + np.arange(n_analog)) / analog_rate,
            force=force,
            cop=cop,
            free_moment=free_moment,
            corners=np.stack(corners),
            source=source,
        )

    return C3DTrial(
        markers=markers,
        forces=forces,
        point_rate=point_rate,
        analog_rate=analog_rate,
        analog=analog,
        analog_labels=analog_labels,
        analog_units=analog_units,
    )
