"""A movement at the nodes: its derivatives, joint torques and hand path, and the costs of it."""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .._checks import _float_dtype, check_finite
from ..dynamics import inverse_dynamics, joint_moments
from ..model import Model, Segment
from ._basis import _basis_np, _check_ends
from ._options import _check_int
from ._hand import _hand_derivatives, _hand_point
from ._plans import _check_duration


class Movement(NamedTuple):
    """A movement sampled at the nodes: what a cost function sees.

    Attributes:
      t: (nodes,) times, s (Gauss-Legendre points in the optimisation by default;
        equally spaced, ends included, with ``quadrature="trapezoid"``).
      weights: (nodes,) quadrature weights, s: int f dt = sum(weights f).
      q, qd, qdd, qddd: (nodes, dof) coordinates and their first three time
        derivatives (rad, rad/s, rad/s^2, rad/s^3; m for base translations).
      tau: (nodes, segments) joint torques (:func:`jaxmb.joint_moments`; the
        generalized forces, (nodes, dof), for joint angles with a fixed base), N m.
      tau_dot: their time derivative, N m/s.
      hand, hand_vel, hand_acc, hand_jerk: (nodes, 2) the hand's position and first
        three time derivatives (m, m/s, m/s^2, m/s^3).
    """

    t: jax.Array
    weights: jax.Array
    q: jax.Array
    qd: jax.Array
    qdd: jax.Array
    qddd: jax.Array
    tau: jax.Array
    tau_dot: jax.Array
    hand: jax.Array
    hand_vel: jax.Array
    hand_acc: jax.Array
    hand_jerk: jax.Array

    def integral(self, f):
        """int sum(f) dt over the movement: f (nodes, ...) summed over its other axes."""
        f = jnp.asarray(f)
        return jnp.sum(self.weights * f.reshape(f.shape[0], -1).sum(-1))


def _sq(x):
    return x**2


#: The built-in costs, name -> function of a :class:`Movement` (compose your own from them).
COSTS: dict[str, Callable[[Movement], jax.Array]] = {
    "hand_jerk": lambda m: m.integral(_sq(m.hand_jerk)),
    "joint_jerk": lambda m: m.integral(_sq(m.qddd)),
    "torque": lambda m: m.integral(_sq(m.tau)),
    "torque_change": lambda m: m.integral(_sq(m.tau_dot)),
}


_NAMES = tuple(sorted(COSTS))

#: the derivative order d of each built-in cost's leading term |A(q) q^(d)|^2 (A: see _metric)
_LEADING = {"hand_jerk": 3, "joint_jerk": 3, "torque": 2, "torque_change": 3}


# ------------------------------------------------------------ one movement's path


@dataclasses.dataclass(frozen=True)
class _Config:
    cost: Callable | None  # None: the weighted built-in costs
    nodes: int
    size: int
    method: str
    maxiter: int
    gtol: float
    ftol: float
    memory: int
    learning_rate: float
    linesearch_steps: int
    segment: int
    point: tuple | None
    quadrature: str = "gauss"
    terms: tuple | None = None  # built-in costs evaluated (those of nonzero weight); None: all
    precondition: bool = True
    ends: int = 3  # end conditions: 3 (q, qd, qdd) or 2 (q, qd), see _basis_np


def _derivs(q_start, q_end, duration, coef, base, psi):
    """q, qd, qdd, qddd (nodes, dof) at the nodes of the basis (base, psi) (see basis_matrices)."""
    dq = q_end - q_start
    out = [(base[:, d, None] * dq + psi[d] @ coef) / duration**d for d in range(4)]
    out[0] = out[0] + q_start
    return out


def _joint_torques(model: Model, q, qd, qdd):
    """The joint torques of the torque costs: the generalized forces in joint angles
    with a fixed base, the joint moments otherwise (see the module docstring)."""
    if model.coordinates == "relative" and model.nbase == 0:
        return inverse_dynamics(model, q, qd, qdd, gradient="autodiff")
    return joint_moments(model, q, qd, qdd, gradient="autodiff")


def _nodal(model: Model, cfg: _Config, terms, q, qd, qdd, qddd):
    """tau, tau_dot and the hand's four derivatives at the nodes; with ``terms`` (built-in
    cost names) only what they need is computed, the other fields are None."""
    idf = functools.partial(_joint_torques, model)
    need = set(_NAMES if terms is None else terms)
    tau = tau_dot = None
    if "torque_change" in need:
        tau, tau_dot = jax.jvp(idf, (q, qd, qdd), (qd, qdd, qddd))
    elif "torque" in need:
        tau = idf(q, qd, qdd)
    hand = (None,) * 4
    if "hand_jerk" in need:
        point = None if cfg.point is None else jnp.asarray(cfg.point, q.dtype)
        hand = _hand_derivatives(model, cfg.segment, point, q, qd, qdd, qddd)
    return (tau, tau_dot, *hand)


def _movement(model: Model, q_start, q_end, duration, coef, cfg: _Config, quadrature=None,
              terms: tuple | None = None) -> Movement:  # fmt: skip
    """The Movement of coefficients ``coef``; with ``terms`` (built-in cost names) only
    what they need is computed (the other fields are None)."""
    dtype = q_start.dtype
    s, w, base, psi = (jnp.asarray(x, dtype) for x in _basis_np(cfg.nodes, cfg.size, quadrature or cfg.quadrature,
                                                                        cfg.ends))
    q, qd, qdd, qddd = _derivs(q_start, q_end, duration, coef, base, psi)
    tau, tau_dot, *hand = _nodal(model, cfg, terms, q, qd, qdd, qddd)
    return Movement(s * duration, w * duration, q, qd, qdd, qddd, tau, tau_dot, *hand)


def movement(model: Model, q_start, q_end, duration, coef, *, nodes: int = 100, segment: Segment = -1,
             point=None, quadrature: str = "trapezoid", end_conditions: int = 3) -> Movement:  # fmt: skip
    """Evaluate one parametrised movement at its nodes (see :mod:`jaxmb.optimal`).

    Args:
      model: the model.
      q_start, q_end: (dof,) end postures (real, finite).
      duration: movement time T, s (a finite number > 0).
      coef: (K, dof) correction coefficients (e.g. ``OptimalMovement.coef``; zeros
        give the joint-space minimum-jerk movement).
      nodes: number of times.
      segment, point: the hand, as in :func:`jaxmb.optimal.hand_position`.
      quadrature: "trapezoid" (default: equally spaced times, ends included) or
        "gauss" (Gauss-Legendre points, as the optimisation uses them).
      end_conditions: the basis the coefficients belong to: 3 (default: zero end
        velocity and acceleration) or 2 (zero end velocity); give an optimisation's
        ``OptimalMovement.end_conditions`` with its ``coef`` (2 for the minimum torque).

    Returns:
      a :class:`Movement` (pure JAX: jit, vmap and grad apply; the values of traced
      arguments are not checked, their shapes are).

    Raises:
      ValueError: q_start, q_end not of shape (dof,), coef not (K, dof), duration not
        a scalar, any of them not real or (concrete) not finite, a (concrete) duration
        not > 0, an unknown quadrature or end_conditions, nodes < 2.
    """
    q_start, q_end, duration, coef = (np.asarray(x) if not isinstance(x, jax.Array) else x
                                      for x in (q_start, q_end, duration, coef))
    dof = model.dof
    for name, x, shape, what in (("q_start", q_start, (dof,), f"({dof},)"), ("q_end", q_end, (dof,), f"({dof},)"),
                                 ("coef", coef, None, f"(K, dof={dof})"), ("duration", duration, (), "() (a scalar)")):
        if (x.shape != shape) if shape is not None else (x.ndim != 2 or x.shape[1] != dof or x.shape[0] < 1):
            raise ValueError(f"{name} must have shape {what}, got {tuple(x.shape)}")
        if x.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be real (an array of numbers), got dtype {x.dtype}")
        if name == "duration":
            _check_duration(x)
        else:
            check_finite(x, name)
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    ends = _check_ends(end_conditions)
    i, point = _hand_point(model, segment, point)
    dtype = _float_dtype(q_start, q_end, coef)
    cfg = _Config(None, _check_int("nodes", nodes, 2), coef.shape[0], "lbfgs", 1, 0.0, 0.0, 1, 0.0, 1, i,
                  None if point is None else tuple(float(v) for v in np.asarray(point)), quadrature, ends=ends)
    return _movement_jit(model.astype(dtype), jnp.asarray(q_start, dtype), jnp.asarray(q_end, dtype),
                         jnp.asarray(duration, dtype), jnp.asarray(coef, dtype), cfg)


_movement_jit = precise_jit(_movement, static_argnames=("cfg", "quadrature"))


def _cost_fn(cfg: _Config, weights):
    """The cost of a Movement: the user's function, or the weighted built-in costs.

    Built-in costs: the weights are an argument, the names of those with a nonzero
    weight (``cfg.terms``) are static, and only their terms are evaluated (a solver is
    compiled per set of names, not per set of weights)."""
    if callable(cfg.cost):
        user = cfg.cost

        def f(m):
            out = jnp.asarray(user(m))
            if out.shape != ():
                raise ValueError(f"a cost function must return a scalar, got shape {out.shape}")
            return out

        return f
    terms = _NAMES if cfg.terms is None else cfg.terms
    return lambda m: sum(weights[_NAMES.index(name)] * COSTS[name](m) for name in terms)

