"""The stepped runner of :func:`jaxmb.gait.analyze`'s compiled computation: a large
batch a few trials a call, each call's outputs copied into result arrays allocated
once (or memory-mapped ``.npy`` files in the folder ``out=``)."""

from __future__ import annotations

import os

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
