"""The solver: L-BFGS or Adam on the preconditioned coefficients of one movement, and batches of them."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.tree_utils as otu
from tqdm.auto import tqdm

from .._math import precise_jit
from ..model import Model
from ._basis import _basis_np
from ._hand import _hand_derivatives
from ._movement import _LEADING, _NAMES, _Config, _cost_fn, _joint_torques, _movement
from ._result import OptimalMovement

#: Meaning of :attr:`OptimalMovement.status`.
STATUS = (
    "converged: gradient below gtol",
    "converged: relative decrease below ftol",
    "not converged: max_iter reached",
    "not converged: non-finite cost or gradient (result is the last finite iterate)",
    "not converged: the line search stalled (steps below 1e-4 of the quasi-Newton step: "
    "the cost is not finite or not smooth beyond the result)",
)


_METRIC_POINTS = 3  # Gauss-Legendre points on the minimum-jerk path where A is evaluated


def _metric(model: Model, q_start, q_end, duration, weights, cfg: _Config, terms: tuple):
    """Joint-space metric G (dof, dof) of the leading terms of the built-in costs.

    Each built-in cost is int |A(q) q^(d)|^2 dt plus lower-order terms: A = M (the mass
    matrix) and d = 3 for the torque change (tau_dot = M qddd + ...), A = M and d = 2
    for the torque, A = J (the hand's Jacobian) and d = 3 for the hand jerk, A = I and
    d = 3 for the joint jerk. With q^(d) = T^-d psi^(d) a, its Hessian with respect to
    the coefficients a (K, dof) is about

        H = 2 T^(1 - 2 d) Psi_d (x) <A^T A>,   Psi_d = int psi^(d) psi^(d)^T ds,

    Psi_3 = I by construction of the basis (Psi_2 replaced by its mean eigenvalue), and
    <A^T A> the average over a few points of the minimum-jerk path. G = sum of the
    weighted <A^T A> factors, so that H ~ I_K (x) G.
    """
    dtype = q_start.dtype
    x, wx = np.polynomial.legendre.leggauss(_METRIC_POINTS)
    sx = (x + 1) / 2
    path = q_start + (q_end - q_start) * jnp.asarray(10 * sx**3 - 15 * sx**4 + 6 * sx**5, dtype)[:, None]
    wx = jnp.asarray(wx / 2, dtype)
    _, wq, _, psi = _basis_np(cfg.nodes, cfg.size, cfg.quadrature, cfg.ends)
    T = duration
    dof = q_start.shape[-1]
    G = jnp.zeros((dof, dof), dtype)
    MtM = None
    for name in terms:
        d = _LEADING[name]
        psi_d = float(np.sum(wq[:, None] * psi[d] ** 2) / cfg.size)  # mean eigenvalue of Psi_d
        if name in ("torque", "torque_change"):
            if MtM is None:
                # M e_j = ID(q, 0, e_j) - ID(q, 0, 0) (the inverse dynamics is linear in
                # qdd): one call of the kernel the cost compiles anyway, cheaper to
                # compile than the mass-matrix kernel
                n = path.shape[0]
                qq = jnp.broadcast_to(path, (dof + 1, n, dof))
                acc = jnp.broadcast_to(jnp.concatenate([jnp.eye(dof, dtype=dtype), jnp.zeros((1, dof), dtype)])
                                       [:, None, :], (dof + 1, n, dof))
                tau = _joint_torques(model, qq, jnp.zeros_like(qq), acc)
                M = tau[:dof] - tau[dof]  # (dof: column j, n, torques: row i)
                MtM = jnp.einsum("n,jni,jnk->ik", wx, M, M)
            A2 = MtM
        elif name == "hand_jerk":
            point = None if cfg.point is None else jnp.asarray(cfg.point, dtype)
            eye = jnp.eye(dof, dtype=dtype)
            # the hand velocity is linear in qd: its Jacobian, (n, dof, 2)
            J = jax.vmap(lambda e: _hand_derivatives(model, cfg.segment, point, path, e, e, e)[1])(eye)
            A2 = jnp.einsum("n,inc,jnc->ij", wx, J, J)
        else:
            A2 = jnp.eye(dof, dtype=dtype)
        G = G + weights[_NAMES.index(name)] * (2 * psi_d * T ** (1 - 2 * d)) * A2
    return G


#: eigenvalues of the metric G are floored at this fraction of the largest. G is rank
#: deficient for the hand jerk of an arm of more than two links (J^T J has rank 2, the
#: self-motions leave the hand's leading-order jerk unchanged): a floor far below it
#: stretches those directions and L-BFGS does not converge on a 3-link arm, one far
#: above it slows the two-link problems, whose metrics it leaves alone (their smallest
#: eigenvalue is about 1e-2 of the largest or more; see docs/verification.md).
_FLOOR = 3e-3

#: Below this step of the line search (a fraction of the quasi-Newton step), a decrease
#: below ftol is a stall, not convergence (status 4). Near a minimum the accepted step
#: is of order 1; against a cost that is not finite beyond the optimum it shrinks by
#: many orders of magnitude.
_STALL = 1e-4


def _preconditioner(G, dtype):
    """S, S^-1 (dof, dof), symmetric: S^2 = G with its eigenvalues floored at _FLOOR (3e-3)
    of the largest (identity if G is zero or not finite)."""
    lam, V = jnp.linalg.eigh(G)
    top = lam[-1]
    ok = jnp.isfinite(top) & (top > 0) & jnp.all(jnp.isfinite(V))
    lam = jnp.where(ok, jnp.maximum(lam, _FLOOR * top), 1.0)
    V = jnp.where(ok, V, jnp.eye(G.shape[0], dtype=dtype))
    r = jnp.sqrt(lam)
    return (V * r) @ V.T, (V / r) @ V.T


def _solve_one(model: Model, q_start, q_end, duration, coef0, weights, cfg: _Config):
    """Minimise the cost over the coefficients of one movement (see the module docstring)."""
    cost = _cost_fn(cfg, weights)
    terms = None if callable(cfg.cost) else (cfg.terms or _NAMES)
    raw = lambda a: cost(_movement(model, q_start, q_end, duration, a, cfg, terms=terms))  # noqa: E731
    dtype = q_start.dtype
    tiny = jnp.finfo(dtype).tiny
    c0, g0 = jax.value_and_grad(raw)(coef0)
    # the initial cost sets the scale (tolerances are relative to it)
    scale = jnp.where(jnp.isfinite(c0) & (jnp.abs(c0) > tiny), jnp.abs(c0), 1.0)
    # L-BFGS and Adam iterate on b = a S (a = b S^-1), where S^2 approximates the Hessian
    # of the normalised cost per basis function (see _metric): the same minimiser, a
    # problem conditioned near 1 (fewer L-BFGS iterations), on which Adam's step size is in units of the problem's own scale
    if cfg.precondition and terms is not None:
        S, S_inv = _preconditioner(_metric(model, q_start, q_end, duration, weights, cfg, terms) / scale, dtype)
    else:
        S = S_inv = jnp.eye(q_start.shape[-1], dtype=dtype)
    # in the problem's dtype: optax's line search steps by float64 scalars when x64 is
    # on, which would evaluate a float32 problem (model and all) in float64
    f = lambda b: raw(b.astype(dtype) @ S_inv) / scale  # noqa: E731
    v0, g0 = c0 / scale, g0 / scale @ S_inv
    coef0 = coef0 @ S

    if cfg.method == "lbfgs":
        opt = optax.lbfgs(memory_size=cfg.memory,
                          linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=cfg.linesearch_steps))
    else:
        opt = optax.adam(cfg.learning_rate)

    finite0 = jnp.isfinite(v0) & jnp.all(jnp.isfinite(g0))
    gn0 = jnp.max(jnp.abs(g0 @ S))
    status0 = jnp.where(~finite0, 3, jnp.where(gn0 <= cfg.gtol, 0, -1))
    hist0 = jnp.full((cfg.maxiter + 1,), c0, dtype)

    def cond(c):
        return c[3] < 0

    def body(c):
        # (the line search returns the value and gradient at the new point in its
        # state: optax.value_and_grad_from_state without its lax.cond, which vmap
        # would turn into a second evaluation)
        a, state, it, status, hist, v, g = c
        if cfg.method == "lbfgs":
            updates, state_new = opt.update(g, state, a, value=v, grad=g, value_fn=f)
            a_new = optax.apply_updates(a, updates)
            v_new, g_new = otu.tree_get(state_new, "value"), otu.tree_get(state_new, "grad")
        else:
            updates, state_new = opt.update(g, state, a)
            a_new = optax.apply_updates(a, updates)
            v_new, g_new = jax.value_and_grad(f)(a_new)
        finite = jnp.isfinite(v_new) & jnp.all(jnp.isfinite(g_new)) & jnp.all(jnp.isfinite(a_new))
        gn_new = jnp.max(jnp.abs(g_new @ S))  # the gradient with respect to the coefficients a
        dec = (v - v_new) / jnp.maximum(jnp.maximum(jnp.abs(v), jnp.abs(v_new)), tiny)
        small = (dec >= 0) & (dec <= cfg.ftol) if cfg.method == "lbfgs" else False
        # a decrease below ftol is convergence when the line search took a step of
        # useful length: at a minimum the quasi-Newton step of unit length is accepted
        # or shortened a little; a cost that is not finite (or not smooth) beyond some
        # point whose minimum lies beyond it makes the line search shrink its steps
        # against that point until the decrease vanishes (status 4; see _STALL)
        stalled = small & (otu.tree_get(state_new, "learning_rate") < _STALL) if cfg.method == "lbfgs" else False
        it = it + 1
        new_status = jnp.where(~finite, 3, jnp.where(gn_new <= cfg.gtol, 0, jnp.where(
            stalled, 4, jnp.where(small, 1, jnp.where(it >= cfg.maxiter, 2, -1)))))
        keep = finite  # a non-finite step is discarded: the last finite iterate stays
        a = jnp.where(keep, a_new, a)
        state = jax.tree_util.tree_map(lambda x, y: jnp.where(keep, x, y), state_new, state)
        v = jnp.where(keep, v_new, v)
        g = jnp.where(keep, g_new, g)
        hist = jnp.where(jnp.arange(cfg.maxiter + 1) >= it, v * scale, hist)
        return a, state, it, new_status, hist, v, g

    c = (coef0, opt.init(coef0), jnp.asarray(0), status0, hist0, v0, g0)
    b, _, it, status, hist, v, g = jax.lax.while_loop(cond, body, c)
    a = b @ S_inv
    gn = jnp.max(jnp.abs(g @ S))
    # the result at equally spaced times: tau and the hand path (no torque rate to compile)
    m = _movement(model, q_start, q_end, duration, a, cfg, "trapezoid", terms=("hand_jerk", "torque"))
    return OptimalMovement(
        t=m.t, q=m.q, qd=m.qd, qdd=m.qdd, tau=m.tau, hand=m.hand, hand_vel=m.hand_vel,
        cost=v * scale, history=hist, iterations=it, converged=status <= 1, status=status,
        grad_norm=gn, coef=a, q_start=q_start, q_end=q_end, end_conditions=jnp.asarray(cfg.ends),
    )


# one problem: no vmap (under vmap, the line search's lax.cond becomes a select that
# evaluates both branches, and batching the solver's jaxpr triples the tracing time)
_solve_single = precise_jit(_solve_one, static_argnames=("cfg",))


@functools.partial(precise_jit, static_argnames=("cfg", "model_batched", "batching"))
def _solve_batch(model, q_start, q_end, duration, coef0, weights, cfg: _Config, model_batched: bool,
                 batching: str = "map"):
    """Every problem of the (flat) batch in one compiled call.

    "map": ``lax.map``, one problem after the other inside the compiled loop, each with
    its own iterations and line searches. "vmap": all problems in lock step; a
    batched ``while_loop`` runs until its slowest member is done and ``lax.cond``
    becomes ``select`` (both branches of the line search evaluated), which on a CPU
    costs more than the vectorisation gains; on an accelerator the width pays.
    """
    if batching == "vmap":
        one = lambda m, a, b, d, c: _solve_one(m, a, b, d, c, weights, cfg)  # noqa: E731
        return jax.vmap(one, in_axes=(0 if model_batched else None, 0, 0, 0, 0))(
            model, q_start, q_end, duration, coef0)
    if model_batched:
        return jax.lax.map(lambda x: _solve_one(*x, weights, cfg), (model, q_start, q_end, duration, coef0))
    return jax.lax.map(lambda x: _solve_one(model, *x, weights, cfg), (q_start, q_end, duration, coef0))



def _solve_chunks(model, q_start, q_end, duration, coef0, weights, cfg: _Config, *, batched_model: bool,
                  batching: str, chunk: int | None, label: str | None) -> OptimalMovement:  # fmt: skip
    """Every problem of the flat batch (B, ...): one alone, all at once, or in chunks of
    ``chunk`` (the last padded; one compilation), with a progress bar named ``label``
    (None: no bar). Returns the results with the batch axis B."""
    B = q_start.shape[0]
    if B == 1:
        m1 = jax.tree_util.tree_map(lambda x: x[0], model) if batched_model else model
        res = _solve_single(m1, q_start[0], q_end[0], duration[0], coef0[0], weights, cfg)
        return jax.tree_util.tree_map(lambda x: x[None], res)
    if chunk is None or chunk >= B:
        return _solve_batch(model, q_start, q_end, duration, coef0, weights, cfg, batched_model, batching)
    n_chunks = -(-B // chunk)
    pad = n_chunks * chunk - B
    padder = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, 0)]) if pad else x  # noqa: E731
    args = [padder(x) for x in (q_start, q_end, duration, coef0)]
    model_p = jax.tree_util.tree_map(padder, model) if batched_model else model
    bar = None if label is None else tqdm(total=B, unit="movement", desc=f"optimize ({label})")
    parts = []
    for k in range(n_chunks):
        sl = slice(k * chunk, (k + 1) * chunk)
        m_k = jax.tree_util.tree_map(lambda x: x[sl], model_p) if batched_model else model
        r = _solve_batch(m_k, *(x[sl] for x in args), weights, cfg, batched_model, batching)
        jax.block_until_ready(r)
        parts.append(r)
        if bar is not None:
            bar.update(min(chunk, B - k * chunk))
    if bar is not None:
        bar.close()
    return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs)[:B], *parts)
