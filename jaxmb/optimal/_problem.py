"""optimize's first stage: the inputs checked and read into one problem description."""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import numpy as np

from .._checks import _float_dtype, check_finite
from ..model import Model
from ._basis import _check_ends, min_nodes
from ._hand import _hand_point
from ._movement import _LEADING, _NAMES, COSTS
from ._options import _check_int
from ._plans import _check_duration


class _Problem(NamedTuple):
    """Everything optimize needs after its checks (arrays still in their batch shapes)."""

    cost: Callable | None  # a user function, or None for the weighted built-in costs
    weights: np.ndarray  # (len(_NAMES),) the built-in costs' weights
    label: str  # the cost's name in a progress bar
    terms: tuple | None  # the built-in costs of nonzero weight (None: a user function)
    ends: int  # end conditions, 2 or 3
    target: str  # "joint" or "hand"
    segment: int  # the hand's segment index
    point: object  # the hand point (2,) or None
    start: object  # (..., width) coordinates or hand positions
    end: object
    duration: object  # () or (...)
    init: object  # (..., basis, dof) or None
    q_guess: object  # (..., dof) or None
    dtype: object  # the computation's floating dtype
    lead: tuple  # the batch's leading shape
    model_lead: tuple  # the model's own batch shape (a stacked model)
    nodes: int
    basis: int
    quadrature: str
    out_of_reach: str
    batching: str
    chunk: int | None
    progress: bool


#: with ``progress=True`` and no ``chunk``, a batch is solved in this many chunks at most
_PROGRESS_STEPS = 20


def _check_weight(name, v) -> float:
    """A cost weight: a finite real number >= 0 (a Python or NumPy number, or a concrete 0-d array)."""
    ok = False
    if isinstance(v, (np.ndarray, np.generic, jax.Array)) and not isinstance(v, jax.core.Tracer):
        ok = np.ndim(v) == 0 and np.asarray(v).dtype.kind in "fiu"
    elif isinstance(v, (int, float)):
        ok = True
    if ok:
        v = float(v)
        ok = math.isfinite(v) and v >= 0
    if not ok:
        raise ValueError(f"the weight of cost {name!r} must be a finite real number >= 0 (a number or a concrete "
                         f"0-d array), got {v!r}")
    return v


def _check_cost(cost):
    """(function or None, weights (len(_NAMES),), label, terms) of a cost name, a dict
    of names and weights, or a function of a Movement."""
    if isinstance(cost, str):
        cost = {cost: 1.0}
    if isinstance(cost, dict):
        if not cost:
            raise ValueError(f"cost is an empty dict: name at least one of {list(_NAMES)} with its weight")
        unknown = sorted(set(cost) - set(COSTS))
        if unknown:
            raise ValueError(f"unknown cost {unknown[0]!r}: use one of {list(_NAMES)}, a dict of them with "
                             f"weights, or a function of a Movement")
        cost = {k: _check_weight(k, v) for k, v in cost.items()}
        if not any(v > 0 for v in cost.values()):
            raise ValueError(f"every weight of cost {cost} is 0: nothing to minimise; give at least one "
                             "weight > 0")
        weights = np.array([cost.get(k, 0.0) for k in _NAMES])
        label = "+".join(k for k in _NAMES if k in cost)
        terms = tuple(k for k in _NAMES if cost.get(k, 0.0) > 0)  # the terms evaluated: nonzero weights
        return None, weights, label, terms
    if callable(cost):
        return cost, np.zeros(len(_NAMES)), "cost", None
    raise ValueError(f"cost must be a name ({list(_NAMES)}), a dict of them with weights, or a function "
                     f"of a Movement, got {cost!r}")


def _check_end_conditions(end_conditions, terms) -> int:
    """2 or 3; "auto": what the cost's Euler-Lagrange equation admits, q, qd, qdd at the
    ends for a term of third order, q and qd for the torque alone (a user function: 3)."""
    if isinstance(end_conditions, str) and end_conditions == "auto":
        return 3 if terms is None or any(_LEADING[k] == 3 for k in terms) else 2
    try:
        return _check_ends(end_conditions)
    except ValueError:
        raise ValueError(f"end_conditions must be 'auto', 2 or 3, got {end_conditions!r}") from None


def _check_target(model: Model, target) -> tuple:
    """(target, given): "joint" or "hand". None is "joint" except for a model of two
    coordinates, whose start and end of two numbers read both as joint angles and as
    a hand position: ValueError there, asking for target."""
    if target is None:
        if getattr(model, "dof", None) == 2:
            raise ValueError("target is required for a model of two coordinates (dof=2): start and end of two "
                             "numbers are either joint angles (target='joint', rad) or hand positions "
                             "(target='hand', x, y in m), and one read as the other solves another movement")
        return "joint", False
    if not isinstance(target, str) or target not in ("joint", "hand"):
        raise ValueError(f"target must be 'joint' (start/end are coordinates) or 'hand' (hand positions), "
                         f"got {target!r}")
    return target, True


def _check_choices(out_of_reach, quadrature, batching, nodes, basis, chunk):
    """(nodes, basis, chunk) checked, with the string settings."""
    if out_of_reach not in ("project", "raise"):
        raise ValueError(f"out_of_reach must be 'project' or 'raise', got {out_of_reach!r}")
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    if batching not in ("map", "vmap"):
        raise ValueError(f"batching must be 'map' or 'vmap', got {batching!r}")
    nodes = _check_int("nodes", nodes, 2)
    basis = _check_int("basis", basis, 1)
    if nodes < min_nodes(basis, quadrature):
        raise ValueError(f"nodes={nodes} is too few for basis={basis} with {quadrature!r} quadrature: give nodes >= "
                         f"{min_nodes(basis, quadrature)} ({min_nodes(1, quadrature) // 4} (basis + 3), see "
                         "jaxmb.optimal.min_nodes), or a smaller basis; with fewer the optimiser minimises the "
                         "quadrature error")
    return nodes, basis, None if chunk is None else _check_int("chunk", chunk, 1)


def _model_batch_shape(model: Model) -> tuple:
    """Leading batch shape of a stacked model (leaves with extra leading axes)."""
    shapes = []
    for name, core in (("length", 1), ("com", 2), ("mass", 1), ("inertia", 1), ("attach", 1), ("origin", 1),
                       ("gravity", 0)):
        shape = np.shape(getattr(model, name))
        shapes.append(shape[: len(shape) - core])
    lead = shapes[0]
    if any(s != lead for s in shapes):
        raise ValueError(f"a batch of models must stack every parameter along the same leading axes, got "
                         f"leading shapes {dict(zip(('length', 'com', 'mass', 'inertia', 'attach', 'origin', 'gravity'), shapes))}")
    return tuple(lead)


def _as_input(x):
    return np.asarray(x) if not isinstance(x, jax.Array) else x


def _check_ends_arrays(model: Model, start, end, target: str, target_given: bool):
    """start and end as arrays of (..., dof) coordinates or (..., 2) hand positions."""
    dof = model.dof
    width = dof if target == "joint" else 2
    what = f"coordinates (dof={dof})" if target == "joint" else "hand positions (x, y)"
    out = []
    for name, x in (("start", start), ("end", end)):
        x = _as_input(x)
        if x.ndim < 1 or x.shape[-1] != width:
            other = "" if target_given else " (give target='hand' for (x, y) hand positions)"
            raise ValueError(f"{name} must have shape ({width},) or (..., {width}) with target={target!r}: "
                             f"{what}, got shape {tuple(x.shape)}{other}")
        if x.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be an array of real numbers, got dtype {x.dtype}")
        check_finite(x, name)
        out.append(x)
    return out


def _check_init(init, lead, basis: int, dof: int):
    """(init, lead): initial coefficients (..., basis, dof) or None, and the batch shape
    broadcast with init's."""
    if init is None:
        return None, lead
    init = _as_input(init)
    if init.ndim < 2 or init.shape[-2:] != (basis, dof) or init.dtype.kind not in "fiu":
        raise ValueError(f"init must have shape (..., basis={basis}, dof={dof}), got {tuple(init.shape)}")
    check_finite(init, "init")
    try:
        return init, tuple(np.broadcast_shapes(lead, init.shape[:-2]))
    except ValueError:
        raise ValueError(f"init's batch {tuple(init.shape[:-2])} does not broadcast with the batch {tuple(lead)} "
                         "of start, end, duration and model") from None


def _check_q_guess(q_guess, lead, dof: int):
    """The inverse kinematics' initial guess (..., dof), whose batch fits in ``lead``, or None."""
    if q_guess is None:
        return None
    q_guess = _as_input(q_guess)
    if q_guess.ndim < 1 or q_guess.shape[-1] != dof or q_guess.dtype.kind not in "fiu":
        raise ValueError(f"q_guess must be real, of shape ({dof},) or (..., {dof}): coordinates (dof={dof}), "
                         f"got shape {tuple(q_guess.shape)}")
    check_finite(q_guess, "q_guess")
    try:
        fits = np.broadcast_shapes(q_guess.shape[:-1], lead) == tuple(lead)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"q_guess's batch {tuple(q_guess.shape[:-1])} does not broadcast to the batch "
                         f"{tuple(lead)} of start, end, duration and model")
    return q_guess


def _check(model: Model, start, end, duration, *, cost, target, nodes, basis, end_conditions, init, segment,
           point, q_guess, out_of_reach, quadrature, batching, chunk, progress) -> _Problem:  # fmt: skip
    """Check every input of optimize (ValueError naming it) and read them into a _Problem."""
    fn, weights, label, terms = _check_cost(cost)
    ends = _check_end_conditions(end_conditions, terms)
    target, target_given = _check_target(model, target)
    nodes, basis, chunk = _check_choices(out_of_reach, quadrature, batching, nodes, basis, chunk)
    i, pt = _hand_point(model, segment, point)
    model_lead = _model_batch_shape(model)
    start, end = _check_ends_arrays(model, start, end, target, target_given)
    duration = _as_input(duration)
    _check_duration(duration)
    dtype = _float_dtype(start, end, duration, *jax.tree_util.tree_leaves(model))
    try:
        lead = np.broadcast_shapes(start.shape[:-1], end.shape[:-1], np.shape(duration), model_lead)
    except ValueError:
        raise ValueError(f"batch shapes do not broadcast: start {start.shape[:-1]}, end {end.shape[:-1]}, "
                         f"duration {np.shape(duration)}, model {model_lead}") from None
    init, lead = _check_init(init, tuple(lead), basis, model.dof)
    q_guess = _check_q_guess(q_guess, lead, model.dof) if target == "hand" else None
    B = int(np.prod(lead)) if lead else 1
    if progress and chunk is None and B > 1:
        chunk = -(-B // _PROGRESS_STEPS)  # a bar of at most _PROGRESS_STEPS updates (one compilation)
    return _Problem(fn, weights, label, terms, ends, target, i, pt, start, end, duration, init, q_guess, dtype,
                    lead, model_lead, nodes, basis, quadrature, out_of_reach, batching, chunk, bool(progress))
