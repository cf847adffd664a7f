"""The classical Runge-Kutta step (RK4) of a second-order system, written once for
:func:`jaxmb.simulate` and :func:`jaxmb.maximal.simulate_maximal`.

For y'' = f(t, y, y') the step of size dt from (y, v) at time t evaluates four stages
s = 1..4 at offsets a_s = (0, 1/2, 1/2, 1) of dt,

    y_s = y + a_s dt k_(s-1),   v_s = v + a_s dt l_(s-1),   (k_s, l_s) = (v_s, f(t + a_s dt, y_s, v_s)),

(k_0 = l_0 = 0) and advances by dt/6 sum_s w_s (k_s, l_s) with w = (1, 2, 2, 1). The
Butcher tableau is sub-diagonal, so each stage needs only the previous one.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# stage offsets a_s (of dt) and weights w_s (of dt / 6)
RK4_STAGES = np.array([[0.0, 1.0], [0.5, 2.0], [0.5, 2.0], [1.0, 1.0]])


def rk4_scan(f, t, y, v, dt, dtype):
    """One RK4 step with the four stages as a ``lax.scan`` (``f`` traced once).

    Args:
      f: ``f(t, y, v) -> (acc, out)``: the acceleration (shaped like ``y``) and any
        per-stage output (a pytree, or None).
      t: the step's start time, s.
      y, v: the state (any shape) and its rate.
      dt: the step, s.
      dtype: the dtype of the stage table.

    Returns:
      (y_next, v_next, out0): ``out0`` is the first stage's ``out``, that of the
      state (t, y, v) itself.
    """

    def stage(carry, coef):
        (ky, kv), (sy, sv) = carry
        a_s, w_s = coef[0], coef[1]
        ys, vs = y + a_s * dt * ky, v + a_s * dt * kv
        acc_s, out = f(t + a_s * dt, ys, vs)
        return ((vs, acc_s), (sy + w_s * vs, sv + w_s * acc_s)), out

    zero = jnp.zeros_like(y)
    ((_, _), (sy, sv)), outs = jax.lax.scan(stage, ((zero, zero), (zero, zero)), jnp.asarray(RK4_STAGES, dtype))
    out0 = jax.tree_util.tree_map(lambda x: x[0], outs)
    return y + dt / 6 * sy, v + dt / 6 * sv, out0


def rk4_unrolled(f, t, y, v, dt):
    """One RK4 step with the four stages written out (``f(t, y, v) -> acc`` traced four
    times: faster for small right-hand sides). Returns (y_next, v_next)."""
    ky = kv = None
    sy = sv = jnp.zeros_like(y)
    for a_s, w_s in RK4_STAGES.tolist():  # Python floats: float32 stays float32
        ys, vs = (y, v) if ky is None else (y + a_s * dt * ky, v + a_s * dt * kv)
        ky, kv = vs, f(t + a_s * dt, ys, vs)
        sy, sv = sy + w_s * ky, sv + w_s * kv
    return y + dt / 6 * sy, v + dt / 6 * sv
