"""Kinematics of planar trees: the pose map and everything derived from it.

The pose map ``p = g(q, z)`` returns, for every segment, the x, y of its centre of
mass and its absolute angle, as functions of the generalized coordinates ``q`` and
of the open-constraint coordinates ``z`` (the prohibited relative translations at
every joint, one world-frame (x, y) pair per segment, always evaluated at z = 0;
Blajer & Czaplicki 2005). Velocities, accelerations and Jacobians come from JAX's
forward-mode derivatives of ``g``:

    D = dg/dq,   E = dg/dz,   pdot = D qd,   pddot = D qdd + gamma,   gamma = Ddot qd.

Every public function takes one sample (``q``, ``qd``, ``qdd`` of shape ``(dof,)``)
or any leading batch shape (``(..., dof)``; the leading shapes of the state arguments
broadcast NumPy-style) and returns the leading shape first: ``pose`` of a
``(T, dof)`` series is ``(T, segments, 3)``. A batch is evaluated as ``jax.vmap`` of
the single-sample map (the linear conversions :func:`coordinates_to` and
:func:`forces_to` as one matrix product). Other arguments (a segment's ``point``,
``z``) are shared by every sample.
"""

from __future__ import annotations

import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from ._checks import _as_array, _float_dtype, check_array, check_batch, check_model, check_vector, prepare
from ._math import precise_jit
from ._engine.frames import angles, frames, rot, second_jvp, split
from .model import Model, Segment, ancestor_matrix

__all__ = [
    "pose",
    "segment_angles",
    "joint_positions",
    "distal_positions",
    "com_positions",
    "point_position",
    "point_velocity",
    "point_acceleration",
    "point_jacobian",
    "whole_body_com",
    "pose_jacobian",
    "constraint_jacobian",
    "pose_velocity",
    "pose_acceleration",
    "coordinates_to",
    "forces_to",
]


# ------------------------------------------------------------------ batches


def leading_shape(arrays, core_ndims, names):
    """The broadcast leading (batch) shape of arrays with ``core_ndims`` trailing
    dimensions each; ValueError naming the arguments when they do not broadcast."""
    leads = [tuple(np.shape(x)[: np.ndim(x) - k]) for x, k in zip(arrays, core_ndims)]
    try:
        return tuple(np.broadcast_shapes(*leads))
    except ValueError:
        got = ", ".join(f"{nm} {lead}" for nm, lead in zip(names, leads))
        raise ValueError(f"the leading (batch) shapes of the inputs do not broadcast: {got}") from None


def over_leading(fn, arrays, core_ndims, names):
    """``fn(*arrays)`` of a single-sample function over the broadcast leading shape.

    Each array has ``core_ndims`` trailing (per-sample) dimensions; the leading shapes
    broadcast NumPy-style and ``fn`` runs under one ``jax.vmap`` over their flattened
    product (an array without leading dimensions is passed unbatched). Every output
    leaf gets the leading shape in front.
    """
    lead = leading_shape(arrays, core_ndims, names)
    if not lead:
        return fn(*arrays)
    B = int(np.prod(lead, dtype=np.int64))
    flat, axes = [], []
    for x, k in zip(arrays, core_ndims):
        core = tuple(np.shape(x)[np.ndim(x) - k :])
        if np.ndim(x) == k:
            flat.append(x)
            axes.append(None)
        else:
            flat.append(jnp.reshape(jnp.broadcast_to(x, lead + core), (B,) + core))
            axes.append(0)
    out = jax.vmap(fn, in_axes=tuple(axes))(*flat)
    return jax.tree_util.tree_map(lambda y: y.reshape(lead + y.shape[1:]), out)


def is_concrete(arguments) -> bool:
    """Whether no argument holds a tracer (a direct call, not one under a caller's
    ``jax.jit``, ``grad`` or ``vmap``)."""
    return not any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves(arguments))


@functools.partial(precise_jit, static_argnums=(0, 1))
def compiled_call(evaluate, static, dynamic):
    """``evaluate`` of the arguments, compiled once per function, static arguments,
    model topology, shapes and dtypes (the direct call's path)."""
    return evaluate({**dynamic, **dict(static)})


def dispatch(evaluate, static, dynamic):
    """``evaluate({**dynamic, **dict(static)})`` of inputs already checked on their
    values: one compiled program (:func:`compiled_call`) in a direct call, traced as it
    stands under a caller's transformation. ``static`` is a tuple of hashable (name,
    value) pairs, part of the program's key."""
    if is_concrete(dynamic):
        return compiled_call(evaluate, static, dynamic)
    return evaluate({**dynamic, **dict(static)})


def batched_states(*names, static=("segment",)):
    """Let a single-sample function of ``model`` and state vectors ``names`` (each
    (dof,)) take (..., dof) as well: the inputs are checked on their full shapes (and
    values, when concrete) and the function is vmapped over the broadcast leading
    shape; its other arguments are shared by every sample.

    A direct call (no tracer among the arguments) runs compiled: the inputs are
    checked here on their values, then one cached ``jax.jit`` program evaluates the
    function (``static`` arguments, such as a segment's name, are part of its key;
    other array arguments are checked and passed as arrays). Op by op, ``pose`` of
    1,000 samples of the seven-segment human took 35 ms a call, as many dispatches as
    the map has operations; compiled it is one. Under a caller's transformation the
    function is traced as it stands."""

    def deco(fn):
        sig = inspect.signature(fn)

        def evaluate(arguments):
            xs = [_as_array(arguments[nm], nm) if nm in arguments else None for nm in names]
            if all(x is None or np.ndim(x) <= 1 for x in xs):
                return fn(**arguments)  # one sample: the function checks it
            model = arguments["model"]
            given = [nm for nm, x in zip(names, xs) if x is not None]
            xs = [check_batch(model, arguments[nm], nm) for nm in given]

            def one(*sample):
                return fn(**dict(arguments, **dict(zip(given, sample))))

            return over_leading(one, xs, (1,) * len(xs), given)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            arguments = sig.bind(*args, **kwargs).arguments
            if not is_concrete(arguments):
                return evaluate(arguments)
            check_model(arguments["model"])
            fixed, dynamic = [], {}
            for nm, value in arguments.items():
                if nm in static or value is None:
                    fixed.append((nm, value))
                elif nm in names:
                    x = _as_array(value, nm)
                    dynamic[nm] = check_batch(arguments["model"], x, nm) if np.ndim(x) > 1 else check_vector(
                        arguments["model"], x, nm)
                elif nm == "model":
                    dynamic[nm] = value
                else:
                    dynamic[nm] = check_array(value, nm)
            try:
                hash(tuple(fixed))
            except TypeError:  # an unhashable segment: the function's own check names it
                return evaluate(arguments)
            return compiled_call(evaluate, tuple(fixed), dynamic)

        return wrapper

    return deco


# ------------------------------------------------------------------- pose map


@batched_states("q")
def pose(model: Model, q, z=None):
    """The pose map g(q, z): centre of mass and angle of every segment.

    Args:
      model: the model.
      q: (dof,) or (..., dof) generalized coordinates (m, rad).
      z: optional (segments, 2) open-constraint coordinates, m: a world-frame
        translation of the joint of each segment (and so of its whole subtree);
        zero in any admissible motion (shared by every sample of a batch). Only
        derivatives with respect to z are used.

    Returns:
      (..., segments, 3) array of (x_com, y_com, theta) per segment (m, m, rad), in
      the floating dtype of q.

    Raises:
      ValueError: if q is not (..., dof), is not real or not finite, or z is not
        (segments, 2).
    """
    q = check_vector(model, q, "q")
    model, dtype = prepare(model, q)
    q = q.astype(dtype)
    if z is not None:
        z = jnp.asarray(check_array(z, "z"))
        if z.shape != (model.segments, 2):
            raise ValueError(
                f"z must have shape ({model.segments}, 2): one world-frame (x, y) translation "
                f"per joint, got shape {z.shape}"
            )
        z = z.astype(dtype)
    theta, P = frames(model, q, z)
    c = P + rot(theta, model.com)
    return jnp.concatenate([c, theta[:, None]], axis=1)


def _check(model, q, *rates):
    """(model, q, *rates): q and its rates (qd, qdd) checked and cast to their common
    dtype (float32 only when all are float32, as the dynamics do), and the model to it."""
    xs = [check_vector(model, x, nm) for x, nm in zip((q,) + rates, ("q", "qd", "qdd"))]
    model, dtype = prepare(model, *xs)
    return (model,) + tuple(x.astype(dtype) for x in xs)


@batched_states("q")
def segment_angles(model: Model, q):
    """Absolute segment angles theta (segments,), rad, counter-clockwise from +x."""
    model, q = _check(model, q)
    return angles(model, split(model, q)[1])


@batched_states("q")
def joint_positions(model: Model, q):
    """Proximal joint points P (segments, 2), m."""
    model, q = _check(model, q)
    return frames(model, q)[1]


@batched_states("q")
def distal_positions(model: Model, q):
    """Distal end points P + L u(theta) (segments, 2), m."""
    model, q = _check(model, q)
    theta, P = frames(model, q)
    return P + model.length[:, None] * jnp.stack([jnp.cos(theta), jnp.sin(theta)], -1)


@batched_states("q")
def com_positions(model: Model, q):
    """Centres of mass (segments, 2), m."""
    model, q = _check(model, q)
    return pose(model, q)[:, :2]


@batched_states("q")
def whole_body_com(model: Model, q):
    """Whole-body centre of mass (2,), m."""
    model, q = _check(model, q)
    c = pose(model, q)[:, :2]
    return (model.mass[:, None] * c).sum(0) / model.mass.sum()


def _point_fn(model: Model, segment: Segment, point):
    i = model.index(segment)
    point = jnp.asarray(check_array(point, "point"))
    if point.shape != (2,):
        raise ValueError(f"point must have shape (2,) (along, across in segment {i}'s frame), got {point.shape}")

    def f(q):
        theta, P = frames(model, q)
        return P[i] + rot(theta[i], point.astype(q.dtype))

    return f


@batched_states("q")
def point_position(model: Model, q, segment: Segment, point=(0.0, 0.0)):
    """World position (2,) of a point fixed on a segment.

    Args:
      model: the model.
      q: (dof,) or (..., dof) generalized coordinates (a batch gives (..., 2)).
      segment: index or name.
      point: (2,) local coordinates (along the axis, across it) from the proximal
        joint, m, shared by every sample. E.g. ``(L, 0)`` is the distal end.
    """
    model, q = _check(model, q)
    return _point_fn(model, segment, point)(q)


@batched_states("q")
def point_jacobian(model: Model, q, segment: Segment, point=(0.0, 0.0)):
    """Jacobian (2, dof) of a point fixed on a segment: v = J qd."""
    model, q = _check(model, q)
    return jax.jacfwd(_point_fn(model, segment, point))(q)


@batched_states("q", "qd")
def point_velocity(model: Model, q, qd, segment: Segment, point=(0.0, 0.0)):
    """World velocity (2,) of a point fixed on a segment, m/s."""
    model, q, qd = _check(model, q, qd)
    return jax.jvp(_point_fn(model, segment, point), (q,), (qd,))[1]


@batched_states("q", "qd", "qdd")
def point_acceleration(model: Model, q, qd, qdd, segment: Segment, point=(0.0, 0.0)):
    """World acceleration (2,) of a point fixed on a segment: J qdd + Jdot qd, m/s^2."""
    model, q, qd, qdd = _check(model, q, qd, qdd)
    f = _point_fn(model, segment, point)
    vel = lambda q_: jax.jvp(f, (q_,), (qd,))[1]  # noqa: E731
    return jax.jvp(f, (q,), (qdd,))[1] + jax.jvp(vel, (q,), (qd,))[1]


@batched_states("q")
def pose_jacobian(model: Model, q):
    """D = dg/dq (segments, 3, dof): Jacobian of every segment's (x_com, y_com, theta)."""
    model, q = _check(model, q)
    return jax.jacfwd(lambda q_: pose(model, q_))(q)


@batched_states("q")
def constraint_jacobian(model: Model, q):
    """E = dg/dz at z = 0, (segments, 3, segments, 2): the prohibited directions.

    ``E[i, :, j, :]`` is the change of segment i's pose per unit world-frame
    translation of joint j; it is the identity on (x, y) for every i in the subtree
    of j. Blajer & Czaplicki (2005) show that E is a pseudo-inverse of the
    constraint matrix, which gives the reactions without inverting a matrix.
    """
    model, q = _check(model, q)
    z0 = jnp.zeros((model.segments, 2), q.dtype)
    return jax.jacfwd(lambda z: pose(model, q, z))(z0)


@batched_states("q", "qd")
def pose_velocity(model: Model, q, qd):
    """pdot = D qd (segments, 3): centre-of-mass velocities and angular velocities."""
    model, q, qd = _check(model, q, qd)
    return jax.jvp(lambda q_: pose(model, q_), (q,), (qd,))[1]


def _pose_acc(model: Model, q, qd, qdd):
    """pddot = D qdd + gamma, gamma = Ddot qd (a second directional derivative)."""
    return second_jvp(lambda q_: pose(model, q_), q, qd, qdd)


@batched_states("q", "qd", "qdd")
def pose_acceleration(model: Model, q, qd, qdd):
    """pddot = D qdd + gamma (segments, 3): centre-of-mass and angular accelerations."""
    model, q, qd, qdd = _check(model, q, qd, qdd)
    return _pose_acc(model, q, qd, qdd)


# ------------------------------------------------------- coordinate conversion


def coordinates_to(model: Model, x, kind: str):
    """Convert q, qd or qdd between relative and absolute angle coordinates.

    The map is linear, theta = A q_relative with A the ancestor matrix, so the same
    function converts positions, velocities and accelerations. Base translations of
    a floating base are unchanged.

    Args:
      model: the model whose ``coordinates`` describe ``x``.
      x: (dof,) or (..., dof) coordinates, velocities or accelerations in
        ``model.coordinates``.
      kind: "relative" or "absolute", the kind to convert to.

    Returns:
      (..., dof) the same quantity in ``kind`` coordinates (use
      ``model.replace(coordinates=kind)`` for the matching model).
    """
    x = jnp.asarray(check_batch(model, x, "x"))
    if kind not in ("relative", "absolute"):
        raise ValueError(f"kind must be 'relative' or 'absolute', got {kind!r}")
    x = x.astype(_float_dtype(x))  # float, also when nothing converts
    if kind == model.coordinates:
        return x
    dtype = x.dtype
    nb = model.nbase
    # theta = A q_relative, and q_relative = A^-1 theta (theta_i - theta_parent(i))
    A = ancestor_matrix(model.parent) if kind == "absolute" else _ancestor_inverse(model.parent)
    ya = x[..., nb:] @ jnp.asarray(A.T, dtype)
    return jnp.concatenate([x[..., :nb], ya], axis=-1)


def forces_to(model: Model, Q, kind: str):
    """Convert generalized forces between relative and absolute angle coordinates.

    Power is invariant, Q_rel . qd_rel = Q_abs . qd_abs, so with theta = A q_rel:
    Q_relative = A^T Q_absolute (a joint moment is the sum of the absolute-coordinate
    forces of its subtree) and Q_absolute = A^-T Q_relative (tau_i minus the
    moments of i's children).

    Args:
      model: the model whose ``coordinates`` describe ``Q``.
      Q: (dof,) or (..., dof) generalized forces (N for base translations, N m for
        angles).
      kind: "relative" or "absolute", the kind to convert to.

    Returns:
      (..., dof) the same forces in ``kind`` coordinates.
    """
    Q = jnp.asarray(check_batch(model, Q, "Q"))
    if kind not in ("relative", "absolute"):
        raise ValueError(f"kind must be 'relative' or 'absolute', got {kind!r}")
    Q = Q.astype(_float_dtype(Q))  # float, also when nothing converts
    if kind == model.coordinates:
        return Q
    dtype = Q.dtype
    nb = model.nbase
    # Q_relative = A^T Q_absolute, Q_absolute = A^-T Q_relative (row vectors: Q A, Q A^-1)
    A = ancestor_matrix(model.parent) if kind == "relative" else _ancestor_inverse(model.parent)
    Ra = Q[..., nb:] @ jnp.asarray(A, dtype)
    return jnp.concatenate([Q[..., :nb], Ra], axis=-1)


def _ancestor_inverse(parent) -> np.ndarray:
    """A^-1 of the ancestor matrix, exactly: the identity minus the parent incidence
    (q_i = theta_i - theta_parent(i))."""
    n = len(parent)
    Ainv = np.eye(n)
    for i, p in enumerate(parent):
        if p >= 0:
            Ainv[i, p] = -1.0
    return Ainv
