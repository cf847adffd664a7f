"""Atomic writing of a set of files: each staged under a temporary name beside its
target, then all renamed into place with SIGINT and SIGTERM held back, a failure
putting every file back. A private leaf shared by the file writers (:mod:`jaxmb.io`)
and the command line's output folders (:mod:`jaxmb.cli`)."""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import stat
import sys
import tempfile
import threading
from pathlib import Path
from typing import Optional


def _umask() -> int:
    mask = os.umask(0o022)  # reading the mask means setting it: put it straight back
    os.umask(mask)
    return mask


#: what a path that is not a regular file is, by ``stat.S_IFMT`` of its mode
_KINDS = {stat.S_IFIFO: "a named pipe (FIFO)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket"}  # fmt: skip


def _target(path: Path, overwrite: bool = False) -> tuple[Path, int]:
    """The file that writing ``path`` replaces, and the permission bits its new file
    gets. A symbolic link is written through, to the file it points to (replacing
    the link left the file it points to, e.g. in git-annex or a shared folder, with
    the old data); an existing file keeps its mode (a 0600 file became 0644), a new
    one gets the process's umask (``mkstemp`` alone gives 0600).

    Raises (before anything is written): ``IsADirectoryError`` for a folder,
    ``OSError`` for anything else that is not a regular file (a named pipe, a
    device, a socket: ``write_trc("/dev/null", ...)`` as root replaced the device),
    ``PermissionError`` for a read-only file (no write bit, or not writable by this
    user: root may replace any file, so the mode bits are checked) unless
    ``overwrite``; each naming the path (and the file a link points to)."""
    real = Path(os.path.realpath(path)) if path.is_symlink() else path
    named = str(path) if real == path else f"{path} (a link to {real})"
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real, 0o666 & ~_umask()
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(f"{named} is a folder")
    if not stat.S_ISREG(st.st_mode):
        kind = _KINDS.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise OSError(f"{named} is {kind}, not a regular file: not replaced (writers replace regular files only)")
    mode = stat.S_IMODE(st.st_mode)
    if not overwrite and (not mode & 0o222 or not os.access(real, os.W_OK)):
        what = "read-only" if not mode & 0o222 else "not writable by this user"
        raise PermissionError(f"{named} is {what} (mode {mode:04o}): not replaced (make it writable, or write "
                              "with overwrite=True, to replace it)")  # fmt: skip
    return real, mode


#: the tags in the names of the temporary files of a command's output set: its new
#: files before they are renamed into place, and the files they replace, set aside
#: until the set is complete (``.moments.csv.jaxmb-new.k3x9q2zb.tmp``)
NEW, OLD = "jaxmb-new", "jaxmb-old"


def stage(files: dict, overwrite: bool = False, tag: str = "") -> list:
    """Write ``{path: bytes or str}`` to temporary files beside their targets
    (:func:`_target`: refused before anything is written; each flushed to disk with
    its mode). Returns [{"target", "new", "digest", "backup": None}], one per
    file; a failure removes the temporary files written and raises, naming the
    target (not its temporary name)."""
    ops = []
    target = None  # the path being written, named by an error
    try:
        resolved = []
        for path in files:
            target = Path(path)
            resolved.append(_target(target, overwrite))
        for (target, data), (real, mode) in zip(((Path(p), d) for p, d in files.items()), resolved):
            directory = real.parent if str(real.parent) else Path(".")
            prefix = f".{real.name}.{tag}." if tag else f".{real.name}."
            fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=directory)
            ops.append({"target": os.path.abspath(real), "new": os.path.abspath(tmp), "digest": digest(data),
                        "backup": None})  # fmt: skip
            with os.fdopen(fd, "wb") as f:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
                f.flush()
                os.fsync(f.fileno())
            os.chmod(tmp, mode)
    except BaseException as error:
        discard([op["new"] for op in ops])
        named = _named(error, target, [op["new"] for op in ops])
        if named is error:
            raise
        raise named from error
    return ops


def _named(error: BaseException, target, temporaries) -> BaseException:
    """``error``, or one of its type naming ``target`` where it names a temporary
    file or no file."""
    message = str(error)
    if isinstance(error, OSError) and target is not None and (
        str(target) not in message or any(tmp in message for tmp in temporaries)
    ):
        return _target_error(error, Path(target))
    return error


def discard(paths) -> None:
    """Remove the files ``paths`` that exist (temporary files: quietly)."""
    for path in paths:
        if path is not None:
            try:
                os.unlink(path)
            except OSError:
                pass


def _aside(path: str) -> str:
    """A free name beside ``path`` for its file set aside until a set is complete."""
    folder, name = os.path.split(path)
    while True:
        aside = os.path.join(folder, f".{name}.{OLD}.{secrets.token_hex(4)}.tmp")
        if not os.path.lexists(aside):
            return aside


def swap(ops: list, journal: Optional[Path] = None, prog: Optional[str] = None) -> None:
    """Rename the staged files of ``ops`` into place as one set: each target that
    exists is first set aside under a hidden name (``op["backup"]``), then the new
    file renamed over it (``op["new"]`` None: a file of an earlier run, only set
    aside); once all are in place the set-aside files are removed. A failure, or an
    interrupt, half-way puts every file back as it was, then raises. SIGINT and
    SIGTERM are deferred until the set is complete or put back.

    ``journal``: a file first written listing every rename, removed when the set is
    complete; a process killed half-way leaves it, and the next command writing into
    the folder puts the earlier files back (:func:`_recover`). ``prog``: a file of an
    earlier run that cannot be set aside is left, with a warning on stderr naming
    ``jaxmb prog``. Without a journal a single file is simply renamed over its target."""
    target = None
    with _deferred_signals():
        try:
            for op in ops:
                op["fresh"] = not os.path.lexists(op["target"])  # a file this set adds
                if (journal is not None or len(ops) > 1 or op["new"] is None) and not op["fresh"]:
                    op["backup"] = _aside(op["target"])
            if journal is not None:
                _write_journal(journal, ops)
            for op in ops:
                target = op["target"]
                if op["backup"] is not None:
                    try:
                        os.replace(target, op["backup"])
                    except OSError as e:
                        if op["new"] is not None:
                            raise
                        print(f"jaxmb {prog}: warning: cannot remove {target} of an earlier run: {e.strerror or e}",
                              file=sys.stderr)  # fmt: skip
                        op["backup"] = None
                        continue
                if op["new"] is not None:
                    os.replace(op["new"], target)
            if journal is not None:
                os.unlink(journal)  # the set is complete
        except BaseException as error:
            try:
                undo(ops)
                discard([journal])
            except BaseException:
                pass  # the journal stays: the next command puts the files back
            named = _named(error, target, [op["new"] for op in ops])
            if named is error:
                raise
            raise named from error
        discard([op["backup"] for op in ops])


def undo(ops: list) -> None:
    """Put back the files of a set that :func:`swap` did not complete: each target
    that was set aside and has since been removed or replaced by this set's new file
    gets its file back; a target that did not exist and holds this set's new file is
    removed; a target holding anything else (written since) is left as it is; the
    staged new files are removed. (``op["fresh"]``: the target did not exist.)"""
    for op in reversed(ops):
        target, backup, digest = op["target"], op["backup"], op["digest"]
        discard([op["new"]])
        if backup is not None and os.path.lexists(backup):
            if not os.path.lexists(target) or (digest is not None and file_digest(target) == digest):
                os.replace(backup, target)
            else:
                os.unlink(backup)
        elif op.get("fresh") and digest is not None and file_digest(target) == digest:
            os.unlink(target)


def file_digest(path: str) -> Optional[str]:
    """SHA-256 of the regular file ``path``; None where there is none."""
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return digest(f.read())
    except OSError:
        return None


def _write_journal(journal: Path, ops: list) -> None:
    """Write the journal of a set's renames (JSON, flushed to disk) atomically."""
    text = json.dumps({"command": "jaxmb", "renames": ops}, indent=1) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f"{journal.name}.{NEW}.", suffix=".tmp", dir=journal.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, journal)
    except BaseException:
        discard([tmp])
        raise


class _deferred_signals:
    """Context in which SIGINT and SIGTERM are held back (their Python handlers
    replaced by ones that note them) and raised again, once, on leaving: a set's
    renames are not interrupted half-way. Only in the main thread (the only one
    whose handlers Python runs); elsewhere a no-op."""

    def __enter__(self):
        self.caught, self.saved = [], {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                handler = signal.getsignal(sig)
                if handler is not None and handler != signal.SIG_IGN:  # None: set outside Python
                    self.saved[sig] = signal.signal(sig, lambda s, frame: self.caught.append(s))
        return self

    def __exit__(self, *exc):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        if self.caught:
            signal.raise_signal(self.caught[0])  # its own handler now: an exception, or the end
        return False


def write_files(files: dict, *, overwrite: bool = False) -> None:
    """Write ``{path: bytes or str}`` as one set: every file goes to a temporary name
    in its folder first (flushed to disk, with the mode a new file gets under the
    process's umask, ``mkstemp`` alone gives 0600, or the mode of the file it
    replaces), then each is renamed into place (:func:`swap`); a path that is a
    symbolic link is written through it, to the file it points to. A path that is
    not a regular file, or a read-only file unless ``overwrite``, is refused
    before anything is written (:func:`_target`). A failure or an interrupt leaves
    every path as it was and no temporary file; the error names the path."""
    swap(stage(files, overwrite))


def _target_error(error: OSError, target: Path) -> OSError:
    """``error`` (same type) naming ``target`` rather than a temporary file."""
    if error.errno is not None and error.strerror:
        return type(error)(error.errno, error.strerror, str(target))
    return type(error)(f"{target}: {error}")


def digest(data) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def atomic_write(path, text: str, overwrite: bool = False) -> None:
    """Write ``text`` to ``path`` through a temporary file and ``os.replace``
    (:func:`write_files`: a path that is not a regular file, or a read-only file
    unless ``overwrite``, refused)."""
    write_files({path: text}, overwrite=overwrite)
