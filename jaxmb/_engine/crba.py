"""The composite-body mass matrix of a chunk (Featherstone's CRBA for planar trees)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from .._math import sincos
from ..model import Model, ancestor_matrix


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
