"""Shared parsing of the text tables (TRC, ``.forces``, MOT/STO): units, numbers,
rows, and the checks that refuse a truncated, duplicated or out-of-order table,
naming the file, the line and the field."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path
from typing import Optional

import numpy as np


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


def _split_tabs(line: str) -> list:
    """Fields of a tab-separated line (whitespace-separated when it has no tab)."""
    line = line.rstrip("\r")
    return line.split("\t") if "\t" in line else line.split()


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
