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
file (and its error names the target); they replace regular files only, and a
read-only one only with ``overwrite=True``. They write every number so that it reads back
as the same float64 in the file's units (``decimals=`` gives fixed-point instead; a
value in SI units written in mm, as TRC files and a ``.forces`` file's centre of
pressure are, is divided by 1e-3 and multiplied back when read, which may change its
last bit), and refuse, before writing anything, data that
their reader would reject or read differently.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import re
import stat
import struct
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from ._math import true_runs

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
            raise ValueError(f"Markers{f' of {self.source}' if self.source else ''}: rate must be positive, got {self.rate}")
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
                out[label] = true_runs(missing[:, j])
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
            raise ValueError(
                f"ForcePlates{f' of {self.source}' if self.source else ''}: rate must be positive, got {self.rate}"
            )
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
        description: the header's other free-text lines (OpenSim's "Units are S.I.
            units ..."), joined by newlines, or None.
    """

    time: np.ndarray
    labels: tuple
    values: np.ndarray
    in_degrees: Optional[bool] = None
    name: Optional[str] = None
    header: dict = dataclasses.field(default_factory=dict)
    description: Optional[str] = None

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


# NaN as C runtimes print it: "-nan(ind)" (MSVC's printf), "1.#QNAN", "-1.#IND" (older
# MSVC); C's strtod, which OpenSim reads with, takes the first
_C_NAN = re.compile(r"[+-]?(nan(\([0-9a-z_]*\))?|1\.#(qnan|snan|ind)0*)", re.IGNORECASE)


def _parse_row(fields: list, source: str, line: int, labels: list, empty_is_nan: bool) -> np.ndarray:
    """Floats of one row of fields; an error names the line, column and label."""
    try:
        if empty_is_nan:
            return np.array([f if f.strip() else "nan" for f in fields], dtype=float)
        return np.array(fields, dtype=float)
    except ValueError:
        pass
    spelled = [("nan" if _C_NAN.fullmatch(f.strip()) else f) for f in fields]
    if spelled != fields:
        return _parse_row(spelled, source, line, labels, empty_is_nan)
    # Find the offending field for the message.
    for j, text in enumerate(fields):
        if empty_is_nan and not text.strip():
            continue
        if not text.strip():
            raise ValueError(f"{source}, line {line}, column {j + 1} ({labels[j]}): empty value")
        _number(text, source, line, j + 1, labels[j])
    raise AssertionError("unreachable")  # pragma: no cover


def _whitespace_rows(lines: list, start: int, columns: list, source: str) -> tuple[list, list]:
    """Parsed rows of whitespace-separated numbers from line index ``start`` on, and
    the (1-based) file line of each; blank lines skipped, a row with the wrong number
    of fields an error naming its line, as is a file cut inside its last number
    (:func:`_refuse_cut_number`)."""
    rows, row_lines, last = [], [], []
    for i in range(start, len(lines)):
        text = lines[i].strip()
        if not text:
            continue
        fields = text.split()
        if len(fields) != len(columns):
            raise ValueError(f"{source}, line {i + 1}: expected {len(columns)} fields, got {len(fields)}"
                             f"{_cut_hint(lines, i)}")  # fmt: skip
        rows.append(_parse_last_line_too(fields, source, lines, i, columns, empty_is_nan=False))
        row_lines.append(i + 1)
        last.append(fields[-1])
    if rows:
        _refuse_cut_number(last, lines, row_lines, source, len(columns), columns[-1])
    return rows, row_lines


def _cut_hint(lines: list, i: int) -> str:
    """A note for an error on line index ``i`` when it is the file's last line and
    has no line break at its end, as a file cut short has it; else ``""``."""
    if i == len(lines) - 1 and lines[i].strip():
        return " (the file's last line, without a line break at its end: the file may be truncated)"
    return ""


def _parse_last_line_too(fields: list, source: str, lines: list, i: int, labels: list, empty_is_nan: bool):
    """:func:`_parse_row` of line index ``i``; its error on a last line without a
    line break says that the file may be truncated (``1.5e`` cut from ``1.5e+02``)."""
    try:
        return _parse_row(fields, source, i + 1, labels, empty_is_nan)
    except ValueError as error:
        raise ValueError(f"{error}{_cut_hint(lines, i)}") from None


def _number_form(text: str) -> Optional[tuple]:
    """(digits after the point, digits of the exponent or -1) of a decimal number as
    written; None for anything else (an empty field, ``nan``)."""
    match = _DECIMAL.fullmatch(text.strip())
    if not match:
        return None
    exponent = match.group(3)
    return len(match.group(1) or match.group(2) or ""), len(exponent.lstrip("+-")) if exponent else -1


def _refuse_cut_number(texts: list, lines: list, row_lines: list, source: str, column: int, label: str) -> None:
    """A file cut inside its last number (``-250.61433`` read as ``-250.6``) is an
    error naming the file and the line: ``texts`` are the last column of every row
    as written, and the last one, on a last line without a line break at its end,
    has fewer digits (after the point, or in the exponent) than the column's other
    rows all have, while the table shows a writer with a fixed number of digits
    (a number with that many digits after the point that ends in 0, which writers
    that drop trailing zeros, C's ``%g`` and Python's ``repr``, never write: their
    shorter numbers are legitimate). ``column`` is 1-based."""
    if row_lines[-1] != len(lines):  # the last row ends with a line break
        return
    last = _number_form(texts[-1])
    forms = {_number_form(text) for text in texts[:-1]} - {None}
    if last is None or len(forms) != 1:
        return
    (form,) = forms
    if last == form or last[0] > form[0] or last[1] > form[1] or form[0] == 0:
        return
    table = "\n".join(lines[row_lines[0] - 1 : row_lines[-1] - 1])
    if not re.search(r"(?<![\d.])[+-]?\d*\.\d{%d}0(?!\d)" % (form[0] - 1), table):
        return
    example = next(text for text in texts[:-1] if _number_form(text) == form)
    raise ValueError(
        f"{source}, line {row_lines[-1]}, column {column} ({label}): {texts[-1].strip()!r} has fewer digits than "
        f"the column's other {len(texts) - 1} values (written like {example.strip()!r}), on the file's last line, "
        "without a line break at its end: the file may be truncated inside its last number"
    )


def _refuse_infinite(data, columns, row_lines, lines, source) -> None:
    """An infinite value of rows read by :func:`_whitespace_rows` ("inf", or a number
    beyond float64's range: 3.6e400) is an error naming its line and column: no
    instrument measures it, and read silently it surfaced far from the file (jaxmb
    gait: "cannot find the vertical"). NaN stays a gap."""
    infinite = np.argwhere(np.isinf(data))
    if infinite.size:
        r, c = (int(v) for v in infinite[0])
        raise ValueError(
            f"{source}, line {row_lines[r]}, column {c + 1} ({columns[c]}): an infinite value "
            f"({lines[row_lines[r] - 1].split()[c]!r}); a gap is NaN"
        )


def _header_number(text: str, where: str, kind):
    """A number of a file's header: ``kind`` int, a non-negative integer (a count), or
    float, a positive finite number (a rate). ``where`` names the file, the line and
    the field (``"walk.trc, line 3: header field NumFrames"``): every error names it,
    ``inf`` and ``nan`` included."""
    try:
        value = float(text)
    except ValueError:
        value = None
    if kind is int:
        if value is None or not (math.isfinite(value) and value >= 0 and value == int(value)):
            raise ValueError(f"{where} = {text!r} is not a non-negative integer")
        return int(value)
    if value is None:
        raise ValueError(f"{where} = {text!r} is not a number")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where} = {text!r} must be a positive finite number")
    return value


def _check_increasing(
    time: np.ndarray, source: str, row_lines: list, column: str = "time", row: str = "line"
) -> None:
    """Times must be finite and strictly increasing: a NaN, infinite, repeated or
    decreasing time is an error naming its line (``row_lines[j]`` for ``time[j]``;
    ``row`` names what the numbers count)."""
    time = np.asarray(time, dtype=float)
    bad = np.flatnonzero(~np.isfinite(time))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"{source}, {row} {row_lines[j]}: {column} {float(time[j])!r} is not a finite number")
    back = np.flatnonzero(~(np.diff(time) > 0))
    if back.size:
        j = int(back[0])
        how = "repeats" if time[j + 1] == time[j] else "goes back to"
        raise ValueError(
            f"{source}, {row} {row_lines[j + 1]}: {column} {how} {float(time[j + 1])!r} s "
            f"after {float(time[j])!r} s ({row} {row_lines[j]}); times must increase"
        )


def _refuse_repeated_key(key: str, same: str, value: str, header: dict, header_line: dict, source: str,
                         line: int) -> None:
    """A ``key=value`` header field given twice (``same``: the key already read that
    ``key`` repeats, if any) is an error naming both lines and both values: read into
    a dict, the last one silently won (a ``.forces`` file's second ``SampleRate``
    made its times 3x too long)."""
    if same in header:
        raise ValueError(
            f"{source}, lines {header_line[same]} and {line}: header field {key} is given twice "
            f"({same}={header[same]!r}, then {key}={value!r}): which one holds is unclear"
        )


def _read_lines(path) -> tuple[list, str]:
    """The lines of a text file and its name. UTF-8 (with or without a byte-order
    mark), or UTF-16 with its byte-order mark (Windows' "Unicode" text: read as
    Latin-1 it was a first line of 'ÿþP\x00a\x00...'); a file that is not UTF-8 (a
    Windows export in Latin-1 or cp1252, say) is read as Latin-1 with a warning
    naming the file and the first line that is not UTF-8. An empty file (nothing but
    white space) is an error naming the file."""
    path = Path(path)
    source = path.name
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-16" if raw[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig")
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


#: what a path that is not a regular file is, by ``stat.S_IFMT`` of its mode
_KINDS = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}  # fmt: skip


def _target(path: Path, overwrite: bool = False) -> tuple[Path, int]:
    """The file that writing ``path`` replaces, and the permission bits its new file
    gets. A symbolic link is written through, to the file it points to (replacing
    the link left the file it points to, e.g. in git-annex or a shared folder, with
    the old data); an existing file keeps its mode (a 0600 file became 0644), a new
    one gets the process's umask (``mkstemp`` alone gives 0600).

    Raises (before anything is written): ``IsADirectoryError`` for a folder,
    ``OSError`` for anything else that is not a regular file (a named pipe, a
    device, a socket: ``write_trc("/dev/null", ...)`` as root replaced the device),
    ``PermissionError`` for a read-only file (no write bit, or not writable by this
    user: root may replace any file, so the mode bits are checked) unless
    ``overwrite``; each naming the path (and the file a link points to)."""
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    named = str(path) if real == path else f"{path} (a link to {real})"
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real, 0o666 & ~_umask()
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{named} is a folder")
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise OSError(f"{named} is {kind}, not a regular file: not replaced (writers replace regular files only)")
    mode = stat.S_IMODE(st.st_mode)
    if not overwrite and (not mode & 0o222 or not os.access(real, os.W_OK)):
        what = "read-only" if not mode & 0o222 else "not writable by this user"
        raise PermissionError(f"{named} is {what} (mode {mode:04o}): not replaced (make it writable, or write "
                              "with overwrite=True, to replace it)")  # fmt: skip
    return real, mode


#: the tags in the names of the temporary files of a command's output set: its new
#: files before they are renamed into place, and the files they replace, set aside
#: until the set is complete (``.moments.csv.jaxmb-new.k3x9q2zb.tmp``)
_NEW, _OLD = "jaxmb-new", "jaxmb-old"
_LEFTOVER = re.compile(rf"^\..+\.({_NEW}|{_OLD})\.[a-z0-9_]{{8}}\.tmp$")
_LOCK = ".jaxmb.lock"  # held (fcntl.flock) by the command writing into the folder
_JOURNAL = ".jaxmb.journal"  # what a command is replacing, until the set is complete
_LOCK_WAIT = 60.0  # s that a command waits for another writing into the same folder


def _stage(files: dict, overwrite: bool = False, tag: str = "") -> list:
    """Write ``{path: bytes or str}`` to temporary files beside their targets
    (:func:`_target`: refused before anything is written; each flushed to disk with
    its mode). Returns [{"target", "new", "digest", "backup": None}], one per
    file; a failure removes the temporary files written and raises, naming the
    target (not its temporary name)."""
    ops = []
    target = None  # the path being written, named by an error
    try:
        resolved = []
        for path in files:
            target = Path(path)
            resolved.append(_target(target, overwrite))
        for (target, data), (real, mode) in zip(((Path(p), d) for p, d in files.items()), resolved):
            directory = real.parent if str(real.parent) else Path(".")
            prefix = f".{real.name}.{tag}." if tag else f".{real.name}."
            fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
            ops.append({"target": os.path.abspath(real), "new": os.path.abspath(tmp), "digest": _digest(data),
                        "backup": None})  # fmt: skip
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
    except BaseException as error:
        _discard([op["new"] for op in ops])
        named = _named(error, target, [op["new"] for op in ops])
        if named is error:
            raise
        raise named from error
    return ops


def _named(error: BaseException, target, temporaries) -> BaseException:
    """``error``, or one of its type naming ``target`` where it names a temporary
    file or no file."""
    message = str(error)
    if isinstance(error, OSError) and target is not None and (
        str(target) not in message or any(tmp in message for tmp in temporaries)
    ):
        return _target_error(error, Path(target))
    return error


def _discard(paths) -> None:
    """Remove the files ``paths`` that exist (temporary files: quietly)."""
    for path in paths:
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass


def _aside(path: str) -> str:
    """A free name beside ``path`` for its file set aside until a set is complete."""
    import secrets

    folder, name = os.path.split(path)
    while True:
        aside = os.path.join(folder, f".{name}.{_OLD}.{secrets.token_hex(4)}.tmp")
        if not os.path.lexists(aside):
            return aside


def _swap(ops: list, journal: Optional[Path] = None, prog: Optional[str] = None) -> None:
    """Rename the staged files of ``ops`` into place as one set: each target that
    exists is first set aside under a hidden name (``op["backup"]``), then the new
    file renamed over it (``op["new"]`` None: a file of an earlier run, only set
    aside); once all are in place the set-aside files are removed. A failure, or an
    interrupt, half-way puts every file back as it was, then raises. SIGINT and
    SIGTERM are deferred until the set is complete or put back.

    ``journal``: a file first written listing every rename, removed when the set is
    complete; a process killed half-way leaves it, and the next command writing into
    the folder puts the earlier files back (:func:`_recover`). ``prog``: a file of an
    earlier run that cannot be set aside is left, with a warning on stderr naming
    ``jaxmb prog``. Without a journal a single file is simply renamed over its target."""
    target = None
    with _deferred_signals():
        try:
            for op in ops:
                op["fresh"] = not os.path.lexists(op["target"])  # a file this set adds
                if (journal is not None or len(ops) > 1 or op["new"] is None) and not op["fresh"]:
                    op["backup"] = _aside(op["target"])
            if journal is not None:
                _write_journal(journal, ops)
            for op in ops:
                target = op["target"]
                if op["backup"] is not None:
                    try:
                        os.replace(target, op["backup"])
                    except OSError as e:
                        if op["new"] is not None:
                            raise
                        print(f"jaxmb {prog}: warning: cannot remove {target} of an earlier run: {e.strerror or e}",
                              file=sys.stderr)  # fmt: skip
                        op["backup"] = None
                        continue
                if op["new"] is not None:
                    os.replace(op["new"], target)
            if journal is not None:
                os.unlink(journal)  # the set is complete
        except BaseException as error:
            try:
                _undo(ops)
                _discard([journal])
            except BaseException:
                pass  # the journal stays: the next command puts the files back
            named = _named(error, target, [op["new"] for op in ops])
            if named is error:
                raise
            raise named from error
        _discard([op["backup"] for op in ops])


def _undo(ops: list) -> None:
    """Put back the files of a set that :func:`_swap` did not complete: each target
    that was set aside and has since been removed or replaced by this set's new file
    gets its file back; a target that did not exist and holds this set's new file is
    removed; a target holding anything else (written since) is left as it is; the
    staged new files are removed. (``op["fresh"]``: the target did not exist.)"""
    for op in reversed(ops):
        target, backup, digest = op["target"], op["backup"], op["digest"]
        _discard([op["new"]])
        if backup is not None and os.path.lexists(backup):
            if not os.path.lexists(target) or (digest is not None and _file_digest(target) == digest):
                os.replace(backup, target)
            else:
                os.unlink(backup)
        elif op.get("fresh") and digest is not None and _file_digest(target) == digest:
            os.unlink(target)


def _file_digest(path: str) -> Optional[str]:
    """SHA-256 of the regular file ``path``; None where there is none."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return _digest(f.read())
    except OSError:
        return None


def _write_journal(journal: Path, ops: list) -> None:
    """Write the journal of a set's renames (JSON, flushed to disk) atomically."""
    import json

    text = json.dumps({"command": "jaxmb", "renames": ops}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f"{journal.name}.{_NEW}.", suffix=".tmp", dir=journal.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, journal)
    except BaseException:
        _discard([tmp])
        raise


def _recover(folder: Path, prog: str, names=()) -> None:
    """Repair what an interrupted command left in ``folder`` (held locked): put back
    the files of a set whose renames a journal lists (the process was killed
    half-way; a note on stderr), then remove the temporary files of jaxmb's naming
    (:data:`_LEFTOVER`, and ``.<name>.XXXXXXXX.tmp`` of the output ``names``, as
    versions before the journal named them)."""
    import json

    journal = folder / _JOURNAL
    if os.path.lexists(journal):
        try:
            ops = json.loads(journal.read_text(encoding="utf-8"))["renames"]
            _undo([{k: op.get(k) for k in ("target", "new", "digest", "backup", "fresh")} for op in ops])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            print(f"jaxmb {prog}: warning: cannot repair the interrupted write that {journal} lists: {e}",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"jaxmb {prog}: note: an earlier run writing into {folder} was interrupted: the files it had "
                  "replaced are put back", file=sys.stderr)  # fmt: skip
        _discard([journal])
    old = re.compile(r"^\.(" + "|".join(re.escape(n) for n in names) + r")\.[a-z0-9_]{8}\.tmp$") if names else None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if (_LEFTOVER.match(entry.name) or (old and old.match(entry.name))) and entry.is_file(follow_symlinks=False):
            _discard([entry.path])


class _deferred_signals:
    """Context in which SIGINT and SIGTERM are held back (their Python handlers
    replaced by ones that note them) and raised again, once, on leaving: a set's
    renames are not interrupted half-way. Only in the main thread (the only one
    whose handlers Python runs); elsewhere a no-op."""

    def __enter__(self):
        import signal
        import threading

        self.caught, self.saved = [], {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(sig)
                if handler is not None and handler != signal.SIG_IGN:  # None: set outside Python
                    self.saved[sig] = signal.signal(sig, lambda s, frame: self.caught.append(s))
        return self

    def __exit__(self, *exc):
        import signal

        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if self.caught:
            signal.raise_signal(self.caught[0])  # its own handler now: an exception, or the end
        return False


class _locked:
    """Context holding the lock (``fcntl.flock`` of ``.jaxmb.lock``) of each existing
    folder of ``folders`` (in sorted order: two commands cannot each wait for the
    other). A folder that another jaxmb is writing into: a note on stderr naming
    its process, then a wait of up to :data:`_LOCK_WAIT` seconds, after which
    ``BlockingIOError`` naming the lock file. The lock file is removed on leaving."""

    def __init__(self, folders, prog: str):
        self.folders, self.prog, self.held = sorted(set(folders)), prog, []

    def __enter__(self):
        try:
            for folder in self.folders:
                if folder.is_dir():
                    self.take(folder)
        except BaseException:
            self.__exit__()
            raise
        return self

    def take(self, folder: Path) -> None:
        import time

        try:
            import fcntl
        except ImportError:  # (not POSIX: no lock)
            return

        path = str(folder / _LOCK)
        deadline = None
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:  # another user's, left by a killed run: flock needs no write access
                fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                who = f"another jaxmb (process {holder})" if holder.isdigit() else "another jaxmb"
                if deadline is None:
                    deadline = time.monotonic() + _LOCK_WAIT
                    print(f"jaxmb {self.prog}: waiting for {who}, which is writing into {folder}", file=sys.stderr)
                elif time.monotonic() > deadline:
                    message = f"{who} has been writing into this folder for over {_LOCK_WAIT:g} s (it holds this lock)"
                    raise BlockingIOError(errno.EAGAIN, message, path) from None
                time.sleep(0.05)
                continue
            except BaseException:
                os.close(fd)
                raise
            try:  # the lock of the file still at that path (a holder removes it when done)
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                self.held.append((path, fd))
                try:  # the holder's process, for the note of a command that waits
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                except OSError:
                    pass
                return
            os.close(fd)

    def __exit__(self, *exc):
        while self.held:
            path, fd = self.held.pop()
            try:
                os.unlink(path)  # while held: a waiter then finds the path gone and takes a new one
            except OSError:
                pass
            os.close(fd)
        return False


def _write_files(files: dict, *, overwrite: bool = False) -> None:
    """Write ``{path: bytes or str}`` as one set: every file goes to a temporary name
    in its folder first (flushed to disk, with the mode a new file gets under the
    process's umask, ``mkstemp`` alone gives 0600, or the mode of the file it
    replaces), then each is renamed into place (:func:`_swap`); a path that is a
    symbolic link is written through it, to the file it points to. A path that is
    not a regular file, or a read-only file unless ``overwrite``, is refused
    before anything is written (:func:`_target`). A failure or an interrupt leaves
    every path as it was and no temporary file; the error names the path."""
    _swap(_stage(files, overwrite))


def _target_error(error: OSError, target: Path) -> OSError:
    """``error`` (same type) naming ``target`` rather than a temporary file."""
    if error.errno is not None and error.strerror:
        return type(error)(error.errno, error.strerror, str(target))
    return type(error)(f"{target}: {error}")


def _digest(data) -> str:
    import hashlib

    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def _manifest_path(folder: Path, prog: str) -> Path:
    """The file in which ``jaxmb prog`` lists what it wrote into ``folder``."""
    return folder / f".jaxmb-{prog}.json"


def _read_manifest(folder: Path, prog: str, key: str = "files"):
    """{file name: SHA-256} of the files an earlier run of ``jaxmb prog`` wrote into
    ``folder`` (``key="folders"``: the list of the folders it wrote inside it); {}
    (or []) where there is no readable manifest."""
    import json

    try:
        got = json.loads(_manifest_path(folder, prog).read_text(encoding="utf-8")).get(key, {} if key == "files" else [])
    except (OSError, ValueError, AttributeError):
        return {} if key == "files" else []
    if key != "files":  # plain names of folders inside this one
        return [k for k in got if isinstance(k, str) and k and os.sep not in k and k not in (".", "..")] if (
            isinstance(got, list)) else []  # fmt: skip
    if not isinstance(got, dict):
        return {}
    return {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, str) and os.sep not in k}


def _remove_earlier_run(folder: Path, prog: str) -> list:
    """The files of ``folder`` that an earlier run of ``jaxmb prog`` wrote and this
    run does not write again (a trial folder it no longer writes): those its
    manifest lists that are unchanged since, then the manifest itself (never a file
    the user made or edited). Returns [(path, counted)], counted False for the
    manifest."""
    listed = _read_manifest(folder, prog)
    if not listed:
        return []
    return [(p, True) for p in _remove_unchanged(folder, listed, ())] + [(_manifest_path(folder, prog), False)]


def _write_outputs(files: dict, prog: str) -> list:
    """Write a command's output files ``{path: bytes or str}`` as one set, with a
    manifest in each folder (``.jaxmb-<prog>.json``: each file's name and SHA-256),
    and remove the files of an earlier run of the command that this run did not
    write (a figure or a table of another run must not sit beside this run's
    results): only those that the folder's earlier manifest lists and whose content
    is still what that run wrote, never a file that the user made or edited. A file
    that cannot be removed gets a warning on stderr. Returns the paths removed.

    The set is all or nothing, whatever interrupts it: each folder is locked
    (:class:`_locked`: a second command writing into it waits, or after a minute
    refuses), every file is staged under a temporary name, a journal of the renames
    is written, and the renames and removals (:func:`_swap`, with SIGINT and SIGTERM
    held back) leave the earlier set or the complete new one, never a mix. A process
    killed half-way leaves the journal, from which the next run puts the earlier
    set back (:func:`_recover`) before writing, and removes the temporary files."""
    import json

    folders = {}
    for path, data in files.items():
        path = Path(path)
        folders.setdefault(path.parent, {})[path.name] = data
    # the folders this run writes inside each folder it writes (a batch's trial
    # folders): listed in its manifest, so that a later run removes those it does not
    # write again (a trial skipped or left out then)
    subs = {folder: sorted(f.name for f in folders if f.parent == folder and f != folder) for folder in folders}
    manifests = {
        _manifest_path(folder, prog): json.dumps(
            {"command": f"jaxmb {prog}", "files": {n: _digest(d) for n, d in sorted(named.items())}}
            | ({"folders": subs[folder]} if subs[folder] else {}), indent=1
        ) + "\n"
        for folder, named in folders.items()
    }
    dropped = []  # the trial folders of an earlier run that this one does not write
    try:
        with _locked(folders, prog) as lock:
            earlier = {folder: _read_manifest(folder, prog) for folder in folders}
            for folder in folders:
                names = set(folders[folder]) | set(earlier[folder]) | {_manifest_path(folder, prog).name}
                _recover(folder, prog, names)
            earlier = {folder: _read_manifest(folder, prog) for folder in folders}  # as put back
            dropped = [folder / name for folder in folders for name in sorted(
                set(_read_manifest(folder, prog, "folders")) - set(subs[folder]))]  # fmt: skip
            for folder in dropped:
                if folder.is_dir():
                    lock.take(folder)
                    _recover(folder, prog, set(_read_manifest(folder, prog)) | {_manifest_path(folder, prog).name})
            gone = [item for folder in dropped for item in _remove_earlier_run(folder, prog)]
            gone += [(p, True) for folder, listed in earlier.items()
                     for p in _remove_unchanged(folder, listed, folders[folder])]  # fmt: skip
            ops = _stage({**files, **manifests}, tag=_NEW)
            ops += [{"target": os.path.abspath(p), "new": None, "digest": None, "backup": None} for p, _ in gone]
            _swap(ops, min(folders) / _JOURNAL, prog)
    finally:  # also after a signal held back until the set was complete
        for folder in dropped:
            try:
                folder.rmdir()  # only if empty (its files removed, and no file of the user's)
            except OSError:
                pass
    return [str(p) for (p, counted), op in zip(gone, ops[len(ops) - len(gone):]) if counted and op["backup"]]


def _remove_unchanged(folder: Path, listed: dict, keep) -> list:
    """The files of ``folder`` that an earlier manifest lists ({name: SHA-256}) and
    ``keep`` does not name, where their content is still what that run wrote (an
    edited one is the user's now): the files to remove."""
    return [folder / name for name, digest in sorted(listed.items())
            if name not in keep and _file_digest(str(folder / name)) == digest]  # fmt: skip


def _png(fig, dpi: int = 100) -> bytes:
    """A matplotlib figure rendered as PNG bytes (for :func:`_write_files`)."""
    from io import BytesIO  # this module is jaxmb.io: the standard library's, by name

    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


def _atomic_write(path, text: str, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``
    (:func:`_write_files`: a path that is not a regular file, or a read-only file
    unless ``overwrite``, refused)."""
    _write_files({path: text}, overwrite=overwrite)


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


# --------------------------------------------------------------------------------------
# TRC
# --------------------------------------------------------------------------------------


def _split_tabs(line: str) -> list:
    """Fields of a tab-separated line (whitespace-separated when it has no tab)."""
    line = line.rstrip("\r")
    return line.split("\t") if "\t" in line else line.split()


def read_trc(path, *, warn_gaps: bool = True, zeros_as_gaps: bool = True) -> Markers:
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


def _check_time_column(
    time: np.ndarray, rate: float, source: str, row_lines: list,
    column: str = "the Time column", rate_name: str = "header field DataRate", row: str = "line",
    rate_short: str = "DataRate", written: Optional[list] = None,
) -> None:
    """The Time column of a TRC file must be finite and advance by 1/DataRate: on
    average (within 0.1 %, or within the rounding of the times as ``written``, their
    text: :func:`_times_fit_rate`) and at every row (within half a frame: a dropped
    or repeated frame, or a time that goes back, is an error naming its line).
    :func:`write_trc` checks the times it writes the same way (``column``,
    ``rate_name``, ``rate_short`` and ``row`` name them in its messages)."""
    bad = np.flatnonzero(~np.isfinite(time))
    if bad.size:
        j = int(bad[0])
        raise ValueError(f"{source}, {row} {row_lines[j]}: {column} has {float(time[j])!r}, not a finite time")
    if len(time) < 2:
        return
    step = np.diff(time) * rate  # frames per row, 1 when the column agrees with DataRate
    bad = np.flatnonzero(~(np.abs(step - 1.0) <= 0.5))
    mean = (time[-1] - time[0]) / (len(time) - 1)
    # a few bad rows (a dropped frame also shifts the average) are named first; a
    # column at another rate throughout gets the average's message
    if (
        not 0 < bad.size <= len(step) // 2
        and not abs(mean * rate - 1.0) <= 1e-3
        and not (written is not None and _times_fit_rate(time, rate, written))
    ):
        hz = f"{1 / mean:.6g} Hz" if mean else "no time at all"
        raise ValueError(
            f"{source}: {column} advances {mean:.6g} s a frame ({hz}) "
            f"but {rate_name} = {rate:g} Hz (a frame every {1 / rate:.6g} s), by more than "
            "0.1 % and more than the rounding of the times as written"
        )
    if bad.size:
        j = int(bad[0])
        raise ValueError(
            f"{source}, {row} {row_lines[j + 1]}: {column} goes from {time[j]:.6g} to "
            f"{time[j + 1]:.6g} s, but {rate_short} = {rate:g} Hz gives a frame every {1 / rate:.6g} s"
        )


# a decimal number as written: its digits after the point, its exponent
_DECIMAL = re.compile(r"[+-]?(?:\d+(?:\.(\d*))?|\.(\d+))(?:[eE]([+-]?\d+))?")


def _half_unit(text: str) -> float:
    """Half a unit in the last digit of a number as written, in its own units: how
    far its rounding may have moved it (``"0.007"``: 0.0005, ``"1.5e-3"``: 5e-5,
    ``"12"``: 0.5); 0 for text that is not a plain decimal number."""
    match = _DECIMAL.fullmatch(text.strip())
    if not match:
        return 0.0
    decimals = len(match.group(1) or match.group(2) or "")
    exponent = int(match.group(3) or 0) - decimals
    return 0.5 * 10.0 ** min(exponent, 300)


def _times_fit_rate(time: np.ndarray, rate: float, written: list) -> bool:
    """Whether the times (s) are those of a frame every 1/``rate`` s, each rounded as
    it is ``written`` (its text): whether some start ``t0`` puts every ``time[j]``
    within half a unit of its last digit of ``t0 + j / rate``. Cortex writes times
    to 1 ms: at 150 Hz a 20-frame excerpt from 0 s ends at 0.127 s, not 0.12667 s,
    a mean step 0.26 % off (the 1 ms of rounding over a span under 1 s can be more
    than 0.1 %); times that advance at 149 Hz drift from 150 Hz's by 0.045 ms a
    frame, more than 1 ms of rounding explains within 46 frames. The rate is taken
    as written (its rounding to four or more digits is within the 0.1 % that the
    mean step is allowed anyway)."""
    offset = time - np.arange(len(time)) / rate  # t0 as each time has it
    rounding = np.array([_half_unit(text) for text in written])
    roundoff = 1e-12 * (np.abs(time).max() + len(time) / rate)  # of the sums above (s)
    return bool((offset - rounding).max() <= (offset + rounding).min() + roundoff)


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
    _atomic_write(path, "\n".join(out) + "\n", overwrite)


# --------------------------------------------------------------------------------------
# Cortex .forces
# --------------------------------------------------------------------------------------


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
    _atomic_write(path, "\n".join(out) + "\n", overwrite)


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
    # As OpenSim reads a header: a line with '=' is a key=value field, the first line
    # without one (before any field) the name, the others free text.
    header = {}
    header_line = {}
    name = None
    description = []
    for i in range(end):
        text = lines[i].strip()
        if not text:
            continue
        if "=" in text:
            key, value = (s.strip() for s in text.split("=", 1))
            # the counts and inDegrees are read in any case: nRows and NROWS are one field
            counted = key.lower() in _COUNTED
            same = next((k for k in header if counted and k.lower() == key.lower()), key)
            _refuse_repeated_key(key, same, value, header, header_line, source, i + 1)
            header[key] = value
            header_line[key] = i + 1
        elif name is None and not header and not description:
            name = text
        else:
            description.append(text)

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
        return _header_number(header[key], f"{source}, line {header_line[key]}: header field {key}", int)

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

    rows, row_lines = _whitespace_rows(lines, labels_lineno, columns, source)
    if "nrows" in lowered:
        n_rows = integer(lowered["nrows"])
        if n_rows != len(rows):
            raise ValueError(
                f"{source}: {len(rows)} data rows, header field {lowered['nrows']} says {n_rows}"
            )
    data = np.array(rows, dtype=float).reshape(len(rows), len(columns))
    _check_increasing(data[:, 0], source, row_lines)  # its time first: "time inf is not a finite number"
    _refuse_infinite(data, columns, row_lines, lines, source)
    other = {
        k: v for k, v in header.items() if k.lower() not in _COUNTED
    }
    return Table(
        time=data[:, 0],
        labels=tuple(columns[1:]),
        values=data[:, 1:],
        in_degrees=in_degrees,
        name=name,
        header=other,
        description="\n".join(description) or None,
    )


_COUNTED = ("nrows", "ncolumns", "indegrees")  # header fields that write_mot sets itself


def read_mot(path) -> Table:
    """Read an OpenSim motion file (``.mot``).

    The header runs up to an ``endheader`` line: an optional name line, ``key=value``
    lines (``nRows``, ``nColumns`` counting the time column, ``inDegrees``,
    ``version``, ``DataType``, ``OpenSimVersion``, ...; the counts are checked against
    the data where present) and free-text lines (OpenSim's "Units are S.I. units
    ...", SIMM's ``datacolumns 19``), kept as :attr:`Table.description`; as OpenSim
    reads it, a line with ``=`` is a field. Then a line of column labels, the first
    ``time``, and one row per time; the times must increase.

    Args:
        path: the ``.mot`` file.

    Returns:
        :class:`Table` with ``time`` ``(T,)`` s, ``labels``, ``values`` ``(T, columns)``
        in the file's units (degrees when ``in_degrees``), ``in_degrees``.

    Raises:
        ValueError: malformed file (naming the file and the line or field): no
            ``endheader``, a header field given twice (naming both lines; ``nRows``,
            ``nColumns`` and ``inDegrees`` in any case), a first column other than
            ``time``, a row with the wrong number of fields, a value that is not a
            number, a count that is not a non-negative integer or disagrees with
            the data (``nRows`` /
            ``nColumns``), an infinite value (``inf``, or a number beyond float64's
            range; NaN is read as NaN), or a time that is not finite, repeats or
            goes back.
            A last line without a line break at its end whose field count is
            wrong, or whose last number has fewer digits than the same column's
            other rows, all written with a fixed number of digits (a file cut
            inside its last number: ``-250.61433`` read as ``-250.6``), is an
            error saying that the file may be truncated.
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
    _atomic_write(path, "\n".join(out) + "\n", overwrite)


# --------------------------------------------------------------------------------------
# C3D
# --------------------------------------------------------------------------------------


def _parameter(parameters: dict, group: str, name: str, default=None):
    try:
        return parameters[group][name]["value"]
    except KeyError:
        return default


def _c3d_declared_frames(path: Path) -> tuple[Optional[int], str]:
    """The number of frames a C3D file declares, read from its raw bytes (ezc3d
    reports the frames it could read, its header and ``POINT:FRAMES`` adjusted to
    them), and where it comes from.

    ``POINT:FRAMES`` of the parameter section is the count that ezc3d reads and that
    the C3D standard makes authoritative (an integer, or a float beyond 65535 frames);
    without it (or 0: files without points), words 4 and 5 of the 512-byte header,
    the first and the last frame (1-based 16-bit words). See :func:`_c3d_raw`.
    Returns ``(None, "")`` when the bytes do not say.
    """
    raw = _c3d_raw(path)
    if raw is None:
        return None, ""
    frames = _c3d_parameter_frames(raw["parameters"])
    first, last = raw["first"], raw["last"]
    if frames:
        return frames, "parameter POINT:FRAMES"
    if last >= first >= 1:
        return last - first + 1, f"header frames {first} to {last}"
    return None, ""


def _c3d_raw(path: Path) -> Optional[dict]:
    """The header and the numeric parameters of a C3D file, read from its raw bytes
    (ezc3d adjusts its header to the parameters and to what it read, and some damaged
    parameters make it fail with ``std::bad_alloc``), or None when the bytes cannot
    be parsed.

    The 512-byte header's 16-bit words (1-based): word 1 holds the parameter
    section's first block (byte 0), word 2 the points per frame, word 3 the analog
    values per frame (all channels together), words 4 and 5 the first and the last
    frame (1-based), words 11-12 the frame rate (a float, Hz). Integers are
    little-endian unless the processor type (the parameter section's 4th byte) is 86
    (MIPS, big-endian); DEC floats (85) are converted.

    Returns:
        ``{"processor", "points", "analog_values", "first", "last", "rate",
        "parameters"}``, ``parameters`` as :func:`_c3d_raw_parameters` gives them.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(512)
            if len(head) < 512:
                return None
            f.seek((head[0] - 1) * 512)
            start = f.read(4)
            if len(start) < 4:
                return None
            params = start + f.read(max(start[2], 1) * 512 - 4)
        processor = start[3]
        order = ">" if processor == 86 else "<"
        points, analog_values, first, last = struct.unpack(order + "4H", head[2:10])
        rate = float(_c3d_floats(head[20:24], processor)[0])
        parameters = _c3d_raw_parameters(params, order, processor)
    except (OSError, struct.error, IndexError, ValueError):
        return None
    return {"processor": processor, "points": points, "analog_values": analog_values, "first": first,
            "last": last, "rate": rate, "parameters": parameters}  # fmt: skip


def _c3d_floats(raw: bytes, processor: int) -> np.ndarray:
    """The 32-bit floats of raw C3D bytes, as float64: IEEE little-endian (Intel,
    processor 84), big-endian (MIPS, 86), or DEC (85: the 16-bit words swapped, the
    exponent 2 more)."""
    b = np.frombuffer(raw[: len(raw) // 4 * 4], dtype=np.uint8).reshape(-1, 4)
    if processor == 85:
        b = b[:, [2, 3, 0, 1]].copy()
        b[:, 3] = np.where(b[:, 3] > 0, b[:, 3] - 1, 0)
    return np.ascontiguousarray(b).view(">f4" if processor == 86 else "<f4").ravel().astype(float)


def _c3d_raw_parameters(params: bytes, order: str, processor: int) -> dict:
    """The numeric parameters of a raw parameter section, ``{"GROUP:NAME": (type,
    dimensions, values)}``, values a flat float array in the file's (column-major)
    order. Records: name length (negative: locked) and group id (negative: a group),
    the name, a 16-bit offset to the next record; a parameter then has its type (-1
    char, 1 byte, 2 int16, 4 float), its dimensions and its data."""
    groups, found = {}, {}
    pos = 4
    while pos + 2 <= len(params):
        length, group = struct.unpack("bb", params[pos:pos + 2])
        if length == 0:
            break
        name = params[pos + 2:pos + 2 + abs(length)].decode("latin-1").strip().upper()
        at = pos + 2 + abs(length)
        (step,) = struct.unpack(order + "h", params[at:at + 2])
        if group < 0:
            groups[-group] = name
        else:
            found[(group, name)] = at + 2
        if step <= 0:
            break
        pos = at + step
    out = {}
    for (group, name), body in found.items():
        kind, ndim = struct.unpack("bB", params[body:body + 2])
        if kind not in (1, 2, 4) or group not in groups:
            continue
        dims = tuple(params[body + 2:body + 2 + ndim])
        data = params[body + 2 + ndim:body + 2 + ndim + math.prod(dims) * kind]
        if len(data) < math.prod(dims) * kind:
            continue  # beyond the section read
        if kind == 4:
            values = _c3d_floats(data, processor)
        elif kind == 2:
            values = np.frombuffer(data, dtype=order + "i2").astype(float)
        else:
            values = np.frombuffer(data, dtype=np.uint8).astype(float)
        out[f"{groups[group]}:{name}"] = (kind, dims, values)
    return out


def _c3d_count(entry) -> Optional[int]:
    """A count (frames, points, channels) from a raw parameter: its first value, a
    16-bit integer read unsigned (written so past 32767), a float rounded; None when
    absent, or a float not finite or negative."""
    if entry is None or not len(entry[2]):
        return None
    kind, value = entry[0], entry[2][0]
    if kind == 2:
        return int(value) + 65536 if value < 0 else int(value)
    if kind == 4:
        return int(round(value)) if math.isfinite(value) and value >= 0 else None
    return int(value)


def _c3d_parameter_frames(parameters: dict) -> Optional[int]:
    """``POINT:FRAMES`` from the raw parameters of :func:`_c3d_raw_parameters` (None
    when absent): an int16 (unsigned past 32767), or a float beyond 65535 frames."""
    return _c3d_count(parameters.get("POINT:FRAMES"))


_C3D_RATES = (1.0, 1e5)  # Hz: the point and analog rates that read_c3d accepts


def _check_c3d_rate(rate: float, where: str) -> None:
    """Refuse a sampling rate (Hz) that is not finite or outside :data:`_C3D_RATES`."""
    low, high = _C3D_RATES
    if not (math.isfinite(rate) and low <= rate <= high):
        raise ValueError(f"{where}: {rate:g} Hz, not a sampling rate (expected {low:g} Hz to {high:g} Hz): "
                         "a damaged file")  # fmt: skip


def _check_c3d_scales(values: np.ndarray, where: str, what: str = "") -> None:
    """Refuse a scale factor that is zero or not finite (``what`` names the entry)."""
    bad = np.flatnonzero(~np.isfinite(values) | (values == 0))
    if len(bad):
        i = bad[0]
        entry = f" ({what} {i + 1} of {len(values)})" if what else ""
        raise ValueError(f"{where}: a scale factor of {values[i]:g}{entry}, expected finite and non-zero: "
                         "every value it scales would be 0 or NaN")  # fmt: skip


def _check_c3d_points(raw: dict, source: str) -> float:
    """Check the point parameters of a raw C3D file (:func:`_c3d_raw`) against each
    other and the header; return the point (frame) rate (Hz)."""
    p = raw["parameters"]
    where = f"{source}, parameter POINT:RATE"
    if "POINT:RATE" in p and len(p["POINT:RATE"][2]):
        rate = float(p["POINT:RATE"][2][0])
        _check_c3d_rate(rate, where)
        head = raw["rate"]
        if math.isfinite(head) and head > 0 and not math.isclose(head, rate, rel_tol=1e-4):
            raise ValueError(f"{where}: {rate:g} Hz, but the header's frame rate is {head:g} Hz: a damaged file")
    else:
        rate = raw["rate"]
        _check_c3d_rate(rate, f"{source}, header frame rate (no parameter POINT:RATE)")
    used = _c3d_count(p.get("POINT:USED"))
    if used is not None and used != raw["points"]:
        raise ValueError(f"{source}, parameter POINT:USED: {used} points, but the header has {raw['points']} "
                         "per frame: a damaged file (the data would be read misaligned)")  # fmt: skip
    frames = _c3d_parameter_frames(p)
    first, last = raw["first"], raw["last"]
    # past 65535 frames the header cannot hold the last frame: POINT:FRAMES alone
    if frames and frames < 65535 and last < 65535 and last - first + 1 != frames:
        raise ValueError(f"{source}, parameter POINT:FRAMES: {frames} frames, but the header's first and last "
                         f"frame ({first} to {last}) make {last - first + 1}: a damaged header or parameter "
                         "section (the first frame sets every time)")  # fmt: skip
    if used and "POINT:SCALE" in p:
        _check_c3d_scales(p["POINT:SCALE"][2][:1], f"{source}, parameter POINT:SCALE")
    return rate


def _check_c3d_analog_rate(rate: float, point_rate: float, used: int, values: int, where: str) -> None:
    """Refuse an analog rate (Hz) outside the sampling rates, or whose samples per
    frame at ``point_rate`` (Hz), times the ``used`` channels, are not the header's
    analog ``values`` per frame (ezc3d reads the data with the rate)."""
    _check_c3d_rate(rate, where)
    ratio = rate / point_rate
    if abs(ratio - round(ratio)) > 1e-3 * ratio or round(ratio) * used != values:
        raise ValueError(f"{where}: {rate:g} Hz makes {ratio:g} samples per frame at POINT:RATE {point_rate:g} Hz, "
                         f"but the header has {values} analog values per frame for the {used} channels of "
                         f"ANALOG:USED ({values / used:g} each): a damaged file (the analog data would be read "
                         "misaligned)")  # fmt: skip


def _check_c3d_analogs(raw: dict, source: str, point_rate: float) -> None:
    """Check the analog parameters of a raw C3D file (:func:`_c3d_raw`): the rate,
    its samples per frame against the header's analog values per frame, the scales."""
    p = raw["parameters"]
    used = _c3d_count(p.get("ANALOG:USED")) or 0
    values = raw["analog_values"]
    if used == 0:
        if values:
            raise ValueError(f"{source}, parameter ANALOG:USED: no channels, but the header has {values} analog "
                             "values per frame: a damaged file")  # fmt: skip
        return
    rate = p.get("ANALOG:RATE")
    if rate is not None and len(rate[2]):  # without it, nothing to check the header's values against
        _check_c3d_analog_rate(float(rate[2][0]), point_rate, used, values, f"{source}, parameter ANALOG:RATE")
    if "ANALOG:GEN_SCALE" in p:
        _check_c3d_scales(p["ANALOG:GEN_SCALE"][2][:1], f"{source}, parameter ANALOG:GEN_SCALE")
    if "ANALOG:SCALE" in p:
        _check_c3d_scales(p["ANALOG:SCALE"][2][:used], f"{source}, parameter ANALOG:SCALE", "channel")


def _check_c3d_platforms(raw: dict, source: str) -> None:
    """Refuse non-finite entries in the geometry and calibration of the used force
    platforms (``FORCE_PLATFORM:CORNERS``, ``ORIGIN``, ``CAL_MATRIX``): the plate's
    force and centre of pressure would be NaN or infinite."""
    p = raw["parameters"]
    used = _c3d_count(p.get("FORCE_PLATFORM:USED")) or 0
    for name in ("CORNERS", "ORIGIN", "CAL_MATRIX"):
        if f"FORCE_PLATFORM:{name}" not in p:
            continue
        _, dims, values = p[f"FORCE_PLATFORM:{name}"]
        per_plate = math.prod(dims[:-1]) if len(dims) > 1 else len(values)
        bad = np.flatnonzero(~np.isfinite(values[: used * per_plate]))
        if len(bad):
            i = bad[0]
            raise ValueError(f"{source}, parameter FORCE_PLATFORM:{name}: force platform {i // per_plate + 1} has "
                             f"an entry of {values[i]:g}: its force and centre of pressure would not be finite")  # fmt: skip


def _check_c3d_parameters(path: Path, source: str) -> None:
    """Refuse a damaged C3D file before ezc3d reads its data: rates not finite or
    outside 1 Hz to 100 kHz, the header and the parameters disagreeing on the frames,
    the points or the analog values per frame, scales zero or not finite, force
    platforms with non-finite corners, origin or calibration. Each error names the
    file and the parameter. Files whose bytes do not parse as C3D are left to ezc3d."""
    raw = _c3d_raw(path)
    if raw is None or raw["processor"] not in (84, 85, 86):
        return
    point_rate = _check_c3d_points(raw, source)
    _check_c3d_analogs(raw, source, point_rate)
    _check_c3d_platforms(raw, source)


def _check_c3d_force(force: np.ndarray, max_force: Optional[float], where: str, t0: float, rate: float,
                     gains: str) -> None:  # fmt: skip
    """Refuse a plate's ``(T, 3)`` force (N) that is not finite, or whose magnitude
    exceeds ``max_force`` (N; None: no limit), naming the first such sample and the
    parameters that scale the force (``gains``)."""
    size = np.linalg.norm(force, axis=1)
    bad = ~np.isfinite(force).all(axis=1)
    if max_force is not None:
        bad |= size > max_force
    if bad.any():
        i = int(np.argmax(bad))
        what = f"a force of {size[i]:.3g} N" if np.isfinite(size[i]) else f"a force of {force[i].tolist()} N"
        limit = f", beyond max_force={max_force:g} N" if max_force is not None and np.isfinite(size[i]) else ""
        raise ValueError(f"{where}: {what} at sample {i + 1} (t = {t0 + i / rate:.4g} s){limit}: check {gains} "
                         "(pass a larger max_force, or max_force=None, if the force is real)")  # fmt: skip


def _plate_gains(parameters: dict, channels: np.ndarray, k: int, cal_matrix) -> str:
    """The parameters that scale force platform ``k``'s force, with their values, for
    an error message."""
    gen = _parameter(parameters, "ANALOG", "GEN_SCALE", [1.0])
    scale = np.asarray(_parameter(parameters, "ANALOG", "SCALE", []), dtype=float)
    text = f"ANALOG:GEN_SCALE ({float(gen[0]):g})" if len(gen) else "ANALOG:GEN_SCALE"
    if channels.ndim == 2 and k < channels.shape[1]:
        c = channels[:3, k].astype(int) - 1
        c = c[(c >= 0) & (c < len(scale))]
        if len(c):
            text += f", ANALOG:SCALE of its force channels ({', '.join(f'{s:g}' for s in scale[c])})"
    cal = np.abs(np.asarray(cal_matrix, dtype=float))
    if cal.size:
        text += f" and FORCE_PLATFORM:CAL_MATRIX (entries up to {np.nanmax(cal):g})"
    return text


def _plate_normals(corners: np.ndarray, force: np.ndarray) -> np.ndarray:
    """(plates, 3) unit normals of the plates' surfaces from their (plates, 4, 3)
    corners (the cross product of the diagonals), each pointing to the side the force
    on the subject points to over the trial (up); the lab's +z where the corners do
    not span a plane (a file without corners)."""
    d = np.cross(corners[:, 2] - corners[:, 0], corners[:, 3] - corners[:, 1])
    size = np.linalg.norm(d, axis=-1, keepdims=True)
    flat = size[:, 0] > 1e-9 * np.maximum(np.abs(corners).max(axis=(1, 2)), 1e-300) ** 2
    n = np.where(flat[:, None], d / np.where(size > 0, size, 1.0), np.array([0.0, 0.0, 1.0]))
    toward = np.nansum(np.einsum("tpk,pk->tp", force, n), axis=0)
    return np.where((toward < 0)[:, None], -n, n)


def _check_moment_channels(channels, k: int, labels, units, unit_moment: str, m_scale: float, where: str) -> None:
    """Refuse a plate whose moment channels (``FORCE_PLATFORM:CHANNEL`` rows 4-6,
    those of types 2 and 4) declare in ``ANALOG:UNITS`` a moment unit other than the
    one ezc3d computes with (``FORCE_PLATFORM:UNITS`` or N, times ``POINT:UNITS``):
    ezc3d never reads ``ANALOG:UNITS``, and a file with points in m and moments in
    N mm gave centres of pressure hundreds of metres off and free moments 1000x."""
    if channels.ndim != 2 or channels.shape[0] < 6 or k >= channels.shape[1]:
        return
    for row in range(3, 6):
        c = int(channels[row, k]) - 1  # 1-based analog channel
        if not 0 <= c < len(units):
            continue
        unit = units[c].strip().lower().replace(" ", "")
        if unit in _MOMENT_UNITS and not math.isclose(_MOMENT_UNITS[unit], m_scale):
            label = labels[c] if c < len(labels) else f"channel {c + 1}"
            raise ValueError(
                f"{where}: its moment channel {label} (analog channel {c + 1}) is in {units[c]!r} "
                f"(ANALOG:UNITS), but the force-plate extraction (ezc3d) computes its moments in "
                f"{unit_moment!r}, from FORCE_PLATFORM:UNITS and POINT:UNITS: the centre of pressure and "
                "the free moment would be off by that factor; export the file with POINT:UNITS in the "
                "moments' length unit"
            )


def read_c3d(
    path, *, min_force: float = 20.0, warn_gaps: bool = True, max_force: Optional[float] = 50e3
) -> C3DTrial:
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
    ``unit_position``, ``unit_moment``); ezc3d takes the moments' unit from
    ``POINT:UNITS`` alone, so a plate whose moment channels declare another in
    ``ANALOG:UNITS`` is refused rather than read off by a factor of 1000.

    The centre of pressure and the free moment are undefined on an unloaded plate
    (ezc3d divides by a vertical force near zero and returns values metres off the
    plate): where the vertical force is below ``min_force`` they are NaN. The
    vertical is each plate's normal (from its corners, pointing to the side the
    force on the subject points to), so labs with y (or any axis) up read alike;
    the free moment is the moment about that normal.

    A damaged file is refused, naming the file and the parameter, before ezc3d reads
    its data with the parameters: a point (``POINT:RATE``) or analog rate
    (``ANALOG:RATE``) not finite or outside 1 Hz to 100 kHz, or disagreeing with the
    header (its frame rate, its analog values per frame); ``POINT:FRAMES`` against the
    header's first and last frame (a damaged first frame shifts every time);
    ``POINT:USED`` against the header's points per frame; ``POINT:SCALE``,
    ``ANALOG:SCALE`` or ``ANALOG:GEN_SCALE`` zero or not finite; a used force
    platform's ``CORNERS``, ``ORIGIN`` or ``CAL_MATRIX`` not finite. A plate force
    that is not finite, or beyond ``max_force``, is refused too, naming the scales
    and the calibration that make it.

    Args:
        path: the ``.c3d`` file.
        min_force: force along the plate's normal (N) below which a plate counts as
            unloaded; None keeps ezc3d's values everywhere.
        warn_gaps: warn naming the markers with gaps.
        max_force: the largest plate force (N, its magnitude) taken as physical;
            beyond it the file is refused (a damaged scale or calibration). None: no
            limit.

    Returns:
        :class:`C3DTrial`: ``markers`` (m, at ``point_rate``), ``forces``
        (:class:`ForcePlates` at ``analog_rate``, lab frame, or None without
        platforms), ``point_rate``, ``analog_rate`` (Hz), ``analog`` channels.

    Raises:
        ImportError: ezc3d is not installed.
        ValueError: a file that ezc3d cannot read, unknown units, a plate whose
            moment channels' ``ANALOG:UNITS`` disagree with the moment unit ezc3d
            computes with (``POINT:UNITS`` in m, moments in N mm), data that
            disagrees with the parameters, or fewer frames than the file declares (a
            truncated file: the frames of ``POINT:FRAMES``, or of the header's first
            and last frame, against those ezc3d could read), naming the file; the
            damaged parameters above and forces beyond ``max_force``, naming the file
            and the parameter.
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
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a C3D file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if max_force is not None and not (max_force > 0):
        raise ValueError(f"read_c3d: max_force must be > 0 N or None, got {max_force}")
    _check_c3d_parameters(path, source)  # before ezc3d reads the data with them
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
    declared, declared_by = _c3d_declared_frames(path)
    n_read = np.shape(data["points"])[2]
    if declared is not None and n_read < declared:
        # ezc3d stops at the end of the file and adjusts its header and POINT:FRAMES to
        # what it read: a truncated file would load silently with fewer frames
        raise ValueError(
            f"{source}: truncated: {declared} frames declared ({declared_by}), "
            f"only {n_read} in the file"
        )

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
        channels = np.asarray(_parameter(parameters, "FORCE_PLATFORM", "CHANNEL", np.zeros((0, 0))))
        force, cop, free_moment, corners = [], [], [], []
        for k, plate in enumerate(platforms):
            where = f"{source}, force platform {k + 1}"
            f_scale = _scale(plate["unit_force"], _FORCE_UNITS, "force", where)
            p_scale = _scale(plate["unit_position"], _LENGTH_UNITS, "position", where)
            m_scale = _scale(plate["unit_moment"], _MOMENT_UNITS, "moment", where)
            _check_moment_channels(channels, k, analog_labels, analog_units, plate["unit_moment"], m_scale, where)
            for key in ("force", "center_of_pressure", "Tz"):
                shape = np.shape(plate[key])
                if shape != (3, n_analog):
                    raise ValueError(f"{where}: {key} has shape {shape}, expected (3, {n_analog})")
            force.append(np.asarray(plate["force"], dtype=float).T * f_scale)
            _check_c3d_force(force[-1], max_force, where, int(header["analogs"]["first_frame"]) / analog_rate,
                             analog_rate, _plate_gains(parameters, channels, k, plate["cal_matrix"]))  # fmt: skip
            cop.append(np.asarray(plate["center_of_pressure"], dtype=float).T * p_scale)
            free_moment.append(np.asarray(plate["Tz"], dtype=float).T * m_scale)
            corners.append(np.asarray(plate["corners"], dtype=float).T * p_scale)
        force = np.stack(force, axis=1)
        cop = np.stack(cop, axis=1)
        # the vertical of each plate: its surface's normal, towards the force on the
        # subject (not the lab's z: labs with y up exist)
        up = _plate_normals(np.stack(corners), force)
        normal_force = np.einsum("tpk,pk->tp", force, up)
        free_moment = np.einsum("tpk,pk->tp", np.stack(free_moment, axis=1), up)
        if min_force is not None:
            unloaded = ~(normal_force >= min_force)
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
