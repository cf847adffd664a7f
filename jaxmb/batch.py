"""The one batched kernel behind every public dynamics function.

:func:`jaxmb.inverse_dynamics` and friends take one sample ``(dof,)`` or any leading
batch shape ``(..., dof)`` and call :func:`run` (compiled, cached by shapes and the
model's topology); ``jax.vmap`` of a single-sample call reaches the same kernel
through a ``custom_vmap`` rule (:func:`_vmap_rule`), nested vmaps included. Inside
(:func:`evaluate`), the batch goes to the last, contiguous axis (``q`` of shape
``(dof, B)``), so that each scalar operation of the recursion is one contiguous
vector operation over the batch, and:

- the sine and cosine of an angle come from one expression (:func:`sincos`: a
  shared range reduction and two polynomials, which XLA vectorises; XLA:CPU's own
  ``cos`` and ``sin`` cost about seven times more);
- no per-sample matrix is formed in the inverse dynamics, and for models of up to
  ten segments nothing but the inputs and outputs is written to memory;
- the outputs are interleaved back to ``(..., core)`` as they are written
  (:func:`_assemble`).

The recursion, for a segment i with parent p, joint point P_i, angle theta_i and centre
of mass c_i = P_i + R(theta_i) com_i:

    theta_i = theta_p + q_i (relative) or q_i (absolute);  omega, alpha likewise
    P_i = P_p + a_i u_p,   a_P_i = a_P_p + a_i (alpha_p n_p - omega_p^2 u_p)
    f_i = m_i a_c_i - h_i,   mu_i = I_i alpha_i - Mz_i + (c_i - P_0) x f_i
    F_i = sum_{j in subtree(i)} f_j,   T_i = sum_{j in subtree(i)} mu_j - (P_i - P_0) x F_i

with u = (cos, sin), n = (-sin, cos), a_i the joint's distance along the parent's
axis (``model.joint_attach``), h the applied force (gravity and loads) and Mz the
applied moment. F_i and T_i are the force and moment that the parent exerts on
segment i at its joint (as in :func:`jaxmb.rnea_full`); positions are taken relative
to the root's joint P_0, which keeps the moments accurate far from the origin.

Two evaluations of it (``method``):

- "unrolled": the loops over segments unrolled in Python. XLA fuses each output row
  into one loop that reads the inputs and writes that row, nothing in between; each
  row recomputes the kinematics it needs, O(segments) per row, so the cost grows as
  segments^2 but stays below the alternatives for short paths. "auto" takes it up to
  ten segments, and on the CPU only for paths of at most six (``_UNROLLED_DEPTH_CPU``).
- "matrix": every sum along the tree as a product with the ancestor matrix A
  (A[i, k] = 1 for k = i or an ancestor of i): theta = A q, P = A_e u,
  F = A^T f, ... Each product is a small matrix multiplication over the segment
  axis, whose operands XLA materialises, so nothing is recomputed; the batch is cut
  into chunks of 8192 samples that stay in cache. O(segments^2) multiply-adds per
  sample, fast in practice for long chains.

Why not simpler: XLA:CPU has no multi-output loop fusion, so an unrolled recursion
with n outputs is compiled into n loops that each recompute what they share, and a
stack of many such rows into one "concatenate" loop that it does not vectorise (up
to 20 times slower); ``optimization_barrier`` is removed before fusion; a
``lax.scan`` over segments writes and reads every segment's state (about 10 ns per
sample and segment here, memory bound); complex numbers for planar vectors halve the
arrays but vectorise worse in long expressions. The forward dynamics are the
articulated-body algorithm (``_aba_rows``: O(segments) per sample, no matrix formed),
unrolled the same way; beyond a few segments it materialises every few segments'
state (``_cut``) so that XLA does not recompute the tree per output. The mass-matrix
route (composite-body M, LDL^T or Cholesky over the batch axis; LAPACK would be called
once per sample) is kept for comparison (``_FD_SOLVER = "solve"``).

Gradients: reverse-mode differentiation of :func:`jaxmb.inverse_dynamics` (and of
:func:`jaxmb.joint_moments`, :func:`jaxmb.joint_reactions`, :func:`jaxmb.bias_forces`,
:func:`jaxmb.gravity_forces`, :func:`jaxmb.external_forces`; forward dynamics'
reverse-mode rule, :func:`_forward_vjp`, applies it too) with respect
to the model's parameters uses a hand-derived adjoint (``gradient="adjoint"``, the
default; derivation beside ``_adjoint_rows``): by virtual power, tbar . tau equals a
sum over segments of products of each segment's own kinematics with the velocities
that tbar would drive, so every parameter's derivative is an explicit expression per
sample, and all of them are summed over the batch in one fused loop (one variadic
reduction). JAX's own reverse mode of the recursion instead writes and reads about a
hundred batch-sized intermediate arrays (1.6 to 4.6 times slower for batches of
1e5 to 1e6, measured in ``benchmarks/README.md``). ``gradient="autodiff"`` keeps plain
JAX differentiation, which forward mode applied first (``jax.jvp``, ``jax.jacfwd``)
needs; forward over reverse (``jax.hessian``, ``jax.jacfwd(jax.grad(f))``) works with
either.

The operator of each quantity nests ``custom_vjp(custom_jvp(custom_vmap(kernel)))``
(:func:`_operator`): the adjoint for reverse mode with respect to the model (for
forward dynamics the transposed implicit-function rule of :func:`_forward_vjp`), a
JVP rule (for forward dynamics the implicit-function rule of :func:`_forward_jvp`),
and the batching rule. All are pure and compose with ``jax.jit``, ``jax.grad`` and
:func:`jaxmb.sharded`.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.custom_batching import custom_vmap

from ._checks import _float_dtype
from ._math import SINCOS_LIMIT, sincos
from .model import Model, ancestor_matrix

__all__ = ["sincos", "Spec", "run", "call", "evaluate"]

# ------------------------------------------------------------------ the kernels
#
# Batch-last arrays throughout: q (dof, b), loads (segments, 3, b), (segments, 3, 1)
# when shared by all samples, or None. A segment's state is the 9-tuple of (b,) rows
# (theta, omega, alpha, cos, sin, Px, Py, aPx, aPy), P relative to the root's joint.


def _root_state(qa, qda, qdda, base_acc, zero):
    c, s = sincos(qa[0])
    return (qa[0], qda[0], qdda[0], c, s, zero, zero, base_acc[0], base_acc[1])


def _child_state(parent_state, a, q_i, qd_i, qdd_i, absolute: bool):
    th_p, om_p, al_p, c_p, s_p, px_p, py_p, ax_p, ay_p = parent_state
    if absolute:
        th, om, al = q_i, qd_i, qdd_i
    else:
        th, om, al = th_p + q_i, om_p + qd_i, al_p + qdd_i
    c, s = sincos(th)
    w2 = om_p * om_p
    # P_i = P_p + a u_p ;  a_P_i = a_P_p + a (alpha_p n_p - omega_p^2 u_p)
    return (
        th, om, al, c, s,
        px_p + a * c_p, py_p + a * s_p,
        ax_p + a * (-al_p * s_p - w2 * c_p), ay_p + a * (al_p * c_p - w2 * s_p),
    )  # fmt: skip


def _segment_wrench(com, mass, inertia, gravity, state, load):
    """(fx, fy, mu): the net force to supply, f = m a_c - h, and mu, elementwise."""
    th, om, al, c, s, px, py, ax, ay = state
    cx, cy = com
    rx = c * cx - s * cy  # r = R(theta) com
    ry = s * cx + c * cy
    w2 = om * om
    # a_c = a_P + alpha k x r - omega^2 r
    fx = mass * (ax - al * ry - w2 * rx)
    fy = mass * (ay + al * rx - w2 * ry + gravity)
    mu = inertia * al
    if load is not None:
        fx = fx - load[0]
        fy = fy - load[1]
        mu = mu - load[2]
    # mu = I alpha - Mz + (c - P_0) x f
    mu = mu + (px + rx) * fy - (py + ry) * fx
    return fx, fy, mu


def _kernel_unrolled(model: Model, q, qd, qdd, loads):
    """The recursion unrolled in Python. Returns (Fx, Fy, S, Px, Py, cos, sin):
    lists over segments of (b,) rows, S_i = sum over the subtree of mu."""
    n, nb, parent = model.segments, model.nbase, model.parent
    absolute = model.coordinates == "absolute"
    qa, qda, qdda = q[nb:], qd[nb:], qdd[nb:]
    zero = jnp.zeros(q.shape[1:], q.dtype)
    base_acc = (qdd[0], qdd[1]) if nb else (zero, zero)
    attach = model.joint_attach
    st = [None] * n
    st[0] = _root_state(qa, qda, qdda, base_acc, zero)
    for i in range(1, n):
        st[i] = _child_state(st[parent[i]], attach[i], qa[i], qda[i], qdda[i], absolute)
    acc = [
        _segment_wrench(
            (model.com[i, 0], model.com[i, 1]), model.mass[i], model.inertia[i], model.gravity,
            st[i], None if loads is None else loads[i],
        )
        for i in range(n)
    ]  # fmt: skip
    # subtree sums, leaves first (children have larger indices than their parents)
    for i in reversed(range(1, n)):
        p = parent[i]
        acc[p] = tuple(x + y for x, y in zip(acc[p], acc[i]))
    return tuple([x[k] for x in acc] for k in range(3)) + tuple([x[k] for x in st] for k in (5, 6, 3, 4))


def _kernel_matrix(model: Model, q, qd, qdd, loads):
    """The recursion in matrix form: sums along the tree as small matrix products.

    With A the ancestor matrix (A[i, k] = 1 for k = i or an ancestor of i), every
    recurrence of the recursion is a product with A or A^T over the segment axis:

        theta = A q,  omega = A qd,  alpha = A qdd              (relative coordinates)
        P = A_e u,  aP = aP_0 + A_e (kappa u),   A_e = A diag(attach) S_parent
        F = A^T f,  S = A^T mu

    (S_parent selects each segment's parent row; the root's row is zero). Each
    product is one matrix multiplication of a (segments, segments) matrix with a
    (segments, b) array: XLA computes it with a BLAS-like kernel and materialises
    its operands, so that nothing upstream is recomputed (the cos and sin pass
    through the product with [A_e; I], which returns them materialised too).
    Returns (Fx, Fy, S, Px, Py, cos, sin), each a (segments, b) array.
    """
    n, nb, parent = model.segments, model.nbase, model.parent
    dt = q.dtype
    A = jnp.asarray(ancestor_matrix(parent), dt)
    sel = np.zeros((n, n))
    for i, p in enumerate(parent):
        if p >= 0:
            sel[i, p] = 1.0
    # A_e = A diag(attach on non-roots) S_parent: P_i = sum over the path of a_k u_parent(k)
    Ae = A @ (model.joint_attach[:, None] * jnp.asarray(sel, dt))
    AeI = jnp.concatenate([Ae, jnp.eye(n, dtype=dt)])
    mm = lambda M, x: jnp.matmul(M, x, precision=lax.Precision.HIGHEST)  # noqa: E731
    qa, qda, qdda = q[nb:], qd[nb:], qdd[nb:]
    if model.coordinates == "absolute":
        th, om, al = qa, qda, qdda
    else:
        th, om, al = mm(A, qa), mm(A, qda), mm(A, qdda)
    c, s = sincos(th)
    Pc, Ps = mm(AeI, c), mm(AeI, s)
    Px, c, Py, s = Pc[:n], Pc[n:], Ps[:n], Ps[n:]
    w2 = om * om
    # kappa u = (-omega^2 + i alpha)(c + i s)
    aPx = mm(Ae, -w2 * c - al * s)
    aPy = mm(Ae, -w2 * s + al * c)
    if nb:
        aPx, aPy = aPx + qdd[0], aPy + qdd[1]
    cx, cy = model.com[:, 0:1], model.com[:, 1:2]
    rx, ry = c * cx - s * cy, s * cx + c * cy
    m, inertia = model.mass[:, None], model.inertia[:, None]
    fx = m * (aPx - al * ry - w2 * rx)
    fy = m * (aPy + al * rx - w2 * ry + model.gravity)
    mu = inertia * al
    if loads is not None:
        fx, fy, mu = fx - loads[:, 0], fy - loads[:, 1], mu - loads[:, 2]
    mu = mu + (Px + rx) * fy - (Py + ry) * fx
    At = A.T
    Fx, Fy, S = mm(At, fx), mm(At, fy), mm(At, mu)
    return Fx, Fy, S, Px, Py, c, s


def _rnea_rows(model: Model, q, qd, qdd, loads, method: str):
    """One chunk: rows of tau (dof,), F (segments,) as (Fx, Fy) pairs, T (segments,),
    cos and sin (segments,); lists of (b,) rows (:func:`_assemble` makes arrays)."""
    kernel = _kernel_unrolled if method == "unrolled" else _kernel_matrix
    Fx, Fy, S, Px, Py, c, s = kernel(model, q, qd, qdd, loads)
    n = model.segments
    # moment about P_i: T_i = S_i - (P_i - P_0) x F_i
    T = [S[i] - (Px[i] * Fy[i] - Py[i] * Fx[i]) for i in range(n)]
    if model.coordinates == "absolute":
        # generalized force of an absolute angle: T_i minus the moments of its children
        kids = model.children
        Q = [T[i] - sum(T[k] for k in kids[i]) if kids[i] else T[i] for i in range(n)]
    else:
        Q = T
    tau = ([Fx[0], Fy[0]] if model.nbase else []) + Q
    return tau, [(Fx[i], Fy[i]) for i in range(n)], T, [c[i] for i in range(n)], [s[i] for i in range(n)]


def _assemble(rows, method: str, batch_first: bool = False):
    """Nested lists of (b,) rows to one array: (..., b), or (b, ...) with batch_first.

    For the unrolled method with more than three rows, the rows are written one by
    one into a buffer (dynamic-update-slice): XLA then computes each row in its own
    vectorised loop. A stack instead becomes one concatenation loop over all the
    rows, which XLA compiles well for up to three short rows and, for longer
    unrolled recursions, into code up to twenty times slower (measured).

    Batch-first outputs: up to three rows are stacked on the last axis (one
    concatenation loop, the fastest form then: 3-chain, 10^6 samples, 22 ms against
    32 ms batch-last and 56 ms as strided columns); more rows are written as
    strided columns of a (b, ...) buffer, since the concatenation loop evaluates the
    whole recursion per output element (4-chain: 417 ms against 99 ms). Measured
    by ``python -m benchmarks.design``.
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


# -------------------------------------------------------------- chunked driver

METHODS = ("auto", "unrolled", "matrix")
_UNROLLED_MAX = 10  # segments: "auto" unrolls up to this many, matrix form beyond
# Depth (segments on the longest path from the root) beyond which "auto" takes the
# matrix form on the CPU even within _UNROLLED_MAX: each output row of the unrolled
# recursion recomputes the kinematics of its path, and on long paths the materialised
# matrix form wins. ``python -m benchmarks.design --only kernel_crossover`` (inverse
# dynamics, 1e5 samples, matrix / unrolled time, 04:41 UTC on 2026-11-24): chains of
# 3, 4, 5, 6 segments 1.82, 1.18, 0.94, 1.05; of 7, 8, 10 segments 0.83, 0.60, 0.55;
# the seven-segment human (depth 4) 1.26. Other platforms keep the unrolled kernel
# (GPUs fuse an unrolled recursion's rows together; not measured here), chosen when
# the computation is lowered (``lax.platform_dependent``).
_UNROLLED_DEPTH_CPU = 6
_CHUNK = 8192  # samples per chunk of the matrix form
_FD_CHUNK = 2048  # samples per chunk of the forward dynamics: a chunk's state stays in cache
# Forward dynamics: "aba", the articulated-body algorithm (O(segments)); "solve", the
# mass matrix and bias factorised per sample (kept to compare them: benchmarks.design).
_FD_SOLVER = "aba"
# Segments up to which the articulated-body recursion is one fused expression per
# output over the whole batch; beyond, every _aba_cut()-th segment's state is
# materialised, chunk by chunk. Chosen by timing the forms against each other while
# developing (an ad-hoc script, not rerun by the benchmarks): fused was fastest for
# the 3-chain and slower from 7 segments on, increasingly with the segments (the
# tree recomputed per output); every segment materialised was fastest for 7 and the human; every third
# segment beyond 10 compiles in about half the time of every segment for a
# 20-chain, at a small cost in run time. The recorded comparison with Pinocchio is
# in benchmarks/README.md.
_ABA_FUSED_MAX = 4


def _aba_cut(model) -> int:
    """Materialise every k-th segment's state (0: none); see _ABA_FUSED_MAX."""
    n = model.segments
    return 0 if n <= _ABA_FUSED_MAX else (1 if n <= 10 else 3)


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
    kernel, reads and writes with a stride of the row length: for a 20-segment chain
    at B = 1e5 the kernel took 80 ms with (B, dof) inputs and outputs and 43 ms
    with its chunks transposed in cache (42 ms on (dof, B) inputs and outputs).
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


# ------------------------------------------------------- the parameter adjoint
#
# The gradient of a loss with respect to the model's parameters, given the cotangent
# tbar = dLoss/dtau of every sample, is the sum over the batch of d/d(params) of
# tbar . tau with tbar held fixed. By virtual power, tau = sum_k J_k^T w_k (J_k the
# Jacobian of segment k's centre of mass and angle, w_k = (f_k, n_k) the net force
# and moment it needs), so
#
#     Phi = tbar . tau = sum_k  f_k . vb_k + n_k wb_k,
#
# where (vb_k, wb_k) is the velocity of segment k's centre of mass and its angular
# velocity when the generalized velocity is tbar: the same recursion as the
# velocities, driven by tbar. With r_k = R(theta_k) com_k, f_k = m_k (a_k + g y) - h_k,
# a_k = a_P,k + alpha_k k x r_k - omega_k^2 r_k, vb_k = vb_P,k + wb_k k x r_k and
# n_k = I_k alpha_k - Mz_k, every parameter enters Phi explicitly:
#
#     dPhi/dm_k  = (a_k + g y) . vb_k            dPhi/dI_k = alpha_k wb_k
#     dPhi/dg    = sum_k m_k vb_k,y              dPhi/dr_k = m_k (alpha_k J - omega_k^2)^T vb_k - wb_k J f_k
#     dPhi/dcom_k = R(theta_k)^T dPhi/dr_k       (J = k x, a quarter turn)
#     dPhi/da_i  = (alpha_p n_p - omega_p^2 u_p) . V_i + wb_p n_p . F_i      (p the parent of i)
#
# with V_i and F_i the sums of m_k vb_k and f_k over the subtree of i (the joint
# distance a_i moves the whole subtree: its accelerations by a_i (alpha_p n_p -
# omega_p^2 u_p), its virtual velocities by a_i wb_p n_p). No reverse sweep, no
# stored intermediates: one pass over the batch computes the rows and sums them, as
# one variadic reduction, which XLA fuses into a single loop (a reduction per
# parameter would materialise the shared kinematics between them; JAX's own reverse
# mode writes and reads some hundred intermediate arrays).


class _Params:
    """A model's topology with the arrays the kernels read, ``joint_attach`` given
    (the differentiable inputs of the adjoint; ``length`` and ``attach`` reach it
    through :attr:`jaxmb.Model.joint_attach`)."""

    def __init__(self, model: Model, joint_attach, com, mass, inertia, gravity):
        self.segments, self.nbase, self.dof = model.segments, model.nbase, model.dof
        self.parent, self.children, self.coordinates = model.parent, model.children, model.coordinates
        self.joint_attach, self.com, self.mass, self.inertia, self.gravity = joint_attach, com, mass, inertia, gravity


def _adjoint_rows(model, q, qd, qdd, tbar, loads, fbar=None, react=None):
    """The rows whose batch sums are dPhi/d(parameters), (see above): lists over
    segments of arrays shaped like a row of q. ``loads`` is (segments, 3, ...) per
    sample, (segments, 3) shared, or None. ``fbar`` (joints, 2, ...): cotangents of
    the reaction forces F_j at the joints j of ``react = (joints, frame)``; as
    F_j = sum of f_k over the subtree of j, fbar_j . F_j adds the virtual translation
    fbar_j (world frame) to the velocity of every segment of that subtree."""
    n, nb, parent = model.segments, model.nbase, model.parent
    absolute = model.coordinates == "absolute"
    zero = jnp.zeros(q.shape[1:], q.dtype)
    attach, g = model.joint_attach, model.gravity
    # the motion: the forward kernels' own recursion (its positions go unused)
    qa, qda, qdda, ta = q[nb:], qd[nb:], qdd[nb:], tbar[nb:]
    st = [_root_state(qa, qda, qdda, (qdd[0], qdd[1]) if nb else (zero, zero), zero)] + [None] * (n - 1)
    for i in range(1, n):
        st[i] = _child_state(st[parent[i]], attach[i], qa[i], qda[i], qdda[i], absolute)
    om, al = [x[1] for x in st], [x[2] for x in st]
    cs, aP = [(x[3], x[4]) for x in st], [(x[7], x[8]) for x in st]
    ku = [(-om[i] * om[i] * c - al[i] * s, -om[i] * om[i] * s + al[i] * c) for i, (c, s) in enumerate(cs)]
    shift = {}  # segment -> virtual translation (world frame) from a reaction's cotangent
    if fbar is not None:
        joints, frame = react
        for k, j in enumerate(joints):
            bx, by = fbar[k, 0], fbar[k, 1]
            if frame != "world":  # (axial, shear) = R^T F, so F's cotangent is R (axial, shear)'s
                c, s = cs[j]
                bx, by = c * bx - s * by, s * bx + c * by
            shift[j] = (bx, by) if j not in shift else (shift[j][0] + bx, shift[j][1] + by)
    # the virtual motion driven by tbar: angular velocities and joint velocities
    ob, wn, vP = [None] * n, [None] * n, [None] * n
    for i in range(n):
        p = parent[i]
        ob[i] = ta[i] if p < 0 or absolute else ob[p] + ta[i]
        wn[i] = (-ob[i] * cs[i][1], ob[i] * cs[i][0])  # wb n
        if p < 0:
            vP[i] = (tbar[0], tbar[1]) if nb else (zero, zero)
        else:
            vP[i] = (vP[p][0] + attach[i] * wn[p][0], vP[p][1] + attach[i] * wn[p][1])
        if i in shift:
            vP[i] = (vP[i][0] + shift[i][0], vP[i][1] + shift[i][1])
    d_mass, d_inertia, d_cx, d_cy, d_g = [], [], [], [], None
    F, V = [None] * n, [None] * n
    for i in range(n):
        c, s = cs[i]
        cx, cy, m = model.com[i, 0], model.com[i, 1], model.mass[i]
        rx, ry = c * cx - s * cy, s * cx + c * cy
        w2 = om[i] * om[i]
        ax = aP[i][0] - al[i] * ry - w2 * rx
        ay = aP[i][1] + al[i] * rx - w2 * ry + g
        vx, vy = vP[i][0] - ob[i] * ry, vP[i][1] + ob[i] * rx
        fx, fy = m * ax, m * ay
        if loads is not None:
            fx, fy = fx - loads[i, 0], fy - loads[i, 1]
        d_mass.append(ax * vx + ay * vy)
        d_inertia.append(al[i] * ob[i])
        grx = m * (al[i] * vy - w2 * vx) + ob[i] * fy
        gry = -m * (al[i] * vx + w2 * vy) - ob[i] * fx
        d_cx.append(c * grx + s * gry)
        d_cy.append(c * gry - s * grx)
        F[i], V[i] = (fx, fy), (m * vx, m * vy)
        d_g = m * vy if d_g is None else d_g + m * vy
    for i in reversed(range(1, n)):
        p = parent[i]
        F[p] = (F[p][0] + F[i][0], F[p][1] + F[i][1])
        V[p] = (V[p][0] + V[i][0], V[p][1] + V[i][1])
    d_attach = [
        ku[parent[i]][0] * V[i][0] + ku[parent[i]][1] * V[i][1]
        + wn[parent[i]][0] * F[i][0] + wn[parent[i]][1] * F[i][1]
        for i in range(1, n)
    ]  # fmt: skip
    return d_attach, d_cx, d_cy, d_mass, d_inertia, d_g


def _lanes(dtype) -> int:
    """Partial sums per output row of the adjoint's reduction (the batch viewed as
    (B // L, L)). The reduction keeps L accumulators for each of its 21 to 120 rows.
    ``python -m benchmarks.design --only adjoint_reduction`` (recorded in
    design_results.json, 2026-11-24 03:55 UTC; jit(grad) of sum(tau**2) at 1e5
    samples, the inputs as arguments), ms by L = 1 / 2 / 4 / 8 in float64: 3-chain
    7.57 / 7.45 / 6.56 / 8.45, 10-chain 62.7 / 54.9 / 58.0 / 56.2, 16-chain 79.9 /
    54.2 / 55.1 / 61.6, 20-chain 91.9 / 63.9 / 76.9 / 78.5, 24-chain 121 / 91.8 /
    104 / 111, the human 31.4 / 26.7 / 30.6 / 26.9: 2 is the fastest or within the
    noise (an identical variant differed by up to 30 % for the 3-chain in one run).
    float32 keeps 64, for accuracy: for the 3-chain at 1e6 samples L = 2 / 8 / 64 ran
    in 28.9 / 30.6 / 29.3 ms, within 2.2e-6 / 1.4e-6 / 2.3e-7 of the float64
    gradient (relative to its largest entry). Chosen on this CPU; GPU reductions are
    unmeasured."""
    return 2 if dtype == jnp.float64 else 64


class _Rows(list):
    """The rows x[..., i] of a batch-first array x (..., k), indexable as the
    batch-last array (k, ...) would be: row by row (its ``shape`` and ``dtype`` are
    the batch-last array's)."""

    def __init__(self, x):
        super().__init__(x[..., i] for i in range(x.shape[-1]))
        self.shape, self.dtype = (x.shape[-1],) + x.shape[:-1], x.dtype


def _param_adjoint(model, q, qd, qdd, tbar, loads, fbar=None, react=None, batch_first=True):
    """(d joint_attach, d com, d mass, d inertia, d gravity) of sum_b tbar_b . tau_b
    (plus fbar_b . F_b, the reaction forces F at the joints ``react[0]`` in the frame
    ``react[1]``, when ``fbar`` (joints, 2, B) is given), for q, qd, qdd, tbar
    batch-first (B, dof) (``batch_first``) or batch-last (dof, B), and loads
    (segments, 3, B or 1) or None.

    Batch-first, the reduction's loop reads each row as a strided slice of the
    inputs; transposed to batch-last first, XLA materialises the four transposes
    before the loop from about 18 coordinates (see ``_ADJOINT_FIRST_MIN``).

    The batch is viewed as (B // L, L) so that the reduction runs over the major axis
    and the L lanes stay vectorised; the last B mod L samples are a second, short
    reduction. On the CPU all the rows are summed by one variadic reduction; on other
    platforms by reductions of at most ``_GPU_GROUP`` outputs (chosen when the
    computation is lowered: ``lax.platform_dependent`` around the reductions only, so
    that the rows are traced once)."""
    n = model.segments
    B = q.shape[0 if batch_first else -1]
    L = _lanes(q.dtype)
    shared = loads is not None and loads.shape[-1] == 1
    parts = []
    main = (B // L) * L
    for start, stop, view in ((0, main, True), (main, B, False)):
        if stop <= start:
            continue

        def cut(x):
            x = x[..., start:stop]
            return x.reshape(x.shape[:-1] + ((stop - start) // L, L)) if view else x

        def cut_first(x):
            if not batch_first:
                return cut(x)
            x = x[start:stop]
            return _Rows(x.reshape(((stop - start) // L, L) + x.shape[1:]) if view else x)

        ld = None if loads is None else (loads[..., 0] if shared else cut(loads))
        fb = None if fbar is None else cut(fbar)
        d_attach, d_cx, d_cy, d_mass, d_inertia, d_g = _adjoint_rows(
            model, *map(cut_first, (q, qd, qdd, tbar)), ld, fb, react
        )
        rows = tuple(d_attach + d_cx + d_cy + d_mass + d_inertia + [d_g])
        sums = _reduce_rows(rows)
        parts.append(jnp.stack([jnp.sum(x) for x in sums]) if view else jnp.stack(sums))
    tot = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    k = n - 1
    d_attach = jnp.concatenate([jnp.zeros((1,), q.dtype), tot[:k]])
    d_com = jnp.stack([tot[k : k + n], tot[k + n : k + 2 * n]], axis=-1)
    return d_attach, d_com, tot[k + 2 * n : k + 3 * n], tot[k + 3 * n : k + 4 * n], tot[-1]


@jax.custom_jvp
def _reduce_rows(rows):
    """Sums over axis 0 of each row: one variadic reduction on the CPU, reductions of
    at most ``_GPU_GROUP`` rows elsewhere (chosen when lowered)."""
    return lax.platform_dependent(
        rows, cpu=lambda r: _sum_rows(r, len(r)), default=lambda r: _sum_rows(r, _GPU_GROUP)
    )


@_reduce_rows.defjvp
def _reduce_rows_jvp(primals, tangents):
    # The sums are linear: their tangents are the sums of the rows' tangents, one
    # reduction each (derivatives of the adjoint: jax.hessian, reverse over reverse).
    # JAX's own rule for a variadic lax.reduce fails on a row whose tangent is a
    # symbolic zero (JAX 0.10.2: "Zero ... passed to reshape"), as the reactions'
    # adjoint has (its tau cotangent is a constant zero: the rows of the inertias).
    # The tangents come instantiated (symbolic_zeros=False).
    (rows,), (dots,) = primals, tangents
    return _reduce_rows(rows), tuple(jnp.sum(d, axis=0).astype(r.dtype) for r, d in zip(rows, dots))


def _sum_rows(rows, size: int) -> tuple:
    """Sums over axis 0 of each row, by variadic reductions of at most ``size`` rows."""
    sums = ()
    for g0 in range(0, len(rows), size):
        part = rows[g0 : g0 + size]
        sums += tuple(lax.reduce(
            part, tuple(jnp.zeros((), r.dtype) for r in part),
            lambda xs, ys: tuple(x + y for x, y in zip(xs, ys)), (0,),
        ))  # fmt: skip
    return sums


GRADIENTS = ("adjoint", "autodiff")
# coordinates from which the adjoint reads q, qd, qdd and tbar batch-first (rows as
# strided slices in its loop) instead of transposed to batch-last first. From about
# 18 coordinates XLA materialises the four transposes before the loop; below, it
# does not, and the two layouts ran alike. ``python -m benchmarks.design --only
# adjoint_reduction`` (2026-11-24 03:55 UTC, 1e5 samples, jit(grad) of
# sum(tau**2)), batch-first / transposed, ms: 3-chain 6.96 / 7.20, 10-chain 57.4 /
# 55.4, 16-chain 59.9 / 63.9, 20-chain 64.1 / 127, 24-chain 95.2 / 141, the human
# 26.6 / 28.2. Below the crossing the earlier batch-last layout stays; GPUs are
# unmeasured with either.
_ADJOINT_FIRST_MIN = 17
# segments: the adjoint's fused loop up to this many; JAX's reverse mode beyond.
# Measured on a chain, batch 1e4, run time of jit(grad) (python -m benchmarks.design,
# section 2, 2026-11-23 09:40 UTC on a 2-core AMD EPYC): adjoint / reverse mode 17.8 /
# 40.4 ms at 20 segments, 36 / 83 ms at 32, 166 / 98 ms at 36, 1782 / 120 ms at 40 (the
# unrolled loop's one fusion stops paying somewhere past 32; compile 10.7 s at 32, 34 s
# at 40). An earlier CPU (Intel Xeon, 2026-11-22) still gained 6x at
# 40: the crossing depends on the machine, and 32 is the last size measured faster here.
_ADJOINT_MAX = 32
# outputs per reduction of the adjoint on accelerators: a GPU reduction keeps a block
# of partial sums per output in shared memory, and one reduction with the ~35 outputs
# of the seven-segment human needed 0x47180 bytes against 0x38c00 available on an
# H100 (ptxas error, float32, measured by the author); 8 outputs need under a
# quarter of that. The CPU keeps the single fused reduction (no such limit, and 1.5x
# to 3.4x faster than one reduction per parameter: python -m benchmarks.design).
_GPU_GROUP = 8


def _mass_matrix_rows(model: Model, q):
    """Mass matrices of a chunk in the layout (dof, dof, b), by composite bodies.

    For relative coordinates and a fixed base, with every position relative to the
    root's joint P_0 and the sums over the subtree of k (composite body k):

        h_k = sum m_i (c_i - P_k),   J_k = sum (I_i + m_i |c_i - P_k|^2),
        M_jk = J_k + (P_k - P_j) . h_k     for j = k or an ancestor of k,

    zero when neither segment is an ancestor of the other (the subtree sums are
    products with A^T, as in the matrix form). A floating base adds M_xx = M_yy =
    total mass, M_xk = -h_k,y and M_yk = h_k,x; absolute angles theta = A q_rel give
    M_abs = A^-T M_rel A^-1.
    """
    n, nb, parent = model.segments, model.nbase, model.parent
    dt = q.dtype
    A_np = ancestor_matrix(parent)
    A = jnp.asarray(A_np, dt)
    mm = lambda M, x: jnp.matmul(M, x, precision=lax.Precision.HIGHEST)  # noqa: E731
    sel = np.zeros((n, n))
    for i, p in enumerate(parent):
        if p >= 0:
            sel[i, p] = 1.0
    Ae = A @ (model.joint_attach[:, None] * jnp.asarray(sel, dt))
    qa = q[nb:]
    th = qa if model.coordinates == "absolute" else mm(A, qa)
    c, s = sincos(th)
    Px, Py = mm(Ae, c), mm(Ae, s)
    cx, cy = model.com[:, 0:1], model.com[:, 1:2]
    Cx, Cy = Px + c * cx - s * cy, Py + s * cx + c * cy  # centres of mass, relative to P_0
    m, inertia = model.mass[:, None], model.inertia[:, None]
    At = A.T
    msub = mm(At, m)  # (n, 1) composite masses
    s1x, s1y = mm(At, m * Cx), mm(At, m * Cy)
    s2 = mm(At, inertia + m * (Cx * Cx + Cy * Cy))
    hx, hy = s1x - msub * Px, s1y - msub * Py
    J = s2 - 2.0 * (Px * s1x + Py * s1y) + msub * (Px * Px + Py * Py)
    # upper[j, k] = J_k + (P_k - P_j) . h_k where j is k or an ancestor of k
    upper = J[None] + (Px[None] - Px[:, None]) * hx[None] + (Py[None] - Py[:, None]) * hy[None]
    upper = jnp.where(jnp.asarray(A_np.T > 0)[:, :, None], upper, 0.0)
    M = upper + jnp.swapaxes(upper, 0, 1) - jnp.eye(n, dtype=dt)[:, :, None] * J[None]
    base = None
    if nb:
        base = jnp.stack([-hy, hx])  # (2, n, b): M_{x,k}, M_{y,k}
    if model.coordinates == "absolute":
        T = jnp.asarray(np.linalg.inv(A_np), dt)  # q_rel = T theta
        M = jnp.einsum("ji,jkb,kl->ilb", T, M, T, precision=lax.Precision.HIGHEST)
        if nb:
            base = jnp.einsum("xkb,kl->xlb", base, T, precision=lax.Precision.HIGHEST)
    if nb:
        mtot = jnp.sum(model.mass) * jnp.ones(q.shape[1:], dt)
        zero = jnp.zeros(q.shape[1:], dt)
        corner = jnp.stack([jnp.stack([mtot, zero]), jnp.stack([zero, mtot])])  # (2, 2, b)
        top = jnp.concatenate([corner, base], axis=1)  # (2, dof, b)
        rest = jnp.concatenate([jnp.swapaxes(base, 0, 1), M], axis=1)  # (n, dof, b)
        M = jnp.concatenate([top, rest], axis=0)
    return M


def _pivot_floor(M):
    """(d, b) lower bounds of the pivots: 4 eps M_jj.

    For a symmetric positive definite M every exact pivot is positive, but rounding
    (float32 above all, and on GPUs, which contract and order operations
    differently) can make one of an ill-conditioned M zero or negative, and the
    factorisation would return inf or NaN. A pivot below 4 eps M_jj is one that the
    working precision cannot resolve; raising it to that floor keeps every result
    finite (that sample's accelerations are then as inaccurate as its conditioning
    makes them in any case). It never acts on a matrix whose condition number is
    below about 1 / (4 eps) (2e6 in float32, 1e15 in float64)."""
    d = M.shape[0]
    eps = jnp.finfo(M.dtype).eps
    return 4 * eps * jnp.stack([M[j, j] for j in range(d)])


def _cholesky_solve_rows(M, r):
    """Solve M x = r for every sample: M (d, d, b) symmetric positive definite, r (d, b).

    Cholesky factorisation M = L L^T, then L y = r and L^T x = y, each a loop over
    the d columns of elementwise operations on whole (d, d, b) arrays (the batch
    stays the contiguous axis; LAPACK would be called once per sample).
    """
    d = M.shape[0]
    idx = jnp.arange(d)

    floor = _pivot_floor(M)  # (d, b)

    def factor(j, L):
        p2 = lax.dynamic_index_in_dim(lax.dynamic_index_in_dim(L, j, 0, False), j, 0, False)
        pivot = jnp.sqrt(jnp.maximum(p2, lax.dynamic_index_in_dim(floor, j, 0, False)))
        col = lax.dynamic_index_in_dim(L, j, 1, False) / pivot  # (d, b)
        col = jnp.where((idx > j)[:, None], col, 0.0)
        L = L - col[:, None] * col[None, :]  # trailing update of rows and columns > j
        col = jnp.where((idx == j)[:, None], pivot, col)
        return jnp.where((idx == j)[None, :, None], col[:, None], L)  # column j of L

    L = lax.fori_loop(0, d, factor, M)

    def forward(j, y):
        yj = lax.dynamic_index_in_dim(y, j, 0, False) / lax.dynamic_index_in_dim(
            lax.dynamic_index_in_dim(L, j, 0, False), j, 0, False)  # fmt: skip
        col = jnp.where((idx > j)[:, None], lax.dynamic_index_in_dim(L, j, 1, False), 0.0)
        return jnp.where((idx == j)[:, None], yj, y - col * yj)

    y = lax.fori_loop(0, d, forward, r)

    def backward(t, x):
        j = d - 1 - t
        xj = lax.dynamic_index_in_dim(x, j, 0, False) / lax.dynamic_index_in_dim(
            lax.dynamic_index_in_dim(L, j, 0, False), j, 0, False)  # fmt: skip
        row = jnp.where((idx < j)[:, None], lax.dynamic_index_in_dim(L, j, 0, False), 0.0)  # (L^T)[:, j]
        return jnp.where((idx == j)[:, None], xj, x - row * xj)

    return lax.fori_loop(0, d, backward, y)


def _ldl_solve_rows(M, r):
    """Solve M x = r for every sample by an LDL^T factorisation unrolled in Python:
    M (d, d, b) symmetric positive definite, r (d, b).

    M = L D L^T with L unit lower triangular, then L y = r, z = y / D, L^T x = z:
    d^3/6 multiply-adds and d divisions per sample, each an elementwise operation on
    (b,) rows (no square roots, no masked updates of the whole matrix). XLA keeps the
    entries of L of a chunk in cache. For small d (the default up to 12 coordinates)
    this is 1.3 to 2.7 times faster than the column loop of :func:`_cholesky_solve_rows`
    (``python -m benchmarks.design``); beyond, its compile time grows quickly (24 s for
    d = 20, measured once), so the loop is used.
    """
    d = M.shape[0]
    L = [[None] * d for _ in range(d)]
    D, Dinv = [None] * d, [None] * d
    floor = _pivot_floor(M)
    for j in range(d):
        acc = M[j, j]
        for k in range(j):
            acc = acc - L[j][k] * L[j][k] * D[k]
        acc = jnp.maximum(acc, floor[j])
        D[j], Dinv[j] = acc, 1.0 / acc
        for i in range(j + 1, d):
            acc = M[i, j]
            for k in range(j):
                acc = acc - L[i][k] * L[j][k] * D[k]
            L[i][j] = acc * Dinv[j]
    y = [None] * d
    for i in range(d):
        acc = r[i]
        for k in range(i):
            acc = acc - L[i][k] * y[k]
        y[i] = acc
    x = [None] * d
    for i in reversed(range(d)):
        acc = y[i] * Dinv[i]
        for k in range(i + 1, d):
            acc = acc - L[k][i] * x[k]
        x[i] = acc
    return jnp.stack(x)


_LDL_MAX = 12  # coordinates: the unrolled LDL^T up to this size, the column loop beyond


# ----------------------------------------------- articulated-body forward dynamics
#
# Featherstone's articulated-body algorithm (Rigid Body Dynamics Algorithms, 2008,
# ch. 7) specialised to planar trees of hinges. Every quantity of segment i is taken
# at its joint point P_i with world-frame axes, in the order (angular; x, y):
# accelerations A_i = (alpha_i; a_P_i), the classical acceleration of P_i, and
# wrenches W = (moment about P_i; force). With r_i = P_i - P_p = a_i u_p (p the
# parent), A_i = X_i A_p + c_i + S qdd_i where
#
#     X_i (alpha; a) = (alpha; a + alpha k x r_i),  c_i = (0; -omega_p^2 r_i),  S = (1; 0, 0)
#
# (relative angles), and X_i^T moves a wrench from P_i to P_p (moment + r_i x force).
# Segment i alone needs W = M_i A_i + b_i at P_i, with rho_i = R(theta_i) com_i,
#
#     M_i = [[I + m |com|^2, -m rho_y, m rho_x], [-m rho_y, m, 0], [m rho_x, 0, m]],
#     b_i = (-rho x h - Mz; -m omega^2 rho - h)     (h, Mz: the load's force and moment),
#
# and gravity is the base's fictitious acceleration (0; 0, g) (every a_P then carries
# + g y, which leaves alpha unchanged). The inward pass sums the articulated inertias
# IA and bias wrenches pA over the subtree (IA_i = M_i + sum_k X_k^T Ia_k X_k, pA_i
# = b_i + sum_k X_k^T pa_k), where, with D = IA[0,0], U = IA[:, 0], u = tau - pA[0],
#
#     Ia = IA - U U^T / D  (its first row and column vanish: a 2x2 force block),
#     pa = pA + Ia c + U u / D  (its moment is tau: all a hinge transmits),
#
# and the outward pass gives qdd_i = (u_i - U_i . (X_i A_p + c_i)) / D_i. A floating
# root solves its own 3x3 IA_0 A_0 = (tau_theta - pA_0; tau_x, tau_y) (LDL^T in the
# order x, y, theta). Absolute angles are the relative ones through theta = A q_rel
# (A the ancestor matrix): the same mechanism, with generalized forces tau_rel = A^T
# tau_abs (subtree sums) and accelerations theta_dd = A qdd_rel, the alpha_i that the
# outward pass computes anyway.
#
# Pivot floor: IA_i - M_i is positive semidefinite (a sum of congruences of the
# children's Ia), and the Schur complements of a positive definite matrix grow with
# it, so in exact arithmetic D_i >= I_i + m_i |com_i|^2 (segment i alone about its
# joint) and the floating root's pivots are at least (m_0, m_0, I_0). Rounding can
# bring a pivot below that bound (float32 on an ill-conditioned tree) but no exact
# one lies under it: raising pivots to it keeps every result finite and never moves
# an exact one.


def _cut(rows):
    """The rows, materialised: a product with the identity, which XLA computes as a
    matrix product (not fused with its operands or users). XLA:CPU fuses every
    output of an unrolled recursion with all it depends on, recomputing the tree per
    output and per use (for 20 segments, O(segments^2) work per sample and a minute
    of compile time); ``optimization_barrier`` does not stop it."""
    st = jnp.stack(jnp.broadcast_arrays(*rows))
    eye = jnp.eye(len(rows), dtype=st.dtype)
    return list(jnp.matmul(eye, st, precision=lax.Precision.HIGHEST))


def _aba_rows(model, q, qd, tau, loads, cut: int = 0):
    """Forward dynamics of a chunk: a list of dof (b,) rows of qdd (see above).

    q, qd, tau: (dof, b); loads: (segments, 3, b), (segments, 3, 1) or None. qd
    None: at rest (no velocity terms are traced: the mass-matrix solve of the
    derivative rule). ``cut`` > 0: the state of every ``cut``-th segment is materialised (see
    :func:`_cut`) and the angles come from a product with the ancestor matrix, so
    that the work stays O(segments) per sample; 0: one fused expression per output."""
    n, nb, parent = model.segments, model.nbase, model.parent
    kids = model.children
    absolute = model.coordinates == "absolute"
    attach, g = model.joint_attach, model.gravity
    rest = qd is None
    qa, qda = q[nb:], (None if rest else qd[nb:])
    ta = [tau[nb + i] for i in range(n)]
    if absolute:
        # tau_rel = A^T tau_abs: each joint's moment is the sum over its subtree
        for i in reversed(range(1, n)):
            ta[parent[i]] = ta[parent[i]] + ta[i]
    # outward: angles, rates, joint offsets r_i = a_i u_p and the segment terms
    th, om, cs = [None] * n, [None] * n, [None] * n
    r, kap = [None] * n, [None] * n  # r_i; c_i = -omega_p^2 r_i
    IA, pA, own = [None] * n, [None] * n, [None] * n
    if cut:
        A = jnp.asarray(ancestor_matrix(parent), q.dtype)
        mm = lambda M, x: jnp.matmul(M, x, precision=lax.Precision.HIGHEST)  # noqa: E731
        th_a = qa if absolute else mm(A, qa)
        c_a, s_a = sincos(th_a)
        eye = jnp.eye(n, dtype=q.dtype)
        c_a, s_a = mm(eye, c_a), mm(eye, s_a)
        if not rest:
            om_a = mm(eye, qda if absolute else mm(A, qda))
    for i in range(n):
        p = parent[i]
        if cut:
            om[i] = None if rest else om_a[i]
        elif p < 0 or absolute:
            th[i], om[i] = qa[i], (None if rest else qda[i])
        else:
            th[i], om[i] = th[p] + qa[i], (None if rest else om[p] + qda[i])
        c, s = cs[i] = (c_a[i], s_a[i]) if cut else sincos(th[i])
        if p >= 0:
            r[i] = (attach[i] * cs[p][0], attach[i] * cs[p][1])
            if not rest:
                w2p = -om[p] * om[p]
                kap[i] = (w2p * r[i][0], w2p * r[i][1])
        m, cx, cy = model.mass[i], model.com[i, 0], model.com[i, 1]
        rx, ry = c * cx - s * cy, s * cx + c * cy  # rho_i
        own[i] = model.inertia[i] + m * (cx * cx + cy * cy)
        mrx, mry = m * rx, m * ry
        if rest:
            fx = fy = 0.0  # Python zeros: the terms they multiply are not traced
        else:
            w2 = om[i] * om[i]
            fx, fy = -w2 * mrx, -w2 * mry
        if loads is not None:
            lx, ly, lz = loads[i][0], loads[i][1], loads[i][2]
            fx, fy = fx - lx, fy - ly
            mo = -(rx * ly - ry * lx) - lz
        else:
            mo = 0.0 if rest else jnp.zeros_like(fx)
        # (A00, A01, A02, A11, A12, A22); the constant entries stay scalars until a
        # child adds to them
        IA[i] = [own[i], -mry, mrx, m, 0.0, m]
        pA[i] = [mo, fx, fy]
    # inward: articulated inertias and bias wrenches, leaves first
    D, U, u = [None] * n, [None] * n, [None] * n
    for i in reversed(range(n)):
        if cut and kids[i] and i % cut == 0:
            rows = _cut(IA[i] + pA[i])
            IA[i], pA[i] = rows[:6], rows[6:]
        a00, a01, a02, a11, a12, a22 = IA[i]
        p0, p1, p2 = pA[i]
        if parent[i] < 0 and nb:
            continue  # the floating root: its own 3x3 solve below
        d = 1.0 / jnp.maximum(a00, own[i])
        D[i], U[i], u[i] = d, (a00, a01, a02), ta[i] - p0
        if parent[i] < 0:
            continue
        # Ia's force block and pa = pA + Ia c + U u / D
        ud = u[i] * d
        e11 = a11 - a01 * a01 * d
        e12 = a12 - a01 * a02 * d
        e22 = a22 - a02 * a02 * d
        f1, f2 = p1 + a01 * ud, p2 + a02 * ud
        if not rest:
            kx, ky = kap[i]
            f1, f2 = f1 + e11 * kx + e12 * ky, f2 + e12 * kx + e22 * ky
        # X^T Ia X and X^T pa: moments about P_p
        rx, ry = r[i]
        b01 = rx * e12 - ry * e11
        b02 = rx * e22 - ry * e12
        b00 = rx * b02 - ry * b01
        P = IA[parent[i]]
        IA[parent[i]] = [P[0] + b00, P[1] + b01, P[2] + b02, P[3] + e11, P[4] + e12, P[5] + e22]
        Q = pA[parent[i]]
        pA[parent[i]] = [Q[0] + ta[i] + rx * f2 - ry * f1, Q[1] + f1, Q[2] + f2]
    # outward: accelerations; the root first
    al, aP = [None] * n, [None] * n
    if nb:
        a00, a01, a02, a11, a12, a22 = IA[0]
        p0, p1, p2 = pA[0]
        m0 = model.mass[0]
        w1, w2, w0 = tau[0] - p1, tau[1] - p2, ta[0] - p0
        # LDL^T of [[a11, a12, a01], [a12, a22, a02], [a01, a02, a00]], pivots floored
        d1 = 1.0 / jnp.maximum(a11, m0)
        l21, l31 = a12 * d1, a01 * d1
        d2 = 1.0 / jnp.maximum(a22 - a12 * l21, m0)
        l32 = (a02 - a12 * l31) * d2
        d3 = 1.0 / jnp.maximum(a00 - a01 * l31 - (a02 - a12 * l31) * l32, model.inertia[0])
        y2 = w2 - l21 * w1
        x3 = (w0 - l31 * w1 - l32 * y2) * d3
        x2 = y2 * d2 - l32 * x3
        x1 = w1 * d1 - l21 * x2 - l31 * x3
        al[0], aP[0] = x3, (x1, x2)
        out = [x1, x2 - g]
    else:
        a00, a01, a02 = U[0]
        al[0] = (u[0] - a02 * g) * D[0]
        zero = jnp.zeros_like(al[0])
        aP[0] = (zero, zero + g)
        out = []
    qdd = [None] * n
    qdd[0] = al[0]
    for i in range(1, n):
        p = parent[i]
        rx, ry = r[i]
        ax = aP[p][0] - al[p] * ry
        ay = aP[p][1] + al[p] * rx
        if not rest:
            ax, ay = ax + kap[i][0], ay + kap[i][1]
        a00, a01, a02 = U[i]
        qdd[i] = (u[i] - a00 * al[p] - a01 * ax - a02 * ay) * D[i]
        al[i], aP[i] = al[p] + qdd[i], (ax, ay)
        if cut and kids[i] and i % cut == 0:
            al[i], ax, ay = _cut([al[i], ax, ay])
            aP[i] = (ax, ay)
    return out + (al if absolute else qdd)


def _moments_cotangent(model, tbar):
    """The cotangent of tau (dof, ...) from that of the joint moments T (segments, ...).

    T = tau for relative angles (after the two base forces of a floating base); for
    absolute angles T_i is the sum of the generalized forces Q_j over the subtree of
    i, T = A^T Q, so that Qbar = A Tbar (A the ancestor matrix)."""
    if model.coordinates == "absolute":
        A = jnp.asarray(ancestor_matrix(model.parent), tbar.dtype)
        tbar = jnp.tensordot(A, tbar, axes=1, precision=lax.Precision.HIGHEST)
    if model.nbase:
        tbar = jnp.concatenate([jnp.zeros((2,) + tbar.shape[1:], tbar.dtype), tbar])
    return tbar


# ------------------------------------------------------------ one entry point
#
# Every public dynamics function (jaxmb.inverse_dynamics, joint_moments,
# joint_reactions, forward_dynamics, mass_matrix, ...) validates its inputs in Python
# and then calls ``evaluate`` inside one cached ``jax.jit``. ``evaluate`` broadcasts
# the leading (batch) shapes of the inputs, flattens them to one batch axis, puts
# it last (the layout the kernels vectorise over) and runs the kernel; a single
# sample is a batch of one. Around the kernel:
#
# - ``jax.custom_batching.custom_vmap``: under ``jax.vmap`` the batch axis is moved
#   to the front and the same function is called with one more leading dimension,
#   so that vmap of a single-sample call runs the batched kernel (nested vmaps
#   recurse, each level adding a leading dimension);
# - ``jax.custom_vjp`` (kinds "tau", "moments" and "reactions" with
#   gradient="adjoint"): the hand-derived parameter adjoint above (a reaction's
#   cotangent is a virtual translation of its joint's subtree); for "forward" with
#   gradient="adjoint", the transposed implicit-function rule (_forward_vjp);
#   inside it ``jax.custom_jvp`` (every kind): JAX's own forward mode of the kernel
#   (for "forward", _forward_jvp), from which reverse mode follows by transposition
#   where no custom_vjp is on top.
#
# The layers nest custom_vjp(custom_jvp(custom_vmap(kernel))): JAX requires the
# derivative rules outside the custom_vmap, and the adjoint's forward pass calls a
# custom_jvp layer (with the same rule, around the kernel itself: no custom_vmap,
# see ``g_fwd`` in _operator) so that a second derivative (jax.hessian, reverse
# over reverse, also through a lax.scan) can differentiate it.

KINDS = ("tau", "moments", "reactions", "full", "forward", "mass")
# kinds whose gradient with respect to the model the parameter adjoint transposes
ADJOINT_KINDS = ("tau", "moments", "reactions")


class Spec(NamedTuple):
    """The static options of one evaluation (hashable: part of the jit cache key)."""

    kind: str
    method: str = "auto"
    chunk: int | None = None
    gradient: str = "adjoint"
    joints: tuple | None = None
    frame: str = "world"


_TAU = Spec("tau")


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


def evaluate(spec: Spec, topo: Model, params, q, qd, x3, loads):
    """The kernel of ``spec.kind`` over any leading batch shape.

    Args:
      spec: static options.
      topo: the model (only its topology is read; ``params`` holds the arrays).
      params: (joint_attach, com, mass, inertia, gravity) arrays of the model.
      q, qd: (..., dof) coordinates and velocities (qd may be None for "mass", and
        for "forward": at rest, with no velocity terms traced).
      x3: (..., dof) accelerations ("tau", "moments", "reactions", "full") or
        generalized forces ("forward"); None for "mass".
      loads: None, (segments, 3) shared by all samples, or (..., segments, 3).

    Returns:
      (lead..., core...) with ``lead`` the broadcast leading shape of the inputs.
    """
    if _cpu_takes_matrix(spec, topo):
        return lax.platform_dependent(
            params, q, qd, x3, loads,
            cpu=functools.partial(evaluate, spec._replace(method="matrix"), topo),
            default=functools.partial(evaluate, spec._replace(method="unrolled"), topo),
        )  # fmt: skip
    m = _Params(topo, *params)
    n, dof = topo.segments, topo.dof
    dt = q.dtype
    lead = _lead_shape(q, qd, x3, loads, dof, n)
    core = _core(spec, topo)
    B = int(np.prod(lead, dtype=np.int64))
    if B == 0:
        return jnp.zeros(lead + core, dt)
    shared = loads is not None and loads.ndim == 2

    kind = spec.kind
    aba = kind == "forward" and _FD_SOLVER == "aba"
    default_chunk = _FD_CHUNK if kind in ("forward", "mass") else None
    if aba and not _aba_cut(m):
        default_chunk = 0
    method, chunk = _plan(m, spec.method, default_chunk if spec.chunk is None else spec.chunk, B)

    def last(x, core_shape):  # (lead..., core...) -> (core..., B); chunked: (B, core...)
        x = jnp.broadcast_to(x, lead + core_shape).reshape((B,) + core_shape)
        return x if chunk else jnp.moveaxis(x, 0, -1)  # chunks are transposed one by one

    qT = last(q, (dof,))
    qdT = None if qd is None else last(qd, (dof,))
    x3T = None if x3 is None else last(x3, (dof,))
    if loads is None:
        ldT = None
    elif shared:
        ldT = loads.astype(dt)[:, :, None]
    else:
        ldT = last(loads.astype(dt), (n, 3))
    if aba:
        method_rows = "unrolled"  # lists of rows
    elif kind in ("forward", "mass"):
        method_rows = "matrix"  # materialised arrays: one update per chunk
    else:
        method_rows = method

    def rows(q_, qd_, x3_, ld_):
        ld = ldT if shared else ld_
        if kind == "mass":
            return _mass_matrix_rows(m, q_)
        if aba:
            return _aba_rows(m, q_, qd_, x3_, ld, _aba_cut(m))
        if kind == "forward":
            zero = jnp.zeros_like(q_)
            bias = _assemble(_rnea_rows(m, q_, zero if qd_ is None else qd_, zero, ld, "matrix")[0], "matrix")
            solve = _ldl_solve_rows if dof <= _LDL_MAX else _cholesky_solve_rows
            return solve(_mass_matrix_rows(m, q_), x3_ - bias)
        tau, F, T, c, s = _rnea_rows(m, q_, qd_, x3_, ld, method)
        if kind == "tau":
            return tau
        if kind == "moments":
            return T
        if kind == "full":
            return tau + [f for pair in F for f in pair] + T
        if spec.frame == "world":
            return [F[i] for i in spec.joints]
        # (axial, shear) = R(theta)^T (Fx, Fy)
        return [(c[i] * F[i][0] + s[i] * F[i][1], c[i] * F[i][1] - s[i] * F[i][0]) for i in spec.joints]

    xs = (qT, qdT, x3T, None if shared else ldT)
    if kind == "mass":
        xs = (qT, None, None, None)
    out = _map_chunks(rows, xs, chunk, method_rows, batch_first=True, inputs_first=bool(chunk),
                      blocks_first=kind != "mass")  # (B, core...)
    return out.reshape(lead + core)


# ``evaluate`` as a nested jit: the derivative rules evaluate the kernel several times
# with the same shapes (forward dynamics' primal, the linearisation of its model term,
# the mass-matrix products of its tangent solve; the adjoint's primal and input
# cotangents), and inside every step of a simulation's scan. As a jitted function its
# jaxpr is traced from Python once per shapes and reused (XLA inlines the call): the
# trace of the gradient of a 10-step simulate of the seven-segment human took about
# 3-4 s instead of 6-7 s (an ad-hoc measurement on the 2-core CPU).
@functools.partial(jax.jit, static_argnums=(0, 1))
def _evaluate_jit(spec: Spec, tree, params, q, qd, x3, loads):
    # ``tree``: the model's pytree structure (its topology, hashable); the kernels
    # read the arrays from ``params`` only
    return evaluate(spec, jax.tree_util.tree_unflatten(tree, [None] * tree.num_leaves), params, q, qd, x3, loads)


def _evaluate_once(spec: Spec, topo: Model, params, q, qd, x3, loads):
    return _evaluate_jit(spec, jax.tree_util.tree_structure(topo), params, q, qd, x3, loads)


def _align(x, batched: bool, core: int, rank: int):
    """Under vmap: put x's leading shape in ``rank`` dimensions after the vmapped one
    (size 1 where x is not batched), so that every input broadcasts NumPy-style."""
    own = x.ndim - core - (1 if batched else 0)
    if not batched:
        x = x[None]
    return x.reshape(x.shape[:1] + (1,) * (rank - own) + x.shape[1:])


def _vmap_rule(spec: Spec, topo: Model, call):
    """The custom_vmap rule: one more leading dimension instead of JAX's batching."""

    def rule(axis_size, in_batched, params, q, qd, x3, loads):
        pb, qb, qdb, xb, lb = in_batched
        if any(jax.tree_util.tree_leaves(pb)):
            # a batch of models (per-sample parameters): JAX's own batching of the
            # kernel, each model parameter then a batch-sized row
            axes = lambda b: jax.tree_util.tree_map(lambda t: 0 if t else None, b)  # noqa: E731
            f = functools.partial(evaluate, spec, topo)
            in_axes = (axes(pb), 0 if qb else None, 0 if qdb else None, 0 if xb else None, axes(lb))
            return jax.vmap(f, in_axes=in_axes)(params, q, qd, x3, loads), True
        shared_loads = loads is not None and not lb and loads.ndim == 2
        ranks = [x.ndim - 1 - bool(b) for x, b in ((q, qb), (qd, qdb), (x3, xb)) if x is not None]
        if loads is not None and not shared_loads:
            ranks.append(loads.ndim - 2 - bool(lb))
        rank = max(ranks)
        q = _align(q, qb, 1, rank)
        qd = None if qd is None else _align(qd, qdb, 1, rank)
        x3 = None if x3 is None else _align(x3, xb, 1, rank)
        if loads is not None and not shared_loads:
            loads = _align(loads, lb, 2, rank)
        out = call(params, q, qd, x3, loads)
        return jnp.broadcast_to(out, (axis_size,) + out.shape[1:]), True

    return rule


def _model_params(model: Model):
    return (model.joint_attach, model.com, model.mass, model.inertia, model.gravity)


def _uses_adjoint(spec: Spec, topo: Model) -> bool:
    return spec.gradient == "adjoint" and spec.kind in ADJOINT_KINDS and topo.segments <= _ADJOINT_MAX


# Segments from which reverse mode through an unrolled recursion (the state's
# cotangents of inverse dynamics, moments and reactions; every cotangent with
# gradient="autodiff") is JAX's reverse mode of the matrix form instead: XLA:CPU
# fuses each cotangent of the unrolled recursion with the whole tape, recomputing it
# per output. ``python -m benchmarks.design --only reverse_form`` (1e5 samples, run
# ms through unrolled / matrix, two rounds): d/dq of sum(sin(tau)) 3-chain 38, 33 /
# 27, 26; 4-chain 81, 70 / 39, 57; 5-chain 277, 303 / 47, 54; 7-chain 1007, 973 /
# 123, 119; the human 123, 140 / 125, 151. The model's gradient with
# gradient="autodiff": 3-chain 13, 10 / 24, 18 (and the 3-chain's d/dq compiles in
# 2.7 s through the matrix form, 0.8 to 1.0 s unrolled: hence 4 segments); 4-chain
# 40, 25 / 40, 34; 5-chain 70, 62 / 55, 48; 7-chain 116, 106 / 114, 104; the human
# 122, 132 / 102, 78. Forward mode keeps the unrolled kernel's JVP (see
# _tangent_split).
_REVERSE_MATRIX_MIN = 4


def _reverse_raw(spec: Spec, topo: Model, raw):
    """The evaluation whose reverse mode gives the cotangents of ``raw``'s inputs:
    ``raw`` itself, or the matrix form for unrolled recursions of
    ``_REVERSE_MATRIX_MIN`` segments or more (see above)."""
    if (spec.kind in ("tau", "moments", "reactions", "full") and topo.segments >= _REVERSE_MATRIX_MIN
            and _plan(topo, spec.method, None, 2)[0] == "unrolled"):
        return functools.partial(_evaluate_once, spec._replace(method="matrix", chunk=None), topo)
    return raw


def _operator(spec: Spec, topo: Model):
    """f(params, q, qd, x3, loads) with its vmap rule and derivative rule."""
    raw = functools.partial(_evaluate_once, spec, topo)
    rev = _reverse_raw(spec, topo, raw)
    f = custom_vmap(raw)
    f.def_vmap(_vmap_rule(spec, topo, f))

    g = jax.custom_jvp(f)

    def generic_jvp(primals, tangents):
        flat_p, tree = jax.tree_util.tree_flatten(primals)
        flat_t = jax.tree_util.tree_leaves(
            tangents, is_leaf=lambda t: isinstance(t, jax.custom_derivatives.SymbolicZero)
        )
        live = [i for i, t in enumerate(flat_t) if not isinstance(t, jax.custom_derivatives.SymbolicZero)]

        def with_live(fn):
            def h(*xs):
                fp = list(flat_p)
                for i, x in zip(live, xs):
                    fp[i] = x
                return fn(*jax.tree_util.tree_unflatten(tree, fp))

            return h

        if not live:
            out = raw(*primals)
            return out, jnp.zeros_like(out)
        primals_l, tangents_l = [flat_p[i] for i in live], [flat_t[i] for i in live]
        if rev is raw:
            return jax.jvp(with_live(raw), primals_l, tangents_l)
        # forward mode by the unrolled kernel's JVP, reverse mode by the matrix form's
        out = raw(*primals)
        return out, _tangent_split(with_live(raw), with_live(rev), primals_l, tangents_l, out)

    rule = _forward_jvp(spec, topo, raw) if spec.kind == "forward" else generic_jvp
    g.defjvp(rule, symbolic_zeros=True)
    # The primal of the custom_vjp's forward pass: the same rule around ``raw`` with
    # no custom_vmap layer. Reverse mode through a lax.scan (jaxmb.simulate) hoists
    # the loop-invariant part of the forward pass's body by partial evaluation, which
    # in JAX 0.10.2 replaces every custom_jvp whose inputs are partly loop-carried by
    # its primal function: what lies beneath is then differentiated by JAX itself
    # when a second derivative follows, and custom_vmap cannot be (forward over
    # reverse: an AssertionError in its JVP's batching rule; reverse over reverse: it
    # has no partial evaluation, "Linearization failed"). Under jax.vmap this primal
    # is batched by JAX rather than by _vmap_rule, as gradient="autodiff"'s primal
    # always was, and as fast or faster (jit(vmap(grad)) of inverse dynamics, forward
    # dynamics and simulate, the 3-chain and the human, in an ad-hoc interleaved
    # comparison that was not kept). Calls not differentiated keep ``g``.
    g_fwd = jax.custom_jvp(raw)
    g_fwd.defjvp(rule, symbolic_zeros=True)

    if spec.kind == "forward" and spec.gradient == "adjoint":
        return _forward_vjp(spec, topo, raw, g, g_fwd)

    if _uses_adjoint(spec, topo):
        v = jax.custom_vjp(g)

        def fwd(*args):
            values, flags = _values_and_flags(args)
            # the primal through a custom_jvp layer: an outer jax.grad (reverse over
            # reverse) or jax.jacfwd linearises it with the rule; not through the
            # custom_vmap layer (see g_fwd)
            return g_fwd(*values), (values, flags)

        def bwd(res, tbar):
            values, flags = res
            params, q, qd, x3, loads = values
            if isinstance(tbar, jax.custom_derivatives.SymbolicZero):
                tbar = jnp.zeros(tbar.shape, tbar.dtype)
            d_params = None
            if flags[0] is not None:
                d_params = _params_cotangent(spec, topo, params, q, qd, x3, loads, tbar)
            if all(fl is None for fl in flags[1:]):
                return (d_params, None, None, None, None)
            _, vjp = jax.vjp(lambda *x: rev(params, *x), q, qd, x3, loads)
            return (d_params,) + tuple(vjp(tbar))

        v.defvjp(fwd, bwd, symbolic_zeros=True)
        return v

    return g


def _values_and_flags(args):
    """The values of a custom_vjp's forward-pass arguments (symbolic_zeros=True wraps
    them) and, per argument, () if it needs a cotangent and None if not (kept as the
    residuals' tree structure)."""
    values = jax.tree_util.tree_map(lambda x: x.value, args)
    perturbed = [any(x.perturbed for x in jax.tree_util.tree_leaves(a)) for a in args]
    return values, tuple(() if p else None for p in perturbed)


def _params_cotangent(spec: Spec, topo: Model, params, q, qd, x3, loads, tbar):
    """sum over the batch of (d out / d params)^T tbar by the parameter adjoint, for
    inputs in the callers' layout (leading batch shape) and tbar the cotangent of
    the output of ``spec.kind``: tau ("tau"), the joint moments ("moments") or the
    reaction forces at ``spec.joints`` ("reactions", world or segment frame)."""
    m = _Params(topo, *params)
    lead = _lead_shape(q, qd, x3, loads, topo.dof, topo.segments)
    B = int(np.prod(lead, dtype=np.int64))
    if B == 0:
        return jax.tree_util.tree_map(jnp.zeros_like, params)
    core = tbar.shape[len(lead):]

    def first(x, core_shape):
        return jnp.broadcast_to(x, lead + core_shape).reshape((B,) + core_shape)

    def last(x, core_shape):
        return jnp.moveaxis(first(x, core_shape), 0, -1)

    dof, n = topo.dof, topo.segments
    bf = dof >= _ADJOINT_FIRST_MIN  # the layout of q, qd, qdd and tbar
    lay = first if bf else last
    fb = None
    if spec.kind == "moments":
        tb = _moments_cotangent(topo, last(tbar, core))
        tb = jnp.moveaxis(tb, -1, 0) if bf else tb
    elif spec.kind == "reactions":
        fb, tb = last(tbar, core), jnp.zeros((B, dof) if bf else (dof, B), tbar.dtype)
    else:
        tb = lay(tbar, core)
    ld = None
    if loads is not None:
        ld = loads[:, :, None] if loads.ndim == 2 else last(loads, (n, 3))
    react = None if fb is None else (spec.joints, spec.frame)
    return _param_adjoint(m, lay(q, (dof,)), lay(qd, (dof,)), lay(x3, (dof,)), tb, ld, fb, react, bf)


def _params_tangent(spec: Spec, topo: Model, raw, params, q, qd, x3, loads, t_params, like):
    """J t_params, J = d raw / d params at (q, qd, x3, loads) for an output shaped and
    typed like ``like``, as a linear map whose transpose is the parameter adjoint
    (:func:`_params_cotangent` for ``spec``) rather than JAX's reverse mode of the
    kernel.

    JAX has no public custom transpose, so the map is the second half of the solve
    x = S b with S = [[I, 0], [J, I]] on pairs b = (t_params, 0):
    ``lax.custom_linear_solve`` with ``solve`` = S (forward mode: one forward-mode
    pass of the kernel), ``transpose_solve`` = S^T = [[I, J^T], [0, I]] (reverse
    mode: the adjoint's one reduction over the batch) and ``matvec`` = S^-1 =
    [[I, 0], [-J, I]] (what higher derivatives differentiate). Only the branch that a
    derivative uses is compiled. JAX's reverse mode of the kernel with respect to the
    shared parameters made the gradient of the seven-segment human's forward dynamics
    compile in about 9 s (a reduction per parameter over a large fused expression)."""

    # traced once: matvec, its transpose and solve all evaluate this linear map
    _, jp = jax.linearize(lambda pa: raw(pa, q, qd, x3, loads), tuple(params))
    return _linear_map(jp, jp, lambda v: _params_cotangent(spec, topo, params, q, qd, x3, loads, v),
                       tuple(t_params), like)  # fmt: skip


def _linear_map(forward, higher, transpose, t, like):
    """J t as the second half of ``lax.custom_linear_solve`` with S = [[I, 0], [J, I]]
    on pairs (t, 0), so that JAX's transposition of it calls ``transpose``.

    forward(u) = J u (the ``solve``: forward mode), higher(u) = J u (inside the
    ``matvec`` S^-1 = [[I, 0], [-J, I]], which higher derivatives differentiate),
    transpose(v) = J^T v (the ``transpose_solve``: reverse mode); t a tuple of
    tangents, ``like`` an array shaped and typed as J t. See :func:`_params_tangent`
    and :func:`_tangent_split`."""

    def matvec(x):
        u, v = x
        return u, v - higher(u)

    def solve(_, b):
        u, v = b
        return u, v + forward(u)

    def transpose_solve(_, c):
        u, v = c
        return tuple(a + b.astype(a.dtype) for a, b in zip(u, transpose(v))), v

    # the second half of b must be linear in the tangents too (JAX transposes only
    # with respect to linear inputs): zero times one of them
    zero = jnp.broadcast_to(0 * jnp.sum(t[-1]).astype(like.dtype), like.shape)
    u, v = lax.custom_linear_solve(matvec, (t, zero), solve, transpose_solve)
    return v + _empty_sum(u).astype(v.dtype)


def _empty_sum(xs):
    """0, as a sum over no elements of each array of ``xs``: linear in all of them.

    In :func:`_linear_map`, J t is the second half v of the solution (u, v) = (t, J t);
    adding this of u couples the first half to the result, so that reverse mode
    transposes the solve with the cotangent of u derived from that of v (zeros)
    rather than a constant. Without it, a derivative of that transposed solve (forward
    over reverse: jax.hessian, jax.jacfwd(jax.grad(f)); reverse over reverse) whose
    matvec does not change (J constant in the variable, e.g. tau in the masses) has
    a symbolic zero tangent for the u half and a live one for the v half, which JAX's
    rule (``_custom_linear_solve_jvp`` in JAX 0.10.2) passes as it is to
    ``custom_linear_solve``: a TypeError. XLA removes the zero-sized sums and the
    cotangents built from them (first-order gradients compile to the same program)."""
    return sum(jnp.sum(jnp.ravel(x)[:0]) for x in jax.tree_util.tree_leaves(xs))


def _tangent_split(fwd, rev, primals, tangents, like):
    """J t with J the Jacobian of ``fwd`` (and of ``rev``: the same function,
    evaluated another way) at ``primals``, for the tangents ``t`` of the same
    structure: forward mode by ``fwd``'s linearisation, reverse mode by ``rev``'s VJP.

    The same construction as :func:`_params_tangent` (:func:`_linear_map`). Forward
    dynamics uses it
    for its derivative with respect to the state (q, qd, loads): the unrolled
    kernel's JVP is the fastest forward mode for a few segments (the 3-chain's
    tangent at 1e5 samples: 10.6 ms against 50 ms for the matrix form's), while JAX's
    reverse mode of the matrix form compiles and runs faster than that of the
    unrolled kernel (the gradient of a 10-step ``simulate`` with respect to the model
    and q0 at 1e4 samples, before and after, alternated ad hoc on the 2-core CPU:
    3-chain 16.3 and 14.4 s to compile, 312 and 213 ms a run; 7-chain 26.2 and
    17.5 s, 1,313 and 634 ms; the seven-segment human at 100 samples 17.9 and 13.0 s
    from trace to compiled). Forward mode now also traces the matrix form's
    derivatives (the 3-chain's tangent compiled in 2.6 s instead of 1.8 s)."""
    primals = tuple(primals)
    return _linear_map(
        lambda u: jax.jvp(fwd, primals, u)[1],
        lambda u: jax.jvp(rev, primals, u)[1],  # the cheaper trace for higher derivatives
        lambda v: jax.vjp(rev, *primals)[1](v),
        tuple(tangents), like,
    )


def _forward_tau(spec: Spec, topo: Model):
    """(tau, tau_rev) for forward dynamics' derivative rules: inverse dynamics with
    forward dynamics' kernel choice, and the evaluation whose reverse mode gives the
    state's cotangents: the matrix form when that kernel is unrolled (see
    :func:`_tangent_split`), else the same."""
    tau_raw = functools.partial(_evaluate_once, Spec("tau", spec.method, spec.chunk, "autodiff"), topo)
    if _plan(topo, spec.method, spec.chunk, 2)[0] == "unrolled":
        return tau_raw, functools.partial(_evaluate_once, Spec("tau", "matrix", None, "autodiff"), topo)
    return tau_raw, tau_raw


def _forward_jvp(spec: Spec, topo: Model, raw):
    """The derivative of forward dynamics from that of inverse dynamics.

    qdd solves ID(params, q, qd, qdd, loads) = tau, so by the implicit function
    theorem d qdd = M^-1 (d tau - dID), with dID the derivative of inverse dynamics
    with qdd held at its value (one forward-mode pass of the recursion) and M^-1 a
    solve with the mass matrix (the forward kernel with no velocity, gravity or
    loads: its bias is zero). Nothing differentiates the factorisation, so the
    gradient compiles in a fraction of the time (the unrolled LDL^T's reverse mode
    took 20 s for the seven-segment human) and runs faster; reverse mode transposes
    the linear solve. dID's model term goes through :func:`_params_tangent` (reverse
    mode: the parameter adjoint), its state term (q, qd, loads) through
    :func:`_tangent_split` when the kernel is unrolled (reverse mode: JAX's reverse
    mode of the matrix form)."""
    tau_raw, tau_rev = _forward_tau(spec, topo)

    def jvp(primals, tangents):
        params, q, qd, tau, loads = primals
        t_params, t_q, t_qd, t_tau, t_loads = tangents
        qdd = raw(params, q, qd, tau, loads)
        live = lambda t: not isinstance(t, jax.custom_derivatives.SymbolicZero)  # noqa: E731
        flat_t, tree_t = jax.tree_util.tree_flatten(
            (t_params, t_q, t_qd, t_loads), is_leaf=lambda t: isinstance(t, jax.custom_derivatives.SymbolicZero)
        )
        flat_p = jax.tree_util.tree_leaves((params, q, qd, loads))
        idx = [i for i, t in enumerate(flat_t) if live(t)]
        r = jnp.zeros_like(qdd)
        if live(t_tau):
            r = r + jnp.broadcast_to(t_tau, qdd.shape)
        n_params = len(jax.tree_util.tree_leaves(params))
        split = topo.segments <= _ADJOINT_MAX and any(i < n_params for i in idx)
        if split:  # the model's term on its own, transposed by the parameter adjoint
            # JAX transposes custom_linear_solve only with respect to inputs that are
            # all linear in the tangents: zero leaves are zero times a live one
            z = 0 * jnp.sum(next(t for t in t_params if live(t)))
            t_pa = tuple(t if live(t) else jnp.broadcast_to(z, p.shape).astype(p.dtype) for p, t in zip(params, t_params))
            r = r - _params_tangent(_TAU, topo, tau_raw, params, q, qd, qdd, loads, t_pa, qdd)
            idx = [i for i in idx if i >= n_params]
        if idx:
            def with_raw(f):
                def h(*xs):
                    fp = list(flat_p)
                    for i, x in zip(idx, xs):
                        fp[i] = x
                    pa, q_, qd_, ld = jax.tree_util.tree_unflatten(tree_t, fp)
                    return f(pa, q_, qd_, qdd, ld)

                return h

            primals_t, tangents_t = [flat_p[i] for i in idx], [flat_t[i] for i in idx]
            if tau_rev is not tau_raw:
                # forward mode by the unrolled kernel's JVP, reverse mode by the
                # matrix form's VJP (see _tangent_split)
                r = r - _tangent_split(with_raw(tau_raw), with_raw(tau_rev), primals_t, tangents_t, qdd)
            else:
                r = r - jax.jvp(with_raw(tau_raw), primals_t, tangents_t)[1]
        still = params[:4] + (jnp.zeros_like(params[4]),)
        zero = jnp.zeros_like(qdd)
        qb = jnp.broadcast_to(q, qdd.shape)
        # M^-1 r: forward dynamics with no velocity (None: its terms are not traced),
        # gravity or loads; as a linear solve with the symmetric M (M x: inverse
        # dynamics at rest), so that reverse mode transposes it into one more solve
        # instead of differentiating the kernel
        return qdd, lax.custom_linear_solve(
            lambda x: tau_raw(still, qb, zero, x, None), r,
            lambda _, b: raw(still, qb, None, b, None), symmetric=True,
        )

    return jvp


def _forward_vjp(spec: Spec, topo: Model, raw, g, g_fwd):
    """Forward dynamics with a reverse-mode rule of its own (gradient="adjoint").

    qdd solves ID(params, q, qd, qdd, loads) = tau, so for a cotangent qdd_bar, with
    lam = M^-1 qdd_bar (M symmetric): tau_bar = lam and, for every other input x,
    x_bar = -(d ID / d x)^T lam at qdd held fixed: the parameter adjoint of inverse
    dynamics for the model (up to ``_ADJOINT_MAX`` segments) and JAX's reverse mode
    of the recursion (its matrix form when the kernel is unrolled, see
    :func:`_tangent_split`) for q, qd and loads. The same derivative as
    :func:`_forward_jvp`'s, transposed by hand: the backward pass traces one
    articulated-body solve at rest, the adjoint and (when the state needs cotangents)
    one reverse pass, instead of the forward-mode linearisation of the recursion
    that JAX's transposition of the custom_jvp rule traces first. Reverse mode
    only, like the other adjoints (forward mode: gradient="autodiff")."""
    tau_rev = _forward_tau(spec, topo)[1]
    v = jax.custom_vjp(g)

    def fwd(*args):
        values, flags = _values_and_flags(args)
        qdd = g_fwd(*values)  # through a custom_jvp layer, not custom_vmap (see _operator)
        return qdd, (values, qdd, flags)

    def bwd(res, qdd_bar):
        values, qdd, flags = res
        params, q, qd, tau, loads = values
        if isinstance(qdd_bar, jax.custom_derivatives.SymbolicZero):
            qdd_bar = jnp.zeros(qdd_bar.shape, qdd_bar.dtype)
        # lam = M^-1 qdd_bar: the kernel at rest, with no gravity or loads
        still = params[:4] + (jnp.zeros_like(params[4]),)
        lam = raw(still, jnp.broadcast_to(q, qdd.shape), None, qdd_bar, None)
        d_tau = None
        if flags[3] is not None:
            d_tau = jax.vjp(lambda t: jnp.broadcast_to(t, qdd.shape), tau)[1](lam)[0]
        adjoint = topo.segments <= _ADJOINT_MAX
        d_params = None
        if flags[0] is not None and adjoint:
            d_params = jax.tree_util.tree_map(
                jnp.negative, _params_cotangent(_TAU, topo, params, q, qd, qdd, loads, lam)
            )
        live = [i for i in (0, 1, 2, 4) if flags[i] is not None and not (i == 0 and adjoint)]
        out = [d_params, None, None, d_tau, None]
        if live:
            def h(*xs):
                a = list(values)
                for i, x in zip(live, xs):
                    a[i] = x
                return tau_rev(a[0], a[1], a[2], qdd, a[4])

            cts = jax.vjp(h, *(values[i] for i in live))[1](-lam)
            for i, c in zip(live, cts):
                out[i] = c
        return tuple(out)

    v.defvjp(fwd, bwd, symbolic_zeros=True)
    return v


def call(spec: Spec, model: Model, q, qd, x3, loads):
    """Evaluate ``spec`` on validated inputs of one float dtype (inside jit)."""
    return _operator(spec, model)(_model_params(model), q, qd, x3, loads)


@functools.partial(jax.jit, static_argnums=0)
def _jitted(spec: Spec, model: Model, q, qd, x3, loads):
    dtype = _float_dtype(*(x for x in (q, qd, x3) if x is not None))
    model = model.astype(dtype)
    q, qd, x3 = (None if x is None else x.astype(dtype) for x in (q, qd, x3))
    loads = None if loads is None else loads.astype(dtype)
    return call(spec, model, q, qd, x3, loads)


def run(spec: Spec, model: Model, q, qd=None, x3=None, loads=None):
    """Compiled evaluation (``jax.jit``, cached by shapes, dtypes, the model's
    topology and ``spec``): a direct call from Python dispatches to compiled code.
    JAX's error for forward mode through the default reverse-mode rule gets the
    remedy appended."""
    try:
        return _jitted(spec, model, q, qd, x3, loads)
    except TypeError as e:
        hint = forward_mode_hint(e, spec.gradient)
        if hint is None:
            raise
        raise hint from e


def forward_mode_hint(e: TypeError, gradient: str):
    """JAX's TypeError for forward mode through the default reverse-mode rule, with
    the remedy appended (None for any other error)."""
    if gradient != "adjoint" or "forward-mode autodiff" not in str(e):
        return None
    return TypeError(
        f"{str(e).splitlines()[0]} jaxmb: gradient='adjoint' (the default) is a reverse-mode rule; for forward "
        "mode applied first (jax.jvp, jax.jacfwd, jax.linearize) pass gradient='autodiff' to the jaxmb function "
        "(jax.grad, jax.hessian and jax.jacfwd(jax.grad(f)) work with either)"
    )
