"""Inverse kinematics of the hand: damped least squares (Levenberg-Marquardt), any chain or tree."""

from __future__ import annotations

import functools
import math
import warnings
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .._checks import _float_dtype, check_batch, check_finite
from ..model import Model, Segment, ancestor_matrix
from ._hand import _hand_derivatives, _hand_point, _traced_radii, workspace


def _default_q0(model: Model, dtype):
    """A bent pose: every joint 0.5 rad from its parent (off the straight-chain singularity)."""
    rel = np.full(model.segments, 0.5)
    ang = ancestor_matrix(model.parent) @ rel if model.coordinates == "absolute" else rel
    base = np.asarray(model.origin, dtype=float) if model.base == "floating" else np.zeros(0)
    return jnp.asarray(np.concatenate([base, ang]), dtype)


def _bend(model: Model, dtype):
    """The change of coordinates that bends every non-root joint by 0.5 rad (as
    :func:`_default_q0` does): what a start at a straight (singular) pose gets."""
    rel = np.where(np.asarray(model.parent) < 0, 0.0, 0.5)
    ang = ancestor_matrix(model.parent) @ rel if model.coordinates == "absolute" else rel
    return jnp.asarray(np.concatenate([np.zeros(model.nbase), ang]), dtype)


def _unbent(model: Model, q0, target, i: int, point, tol):
    """q0, or q0 with its joints bent (:func:`_bend`) where the hand's Jacobian at q0
    has lost a rank (a straight or folded chain: no joint moves the hand along the
    arm, and a damped least-squares step from there never moves it off the line)
    and the hand is not yet at the target; a bent q0 is aimed again (:func:`_aim`)."""
    zero = jnp.zeros_like(q0)
    f = lambda q: _hand_derivatives(model, i, point, q, zero, zero, zero)[0]  # noqa: E731
    J = jax.jacfwd(f)(q0)
    A = J @ J.T  # (2, 2): its eigenvalues are the squared singular values of J
    tr = A[0, 0] + A[1, 1]
    det = A[0, 0] * A[1, 1] - A[0, 1] * A[1, 0]
    # sigma_min / sigma_max below about 1e-6 (float64) or 1e-3 (float32)
    rank1 = det <= (1e-12 if q0.dtype == jnp.float64 else 1e-6) * tr**2
    e = target - f(q0)
    bent = _aim(model, q0 + _bend(model, q0.dtype), target, i, point)
    return jnp.where(rank1 & (jnp.sum(e**2) > tol**2), bent, q0)


def _project(target, origin, r_min, r_max):
    """Targets (..., 2) moved radially onto the annulus r_min <= |p - origin| <= r_max."""
    d = target - origin
    r = jnp.sqrt(jnp.sum(d**2, -1, keepdims=True))
    safe = jnp.where(r > 0, r, 1.0)
    u = jnp.where(r > 0, d / safe, jnp.asarray([1.0, 0.0], d.dtype))
    rc = jnp.clip(r, r_min, r_max)
    return jnp.where((r < r_min) | (r > r_max), origin + u * rc, target)


def _ik_solve(model: Model, target, q0, i: int, point, damping, tol, max_iter: int):
    """Levenberg-Marquardt iterations for one target (2,) from q0 (dof,).

    dq = J^T (J J^T + (damping^2 + mu |e|^2) I)^-1 e,   e = target - x(q),

    a damped least-squares (minimum-norm) step, shortened to at most ``max_step``
    (0.5 rad: the solution stays on the branch it starts on); a step that does not
    reduce |e| is rejected and mu raised (x4), an accepted one lowers it (/3). The
    |e|^2 term (Yamashita & Fukushima 2001) damps far from the solution and vanishes
    near it.
    """
    max_step = 0.5
    zero = jnp.zeros_like(q0)
    f = lambda q: _hand_derivatives(model, i, point, q, zero, zero, zero)[0]  # noqa: E731
    dtype = q0.dtype
    eye = jnp.eye(2, dtype=dtype)

    def cond(s):
        q, e, mu, it = s
        return (it < max_iter) & (jnp.sum(e**2) > tol**2)

    def body(s):
        q, e, mu, it = s
        J = jax.jacfwd(f)(q)
        e2 = jnp.sum(e**2)
        A = J @ J.T + (damping**2 + mu * e2) * eye
        dq = J.T @ jnp.linalg.solve(A, e)
        n = jnp.sqrt(jnp.sum(dq**2))
        q_new = q + dq * jnp.minimum(1.0, max_step / jnp.where(n > 0, n, 1.0))  # a trust region
        e_new = target - f(q_new)
        ok = jnp.sum(e_new**2) < e2
        return (jnp.where(ok, q_new, q), jnp.where(ok, e_new, e),
                jnp.where(ok, jnp.maximum(mu / 3, 1e-8), mu * 4), it + 1)

    s0 = (q0, target - f(q0), jnp.asarray(1.0, dtype), 0)
    q, e, _, it = jax.lax.while_loop(cond, body, s0)
    # angles into [-pi, pi) (the same pose); base translations untouched
    nb = model.nbase
    return q.at[nb:].set(jnp.mod(q[nb:] + jnp.pi, 2 * jnp.pi) - jnp.pi), jnp.sqrt(jnp.sum(e**2)), it


class IKResult(NamedTuple):
    """What :func:`inverse_kinematics` returns with ``full_output=True``.

    Attributes:
      q: (..., dof) the coordinates (as returned without ``full_output``).
      error: (...) the hand's remaining distance from the (projected) target, m.
      iterations: (...) Levenberg-Marquardt iterations run.
      converged: (...) bool, error <= tol.
    """

    q: jax.Array
    error: jax.Array
    iterations: jax.Array
    converged: jax.Array


def _number(name, v, unit):
    """v as a float; ValueError unless a finite real number > 0."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) and not (
            isinstance(v, (np.ndarray, jax.Array)) and v.ndim == 0 and v.dtype.kind in "fiu"):
        raise ValueError(f"{name} must be a number > 0 ({unit}), got {v!r}")
    v = float(v)
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{name} must be > 0 and finite ({unit}), got {v!r}")
    return v


def inverse_kinematics(model: Model, target, q0=None, *, segment: Segment = -1, point=None,
                       damping: float | None = None, tol: float | None = None, max_iter: int = 100,
                       out_of_reach: str = "project", full_output: bool = False):  # fmt: skip
    """Coordinates placing the hand at a target: damped least squares, any chain.

    Levenberg-Marquardt iterations on the hand position error (see ``_ik_solve``):
    from ``q0``, each step solves ``(J J^T + lambda^2 I) y = e`` and moves
    ``dq = J^T y``, the smallest change of the coordinates that removes the error
    (Wampler 1986; Buss 2004, "Introduction to inverse kinematics with Jacobian
    transpose, pseudoinverse and damped least squares methods"). Redundant chains
    (more than two angles) get the solution reached from ``q0``; a two-link arm gets
    the elbow branch of ``q0`` (the root is turned towards the target first, and
    steps are limited to 0.5 rad, so that the solution stays on it).

    Pure JAX inside: ``jax.jit`` and ``jax.vmap`` apply (targets and ``q0`` with any
    leading batch shape are solved in one call).

    Args:
      model: the model (fixed or floating base; a floating base moves its root).
      target: (2,) or (..., 2) hand positions, world frame, m.
      q0: (dof,) or (..., dof) initial coordinates (default: every joint bent 0.5 rad
        relative to its parent, base at its origin). Its root is first turned so that
        the hand points from the base at the target (the joints keep their bends), so
        a two-link arm keeps the elbow branch of q0 (default: ``elbow="up"``). A
        straight or folded q0 (e.g. zeros: no joint then moves the hand along the
        arm, and no damped least-squares step leaves the line) is first bent as the
        default is, where the hand is not already at the target.
      segment, point: the hand, as in :func:`hand_position` (default: the distal end
        of the last segment).
      damping: lambda's floor, m (default 1e-6 times the workspace size: a pose at a
        singularity, e.g. a target on the boundary, is still met to about 1e-10 m;
        larger values give smoother but less exact solutions there).
      tol: stop when the position error is below tol, m (default 1e-12 times the
        workspace size in float64, 1e-6 times in float32).
      max_iter: most iterations (default 100).
      out_of_reach: what to do with a target outside the workspace annulus
        (:func:`workspace`): "project" (default) moves it radially onto the boundary
        and warns (``RuntimeWarning``), as the multibody notes coerce it; "raise"
        raises ValueError. Both check concrete targets before solving; under your own
        ``jit``/``vmap`` the targets are traced, "project" projects without a warning
        and "raise" raises at trace time (the values are unknown).
      full_output: also return the remaining error, the iterations and a
        ``converged`` flag per target (an :class:`IKResult`).

    Returns:
      (..., dof) coordinates with the hand at the (projected) target, angles wrapped
      into [-pi, pi); with ``full_output``, an :class:`IKResult`. A solve that ends
      with the hand farther than ``tol`` from its target (``max_iter`` reached) is
      reported: in ``IKResult.converged``, and without ``full_output`` by a
      ``RuntimeWarning`` (concrete inputs; under jit/vmap use ``full_output``).

    Raises:
      ValueError: bad shapes, non-finite inputs, an unknown ``out_of_reach``, a
        ``damping`` or ``tol`` that is not a number > 0, a ``max_iter`` that is not
        an int >= 1, batches of ``target`` and ``q0`` that do not broadcast, or an
        out-of-reach target with ``out_of_reach="raise"``.
    """
    if out_of_reach not in ("project", "raise"):
        raise ValueError(f"out_of_reach must be 'project' or 'raise', got {out_of_reach!r}")
    if damping is not None:
        damping = _number("damping", damping, "m")
    if tol is not None:
        tol = _number("tol", tol, "m")
    if isinstance(max_iter, (bool, np.bool_)) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    i, point = _hand_point(model, segment, point)
    target = jnp.asarray(target) if isinstance(target, jax.core.Tracer) else np.asarray(target)
    if target.ndim < 1 or target.shape[-1] != 2:
        raise ValueError(f"target must have shape (2,) or (..., 2): hand positions x, y (m), got {tuple(target.shape)}")
    check_finite(target, "target")
    if q0 is not None and not isinstance(q0, (jax.Array, np.ndarray)):
        q0 = np.asarray(q0)
    dtype = _float_dtype(target) if q0 is None else _float_dtype(target, q0)
    aim = True
    q0 = _default_q0(model, dtype) if q0 is None else check_batch(model, q0, "q0")
    try:
        lead = np.broadcast_shapes(target.shape[:-1], q0.shape[:-1])
    except ValueError:
        raise ValueError(f"the batches of target {tuple(target.shape[:-1])} and q0 {tuple(q0.shape[:-1])} do not "
                         "broadcast") from None

    fixed = model.base == "fixed"
    if fixed:
        traced = isinstance(target, jax.core.Tracer) or any(
            isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(model))
        if traced:
            if out_of_reach == "raise":
                raise ValueError("out_of_reach='raise' checks the target values, which are unknown under "
                                 "jit/vmap: call inverse_kinematics outside the transformation, or use 'project'")
            r_min = r_max = None
        else:
            r_min, r_max = workspace(model, segment=segment, point=None if point is None else np.asarray(point))
            r = np.hypot(*np.moveaxis(np.asarray(target, float) - np.asarray(model.origin, float), -1, 0))
            slack = 1e-12 * max(r_max, 1.0)
            bad = (r > r_max + slack) | (r < r_min - slack)
            if np.any(bad):
                where = np.flatnonzero(np.atleast_1d(bad))
                j = int(where[0])
                msg = (f"{where.size} target(s) out of reach of the hand on segment {i} (workspace "
                       f"{r_min:.4g} m <= |p - origin| <= {r_max:.4g} m); first: {np.asarray(target, float).reshape(-1, 2)[j]} m "
                       f"(flat index {j}), |p - origin| = {np.atleast_1d(r).ravel()[j]:.4g} m")
                if out_of_reach == "raise":
                    raise ValueError(msg)
                warnings.warn(msg + ": projected onto the workspace boundary", RuntimeWarning, stacklevel=2)
    scale = 1.0 if not fixed or r_max is None else max(r_max, 1e-3)
    if damping is None:
        damping = 1e-6 * scale
    if tol is None:
        tol = (1e-12 if jnp.dtype(dtype) == jnp.float64 else 1e-6) * scale
    q, err, it = _ik_batched(model, jnp.asarray(target, dtype), jnp.asarray(q0, dtype), tuple(lead), i,
                             None if point is None else point.astype(dtype), jnp.asarray(damping, dtype),
                             jnp.asarray(tol, dtype), int(max_iter), aim)
    converged = err <= jnp.asarray(tol, err.dtype)
    if full_output:
        return IKResult(q, err, it, converged)
    if not isinstance(converged, jax.core.Tracer) and not bool(np.all(converged)):
        bad = ~np.atleast_1d(np.asarray(converged)).ravel()
        j = int(np.argmax(bad))
        e_j = float(np.atleast_1d(np.asarray(err)).ravel()[j])
        warnings.warn(f"inverse_kinematics: {int(bad.sum())} of {bad.size} solve(s) did not converge in "
                      f"max_iter={int(max_iter)} iterations (first: flat index {j}, hand {e_j:.3g} m from its "
                      f"target, tol {float(tol):.3g} m): "
                      "raise max_iter or give a q0 nearer the solution (full_output=True returns the flags)",
                      RuntimeWarning, stacklevel=2)
    return q


def _aim(model: Model, q0, target, i: int, point):
    """q0 with the root turned so that the hand points from the base at the target."""
    zero = jnp.zeros_like(q0)
    f = lambda q: _hand_derivatives(model, i, point, q, zero, zero, zero)[0]  # noqa: E731
    base = q0[:2] if model.base == "floating" else model.origin
    h = f(q0) - base
    d = target - base
    turn = jnp.arctan2(d[1], d[0]) - jnp.arctan2(h[1], h[0])
    nb = model.nbase
    if model.coordinates == "relative":  # the root angle turns the whole tree
        return q0.at[nb].add(turn)
    return q0.at[nb:].add(turn)


@functools.partial(precise_jit, static_argnames=("lead", "i", "max_iter", "aim"))
def _ik_batched(model, target, q0, lead, i, point, damping, tol, max_iter, aim):
    """Projection onto the workspace and the solve, vmapped over the flattened batch."""
    m = model.astype(target.dtype)
    t = jnp.broadcast_to(target, lead + (2,)).reshape(-1, 2)
    q = jnp.broadcast_to(q0, lead + (model.dof,)).reshape(-1, model.dof)
    if model.base == "fixed":
        lo, hi = _traced_radii(m, i, point)
        t = _project(t, m.origin, lo, hi)
    if aim:
        q = jax.vmap(lambda qq, tt: _aim(m, qq, tt, i, point))(q, t)
        # a straight start (e.g. q0 = 0) bent, then aimed again
        q = jax.vmap(lambda qq, tt: _unbent(m, qq, tt, i, point, tol))(q, t)
    solve = lambda tt, qq: _ik_solve(m, tt, qq, i, point, damping, tol, max_iter)  # noqa: E731
    q, err, it = jax.vmap(solve)(t, q)
    return q.reshape(lead + (model.dof,)), err.reshape(lead), it.reshape(lead)

