"""The custom rules around each kernel and the entry points :func:`run` and :func:`call`.

Every public dynamics function (:func:`jaxmb.inverse_dynamics`, ...) validates its
inputs and calls :func:`run` (compiled, cached by shapes, dtypes, the model's topology
and the :class:`~jaxmb._engine.layout.Spec`); inside a jitted caller (``simulate``'s
scan) :func:`call`. The operator of each quantity nests
``custom_vjp(custom_jvp(custom_vmap(kernel)))`` (:func:`_operator`): the parameter
adjoint for reverse mode with respect to the model (for forward dynamics the
transposed implicit-function rule of :func:`_forward_vjp`), a JVP rule (for forward
dynamics the implicit-function rule of :func:`_forward_jvp`), and the batching rule.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.custom_batching import custom_vmap

from .._math import precise_jit
from .._checks import _float_dtype
from ..model import Model
from .adjoint import _params_cotangent
from .evaluate import _evaluate_once, evaluate
from .layout import ADJOINT_KINDS, Spec, _plan

# ------------------------------------------------------------ one entry point
#
# Every public dynamics function (jaxmb.inverse_dynamics, joint_moments,
# joint_reactions, forward_dynamics, mass_matrix, ...) validates its inputs in Python
# and then calls ``evaluate`` inside one cached ``jax.jit``. ``evaluate`` broadcasts
# the leading (batch) shapes of the inputs, flattens them to one batch axis, puts
# it last (the layout the kernels vectorise over) and runs the kernel; a single
# sample is a batch of one. Around the kernel:
#
# - ``jax.custom_batching.custom_vmap``: under ``jax.vmap`` the batch axis is moved
#   to the front and the same function is called with one more leading dimension,
#   so that vmap of a single-sample call runs the batched kernel (nested vmaps
#   recurse, each level adding a leading dimension);
# - ``jax.custom_vjp`` (kinds "tau", "moments" and "reactions" with
#   gradient="adjoint"): the hand-derived parameter adjoint above (a reaction's
#   cotangent is a virtual translation of its joint's subtree); for "forward" with
#   gradient="adjoint", the transposed implicit-function rule (_forward_vjp);
#   inside it ``jax.custom_jvp`` (every kind): JAX's own forward mode of the kernel
#   (for "forward", _forward_jvp), from which reverse mode follows by transposition
#   where no custom_vjp is on top.
#
# The layers nest custom_vjp(custom_jvp(custom_vmap(kernel))): JAX requires the
# derivative rules outside the custom_vmap, and the adjoint's forward pass calls a
# custom_jvp layer (with the same rule, around the kernel itself: no custom_vmap,
# see ``g_fwd`` in _operator) so that a second derivative (jax.hessian, reverse
# over reverse, also through a lax.scan) can differentiate it.


def _align(x, batched: bool, core: int, rank: int):
    """Under vmap: put x's leading shape in ``rank`` dimensions after the vmapped one
    (size 1 where x is not batched), so that every input broadcasts NumPy-style."""
    own = x.ndim - core - (1 if batched else 0)
    if not batched:
        x = x[None]
    return x.reshape(x.shape[:1] + (1,) * (rank - own) + x.shape[1:])


def _vmap_rule(spec: Spec, topo: Model, call):
    """The custom_vmap rule: one more leading dimension instead of JAX's batching."""

    def rule(axis_size, in_batched, params, q, qd, x3, loads):
        pb, qb, qdb, xb, lb = in_batched
        if any(jax.tree_util.tree_leaves(pb)):
            # a batch of models (per-sample parameters): JAX's own batching of the
            # kernel, each model parameter then a batch-sized row
            axes = lambda b: jax.tree_util.tree_map(lambda t: 0 if t else None, b)  # noqa: E731
            f = functools.partial(evaluate, spec, topo)
            in_axes = (axes(pb), 0 if qb else None, 0 if qdb else None, 0 if xb else None, axes(lb))
            return jax.vmap(f, in_axes=in_axes)(params, q, qd, x3, loads), True
        shared_loads = loads is not None and not lb and loads.ndim == 2
        ranks = [x.ndim - 1 - bool(b) for x, b in ((q, qb), (qd, qdb), (x3, xb)) if x is not None]
        if loads is not None and not shared_loads:
            ranks.append(loads.ndim - 2 - bool(lb))
        rank = max(ranks)
        q = _align(q, qb, 1, rank)
        qd = None if qd is None else _align(qd, qdb, 1, rank)
        x3 = None if x3 is None else _align(x3, xb, 1, rank)
        if loads is not None and not shared_loads:
            loads = _align(loads, lb, 2, rank)
        out = call(params, q, qd, x3, loads)
        return jnp.broadcast_to(out, (axis_size,) + out.shape[1:]), True

    return rule


def _model_params(model: Model):
    return (model.joint_attach, model.com, model.mass, model.inertia, model.gravity)


def _uses_adjoint(spec: Spec, topo: Model) -> bool:
    return spec.gradient == "adjoint" and spec.kind in ADJOINT_KINDS and topo.segments <= spec.tuning.adjoint_max




def _reverse_raw(spec: Spec, topo: Model, raw):
    """The evaluation whose reverse mode gives the cotangents of ``raw``'s inputs:
    ``raw`` itself, or the matrix form for unrolled recursions of
    ``spec.tuning.reverse_matrix_min`` segments or more: XLA:CPU fuses each cotangent
    of the unrolled recursion with the whole tape, recomputing it per output (the
    state's cotangents of inverse dynamics, moments and reactions; every cotangent
    with gradient="autodiff"). Forward mode keeps the unrolled kernel's JVP (see
    :func:`_tangent_split`)."""
    if (spec.kind in ("tau", "moments", "reactions", "full") and topo.segments >= spec.tuning.reverse_matrix_min
            and _plan(topo, spec.method, None, 2)[0] == "unrolled"):
        return functools.partial(_evaluate_once, spec._replace(method="matrix", chunk=None), topo)
    return raw


def _operator(spec: Spec, topo: Model):
    """f(params, q, qd, x3, loads) with its vmap rule and derivative rule."""
    raw = functools.partial(_evaluate_once, spec, topo)
    rev = _reverse_raw(spec, topo, raw)
    f = custom_vmap(raw)
    f.def_vmap(_vmap_rule(spec, topo, f))

    g = jax.custom_jvp(f)

    def generic_jvp(primals, tangents):
        flat_p, tree = jax.tree_util.tree_flatten(primals)
        flat_t = jax.tree_util.tree_leaves(
            tangents, is_leaf=lambda t: isinstance(t, jax.custom_derivatives.SymbolicZero)
        )
        live = [i for i, t in enumerate(flat_t) if not isinstance(t, jax.custom_derivatives.SymbolicZero)]

        def with_live(fn):
            def h(*xs):
                fp = list(flat_p)
                for i, x in zip(live, xs):
                    fp[i] = x
                return fn(*jax.tree_util.tree_unflatten(tree, fp))

            return h

        if not live:
            out = raw(*primals)
            return out, jnp.zeros_like(out)
        primals_l, tangents_l = [flat_p[i] for i in live], [flat_t[i] for i in live]
        if rev is raw:
            return jax.jvp(with_live(raw), primals_l, tangents_l)
        # forward mode by the unrolled kernel's JVP, reverse mode by the matrix form's
        out = raw(*primals)
        return out, _tangent_split(with_live(raw), with_live(rev), primals_l, tangents_l, out)

    rule = _forward_jvp(spec, topo, raw) if spec.kind == "forward" else generic_jvp
    g.defjvp(rule, symbolic_zeros=True)
    # The primal of the custom_vjp's forward pass: the same rule around ``raw`` with
    # no custom_vmap layer. Reverse mode through a lax.scan (jaxmb.simulate) hoists
    # the loop-invariant part of the forward pass's body by partial evaluation, which
    # in JAX 0.10.2 replaces every custom_jvp whose inputs are partly loop-carried by
    # its primal function: what lies beneath is then differentiated by JAX itself
    # when a second derivative follows, and custom_vmap cannot be (forward over
    # reverse: an AssertionError in its JVP's batching rule; reverse over reverse: it
    # has no partial evaluation, "Linearization failed"). Under jax.vmap this primal
    # is batched by JAX rather than by _vmap_rule, as gradient="autodiff"'s primal
    # always was, and as fast or faster (jit(vmap(grad)) of inverse dynamics, forward
    # dynamics and simulate, the 3-chain and the human, in an ad-hoc interleaved
    # comparison that was not kept). Calls not differentiated keep ``g``.
    g_fwd = jax.custom_jvp(raw)
    g_fwd.defjvp(rule, symbolic_zeros=True)

    if spec.kind == "forward" and spec.gradient == "adjoint":
        return _forward_vjp(spec, topo, raw, g, g_fwd)

    if _uses_adjoint(spec, topo):
        v = jax.custom_vjp(g)

        def fwd(*args):
            values, flags = _values_and_flags(args)
            # the primal through a custom_jvp layer: an outer jax.grad (reverse over
            # reverse) or jax.jacfwd linearises it with the rule; not through the
            # custom_vmap layer (see g_fwd)
            return g_fwd(*values), (values, flags)

        def bwd(res, tbar):
            values, flags = res
            params, q, qd, x3, loads = values
            if isinstance(tbar, jax.custom_derivatives.SymbolicZero):
                tbar = jnp.zeros(tbar.shape, tbar.dtype)
            d_params = None
            if flags[0] is not None:
                d_params = _params_cotangent(spec, topo, params, q, qd, x3, loads, tbar)
            if all(fl is None for fl in flags[1:]):
                return (d_params, None, None, None, None)
            _, vjp = jax.vjp(lambda *x: rev(params, *x), q, qd, x3, loads)
            return (d_params,) + tuple(vjp(tbar))

        v.defvjp(fwd, bwd, symbolic_zeros=True)
        return v

    return g


def _values_and_flags(args):
    """The values of a custom_vjp's forward-pass arguments (symbolic_zeros=True wraps
    them) and, per argument, () if it needs a cotangent and None if not (kept as the
    residuals' tree structure)."""
    values = jax.tree_util.tree_map(lambda x: x.value, args)
    perturbed = [any(x.perturbed for x in jax.tree_util.tree_leaves(a)) for a in args]
    return values, tuple(() if p else None for p in perturbed)


def _params_tangent(spec: Spec, topo: Model, raw, params, q, qd, x3, loads, t_params, like):
    """J t_params, J = d raw / d params at (q, qd, x3, loads) for an output shaped and
    typed like ``like``, as a linear map whose transpose is the parameter adjoint
    (:func:`_params_cotangent` for ``spec``) rather than JAX's reverse mode of the
    kernel.

    JAX has no public custom transpose, so the map is the second half of the solve
    x = S b with S = [[I, 0], [J, I]] on pairs b = (t_params, 0):
    ``lax.custom_linear_solve`` with ``solve`` = S (forward mode: one forward-mode
    pass of the kernel), ``transpose_solve`` = S^T = [[I, J^T], [0, I]] (reverse
    mode: the adjoint's one reduction over the batch) and ``matvec`` = S^-1 =
    [[I, 0], [-J, I]] (what higher derivatives differentiate). Only the branch that a
    derivative uses is compiled. JAX's reverse mode of the kernel with respect to the
    shared parameters compiled slowly instead (a reduction per parameter over a large
    fused expression)."""

    # traced once: matvec, its transpose and solve all evaluate this linear map
    _, jp = jax.linearize(lambda pa: raw(pa, q, qd, x3, loads), tuple(params))
    return _linear_map(jp, jp, lambda v: _params_cotangent(spec, topo, params, q, qd, x3, loads, v),
                       tuple(t_params), like)  # fmt: skip


def _linear_map(forward, higher, transpose, t, like):
    """J t as the second half of ``lax.custom_linear_solve`` with S = [[I, 0], [J, I]]
    on pairs (t, 0), so that JAX's transposition of it calls ``transpose``.

    forward(u) = J u (the ``solve``: forward mode), higher(u) = J u (inside the
    ``matvec`` S^-1 = [[I, 0], [-J, I]], which higher derivatives differentiate),
    transpose(v) = J^T v (the ``transpose_solve``: reverse mode); t a tuple of
    tangents, ``like`` an array shaped and typed as J t. See :func:`_params_tangent`
    and :func:`_tangent_split`."""

    def matvec(x):
        u, v = x
        return u, v - higher(u)

    def solve(_, b):
        u, v = b
        return u, v + forward(u)

    def transpose_solve(_, c):
        u, v = c
        return tuple(a + b.astype(a.dtype) for a, b in zip(u, transpose(v))), v

    # the second half of b must be linear in the tangents too (JAX transposes only
    # with respect to linear inputs): zero times one of them
    zero = jnp.broadcast_to(0 * jnp.sum(t[-1]).astype(like.dtype), like.shape)
    u, v = lax.custom_linear_solve(matvec, (t, zero), solve, transpose_solve)
    return v + _empty_sum(u).astype(v.dtype)


def _empty_sum(xs):
    """0, as a sum over no elements of each array of ``xs``: linear in all of them.

    In :func:`_linear_map`, J t is the second half v of the solution (u, v) = (t, J t);
    adding this of u couples the first half to the result, so that reverse mode
    transposes the solve with the cotangent of u derived from that of v (zeros)
    rather than a constant. Without it, a derivative of that transposed solve (forward
    over reverse: jax.hessian, jax.jacfwd(jax.grad(f)); reverse over reverse) whose
    matvec does not change (J constant in the variable, e.g. tau in the masses) has
    a symbolic zero tangent for the u half and a live one for the v half, which JAX's
    rule (``_custom_linear_solve_jvp`` in JAX 0.10.2) passes as it is to
    ``custom_linear_solve``: a TypeError. XLA removes the zero-sized sums and the
    cotangents built from them (first-order gradients compile to the same program)."""
    return sum(jnp.sum(jnp.ravel(x)[:0]) for x in jax.tree_util.tree_leaves(xs))


def _tangent_split(fwd, rev, primals, tangents, like):
    """J t with J the Jacobian of ``fwd`` (and of ``rev``: the same function,
    evaluated another way) at ``primals``, for the tangents ``t`` of the same
    structure: forward mode by ``fwd``'s linearisation, reverse mode by ``rev``'s VJP.

    The same construction as :func:`_params_tangent` (:func:`_linear_map`). Forward
    dynamics uses it
    for its derivative with respect to the state (q, qd, loads): the unrolled
    kernel's JVP is the fastest forward mode for a few segments (about 5x the matrix
    form's), while JAX's reverse mode of the matrix form compiles and runs faster
    than that of the unrolled kernel (up to 2x for the gradient of a ``simulate``).
    Forward mode also traces the matrix form's derivatives, at some compile time."""
    primals = tuple(primals)
    return _linear_map(
        lambda u: jax.jvp(fwd, primals, u)[1],
        lambda u: jax.jvp(rev, primals, u)[1],  # the cheaper trace for higher derivatives
        lambda v: jax.vjp(rev, *primals)[1](v),
        tuple(tangents), like,
    )


def _forward_tau(spec: Spec, topo: Model):
    """(tau, tau_rev) for forward dynamics' derivative rules: inverse dynamics with
    forward dynamics' kernel choice, and the evaluation whose reverse mode gives the
    state's cotangents: the matrix form when that kernel is unrolled (see
    :func:`_tangent_split`), else the same."""
    tau_raw = functools.partial(_evaluate_once, Spec("tau", spec.method, spec.chunk, "autodiff", tuning=spec.tuning), topo)
    if _plan(topo, spec.method, spec.chunk, 2)[0] == "unrolled":
        return tau_raw, functools.partial(_evaluate_once, Spec("tau", "matrix", None, "autodiff", tuning=spec.tuning), topo)
    return tau_raw, tau_raw


def _forward_jvp(spec: Spec, topo: Model, raw):
    """The derivative of forward dynamics from that of inverse dynamics.

    qdd solves ID(params, q, qd, qdd, loads) = tau, so by the implicit function
    theorem d qdd = M^-1 (d tau - dID), with dID the derivative of inverse dynamics
    with qdd held at its value (one forward-mode pass of the recursion) and M^-1 a
    solve with the mass matrix (the forward kernel with no velocity, gravity or
    loads: its bias is zero). Nothing differentiates the factorisation, so the
    gradient compiles in a fraction of the time (the unrolled LDL^T's reverse mode
    took 20 s for the seven-segment human) and runs faster; reverse mode transposes
    the linear solve. dID's model term goes through :func:`_params_tangent` (reverse
    mode: the parameter adjoint), its state term (q, qd, loads) through
    :func:`_tangent_split` when the kernel is unrolled (reverse mode: JAX's reverse
    mode of the matrix form)."""
    tau_raw, tau_rev = _forward_tau(spec, topo)

    def jvp(primals, tangents):
        params, q, qd, tau, loads = primals
        t_params, t_q, t_qd, t_tau, t_loads = tangents
        qdd = raw(params, q, qd, tau, loads)
        live = lambda t: not isinstance(t, jax.custom_derivatives.SymbolicZero)  # noqa: E731
        flat_t, tree_t = jax.tree_util.tree_flatten(
            (t_params, t_q, t_qd, t_loads), is_leaf=lambda t: isinstance(t, jax.custom_derivatives.SymbolicZero)
        )
        flat_p = jax.tree_util.tree_leaves((params, q, qd, loads))
        idx = [i for i, t in enumerate(flat_t) if live(t)]
        r = jnp.zeros_like(qdd)
        if live(t_tau):
            r = r + jnp.broadcast_to(t_tau, qdd.shape)
        n_params = len(jax.tree_util.tree_leaves(params))
        split = topo.segments <= spec.tuning.adjoint_max and any(i < n_params for i in idx)
        if split:  # the model's term on its own, transposed by the parameter adjoint
            # JAX transposes custom_linear_solve only with respect to inputs that are
            # all linear in the tangents: zero leaves are zero times a live one
            z = 0 * jnp.sum(next(t for t in t_params if live(t)))
            t_pa = tuple(t if live(t) else jnp.broadcast_to(z, p.shape).astype(p.dtype) for p, t in zip(params, t_params))
            r = r - _params_tangent(Spec("tau", tuning=spec.tuning), topo, tau_raw, params, q, qd, qdd, loads, t_pa, qdd)
            idx = [i for i in idx if i >= n_params]
        if idx:
            def with_raw(f):
                def h(*xs):
                    fp = list(flat_p)
                    for i, x in zip(idx, xs):
                        fp[i] = x
                    pa, q_, qd_, ld = jax.tree_util.tree_unflatten(tree_t, fp)
                    return f(pa, q_, qd_, qdd, ld)

                return h

            primals_t, tangents_t = [flat_p[i] for i in idx], [flat_t[i] for i in idx]
            if tau_rev is not tau_raw:
                # forward mode by the unrolled kernel's JVP, reverse mode by the
                # matrix form's VJP (see _tangent_split)
                r = r - _tangent_split(with_raw(tau_raw), with_raw(tau_rev), primals_t, tangents_t, qdd)
            else:
                r = r - jax.jvp(with_raw(tau_raw), primals_t, tangents_t)[1]
        still = params[:4] + (jnp.zeros_like(params[4]),)
        zero = jnp.zeros_like(qdd)
        qb = jnp.broadcast_to(q, qdd.shape)
        # M^-1 r: forward dynamics with no velocity (None: its terms are not traced),
        # gravity or loads; as a linear solve with the symmetric M (M x: inverse
        # dynamics at rest), so that reverse mode transposes it into one more solve
        # instead of differentiating the kernel
        return qdd, lax.custom_linear_solve(
            lambda x: tau_raw(still, qb, zero, x, None), r,
            lambda _, b: raw(still, qb, None, b, None), symmetric=True,
        )

    return jvp


def _forward_vjp(spec: Spec, topo: Model, raw, g, g_fwd):
    """Forward dynamics with a reverse-mode rule of its own (gradient="adjoint").

    qdd solves ID(params, q, qd, qdd, loads) = tau, so for a cotangent qdd_bar, with
    lam = M^-1 qdd_bar (M symmetric): tau_bar = lam and, for every other input x,
    x_bar = -(d ID / d x)^T lam at qdd held fixed: the parameter adjoint of inverse
    dynamics for the model (up to ``Tuning.adjoint_max`` segments) and JAX's reverse mode
    of the recursion (its matrix form when the kernel is unrolled, see
    :func:`_tangent_split`) for q, qd and loads. The same derivative as
    :func:`_forward_jvp`'s, transposed by hand: the backward pass traces one
    articulated-body solve at rest, the adjoint and (when the state needs cotangents)
    one reverse pass, instead of the forward-mode linearisation of the recursion
    that JAX's transposition of the custom_jvp rule traces first. Reverse mode
    only, like the other adjoints (forward mode: gradient="autodiff")."""
    tau_rev = _forward_tau(spec, topo)[1]
    v = jax.custom_vjp(g)

    def fwd(*args):
        values, flags = _values_and_flags(args)
        qdd = g_fwd(*values)  # through a custom_jvp layer, not custom_vmap (see _operator)
        return qdd, (values, qdd, flags)

    def bwd(res, qdd_bar):
        values, qdd, flags = res
        params, q, qd, tau, loads = values
        if isinstance(qdd_bar, jax.custom_derivatives.SymbolicZero):
            qdd_bar = jnp.zeros(qdd_bar.shape, qdd_bar.dtype)
        # lam = M^-1 qdd_bar: the kernel at rest, with no gravity or loads
        still = params[:4] + (jnp.zeros_like(params[4]),)
        lam = raw(still, jnp.broadcast_to(q, qdd.shape), None, qdd_bar, None)
        d_tau = None
        if flags[3] is not None:
            d_tau = jax.vjp(lambda t: jnp.broadcast_to(t, qdd.shape), tau)[1](lam)[0]
        adjoint = topo.segments <= spec.tuning.adjoint_max
        d_params = None
        if flags[0] is not None and adjoint:
            d_params = jax.tree_util.tree_map(
                jnp.negative, _params_cotangent(Spec("tau", tuning=spec.tuning), topo, params, q, qd, qdd, loads, lam)
            )
        live = [i for i in (0, 1, 2, 4) if flags[i] is not None and not (i == 0 and adjoint)]
        out = [d_params, None, None, d_tau, None]
        if live:
            def h(*xs):
                a = list(values)
                for i, x in zip(live, xs):
                    a[i] = x
                return tau_rev(a[0], a[1], a[2], qdd, a[4])

            cts = jax.vjp(h, *(values[i] for i in live))[1](-lam)
            for i, c in zip(live, cts):
                out[i] = c
        return tuple(out)

    v.defvjp(fwd, bwd, symbolic_zeros=True)
    return v


def call(spec: Spec, model: Model, q, qd, x3, loads):
    """Evaluate ``spec`` on validated inputs of one float dtype (inside jit)."""
    return _operator(spec, model)(_model_params(model), q, qd, x3, loads)


@functools.partial(precise_jit, static_argnums=0)
def _jitted(spec: Spec, model: Model, q, qd, x3, loads):
    dtype = _float_dtype(*(x for x in (q, qd, x3) if x is not None))
    model = model.astype(dtype)
    q, qd, x3 = (None if x is None else x.astype(dtype) for x in (q, qd, x3))
    loads = None if loads is None else loads.astype(dtype)
    return call(spec, model, q, qd, x3, loads)


def run(spec: Spec, model: Model, q, qd=None, x3=None, loads=None):
    """Compiled evaluation (``jax.jit``, cached by shapes, dtypes, the model's
    topology and ``spec``): a direct call from Python dispatches to compiled code.
    JAX's error for forward mode through the default reverse-mode rule gets the
    remedy appended."""
    try:
        return _jitted(spec, model, q, qd, x3, loads)
    except TypeError as e:
        hint = forward_mode_hint(e, spec.gradient)
        if hint is None:
            raise
        raise hint from e


def forward_mode_hint(e: TypeError, gradient: str):
    """JAX's TypeError for forward mode through the default reverse-mode rule, with
    the remedy appended (None for any other error)."""
    if gradient != "adjoint" or "forward-mode autodiff" not in str(e):
        return None
    return TypeError(
        f"{str(e).splitlines()[0]} jaxmb: gradient='adjoint' (the default) is a reverse-mode rule; for forward "
        "mode applied first (jax.jvp, jax.jacfwd, jax.linearize) pass gradient='autodiff' to the jaxmb function "
        "(jax.grad, jax.hessian and jax.jacfwd(jax.grad(f)) work with either)"
    )
