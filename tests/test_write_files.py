"""jaxmb._files._write_files: the commands' outputs are written as one set, never in part."""

import os
import stat

import pytest

from jaxmb._files import write_files


def test_every_file_written_with_the_umask_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_files({tmp_path / "a.csv": "x,y\n1,2\n", tmp_path / "b.png": b"\x89PNG"})
    finally:
        os.umask(old)
    assert (tmp_path / "a.csv").read_text() == "x,y\n1,2\n"
    assert (tmp_path / "b.png").read_bytes() == b"\x89PNG"
    for name in ("a.csv", "b.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644  # not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.png"]  # no temporary file left


def test_a_failure_leaves_every_path_as_it_was(tmp_path):
    (tmp_path / "a.csv").write_text("old\n")
    (tmp_path / "c.csv").mkdir()  # a folder where a file should go: the set fails
    with pytest.raises(IsADirectoryError):
        write_files({tmp_path / "a.csv": "new\n", tmp_path / "b.csv": "new\n", tmp_path / "c.csv": "new\n"})
    assert (tmp_path / "a.csv").read_text() == "old\n"  # not replaced
    assert not (tmp_path / "b.csv").exists()  # not written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "c.csv"]  # no temporary file left


def test_a_symbolic_link_is_written_through_and_a_files_mode_kept(tmp_path):
    # before: the link was replaced by a new regular file (the file it pointed to,
    # e.g. in git-annex or a shared folder, kept the old data) and a 0600 file came
    # back 0644
    real = tmp_path / "data" / "trial.csv"
    real.parent.mkdir()
    real.write_text("old\n")
    os.chmod(real, 0o600)
    link = tmp_path / "trial.csv"
    link.symlink_to(real)
    write_files({link: "new\n"})
    assert link.is_symlink() and real.read_text() == "new\n"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600
    assert not [p for p in tmp_path.rglob(".*.tmp")]
