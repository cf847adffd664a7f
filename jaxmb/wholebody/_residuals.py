"""Residuals of a floating-base model: the root wrench beyond the applied forces.

Newton-Euler of the whole body: with every external force known (gravity and the
force plates), the wrench that inverse dynamics needs at the root of a floating
base is what the model and the motion fail to explain. OpenSim reports it as the
"residual forces and moments" of the pelvis.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

from ..dynamics import inverse_dynamics
from ..kinematics import whole_body_com
from ..model import Model

__all__ = ["residuals", "ResidualSummary", "summarize", "root_moment_row"]


def _check_floating(model: Model) -> None:
    """Refuse a fixed-base model: its root wrench is a reaction, not a residual."""
    if model.base != "floating":
        raise ValueError(
            "residuals need a floating-base model (tree(..., base='floating')): a fixed base "
            f"absorbs any wrench at its hinge; got base={model.base!r}"
        )


def root_moment_row(model: Model, tau):
    """The moment about the root's proximal point, from generalized forces (..., dof).

    A rigid rotation of the whole body about the root's proximal point is
    ``delta q = e_2`` in relative coordinates (the root angle carries every
    child) and ``delta q_i = 1`` for every angle in absolute coordinates, so the
    moment is ``tau_2`` or the sum of the angle entries.
    """
    if model.coordinates == "relative":
        return tau[..., 2]
    return tau[..., 2:].sum(-1)


def residuals(model: Model, q, qd, qdd, loads=None, *, about: str = "com", gradient: str = "adjoint"):
    """Residual force and moment per frame: (FX, FY, MZ), shape (..., 3).

    The wrench the ground would have to apply at the root of a floating base,
    beyond gravity and ``loads``, for the model to follow the motion:

        F   = sum_i (m_i a_i) - m g (0, -1) - sum_loads F_k
        M_c = dH_c/dt - sum_loads ((p_k - c) x F_k + M_k)

    with ``c`` the whole-body centre of mass and ``H_c`` the angular momentum
    about it (Newton-Euler of the whole body). It is computed from inverse
    dynamics: ``F = tau[:2]``, the moment about the root's proximal point ``P``
    is the generalized force of a rigid rotation of the body about ``P``, and
    ``M_c = M_P + (P - c) x F``. Zero when the model, the motion and the forces
    agree; OpenSim's residuals (pelvis_tx, pelvis_ty, pelvis_tilt) are the same
    quantity about the pelvis origin.

    Args:
      model: a floating-base model (``base="floating"``), relative or absolute
        coordinates.
      q, qd, qdd: (..., dof) coordinates, velocities, accelerations (m, rad; any
        leading shape, e.g. trials x frames).
      loads: optional (segments, 3) or (..., segments, 3) world-frame wrenches at
        the centres of mass (N, N, N m), e.g. a sum of :func:`jaxmb.point_load`
        of each foot's ground reaction force at its centre of pressure.
      about: "com" (the moment about the whole-body centre of mass, as the
        issue and OpenSim's RRA report it) or "root" (about the root's proximal
        point: linear in the segment parameters, what the fit uses).
      gradient: as :func:`jaxmb.inverse_dynamics` ("adjoint": reverse mode only;
        "autodiff" for forward mode too).

    Returns:
      (..., 3): FX, FY in N and MZ in N m, counter-clockwise positive.

    Example:
      >>> r = residuals(model, q, qd, qdd, loads)        # doctest: +SKIP
      >>> r.shape                                         # doctest: +SKIP
      (83, 3)
    """
    _check_floating(model)
    if about not in ("com", "root"):
        raise ValueError(f"about must be 'com' or 'root', got {about!r}")
    tau = inverse_dynamics(model, q, qd, qdd, loads, gradient=gradient)
    force = tau[..., :2]
    moment = root_moment_row(model, tau)
    if about == "com":
        arm = jnp.asarray(q)[..., :2] - whole_body_com(model, q)
        moment = moment + arm[..., 0] * force[..., 1] - arm[..., 1] * force[..., 0]
    return jnp.concatenate([force, moment[..., None]], axis=-1)


@dataclasses.dataclass(frozen=True)
class ResidualSummary:
    """RMS and peak of residuals, absolute and relative to the body.

    Attributes:
      rms: (..., 3) RMS of FX, FY (N) and MZ (N m) over the frames used.
      peak: (..., 3) largest absolute value over the frames used.
      rms_percent: (..., 3) ``rms`` in % of body weight (FX, FY) and of body
        weight x height (MZ; NaN without a height).
      peak_percent: (..., 3) ``peak`` likewise.
      frames: (...) number of frames used.
    """

    rms: jnp.ndarray
    peak: jnp.ndarray
    rms_percent: jnp.ndarray
    peak_percent: jnp.ndarray
    frames: jnp.ndarray


def summarize(res, *, body_mass, height=None, gravity: float = 9.81, mask=None, axis=-2) -> ResidualSummary:
    """RMS and peak of residuals over frames, also in % of body weight (x height).

    ``rms_j = sqrt(sum_t w_t r_tj^2 / sum_t w_t)`` with ``w`` the mask (1 for a
    measured frame, 0 for one left out), ``peak_j = max_t w_t |r_tj|``. Pure JAX.

    Args:
      res: (..., T, 3) residuals from :func:`residuals` (N, N, N m).
      body_mass: kg (> 0), or (...) per leading index.
      height: body height, m, for MZ in % body weight x height (optional).
      gravity: m/s^2.
      mask: optional (..., T) bools or 0/1 weights: the frames to count.
      axis: the frames' axis of ``res`` (default -2).

    Returns:
      :class:`ResidualSummary`.

    Example:
      >>> s = summarize(r, body_mass=61.2, height=1.70)   # doctest: +SKIP
      >>> s.rms_percent                                   # doctest: +SKIP
    """
    res = jnp.moveaxis(jnp.asarray(res), axis, -2)
    w = jnp.ones(res.shape[:-1], res.dtype) if mask is None else jnp.asarray(mask, res.dtype)
    w = jnp.broadcast_to(w, res.shape[:-1])[..., None]
    n = w.sum(-2)
    rms = jnp.sqrt((w * res**2).sum(-2) / n)
    peak = jnp.max(jnp.where(w > 0, jnp.abs(res), 0.0), axis=-2)
    weight = jnp.asarray(body_mass, res.dtype)[..., None] * gravity
    lever = jnp.nan if height is None else jnp.asarray(height, res.dtype)[..., None]
    scale = jnp.concatenate([jnp.broadcast_to(weight, weight.shape[:-1] + (2,)), weight * lever], -1) / 100.0
    return ResidualSummary(rms, peak, rms / scale, peak / scale, n[..., 0])
