"""The exact regressor of the engine's joint loads, and their sensitivity to the
segment parameters: y = Y(q, qd, qdd) pi + y0(q, loads)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .._checks import check_finite
from ..dynamics import inverse_dynamics, joint_moments
from ..model import Model, replace_unchecked
from ..dynamics import joint_reactions
from ._parameters import QUANTITIES, _physical_from_pi, _with_physical, to_parameters, to_physical


def _check_quantity(quantity):
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")


def _engine(quantity, q, qd, qdd, joints, frame):
    """The engine's quantity as a function of (model, loads); forward-mode friendly."""

    def f(model, loads):
        if quantity == "inverse_dynamics":
            return inverse_dynamics(model, q, qd, qdd, loads, gradient="autodiff")
        if quantity == "joint_moments":
            return joint_moments(model, q, qd, qdd, loads, gradient="autodiff")
        return joint_reactions(model, q, qd, qdd, loads, joints=joints, frame=frame, gradient="autodiff")

    return f


def _massless(model: Model) -> Model:
    return replace_unchecked(model, mass=jnp.zeros_like(model.mass), inertia=jnp.zeros_like(model.inertia))


@functools.partial(precise_jit, static_argnames=("quantity", "joints", "frame"))
def _regressor_jit(model, q, qd, qdd, loads, quantity, joints, frame):
    # one compiled program for the Jacobian and the load term (about half the compile
    # time of the same derivatives taken eagerly through the engine)
    f = _engine(quantity, q, qd, qdd, joints, frame)
    Y = jax.jacfwd(lambda p: f(_with_physical(model, _physical_from_pi(p)), None))(to_parameters(model))
    if loads is None:
        return Y, jnp.zeros(Y.shape[:-1], Y.dtype)
    return Y, jnp.broadcast_to(f(_massless(model), loads), Y.shape[:-1])


@functools.partial(precise_jit, static_argnames=("quantity", "joints", "frame"))
def _sensitivity_jit(model, q, qd, qdd, quantity, joints, frame):
    f = _engine(quantity, q, qd, qdd, joints, frame)
    return jax.jacfwd(lambda ph: f(_with_physical(model, ph), None))(to_physical(model))


def _prepare(model: Model, quantity, q, qd, qdd, loads, joints, frame):
    """Eager checks (the traced engine cannot see NaN): arrays, finite, joints as a tuple."""
    _check_quantity(quantity)
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    out = []
    for x, nm in ((q, "q"), (qd, "qd"), (qdd, "qdd"), (loads, "loads")):
        if x is None:
            out.append(None)
            continue
        a = x if isinstance(x, jax.Array) else np.asarray(x)
        if a.dtype.kind not in "fiub":
            raise ValueError(f"{nm} must be a numeric array, got dtype {a.dtype}")
        if not isinstance(a, jax.core.Tracer):
            check_finite(np.asarray(a), nm)
        out.append(a)
    if joints is not None:
        if quantity != "joint_reactions":
            raise ValueError(f"joints= selects joints of quantity='joint_reactions'; {quantity!r} gives every "
                             "joint (index the result instead)")  # fmt: skip
        if isinstance(joints, (str, int, np.integer)):
            joints = (joints,)
        joints = tuple(model.index(j) for j in joints)
        if not joints:
            raise ValueError("joints is empty: give None for all joints, or a list of indices or names")
    return out, joints


def regressor(model: Model, q, qd, qdd, loads=None, *, quantity: str = "inverse_dynamics", joints=None,
              frame: str = "world"):  # fmt: skip
    """The regressor Y and the load term y0 of a quantity: y = Y pi + y0, exactly.

    ``Y`` is ``jax.jacfwd`` of the engine (the same batched kernels as
    :func:`jaxmb.inverse_dynamics`, :func:`jaxmb.joint_moments`,
    :func:`jaxmb.joint_reactions`) with respect to the barycentric parameters pi
    (:func:`to_parameters`), without the loads; ``y0`` is the engine with the loads
    and zero masses and inertias (zero without loads). Both do not depend on pi.

    Args:
      model: the model (topology, lengths, gravity; pi only sets where the exact
        Jacobian of the linear map is taken).
      q, qd, qdd: (..., dof) coordinates, velocities, accelerations (one sample or
        any leading batch shape).
      loads: optional known external loads, (segments, 3) or (..., segments, 3)
        world-frame wrenches at the centres of mass of ``model`` (as
        :func:`jaxmb.point_load` builds them, e.g. a ground reaction force).
      quantity: "inverse_dynamics" (generalized forces), "joint_moments" or
        "joint_reactions".
      joints, frame: for "joint_reactions", as :func:`jaxmb.joint_reactions`.

    Returns:
      (Y, y0): "inverse_dynamics" ``(..., dof, 4 n)`` and ``(..., dof)``;
      "joint_moments" ``(..., n, 4 n)`` and ``(..., n)``; "joint_reactions"
      ``(..., joints, 2, 4 n)`` and ``(..., joints, 2)``. Units: the quantity's
      (N m or N) per unit of each parameter.

    Raises:
      ValueError: an unknown quantity, or inputs that the engine rejects (shapes,
        NaN), with the engine's message.
    """
    (q, qd, qdd, loads), joints = _prepare(model, quantity, q, qd, qdd, loads, joints, frame)
    return _regressor_jit(model, q, qd, qdd, loads, quantity, joints, frame)


def sensitivity(model: Model, q, qd, qdd, *, quantity: str = "joint_moments", joints=None,
                frame: str = "world") -> jax.Array:  # fmt: skip
    """Jacobian of the joint loads with respect to every physical segment parameter.

    ``jax.jacfwd`` through the batched engine (``gradient="autodiff"``) with respect
    to the (segments, 4) mass, com_along, com_across, inertia. Known external loads
    (forces at points fixed on the segments, e.g. a ground reaction force at the
    centre of pressure) do not depend on these parameters, so they do not enter.

    Args:
      model: the model.
      q, qd, qdd: (..., dof) the movement.
      quantity: "joint_moments" (default), "joint_reactions" or "inverse_dynamics".
      joints, frame: for reactions, as :func:`jaxmb.joint_reactions`.

    Returns:
      (..., out, segments, 4): e.g. ``(T, n, n, 4)`` for moments, N m per kg, per m
      and per kg m^2; ``(T, joints, 2, n, 4)`` for reactions, N per unit.
    """
    (q, qd, qdd, _), joints = _prepare(model, quantity, q, qd, qdd, None, joints, frame)
    return _sensitivity_jit(model, q, qd, qdd, quantity, joints, frame)


# -------------------------------------------------------------------- Monte Carlo
