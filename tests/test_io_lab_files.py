"""Tests of the text readers of jaxmb.io on lab files as they come (issue 38, items 4-6):
Cortex's times rounded to 1 ms, a file cut inside its last number, a header key given
twice. Every file is built here, by hand or from numbers typed in, not by the writers."""

import re
import warnings

import numpy as np
import pytest

from jaxmb import io


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def trc_text(times, xyz, rate="150", keys=None, values=None, fmt="%.5f", time_fmt="%.3f", end="\n"):
    """A TRC file of one marker: ``times`` (s) written with ``time_fmt`` and ``xyz``
    ``(T, 3)`` (mm) with ``fmt``, as Cortex writes them; ``keys``/``values`` replace
    the header lines 2 and 3."""
    T = len(times)
    keys = keys or ["DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units"]
    values = values or [rate, rate, str(T), "1", "mm"]
    lines = [
        "PathFileType\t4\t(X/Y/Z)\tcortex.trc",
        "\t".join(keys),
        "\t".join(values),
        "Frame#\tTime\tRHEE\t\t",
        "\t\tX1\tY1\tZ1",
        "",
    ]
    for t in range(T):
        lines.append(f"{t + 1}\t{time_fmt % times[t]}\t" + "\t".join(fmt % v for v in xyz[t]))
    return "\n".join(lines) + end


def forces_text(rows, header=None, fmt="%.6f", end="\n"):
    """A Cortex ``.forces`` file of one plate: ``rows`` ``(T, 7)`` (FX FY FZ N, X Y Z
    mm, MZ N mm) written with ``fmt``; ``header`` the lines between ``[Force Data]`` and
    ``#Sample``."""
    header = header or ["NumberOfForcePlates=1", "SampleRate=1000.000000", f"NumberOfSamples={len(rows)}"]
    lines = ["[Force Data]"] + header + ["#Sample\tFX1\tFY1\tFZ1\tX1\tY1\tZ1\tMZ1"]
    for t, row in enumerate(rows):
        lines.append(f"{t + 1}\t" + "\t".join(fmt % v for v in row))
    return "\n".join(lines) + end


def mot_text(time, values, header=None, fmt="%.8f", end="\n"):
    """An OpenSim ``.mot`` file of two coordinates, as OpenSim writes it (``%.8f``;
    ``fmt`` a format or a function of the number)."""
    header = header or ["version=1", f"nRows={len(time)}", "nColumns=3", "inDegrees=yes"]
    lines = ["walk_ik"] + header + ["endheader", "time\thip_flexion_r\tknee_angle_r"]
    for t, row in zip(time, values):
        lines.append("\t".join((fmt % v if isinstance(fmt, str) else fmt(v)) for v in (t, *row)))
    return "\n".join(lines) + end


RNG = np.random.default_rng(38)
XYZ = RNG.uniform(-900.0, 900.0, (120, 3))
FORCE_ROWS = RNG.uniform(-300.0, 900.0, (30, 7))
ANGLES = RNG.uniform(-90.0, 90.0, (30, 2))


# --------------------------------------------------------------------------------------
# 6. A header key given twice
# --------------------------------------------------------------------------------------


def test_forces_sample_rate_twice_names_both_lines(tmp_path):
    # before: the last SampleRate silently won (times 3x too long at 333.3 Hz)
    header = ["NumberOfForcePlates=1", "SampleRate=1000.000000", "NumberOfSamples=30", "SampleRate=333.333333"]
    path = write(tmp_path, "walk.forces", forces_text(FORCE_ROWS, header))
    with pytest.raises(ValueError, match=r"walk\.forces, lines 3 and 5: header field SampleRate is given twice "
                                         r"\(SampleRate='1000\.000000', then SampleRate='333\.333333'\)"):
        io.read_forces(path)


def test_trc_header_key_twice_names_both_fields(tmp_path):
    keys = ["DataRate", "CameraRate", "NumFrames", "NumMarkers", "Units", "DataRate"]
    values = ["150", "150", "20", "1", "mm", "50"]
    path = write(tmp_path, "cortex.trc", trc_text(np.arange(20) / 150, XYZ[:20], keys=keys, values=values))
    with pytest.raises(ValueError, match=r"cortex\.trc, line 2: header field DataRate appears twice "
                                         r"\(fields 1 and 6; line 3 gives '150' and '50'\)"):
        io.read_trc(path)


@pytest.mark.parametrize("first,second", [("nRows=30", "nRows=29"), ("nRows=30", "NROWS=29"),
                                          ("DataRate=100", "DataRate=50"), ("inDegrees=yes", "inDegrees=no")])
def test_mot_header_key_twice_names_both_lines(tmp_path, first, second):
    # before: the last one silently won (nRows in any case; DataRate kept in Table.header)
    path = write(tmp_path, "walk.sto", mot_text(np.arange(30) / 100, ANGLES, header=["version=1", first, "nColumns=3",
                                                                                    second]))
    (k1, v1), (k2, v2) = first.split("="), second.split("=")
    message = f"walk.sto, lines 3 and 5: header field {k2} is given twice ({k1}='{v1}', then {k2}='{v2}')"
    with pytest.raises(ValueError, match=re.escape(message)):
        io.read_sto(path)


def test_distinct_header_keys_still_read(tmp_path):
    # keys that differ only in case are two fields, except the counts read in any case
    header = ["version=1", "Version=2", "nRows=30", "nColumns=3", "inDegrees=yes"]
    t = io.read_mot(write(tmp_path, "walk.mot", mot_text(np.arange(30) / 100, ANGLES, header=header)))
    assert t.header == {"version": "1", "Version": "2"}
    np.testing.assert_array_equal(t.values, [[float("%.8f" % v) for v in row] for row in ANGLES])


# --------------------------------------------------------------------------------------
# 4. Cortex's times, rounded to 1 ms
# --------------------------------------------------------------------------------------


def test_trc_cortex_20_frames_at_150_hz_rounded_to_1_ms(tmp_path):
    # before: "advances 0.00668421 s a frame (149.606 Hz) but header field DataRate = 150 Hz"
    times = np.arange(20) / 150
    path = write(tmp_path, "cortex.trc", trc_text(times, XYZ[:20]))
    written = np.array([float("%.3f" % t) for t in times])
    assert abs((written[-1] - written[0]) / 19 * 150 - 1) > 1e-3  # what the 0.1 % rule alone refused
    m = io.read_trc(path)
    assert m.rate == 150.0
    np.testing.assert_array_equal(m.time, written)
    np.testing.assert_array_equal(m.xyz[:, 0], [[float("%.5f" % v) * 1e-3 for v in row] for row in XYZ[:20]])
    # and write_trc writes back what read_trc read (it checks the times as it writes them)
    io.write_trc(tmp_path / "back.trc", m)
    np.testing.assert_array_equal(io.read_trc(tmp_path / "back.trc").time, written)


def test_trc_every_short_cortex_excerpt_reads(tmp_path):
    # excerpts of 2-119 frames of a recording at 150 Hz, times to 1 ms: a third failed
    recording = np.arange(1000) / 150
    refused_before = 0
    for n in range(2, 120, 3):
        for start in range(0, 800, 199):
            times = recording[start : start + n]
            written = np.array([float("%.3f" % t) for t in times])
            refused_before += abs((written[-1] - written[0]) / (n - 1) * 150 - 1) > 1e-3
            path = write(tmp_path, "excerpt.trc", trc_text(times, XYZ[:n]))
            np.testing.assert_array_equal(io.read_trc(path).time, written)
    assert refused_before > 50  # of 200: the test reads files the old check refused


@pytest.mark.parametrize(
    "n,true_hz,declared,time_fmt",
    [
        (100, 149.0, "150", "%.3f"),  # times that really advance at 149 Hz, to 1 ms
        (20, 149.0, "150", "%.4f"),  # the same over 20 frames, to 0.1 ms
        (100, 150.0, "151", "%.3f"),  # a declared rate 1 Hz off
        (20, 150.0, "150.8", "%.6f"),  # 0.5 % off, times to 1 us
    ],
)
def test_trc_wrong_rate_still_refused(tmp_path, n, true_hz, declared, time_fmt):
    times = np.arange(n) / true_hz
    path = write(tmp_path, "cortex.trc", trc_text(times, XYZ[:n], rate=declared, time_fmt=time_fmt))
    written = [float(time_fmt % t) for t in times]
    mean = (written[-1] - written[0]) / (n - 1)
    message = (f"cortex.trc: the Time column advances {mean:.6g} s a frame ({1 / mean:.6g} Hz) but header field "
               f"DataRate = {float(declared):g} Hz")
    with pytest.raises(ValueError, match=re.escape(message)):
        io.read_trc(path)


# --------------------------------------------------------------------------------------
# 5. A file cut inside its last number
# --------------------------------------------------------------------------------------

FORCE_ROWS[-1, 6] = -250.61433  # the last number of the .forces file: MZ1 (N mm)
XYZ[19, 2] = -250.61433  # the last number of a 20-frame TRC file: RHEE Z (mm)
ANGLES[-1, 1] = -25.06143388  # the last number of the .mot file: knee_angle_r (degrees)

FILES = {  # name: (reader, text, last line, last column as the message names it)
    "walk.forces": (io.read_forces, forces_text(FORCE_ROWS, fmt="%.5f"), 35, "column 8 (MZ1)"),
    "cortex.trc": (io.read_trc, trc_text(np.arange(20) / 150, XYZ[:20]), 26, "column 5 (RHEE Z)"),
    "walk.mot": (io.read_mot, mot_text(np.arange(30) / 100, ANGLES), 37, "column 3 (knee_angle_r)"),
}


def test_fixed_point_writers_leave_a_trailing_zero():
    # what tells a writer of fixed digits from one that drops trailing zeros (%g): here
    for name, digits in (("walk.forces", 5), ("cortex.trc", 5), ("walk.mot", 8)):
        assert re.search(r"\.\d{%d}0\b" % (digits - 1), FILES[name][1]), name


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("cut", [1, 4, 5, 7])  # characters cut: '-250.6143', '-250.6', '-250.', '-25'
def test_file_cut_inside_its_last_number(tmp_path, name, cut):
    # before: read without error, the last value short (-250.61433 read as -250.6)
    reader, text, line, column = FILES[name]
    text = text.rstrip("\n")[:-cut]
    path = write(tmp_path, name, text)
    short = text.rsplit(None, 1)[-1]
    with pytest.raises(ValueError, match=rf"{re.escape(name)}, line {line}, {re.escape(column)}: "
                                         rf"'{re.escape(short)}' has fewer digits than the column's other \d+ values "
                                         r"\(written like '[-0-9.]+'\), on the file's last line, without a line "
                                         r"break at its end: the file may be truncated"):
        reader(path)


@pytest.mark.parametrize("name", FILES)
def test_file_cut_inside_its_last_row(tmp_path, name):
    # before: "expected 8 fields, got 4", not a word of the file being cut short
    reader, text, line, _ = FILES[name]
    text = text.rstrip("\n")
    text = text[: text.rindex("\t") - 3]  # the last field and three characters before it
    with pytest.raises(ValueError, match=rf"{re.escape(name)}, line {line}: expected \d+ fields.*, got \d+ "
                                         r"\(the file's last line, without a line break at its end: the file may "
                                         r"be truncated\)"):
        reader(write(tmp_path, name, text))


@pytest.mark.parametrize("cut,pattern", [(1, r"'-2\.506143e\+0' has fewer digits than the column's other 29 "
                                               r"values \(written like '[-0-9.]+e[-+]\d\d'\)"),
                                         (3, r"'-2\.506143e' is not a number \(the file's last line, without a "
                                             r"line break at its end: the file may be truncated\)")])
def test_mot_in_exponent_form_cut_inside_its_exponent(tmp_path, cut, pattern):
    # before: -2.506143e+0 was read as -2.506143, ten times too small
    text = mot_text(np.arange(30) / 100, ANGLES, fmt="%.6e").rstrip("\n")[:-cut]
    with pytest.raises(ValueError, match=r"walk\.mot, line 37, column 3 \(knee_angle_r\): " + pattern):
        io.read_mot(write(tmp_path, "walk.mot", text))


@pytest.mark.parametrize("name", FILES)
def test_complete_last_line_without_a_line_break_reads(tmp_path, name):
    reader, text, _, _ = FILES[name]
    whole = reader(write(tmp_path, "whole_" + name, text))
    cut = reader(write(tmp_path, name, text.rstrip("\n")))
    for field in ("time", "xyz", "force", "cop", "free_moment", "values"):
        if hasattr(whole, field):
            np.testing.assert_array_equal(getattr(cut, field), getattr(whole, field))
    last = float(text.rstrip("\n").rsplit(None, 1)[-1])  # the file's own last number
    assert last == -250.61433 or last == float("%.8f" % ANGLES[-1, 1])


@pytest.mark.parametrize(
    "fmt,last",
    [
        ("%g", 12.5),  # %g drops trailing zeros: '12.5' after rows of '12.3457'
        (lambda v: repr(float(v)), 12.5),  # as jaxmb's writers write (the shortest exact text)
        ("%g", 1e-4),  # '0.0001' after rows of '1.23457e-05'
    ],
)
def test_last_number_legitimately_shorter_reads(tmp_path, fmt, last):
    # a column whose other rows all have one number of digits, a writer that drops
    # trailing zeros, a last line without a line break: nothing is cut
    digits = [n for n in range(1231, 9999, 97) if n % 10][:29]  # 4 digits, none ending in 0
    column = np.array([float(f"12.{n}" if last > 1 else f"1.0{n}e-05") for n in digits] + [last])
    angles = np.stack([ANGLES[:, 0], column], axis=1)
    text = mot_text(np.arange(30) / 100, angles, fmt=fmt).rstrip("\n")
    values = [line.split("\t")[2] for line in text.split("\n")[7:]]
    assert len({len(v) for v in values[:-1]}) == 1 and len(values[-1]) < len(values[0])  # the case it is
    t = io.read_mot(write(tmp_path, "walk.mot", text))
    np.testing.assert_array_equal(t.values[:, 1], [float(v) for v in values])
