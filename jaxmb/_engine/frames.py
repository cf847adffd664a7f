"""The pose map's primitives: absolute angles and joint points of a planar tree, the
rotation of local vectors, and the second directional derivative that gives
accelerations (private; :mod:`jaxmb.kinematics` and :mod:`jaxmb.dynamics` build on
them)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..model import Model, ancestor_matrix

__all__ = ["rot", "split", "angles", "frames", "second_jvp"]


def rot(theta, v):
    """Rotate local 2-vectors v (..., 2) by angles theta (...)."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def split(model: Model, q):
    """Base position (2,) and the angle coordinates (segments,)."""
    if model.base == "floating":
        return q[:2], q[2:]
    return model.origin, q


def angles(model: Model, qa):
    if model.coordinates == "absolute":
        return qa
    A = ancestor_matrix(model.parent)
    return jnp.asarray(A, qa.dtype) @ qa


def frames(model: Model, q, z=None):
    """Absolute angles (n,) and proximal joint points (n, 2).

    P_i = P_parent(i) + attach_i u(theta_parent(i)) + z_i, with the root at the base;
    in matrix form P = base + A @ (edge vectors + z), A the ancestor matrix.
    """
    base, qa = split(model, q)
    theta = angles(model, qa)
    parent = np.asarray(model.parent)
    par = np.where(parent < 0, 0, parent)
    is_child = jnp.asarray(parent >= 0, q.dtype)
    theta_p = theta[par]
    edge = (is_child * model.joint_attach)[:, None] * jnp.stack([jnp.cos(theta_p), jnp.sin(theta_p)], -1)
    if z is not None:
        edge = edge + z
    A = jnp.asarray(ancestor_matrix(model.parent), q.dtype)
    P = base[None, :] + A @ edge
    return theta, P


def second_jvp(g, q, qd, qdd):
    """d2/dt2 of g(q(t)): ``D qdd + Ddot qd`` with ``D = dg/dq`` (two forward-mode
    directional derivatives: the acceleration of any map of the coordinates)."""
    vel = lambda q_: jax.jvp(g, (q_,), (qd,))[1]  # noqa: E731
    return jax.jvp(g, (q,), (qdd,))[1] + jax.jvp(vel, (q,), (qd,))[1]
