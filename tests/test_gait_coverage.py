"""Marker and force files that do not cover the same time, and partial stances
(issue 38, items 1 and 2): jaxmb.gait.sagittal and ``jaxmb gait``.

The trial: the walking trial of tests/data/Gait.c3d twice (its complete frames, the
copy displaced by the distance walked), so that the right foot steps on plate 2 and
then on its copy, plate 4, as on a walkway; then cut, as labs export: the markers a
few frames before the end of the second stance, the forces on a few samples past
them, or the forces cut short of the markers.
"""

import csv
import re
import types
import warnings
from pathlib import Path

import numpy as np
import pytest

import walkway
from jaxmb import cli, gait
from jaxmb.cli import gait as _cmd_gait

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def strides():
    """(markers at 100 Hz, plates at 1 kHz) of two strides, 3.88 s; the right foot's
    contacts are plate 2 at samples 754-1324 and plate 4 at 2694-3264."""
    pytest.importorskip("ezc3d")
    return walkway.two_strides(sources=True)


def _frames(markers, i0, i1):
    return markers.replace(time=markers.time[i0:i1], xyz=markers.xyz[i0:i1])


def _samples(plates, i0, i1):
    return plates.replace(time=plates.time[i0:i1], force=plates.force[i0:i1], cop=plates.cop[i0:i1],
                          free_moment=plates.free_moment[i0:i1])  # fmt: skip


def _contact(plates, k):
    """(first, last) times, s, of the samples where plate k's force exceeds 20 N."""
    on = np.flatnonzero(np.linalg.norm(np.nan_to_num(plates.force[:, k]), axis=-1) > 20.0)
    assert np.all(np.diff(on) == 1), "one contact"
    return plates.time[on[0]], plates.time[on[-1]]


def _stance_frames(time, t0, t1):
    """(start, stop) of the frames at ``time`` within the contact t0-t1 (s)."""
    inside = np.flatnonzero((time >= t0 - 1e-9) & (time <= t1 + 1e-9))
    return int(inside[0]), int(inside[-1]) + 1


def test_forces_outlasting_the_markers_analyse_every_stance_the_cut_one_partial(strides):
    # the markers end at 3.100 s, mid-way through the stance on plate 4; the forces
    # go on to 3.110 s (one frame more). Before: "the right foot stands on plate 4
    # ... outside the frames ... fill the gaps", the whole trial refused
    mk, fp = strides
    markers, plates = _frames(mk, 0, 311), _samples(fp, 0, 3111)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no frame is dropped: nothing to warn about
        sg = gait.sagittal(markers, plates)
    assert sg.time[0] == 0.0 and sg.time[-1] == pytest.approx(3.1) and len(sg.time) == 311
    # the stances from the force file's own contacts: the frames within each
    first = _stance_frames(sg.time, *_contact(plates, 1))
    second = _stance_frames(sg.time, *_contact(plates, 3))
    assert second[1] == 311  # the contact goes on past the last frame
    assert sg.stances == (first, second) and sg.partial == ("", "end"), (sg.stances, sg.partial)
    # the force of the frames analysed: the plates' own samples, whole stance and cut one
    # (loaded: above 20 N; vertical: sagittal's up)
    f = np.nan_to_num(plates.force[:3101, [1, 3]])
    ref = np.where(np.linalg.norm(f, axis=-1) > 20.0, f @ sg.axes[1], 0.0).sum(1)
    np.testing.assert_allclose(sg.force[:, 1], ref, rtol=1e-12, atol=1e-9)
    # the whole trial: the same first stance, the second whole
    whole = gait.sagittal(mk, fp)
    assert whole.stances[0] == first and whole.partial == ("", "")
    # markers cut after the toe-off (the forces on past them): whole
    after = gait.sagittal(_frames(mk, 0, 330), _samples(fp, 0, 3400))
    assert after.stances == whole.stances and after.partial == ("", "")
    # a contact still loaded at the forces' last sample, both files ending together: partial
    same = gait.sagittal(markers, _samples(fp, 0, 3101))
    assert same.stances == sg.stances and same.partial == ("", "end")
    # the mirror: the markers start at 1.300 s, the last 3 frames of the stance on
    # plate 2 (the foot judged on the samples that the markers cover: its force was
    # not taken as this foot's, zero in those frames)
    late = gait.sagittal(_frames(mk, 130, len(mk.time)), fp)
    assert late.stances == ((0, 3), _stance_frames(late.time, *_contact(fp, 3))) and late.partial == ("start", "")
    f = np.nan_to_num(fp.force[1300:1303, 1])
    np.testing.assert_allclose(late.force[:3, 1], f @ late.axes[1], rtol=1e-12)


def test_forces_that_start_after_or_end_before_the_markers_analyse_the_frames_both_cover(strides):
    # frames without force data are unmeasured, not "no contact": the frames analysed
    # are those both files cover, a warning says which; before: "the force plates
    # cover ..., the markers' frames analysed ...: the forces end at ..." and nothing
    mk, fp = strides
    with pytest.warns(UserWarning, match=r"force plates \(walk\.forces\) cover 0\.000-3\.000 s, the markers' complete "
                                         r"frames \(walk\.trc\) 0\.000-3\.870 s: the frames analysed are the 301 "
                                         r"that both cover, 0\.000-3\.000 s \(frames 1-301 of the markers' file\)"):  # fmt: skip
        end = gait.sagittal(mk, _samples(fp, 0, 3001))
    np.testing.assert_array_equal(end.time, mk.time[:301])
    assert end.stances[1] == (_stance_frames(end.time, 2.694, 3.0)) and end.partial == ("", "end")
    assert end.force.shape == (3001, 2)
    # forces from 1.000 s, mid-way through the first stance
    with pytest.warns(UserWarning, match=r"the frames analysed are the 288 that both cover, 1\.000-3\.870 s "
                                         r"\(frames 101-388 of the markers' file\)"):  # fmt: skip
        start = gait.sagittal(mk, _samples(fp, 1000, len(fp.time)))
    np.testing.assert_array_equal(start.time, mk.time[100:])
    assert start.stances[0] == (0, _stance_frames(start.time, 1.0, 1.324)[1]) and start.partial == ("start", "")
    assert start.hip.shape == start.toe.shape == (288, 2) and start.force.shape == (2871, 2)
    # forces that start in the swing: the frames both cover, no stance cut
    with pytest.warns(UserWarning, match=r"the frames analysed are the 238 that both cover, 1\.500-3\.870 s"):
        swing = gait.sagittal(mk, _samples(fp, 1500, len(fp.time)))
    assert swing.stances == ((_stance_frames(swing.time, *_contact(fp, 3))),) and swing.partial == ("",)
    # too little in common: named with both spans
    with pytest.raises(ValueError, match=r"force plates \(walk\.forces\) cover 0\.000-0\.049 s, the markers' complete "
                                         r"frames \(walk\.trc\) 0\.000-3\.870 s: the forces end at 0\.049 s; they share "
                                         r"5 frames, too few"):  # fmt: skip
        gait.sagittal(mk, _samples(fp, 0, 50))


def test_a_contact_past_a_marker_gap_is_still_an_error(strides):
    # the recording's end cuts a stance (partial); a gap in the markers before the end
    # does not: the contact past it is refused, as before (fill the gaps)
    mk, fp = strides
    xyz = mk.xyz.copy()
    xyz[300:311, mk.labels.index("RANK")] = np.nan
    with pytest.raises(ValueError, match=r"right foot stands on plate 4 \(walk\.forces\) between 2\.694 and 3\.110 s, "
                                         r"outside .*RANK missing at 3\.000-3\.100 s \(frames 301-311\).*fill the gaps"):  # fmt: skip
        gait.sagittal(_frames(mk.replace(xyz=xyz), 0, 311), _samples(fp, 0, 3111))


def test_body_weight_leaves_out_a_contact_that_the_force_recording_cuts(strides):
    # the middle 70 % of a cut contact is not its single support: the forces end at
    # 2.850 s, 30 % into the stance on plate 4 (before: 601.5 N instead of 599.9 N)
    mk, fp = strides
    with pytest.warns(UserWarning, match="frames analysed"):
        sg = gait.sagittal(mk, _samples(fp, 0, 2851))
    # the docstring's definition by hand: the total vertical force over the middle
    # 70 % of each whole contact (plate 2, samples 754-1324; plate 1, 1239-1817),
    # the vertical force of the loaded plates (above 20 N)
    plates = _samples(fp, 0, 2851)
    f = np.nan_to_num(plates.force)
    total = np.where(np.linalg.norm(f, axis=-1) > 20.0, f @ sg.axes[1], 0.0).sum(1)  # the loaded plates
    mids = [total[r0 + int(0.15 * (r1 - r0)) : r1 - int(0.15 * (r1 - r0))] for r0, r1 in ((754, 1325), (1239, 1818))]
    for k, (r0, r1) in ((1, (754, 1325)), (0, (1239, 1818))):
        assert _contact(plates, k) == pytest.approx((r0 / 1000, (r1 - 1) / 1000))
    assert sg.body_weight == pytest.approx(np.mean(np.concatenate(mids)), rel=1e-12)


def test_forces_within_one_stance_cut_it_at_both_ends_and_estimate_no_body_weight(strides, tmp_path, capsys):
    # forces from 2.750 to 3.199 s, within the stance on plate 4 (2.694-3.264 s)
    mk, fp = strides
    plates = _samples(fp, 2750, 3200)
    with pytest.warns(UserWarning, match=r"the frames analysed are the 45 that both cover, 2\.750-3\.190 s"):
        sg = gait.sagittal(mk, plates)
    assert sg.stances == ((0, 45),) and sg.partial == ("both",) and sg.body_weight is None
    # the command asks for the body mass, saying why (before: "no force plate to
    # estimate it from", beside a file with plates; now it is asked, not guessed
    # from a contact's middle that is not its middle)
    files = _write(tmp_path, mk, plates, "within")
    assert cli.main(["gait", *files, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (f"jaxmb gait: error: give --body-mass (kg): no contact with a force plate in {files[1]} + "
                       f"{files[3]} that the force recording holds whole (10 frames or more) to estimate it from"), err
    assert "the frames analysed are the 45" in err[0] and not (tmp_path / "out").exists()


def _fake_result(n, rate=100.0):
    """What _stance_figure reads of a GaitResult: smooth curves over n frames."""
    t = np.arange(n) / rate
    curve = np.stack([np.sin(2 * np.pi * t * f) for f in (1.0, 1.5, 2.0)], -1)
    return types.SimpleNamespace(time=t, rate=rate, body_mass=60.0, convention="jaxmb", angles=curve,
                                 moments=curve, powers=curve, moments_per_kg=curve, powers_per_kg=curve)  # fmt: skip


def test_stance_figure_title_of_a_long_path_stays_in_the_figure():
    # before: one line, clipped at both ends by a long file path
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    res = _fake_result(100)
    path = "/home/researcher/projects/gait-lab-2026/subject_017_session_03_overground_walking/trial_012"
    fig = _cmd_gait._stance_figure(res, [slice(10, 60)], f"{path}.trc + {path}.forces, right leg, body mass 61.1 kg")
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    box = fig._suptitle.get_window_extent(canvas.get_renderer())
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox)
    from jaxmb.gait import CONVENTION_TEXT

    assert fig._suptitle.get_text().replace("\n", "").replace(" ", "") == \
        (f"{path}.trc + {path}.forces, right leg, body mass 61.1 kg" + CONVENTION_TEXT["jaxmb"]).replace(
            "\n", "").replace(" ", "")  # fmt: skip
    # each moment axis says what a positive moment is at its joint
    assert [ax.get_ylabel() for ax in fig.axes[3:6]] == ["moment (N m/kg)\n+ flexor", "\n+ extensor",
                                                          "\n+ dorsiflexor"]  # fmt: skip


def test_stance_figure_draws_a_partial_stance_dashed_on_the_whole_stances_scale():
    res = _fake_result(200)
    stances = [_cmd_gait._Stance(10, 61), _cmd_gait._Stance(170, 200, "end"), _cmd_gait._Stance(0, 20, "start")]
    fig = _cmd_gait._stance_figure(res, stances, "t")
    for ax in fig.axes:
        whole, end, start = ax.get_lines()[:3]
        assert whole.get_linestyle() == "-" and end.get_linestyle() == "--" and start.get_linestyle() == "--"
        # 51 frames are 100 %: 2 % a frame; cut at the end from 0 %, at the start up to 100 %
        np.testing.assert_allclose(whole.get_xdata(), 2.0 * np.arange(51))
        np.testing.assert_allclose(end.get_xdata(), 2.0 * np.arange(30))
        np.testing.assert_allclose(start.get_xdata(), 100 - 2.0 * np.arange(20)[::-1])
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["stance at 0.10 s", "stance at 1.70 s (partial: cut at the end)",
                      "stance at 0.00 s (partial: cut at the start)"]  # fmt: skip


def test_stance_figure_says_when_a_partial_stance_spans_only_its_own_frames():
    # no whole stance to scale it by: its frames recorded are 0-100 %, and the legend
    # said only "partial" (a stranger read its knee peak at 38 % instead of 21 %)
    res = _fake_result(200)
    fig = _cmd_gait._stance_figure(res, [_cmd_gait._Stance(152, 200, "end")], "t")
    np.testing.assert_allclose(fig.axes[0].get_lines()[0].get_xdata(), 100 * np.arange(48) / 47)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["stance at 1.52 s (partial: cut at the end; x: % of its 48 recorded frames, not of a stance)"]


def _write(tmp_path, markers, plates, stem):
    from jaxmb import io

    io.write_trc(tmp_path / f"{stem}.trc", markers)
    io.write_forces(tmp_path / f"{stem}.forces", plates)
    return ["--trc", str(tmp_path / f"{stem}.trc"), "--forces", str(tmp_path / f"{stem}.forces")]


def test_gait_command_forces_outlasting_the_markers(strides, tmp_path, capsys):
    # jaxmb gait --trc T --forces F on a trial whose forces outlast the markers: the
    # whole stance analysed, the cut one marked partial and its peaks left out
    mk, fp = strides
    files = _write(tmp_path, _frames(mk, 0, 311), _samples(fp, 0, 3111), "cut")
    out = tmp_path / "out"
    assert cli.main(["gait", *files, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = (out / "summary.txt").read_text()
    for text in (printed, summary):
        assert "311 frames at 100 Hz analysed (0.000-3.100 s of the file)" in text, text
        assert "stance 1 of 2: 0.760-1.320 s of the file (57 frames, 0.57 s); clinical signs" in text, text
        assert re.search(r"^stance 2 of 2: 2\.700-3\.100 s of the file \(41 frames, 0\.41 s\), PARTIAL: the foot is "
                         r"still on the plate at the last frame analysed \(no toe-off in the data\); its peaks are "
                         r"left out.*\(--partial-stances gives them\)$", text, re.M), text  # fmt: skip
        assert len(re.findall(r"^ankle\s", text, re.M)) == 1  # the whole stance's peaks only
    assert "stance.png" in {p.name for p in out.iterdir()}
    # --partial-stances: its peaks too, over its frames recorded, from the moments written
    assert cli.main(["gait", *files, "--partial-stances", "--convention", "clinical", "--no-figures",
                     "--out", str(out)]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "(no toe-off in the data); its peaks over the frames recorded, % of those; clinical signs" in printed
    per_kg = np.loadtxt(out / "moments_per_kg.csv", delimiter=",", skiprows=1)
    st = (per_kg[:, 0] >= 2.7 - 1e-9)
    ankle = [float(x) for x in re.findall(r"^ankle\s+(-?[\d.]+)", printed, re.M)]
    assert len(ankle) == 2 and ankle[1] == pytest.approx(per_kg[st, 3].max(), abs=0.006), (ankle, per_kg[st, 3].max())


def test_gait_command_trials_table_marks_a_partial_stance(strides, tmp_path, capsys, monkeypatch):
    # trials.csv: a column "partial"; a partial stance's peak cells empty
    from jaxmb import io

    mk, fp = strides
    trials = {"a.c3d": (mk, fp), "b.c3d": (_frames(mk, 0, 311), _samples(fp, 0, 3111))}

    def read_c3d(path, warn_gaps=True):
        m, f = trials[Path(path).name]
        return io.C3DTrial(markers=m, forces=f, point_rate=m.rate, analog_rate=f.rate, analog=np.zeros((0, 0)),
                           analog_labels=(), analog_units=())  # fmt: skip

    monkeypatch.setattr(io, "read_c3d", read_c3d)
    out = tmp_path / "out"
    paths = [str(tmp_path / name) for name in trials]
    assert cli.main(["gait", "--c3d", *paths, "--no-figures", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    with open(out / "trials.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["trial"], r["stance"], r["partial"]) for r in rows] == [("a", "1", "no"), ("a", "2", "no"),
                                                                        ("b", "1", "no"), ("b", "2", "end")]  # fmt: skip
    peaks = [k for k in rows[0] if k.endswith("_per_kg")]
    assert len(peaks) == 9 and all(rows[i][k] != "" for i in range(3) for k in peaks)
    assert all(rows[3][k] == "" for k in peaks)
    assert float(rows[3]["start_s"]) == pytest.approx(2.7) and float(rows[3]["stance_s"]) == pytest.approx(0.41)
    # the whole stances of the cut trial, the same strides as the whole trial's
    for k in peaks:
        assert float(rows[2][k]) == pytest.approx(float(rows[0][k]), rel=0.05, abs=0.05), k
    assert re.search(r"^b\s+2\s+2\.700\s+0\.41\s+\d+\.\d  partial \(end\): peaks left out", printed, re.M), printed
