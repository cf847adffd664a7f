"""What optimize returns."""

from __future__ import annotations

import warnings
from typing import NamedTuple

import jax
import numpy as np


class OptimalMovement(NamedTuple):
    """Result of :func:`optimize`; with a batch, every field has its leading shape.

    Attributes:
      t: (..., nodes) times, s: the equally spaced times of each problem, with the
        leading shape of ``duration`` ((nodes,) for a scalar duration, shared by the
        batch; broadcasts against the other fields' batch shape).
      q, qd, qdd: (..., nodes, dof) the optimal movement (rad, rad/s, rad/s^2).
      tau: (..., nodes, segments) joint torques along it (:attr:`Movement.tau`: the
        generalized forces, (..., nodes, dof), for joint angles with a fixed base,
        and the input of :func:`jaxmb.simulate` only then), N m.
      hand: (..., nodes, 2) the hand path, m.
      hand_vel: (..., nodes, 2) the hand velocity, m/s.
      cost: (...) the final cost, in the units of the cost (see :mod:`jaxmb.optimal`).
      history: (..., max_iter + 1) the cost at the start and after every iteration;
        entries after ``iterations`` repeat the final cost.
      iterations: (...) iterations run.
      converged: (...) bool, True for status 0 or 1.
      status: (...) int, an index into :data:`STATUS`.
      grad_norm: (...) largest entry of the gradient of the normalised cost.
      coef: (..., K, dof) the correction coefficients a (see :mod:`jaxmb.optimal`), in
        the basis of ``end_conditions``.
      q_start, q_end: (..., dof) the end postures (from the inverse kinematics with
        ``target="hand"``).
      end_conditions: (...) int, the conditions imposed at each end: 3 (position, zero
        velocity and zero acceleration) or 2 (position and zero velocity; the minimum
        torque); ``jaxmb.optimal.movement(..., coef, end_conditions=...)`` needs it.
    """

    t: jax.Array
    q: jax.Array
    qd: jax.Array
    qdd: jax.Array
    tau: jax.Array
    hand: jax.Array
    hand_vel: jax.Array
    cost: jax.Array
    history: jax.Array
    iterations: jax.Array
    converged: jax.Array
    status: jax.Array
    grad_norm: jax.Array
    coef: jax.Array
    q_start: jax.Array
    q_end: jax.Array
    end_conditions: jax.Array



def _warn_unresolved_hand_jerk(hand, cost, duration, lead, weight: float, basis: int, tol: float = 0.01):
    """Warn where a minimum hand jerk costs more than ``tol`` above its lower bound,
    ``weight * 720 |x1 - x0|^2 / T^5``: the straight minimum-jerk hand path from rest
    to rest (Flash & Hogan), which no hand path with the same ends beats. The excess
    is the basis's error where the straight path lies in the workspace."""
    hand = np.asarray(hand, dtype=float)
    d2 = np.sum((hand[..., -1, :] - hand[..., 0, :]) ** 2, -1)
    T = np.broadcast_to(np.asarray(duration, dtype=float), lead)
    bound = weight * 720.0 * d2 / T**5
    c = np.broadcast_to(np.asarray(cost, dtype=float), lead)
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.where(bound > 0, c / bound - 1.0, 0.0)
    bad = np.isfinite(excess) & (excess > tol)
    if not bad.any():
        return
    k = int(np.argmax(np.where(bad, excess, -np.inf).reshape(-1)))
    where = f", movement {k} of the flattened batch" if bad.size > 1 else ""
    warnings.warn(f"cost='hand_jerk': {int(bad.sum())} of {bad.size} movements cost more than {100 * tol:g} % above "
                  f"720 |x1 - x0|^2 / T^5, the cost of the straight minimum-jerk hand path (largest excess "
                  f"{100 * excess.reshape(-1)[k]:.3g} %{where}): basis={basis} does not resolve them (a reach that "
                  "passes near the shoulder needed basis=60 for 0.1 %), or the straight path leaves the workspace. "
                  "Raise basis= (nodes >= 2 (basis + 3)) and compare", RuntimeWarning, stacklevel=4)  # fmt: skip
