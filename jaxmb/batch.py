"""Batched dynamics with the batch as the contiguous axis: the fast path for many samples.

The core functions (:func:`jaxmb.inverse_dynamics` and friends) take one sample and
are meant to be ``vmap``-ed. For large batches on a CPU this module is several times
faster. It evaluates the recursive Newton-Euler pass on arrays whose last axis is the
batch (``q`` of shape ``(dof, B)``), so that each scalar operation of the recursion
is one contiguous vector operation over the batch, and:

- the sine and cosine of an angle come from one expression (:func:`sincos`: a
  shared range reduction and two polynomials, which XLA vectorises; XLA:CPU's own
  ``cos`` and ``sin`` cost about seven times more);
- no per-sample matrix is formed in the inverse dynamics, and for models of up to
  ten segments nothing but the inputs and outputs is written to memory.

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
  segments^2 but stays below the alternatives up to about ten segments.
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
arrays but vectorise worse in long expressions. The forward dynamics form M by
composite-body sums and solve with an LDL^T factorisation unrolled over the
coordinates (up to 12; a Cholesky column loop beyond), written over the batch axis,
since LAPACK would be called once per sample (measured in ``benchmarks/README.md``).

Gradients: reverse-mode differentiation of :func:`inverse_dynamics_batch` with respect
to the model's parameters uses a hand-derived adjoint (``gradient="adjoint"``, the
default; derivation beside ``_adjoint_rows``): by virtual power, tbar . tau equals a
sum over segments of products of each segment's own kinematics with the velocities
that tbar would drive, so every parameter's derivative is an explicit expression per
sample, and all of them are summed over the batch in one fused loop (one variadic
reduction). JAX's own reverse mode of the recursion instead writes and reads about a
hundred batch-sized intermediate arrays (1.6 to 4.6 times slower for batches of
1e5 to 1e6, measured in ``benchmarks/README.md``). ``gradient="autodiff"`` keeps plain
JAX differentiation, which forward mode (``jax.jvp``, ``jax.jacfwd``, ``jax.hessian``)
needs.

Every public function accepts either layout: ``batch_axis=0`` (``q`` of shape
``(B, dof)``, transposed inside the same jitted call) or ``batch_axis=-1``
(``(dof, B)``, no copy). All are pure and compose with ``jax.jit``, ``jax.grad`` and
:func:`jaxmb.sharded`.
"""

from __future__ import annotations

import math
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .kinematics import _float_dtype
from .model import Model, Segment, ancestor_matrix

__all__ = [
    "sincos",
    "inverse_dynamics_batch",
    "joint_reactions_batch",
    "joint_moments_batch",
    "forward_dynamics_batch",
]

# ----------------------------------------------------------------- sin and cos
#
# x = k pi/2 + r with k = round(2x/pi) and |r| <= pi/4; pi/2 is split in three
# parts (Cody & Waite) whose first two have few enough significant bits that k * part
# is exact for |k| < 2^20 (float64) or 2^11 (float32); the parts were computed with
# mpmath at 300 bits: pi/2 = C1 + C2 + C3.
_PIO2_F64 = (
    float.fromhex("0x1.921fb54400000p+0"),  # 33 significant bits
    float.fromhex("0x1.0b4611a600000p-34"),  # 33 significant bits
    float.fromhex("0x1.3198a2e037073p-69"),
)
_PIO2_F32 = (
    float.fromhex("0x1.92p+0"),  # 8 significant bits
    float.fromhex("0x1.fb4p-12"),  # 11 significant bits
    float.fromhex("0x1.4442d18469899p-24"),
)


def _taylor(odd: bool, degree: int):
    """Taylor coefficients of sin (odd) or cos (even) after the leading term(s)."""
    first = 3 if odd else 2
    return [(-1) ** (k // 2) / math.factorial(k) for k in range(first, degree + 1, 2)]


# On |r| <= pi/4 the first omitted Taylor term bounds the error: float64 keeps terms
# to r^17 (sin) and r^18 (cos), error < (pi/4)^19/19! ~ 1e-19; float32 to r^9 and
# r^10, error < (pi/4)^11/11! ~ 2e-9. Both are below half an ulp of the result.
_SIN = {64: _taylor(True, 17), 32: _taylor(True, 9)}
_COS = {64: _taylor(False, 18), 32: _taylor(False, 10)}


def _horner(coef, x):
    acc = coef[-1]
    for a in reversed(coef[:-1]):
        acc = acc * x + a
    return acc


@jax.custom_jvp
def sincos(x):
    """Cosine and sine of ``x`` together, vectorisable, about 1 ulp accurate.

    One range reduction ``x = k pi/2 + r`` (|r| <= pi/4) serves both results; sin r
    and cos r are Taylor polynomials, and the quadrant k mod 4 swaps and negates them.
    Float64 is accurate to about 1 ulp for |x| < 1.6e6 rad, float32 for
    |x| < 3e3 rad (beyond, the reduction loses bits; joint angles never come near).
    Other float dtypes use ``jnp.cos`` and ``jnp.sin``.

    Args:
      x: array of angles, rad (float32 or float64).

    Returns:
      (cos x, sin x), each shaped and typed like ``x``.
    """
    x = jnp.asarray(x)
    if x.dtype == jnp.float64:
        bits, parts = 64, _PIO2_F64
    elif x.dtype == jnp.float32:
        bits, parts = 32, _PIO2_F32
    else:
        return jnp.cos(x), jnp.sin(x)
    c1, c2, c3 = parts
    k = jnp.floor(x * (2.0 / math.pi) + 0.5)
    r = ((x - k * c1) - k * c2) - k * c3
    r2 = r * r
    sin_r = r + r * r2 * _horner(_SIN[bits], r2)
    cos_r = 1.0 + r2 * _horner(_COS[bits], r2)
    # quadrant: sin(r + k pi/2) = sin r, cos r, -sin r, -cos r for k = 0, 1, 2, 3 (mod 4)
    kq = k.astype(jnp.int32)
    odd = (kq & 1) == 1
    s = jnp.where(odd, cos_r, sin_r)
    c = jnp.where(odd, sin_r, cos_r)
    s = jnp.where((kq & 2) == 2, -s, s)
    c = jnp.where(((kq + 1) & 2) == 2, -c, c)
    return c, s


@sincos.defjvp
def _sincos_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    c, s = sincos(x)
    return (c, s), (-s * dx, c * dx)


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
    one into a buffer (dynamic-update-slice; with batch_first as strided columns of
    a (b, ...) buffer): XLA then computes each row in its own vectorised loop. A
    stack instead becomes one concatenation loop over all the rows, which XLA
    compiles well for up to three short rows and, for longer unrolled recursions,
    into code up to twenty times slower (measured); so does a transpose of the
    assembled rows.
    """
    flat = []

    def walk(r, idx):
        if isinstance(r, (list, tuple)):
            for k, x in enumerate(r):
                walk(x, idx + (k,))
        else:
            flat.append((idx, r))

    walk(rows, ())
    if method != "unrolled" or len(flat) <= 3:
        def stack(r):
            return jnp.stack([stack(x) for x in r]) if isinstance(r, (list, tuple)) else r

        out = stack(rows)
        return jnp.moveaxis(out, -1, 0) if batch_first else out
    shape = tuple(max(ix[d] for ix, _ in flat) + 1 for d in range(len(flat[0][0])))
    first = flat[0][1]
    if batch_first:
        out = jnp.zeros(first.shape + shape, first.dtype)
        for ix, r in flat:
            out = lax.dynamic_update_slice(out, r.reshape(r.shape + (1,) * len(ix)), (0,) + ix)
        return out
    out = jnp.zeros(shape + first.shape, first.dtype)
    for ix, r in flat:
        out = out.at[ix].set(r)
    return out


# -------------------------------------------------------------- chunked driver

METHODS = ("auto", "unrolled", "matrix")
_UNROLLED_MAX = 10  # segments: "auto" unrolls up to this many, matrix form beyond
_CHUNK = 8192  # samples per chunk of the matrix form
_FD_CHUNK = 2048  # samples per chunk of the forward dynamics: (dof, dof, chunk) stays in cache


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


def _map_chunks(fn, xs, chunk: int, method: str, batch_first: bool = False):
    """Apply ``fn`` chunk by chunk and assemble its rows into one array (..., B).

    ``xs`` is a tuple of arrays (or None) with the batch on the last axis; ``fn`` maps
    chunks of them to nested lists of rows (or one batch-last array). Without chunks
    the rows are assembled by :func:`_assemble`. With chunks, a loop over ``B //
    chunk`` chunks writes every row straight into its place in the output (one
    dynamic-update-slice per row: a stack of the rows followed by one update would
    become a single slow concatenation loop), and the remainder is one more call on
    a smaller chunk. Under reverse-mode differentiation each chunk's forward pass is
    recomputed in the backward loop (``jax.checkpoint``) rather than stored for the
    whole batch.
    """
    B = next(x for x in xs if x is not None).shape[-1]
    if not chunk:
        return _assemble(fn(*xs), method, batch_first)
    nfull, rest = divmod(B, chunk)

    def sl(x, start, size):
        return None if x is None else lax.dynamic_slice_in_dim(x, start, size, axis=x.ndim - 1)

    def put(out, rows, start):
        if method != "unrolled":  # rows of materialised arrays: one update
            return lax.dynamic_update_slice_in_dim(out, _assemble(rows, method), start, axis=out.ndim - 1)
        for ix, r in _leaves(rows):
            upd = r.reshape((1,) * len(ix) + r.shape)
            out = lax.dynamic_update_slice(out, upd, ix + (0,) * (r.ndim - 1) + (start,))
        return out

    fn = jax.checkpoint(fn, policy=jax.checkpoint_policies.nothing_saveable)
    proto = jax.eval_shape(
        fn, *[None if x is None else jax.ShapeDtypeStruct(x.shape[:-1] + (chunk,), x.dtype) for x in xs]
    )
    leaves = _leaves(proto)
    lead = tuple(max(ix[d] for ix, _ in leaves) + 1 for d in range(len(leaves[0][0])))
    out = jnp.zeros(lead + leaves[0][1].shape[:-1] + (B,), leaves[0][1].dtype)
    out = lax.fori_loop(0, nfull, lambda k, o: put(o, fn(*[sl(x, k * chunk, chunk) for x in xs]), k * chunk), out)
    if rest:
        start = nfull * chunk
        out = put(out, fn(*[sl(x, start, rest) for x in xs]), start)
    return jnp.moveaxis(out, -1, 0) if batch_first else out


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


def _adjoint_rows(model, q, qd, qdd, tbar, loads):
    """The rows whose batch sums are dPhi/d(parameters), (see above): lists over
    segments of arrays shaped like a row of q. ``loads`` is (segments, 3, ...) per
    sample, (segments, 3) shared, or None."""
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
    # float32 keeps more partial sums, so that each adds fewer terms
    return 8 if dtype == jnp.float64 else 64


def _param_adjoint(model, q, qd, qdd, tbar, loads):
    """(d joint_attach, d com, d mass, d inertia, d gravity) of sum_b tbar_b . tau_b,
    for batch-last q, qd, qdd, tbar (dof, B) and loads (segments, 3, B or 1) or None.

    The batch is viewed as (B // L, L) so that the reduction runs over the major axis
    and the L lanes stay vectorised; the last B mod L samples are a second, short
    reduction."""
    n = model.segments
    B = q.shape[-1]
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

        ld = None if loads is None else (loads[..., 0] if shared else cut(loads))
        d_attach, d_cx, d_cy, d_mass, d_inertia, d_g = _adjoint_rows(model, *map(cut, (q, qd, qdd, tbar)), ld)
        rows = tuple(d_attach + d_cx + d_cy + d_mass + d_inertia + [d_g])
        sums = lax.reduce(
            rows, tuple(jnp.zeros((), q.dtype) for _ in rows),
            lambda xs, ys: tuple(x + y for x, y in zip(xs, ys)), (0,),
        )  # fmt: skip
        parts.append(jnp.stack([jnp.sum(x) for x in sums]) if view else jnp.stack(sums))
    tot = parts[0] if len(parts) == 1 else parts[0] + parts[1]
    k = n - 1
    d_attach = jnp.concatenate([jnp.zeros((1,), q.dtype), tot[:k]])
    d_com = jnp.stack([tot[k : k + n], tot[k + n : k + 2 * n]], axis=-1)
    return d_attach, d_com, tot[k + 2 * n : k + 3 * n], tot[k + 3 * n : k + 4 * n], tot[-1]


GRADIENTS = ("adjoint", "autodiff")
# segments: the adjoint's single fused loop up to this many; JAX's reverse mode beyond.
# Measured on a chain, batch 1e4 (python -m benchmarks.design): 40 segments compile in
# 6 s and run 6x faster than reverse mode; 48 compile in 22 s and run 1.7x slower; 80
# took 524 s to compile (measured once).
_ADJOINT_MAX = 40


def _tau(model, q, qd, qdd, loads, method, chunk, B, axis, gradient):
    """tau with the batch on ``axis``, from batch-last inputs. Under reverse-mode
    differentiation with gradient="adjoint" the model's parameters get the adjoint
    above, and q, qd, qdd and loads (when they are differentiated) JAX's reverse mode
    of the pass."""
    if gradient not in GRADIENTS:
        raise ValueError(f"gradient must be one of {GRADIENTS}, got {gradient!r}")

    def evaluate(params, q, qd, qdd, loads):
        m = model if params is None else _Params(model, *params)
        return _run(m, q, qd, qdd, loads, method, chunk, B, lambda tau, F, T, c, s: tau, axis)

    if gradient == "autodiff" or model.segments > _ADJOINT_MAX:
        return evaluate(None, q, qd, qdd, loads)

    f = jax.custom_vjp(evaluate)

    def fwd(params, q, qd, qdd, loads):
        args = (params, q, qd, qdd, loads)
        values = jax.tree_util.tree_map(lambda x: x.value, args)
        perturbed = [any(x.perturbed for x in jax.tree_util.tree_leaves(a)) for a in args]
        # which inputs need cotangents, kept as the residuals' tree structure
        flags = tuple(() if p else None for p in perturbed)
        return evaluate(*values), (values, flags)

    def bwd(res, tbar):
        values, flags = res
        params, q, qd, qdd, loads = values
        if isinstance(tbar, jax.custom_derivatives.SymbolicZero):
            tbar = jnp.zeros(tbar.shape, tbar.dtype)
        d_params = None
        if flags[0] is not None:
            tbar_last = tbar.T if axis == 0 else tbar  # batch-last, like the inputs
            d_params = _param_adjoint(_Params(model, *params), q, qd, qdd, tbar_last, loads)
        if all(fl is None for fl in flags[1:]):
            return (d_params, None, None, None, None)
        _, vjp = jax.vjp(lambda *x: evaluate(params, *x), q, qd, qdd, loads)
        return (d_params,) + tuple(vjp(tbar))

    f.defvjp(fwd, bwd, symbolic_zeros=True)
    params = (model.joint_attach, model.com, model.mass, model.inertia, model.gravity)
    return f(params, q, qd, qdd, loads)


# ------------------------------------------------------------ input handling


def _axis(batch_axis) -> int:
    if batch_axis in (0,):
        return 0
    if batch_axis in (-1, 1):
        return -1
    raise ValueError(f"batch_axis must be 0 (batch first) or -1 (batch last), got {batch_axis!r}")


def _batch_vectors(model: Model, arrays, names, axis: int, size: int | None = None):
    """Validate (B, size) or (size, B) arrays; return them batch-last with their dtype."""
    size = model.dof if size is None else size
    out = []
    B = None
    for x, nm in zip(arrays, names):
        x = jnp.asarray(x)
        want = f"(B, {size})" if axis == 0 else f"({size}, B)"
        if x.ndim != 2 or x.shape[1 if axis == 0 else 0] != size:
            raise ValueError(
                f"{nm} must have shape {want} for this model (dof={model.dof}) with "
                f"batch_axis={axis}, got shape {x.shape}"
            )
        b = x.shape[0 if axis == 0 else 1]
        if B is None:
            B = b
        elif b != B:
            raise ValueError(f"{nm} has batch size {b}, but {names[0]} has {B}")
        out.append(x.T if axis == 0 else x)
    if B == 0:
        raise ValueError("the batch is empty (B = 0)")
    dtype = _float_dtype(*out)
    return [x.astype(dtype) for x in out], dtype, B


def _batch_loads(model: Model, loads, dtype, axis: int, B: int):
    """Loads as (segments, 3, B) batch-last, (segments, 3, 1) when shared, or None."""
    if loads is None:
        return None
    loads = jnp.asarray(loads)
    n = model.segments
    if loads.shape == (n, 3):
        return loads.astype(dtype)[:, :, None]
    want = (B, n, 3) if axis == 0 else (n, 3, B)
    if loads.shape != want:
        raise ValueError(
            f"loads must have shape {want} (world-frame wrenches (Fx, Fy, Mz) per segment "
            f"and sample, batch_axis={axis}) or ({n}, 3) shared by all samples, got {loads.shape}"
        )
    loads = jnp.transpose(loads, (1, 2, 0)) if axis == 0 else loads
    return loads.astype(dtype)


def _run(model, q, qd, qdd, loads, method, chunk, B, pick, axis):
    """Chunked evaluation of ``pick(tau, F, T, cos, sin)`` over batch-last inputs;
    ``pick`` returns nested lists of the rows wanted, assembled into one array with
    the batch on ``axis`` (0 or -1)."""
    method, chunk = _plan(model, method, chunk, B)
    shared = loads is not None and loads.shape[-1] == 1 and B != 1

    def fn(q_, qd_, qdd_, ld_):
        ld = loads if shared else ld_
        return pick(*_rnea_rows(model, q_, qd_, qdd_, ld, method))

    return _map_chunks(fn, (q, qd, qdd, None if shared else loads), chunk, method, axis == 0)


def _prepare(model, q, qd, qdd, loads, batch_axis, names=("q", "qd", "qdd")):
    axis = _axis(batch_axis)
    (q, qd, qdd), dtype, B = _batch_vectors(model, (q, qd, qdd), names, axis)
    model = model.astype(dtype)
    return model, q, qd, qdd, _batch_loads(model, loads, dtype, axis, B), axis, B


# ------------------------------------------------------------------ public API

_ARGS = """model: the model (its parameters are shared by all samples).
      q: (B, dof) generalized coordinates (m, rad), or (dof, B) with batch_axis=-1.
      qd: velocities (m/s, rad/s), same layout as q.
      qdd: accelerations (m/s^2, rad/s^2), same layout as q.
      loads: optional world-frame wrenches (Fx, Fy, Mz) at the centres of mass (N,
        N, N m): (B, segments, 3), or (segments, 3, B) with batch_axis=-1, or
        (segments, 3) shared by every sample.
      batch_axis: 0 (batch first, transposed internally) or -1 (batch last: the
        contiguous layout computed in, no copy).
      method: "unrolled", "matrix" (see the module docstring) or "auto": unrolled up
        to 10 segments, matrix form beyond.
      chunk: samples per chunk, 0 for the whole batch at once; default 0 for the
        unrolled method (it writes nothing but its outputs) and 8192 for the matrix
        form."""


def inverse_dynamics_batch(
    model: Model, q, qd, qdd, loads=None, *, batch_axis: int = 0, method: str = "auto",
    chunk: int | None = None, gradient: str = "adjoint",
):  # fmt: skip
    """Generalized forces of a batch of samples, tau = M qdd + C + G + E.

    Equals ``jax.vmap`` of :func:`jaxmb.inverse_dynamics` over the batch, computed by
    the batch-last recursive Newton-Euler pass of this module (no per-sample matrix).

    Args:
      {args}
      gradient: how reverse-mode differentiation (``jax.grad``, ``jax.vjp``) treats
        the model's parameters. "adjoint" (default): a hand-derived adjoint (the
        virtual-power form in this module's source) that sums the gradient over the
        batch in one pass, 1.6 to 4.6 times faster than JAX's own reverse mode of the
        recursion for batches of 1e5 to 1e6 (``benchmarks/README.md``); q, qd, qdd
        and loads still get JAX's reverse mode. It is reverse-mode only: for
        ``jax.jvp``, ``jax.jacfwd`` or ``jax.hessian`` use "autodiff", plain JAX
        differentiation in both modes. Models of more than 40 segments always get
        "autodiff" (the adjoint's one fused loop compiles too slowly beyond).

    Returns:
      tau (B, dof), or (dof, B) with batch_axis=-1: joint moments (N m) in relative
      coordinates; for a floating base the first two entries are the force (N) that
      the base must supply.

    Raises:
      ValueError: for inputs of the wrong shape, an empty batch, an unknown method or
        gradient.
    """
    model, q, qd, qdd, loads, axis, B = _prepare(model, q, qd, qdd, loads, batch_axis)
    return _tau(model, q, qd, qdd, loads, method, chunk, B, axis, gradient)


def joint_moments_batch(
    model: Model, q, qd, qdd, loads=None, *, batch_axis: int = 0, method: str = "auto",
    chunk: int | None = None,
):  # fmt: skip
    """Net joint moments of a batch, (B, segments) or (segments, B), N m.

    The batched :func:`jaxmb.joint_moments`: the moment that the parent exerts on each
    segment at its joint (counter-clockwise positive); for a floating base the root's
    entry is the moment that the base must supply.

    Args:
      {args}
    """
    model, q, qd, qdd, loads, axis, B = _prepare(model, q, qd, qdd, loads, batch_axis)
    return _run(model, q, qd, qdd, loads, method, chunk, B, lambda tau, F, T, c, s: T, axis)


def joint_reactions_batch(
    model: Model, q, qd, qdd, loads=None, *, joints: Sequence[Segment] | Segment | None = None,
    frame: str = "world", batch_axis: int = 0, method: str = "auto", chunk: int | None = None,
):  # fmt: skip
    """Joint reaction forces of a batch, (B, k, 2) or (k, 2, B), N.

    The batched :func:`jaxmb.joint_reactions`: the force that the parent (or the
    ground) exerts on each requested segment at its joint, from the backward pass,
    F_i = sum over the subtree of i of (m_j a_j - h_j); it equals Blajer and
    Czaplicki's projection lambda = E^T (Mp (D qdd + gamma) - h) with their sign
    reversed. For a floating base, the root's row is the force the base must supply.

    Args:
      {args}
      joints: segments (indices or names) whose proximal joints to return; default
        all, in segment order.
      frame: "world" for (Fx, Fy), or "segment" for (axial, shear) in the child's
        frame (axial along the child's axis, positive when the parent pushes the
        child distally, i.e. compression).

    Returns:
      (B, k, 2) with batch_axis=0, (k, 2, B) with batch_axis=-1.
    """
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    if joints is None:
        idx = tuple(range(model.segments))
    else:
        js = (joints,) if isinstance(joints, (str, int, np.integer)) else tuple(joints)
        if not js:
            raise ValueError("joints is empty: give None for all joints, or a list of indices or names")
        idx = tuple(model.index(j) for j in js)
    model, q, qd, qdd, loads, axis, B = _prepare(model, q, qd, qdd, loads, batch_axis)

    def pick(tau, F, T, c, s):
        if frame == "world":
            return [F[i] for i in idx]
        # (axial, shear) = R(theta)^T (Fx, Fy)
        return [(c[i] * F[i][0] + s[i] * F[i][1], c[i] * F[i][1] - s[i] * F[i][0]) for i in idx]

    return _run(model, q, qd, qdd, loads, method, chunk, B, pick, axis)


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


def _cholesky_solve_rows(M, r):
    """Solve M x = r for every sample: M (d, d, b) symmetric positive definite, r (d, b).

    Cholesky factorisation M = L L^T, then L y = r and L^T x = y, each a loop over
    the d columns of elementwise operations on whole (d, d, b) arrays (the batch
    stays the contiguous axis; LAPACK would be called once per sample).
    """
    d = M.shape[0]
    idx = jnp.arange(d)

    def factor(j, L):
        pivot = jnp.sqrt(lax.dynamic_index_in_dim(lax.dynamic_index_in_dim(L, j, 0, False), j, 0, False))
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
    for j in range(d):
        acc = M[j, j]
        for k in range(j):
            acc = acc - L[j][k] * L[j][k] * D[k]
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


def forward_dynamics_batch(
    model: Model, q, qd, tau, loads=None, *, batch_axis: int = 0, method: str = "auto",
    chunk: int | None = None,
):  # fmt: skip
    """Accelerations of a batch, qdd = M^-1 (tau - C - G - E), (B, dof) or (dof, B).

    The batched :func:`jaxmb.forward_dynamics`. The bias C + G + E is the batched
    recursion with qdd = 0; M comes from composite-body sums (O(segments^2) per
    sample) and is factorised over the batch axis (O(dof^3) per sample): an LDL^T
    factorisation unrolled over the coordinates up to 12 of them, a Cholesky column
    loop beyond; in chunks of 2048 samples by default.

    Args:
      {args}
      tau: (B, dof) generalized forces (N m; N for base translations), or (dof, B)
        with batch_axis=-1, in place of qdd.

    Returns:
      qdd (B, dof), or (dof, B) with batch_axis=-1, m/s^2 and rad/s^2.
    """
    model, q, qd, tau, loads, axis, B = _prepare(model, q, qd, tau, loads, batch_axis, ("q", "qd", "tau"))
    method, chunk = _plan(model, method, _FD_CHUNK if chunk is None else chunk, B)
    shared = loads is not None and loads.shape[-1] == 1 and B != 1

    def fn(q_, qd_, tau_, ld_):
        ld = loads if shared else ld_
        bias = _assemble(_rnea_rows(model, q_, qd_, jnp.zeros_like(q_), ld, "matrix")[0], "matrix")
        solve = _ldl_solve_rows if model.dof <= _LDL_MAX else _cholesky_solve_rows
        return solve(_mass_matrix_rows(model, q_), tau_ - bias)

    return _map_chunks(fn, (q, qd, tau, None if shared else loads), chunk, method, axis == 0)


for _f in (inverse_dynamics_batch, joint_moments_batch, joint_reactions_batch, forward_dynamics_batch):
    _f.__doc__ = _f.__doc__.replace("{args}", _ARGS)
del _f
