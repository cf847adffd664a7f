"""Dynamics of planar trees in the matrix form of the multibody notes.

    tau = M(q) qdd + C(q, qd) + G(q) + E(q),    E = -J^T F

The pose map g (see :mod:`jaxmb.kinematics`) defines everything, with the
block-diagonal ``Mp = diag(m, m, I)`` per segment and the applied wrenches ``h``
(gravity and loads, at the centres of mass):

    M = D^T Mp D,    C = D^T Mp gamma,    tau = D^T (Mp (D qdd + gamma) - h).

The public functions evaluate these quantities with the kernels of
 the private engine ``jaxmb._engine`` (recursive Newton-Euler, composite-body mass matrix, the
articulated-body algorithm), for one sample or any leading batch shape, compiled on the first call;
``method="projection"`` evaluates the formula above with JAX's derivatives of g (the
reference, one sample at a time). The pose-map quantities (:func:`coriolis_matrix`,
the energies, :func:`point_load`) take any leading shape too, as a ``jax.vmap`` of
the single-sample formula.

Joint reaction forces (:func:`joint_reactions`) come from the same recursion, or by
the projection of Blajer & Czaplicki (2005): augment the pose map with
open-constraint coordinates z, the prohibited relative translations at the joints,
p = g(q, z) evaluated at z = 0. Then E = dg/dz is a pseudo-inverse of the constraint
matrix and the joint reactions follow without any matrix inversion:

    lambda = E^T (Mp (D qdd + gamma) - h)

This is the force that the parent (or the ground) exerts on the child, world frame,
as the gait notebook's ``invdyn2d`` returns it; Blajer & Czaplicki's lambda is the
force of the child on the parent, the same numbers negated. Only the columns of E of
the requested joints are formed, as the paper does for the lower extremities.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import _engine
from ._checks import _float_dtype, check_array, check_batch, check_loads, check_model, check_vector, prepare
from ._engine.frames import frames, rot, second_jvp
from .kinematics import batched_states, dispatch, over_leading, pose
from .model import Model, Segment, replace_unchecked

__all__ = [
    "mass_matrix",
    "bias_forces",
    "gravity_forces",
    "external_forces",
    "inverse_dynamics",
    "forward_dynamics",
    "joint_moments",
    "joint_reactions",
    "joint_loads",
    "rnea",
    "rnea_full",
    "coriolis_matrix",
    "kinetic_energy",
    "potential_energy",
    "total_energy",
    "torque_components",
    "point_load",
    "applied_wrenches",
]

_SHAPES = """Every array argument is one sample (``q`` of shape ``(dof,)``) or a batch with
    any leading shape (``(..., dof)``, e.g. a ``(T, dof)`` time series); leading shapes
    broadcast against each other NumPy-style, and ``loads`` may be ``(segments, 3)``
    shared by every sample or ``(..., segments, 3)``. The result has the broadcast
    leading shape. The first call compiles (about a second); later calls with the same
    shapes, dtypes and model topology run the compiled kernel directly: on large
    batches as fast as under your own ``jax.jit``, while each direct call adds about
    0.1 ms of input checks and dispatch (the latency figures of the documentation's Performance page), which matters
    for small batches in a Python loop: put the loop under ``jax.jit`` then.
    ``jax.vmap`` over a single-sample call runs the same batched kernel (a
    ``custom_vmap`` rule), and so do nested vmaps."""


def _inputs(model: Model, *xs, names=("q", "qd", "qdd", "tau")):
    """Single-sample inputs (the pose-map functions): checked, cast to one dtype."""
    xs = [check_vector(model, x, nm) for x, nm in zip(xs, names)]
    model, dtype = prepare(model, *xs)
    return model, dtype, [x.astype(dtype) for x in xs]


def _batched(model: Model, arrays, names, loads=None):
    """Check (..., dof) arrays and loads; their leading shapes must broadcast."""
    for x, nm in zip(arrays, names):
        if x is None:
            raise ValueError(f"{nm} is required, got None (an array of shape ({model.dof},) or (..., {model.dof}); "
                             "zeros for a state at rest)")  # fmt: skip
    out = [check_batch(model, x, nm, angles=nm == "q") for x, nm in zip(arrays, names)]
    loads = check_loads(model, loads, None, batched=True)
    _check_model_dtype(model, _float_dtype(*out))
    shapes = {nm: np.shape(x)[:-1] for x, nm in zip(out, names)}
    if loads is not None and np.ndim(loads) > 2:
        shapes["loads"] = np.shape(loads)[:-2]
    try:
        np.broadcast_shapes(*shapes.values())
    except ValueError:
        got = ", ".join(f"{k} {v}" for k, v in shapes.items())
        raise ValueError(f"the leading (batch) shapes of the inputs do not broadcast: {got}") from None
    return out, loads


def _check_model_dtype(model: Model, dtype) -> None:
    """ValueError for a concrete parameter that the inputs' dtype (the one the
    compiled call computes in, e.g. float32 inputs with a float64 model) cannot
    hold: 1e39 kg became inf there (:meth:`Model.astype`)."""
    dtype = np.dtype(jax.dtypes.canonicalize_dtype(dtype))
    if dtype.itemsize >= 8:  # float64 holds every parameter that JAX can hold
        return
    leaves = jax.tree_util.tree_leaves(model)
    if any(isinstance(x, jax.core.Tracer) for x in leaves):
        return  # values unknown (a model traced by the caller's jit)
    if any(np.dtype(getattr(x, "dtype", dtype)).itemsize > dtype.itemsize for x in leaves):
        model.astype(dtype)


def _spec(kind, *, kernel="auto", chunk=None, gradient="autodiff", joints=None, frame="world"):
    if kernel not in _engine.METHODS:
        raise ValueError(f"kernel must be one of {_engine.METHODS}, got {kernel!r}")
    if gradient not in _engine.GRADIENTS:
        raise ValueError(f"gradient must be one of {_engine.GRADIENTS}, got {gradient!r}")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 0):
        raise ValueError(f"chunk must be an int >= 0 (0: the whole batch at once), got {chunk!r}")
    return _engine.Spec(kind, kernel, None if chunk is None else int(chunk), gradient, joints, frame)


def _zeros(model: Model, like):
    """(dof,) zeros in the floating dtype of ``like`` (float32 inputs stay float32)."""
    return np.zeros(model.dof, _float_dtype(like))


def _no_gravity(model: Model) -> Model:
    return replace_unchecked(model, gravity=jnp.zeros_like(model.gravity))  # checked when it was made


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
    """M = D^T Mp D from the pose map (one sample; the reference)."""
    D = jax.jacfwd(lambda q_: pose(model, q_))(q)  # (n, 3, dof)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)  # diag of Mp
    return jnp.einsum("ika,ik,ikb->ab", D, w, D)


def mass_matrix(model: Model, q):
    """Mass matrix M(q) = D^T Mp D, symmetric positive definite.

    Computed by composite bodies (O(segments^2) per sample): with positions relative to
    the root's joint and sums over the subtree of k, M_jk = J_k + (P_k - P_j) . h_k for
    j = k or an ancestor of k (the composite-body algorithm).

    Args:
      model: the model.
      q: (..., dof) generalized coordinates.

    Returns:
      (..., dof, dof) in kg m^2 (angles), kg m (mixed) and kg (base translations).

    __SHAPES__
    """
    (q,), _ = _batched(model, (q,), ("q",))
    return _engine.run(_spec("mass"), model, q)


def bias_forces(model: Model, q, qd, *, gradient: str = "adjoint"):
    """Coriolis and centripetal forces C(q, qd) = D^T Mp gamma, (..., dof).

    Computed as the recursion at ``qdd = 0`` with gravity switched off.
    The gradient with respect to the model is the hand-derived adjoint by default;
    ``gradient`` as in :func:`inverse_dynamics` ("autodiff" for forward mode).

    __SHAPES__
    """
    (q, qd), _ = _batched(model, (q, qd), ("q", "qd"))
    return _engine.run(_spec("tau", gradient=gradient), _no_gravity(model), q, qd, _zeros(model, q))


def gravity_forces(model: Model, q, *, gradient: str = "adjoint"):
    """Gravity term G(q) = -D^T h_gravity, (..., dof): the recursion at ``qd = qdd = 0`` without loads.

    The gradient with respect to the model is the hand-derived adjoint by default;
    ``gradient`` as in :func:`inverse_dynamics` ("autodiff" for forward mode).

    __SHAPES__
    """
    (q,), _ = _batched(model, (q,), ("q",))
    z = _zeros(model, q)
    return _engine.run(_spec("tau", gradient=gradient), model, q, z, z)


def external_forces(model: Model, q, loads, *, gradient: str = "adjoint"):
    """External term E(q) = -J^T F = -D^T loads, (..., dof).

    the recursion at ``qd = qdd = 0`` with the loads and without gravity.
    The gradient with respect to the model is the hand-derived adjoint by default;
    ``gradient`` as in :func:`inverse_dynamics` ("autodiff" for forward mode).

    Args:
      model: the model.
      q: (..., dof) generalized coordinates.
      loads: (segments, 3) or (..., segments, 3) world-frame wrenches (Fx, Fy, Mz) at
        the centres of mass.

    __SHAPES__
    """
    if loads is None:
        raise ValueError("external_forces needs loads: a (segments, 3) or (..., segments, 3) array")
    (q,), loads = _batched(model, (q,), ("q",), loads)
    z = _zeros(model, q)
    return _engine.run(_spec("tau", gradient=gradient), _no_gravity(model), q, z, z, loads)


def _inverse_projection(model: Model, q, qd, qdd, loads):
    """tau = D^T (Mp (D qdd + gamma) - h): a forward then a reverse derivative of g."""
    acc = second_jvp(lambda q_: pose(model, q_), q, qd, qdd)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    resid = w * acc - applied_wrenches(model, loads)
    _, vjp = jax.vjp(lambda q_: pose(model, q_), q)
    return vjp(resid)[0]


def _projection(fn, model, q, qd, qdd, loads, **static):
    """A pose-map formula ``fn(model, q, qd, qdd, loads, **static)`` over any leading
    shape (vmap of the one-sample form) of checked inputs; a direct call compiled
    (:func:`jaxmb.kinematics.dispatch`: op by op it compiled some 100 small
    programs per model and shape, and dispatched as many each call)."""
    arrays = {"model": model, "q": q, "qd": qd, "qdd": qdd, "loads": loads}
    return dispatch(_projection_eval, (("fn", fn), ("static", tuple(sorted(static.items())))), arrays)


def _projection_eval(a):
    """:func:`_projection` of a dict of its arguments."""
    model, q, qd, qdd, loads, fn = (a[k] for k in ("model", "q", "qd", "qdd", "loads", "fn"))
    static = dict(a["static"])
    arrays = [jnp.asarray(x) for x in (q, qd, qdd)]
    dtype = _float_dtype(*arrays)
    model = model.astype(dtype)
    arrays = [x.astype(dtype) for x in arrays]
    n = model.segments
    if loads is None:
        loads = jnp.zeros((n, 3), dtype)
    loads = jnp.asarray(loads).astype(dtype)
    return over_leading(lambda a, b, c, ld: fn(model, a, b, c, ld, **static), arrays + [loads], (1, 1, 1, 2),
                        ("q", "qd", "qdd", "loads"))


def inverse_dynamics(model: Model, q, qd, qdd, loads=None, *, method: str = "recursive",
                     kernel: str = "auto", chunk: int | None = None, gradient: str = "adjoint"):  # fmt: skip
    """Generalized forces tau = M qdd + C + G + E, (..., dof).

    Args:
      model: the model.
      q: (..., dof) generalized coordinates (m, rad).
      qd: (..., dof) velocities (m/s, rad/s).
      qdd: (..., dof) accelerations (m/s^2, rad/s^2).
      loads: optional world-frame wrenches (Fx, Fy, Mz) applied at the centres of mass
        (N, N, N m), (segments, 3) or (..., segments, 3); see :func:`point_load`.
      method: "recursive" (O(n) Newton-Euler, the batched kernel; default) or
        "projection" (the pose-map formula D^T (Mp (D qdd + gamma) - h); the
        reference, evaluated sample by sample).
      kernel: "auto", "unrolled" or "matrix": how the recursion is evaluated (see
        the module docstring; "auto" unrolls up to 10 segments, except on the CPU for
        models with more than 6 segments on a path from the root, where the matrix
        form is faster: 0.55 to 0.83 of the unrolled time for chains of 7 to 10).
      chunk: at most this many samples per chunk (None: the kernel's default; 0: the
        whole batch). The batch is cut into ceil(B / chunk) equal chunks, the last one
        overlapping its predecessor, so that one compiled kernel serves them all.
      gradient: how reverse mode (``jax.grad``, ``jax.vjp``) treats the model's
        parameters. "adjoint" (default): a hand-derived adjoint that sums the gradient
        over the batch in one pass (about 1.5 to 2.5 times the cost of the call itself;
        JAX's reverse mode of the recursion costs 4 to 9 times), while q, qd, qdd and
        loads get JAX's reverse mode (of the matrix form of the recursion from four
        segments on, whatever ``kernel``: XLA recomputes an unrolled recursion per
        cotangent, 8x slower for a 7-chain); it is reverse-mode only: ``jax.jvp`` and
        ``jax.jacfwd`` of it raise "can't apply forward-mode autodiff (jvp) to a
        custom_vjp function" -- use "autodiff" for them (plain JAX differentiation
        in both modes); forward over reverse (``jax.hessian``,
        ``jax.jacfwd(jax.grad(f))``) works with either. Models of more than 32 segments always get
        "autodiff" (the adjoint's one fused loop runs slower beyond). Under ``jax.vmap`` of a single-sample call the adjoint runs per
        sample and JAX sums it (slower than one call with a leading batch axis).

    Returns:
      (..., dof) generalized forces: joint moments (N m) in relative coordinates; for a
      floating base the first two entries are the force (N) the base must supply.

    Raises:
      ValueError: naming the argument, for a wrong shape or a non-real dtype, NaN or
        inf, an angle beyond :func:`jaxmb.kinematics.angle_limit`, and a value beyond
        the range of the dtype the call computes in (1e39 in float32, JAX's dtype for
        float64 inputs while its 64-bit mode is off; the model's parameters too, e.g.
        a float64 model with float32 inputs). Long double inputs are converted to
        float64 (float32 without 64-bit mode). Under ``jax.jit`` the values are
        unknown and not checked: there such an input becomes inf and the result NaN.
        Values within the range whose products overflow (speeds beyond about 1e19
        rad/s in float32) give inf or NaN in either case.

    __SHAPES__
    """
    if method == "projection":
        (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
        return _projection(_inverse_projection, model, q, qd, qdd, loads)
    if method != "recursive":
        raise ValueError(f"method must be 'recursive' or 'projection', got {method!r}")
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    return _engine.run(_spec("tau", kernel=kernel, chunk=chunk, gradient=gradient), model, q, qd, qdd, loads)


def forward_dynamics(model: Model, q, qd, tau, loads=None, *, chunk: int | None = None, gradient: str = "adjoint"):
    """Accelerations qdd solving M qdd = tau - (C + G + E), (..., dof).

    Planar articulated-body algorithm (O(segments) per sample, no mass matrix): an
    outward pass of velocities, an inward pass of articulated inertias (3x3 about
    each joint point, world axes) and an outward pass of accelerations, unrolled over
    the segments on rows of samples; a floating root is a 3x3 solve; absolute
    coordinates through subtree sums of the generalized forces. Each hinge pivot is
    at least the segment's own inertia about its joint (an exact lower bound), so
    rounding (float32 on an ill-conditioned model) cannot make it vanish and the
    result stays finite. Up to 4 segments the whole pass is one fused loop over the
    batch; beyond, in chunks of at most 2048 samples with the segments' states
    materialised.

    Derivatives follow from those of inverse dynamics: qdd solves ID(q, qd, qdd) =
    tau, so d qdd = M^-1 (d tau - dID) with qdd held fixed, and no derivative of the
    articulated-body algorithm itself is taken. ``gradient`` chooses how:

    - "adjoint" (default; reverse mode only): a rule of its own transposes that
      formula. For the cotangent qdd_bar it solves lam = M^-1 qdd_bar with one more
      articulated-body pass, at rest. Then tau_bar = lam. The model's cotangent is
      minus the hand-derived parameter adjoint of :func:`inverse_dynamics` applied
      to lam (up to 32 segments). q, qd and loads get JAX's reverse mode of the
      recursion (its matrix form when the kernel is unrolled).
      It compiles faster than "autodiff", which traces the forward-mode
      derivative and lets JAX transpose it (about 1.35x for the seven-segment
      human; the Performance page).
      ``jax.jvp`` and ``jax.jacfwd`` of it raise "can't apply forward-mode autodiff
      (jvp) to a custom_vjp function": use "autodiff" for them. Reverse over reverse and forward over
      reverse (``jax.hessian``, ``jax.jacfwd(jax.grad(f))``) work.
    - "autodiff": a ``jax.custom_jvp`` rule, so forward mode works as well, and
      reverse mode follows by JAX's transposition. The rule takes one forward-mode
      pass of the recursion and one more articulated-body solve, at rest, as a
      symmetric ``lax.custom_linear_solve``. In reverse mode the model's part of dID
      is still transposed by the parameter adjoint (through a
      ``lax.custom_linear_solve`` whose transpose it is). The state's part of dID
      (q, qd, loads) is, for models that "auto" unrolls, the unrolled recursion's
      JVP in forward mode and JAX's reverse mode of the matrix form in reverse mode.
      Reverse mode of the matrix form compiles and runs faster than that of the
      unrolled kernel (for the gradient of a 10-step :func:`jaxmb.simulate` of a
      7-segment chain, in an ad-hoc alternated comparison while developing: about
      1.5x faster to compile and 2x to run); the price is a longer trace of
      forward mode.

    Args:
      model: the model.
      q, qd: (..., dof) generalized coordinates and velocities.
      tau: (..., dof) generalized forces (joint moments in relative coordinates, N m).
      loads: optional (segments, 3) or (..., segments, 3) world-frame wrenches at the
        centres of mass.
      chunk: at most this many samples per chunk, as in :func:`inverse_dynamics`
        (None: 2048 beyond 4 segments, the whole batch up to 4; 0: the whole batch
        at once).
      gradient: "adjoint" (default) or "autodiff", as above.

    __SHAPES__
    """
    (q, qd, tau), loads = _batched(model, (q, qd, tau), ("q", "qd", "tau"), loads)
    return _engine.run(_spec("forward", chunk=chunk, gradient=gradient), model, q, qd, tau, loads)


def joint_moments(model: Model, q, qd, qdd, loads=None, *, kernel: str = "auto",
                  chunk: int | None = None, gradient: str = "adjoint"):  # fmt: skip
    """Net joint moments (..., segments), N m: the moment the parent exerts on each segment.

    Counter-clockwise positive; the child exerts the opposite on the parent. In
    relative coordinates with a fixed base these are the generalized forces; in
    absolute coordinates they are converted (tau_i is the sum of the generalized
    forces over the subtree of i). For a floating base the root's entry is the
    moment the base must supply about the root's proximal point.

    Args: as :func:`inverse_dynamics` (``gradient`` likewise).

    __SHAPES__
    """
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    return _engine.run(_spec("moments", kernel=kernel, chunk=chunk, gradient=gradient), model, q, qd, qdd, loads)


def joint_loads(model: Model, q, qd, qdd, loads=None, *, kernel: str = "auto", chunk: int | None = None):
    """Every joint load at once: tau, the reaction forces F and the joint moments T.

    One recursive Newton-Euler pass (``rnea_full`` before: that name is deprecated).

    Cost: XLA:CPU computes each output row of the unrolled recursion (the default
    kernel of most models up to 10 segments, see :func:`inverse_dynamics`) in a
    loop of its own, recomputing the shared kinematics, so the time grows with the
    number of rows returned (dof + 3 segments): for the three-segment leg, ``joint_moments`` and ``joint_reactions``
    together took a third of the time of this function. ``kernel="matrix"``
    materialises the recursion once and writes the rows from it: the gait
    pipeline's choice for moments and reactions together (``jaxmb.gait._KERNEL``).

    Args:
      model: the model.
      q, qd, qdd: (..., dof) generalized coordinates, velocities, accelerations.
      loads: optional (segments, 3) or (..., segments, 3) world-frame wrenches
        (Fx, Fy, Mz) at the centres of mass (N, N, N m).
      kernel, chunk: as :func:`inverse_dynamics`.

    Returns:
      (tau, F, T):
        tau (..., dof) generalized forces, M qdd + C + G + E;
        F (..., segments, 2) force that the parent (or ground/base) exerts on each
        segment at its joint, world frame, N;
        T (..., segments) moment that the parent exerts on each segment
        (counter-clockwise), N m. For a floating base, F[0] and T[0] are what the
        base must supply.
    """
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    out = _engine.run(_spec("full", kernel=kernel, chunk=chunk), model, q, qd, qdd, loads)
    dof, n = model.dof, model.segments
    F = out[..., dof : dof + 2 * n]
    return out[..., :dof], F.reshape(F.shape[:-1] + (n, 2)), out[..., dof + 2 * n :]


def rnea_full(model: Model, q, qd, qdd, loads=None, *, kernel: str = "auto", chunk: int | None = None):
    """Deprecated alias of :func:`joint_loads` (the same arguments and results)."""
    warnings.warn("jaxmb.rnea_full is deprecated: use jaxmb.joint_loads (the same arguments and results)",
                  DeprecationWarning, stacklevel=2)  # fmt: skip
    return joint_loads(model, q, qd, qdd, loads, kernel=kernel, chunk=chunk)


def rnea(model: Model, q, qd, qdd, loads=None):
    """Deprecated: ``inverse_dynamics(model, q, qd, qdd, loads, gradient="autodiff")``.

    Inverse dynamics by recursive Newton-Euler, tau = M qdd + C + G + E, (..., dof),
    with plain JAX differentiation (no adjoint; forward mode works): the same kernel
    and result as :func:`inverse_dynamics` with ``gradient="autodiff"``, under a
    second name.
    """
    warnings.warn('jaxmb.rnea is deprecated: use jaxmb.inverse_dynamics(model, q, qd, qdd, loads, '
                  'gradient="autodiff") (the same kernel and result)', DeprecationWarning, stacklevel=2)  # fmt: skip
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    return _engine.run(_spec("tau", gradient="autodiff"), model, q, qd, qdd, loads)


def torque_components(model: Model, q, qd, qdd, loads=None, *, gradient: str = "adjoint"):
    """The terms of tau = M qdd + C + G + E, each (..., dof), as a dict.

    Keys "inertial" (M qdd), "coriolis" (C), "gravity" (G), "external" (E = -J^T F)
    and "total" (their sum, the generalized forces). Useful to see which term drives
    a movement (interaction torques in fast reaching, gravity in slow). ``gradient``
    as in :func:`inverse_dynamics`.
    """
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    z = _zeros(model, q)
    nog = _no_gravity(model)
    spec = _spec("tau", gradient=gradient)
    parts = {
        # M qdd: the recursion without velocity, gravity or loads
        "inertial": _engine.run(spec, nog, q, z, qdd),
        "coriolis": _engine.run(spec, nog, q, qd, z),
        "gravity": _engine.run(spec, model, q, z, z),
    }
    parts["external"] = _engine.run(spec, nog, q, z, z, loads) if loads is not None else jnp.zeros_like(parts["gravity"])
    parts["total"] = parts["inertial"] + parts["coriolis"] + parts["gravity"] + parts["external"]
    # every term with the inputs' broadcast leading shape (each depends on some of
    # them only: the inertial term on q and qd's shape was q's alone)
    return {k: jnp.broadcast_to(v, parts["total"].shape) for k, v in parts.items()}


@batched_states("q", "qd")
def coriolis_matrix(model: Model, q, qd):
    """Coriolis matrix C(q, qd) from the Christoffel symbols of M, (..., dof, dof).

    C_ij = 1/2 sum_k (dM_ij/dq_k + dM_ik/dq_j - dM_jk/dq_i) qd_k, so that
    C qd = bias_forces and Mdot - 2 C is skew-symmetric (M's derivatives by autodiff).
    q, qd: (dof,) or (..., dof), broadcasting (a batch is a ``jax.vmap``).
    """
    model, _, (q, qd) = _inputs(model, q, qd)
    dM = jax.jacfwd(lambda q_: _mass_matrix(model, q_))(q)  # [i, j, k] = dM_ij/dq_k
    t1 = dM @ qd
    t2 = jnp.einsum("ikj,k->ij", dM, qd)
    t3 = jnp.einsum("jki,k->ij", dM, qd)
    return 0.5 * (t1 + t2 - t3)


@batched_states("q", "qd")
def kinetic_energy(model: Model, q, qd):
    """Kinetic energy 1/2 sum (m |v_com|^2 + I omega^2), J: () per sample.

    q, qd: (dof,) or (..., dof), broadcasting; a batch gives (...).
    """
    model, _, (q, qd) = _inputs(model, q, qd)
    v = jax.jvp(lambda q_: pose(model, q_), (q,), (qd,))[1]
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    return 0.5 * jnp.sum(w * v * v)


@batched_states("q")
def potential_energy(model: Model, q):
    """Gravitational potential energy sum m g y_com, J (zero at y = 0): () per sample,
    (...) for q of shape (..., dof)."""
    model, _, (q,) = _inputs(model, q)
    return model.gravity * jnp.sum(model.mass * pose(model, q)[:, 1])


def total_energy(model: Model, q, qd):
    """Kinetic plus gravitational potential energy, J: () per sample, (...) for a batch."""
    return kinetic_energy(model, q, qd) + potential_energy(model, q)


def point_load(model: Model, q, segment: Segment, point, force, moment=0.0, *, frame: str = "world"):
    """Loads (..., segments, 3) for a force applied at a point of one segment.

    The force ``F`` at point ``p`` becomes the wrench at the segment's centre of mass
    ``c``: ``(Fx, Fy, moment + (p - c) x F)``; all other rows are zero. Add several
    loads arrays to combine forces.

    Args:
      model: the model.
      q: (dof,) or (..., dof) generalized coordinates (the pose, to locate the centre
        of mass).
      segment: index or name of the segment the force acts on.
      point: (2,) or (..., 2) application point, m: world coordinates
        (``frame="world"``, e.g. the centre of pressure of a ground reaction force)
        or local (along, across) from the proximal joint (``frame="segment"``, e.g.
        the hand at (L, 0)).
      force: (2,) or (..., 2) world-frame force (Fx, Fy), N.
      moment: free moment Mz, N m, a scalar or (...) (e.g. the force plate's free
        moment).
      frame: "world" or "segment", how ``point`` is given.

    Returns:
      (segments, 3) for one sample, or (..., segments, 3) with the broadcast leading
      shape of q, point, force and moment (NumPy-style; a ``jax.vmap`` of the
      single-sample formula): e.g. a (T, dof) series with a (T, 2) centre of pressure
      and force gives (T, segments, 3). The dtype is the floating dtype of q.

    Raises:
      ValueError: for a bad segment or frame, shapes that do not fit or do not
        broadcast, and non-finite (or non-real) q, point, force or moment.
    """
    i = model.index(segment)
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    q = check_batch(model, q, "q")
    arrays = {"point": point, "force": force, "moment": moment}
    for name, x in arrays.items():
        arrays[name] = check_array(x, name)
    point, force, moment = arrays.values()
    if np.ndim(point) < 1 or np.shape(point)[-1] != 2:
        raise ValueError(f"point must have shape (2,) or (..., 2), got {tuple(np.shape(point))}")
    if np.ndim(force) < 1 or np.shape(force)[-1] != 2:
        raise ValueError(f"force must have shape (2,) or (..., 2) (Fx, Fy in N), got {tuple(np.shape(force))}")
    dtype = _float_dtype(q)  # q sets the dtype: tuples must not promote float32
    arrays = {"model": model, "q": q, "point": point, "force": force, "moment": moment}
    return dispatch(_point_loads, (("i", i), ("frame", frame), ("dtype", np.dtype(dtype))), arrays)


def _point_loads(a):
    """:func:`point_load` of checked inputs over their broadcast leading shape."""
    model, i, frame, dtype = a["model"].astype(a["dtype"]), a["i"], a["frame"], a["dtype"]
    return over_leading(
        lambda q_, p_, f_, m_: _point_load(model, i, q_, p_, f_, m_, frame, dtype),
        (a["q"], a["point"], a["force"], a["moment"]), (1, 1, 1, 0), ("q", "point", "force", "moment"),
    )  # fmt: skip


def _point_load(model, i, q, point, force, moment, frame, dtype):
    """One sample of :func:`point_load`: the (segments, 3) loads."""
    q = jnp.asarray(q).astype(dtype)
    theta, P = frames(model, q)
    c = P[i] + rot(theta[i], model.com[i])
    point, force, moment = jnp.asarray(point), jnp.asarray(force), jnp.asarray(moment)
    p = point.astype(dtype)
    if frame == "segment":
        p = P[i] + rot(theta[i], p)
    f = force.astype(dtype)
    d = p - c
    mz = moment.astype(dtype) + d[0] * f[1] - d[1] * f[0]
    row = jnp.stack([f[0], f[1], mz])
    return jnp.zeros((model.segments, 3), dtype).at[i].set(row)


for _f in (mass_matrix, bias_forces, gravity_forces, external_forces, inverse_dynamics, forward_dynamics,
           joint_moments):  # fmt: skip
    _f.__doc__ = _f.__doc__.replace("__SHAPES__", _SHAPES)
del _f


# ------------------------------------------------------------ joint reactions


def _joint_indices(model: Model, joints):
    if joints is None:
        return tuple(range(model.segments))
    if isinstance(joints, (str, int, np.integer)) or np.ndim(joints) == 0:
        joints = (joints,)  # one joint; model.index names what is not an index or a name
    idx = tuple(model.index(j) for j in joints)
    if not idx:
        raise ValueError("joints is empty: give None for all joints, or a list of indices or names")
    return idx


def joint_reactions(
    model: Model,
    q,
    qd,
    qdd,
    loads=None,
    *,
    joints: Sequence[Segment] | Segment | None = None,
    frame: str = "world",
    method: str = "recursive",
    kernel: str = "auto",
    chunk: int | None = None,
    gradient: str = "adjoint",
):
    """Joint reaction forces, (..., len(joints), 2), N.

    Args:
      model: the model.
      q, qd, qdd: (..., dof) generalized coordinates, velocities, accelerations.
      loads: optional (segments, 3) or (..., segments, 3) world-frame wrenches
        (Fx, Fy, Mz) at the centres of mass, e.g. from :func:`jaxmb.point_load`.
      joints: the joints to compute, by segment index or name (joint i is the
        proximal joint of segment i; a negative index counts from the end, as in
        Python: -1 is the last segment's joint, not the ground, which is -1 in
        ``parent``); default: all, in segment order.
      frame: "world" for (Fx, Fy), or "segment" for (axial, shear) in the child
        segment's frame: axial along the child's axis (positive when the parent
        pushes the child distally, i.e. compression), shear along the axis rotated
        by +90 degrees.
      method: "recursive" (default: the batched kernel's backward pass,
        F_i = sum over the subtree of i of (m_j a_j - h_j)) or "projection"
        (Blajer & Czaplicki's lambda = E^T (Mp (D qdd + gamma) - h) with E from the
        pose map, evaluated sample by sample: the reference). They agree to
        round-off (tests).
      kernel, chunk: as :func:`jaxmb.inverse_dynamics`.
      gradient: as :func:`jaxmb.inverse_dynamics`: "adjoint" (default) transposes
        the model's derivative by the hand-derived parameter adjoint (a reaction's
        cotangent is a virtual translation of the joint's subtree), reverse mode
        only; "autodiff" for forward mode (``jax.jvp``, ``jax.jacfwd``).

    Returns:
      The force that the parent (or the ground) exerts on each requested segment at
      its joint. For a floating base, the root's row is the force the base must
      supply (zero for a free flight that obeys Newton's law). One sample or any
      leading batch shape, as :func:`jaxmb.inverse_dynamics` (compiled on the first
      call, ``jax.vmap`` runs the batched kernel).
    """
    check_model(model)
    idx = _joint_indices(model, joints)
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    (q, qd, qdd), loads = _batched(model, (q, qd, qdd), ("q", "qd", "qdd"), loads)
    if method == "recursive":
        spec = _spec("reactions", kernel=kernel, chunk=chunk, gradient=gradient, joints=idx, frame=frame)
        return _engine.run(spec, model, q, qd, qdd, loads)
    if method != "projection":
        raise ValueError(f"method must be 'recursive' or 'projection', got {method!r}")

    return _projection(_reactions_one, model, q, qd, qdd, loads, idx=idx, frame=frame)


def _reactions_one(model, q, qd, qdd, loads, idx, frame):
    """One sample of the projection's reactions at joints ``idx``, in ``frame``."""
    lam = _reactions_projection(model, q, qd, qdd, loads, idx)
    if frame == "segment":
        theta = pose(model, q)[jnp.asarray(idx), 2]
        c, s = jnp.cos(theta), jnp.sin(theta)
        lam = jnp.stack([c * lam[:, 0] + s * lam[:, 1], -s * lam[:, 0] + c * lam[:, 1]], 1)
    return lam


def _reactions_projection(model, q, qd, qdd, loads, idx):
    # E for each distinct joint once (a repeated index in .at[].set would keep only
    # its last copy, and the first copy's reaction would come out zero), then the
    # requested order, repeats included
    uniq = tuple(sorted(set(idx)))
    if uniq != tuple(idx):
        lam = _reactions_projection(model, q, qd, qdd, loads, uniq)
        return lam[jnp.asarray([uniq.index(i) for i in idx])]
    sel = jnp.asarray(idx)

    def g_z(z_sel):  # pose with open-constraint coordinates at the requested joints only
        z = jnp.zeros((model.segments, 2), q.dtype).at[sel].set(z_sel)
        return pose(model, q, z)

    E = jax.jacfwd(g_z)(jnp.zeros((len(idx), 2), q.dtype))  # (n, 3, k, 2)
    acc = second_jvp(lambda q_: pose(model, q_), q, qd, qdd)
    w = jnp.stack([model.mass, model.mass, model.inertia], 1)
    resid = w * acc - applied_wrenches(model, loads)
    return jnp.einsum("ipjc,ip->jc", E, resid)
