"""Joint reaction forces by the projection of Blajer & Czaplicki (2005).

Augment the pose map with open-constraint coordinates z, the prohibited relative
translations at the joints: p = g(q, z), evaluated at z = 0. Then E = dg/dz is a
pseudo-inverse of the constraint matrix and the joint reactions follow without any
matrix inversion:

    lambda = E^T (Mp (D qdd + gamma) - h)

This is the force that the parent (or the ground) exerts on the child, world frame,
as the gait notebook's ``invdyn2d`` returns it; Blajer & Czaplicki's lambda is the
force of the child on the parent, the same numbers negated. Only the columns of E of
the requested joints are formed, as the paper does for the lower extremities.
"""

from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import batch as _batch
from .dynamics import _batched, _projection, _spec, applied_wrenches
from .kinematics import _pose_acc, check_model, pose
from .model import Model, Segment

__all__ = ["joint_reactions"]


def _joint_indices(model: Model, joints):
    if joints is None:
        return tuple(range(model.segments))
    if isinstance(joints, (str, int, np.integer)) or np.ndim(joints) == 0:
        joints = (joints,)  # one joint; model.index names what is not an index or a name
    idx = tuple(model.index(j) for j in joints)
    if not idx:
        raise ValueError("joints is empty: give None for all joints, or a list of indices or names")
    return idx


def joint_reactions(
    model: Model,
    q,
    qd,
    qdd,
    loads=None,
    *,
    joints: Sequence[Segment] | Segment | None = None,
    frame: str = "world",
    method: str = "recursive",
    kernel: str = "auto",
    chunk: int | None = None,
    gradient: str = "adjoint",
):
    """Joint reaction forces, (..., len(joints), 2), N.

    Args:
      model: the model.
      q, qd, qdd: (..., dof) generalized coordinates, velocities, accelerations.
      loads: optional (segments, 3) or (..., segments, 3) world-frame wrenches
        (Fx, Fy, Mz) at the centres of mass, e.g. from :func:`jaxmb.point_load`.
      joints: the joints to compute, by segment index or name (joint i is the
        proximal joint of segment i; a negative index counts from the end, as in
        Python: -1 is the last segment's joint, not the ground, which is -1 in
        ``parent``); default: all, in segment order.
      frame: "world" for (Fx, Fy), or "segment" for (axial, shear) in the child
        segment's frame: axial along the child's axis (positive when the parent
        pushes the child distally, i.e. compression), shear along the axis rotated
        by +90 degrees.
      method: "recursive" (default: the batched kernel's backward pass,
        F_i = sum over the subtree of i of (m_j a_j - h_j)) or "projection"
        (Blajer & Czaplicki's lambda = E^T (Mp (D qdd + gamma) - h) with E from the
        pose map, evaluated sample by sample: the reference). They agree to
        round-off (tests).
      kernel, chunk: as :func:`jaxmb.inverse_dynamics`.
      gradient: as :func:`jaxmb.inverse_dynamics`: "adjoint" (default) transposes
        the model's derivative by the hand-derived parameter adjoint (a reaction's
        cotangent is a virtual translation of the joint's subtree), reverse mode
        only; "autodiff" for forward mode (``jax.jvp``, ``jax.jacfwd``).

    Returns:
      The force that the parent (or the ground) exerts on each requested segment at
      its joint. For a floating base, the root's row is the force the base must
      supply (zero for a free flight that obeys Newton's law). One sample or any
      leading batch shape, as :func:`jaxmb.inverse_dynamics` (compiled on the first
      call, ``jax.vmap`` runs the batched kernel).
    """
    check_model(model)
    idx = _joint_indices(model, joints)
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    if method == "recursive":
        spec = _spec("reactions", kernel=kernel, chunk=chunk, gradient=gradient, joints=idx, frame=frame)
        return _batch.run(spec, model, q, qd, qdd, loads)
    if method != "projection":
        raise ValueError(f"method must be 'recursive' or 'projection', got {method!r}")

    def one(model, q, qd, qdd, loads):
        lam = _reactions_projection(model, q, qd, qdd, loads, idx)
        if frame == "segment":
            theta = pose(model, q)[jnp.asarray(idx), 2]
            c, s = jnp.cos(theta), jnp.sin(theta)
            lam = jnp.stack([c * lam[:, 0] + s * lam[:, 1], -s * lam[:, 0] + c * lam[:, 1]], 1)
        return lam

    return _projection(one, model, q, qd, qdd, loads)


def _reactions_projection(model, q, qd, qdd, loads, idx):
    # E for each distinct joint once (a repeated index in .at[].set would keep only
    # its last copy, and the first copy's reaction would come out zero), then the
    # requested order, repeats included
    uniq = tuple(sorted(set(idx)))
    if uniq != tuple(idx):
        lam = _reactions_projection(model, q, qd, qdd, loads, uniq)
        return lam[jnp.asarray([uniq.index(i) for i in idx])]
    sel = jnp.asarray(idx)

    def g_z(z_sel):  # pose with open-constraint coordinates at the requested joints only
        z = jnp.zeros((model.segments, 2), q.dtype).at[sel].set(z_sel)
        return pose(model, q, z)

    E = jax.jacfwd(g_z)(jnp.zeros((len(idx), 2), q.dtype))  # (n, 3, k, 2)
    acc = _pose_acc(model, q, qd, qdd)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    resid = w * acc - applied_wrenches(model, loads)
    return jnp.einsum("ipjc,ip->jc", E, resid)
