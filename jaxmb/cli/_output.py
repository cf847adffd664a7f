"""The command line's output folders: a command's files written as one set, with a
manifest of what it wrote, the files of an earlier run removed, a lock per folder,
and a journal from which an interrupted run is repaired."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import time
from io import BytesIO
from pathlib import Path

try:
    import fcntl
except ImportError:  # (not POSIX: no lock)
    fcntl = None

from .._files import NEW, OLD, digest, discard, file_digest, stage, swap, undo


_LEFTOVER = re.compile(rf"^\..+\.({NEW}|{OLD})\.[a-z0-9_]{{8}}\.tmp$")


_LOCK = ".jaxmb.lock"  # held (fcntl.flock) by the command writing into the folder


_JOURNAL = ".jaxmb.journal"  # what a command is replacing, until the set is complete


_LOCK_WAIT = 60.0  # s that a command waits for another writing into the same folder


def _recover(folder: Path, prog: str, names=()) -> None:
    """Repair what an interrupted command left in ``folder`` (held locked): put back
    the files of a set whose renames a journal lists (the process was killed
    half-way; a note on stderr), then remove the temporary files of jaxmb's naming
    (:data:`_LEFTOVER`, and ``.<name>.XXXXXXXX.tmp`` of the output ``names``, as
    versions before the journal named them)."""
    journal = folder / _JOURNAL
    if os.path.lexists(journal):
        try:
            ops = json.loads(journal.read_text(encoding="utf-8"))["renames"]
            undo([{k: op.get(k) for k in ("target", "new", "digest", "backup", "fresh")} for op in ops])
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            print(f"jaxmb {prog}: warning: cannot repair the interrupted write that {journal} lists: {e}",
                  file=sys.stderr)  # fmt: skip
        else:
            print(f"jaxmb {prog}: note: an earlier run writing into {folder} was interrupted: the files it had "
                  "replaced are put back", file=sys.stderr)  # fmt: skip
        discard([journal])
    old = re.compile(r"^\.(" + "|".join(re.escape(n) for n in names) + r")\.[a-z0-9_]{8}\.tmp$") if names else None
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if (_LEFTOVER.match(entry.name) or (old and old.match(entry.name))) and entry.is_file(follow_symlinks=False):
            discard([entry.path])


class _locked:
    """Context holding the lock (``fcntl.flock`` of ``.jaxmb.lock``) of each existing
    folder of ``folders`` (in sorted order: two commands cannot each wait for the
    other). A folder that another jaxmb is writing into: a note on stderr naming
    its process, then a wait of up to :data:`_LOCK_WAIT` seconds, after which
    ``BlockingIOError`` naming the lock file. The lock file is removed on leaving."""

    def __init__(self, folders, prog: str):
        self.folders, self.prog, self.held = sorted(set(folders)), prog, []

    def __enter__(self):
        try:
            for folder in self.folders:
                if folder.is_dir():
                    self.take(folder)
        except BaseException:
            self.__exit__()
            raise
        return self

    def take(self, folder: Path) -> None:
        if fcntl is None:  # (not POSIX: no lock)
            return

        path = str(folder / _LOCK)
        deadline = None
        while True:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:  # another user's, left by a killed run: flock needs no write access
                fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                who = f"another jaxmb (process {holder})" if holder.isdigit() else "another jaxmb"
                if deadline is None:
                    deadline = time.monotonic() + _LOCK_WAIT
                    print(f"jaxmb {self.prog}: waiting for {who}, which is writing into {folder}", file=sys.stderr)
                elif time.monotonic() > deadline:
                    message = f"{who} has been writing into this folder for over {_LOCK_WAIT:g} s (it holds this lock)"
                    raise BlockingIOError(errno.EAGAIN, message, path) from None
                time.sleep(0.05)
                continue
            except BaseException:
                os.close(fd)
                raise
            try:  # the lock of the file still at that path (a holder removes it when done)
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                self.held.append((path, fd))
                try:  # the holder's process, for the note of a command that waits
                    os.ftruncate(fd, 0)
                    os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
                except OSError:
                    pass
                return
            os.close(fd)

    def __exit__(self, *exc):
        while self.held:
            path, fd = self.held.pop()
            try:
                os.unlink(path)  # while held: a waiter then finds the path gone and takes a new one
            except OSError:
                pass
            os.close(fd)
        return False


def _manifest_path(folder: Path, prog: str) -> Path:
    """The file in which ``jaxmb prog`` lists what it wrote into ``folder``."""
    return folder / f".jaxmb-{prog}.json"


def _read_manifest(folder: Path, prog: str, key: str = "files"):
    """{file name: SHA-256} of the files an earlier run of ``jaxmb prog`` wrote into
    ``folder`` (``key="folders"``: the list of the folders it wrote inside it); {}
    (or []) where there is no readable manifest."""
    try:
        got = json.loads(_manifest_path(folder, prog).read_text(encoding="utf-8")).get(key, {} if key == "files" else [])
    except (OSError, ValueError, AttributeError):
        return {} if key == "files" else []
    if key != "files":  # plain names of folders inside this one
        return [k for k in got if isinstance(k, str) and k and os.sep not in k and k not in (".", "..")] if (
            isinstance(got, list)) else []  # fmt: skip
    if not isinstance(got, dict):
        return {}
    return {k: v for k, v in got.items() if isinstance(k, str) and isinstance(v, str) and os.sep not in k}


def _remove_earlier_run(folder: Path, prog: str) -> list:
    """The files of ``folder`` that an earlier run of ``jaxmb prog`` wrote and this
    run does not write again (a trial folder it no longer writes): those its
    manifest lists that are unchanged since, then the manifest itself (never a file
    the user made or edited). Returns [(path, counted)], counted False for the
    manifest."""
    listed = _read_manifest(folder, prog)
    if not listed:
        return []
    return [(p, True) for p in _remove_unchanged(folder, listed, ())] + [(_manifest_path(folder, prog), False)]


def _write_outputs(files: dict, prog: str) -> list:
    """Write a command's output files ``{path: bytes or str}`` as one set, with a
    manifest in each folder (``.jaxmb-<prog>.json``: each file's name and SHA-256),
    and remove the files of an earlier run of the command that this run did not
    write (a figure or a table of another run must not sit beside this run's
    results): only those that the folder's earlier manifest lists and whose content
    is still what that run wrote, never a file that the user made or edited. A file
    that cannot be removed gets a warning on stderr. Returns the paths removed.

    The set is all or nothing, whatever interrupts it: each folder is locked
    (:class:`_locked`: a second command writing into it waits, or after a minute
    refuses), every file is staged under a temporary name, a journal of the renames
    is written, and the renames and removals (:func:`swap`, with SIGINT and SIGTERM
    held back) leave the earlier set or the complete new one, never a mix. A process
    killed half-way leaves the journal, from which the next run puts the earlier
    set back (:func:`_recover`) before writing, and removes the temporary files."""
    folders = {}
    for path, data in files.items():
        path = Path(path)
        folders.setdefault(path.parent, {})[path.name] = data
    # the folders this run writes inside each folder it writes (a batch's trial
    # folders): listed in its manifest, so that a later run removes those it does not
    # write again (a trial skipped or left out then)
    subs = {folder: sorted(f.name for f in folders if f.parent == folder and f != folder) for folder in folders}
    manifests = {
        _manifest_path(folder, prog): json.dumps(
            {"command": f"jaxmb {prog}", "files": {n: digest(d) for n, d in sorted(named.items())}}
            | ({"folders": subs[folder]} if subs[folder] else {}), indent=1
        ) + "\n"
        for folder, named in folders.items()
    }
    dropped = []  # the trial folders of an earlier run that this one does not write
    try:
        with _locked(folders, prog) as lock:
            earlier = {folder: _read_manifest(folder, prog) for folder in folders}
            for folder in folders:
                names = set(folders[folder]) | set(earlier[folder]) | {_manifest_path(folder, prog).name}
                _recover(folder, prog, names)
            earlier = {folder: _read_manifest(folder, prog) for folder in folders}  # as put back
            dropped = [folder / name for folder in folders for name in sorted(
                set(_read_manifest(folder, prog, "folders")) - set(subs[folder]))]  # fmt: skip
            for folder in dropped:
                if folder.is_dir():
                    lock.take(folder)
                    _recover(folder, prog, set(_read_manifest(folder, prog)) | {_manifest_path(folder, prog).name})
            gone = [item for folder in dropped for item in _remove_earlier_run(folder, prog)]
            gone += [(p, True) for folder, listed in earlier.items()
                     for p in _remove_unchanged(folder, listed, folders[folder])]  # fmt: skip
            ops = stage({**files, **manifests}, tag=NEW)
            ops += [{"target": os.path.abspath(p), "new": None, "digest": None, "backup": None} for p, _ in gone]
            swap(ops, min(folders) / _JOURNAL, prog)
    finally:  # also after a signal held back until the set was complete
        for folder in dropped:
            try:
                folder.rmdir()  # only if empty (its files removed, and no file of the user's)
            except OSError:
                pass
    return [str(p) for (p, counted), op in zip(gone, ops[len(ops) - len(gone):]) if counted and op["backup"]]


def _remove_unchanged(folder: Path, listed: dict, keep) -> list:
    """The files of ``folder`` that an earlier manifest lists ({name: SHA-256}) and
    ``keep`` does not name, where their content is still what that run wrote (an
    edited one is the user's now): the files to remove."""
    return [folder / name for name, sha in sorted(listed.items())
            if name not in keep and file_digest(str(folder / name)) == sha]  # fmt: skip


def _png(fig, dpi: int = 100) -> bytes:
    """A matplotlib figure rendered as PNG bytes (for :func:`write_files`)."""
    buf = BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
