"""The hand: a point fixed on a segment, its position, derivatives and workspace."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._checks import _float_dtype, check_batch, check_finite
from ..kinematics import point_position
from ..model import Model, Segment, ancestor_matrix


def _hand_point(model: Model, segment: Segment, point):
    """Segment index and local point (2,) of the hand: the distal end by default."""
    i = model.index(segment)
    if point is None:
        return i, None
    point = jnp.asarray(point)
    if point.shape != (2,):
        raise ValueError(f"point must have shape (2,) (along, across in segment {i}'s frame, m), got {point.shape}")
    check_finite(point, "point")
    return i, point


def hand_position(model: Model, q, *, segment: Segment = -1, point=None):
    """World position of the hand (a point fixed on a segment), (..., 2), m.

    Args:
      model: the model.
      q: (..., dof) generalized coordinates (m, rad): one pose or any batch.
      segment: index or name of the segment carrying the hand (default: the last).
      point: (2,) local coordinates (along the axis, across it) from the segment's
        proximal joint, m; default ``(length, 0)``, the distal end.

    Returns:
      (..., 2) positions x, y (m), in the floating dtype of q.
    """
    i, point = _hand_point(model, segment, point)
    q = check_batch(model, q, "q")
    q = jnp.asarray(q, _float_dtype(q))
    if point is None:
        point = jnp.stack([jnp.asarray(model.length[i]), jnp.zeros_like(model.length[i])])
    return point_position(model, q, i, point)


def workspace(model: Model, *, segment: Segment = -1, point=None):
    """Inner and outer radius of the hand's workspace about the base, m.

    The hand of a serial path of links with unlimited hinges reaches the annulus
    r_min <= |p - origin| <= r_max, with the links' lengths l_k (joint to joint
    along the path from the base, the last one to the hand point):

        r_max = sum(l_k),    r_min = max(0, 2 max(l_k) - sum(l_k)).

    Args:
      model: a model with a fixed base (a floating base reaches everywhere).
      segment, point: the hand, as in :func:`hand_position`.

    Returns:
      (r_min, r_max) as Python floats (the model's parameters must be concrete).
    """
    if model.base == "floating":
        return 0.0, float("inf")
    i, point = _hand_point(model, segment, point)
    if any(isinstance(x, jax.core.Tracer) for x in (model.length, model.attach, point)):
        raise ValueError("workspace needs concrete lengths (it returns Python numbers), got traced ones (under "
                         "jax.jit, grad or vmap): call it outside the transformation")  # fmt: skip
    attach = np.asarray(model.joint_attach, dtype=float)
    length = np.asarray(model.length, dtype=float)
    links, j = [], i
    links.append(float(length[i]) if point is None else float(np.hypot(*np.asarray(point, dtype=float))))
    while model.parent[j] >= 0:  # the joint of j sits attach_j along its parent's axis
        links.append(abs(float(attach[j])))
        j = model.parent[j]
    total = float(sum(links))
    return max(0.0, 2.0 * max(links) - total), total


def _traced_radii(model: Model, i: int, point):
    """workspace() with traced parameters (inside jit/vmap)."""
    links = [model.length[i] if point is None else jnp.sqrt(jnp.sum(point.astype(model.length.dtype) ** 2))]
    att = model.joint_attach
    j = i
    while model.parent[j] >= 0:
        links.append(jnp.abs(att[j]))
        j = model.parent[j]
    links = jnp.stack(links)
    total = jnp.sum(links)
    return jnp.maximum(0.0, 2 * jnp.max(links) - total), total


def _hand_links(model: Model, i: int, point):
    """The hand as base + sum_k R(theta_k) (c_k, d_k) over the path from the root to i.

    Returns (segments k (static tuple), c (n,), d (n,)): for the ancestors of i, the
    distance along their axis to the next joint of the path; for i, the hand point.
    """
    ks, cs, ds = [i], [model.length[i] if point is None else point[0]], [0.0 if point is None else point[1]]
    att = model.joint_attach
    j = i
    while model.parent[j] >= 0:
        p = model.parent[j]
        ks.append(p)
        cs.append(att[j])
        ds.append(0.0)
        j = p
    dtype = jnp.result_type(model.length)
    return tuple(ks), jnp.stack([jnp.asarray(c, dtype) for c in cs]), jnp.stack([jnp.asarray(d, dtype) for d in ds])


def _hand_derivatives(model: Model, i: int, point, q, qd, qdd, qddd):
    """Hand position and its first three time derivatives, (..., 2) each, in closed form.

    With v_k = R(theta_k) (c_k, d_k) (see :func:`_hand_links`), J the rotation by
    +90 degrees and omega, alpha, j the first three derivatives of theta_k:

        v' = omega J v,   v'' = alpha J v - omega^2 v,
        v''' = (j - omega^3) J v - 3 omega alpha v.
    """
    ks, c, d = _hand_links(model, i, point)
    dtype = q.dtype
    c, d = c.astype(dtype), d.astype(dtype)
    nb = model.nbase
    A = jnp.asarray(ancestor_matrix(model.parent), dtype) if model.coordinates == "relative" else None
    ks = np.asarray(ks)

    def angles(x):  # absolute angles of the path's segments, (..., n)
        xa = x[..., nb:]
        th = xa @ A.T if A is not None else xa
        return th[..., ks]

    th, om, al, je = (angles(x) for x in (q, qd, qdd, qddd))
    cth, sth = jnp.cos(th), jnp.sin(th)
    v = jnp.stack([cth * c - sth * d, sth * c + cth * d], -1)  # (..., n, 2)
    Jv = jnp.stack([-v[..., 1], v[..., 0]], -1)
    om, al, je = om[..., None], al[..., None], je[..., None]
    x0 = jnp.sum(v, -2)
    x1 = jnp.sum(om * Jv, -2)
    x2 = jnp.sum(al * Jv - om**2 * v, -2)
    x3 = jnp.sum((je - om**3) * Jv - 3 * om * al * v, -2)
    if nb:
        return x0 + q[..., :2], x1 + qd[..., :2], x2 + qdd[..., :2], x3 + qddd[..., :2]
    origin = model.origin.astype(dtype)
    return x0 + origin, x1, x2, x3
