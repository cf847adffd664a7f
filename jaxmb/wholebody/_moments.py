"""Joint moments of a whole-body model bottom-up and top-down, and Monte Carlo bands of the fit.

Bottom-up, each joint's moment comes from the segments distal to it (the feet
carry the plates' forces): :func:`jaxmb.joint_moments`. Top-down, the hips'
moment comes from the segments above them (trunk, head, arms) alone. With a
perfect model and motion both agree; their difference at the hips is the root's
residual moment.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from ..dynamics import joint_moments
from ..kinematics import com_positions, joint_positions, pose, pose_acceleration
from ..model import Model
from ._fit import PlateFit, about_com, root_regressor

__all__ = ["WholeBodyMoments", "whole_body_moments", "residual_bands"]


@dataclasses.dataclass(frozen=True)
class WholeBodyMoments:
    """Joint moments of a whole-body model (:func:`whole_body_moments`).

    Attributes:
      joint: (..., n) every joint's moment bottom-up, N m (:func:`jaxmb.joint_moments`;
        the root's entry is the residual moment about the root's proximal point).
      hips: (..., 2) the two hips' moments bottom-up (from each leg), N m.
      hips_top_down: (...) the sum of the hip moments top-down (from the segments
        above the hips alone), N m.
    """

    joint: jnp.ndarray
    hips: jnp.ndarray
    hips_top_down: jnp.ndarray


def _subtree(parent, i: int) -> set:
    """Indices of segment i and every segment below it."""
    out = {i}
    for j, p in enumerate(parent):
        if p in out:
            out.add(j)
    return out


def _hip_indices(model: Model, hips) -> tuple:
    """The two hip segments' indices; they must hang from one point of one parent."""
    idx = tuple(model.index(h) for h in hips)
    if len(idx) != 2:
        raise ValueError(f"hips must name two segments (right and left thigh), got {hips!r}")
    a, b = idx
    same_point = (model.parent[a] == model.parent[b] and model.attach_end[a] == model.attach_end[b]
                  and (model.attach_end[a] or float(model.attach[a]) == float(model.attach[b])))  # fmt: skip
    if not same_point:
        raise ValueError(f"hips {hips}: both thighs must hang from one point of one parent (the top-down hip "
                         "moment is their sum about that point), as whole_body_trial builds them")
    return idx


def _moved_loads(model: Model, loads_for: Model, q, loads):
    """Wrenches at ``loads_for``'s centres of mass moved to ``model``'s: M += (c_old - c_new) x F."""
    d = com_positions(loads_for, q) - com_positions(model, q)
    L = jnp.asarray(loads)
    return L.at[..., 2].add(d[..., 0] * L[..., 1] - d[..., 1] * L[..., 0])


def whole_body_moments(model: Model, q, qd, qdd, loads=None, *, hips=("thigh_r", "thigh_l"),
                       loads_for: Model | None = None) -> WholeBodyMoments:
    """Both legs' joint moments bottom-up, and the hips' moment top-down beside them.

    Top-down, Newton-Euler of the segments U above the hips about the hip point h:

        tau_hips = -sum_{i in U} [(p_i - h) x m_i (a_i + g e_y) + I_i alpha_i
                                  - (p_i - h) x F_i - M_i],

    with ``(F_i, M_i)`` the loads on U. Bottom-up, each hip's moment comes from
    its leg (the plates' forces on the foot). ``hips.sum(-1) - hips_top_down``
    equals the root's residual moment about h when the root's proximal point is
    h (as :func:`whole_body_trial` builds the model): zero for a consistent
    model, motion and forces.

    Before and after a fit: call it with the table model and with
    ``fit.model(model)`` (a :class:`PlateFit`), giving ``loads_for=model``: the
    loads are wrenches at the centres of mass of the model they were built for,
    and the fit moves the centres of mass (the forces stay where they were
    measured).

    Args:
      model: floating-base model whose two hips (``hips``) hang from one point.
      q, qd, qdd: (..., dof) the movement.
      loads: optional (..., segments, 3) world wrenches at the centres of mass.
      hips: names (or indices) of the right and left thighs.
      loads_for: the model whose centres of mass ``loads`` act at, when not
        ``model`` (e.g. the table model, for the fitted one).

    Returns:
      :class:`WholeBodyMoments`.

    Example:
      >>> before = whole_body_moments(model, q, qd, qdd, loads)            # doctest: +SKIP
      >>> after = whole_body_moments(fit.model(model), q, qd, qdd, loads,
      ...                            loads_for=model)                     # doctest: +SKIP
      >>> after.hips.sum(-1) - after.hips_top_down                         # doctest: +SKIP
    """
    idx = _hip_indices(model, hips)
    if loads is not None and loads_for is not None:
        loads = _moved_loads(model, loads_for, q, loads)
    tau = joint_moments(model, q, qd, qdd, loads)
    below = _subtree(model.parent, idx[0]) | _subtree(model.parent, idx[1])
    upper = np.array([i not in below for i in range(model.segments)])
    h = joint_positions(model, q)[..., idx[0], :]
    p = pose(model, q)
    a = pose_acceleration(model, q, qd, qdd)
    r = p[..., :2] - h[..., None, :]
    f = model.mass[:, None] * (a[..., :2] + jnp.array([0.0, model.gravity]))
    need = r[..., 0] * f[..., 1] - r[..., 1] * f[..., 0] + model.inertia * a[..., 2]
    if loads is not None:
        L = jnp.asarray(loads)
        need = need - (r[..., 0] * L[..., 1] - r[..., 1] * L[..., 0] + L[..., 2])
    top_down = -jnp.sum(jnp.where(upper, need, 0.0), -1)
    return WholeBodyMoments(tau, tau[..., list(idx)], top_down)


def residual_bands(model: Model, fit: PlateFit, q, qd, qdd, loads=None, *, draws: int = 1000, seed: int = 0,
                   levels=(0.025, 0.5, 0.975), about: str = "com", regressor=None):
    """Monte Carlo bands of the residuals from the fitted parameters' uncertainty.

    Draws ``pi_d ~ N(fit.parameters, fit.covariance)`` (the posterior of
    :func:`fit_to_plates`; a held mass stays at its floor) and evaluates every
    draw's residuals at every frame in one matrix product, exact because the
    root residual is linear in pi: ``r_d = Y pi_d + y0`` (about the root), then
    about the whole-body centre of mass of ``pi_d`` (:func:`about_com`).

    Args:
      model: the model the fit was made with (topology, lengths).
      fit: :class:`PlateFit`.
      q, qd, qdd: (..., dof) the movement.
      loads: (..., segments, 3) measured wrenches.
      draws: number of parameter draws (>= 2).
      seed: of NumPy's generator.
      levels: quantile levels in [0, 1].
      about: "com" or "root" (the moment's point).
      regressor: optional ``(Y, y0)`` of :func:`root_regressor` for these arguments.

    Returns:
      (len(levels), ..., 3) quantiles of FX, FY (N) and MZ (N m) per frame.

    Example:
      >>> lo, mid, hi = residual_bands(model, fit, q, qd, qdd, loads)   # doctest: +SKIP
    """
    if about not in ("com", "root"):
        raise ValueError(f"about must be 'com' or 'root', got {about!r}")
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise ValueError(f"draws must be an int >= 2, got {draws!r}")
    Y, y0 = root_regressor(model, q, qd, qdd, loads) if regressor is None else map(jnp.asarray, regressor)
    lam, V = np.linalg.eigh(np.asarray(fit.covariance))
    root = V * np.sqrt(np.maximum(lam, 0.0))
    z = np.random.default_rng(seed).standard_normal((int(draws), root.shape[0]))
    pis = jnp.asarray(np.asarray(fit.parameters) + z @ root.T, Y.dtype)

    def one(pi):
        r = Y @ pi + y0
        return r if about == "root" else about_com(model, q, r, pi)

    res = jax.vmap(one)(pis)  # the kinematics, unbatched, are computed once
    return jnp.quantile(res, jnp.asarray(levels, res.dtype), axis=0)
