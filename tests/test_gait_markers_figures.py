"""Issue 38, item 3: a Harrington hip from two ASIS and two PSIS markers (the sacrum
at the PSIS midpoint); item 17 (part): the gait figures state their sign convention
and units, draw no bar for a value below round-off, and plot stance in % of stance."""

import pathlib
import re

import numpy as np
import pytest

from jaxmb import cli, gait, io

HERE = pathlib.Path(__file__).parent


def _pelvis_and_leg(T=30, psis=None):
    """Markers of a level pelvis 250 mm wide and 160 mm deep walking along +x (z up),
    as in test_gait.py's hand-worked Harrington test, with its sacrum VSAC and, given
    a lateral/vertical offset ``psis`` (m), two PSIS markers at VSAC +- psis (the
    sacrum is not their midpoint to the last bit: 'SACM' is, computed here)."""
    mid = np.stack([0.5 + 1.2 * np.arange(T) / 100.0, np.zeros(T), np.full(T, 1.0)], -1)
    right = np.array([0.0, -1.0, 0.0])  # walking along +x with z up: the right is -y
    at = lambda *d: mid + np.array(d)  # noqa: E731
    labels = ["RASI", "LASI", "VSAC", "RKNE", "RKNE_2", "RANK", "RANK_2", "RTOE", "RHEE",
              "LKNE", "LKNE_2", "LANK", "LANK_2", "LTOE", "LHEE"]  # fmt: skip
    xyz = [at(*(0.125 * right)), at(*(-0.125 * right)), at(-0.160, 0, 0),
           at(0.05, -0.14, -0.52), at(0.05, -0.04, -0.52), at(0.0, -0.13, -0.93),
           at(0.0, -0.05, -0.93), at(0.17, -0.09, -0.98), at(-0.05, -0.09, -0.97),
           at(0.05, 0.14, -0.52), at(0.05, 0.04, -0.52), at(0.0, 0.13, -0.93),
           at(0.0, 0.05, -0.93), at(0.17, 0.09, -0.98), at(-0.05, 0.09, -0.97)]  # fmt: skip
    if psis is not None:
        rpsi, lpsi = xyz[2] + np.asarray(psis), xyz[2] - np.asarray(psis)
        labels += ["R.PSIS", "L.PSIS", "SACM"]
        xyz += [rpsi, lpsi, 0.5 * (rpsi + lpsi)]
    return io.Markers(rate=100.0, time=np.arange(T) / 100.0, labels=tuple(labels), xyz=np.stack(xyz, 1))


@pytest.mark.parametrize("side", ["right", "left"])
def test_harrington_hip_from_four_markers_is_the_three_marker_hip_at_the_psis_midpoint(side):
    # before: "a 'harrington' hip needs three markers: right ASIS, left ASIS, sacrum"
    m = _pelvis_and_leg(psis=[0.0, 0.045, 0.012])
    four = gait.sagittal(m, side=side, mapping={"hip": ("harrington", "RASI", "LASI", "R.PSIS", "L.PSIS")})
    three = gait.sagittal(m, side=side, mapping={"hip": ("harrington", "RASI", "LASI", "SACM")})
    np.testing.assert_array_equal(four.hip, three.hip)
    np.testing.assert_array_equal(four.knee, three.knee)
    # and the hand-worked Harrington hip (test_gait.py): 48.3 mm behind mid-ASIS,
    # 85.9 mm below it, whichever side (only forward and up remain)
    mid_x = 0.5 + 1.2 * np.arange(30) / 100.0
    np.testing.assert_allclose(four.hip, np.stack([mid_x - 0.0483, np.full(30, 1.0 - 0.0859)], -1), atol=1e-12)


def test_harrington_hip_with_psis_markers_that_are_not_symmetric_about_the_sacrum():
    # the PSIS midpoint 20 mm lower and 30 mm further back than VSAC: the pelvis depth
    # PD is 190 mm and the frame tilts (its x axis along mid-ASIS to the sacrum,
    # projected off the ASIS line): the 3-marker hip with the sacrum there
    m = _pelvis_and_leg(psis=[0.0, 0.045, 0.0])
    xyz = m.xyz.copy()
    lab = list(m.labels)
    for k in ("R.PSIS", "L.PSIS", "SACM"):
        xyz[:, lab.index(k)] += [-0.030, 0.0, -0.020]
    m = io.Markers(rate=m.rate, time=m.time, labels=m.labels, xyz=xyz)
    four = gait.sagittal(m, mapping={"hip": ("harrington", "RASI", "LASI", "R.PSIS", "L.PSIS")})
    three = gait.sagittal(m, mapping={"hip": ("harrington", "RASI", "LASI", "SACM")})
    np.testing.assert_array_equal(four.hip, three.hip)
    # by hand: back = (-0.190, 0, -0.020) m from mid-ASIS, PD = |back|; x = -back / PD,
    # y = z x x with z to the right; hip = mid + (-0.24 PD - 9.9) x + (-0.30 PW - 10.9) y (mm)
    pd = np.hypot(0.190, 0.020) * 1000
    x = np.array([0.190, 0.020]) / np.hypot(0.190, 0.020)  # (forward, up) of the pelvis x axis
    y = np.array([-x[1], x[0]])  # z (right) cross x, in the sagittal plane
    off = ((-0.24 * pd - 9.9) * x + (-0.30 * 250 - 10.9) * y) / 1000
    mid_x = 0.5 + 1.2 * np.arange(30) / 100.0
    np.testing.assert_allclose(four.hip, np.stack([mid_x + off[0], 1.0 + np.full(30, off[1])], -1), atol=1e-12)


@pytest.mark.parametrize(
    "hip, match",
    [(("harrington", "RASI", "LASI"), r"three markers \(right ASIS, left ASIS, sacrum\) or four .* got 2: RASI, LASI"),
     (("harrington", "RASI", "LASI", "R.PSIS", "L.PSIS", "VSAC"), r"or four .*got 5: RASI, LASI, R.PSIS, L.PSIS, VSAC"),
     (("harrington",), r"or four .*got none"),
     (("harrington", "RASI", "LASI", "R.PSIS", "R.PSIS"), r"names R.PSIS twice")],
)  # fmt: skip
def test_harrington_hip_with_the_wrong_markers_is_refused(hip, match):
    m = _pelvis_and_leg(psis=[0.0, 0.045, 0.0])
    with pytest.raises(ValueError, match=match):
        gait.sagittal(m, mapping={"hip": hip})


def test_harrington_for_another_joint_and_an_unknown_pelvis_marker_are_refused():
    m = _pelvis_and_leg(psis=[0.0, 0.045, 0.0])
    with pytest.raises(ValueError, match=r"'harrington' is the hip's regression, not the knee's"):
        gait.sagittal(m, mapping={"knee": ("harrington", "RASI", "LASI", "VSAC")})
    with pytest.raises(ValueError, match=r"no marker 'R\.PSI'; the labels are: RASI, .*\(override with mapping=\)"):
        gait.sagittal(m, mapping={"hip": ("harrington", "RASI", "LASI", "R.PSI", "L.PSIS")})


def _gait_with_psis(tmp_path, ezc3d):
    """tests/data/Gait.c3d with two PSIS markers, R.PSIS and L.PSIS, at VSAC +- a
    fixed offset (mm; VSAC rounded to 1/16 mm so that VSAC and both PSIS are exact in
    the file and VSAC is their midpoint to the last bit, in mm)."""
    c = ezc3d.c3d(str(HERE / "data" / "Gait.c3d"))
    pts = c["data"]["points"]
    labels = list(c["parameters"]["POINT"]["LABELS"]["value"])
    i = labels.index("VSAC")
    sac = np.round(pts[:3, i] * 16) / 16
    off = np.array([[12.5], [-40.0], [3.25]])  # mm: 40 mm sideways (the lab's y), a little forward and up
    new = np.concatenate([pts, pts[:, [i, i]]], axis=1)
    new[:3, i], new[:3, -2], new[:3, -1] = sac, sac + off, sac - off
    c["data"]["points"] = new
    c["parameters"]["POINT"]["LABELS"]["value"] = labels + ["R.PSIS", "L.PSIS"]
    c["parameters"]["POINT"]["DESCRIPTIONS"]["value"] = list(c["parameters"]["POINT"]["DESCRIPTIONS"]["value"]) + ["", ""]
    if "meta_points" in c["data"]:
        del c["data"]["meta_points"]
    path = tmp_path / "psis.c3d"
    c.write(str(path))
    return path


def test_cli_harrington_hip_from_the_psis_of_a_real_file(tmp_path, capsys):
    # Gait.c3d has a sacrum marker (VSAC) and no PSIS: a copy with two PSIS markers
    # whose midpoint is VSAC; --marker hip=harrington,RASI,LASI,R.PSIS,L.PSIS writes
    # the numbers of the default hip (harrington,RASI,LASI,VSAC), to the round-off of
    # the reader's mm-to-m scaling (1e-16 m)
    ezc3d = pytest.importorskip("ezc3d")
    path = _gait_with_psis(tmp_path, ezc3d)
    tr = io.read_c3d(str(path), warn_gaps=False)
    r, l, s = (tr.markers.get(k) for k in ("R.PSIS", "L.PSIS", "VSAC"))
    ok = np.isfinite(s).all(-1)
    assert ok.sum() > 100  # the file is as meant: VSAC the PSIS midpoint, 40 mm from each
    np.testing.assert_allclose(0.5 * (r[ok] + l[ok]), s[ok], rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(r[ok] - s[ok], axis=-1), np.sqrt(12.5**2 + 40**2 + 3.25**2) / 1000)
    common = ["gait", "--c3d", str(path), "--no-figures", "--body-mass", "61"]

    def run(name, *marker):
        assert cli.main(common + list(marker) + ["--out", str(tmp_path / name)]) == 0
        return {f: np.loadtxt(tmp_path / name / f, delimiter=",", skiprows=1)
                for f in ("angles.csv", "moments.csv", "reactions.csv")}  # fmt: skip

    three = run("three")  # the default: harrington,RASI,LASI,VSAC
    four = run("four", "--marker", "hip=harrington,RASI,LASI,R.PSIS,L.PSIS")
    one = run("one", "--marker", "hip=harrington,RASI,LASI,R.PSIS")  # the right PSIS as the sacrum
    capsys.readouterr()
    for f in three:
        assert four[f].shape == three[f].shape and len(three[f]) > 50, f
        scale = np.abs(three[f][:, 1:]).max()
        np.testing.assert_allclose(four[f], three[f], rtol=0, atol=1e-8 * scale, err_msg=f)
    # the test can tell: the right PSIS alone (12.5 mm off the midpoint along the
    # walk) moves the hip and the hip moment by far more
    hip_moment = np.abs(one["moments.csv"][:, 1] - three["moments.csv"][:, 1]).max()
    assert hip_moment > 1e-3 * np.abs(three["moments.csv"][:, 1]).max(), hip_moment


@pytest.mark.parametrize(
    "marker, match",
    [("hip=harrington,RASI,LASI", r"--marker 'hip=harrington,RASI,LASI': a 'harrington' hip needs three markers "
                                  r"\(right ASIS, left ASIS, sacrum\) or four .* got 2: RASI, LASI"),
     ("hip=harrington,RASI,LASI,R.PSIS,L.PSIS,VSAC", r"got 5: RASI, LASI, R.PSIS, L.PSIS, VSAC"),
     ("knee=harrington,RASI,LASI,VSAC", r"'harrington' is the hip's regression, not the knee's"),
     ("hip=harrington,RASI,LASI,R.PSIS,L.PSI", r"psis.c3d: no marker 'L\.PSI'; the labels are: .*R\.PSIS, L\.PSIS "
                                               r"\(name the markers with --marker")],
)  # fmt: skip
def test_cli_harrington_hip_with_the_wrong_markers_is_one_line(tmp_path, capsys, marker, match):
    ezc3d = pytest.importorskip("ezc3d")
    path = _gait_with_psis(tmp_path, ezc3d)
    assert cli.main(["gait", "--c3d", str(path), "--marker", marker, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("jaxmb gait: error:") and re.search(match, err[-1]), err
    assert not (tmp_path / "o").exists()
