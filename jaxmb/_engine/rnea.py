"""The recursive Newton-Euler inverse dynamics of a chunk, unrolled or in matrix form.

For a segment i with parent p, joint point P_i, angle theta_i and centre of mass
c_i = P_i + R(theta_i) com_i:

    theta_i = theta_p + q_i (relative) or q_i (absolute);  omega, alpha likewise
    P_i = P_p + a_i u_p,   a_P_i = a_P_p + a_i (alpha_p n_p - omega_p^2 u_p)
    f_i = m_i a_c_i - h_i,   mu_i = I_i alpha_i - Mz_i + (c_i - P_0) x f_i
    F_i = sum_{j in subtree(i)} f_j,   T_i = sum_{j in subtree(i)} mu_j - (P_i - P_0) x F_i

with u = (cos, sin), n = (-sin, cos), a_i the joint's distance along the parent's
axis (``model.joint_attach``), h the applied force (gravity and loads) and Mz the
applied moment. F_i and T_i are the force and moment that the parent exerts on
segment i at its joint (as in :func:`jaxmb.joint_loads`); positions are taken
relative to the root's joint P_0, which keeps the moments accurate far from the
origin.

Two evaluations of it (``method``):

- "unrolled": the loops over segments unrolled in Python. XLA fuses each output row
  into one loop that reads the inputs and writes that row, nothing in between; each
  row recomputes the kinematics it needs, O(segments) per row, so the cost grows as
  segments^2 but stays below the alternatives for short paths.
- "matrix": every sum along the tree as a product with the ancestor matrix A
  (A[i, k] = 1 for k = i or an ancestor of i): theta = A q, P = A_e u, F = A^T f, ...
  Each product is a small matrix multiplication over the segment axis, whose
  operands XLA materialises, so nothing is recomputed; O(segments^2) multiply-adds
  per sample, fast in practice for long chains.

Why not simpler: XLA:CPU has no multi-output loop fusion, so an unrolled recursion
with n outputs is compiled into n loops that each recompute what they share, and a
stack of many such rows into one "concatenate" loop that it does not vectorise;
``optimization_barrier`` is removed before fusion; a ``lax.scan`` over segments
writes and reads every segment's state (memory bound); complex numbers for planar
vectors halve the arrays but vectorise worse in long expressions.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from .._math import sincos
from ..model import Model, ancestor_matrix

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
