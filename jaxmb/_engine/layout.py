"""Batch layout: the static options of an evaluation, the kernel and chunk plan, and
the chunked driver that assembles a kernel's rows into arrays.

Batch-last arrays throughout the kernels: q (dof, b), loads (segments, 3, b),
(segments, 3, 1) when shared by all samples, or None; each scalar operation of a
recursion is then one contiguous vector operation over the batch.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..model import Model, ancestor_matrix

METHODS = ("auto", "unrolled", "matrix")
GRADIENTS = ("adjoint", "autodiff")
KINDS = ("tau", "moments", "reactions", "full", "forward", "mass")
# kinds whose gradient with respect to the model the parameter adjoint transposes
ADJOINT_KINDS = ("tau", "moments", "reactions")
FD_SOLVERS = ("aba", "solve")

_UNROLLED_MAX = 10  # segments: "auto" unrolls up to this many, matrix form beyond
# Depth (segments on the longest path from the root) beyond which "auto" takes the
# matrix form on the CPU even within _UNROLLED_MAX: each output row of the unrolled
# recursion recomputes the kinematics of its path, and on long paths the materialised
# matrix form wins (docs/performance.md, "Kernel choices"). Other platforms keep the
# unrolled kernel (GPUs fuse an unrolled recursion's rows together), chosen when the
# computation is lowered (``lax.platform_dependent``).
_UNROLLED_DEPTH_CPU = 6
_CHUNK = 8192  # samples per chunk of the matrix form
_FD_CHUNK = 2048  # samples per chunk of the forward dynamics: a chunk's state stays in cache


class Tuning(NamedTuple):
    """Tuning constants of the kernels, static (part of the jit cache key).

    The defaults are what the library uses; the design benchmarks pass other values
    to measure the alternatives (``Spec(..., tuning=Tuning(solver="solve"))``).

    Attributes:
      solver: forward dynamics by "aba" (the articulated-body algorithm, O(segments))
        or "solve" (the composite-body mass matrix and the bias factorised per
        sample: the route the articulated-body algorithm replaced, kept as an option
        to compare them).
      ldl_max: coordinates up to which the "solve" route factorises by the unrolled
        LDL^T; the Cholesky column loop beyond.
      adjoint_max: segments up to which reverse mode with respect to the model uses
        the parameter adjoint's fused loop; JAX's reverse mode beyond (the loop's one
        fusion stops paying somewhere past 32 segments on the CPUs measured).
      adjoint_first_min: coordinates from which the adjoint reads q, qd, qdd and its
        cotangent batch-first (rows as strided slices in its loop) rather than
        transposed to batch-last first (from about 18 coordinates XLA materialises
        the four transposes before the loop).
      reverse_matrix_min: segments from which reverse mode through an unrolled
        recursion is JAX's reverse mode of the matrix form instead.
      lanes: partial sums per output row of the adjoint's reduction; None: by dtype
        (2 in float64, 64 in float32).
    """

    solver: str = "aba"
    ldl_max: int = 12
    adjoint_max: int = 32
    adjoint_first_min: int = 17
    reverse_matrix_min: int = 4
    lanes: int | None = None


TUNING = Tuning()


# Segments up to which the articulated-body recursion is one fused expression per
# output over the whole batch; beyond, every _aba_cut()-th segment's state is
# materialised, chunk by chunk. Chosen by timing the forms against each other while
# developing (an ad-hoc script, not rerun by the benchmarks): fused was fastest for
# the 3-chain and slower from 7 segments on, increasingly with the segments (the
# tree recomputed per output); every segment materialised was fastest for 7 and the human; every third
# segment beyond 10 compiles in about half the time of every segment for a
# 20-chain, at a small cost in run time. The recorded comparison with Pinocchio is
# in benchmarks/README.md.
ABA_FUSED_MAX = 4


def _aba_cut(model) -> int:
    """Materialise every k-th segment's state (0: none); see ABA_FUSED_MAX."""
    n = model.segments
    return 0 if n <= ABA_FUSED_MAX else (1 if n <= 10 else 3)


def _depth(model: Model) -> int:
    """Segments on the longest path from the root: the largest row sum of the
    ancestor matrix."""
    return int(ancestor_matrix(model.parent).sum(axis=1).max())


def _cpu_takes_matrix(spec, model: Model) -> bool:
    """Whether "auto" means the unrolled recursion in general but the matrix form on
    the CPU (see _UNROLLED_DEPTH_CPU): inverse-dynamics kinds of models of at most
    _UNROLLED_MAX segments deeper than _UNROLLED_DEPTH_CPU."""
    return (spec.method == "auto" and spec.kind in ("tau", "moments", "reactions", "full")
            and model.segments <= _UNROLLED_MAX and _depth(model) > _UNROLLED_DEPTH_CPU)  # fmt: skip


def _plan(model: Model, method: str, chunk, batch: int):
    """(method, chunk) for a model and batch size."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "auto":
        method = "unrolled" if model.segments <= _UNROLLED_MAX else "matrix"
    if chunk is None:
        chunk = 0 if method == "unrolled" else _CHUNK
    if isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 0:
        raise ValueError(f"chunk must be an int >= 0 (0: the whole batch at once), got {chunk!r}")
    chunk = int(chunk)
    if chunk >= batch:
        chunk = 0
    return method, chunk


def _leaves(rows, idx=()):
    """[(index, array)] of nested lists of batch-last arrays."""
    if isinstance(rows, (list, tuple)):
        return [leaf for k, r in enumerate(rows) for leaf in _leaves(r, idx + (k,))]
    return [(idx, rows)]


def _map_chunks(fn, xs, chunk: int, method: str, batch_first: bool = False, inputs_first: bool = False,
                blocks_first: bool = True):
    """Apply ``fn`` chunk by chunk and assemble its rows into one array (..., B).

    ``xs`` is a tuple of arrays (or None) with the batch on the last axis (on the
    first with ``inputs_first``); ``fn`` maps chunks of them, batch last, to nested
    lists of rows (or one batch-last array). Without chunks the rows are assembled
    by :func:`_assemble`. With chunks, a loop over ``B // chunk`` chunks writes every
    row straight into its place in the output (one dynamic-update-slice per row: a
    stack of the rows followed by one update would become a single slow
    concatenation loop); the chunks are balanced (ceil(B / chunk) of them, of equal
    size) and the last one overlaps its predecessor, so that the kernel is traced
    and compiled once.
    Under reverse-mode differentiation each chunk's forward pass is recomputed in
    the backward loop (``jax.checkpoint``) rather than stored for the whole batch.

    Batch-first inputs (``inputs_first``) are cut into chunks and each chunk is
    transposed on its own, in cache; a materialised output (not "unrolled") with
    ``batch_first`` and ``blocks_first`` is written chunk by chunk, each chunk
    transposed likewise (not for the mass matrix, whose (dof, dof, chunk) blocks
    transposed 2.4x slower than the whole (dof, dof, B) array at once). XLA
    otherwise transposes the whole batch in a pass of its own or, fused into the
    kernel, reads and writes with a stride of the row length (for a 20-segment
    chain, nearly twice the time of the chunks transposed in cache, which run as
    fast as on (dof, B) inputs and outputs).
    """
    axis = 0 if inputs_first else -1
    B = next(x for x in xs if x is not None).shape[axis]
    if not chunk:
        if inputs_first:
            xs = tuple(None if x is None else jnp.moveaxis(x, 0, -1) for x in xs)
        return _assemble(fn(*xs), method, batch_first)
    # ceil(B / chunk) chunks of equal size (at most ``chunk``); the last one starts at
    # B - size and overlaps its predecessor by fewer samples than there are chunks
    # (its rows overwrite the same values, and reverse mode sends each output's
    # cotangent to the last write only). One traced call of ``fn`` serves every
    # chunk: a separate call on the remainder compiled the kernel twice, which
    # doubled the compile time of the forward dynamics' gradient whenever
    # B % chunk != 0 (an ad-hoc measurement before the change, the seven-segment
    # human: 6.2 s at B = 1e5 against 3.6 s at B = 98,304; ``python -m benchmarks
    # --only gradient_compile`` records the B = 1e5 case since).
    count = -(-B // chunk)
    chunk = -(-B // count)
    last = B - chunk

    def sl(x, start, size):
        if x is None:
            return None
        if inputs_first:
            return jnp.moveaxis(lax.dynamic_slice_in_dim(x, start, size, axis=0), 0, -1)
        return lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim - 1)

    first_out = batch_first and blocks_first and method != "unrolled"

    def put(out, rows, start):
        if first_out:
            block = jnp.moveaxis(_assemble(rows, method), -1, 0)
            return lax.dynamic_update_slice_in_dim(out, block, start, axis=0)
        if method != "unrolled":  # rows of materialised arrays: one update
            return lax.dynamic_update_slice_in_dim(out, _assemble(rows, method), start, axis=out.ndim - 1)
        for ix, r in _leaves(rows):
            upd = r.reshape((1,) * len(ix) + r.shape)
            out = lax.dynamic_update_slice(out, upd, ix + (0,) * (r.ndim - 1) + (start,))
        return out

    def chunk_shape(x):
        core = x.shape[1:] if inputs_first else x.shape[:-1]
        return jax.ShapeDtypeStruct(core + (chunk,), x.dtype)

    fn = jax.checkpoint(fn, policy=jax.checkpoint_policies.nothing_saveable)
    proto = jax.eval_shape(fn, *[None if x is None else chunk_shape(x) for x in xs])
    leaves = _leaves(proto)
    lead = tuple(max(ix[d] for ix, _ in leaves) + 1 for d in range(len(leaves[0][0])))
    core = lead + leaves[0][1].shape[:-1]
    out = jnp.zeros(((B,) + core) if first_out else (core + (B,)), leaves[0][1].dtype)

    def body(k, o):
        start = jnp.minimum(k * chunk, last)
        return put(o, fn(*[sl(x, start, chunk) for x in xs]), start)

    out = lax.fori_loop(0, count, body, out)
    return jnp.moveaxis(out, -1, 0) if batch_first and not first_out else out


def _assemble(rows, method: str, batch_first: bool = False):
    """Nested lists of (b,) rows to one array: (..., b), or (b, ...) with batch_first.

    For the unrolled method with more than three rows, the rows are written one by
    one into a buffer (dynamic-update-slice): XLA then computes each row in its own
    vectorised loop. A stack instead becomes one concatenation loop over all the
    rows, which XLA compiles well for up to three short rows and, for longer
    unrolled recursions, into code up to twenty times slower (measured).

    Batch-first outputs: up to three rows are stacked on the last axis (one
    concatenation loop, the fastest form then); more rows are written as strided
    columns of a (b, ...) buffer, since the concatenation loop evaluates the whole
    recursion per output element (4x slower for a 4-chain).
    """
    flat = _leaves(rows)
    shape = tuple(max(ix[d] for ix, _ in flat) + 1 for d in range(len(flat[0][0])))
    if batch_first:
        if method != "unrolled":  # materialised (..., b) arrays
            out = jnp.stack([r for _, r in flat]).reshape(shape + flat[0][1].shape)
            return jnp.moveaxis(out, -1, 0)
        first = flat[0][1]
        if len(flat) <= 3:
            return jnp.stack([r for _, r in flat], axis=-1).reshape(first.shape + shape)
        out = jnp.zeros(first.shape + shape, first.dtype)
        for ix, r in flat:
            out = lax.dynamic_update_slice(out, r.reshape(r.shape + (1,) * len(ix)), (0,) + ix)
        return out
    if method != "unrolled" or len(flat) <= 3:
        def stack(r):
            return jnp.stack([stack(x) for x in r]) if isinstance(r, (list, tuple)) else r

        return stack(rows)
    first = flat[0][1]
    out = jnp.zeros(shape + first.shape, first.dtype)
    for ix, r in flat:
        out = out.at[ix].set(r)
    return out


class _Params:
    """A model's topology with the arrays the kernels read, ``joint_attach`` given
    (the differentiable inputs of the adjoint; ``length`` and ``attach`` reach it
    through :attr:`jaxmb.Model.joint_attach`)."""

    def __init__(self, model: Model, joint_attach, com, mass, inertia, gravity):
        self.segments, self.nbase, self.dof = model.segments, model.nbase, model.dof
        self.parent, self.children, self.coordinates = model.parent, model.children, model.coordinates
        self.joint_attach, self.com, self.mass, self.inertia, self.gravity = joint_attach, com, mass, inertia, gravity


class Spec(NamedTuple):
    """The static options of one evaluation (hashable: part of the jit cache key)."""

    kind: str
    method: str = "auto"
    chunk: int | None = None
    gradient: str = "adjoint"
    joints: tuple | None = None
    frame: str = "world"
    tuning: Tuning = TUNING


def _core(spec: Spec, model) -> tuple:
    """Core (per-sample) shape of the output of ``spec.kind``."""
    n, dof = model.segments, model.dof
    k = spec.kind
    if k in ("tau", "forward"):
        return (dof,)
    if k == "moments":
        return (n,)
    if k == "reactions":
        return (len(spec.joints), 2)
    if k == "full":
        return (dof + 3 * n,)
    return (dof, dof)  # mass


def _lead_shape(q, qd, x3, loads, dof: int, n: int) -> tuple:
    shapes = [x.shape[:-1] for x in (q, qd, x3) if x is not None]
    if loads is not None and loads.ndim > 2:
        shapes.append(loads.shape[:-2])
    return tuple(np.broadcast_shapes(*shapes))
