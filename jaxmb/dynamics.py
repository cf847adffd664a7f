"""Dynamics of planar trees in the matrix form of the multibody notes.

    tau = M(q) qdd + C(q, qd) + G(q) + E(q),    E = -J^T F

Everything is derived from the pose map g (see :mod:`jaxmb.kinematics`), with the
block-diagonal ``Mp = diag(m, m, I)`` per segment and the applied wrenches ``h``
(gravity and loads, at the centres of mass):

    M = D^T Mp D,    C = D^T Mp gamma,    tau = D^T (Mp (D qdd + gamma) - h).

The public :func:`inverse_dynamics` uses the O(n) recursive Newton-Euler pass of
:mod:`jaxmb.recursive`; ``method="projection"`` evaluates the formula above with
JAX's forward- and reverse-mode derivatives of g (no dense matrix is formed).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl

from .kinematics import _frames, _pose_acc, _rot, check_loads, check_vector, pose, prepare
from .model import Model, Segment
from .recursive import _rnea

__all__ = [
    "mass_matrix",
    "bias_forces",
    "gravity_forces",
    "external_forces",
    "inverse_dynamics",
    "forward_dynamics",
    "joint_moments",
    "coriolis_matrix",
    "kinetic_energy",
    "potential_energy",
    "total_energy",
    "torque_components",
    "point_load",
    "applied_wrenches",
]


def _inputs(model: Model, *xs, names=("q", "qd", "qdd", "tau")):
    xs = [check_vector(model, x, nm) for x, nm in zip(xs, names)]
    model, dtype = prepare(model, *xs)
    return model, dtype, [x.astype(dtype) for x in xs]


def applied_wrenches(model: Model, loads=None):
    """h (segments, 3): gravity plus loads at the centres of mass, world frame.

    Args:
      model: the model.
      loads: optional (segments, 3) world-frame wrenches (Fx, Fy, Mz), N and N m.

    Returns:
      (segments, 3) applied wrenches (0, -m g, 0) + loads, in the model's dtype.
    """
    loads = check_loads(model, loads, model.mass.dtype)
    grav = jnp.stack([jnp.zeros_like(model.mass), -model.mass * model.gravity, jnp.zeros_like(model.mass)], 1)
    return grav + loads


def _mass_matrix(model: Model, q):
    D = jax.jacfwd(lambda q_: pose(model, q_))(q)  # (n, 3, dof)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)  # diag of Mp
    return jnp.einsum("ika,ik,ikb->ab", D, w, D)


def mass_matrix(model: Model, q):
    """Mass matrix M(q) = D^T Mp D, (dof, dof), symmetric positive definite.

    Args:
      model: the model.
      q: (dof,) generalized coordinates.

    Returns:
      (dof, dof) in kg m^2 (angles), kg m (mixed) and kg (base translations).
    """
    model, _, (q,) = _inputs(model, q)
    return _mass_matrix(model, q)


def bias_forces(model: Model, q, qd):
    """Coriolis and centripetal forces C(q, qd) = D^T Mp gamma, (dof,).

    Computed as ``rnea(q, qd, 0)`` with gravity switched off.
    """
    model, dtype, (q, qd) = _inputs(model, q, qd)
    nog = dataclasses.replace(model, gravity=jnp.zeros_like(model.gravity))
    return _rnea(nog, q, qd, jnp.zeros_like(q), jnp.zeros((model.segments, 3), dtype))[0]


def gravity_forces(model: Model, q):
    """Gravity term G(q) = -D^T h_gravity, (dof,): ``rnea(q, 0, 0)`` without loads."""
    model, dtype, (q,) = _inputs(model, q)
    z = jnp.zeros_like(q)
    return _rnea(model, q, z, z, jnp.zeros((model.segments, 3), dtype))[0]


def external_forces(model: Model, q, loads):
    """External term E(q) = -J^T F = -D^T loads, (dof,).

    Args:
      model: the model.
      q: (dof,) generalized coordinates.
      loads: (segments, 3) world-frame wrenches (Fx, Fy, Mz) at the centres of mass.
    """
    model, dtype, (q,) = _inputs(model, q)
    loads = check_loads(model, loads, dtype)
    _, vjp = jax.vjp(lambda q_: pose(model, q_), q)
    return -vjp(loads)[0]


def _inverse_projection(model: Model, q, qd, qdd, loads):
    """tau = D^T (Mp (D qdd + gamma) - h): a forward then a reverse derivative of g."""
    acc = _pose_acc(model, q, qd, qdd)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    resid = w * acc - applied_wrenches(model, loads)
    _, vjp = jax.vjp(lambda q_: pose(model, q_), q)
    return vjp(resid)[0]


def inverse_dynamics(model: Model, q, qd, qdd, loads=None, *, method: str = "recursive"):
    """Generalized forces tau = M qdd + C + G + E, (dof,).

    Args:
      model: the model.
      q: (dof,) generalized coordinates (m, rad).
      qd: (dof,) velocities (m/s, rad/s).
      qdd: (dof,) accelerations (m/s^2, rad/s^2).
      loads: optional (segments, 3) world-frame wrenches (Fx, Fy, Mz) applied at the
        centres of mass (N, N, N m); see :func:`point_load`.
      method: "recursive" (O(n) Newton-Euler, default) or "projection" (the pose-map
        formula D^T (Mp (D qdd + gamma) - h); the reference).

    Returns:
      (dof,) generalized forces: joint moments (N m) in relative coordinates; for a
      floating base the first two entries are the force (N) the base must supply.
    """
    model, dtype, (q, qd, qdd) = _inputs(model, q, qd, qdd)
    loads = check_loads(model, loads, dtype)
    if method == "recursive":
        return _rnea(model, q, qd, qdd, loads)[0]
    if method == "projection":
        return _inverse_projection(model, q, qd, qdd, loads)
    raise ValueError(f"method must be 'recursive' or 'projection', got {method!r}")


def forward_dynamics(model: Model, q, qd, tau, loads=None):
    """Accelerations qdd solving M qdd = tau - (C + G + E), (dof,).

    The bias C + G + E is one recursive Newton-Euler pass with qdd = 0; M is
    factorised by Cholesky.

    Args:
      model: the model.
      q, qd: (dof,) generalized coordinates and velocities.
      tau: (dof,) generalized forces (joint moments in relative coordinates, N m).
      loads: optional (segments, 3) world-frame wrenches at the centres of mass.
    """
    model, dtype, (q, qd, tau) = _inputs(model, q, qd, tau, names=("q", "qd", "tau"))
    loads = check_loads(model, loads, dtype)
    return _forward(model, q, qd, tau, loads)


def _forward(model, q, qd, tau, loads):
    bias = _rnea(model, q, qd, jnp.zeros_like(q), loads)[0]
    M = _mass_matrix(model, q)
    return jsl.cho_solve(jsl.cho_factor(M, lower=True), tau - bias)


def joint_moments(model: Model, q, qd, qdd, loads=None):
    """Net joint moments (segments,), N m: the moment the parent exerts on each segment.

    Counter-clockwise positive; the child exerts the opposite on the parent. In
    relative coordinates with a fixed base these are the generalized forces; in
    absolute coordinates they are converted (tau_i is the sum of the generalized
    forces over the subtree of i). For a floating base the root's entry is the
    moment the base must supply about the root's proximal point.
    """
    model, dtype, (q, qd, qdd) = _inputs(model, q, qd, qdd)
    loads = check_loads(model, loads, dtype)
    return _rnea(model, q, qd, qdd, loads)[2]


def torque_components(model: Model, q, qd, qdd, loads=None):
    """The terms of tau = M qdd + C + G + E, each (dof,), as a dict.

    Keys "inertial" (M qdd), "coriolis" (C), "gravity" (G), "external" (E = -J^T F)
    and "total" (their sum, the generalized forces). Useful to see which term drives
    a movement (interaction torques in fast reaching, gravity in slow).
    """
    model, dtype, (q, qd, qdd) = _inputs(model, q, qd, qdd)
    loads = check_loads(model, loads, dtype)
    nog = dataclasses.replace(model, gravity=jnp.zeros_like(model.gravity))
    zl = jnp.zeros_like(loads)
    z = jnp.zeros_like(q)
    parts = {
        "inertial": _mass_matrix(model, q) @ qdd,
        "coriolis": _rnea(nog, q, qd, z, zl)[0],
        "gravity": _rnea(model, q, z, z, zl)[0],
        "external": -jax.vjp(lambda q_: pose(model, q_), q)[1](loads)[0],
    }
    parts["total"] = parts["inertial"] + parts["coriolis"] + parts["gravity"] + parts["external"]
    return parts


def coriolis_matrix(model: Model, q, qd):
    """Coriolis matrix C(q, qd) from the Christoffel symbols of M, (dof, dof).

    C_ij = 1/2 sum_k (dM_ij/dq_k + dM_ik/dq_j - dM_jk/dq_i) qd_k, so that
    C qd = bias_forces and Mdot - 2 C is skew-symmetric (M's derivatives by autodiff).
    """
    model, _, (q, qd) = _inputs(model, q, qd)
    dM = jax.jacfwd(lambda q_: _mass_matrix(model, q_))(q)  # [i, j, k] = dM_ij/dq_k
    t1 = dM @ qd
    t2 = jnp.einsum("ikj,k->ij", dM, qd)
    t3 = jnp.einsum("jki,k->ij", dM, qd)
    return 0.5 * (t1 + t2 - t3)


def kinetic_energy(model: Model, q, qd):
    """Kinetic energy 1/2 sum (m |v_com|^2 + I omega^2), J."""
    model, _, (q, qd) = _inputs(model, q, qd)
    v = jax.jvp(lambda q_: pose(model, q_), (q,), (qd,))[1]
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    return 0.5 * jnp.sum(w * v * v)


def potential_energy(model: Model, q):
    """Gravitational potential energy sum m g y_com, J (zero at y = 0)."""
    model, _, (q,) = _inputs(model, q)
    return model.gravity * jnp.sum(model.mass * pose(model, q)[:, 1])


def total_energy(model: Model, q, qd):
    """Kinetic plus gravitational potential energy, J."""
    return kinetic_energy(model, q, qd) + potential_energy(model, q)


def point_load(model: Model, q, segment: Segment, point, force, moment=0.0, *, frame: str = "world"):
    """Loads (segments, 3) for a force applied at a point of one segment.

    The force ``F`` at point ``p`` becomes the wrench at the segment's centre of mass
    ``c``: ``(Fx, Fy, moment + (p - c) x F)``; all other rows are zero. Add several
    loads arrays to combine forces.

    Args:
      model: the model.
      q: (dof,) generalized coordinates (the pose, to locate the centre of mass).
      segment: index or name of the segment the force acts on.
      point: (2,) application point, m: world coordinates (``frame="world"``, e.g.
        the centre of pressure of a ground reaction force) or local (along, across)
        from the proximal joint (``frame="segment"``, e.g. the hand at (L, 0)).
      force: (2,) world-frame force (Fx, Fy), N.
      moment: free moment Mz, N m (e.g. the force plate's free moment).
      frame: "world" or "segment", how ``point`` is given.
    """
    i = model.index(segment)
    q = check_vector(model, q, "q")
    point, force, moment = jnp.asarray(point), jnp.asarray(force), jnp.asarray(moment)
    if point.shape != (2,):
        raise ValueError(f"point must have shape (2,), got {point.shape}")
    if force.shape != (2,):
        raise ValueError(f"force must have shape (2,) (Fx, Fy in N), got {force.shape}")
    if moment.shape != ():
        raise ValueError(f"moment must be a scalar (Mz in N m), got shape {moment.shape}")
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    model, dtype = prepare(model, q)  # q sets the dtype: tuples must not promote float32
    q = q.astype(dtype)
    theta, P = _frames(model, q)
    c = P[i] + _rot(theta[i], model.com[i])
    p = point.astype(dtype)
    if frame == "segment":
        p = P[i] + _rot(theta[i], p)
    f = force.astype(dtype)
    d = p - c
    mz = moment.astype(dtype) + d[0] * f[1] - d[1] * f[0]
    row = jnp.stack([f[0], f[1], mz])
    return jnp.zeros((model.segments, 3), dtype).at[i].set(row)
