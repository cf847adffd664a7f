"""The stepped runner of :func:`jaxmb.gait.analyze`'s compiled computation: a large
batch a few trials a call, each call's outputs copied into result arrays allocated
once (or memory-mapped ``.npy`` files in the folder ``out=``)."""

from __future__ import annotations

import collections
import mmap
import os
import threading
import weakref

import jax
import numpy as np



#: trials x samples that one call of analyze's compiled computation takes on the CPU
#: (its loop over chunks of a few trials inside): analyze calls it step by step over
#: a larger batch and copies each step's outputs, a few MB that the cache still
#: holds, into the result arrays, allocated once; one call for the whole batch would
#: allocate every output afresh, and its time per trial and its memory grow with the
#: batch (docs/performance.md, "The gait pipeline's kernel").
_STEP_SAMPLES = 2**16


#: steps dispatched ahead of the one being copied (JAX's asynchronous dispatch).
_AHEAD = 1


def _step_trials(platform: str, frames: int, chunk: int, B: int, samples: int = _STEP_SAMPLES) -> int:
    """Trials per call of the compiled computation (see :data:`_STEP_SAMPLES`): on the
    CPU a multiple of ``chunk`` worth about ``samples`` samples (at least one
    chunk); elsewhere (GPU, TPU: the batch's inputs and results on the device) the
    whole batch ``B`` in one call."""
    if platform != "cpu":
        return B
    step = max(chunk, (samples // max(1, frames)) // chunk * chunk)
    return min(B, step)


class _ResultMemory:
    """The memory of analyze's per-sample result arrays, kept after the arrays are
    dropped for the next call to reuse.

    A whole result of 1,000 running trials is 1.6 GB. Fresh memory costs the kernel a
    fault per page (and, on a virtual machine, the host a fault behind it): on the
    2-core VM of the benchmarks 0.4-2.3 s a call, as much as the computation
    (docs/performance.md, "Gait pipeline"). Each array handed out here lies over an
    anonymous memory map of its own; when the last array over a map is gone (a
    finalizer on the array whose base is the map: every view keeps that one alive),
    the map comes back here, its pages still mapped, and the next array of the same
    size takes it. So a loop ``for batch in ...: r = analyze(batch)`` pays for fresh
    pages in its first two calls only. Dropped results are kept up to the bytes of the
    largest result handed out so far, the oldest unmapped first;
    :func:`jaxmb.gait.release_memory` unmaps them all."""

    def __init__(self):
        self._lock = threading.Lock()
        self._free = []  # [(nbytes, map, offset)], oldest first; under the lock
        self._returned = collections.deque()  # maps given back, not yet in _free (appends are atomic)
        self._limit = 0  # bytes: the largest result handed out so far (one call's arrays)

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised array like ``np.empty(shape, dtype)`` over a kept map of
        its size, or a new one."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        nbytes = max(1, count * dtype.itemsize)
        with self._lock:
            self._settle()
            hit = next((k for k, kept in enumerate(self._free) if kept[0] == nbytes), None)
            mm, off = self._free.pop(hit)[1:] if hit is not None else (None, 0)
            self._settle()
        if mm is None:
            mm, off = _new_map(nbytes)
        root = np.frombuffer(mm, dtype, count=count, offset=off)  # base: the map; views' base: root
        weakref.finalize(root, self._give_back, nbytes, mm, off).atexit = False
        return root.reshape(shape)

    def call_bytes(self, nbytes: int):
        """A call's arrays total ``nbytes``: the most that dropped ones kept may take."""
        with self._lock:
            self._limit = max(self._limit, int(nbytes))

    def _give_back(self, nbytes: int, mm, off: int):
        # a finalizer: it may run in any thread, or in this one while the lock is held
        # (a garbage collection inside empty()); so it never waits for the lock
        self._returned.append((nbytes, mm, off))
        if self._lock.acquire(blocking=False):
            try:
                self._settle()
            finally:
                self._lock.release()

    def _settle(self):
        """Under the lock: the maps given back join the kept ones, the oldest dropped
        beyond the limit (unmapped once their last reference goes, the array's buffer)."""
        while self._returned:
            self._free.append(self._returned.popleft())
        while self._free and sum(kept[0] for kept in self._free) > self._limit:
            del self._free[0]

    def release(self) -> int:
        """Unmap every kept map; returns the bytes released."""
        with self._lock:
            self._settle()
            free, self._free = self._free, []
        return sum(kept[0] for kept in free)  # the maps are unmapped with their last reference


_MEMORY = _ResultMemory()
_HUGE = 2**21  # bytes: a transparent huge page (x86-64, arm64 with 4 KiB pages)


def _new_map(nbytes: int):
    """(an anonymous map, the offset of ``nbytes`` in it): from 4 MiB, those bytes start
    at a huge-page boundary and are advised as huge pages, as NumPy does for its large
    arrays (512 times fewer page faults where the system allows it)."""
    if nbytes < 2 * _HUGE or not hasattr(mmap, "MADV_HUGEPAGE"):
        return mmap.mmap(-1, nbytes), 0
    mm = mmap.mmap(-1, nbytes + _HUGE)
    off = -np.frombuffer(mm, np.uint8, count=1).ctypes.data % _HUGE  # a multiple of 4 KiB
    try:
        mm.madvise(mmap.MADV_HUGEPAGE, off, nbytes)
    except OSError:  # no transparent huge pages here: 4 KiB pages
        pass
    return mm, off


def release_memory() -> int:
    """Return to the system the memory that :func:`jaxmb.gait.analyze` keeps from
    results that are no longer used.

    ``analyze`` reuses the memory of a dropped result for the next result of the same
    shapes (fresh memory costs a page fault per 4 KiB, as long as the computation
    itself for a large batch), and keeps at most one whole result's worth of it. Call
    this when no more ``analyze`` calls follow and the memory is wanted elsewhere.

    Returns:
      The bytes released.
    """
    return _MEMORY.release()


def _rows(x, s: int, e: int, size: int, n=None):
    """Trials ``s:e`` of x (B, ...) (its first ``n`` samples: axis 1), padded to ``size``
    trials with copies of trial ``s`` (the compiled computation's shape); None stays None."""
    if x is None:
        return None
    y = x[s:e] if n is None else x[s:e, :n]
    if e - s < size:
        y = np.concatenate([y, np.repeat(y[:1], size - (e - s), 0)])
    return y


def _file_name(path) -> str:
    """The .npy file name of an output (a path of the pipeline's output tree):
    "moments", "terms_gravity_moments", ..."""
    keys = [getattr(k, "key", None) for k in path]
    if keys[0] == "terms":
        return f"terms_{keys[1]}_{('moments', 'reactions')[path[2].idx]}"
    return str(keys[0])


def _buffer(path, v: np.ndarray, B: int, T: int, nk: int, out_dir, files: dict) -> np.ndarray:
    """The result array of one output like ``v`` (one step's: (b, nk, ...) per sample,
    (b, ...) per trial) for B trials: (B, T, ...) per sample, its samples from ``nk``
    NaN; (B, ...) per trial. Per-sample outputs go to ``out_dir/<name>.npy.partial``
    (memory-mapped, recorded in ``files``) when ``out_dir`` is given."""
    per_sample = v.ndim >= 2 and v.shape[1] == nk
    shape = (B,) + ((T,) + v.shape[2:] if per_sample else v.shape[1:])
    if per_sample and out_dir is not None:
        final = os.path.join(out_dir, _file_name(path) + ".npy")
        files[final + ".partial"] = final
        a = np.lib.format.open_memmap(final + ".partial", mode="w+", dtype=v.dtype, shape=shape)
    elif per_sample:
        a = _MEMORY.empty(shape, v.dtype)
    else:
        a = np.empty(shape, v.dtype)
    if per_sample and nk < T:
        a[:, nk:] = np.nan
    return a


def _run_steps(fn, args, B: int, step: int, T: int, nk: int, out_dir=None, files=None) -> dict:
    """Run the compiled pipeline ``fn`` over B trials ``step`` at a time (``args(s, e)``:
    its arguments for trials s:e, padded to ``step``) and copy each step's outputs into
    result arrays allocated once (:func:`_buffer`; memory-mapped files in ``out_dir``).
    Each step is dispatched before the previous one is copied (JAX's asynchronous
    dispatch), so that the copy overlaps the computation. Returns {path: array}, the
    paths of ``fn``'s output tree; per-sample arrays (B, T, ...) (NaN from ``nk``),
    per-trial ones (B, ...)."""
    starts = range(0, B, step)
    out, pending = {}, {}
    for k, s in enumerate(starts):
        e = min(s + step, B)
        for j in range(k, min(k + 1 + _AHEAD, len(starts))):
            if j not in pending:
                pending[j] = fn(*args(starts[j], min(starts[j] + step, B)))
        for path, v in jax.tree_util.tree_flatten_with_path(pending.pop(k))[0]:
            v = np.asarray(v)
            if path not in out:
                out[path] = _buffer(path, v, B, T, nk, out_dir, files)
            if v.ndim >= 2 and v.shape[1] == nk:
                out[path][s:e, :nk] = v[: e - s]
            else:
                out[path][s:e] = v[: e - s]
        if k == 0 and out_dir is None:
            _MEMORY.call_bytes(sum(a.nbytes for a in out.values()))
    for a in out.values():
        if isinstance(a, np.memmap):
            a.flush()
    return out


def _out_folder(out):
    """analyze's ``out=``: None, or the folder (created if missing) for the per-sample
    outputs' .npy files, as a str."""
    if out is None:
        return None
    if not isinstance(out, (str, os.PathLike)):
        raise ValueError(f"out must be None or a folder (str or path) for the results' .npy files, got {out!r}")
    folder = os.fspath(out)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"out={folder!r} is a file: give a folder for the results' .npy files")
    os.makedirs(folder, exist_ok=True)
    return folder


def _remove(files: dict):
    """Delete out='s partly written files (an error before the result was complete)."""
    for partial in files:
        if os.path.exists(partial):
            os.remove(partial)


def _publish(files: dict):
    """Rename out='s complete .npy.partial files to their .npy names (the arrays
    memory-mapped from them stay valid: the same files)."""
    for partial, final in files.items():
        os.replace(partial, final)
