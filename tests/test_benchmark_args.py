"""The benchmark modules' command line: ``--help`` and unknown options stop before a
run (a run overwrites the recorded results the README cites)."""

import pytest

from benchmarks import common


def test_help_prints_the_docstring_and_exits(capsys):
    with pytest.raises(SystemExit) as e:
        common.check_args(["--quick", "--help"], "Usage: the doc.", flags=("--quick",))
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == "Usage: the doc."


@pytest.mark.parametrize("argv,match", [
    (["--bogus"], "unknown argument '--bogus'"),
    (["--quick", "extra"], "unknown argument 'extra'"),
    (["--only"], "--only needs a value"),
])  # fmt: skip
def test_unknown_or_incomplete_arguments_exit_with_an_error(argv, match):
    with pytest.raises(SystemExit, match=match):
        common.check_args(argv, "doc", flags=("--quick",), options=("--only",))


def test_known_arguments_pass():
    common.check_args(["--quick", "--only", "a,b", "--only=c"], "doc", flags=("--quick",), options=("--only",))
    common.check_args([], None)


# ---------------------------------------------------------------- python -m benchmarks --check (issue 39)


def _fake_results(name):
    env = {"environment": {"git_commit": "abcdef0123"}}
    if name == "results.json":
        return {**env, "inverse_dynamics": [
            {"model": "chain3", "batch": 10**5, "dtype": "float64", "speedup": {"numpy": 7.0, "mujoco_loop": 50.0}},
            {"model": "chain3", "batch": 10**6, "dtype": "float64", "speedup": {"numpy": 17.0}},
            {"model": "chain3", "batch": 10**5, "dtype": "float32", "speedup": {"numpy": 9.0}}],
            "forward_dynamics": [{"model": "chain20", "batch": 10**5, "speedup": {"pinocchio_parallel": 2.5}}]}  # fmt: skip
    if name == "results_gait.json":
        return {**env, "speedup": 3.0, "speedup_loads": 5.0}
    return {**env, "speedup_per_problem": 35.0}


def test_check_reads_each_headline_record_with_its_commit():
    from benchmarks import check

    got = {f["name"]: (f["record"], f["source"]) for f in check.records(_fake_results)}
    assert got == {
        "inverse dynamics chain3 B=1e5: x numpy": (7.0, "results.json @ abcdef0"),  # float64 at 1e5 only
        "forward dynamics chain20 B=1e5: x pinocchio_parallel": (2.5, "results.json @ abcdef0"),
        "gait whole result: x NumPy method": (3.0, "results_gait.json @ abcdef0"),
        "gait moments + reactions: x NumPy method": (5.0, "results_gait.json @ abcdef0"),
        "reaching batch per problem: x SciPy": (35.0, "results_reaching.json @ abcdef0"),
    }
    # and the recorded files have every section's figures
    assert {f["section"] for f in check.records()} == set(check.SECTIONS)


def test_check_flags_a_figure_more_than_the_tolerance_below_its_record():
    from benchmarks import check

    recorded = check.records(_fake_results)
    measured = {"gait whole result: x NumPy method": 2.39,  # 0.797 of 3.0: fell
                "gait moments + reactions: x NumPy method": 4.01,  # 0.802 of 5.0: within 20 %
                "reaching batch per problem: x SciPy": 70.0}  # fmt: skip
    rows = {r["name"]: r for r in check.compare(recorded, measured, 0.2)}
    assert [n for n, r in rows.items() if r["fell"]] == ["gait whole result: x NumPy method"]
    assert rows["gait moments + reactions: x NumPy method"]["ratio"] == pytest.approx(4.01 / 5.0)
    assert rows["inverse dynamics chain3 B=1e5: x numpy"]["measured"] is None  # not run: not flagged
    text = check.report(list(rows.values()), 0.2)
    assert "FELL more than 20% below the record: gait whole result: x NumPy method (2.39 against 3.00)" in text
    assert "not measured (section not run, or its baseline not installed): inverse dynamics chain3" in text
    # a tighter tolerance flags the other one too
    assert sum(r["fell"] for r in check.compare(recorded, measured, 0.19)) == 2


@pytest.mark.parametrize("argv,match", [
    (["--only", "gait,bogus"], "--only takes sections from inverse, forward, gait, reaching, got 'gait,bogus'"),
    (["--tolerance", "20"], "--tolerance takes a fraction between 0 and 1"),
    (["--tolerance=x"], "--tolerance takes a fraction between 0 and 1"),
    (["--trials", "5"], "unknown argument '--trials'"),
])  # fmt: skip
def test_check_arguments_refused(argv, match):
    from benchmarks import check

    with pytest.raises(SystemExit, match=match):
        check.parse(argv)


def test_check_arguments_and_list_without_timing(capsys):
    from benchmarks import __main__ as entry
    from benchmarks import check

    assert check.parse(["--only=gait,inverse", "--tolerance", "0.1"]) == {
        "only": ("gait", "inverse"), "tolerance": 0.1, "list": False}  # fmt: skip
    assert check.parse([])["only"] == check.SECTIONS
    assert entry.main(["--check", "--list", "--only", "gait"]) == 0  # python -m benchmarks --check --list
    out = capsys.readouterr().out
    assert out.startswith("commit ") and "load average" in out
    assert "gait whole result: x NumPy method" in out and "inverse dynamics" not in out


def test_suite_durations_sums_per_file_and_function(tmp_path, capsys):
    from benchmarks import suite_durations

    report = tmp_path / "d.txt"
    report.write_text("=== slowest durations ===\n"
                      "2.50s call     tests/test_a.py::test_x[1]\n"
                      "1.00s setup    tests/test_a.py::test_x[2]\n"
                      "0.50s call     tests/test_b.py::test_y\n"
                      "=== 3 passed, 1 skipped in 4.20s ===\n")  # fmt: skip
    files, functions = suite_durations.summed(report.read_text())
    assert files == {"tests/test_a.py": 3.5, "tests/test_b.py": 0.5}
    assert functions == {"tests/test_a.py::test_x": 3.5, "tests/test_b.py::test_y": 0.5}
    suite_durations.main([str(report), "--top", "1"])
    out = capsys.readouterr().out
    assert "summed test time 4 s over 2 files; 3 passed, 1 skipped, wall 4 s" in out and "test_b" not in out
    (tmp_path / "e.txt").write_text("1 passed in 0.1s\n")
    with pytest.raises(SystemExit, match="no duration lines"):
        suite_durations.main([str(tmp_path / "e.txt")])
