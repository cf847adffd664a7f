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
