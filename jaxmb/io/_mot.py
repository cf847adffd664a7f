"""The readers of OpenSim ``.mot`` / ``.sto`` tables."""

from __future__ import annotations

import numpy as np

from ._markers import Table
from ._text import (_check_increasing, _header_number, _read_lines, _refuse_infinite, _refuse_repeated_key,
                    _split_tabs, _whitespace_rows)


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
