"""Output files that survive interrupts and concurrent runs, and writers that respect
what they replace (issue 38, items 15 and 16).

Item 15: a command's output set (:func:`jaxmb.cli._output._write_outputs`) is written whole or
not at all, whatever interrupts it and whoever else writes into the folder; Ctrl-C or
SIGTERM ends the command line with one line, not a traceback. Item 16: the public
writers replace regular files only, and a read-only one only with ``overwrite=True``.
"""

import fcntl
import os
import pathlib
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import jaxmb._files as set_writer
from jaxmb import cli, io
from jaxmb.cli import _output

ROOT = pathlib.Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------------------
# item 16: what the writers replace
# --------------------------------------------------------------------------------------


def _markers():
    xyz = np.arange(2 * 2 * 3, dtype=float).reshape(2, 2, 3) * 0.01
    return io.Markers(rate=100.0, time=np.array([0.0, 0.01]), labels=("A", "B"), xyz=xyz)


def _plates():
    T = 3
    return io.ForcePlates(rate=1000.0, time=np.arange(T) / 1000.0, force=np.ones((T, 1, 3)),
                          cop=np.zeros((T, 1, 3)), free_moment=np.zeros((T, 1)))  # fmt: skip


def _table():
    return io.Table(time=np.array([0.0, 0.5]), labels=("knee",), values=np.array([[1.0], [2.0]]))


WRITERS = {
    "trc": lambda p, **k: io.write_trc(p, _markers(), **k),
    "forces": lambda p, **k: io.write_forces(p, _plates(), **k),
    "mot": lambda p, **k: io.write_mot(p, _table(), **k),
}


def _reference(tmp_path, kind, name):
    """The bytes the writer writes into a fresh file ``name`` (the file's name is in
    its header): the reference."""
    ref = tmp_path / "ref" / name
    ref.parent.mkdir(exist_ok=True)
    WRITERS[kind](ref)
    return ref.read_bytes()


def test_writers_refuse_a_named_pipe_and_a_device_and_leave_them(tmp_path):
    # before: write_trc to a FIFO (or, as root, to /dev/null) replaced it with a
    # regular file
    fifo = tmp_path / "pipe.trc"
    os.mkfifo(fifo)
    for kind, write in WRITERS.items():
        with pytest.raises(OSError, match=r"pipe\.trc is a named pipe \(FIFO\), not a regular file: not replaced"):
            write(fifo)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode), kind
    device = tmp_path / "null"
    try:
        os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # what /dev/null is
    except (PermissionError, OSError):
        device = None  # no CAP_MKNOD here: the pipe stands for every special file
    if device is not None:
        with pytest.raises(OSError, match=r"null is a character device, not a regular file"):
            io.write_trc(device, _markers())
        assert stat.S_ISCHR(os.lstat(device).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["pipe.trc"] + (["null"] if device else []))


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_writers_respect_a_read_only_file_unless_overwrite(tmp_path, kind):
    # before: a 0444 file was silently replaced (root's writes ignore the mode, so
    # the writer must check it)
    expected = _reference(tmp_path, kind, f"mine.{kind}")
    path = tmp_path / f"mine.{kind}"
    path.write_text("mine\n")
    os.chmod(path, 0o444)
    with pytest.raises(PermissionError, match=rf"mine\.{kind} is read-only \(mode 0444\): not replaced"):
        WRITERS[kind](path)
    assert path.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine." + kind, "ref"]  # no temporary file
    WRITERS[kind](path, overwrite=True)
    assert path.read_bytes() == expected
    assert stat.S_IMODE(path.stat().st_mode) == 0o444  # its mode kept


def test_a_symbolic_link_is_written_through_unless_its_file_is_refused(tmp_path):
    # a link is written through to its file (the link stays: a link into a data
    # store or shared folder must not become a copy beside it); what the link points
    # to is checked as the path itself would be, and both are named
    expected = _reference(tmp_path, "trc", "walk.trc")
    real = tmp_path / "store" / "walk.trc"
    real.parent.mkdir()
    real.write_text("old\n")
    link = tmp_path / "walk.trc"
    link.symlink_to(real)
    io.write_trc(link, _markers())
    assert link.is_symlink() and real.read_bytes() == expected
    os.chmod(real, 0o444)
    with pytest.raises(PermissionError, match=rf"walk\.trc \(a link to {real}\) is read-only"):
        io.write_trc(link, _markers().replace(xyz=_markers().xyz * 2))
    assert real.read_bytes() == expected
    fifo = tmp_path / "store" / "pipe"
    os.mkfifo(fifo)
    to_fifo = tmp_path / "pipe.trc"
    to_fifo.symlink_to(fifo)
    with pytest.raises(OSError, match=rf"pipe\.trc \(a link to {fifo}\) is a named pipe"):
        io.write_trc(to_fifo, _markers())
    assert to_fifo.is_symlink() and stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_folder_is_refused_naming_it(tmp_path):
    folder = tmp_path / "walk.trc"
    folder.mkdir()
    with pytest.raises(IsADirectoryError, match=r"walk\.trc is a folder"):
        io.write_trc(folder, _markers())
    assert folder.is_dir() and list(folder.iterdir()) == [] and [p.name for p in tmp_path.iterdir()] == ["walk.trc"]


# --------------------------------------------------------------------------------------
# item 15: output sets, interrupts and concurrent runs
# --------------------------------------------------------------------------------------

OLD = {"a.csv": "old a\n", "b.png": b"\x89PNG same", "only_old.csv": "old only\n", "t1/x.csv": "old x\n",
       "t2/y.csv": "old y\n"}  # fmt: skip
NEW = {"a.csv": "new a\n", "b.png": b"\x89PNG same", "new.csv": "new only\n", "t1/x.csv": "new x\n",
       "t3/z.csv": "new z\n"}  # fmt: skip


def _files(folder, named):
    return {os.path.join(folder, k): v for k, v in named.items()}


def _snapshot(folder):
    """Every file (hidden ones too) and folder under ``folder``: {relative path: bytes or None}."""
    return {str(p.relative_to(folder)): (None if p.is_dir() else p.read_bytes()) for p in sorted(folder.rglob("*"))}


def _write_old(folder):
    folder.mkdir()
    for sub in ("t1", "t2"):
        (folder / sub).mkdir()
    _output._write_outputs(_files(folder, OLD), "gait")
    (folder / "mine.txt").write_text("the user's\n")


def _write_new(folder):
    (folder / "t3").mkdir(exist_ok=True)
    return _output._write_outputs(_files(folder, NEW), "gait")


@pytest.fixture
def sets(tmp_path):
    """The snapshots of the old set and of the new set written over it, and the
    number of renames the new set takes."""
    folder = tmp_path / "reference"
    _write_old(folder)
    old = _snapshot(folder)
    calls = []
    real = os.replace

    def counting(*a, **k):
        calls.append(a)
        return real(*a, **k)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "replace", counting)
        removed = _write_new(folder)
    new = _snapshot(folder)
    assert sorted(os.path.relpath(p, folder) for p in removed) == ["only_old.csv", "t2/y.csv"]
    assert "t2" not in new and "only_old.csv" not in new and "new.csv" in new and "mine.txt" in new
    assert not any(name.endswith((".tmp", ".lock", ".journal")) for name in old | new)
    return old, new, len(calls)


def _interrupt_at(k):
    """os.replace raising KeyboardInterrupt at its k-th call (Ctrl-C there)."""
    real, calls = os.replace, []

    def replace(*a, **kw):
        calls.append(a)
        if len(calls) == k:
            raise KeyboardInterrupt
        return real(*a, **kw)

    return replace


def test_an_interrupt_at_any_rename_leaves_the_old_set_and_the_next_run_writes_the_new(tmp_path, sets, monkeypatch):
    # before: Ctrl-C while the files were renamed left new CSVs beside the old
    # summary and figures, and hidden .tmp files that no later run removed
    old, new, n = sets
    assert n >= 10
    for k in range(1, n + 1):
        folder = tmp_path / f"k{k}"
        _write_old(folder)
        with monkeypatch.context() as m:
            m.setattr(os, "replace", _interrupt_at(k))
            with pytest.raises(KeyboardInterrupt):
                _write_new(folder)
        assert _snapshot(folder) == old | {"t3": None}, k  # the folder this run made, empty
        _write_new(folder)
        assert _snapshot(folder) == new, k


def test_a_run_killed_half_way_is_put_back_by_the_next(tmp_path, sets, monkeypatch, capsys):
    # a process killed at the k-th rename (SIGKILL, power cut: no clean-up runs)
    # leaves a journal; the next run puts the old set back, removes the temporary
    # files, then writes its own
    old, new, n = sets

    def killed(ops):
        raise RuntimeError("killed: no clean-up")

    for k in range(1, n + 1):
        folder = tmp_path / f"k{k}"
        _write_old(folder)
        with monkeypatch.context() as m:
            m.setattr(os, "replace", _interrupt_at(k))
            m.setattr(set_writer, "undo", killed)
            with pytest.raises(KeyboardInterrupt):
                _write_new(folder)
        capsys.readouterr()
        assert _snapshot(folder) != new, k
        _write_new(folder)
        assert _snapshot(folder) == new, k
        if k > 1:  # (the journal is written by the first rename)
            assert "was interrupted: the files it had replaced are put back" in capsys.readouterr().err, k


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_renames_lands_after_them(tmp_path, sets, monkeypatch, sig):
    # SIGINT or SIGTERM while the files are renamed is held back until the set is
    # complete, then raised (here the command line's handlers: KeyboardInterrupt)
    old, new, n = sets
    def terminate(signum, frame):  # as the command line's handler (cli._terminate) does
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, terminate)
    try:
        for k in (2, n // 2, n):
            folder = tmp_path / f"k{k}"
            _write_old(folder)
            real, calls = os.replace, []

            def replace(*a, **kw):
                calls.append(a)
                if len(calls) == k:
                    signal.raise_signal(sig)
                return real(*a, **kw)

            with monkeypatch.context() as m:
                m.setattr(os, "replace", replace)
                with pytest.raises(KeyboardInterrupt):
                    _write_new(folder)
            assert _snapshot(folder) == new, k
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_leftover_temporary_files_are_removed_by_the_next_run(tmp_path):
    folder = tmp_path / "out"
    _write_old(folder)
    leftovers = [".a.csv.k3x9q2zb.tmp", ".new.csv.jaxmb-new.abc_1234.tmp", ".a.csv.jaxmb-old.0123abcd.tmp"]
    for name in leftovers:
        (folder / name).write_text("half")
    (folder / ".notes.tmp").write_text("the user's")
    (folder / ".other.csv.k3x9q2zb.tmp").write_text("not an output's name")
    _write_new(folder)
    names = {p.name for p in folder.iterdir()}
    assert not names & set(leftovers)
    assert {".notes.tmp", ".other.csv.k3x9q2zb.tmp"} <= names


def test_a_second_run_waits_for_the_first_and_then_replaces_its_set(tmp_path, monkeypatch, capsys):
    # before: two runs into one folder, the second started while the first was
    # writing, left the first's files beside the second's, and a manifest that no
    # longer listed them (so no later run removed them)
    folder = tmp_path / "out"
    folder.mkdir()
    first, second = {"first.csv": "1\n", "both.csv": "first\n"}, {"second.csv": "2\n", "both.csv": "second\n"}
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (time.sleep(0.15), real(fd)))
    errors = []

    def run(named):
        try:
            _output._write_outputs(_files(folder, named), "gait")
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    a = threading.Thread(target=run, args=(first,))
    a.start()
    time.sleep(0.1)
    b = threading.Thread(target=run, args=(second,))
    b.start()
    a.join()
    b.join()
    assert not errors
    err = capsys.readouterr().err
    assert f"waiting for another jaxmb (process {os.getpid()}), which is writing into {folder}" in err
    ref = tmp_path / "ref"
    ref.mkdir()
    monkeypatch.undo()
    _output._write_outputs(_files(ref, first), "gait")
    _output._write_outputs(_files(ref, second), "gait")
    assert _snapshot(folder) == _snapshot(ref)
    assert sorted(_snapshot(folder)) == [".jaxmb-gait.json", "both.csv", "second.csv"]


def test_a_folder_locked_by_another_run_is_refused_after_the_wait(tmp_path, monkeypatch, capsys):
    folder = tmp_path / "out"
    _write_old(folder)
    before = _snapshot(folder)
    monkeypatch.setattr(_output, "_LOCK_WAIT", 0.3)
    fd = os.open(folder / ".jaxmb.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, b"4242\n")
        t0 = time.monotonic()
        with pytest.raises(BlockingIOError, match=r"another jaxmb \(process 4242\) has been writing into this "
                                                  r"folder for over 0.3 s"):  # fmt: skip
            _write_new(folder)
        assert time.monotonic() - t0 >= 0.3
    finally:
        os.close(fd)
    assert "waiting for another jaxmb (process 4242)" in capsys.readouterr().err
    after = _snapshot(folder)
    assert after.pop(".jaxmb.lock") == b"4242\n" and after == before | {"t3": None}
    os.remove(folder / ".jaxmb.lock")  # released: the next run writes
    _write_new(folder)
    assert "new.csv" in _snapshot(folder)


def test_gait_interrupted_while_writing_keeps_the_earlier_set(tmp_path, monkeypatch, capsys):
    # the command line: Ctrl-C while a run renames its files over an earlier run's
    # (other options: CSVs, summary and figures by the same names, and a figure this
    # run does not write) leaves the earlier files, one line on stderr, status 130
    out = tmp_path / "out"
    out.mkdir()
    earlier = {name: f"earlier {name}\n" for name in ("moments.csv", "angles.csv", "powers.csv", "summary.txt")}
    _output._write_outputs(_files(out, earlier | {"quasi_static.png": b"\x89PNG earlier"}), "gait")
    first = _snapshot(out)
    write = _output._write_outputs

    def interrupted(*a, **k):  # Ctrl-C at the 4th rename of the writing (not of the compilation cache)
        monkeypatch.setattr(os, "replace", _interrupt_at(4))
        return write(*a, **k)

    monkeypatch.setattr(_output, "_write_outputs", interrupted)
    assert cli.main(["gait", "--no-figures", "--convention", "clinical", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["jaxmb gait: interrupted (SIGINT)"], err
    assert _snapshot(out) == first


@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_computation_is_one_line(sig, status):
    # before: Ctrl-C printed a traceback; SIGTERM ended the process with no word
    script = textwrap.dedent("""
        import sys, time
        from jaxmb import cli
        from jaxmb.cli import reach
        def slow(*a, **k):
            print("computing", flush=True)
            time.sleep(30)
        reach.reaching_torques = slow
        sys.exit(cli.main(["--no-cache", "reach", "--out", ""]))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stdout.readline() == "computing\n"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == status
    assert err.strip().splitlines() == [f"jaxmb reach: interrupted ({signal.Signals(sig).name})"], err
