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


# ------------------------------------------------------------------- checking


def _float_dtype(*xs):
    """The floating dtype of the inputs (float32 stays float32; ints become float)."""
    dt = jnp.result_type(*xs)
    if not jnp.issubdtype(dt, jnp.floating):
        dt = jnp.result_type(float)
    return dt


_EXACT_FINITE = 1 << 16  # elements: exact check below, a sum (NaN and inf propagate) above


@jax.jit
def _sum_is_finite(x):
    return jnp.isfinite(jnp.sum(x))


@jax.jit
def _sum_of_squares(x):
    return jnp.vdot(x, x)


def angle_limit(dtype) -> float:
    """The largest |angle| (rad) the batched kernels take in ``dtype`` as JAX
    computes it (float32 where 64-bit mode is off): :data:`jaxmb.batch.SINCOS_LIMIT`."""
    from .batch import SINCOS_LIMIT

    return SINCOS_LIMIT[64 if jax.dtypes.canonicalize_dtype(dtype) == np.float64 else 32]


def check_finite(x, name: str, angles_from: int | None = None):
    """Raise ValueError for NaN or inf in a concrete input (skipped while tracing:
    under jit or vmap the values are not known); with ``angles_from``, also for an
    angle (the entries from that index on the last axis) beyond :func:`angle_limit`.

    Large arrays are first summed (one pass, on the array's device): NaN and inf
    propagate through a sum, so a finite sum clears the array, and only a non-finite
    one (or an overflow) pays for the element-wise search that locates the value.
    With angles, the sum is of squares: at most the limit squared clears every
    entry's magnitude too."""
    if isinstance(x, jax.core.Tracer):
        return
    limit = None if angles_from is None else angle_limit(x.dtype)

    def cleared(total):
        return bool(np.isfinite(total)) and (limit is None or float(total) <= limit * limit)

    if isinstance(x, jax.Array):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return
        if x.size > _EXACT_FINITE:
            # evaluated now even inside a caller's jit (a concrete array closed over
            # by a traced function): a jitted call there would be staged out
            with jax.ensure_compile_time_eval():
                if cleared(_sum_is_finite(x) if limit is None else _sum_of_squares(x)):
                    return
    a = np.asarray(x)
    if a.dtype.kind not in "fc":
        return
    if a.size > _EXACT_FINITE and cleared(a.sum() if limit is None else np.vdot(a, a).real):
        return
    if not np.isfinite(a).all():
        if a.ndim == 0:
            raise ValueError(f"{name} is not finite: {a}")
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise ValueError(f"{name} is not finite at index {where if len(where) > 1 else where[0]}: {a[where]}")
    if limit is not None and a.ndim and a.shape[-1] > angles_from:
        big = np.abs(a[..., angles_from:]) > limit
        if big.any():
            where = tuple(int(i) for i in np.argwhere(big)[0])
            where = where[:-1] + (where[-1] + angles_from,)
            f32 = limit <= 2.0**24
            raise ValueError(
                f"{name} has an angle of {a[where]:.6g} rad at index {where if len(where) > 1 else where[0]}: "
                f"beyond +-{limit:.6g} rad ({'float32' if f32 else 'float64'}) the floats near it are too far "
                "apart to give its sine and cosine; wrap the angles (e.g. (q + pi) % (2 pi) - pi)"
                + (" or compute in float64 (JAX's 64-bit mode and float64 arrays)" if f32 else "")
            )


def _as_array(x, name: str = "the input"):
    """x as an array (JAX and NumPy arrays and tracers unchanged); a ragged nested
    list or a non-numeric value raises ValueError naming ``name``."""
    if isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)):
        return x
    # a list or tuple holding JAX values (tracers under jit or grad, say): jnp stacks
    # them; NumPy would ask a tracer for its value
    traced = any(isinstance(v, (jax.Array, jax.core.Tracer)) for v in jax.tree_util.tree_leaves(x))
    try:
        return jnp.asarray(x) if traced else np.asarray(x)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"{name} must be a rectangular array of real numbers (rows of equal length), got {type(x).__name__}: "
            f"{str(e).splitlines()[0]}"
        ) from None


def check_real(x, name: str):
    """Raise ValueError unless ``x`` has a real dtype (floating or integer; booleans,
    True as 1 rad, are a mistake)."""
    dt = x.dtype
    if not (jnp.issubdtype(dt, jnp.floating) or jnp.issubdtype(dt, jnp.integer)):
        raise ValueError(f"{name} must be a real array, got dtype {dt}")


def _jax_float(dtype):
    """The floating dtype JAX computes ``dtype`` in: float32 for float64 where its
    64-bit mode is off, float64 (or float32) for long double, which JAX lacks."""
    dtype = np.dtype(dtype)
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64 if dtype.itemsize > 8 else dtype))


def check_range(x, name: str):
    """``x`` in a floating dtype JAX has, with every concrete value held by it.

    NumPy floats are cast by JAX when called: float64 to float32 where its 64-bit
    mode is off (a velocity of 1e39 became inf, the result NaN), long double (which
    JAX refused with a bare TypeError) to float64 (float32 without 64-bit mode).
    ValueError, naming ``name`` and the index, for a finite value beyond the range of
    that dtype; a long double array is returned converted, anything else unchanged
    (JAX arrays and tracers are already in a JAX dtype; under ``jax.jit`` the values
    are unknown and not checked). NaN and inf are left to :func:`check_finite`."""
    if isinstance(x, (jax.Array, jax.core.Tracer)) or getattr(x, "dtype", None) is None or x.dtype.kind != "f":
        return x
    target = _jax_float(x.dtype)
    if target == x.dtype:
        return x
    a = np.asarray(x)
    big = float(np.finfo(target).max)
    if target.itemsize < a.dtype.itemsize:
        flat = a.reshape(-1)
        total = np.vdot(flat, flat) if target.itemsize < 8 else np.inf  # one pass clears most float32 casts
        if not (np.isfinite(total) and total <= big * big):
            over = np.isfinite(a) & (np.abs(a) > big)
            if over.any():
                where = tuple(int(i) for i in np.argwhere(over)[0])
                at = "" if a.ndim == 0 else f" at index {where if len(where) > 1 else where[0]}"
                why = ("JAX's 64-bit mode is off: jax.config.update('jax_enable_x64', True) first, or other units"
                       if target == np.float32 and a.dtype == np.float64 else "other units")
                value = np.format_float_scientific(a[where], precision=5, trim="-")  # a long double too
                raise ValueError(f"{name} is {value}{at}, beyond the range of {target} "
                                 f"(+-{big:.3g}) that JAX computes it in, where it becomes inf ({why})")  # fmt: skip
    return a.astype(target) if a.dtype.itemsize > 8 else x


def check_array(x, name: str):
    """``x`` as an array of a real dtype with finite values when concrete (JAX and
    NumPy arrays and tracers are returned unchanged, long double as float64; see
    :func:`check_range`); ValueError naming ``name`` otherwise."""
    x = _as_array(x, name)
    check_real(x, name)
    x = check_range(x, name)
    check_finite(x, name)
    return x


def check_steps(steps) -> int:
    """A number of steps as an int >= 0: a Python or NumPy int or a concrete 0-d
    integer array; ValueError for anything else (a float such as 2.7 is not rounded)."""
    if isinstance(steps, jax.core.Tracer):
        raise ValueError("steps must be a concrete int (it sets the shape of the result), got a traced value: "
                         "pass a Python int, static under jax.jit (static_argnums / static_argnames)")
    integer_array = (isinstance(steps, (np.ndarray, jax.Array)) and steps.ndim == 0
                     and jnp.issubdtype(steps.dtype, jnp.integer))  # fmt: skip
    if not ((isinstance(steps, (int, np.integer)) and not isinstance(steps, bool)) or integer_array):
        raise ValueError(f"steps must be an int >= 0 (the number of time steps), got {steps!r}")
    if int(steps) < 0:
        raise ValueError(f"steps must be an int >= 0 (the number of time steps), got {int(steps)}")
    return int(steps)


def check_dt(dt):
    """The time step as a real scalar, finite and nonzero when concrete (ValueError
    otherwise: dt = 0 gives a trajectory that never moves, most likely a typo)."""
    dt = _as_array(dt, "dt")
    if np.ndim(dt) != 0:
        raise ValueError(f"dt must be a scalar time step (s), got shape {tuple(np.shape(dt))}")
    dt = check_array(dt, "dt")
    if not isinstance(dt, jax.core.Tracer) and float(dt) == 0.0:
        raise ValueError("dt must be nonzero (s; a negative dt integrates backwards in time), got 0")
    return dt


def check_vector(model: Model, x, name: str, size: int | None = None):
    """Return ``x`` as an array of shape (size,), raising ValueError otherwise
    (and for NaN or inf in a concrete input)."""
    size = model.dof if size is None else size
    x = _as_array(x, name)
    check_real(x, name)
    x = jnp.asarray(check_range(x, name))
    if x.shape != (size,):
        extra = " (one sample)" if x.ndim > 1 else ""
        raise ValueError(
            f"{name} must have shape ({size},) for this model (dof={model.dof}), "
            f"got shape {x.shape}{extra}"
        )
    check_finite(x, name)
    return x


def check_model(model) -> None:
    """ValueError unless ``model`` is a :class:`Model` (e.g. the arguments swapped,
    which gave AttributeError: 'numpy.ndarray' object has no attribute 'dof')."""
    if not isinstance(model, Model):
        raise ValueError(f"the model must be a jaxmb.Model (jaxmb.chain, jaxmb.tree, ...), got "
                         f"{type(model).__name__}: the model comes first, f(model, q, ...)")  # fmt: skip


def check_batch(model: Model, x, name: str, size: int | None = None, *, angles: bool = False):
    """Return ``x`` as an array of shape (..., size) (one sample or a batch), raising
    ValueError otherwise (and for NaN or inf in a concrete input; with ``angles``,
    ``x`` is coordinates, and for an angle beyond :func:`angle_limit`; and for a value
    beyond the range of the dtype JAX computes it in: :func:`check_range`). NumPy
    inputs stay NumPy arrays (long double becomes float64): the compiled call
    converts them."""
    check_model(model)
    size = model.dof if size is None else size
    x = _as_array(x, name)
    check_real(x, name)  # before the shape: a string is no (3,) array of the wrong shape
    x = check_range(x, name)
    if x.ndim < 1 or x.shape[-1] != size:
        raise ValueError(
            f"{name} must have shape ({size},) for one sample or (..., {size}) for a batch "
            f"(this model has dof={model.dof}), got shape {tuple(x.shape)}"
        )
    check_finite(x, name, model.nbase if angles else None)
    return x


def check_loads(model: Model, loads, dtype, *, batched: bool = False):
    """Loads as a (segments, 3) array of dtype, or zeros when None.

    With ``batched``: None stays None, and (..., segments, 3) is accepted too (the
    array is returned uncast)."""
    n = model.segments
    if loads is None:
        return None if batched else jnp.zeros((n, 3), dtype)
    loads = _as_array(loads, "loads")
    check_real(loads, "loads")  # complex loads would lose their imaginary part silently
    loads = check_range(loads, "loads")
    loads = loads if batched else jnp.asarray(loads)
    ok = loads.shape[-2:] == (n, 3) if batched else loads.shape == (n, 3)
    if not ok:
        want = f"({n}, 3) or (..., {n}, 3)" if batched else f"({n}, 3)"
        raise ValueError(
            f"loads must have shape {want}: one world-frame wrench (Fx, Fy, Mz) per segment "
            f"at its centre of mass, got shape {tuple(loads.shape)}"
        )
    check_finite(loads, "loads")
    return loads if batched else loads.astype(dtype)


def prepare(model: Model, *xs):
    """Common dtype of the inputs; the model cast to it (ValueError for a parameter
    that dtype cannot hold: :meth:`Model.astype`)."""
    dtype = _float_dtype(*xs)
    return model.astype(dtype), dtype


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


def batched_states(*names):
    """Let a single-sample function of ``model`` and state vectors ``names`` (each
    (dof,)) take (..., dof) as well: the inputs are checked on their full shapes (and
    values, when concrete) and the function is vmapped over the broadcast leading
    shape; its other arguments are shared by every sample."""

    def deco(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            bound = sig.bind(*args, **kwargs)
            xs = [_as_array(bound.arguments[nm], nm) if nm in bound.arguments else None for nm in names]
            if all(x is None or np.ndim(x) <= 1 for x in xs):
                return fn(*args, **kwargs)  # one sample: the function checks it
            model = bound.arguments["model"]
            given = [nm for nm, x in zip(names, xs) if x is not None]
            xs = [check_batch(model, bound.arguments[nm], nm) for nm in given]

            def one(*sample):
                arguments = dict(bound.arguments, **dict(zip(given, sample)))
                return fn(**arguments)

            return over_leading(one, xs, (1,) * len(xs), given)

        return wrapper

    return deco


# ------------------------------------------------------------------- pose map


def _rot(theta, v):
    """Rotate local 2-vectors v (..., 2) by angles theta (...)."""
    c, s = jnp.cos(theta), jnp.sin(theta)
    return jnp.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


def _split(model: Model, q):
    """Base position (2,) and the angle coordinates (segments,)."""
    if model.base == "floating":
        return q[:2], q[2:]
    return model.origin, q


def _angles(model: Model, qa):
    if model.coordinates == "absolute":
        return qa
    A = ancestor_matrix(model.parent)
    return jnp.asarray(A, qa.dtype) @ qa


def _frames(model: Model, q, z=None):
    """Absolute angles (n,) and proximal joint points (n, 2).

    P_i = P_parent(i) + attach_i u(theta_parent(i)) + z_i, with the root at the base;
    in matrix form P = base + A @ (edge vectors + z), A the ancestor matrix.
    """
    base, qa = _split(model, q)
    theta = _angles(model, qa)
    parent = np.asarray(model.parent)
    par = np.where(parent < 0, 0, parent)
    is_child = jnp.asarray(parent >= 0, q.dtype)
    theta_p = theta[par]
    edge = (is_child * model.joint_attach)[:, None] * jnp.stack([jnp.cos(theta_p), jnp.sin(theta_p)], -1)
    if z is not None:
        edge = edge + z
    A = jnp.asarray(ancestor_matrix(model.parent), q.dtype)
    P = base[None, :] + A @ edge
    return theta, P


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
    theta, P = _frames(model, q, z)
    c = P + _rot(theta, model.com)
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
    return _angles(model, _split(model, q)[1])


@batched_states("q")
def joint_positions(model: Model, q):
    """Proximal joint points P (segments, 2), m."""
    model, q = _check(model, q)
    return _frames(model, q)[1]


@batched_states("q")
def distal_positions(model: Model, q):
    """Distal end points P + L u(theta) (segments, 2), m."""
    model, q = _check(model, q)
    theta, P = _frames(model, q)
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
        theta, P = _frames(model, q)
        return P[i] + _rot(theta[i], point.astype(q.dtype))

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
    g = lambda q_: pose(model, q_)  # noqa: E731
    vel = lambda q_: jax.jvp(g, (q_,), (qd,))[1]  # noqa: E731
    return jax.jvp(g, (q,), (qdd,))[1] + jax.jvp(vel, (q,), (qd,))[1]


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
