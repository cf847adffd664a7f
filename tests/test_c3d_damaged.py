"""Damaged C3D files (issue 38, item 7): each a copy of tests/data/Gait.c3d with one
header field or parameter overwritten in its bytes, refused by read_c3d naming the
file and the parameter (before: read silently, times shifted, forces of 0 or 1e31 N,
markers at the origin, or a crash inside ezc3d). The bytes are patched with a parser
of the parameter section written here, apart from the library's; ezc3d reads the
patched value back where it can read the file at all."""

import math
import re
import shutil
import struct
import warnings
from pathlib import Path

import numpy as np
import pytest

from jaxmb import cli, io

GAIT_C3D = Path(__file__).parent / "data" / "Gait.c3d"
ezc3d = pytest.importorskip("ezc3d")


def _records(data: bytes) -> dict:
    """{"GROUP:NAME": (offset of the data, type, dimensions)} of a C3D parameter
    section (little-endian integers: Gait.c3d is a DEC file)."""
    pos = (data[0] - 1) * 512 + 4
    groups, found = {}, {}
    while True:
        length, group = struct.unpack("bb", data[pos:pos + 2])
        if length == 0:
            break
        name = data[pos + 2:pos + 2 + abs(length)].decode("latin-1").upper()
        at = pos + 2 + abs(length)
        (step,) = struct.unpack("<h", data[at:at + 2])
        if group < 0:
            groups[-group] = name
        else:
            found[(group, name)] = at + 2
        if step <= 0:
            break
        pos = at + step
    out = {}
    for (group, name), body in found.items():
        kind, ndim = struct.unpack("bB", data[body:body + 2])
        out[f"{groups[group]}:{name}"] = (body + 2 + ndim, kind, tuple(data[body + 2:body + 2 + ndim]))
    return out


def _encode(kind: int, value, processor: int) -> bytes:
    """One parameter value in the file's format; a DEC float (processor 85) is IEEE
    with its 16-bit words swapped and the exponent 2 more."""
    if kind == 2:
        return struct.pack("<h", value)
    ieee = struct.pack("<f", value)
    if processor != 85 or not any(ieee):
        return ieee
    return bytes([ieee[2], (ieee[3] + 1) & 0xFF, ieee[0], ieee[1]])


def damaged(tmp_path, key: str, values: dict, name: str = "bad.c3d") -> Path:
    """A copy of Gait.c3d with entries of parameter ``key`` ({flat index: value})
    overwritten."""
    data = bytearray(GAIT_C3D.read_bytes())
    processor = data[(data[0] - 1) * 512 + 3]
    assert processor == 85  # DEC: the encoding above
    offset, kind, _ = _records(data)[key]
    for i, value in values.items():
        data[offset + i * abs(kind):offset + (i + 1) * abs(kind)] = _encode(kind, value, processor)
    path = tmp_path / name
    path.write_bytes(bytes(data))
    return path


def _ezc3d_value(path, key):
    group, name = key.split(":")
    return np.asarray(ezc3d.c3d(str(path))["parameters"][group][name]["value"], dtype=float)


def _read(path, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gaps, renamed labels
        return io.read_c3d(path, warn_gaps=False, **kwargs)


NAN, INF = float("nan"), float("inf")

# key, {flat index: value}, what the error says after "bad.c3d, parameter KEY: "
DAMAGES = [
    ("POINT:RATE", {0: 1e-30}, r"1e-30 Hz, not a sampling rate \(expected 1 Hz to 100000 Hz\)"),
    ("POINT:RATE", {0: 1e38}, r"1e\+38 Hz, not a sampling rate"),
    ("POINT:RATE", {0: NAN}, r"nan Hz, not a sampling rate"),  # ezc3d: "vector::_M_default_append"
    ("POINT:RATE", {0: 50.0}, r"50 Hz, but the header's frame rate is 100 Hz"),
    ("ANALOG:RATE", {0: 1e-3}, r"0\.001 Hz, not a sampling rate"),  # an IndexError before
    ("ANALOG:RATE", {0: 1e9}, r"1e\+09 Hz, not a sampling rate"),  # ezc3d: std::bad_alloc, or a hang
    ("ANALOG:RATE", {0: 500.0}, r"500 Hz makes 5 samples per frame at POINT:RATE 100 Hz, but the header has 280 "
                                r"analog values per frame for the 28 channels of ANALOG:USED \(10 each\)"),
    ("POINT:USED", {0: 0}, r"0 points, but the header has 33 per frame"),
    ("POINT:USED", {0: 30000}, r"30000 points, but the header has 33 per frame"),
    ("ANALOG:USED", {0: 0}, r"no channels, but the header has 280 analog values per frame"),
    ("POINT:FRAMES", {0: 440}, r"440 frames, but the header's first and last frame \(1 to 487\) make 487"),
    ("POINT:SCALE", {0: 0.0}, r"a scale factor of 0, expected finite and non-zero"),
    ("POINT:SCALE", {0: NAN}, r"a scale factor of nan"),
    ("ANALOG:SCALE", dict.fromkeys(range(28), 0.0), r"a scale factor of 0 \(channel 1 of 28\)"),
    ("ANALOG:SCALE", {2: 0.0}, r"a scale factor of 0 \(channel 3 of 28\)"),  # F1Z: plate 1 weightless
    ("ANALOG:SCALE", {20: INF}, r"a scale factor of inf \(channel 21 of 28\)"),
    ("ANALOG:GEN_SCALE", {0: 0.0}, r"a scale factor of 0,"),
    ("FORCE_PLATFORM:CORNERS", {0: NAN}, r"force platform 1 has an entry of nan"),
    ("FORCE_PLATFORM:CORNERS", {12 + 4: NAN}, r"force platform 2 has an entry of nan"),  # (3, 4, 2): plate 2 from 12
    ("FORCE_PLATFORM:ORIGIN", {4: NAN}, r"force platform 2 has an entry of nan"),  # (3, 2)
    ("FORCE_PLATFORM:CAL_MATRIX", {7: INF}, r"force platform 1 has an entry of inf"),  # (6, 6, 2)
    ("FORCE_PLATFORM:CAL_MATRIX", {36: INF}, r"force platform 2 has an entry of inf"),
]


@pytest.mark.parametrize("key,values,message", DAMAGES, ids=[f"{d[0]}-{i}" for i, d in enumerate(DAMAGES)])
def test_a_damaged_parameter_is_refused_naming_the_file_and_the_parameter(tmp_path, key, values, message):
    path = damaged(tmp_path, key, values)
    if not (key == "POINT:RATE" and math.isnan(values[0])) and key != "ANALOG:RATE":  # ezc3d fails on those
        # the damage is in the file: ezc3d reads it back
        back = _ezc3d_value(path, key)
        for i, value in values.items():
            np.testing.assert_allclose(back.ravel(order="F")[i], value, rtol=1e-6)
    with pytest.raises(ValueError, match=rf"^bad\.c3d, parameter {re.escape(key)}: {message}"):
        _read(path)


def test_a_damaged_first_frame_is_refused(tmp_path):
    # header word 4, the first frame, 1 -> 48: every time 0.47 s late, silently
    data = bytearray(GAIT_C3D.read_bytes())
    assert struct.unpack("<HH", data[6:10]) == (1, 487)
    data[6:8] = struct.pack("<H", 48)
    path = tmp_path / "bad.c3d"
    path.write_bytes(bytes(data))
    assert ezc3d.c3d(str(path))["header"]["points"]["first_frame"] == 47  # ezc3d's, 0-based
    with pytest.raises(ValueError, match=r"^bad\.c3d, parameter POINT:FRAMES: 487 frames, but the header's "
                       r"first and last frame \(48 to 487\) make 440: a damaged header"):  # fmt: skip
        _read(path)


def _first_force(trial, plate):
    return np.linalg.norm(trial.forces.force[0, plate])


def test_a_force_beyond_max_force_names_the_scales(tmp_path):
    # ANALOG:GEN_SCALE 1 -> 1e30: forces of 1e31 N, read silently before
    path = damaged(tmp_path, "ANALOG:GEN_SCALE", {0: 1e30})
    np.testing.assert_allclose(_ezc3d_value(path, "ANALOG:GEN_SCALE"), [1e30], rtol=1e-6)
    good = _read(GAIT_C3D)
    expected = _first_force(good, 0) * 1e30  # the forces scale with GEN_SCALE
    with pytest.raises(ValueError, match=r"^bad\.c3d, force platform 1: a force of (\S+) N at sample 1 "
                       r"\(t = 0 s\), beyond max_force=50000 N: check ANALOG:GEN_SCALE \(1e\+30\), ANALOG:SCALE "
                       r"of its force channels \(-0\.1221, -0\.1221, -0\.1221\) and FORCE_PLATFORM:CAL_MATRIX") as e:  # fmt: skip
        _read(path)
    got = float(re.search(r"a force of (\S+) N", str(e.value)).group(1))
    np.testing.assert_allclose(got, expected, rtol=5e-3)  # printed to 3 digits
    # max_force=None reads it: the good file's forces times 1e30
    bad = _read(path, max_force=None)
    np.testing.assert_allclose(bad.forces.force, good.forces.force * 1e30, rtol=1e-6)


def test_a_huge_calibration_entry_is_refused(tmp_path):
    # a finite but huge FORCE_PLATFORM:CAL_MATRIX entry (Fx from channel 1): 1e37 N
    path = damaged(tmp_path, "FORCE_PLATFORM:CAL_MATRIX", {0: 1e37})
    with pytest.raises(ValueError, match=r"^bad\.c3d, force platform 1: a force of \S+e\+37 N at sample 1 .*"
                       r"FORCE_PLATFORM:CAL_MATRIX \(entries up to 1e\+37\)"):  # fmt: skip
        _read(path)


def test_max_force_on_the_measured_trial():
    # the first sample whose force exceeds max_force, found here from the forces read
    # without a limit
    free = _read(GAIT_C3D, max_force=None)
    size = np.linalg.norm(free.forces.force, axis=2)  # (T, plates)
    peak = size.max()
    assert 500 < peak < 1000
    limit = peak - 50.0
    plate = int(np.argmax((size > limit).any(axis=0)))  # the first plate checked with such a sample
    i = int(np.argmax(size[:, plate] > limit))
    with pytest.raises(ValueError, match=rf"^Gait\.c3d, force platform {plate + 1}: a force of {size[i, plate]:.3g} N "
                       rf"at sample {i + 1} \(t = {free.forces.time[i]:.4g} s\), beyond max_force={limit:g} N"):  # fmt: skip
        _read(GAIT_C3D, max_force=limit)
    same = _read(GAIT_C3D, max_force=peak + 1e-9)
    np.testing.assert_array_equal(same.forces.force, free.forces.force)
    for bad in (0.0, -1.0, NAN):
        with pytest.raises(ValueError, match=r"read_c3d: max_force must be > 0 N or None"):
            _read(GAIT_C3D, max_force=bad)


def test_the_file_written_by_ezc3d_reads_as_the_original(tmp_path):
    # Gait.c3d is a DEC file; ezc3d writes Intel floats: the checks read both alike
    ezc3d.c3d(str(GAIT_C3D)).write(str(tmp_path / "intel.c3d"))
    data = (tmp_path / "intel.c3d").read_bytes()
    assert data[(data[0] - 1) * 512 + 3] == 84
    a, b = _read(GAIT_C3D), _read(tmp_path / "intel.c3d")
    np.testing.assert_allclose(a.markers.xyz, b.markers.xyz, rtol=0, atol=1e-6)  # written as float32 mm
    np.testing.assert_array_equal(a.markers.time, b.markers.time)
    np.testing.assert_allclose(a.forces.force, b.forces.force, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(a.forces.time, b.forces.time)
    assert (a.point_rate, a.analog_rate) == (b.point_rate, b.analog_rate) == (100.0, 1000.0)


def test_constructors_name_the_file_of_a_bad_rate():
    # before: "ForcePlates: rate must be positive, got 0.0", naming no file
    T = 3
    with pytest.raises(ValueError, match=r"^ForcePlates of walk\.forces: rate must be positive, got 0\.0"):
        io.ForcePlates(rate=0.0, time=np.arange(T), force=np.zeros((T, 1, 3)), cop=np.zeros((T, 1, 3)),
                       free_moment=np.zeros((T, 1)), source="walk.forces")  # fmt: skip
    with pytest.raises(ValueError, match=r"^Markers of walk\.trc: rate must be positive, got nan"):
        io.Markers(rate=NAN, time=np.arange(T), labels=("A",), xyz=np.zeros((T, 1, 3)), source="walk.trc")
    with pytest.raises(ValueError, match=r"^Markers: rate must be positive"):  # no source: as before
        io.Markers(rate=0.0, time=np.arange(T), labels=("A",), xyz=np.zeros((T, 1, 3)))


def test_the_command_line_names_a_damaged_file(tmp_path, capsys):
    # POINT:USED = 0: before, "sagittal: bad.c3d: no marker 'RASI'; the labels are: " (no
    # markers read), as if the labels were wrong
    path = damaged(tmp_path, "POINT:USED", {0: 0})
    assert cli.main(["gait", "--c3d", str(path), "--body-mass", "60", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("jaxmb gait: error: bad.c3d, parameter POINT:USED: 0 points"), err
    assert not (tmp_path / "o").exists()


def test_the_command_line_names_the_file_of_an_error_that_does_not(tmp_path, capsys, monkeypatch):
    # an error from the reader (or sagittal) that names no file gets the file's name
    path = tmp_path / "walk.c3d"
    shutil.copy(GAIT_C3D, path)

    def read_c3d(*args, **kwargs):
        raise ValueError("ForcePlates: rate must be positive, got 0.0")

    monkeypatch.setattr(io, "read_c3d", read_c3d)
    assert cli.main(["gait", "--c3d", str(path), "--body-mass", "60", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == f"jaxmb gait: error: {path}: ForcePlates: rate must be positive, got 0.0", err
    # an error that names the file is not named twice

    def truncated(*args, **kwargs):
        raise ValueError("walk.c3d: truncated")

    monkeypatch.setattr(io, "read_c3d", truncated)
    assert cli.main(["gait", "--c3d", str(path), "--body-mass", "60", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "jaxmb gait: error: walk.c3d: truncated", err
