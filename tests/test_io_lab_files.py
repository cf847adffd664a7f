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
    """An OpenSim ``.mot`` file of two coordinates, as OpenSim writes it (``%.8f``)."""
    header = header or ["version=1", f"nRows={len(time)}", "nColumns=3", "inDegrees=yes"]
    lines = ["walk_ik"] + header + ["endheader", "time\thip_flexion_r\tknee_angle_r"]
    for t, row in zip(time, values):
        lines.append("\t".join(fmt % v for v in (t, *row)))
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
