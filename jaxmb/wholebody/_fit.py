"""Segment parameters fitted to the force plates through the root residuals.

The residual wrench at the root (force, and moment about the root's proximal
point) is linear in the barycentric parameters pi (m, m c_along, m c_across,
J = I + m |c|^2 per segment): ``r = Y pi + y0``, where ``Y`` holds the root rows
of :func:`jaxmb.identify.regressor` and ``y0`` the measured loads' share. With
Gaussian priors, a fixed noise model and a Gaussian tie of the total mass, the
most probable parameters are one linear least-squares problem, solved exactly.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .. import identify
from ..kinematics import joint_positions, segment_angles
from ..model import Model
from ._residuals import _check_floating, root_moment_row

__all__ = ["root_regressor", "PlateFit", "fit_to_plates", "about_com", "barycentric_prior", "prior_around"]


def root_regressor(model: Model, q, qd, qdd, loads=None):
    """Root rows of the regressor: residual (FX, FY, M_P) = Y pi + y0, exactly.

    Args:
      model: a floating-base model (its lengths and topology; pi is free).
      q, qd, qdd: (..., dof) the movement.
      loads: optional (..., segments, 3) wrenches for ``model`` (see
        :func:`jaxmb.point_load`). A load's share of the root rows is the same at
        any centre of mass (a rigid-body motion of the whole body), so ``y0``
        keeps the forces where they were measured whatever pi becomes.

    Returns:
      (Y, y0): ``(..., 3, 4 n)`` and ``(..., 3)``; the third row is the moment
      about the root's proximal point (N m), the first two the force (N).
    """
    _check_floating(model)
    Y, y0 = identify.regressor(model, q, qd, qdd, loads, quantity="inverse_dynamics")
    Ym = root_moment_row(model, jnp.moveaxis(Y, -1, -2))
    Y = jnp.concatenate([Y[..., :2, :], Ym[..., None, :]], axis=-2)
    y0 = jnp.concatenate([y0[..., :2], root_moment_row(model, y0)[..., None]], axis=-1)
    return Y, y0


def about_com(model: Model, q, res_root, pi):
    """Residuals about the whole-body centre of mass of parameters pi, (..., 3).

    ``M_c = M_P + (P - c) x F`` with ``c = sum_i (m_i P_i + R_i h_i) / sum_i m_i``
    (``h_i = (m c_along, m c_across)_i``), linear in pi, so that parameters
    outside the physically consistent set are still reported.

    Args:
      model: the model (kinematics only).
      q: (..., dof) coordinates.
      res_root: (..., 3) residuals about the root's proximal point.
      pi: (4 n,) barycentric parameters.
    """
    pi = jnp.asarray(pi).reshape(-1, 4)
    P = joint_positions(model, q)
    th = segment_angles(model, q)
    c, s = jnp.cos(th), jnp.sin(th)
    hx = c * pi[:, 1] - s * pi[:, 2]
    hy = s * pi[:, 1] + c * pi[:, 2]
    first = jnp.stack([(pi[:, 0] * P[..., 0] + hx).sum(-1), (pi[:, 0] * P[..., 1] + hy).sum(-1)], -1)
    com = first / pi[:, 0].sum()
    arm = jnp.asarray(q)[..., :2] - com
    F = res_root[..., :2]
    return jnp.concatenate([F, (res_root[..., 2] + arm[..., 0] * F[..., 1] - arm[..., 1] * F[..., 0])[..., None]], -1)


def prior_around(model: Model, *, mass: float = 0.25, com: float = 0.02, inertia: float = 0.5) -> "identify.Prior":
    """Independent Gaussian priors centred on a model's parameters (e.g. the tables').

    Args:
      model: the model whose masses, centres of mass and inertias are the means.
      mass: sd of each mass as a fraction of it (default 25 %).
      com: sd of the centre of mass along and across the axis, m (default 2 cm).
      inertia: sd of each inertia as a fraction of it (default 50 %).

    Returns:
      :class:`jaxmb.identify.Prior` with (segments, 4) mean and sd.
    """
    mean = np.asarray(identify.to_physical(model), float)
    sd = np.abs(mean) * np.array([mass, 0.0, 0.0, inertia]) + np.array([0.0, com, com, 0.0])
    return identify.Prior(mean=mean, sd=sd)


def _barycentric(phys):
    """pi (4,) of one segment's physical (mass, com along, com across, inertia)."""
    m, cx, cy, inertia = phys
    return jnp.stack([m, m * cx, m * cy, inertia + m * (cx**2 + cy**2)])


def _prior_rows(mean, sd):
    """Mean pi (4 n,) and block-diagonal whitening (4 n, 4 n) of (n, 4) physical priors; pure JAX."""
    J = jax.vmap(jax.jacfwd(_barycentric))(mean)  # (n, 4, 4)
    cov = J @ (sd[:, :, None] ** 2 * jnp.swapaxes(J, -1, -2))
    L = jnp.linalg.inv(jnp.linalg.cholesky(cov))  # whitening, per segment
    n = mean.shape[0]
    blocks = jax.scipy.linalg.block_diag(*[L[i] for i in range(n)])
    return jax.vmap(_barycentric)(mean).reshape(-1), blocks


# compiled for the direct call (every fit_to_plates): op by op, 11 segments' first call
# took 3.0 s and each later one 22 ms; compiled 0.97 s, then 0.23 ms (ad hoc, this CPU)
_prior_rows_jit = precise_jit(_prior_rows)


def barycentric_prior(prior: "identify.Prior"):
    """A Gaussian prior on pi from independent physical priors, linearised at the mean.

    Args:
      prior: :class:`jaxmb.identify.Prior`, (segments, 4) mean and sd.

    Returns:
      (mean (4 n,), square-root precision (4 n, 4 n)): ``L (pi - mean)`` has
      identity covariance, block-diagonal per segment.
    """
    return _prior_rows_jit(jnp.asarray(prior.mean, float), jnp.asarray(prior.sd, float))


@dataclasses.dataclass(frozen=True)
class PlateFit:
    """Segment parameters fitted to the plates (:func:`fit_to_plates`).

    Attributes:
      parameters: (4 n,) fitted barycentric parameters (m, mx, my, J per segment).
      stderr: (4 n,) their posterior standard errors.
      covariance: (4 n, 4 n) posterior covariance.
      physical: (n, 4) mass kg, com along and across m, inertia about the com kg m^2.
      stderr_physical: (n, 4) their standard errors (first-order).
      base: :class:`jaxmb.identify.BaseParameters` of the stacked root regressor
        (the combinations that the plates identify; ``base.rank`` of them).
      combinations: (rank,) fitted values of those combinations.
      combinations_stderr: (rank,) their standard errors.
      consistent: True when every mass and inertia about the com is positive.
      status: words on consistency.
      total_mass: fitted total mass, kg.
      sigma: (3,) the noise (N, N, N m) the fit assumed for FX, FY, M_P.
      held: (n,) True for each mass held at its floor (see :func:`fit_to_plates`).
    """

    parameters: np.ndarray
    stderr: np.ndarray
    covariance: np.ndarray
    physical: np.ndarray
    stderr_physical: np.ndarray
    base: object
    combinations: np.ndarray
    combinations_stderr: np.ndarray
    consistent: bool
    status: str
    total_mass: float
    sigma: np.ndarray
    held: np.ndarray

    def model(self, model: Model) -> Model:
        """The fitted parameters in ``model`` (raises when not consistent)."""
        return identify.from_parameters(model, self.parameters)


def _stack_rows(Y, y0, w, sigma):
    """Data rows of the least squares: w (Y pi + y0) / sigma, flattened."""
    sigma = jnp.asarray(sigma, Y.dtype)
    w = jnp.asarray(w, Y.dtype)[..., None]
    A = (w[..., None] * Y / sigma[:, None]).reshape(-1, Y.shape[-1])
    b = -(w * y0 / sigma).reshape(-1)
    return A, b


_BLOCK = 128  # rows per block of the QR: XLA's CPU QR of one matrix of 256 rows or more is far slower


def _triangular(A, b):
    """(p + 1, p + 1) R of [A b] by QRs of blocks of rows, repeated on the stacked factors (TSQR).

    Same least squares as (A, b): ``A x - b`` and ``R[:, :-1] x - R[:, -1]`` have
    equal norms up to a constant, for every x, also with columns of A zeroed.
    """
    M = jnp.concatenate([A, b[:, None]], 1)
    p1 = M.shape[1]
    block = max(_BLOCK, 2 * p1)
    while M.shape[0] > block:
        k = -(-M.shape[0] // block)
        M = jnp.zeros((k * block, p1), M.dtype).at[: M.shape[0]].set(M).reshape(k, block, p1)
        M = jnp.linalg.qr(M, mode="r").reshape(-1, p1)
    if M.shape[0] < p1:
        M = jnp.concatenate([M, jnp.zeros((p1 - M.shape[0], p1), M.dtype)])
    return jnp.linalg.qr(M, mode="r")


def _solve(A, b):
    """Least squares by SVD (A small): solution and (A^T A)^-1."""
    U, s, Vt = jnp.linalg.svd(A, full_matrices=False)
    x = Vt.T @ ((U.T @ b) / s)
    cov = (Vt.T / s**2) @ Vt
    return x, cov


def _bounded_solve(A, b, floor):
    """Least squares with every mass >= its floor: hold the ones below it there, refit the rest.

    Active set grown until no free mass falls below its floor (at most n + 1
    solves, a ``lax.while_loop``, so that it batches): a held mass's column leaves
    the data and one unit row pins it (``pi_k = floor_k``, its variance then set
    to 0; the others' covariance is conditional on it).

    Args:
      A: (rows, 4 n) whitened rows; b: (rows,) right-hand side.
      floor: (n,) lower bounds of the masses, kg.

    Returns:
      (pi (4 n,), cov (4 n, 4 n), held (n,) bools).
    """
    n = floor.shape[0]
    R = _triangular(A, b)  # the rows reduced once; a held mass zeroes a column of R as of A
    A, b = R[:, :-1], R[:, -1]
    mass_cols = jnp.zeros((n, 4 * n), A.dtype).at[jnp.arange(n), 4 * jnp.arange(n)].set(1.0)

    def solve(held):
        pin = mass_cols * held[:, None]  # (n, 4 n) unit rows of the held masses
        keep = 1.0 - pin.sum(0)
        fixed = pin.T @ (held * floor)
        x, cov = _solve(jnp.concatenate([A * keep, pin]), jnp.concatenate([b - A @ fixed, held * floor]))
        return x, cov * keep[:, None] * keep[None, :]

    def step(state):
        held, _, _, _ = state
        x, cov = solve(held)
        new = held | (x[0::4] < floor)
        return new, x, cov, jnp.any(new != held)

    held0 = jnp.zeros(n, bool)
    x0, cov0 = solve(held0)
    state = (held0 | (x0[0::4] < floor), x0, cov0, jnp.any(x0[0::4] < floor))
    held, x, cov, _ = jax.lax.while_loop(lambda st: st[3], step, state)
    return x, cov, held


def _posterior(Y, y0, w, sigma, mean, L, body_mass, mass_sd, floor, tie: bool):
    """MAP pi, its covariance, held masses, physical parameters and their standard errors; pure JAX."""
    A, b = _stack_rows(Y, y0, w, sigma)
    rows, rhs = [A, L], [b, L @ mean]
    if tie:
        e = jnp.zeros(mean.shape[0], A.dtype).at[0::4].set(1.0 / mass_sd)
        rows.append(e[None])
        rhs.append(jnp.reshape(body_mass / mass_sd, (1,)).astype(A.dtype))
    pi, cov, held = _bounded_solve(jnp.concatenate(rows), jnp.concatenate(rhs), floor)
    Jp = jax.jacfwd(lambda p: _physical_of(p).reshape(-1))(pi)
    se_phys = jnp.sqrt(jnp.maximum(jnp.diag(Jp @ cov @ Jp.T), 0.0)).reshape(-1, 4)
    return pi, cov, held, _physical_of(pi), se_phys


_posterior_jit = precise_jit(_posterior, static_argnames=("tie",))


def _physical_of(pi):
    """(n, 4) physical parameters of pi (4 n,)."""
    p = pi.reshape(-1, 4)
    m = p[:, 0]
    cx, cy = p[:, 1] / m, p[:, 2] / m
    return jnp.stack([m, cx, cy, p[:, 3] - m * (cx**2 + cy**2)], -1)


def _combinations(base, pi, cov):
    """Values and standard errors of the identifiable combinations K pi."""
    K = np.zeros((base.rank, pi.shape[0]))
    K[np.arange(base.rank), list(base.independent)] = 1.0
    if len(base.dependent):
        K[:, list(base.dependent)] = base.beta
    return K @ pi, np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", K, cov, K), 0.0))


_QUANTITIES = ("mass", "com", "inertia")


def _restrict(prior, free):
    """The prior with the sd of every quantity not in ``free`` shrunk to 1e-4 of it: held."""
    unknown = set(free) - set(_QUANTITIES)
    if unknown:
        raise ValueError(f"free: unknown quantities {sorted(unknown)}; choose from {_QUANTITIES}")
    keep = np.array(["mass" in free, "com" in free, "com" in free, "inertia" in free])
    sd = np.where(keep, np.asarray(prior.sd), np.asarray(prior.sd) * 1e-4)
    return identify.Prior(mean=np.asarray(prior.mean), sd=sd)




def _floor_of(prior, mass_floor):
    """(..., n) lower bounds of the masses: ``mass_floor`` times the prior's mean mass."""
    if not 0.0 < mass_floor < 1.0:
        raise ValueError(f"mass_floor must be in (0, 1) (a fraction of each prior mean mass), got {mass_floor!r}")
    return mass_floor * np.asarray(prior.mean, float)[..., 0]


def fit_to_plates(model: Model, q, qd, qdd, loads, *, prior, sigma, weights=None, body_mass=None,
                  mass_sd: float = 0.5, free=_QUANTITIES, mass_floor: float = 0.1, rtol: float | None = None,
                  regressor=None) -> PlateFit:
    """Fit every segment's mass, centre of mass and inertia to zero root residuals.

    Minimises, over the barycentric parameters pi,

        sum_t w_t^2 |(Y_t pi + y0_t) / sigma|^2 + |L (pi - pi_prior)|^2
          + ((sum_i m_i - body_mass) / mass_sd)^2,

    subject to ``m_i >= mass_floor * mean_i`` (the prior's mean mass), a linear
    least-squares problem solved exactly (SVD), so the answer is the posterior
    mean and ``(A^T A)^-1`` its covariance. ``Y, y0`` are the root rows
    (:func:`root_regressor`) over every frame of every trial (leading shapes);
    ``L`` whitens the physical priors linearised at their mean
    (:func:`barycentric_prior`).

    Positive masses, enforced: when the unconstrained solution puts a mass below
    its floor, that mass is held at the floor and the others refitted, repeated
    until no free mass is below its floor (an active set that only grows: at most
    n + 1 solves). ``held`` names them; a held mass has standard error 0 and the
    others' covariance is conditional on it. Inertias about the centre of mass are
    checked, not bounded (``consistent``, ``status``).

    Noise model: ``sigma`` is fixed by the caller (for lab data, from the force's
    content above the cut-off, floored at 1 % of body weight:
    :attr:`WholeBodyTrial.noise`), never re-estimated from the fit's own
    residuals, so the data cannot make themselves look precise and drive a mass
    to zero; the prior keeps the directions the plates cannot see (``base``).

    Args:
      model: floating-base model (topology, lengths, gravity).
      q, qd, qdd: (..., dof) the movement, e.g. (trials, T, dof).
      loads: (..., segments, 3) measured external wrenches for ``model``.
      prior: :class:`jaxmb.identify.Prior`, (segments, 4) mean and sd.
      sigma: (3,) noise of FX, FY (N) and M about the root (N m), or a scalar.
      weights: optional (...) 0/1 weights of the frames (0: unmeasured or held
        out).
      body_mass: optional total mass, kg, tied with sd ``mass_sd`` (e.g. the
        plates' body weight / g).
      mass_sd: kg.
      free: the quantities fitted, from ("mass", "com", "inertia"); the others
        are held at the prior's mean (their prior sd shrunk to 1e-4 of it).
      mass_floor: the lowest mass allowed, as a fraction of the prior's mean mass
        (in (0, 1); default 0.1).
      rtol: rank threshold of :func:`jaxmb.identify.base_parameters`.
      regressor: optional ``(Y, y0)`` from :func:`root_regressor` for these
        arguments, to refit (other weights, priors, noise) without recomputing it.

    Returns:
      :class:`PlateFit`.

    Raises:
      ValueError: no frame with a positive weight (nothing measured to fit to),
        an unknown quantity in ``free``, a ``mass_floor`` outside (0, 1).

    Example:
      >>> fit = fit_to_plates(model, q, qd, qdd, loads, prior=p, sigma=(10., 10., 3.),
      ...                     body_mass=61.2)                # doctest: +SKIP
    """
    prior = _restrict(prior, free)
    floor = _floor_of(prior, mass_floor)
    Y, y0 = root_regressor(model, q, qd, qdd, loads) if regressor is None else map(jnp.asarray, regressor)
    w = jnp.ones(Y.shape[:-2], Y.dtype) if weights is None else jnp.broadcast_to(jnp.asarray(weights, Y.dtype), Y.shape[:-2])
    keep = np.asarray(w).reshape(-1) > 0
    if not keep.any():
        raise ValueError("no measured frame to fit to: every weight is 0; give weights > 0 for the frames in which "
                         "every foot on the floor stands on a plate (WholeBodyTrial.measured)")
    sigma = jnp.broadcast_to(jnp.asarray(sigma, Y.dtype), (3,))
    mean, L = barycentric_prior(prior)
    tie = body_mass is not None
    pi, cov, held, phys, se_phys = _posterior_jit(Y, y0, w, sigma, mean, L, jnp.asarray(body_mass if tie else 0.0, Y.dtype),
                                                  mass_sd, jnp.asarray(floor, Y.dtype), tie=tie)
    base = identify.base_parameters(model, np.asarray(Y).reshape(-1, 3, Y.shape[-1])[keep], rtol=rtol)
    pi, cov = np.asarray(pi), np.asarray(cov)
    values, values_se = _combinations(base, pi, cov)
    check = identify.consistency(model, pi)
    return PlateFit(pi, np.sqrt(np.diag(cov)), cov, np.asarray(phys), np.asarray(se_phys), base, values, values_se,
                    bool(check.ok), "; ".join(check.problems) or "consistent", float(pi[0::4].sum()), np.asarray(sigma),
                    np.asarray(held))
