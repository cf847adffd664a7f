"""Recursive Newton-Euler inverse dynamics of planar trees, O(segments).

This is the gait notebook's segment-by-segment ``invdyn2d`` (Duarte; after van den
Bogert) generalised to trees: a forward pass from the root computes every segment's
angle, angular velocity and acceleration and the acceleration of its centre of mass;
a backward pass from the leaves accumulates, for every joint, the force and the
moment that the parent exerts on the child:

    f_i   = m_i a_i - h_i                                      (net force to supply)
    F_i   = f_i + sum_{c in children(i)} F_c                   (joint reaction, parent on i)
    tau_i = I_i alpha_i - Mz_i + r_i x f_i
            + sum_{c in children(i)} (tau_c + (P_c - P_i) x F_c)   (joint moment about P_i)

with ``r_i = c_i - P_i`` and ``h_i = (Fx, Fy - m_i g)`` the applied force. The loops
run over segments in Python (the topology is static), so they unroll into a fixed
sequence of scalar array operations that XLA fuses and that vectorise over a batch.
"""

from __future__ import annotations

import jax.numpy as jnp

from .kinematics import check_loads, check_vector, prepare
from .model import Model

__all__ = ["rnea", "rnea_full"]


def _cross(a, b):
    return a[0] * b[1] - a[1] * b[0]


def rnea_full(model: Model, q, qd, qdd, loads=None):
    """Recursive Newton-Euler pass returning every joint load.

    Args:
      model: the model.
      q, qd, qdd: (dof,) generalized coordinates, velocities, accelerations.
      loads: optional (segments, 3) world-frame wrenches (Fx, Fy, Mz) at the centres
        of mass (N, N, N m).

    Returns:
      (tau, F, T):
        tau (dof,) generalized forces, M qdd + C + G + E;
        F (segments, 2) force that the parent (or ground/base) exerts on each segment
        at its joint, world frame, N;
        T (segments,) moment that the parent exerts on each segment (counter-clockwise),
        N m. For a floating base, F[0] and T[0] are what the base must supply.
    """
    q = check_vector(model, q, "q")
    qd = check_vector(model, qd, "qd")
    qdd = check_vector(model, qdd, "qdd")
    model, dtype = prepare(model, q, qd, qdd)
    q, qd, qdd = (x.astype(dtype) for x in (q, qd, qdd))
    loads = check_loads(model, loads, dtype)
    return _rnea(model, q, qd, qdd, loads)


def _rnea(model: Model, q, qd, qdd, loads):
    n = model.segments
    nb = model.nbase
    parent = model.parent
    children = model.children
    absolute = model.coordinates == "absolute"
    g = model.gravity
    zero = jnp.zeros((), q.dtype)
    attach = model.joint_attach

    th, om, al = [None] * n, [None] * n, [None] * n
    P, aP = [None] * n, [None] * n
    r, ac = [None] * n, [None] * n
    c_th, s_th = [None] * n, [None] * n

    # forward pass: angles, rates, joint and centre-of-mass accelerations
    for i in range(n):
        p = parent[i]
        qi, qdi, qddi = q[nb + i], qd[nb + i], qdd[nb + i]
        if p < 0 or absolute:
            th[i], om[i], al[i] = qi, qdi, qddi
        else:
            th[i], om[i], al[i] = th[p] + qi, om[p] + qdi, al[p] + qddi
        c_th[i], s_th[i] = jnp.cos(th[i]), jnp.sin(th[i])
        if p < 0:
            if nb:
                P[i] = (q[0], q[1])
                aP[i] = (qdd[0], qdd[1])
            else:
                P[i] = (model.origin[0], model.origin[1])
                aP[i] = (zero, zero)
        else:
            a = attach[i]
            # joint point on the parent's axis: P_i = P_p + a u_p,
            # a_P_i = a_P_p + a (alpha_p n_p - omega_p^2 u_p), u = (cos, sin), n = (-sin, cos)
            ux, uy = c_th[p], s_th[p]
            P[i] = (P[p][0] + a * ux, P[p][1] + a * uy)
            w2 = om[p] * om[p]
            aP[i] = (aP[p][0] + a * (-al[p] * uy - w2 * ux), aP[p][1] + a * (al[p] * ux - w2 * uy))
        # r_i = R(theta_i) com_i ; a_c = a_P + alpha k x r - omega^2 r
        cx, cy = model.com[i, 0], model.com[i, 1]
        rx = c_th[i] * cx - s_th[i] * cy
        ry = s_th[i] * cx + c_th[i] * cy
        r[i] = (rx, ry)
        w2 = om[i] * om[i]
        ac[i] = (aP[i][0] - al[i] * ry - w2 * rx, aP[i][1] + al[i] * rx - w2 * ry)

    # backward pass: joint forces and moments (parent on child)
    F, T = [None] * n, [None] * n
    for i in reversed(range(n)):
        m = model.mass[i]
        fx = m * ac[i][0] - loads[i, 0]
        fy = m * ac[i][1] - (loads[i, 1] - m * g)
        Fx, Fy = fx, fy
        Ti = model.inertia[i] * al[i] - loads[i, 2] + _cross(r[i], (fx, fy))
        for c in children[i]:
            Fx = Fx + F[c][0]
            Fy = Fy + F[c][1]
            d = (P[c][0] - P[i][0], P[c][1] - P[i][1])
            Ti = Ti + T[c] + _cross(d, F[c])
        F[i] = (Fx, Fy)
        T[i] = Ti

    T = jnp.stack(T)
    Fm = jnp.stack([jnp.stack(f) for f in F])
    if absolute:
        # generalized force of an absolute angle: tau_i minus the moments of its children
        Qa = jnp.stack([T[i] - sum((T[c] for c in children[i]), zero) for i in range(n)])
    else:
        Qa = T
    tau = jnp.concatenate([Fm[0], Qa]) if nb else Qa
    return tau, Fm, T


def rnea(model: Model, q, qd, qdd, loads=None):
    """Inverse dynamics by recursive Newton-Euler: tau = M qdd + C + G + E, (dof,).

    See :func:`rnea_full` for the arguments; Pinocchio's identities hold:
    ``rnea(q, qd, 0)`` is C + G (+ E) and ``rnea(q, 0, 0)`` is G (+ E).
    """
    return rnea_full(model, q, qd, qdd, loads)[0]
