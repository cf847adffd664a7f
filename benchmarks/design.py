"""The measurements behind three design choices of ``jaxmb.batch``, rerunnable
(through the one API, ``jaxmb.inverse_dynamics`` / ``jaxmb.forward_dynamics`` on (B, dof)
arrays, and the kernel's private helpers on its internal (dof, B) layout).

1. The parameter adjoint sums all its per-sample rows in one variadic ``lax.reduce``
   (a single fused loop) rather than one ``jnp.sum`` per row (which makes XLA
   materialise the kinematics shared between the rows).
2. The adjoint is used up to 32 segments: compile and run time of the gradient of a
   batched loss against JAX's reverse mode for chains of 10 to 40 segments (80
   segments took 524 s to compile once; not rerun here).
3. The mass-matrix path of forward dynamics (kept for comparison since the
   articulated-body algorithm replaced it, ``_FD_SOLVER = "solve"``): an unrolled
   LDL^T up to 12 coordinates and the Cholesky column loop beyond.
4. Batch-first outputs of the unrolled recursion (what the one API returns for
   (B, dof) inputs): up to three rows stacked on the last axis, more rows written as
   strided columns; against the kernel's own batch-last output, for chains of 2 to 5
   segments at 10^6 samples.

Run: ``python -m benchmarks.design [--quick]`` (about 3 minutes; ``--quick`` skips the
36- and 40-segment chains); writes ``design_results.json`` beside this file.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common

OUT = common.HERE / "design_results.json"


def _median_time(fn, reps: int = 7) -> float:
    """Median seconds of ``fn`` over ``reps`` rounds (:func:`common.alternate`)."""
    return common.alternate({"fn": lambda: common.block(fn())}, reps)["fn"]["median"]


def reductions(log=print) -> list:
    """Time of the adjoint's reduction: one variadic reduce against a sum per row."""
    import jax
    import jax.numpy as jnp

    from jaxmb import batch as jb

    rows_out = []
    every = dict(common.models())
    for name, B in (("chain3", 10**5), ("chain3", 10**6), ("human7", 10**5)):
        model = every[name]
        q, qd, qdd = (jnp.asarray(x.T) for x in common.states(model, B, seed=3))  # the kernel's internal (dof, B)
        tbar = jnp.asarray(np.random.default_rng(4).standard_normal(q.shape))

        def params(m):
            return jb._Params(m, m.joint_attach, m.com, m.mass, m.inertia, m.gravity)

        def per_row(m, q, qd, qdd, tb):
            d_attach, d_cx, d_cy, d_mass, d_inertia, d_g = jb._adjoint_rows(params(m), q, qd, qdd, tb, None)
            return [jnp.sum(x) for x in d_attach + d_cx + d_cy + d_mass + d_inertia + [d_g]]

        fused = jax.jit(lambda m, *x: jb._param_adjoint(params(m), *x, None))
        separate = jax.jit(per_row)
        a = jnp.concatenate([jnp.ravel(x) for x in fused(model, q, qd, qdd, tbar)])
        b = jnp.stack(separate(model, q, qd, qdd, tbar))
        t_fused = _median_time(lambda: fused(model, q, qd, qdd, tbar))
        t_sep = _median_time(lambda: separate(model, q, qd, qdd, tbar))
        row = {"model": name, "batch": B, "variadic_ms": t_fused * 1e3, "sum_per_row_ms": t_sep * 1e3,
               "ratio": t_sep / t_fused, "same_total": float(jnp.abs(jnp.sum(a) - jnp.sum(b)) / jnp.sum(jnp.abs(b)))}  # fmt: skip
        rows_out.append(row)
        log(f"RED {name} B={B}: variadic {row['variadic_ms']:.2f} ms, a sum per row {row['sum_per_row_ms']:.2f} ms "
            f"({row['ratio']:.1f}x)")  # fmt: skip
    return rows_out


def adjoint_size(quick: bool, log=print) -> list:
    """Compile and run time of the parameter gradient, adjoint against reverse mode."""
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb import batch as jb

    out = []
    B = 10**4
    saved = jb._ADJOINT_MAX
    jb._ADJOINT_MAX = 10**6  # the adjoint at every size, to measure where it stops paying
    try:
        for n in (10, 20, 32) if quick else (10, 20, 32, 36, 40):
            model = common.chain_model(n)
            q, qd, qdd = (jnp.asarray(x) for x in common.states(model, B, seed=5))
            row = {"segments": n, "batch": B}
            for g in ("adjoint", "autodiff"):
                # q, qd, qdd as arguments: closed over, jaxmb's input finite check raises TracerBoolConversionError under jit
                f = jax.jit(jax.grad(lambda m, q, qd, qdd, g=g: jnp.sum(
                    jaxmb.inverse_dynamics(m, q, qd, qdd, gradient=g) ** 2)))  # fmt: skip
                t0 = time.perf_counter()
                c = f.lower(model, q, qd, qdd).compile()
                row[f"{g}_compile_s"] = time.perf_counter() - t0
                row[f"{g}_run_ms"] = _median_time(lambda c=c: c(model, q, qd, qdd), reps=5) * 1e3
            out.append(row)
            log(f"ADJ {n:3d} segments: adjoint compile {row['adjoint_compile_s']:.1f} s run {row['adjoint_run_ms']:.1f} ms;"
                f" reverse mode compile {row['autodiff_compile_s']:.1f} s run {row['autodiff_run_ms']:.1f} ms")  # fmt: skip
    finally:
        jb._ADJOINT_MAX = saved
    return out


def solvers(log=print) -> list:
    """Forward dynamics with the unrolled LDL^T against the Cholesky column loop."""
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb import batch as jb

    out = []
    every = dict(common.models())
    B = 10**5
    saved, saved_solver = jb._LDL_MAX, jb._FD_SOLVER
    jb._FD_SOLVER = "solve"  # the mass-matrix path (read when the function is traced)
    try:
        for name in ("chain3", "chain7", "human7"):
            model = every[name]
            q, qd, tau = (jnp.asarray(x) for x in common.states(model, B, seed=6))
            row = {"model": name, "dof": model.dof, "batch": B}
            results = {}
            for label, limit in (("ldl", 10**6), ("column_loop", 0)):
                jb._LDL_MAX = limit  # read when the function is traced
                f = jax.jit(lambda m, q, qd, tau: jaxmb.forward_dynamics(m, q, qd, tau))
                t0 = time.perf_counter()
                c = f.lower(model, q, qd, tau).compile()
                row[f"{label}_compile_s"] = time.perf_counter() - t0
                results[label] = c(model, q, qd, tau)
                row[f"{label}_ms"] = _median_time(lambda c=c: c(model, q, qd, tau), reps=5) * 1e3
            row["speedup"] = row["column_loop_ms"] / row["ldl_ms"]
            row["max_rel_diff"] = float(jnp.max(jnp.abs(results["ldl"] - results["column_loop"]))
                                        / jnp.max(jnp.abs(results["column_loop"])))  # fmt: skip
            out.append(row)
            log(f"FD {name}: LDL^T {row['ldl_ms']:.1f} ms (compile {row['ldl_compile_s']:.1f} s), column loop "
                f"{row['column_loop_ms']:.1f} ms (compile {row['column_loop_compile_s']:.1f} s): {row['speedup']:.1f}x")  # fmt: skip
    finally:
        jb._LDL_MAX, jb._FD_SOLVER = saved, saved_solver
    return out


def assembly(log=print) -> list:
    """Batch-first assembly of the unrolled inverse dynamics rows: stacked on the last
    axis, strided columns, and batch-last (the kernel's layout, for reference)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxmb import batch as jb

    out = []
    B = 10**6
    for n in (2, 3, 4, 5):
        model = common.chain_model(n)
        m = jb._Params(model, *jb._model_params(model))
        q, qd, qdd = (jnp.asarray(x).T for x in common.states(model, B, seed=7))

        def rows(q, qd, qdd):
            return jb._rnea_rows(m, q, qd, qdd, None, "unrolled")[0]

        def stacked(q, qd, qdd):
            return jnp.stack(rows(q, qd, qdd), axis=-1)

        def columns(q, qd, qdd):
            rs = rows(q, qd, qdd)
            o = jnp.zeros((B, len(rs)), q.dtype)
            for i, r in enumerate(rs):
                o = lax.dynamic_update_slice(o, r[:, None], (0, i))
            return o

        def batch_last(q, qd, qdd):
            rs = rows(q, qd, qdd)
            o = jnp.zeros((len(rs), B), q.dtype)
            for i, r in enumerate(rs):
                o = o.at[i].set(r)
            return o

        row = {"segments": n, "batch": B}
        for label, f in (("stack_last_axis", stacked), ("strided_columns", columns), ("batch_last", batch_last)):
            c = jax.jit(f).lower(q, qd, qdd).compile()
            row[f"{label}_ms"] = _median_time(lambda c=c: c(q, qd, qdd), reps=5) * 1e3
        out.append(row)
        log(f"assembly chain{n}, 1e6: stacked {row['stack_last_axis_ms']:.1f} ms, strided columns "
            f"{row['strided_columns_ms']:.1f} ms, batch-last {row['batch_last_ms']:.1f} ms")
    return out


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    quick = "--quick" in argv
    common.enable_x64()
    res = {"environment": common.environment(), "load_start": common.load()}
    res["reductions"] = reductions()
    res["adjoint_size"] = adjoint_size(quick)
    res["solvers"] = solvers()
    res["assembly"] = assembly()
    res["load_end"] = common.load()
    common.save(res, OUT)
    print(f"results in {OUT}")


if __name__ == "__main__":
    main()
