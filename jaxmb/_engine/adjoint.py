"""The parameter adjoint: reverse mode of the inverse dynamics with respect to the
model's parameters, one fused pass over the batch (derivation below)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..model import Model, ancestor_matrix
from .layout import Spec, _lead_shape, _Params
from .rnea import _child_state, _root_state

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
    (B // L, L)), by default: the reduction keeps L accumulators for each of its 21
    to 120 rows. 2 in float64 (the fastest or within the noise on the CPU measured,
    docs/performance.md); 64 in float32, for accuracy."""
    return 2 if dtype == jnp.float64 else 64


class _Rows(list):
    """The rows x[..., i] of a batch-first array x (..., k), indexable as the
    batch-last array (k, ...) would be: row by row (its ``shape`` and ``dtype`` are
    the batch-last array's)."""

    def __init__(self, x):
        super().__init__(x[..., i] for i in range(x.shape[-1]))
        self.shape, self.dtype = (x.shape[-1],) + x.shape[:-1], x.dtype


def _param_adjoint(model, q, qd, qdd, tbar, loads, fbar=None, react=None, batch_first=True, lanes=None):
    """(d joint_attach, d com, d mass, d inertia, d gravity) of sum_b tbar_b . tau_b
    (plus fbar_b . F_b, the reaction forces F at the joints ``react[0]`` in the frame
    ``react[1]``, when ``fbar`` (joints, 2, B) is given), for q, qd, qdd, tbar
    batch-first (B, dof) (``batch_first``) or batch-last (dof, B), and loads
    (segments, 3, B or 1) or None.

    Batch-first, the reduction's loop reads each row as a strided slice of the
    inputs; transposed to batch-last first, XLA materialises the four transposes
    before the loop from about 18 coordinates (see ``Tuning.adjoint_first_min``).

    The batch is viewed as (B // L, L) (L = ``lanes``, None: :func:`_lanes`) so that the reduction runs over the major axis
    and the L lanes stay vectorised; the last B mod L samples are a second, short
    reduction. On the CPU all the rows are summed by one variadic reduction; on other
    platforms by reductions of at most ``_GPU_GROUP`` outputs (chosen when the
    computation is lowered: ``lax.platform_dependent`` around the reductions only, so
    that the rows are traced once)."""
    n = model.segments
    B = q.shape[0 if batch_first else -1]
    L = _lanes(q.dtype) if lanes is None else lanes
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


# outputs per reduction of the adjoint on accelerators: a GPU reduction keeps a block
# of partial sums per output in shared memory, and one reduction with the ~35 outputs
# of the seven-segment human needed 0x47180 bytes against 0x38c00 available on an
# H100 (ptxas error, float32, measured by the author); 8 outputs need under a
# quarter of that. The CPU keeps the single fused reduction (no such limit, and 1.5x
# to 3.4x faster than one reduction per parameter: python -m benchmarks.design).
_GPU_GROUP = 8


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
    bf = dof >= spec.tuning.adjoint_first_min  # the layout of q, qd, qdd and tbar
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
    return _param_adjoint(m, lay(q, (dof,)), lay(qd, (dof,)), lay(x3, (dof,)), tb, ld, fb, react, bf,
                          spec.tuning.lanes)
