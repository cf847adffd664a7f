"""Planned movements in closed form: minimum jerk, two-link inverse kinematics, time derivatives."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def minimum_jerk(x0, x1, duration, t):
    """Minimum-jerk point-to-point movement (Flash & Hogan 1985).

    x(t) = x0 + (x1 - x0) (10 s^3 - 15 s^4 + 6 s^5),  s = t / duration, clipped to [0, 1].

    Args:
      x0, x1: (d,) start and end positions (any unit).
      duration: movement time, s (finite, > 0; checked when concrete).
      t: time, s: a scalar or an array (...,).

    Returns:
      (..., d) positions; differentiate with :func:`time_derivatives`.

    Raises:
      ValueError: a concrete duration that is not a finite number > 0; concrete x0,
        x1 or t that are not finite; x0 and x1 not of one shape (d,).
    """
    _check_duration(duration)
    for name, x in (("x0", x0), ("x1", x1), ("t", t)):
        if not isinstance(x, jax.core.Tracer):
            a = np.asarray(x)
            if a.dtype.kind not in "fiu" or not np.isfinite(a).all():
                raise ValueError(f"{name} must be finite real numbers, got {a.tolist() if a.size <= 8 else a.dtype}")
    if np.shape(x0) != np.shape(x1) or np.ndim(x0) > 1:
        raise ValueError(f"x0 and x1 must be positions of one shape (d,), got {np.shape(x0)} and {np.shape(x1)}")
    x0, x1, t = jnp.asarray(x0), jnp.asarray(x1), jnp.asarray(t)
    s = jnp.clip(t / duration, 0.0, 1.0)[..., None]
    return x0 + (x1 - x0) * (10 * s**3 - 15 * s**4 + 6 * s**5)


def _check_duration(duration):
    """ValueError for a concrete duration (a number or an array of them) that is not
    real, finite and > 0, naming the first bad value's flat index in an array
    (traced: skipped). Shared with :func:`jaxmb.optimize`."""
    if isinstance(duration, jax.core.Tracer):
        return
    d = np.asarray(duration)
    if d.dtype.kind not in "fiu":
        raise ValueError(f"duration must be a finite number > 0 (s) or an array of them, got {duration!r}")
    bad = ~(np.isfinite(d) & (d > 0))
    if bad.any():
        k = int(np.argmax(bad.ravel()))
        raise ValueError(f"duration must be a finite number > 0 (s), got {d.ravel()[k]}"
                         + (f" at flat index {k}" if d.ndim else ""))


def two_link_ik(p, L1, L2, *, elbow: str = "up"):
    """Joint angles (q1 absolute, q2 relative) placing a two-link endpoint at p.

    Args:
      p: (2,) endpoint position relative to the proximal joint, m; must lie in the
        workspace |L1 - L2| <= |p| <= L1 + L2 (at the boundary the inverse is
        singular and its time derivatives are infinite). A concrete point outside
        raises; under ``jit``/``jvp`` (traced values, unknown) a point outside gets
        the arm stretched or folded towards it (the radial projection onto the
        workspace), so check the points beforehand.
      L1, L2: link lengths, m.
      elbow: "up" (q2 > 0, counter-clockwise elbow, as the arm of the notes flexing
        forward) or "down" (q2 < 0).

    Returns:
      (2,) angles q1 (from +x), q2 (relative), rad.

    Raises:
      ValueError: an elbow other than "up" or "down"; a concrete point out of reach.
    """
    if elbow not in ("up", "down"):
        raise ValueError(f"elbow must be 'up' or 'down', got {elbow!r}")
    if not any(isinstance(x, jax.core.Tracer) for x in (p, L1, L2)):
        r, a, b = np.hypot(*np.asarray(p, dtype=float)), abs(float(L1)), abs(float(L2))
        if not (np.isfinite(r).all() and np.isfinite(a) and np.isfinite(b)):
            raise ValueError(f"p, L1 and L2 must be finite, got p = {np.asarray(p).tolist()}, L1 = {L1}, L2 = {L2}")
        slack = 1e-12 * max(a + b, 1.0)
        if not np.all((abs(a - b) - slack <= r) & (r <= a + b + slack)):
            raise ValueError(f"p = {np.asarray(p).tolist()} is out of reach: |p| = {np.asarray(r).tolist()} m, the "
                             f"links reach {abs(a - b):.6g} m <= |p| <= {a + b:.6g} m")
    p = jnp.asarray(p)
    r2 = p[0] ** 2 + p[1] ** 2
    # clipped: a (traced) point out of reach gets the radial projection, not a NaN
    c2 = jnp.clip((r2 - L1**2 - L2**2) / (2 * L1 * L2), -1.0, 1.0)
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

