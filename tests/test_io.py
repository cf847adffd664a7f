"""Tests of the file readers and writers in jaxmb.io (plain NumPy, no JAX)."""

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from jaxmb import io

DATA = Path(__file__).parent / "data"
GAIT_C3D = DATA / "Gait.c3d"

# --------------------------------------------------------------------------------------
# Fixtures: small files with known values, written by hand (not by the writers).
# --------------------------------------------------------------------------------------

# Two markers, three frames at 50 Hz; values in mm.
TRC_MM = (
    "PathFileType\t4\t(X/Y/Z)\twalk.trc\n"
    "DataRate\tCameraRate\tNumFrames\tNumMarkers\tUnits\tOrigDataRate\tOrigDataStartFrame\tOrigNumFrames\n"
    "50.00\t50.00\t3\t2\tmm\t50.00\t1\t3\n"
    "Frame#\tTime\tRHEE\t\t\tRTOE\t\t\t\n"
    "\t\tX1\tY1\tZ1\tX2\tY2\tZ2\t\n"
    "\n"
    "1\t0.00\t100.0\t20.5\t-3.0\t250.0\t10.0\t1.0\t\n"
    "2\t0.02\t110.0\t21.5\t-2.0\t260.0\t11.0\t2.0\t\n"
    "3\t0.04\t120.0\t22.5\t-1.0\t270.0\t12.0\t3.0\t\n"
)
XYZ_M = 1e-3 * np.array(
    [
        [[100.0, 20.5, -3.0], [250.0, 10.0, 1.0]],
        [[110.0, 21.5, -2.0], [260.0, 11.0, 2.0]],
        [[120.0, 22.5, -1.0], [270.0, 12.0, 3.0]],
    ]
)


def _trc_in(units, factor):
    """TRC_MM with its values converted to other units (factor = mm per unit)."""
    lines = TRC_MM.split("\n")
    lines[2] = lines[2].replace("\tmm\t", f"\t{units}\t")
    for i in range(6, 9):
        fields = lines[i].split("\t")
        fields[2:8] = [repr(float(f) / factor) for f in fields[2:8]]
        lines[i] = "\t".join(fields)
    return "\n".join(lines)


# Cortex .forces: two plates, four samples at 1000 Hz.
FORCES = (
    "[Force Data]\n"
    "NumberOfForcePlates=2\n"
    "SampleRate=1000.000000\n"
    "NumberOfSamples=4\n"
    "#Sample\tFX1\tFY1\tFZ1\tX1\tY1\tZ1\tMZ1\tFX2\tFY2\tFZ2\tX2\tY2\tZ2\tMZ2\n"
    "1\t1.0\t2.0\t700.0\t100.0\t200.0\t0.0\t1500.0\t0.0\t0.0\t0.0\t0.0\t0.0\t0.0\t0.0\n"
    "2\t1.5\t2.5\t710.0\t101.0\t201.0\t0.0\t1600.0\t0.0\t0.0\t5.0\t600.0\t50.0\t0.0\t-200.0\n"
    "3\t2.0\t3.0\t720.0\t102.0\t202.0\t0.0\t1700.0\t0.0\t0.0\t10.0\t601.0\t51.0\t0.0\t-300.0\n"
    "4\t2.5\t3.5\t730.0\t103.0\t203.0\t0.0\t1800.0\t0.0\t0.0\t15.0\t602.0\t52.0\t0.0\t-400.0\n"
)

MOT = (
    "walk_ik\n"
    "version=1\n"
    "nRows=3\n"
    "nColumns=3\n"
    "inDegrees=yes\n"
    "endheader\n"
    "time\thip_flexion_r\tknee_angle_r\n"
    "0.00\t10.0\t-5.0\n"
    "0.01\t11.0\t-6.0\n"
    "0.02\t12.0\t-7.0\n"
)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def expect_error(path, pattern, reader):
    """The reader raises ValueError whose message names the file and matches pattern."""
    with pytest.raises(ValueError) as info:
        reader(path)
    message = str(info.value)
    assert path.name in message, message
    assert re.search(pattern, message), message


# --------------------------------------------------------------------------------------
# TRC
# --------------------------------------------------------------------------------------


def test_read_trc_known_values(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no gaps, so no warning
        m = io.read_trc(write(tmp_path, "walk.trc", TRC_MM))
    assert m.rate == 50.0
    assert m.labels == ("RHEE", "RTOE")
    np.testing.assert_array_equal(m.time, [0.0, 0.02, 0.04])
    np.testing.assert_allclose(m.xyz, XYZ_M, rtol=0, atol=1e-15)
    np.testing.assert_allclose(m.get("RTOE"), XYZ_M[:, 1], rtol=0, atol=1e-15)
    assert m.gaps() == {}


def test_trc_windows_line_endings(tmp_path):
    path = tmp_path / "walk.trc"
    path.write_bytes(TRC_MM.replace("\n", "\r\n").encode())
    np.testing.assert_allclose(io.read_trc(path).xyz, XYZ_M, rtol=0, atol=1e-15)


@pytest.mark.parametrize("units,factor", [("m", 1000.0), ("cm", 10.0), ("mm", 1.0), ("meters", 1000.0)])
def test_trc_units_give_metres(tmp_path, units, factor):
    m = io.read_trc(write(tmp_path, f"walk_{units}.trc", _trc_in(units, factor)))
    np.testing.assert_allclose(m.xyz, XYZ_M, rtol=1e-14, atol=1e-15)


def test_trc_unknown_label_lists_labels(tmp_path):
    m = io.read_trc(write(tmp_path, "walk.trc", TRC_MM))
    with pytest.raises(KeyError, match="RHEE, RTOE"):
        m.get("LHEE")


def test_trc_gaps_are_nan_and_reported(tmp_path):
    lines = TRC_MM.split("\n")
    # Frame 2: RHEE missing (three empty fields); frames 2 and 3: RTOE missing, the
    # last row without its trailing tab.
    lines[7] = "2\t0.02\t\t\t\t\t\t"
    lines[8] = "3\t0.04\t120.0\t22.5\t-1.0\t\t\t"
    path = write(tmp_path, "gappy.trc", "\n".join(lines))
    with pytest.warns(UserWarning, match=r"gappy\.trc: gaps .* 2 of 2 markers.*RHEE 1 frames, RTOE 2 frames"):
        m = io.read_trc(path)
    assert np.isnan(m.xyz[1, 0]).all() and np.isnan(m.xyz[1:, 1]).all()
    np.testing.assert_allclose(m.xyz[2, 0], XYZ_M[2, 0])
    assert m.gaps() == {"RHEE": ((1, 2),), "RTOE": ((1, 3),)}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        io.read_trc(path, warn_gaps=False)
    # a coordinate written as nan: the marker's gap, all three NaN (before: one NaN
    # coordinate, which write_trc then refused to write back)
    lines[7] = "2\t0.02\t100.0\tnan\t-3.0\t120.0\t22.5\t-1.0"
    lines[8] = TRC_MM.split("\n")[8]
    path = write(tmp_path, "nanfield.trc", "\n".join(lines))
    m = io.read_trc(path, warn_gaps=False)
    assert np.isnan(m.xyz[1, 0]).all() and not np.isnan(m.xyz[1, 1]).any() and m.gaps() == {"RHEE": ((1, 2),)}
    io.write_trc(tmp_path / "back.trc", m)
    np.testing.assert_array_equal(np.isnan(io.read_trc(tmp_path / "back.trc", warn_gaps=False).xyz), np.isnan(m.xyz))


def test_trc_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    xyz = rng.normal(size=(40, 5, 3))
    xyz[3:7, 2] = np.nan
    markers = io.Markers(
        rate=120.0, time=np.arange(40) / 120.0, labels=("A", "B", "C", "D", "E"), xyz=xyz
    )
    for units in ("mm", "m"):
        path = tmp_path / f"rt_{units}.trc"
        io.write_trc(path, markers, units=units, decimals=9)
        with pytest.warns(UserWarning, match="C 4 frames"):
            back = io.read_trc(path)
        assert back.labels == markers.labels and back.rate == markers.rate
        np.testing.assert_allclose(back.time, markers.time, rtol=0, atol=1e-12)
        # 9 decimals of the file's unit: 1e-12 m in mm, 1e-9 m in m.
        atol = 1e-12 if units == "mm" else 1e-9
        np.testing.assert_allclose(back.xyz, xyz, rtol=0, atol=atol)
        assert back.gaps() == {"C": ((3, 7),)}
    # No temporary files left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rt_m.trc", "rt_mm.trc"]


@pytest.mark.parametrize(
    "edit,pattern",
    [
        # A row with fields missing (a truncated row) is an error, not a gap.
        (lambda ls: ls.__setitem__(7, "2\t0.02\t110.0\t21.5\t-2.0\t260.0"), r"line 8: expected 8 fields .*got 6"),
        (lambda ls: ls.__setitem__(7, ls[7].rstrip("\t") + "\t1.0\t2.0"), r"line 8: expected 8 fields .*got 10"),
        (lambda ls: ls.__setitem__(8, ls[8].replace("22.5", "22,5")), r"line 9, column 4 \(RHEE Y\): '22,5' is not a number"),
        (lambda ls: ls.__setitem__(8, ls[8].replace("3\t0.04", "3\t")), r"line 9, column 2 \(Time\): empty value"),
        (lambda ls: ls.__delitem__(8), r"2 data rows, header field NumFrames says 3"),
        (lambda ls: ls.insert(9, "4\t0.06\t1\t2\t3\t4\t5\t6"), r"4 data rows, header field NumFrames says 3"),
        (lambda ls: ls.__setitem__(2, ls[2].replace("\t2\tmm", "\t3\tmm")), r"line 4: 2 marker labels, header field NumMarkers says 3"),
        (lambda ls: ls.__setitem__(2, ls[2].replace("\tmm\t", "\tfeet\t")), r"line 3, header field Units: unknown length units 'feet'"),
        (lambda ls: ls.__setitem__(2, ls[2].replace("50.00\t50.00", "fast\t50.00")), r"line 3: header field DataRate = 'fast' is not a number"),
        (lambda ls: ls.__setitem__(1, ls[1].replace("NumFrames", "Frames")), r"header field NumFrames missing"),
        (lambda ls: ls.__setitem__(0, "Hello"), r"line 1: expected 'PathFileType'"),
        # Data starting on line 5 (no X1 Y1 Z1 line) would lose a frame: an error.
        (lambda ls: ls.__delitem__(slice(4, 6)), r"line 5: expected the coordinate labels 'X1 Y1 Z1 \.\.\.'"),
        # A Time column that disagrees with DataRate (before: read without a word).
        (lambda ls: ls.__setitem__(2, ls[2].replace("50.00\t50.00", "100.00\t50.00")),
         r"the Time column advances 0\.02 s a frame \(50 Hz\) but header field DataRate = 100 Hz"),
        (lambda ls: ls.__setitem__(7, ls[7].replace("0.02", "0.035", 1)),
         r"line 8: the Time column goes from 0 to 0\.035 s, but DataRate = 50 Hz gives a frame every 0\.02 s"),
        # a dropped frame: its line (before: the average's message, no line)
        (lambda ls: ls.__setitem__(8, ls[8].replace("0.04", "0.06", 1)),
         r"line 9: the Time column goes from 0\.02 to 0\.06 s, but DataRate = 50 Hz"),
        (lambda ls: ls.__delitem__(slice(0, len(ls))), r"walk\.trc: the file is empty"),
    ],
)
def test_trc_malformed(tmp_path, edit, pattern):
    lines = TRC_MM.split("\n")
    edit(lines)
    expect_error(write(tmp_path, "walk.trc", "\n".join(lines)), pattern, io.read_trc)


def test_trc_duplicate_labels_renamed_as_c3d_does(tmp_path):
    """A repeated label is renamed RHEE_2 with a warning naming the line, as read_c3d
    renames them (it was refused: a TRC exported from such a C3D file could not be read)."""
    lines = TRC_MM.split("\n")
    lines[3] = lines[3].replace("RTOE", "RHEE")
    path = write(tmp_path, "walk.trc", "\n".join(lines))
    with pytest.warns(UserWarning, match=r"walk\.trc, line 4: duplicate marker labels renamed: RHEE -> RHEE_2") as rec:
        m = io.read_trc(path)
    assert rec[0].filename == __file__  # points at the caller
    assert m.labels == ("RHEE", "RHEE_2")
    np.testing.assert_array_equal(m.xyz, io.read_trc(write(tmp_path, "ok.trc", TRC_MM)).xyz)


# --------------------------------------------------------------------------------------
# Cortex .forces
# --------------------------------------------------------------------------------------


def test_read_forces_known_values(tmp_path):
    f = io.read_forces(write(tmp_path, "walk.forces", FORCES))
    assert f.rate == 1000.0 and f.n_plates == 2 and f.corners is None
    np.testing.assert_allclose(f.time, [0.0, 0.001, 0.002, 0.003], rtol=0, atol=1e-15)
    assert f.force.shape == (4, 2, 3) and f.cop.shape == (4, 2, 3) and f.free_moment.shape == (4, 2)
    np.testing.assert_array_equal(f.force[:, 0], [[1.0, 2.0, 700.0], [1.5, 2.5, 710.0], [2.0, 3.0, 720.0], [2.5, 3.5, 730.0]])
    np.testing.assert_array_equal(f.force[:, 1, 2], [0.0, 5.0, 10.0, 15.0])
    np.testing.assert_allclose(f.cop[1], [[0.101, 0.201, 0.0], [0.600, 0.050, 0.0]], rtol=1e-14)  # mm -> m
    np.testing.assert_allclose(f.free_moment[:, 0], [1.5, 1.6, 1.7, 1.8], rtol=1e-14)  # N mm -> N m
    np.testing.assert_allclose(f.free_moment[:, 1], [0.0, -0.2, -0.3, -0.4], rtol=1e-14)


def test_forces_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    T, P = 25, 3
    plates = io.ForcePlates(
        rate=2000.0,
        time=(10 + np.arange(T)) / 2000.0,
        force=rng.normal(size=(T, P, 3)) * 100,
        cop=rng.normal(size=(T, P, 3)),
        free_moment=rng.normal(size=(T, P)),
    )
    path = tmp_path / "rt.forces"
    io.write_forces(path, plates, decimals=9)
    back = io.read_forces(path)
    assert back.rate == plates.rate
    np.testing.assert_allclose(back.time, plates.time, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.force, plates.force, rtol=0, atol=1e-9)
    np.testing.assert_allclose(back.cop, plates.cop, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.free_moment, plates.free_moment, rtol=0, atol=1e-12)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rt.forces"]


@pytest.mark.parametrize(
    "edit,pattern",
    [
        (lambda ls: ls.__setitem__(0, "[Marker Data]"), r"line 1: expected '\[Force Data\]'"),
        (lambda ls: ls.__setitem__(3, "NumberOfSamples=5"), r"4 data rows, header field NumberOfSamples says 5"),
        (lambda ls: ls.__setitem__(3, "NumberOfSamples=3"), r"4 data rows, header field NumberOfSamples says 3"),
        (lambda ls: ls.__setitem__(2, "SampleRate=abc"), r"line 3: header field SampleRate = 'abc' is not a number"),
        (lambda ls: ls.__delitem__(2), r"header field SampleRate missing"),
        (lambda ls: ls.__setitem__(1, "NumberOfForcePlates=3"), r"line 5: column FX3 missing \(NumberOfForcePlates=3\)"),
        # a second plate's columns under NumberOfForcePlates=1 (before: read as one plate)
        (lambda ls: ls.__setitem__(1, "NumberOfForcePlates=1"),
         r"line 5: columns of plate 2 but NumberOfForcePlates=1 \(line 2\)"),
        (lambda ls: ls.__setitem__(4, ls[4].replace("MZ2", "MZ1")), r"line 5: column MZ1 appears twice"),
        (lambda ls: ls.__setitem__(6, ls[6].rsplit("\t", 2)[0]), r"line 7: expected 15 fields, got 13"),
        (lambda ls: ls.__setitem__(7, ls[7].replace("720.0", "72O.0")), r"line 8, column 4 \(FZ1\): '72O.0' is not a number"),
        (lambda ls: ls.__setitem__(7, ls[7].replace("3\t2.0", "5\t2.0", 1)), r"sample numbers are not consecutive: 2 then 5"),
        # No samples (before: accepted, and sagittal's IndexError); an empty file (before: "line 2").
        (lambda ls: (ls.__setitem__(3, "NumberOfSamples=0"), ls.__delitem__(slice(5, None))),
         r"line 4: NumberOfSamples=0: the file holds no samples"),
        # an infinite value (before: read silently; jaxmb gait then said "cannot find
        # the vertical", naming no file)
        (lambda ls: ls.__setitem__(7, ls[7].replace("720.0", "inf")),
         r"line 8, column 4 \(FZ1\): an infinite value \('inf'\); a gap is NaN"),
        (lambda ls: ls.__setitem__(7, ls[7].replace("720.0", "3.6e400")), r"line 8, column 4 \(FZ1\): an infinite value"),
        (lambda ls: ls.__delitem__(slice(0, len(ls))), r"walk\.forces: the file is empty"),
        (lambda ls: ls.__setitem__(slice(0, len(ls)), ["", "  ", ""]), r"walk\.forces: the file is empty"),
    ],
)
def test_forces_malformed(tmp_path, edit, pattern):
    lines = FORCES.split("\n")
    edit(lines)
    expect_error(write(tmp_path, "walk.forces", "\n".join(lines)), pattern, io.read_forces)


def test_trc_time_column_rounded_to_five_decimals_is_read(tmp_path):
    # 120 Hz with the Time column printed to 5 decimals (Cortex, OpenSim): not a
    # DataRate mismatch
    lines = TRC_MM.split("\n")
    lines[2] = lines[2].replace("50.00\t50.00", "120.00\t120.00")
    for i, t in zip(range(6, 9), ("0.00000", "0.00833", "0.01667")):
        fields = lines[i].split("\t")
        fields[1] = t
        lines[i] = "\t".join(fields)
    m = io.read_trc(write(tmp_path, "walk.trc", "\n".join(lines)))
    assert m.rate == 120.0 and m.source == "walk.trc"
    np.testing.assert_array_equal(m.time, [0.0, 0.00833, 0.01667])


@pytest.mark.parametrize("reader", ["read_trc", "read_forces"])
def test_latin1_file_is_read_with_a_warning(tmp_path, reader):
    # before: "'utf-8' codec can't decode byte 0xe9 in position ...", no file named
    if reader == "read_trc":
        name, text, line = "walk.trc", TRC_MM.replace("\twalk.trc", "\tC:\\Donn\u00e9es\\walk.trc"), 1
    else:
        name, text, line = "walk.forces", FORCES.replace("[Force Data]\n", "[Force Data]\nOperator=Andr\u00e9\n"), 2
    path = tmp_path / name
    path.write_bytes(text.encode("latin-1"))
    with pytest.warns(UserWarning, match=rf"{re.escape(name)}, line {line}: not UTF-8 text \(byte 0xe9\); read as Latin-1"):
        got = getattr(io, reader)(path)
    ref = getattr(io, reader)(write(tmp_path, "utf8-" + name, text))
    if reader == "read_trc":
        np.testing.assert_array_equal(got.xyz, ref.xyz)
    else:
        np.testing.assert_array_equal(got.force, ref.force)
    assert got.source == name


def test_c3d_that_ezc3d_cannot_read_names_the_file(tmp_path):
    pytest.importorskip("ezc3d")
    path = write(tmp_path, "notc3d.c3d", TRC_MM)
    with pytest.raises(ValueError, match=r"notc3d\.c3d: ezc3d cannot read it"):
        io.read_c3d(path)


# --------------------------------------------------------------------------------------
# OpenSim .mot / .sto
# --------------------------------------------------------------------------------------


def test_read_mot_known_values(tmp_path):
    t = io.read_mot(write(tmp_path, "walk.mot", MOT))
    assert t.labels == ("hip_flexion_r", "knee_angle_r")
    assert t.in_degrees is True and t.name == "walk_ik" and t.header == {"version": "1"}
    np.testing.assert_array_equal(t.time, [0.0, 0.01, 0.02])
    np.testing.assert_array_equal(t.values, [[10.0, -5.0], [11.0, -6.0], [12.0, -7.0]])
    np.testing.assert_array_equal(t.get("knee_angle_r"), [-5.0, -6.0, -7.0])
    np.testing.assert_array_equal(t.get("time"), t.time)
    with pytest.raises(KeyError, match="hip_flexion_r, knee_angle_r"):
        t.get("ankle_angle_r")


def test_read_sto_without_counts(tmp_path):
    # OpenSim 4 storage: no name line, no nRows/nColumns, no inDegrees; space-separated rows.
    text = "version=1\nOpenSimVersion=4.4\nDataType=double\nendheader\ntime\tFx\tFy\n0 1 2\n0.5 3 4\n"
    t = io.read_sto(write(tmp_path, "grf.sto", text))
    assert t.in_degrees is None and t.name is None
    assert t.header == {"version": "1", "OpenSimVersion": "4.4", "DataType": "double"}
    np.testing.assert_array_equal(t.values, [[1, 2], [3, 4]])


def test_mot_round_trip(tmp_path):
    rng = np.random.default_rng(2)
    table = io.Table(
        time=np.arange(30) / 100.0,
        labels=("a", "b", "c"),
        values=rng.normal(size=(30, 3)),
        in_degrees=False,
    )
    path = tmp_path / "rt.mot"
    io.write_mot(path, table, decimals=12)
    back = io.read_mot(path)
    assert back.labels == table.labels and back.in_degrees is False
    np.testing.assert_allclose(back.time, table.time, rtol=0, atol=1e-12)
    np.testing.assert_allclose(back.values, table.values, rtol=0, atol=1e-12)
    io.write_mot(path, table.replace(in_degrees=None))  # overwrite in place
    assert io.read_mot(path).in_degrees is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rt.mot"]


@pytest.mark.parametrize(
    "edit,pattern",
    [
        (lambda ls: ls.__delitem__(5), r"no 'endheader' line"),
        (lambda ls: ls.__setitem__(2, "nRows=4"), r"3 data rows, header field nRows says 4"),
        (lambda ls: ls.__setitem__(3, "nColumns=4"), r"line 7: 3 column labels, header field nColumns says 4"),
        (lambda ls: ls.__setitem__(4, "inDegrees=maybe"), r"line 5: header field inDegrees = 'maybe'"),
        (lambda ls: ls.__setitem__(6, "t\thip_flexion_r\tknee_angle_r"), r"line 7: the first column must be 'time'"),
        (lambda ls: ls.__setitem__(8, "0.01\t11.0"), r"line 9: expected 3 fields, got 2"),
        (lambda ls: ls.__setitem__(9, "0.02\t12.0\tx"), r"line 10, column 3 \(knee_angle_r\): 'x' is not a number"),
        (lambda ls: ls.__setitem__(2, "nRows=three"), r"line 3: header field nRows = 'three' is not a non-negative integer"),
        # an infinite value (before: read silently as inf)
        (lambda ls: ls.__setitem__(9, "0.02\t12.0\t1e400"),
         r"line 10, column 3 \(knee_angle_r\): an infinite value \('1e400'\); a gap is NaN"),
    ],
)
def test_mot_malformed(tmp_path, edit, pattern):
    lines = MOT.split("\n")
    edit(lines)
    expect_error(write(tmp_path, "walk.mot", "\n".join(lines)), pattern, io.read_mot)


# --------------------------------------------------------------------------------------
# Containers and writers
# --------------------------------------------------------------------------------------


def test_containers_validate():
    with pytest.raises(ValueError, match="duplicate labels A"):
        io.Markers(rate=100.0, time=np.zeros(2), labels=("A", "A"), xyz=np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match=r"xyz must have shape \(T, markers, 3\)"):
        io.Markers(rate=100.0, time=np.zeros(2), labels=("A",), xyz=np.zeros((2, 1, 2)))
    with pytest.raises(ValueError, match="rate must be positive"):
        io.Markers(rate=0.0, time=np.zeros(2), labels=("A",), xyz=np.zeros((2, 1, 3)))
    with pytest.raises(ValueError, match="free_moment must have shape"):
        io.ForcePlates(rate=1.0, time=np.zeros(2), force=np.zeros((2, 1, 3)), cop=np.zeros((2, 1, 3)), free_moment=np.zeros(2))
    with pytest.raises(ValueError, match=r"values must have shape \(T, 2\)"):
        io.Table(time=np.zeros(2), labels=("a", "b"), values=np.zeros((2, 3)))


def test_failed_write_leaves_old_file_and_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "walk.trc"
    path.write_text(TRC_MM)
    markers = io.read_trc(path)

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        io.write_trc(path, markers.replace(xyz=markers.xyz * 2))
    assert path.read_text() == TRC_MM
    assert [p.name for p in tmp_path.iterdir()] == ["walk.trc"]


# --------------------------------------------------------------------------------------
# C3D: the measured walking trial (see tests/data/README.md)
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gait():
    pytest.importorskip("ezc3d")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trial = io.read_c3d(GAIT_C3D)
    return trial, [str(w.message) for w in caught]


def test_c3d_markers(gait):
    trial, messages = gait
    m = trial.markers
    assert trial.point_rate == 100.0 and m.rate == 100.0
    assert m.xyz.shape == (487, 33, 3)
    np.testing.assert_allclose(m.time[[0, -1]], [0.0, 4.86])
    for label in ("RASI", "LASI", "VSAC", "RTHI", "RKNE", "RSHA", "RANK", "RHEE", "RTOE", "LTOE", "C7"):
        assert label in m.labels
    # The medial markers repeat the lateral labels in the file: renamed, with a warning.
    assert m.labels[22:26] == ("RKNE_2", "RANK_2", "LKNE_2", "LANK_2")
    assert m.descriptions[11] == "R.Knee" and m.descriptions[22] == "R.Knee.Medial"
    assert any("duplicate marker labels renamed" in s and "RKNE (R.Knee.Medial) -> RKNE_2" in s for s in messages)
    # Gaps (the subject out of view at the start and the end) are NaN and reported.
    assert any("gaps (NaN) in 33 of 33 markers" in s for s in messages)
    assert m.gaps()["RHEE"] == ((0, 133), (327, 487))
    # POINT:UNITS is mm: metres come out (a heel marker some cm above the floor, a
    # shoulder about 1.4 m up, the lab vertical being z).
    heel, shoulder = np.nanmean(m.get("RHEE"), axis=0), np.nanmean(m.get("RSHO"), axis=0)
    assert 0.03 < heel[2] < 0.15 and 1.2 < shoulder[2] < 1.6
    lateral, medial = np.nanmean(m.get("RKNE"), axis=0), np.nanmean(m.get("RKNE_2"), axis=0)
    assert 0.08 < np.linalg.norm(lateral - medial) < 0.16  # knee width


def test_c3d_force_plates(gait):
    trial, _ = gait
    f = trial.forces
    assert trial.analog_rate == 1000.0 and f.rate == 1000.0
    assert f.force.shape == (4870, 2, 3) and f.free_moment.shape == (4870, 2)
    assert trial.analog.shape == (4870, 28) and trial.analog_labels[:3] == ("F1X", "F1Y", "F1Z")
    assert trial.analog_units[3] == "Nmm"
    np.testing.assert_allclose(f.time[[0, -1]], [0.0, 4.869])
    fz = f.force[:, :, 2]
    # Body weight from the impulse: at steady walking each foot's stance impulse is the
    # weight times the step time (the time between the two heel strikes).
    strikes = [int(np.argmax(fz[:, k] > 20.0)) for k in range(2)]
    step = abs(strikes[0] - strikes[1]) / f.rate
    weights = [np.sum(np.where(fz[:, k] > 20.0, fz[:, k], 0.0)) / f.rate / step for k in range(2)]
    assert 500.0 < weights[0] < 800.0 and abs(weights[0] - weights[1]) < 0.05 * weights[0]
    for k in range(2):
        stance = fz[:, k] > 20.0
        duration = stance.sum() / f.rate
        assert 0.45 < duration < 0.7  # one stance phase per plate
        # Vertical force positive (up, on the subject), peaking above body weight
        # (the two humps of walking), mean about body weight over the stance.
        assert 1.1 * weights[k] < fz[:, k].max() < 1.5 * weights[k]
        assert 0.7 * weights[k] < fz[stance, k].mean() < 1.05 * weights[k]
        assert fz[stance, k].min() > 0
        # The centre of pressure lies inside the plate under load (corners in m) ...
        loaded = fz[:, k] > 100.0
        corners = f.corners[k]
        lo, hi = corners.min(axis=0), corners.max(axis=0)
        cop = f.cop[loaded, k]
        assert np.all((cop[:, :2] >= lo[:2]) & (cop[:, :2] <= hi[:2]))
        np.testing.assert_allclose(cop[:, 2], 0.0, atol=1e-9)
        # ... and is NaN on the unloaded plate, where it is undefined.
        assert np.isnan(f.cop[fz[:, k] < 20.0, k]).all()
        # Free moment in N m: a few N m at most in walking.
        assert np.all(np.abs(f.free_moment[stance, k]) < 10.0)
        assert np.nanmax(np.abs(f.free_moment[stance, k])) > 0.5
    # The plates measure about 0.5 x 0.6 m to 0.9 x 0.6 m (corners converted from mm).
    sizes = np.ptp(f.corners, axis=1)
    assert np.all(sizes[:, :2] > 0.4) and np.all(sizes[:, :2] < 1.0)


def test_c3d_free_moment_from_the_raw_channels(gait):
    # The free moment recomputed without ezc3d's Tz: each plate's wrench (F, M) from
    # its raw channels through the file's calibration matrix (TYPE 4, moments in
    # N mm), in the plate's own axes. About the vertical at the centre of pressure the
    # moment is T, with M . F = T (F . up) for every reference point (p x F is normal
    # to F); the subject's wrench is +-(F, M), so its free moment about up is
    # M . F / |F . up|, and F . up = +-Fz on a level plate. Only the ranges and sizes
    # were checked before: a flipped sign passed every test.
    import ezc3d

    trial, _ = gait
    raw = ezc3d.c3d(str(GAIT_C3D))
    fp = raw["parameters"]["FORCE_PLATFORM"]
    assert list(np.asarray(fp["TYPE"]["value"])) == [4, 4]
    cal = np.asarray(fp["CAL_MATRIX"]["value"], dtype=float)  # (6, 6, plates)
    channels = np.asarray(fp["CHANNEL"]["value"]) - 1  # (6, plates), 1-based in the file
    for k in range(2):
        w = trial.analog[:, channels[:, k]] @ cal[:, :, k].T  # (T, 6): Fx Fy Fz (N), Mx My Mz (N mm)
        F, M = w[:, :3], w[:, 3:] * 1e-3
        loaded = np.abs(F[:, 2]) > 100.0
        want = np.sum(M * F, axis=1)[loaded] / np.abs(F[loaded, 2])
        got = trial.forces.free_moment[loaded, k]
        assert np.abs(want).max() > 1.0  # N m: a moment to get the sign of
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_c3d_keep_raw_cop(gait):
    pytest.importorskip("ezc3d")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raw = io.read_c3d(GAIT_C3D, min_force=None, warn_gaps=False).forces
    assert np.isfinite(raw.cop).all()
    trial, _ = gait
    loaded = trial.forces.force[:, :, 2] >= 20.0
    np.testing.assert_array_equal(raw.cop[loaded], trial.forces.cop[loaded])


def test_c3d_lab_with_y_up_reads_as_the_same_trial(gait, tmp_path):
    """The trial with its lab frame turned (x, y, z) -> (x, z, -y), written by ezc3d:
    the plates' vertical is their normal, not the lab's z. Before: 0 of plate 1's
    577 loaded samples kept a centre of pressure (its sideways force was below 20 N)."""
    ezc3d = pytest.importorskip("ezc3d")
    R = np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])
    c = ezc3d.c3d(str(GAIT_C3D))
    points = c["data"]["points"]
    points[:3] = np.einsum("ij,jmt->imt", R, points[:3])
    c["data"]["points"] = points
    corners = np.asarray(c["parameters"]["FORCE_PLATFORM"]["CORNERS"]["value"])
    c["parameters"]["FORCE_PLATFORM"]["CORNERS"]["value"] = np.einsum("ij,jkp->ikp", R, corners)
    c.write(str(tmp_path / "y_up.c3d"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        turned = io.read_c3d(tmp_path / "y_up.c3d", warn_gaps=False).forces
    plates = gait[0].forces
    np.testing.assert_allclose(turned.force, plates.force @ R.T, atol=1e-9)
    np.testing.assert_array_equal(np.isnan(turned.cop), np.isnan(plates.cop))  # the same samples kept
    np.testing.assert_allclose(turned.cop, plates.cop @ R.T, atol=1e-12)
    np.testing.assert_allclose(turned.free_moment, plates.free_moment, atol=1e-9)  # about the normal


@pytest.mark.parametrize("point_units,moment_units", [("m", None), ("mm", "Nm")])
def test_c3d_moment_channels_in_other_units_than_the_extraction_assumes(tmp_path, point_units, moment_units):
    """ezc3d computes a plate's moments in FORCE_PLATFORM:UNITS x POINT:UNITS and never
    reads ANALOG:UNITS: points in m with moment channels in N mm (or N m channels with
    points in mm) gave centres of pressure hundreds of metres off and free moments
    1000x (5719 against 5.7 N m), silently. Refused, naming the file, plate and channel."""
    ezc3d = pytest.importorskip("ezc3d")
    c = ezc3d.c3d(str(GAIT_C3D))
    if point_units == "m":
        c["parameters"]["POINT"]["UNITS"]["value"] = ["m"]
        c["data"]["points"][:3] /= 1000.0
        fp = c["parameters"]["FORCE_PLATFORM"]
        fp["CORNERS"]["value"] = np.asarray(fp["CORNERS"]["value"]) / 1000.0
        fp["ORIGIN"]["value"] = np.asarray(fp["ORIGIN"]["value"]) / 1000.0
    if moment_units:
        units = list(c["parameters"]["ANALOG"]["UNITS"]["value"])
        c["parameters"]["ANALOG"]["UNITS"]["value"] = [moment_units if u.strip() == "Nmm" else u for u in units]
    c.write(str(tmp_path / "units.c3d"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the file's duplicate marker labels
        assert point_units == "m" or "Nmm" in io.read_c3d(GAIT_C3D, warn_gaps=False).analog_units  # the edit bites
        with pytest.raises(ValueError, match=r"units\.c3d, force platform 1: its moment channel \S+ \(analog channel "
                                             r"\d+\) is in 'N ?mm?' \(ANALOG:UNITS\), but .* computes its moments in "):  # fmt: skip
            io.read_c3d(tmp_path / "units.c3d", warn_gaps=False)


def test_c3d_missing_file(tmp_path):
    pytest.importorskip("ezc3d")
    with pytest.raises(FileNotFoundError, match="nothing.c3d"):
        io.read_c3d(tmp_path / "nothing.c3d")


def test_c3d_without_ezc3d_says_how_to_install(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_ezc3d(name, *args, **kwargs):
        if name == "ezc3d":
            raise ImportError("No module named 'ezc3d'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ezc3d)
    with pytest.raises(ImportError, match=r'pip install "jaxmb\[c3d\]"'):
        io.read_c3d(GAIT_C3D)


def test_c3d_to_trc_round_trip(gait, tmp_path):
    """The C3D markers written to a TRC and read back, gaps included."""
    trial, _ = gait
    path = tmp_path / "gait.trc"
    io.write_trc(path, trial.markers)
    with pytest.warns(UserWarning, match="33 of 33 markers"):
        back = io.read_trc(path)
    assert back.labels == trial.markers.labels
    np.testing.assert_allclose(back.xyz, trial.markers.xyz, rtol=0, atol=1e-9)
    assert back.gaps() == trial.markers.gaps()


def test_trc_marker_at_exactly_zero_is_a_gap(tmp_path):
    # some exporters write a gap as 0 0 0: read as a position at the lab's origin,
    # three such frames in a stance turned the ankle by 10 degrees, silently
    text = TRC_MM.replace("2\t0.02\t110.0\t21.5\t-2.0", "2\t0.02\t0\t0.000\t-0")
    path = write(tmp_path, "walk.trc", text)
    with pytest.warns(UserWarning, match=r"walk\.trc: markers at exactly \(0, 0, 0\), read as gaps: RHEE \(1 frames\)"):
        got = io.read_trc(path, warn_gaps=False)
    assert np.isnan(got.xyz[1, 0]).all() and np.isfinite(got.xyz[[0, 2]]).all() and np.isfinite(got.xyz[:, 1]).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kept = io.read_trc(path, warn_gaps=False, zeros_as_gaps=False)
    np.testing.assert_array_equal(kept.xyz[1, 0], 0.0)
    # one or two zero coordinates are a position
    path = write(tmp_path, "walk.trc", TRC_MM.replace("2\t0.02\t110.0\t21.5\t-2.0", "2\t0.02\t0\t0\t-2.0"))
    np.testing.assert_allclose(io.read_trc(path, warn_gaps=False).xyz[1, 0], [0.0, 0.0, -2e-3])


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_trc_in_utf16_with_its_byte_order_mark(tmp_path, encoding):
    # Windows' "Unicode" text: before, "line 1: expected 'PathFileType', got 'ÿþP\x00a...'"
    path = tmp_path / "walk.trc"
    data = TRC_MM.encode(encoding)
    path.write_bytes(data if encoding == "utf-16" else b"\xfe\xff" + data)
    np.testing.assert_allclose(io.read_trc(path, warn_gaps=False).xyz, XYZ_M, rtol=0, atol=1e-15)


@pytest.mark.parametrize("spelling", ["-nan(ind)", "nan(snan)", "1.#QNAN", "-1.#IND", "-1.#IND00", "NaN"])
def test_nan_as_c_runtimes_print_it(tmp_path, spelling):
    # MSVC's printf writes NaN as -nan(ind) (older ones 1.#QNAN, -1.#IND); C's strtod
    # (OpenSim's reader) takes it; before: "'-nan(ind)' is not a number"
    path = write(tmp_path, "walk.trc", TRC_MM.replace("2\t0.02\t110.0\t21.5\t-2.0", f"2\t0.02\t{spelling}\t21.5\t-2.0"))
    got = io.read_trc(path, warn_gaps=False)
    assert np.isnan(got.xyz[1, 0]).all() and np.isfinite(got.xyz[1, 1]).all()
    lines = FORCES.split("\n")
    lines[7] = lines[7].replace("720.0", spelling)
    assert np.isnan(io.read_forces(write(tmp_path, "walk.forces", "\n".join(lines))).force).sum() == 1
    # what only looks like one stays an error
    lines[7] = lines[7].replace(spelling, "nan(x")
    expect_error(write(tmp_path, "walk.forces", "\n".join(lines)), r"'nan\(x' is not a number", io.read_forces)
