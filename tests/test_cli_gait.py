"""``jaxmb gait``: the quick-start job on the bundled data, lab files, bad input, and
no half-written output after a failure."""

import os
import pathlib
import re

import numpy as np
import pytest

import walkway
from jaxmb import cli
from jaxmb.cli import gait as _cmd_gait

HERE = pathlib.Path(__file__).parent


def test_gait_default_writes_every_result_and_meets_the_targets(tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["gait", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    names = {p.name for p in out.iterdir()}
    assert {"moments.csv", "angles.csv", "powers.csv", "reactions.csv", "reactions_segment.csv",
            "ground_reaction.csv", "summary.txt", "moments.png", "quasi_static.png"} <= names  # fmt: skip
    assert not any(n.startswith(".tmp") for n in names)
    with open(out / "moments.csv") as f:
        assert f.readline().strip() == "time_s,hip_Nm,knee_Nm,ankle_Nm"  # units in the headers
    table = np.loadtxt(out / "moments.csv", delimiter=",", skiprows=1)
    assert table.shape == (6001, 4)
    np.testing.assert_allclose(table[:, 0], np.arange(6001) / 10000.0, atol=1e-12)
    # the printed table: moment and force RMS errors against the true values, within
    # the notebook's figures (0.24, 0.13, 0.02 N m) and the (0.1, 0.03, 0.08 N)
    rows = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^(hip|knee|ankle)\s+([\d.]+) N m\s+[\d.]+ N m\s+([\d.]+) N", printed, re.M)}  # fmt: skip
    assert set(rows) == {"hip", "knee", "ankle"}
    for joint, (m_lim, f_lim) in {"hip": (0.24, 0.1), "knee": (0.13, 0.03), "ankle": (0.02, 0.08)}.items():
        assert rows[joint][0] <= m_lim and rows[joint][1] <= f_lim, (joint, rows[joint])
    # the values written, not only the printed summary: each file read back against
    # the running data's true loads or an identity of its own
    from jaxmb import gait

    d = gait.running_data()

    def csv(name):
        return np.loadtxt(out / f"{name}.csv", delimiter=",", skiprows=1)[:, 1:]

    mom, ang, vel, pw = csv("moments"), csv("angles"), csv("velocities"), csv("powers")
    rea, rea_seg, grf = csv("reactions").reshape(-1, 3, 2), csv("reactions_segment").reshape(-1, 3, 2), csv("ground_reaction")
    # moments and reaction magnitudes against the truth (the whole file)
    rms = lambda x: np.sqrt(np.mean(x**2, axis=0))  # noqa: E731
    assert (rms(mom - d.moments) <= [0.24, 0.13, 0.02]).all(), rms(mom - d.moments)
    assert (rms(np.linalg.norm(rea, axis=-1) - d.force_magnitudes) <= [0.1, 0.03, 0.08]).all()
    # power = moment x angular velocity; the velocity is the rate of the angle
    np.testing.assert_allclose(pw, mom * vel, rtol=0, atol=1e-8 * np.abs(pw).max())
    np.testing.assert_allclose(np.gradient(ang, 1e-4, axis=0)[5:-5], vel[5:-5], rtol=0, atol=1e-5 * np.abs(vel).max())
    # the segment-frame reactions are the world-frame ones rotated: the same magnitudes
    np.testing.assert_allclose(np.linalg.norm(rea_seg, axis=-1), np.linalg.norm(rea, axis=-1), rtol=0, atol=1e-4)
    # the ground reaction as given (unfiltered), its centre of pressure where the
    # vertical force exceeds 20 N (held below: gait._pipeline._COP_FORCE)
    np.testing.assert_allclose(grf[:, :2], d.force, rtol=0, atol=1e-9)
    loaded = d.force[:, 1] > 20.0
    np.testing.assert_allclose(grf[loaded, 2], d.cop[loaded], rtol=0, atol=1e-9)
    stance = slice(d.heel_strike, d.toe_off + 1)
    # the ankle's reaction (the shank's force on the foot) nearly balances the ground's
    # push on the 1 kg foot in stance: opposite senses
    up = d.force[stance, 1] > 500.0
    assert np.corrcoef(rea[stance, 2, 1][up], -d.force[stance, 1][up])[0, 1] > 0.99
    assert (rea[stance, 2, 1][up] < 0).all()


def test_gait_c3d(tmp_path, capsys):
    pytest.importorskip("ezc3d")
    out = tmp_path / "c3d"
    code = cli.main(["gait", "--c3d", str(HERE / "data" / "Gait.c3d"), "--convention", "clinical",
                     "--out", str(out)])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "estimated from the plates" in printed and "ankle" in printed
    assert {"stance.png", "moments_per_kg.csv", "moments.csv"} <= {p.name for p in out.iterdir()}
    # the file's time, not a time from 0 in the frames kept: the complete frames of
    # Gait.c3d are its frames 133-326 (1.33-3.26 s), the right stance 2.09-2.65 s
    table = np.loadtxt(out / "moments.csv", delimiter=",", skiprows=1)
    np.testing.assert_allclose(table[[0, -1], 0], [1.33, 3.26], rtol=0, atol=1e-9)
    assert "stance: 2.090-2.650 s of the file (57 frames, 0.57 s)" in printed
    # "over stance" is the stance (57 frames), not the whole trial (194 frames)
    # the printed quasi-static line is the API's term_effects over the stance that the
    # command reports (not numbers copied from an earlier run): the same file through
    # read_c3d, sagittal, analyze and term_effects
    from jaxmb import gait, io

    with pytest.warns(UserWarning, match="duplicate marker labels renamed"):  # the command prints it as a note
        trial = io.read_c3d(str(HERE / "data" / "Gait.c3d"), warn_gaps=False)
    sg = gait.sagittal(trial, side="right")
    kw = sg.inputs()
    res = gait.analyze(**kw, body_mass=sg.body_weight / 9.81, cutoff=6.0, terms=True)
    where = np.zeros(len(res.time), bool)
    where[slice(*sg.stance)] = True
    assert where.sum() == 57
    change = gait.term_effects(res, where=where)["quasi_static"]["moment_change_rms"]
    line = ", ".join(f"{j} {v:.2f} N m" for j, v in zip(gait.JOINTS, change))
    assert f"RMS change of the moments over stance: {line}" in printed, (line, printed)
    # dropping the inertial terms matters least at the ankle in stance and most at the
    # hip, which carries the whole leg's inertia (Winter, ch. 5)
    assert change[2] < change[1] < change[0], change
    # the summary gives the CSV files' signs, and they are those of the data: the
    # ankle's plantarflexor moment, positive in the clinical signs, peaks in late stance
    summary = (out / "summary.txt").read_text()
    assert "CSV signs (--convention clinical): " in summary and "ankle plantarflexor moments positive" in summary
    assert "reactions: the force of the proximal segment on the distal one" in summary
    stance = (table[:, 0] >= 2.09 - 1e-9) & (table[:, 0] <= 2.65 + 1e-9)
    ankle = table[stance, 3]
    assert ankle.max() > 50 and ankle.max() > 5 * -ankle.min(), (ankle.max(), ankle.min())


def _loader(change):
    """_cmd_gait._load_one that applies change(kw) to the trials of files named b*.c3d."""
    original = _cmd_gait._load_one

    def load(args, mapping, path=None):
        kw, truth, stance, desc, name, time = original(args, mapping, path)
        if path is not None and os.path.basename(path).startswith("b"):
            kw, stance, time = change(dict(kw), stance, time)
        return kw, truth, stance, desc, name, time

    return load


def _halved(kw, stance, time):
    # every second sample: the trial at half the rates (another group of the batch)
    for k in ("hip", "knee", "ankle", "toe", "force", "cop"):
        kw[k] = kw[k][::2]
    kw["rate"], kw["force_rate"] = kw["rate"] / 2, kw["force_rate"] / 2
    return kw, [slice(st.start // 2, st.stop // 2) for st in stance], time[::2]


def test_gait_several_c3d_files_in_one_batch(tmp_path, capsys, monkeypatch):
    # three files: a.c3d, the same trial halved in rate (b.c3d: another rate, another
    # length) and a.c3d again; one folder each with the single-file outputs and
    # values, a table of every trial's peaks
    pytest.importorskip("ezc3d")
    import shutil

    a, b = tmp_path / "a.c3d", tmp_path / "b.c3d"
    shutil.copy(HERE / "data" / "Gait.c3d", a)
    shutil.copy(HERE / "data" / "Gait.c3d", b)
    monkeypatch.setattr(_cmd_gait, "_load_one", _loader(_halved))
    opts = ["--no-figures", "--convention", "clinical"]
    singles = {}
    for f in (a, b):
        singles[f.stem] = tmp_path / f"one-{f.stem}"
        assert cli.main(["gait", "--c3d", str(f), *opts, "--out", str(singles[f.stem])]) == 0
    many = tmp_path / "many"
    assert cli.main(["gait", "--c3d", str(a), str(b), str(a), *opts, "--out", str(many)]) == 0
    printed = capsys.readouterr().out
    assert {p.name for p in many.iterdir()} == {"a", "b", "a-2", "trials.csv", "summary.txt", ".jaxmb-gait.json"}
    for folder, single in (("a", "a"), ("b", "b"), ("a-2", "a")):
        assert {p.name for p in (many / folder).iterdir()} == {p.name for p in singles[single].iterdir()}
        for name in ("moments.csv", "reactions.csv", "angles.csv"):
            ref = np.loadtxt(singles[single] / name, delimiter=",", skiprows=1)
            got = np.loadtxt(many / folder / name, delimiter=",", skiprows=1)
            assert got.shape == ref.shape, (folder, name)
            np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-7 * np.abs(ref).max(), err_msg=f"{folder} {name}")
    n_a = len(np.loadtxt(singles["a"] / "moments.csv", delimiter=",", skiprows=1))
    n_b = len(np.loadtxt(singles["b"] / "moments.csv", delimiter=",", skiprows=1))
    assert n_b == (n_a + 1) // 2
    with open(many / "trials.csv") as f:
        header = f.readline().strip().split(",")
    table = np.genfromtxt(many / "trials.csv", delimiter=",", names=True, dtype=None, encoding=None)
    assert header[:8] == ["trial", "path", "stance", "start_s", "trial_frames", "stance_s", "body_mass_kg", "cutoff_hz"]
    assert len(table) == 3 and list(table["stance"]) == [1, 1, 1]
    assert list(table["trial"]) == ["a", "b", "a-2"] and list(table["trial_frames"]) == [n_a, n_b, n_a]
    assert list(table["path"]) == [str(a), str(b), str(a)]
    # the peaks are the single trial's over its stance (the README's figures)
    ankle = table["ankle_moment_max_nm_per_kg"]
    assert ankle[0] == ankle[2] and 1.3 < ankle[0] < 1.9 and abs(ankle[1] - ankle[0]) < 0.2
    # every peak column of a row from that trial's own files over its stance: moments
    # per kg (= moments / body mass) and powers / body mass, the rows from start_s on
    row = table[1]
    read = lambda name: np.loadtxt(many / "b" / name, delimiter=",", skiprows=1)  # noqa: E731
    mom, per_kg, pw = read("moments.csv"), read("moments_per_kg.csv"), read("powers.csv")
    mass = float(row["body_mass_kg"])
    np.testing.assert_allclose(per_kg[:, 1:], mom[:, 1:] / mass, rtol=1e-4)  # body_mass_kg as printed
    dt = mom[1, 0] - mom[0, 0]
    first = int(np.argmin(np.abs(mom[:, 0] - row["start_s"])))
    st = slice(first, first + int(round(row["stance_s"] / dt)))
    for k, joint in enumerate(("hip", "knee", "ankle")):
        np.testing.assert_allclose(
            [row[f"{joint}_moment_max_nm_per_kg"], row[f"{joint}_moment_min_nm_per_kg"], row[f"{joint}_power_max_w_per_kg"]],
            [per_kg[st, k + 1].max(), per_kg[st, k + 1].min(), pw[st, k + 1].max() / mass], rtol=1e-3, err_msg=joint)
    assert re.search(r"^a-2\s+1\s+2\.090\s+0\.\d\d\s+\d+\.\d", printed, re.M)
    # folder names stay unique, also without case, when a file is itself called like a renamed repeat
    assert _cmd_gait._unique_names(["a", "a-2", "a", "A"]) == ["a", "a-2", "a-3", "A-4"]


def test_gait_several_c3d_files_analysis_error_names_the_file_and_skips_it(tmp_path, capsys, monkeypatch):
    # b.c3d has a gap in a marker: it is named (its file, not "trial 1") and left out;
    # a.c3d and c.c3d are analysed and written as without b; exit status 1
    pytest.importorskip("ezc3d")
    import shutil

    a, b, c = tmp_path / "a.c3d", tmp_path / "b.c3d", tmp_path / "c.c3d"
    for f in (a, b, c):
        shutil.copy(HERE / "data" / "Gait.c3d", f)

    def gap(kw, stance, time):
        kw["hip"] = kw["hip"].copy()
        kw["hip"][5] = np.nan
        return kw, stance, time

    monkeypatch.setattr(_cmd_gait, "_load_one", _loader(gap))
    out, ref = tmp_path / "out", tmp_path / "ref"
    assert cli.main(["gait", "--c3d", str(a), str(b), str(c), "--no-figures", "--out", str(out)]) == 1
    cap = capsys.readouterr()
    err = [ln for ln in cap.err.strip().splitlines() if ": note: " not in ln]  # the readers' notes
    assert len(err) == 1 and f"{b}: hip" in err[0] and "(sample 5)" in err[0] and "trial" not in err[0], err
    assert "skipped" in err[0]
    assert re.search(rf"^skipped 1 of 3 files.*\n  {re.escape(str(b))}: hip.*\(sample 5\)", cap.out, re.M), cap.out
    assert {p.name for p in out.iterdir()} == {"a", "c", "trials.csv", "summary.txt", ".jaxmb-gait.json"}
    assert f"{b}: hip" in (out / "summary.txt").read_text()
    assert cli.main(["gait", "--c3d", str(a), str(c), "--no-figures", "--out", str(ref)]) == 0
    for name in ("a/moments.csv", "c/reactions.csv", "trials.csv"):
        assert (out / name).read_text() == (ref / name).read_text(), name
    # a rerun without c (and b still bad): c's folder of the earlier run goes, named
    # (before, a skipped or dropped file's earlier folder stayed, looking current)
    (out / "a" / "notes.txt").write_text("mine")  # a user's file stays
    assert cli.main(["gait", "--c3d", str(a), str(b), "--no-figures", "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert re.search(r"^removed 9 files of an earlier run that this one does not write: c/angles\.csv", printed, re.M), printed
    assert {p.name for p in out.iterdir()} == {"a", "trials.csv", "summary.txt", ".jaxmb-gait.json"}
    assert (out / "a" / "notes.txt").read_text() == "mine"
    # every file bad: nothing written, exit status 2
    monkeypatch.setattr(_cmd_gait, "_load_one", _loader(gap))
    none = tmp_path / "none"
    assert cli.main(["gait", "--c3d", str(b), str(b), "--out", str(none)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == "jaxmb gait: error: none of the 2 files could be analysed (each is named above)", err
    assert not none.exists()


def test_gait_batch_error_naming_no_trial_analyses_each_alone(tmp_path, capsys, monkeypatch):
    # b.c3d cut too short to filter: the batch's error names no trial, so the group is
    # analysed trial by trial, b named and left out
    pytest.importorskip("ezc3d")
    import shutil

    a, b = tmp_path / "a.c3d", tmp_path / "b.c3d"
    for f in (a, b):
        shutil.copy(HERE / "data" / "Gait.c3d", f)

    def short(kw, stance, time):
        for k in ("hip", "knee", "ankle", "toe"):
            kw[k] = kw[k][:5]
        kw["force"], kw["cop"] = kw["force"][:5 * 10], kw["cop"][:5 * 10]
        return kw, [slice(0, 5)], time[:5]

    monkeypatch.setattr(_cmd_gait, "_load_one", _loader(short))
    out = tmp_path / "out"
    assert cli.main(["gait", "--c3d", str(a), str(b), "--no-figures", "--out", str(out)]) == 1
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ": note: " not in ln]
    assert len(err) == 1 and f"{b}: " in err[0] and "too short to filter" in err[0], err
    assert {p.name for p in out.iterdir()} == {"a", "trials.csv", "summary.txt", ".jaxmb-gait.json"}
    # a's note from its analysis alone names its file, as the batch's notes do
    assert cli.main(["gait", "--c3d", str(a), str(b), "--cutoff", "1", "--out", ""]) == 1
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "low-pass" in ln]
    assert len(notes) == 1 and notes[0].startswith(f"jaxmb gait: note: {a}: a 1 Hz low-pass at 100 Hz settles"), notes


def test_several_trials_of_unequal_length_equal_single_analyses():
    # the batch path of the command: unequal trials padded in one analyze call, then
    # each cut back to its frames (GaitResult.trial)
    pytest.importorskip("ezc3d")
    import argparse

    args = argparse.Namespace(c3d=[str(HERE / "data" / "Gait.c3d")], trc=None, forces=None, side="right",
                              body_mass=None, cutoff=None, marker=[])  # fmt: skip
    kw, truth, stance, desc, name, time = _cmd_gait._load_one(args, None, args.c3d[0])
    short = dict(kw)
    n = len(kw["hip"]) - 15
    for k in ("hip", "knee", "ankle", "toe"):
        short[k] = kw[k][:n]
    nf = int(round(n * kw["force_rate"] / kw["rate"]))
    short["force"], short["cop"] = kw["force"][:nf], kw["cop"][:nf]
    trials = [(kw, None, stance, desc, name, time), (short, None, stance, desc, name, time[:n])]
    batch = _cmd_gait._analyze(trials)
    for (k, *_), res in zip(trials, batch):
        alone = _cmd_gait._analyze([(k, None, stance, desc, name, None)])[0]
        assert res.moments.shape == alone.moments.shape and res.frames == alone.frames
        np.testing.assert_allclose(res.moments, alone.moments, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(res.reactions, alone.reactions, rtol=1e-9, atol=1e-9)
        assert res.body_mass == alone.body_mass


def test_gait_cut_off_too_low_for_the_trial_is_a_note(tmp_path, capsys):
    # 0.001 Hz at 100 Hz: the filter's transient (207306 samples) outlasts the 194
    # frames; one note line, not Python's warning with a source path
    pytest.importorskip("ezc3d")
    assert cli.main(["gait", "--c3d", str(HERE / "data" / "Gait.c3d"), "--cutoff", "1e-3", "--out", ""]) == 0
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if "duplicate marker labels" not in ln]
    assert len(err) == 1 and err[0].startswith("jaxmb gait: note: a 0.001 Hz low-pass at 100 Hz settles in"), err
    assert "194-sample trial" in err[0] and "about 1.07 Hz or more" in err[0], err


def test_gait_several_c3d_files_one_unreadable_is_skipped(tmp_path, capsys):
    pytest.importorskip("ezc3d")
    out = tmp_path / "bad"
    gait_c3d = str(HERE / "data" / "Gait.c3d")
    assert cli.main(["gait", "--c3d", gait_c3d, "missing.c3d", "--no-figures", "--out", str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("jaxmb gait: note: Gait.c3d: duplicate marker labels renamed"), err  # no source path
    err = err[1:]
    assert len(err) == 1 and "missing.c3d" in err[0] and "no such file" in err[0] and "skipped" in err[0], err
    assert {p.name for p in out.iterdir()} == {"Gait", "trials.csv", "summary.txt", ".jaxmb-gait.json"}


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--cutoff", "fast"], "--cutoff must be a number"),
        (["--cutoff", "9000"], "Nyquist"),
        (["--forces", "x.forces"], "--forces goes with --trc"),
        (["--trc", "missing.trc"], "--trc needs --forces"),
        (["--c3d", "missing.c3d"], "no such file"),
        (["--body-mass", "-3"], "--body-mass"),
        (["--side", "left"], "--side left: the bundled running data have the right leg only"),
        (["--marker", "knee=RKNE"], "--marker names markers of a lab file"),  # before: ignored
        # the reason, whole (no quote clipped off), naming the file
        (["--trc", "missing.trc", "--forces", "missing.forces"], "missing.trc: No such file or directory"),
    ],
)
def test_gait_bad_input_one_line_exit_2(tmp_path, capsys, argv, match):
    out = tmp_path / "bad"
    assert cli.main(["gait", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxmb gait: error:") and match in err[0], err
    assert not out.exists()


def test_gait_refuses_an_output_folder_it_cannot_make_before_the_work(tmp_path, monkeypatch, capsys):
    # before: --out naming a file failed only after the analysis (seconds for one
    # trial, minutes for a batch)
    from jaxmb import gait

    def no_analysis(*a, **k):
        raise AssertionError("analyze was called")

    monkeypatch.setattr(gait, "analyze", no_analysis)
    afile = tmp_path / "afile"
    afile.write_text("")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    cases = [(afile, "exists and is not a folder"), (afile / "sub", f"is inside {afile}, which is a file")]
    if not os.access(locked, os.W_OK):  # (root may write anyway)
        cases.append((locked / "out", f"{locked} is not writable"))
    for out, match in cases:
        assert cli.main(["gait", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("jaxmb gait: error:") and match in err[0], err


def test_gait_out_empty_writes_nothing(tmp_path, monkeypatch, capsys):
    # "--out ''" writes nothing, as for reach and identify (before: the current folder)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["gait", "--out", ""]) == 0
    printed = capsys.readouterr().out
    assert "hip" in printed and "wrote" not in printed
    assert list(tmp_path.iterdir()) == []


def test_gait_failure_writes_nothing_one_line_exit_2(tmp_path, monkeypatch, capsys):
    # a write that fails half-way (disk full, say) leaves no file at all, not a
    # partial set: every output is staged before any is renamed into place
    out = tmp_path / "fail"
    calls = []
    real = os.fsync

    def failing(fd):
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        real(fd)

    monkeypatch.setattr(os, "fsync", failing)
    assert cli.main(["gait", "--no-figures", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0] == (f"jaxmb gait: error: cannot write the outputs (nothing was written): "
                                        f"{out / 'moments.csv'}: No space left on device")  # fmt: skip
    assert not out.exists()  # the folder it made, removed again
    # an output name taken by a folder: before, a traceback after writing the files before it
    out.mkdir()
    (out / "powers.csv").mkdir()
    monkeypatch.setattr(os, "fsync", real)
    assert cli.main(["gait", "--no-figures", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"{out / 'powers.csv'} is a folder"), err
    assert [p.name for p in out.iterdir()] == ["powers.csv"]


def test_gait_outputs_have_the_umask_mode(tmp_path, capsys):
    # before: 0600 (mkstemp's mode) whatever the umask
    old = os.umask(0o022)
    try:
        assert cli.main(["gait", "--out", str(tmp_path / "out")]) == 0
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "out").iterdir()}
    assert set(modes.values()) == {0o644} and "moments.png" in modes, modes


def test_gait_trc_errors_name_the_files(tmp_path, capsys):
    # sagittal's errors name the files (the readers record them); a Latin-1 file is
    # read, with a warning naming the file and the line
    pytest.importorskip("ezc3d")
    import warnings

    from jaxmb import io

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trial = io.read_c3d(HERE / "data" / "Gait.c3d", warn_gaps=False)
    trc, forces = tmp_path / "walk.trc", tmp_path / "short.forces"
    io.write_trc(trc, trial.markers)
    p = trial.forces
    io.write_forces(forces, p.replace(time=p.time[:1500], force=p.force[:1500], cop=p.cop[:1500],
                                      free_moment=p.free_moment[:1500]))  # fmt: skip
    out = tmp_path / "out"
    assert cli.main(["gait", "--trc", str(trc), "--forces", str(forces), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "force plates (short.forces) cover 0.000-1.499 s, the markers' complete frames " \
        "(walk.trc) 1.330-3.260 s: the frames analysed are the 17 that both cover" in err[0], err  # fmt: skip
    assert err[1] == f"jaxmb gait: error: the right foot touches no force plate in {trc} + {forces} within the " \
        "frames analysed, 1.330-1.490 s of the file", err  # fmt: skip
    text = trc.read_text().replace("PathFileType\t4\t(X/Y/Z)\t", "PathFileType\t4\t(X/Y/Z)\tDonn\u00e9es ")
    trc.write_bytes(text.encode("latin-1"))
    io.write_forces(forces, p)
    capsys.readouterr()
    assert cli.main(["gait", "--trc", str(trc), "--forces", str(forces), "--no-figures", "--out", str(out)]) == 0
    # the reader's warning as a note of the command
    assert re.search(r"^jaxmb gait: note: .*walk\.trc, line 1: not UTF-8 text \(byte 0xe9\); read as Latin-1",
                     capsys.readouterr().err, re.M)  # fmt: skip
    # a marker written as zeros in the stance: read as a gap, and the note saying so
    # comes before the error it explains (the notes were printed after a successful
    # load only)
    xyz = trial.markers.xyz.copy()
    xyz[230:233, trial.markers.labels.index("RTOE")] = 0.0
    io.write_trc(trc, trial.markers.replace(xyz=xyz))
    assert cli.main(["gait", "--trc", str(trc), "--forces", str(forces), "--out", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "walk.trc: markers at exactly (0, 0, 0), read as gaps: RTOE (3 frames)" in err[0], err
    assert err[1].startswith("jaxmb gait: error: ") and "RTOE missing at 2.300-2.320 s (frames 231-233)" in err[1], err


@pytest.mark.parametrize("command", ["gait", "identify", "optimal", "reach"])
def test_help_is_plain_text(command, capsys):
    # the descriptions come from the modules' docstrings: no reST roles or literals
    with pytest.raises(SystemExit) as e:
        cli.main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert f"jaxmb {command}" in out
    assert "``" not in out and ":func:" not in out


def _two_strides(tmp_path):
    """Gait.c3d's complete frames twice, the copy displaced by the distance walked:
    the right foot steps on plate 2, then on its copy (plate 4), as on a walkway."""
    from jaxmb import io

    mk, fp = walkway.two_strides()
    io.write_trc(tmp_path / "two.trc", mk)
    io.write_forces(tmp_path / "two.forces", fp)
    return ["--trc", str(tmp_path / "two.trc"), "--forces", str(tmp_path / "two.forces")]


def test_gait_two_stances_a_stale_folder_markers_and_body_mass(tmp_path, capsys):
    # One foot on two plates in turn: two stances, each with its own peaks (not one
    # "stance" over both and the swing between). A second run into the same folder
    # removes the files of the first that it does not write. --marker names other
    # labels; a body mass far from the plates' estimate is noted.
    pytest.importorskip("ezc3d")
    files = _two_strides(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["gait", *files, "--convention", "clinical", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "stance 1 of 2: 0.760-1.320 s of the file" in printed, printed
    assert "stance 2 of 2: 2.700-3.260 s of the file" in printed, printed
    peaks = re.findall(r"^ankle\s+([\d.]+)\s+(\d+)", printed, re.M)
    assert len(peaks) == 2 and peaks[0] == peaks[1] and 1.3 < float(peaks[0][0]) < 1.9, peaks  # the same stride
    assert {"stance.png", "quasi_static.png"} <= {p.name for p in out.iterdir()}
    (out / "stance.png").write_bytes(b"edited")  # the user's now: kept
    assert cli.main(["gait", *files, "--no-figures", "--marker", "toe={S}TOE", "--body-mass", "6.12",
                     "--out", str(out)]) == 0  # fmt: skip
    captured = capsys.readouterr()
    assert "removed 1 files of an earlier run that this one does not write: quasi_static.png" in captured.out
    assert [p.name for p in out.iterdir() if p.suffix == ".png"] == ["stance.png"]
    assert (out / "stance.png").read_bytes() == b"edited"
    # files of the user's by those names (no manifest lists them) stay: before, any
    # file named like an output was removed
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "stance.png").write_text("my figure")
    (mine / "trials.csv").write_text("my table")
    assert cli.main(["gait", *files, "--no-figures", "--out", str(mine)]) == 0
    assert "removed" not in capsys.readouterr().out
    assert (mine / "stance.png").read_text() == "my figure" and (mine / "trials.csv").read_text() == "my table"
    assert "--body-mass 6.12 kg is 0.1 times the plates' estimate, 61.2 kg" in captured.err, captured.err
    for marker, match in (("toe=RTOEX", "RTOEX.*name the markers with --marker JOINT=LABEL"),
                          ("foot=RTOE", "unknown joint 'foot'"), ("toe", "write JOINT=LABEL")):  # fmt: skip
        assert cli.main(["gait", *files, "--marker", marker, "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert re.search(match, err[-1]) and err[-1].startswith("jaxmb gait: error:"), err
    assert not (tmp_path / "bad").exists()


def test_gait_c3d_without_plates_and_a_folder_are_named(tmp_path, capsys):
    # before: "the right foot touches no force plate in ..." (a stepping problem, it
    # seemed) for a file without any plate, and "no such file" for a folder
    ezc3d = pytest.importorskip("ezc3d")
    c = ezc3d.c3d(str(HERE / "data" / "Gait.c3d"))
    c["parameters"]["FORCE_PLATFORM"]["USED"]["value"] = [0]
    c.write(str(tmp_path / "noplates.c3d"))
    for target, match in ((tmp_path / "noplates.c3d", "noplates.c3d has no force plates"),
                          (tmp_path, f"{tmp_path}: is a folder, not a C3D file")):  # fmt: skip
        assert cli.main(["gait", "--c3d", str(target), "--body-mass", "60", "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("jaxmb gait: error:") and match in err[-1], err
    assert not (tmp_path / "o").exists()


def test_a_skipped_file_is_named_once(capsys):
    # a reader names the file by its base name: "s2/b.c3d: b.c3d: truncated" before
    skipped = []
    _cmd_gait._skip(skipped, os.path.join("s2", "b.c3d"), "b.c3d: truncated: 487 frames declared")
    err = capsys.readouterr().err.strip()
    assert err == f"jaxmb gait: error: {os.path.join('s2', 'b.c3d')}: truncated: 487 frames declared (skipped)", err
    assert skipped == [(os.path.join("s2", "b.c3d"), "truncated: 487 frames declared")]
