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
    point = c["parameters"]["POINT"]
    point["DESCRIPTIONS"]["value"] = list(point["DESCRIPTIONS"]["value"]) + ["", ""]
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


# ---- item 17 (part): the figures state their convention and units ----------------


def _hand_made_result(stances=((10, 40),), convention="jaxmb"):
    """A one-trial GaitResult made by hand (no analyze: no compilation), jaxmb signs:
    its moments the sum of four terms, as analyze(..., terms=True) gives them, with the
    foot's centre of mass at the ankle as in the running data: gravity makes no ankle
    moment (exactly 0) and the linear inertia only round-off (1e-15 N m); an ankle
    moment that is plantarflexor (negative) in stance. The vertical ground reaction
    force is 700 N over the (start, stop) samples ``stances`` and 0 elsewhere."""
    T = 60
    t = np.arange(T) / 100.0
    s = np.sin(2 * np.pi * t)[:, None]
    grav = np.array([3.0, 2.0, 0.0]) * np.ones((T, 1))
    grf = np.array([-20.0, 60.0, -120.0]) * (0.5 + s**2)
    lin = np.array([8.0, 4.0, 0.0]) * s
    lin[:, 2] = 1e-15 * np.cos(7 * t)
    rot = np.array([1.0, 0.5, 0.25]) * np.cos(3 * t)[:, None]
    terms = {k: (m, np.zeros((T, 3, 2))) for k, m in zip(gait.TERMS, (grav, grf, lin, rot))}
    moments = grav + grf + lin + rot
    force = np.zeros((T, 2))
    for a, b in stances:
        force[a:b, 1] = 700.0
    reactions = np.stack([np.full((T, 3), 30.0), np.full((T, 3), 400.0)], -1)  # magnitude 401.12 N
    r = gait.GaitResult(time=t, angles=np.zeros((T, 3)), velocities=np.zeros((T, 3)), moments=moments,
                        powers=np.zeros((T, 3)), reactions=reactions, reactions_segment=reactions,
                        base_residual=np.zeros((T, 3)), segment_angles=np.zeros((T, 3)), force=force,
                        cop=np.zeros((T, 2)), mask=np.ones(T, bool), frames=T, rate=100.0, cutoff=None,
                        force_cutoff=None, convention="jaxmb", body_mass=None, height=None,
                        segments={}, terms=terms)  # fmt: skip
    return r.to_convention(convention)


def _draw(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig).draw()


@pytest.mark.parametrize("convention", ["jaxmb", "clinical"])
def test_moments_figure_states_its_sign_convention_and_units(convention):
    # before: the title given (the command line's trial description) replaced the
    # only mention of the convention, and the axes said "ankle moment (N m)"
    pytest.importorskip("matplotlib")
    r = _hand_made_result(convention=convention)
    fig = gait.moments_figure(r, title="a trial")
    head = fig._suptitle.get_text()
    assert head.startswith("a trial\n")
    if convention == "jaxmb":
        assert "counter-clockwise positive" in head and "plantarflexor moment negative" in head, head
        want = ("+ flexor", "+ extensor", "+ dorsiflexor")
    else:
        assert "extensor, ankle plantarflexor moments positive" in head, head
        want = ("+ extensor", "+ extensor", "+ plantarflexor")
    axs = np.array(fig.axes).reshape(3, 2)
    for j, joint in enumerate(gait.JOINTS):
        assert axs[j, 1].get_ylabel() == f"{joint} moment (N m)\n{want[j]}"
        assert axs[j, 0].get_ylabel().startswith(f"{joint} reaction (N)")
        np.testing.assert_array_equal(axs[j, 1].lines[0].get_ydata(), r.moments[:, j])
    assert axs[-1, 0].get_xlabel() == axs[-1, 1].get_xlabel() == "time (s)"
    # the label tells the truth: the hand-made ankle moment is plantarflexor (jaxmb
    # negative) over stance, drawn below zero exactly when "+" is not plantarflexor
    ankle = axs[2, 1].lines[0].get_ydata()[10:40]
    assert (ankle > 0).all() if want[2] == "+ plantarflexor" else (ankle < 0).all()


@pytest.mark.parametrize("convention", ["jaxmb", "clinical"])
def test_quasi_static_figure_draws_no_bar_below_round_off_and_says_why(convention):
    # before: a log axis, a 1e-15 N m bar at the ankle (no m a) and no bar at all for
    # the exact zero (no gravity), without a word; tick labels 10^1 next to 6x10^1
    pytest.importorskip("matplotlib")
    r = _hand_made_result(convention=convention)
    fig = gait.term_effects_figure(r)
    _draw(fig)
    bottom = fig.axes[3:]
    # the ankle: gravity exactly 0 and the linear inertia 1e-15 N m, neither drawn (a bar each, before)
    assert set(round(p.get_x() + p.get_width() / 2) for p in bottom[2].patches) == {0, 2, 4}
    w = slice(10, 40)
    rms = lambda x: float(np.sqrt(np.mean(x[w] ** 2)))  # noqa: E731
    raw = _hand_made_result()  # jaxmb signs: the RMS of a change does not depend on the sign
    terms = {k: raw.terms[k][0] for k in gait.TERMS}
    for j, ax in enumerate(bottom):
        # the RMS change when each term is dropped = the RMS of that term over stance
        # (quasi-static: of both inertial terms), by hand
        want = np.array([rms(terms["linear_inertia"][:, j] + terms["rotational_inertia"][:, j])]
                        + [rms(terms[k][:, j]) for k in gait.TERMS])  # fmt: skip
        bars = {round(p.get_x() + p.get_width() / 2): p.get_height() for p in ax.patches}
        shown = want > 1e-9
        assert sorted(bars) == list(np.flatnonzero(shown)), (j, bars, want)
        np.testing.assert_allclose([bars[i] for i in sorted(bars)], want[shown], rtol=1e-12)
        notes = {round(t.get_position()[0]): t.get_text() for t in ax.texts if "round-off" in t.get_text()}
        assert notes == {int(i): "0 (below round-off)" for i in np.flatnonzero(~shown)}, notes
        # each bar labelled with its value; a linear axis, every tick label a plain number
        labels = {t.get_text() for t in ax.texts}  # bar_label's annotations among them
        assert {f"{h:.3g}" for h in want[shown]} <= labels, (labels, want)
        assert ax.get_yscale() == "linear"
        ticks = [t.get_text().replace("\u2212", "-") for t in ax.get_yticklabels() if t.get_text()]
        assert ticks and all(re.fullmatch(r"-?\d+(\.\d+)?", s) for s in ticks), ticks
        assert ax.get_ylabel() == "N m (RMS over stance)"
    head = fig._suptitle.get_text()
    said = "plantarflexor moment negative" if convention == "jaxmb" else "ankle plantarflexor moments positive"
    assert said in head, head


@pytest.mark.parametrize("stances", [((10, 40),), ((5, 20), (35, 57))])
def test_quasi_static_figure_plots_stance_in_percent_as_the_stance_figure(stances):
    # before: the file's time in s (stance.png is in % of stance)
    pytest.importorskip("matplotlib")
    r = _hand_made_result(stances)
    fig = gait.term_effects_figure(r)
    qs = r.moments - r.terms["linear_inertia"][0] - r.terms["rotational_inertia"][0]
    for j, ax in enumerate(fig.axes[:3]):
        assert ax.get_xlabel() == "stance (%)"
        assert ax.get_ylabel() == f"N m (+ {('flexor', 'extensor', 'dorsiflexor')[j]})"
        lines = [ln for ln in ax.get_lines() if ln.get_color() != "0.6"]  # not the zero line
        assert len(lines) == 2 * len(stances)  # full and quasi-static, one line per stance
        for (a, b), full, quasi in zip(stances, lines[: len(stances)], lines[len(stances) :]):
            np.testing.assert_allclose(full.get_xdata(), np.linspace(0, 100, b - a), rtol=0, atol=1e-12)
            np.testing.assert_array_equal(full.get_ydata(), r.moments[a:b, j])
            np.testing.assert_allclose(quasi.get_ydata(), qs[a:b, j], rtol=1e-14, atol=1e-12)
    legend = fig.axes[0].get_legend()
    assert (legend.get_title().get_text() == "one line per stance") == (len(stances) > 1)
