"""Maximal coordinates with Lagrange multipliers: the classical reaction formula.

Every segment gets its own coordinates p_i = (x_i, y_i, theta_i) (centre of mass and
absolute angle), and the joints become implicit constraints Phi(p) = 0: the proximal
point P_i = c_i - R(theta_i) com_i of every child coincides with its attachment point
on the parent, and for a fixed base the root's proximal point is the model's origin:

    Phi_i = P_i - (P_parent(i) + attach_i u(theta_parent(i))),   Phi_root = P_0 - origin.

With the block-diagonal Mp = diag(m, m, I) per segment, the applied wrenches h
(gravity and loads, at the centres of mass) and C = dPhi/dp, the constrained
Newton-Euler equations with Baumgarte stabilisation are

    Mp pdd = h + C^T mu,      C pdd = -Cdot pd - 2 alpha Phidot - beta^2 Phi,

and eliminating pdd gives the classical formula for the multipliers (Blajer &
Czaplicki 2005, eq. 2.11; the formula their projection, :func:`jaxmb.joint_reactions`,
avoids):

    (C Mp^-1 C^T) mu = -Cdot pd - 2 alpha Phidot - beta^2 Phi - C Mp^-1 h.

Because dPhi_i/d(x_i, y_i) = +I for the child i, C^T mu puts +mu_i on the child's
centre of mass and -mu_i on the parent's: mu_i is **the force that the parent (or the
ground) exerts on segment i at joint i, world frame** -- jaxmb's sign of lambda
(Blajer & Czaplicki write Mp pdd = h - C^T lambda, so their lambda = -mu). A joint
moment tau_i (:func:`jaxmb.joint_moments`) enters as an applied wrench, +tau_i on
segment i and -tau_i on its parent (:func:`joint_moment_loads`).

:func:`accelerations` and :func:`simulate_maximal` use only the hand-written constraints,
not the pose map (which serves only to convert a minimal-coordinate state in
:func:`from_minimal`), so they are an independent reference for forward dynamics and
for the projection's multipliers (the tests compare them to round-off on random
chains and trees). :func:`reactions` takes the joint moments that it applies from
:func:`jaxmb.joint_moments` (the recursion), so it checks the projection's forces
given those moments, and a floating root's row is the base force of
:func:`jaxmb.inverse_dynamics`, as in :func:`jaxmb.joint_reactions` (by
construction). It works for any model: chain or tree, fixed or floating base,
relative or absolute coordinates (which only matter in the conversions
:func:`from_minimal` and :func:`to_minimal`). A floating root carries no
constraint: its row of mu is zero in :func:`accelerations` and :func:`simulate_maximal`.

The names that would repeat a top-level function of minimal coordinates say
"maximal": :func:`maximal_joint_positions`, :func:`maximal_point_position`,
:func:`simulate_maximal` and :class:`MaximalTrajectory` (``joint_positions``,
``point_position``, ``simulate`` and ``Trajectory`` here are deprecated aliases).

Functions take one sample (``p`` of shape (segments, 3)); ``jax.vmap`` them for
batches. Example::

    p, pd = jaxmb.maximal.from_minimal(model, q, qd)
    w = loads + jaxmb.maximal.joint_moment_loads(model, tau)    # (segments, 3)
    pdd, mu = jaxmb.maximal.accelerations(model, p, pd, w)      # forward dynamics
    q, qd, qdd = jaxmb.maximal.to_minimal(model, p, pd, pdd)
    lam = jaxmb.maximal.reactions(model, q, qd, qdd, loads)     # == jaxmb.joint_reactions
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import _as_array, _float_dtype, check_array, check_dt, check_steps, check_vector
from ._engine import rk4_scan
from .dynamics import inverse_dynamics, joint_moments
from .kinematics import (
    coordinates_to,
    pose,
    pose_acceleration,
    pose_velocity,
)
from .model import Model, Segment

__all__ = [
    "from_minimal",
    "to_minimal",
    "maximal_joint_positions",
    "maximal_point_position",
    "constraints",
    "jacobian",
    "joint_moment_loads",
    "accelerations",
    "reactions",
    "simulate_maximal",
    "MaximalTrajectory",
]


# ------------------------------------------------------------------- helpers


def _check_baumgarte(alpha, beta):
    """Check the Baumgarte parameters: real scalars, finite and >= 0 when concrete
    (used as given, so that a Python float stays weakly typed for float32 states).

    The constraint error obeys Phidd + 2 alpha Phidot + beta^2 Phi = 0: a negative
    alpha makes it grow (beta enters squared, and is a rate like alpha); a NaN gave an
    all-NaN trajectory without a word."""
    for name, x in (("alpha", alpha), ("beta", beta)):
        x = _as_array(x, name)
        if np.ndim(x) != 0:
            raise ValueError(f"{name} must be a scalar Baumgarte parameter (1/s), got shape {tuple(np.shape(x))}")
        x = check_array(x, name)
        if not isinstance(x, jax.core.Tracer) and float(x) < 0:
            raise ValueError(f"{name} must be >= 0 (a Baumgarte rate, 1/s; a negative one makes the constraint "
                             f"drift grow), got {float(x)}")  # fmt: skip


def _prepare(model: Model, **arrays):
    """Check maximal-coordinate arrays (shape (segments, 3), a real dtype, finite values
    when concrete); cast them and the model to one dtype. None entries stay None.
    """
    n = model.segments
    given = {k: _as_array(v, k) for k, v in arrays.items() if v is not None}
    for name, x in given.items():
        if x.shape != (n, 3):
            what = ("one world-frame wrench (Fx, Fy, Mz) per segment" if name == "loads"
                    else "(x_com, y_com, theta) of each segment")
            raise ValueError(f"{name} must have shape ({n}, 3): {what}, got shape {tuple(x.shape)}")
        check_array(x, name)
    given = {k: jnp.asarray(x) for k, x in given.items()}
    dtype = _float_dtype(*given.values())
    out = [given[k].astype(dtype) if k in given else None for k in arrays]
    return model.astype(dtype), out


def _rot(theta, v):
    """R(theta) v for local 2-vectors v (..., 2)."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], -1)


def _proximal(model: Model, p):
    """P_i = c_i - R(theta_i) com_i, (segments, 2)."""
    return p[:, :2] - _rot(p[:, 2], model.com)


def _constraints(model: Model, p):
    P = _proximal(model, p)
    parent = np.asarray(model.parent)
    par = np.maximum(parent, 0)
    th = p[par, 2]
    anchor = P[par] + model.joint_attach[:, None] * jnp.stack([jnp.cos(th), jnp.sin(th)], -1)
    # segment 0 is the root: anchored at the origin, or free (a zero row) for a floating base
    root = P[0] if model.base == "floating" else model.origin
    return (P - anchor.at[0].set(root)).astype(p.dtype)


def _constrained(model: Model) -> np.ndarray:
    """Indices of the segments whose joint is a constraint (all but a floating root)."""
    return np.arange(1 if model.base == "floating" else 0, model.segments)


def _weights(model: Model):
    """diag(Mp) per segment, (segments, 3): (m, m, I)."""
    return jnp.stack([model.mass, model.mass, model.inertia], 1)


def _gravity(model: Model):
    zero = jnp.zeros_like(model.mass)
    return jnp.stack([zero, -model.mass * model.gravity, zero], 1)


def _solve(model: Model, p, pd, loads, alpha, beta):
    """pdd (segments, 3) and mu (segments, 2) by the Schur complement (C Mp^-1 C^T)."""
    n = model.segments
    rows = _constrained(model)
    winv = 1.0 / _weights(model).reshape(-1)
    h = (_gravity(model) + loads).reshape(-1)
    mu = jnp.zeros((n, 2), p.dtype)
    if len(rows) == 0:  # a single floating segment: nothing to enforce
        return (winv * h).reshape(n, 3), mu
    phi = lambda x: _constraints(model, x.reshape(n, 3))[rows].reshape(-1)  # noqa: E731
    x, v = p.reshape(-1), pd.reshape(-1)
    Phi, Phid = jax.jvp(phi, (x,), (v,))
    # Cdot pd: the second directional derivative of Phi along pd
    Cd_v = jax.jvp(lambda y: jax.jvp(phi, (y,), (v,))[1], (x,), (v,))[1]
    C = jax.jacfwd(phi)(x)
    rhs = -Cd_v - 2 * alpha * Phid - beta**2 * Phi
    A = (C * winv) @ C.T
    m = jnp.linalg.solve(A, rhs - C @ (winv * h))
    pdd = winv * (h + C.T @ m)
    return pdd.reshape(n, 3), mu.at[rows].set(m.reshape(-1, 2))


# --------------------------------------------------------------- conversions


def from_minimal(model: Model, q, qd, qdd=None):
    """Maximal coordinates of a minimal-coordinate state (the pose map and its derivatives).

    Args:
      model: the model.
      q: (dof,) generalized coordinates (m, rad), in ``model.coordinates``.
      qd: (dof,) generalized velocities (m/s, rad/s).
      qdd: optional (dof,) generalized accelerations (m/s^2, rad/s^2).

    Returns:
      (p, pd) or (p, pd, pdd), each (segments, 3): (x_com, y_com, theta) per segment
      and its first and second time derivatives (m, m, rad and per s, per s^2).
    """
    q, qd = check_vector(model, q, "q"), check_vector(model, qd, "qd")  # one sample
    out = (pose(model, q), pose_velocity(model, q, qd))
    if qdd is not None:
        qdd = check_vector(model, qdd, "qdd")
        out += (pose_acceleration(model, q, qd, qdd),)
    return out


def to_minimal(model: Model, p, pd, pdd=None):
    """Minimal coordinates of a maximal-coordinate state: the inverse of :func:`from_minimal`.

    The angles are the segments' theta (converted to joint angles in relative
    coordinates); a floating base adds the root's proximal point c_0 - R(theta_0) com_0,
    differentiated exactly along the motion. The rest of p is redundant: an admissible
    state (Phi(p) = 0) is assumed, not checked.

    Args:
      model: the model (its ``coordinates`` choose the kind of q).
      p, pd: (segments, 3) maximal coordinates and velocities.
      pdd: optional (segments, 3) maximal accelerations.

    Returns:
      (q, qd) or (q, qd, qdd), each (dof,), in ``model.coordinates``.
    """
    model, (p, pd, pdd) = _prepare(model, p=p, pd=pd, pdd=pdd)

    def q_abs(x):  # absolute-coordinate q of maximal coordinates x
        if model.base == "floating":
            return jnp.concatenate([_proximal(model, x)[0], x[:, 2]])
        return x[:, 2]

    q, qd = jax.jvp(q_abs, (p,), (pd,))
    out = [q, qd]
    if pdd is not None:
        # qdd = J pdd + (d/dt J) pd: a first and a second directional derivative
        vel = lambda x: jax.jvp(q_abs, (x,), (pd,))[1]  # noqa: E731
        out.append(jax.jvp(q_abs, (p,), (pdd,))[1] + jax.jvp(vel, (p,), (pd,))[1])
    if model.coordinates == "relative":
        absm = model.replace(coordinates="absolute")
        out = [coordinates_to(absm, x, "relative") for x in out]
    return tuple(out)


# ---------------------------------------------------------------- kinematics


def maximal_joint_positions(model: Model, p):
    """Proximal joint points P_i = c_i - R(theta_i) com_i, (segments, 2), m.

    Args:
      model: the model.
      p: (segments, 3) maximal coordinates (x_com, y_com, theta) per segment.
    """
    model, (p,) = _prepare(model, p=p)
    return _proximal(model, p)


def maximal_point_position(model: Model, p, segment: Segment, point=(0.0, 0.0)):
    """World position (2,) of a point fixed on a segment, m.

    Args:
      model: the model.
      p: (segments, 3) maximal coordinates.
      segment: index or name of the segment.
      point: (2,) the point in the segment's frame (along, across) from its proximal
        joint, m (default: the joint itself).
    """
    i = model.index(segment)
    model, (p,) = _prepare(model, p=p)
    point = _as_array(point, "point")
    if point.shape != (2,):
        raise ValueError(f"point must have shape (2,), got {tuple(point.shape)}")
    point = jnp.asarray(check_array(point, "point"), p.dtype)
    return p[i, :2] + _rot(p[i, 2], point - model.com[i])


def constraints(model: Model, p):
    """The joint constraints Phi(p), (segments, 2), m.

    Row i is the proximal point of segment i seen from segment i minus the same point
    seen from its parent (P_parent + attach_i u(theta_parent)), or minus the origin
    for the root of a fixed base; a floating root's row is zero. Zero in any
    admissible configuration.

    Args:
      model: the model.
      p: (segments, 3) maximal coordinates (x_com, y_com, theta) per segment.
    """
    model, (p,) = _prepare(model, p=p)
    return _constraints(model, p)


def jacobian(model: Model, p):
    """C = dPhi/dp, (segments, 2, segments, 3): the constraint Jacobian.

    ``C[i, :, i, :2]`` is the identity (so C^T mu puts +mu_i on segment i); a floating
    root's rows are zero.
    """
    model, (p,) = _prepare(model, p=p)
    return jax.jacfwd(lambda x: _constraints(model, x))(p)


# ------------------------------------------------------------------ dynamics


def joint_moment_loads(model: Model, tau):
    """Wrenches (segments, 3) of joint moments: +tau_i on segment i, -tau_i on its parent.

    Args:
      model: the model.
      tau: (segments,) joint moments, N m, counter-clockwise on the child, as
        :func:`jaxmb.joint_moments` returns them (for a fixed base tau_0 is the
        ground's moment on the root; for a floating base the moment the base
        supplies, usually zero).

    Returns:
      (segments, 3) loads (0, 0, Mz) per segment, to add to other loads.
    """
    tau = _as_array(tau, "tau")
    if tau.shape != (model.segments,):
        raise ValueError(f"tau must have shape ({model.segments},): one joint moment per segment, "
                         f"got shape {tuple(tau.shape)}")
    tau = jnp.asarray(check_array(tau, "tau"))
    tau = tau.astype(_float_dtype(tau))
    parent = np.asarray(model.parent)
    kids = np.nonzero(parent >= 0)[0]
    mz = tau.at[parent[kids]].add(-tau[kids])
    return jnp.zeros((model.segments, 3), tau.dtype).at[:, 2].set(mz)


def accelerations(model: Model, p, pd, loads=None, *, alpha=0.0, beta=0.0):
    """Forward dynamics in maximal coordinates: accelerations and joint forces.

    Solves Mp pdd = h + C^T mu with C pdd = -Cdot pd - 2 alpha Phidot - beta^2 Phi
    by the Schur complement (C Mp^-1 C^T) mu = rhs - C Mp^-1 h, h = gravity + loads.

    Args:
      model: the model.
      p, pd: (segments, 3) maximal coordinates and velocities (m, rad; m/s, rad/s).
      loads: optional (segments, 3) world-frame wrenches (Fx, Fy, Mz) at the centres
        of mass (N, N, N m) besides gravity: external loads (:func:`jaxmb.point_load`
        of ``to_minimal``'s q, or :func:`maximal_point_position` for the point) and joint
        moments (:func:`joint_moment_loads`).
      alpha, beta: Baumgarte parameters, 1/s, finite and >= 0 (0: the exact
        multipliers of an admissible state; positive values pull a drifting state
        back to Phi = 0, and then shift mu by about m (2 alpha Phidot + beta^2 Phi)).

    Returns:
      (pdd, mu): accelerations (segments, 3) (m/s^2, rad/s^2) and joint forces
      (segments, 2), N: the force of the parent (or the ground) on each segment at its
      joint, world frame (zero for a floating root).
    """
    _check_baumgarte(alpha, beta)
    model, (p, pd, loads) = _prepare(model, p=p, pd=pd, loads=loads)
    loads = jnp.zeros_like(p) if loads is None else loads
    return _solve(model, p, pd, loads, alpha, beta)


def reactions(model: Model, q, qd, qdd, loads=None, *, gradient: str = "adjoint"):
    """Joint reactions by the classical multiplier formula, (segments, 2), N.

    The minimal-coordinate state is converted to maximal coordinates, the joint
    moments that produce ``qdd`` (:func:`jaxmb.joint_moments`) are applied as wrenches
    (+tau_i on segment i, -tau_i on its parent), and (C Mp^-1 C^T) mu =
    -Cdot pd - C Mp^-1 h is solved for the multipliers. For a floating base the
    force and moment that the base must supply (zero for a motion that obeys
    Newton's law; :func:`jaxmb.inverse_dynamics`) act on the root as well, and the
    root's row is that force, as in :func:`jaxmb.joint_reactions`.

    This is the formula that Blajer and Czaplicki's projection replaces: one linear
    solve of size 2 x joints per sample instead of none. Given the moments of the
    recursion it is an independent check of the forces of
    :func:`jaxmb.joint_reactions` (equal to round-off for an admissible state); the
    moments themselves are checked by :func:`accelerations` (forward dynamics in
    maximal coordinates).

    Args:
      model: the model.
      q, qd, qdd: (dof,) generalized coordinates, velocities, accelerations (one
        sample; ``jax.vmap`` for a batch).
      loads: optional (segments, 3) world-frame wrenches (Fx, Fy, Mz) at the centres
        of mass (N, N, N m), besides gravity.
      gradient: how the joint moments (and a floating base's force) are
        differentiated, as in :func:`jaxmb.joint_moments`: "adjoint" (default;
        reverse mode) or "autodiff" (forward mode as well: ``jax.jvp``,
        ``jax.jacfwd``).

    Returns:
      (segments, 2) the force that the parent (or the ground) exerts on each segment
      at its joint, world frame (Fx, Fy), N.
    """
    q, qd, qdd = (check_vector(model, x, nm) for x, nm in ((q, "q"), (qd, "qd"), (qdd, "qdd")))  # one sample
    p, pd = from_minimal(model, q, qd)
    model = model.astype(p.dtype)
    if loads is None:
        loads = jnp.zeros_like(p)
    _prepare(model, loads=loads)  # the shape check
    loads = jnp.asarray(loads).astype(p.dtype)
    tau = joint_moments(model, q, qd, qdd, loads, gradient=gradient)
    w = loads + joint_moment_loads(model, tau)
    if model.base == "floating":
        # the base's force F at the root's proximal point P_0 (its moment is tau_0)
        F = inverse_dynamics(model, q, qd, qdd, loads, gradient=gradient)[:2]
        d = _proximal(model, p)[0] - p[0, :2]
        w = w.at[0].add(jnp.stack([F[0], F[1], d[0] * F[1] - d[1] * F[0]]))
    _, mu = _solve(model, p, pd, w, 0.0, 0.0)
    if model.base == "floating":
        mu = mu.at[0].set(F)
    return mu


# ---------------------------------------------------------------- simulation


class MaximalTrajectory(NamedTuple):
    """A motion simulated in maximal coordinates; steps + 1 samples, the first the initial state.

    Attributes:
      t: (T,) time, s.
      p, pd, pdd: (T, segments, 3) maximal coordinates, velocities, accelerations.
      mu: (T, segments, 2) joint forces (parent on child, world frame, N).
      drift: (T,) max |Phi|, m: the constraint violation.
      aux: what ``loads`` returned besides the loads (``has_aux=True``), stacked over
        the samples; None otherwise.
    """

    t: jax.Array
    p: jax.Array
    pd: jax.Array
    pdd: jax.Array
    mu: jax.Array
    drift: jax.Array
    aux: Any = None


def simulate_maximal(model: Model, p0, pd0, dt, steps: int, *, loads=None, has_aux: bool = False,
                     alpha=20.0, beta=20.0) -> MaximalTrajectory:
    """Integrate the constrained Newton-Euler equations by RK4 (``lax.scan``).

    Args:
      model: the model.
      p0, pd0: (segments, 3) initial maximal coordinates and velocities (admissible:
        e.g. from :func:`from_minimal`).
      dt: time step, s (a finite nonzero scalar; a negative one integrates backwards, with
        the sign of the damping term 2 alpha Phidot turned so that the constraint
        error still decays along the integration; unturned, it would grow backwards in
        time).
      steps: number of steps, an int >= 0.
      loads: None, a constant (segments, 3) array, or a function ``loads(t, p, pd)``
        returning the (segments, 3) wrenches at the centres of mass besides gravity:
        contacts, and joint moments through :func:`joint_moment_loads` (a controller
        can read q, qd from :func:`to_minimal`). Evaluated at every stage.
      has_aux: ``loads`` returns ``(loads, aux)``; aux (any pytree, e.g. the joint
        moments or a contact force) is recorded at every sample.
      alpha, beta: Baumgarte parameters, 1/s: finite scalars >= 0 (the constraint
        error obeys Phidd + 2 alpha Phidot + beta^2 Phi = 0). The multipliers differ
        from the exact joint forces by about m (2 alpha Phidot + beta^2 Phi), so
        gentle values do best; with RK4 the drift stays near round-off (20/s at
        dt = 0.2 ms: 1e-12 m).

    Returns:
      :class:`MaximalTrajectory` with steps + 1 samples; pdd, mu and aux at each sample are
      those of the integrator's first stage there.

    Raises:
      ValueError: for shapes that do not fit, non-finite p0, pd0, dt or constant
        loads, a non-finite or negative alpha or beta (when concrete), or steps
        that is not an int >= 0. What a function
        ``loads`` returns is checked for its shape only (its values exist only
        inside the compiled scan).
    """
    steps = check_steps(steps)
    dt = check_dt(dt)
    _check_baumgarte(alpha, beta)
    model, (p0, pd0) = _prepare(model, p0=p0, pd0=pd0)
    dtype = p0.dtype
    n = model.segments
    if loads is None or not callable(loads):
        if has_aux:
            raise ValueError("has_aux=True needs loads to be a function loads(t, p, pd) -> (loads, aux)")
        if loads is None:
            const = jnp.zeros((n, 3), dtype)
        else:
            const = _as_array(loads, "loads")
            if const.shape != (n, 3):
                raise ValueError(f"loads must be a function or have shape ({n}, 3), got shape {tuple(const.shape)}")
            const = jnp.asarray(check_array(const, "loads")).astype(dtype)
        loads_fn = lambda t, p, pd: (const, None)  # noqa: E731
    elif has_aux:
        loads_fn = loads
    else:
        loads_fn = lambda t, p, pd: (loads(t, p, pd), None)  # noqa: E731

    def evaluate(t, p, pd):
        w, aux = loads_fn(t, p, pd)
        w = jnp.asarray(w)
        if w.shape != (n, 3):
            raise ValueError(f"loads(t, p, pd) must return shape ({n}, 3), got shape {w.shape}")
        pdd, mu = _solve(model, p, pd, w.astype(dtype), alpha_dir, beta)
        return pdd, mu, aux

    dt = jnp.asarray(dt, dtype)
    # Phidd + 2 alpha Phidot + beta^2 Phi = 0 damps the constraint error forwards in
    # time; backwards (s = -t) it reads Phi'' - 2 alpha Phi' + beta^2 Phi = 0 and the
    # error grows, so the damping takes the sign of dt
    alpha_dir = jnp.sign(dt) * jnp.asarray(alpha, dtype)

    def step(state, k):
        p, pd = state
        t = k * dt

        # classical RK4, its four stages as a scan so that the right-hand side is traced once
        def rhs(t_s, p_s, v_s):
            pdd, mu, aux = evaluate(t_s, p_s, v_s)
            return pdd, (pdd, mu, aux)

        # the first stage is the sample itself: its accelerations, multipliers and aux
        p_next, pd_next, sample = rk4_scan(rhs, t, p, pd, dt, dtype)
        return (p_next, pd_next), (p, pd) + sample

    # steps + 1 samples: the last step's update is discarded
    _, (p, pd, pdd, mu, aux) = jax.lax.scan(step, (p0, pd0), jnp.arange(steps + 1))
    t = jnp.arange(steps + 1, dtype=dtype) * dt
    drift = jax.vmap(lambda x: jnp.max(jnp.abs(_constraints(model, x))))(p)
    return MaximalTrajectory(t, p, pd, pdd, mu, drift, aux)


# ------------------------------------------------------- deprecated names

_DEPRECATED = {
    "joint_positions": "maximal_joint_positions",
    "point_position": "maximal_point_position",
    "simulate": "simulate_maximal",
    "Trajectory": "MaximalTrajectory",
}


def __getattr__(name: str):
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(f"jaxmb.maximal.{name} is deprecated: use jaxmb.maximal.{new} (the same function; the "
                      f"name no longer repeats jaxmb.{name}, which works in minimal coordinates)",
                      DeprecationWarning, stacklevel=2)  # fmt: skip
        return globals()[new]
    raise AttributeError(f"module 'jaxmb.maximal' has no attribute {name!r}")
