"""The bench, optimal and reach commands (issue 38, items 12, 13, 14 and 17's figures)."""

import sys
import types

import pytest

from jaxmb.cli import main


@pytest.mark.parametrize("args", [[], ["--only", "inverse_dynamics"], ["--help"], ["--quick", "--no-wait"]])
def test_bench_is_gone_and_points_to_python_m_benchmarks(monkeypatch, capsys, args):
    # before: from a source checkout's root it ran benchmarks/ (its options only after
    # an undocumented --), from the installed command anywhere else it said "run it
    # from the repository root"; now it runs nothing anywhere and says where they run
    fake = types.ModuleType("benchmarks.__main__")
    fake.main = lambda argv=None: pytest.fail(f"jaxmb bench ran the benchmarks with {argv}")
    monkeypatch.setitem(sys.modules, "benchmarks.__main__", fake)
    assert main(["bench", *args]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1, captured
    assert err[0].startswith("jaxmb bench: error: removed: the benchmarks are not installed with the package")
    assert "run them from its root: python -m benchmarks" in err[0]
