"""Whole-body residuals of the measured walking trial (tests/data/Gait.c3d) and the command."""

import dataclasses
import json
import os
import warnings

import numpy as np
import pytest

from jaxmb import io, wholebody
from jaxmb.cli import main

GAIT = os.path.join(os.path.dirname(__file__), "data", "Gait.c3d")
pytest.importorskip("ezc3d")


@pytest.fixture(scope="module")
def c3d():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return io.read_c3d(GAIT, warn_gaps=False)


@pytest.fixture(scope="module")
def trial(c3d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wholebody.whole_body_trial(c3d)


def test_model_and_measured_frames(trial):
    assert trial.model.names == ("trunk", "thigh_r", "shank_r", "foot_r", "thigh_l", "shank_l", "foot_l",
                                 "uarm_r", "farm_r", "uarm_l", "farm_l")
    # The plates' vertical impulse over the 83 measured frames (a stride, right heel strike to right
    # heel strike): 62.86 kg; single support's mean force / g (the gait pipeline's) is 61.16 kg.
    assert trial.body_mass == pytest.approx(62.86, abs=0.05)
    assert trial.body_mass_single_support == pytest.approx(61.16, abs=0.05)
    np.testing.assert_allclose(float(trial.model.mass.sum()), trial.body_mass, rtol=1e-12)  # Dempster's rows sum to 1
    t = trial.time[trial.measured]
    # Every foot on the floor stands on a plate: right heel strike on plate 2 after the
    # left foot left the floor, until the right foot lands again off the plates.
    assert trial.measured.sum() == 83 and t[0] == pytest.approx(2.17) and t[-1] == pytest.approx(3.00)
    # One frame inside is left out: the left heel, slower than 1.5 m/s, is one frame
    # before its force on plate 1 (it strikes at 2.54 s).
    idx = np.where(trial.measured)[0]
    assert sorted(set(range(idx[0], idx[-1] + 1)) - set(idx)) == [120]


def test_residuals_of_the_table_model(trial):
    r = wholebody.residuals(trial.model, trial.q, trial.qd, trial.qdd, trial.loads)
    s = wholebody.summarize(r, body_mass=trial.body_mass, height=trial.height, mask=trial.measured)
    # Measured figures of this model (6 Hz markers and forces): 24.9 N, 24.7 N, 19.6 N m (with
    # single support's 61.16 kg: 25.7 N, 30.3 N, 19.3 N m; FY's mean -16.1 N, 0 with the impulse's mass).
    np.testing.assert_allclose(s.rms, [24.9, 24.7, 19.6], atol=0.1)
    assert abs(float(np.mean(np.asarray(r)[trial.measured, 1]))) < 1e-3 * trial.body_mass * 9.81
    raw = wholebody.summarize(wholebody.residuals(trial.model, trial.q, trial.qd, trial.qdd, trial.loads_raw),
                              body_mass=trial.body_mass, mask=trial.measured)
    assert np.all(raw.rms[:2] > s.rms[:2])  # the force content above 6 Hz


def _without(c3d, label):
    """The trial without one marker."""
    m = c3d.markers
    keep = [i for i, lab in enumerate(m.labels) if lab != label]
    return dataclasses.replace(c3d, markers=dataclasses.replace(m, labels=tuple(m.labels[i] for i in keep),
                                                                xyz=np.asarray(m.xyz)[:, keep], descriptions=None))


def test_lower_body_only_and_missing_marker(c3d):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hat = wholebody.whole_body_trial(c3d, arms=False)
        assert hat.model.names[0] == "hat" and hat.model.segments == 7
        with pytest.raises(ValueError, match="RELB missing"):
            wholebody.whole_body_trial(_without(c3d, "RELB"), arms=True)


def test_command_writes_every_file(tmp_path):
    out = tmp_path / "res"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["--no-cache", "residuals", "--c3d", GAIT, "--fit", "--out", str(out)]) == 0
    written = sorted(f for f in os.listdir(out) if not f.startswith("."))
    assert written == ["parameters.csv", "residuals.csv", "residuals.png", "summary.json", "summary.txt"]
    assert (out / "residuals.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    head = (out / "residuals.csv").read_text().splitlines()[0]
    assert head == "trial,time_s,FX_N,FY_N,MZ_Nm,FX_fit_N,FY_fit_N,MZ_fit_Nm,measured,heldout"
    summary = json.loads((out / "summary.json").read_text())
    for kind in ("filtered", "raw"):
        for name in ("table", "fit"):
            assert set(summary["models"][kind][name]) >= {"rms", "peak", "rms_heldout"}
    rows = [line.split(",") for line in (out / "parameters.csv").read_text().splitlines()[1:]]
    masses = [(float(r[2]), float(r[3])) for r in rows if r[1] == "mass"]
    # Every fitted mass within three of the prior's spreads (25 % of the table's) of its mean.
    assert all(abs(f - t) <= 3 * 0.25 * t for t, f in masses)


def _with_forces(c3d, force):
    return dataclasses.replace(c3d, forces=dataclasses.replace(c3d.forces, force=force))


def test_errors_tell_what_to_do(c3d, monkeypatch):
    """A foot never on a plate, no measured frame, markers missing or with gaps: each names the fix."""
    from jaxmb.wholebody import _lab

    F = np.array(c3d.forces.force)  # plate 1 carries the left foot, plate 2 the right
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for plate, side in ((1, "right"), (0, "left")):
            G = F.copy()
            G[:, plate] = 0.0
            with pytest.raises(ValueError, match=f"the {side} foot never stands on a force plate.*choose a trial"):
                wholebody.whole_body_trial(_with_forces(c3d, G))
        # Both feet always on the floor, never both on plates at once: no frame is measured.
        G = F.copy()
        G[np.abs(F[:, 1, 2]) > 1.0, 0] = 0.0
        monkeypatch.setattr(_lab, "_on_floor", lambda markers, leg, side, frames: np.ones(len(frames), bool))
        with pytest.raises(ValueError, match="no measured frame.*lower min_force"):
            wholebody.whole_body_trial(_with_forces(c3d, G))
        monkeypatch.undo()
        with pytest.raises(ValueError, match="LSHO missing.*label the shoulder markers"):
            wholebody.whole_body_trial(_without(c3d, "LSHO"), arms=False)
        m = c3d.markers
        xyz = np.array(m.xyz)
        xyz[:, m.labels.index("RWRI")] = np.nan  # a marker without a single frame
        gap = dataclasses.replace(c3d, markers=dataclasses.replace(m, xyz=xyz))
        with pytest.raises(ValueError, match="markers missing for segment points wrist_r: fill the gaps"):
            wholebody.whole_body_trial(gap, arms=True)


def test_fit_refuses_no_weighted_frame(trial):
    prior = wholebody.prior_around(trial.model)
    with pytest.raises(ValueError, match="no measured frame to fit to"):
        wholebody.fit_to_plates(trial.model, trial.q, trial.qd, trial.qdd, trial.loads, prior=prior,
                                sigma=trial.noise, weights=np.zeros(len(trial.time)))


def test_command_reads_trc_and_forces_as_the_c3d(tmp_path):
    # the same trial written as a TRC and a .forces file (jaxmb.io's writers, which
    # keep every float64) gives the same residuals as the C3D file, with --marker
    # naming the hip's markers as jaxmb gait takes them
    trial = io.read_c3d(GAIT, warn_gaps=False)
    trc, frc = tmp_path / "g.trc", tmp_path / "g.forces"
    io.write_trc(trc, trial.markers)
    io.write_forces(frc, trial.forces)
    rms = {}
    for name, argv in (("c3d", ["--c3d", GAIT]),
                       ("trc", ["--trc", str(trc), "--forces", str(frc), "--marker", "hip=harrington,RASI,LASI,VSAC"])):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert main(["--no-cache", "residuals", *argv, "--out", str(tmp_path / name), "--no-figure"]) == 0
        rms[name] = json.loads((tmp_path / name / "summary.json").read_text())["models"]["filtered"]["table"]["rms"]
    np.testing.assert_allclose(rms["trc"], rms["c3d"], rtol=1e-9)


def test_command_input_errors_are_one_line(capsys, tmp_path):
    assert main(["--no-cache", "residuals", "--trc", str(tmp_path / "x.trc")]) == 2
    assert "one --forces file for each TRC file" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["--no-cache", "residuals", "--c3d", GAIT, "--marker", "hip=RGT", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no marker 'RGT'" in err and "--marker JOINT=LABEL" in err and "mapping=" not in err


def test_command_cross_validation_in_blocks(tmp_path, capsys):
    """--folds 2: every measured frame held out once (blocks of one period of the 6 Hz cut-off).

    What it shows on Gait.c3d (masses and centres of mass fitted, filtered forces): the
    centres of mass take FX's held-out RMS from 24.9 to 15.4 N (38 % lower) and MZ from 19.6
    to 15.4 N m, but not FY (24.7 -> 28.5 N): the issue's target (FX and FY 15 % lower) is
    not reached; docs/guides/wholebody.md, "On Gait.c3d", says what limits FY.
    """
    out = tmp_path / "cv"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["--no-cache", "residuals", "--c3d", GAIT, "--fit", "--fit-com", "--folds", "2", "--no-figure",
                     "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["heldout"]["scheme"] == "folds" and summary["heldout"]["block_frames"] == 17
    rows = [line.split(",") for line in (out / "residuals.csv").read_text().splitlines()[1:]]
    assert all(r[-1] == r[-2] for r in rows) and sum(int(r[-1]) for r in rows) == 83  # held out = measured
    models = summary["models"]["filtered"]
    np.testing.assert_allclose(models["table"]["rms_heldout"], models["table"]["rms"], rtol=1e-12)
    np.testing.assert_allclose(models["fit"]["rms_heldout"], [15.4, 28.5, 15.4], atol=0.1)
    assert models["fit"]["rms_heldout"][0] < 0.85 * models["table"]["rms_heldout"][0]
    rows = [line.split(",") for line in (out / "parameters.csv").read_text().splitlines()[1:]]
    assert all(abs(float(r[3]) - float(r[2])) <= 3 * 0.25 * float(r[2]) for r in rows if r[1] == "mass")
    assert main(["--no-cache", "residuals", "--c3d", GAIT, "--folds", "1", "--out", str(out)]) == 2
    assert "--folds must be 0 (off) or at least 2" in capsys.readouterr().err


def test_impulse_body_mass_is_newtons_law_summed(trial):
    """The default body mass: sum_t Fy_t = m sum_t (a_y,t + g) over the measured frames, exactly.

    Forces built from a known mass through the same motion (the trial's, any window) give
    that mass back to round-off; the trial's own plates give 62.86 kg.
    """
    from jaxmb.wholebody import _lab

    M = trial.body_mass
    unit = trial.model.replace(mass=trial.model.mass / M, inertia=trial.model.inertia / M)
    true = 70.0
    truth = trial.model.replace(mass=unit.mass * true, inertia=unit.inertia * true)
    fy = np.asarray(wholebody.residuals(truth, trial.q, trial.qd, trial.qdd, about="root"))[:, 1]
    filt = np.zeros((2, len(fy), 3))
    filt[0, :, 1] = 0.25 * fy  # split between the feet any way
    filt[1, :, 1] = 0.75 * fy
    for window in (trial.measured, np.arange(len(fy)) < 120):  # a stride, and a part of one
        got = _lab._impulse_mass(unit, trial.q, trial.qd, trial.qdd, filt, window)
        assert got == pytest.approx(true, rel=1e-5)
