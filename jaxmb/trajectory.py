"""Planned movements: minimum-jerk trajectories and two-link inverse kinematics.

Derivatives are exact: a joint trajectory ``q(t) = ik(x(t))`` is differentiated in
time with ``jax.jvp``, so no numerical differentiation amplifies noise.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["minimum_jerk", "two_link_ik", "time_derivatives"]


def minimum_jerk(x0, x1, duration, t):
    """Minimum-jerk point-to-point movement (Flash & Hogan 1985).

    x(t) = x0 + (x1 - x0) (10 s^3 - 15 s^4 + 6 s^5),  s = t / duration, clipped to [0, 1].

    Args:
      x0, x1: (d,) start and end positions (any unit).
      duration: movement time, s (> 0).
      t: time, s: a scalar or an array (...,).

    Returns:
      (..., d) positions; differentiate with :func:`time_derivatives`.
    """
    x0, x1, t = jnp.asarray(x0), jnp.asarray(x1), jnp.asarray(t)
    s = jnp.clip(t / duration, 0.0, 1.0)[..., None]
    return x0 + (x1 - x0) * (10 * s**3 - 15 * s**4 + 6 * s**5)


def two_link_ik(p, L1, L2, *, elbow: str = "up"):
    """Joint angles (q1 absolute, q2 relative) placing a two-link endpoint at p.

    Args:
      p: (2,) endpoint position relative to the proximal joint, m; must lie strictly
        inside the workspace |L1 - L2| < |p| < L1 + L2 (at the boundary the inverse is
        singular and its time derivatives are infinite).
      L1, L2: link lengths, m.
      elbow: "up" (q2 > 0, counter-clockwise elbow, as the arm of the notes flexing
        forward) or "down" (q2 < 0).

    Returns:
      (2,) angles q1 (from +x), q2 (relative), rad.
    """
    p = jnp.asarray(p)
    r2 = p[0] ** 2 + p[1] ** 2
    c2 = (r2 - L1**2 - L2**2) / (2 * L1 * L2)
    sign = 1.0 if elbow == "up" else -1.0
    s2 = sign * jnp.sqrt(jnp.clip(1 - c2**2, 0.0, None))
    q2 = jnp.arctan2(s2, c2)
    q1 = jnp.arctan2(p[1], p[0]) - jnp.arctan2(L2 * s2, L1 + L2 * c2)
    return jnp.stack([q1, q2])


def time_derivatives(f, t):
    """Value, first and second time derivative of a smooth function of time.

    Args:
      f: function of a scalar time returning an array.
      t: (T,) times.

    Returns:
      (x, xd, xdd), each (T, ...), by forward-mode differentiation (exact).
    """

    def one(ti):
        d1 = lambda s: jax.jvp(f, (s,), (jnp.ones_like(s),))  # noqa: E731
        (x, xd), (_, xdd) = jax.jvp(d1, (ti,), (jnp.ones_like(ti),))
        return x, xd, xdd

    return jax.vmap(one)(jnp.asarray(t))
