"""``jaxmb gait``: the quick-start job on the bundled data, lab files, bad input, and
no half-written output after a failure."""

import os
import pathlib
import re

import numpy as np
import pytest

from jaxmb import _cmd_gait, cli

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
        assert f.readline().strip() == "time,hip,knee,ankle"
    table = np.loadtxt(out / "moments.csv", delimiter=",", skiprows=1)
    assert table.shape == (6001, 4)
    np.testing.assert_allclose(table[:, 0], np.arange(6001) / 10000.0, atol=1e-12)
    # the printed table: moment and force RMS errors against the true values, within
    # the notebook's figures (0.24, 0.13, 0.02 N m) and the (0.1, 0.03, 0.08 N)
    rows = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^(hip|knee|ankle)\s+([\d.]+) Nm\s+[\d.]+ Nm\s+([\d.]+) N", printed, re.M)}  # fmt: skip
    assert set(rows) == {"hip", "knee", "ankle"}
    for joint, (m_lim, f_lim) in {"hip": (0.24, 0.1), "knee": (0.13, 0.03), "ankle": (0.02, 0.08)}.items():
        assert rows[joint][0] <= m_lim and rows[joint][1] <= f_lim, (joint, rows[joint])


def test_gait_c3d(tmp_path, capsys):
    pytest.importorskip("ezc3d")
    out = tmp_path / "c3d"
    code = cli.main(["gait", "--c3d", str(HERE / "data" / "Gait.c3d"), "--convention", "clinical",
                     "--out", str(out)])  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert "estimated from the plates" in printed and "ankle" in printed
    assert {"stance.png", "moments_per_kg.csv", "moments.csv"} <= {p.name for p in out.iterdir()}


def test_gait_several_c3d_files_in_one_batch(tmp_path, capsys):
    # two files (the same trial twice): one folder each with the single-file outputs,
    # a table of both trials' peaks; the values those of the single-file command
    pytest.importorskip("ezc3d")
    c3d = str(HERE / "data" / "Gait.c3d")
    one, two = tmp_path / "one", tmp_path / "two"
    assert cli.main(["gait", "--c3d", c3d, "--no-figures", "--convention", "clinical", "--out", str(one)]) == 0
    assert cli.main(["gait", "--c3d", c3d, c3d, "--no-figures", "--convention", "clinical", "--out", str(two)]) == 0
    printed = capsys.readouterr().out
    assert {p.name for p in two.iterdir()} == {"Gait", "Gait-2", "trials.csv", "summary.txt"}
    single = np.loadtxt(one / "moments.csv", delimiter=",", skiprows=1)
    for name in ("Gait", "Gait-2"):
        assert {p.name for p in (two / name).iterdir()} == {p.name for p in one.iterdir()}
        np.testing.assert_allclose(np.loadtxt(two / name / "moments.csv", delimiter=",", skiprows=1), single,
                                   rtol=1e-8, atol=1e-8 * np.abs(single).max())  # fmt: skip
    with open(two / "trials.csv") as f:
        header = f.readline().strip().split(",")
    table = np.genfromtxt(two / "trials.csv", delimiter=",", names=True, dtype=None, encoding=None)
    assert header[:5] == ["trial", "frames", "stance_s", "body_mass_kg", "cutoff_hz"] and len(table) == 2
    # the table's peaks are the single trial's, over its stance (the README's figures)
    ankle = table["ankle_moment_max_nm_per_kg"]
    assert np.allclose(ankle, ankle[0]) and 1.3 < ankle[0] < 1.9
    assert re.search(r"^Gait-2\s+0\.\d\d\s+\d+\.\d", printed, re.M)
    # folder names stay unique when a file is itself called like a renamed repeat
    assert _cmd_gait._unique_names(["a", "a-2", "a", "a"]) == ["a", "a-2", "a-3", "a-4"]


def test_several_trials_of_unequal_length_equal_single_analyses():
    # the batch path of the command: unequal trials padded in one analyze call, then
    # each cut back to its frames (GaitResult.trial)
    pytest.importorskip("ezc3d")
    import argparse

    args = argparse.Namespace(c3d=[str(HERE / "data" / "Gait.c3d")], trc=None, forces=None, side="right",
                              body_mass=None, cutoff=None)  # fmt: skip
    kw, truth, stance, desc, name = _cmd_gait._load_one(args, args.c3d[0])
    short = dict(kw)
    n = len(kw["hip"]) - 15
    for k in ("hip", "knee", "ankle", "toe"):
        short[k] = kw[k][:n]
    nf = int(round(n * kw["force_rate"] / kw["rate"]))
    short["force"], short["cop"] = kw["force"][:nf], kw["cop"][:nf]
    trials = [(kw, None, stance, desc, name), (short, None, stance, desc, name)]
    batch = _cmd_gait._analyze(trials)
    for (k, *_), res in zip(trials, batch):
        alone = _cmd_gait._analyze([(k, None, stance, desc, name)])[0]
        assert res.moments.shape == alone.moments.shape and res.frames == alone.frames
        np.testing.assert_allclose(res.moments, alone.moments, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(res.reactions, alone.reactions, rtol=1e-9, atol=1e-9)
        assert res.body_mass == alone.body_mass


def test_gait_several_c3d_files_one_bad_writes_nothing(tmp_path, capsys):
    pytest.importorskip("ezc3d")
    out = tmp_path / "bad"
    assert cli.main(["gait", "--c3d", str(HERE / "data" / "Gait.c3d"), "missing.c3d", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "missing.c3d" in err[0] and "no such file" in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--cutoff", "fast"], "--cutoff must be a number"),
        (["--cutoff", "9000"], "Nyquist"),
        (["--forces", "x.forces"], "--forces goes with --trc"),
        (["--trc", "missing.trc"], "--trc needs --forces"),
        (["--c3d", "missing.c3d"], "no such file"),
        (["--body-mass", "-3"], "--body-mass"),
    ],
)
def test_gait_bad_input_one_line_exit_2(tmp_path, capsys, argv, match):
    out = tmp_path / "bad"
    assert cli.main(["gait", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("jaxmb gait: error:") and match in err[0], err
    assert not out.exists()


def test_gait_failure_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    # a write that fails half-way (disk full, say) leaves no half-written file: the
    # file being written is a temporary name, removed on the error
    out = tmp_path / "fail"
    calls = []

    def failing(path, text):
        calls.append(path)
        if len(calls) == 3:
            with open(path, "w") as f:
                f.write(text[: len(text) // 2])
            raise OSError("no space left on device")
        with open(path, "w") as f:
            f.write(text)

    monkeypatch.setattr(_cmd_gait, "_write_text", failing)
    with pytest.raises(OSError, match="no space"):
        cli.main(["gait", "--no-figures", "--out", str(out)])
    files = sorted(os.listdir(out))
    assert len(files) == 2 and not any(f.startswith(".tmp") for f in files)
    for f in files:  # the files written before the failure are complete
        assert np.loadtxt(out / f, delimiter=",", skiprows=1).shape[0] == 6001
