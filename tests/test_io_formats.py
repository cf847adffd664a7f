"""File-format defects of jaxmb.io, one test (or a few) each: OpenSim headers with free
text, truncated C3D files, times that a writer cannot keep, non-finite header numbers,
sample numbers, writers that wrote files their readers reject, digits lost on writing.
Tiny files in tmp_path; plain NumPy, no JAX."""

import os
import re
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_io import FORCES, MOT, TRC_MM, expect_error, write

from jaxmb import io
from jaxmb.io._c3d_params import _c3d_declared_frames

GAIT_C3D = Path(__file__).parent / "data" / "Gait.c3d"

# OpenSim's inverse kinematics (and Analyze) header: the name, key=value lines and
# free text before endheader.
IK_MOT = (
    "Coordinates\n"
    "version=1\n"
    "nRows=2\n"
    "nColumns=2\n"
    "inDegrees=yes\n"
    "\n"
    "Units are S.I. units (second, meters, Newtons, ...)\n"
    "If the header above contains a line with 'inDegrees', this indicates whether "
    "rotational values are in degrees (yes) or radians (no).\n"
    "\n"
    "endheader\n"
    "time\tknee_angle_r\n"
    "0.0\t1.0\n"
    "0.01\t2.0\n"
)


def edited(text, edit):
    lines = text.split("\n")
    edit(lines)
    return "\n".join(lines)


def no_temporaries(folder):
    return [p.name for p in Path(folder).iterdir() if p.name.endswith(".tmp")] == []


# --------------------------------------------------------------------------------------
# 1. OpenSim headers: free text, old and new key=value fields
# --------------------------------------------------------------------------------------


def test_read_mot_opensim_ik_header_with_free_text(tmp_path):
    # before: "ik.mot, line 7: expected 'key=value' in the header"
    t = io.read_mot(write(tmp_path, "ik.mot", IK_MOT))
    assert t.name == "Coordinates" and t.in_degrees is True and t.header == {"version": "1"}
    assert t.labels == ("knee_angle_r",)
    np.testing.assert_array_equal(t.time, [0.0, 0.01])
    np.testing.assert_array_equal(t.values, [[1.0], [2.0]])
    assert t.description.split("\n")[0] == "Units are S.I. units (second, meters, Newtons, ...)"
    assert t.description.split("\n")[1].startswith("If the header above contains a line with 'inDegrees'")


def test_read_sto_opensim4_and_simm_headers(tmp_path):
    # OpenSim 4 (STOFileAdapter): DataType, version, OpenSimVersion, no counts
    new = "DataType=double\nversion=3\nOpenSimVersion=4.1\nendheader\ntime\tFx\n0\t1\n0.5\t3\n"
    t = io.read_sto(write(tmp_path, "new.sto", new))
    assert t.header == {"DataType": "double", "version": "3", "OpenSimVersion": "4.1"}
    assert t.name is None and t.description is None and t.in_degrees is None
    np.testing.assert_array_equal(t.values, [[1.0], [3.0]])
    # SIMM's header: free-text counts and range (kept as the description)
    simm = "grf.mot\nversion=1\ndatacolumns 2\ndatarows 2\nrange 0.0 0.5\nendheader\ntime\tFx\n0\t1\n0.5\t3\n"
    t = io.read_mot(write(tmp_path, "simm.mot", simm))
    assert t.name == "grf.mot" and t.description == "datacolumns 2\ndatarows 2\nrange 0.0 0.5"


def test_mot_description_round_trip(tmp_path):
    t = io.read_mot(write(tmp_path, "ik.mot", IK_MOT))
    io.write_mot(tmp_path / "back.mot", t)
    back = io.read_mot(tmp_path / "back.mot")
    assert back.name == t.name and back.description == t.description and back.header == t.header
    np.testing.assert_array_equal(back.values, t.values)


# --------------------------------------------------------------------------------------
# 2. A truncated C3D file
# --------------------------------------------------------------------------------------


def test_truncated_c3d_is_an_error(tmp_path):
    # before: (240, 33, 3) without a word (ezc3d adjusts its header to what it read)
    pytest.importorskip("ezc3d")
    data = GAIT_C3D.read_bytes()
    path = tmp_path / "Gait_half.c3d"
    path.write_bytes(data[: len(data) // 2])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gaps, renamed labels
        with pytest.raises(ValueError, match=r"Gait_half\.c3d: truncated: 487 frames declared "
                           r"\(parameter POINT:FRAMES\), only 240 in the file"):
            io.read_c3d(path)


def _c3d_bytes(processor, first=1, last=50, frames=None, kind=2):
    """A 512-byte C3D header and a parameter section with group POINT and, unless
    frames is None, POINT:FRAMES of type kind (2 int16, 4 float)."""
    order = ">" if processor == 86 else "<"
    head = bytearray(512)
    head[0], head[1] = 2, 0x50
    head[6:10] = struct.pack(order + "HH", first, last)
    params = bytearray([1, 0x50, 1, processor])
    params += struct.pack("bb", 5, -1) + b"POINT" + struct.pack(order + "h", 3) + b"\x00"
    if frames is not None:
        if kind == 2:
            data = struct.pack(order + "h", frames if frames < 32768 else frames - 65536)
        else:
            ieee = struct.pack(order + "f", frames)
            # DEC: IEEE little-endian with the 16-bit words swapped, exponent 2 more
            data = bytes([ieee[2], ieee[3] + 1, ieee[0], ieee[1]]) if processor == 85 else ieee
        body = struct.pack("bB", kind, 0) + data
        params += struct.pack("bb", 6, 1) + b"FRAMES" + struct.pack(order + "h", 2 + len(body)) + body
    params += bytes(2)  # the end: a record with a name of length 0
    return bytes(head) + bytes(params) + bytes(512 - len(params))


@pytest.mark.parametrize(
    "processor,frames,kind,expected",
    [
        (84, None, 2, (50, "header frames 1 to 50")),  # Intel, no POINT:FRAMES: the header
        (84, 487, 2, (487, "parameter POINT:FRAMES")),
        (85, 40000, 2, (40000, "parameter POINT:FRAMES")),  # DEC, written unsigned
        (86, 300, 2, (300, "parameter POINT:FRAMES")),  # MIPS: big-endian
        (84, 70000, 4, (70000, "parameter POINT:FRAMES")),  # past 65535: a float
        (85, 70000, 4, (70000, "parameter POINT:FRAMES")),  # a DEC float
        (86, 70000, 4, (70000, "parameter POINT:FRAMES")),
    ],
)
def test_c3d_declared_frames_from_raw_bytes(tmp_path, processor, frames, kind, expected):
    path = tmp_path / "x.c3d"
    path.write_bytes(_c3d_bytes(processor, frames=frames, kind=kind))
    assert _c3d_declared_frames(path) == expected


def test_c3d_declared_frames_of_the_walking_trial():
    assert _c3d_declared_frames(GAIT_C3D) == (487, "parameter POINT:FRAMES")


# --------------------------------------------------------------------------------------
# 3. write_forces keeps the times or refuses them
# --------------------------------------------------------------------------------------


def _plates(time, rate=1000.0):
    T = len(time)
    rng = np.random.default_rng(3)
    return io.ForcePlates(rate=rate, time=time, force=rng.normal(size=(T, 1, 3)) * 300,
                          cop=rng.normal(size=(T, 1, 3)) * 0.2, free_moment=rng.normal(size=(T, 1)))


@pytest.mark.parametrize(
    "time,pattern",
    [
        # before: read back as 0, .001, .002, .003
        ([0.0, 0.001, 0.005, 0.01], r"time\[2\] = 0\.005 s, but a sample every 1/1000 s from time\[0\] = 0\.0 s gives 0\.002 s"),
        # before: read back as 0.012
        (0.0123456 + np.arange(4) / 1000.0, r"time\[0\] = 0\.0123456 s is 12\.3456\d* samples at 1000 Hz, not a whole number"),
        ([0.0, 0.001, np.nan, 0.003], r"time\[2\] = nan is not a finite time"),
    ],
)
def test_write_forces_refuses_times_it_cannot_keep(tmp_path, time, pattern):
    path = tmp_path / "walk.forces"
    with pytest.raises(ValueError, match=r"write_forces\(walk\.forces\): " + pattern):
        io.write_forces(path, _plates(np.asarray(time)))
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.parametrize("rate,first", [(1000.0, 12), (1000.0 / 3.0, 5), (29.97002997, 0), (2000.0, -4)])
def test_write_forces_round_trip_is_exact(tmp_path, rate, first):
    plates = _plates((first + np.arange(6)) / rate, rate=rate)
    io.write_forces(tmp_path / "rt.forces", plates)
    back = io.read_forces(tmp_path / "rt.forces")
    assert back.rate == plates.rate  # before: SampleRate=333.333333
    np.testing.assert_array_equal(back.time, plates.time)  # the start time to the last bit
    np.testing.assert_array_equal(back.force, plates.force)  # written exactly by default
    np.testing.assert_allclose(back.cop, plates.cop, rtol=1e-15, atol=0)  # m -> mm -> m
    assert (tmp_path / "rt.forces").read_text().count("SampleRate=1000.000000\n") == (rate == 1000.0)


def test_write_forces_refuses_an_empty_table(tmp_path):
    empty = io.ForcePlates(rate=100.0, time=np.zeros(0), force=np.zeros((0, 1, 3)),
                           cop=np.zeros((0, 1, 3)), free_moment=np.zeros((0, 1)))
    with pytest.raises(ValueError, match=r"write_forces\(e\.forces\): no samples"):
        io.write_forces(tmp_path / "e.forces", empty)


# --------------------------------------------------------------------------------------
# 4. .mot times must increase
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit,pattern",
    [
        (lambda ls: ls.__setitem__(8, "0.00\t11.0\t-6.0"), r"line 9: time repeats 0\.0 s after 0\.0 s \(line 8\)"),
        (lambda ls: ls.__setitem__(9, "0.005\t12.0\t-7.0"), r"line 10: time goes back to 0\.005 s after 0\.01 s \(line 9\)"),
        (lambda ls: ls.__setitem__(7, "nan\t10.0\t-5.0"), r"line 8: time nan is not a finite number"),
        (lambda ls: ls.__setitem__(9, "inf\t12.0\t-7.0"), r"line 10: time inf is not a finite number"),
    ],
)
def test_mot_times_must_increase(tmp_path, edit, pattern):
    expect_error(write(tmp_path, "walk.mot", edited(MOT, edit)), pattern, io.read_mot)


# --------------------------------------------------------------------------------------
# 5. Header numbers inf / nan name the file and the field
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,text,reader,pattern",
    [
        ("walk.trc", TRC_MM.replace("\t3\t2\tmm", "\tinf\t2\tmm"), io.read_trc,
         r"line 3: header field NumFrames = 'inf' is not a non-negative integer"),
        ("walk.trc", TRC_MM.replace("\t3\t2\tmm", "\t3\tnan\tmm"), io.read_trc,
         r"line 3: header field NumMarkers = 'nan' is not a non-negative integer"),
        ("walk.trc", TRC_MM.replace("50.00\t50.00\t3", "inf\t50.00\t3"), io.read_trc,
         r"line 3: header field DataRate = 'inf' must be a positive finite number"),
        ("walk.forces", FORCES.replace("NumberOfForcePlates=2", "NumberOfForcePlates=inf"), io.read_forces,
         r"line 2: header field NumberOfForcePlates = 'inf' is not a non-negative integer"),
        ("walk.forces", FORCES.replace("NumberOfSamples=4", "NumberOfSamples=nan"), io.read_forces,
         r"line 4: header field NumberOfSamples = 'nan' is not a non-negative integer"),
        ("walk.forces", FORCES.replace("SampleRate=1000.000000", "SampleRate=inf"), io.read_forces,
         r"line 3: header field SampleRate = 'inf' must be a positive finite number"),
        ("walk.forces", FORCES.replace("SampleRate=1000.000000", "SampleRate=nan"), io.read_forces,
         r"line 3: header field SampleRate = 'nan' must be a positive finite number"),
        ("walk.mot", MOT.replace("nRows=3", "nRows=inf"), io.read_mot,
         r"line 3: header field nRows = 'inf' is not a non-negative integer"),
        ("walk.mot", MOT.replace("nColumns=3", "nColumns=nan"), io.read_mot,
         r"line 4: header field nColumns = 'nan' is not a non-negative integer"),
    ],
)
def test_non_finite_header_numbers_name_the_file_and_field(tmp_path, name, text, reader, pattern):
    # before: a bare OverflowError or ValueError, or "ForcePlates: rate must be positive"
    expect_error(write(tmp_path, name, text), pattern, reader)


# --------------------------------------------------------------------------------------
# 6. .forces sample numbers
# --------------------------------------------------------------------------------------


def test_forces_sample_numbers_must_be_integers(tmp_path):
    # before: read, every time shifted by half a sample
    text = FORCES
    for n in range(1, 5):
        text = text.replace(f"\n{n}\t", f"\n{n + 0.5}\t")
    expect_error(write(tmp_path, "walk.forces", text),
                 r"line 6, column 1 \(Sample\): sample number 1\.5 is not an integer", io.read_forces)


def test_forces_skipped_sample_names_the_file_line(tmp_path):
    # before: "(data row 3)"; line 8 of the file
    text = edited(FORCES, lambda ls: ls.__setitem__(7, ls[7].replace("3\t2.0", "5\t2.0", 1)))
    expect_error(write(tmp_path, "walk.forces", text),
                 r"walk\.forces, line 8: sample numbers are not consecutive: 2 then 5", io.read_forces)


# --------------------------------------------------------------------------------------
# 7. write_trc: only files read_trc reads, with every digit
# --------------------------------------------------------------------------------------


def _markers(T=5, rate=100.0, labels=("A", "B"), time=None):
    rng = np.random.default_rng(4)
    xyz = rng.normal(size=(T, len(labels), 3))
    xyz[1, 0] = np.nan
    return io.Markers(rate=rate, time=np.arange(T) / rate if time is None else time, labels=labels, xyz=xyz)


@pytest.mark.parametrize(
    "markers,pattern",
    [
        # before: written, then "the Time column advances 0.02 s a frame" on reading
        (lambda: _markers(T=4, time=np.array([0.0, 0.02, 0.04, 0.06])),
         r"Markers\.time advances 0\.02 s a frame \(50 Hz\) but Markers\.rate = 100 Hz"),
        (lambda: _markers(T=4, time=np.array([0.0, 0.01, 0.05, 0.06])),  # one jump: its frame
         r"frame 3: Markers\.time goes from 0\.01 to 0\.05 s, but rate = 100 Hz"),
        (lambda: _markers(T=4, time=np.array([0.0, 0.01, 0.03, 0.03])),
         r"frame 3: Markers\.time goes from 0\.01 to 0\.03 s, but rate = 100 Hz"),
        (lambda: _markers(labels=("A", "")), r"marker 2 label '' cannot be written"),
        (lambda: _markers(labels=("A", "B\tC")), r"marker 2 label 'B\\tC' cannot be written"),
        (lambda: _markers(labels=("A ", "B")), r"marker 1 label 'A ' cannot be written"),
        (lambda: _markers().replace(xyz=np.where(np.arange(3) == 2, np.inf, _markers().xyz)),
         r"frame 1, marker A Z = inf: a coordinate must be finite"),
        # before: written, then "marker B has 1 of its 3 coordinates empty" on reading
        (lambda: _markers().replace(xyz=_markers().xyz * np.where(np.arange(3) == 1, np.nan, 1.0)[None, None]),
         r"frame 1, marker A has NaN in 1 of its 3 coordinates: a gap is NaN in all three"),
    ],
)
def test_write_trc_refuses_what_read_trc_rejects(tmp_path, markers, pattern):
    with pytest.raises(ValueError, match=r"write_trc\(walk\.trc\)[:,] " + pattern):
        io.write_trc(tmp_path / "walk.trc", markers())
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("rate", [29.97002997, 1000.0 / 3.0, 120.0])
def test_write_trc_round_trip_is_exact(tmp_path, rate):
    # before: DataRate written with :g (29.97, 333.333): read_trc(...).rate != rate
    markers = _markers(T=7, rate=rate)
    io.write_trc(tmp_path / "m.trc", markers, units="m")
    io.write_trc(tmp_path / "mm.trc", markers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the gap
        in_m, in_mm = io.read_trc(tmp_path / "m.trc"), io.read_trc(tmp_path / "mm.trc")
    for back in (in_m, in_mm):
        assert back.rate == rate
        np.testing.assert_array_equal(back.time, markers.time)
    np.testing.assert_array_equal(in_m.xyz, markers.xyz)  # in the file's units, exactly
    np.testing.assert_allclose(in_mm.xyz, markers.xyz, rtol=1e-15, atol=0)  # m -> mm -> m
    if rate == 120.0:
        assert (tmp_path / "m.trc").read_text().split("\n")[2].startswith("120\t120\t7\t2\tm\t")


# --------------------------------------------------------------------------------------
# 8. write_mot: every digit, and names that read back as names
# --------------------------------------------------------------------------------------


def test_write_mot_round_trip_is_exact(tmp_path):
    # before: %.8f wrote 1e-9 as 0 and 1/120 s with an error of 3e-9 s
    table = io.Table(time=np.arange(4) / 120.0, labels=("a", "b"),
                     values=np.array([[1e-9, -2.5], [1.0 / 3.0, 1e300], [np.nan, 0.0], [7.0, -1e-300]]))
    io.write_mot(tmp_path / "rt.mot", table)
    back = io.read_mot(tmp_path / "rt.mot")
    np.testing.assert_array_equal(back.time, table.time)
    np.testing.assert_array_equal(back.values, table.values)
    io.write_mot(tmp_path / "rt.mot", table, decimals=3)  # the fixed-point knob stays
    np.testing.assert_array_equal(io.read_mot(tmp_path / "rt.mot").values[0], [0.0, -2.5])


@pytest.mark.parametrize(
    "change,pattern",
    [
        # before: read back as a header field 'a' = 'b'
        (dict(name="a=b"), r"Table\.name 'a=b' cannot be written to the header"),
        # before: a file that read_mot could not read
        (dict(name="endheader"), r"Table\.name 'endheader' cannot be written"),
        (dict(name="two\nlines"), r"Table\.name 'two\\nlines' cannot be written"),
        (dict(description="ok\nx=1"), r"a description line 'x=1' cannot be written"),
        (dict(header={"a=b": "1"}), r"header entry 'a=b': '1' cannot be written"),
        (dict(labels=("a", "")), r"column label '' cannot be written"),
        # before: read back without the spaces or the empty line
        (dict(labels=(" a", "b")), r"column label ' a' cannot be written .*white space at an end"),
        # before: written, and read back with Table.get("time") returning the time column
        (dict(labels=("a", "time")), r"a data column cannot be labelled 'time'"),
        (dict(header={"DataType ": "double"}), r"header entry 'DataType ': 'double' has white space"),
        (dict(name=" walk"), r"Table\.name ' walk' has white space at an end"),
        (dict(description="one\n\nthree"), r"Table\.description 'one\\n\\nthree' has an empty line"),
        (dict(time=np.array([0.0, 0.01, 0.01])), r"row 3: time repeats 0\.01 s after 0\.01 s \(row 2\)"),
    ],
)
def test_write_mot_refuses_what_read_mot_reads_otherwise(tmp_path, change, pattern):
    table = io.Table(time=np.array([0.0, 0.01, 0.02]), labels=("a", "b"), values=np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"write_mot\(walk\.mot\)[:,] " + pattern):
        io.write_mot(tmp_path / "walk.mot", table.replace(**change))
    assert list(tmp_path.iterdir()) == []


def test_write_mot_file_name_with_equals_sign(tmp_path):
    table = io.Table(time=np.array([0.0, 0.01]), labels=("a",), values=np.ones((2, 1)))
    io.write_mot(tmp_path / "trial=1.mot", table)  # the name line is the file's name
    back = io.read_mot(tmp_path / "trial=1.mot")
    assert back.name == "trial_1.mot" and back.header == {"version": "1"}


# --------------------------------------------------------------------------------------
# 9. TRC values out of place, and infinite coordinates
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "edit,pattern",
    [
        # before: "line 3, header field Units: unknown length units '50.00'"
        (lambda ls: ls.__setitem__(2, "50.00\t50.00\t3\t2\t50.00\t1\t3"),
         r"line 3 has 7 values for 8 fields \(line 2: DataRate, CameraRate, NumFrames, NumMarkers, Units"),
        # before: read, the last coordinate a gap (the row's trailing tab taken for it)
        (lambda ls: ls.__setitem__(6, "1\t0.00\t100.0\t20.5\t-3.0\t250.0\t10.0\t"),
         r"line 7 has 7 values for 8 fields \(Frame#, Time, 2 markers x 3\): marker RTOE has 1 of its 3 coordinates empty"),
        # before: read, inf kept as a coordinate
        (lambda ls: ls.__setitem__(7, ls[7].replace("110.0", "inf")), r"line 8, column 3 \(RHEE X\): 'inf' is not a finite number"),
        (lambda ls: ls.__setitem__(8, ls[8].replace("3.0\t", "-Infinity\t")), r"line 9, column 8 \(RTOE Z\): '-Infinity' is not a finite number"),
        (lambda ls: ls.__setitem__(8, ls[8].replace("0.04", "nan")), r"line 9, column 2 \(Time\): 'nan' is not a finite number"),
    ],
)
def test_trc_values_out_of_place_or_infinite(tmp_path, edit, pattern):
    expect_error(write(tmp_path, "walk.trc", edited(TRC_MM, edit)), pattern, io.read_trc)


def test_trc_whole_marker_gap_still_reads(tmp_path):
    # a gap leaves its marker's three fields empty, at the end of a row too
    text = edited(TRC_MM, lambda ls: ls.__setitem__(6, "1\t0.00\t100.0\t20.5\t-3.0\t\t\t\t"))
    with pytest.warns(UserWarning, match="RTOE 1 frames"):
        m = io.read_trc(write(tmp_path, "walk.trc", text))
    assert m.gaps() == {"RTOE": ((0, 1),)}


# --------------------------------------------------------------------------------------
# Writers: a failure names the target, leaves no temporary and the old file as it was
# --------------------------------------------------------------------------------------


def test_write_into_missing_folder_names_the_target(tmp_path):
    target = tmp_path / "no_such_folder" / "walk.mot"
    table = io.Table(time=np.array([0.0]), labels=("a",), values=np.ones((1, 1)))
    with pytest.raises(FileNotFoundError) as info:
        io.write_mot(target, table)
    assert str(target) in str(info.value) and ".tmp" not in str(info.value), str(info.value)


def test_disk_full_names_the_target(tmp_path, monkeypatch):
    path = write(tmp_path, "walk.trc", TRC_MM)
    markers = io.read_trc(path)

    def full(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=re.escape(f"No space left on device: '{path}'")) as info:
        io.write_trc(path, markers)
    assert info.value.errno == 28 and ".tmp" not in str(info.value)
    assert path.read_text() == TRC_MM and no_temporaries(tmp_path)
