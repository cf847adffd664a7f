"""One evaluation of a kernel over any leading batch shape: broadcast, flatten, put the
batch last, choose the kernel and the chunks, and assemble the rows."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .._math import precise_jit
from ..model import Model
from .aba import _aba_rows
from .crba import _mass_matrix_rows
from .layout import (
    _FD_CHUNK,
    Spec,
    _aba_cut,
    _assemble,
    _core,
    _cpu_takes_matrix,
    _lead_shape,
    _map_chunks,
    _Params,
    _plan,
)
from .rnea import _rnea_rows
from .solve import _cholesky_solve_rows, _ldl_solve_rows


def evaluate(spec: Spec, topo: Model, params, q, qd, x3, loads):
    """The kernel of ``spec.kind`` over any leading batch shape.

    Args:
      spec: static options.
      topo: the model (only its topology is read; ``params`` holds the arrays).
      params: (joint_attach, com, mass, inertia, gravity) arrays of the model.
      q, qd: (..., dof) coordinates and velocities (qd may be None for "mass", and
        for "forward": at rest, with no velocity terms traced).
      x3: (..., dof) accelerations ("tau", "moments", "reactions", "full") or
        generalized forces ("forward"); None for "mass".
      loads: None, (segments, 3) shared by all samples, or (..., segments, 3).

    Returns:
      (lead..., core...) with ``lead`` the broadcast leading shape of the inputs.
    """
    if _cpu_takes_matrix(spec, topo):
        return lax.platform_dependent(
            params, q, qd, x3, loads,
            cpu=functools.partial(evaluate, spec._replace(method="matrix"), topo),
            default=functools.partial(evaluate, spec._replace(method="unrolled"), topo),
        )  # fmt: skip
    m = _Params(topo, *params)
    n, dof = topo.segments, topo.dof
    dt = q.dtype
    lead = _lead_shape(q, qd, x3, loads, dof, n)
    core = _core(spec, topo)
    B = int(np.prod(lead, dtype=np.int64))
    if B == 0:
        return jnp.zeros(lead + core, dt)
    shared = loads is not None and loads.ndim == 2

    kind = spec.kind
    aba = kind == "forward" and spec.tuning.solver == "aba"
    default_chunk = _FD_CHUNK if kind in ("forward", "mass") else None
    if aba and not _aba_cut(m):
        default_chunk = 0
    method, chunk = _plan(m, spec.method, default_chunk if spec.chunk is None else spec.chunk, B)

    def last(x, core_shape):  # (lead..., core...) -> (core..., B); chunked: (B, core...)
        x = jnp.broadcast_to(x, lead + core_shape).reshape((B,) + core_shape)
        return x if chunk else jnp.moveaxis(x, 0, -1)  # chunks are transposed one by one

    qT = last(q, (dof,))
    qdT = None if qd is None else last(qd, (dof,))
    x3T = None if x3 is None else last(x3, (dof,))
    if loads is None:
        ldT = None
    elif shared:
        ldT = loads.astype(dt)[:, :, None]
    else:
        ldT = last(loads.astype(dt), (n, 3))
    if aba:
        method_rows = "unrolled"  # lists of rows
    elif kind in ("forward", "mass"):
        method_rows = "matrix"  # materialised arrays: one update per chunk
    else:
        method_rows = method

    def rows(q_, qd_, x3_, ld_):
        ld = ldT if shared else ld_
        if kind == "mass":
            return _mass_matrix_rows(m, q_)
        if aba:
            return _aba_rows(m, q_, qd_, x3_, ld, _aba_cut(m))
        if kind == "forward":
            zero = jnp.zeros_like(q_)
            bias = _assemble(_rnea_rows(m, q_, zero if qd_ is None else qd_, zero, ld, "matrix")[0], "matrix")
            solve = _ldl_solve_rows if dof <= spec.tuning.ldl_max else _cholesky_solve_rows
            return solve(_mass_matrix_rows(m, q_), x3_ - bias)
        tau, F, T, c, s = _rnea_rows(m, q_, qd_, x3_, ld, method)
        if kind == "tau":
            return tau
        if kind == "moments":
            return T
        if kind == "full":
            return tau + [f for pair in F for f in pair] + T
        if spec.frame == "world":
            return [F[i] for i in spec.joints]
        # (axial, shear) = R(theta)^T (Fx, Fy)
        return [(c[i] * F[i][0] + s[i] * F[i][1], c[i] * F[i][1] - s[i] * F[i][0]) for i in spec.joints]

    xs = (qT, qdT, x3T, None if shared else ldT)
    if kind == "mass":
        xs = (qT, None, None, None)
    out = _map_chunks(rows, xs, chunk, method_rows, batch_first=True, inputs_first=bool(chunk),
                      blocks_first=kind != "mass")  # (B, core...)
    return out.reshape(lead + core)


# ``evaluate`` as a nested jit: the derivative rules evaluate the kernel several times
# with the same shapes (forward dynamics' primal, the linearisation of its model term,
# the mass-matrix products of its tangent solve; the adjoint's primal and input
# cotangents), and inside every step of a simulation's scan. As a jitted function its
# jaxpr is traced from Python once per shapes and reused (XLA inlines the call): the
# trace of the gradient of a 10-step simulate of the seven-segment human took about
# 3-4 s instead of 6-7 s (an ad-hoc measurement on the 2-core CPU).
@functools.partial(precise_jit, static_argnums=(0, 1))
def _evaluate_jit(spec: Spec, tree, params, q, qd, x3, loads):
    # ``tree``: the model's pytree structure (its topology, hashable); the kernels
    # read the arrays from ``params`` only
    return evaluate(spec, jax.tree_util.tree_unflatten(tree, [None] * tree.num_leaves), params, q, qd, x3, loads)


def _evaluate_once(spec: Spec, topo: Model, params, q, qd, x3, loads):
    return _evaluate_jit(spec, jax.tree_util.tree_structure(topo), params, q, qd, x3, loads)
