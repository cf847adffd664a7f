"""Forward simulation: integrate forward dynamics with ``lax.scan``."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .dynamics import _forward
from .kinematics import check_loads, check_vector, prepare
from .model import Model

__all__ = ["simulate", "Trajectory"]

# classical Runge-Kutta: stage offsets a_s (of dt) and weights w_s (of dt / 6)
RK4_STAGES = np.array([[0.0, 1.0], [0.5, 2.0], [0.5, 2.0], [1.0, 1.0]])


class Trajectory(NamedTuple):
    """A simulated motion; every array has steps + 1 samples, the first the initial state.

    Attributes:
      t: (steps + 1,) time, s.
      q: (steps + 1, dof) generalized coordinates.
      qd: (steps + 1, dof) generalized velocities.
    """

    t: jax.Array
    q: jax.Array
    qd: jax.Array


def simulate(
    model: Model,
    q0,
    qd0,
    tau,
    dt: float,
    *,
    loads=None,
    steps: int | None = None,
    method: str = "rk4",
) -> Trajectory:
    """Integrate M qdd + C + G + E = tau from (q0, qd0).

    Args:
      model: the model.
      q0, qd0: (dof,) initial coordinates and velocities.
      tau: generalized forces: a (steps, dof) array (held constant over each step),
        a (dof,) constant, or a function ``tau(t, q, qd) -> (dof,)`` (a controller,
        evaluated at every stage of the integrator; needs ``steps``).
      dt: time step, s.
      loads: optional external loads: None, a (segments, 3) constant, a
        (steps, segments, 3) array, or a function ``loads(t, q, qd) -> (segments, 3)``
        (e.g. a contact model).
      steps: number of steps; taken from ``tau`` or ``loads`` when they are arrays
        over steps.
      method: "rk4" (classical Runge-Kutta, 4th order) or "euler" (semi-implicit
        Euler: qd += dt qdd(q, qd); q += dt qd; first order. It is symplectic only
        when M is constant and qdd does not depend on qd, e.g. a single pendulum; for
        a multibody chain its energy error grows linearly with time and dt.)

    Returns:
      :class:`Trajectory` with steps + 1 samples.
    """
    if method not in ("rk4", "euler"):
        raise ValueError(f"method must be 'rk4' or 'euler', got {method!r}")
    q0 = check_vector(model, q0, "q0")
    qd0 = check_vector(model, qd0, "qd0")
    model, dtype = prepare(model, q0, qd0)
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)
    n, dof = model.segments, model.dof

    def over_steps(x, shape, name):
        """Classify an input: (kind, array) with kind 'fn', 'const' or 'steps'."""
        if callable(x):
            return "fn", x
        x = jnp.asarray(x, dtype)
        if x.shape == shape:
            return "const", x
        if x.ndim == len(shape) + 1 and x.shape[1:] == shape:
            return "steps", x
        raise ValueError(
            f"{name} must be a function, a {shape} constant or a (steps, {', '.join(map(str, shape))}) "
            f"array, got shape {x.shape}"
        )

    tk, tv = over_steps(tau, (dof,), "tau")
    if loads is None:
        lk, lv = "const", jnp.zeros((n, 3), dtype)
    else:
        lk, lv = over_steps(loads, (n, 3), "loads")
    lengths = {x.shape[0] for k, x in ((tk, tv), (lk, lv)) if k == "steps"}
    if len(lengths) > 1:
        raise ValueError(f"tau and loads have different numbers of steps: {sorted(lengths)}")
    if steps is None:
        if not lengths:
            raise ValueError("steps is required when neither tau nor loads is an array over steps")
        steps = lengths.pop()
    elif lengths and steps != next(iter(lengths)):
        raise ValueError(f"steps={steps} but the arrays over steps have {next(iter(lengths))}")
    steps = int(steps)
    dt = jnp.asarray(dt, dtype)

    def value(kind, v, k, t, q, qd, shape, name):
        if kind == "fn":
            out = jnp.asarray(v(t, q, qd))
            if out.shape != shape:
                raise ValueError(f"{name}(t, q, qd) must return shape {shape}, got {out.shape}")
            return out.astype(dtype)
        return v if kind == "const" else v[k]

    def acc(k, t, q, qd):
        tau_k = value(tk, tv, k, t, q, qd, (dof,), "tau")
        loads_k = check_loads(model, value(lk, lv, k, t, q, qd, (n, 3), "loads"), dtype)
        return _forward(model, q, qd, tau_k, loads_k)

    def step(state, k):
        q, qd = state
        t = k * dt
        if method == "euler":
            qd = qd + dt * acc(k, t, q, qd)
            q = q + dt * qd
        else:
            # classical RK4; its Butcher tableau is sub-diagonal, so the four stages run
            # as a scan (forward dynamics is traced once, not four times):
            # stage s evaluates at (q + a_s dt kq, qd + a_s dt kv), time t + a_s dt,
            # and the step adds dt/6 * sum_s w_s (velocity_s, acceleration_s).
            def stage(carry, coef):
                (kq, kv), (sq, sv) = carry
                a_s, w_s = coef[0], coef[1]
                qs, vs = q + a_s * dt * kq, qd + a_s * dt * kv
                acc_s = acc(k, t + a_s * dt, qs, vs)
                return ((vs, acc_s), (sq + w_s * vs, sv + w_s * acc_s)), None

            zero = jnp.zeros_like(q)
            ((_, _), (sq, sv)), _ = jax.lax.scan(stage, ((zero, zero), (zero, zero)), jnp.asarray(RK4_STAGES, dtype))
            q = q + dt / 6 * sq
            qd = qd + dt / 6 * sv
        return (q, qd), (q, qd)

    _, (qs, qds) = jax.lax.scan(step, (q0, qd0), jnp.arange(steps))
    t = jnp.arange(steps + 1, dtype=dtype) * dt
    return Trajectory(t, jnp.concatenate([q0[None], qs]), jnp.concatenate([qd0[None], qds]))
