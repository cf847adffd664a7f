"""Physical <-> barycentric segment parameters, their consistency, and the fit's log
coordinates.

Per segment i the barycentric parameters are pi_i = (m, m c_along, m c_across, J)
with J = I + m |c|^2 the moment of inertia about the proximal joint; the physical
parameters are (mass kg, com_along m, com_across m, inertia kg m^2 about the centre
of mass). The consistent fit works in z = (log(m - floor), c_along, c_across,
log(I - floor)), so that mass and inertia stay positive.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..model import Model, replace_unchecked


PARAMETERS = ("m", "mx", "my", "J")
#: Physical parameters of one segment, in the order of every (n, 4) array.
PHYSICAL = ("mass", "com_along", "com_across", "inertia")
#: What a regressor can be built for.
QUANTITIES = ("inverse_dynamics", "joint_moments", "joint_reactions")





def parameter_names(model: Model) -> tuple:
    """Names of the (4 n,) barycentric parameters: ``m[seg], mx[seg], my[seg], J[seg]``."""
    return tuple(f"{p}[{s}]" for s in model.names for p in PARAMETERS)


def _physical_names(model: Model) -> tuple:
    return tuple(f"{p}[{s}]" for s in model.names for p in PHYSICAL)


def _xp(x):
    return np if isinstance(x, np.ndarray) else jnp


def _pi_from_physical(phys):
    """(..., n, 4) physical (m, cx, cy, I) -> (..., 4 n) barycentric (m, m cx, m cy, I + m |c|^2).
    NumPy in, NumPy out (no compilation); JAX arrays and tracers stay JAX."""
    xp = _xp(phys)
    m, cx, cy, inertia = phys[..., 0], phys[..., 1], phys[..., 2], phys[..., 3]
    pi = xp.stack([m, m * cx, m * cy, inertia + m * (cx * cx + cy * cy)], -1)
    return pi.reshape(pi.shape[:-2] + (-1,))


def _physical_from_pi(pi):
    """(..., 4 n) barycentric -> (..., n, 4) physical; no check (mass may be <= 0)."""
    xp = _xp(pi)
    p = pi.reshape(pi.shape[:-1] + (-1, 4))
    m = p[..., 0]
    cx, cy = p[..., 1] / m, p[..., 2] / m
    return xp.stack([m, cx, cy, p[..., 3] - m * (cx * cx + cy * cy)], -1)


def to_physical(model: Model):
    """(segments, 4) physical parameters: mass kg, com along and across m, inertia kg m^2
    about the centre of mass (a NumPy array for a concrete model, JAX under tracing)."""
    leaves = (model.mass, model.com, model.inertia)
    xp = jnp if any(isinstance(x, jax.core.Tracer) for x in leaves) else np
    com = xp.asarray(model.com)
    return xp.stack([xp.asarray(model.mass), com[:, 0], com[:, 1], xp.asarray(model.inertia)], -1)


def to_parameters(model: Model):
    """Barycentric parameters pi, (4 * segments,) (NumPy for a concrete model).

    For each segment in order: m (kg), m c_along, m c_across (kg m; c from the
    proximal joint) and J = I + m |c|^2 (kg m^2, the moment of inertia about the
    proximal joint). Traceable (the model's parameters may be traced).
    """
    return _pi_from_physical(to_physical(model))


def _with_physical(model: Model, phys) -> Model:
    """The model with (n, 4) physical parameters, unchecked (traceable)."""
    return replace_unchecked(model, mass=phys[:, 0], com=phys[:, 1:3], inertia=phys[:, 3])


def from_physical(model: Model, phys) -> Model:
    """The model with new (segments, 4) physical parameters (mass, com_along, com_across,
    inertia); checked like a new model when the values are concrete."""
    n = model.segments
    if isinstance(phys, jax.core.Tracer):
        return _with_physical(model, phys)
    phys = np.asarray(phys, dtype=float)
    if phys.shape != (n, 4):
        raise ValueError(f"physical parameters must have shape ({n}, 4) (mass, com_along, com_across, "
                         f"inertia per segment), got {phys.shape}")  # fmt: skip
    return model.replace(mass=phys[:, 0], com=phys[:, 1:3], inertia=phys[:, 3])


class Consistency(NamedTuple):
    """Physical consistency of barycentric parameters.

    Attributes:
      ok: True when every mass and every inertia about the centre of mass is > 0.
      mass: (segments,) kg.
      inertia: (segments,) inertia about the centre of mass, J - |m c|^2 / m, kg m^2.
      problems: one readable line per violated condition (empty when ok).
    """

    ok: bool
    mass: np.ndarray
    inertia: np.ndarray
    problems: tuple


def consistency(model: Model, pi=None) -> Consistency:
    """Check mass > 0 and inertia about the centre of mass > 0 for every segment.

    Args:
      model: the model (names; its own parameters when ``pi`` is None).
      pi: optional (4 * segments,) barycentric parameters to check instead.

    Returns:
      :class:`Consistency`.
    """
    pi = to_parameters(model) if pi is None else pi
    pi = _check_pi(model, pi)
    p = pi.reshape(-1, 4)
    m = p[:, 0]
    problems = []
    with np.errstate(divide="ignore", invalid="ignore"):
        inertia = p[:, 3] - (p[:, 1] ** 2 + p[:, 2] ** 2) / m
    for i, s in enumerate(model.names):
        if not m[i] > 0:
            problems.append(f"segment {i} ({s!r}): mass {m[i]:.6g} kg is not > 0")
        elif not inertia[i] > 0:
            problems.append(f"segment {i} ({s!r}): inertia about the centre of mass J - |m c|^2/m = "
                            f"{inertia[i]:.6g} kg m^2 is not > 0")  # fmt: skip
    return Consistency(not problems, m, inertia, tuple(problems))


def _check_pi(model: Model, pi) -> np.ndarray:
    p = np.asarray(pi, dtype=float)
    if p.shape != (4 * model.segments,):
        raise ValueError(f"pi must have shape ({4 * model.segments},) (m, mx, my, J per segment), got {p.shape}")
    if not np.isfinite(p).all():
        k = int(np.flatnonzero(~np.isfinite(p))[0])
        raise ValueError(f"pi is not finite at {parameter_names(model)[k]}: {p[k]}")
    return p


def from_parameters(model: Model, pi) -> Model:
    """The model with barycentric parameters ``pi`` (4 * segments,).

    Concrete values are checked (:func:`consistency`): a ValueError names each
    segment whose mass or inertia about the centre of mass is not positive. Traced
    values (inside jit or grad) are used as they are.
    """
    if isinstance(pi, jax.core.Tracer):
        return _with_physical(model, _physical_from_pi(pi))
    c = consistency(model, pi)
    if not c.ok:
        raise ValueError("physically inconsistent parameters: " + "; ".join(c.problems))
    return from_physical(model, _physical_from_pi(_check_pi(model, pi)))


# -------------------------------------------------------------------- regressor


# Mass and inertia are floor + exp(z): positive by construction, and never rounded to
# zero when the data push one to the boundary of physical consistency (the floor is
# _FLOOR times the segment's scale: the starting mass, and that mass times L^2).
_FLOOR = 1e-9


def _floor(model: Model) -> np.ndarray:
    """(n, 4) lower bounds of the fit's mass and inertia (0 for the centre of mass)."""
    m = np.asarray(model.mass, dtype=float)
    L = np.maximum(np.asarray(model.length, dtype=float), 1e-3)
    out = np.zeros((model.segments, 4))
    out[:, 0], out[:, 3] = _FLOOR * m, _FLOOR * m * L * L
    return out


def _z_from_physical(phys, floor=0.0):
    xp = _xp(phys)
    f = xp.broadcast_to(xp.asarray(floor), phys.shape)
    return xp.stack([xp.log(phys[..., 0] - f[..., 0]), phys[..., 1], phys[..., 2], xp.log(phys[..., 3] - f[..., 3])], -1)


def _physical_from_z(z, floor=0.0):
    xp = _xp(z)
    f = xp.broadcast_to(xp.asarray(floor), z.shape)
    return xp.stack([f[..., 0] + xp.exp(z[..., 0]), z[..., 1], z[..., 2], f[..., 3] + xp.exp(z[..., 3])], -1)


def _dpi_dz(phys: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """(4 n, 4 n) Jacobian of pi with respect to z = (log(m - floor), cx, cy, log(I - floor))."""
    n = phys.shape[0]
    out = np.zeros((4 * n, 4 * n))
    for i, (m, cx, cy, inertia) in enumerate(phys):
        b = 4 * i
        em, ei = m - floor[i, 0], inertia - floor[i, 3]  # d m / d z0, d I / d z3
        blk = np.array([[em, 0, 0, 0], [em * cx, m, 0, 0], [em * cy, 0, m, 0],
                        [em * (cx * cx + cy * cy), 2 * m * cx, 2 * m * cy, ei]])  # fmt: skip
        out[b:b + 4, b:b + 4] = blk
    return out
