"""optimize: check -> end postures -> flatten -> solve -> unflatten, each stage a function."""

from __future__ import annotations

import functools
import warnings
from typing import Callable, Union

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from ..model import Model, Segment
from ._hand import _hand_derivatives
from ._ik import inverse_kinematics
from ._movement import _NAMES, _Config
from ._options import Adam, LBFGS, _solver_from
from ._problem import _check, _Problem
from ._result import OptimalMovement, _warn_unresolved_hand_jerk
from ._solve import _solve_chunks


def optimize(model: Model, start, end, duration, *, cost: Union[str, dict, Callable] = "torque_change",
             target: str | None = None, nodes: int = 100, basis: int = 10, solver: LBFGS | Adam | None = None,
             end_conditions: Union[str, int] = "auto", init=None, segment: Segment = -1, point=None, q_guess=None,
             out_of_reach: str = "project", quadrature: str = "gauss", batching: str = "map",
             chunk: int | None = None, progress: bool = False, **deprecated) -> OptimalMovement:  # fmt: skip
    """Optimal rest-to-rest movement(s) between two postures or two hand positions.

    Minimises ``cost`` over the movements q(t) that start at ``start`` and end at
    ``end`` at rest (zero velocity at both ends, and zero acceleration for the costs
    of third order, exact by construction: see ``end_conditions`` and
    :mod:`jaxmb.optimal`), with L-BFGS (or Adam) inside one compiled call:

        min_a  J(q_a),   q_a(t) = q_start + (q_end - q_start) p(t / T) + sum_k a_k psi_k(t / T).

    Batches: ``start``, ``end``, ``duration`` and the model (a stacked model, e.g.
    ``jax.tree.map(lambda *x: jnp.stack(x), *models)``) may carry leading batch axes,
    broadcast against each other; every problem is solved independently in one
    compiled call (``lax.map`` or ``jax.vmap`` over the solver, see ``batching``),
    e.g. reaches to 1,000 targets or one reach of 1,000 arms.

    Example:
      >>> arm = jaxmb.chain([0.3, 0.35], [0.15, 0.17], [2.0, 1.5], [0.02, 0.03], gravity=0.0)
      >>> r = jaxmb.optimize(arm, [0.2, 0.4], [0.4, 0.3], 0.5, target="hand", cost="torque_change")
      >>> r.hand.shape, bool(r.converged)  # doctest: +SKIP
      ((100, 2), True)

    Args:
      model: the model (any chain or tree; fixed or floating base), or a stacked batch.
      start, end: with ``target="joint"``, (..., dof) coordinates (rad; m for base
        translations); with ``target="hand"``, (..., 2) hand positions (m), turned into
        postures by :func:`jaxmb.optimal.inverse_kinematics` (the end from the
        start posture, so a two-link arm keeps its elbow branch). Those postures are
        kept: for an arm of more than two links, which reaches a hand position in
        many postures, the end posture is not optimised (another one can cost
        less); give postures with ``target="joint"`` to compare them.
      duration: movement time T, s (finite, > 0), a scalar or a (...) batch.
      cost: "torque_change" (default), "torque", "hand_jerk", "joint_jerk", a dict
        of them with weights (e.g. ``{"torque_change": 1, "hand_jerk": 1e-3}``; weights
        are finite real numbers >= 0, Python or NumPy numbers or concrete 0-d arrays,
        at least one of them > 0; the built-in costs of each set of nonzero weights
        share one compiled solver), or a function
        ``cost(movement) -> scalar`` of a :class:`Movement` (traced: use jnp; a new
        function object compiles anew, so reuse it).
      target: "joint" or "hand", what ``start`` and ``end`` are. Required for a
        model of two coordinates (``dof == 2``, e.g. a two-link arm), where two numbers
        read both ways: hand positions taken for joint angles solved another movement
        without an error. For any other model None (the default) means "joint": hand
        positions are 2 numbers, coordinates ``dof``, so the shape tells them apart
        and a mismatch is an error naming both.
      nodes: number of quadrature points the costs are integrated on, and of the
        equally spaced times (ends included) the result is given at; at least
        :func:`min_nodes` (2 (basis + 3) with Gauss-Legendre, 12 (basis + 3) with the
        trapezoidal rule, whose error biases the cost: 26 and 156 for basis=10).
      basis: number K of correction functions per coordinate (>= 1). 10 resolves
        the two-link reaches' hand paths to about 2e-4 of the reach's amplitude for
        the hand jerk and better for the torque costs (see the documentation's
        verification page); a reach whose straight hand path passes near the
        shoulder needs many more for the hand jerk. With ``cost="hand_jerk"`` a
        RuntimeWarning names the movements whose cost exceeds the straight path's,
        720 |x1 - x0|^2 / T^5 (its lower bound), by more than 1 %.

    Other Args:
      solver: :class:`LBFGS` (default, ``LBFGS()``) or :class:`Adam`, with their
        settings: most iterations, tolerances, memory, step size, preconditioning.
        The keywords ``method``, ``maxiter``, ``gtol``, ``ftol``, ``memory``,
        ``learning_rate``, ``linesearch_steps`` and ``precondition`` are deprecated
        spellings of it (a DeprecationWarning names the option value to give).
      end_conditions: "auto" (default), 2 or 3: the conditions imposed at each end.
        3: the posture, zero velocity and zero acceleration; 2: the posture and zero
        velocity, the end accelerations left to the optimum. "auto" gives each cost
        what its Euler-Lagrange equation admits: 3 when a term of third order (torque
        change, hand or joint jerk) has a weight > 0 or the cost is a function, 2 for
        the torque alone (forced to zero end accelerations, its optimum builds a
        boundary layer that every larger basis makes thinner, and the cost does not
        converge with the basis). The result's ``end_conditions`` says which was used.
      init: optional (..., K, dof) initial coefficients (default zeros: the
        minimum-jerk path in joint coordinates).
      segment, point: the hand, as in :func:`jaxmb.optimal.hand_position` (default:
        the distal end of the last segment).
      q_guess: (dof,) or (..., dof) initial guess of the inverse kinematics of the
        start (``target="hand"``; ignored with ``target="joint"``).
      out_of_reach: "project" (warn and move the target onto the workspace boundary)
        or "raise" (ValueError), for hand targets.
      quadrature: "gauss" (default: Gauss-Legendre points) or "trapezoid" (the
        trapezoidal rule on the equally spaced times).
      batching: how a batch is solved inside the compiled call: "map" (default: one
        problem after the other in a ``lax.map`` loop, each with its own iterations;
        fastest on a CPU) or "vmap" (``jax.vmap`` over the solver: all problems in lock
        step until the slowest converges; for accelerators).
      chunk: solve the batch in chunks of this many problems (one compilation; the
        last chunk is padded), e.g. to show progress; None: all at once (with
        ``progress=True``, a batch of B problems in chunks of ceil(B / 20)).
      progress: show a ``tqdm`` progress bar over the chunks (a batch without
        ``chunk`` is cut into at most 20; a single problem has no bar).

    Returns:
      an :class:`OptimalMovement` (NumPy-compatible JAX arrays), with the batch's
      leading shape.

    Raises:
      ValueError: a duration that is not finite and > 0, mismatched shapes (also of
        ``q_guess``), no ``target`` for a model of two coordinates, an unknown or
        empty cost, weights that are not finite numbers >= 0 or all 0, an unknown
        target, solver or end_conditions, nodes below :func:`min_nodes`, basis < 1,
        non-finite inputs, an out-of-reach hand target with ``out_of_reach="raise"``,
        a cost (or its gradient) that is not finite at the initial guess; any input
        traced by ``jax.jit``, ``jax.vmap`` or ``jax.grad`` (see below).
      TypeError: a keyword optimize does not know.

    ``optimize`` is a driver (input checks, inverse kinematics, warnings, batches in
    chunks) around its own compiled solver, and cannot itself be traced: batch with
    leading axes instead, and differentiate a result with
    :func:`jaxmb.optimal.movement` (``movement(model, r.q_start, r.q_end, duration,
    r.coef, end_conditions=int(r.end_conditions))`` is differentiable with respect
    to the model and the coefficients; the optimum's own sensitivity to the model is
    not provided).
    """
    _refuse_traced(model=model, start=start, end=end, duration=duration, init=init, q_guess=q_guess)
    solver = _solver_from(solver, deprecated)
    p = _check(model, start, end, duration, cost=cost, target=target, nodes=nodes, basis=basis,
               end_conditions=end_conditions, init=init, segment=segment, point=point, q_guess=q_guess,
               out_of_reach=out_of_reach, quadrature=quadrature, batching=batching, chunk=chunk,
               progress=progress)  # fmt: skip
    mdl, (start_f, end_f, dur_f, coef0, guess) = _flatten(model, p)
    q_start, q_end = _end_postures(mdl, start_f, end_f, guess, p) if p.target == "hand" else (start_f, end_f)
    res = _solve_chunks(mdl, q_start, q_end, dur_f, coef0, jnp.asarray(p.weights, p.dtype), _config(p, solver),
                        batched_model=bool(p.model_lead), batching=p.batching, chunk=p.chunk,
                        label=p.label if p.progress else None)  # fmt: skip
    _check_initial_cost(res)
    return _unflatten(res, p)


def _refuse_traced(**inputs):
    """ValueError for inputs traced by jax.jit, vmap or grad: optimize compiles its own solver."""
    traced = [name for name, x in inputs.items()
              if any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(x))]  # fmt: skip
    if traced:
        raise ValueError(f"optimize cannot run under jax.jit, jax.vmap or jax.grad ({', '.join(traced)} traced): it "
                         "compiles its own solver. Batch with leading axes of start, end, duration or a stacked "
                         "model, and differentiate a result with jaxmb.optimal.movement(model, r.q_start, r.q_end, "
                         "duration, r.coef, end_conditions=...)")  # fmt: skip


def _config(p: _Problem, solver) -> _Config:
    """The solver's static configuration (one compilation per value)."""
    pt = None if p.point is None else tuple(float(v) for v in np.asarray(p.point))
    lbfgs = isinstance(solver, LBFGS)
    return _Config(p.cost, p.nodes, p.basis, "lbfgs" if lbfgs else "adam", solver.max_iter, solver.gtol,
                   solver.ftol if lbfgs else 0.0, solver.memory if lbfgs else 20,
                   0.1 if lbfgs else solver.learning_rate, solver.linesearch_steps if lbfgs else 30, p.segment, pt,
                   p.quadrature, p.terms, solver.precondition, p.ends)  # fmt: skip


def _flatten(model: Model, p: _Problem):
    """The model cast to the problem's dtype (a stacked one broadcast and flattened), and
    start, end, duration, the initial coefficients and q_guess flattened to one batch axis."""
    lead, dof = p.lead, model.dof
    B = int(np.prod(lead)) if lead else 1
    mdl = model.astype(p.dtype)
    if p.model_lead:
        k = len(p.model_lead)
        mdl = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, lead + x.shape[k:]).reshape((B,) + x.shape[k:]),
                                     mdl)  # fmt: skip
    flat = lambda x, core: jnp.broadcast_to(jnp.asarray(x, p.dtype), lead + core).reshape((B,) + core)  # noqa: E731
    width = p.start.shape[-1]
    coef0 = flat(np.zeros((p.basis, dof)) if p.init is None else p.init, (p.basis, dof))
    guess = None if p.q_guess is None else flat(p.q_guess, (dof,))
    return mdl, (flat(p.start, (width,)), flat(p.end, (width,)), flat(p.duration, ()), coef0, guess)


def _end_postures(mdl: Model, start, end, guess, p: _Problem):
    """The end postures (B, dof) of hand targets (B, 2): the start's inverse kinematics
    from q_guess, the end's from the start posture, without a 2 pi jump between them."""
    i, pt = p.segment, p.point
    if p.model_lead:  # traced models: projected silently here, reported below
        ik = lambda m, tt, g: inverse_kinematics(m, tt, g, segment=i, point=pt)  # noqa: E731
        if guess is None:
            qs = jax.vmap(lambda m, tt: inverse_kinematics(m, tt, segment=i, point=pt))(mdl, start)
        else:
            qs = jax.vmap(ik)(mdl, start, guess)
        qe = jax.vmap(ik)(mdl, end, qs)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # reported below, once per set
            qs = inverse_kinematics(mdl, start, guess, segment=i, point=pt)
            qe = inverse_kinematics(mdl, end, qs, segment=i, point=pt)
    nb = mdl.nbase
    d = qe[:, nb:] - qs[:, nb:]
    qe = qe.at[:, nb:].set(qs[:, nb:] + jnp.mod(d + jnp.pi, 2 * jnp.pi) - jnp.pi)
    _check_reached(mdl, bool(p.model_lead), qs, start, "start", i, pt, p.out_of_reach)
    _check_reached(mdl, bool(p.model_lead), qe, end, "end", i, pt, p.out_of_reach)
    return qs, qe


@functools.partial(precise_jit, static_argnames=("i", "batched"))
def _hand_at(model, q, i, point, batched):
    """Hand positions (B, 2) of postures q (B, dof)."""
    f = lambda m, qq: _hand_derivatives(m, i, point, qq, qq, qq, qq)[0]  # noqa: E731
    return jax.vmap(f, in_axes=(0 if batched else None, 0))(model, q)


def _check_reached(model, batched, q, target, name, i, point, out_of_reach):
    """Hand targets the inverse kinematics did not meet were out of reach (projected)."""
    pos = _hand_at(model, q, i, point, batched)
    err = np.linalg.norm(np.asarray(pos) - np.asarray(target), axis=-1)
    size = float(np.max(np.sum(np.abs(np.asarray(model.length)), axis=-1)))
    # met to the inverse kinematics' tolerance (1e-12 of the size in float64, 1e-6 in
    # float32): 1e-8 of the size in float64, 300 eps (3.6e-5) of it in float32
    eps = float(jnp.finfo(q.dtype).eps)
    bad = err > max(1e-8, 300 * eps) * max(size, 1e-3)
    if np.any(bad):
        first = int(np.argmax(bad))
        msg = (f"{int(np.sum(bad))} {name} hand target(s) out of reach (first: batch index {first}, "
               f"{np.asarray(target)[first]} m, {err[first]:.3g} m from the nearest reachable point)")
        if out_of_reach == "raise":
            raise ValueError(msg)
        warnings.warn(msg + ": projected onto the workspace boundary", RuntimeWarning, stacklevel=4)


def _check_initial_cost(res: OptimalMovement):
    """ValueError where the cost is not finite where the optimisation starts: an input error."""
    start_bad = np.asarray((res.status == 3) & (res.iterations == 0))
    if np.any(start_bad):
        B = start_bad.size
        k = int(np.argmax(start_bad))
        raise ValueError(f"the cost or its gradient is not finite at the initial guess"
                         f"{f' (problem {k} of the flattened batch of {B})' if B > 1 else ''}: "
                         f"{float(np.asarray(res.history)[k, 0])!r}; check the cost function, the inputs and init")


def _unflatten(res: OptimalMovement, p: _Problem) -> OptimalMovement:
    """The flat results in the batch's shape; the times follow the durations (shared when
    duration is a scalar); the hand jerk's warning where the basis does not resolve it."""
    s_t = jnp.linspace(0.0, 1.0, p.nodes, dtype=p.dtype)  # the equally spaced output times, s = t / T
    t = jnp.asarray(p.duration, p.dtype)[..., None] * s_t
    out = {f: getattr(res, f).reshape(p.lead + getattr(res, f).shape[1:]) for f in OptimalMovement._fields
           if f != "t"}  # fmt: skip
    if p.terms == ("hand_jerk",) and p.ends == 3:
        _warn_unresolved_hand_jerk(out["hand"], out["cost"], p.duration, p.lead,
                                   float(p.weights[_NAMES.index("hand_jerk")]), p.basis)  # fmt: skip
    return OptimalMovement(t=t, **out)
