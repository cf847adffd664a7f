"""The consistent fit's objective and its Levenberg-Marquardt solver (jit-compiled).

The residuals are a tuple of data kinds, each with its regressor rows: a kind of form
"linear" gives w (Y pi + y0 - y) per row, one of form "magnitude" w (|Y pi + y0| - y)
per (2,)-vector row; a prior adds (p - mean) / sd per free parameter.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from ._parameters import _physical_from_z, _pi_from_physical


class Solver(NamedTuple):
    """Settings of :func:`jaxmb.identify.fit`'s solver (``solver=Solver(...)``).

    Attributes:
      max_iter: Levenberg-Marquardt iterations (per stage), an int >= 1.
      ftol, xtol, gtol: tolerances on the relative cost decrease, the relative step
        and the gradient (None: 1e-12, 1e-10, 1e-10 in float64; 1.2e-3, 1e-5, 1e-6
        in float32).
      rtol: rank threshold of the identifiability checks
        (:func:`jaxmb.identify.base_parameters`; None: its default).

    Example:
      ``fit(model, q, qd, qdd, moments=tau, solver=Solver(max_iter=50))``
    """

    max_iter: int = 200
    ftol: float | None = None
    xtol: float | None = None
    gtol: float | None = None
    rtol: float | None = None


class _Config(NamedTuple):
    """Static structure of a fit (hashable: jit recompiles only when it changes)."""

    n: int
    free: tuple  # flat indices into the (n, 4) z-vector
    forms: tuple  # per data kind: "linear" or "magnitude"
    huber: bool
    prior: bool


def _safe_norm(v):
    """|v| over the last axis with a finite gradient at v = 0 (double where)."""
    s = jnp.sum(v * v, -1)
    ok = s > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, s, 1.0)), 0.0)


def _huber_residual(r, delta):
    """sign(r) sqrt(2 rho(r)) for the Huber rho: r inside [-delta, delta], and
    sqrt(2 delta |r| - delta^2) outside (continuous first derivative)."""
    a = jnp.abs(r)
    out = a > delta
    safe = jnp.where(out, a, delta)
    return jnp.where(out, jnp.sign(r) * jnp.sqrt(2 * delta * safe - delta * delta), r)


def _residual_parts(zf, data, cfg: _Config):
    """(data residuals (N,), prior residuals (P,)) scaled, for free z values zf."""
    z = data["z0"].reshape(-1).at[jnp.asarray(cfg.free)].set(zf).reshape(cfg.n, 4)
    return _residual_parts_physical(_physical_from_z(z, data["floor"]), data, cfg)


def _residual_parts_physical(phys, data, cfg: _Config):
    """_residual_parts of the (n, 4) physical parameters."""
    pi = _pi_from_physical(phys)
    parts = []
    for form, d in zip(cfg.forms, data["kinds"]):
        if form == "linear":
            parts.append(d["w"] * (d["Y"] @ pi + d["y0"] - d["meas"]))
        else:  # magnitudes of (2,) vectors, e.g. of joint reaction forces
            lam = jnp.einsum("jcp,p->jc", d["Y"], pi) + d["y0"]
            parts.append(d["w"] * (_safe_norm(lam) - d["meas"]))
    if cfg.huber:
        parts = [_huber_residual(p_, d) for p_, d in zip(parts, data["delta"])]
    rd = jnp.concatenate(parts)
    if cfg.prior:
        rp = ((phys - data["p_mean"]) / data["p_sd"]).reshape(-1)[jnp.asarray(cfg.free)]
    else:
        rp = jnp.zeros((0,), rd.dtype)
    return rd, rp


def _residuals(zf, data, cfg):
    rd, rp = _residual_parts(zf, data, cfg)
    return jnp.concatenate([rd, rp])


_STATUS = {1: "relative cost decrease below ftol", 2: "step below xtol", 3: "gradient below gtol",
           -1: "maximum number of iterations", -2: "no step decreases the cost (damping overflow)",
           4: "data fitted to rounding (no step lowers the cost further)",
           -3: "the objective is not finite at the start"}  # fmt: skip


#: largest change of a log(mass) or log(inertia) in one Levenberg-Marquardt step
_MAX_LOG_STEP = 1.0
# passes of the projected step (each holds the log components beyond the limit);
# the few that remain beyond it after them are clipped
_HOLD_PASSES = 3


def _lm(zf0, data, cfg: _Config, max_iter: int, ftol, xtol, gtol):
    """Levenberg-Marquardt (Marquardt's diagonal scaling, Nielsen's damping update).

    Minimises 1/2 |r(z)|^2: solve (J^T J + lam diag(J^T J)) dz = -J^T r, hold each
    log(mass) or log(inertia) that would move by more than ``_MAX_LOG_STEP`` at that
    limit (a trust region: a factor e per iteration) and solve for the others given
    it, accept a step that lowers the cost and shrink
    lam by max(1/3, 1 - (2 rho - 1)^3) (rho: actual over predicted decrease), else
    multiply lam by nu and double nu. Non-finite trial costs count as increases, so
    the iterate stays finite.
    """
    fun = lambda z: _residuals(z, data, cfg)  # noqa: E731
    logs = jnp.asarray([k % 4 in (0, 3) for k in cfg.free])  # log(mass), log(inertia)

    def cost(z):
        r = fun(z)
        return 0.5 * r @ r

    def lin(z):
        r = fun(z)
        J = jax.jacfwd(fun)(z)
        return r, J

    def body(state):
        z, c, lam, nu, it, status = state
        r, J = lin(z)
        g = J.T @ r
        H = J.T @ J
        d = jnp.diag(H)
        d = jnp.maximum(d, 1e-12 * jnp.max(d) + jnp.finfo(d.dtype).tiny)
        A = H + lam * jnp.diag(d)
        step = -jnp.linalg.solve(A, g)
        # trust region in the log coordinates: at most a factor e per iteration on a
        # mass or an inertia (an unbounded step can throw one to exp(-400), where its
        # gradient underflows and it never comes back). A component beyond it is held
        # at the limit and the others solve the damped system given it, A_ff s_f =
        # -(g_f + A_fc s_c) (a projected step: scaling the whole step instead let a
        # mass or an inertia bound for its floor shrink every other parameter's step
        # until the ftol test stopped the fit short of the minimum)
        held = jnp.zeros_like(logs)
        for _ in range(_HOLD_PASSES):
            held = held | (logs & (jnp.abs(step) > _MAX_LOG_STEP))
            target = jnp.clip(step, -_MAX_LOG_STEP, _MAX_LOG_STEP)
            system = jnp.where(held[:, None], jnp.eye(A.shape[0], dtype=A.dtype), A)
            step = jnp.linalg.solve(system, jnp.where(held, target, -g))
        step = jnp.where(logs, jnp.clip(step, -_MAX_LOG_STEP, _MAX_LOG_STEP), step)
        zn = z + step
        cn = cost(zn)
        pred = -(g @ step + 0.5 * step @ (H @ step))
        ok = jnp.isfinite(cn) & (cn < c)
        rho = (c - cn) / jnp.where(pred > 0, pred, 1.0)
        lam_ok = lam * jnp.maximum(1 / 3, 1 - (2 * rho - 1) ** 3)
        # an accepted step that barely lowers the cost, or a model that predicts no
        # useful decrease (already at the minimum, to round-off)
        small_f = (ok & ((c - cn) <= ftol * c)) | ((pred >= 0) & (pred <= ftol * c) & (lam <= 1.0))
        small_x = ok & (jnp.linalg.norm(step) <= xtol * (jnp.linalg.norm(z) + xtol))
        small_g = jnp.max(jnp.abs(g)) <= gtol
        new_status = jnp.where(small_g, 3, jnp.where(small_f, 1, jnp.where(small_x, 2, 0)))
        z = jnp.where(ok, zn, z)
        c = jnp.where(ok, cn, c)
        lam = jnp.where(ok, lam_ok, lam * nu)
        nu = jnp.where(ok, 2.0, nu * 2.0)
        new_status = jnp.where((new_status == 0) & (lam > 1e16), -2, new_status)
        new_status = jnp.where((new_status == 0) & (it + 1 >= max_iter), -1, new_status)
        return z, c, lam, nu, it + 1, new_status

    c0 = cost(zf0)
    dt = zf0.dtype
    state = (zf0, c0, jnp.asarray(1e-3, dt), jnp.asarray(2.0, dt), jnp.asarray(0), jnp.where(jnp.isfinite(c0), 0, -3))
    z, c, _, _, it, status = jax.lax.while_loop(lambda s: s[5] == 0, body, state)
    r, J = lin(z)
    nd = r.shape[0] - (len(cfg.free) if cfg.prior else 0)  # data rows first, then the prior's
    return z, c, it, status, r[:nd], J[:nd], J[nd:]


_lm_jit = precise_jit(_lm, static_argnames=("cfg",))


@functools.partial(precise_jit, static_argnames=("cfg",))
def _physical_gradient(zf, data, cfg):
    """Gradient (free,) of the cost 1/2 |r|^2 with respect to the free physical
    parameters themselves (finite where d p / d z = exp(z) has underflowed)."""
    z = data["z0"].reshape(-1).at[jnp.asarray(cfg.free)].set(zf).reshape(cfg.n, 4)
    phys = _physical_from_z(z, data["floor"])

    def cost(p):
        rd, rp = _residual_parts_physical(p, data, cfg)
        return 0.5 * (rd @ rd + rp @ rp)

    return jax.grad(cost)(phys).reshape(-1)[jnp.asarray(cfg.free)]


def _stuck_at_floor(z, c, jdata, cfg, ref) -> np.ndarray:
    """(free,) bool: masses and inertias at their floor (within 1e3 times it) whose cost
    still falls as they grow: -dc/dp p_ref above 1e-4 c (first-order gain of moving p back
    to its starting size p_ref). Their gradient in z, dc/dp exp(z), has vanished with
    exp(z), so the iterations stopped there for numerical reasons, not at a minimum (at
    a true minimum on the bound of physical consistency dc/dp >= 0)."""
    free = np.asarray(cfg.free)
    logs = np.isin(free % 4, (0, 3))
    floor = np.asarray(jdata["floor"], dtype=float).reshape(-1)[free]
    phys = floor + np.exp(np.asarray(z, dtype=float))
    low = logs & (phys <= 1e3 * floor)
    if not low.any():
        return low
    g = np.asarray(_physical_gradient(z, jdata, cfg), dtype=float)
    return low & (-g * ref > 1e-4 * max(float(c), 0.0) + np.finfo(float).tiny)


@functools.partial(precise_jit, static_argnames=("cfg",))
def _data_residuals(zf, data, cfg):
    """The data residuals of :func:`_residual_parts`, compiled (op by op they cost
    a compilation each on a first call)."""
    return _residual_parts(zf, data, cfg)[0]


@functools.partial(precise_jit, static_argnames=("cfg",))
def _data_jacobian(zf, data, cfg):
    return jax.jacfwd(lambda zz: _residual_parts(zz, data, cfg)[0])(zf)
