"""Many subjects fitted to the plates in one compiled call, each with its own model.

The models share one topology (segments, parents, coordinates); their lengths,
gravity and priors differ. Their parameter leaves are stacked along a leading
subject axis and :func:`jax.vmap` runs, per subject, the root regressor and the
exact bounded least squares of :func:`jaxmb.wholebody.fit_to_plates`.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .. import identify
from ..model import Model
from ._fit import _QUANTITIES, _floor_of, _posterior, _prior_rows, _restrict, root_regressor

__all__ = ["SubjectFits", "fit_subjects", "stack_models"]


@dataclasses.dataclass(frozen=True)
class SubjectFits:
    """Segment parameters of many subjects fitted to their plates (:func:`fit_subjects`).

    Attributes:
      parameters: (S, 4 n) fitted barycentric parameters (m, mx, my, J per segment).
      stderr: (S, 4 n) posterior standard errors.
      covariance: (S, 4 n, 4 n) posterior covariances.
      physical: (S, n, 4) mass kg, com along and across m, inertia about the com kg m^2.
      stderr_physical: (S, n, 4) their standard errors (first-order).
      held: (S, n) True for each mass held at its floor.
      consistent: (S,) True where every mass and inertia about the com is positive.
      total_mass: (S,) fitted total masses, kg.
    """

    parameters: np.ndarray
    stderr: np.ndarray
    covariance: np.ndarray
    physical: np.ndarray
    stderr_physical: np.ndarray
    held: np.ndarray
    consistent: np.ndarray
    total_mass: np.ndarray


def stack_models(models) -> Model:
    """One model whose parameter leaves carry a leading subject axis (S, ...).

    Args:
      models: a sequence of models of one topology (same segments, parents,
        names, base, coordinates, attachments).

    Returns:
      A :class:`jaxmb.Model` pytree with stacked leaves, for :func:`jax.vmap`.

    Raises:
      ValueError: no model, or models of different topologies.
    """
    models = list(models)
    if not models:
        raise ValueError("fit_subjects needs at least one model")
    first = jax.tree_util.tree_structure(models[0])
    for k, m in enumerate(models[1:], 1):
        if jax.tree_util.tree_structure(m) != first:
            raise ValueError(f"model {k} has another topology than model 0 (segments, parents, names, base, "
                             "coordinates): fit subjects of different models in separate calls")
    return jax.tree_util.tree_map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *models)


@functools.partial(precise_jit, static_argnames=("tie",))
def _fit_all(models, q, qd, qdd, loads, w, sigma, prior_mean, prior_sd, body_mass, mass_sd, floor, tie):
    """Per subject: root regressor, whitened prior, bounded exact least squares; vmapped."""

    def one(model, q, qd, qdd, loads, w, sigma, pm, ps, bm, fl):
        Y, y0 = root_regressor(model, q, qd, qdd, loads)
        mean, L = _prior_rows(pm, ps)
        return _posterior(Y, y0, w, sigma, mean, L, bm, mass_sd, fl, tie)

    return jax.vmap(one)(models, q, qd, qdd, loads, w, sigma, prior_mean, prior_sd, body_mass, floor)


def _per_subject(x, S: int, tail: tuple, name: str, dtype):
    """``x`` broadcast to (S,) + tail, with a message naming the argument."""
    a = jnp.asarray(x, dtype)
    try:
        return jnp.broadcast_to(a, (S,) + tail)
    except ValueError:
        raise ValueError(f"{name}: shape {a.shape} does not broadcast to {(S,) + tail} (subjects first)") from None


def fit_subjects(models, q, qd, qdd, loads, *, priors, sigma, weights=None, body_mass=None, mass_sd: float = 0.5,
                 free=_QUANTITIES, mass_floor: float = 0.1) -> SubjectFits:
    """:func:`fit_to_plates` for many subjects, each its own model, in one compiled call.

    For every subject s, the same MAP problem as :func:`fit_to_plates`,

        min_pi  sum_t w_st^2 |(Y_st pi + y0_st) / sigma_s|^2 + |L_s (pi - pi_s)|^2
                + ((sum_i m_i - M_s) / mass_sd)^2,   m_i >= mass_floor * mean_si,

    with masses below their floor held there (the same rule). Ragged subjects
    (different numbers of trials or frames) are padded to one shape with weight 0.
    The identifiable combinations are not computed here (they need the rank of
    each subject's regressor): call :func:`fit_to_plates` on one subject for them.

    Args:
      models: S models of one topology (a list, or one from :func:`stack_models`).
      q, qd, qdd: (S, ..., dof) the movements, e.g. (S, trials, T, dof).
      loads: (S, ..., segments, 3) measured external wrenches for each model.
      priors: S :class:`jaxmb.identify.Prior` (or one with (S, n, 4) mean and sd).
      sigma: (3,) or (S, 3) noise of FX, FY (N) and M about the root (N m).
      weights: optional (S, ...) 0/1 frame weights (0: unmeasured, held out, padding).
      body_mass: optional (S,) or scalar total masses, kg, tied with sd ``mass_sd``.
      mass_sd: kg.
      free: fitted quantities, as :func:`fit_to_plates`.
      mass_floor: the lowest mass, a fraction of the prior's mean mass.

    Returns:
      :class:`SubjectFits`.

    Raises:
      ValueError: models of different topologies, shapes that do not broadcast
        over the subjects, a subject without any weighted frame.

    Example:
      >>> fits = fit_subjects([m1, m2], q, qd, qdd, loads, priors=[p1, p2],
      ...                     sigma=(12.0, 12.0, 4.0), body_mass=[61.2, 74.0])  # doctest: +SKIP
      >>> fits.physical[:, :, 0]            # (2, n) masses, kg    # doctest: +SKIP
    """
    stacked = models if isinstance(models, Model) else stack_models(models)
    S = int(jnp.shape(stacked.mass)[0])
    if isinstance(priors, identify.Prior):
        priors = _restrict(priors, free)
        pm, ps = np.asarray(priors.mean, float), np.asarray(priors.sd, float)
    else:
        priors = [_restrict(p, free) for p in priors]
        pm, ps = (np.stack([np.asarray(getattr(p, k), float) for p in priors]) for k in ("mean", "sd"))
    q = jnp.asarray(q)
    dt = q.dtype if jnp.issubdtype(q.dtype, jnp.floating) else jnp.float64
    n = pm.shape[-2]
    lead = q.shape[1:-1]
    w = _per_subject(1.0 if weights is None else weights, S, lead, "weights", dt)
    empty = np.where(~(np.asarray(w).reshape(S, -1) > 0).any(1))[0]
    if empty.size:
        raise ValueError(f"subjects {empty.tolist()} have no frame with a positive weight: nothing measured to fit "
                         "to (give weights > 0 for their measured frames, or leave them out)")
    floor = _per_subject(_floor_of(identify.Prior(pm, ps), mass_floor), S, (n,), "priors", dt)
    tie = body_mass is not None
    out = _fit_all(stacked, q, jnp.asarray(qd, dt), jnp.asarray(qdd, dt), jnp.asarray(loads, dt), w,
                   _per_subject(sigma, S, (3,), "sigma", dt), _per_subject(pm, S, (n, 4), "priors", dt),
                   _per_subject(ps, S, (n, 4), "priors", dt), _per_subject(body_mass if tie else 0.0, S, (), "body_mass", dt),
                   mass_sd, floor, tie)
    pi, cov, held, phys, se = (np.asarray(x) for x in out)
    stderr = np.sqrt(np.maximum(np.diagonal(cov, axis1=-2, axis2=-1), 0.0))
    consistent = (phys[..., 0] > 0).all(-1) & (phys[..., 3] > 0).all(-1)
    return SubjectFits(pi, stderr, cov, phys, se, held, consistent, pi[:, 0::4].sum(-1))
