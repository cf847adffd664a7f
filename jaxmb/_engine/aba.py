"""The articulated-body forward dynamics of a chunk (O(segments) per sample, no
matrix formed)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax

from .._math import sincos
from ..model import ancestor_matrix

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
    absolute = model.coordinates == "absolute"
    rest = qd is None
    qa, qda = q[nb:], (None if rest else qd[nb:])
    ta = [tau[nb + i] for i in range(n)]
    if absolute:
        # tau_rel = A^T tau_abs: each joint's moment is the sum over its subtree
        for i in reversed(range(1, n)):
            ta[parent[i]] = ta[parent[i]] + ta[i]
    r, kap, IA, pA, own = _aba_segments(model, qa, qda, loads, cut)
    D, U, u = _aba_inward(model, ta, r, kap, IA, pA, own, cut, rest)
    return _aba_accelerations(model, tau, ta, r, kap, IA, pA, D, U, u, cut, rest)


def _aba_segments(model, qa, qda, loads, cut: int):
    """Outward pass: the joint offsets r_i = a_i u_p, kappa_i = c_i = -omega_p^2 r_i,
    and each segment's own inertia and bias wrench at its joint (IA, pA: lists of
    rows; own: I_i + m_i |com_i|^2, the pivot floor)."""
    n, parent = model.segments, model.parent
    absolute = model.coordinates == "absolute"
    attach = model.joint_attach
    rest = qda is None
    # outward: angles, rates, joint offsets r_i = a_i u_p and the segment terms
    th, om, cs = [None] * n, [None] * n, [None] * n
    r, kap = [None] * n, [None] * n  # r_i; c_i = -omega_p^2 r_i
    IA, pA, own = [None] * n, [None] * n, [None] * n
    if cut:
        A = jnp.asarray(ancestor_matrix(parent), qa.dtype)
        mm = lambda M, x: jnp.matmul(M, x, precision=lax.Precision.HIGHEST)  # noqa: E731
        th_a = qa if absolute else mm(A, qa)
        c_a, s_a = sincos(th_a)
        eye = jnp.eye(n, dtype=qa.dtype)
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
    return r, kap, IA, pA, own


def _aba_inward(model, ta, r, kap, IA, pA, own, cut: int, rest: bool):
    """Inward pass, leaves first: the articulated inertias IA and bias wrenches pA
    (updated in place), and per joint 1 / D, U and u = tau - pA[0]."""
    n, nb, parent = model.segments, model.nbase, model.parent
    kids = model.children
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
    return D, U, u


def _aba_accelerations(model, tau, ta, r, kap, IA, pA, D, U, u, cut: int, rest: bool):
    """Outward pass: the accelerations, the root first (a floating root by its own 3x3
    LDL^T); the rows of qdd (absolute angles: the alpha_i)."""
    n, nb, parent = model.segments, model.nbase, model.parent
    kids = model.children
    absolute = model.coordinates == "absolute"
    g = model.gravity
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
