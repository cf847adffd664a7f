"""Uncertainty: the covariance of the fit, and Monte Carlo bands of the joint loads."""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from ..model import Model
from ._parameters import _dpi_dz, _floor, _physical_from_z, _pi_from_physical, _z_from_physical
from ._prior import _check_prior
from ._regressor import _check_quantity, regressor
from ._result import FitResult
from ._solver import _data_jacobian, _data_residuals


class _Errors(NamedTuple):
    """The standard errors of a consistent fit (see :func:`_standard_errors`)."""

    physical: np.ndarray  # (n, 4) the fitted physical parameters
    stderr: np.ndarray  # (4 n,) of the barycentric parameters
    stderr_physical: np.ndarray  # (n, 4)
    covariance: np.ndarray  # (4 n, 4 n) of the barycentric parameters
    noise: dict  # each kind's noise level, in its units
    z: np.ndarray  # (free,) the fitted log coordinates
    cov_z: np.ndarray  # (free, free) their covariance


def _standard_errors(problem, state) -> _Errors:
    """Standard errors from the Gauss-Newton Hessian at the fit (``problem`` and
    ``state`` of :func:`jaxmb.identify._fit._consistent_fit`), through the delta
    method from the log coordinates to the physical and barycentric parameters."""
    Jw, noise = _whitened_jacobian(problem, state)
    z = np.asarray(state.z, dtype=float)
    free_idx, floor, n = list(problem.free_idx), problem.floor, problem.model.segments
    # a mass or an inertia pinned at its floor: d p / d z = p - floor has vanished
    # (below 1e-6 of its starting size), so its log coordinate no longer changes the
    # data; its data column is zeroed (undetermined, unless a prior holds it) rather
    # than rescaled by _covariance_z's column scaling
    ref = np.abs(problem.phys0.reshape(-1)[free_idx])
    logs = np.isin(np.asarray(free_idx) % 4, (0, 3))
    Jw[:, logs & (np.exp(z) <= 1e-6 * np.maximum(ref, np.finfo(float).tiny))] = 0.0
    cov_z, undetermined = _covariance_z(Jw, np.asarray(state.Jp, dtype=float))
    zfull = problem.z0.reshape(-1).copy()
    zfull[free_idx] = z
    phys = _physical_from_z(zfull.reshape(n, 4), floor)
    # delta method: d phys / d z = diag(m - floor, 1, 1, I - floor), d pi / d z by hand;
    # an undetermined z has an infinite variance whatever its derivative (0 * inf where
    # a mass or an inertia sits at its floor)
    dphys = np.ones((n, 4))
    dphys[:, 0], dphys[:, 3] = phys[:, 0] - floor[:, 0], phys[:, 3] - floor[:, 3]
    dphys = dphys.reshape(-1)[free_idx]
    var_phys = np.zeros(4 * n)
    var_phys[free_idx] = np.where(undetermined, np.inf, dphys**2 * np.where(undetermined, 0.0, np.diag(cov_z)))
    Jpi = _dpi_dz(phys, floor)[:, free_idx]
    # only the barycentric parameters that depend on an undetermined z are undetermined:
    # by the structure of pi(z), not by the value of the derivative (which vanishes to
    # rounding for a mass or an inertia at its floor, or for J against c = 0)
    det = ~undetermined
    cov_pi = Jpi[:, det] @ cov_z[np.ix_(det, det)] @ Jpi[:, det].T
    depends = _dpi_dz(np.ones((n, 4)), np.zeros((n, 4)))[:, free_idx] != 0
    touched = depends[:, undetermined].any(1)
    cov_pi[touched, :] = np.inf
    cov_pi[:, touched] = np.inf
    return _Errors(phys, np.sqrt(np.maximum(np.diag(cov_pi), 0.0)), np.sqrt(np.maximum(var_phys, 0.0)).reshape(n, 4),
                   cov_pi, noise, z, cov_z)  # fmt: skip


def _whitened_jacobian(problem, state) -> tuple:
    """(Jw, noise): the data Jacobian with each kind's rows whitened by its residual
    variance (1 where sigma is given: the rows are already scaled by it), and each
    kind's noise level in its units. Huber: the M-estimator's variance (Huber 1981,
    7.6), sum psi(u)^2 / (N - p) / mean(psi'(u))^2 per kind, of the residuals u and
    the Jacobian before the Huber transform (psi(u) = clip(u, -delta, delta)); where
    sigma is given, its expectation for normal noise, as the squares take 1."""
    cfg, p_free = state.cfg, len(problem.free_idx)
    Jd, rd = np.asarray(state.Jd, dtype=float), np.asarray(state.rd, dtype=float)
    if cfg.huber:
        plain = cfg._replace(huber=False)
        Jd = np.asarray(_data_jacobian(state.z, state.jdata, plain), dtype=float)
        rd = np.asarray(_data_residuals(state.z, state.jdata, plain), dtype=float)
    Jw, off, noise = [], 0, {}
    for i, k in enumerate(problem.kinds):
        J_k, r_k = Jd[off:off + k.count], rd[off:off + k.count]
        off += k.count
        given = k.name in problem.sigma
        if cfg.huber:
            d = float(state.jdata["delta"][i])
            if given:
                a = math.erf(d / math.sqrt(2.0))
                b = a - 2.0 * d * math.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi) + d * d * (1.0 - a)
            else:
                a = float(np.mean(np.abs(r_k) <= d))
                b = float(np.sum(np.minimum(r_k * r_k, d * d))) / max(k.count - p_free, 1)
            s2 = b / max(a, 1.0 / k.count) ** 2
        else:
            s2 = 1.0 if given else float(r_k @ r_k) / max(k.count - p_free, 1)
        Jw.append(J_k / math.sqrt(max(s2, np.finfo(float).tiny)))
        # in the data's units: the rows were divided by the scale of the last solve
        noise[k.name] = float(problem.sigma[k.name]) if given else math.sqrt(s2) * state.used[k.name]
    return np.concatenate(Jw), noise


def _covariance_z(Jw: np.ndarray, Jp: np.ndarray) -> tuple:
    """Covariance of the fit's free z from the whitened data Jacobian ``Jw`` (rows
    J_k / s_k, the data's noise taken out) and the prior's Jacobian ``Jp`` (rows of
    (p - mean) / sd; no rows without a prior): the inverse of the Gauss-Newton
    Hessian Jw^T Jw + Jp^T Jp, with inf in the rows and columns of the z indices
    left undetermined. Returns (cov (P, P), undetermined (P,) bool).

    Not formed as a sum: near-exact data make the data's part of the Hessian 1e20 or
    more times the prior's, which a relative eigenvalue cut, or rounding in the sum
    itself, would lose. Instead, in the basis of the data's right singular vectors
    V (Jw = U diag(s) V^T), the Hessian is diag(s^2) + V^T Jp^T Jp V, with data
    singular values at or below 1e-6 of the largest set to 0 (rounding, not
    information: the rank cut of the data alone), the columns of both Jacobians
    scaled to unit norm (of Jw; of Jp where Jw's is 0) first and the covariance
    unscaled after. It is equilibrated by the square
    root of its diagonal (a zero diagonal is a direction nothing determines),
    inverted (:func:`_inverse_psd`), unscaled and turned back to z. A z index is
    undetermined where it has weight (> 1e-6) on an undetermined direction. Without
    a prior this is Jw's pseudo-inverse squared, as the eigen-decomposition of
    Jw^T Jw gave, but from the singular values (more accurate)."""
    P = Jw.shape[1]
    if P == 0:
        return np.zeros((0, 0)), np.zeros(0, bool)
    if not (np.isfinite(Jw).all() and np.isfinite(Jp).all()):
        return np.full((P, P), np.inf), np.ones(P, bool)
    if Jw.shape[0] < P:
        Jw = np.concatenate([Jw, np.zeros((P - Jw.shape[0], P))])
    # columns scaled to unit norm first (the covariance unscaled at the end), so that
    # the rank cut sees directions the data do not determine, not units or one data
    # kind far more precise than another (reactions to 1e-4 N cut the inertias, which
    # only the moments see, 1e-6 below the masses' singular values)
    c = _column_norms(Jw)
    cp = _column_norms(Jp) if Jp.shape[0] else np.zeros(P)
    c = np.where(c > 0, c, np.where(cp > 0, cp, 1.0))
    Jw, Jp = Jw / c, Jp / c
    _, s, Vt = np.linalg.svd(Jw, full_matrices=False)
    V = Vt.T
    s = np.where(s > 1e-6 * s.max(), s, 0.0) if s.max() > 0 else np.zeros_like(s)
    B = Jp @ V
    Pb = B.T @ B  # the prior's Hessian in the basis V
    # d = sqrt(diag(diag(s^2) + Pb)) without forming s^2 (it may overflow), and the
    # equilibrated Hessian E = D^-1 H D^-1
    d = np.hypot(s, np.sqrt(np.maximum(np.diag(Pb), 0.0)))
    seen = d > 0
    ds = d[seen]
    E = (Pb[np.ix_(seen, seen)] / ds[:, None]) / ds[None, :] + np.diag((s[seen] / ds) ** 2)
    Einv = _inverse_psd(E)
    ok = np.isfinite(np.diag(Einv))
    keep = np.flatnonzero(seen)[ok]
    cov_b = (Einv[np.ix_(ok, ok)] / ds[ok][:, None]) / ds[ok][None, :]
    cov = (V[:, keep] @ cov_b @ V[:, keep].T) / c[:, None] / c[None, :]
    lost = np.setdiff1d(np.arange(P), keep)
    undetermined = np.abs(V[:, lost]).max(1) > 1e-6 if lost.size else np.zeros(P, bool)
    cov[undetermined, :] = np.inf
    cov[:, undetermined] = np.inf
    return cov, undetermined


def _column_norms(A: np.ndarray) -> np.ndarray:
    """Euclidean norms of the columns without overflow (rows whitened by a residual
    variance at rounding level reach 1e150 and more: their squares would overflow)."""
    m = np.max(np.abs(A), axis=0)
    safe = np.where(m > 0, m, 1.0)
    return m * np.linalg.norm(A / safe, axis=0)


def _inverse_psd(H: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive semi-definite matrix; inf along (near-)null
    directions instead of huge or NaN numbers."""
    w, V = np.linalg.eigh(H)
    tol = max(w.max(), 0.0) * 1e-12 if w.size else 0.0
    good = w > tol
    inv = (V[:, good] / w[good]) @ V[:, good].T
    if not good.all():
        touched = np.abs(V[:, ~good]).max(1) > 1e-6
        inv[touched, :] = np.inf
        inv[:, touched] = np.inf
    return inv


class Bands(NamedTuple):
    """Bands of a quantity over parameter draws.

    Attributes:
      nominal: (..., out) the quantity at the central parameters.
      mean, sd: (..., out) over the draws.
      quantiles: (k, ..., out) at ``levels``.
      levels: (k,) the quantile levels.
      samples: (draws, ..., out) when asked for, else None.
      parameters: (draws, segments, 4) the physical parameters drawn.
    """

    nominal: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    quantiles: np.ndarray
    levels: np.ndarray
    samples: np.ndarray | None
    parameters: np.ndarray


def _check_fit_model(model: Model, fitted: Model) -> None:
    """ValueError unless ``model`` is the fit's model up to its mass, centres of mass
    and inertias (the draws are the fit's; the rest must be what they were fitted on)."""
    if model.segments != fitted.segments:
        raise ValueError(f"monte_carlo(spread=fit): the model has {model.segments} segments, the fit's "
                         f"{fitted.segments}: pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip
    for f in ("parent", "base", "coordinates", "attach_end"):
        if getattr(model, f) != getattr(fitted, f):
            raise ValueError(f"monte_carlo(spread=fit): the model's {f} {getattr(model, f)!r} is not the fit's "
                             f"{getattr(fitted, f)!r}: pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip
    for f in ("length", "attach", "origin", "gravity"):
        a, b = np.asarray(getattr(model, f), float), np.asarray(getattr(fitted, f), float)
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True):
            raise ValueError(f"monte_carlo(spread=fit): the model's {f} {a.tolist()} is not the fit's {b.tolist()}: "
                             "pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip


def _draw_physical(model: Model, spread, draws: int, seed: int) -> tuple:
    """(central (n, 4), draws (D, n, 4)) physical parameters."""
    n = model.segments
    rng = np.random.default_rng(seed)
    if isinstance(spread, FitResult):
        _check_fit_model(model, spread.model)
        if spread._cov_z is None or not np.isfinite(spread._cov_z).all():
            raise ValueError("this fit has undetermined parameters (infinite standard errors): "
                             "fix them or fit with a prior before propagating its uncertainty")  # fmt: skip
        free_idx = np.flatnonzero(spread.free.reshape(-1))
        floor = _floor(spread.initial)
        zc = _z_from_physical(spread.physical, floor).reshape(-1)
        # the fit's correlations in z, and each free parameter drawn with the fit's
        # estimate as its mean and its standard error as its sd: log-normal for a mass
        # or an inertia above its floor (log sd sqrt(log(1 + s^2)), s the sd of its
        # log; s itself where s is small), normal for a centre of mass. A normal in the
        # log with sd s (the fit's linearisation) would, where s is large (a standard
        # error above the value), put draws orders of magnitude beyond it: s = 14 drew
        # inertias of 1e19 kg m^2 and moments of 1e17 N m
        cov = spread._cov_z
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        pos = sd > 0
        R = np.eye(len(free_idx))
        R[np.ix_(pos, pos)] = cov[np.ix_(pos, pos)] / sd[pos][:, None] / sd[pos][None, :]
        try:
            L = np.linalg.cholesky(R + 1e-300 * np.eye(len(free_idx)))
        except np.linalg.LinAlgError:
            # variances 1e16 apart (near-exact data along some directions, a prior along
            # others): rounding leaves eigenvalues of -1e-18; a symmetric square root
            w, U = np.linalg.eigh(R)
            L = U * np.sqrt(np.maximum(w, 0.0))
        logs = np.isin(free_idx % 4, (0, 3))
        s_log = np.sqrt(np.log1p(sd**2))
        scale = np.where(logs, s_log, sd)
        shift = np.where(logs, -0.5 * s_log**2, 0.0)
        zs = np.broadcast_to(zc, (draws, 4 * n)).copy()
        zs[:, free_idx] += shift + (rng.standard_normal((draws, len(free_idx))) @ L.T) * scale
        return spread.physical, _physical_from_z(zs.reshape(draws, n, 4), floor)
    mean, sd = _check_prior(model, spread)
    out = np.empty((draws, n, 4))
    # mass and inertia log-normal with the given mean and sd (always positive),
    # the centre of mass normal
    for j in (0, 3):
        s2 = np.log1p((sd[:, j] / mean[:, j]) ** 2)
        out[:, :, j] = mean[:, j] * np.exp(np.sqrt(s2) * rng.standard_normal((draws, n)) - s2 / 2)
    for j in (1, 2):
        out[:, :, j] = mean[:, j] + sd[:, j] * rng.standard_normal((draws, n))
    return mean, out


@precise_jit
def _propagate(Y, y0, phys, center):
    # y_d = Y pi_d + y0 for every draw d: one matrix product (the dynamics are linear in
    # pi), draws on the last axis so that each output's draws are contiguous
    ys = jnp.einsum("...p,dp->...d", Y, _pi_from_physical(phys)) + y0[..., None]
    nominal = Y @ _pi_from_physical(center) + y0
    return ys, nominal, jnp.mean(ys, -1), jnp.std(ys, -1)


def monte_carlo(model: Model, q, qd, qdd, loads=None, *, spread, draws: int = 1000, seed: int = 0,
                quantity: str = "joint_moments", joints=None, frame: str = "world",
                levels: Sequence[float] = (0.025, 0.5, 0.975), samples: bool = False) -> Bands:  # fmt: skip
    """Propagate parameter uncertainty into bands of joint moments (or reactions).

    Draws physical parameters from ``spread`` -- a :class:`Prior` (e.g.
    :func:`table_prior`; mass and inertia log-normal with its mean and sd, so always
    positive, the centre of mass normal) or a :class:`FitResult` (its free parameters
    with the fit's estimates as means and its standard errors as sd, mass and
    inertia log-normal above their floor, the centre of mass normal, correlated as
    the fit's covariance in its coordinates, log mass and log inertia) -- and evaluates the quantity for every draw and every sample at
    once: the regressor is computed once (one engine pass), and the draws are one
    matrix product ``Y pi_d + y0``, exact because the dynamics are linear in pi.

    Args:
      model: the model (topology, lengths, gravity; its masses and inertias are not
        used: the centre is the Prior's mean or the fit's estimate).
      q, qd, qdd: (..., dof) the movement.
      loads: known external loads, as :func:`regressor`.
      spread: :class:`Prior` or :class:`FitResult`.
      draws: number of parameter draws.
      seed: of NumPy's generator.
      quantity: "joint_moments" (default), "joint_reactions" or "inverse_dynamics".
      joints, frame: for reactions.
      levels: quantile levels of the bands (0 to 1).
      samples: also return every draw's values (draws x samples x out floats).

    Returns:
      :class:`Bands`.
    """
    _check_quantity(quantity)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise ValueError(f"draws must be an int >= 2, got {draws!r}")
    lv = np.asarray(levels, dtype=float).reshape(-1)
    if lv.size == 0 or not ((lv >= 0) & (lv <= 1)).all():
        raise ValueError(f"levels must be numbers in [0, 1], got {levels!r}")
    center, phys = _draw_physical(model, spread, int(draws), int(seed))
    Y, y0 = regressor(model, q, qd, qdd, loads, quantity=quantity, joints=joints, frame=frame)
    ys, nominal, mean, sd = _propagate(Y, y0, jnp.asarray(phys, Y.dtype), jnp.asarray(center, Y.dtype))
    ys = np.asarray(ys)
    # quantiles by selection (NumPy's introselect), not a full sort
    qs = np.quantile(ys, lv, axis=-1)
    return Bands(np.asarray(nominal), np.asarray(mean), np.asarray(sd), qs, lv,
                 np.moveaxis(ys, -1, 0) if samples else None, phys)  # fmt: skip


# --------------------------------------------------------- the running experiment
