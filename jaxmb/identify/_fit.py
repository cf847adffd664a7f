"""``fit``: segment parameters from measured joint loads, as a chain of named stages.

    prepare -> linear fit (base parameters) -> consistent fit -> standard errors -> result

Every stage after :func:`_prepare` reads the data as a tuple of data kinds
(:class:`._data._Kind`), so a new kind of data is one more builder in
:func:`_measured_kinds`.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import jax.numpy as jnp
import numpy as np

from ..model import Model
from ._base import _check_rtol, _identifiable_or_raise, base_parameters
from ._data import _free_mask, _Kind, _leading, _moment_kind, _reaction_kind
from ._loads import _fit_loads
from ._parameters import (PHYSICAL, _dpi_dz, _floor, _physical_names, _pi_from_physical,
                          _z_from_physical, from_physical, parameter_names, to_physical)  # fmt: skip
from ._prior import _check_prior, _positive_number
from ._regressor import regressor
from ._result import BaseFit, FitResult, _warn_unexplained
from ._solver import _STATUS, Solver, _Config, _data_residuals, _lm_jit, _stuck_at_floor
from ._uncertainty import _standard_errors

_DEPRECATED = ("max_iter", "ftol", "xtol", "gtol", "rtol")


def fit(model: Model, q, qd, qdd, *, moments=None, reactions=None, loads=None, free=None, prior=None,
        moment_weights=None, reaction_weights=None, sigma: dict | None = None, loss: str = "l2",
        solver: Solver | None = None, **deprecated) -> FitResult:  # fmt: skip
    """Fit segment parameters to measured joint moments and/or joint reaction forces.

    Two estimates:

    1. linear least squares on the base parameters (:func:`base_parameters`) of the
       linear data (moments, reaction vectors): the classical answer, which may be
       physically inconsistent; reported in ``result.base``;
    2. a physically consistent fit of the physical parameters, mass and inertia about
       the centre of mass through logarithms (positive by construction), the centre
       of mass free, by Levenberg-Marquardt (jit-compiled; each step changes a mass
       or an inertia by at most a factor e) on

           1/2 sum (rho(w (y_model - y_measured) / sigma))  +  1/2 sum ((p - mean) / sd)^2,

       where y_model = Y pi(p) + y0 uses the exact regressors (so every iteration is
       a few matrix products, whatever the number of frames), reaction magnitudes
       |Y pi + y0| enter as they are measured, rho is the square (``loss="l2"``) or
       Huber's (``loss="huber"``: a least-squares stage, then Huber with the
       threshold at 1.345 robust standard deviations (1.4826 MAD) of each kind's
       residuals; a kind whose ``sigma`` is not given is scaled by that robust
       standard deviation, not by its RMS residual, which outliers inflate,
       re-estimated from the Huber fit's residuals up to 3 passes), and the prior
       term is present when ``prior`` is given. Standard errors come from the
       Gauss-Newton Hessian, scaled by the residual variance of each data kind when
       ``sigma`` is not given (Huber: the M-estimator's sum psi^2 / (N - p) /
       mean(psi')^2, Huber 1981), and inverted in the basis of the data's singular
       vectors with the columns scaled to unit norm (:func:`_covariance_z`), so
       that a prior still determines what the data cannot see when the data are
       near exact, and one data kind far more precise than another does not hide
       what only the other sees.

    Why Levenberg-Marquardt rather than a first-order or quasi-Newton method: the
    objective is a sum of squares in at most 4 n unknowns, the Jacobian is cheap
    (``jax.jacfwd`` of matrix products), Gauss-Newton steps converge in a few
    iterations where L-BFGS needs hundreds on these badly scaled parameters (kg
    against kg m^2), and its Hessian is the one the standard errors need.

    Main arguments:
      model: the starting model (lengths, gravity and topology are kept).
      q, qd, qdd: (..., dof) the movement; any leading batch shape (e.g. trials x
        frames: several trials are fitted jointly).
      moments: measured joint moments (..., segments), N m, as
        :func:`jaxmb.joint_moments` returns them.
      reactions: measured joint reaction forces, (..., segments, 2) world-frame
        vectors (N, as :func:`jaxmb.joint_reactions`) or (..., segments) magnitudes.
      loads: known external loads: a :class:`PointForce` (the force and its point,
        e.g. the ground reaction at the centre of pressure) or a list of them; or a
        function ``loads(model) -> (..., segments, 3)`` (wrenches at the centres of
        mass, :func:`jaxmb.point_load`), called with ``model``. fit builds the
        wrenches for the model it fits, once: the moments and reactions of a force at
        a point do not depend on the parameters it changes. An array of wrenches with
        forces is refused (it belongs to the model it was built for: one made for
        another model moves the force, and the fit converges to wrong parameters);
        an array of pure moments (Fx = Fy = 0) is accepted.
      free: which physical parameters to fit: None (all), a (segments, 4) bool (or
        integer 0/1) mask (mass, com_along, com_across, inertia), or names such as
        ``"mass"``, ``"com"``, ``"inertia"``, ``"shank.mass"``; the others keep the
        model's values.
      prior: optional :class:`Prior` (e.g. :func:`table_prior`): a weighted
        deviation penalty on the free physical parameters.
      moment_weights, reaction_weights: optional weights >= 0 broadcasting to the
        samples (...) or to the data ((..., segments)). A weight multiplies the
        residual, w (y_model - y_measured) / sigma, so the cost weighs its square:
        a value of weight w counts as if its noise were sigma / w (2 as four copies
        of the value). 0 ignores a value (e.g. a moment not measured, padding of
        trials of unequal length). ``result.rms`` weighs the same way. Weights over
        some leading axes take trailing ones of size 1 (one per trial of samples
        (trials, T): shape (trials, 1, 1)); a shape that reads both ways, such as
        (trials,) when trials == segments, raises ValueError.
      loss: "l2" or "huber" (robust to a few bad samples).

    Other arguments:
      sigma: optional {"moments": N m, "reactions": N}: the measurement noise of each
        kind (a key for data not given is an error). Default: estimated from the
        residuals (start from the RMS of the measurements, fit, set sigma to the RMS
        residual of each kind, refit; up to 4 passes, until it changes by less than
        10 %), and the standard errors use the residual variance.
      solver: a :class:`Solver`: iterations of Levenberg-Marquardt, its tolerances
        and the rank threshold of the identifiability checks.
      max_iter, ftol, xtol, gtol, rtol: deprecated, the fields of ``solver``
        (``solver=Solver(max_iter=...)``); they still work, with a
        DeprecationWarning.

    Returns:
      :class:`FitResult` (print it for the report).

    Warns:
      UserWarning: a data kind whose residual RMS is more than half the data's own
        RMS (the same weights): the fitted parameters explain little of it, converged
        or not (forces acting on the body left out of ``loads``, or data of
        different trials).

    Raises:
      ValueError: naming the argument, for wrong shapes, NaN or infinite values, no
        data, loads given as an array of wrenches with forces (see ``loads``), a
        ``sigma`` for data not given, fewer data values than free
        parameters, or data that cannot identify the free parameters (naming the
        directions), unless a prior is given. That message says whether the deficit
        depends on the movement ("too little excitation": more varied movement
        helps) or not ("not identifiable": a random movement shows it too, so only
        fixing the parameters, a prior or, where they help, reaction forces can).

    Examples:
      >>> t = identify.running_trial()
      >>> every = slice(None, None, 10)
      >>> res = identify.fit(t["model"], t["q"][every], t["qd"][every], t["qdd"][every],
      ...                    moments=t["moments"][every], moment_weights=t["moment_weights"][every],
      ...                    loads=t["ground"].select(every), free="inertia")
      >>> print(res)  # the fitted parameters with their standard errors
    """
    solver = _solver_settings(solver, deprecated)
    problem = _prepare(model, q, qd, qdd, moments=moments, reactions=reactions, loads=loads, free=free,
                       prior=prior, moment_weights=moment_weights, reaction_weights=reaction_weights,
                       sigma=sigma, loss=loss, solver=solver)  # fmt: skip
    base = _linear_fit(problem)
    state = _consistent_fit(problem)
    errors = _standard_errors(problem, state)
    return _result(problem, base, state, errors)


# ------------------------------------------------------------------ the options


def _solver_settings(solver: Solver | None, deprecated: dict) -> Solver:
    """The checked :class:`Solver`, from ``solver=`` or the deprecated keywords."""
    unknown = set(deprecated) - set(_DEPRECATED)
    if unknown:
        raise TypeError(f"fit() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    if solver is not None and not isinstance(solver, Solver):
        raise ValueError(f"solver must be an identify.Solver(...), got {solver!r}")
    solver = Solver() if solver is None else solver
    if deprecated:
        given = ", ".join(f"{k}=..." for k in deprecated)
        warnings.warn(f"fit({given}) is deprecated: pass solver=jaxmb.identify.Solver({given})",
                      DeprecationWarning, stacklevel=3)  # fmt: skip
        solver = solver._replace(**deprecated)
    m = solver.max_iter
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {m!r}")
    return solver._replace(rtol=None if solver.rtol is None else _check_rtol(solver.rtol))


def _tolerances(solver: Solver, eps: float) -> tuple:
    """(ftol, xtol, gtol), the defaults of the floating precision ``eps`` filled in."""
    low = eps > 1e-10  # float32
    ftol = (1e4 * eps if low else 1e-12) if solver.ftol is None else float(solver.ftol)
    # float32: 1e-5 (a looser step test, relative to |z| with log-inertias of -7,
    # stopped noiseless fits after 3 iterations at 0.3 % errors)
    xtol = (1e-5 if low else 1e-10) if solver.xtol is None else float(solver.xtol)
    gtol = (1e-6 if low else 1e-10) if solver.gtol is None else float(solver.gtol)
    return ftol, xtol, gtol


def _check_sigma(sigma, given: dict) -> dict:
    """``sigma`` as a dict {data kind: noise level > 0} of data kinds given."""
    sigma = dict(sigma or {})
    unknown = set(sigma) - set(given)
    if unknown:
        raise ValueError(f"sigma keys are {' and '.join(repr(k) for k in given)}, got {sorted(unknown)}")
    for k, v in sigma.items():
        if given[k] is None:
            raise ValueError(f"sigma[{k!r}] is given but no {k} are: give {k}= or leave the key out")
        if not _positive_number(v):
            raise ValueError(f"sigma[{k!r}] must be a positive number, got {v!r}")
    return sigma


# ------------------------------------------------------------------ 1. prepare


@dataclasses.dataclass
class _Problem:
    """A fit's checked inputs: the movement, the data kinds, the free parameters, the
    prior and the settings, and the starting point in the log coordinates."""

    model: Model
    motion: tuple  # ((q, qd, qdd), lead)
    loads: np.ndarray | None
    kinds: tuple  # of _Kind
    mask: np.ndarray  # (n, 4) bool, the free physical parameters
    free_idx: tuple
    prior: object
    sigma: dict
    loss: str
    solver: Solver
    tolerances: tuple  # (ftol, xtol, gtol)
    eps: float
    dtype: object
    phys0: np.ndarray
    floor: np.ndarray
    z0: np.ndarray

    @property
    def all_sigma(self) -> bool:
        """Every data kind's noise is given."""
        return all(k.name in self.sigma for k in self.kinds)


def _prepare(model, q, qd, qdd, *, moments, reactions, loads, free, prior, moment_weights, reaction_weights,
             sigma, loss, solver) -> _Problem:  # fmt: skip
    """Check every input and build the data kinds (regressor rows) and the start."""
    if loss not in ("l2", "huber"):
        raise ValueError(f"loss must be 'l2' or 'huber', got {loss!r}")
    if moments is None and reactions is None:
        raise ValueError("fit needs measured data: moments= (..., segments) and/or reactions= "
                         "(..., segments, 2) or (..., segments)")  # fmt: skip
    motion = _leading(model, q, qd, qdd)
    loads = _fit_loads(model, motion[0][0], loads, motion[1])
    mask = _free_mask(model, free)
    prior = None if prior is None else _check_prior(model, prior)
    sigma = _check_sigma(sigma, {"moments": moments, "reactions": reactions})
    kinds = _measured_kinds(model, motion, loads, sigma, moments=(moments, moment_weights),
                            reactions=(reactions, reaction_weights))  # fmt: skip
    free_idx = tuple(int(k) for k in np.flatnonzero(mask.reshape(-1)))
    N = sum(k.count for k in kinds)
    if N < len(free_idx):
        raise ValueError(f"too few samples: {N} measured values (with weight > 0) for {len(free_idx)} free "
                         "parameters; give more samples or fix parameters (free=...)")  # fmt: skip
    dtype = jnp.result_type(float)
    eps = float(jnp.finfo(dtype).eps)
    phys0 = np.asarray(to_physical(model), dtype=float)
    floor = _floor(model)
    return _Problem(model, motion, loads, kinds, mask, free_idx, prior, sigma, loss, solver,
                    _tolerances(solver, eps), eps, dtype, phys0, floor, _z_from_physical(phys0, floor))  # fmt: skip


def _measured_kinds(model, motion, loads, sigma, **data) -> tuple:
    """The data kinds given, in a fixed order, as regressor rows (:class:`._data._Kind`)."""
    builders = {"moments": _moment_kind, "reactions": _reaction_kind}
    return tuple(builders[name](model, motion, loads, values, weights, sigma)
                 for name, (values, weights) in data.items() if values is not None)  # fmt: skip


# --------------------------------------------------------------- 2. linear fit


def _linear_fit(problem: _Problem) -> BaseFit | None:
    """Linear least squares on the base parameters of the linear data kinds (None
    when there are none: reaction magnitudes alone)."""
    linear = [k for k in problem.kinds if k.form == "linear"]
    if not linear:
        return None
    # the rank decision at the precision the regressors were computed in (weights
    # are float64 NumPy: A would otherwise pass float32 rounding as information)
    ydt = np.result_type(*(np.asarray(k.full[0]).dtype for k in problem.kinds))
    return _base_fit(problem.model, [k.linear_rows() for k in linear], [k.name for k in linear], problem.sigma,
                     ydt, problem.solver.rtol)  # fmt: skip


def _base_fit(model, linear, kinds, sigma, ydt, rtol) -> "BaseFit":
    """Linear least squares on the base parameters from the rows ``linear`` (one
    (A_k, b_k) per data kind in ``kinds``, each divided by its sigma or, where none is
    given, by the RMS of its data). Where the noise of a kind is not given it is
    estimated from that kind's own residuals and the rows are refitted with it
    (variance components, as the consistent fit does): one variance pooled over
    moments (N m) and reactions (N) would misstate the errors of both. The covariance
    is (A^T W A)^-1 with each kind's rows whitened by its residual variance (1 where
    sigma is given)."""
    bp = base_parameters(model, np.concatenate([a for a, _ in linear]).astype(ydt), rtol=rtol)
    cols = list(bp.independent)
    rows = [(a[:, cols], b) for a, b in linear]
    N = sum(a.shape[0] for a, _ in rows)
    # rows are scaled to O(1) (by sigma or the data's RMS): a variance floor far below
    # rounding keeps exact data's weights and (A^T W A) finite
    tiny = (1e-3 * float(np.finfo(ydt).eps)) ** 2
    s2 = [1.0] * len(rows)
    for _ in range(1 if all(k in sigma for k in kinds) else 5):
        w = [1 / math.sqrt(v) for v in s2]
        xb, *_ = np.linalg.lstsq(np.concatenate([a * wk for (a, _), wk in zip(rows, w)]),
                                 np.concatenate([b * wk for (_, b), wk in zip(rows, w)]), rcond=None)  # fmt: skip
        new = []
        for (a, b), k in zip(rows, kinds):
            r = a @ xb - b
            # each kind's share of the degrees of freedom the fit took (N - rank in all)
            dof = max(a.shape[0] - bp.rank * a.shape[0] / N, 1.0)
            new.append(1.0 if k in sigma else max(float(r @ r) / dof, tiny))
        change = max(abs(n_ / o - 1) for n_, o in zip(new, s2))
        s2 = new
        if change < 1e-3 or len(rows) == 1:
            break
    H = sum(a.T @ a / v for (a, _), v in zip(rows, s2))
    cov = np.linalg.pinv(H)
    return BaseFit(bp, xb, np.sqrt(np.maximum(np.diag(cov), 0.0)))


# ----------------------------------------------------------- 3. consistent fit


@dataclasses.dataclass
class _State:
    """The consistent fit as it goes: the solver's data (jitted), its static
    structure, each kind's noise scale, and the last solve's output."""

    jdata: dict
    cfg: _Config
    zf0: object  # the free z at the start
    raw_w: dict  # each kind's weights before scaling
    scale: dict  # each kind's noise scale in the objective
    used: dict = None  # the scales of the last solve
    z: object = None
    c: object = None
    status: int = 0
    rd: object = None  # whitened data residuals
    Jd: object = None  # their Jacobian
    Jp: object = None  # the prior's
    stuck: list = dataclasses.field(default_factory=list)
    iters: int = 0


def _consistent_fit(problem: _Problem) -> _State:
    """Levenberg-Marquardt on the physical parameters in the log coordinates, with
    each data kind's noise estimated from its residuals (and Huber's loss)."""
    state = _start(problem)
    _identifiable_or_raise(problem.model, state.zf0, state.jdata, state.cfg, problem.free_idx,
                           problem.solver.rtol, problem.prior is not None, [k.name for k in problem.kinds],
                           _other_motion(problem))  # fmt: skip
    _variance_passes(problem, state)
    if problem.loss == "huber" and state.status > 0 and not _at_rounding(problem, state, state.rd):
        _huber_passes(problem, state)
    return state


def _start(problem: _Problem) -> _State:
    """The solver's data (regressor rows, weights, prior, floor) and the start."""
    dt, p = problem.dtype, problem
    data = {"z0": p.z0, "floor": p.floor}
    if p.prior is not None:
        data["p_mean"], data["p_sd"] = p.prior.mean, p.prior.sd
    jdata = {k: jnp.asarray(v, dt) for k, v in data.items()}
    jdata["kinds"] = tuple({"Y": jnp.asarray(k.Y, dt), "y0": jnp.asarray(k.y0, dt), "meas": jnp.asarray(k.meas, dt),
                            "w": jnp.asarray(k.w, dt)} for k in p.kinds)  # fmt: skip
    cfg = _Config(p.model.segments, p.free_idx, tuple(k.form for k in p.kinds), False, p.prior is not None)
    zf0 = jnp.asarray(p.z0.reshape(-1)[list(p.free_idx)], dt)
    return _State(jdata, cfg, zf0, {k.name: k.w * k.scale for k in p.kinds}, {k.name: k.scale for k in p.kinds},
                  z=zf0)  # fmt: skip


def _other_motion(problem: _Problem):
    """The data Jacobian (free z columns) of data kinds for another movement: a
    random one (same shape as q, so that the regressors compiled for the data serve;
    64 samples at least), every measured joint weighed alike, reaction vectors for
    either kind of reaction data; ``actual``: of the data's own movement instead
    (would other data kinds help it?)."""
    p, n = problem, problem.model.segments
    (q, qd, qdd), lead = p.motion
    outputs = {k.name: k.outputs for k in p.kinds}
    # the quantity of each kind given, and of the kinds it may suggest adding
    quantity = {"moments": "joint_moments", "reactions": "joint_reactions"} | {k.name: k.quantity for k in p.kinds}
    dpi_dz = _dpi_dz(p.phys0, p.floor)[:, list(p.free_idx)]

    def jacobian(names, actual=False):
        rows, shape = [], lead if actual or math.prod(lead) >= 64 else (64,)
        if actual:
            qr, qdr, qddr = q, qd, qdd
        else:
            rng = np.random.default_rng(0)
            qr = rng.uniform(-np.pi, np.pi, shape + (p.model.dof,))
            qdr, qddr = 2.0 * rng.standard_normal(qr.shape), 5.0 * rng.standard_normal(qr.shape)
        ld = p.loads if shape == lead else None
        for k in names:
            Y = np.asarray(regressor(p.model, qr, qdr, qddr, ld, quantity=quantity[k])[0])
            Y = Y.reshape((-1, n) + Y.shape[len(shape) + 1:])[:, outputs.get(k, np.ones(n, bool))].reshape(-1, 4 * n)
            rows.append(Y / max(float(np.sqrt(np.mean(Y * Y))), 1e-300))
        return np.concatenate(rows) @ dpi_dz

    return jacobian


def _noise(problem: _Problem, state: _State, rd) -> dict:
    """Each kind's residual scale (its noise estimate, in its units) from the
    whitened residuals ``rd``."""
    rd_np, off, out = np.asarray(rd), 0, {}
    for k in problem.kinds:
        r = rd_np[off:off + k.count] * state.scale[k.name]
        off += k.count
        out[k.name] = float(np.sqrt(np.sum(r * r) / max(np.sum(state.raw_w[k.name] ** 2), 1e-300)))
    return out


def _at_rounding(problem: _Problem, state: _State, rd, names=None) -> bool:
    """The residuals of the kinds ``names`` (default all) at rounding level (data
    fitted exactly): no step can lower the cost (damping overflow is convergence),
    the variances have nothing to weigh, and a robust loss nothing to down-weight."""
    s = _noise(problem, state, rd)
    names = [k.name for k in problem.kinds] if names is None else names
    rms = {k.name: k.data_rms for k in problem.kinds}
    return all(s[k] <= 1e3 * problem.eps * rms[k] for k in names)


def _solve(problem: _Problem, state: _State) -> None:
    """Levenberg-Marquardt from ``state.z``; a mass or inertia left stuck at its floor
    (see _stuck_at_floor) restarts once from its starting value. Stores the result
    and the names of those still stuck in ``state``."""
    ftol, xtol, gtol = problem.tolerances
    max_iter, jdata, cfg = int(problem.solver.max_iter), state.jdata, state.cfg
    ref = np.abs(problem.phys0.reshape(-1)[list(problem.free_idx)])  # starting sizes
    out = _lm_jit(state.z, jdata, cfg, max_iter, ftol, xtol, gtol)
    it = int(out[2])
    stuck = _stuck_at_floor(out[0], out[1], jdata, cfg, ref)
    if stuck.any() and int(out[3]) > 0:
        out = _lm_jit(jnp.where(jnp.asarray(stuck), state.zf0, out[0]), jdata, cfg, max_iter, ftol, xtol, gtol)
        it += int(out[2])
        stuck = _stuck_at_floor(out[0], out[1], jdata, cfg, ref)
    status = int(out[3])
    if status == -2 and _at_rounding(problem, state, out[4]):
        status = 4  # no step lowers a cost that is rounding: the data are fitted exactly
    state.z, state.c, state.status, state.rd, state.Jd, state.Jp = out[0], out[1], status, *out[4:]
    state.iters += it
    names = _physical_names(problem.model)
    state.stuck = [names[problem.free_idx[j]] for j in np.flatnonzero(stuck)]


def _variance_passes(problem: _Problem, state: _State) -> None:
    """Fit; where sigma is not given, re-estimate each kind's noise from its residuals
    and refit (variance components, up to 4 passes, until it changes by less than
    10 %), so that the data kinds, and the data against the prior, weigh by their
    noise rather than by their size (the first pass weighs them by their RMS)."""
    est = [k for k in problem.kinds if k.name not in problem.sigma]
    for _ in range(1 if problem.all_sigma else 4):
        state.used = dict(state.scale)
        _solve(problem, state)
        if state.status <= 0 or problem.all_sigma:
            break
        if _at_rounding(problem, state, state.rd, [k.name for k in est]):
            break  # residuals at round-off: the data are fitted exactly, nothing to weigh
        new = _noise(problem, state, state.rd)
        change = max(abs(new[k.name] / state.scale[k.name] - 1) for k in est)
        for k in est:
            state.scale[k.name] = max(new[k.name], 1e3 * problem.eps * k.data_rms)
            _set_weights(problem, state, k)
        if change < 0.1:
            break


def _set_weights(problem: _Problem, state: _State, kind: _Kind) -> None:
    """The solver's weights of ``kind`` for its current noise scale."""
    i = problem.kinds.index(kind)
    state.jdata["kinds"][i]["w"] = jnp.asarray(state.raw_w[kind.name] / state.scale[kind.name], problem.dtype)


def _huber_passes(problem: _Problem, state: _State) -> None:
    """Huber's loss: each kind whose noise is estimated is scaled by its robust
    standard deviation (1.4826 MAD of its residuals), not by the RMS, which the
    outliers inflate; the threshold is 1.345 of those. Re-estimated from the Huber
    fit's residuals and refitted, up to 3 passes, until it changes by less than 10 %."""
    state.cfg = state.cfg._replace(huber=True)
    rd_raw = np.asarray(state.rd)  # whitened by ``used``, the scales of the last solve
    for p_ in range(3):
        mads, off = {}, 0
        for k in problem.kinds:
            r = rd_raw[off:off + k.count] * state.used[k.name]  # weighted residuals, in the data's units
            off += k.count
            mad = 1.4826 * float(np.median(np.abs(r - np.median(r))))
            mads[k.name] = mad if mad > 0 else (float(np.sqrt(np.mean(r * r))) or state.used[k.name])
        est = {k: max(mads[k.name], 1e3 * problem.eps * k.data_rms) for k in problem.kinds
               if k.name not in problem.sigma}  # fmt: skip
        if p_ and max((abs(v / state.scale[k.name] - 1) for k, v in est.items()), default=0.0) < 0.1:
            break  # the scales the last solve used hold
        for k, v in est.items():
            state.scale[k.name] = v
            _set_weights(problem, state, k)
        state.jdata["delta"] = tuple(jnp.asarray(1.345 * mads[k.name] / state.scale[k.name], problem.dtype)
                                     for k in problem.kinds)  # fmt: skip
        state.used = dict(state.scale)
        _solve(problem, state)
        if state.status <= 0 or not est:
            break
        rd_raw = np.asarray(_data_residuals(state.z, state.jdata, state.cfg._replace(huber=False)))


# ------------------------- 4. standard errors (_uncertainty), 5. the result


def _result(problem: _Problem, base, state: _State, errors) -> FitResult:
    """The fitted model, its status in words, the residuals and the result."""
    p, model = problem, problem.model
    phys = errors.physical
    converged = state.status > 0 and bool(np.isfinite(np.asarray(state.z)).all()) and not state.stuck
    at_bound = tuple(f"{PHYSICAL[j]}[{model.names[i]}]" for i, j in zip(*np.nonzero(
        p.mask & (phys <= 1e3 * np.where(p.floor > 0, p.floor, -np.inf)))))  # fmt: skip
    status_text = _STATUS.get(state.status, f"status {state.status}")
    if state.stuck:
        status_text += ("; NOT a minimum: stuck at the floor of physical consistency while the cost still "
                        "falls as they grow (start closer, or fix them): " + ", ".join(state.stuck))
        at_bound = tuple(b for b in at_bound if b not in state.stuck)
    if at_bound:
        status_text += "; at the bound of physical consistency (the data push them to 0): " + ", ".join(at_bound)
    pi = _pi_from_physical(phys)
    residuals, rms = _residuals(problem, pi)
    _warn_unexplained(rms, {k.name: (k.full[3], k.full[2]) for k in p.kinds}, p.loads is None)
    return FitResult(model=from_physical(model, phys), initial=model, parameters=pi, stderr=errors.stderr,
                     physical=phys, stderr_physical=errors.stderr_physical, covariance=errors.covariance,
                     residuals=residuals, rms=rms, converged=converged, status=status_text, iterations=state.iters,
                     cost=float(state.c), free=p.mask, base=base, names=parameter_names(model),
                     noise=errors.noise, _z=errors.z, _cov_z=errors.cov_z)  # fmt: skip


def _residuals(problem: _Problem, pi) -> tuple:
    """(residuals, rms): each kind's model minus measurement over every sample, and
    its RMS weighted as the fit weighs it (w multiplies the residual, so w^2 the square)."""
    residuals, rms = {}, {}
    for k in problem.kinds:
        Y, y0, w, meas = k.full
        yk = np.asarray(Y) @ pi + np.asarray(y0)
        if k.form == "magnitude":
            yk = np.linalg.norm(yk, axis=-1)
        r = yk - meas
        residuals[k.name] = r
        wk = w if r.ndim == w.ndim else w[..., None]
        wk = np.broadcast_to(wk, r.shape) ** 2
        rms[k.name] = float(np.sqrt(np.sum(wk * r * r) / max(np.sum(wk), 1e-300)))
    return residuals, rms
