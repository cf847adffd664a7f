"""The measurements behind design choices of ``jaxmb._engine`` and ``jaxmb.gait``, rerunnable
(through the one API, ``jaxmb.inverse_dynamics`` / ``jaxmb.forward_dynamics`` on (B, dof)
arrays, the engine's ``run`` with other tuning constants (``jaxmb._engine.Tuning``, passed
in the static ``Spec``: no module global is swapped), and the kernel's private helpers on
its internal (dof, B) layout).

1. The parameter adjoint sums all its per-sample rows in one variadic ``lax.reduce``
   (a single fused loop) rather than one ``jnp.sum`` per row (which makes XLA
   materialise the kinematics shared between the rows).
2. The adjoint is used up to 32 segments: compile and run time of the gradient of a
   batched loss against JAX's reverse mode for chains of 10 to 40 segments (80
   segments took 524 s to compile once; not rerun here).
3. The mass-matrix path of forward dynamics (kept for comparison since the
   articulated-body algorithm replaced it, ``Tuning(solver="solve")``): an unrolled
   LDL^T up to 12 coordinates and the Cholesky column loop beyond.
4. Batch-first outputs of the unrolled recursion (what the one API returns for
   (B, dof) inputs): up to three rows stacked on the last axis, more rows written as
   strided columns; against the kernel's own batch-last output, for chains of 2 to 5
   segments at 10^6 samples.
5. ``in_loop``: the cost of the kernel inside a loop body (``lax.fori_loop`` over
   chunks, as :func:`jaxmb.gait.analyze` loops over chunks of trials): the gait
   pipeline's leg (floating base, three segments) and its ``joint_moments`` with
   loads on 6,001,000 samples, at top level and in chunks of 24,004 samples, with
   the chunk's inputs dynamically sliced or not and its output written into a
   stacked result (dynamic-update-slice) or summed. XLA:CPU's new fusion emitters
   compile the clean case; a fusion with a dynamic slice or update falls back
   (rerun with ``XLA_FLAGS=--xla_cpu_use_fusion_emitters=false`` to see every case
   at the fallback's speed). ``loop_pipelined``: the same loop software-pipelined
   (chunk i computed from inputs copied into the loop state at step i - 1, its
   output kept in the state and stored at step i + 1), as ``lax.map`` stacks it.
6. ``gait_filter``: the zero-phase filter of :func:`jaxmb.gait.analyze`: the whole
   pipeline on 1,000 running trials with the ``"strided"`` method (blocks of 64) and
   the ``"blocked"`` method (blocks of 32, the default), alternated.
7. ``gait_parts``: where the pipeline's time goes: the whole pipeline on 1,000
   running trials, then with the dynamics kernels replaced by a trivial stand-in of
   the same output shapes, then also without the filter and the derivatives (the
   floor: reading the inputs, angles, lengths, writing the 1.6 GB of results), and
   whole but returning neither the powers nor the reactions in the segments' frames;
   with the CPU time, system time and page faults of one whole call.
8. ``gradient_parts``: where the time of the gradient of a batched loss goes (the
   gradient target of issue 8, <= 1.5x the loss): ``jax.grad`` of ``sum(tau**2)``
   with respect to every model parameter, the loss, inverse dynamics alone (tau
   written to memory) and the parameter adjoint alone (its one reduction over the
   batch, given the cotangent ``2 tau``), alternated, for the models and batches of
   the ``gradient`` section of ``python -m benchmarks``.
9. ``gradient_compile_parts``: what the compile time of the gradients with respect to
   the model (issue 8: < 2 s for the seven-segment human) is made of: trace, lowering
   and XLA compile, from cleared caches, of the primal and the gradient of inverse
   dynamics, forward dynamics (and the forward kernel at rest, that its derivative's
   mass-matrix solve runs) and a 10-step RK4 ``simulate``; B = 1e3, per-sample loads
   where taken, two rounds.
10. ``reverse_form``: reverse mode through the unrolled recursion or through the
   matrix form (the default from ``_REVERSE_MATRIX_MIN`` = 4 segments): d/dq of a
   loss of inverse dynamics (the adjoint's state cotangent) and d/dmodel with
   ``gradient="autodiff"``, chains of 3, 4, 5 and 7 segments and the human at 1e5
   samples, compile and run, two rounds in alternating order.
11. ``adjoint_reduction``: the adjoint's reduction, jit(grad) of ``sum(tau**2)``
   w.r.t. the model with the inputs as arguments: its partial sums per row
   (``jaxmb._engine.Tuning.lanes``, L = 1, 2, 4, 8, float64) and its input layout (batch-first
   or transposed, ``_ADJOINT_FIRST_MIN``), chains of 3, 10, 16, 20 and 24 segments
   and the human at 1e5 samples; and L = 2, 8, 64 in float32 for the 3-chain at 1e6
   samples with each one's error against the float64 gradient. Each variant is
   compiled from cleared caches, and all of a model are alternated.
12. ``kernel_crossover``: inverse dynamics by the unrolled recursion against the
   matrix form at 1e5 samples, chains of 3 to 10 segments and the human, alternated
   (the CPU rule of "auto", ``jaxmb._engine.layout._UNROLLED_DEPTH_CPU``); about 1 minute.
13. ``compile_backend``: the compile time of the human's gradients w.r.t. the model
   (inverse dynamics, forward dynamics, a 10-step ``simulate``; B = 1e3) with XLA's
   defaults, with LLVM's optimisation passes off and with the older CPU loop emitter
   (process-wide ``XLA_FLAGS`` in child processes, alternated, three rounds), and
   each gradient's run time, with the 3-chain's inverse and forward dynamics at 1e5
   samples: how much of the compile is code generation, and what each setting costs
   at run time; about 2 minutes.
14. ``sincos_guard``: what :func:`jaxmb._math.sincos`'s range guard costs (NaN
   beyond ``SINCOS_LIMIT``, against the form before it, kept here as
   ``_sincos_unguarded``; a quadrant in floating point, which would allow a float64
   limit of 2^50 rad, cost 5 % of the float64 inverse dynamics in two runs):
   the function alone on 4e6 angles, and ``jax.jit`` of the 3-chain's inverse and
   forward dynamics at 1e6 samples, float64 and float32, alternated, 15 rounds.
15. ``fd_wakeup``: forward dynamics of the 3-chain at 1e3 samples, a jaxmb direct
   call against ``pin.abaInParallel`` alternated with pauses of 0, 0.02 (the
   benchmarks' ``alternate``) and 0.5 s before each contender, and jaxmb alone:
   at this size both sides' times depend on how long their threads have slept.

Run: ``python -m benchmarks.design [--quick] [--only gradient_parts,gradient_compile_parts]``
(about 5 minutes, and about 1 more for sections 8 and 9: 40 s for section 8 at 20:58
UTC on 2026-11-23, and the compile times that section 9 records add up to 38 s;
section 11 takes about 2.5 minutes; ``--quick`` skips the 36- and 40-segment chains); writes
``design_results.json`` beside this file (``--only``: those sections, merged into it).
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

    from jaxmb._engine import adjoint as jb
    from jaxmb._engine.layout import _Params

    rows_out = []
    every = dict(common.models())
    for name, B in (("chain3", 10**5), ("chain3", 10**6), ("human7", 10**5)):
        model = every[name]
        q, qd, qdd = (jnp.asarray(x.T) for x in common.states(model, B, seed=3))  # the kernel's internal (dof, B)
        tbar = jnp.asarray(np.random.default_rng(4).standard_normal(q.shape))

        def params(m):
            return _Params(m, m.joint_attach, m.com, m.mass, m.inertia, m.gravity)

        def per_row(m, q, qd, qdd, tb):
            d_attach, d_cx, d_cy, d_mass, d_inertia, d_g = jb._adjoint_rows(params(m), q, qd, qdd, tb, None)
            return [jnp.sum(x) for x in d_attach + d_cx + d_cy + d_mass + d_inertia + [d_g]]

        fused = jax.jit(lambda m, *x: jb._param_adjoint(params(m), *x, None, batch_first=False))
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

    from jaxmb import _engine

    out = []
    B = 10**4
    every_size = _engine.Tuning(adjoint_max=10**6)  # the adjoint at every size, to measure where it stops paying
    for n in (10, 20, 32) if quick else (10, 20, 32, 36, 40):
        model = common.chain_model(n)
        q, qd, qdd = (jnp.asarray(x) for x in common.states(model, B, seed=5))
        row = {"segments": n, "batch": B}
        for g in ("adjoint", "autodiff"):
            # q, qd, qdd as arguments: closed over, jaxmb's input finite check raises TracerBoolConversionError under jit
            spec = _engine.Spec("tau", gradient=g, tuning=every_size)
            f = jax.jit(jax.grad(lambda m, q, qd, qdd, spec=spec: jnp.sum(_engine.run(spec, m, q, qd, qdd) ** 2)))
            t0 = time.perf_counter()
            c = f.lower(model, q, qd, qdd).compile()
            row[f"{g}_compile_s"] = time.perf_counter() - t0
            row[f"{g}_run_ms"] = _median_time(lambda c=c: c(model, q, qd, qdd), reps=5) * 1e3
        out.append(row)
        log(f"ADJ {n:3d} segments: adjoint compile {row['adjoint_compile_s']:.1f} s run {row['adjoint_run_ms']:.1f} ms;"
            f" reverse mode compile {row['autodiff_compile_s']:.1f} s run {row['autodiff_run_ms']:.1f} ms")  # fmt: skip
    return out


def solvers(log=print) -> list:
    """Forward dynamics with the unrolled LDL^T against the Cholesky column loop."""
    import jax
    import jax.numpy as jnp

    from jaxmb import _engine

    out = []
    every = dict(common.models())
    B = 10**5
    for name in ("chain3", "chain7", "human7"):
        model = every[name]
        q, qd, tau = (jnp.asarray(x) for x in common.states(model, B, seed=6))
        row = {"model": name, "dof": model.dof, "batch": B}
        results = {}
        for label, limit in (("ldl", 10**6), ("column_loop", 0)):
            # the mass-matrix path, the unrolled LDL^T up to ``limit`` coordinates
            spec = _engine.Spec("forward", tuning=_engine.Tuning(solver="solve", ldl_max=limit))
            f = jax.jit(lambda m, q, qd, tau, spec=spec: _engine.run(spec, m, q, qd, tau))
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
    return out


def assembly(log=print) -> list:
    """Batch-first assembly of the unrolled inverse dynamics rows: stacked on the last
    axis, strided columns, and batch-last (the kernel's layout, for reference)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    from jaxmb._engine import rnea as jb
    from jaxmb._engine.layout import _Params
    from jaxmb._engine.rules import _model_params

    out = []
    B = 10**6
    for n in (2, 3, 4, 5):
        model = common.chain_model(n)
        m = _Params(model, *_model_params(model))
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


def in_loop(log=print) -> list:
    """joint_moments of the gait leg on 6,001,000 samples: top level, and in a loop
    over chunks of 24,004 samples with inputs sliced or not, output stacked or summed."""
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb.gait import _dynamics

    n, ch = 250, 24004
    model = _dynamics._template(True).replace(
        length=jnp.array([0.42, 0.42, 0.2]), mass=jnp.array([7.0, 3.0, 1.0]),
        inertia=jnp.array([0.12, 0.05, 0.01]), com=jnp.array([[0.18, 0.0], [0.18, 0.0], [0.1, 0.0]]),
        gravity=jnp.asarray(9.81),
    )  # fmt: skip
    q, qd, qdd = (jnp.asarray(x.reshape(n, ch, 5)) for x in common.states(model, n * ch, seed=11))
    ld = jnp.asarray(np.random.default_rng(12).standard_normal((n, ch, 3, 3)))
    args = (q, qd, qdd, ld)

    def f(q, qd, qdd, ld):
        return jaxmb.joint_moments(model, q, qd, qdd, ld)

    def looped(sliced: bool, stacked: bool):
        def run(*a):
            def body(i, c):
                # not sliced: the first chunk shifted by i (an elementwise input XLA
                # cannot hoist), so that the loop does the same work
                x = [y[i] for y in a] if sliced else [y[0] + i.astype(y.dtype) for y in a]
                out = f(*x)
                return c.at[i].set(out) if stacked else c + out

            init = jnp.zeros((n, ch, 3), q.dtype) if stacked else jnp.zeros((ch, 3), q.dtype)
            return jax.lax.fori_loop(0, n, body, init)

        return run

    def pipelined(*a):
        # software-pipelined: step i copies chunk i + 1's inputs into the loop state,
        # computes chunk i from the state and stores chunk i - 1's output, kept in
        # the state; the same values as lax.map
        def body(i, c):
            x, prev, res = c
            res = jax.lax.dynamic_update_index_in_dim(res, prev, jnp.maximum(i - 1, 0), 0)
            out = f(*x)
            nxt = [jax.lax.dynamic_index_in_dim(y, jnp.minimum(i + 1, n - 1), keepdims=False) for y in a]
            return nxt, out, res

        init = ([y[0] for y in a], jnp.zeros((ch, 3), q.dtype), jnp.zeros((n, ch, 3), q.dtype))
        _, last, res = jax.lax.fori_loop(0, n, body, init)
        return jax.lax.dynamic_update_index_in_dim(res, last, n - 1, 0)

    cases = {"top_level": lambda *a: f(*(y.reshape((n * ch,) + y.shape[2:]) for y in a))}
    for sliced in (True, False):
        for stacked in (True, False):
            cases[f"loop_{'sliced' if sliced else 'unsliced'}_{'stacked' if stacked else 'summed'}"] = looped(sliced, stacked)
    cases["loop_pipelined"] = pipelined
    compiled = {k: jax.jit(v).lower(*args).compile() for k, v in cases.items()}
    ref = jax.jit(lambda *a: jax.lax.map(lambda x: f(*x), a))(*args)
    row_diff = float(jnp.max(jnp.abs(compiled["loop_pipelined"](*args) - ref)))
    times = common.alternate({k: (lambda c=c: common.block(c(*args))) for k, c in compiled.items()}, 5)
    row = {"samples": n * ch, "chunk": ch, "xla_flags": common.environment()["machine"]["xla_flags"],
           "pipelined_minus_lax_map_max_abs": row_diff}  # fmt: skip
    row.update({f"{k}_s": v["median"] for k, v in times.items()})
    log("in_loop, joint_moments of the gait leg, 6.0e6 samples: " + ", ".join(
        f"{k} {v['median']:.3f} s" for k, v in times.items()))  # fmt: skip
    return [row]


def _gait_case():
    """(jax.jit-able pipeline factory, its arguments) for 1,000 running trials as
    ``python -m benchmarks.bench_gait`` builds them."""
    import functools

    import jax
    import jax.numpy as jnp

    from jaxmb.gait import _inputs, _pipeline

    from .bench_gait import CUTOFF, make_trials

    d, pts, force, cop = make_trials(1000)
    static = dict(rate=d.rate, force_rate=d.rate, cutoff=CUTOFF, force_cutoff=CUTOFF, order=2, padlen="auto",
                  from_table=False, terms=False)  # fmt: skip
    seg = _inputs._segment_spec(d.segments, None, "dempster", (1000,))[:3]
    args = (tuple(pts[k] for k in ("hip", "knee", "ankle", "toe")), force, cop, None, None, seg,
            jnp.asarray(d.gravity), None)  # fmt: skip

    def make(post=None, **changes):  # compiled and run once now: module stand-ins are read while tracing
        f = functools.partial(_pipeline._group_pipeline, **{**static, **changes})
        fn = jax.jit(f if post is None else lambda *a: post(f(*a)))
        common.block(fn(*args))
        return fn

    return make, args


def _timed(name: str, fns: dict, args, row: dict, log) -> list:
    """Alternated medians of the compiled pipelines ``fns`` into ``row``, logged."""
    times = common.alternate({k: (lambda f=f: common.block(f(*args))) for k, f in fns.items()}, 5)
    row.update({f"{k}_s": v["median"] for k, v in times.items()})
    log(f"{name}, 1000 trials: " + ", ".join(f"{k} {v['median']:.2f} s" for k, v in times.items()))
    return [row]


def gait_filter(log=print) -> list:
    """The gait pipeline (1,000 running trials) with the "strided" (64) and "blocked"
    (32) filters, alternated; compiled apart."""
    import jax.numpy as jnp

    make, args = _gait_case()
    fns = {f"{method}_{block}": make(filter_method=method, filter_block=block)
           for method, block in (("strided", 64), ("blocked", 32))}
    diff = float(jnp.max(jnp.abs(fns["strided_64"](*args)["moments"] - fns["blocked_32"](*args)["moments"])))
    log(f"gait_filter: moments differ by {diff:.1e} N m")
    return _timed("gait_filter", fns, args, {"trials": 1000, "frames": 6001, "max_moment_difference_Nm": diff}, log)


def gait_padlen(log=print) -> list:
    """The gait pipeline (1,000 running trials at 15 Hz) with scipy's odd extension
    (padlen=None: 9 samples) and analyze's default, padlen="auto" (the filter's
    settling samples: 1,384), alternated; compiled apart. The pads' outputs that are
    discarded are not computed, so the longer extension should cost little."""
    import jax.numpy as jnp

    from jaxmb import signal
    from jaxmb.signal import lowpass_design

    from .bench_gait import CUTOFF

    make, args = _gait_case()
    fns = {"scipy_9": make(padlen=None), "auto": make()}
    pad = lowpass_design(10000.0, CUTOFF, 2, False, "auto", 6001)[1]
    diff = float(jnp.max(jnp.abs(fns["scipy_9"](*args)["moments"] - fns["auto"](*args)["moments"])))
    log(f"gait_padlen: padlen 'auto' = {pad} samples (settling_samples {signal.settling_samples(lowpass_design(10000.0, CUTOFF, 2, False, None, 6001)[0])}); "
        f"the moments differ by up to {diff:.1f} N m (the edges)")
    return _timed("gait_padlen", fns, args, {"trials": 1000, "frames": 6001, "padlen_auto": pad,
                                             "max_moment_difference_Nm": diff}, log)  # fmt: skip


def gait_parts(log=print) -> list:
    """The gait pipeline (1,000 running trials) whole, without the dynamics kernels,
    also without the filter and the derivatives, and whole but returning neither
    the powers nor the reactions in the segments' frames; alternated, compiled
    apart. Also the CPU time, system time and minor page faults of one whole call
    (``getrusage``)."""
    import jax.numpy as jnp

    from jaxmb import gait
    from jaxmb.gait import _pipeline

    make, args = _gait_case()

    def no_dynamics(params, q, qd, qdd, frc, mz, pelvis, pelvis_rate, *, terms, outputs=gait.OUTPUTS):
        # the outputs' shapes from the inputs, one cheap operation each
        z = q[..., 2:] + frc[..., :3]
        pair = jnp.stack([z, z], -1)
        return {"moments": z, "reactions": pair, "base_residual": z + qdd[..., 2:], "angles": q[..., 2:],
                "velocities": qd[..., 2:], "powers": z * qd[..., 2:], "reactions_segment": pair}  # fmt: skip

    def stand_in_derivative(x, rate, order=1, axis=0):
        return x * (1.0 + order)

    def no_filter(kin, frc, mz, **kw):
        return kin, frc, mz

    # stand-ins for the pipeline's stages, read while tracing (make() compiles at once)
    saved = _pipeline._dynamics, _pipeline.derivative_jax, _pipeline._filter_group
    fns = {"whole": make()}
    try:
        _pipeline._dynamics = no_dynamics
        fns["no_dynamics"] = make()
        _pipeline.derivative_jax, _pipeline._filter_group = stand_in_derivative, no_filter
        fns["no_dynamics_filter_derivatives"] = make()
    finally:
        _pipeline._dynamics, _pipeline.derivative_jax, _pipeline._filter_group = saved
    fns["without_powers_and_segment_reactions"] = make(
        lambda out: {k: v for k, v in out.items() if k not in ("powers", "reactions_segment")})
    use = common.rusage(lambda: common.block(fns["whole"](*args)))
    row = {"trials": 1000, "frames": 6001, "whole_user_s": use["user_s"], "whole_system_s": use["system_s"],
           "whole_minor_page_faults": use["minor_faults"]}  # fmt: skip
    log(f"gait_parts: one whole call, user {row['whole_user_s']:.2f} s, system {row['whole_system_s']:.2f} s, "
        f"{row['whole_minor_page_faults']} minor page faults")
    return _timed("gait_parts", fns, args, row, log)


def gradient_parts(log=print) -> list:
    """The gradient of a batched squared-torque loss against its parts: the loss,
    inverse dynamics writing tau, and the parameter adjoint's reduction given 2 tau."""
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb._engine import Spec
    from jaxmb._engine.adjoint import _params_cotangent
    from jaxmb._engine.rules import _model_params

    def loss(m, q, qd, qdd):
        return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd) ** 2)

    def adjoint(m, q, qd, qdd, tbar):  # what jax.grad(loss)'s backward pass runs
        return _params_cotangent(Spec("tau"), m, _model_params(m), q, qd, qdd, None, tbar)

    rows = []
    every = dict(common.models())
    for name, B in (("chain3", 10**5), ("chain3", 10**6), ("chain20", 10**5), ("human7", 10**5)):
        model = every[name]
        args = (model,) + tuple(jax.device_put(x) for x in common.states(model, B, seed=13))
        fns = {"loss": jax.jit(loss), "grad": jax.jit(jax.grad(loss)), "inverse_dynamics": jax.jit(jaxmb.inverse_dynamics)}
        tbar = 2 * fns["inverse_dynamics"](*args)
        adj = jax.jit(adjoint)
        # the adjoint alone gives the gradient (the same reduction)
        g, a = fns["grad"](*args), adj(*args, tbar)
        diff = max(float(jnp.max(jnp.abs(x - y)) / (1e-300 + float(jnp.max(jnp.abs(x)))))
                   for x, y in zip(_model_params(g), a))  # fmt: skip
        cases = {k: (lambda f=f: common.block(f(*args))) for k, f in fns.items()}
        cases["adjoint"] = lambda: common.block(adj(*args, tbar))
        reps, inner = common.repeats_for(B, False)
        t = common.alternate(cases, reps, inner)
        ms = {k: v["median"] * 1e3 for k, v in t.items()}
        row = {"model": name, "batch": B, "ms": ms, "grad_over_loss": ms["grad"] / ms["loss"],
               "adjoint_over_loss": ms["adjoint"] / ms["loss"],
               "inverse_dynamics_plus_adjoint_over_grad": (ms["inverse_dynamics"] + ms["adjoint"]) / ms["grad"],
               "adjoint_vs_grad_max_rel_diff": diff}  # fmt: skip
        rows.append(row)
        log(f"gradient_parts {name} B={B}: loss {ms['loss']:.2f} ms, inverse dynamics {ms['inverse_dynamics']:.2f} ms, "
            f"adjoint {ms['adjoint']:.2f} ms, grad {ms['grad']:.2f} ms (grad/loss {row['grad_over_loss']:.2f}, "
            f"adjoint/loss {row['adjoint_over_loss']:.2f}); adjoint = grad to {diff:.1e}")  # fmt: skip
    return rows


def human_functions():
    """(model, {name: f(model)}, (q, qdd)): the seven-segment human's inverse dynamics,
    forward dynamics and a 10-step simulate of B = 1e3 states with per-sample loads,
    as functions of the model (sections 9 and 13)."""
    import jax

    import jaxmb

    model = jaxmb.seven_segment_human()
    B = 10**3
    q, qd, x = (jax.device_put(a) for a in common.states(model, B, seed=17))
    ld = jax.device_put(np.random.default_rng(18).normal(0.0, 10.0, (B, model.segments, 3)))
    fns = {
        "inverse_dynamics": lambda m: jaxmb.inverse_dynamics(m, q, qd, x, ld),
        "forward_dynamics": lambda m: jaxmb.forward_dynamics(m, q, qd, x, ld),
        "simulate": lambda m: jaxmb.simulate(m, q, qd, x, 1e-3, steps=10).q,
    }
    return model, fns, (q, x)


def gradient_compile_parts(log=print) -> list:
    """Trace, lowering and compile seconds of the human's primals and gradients."""
    import jax
    import jax.numpy as jnp

    from jaxmb import _engine as jb

    model, fns, (q, x) = human_functions()
    still = model.replace(gravity=jnp.zeros_like(model.gravity))
    cases = {}
    for name, f in fns.items():
        cases[name] = f
        cases[name + " gradient"] = jax.grad(lambda m, f=f: jnp.sum(f(m) ** 2))
        if name == "forward_dynamics":  # the solve of its derivative: at rest, no gravity or loads
            cases["forward kernel at rest"] = lambda m: jb.run(jb.Spec("forward"), still, q, None, x, None)
    rows = []
    for r in range(2):
        for name, fn in cases.items():
            jax.clear_caches()
            t0 = time.perf_counter()
            tr = jax.jit(fn).trace(model)
            t1 = time.perf_counter()
            lo = tr.lower()
            t2 = time.perf_counter()
            lo.compile()
            t3 = time.perf_counter()
            row = {"round": r, "case": name, "trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2,
                   "total_s": t3 - t0, "load": common.load()}  # fmt: skip
            rows.append(row)
            log(f"gradient_compile_parts {name}: trace {row['trace_s']:.2f} s, lower {row['lower_s']:.2f} s, "
                f"compile {row['compile_s']:.2f} s, total {row['total_s']:.2f} s")  # fmt: skip
    return rows


def reverse_form(log=print) -> list:
    """Reverse mode through the unrolled recursion against the matrix form's (the
    default from ``Tuning.reverse_matrix_min`` segments on): compile and run time of
    d/dq of ``sum(sin(inverse_dynamics))`` (the adjoint's state cotangent) and of
    d/dmodel of ``sum(inverse_dynamics**2)`` with ``gradient="autodiff"``."""
    import jax
    import jax.numpy as jnp

    from jaxmb import _engine

    def tau(m, q, qd, qdd, gradient, threshold):
        spec = _engine.Spec("tau", gradient=gradient, tuning=_engine.Tuning(reverse_matrix_min=threshold))
        return _engine.run(spec, m, q, qd, qdd)

    grads = {
        "d/dq": (lambda m, q, qd, qdd, th: jnp.sum(jnp.sin(tau(m, q, qd, qdd, "adjoint", th))), 1),
        "d/dmodel autodiff": (lambda m, q, qd, qdd, th: jnp.sum(tau(m, q, qd, qdd, "autodiff", th) ** 2), 0),
    }  # fmt: skip
    every = dict(common.models())
    models = [(f"chain{n}", common.chain_model(n)) for n in (3, 4, 5, 7)] + [("human7", every["human7"])]
    B, rows = 10**5, []
    try:
        for name, model in models:
            args = (model,) + tuple(jax.device_put(x) for x in common.states(model, B, seed=19))
            for r in range(2):
                for form, threshold in (("unrolled", 10**6), ("matrix", 1)) if r == 0 else (("matrix", 1), ("unrolled", 10**6)):
                    for what, (f, argnum) in grads.items():
                        jax.clear_caches()
                        t0 = time.perf_counter()
                        g = jax.grad(lambda *a, f=f, th=threshold: f(*a, th), argnum)
                        c = jax.jit(g).lower(*args).compile()
                        compile_s = time.perf_counter() - t0
                        run_ms = _median_time(lambda c=c: c(*args), reps=5) * 1e3
                        rows.append({"model": name, "batch": B, "round": r, "reverse_through": form, "gradient": what,
                                     "compile_s": compile_s, "run_ms": run_ms, "load": common.load()})  # fmt: skip
                        log(f"reverse_form {name} {what} through {form}: compile {compile_s:.2f} s, run {run_ms:.1f} ms")
    finally:
        jax.clear_caches()
    return rows


def _sincos_unguarded(x):
    """jaxmb._math.sincos as it was before its range guard (commit 6815b81): an int32
    quadrant (which overflowed from |x| = 3.4e9 rad) and no NaN beyond the limit."""
    import math

    import jax.numpy as jnp
    from jaxmb import _math as jb

    bits, parts = (64, jb._PIO2_F64) if x.dtype == jnp.float64 else (32, jb._PIO2_F32)
    c1, c2, c3 = parts
    k = jnp.floor(x * (2.0 / math.pi) + 0.5)
    r = ((x - k * c1) - k * c2) - k * c3
    r2 = r * r
    sin_r = r + r * r2 * jb._horner(jb._SIN[bits], r2)
    cos_r = 1.0 + r2 * jb._horner(jb._COS[bits], r2)
    kq = k.astype(jnp.int32)
    odd = (kq & 1) == 1
    s = jnp.where(odd, cos_r, sin_r)
    c = jnp.where(odd, sin_r, cos_r)
    return jnp.where(((kq + 1) & 2) == 2, -c, c), jnp.where((kq & 2) == 2, -s, s)


def fd_wakeup(log=print, rounds: int = 15) -> list:
    """Forward dynamics of the 3-chain at 1e3 samples, a jaxmb direct call against
    ``pin.abaInParallel`` (2 threads), alternated with three pauses before each
    contender (0, the benchmarks' 0.02 s, 0.5 s), and jaxmb alone: at this size both
    sides' times depend on how long their worker threads have slept."""
    import time

    import jax
    import numpy as np

    import jaxmb

    from .baselines import PinocchioBaseline, optional

    model = common.chain_model(3)
    B = 1000
    q, qd, qdd = common.states(model, B, seed=7)
    tau = np.asarray(jaxmb.inverse_dynamics(model, q, qd, qdd))
    xs = tuple(jax.device_put(x) for x in (q, qd, tau))
    pb = optional(PinocchioBaseline, model, threads=2, log=log)
    if pb is None:
        return []
    fq = [np.asfortranarray(x.T) for x in (q, qd, tau)]  # timing only: the angles as they are
    out = np.zeros((model.dof, B), order="F")

    def jx():
        return common.block(jaxmb.forward_dynamics(model, *xs))

    def pin():
        return pb.forward_parallel(*fq, out)

    def timed(fn, inner=10):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        return (time.perf_counter() - t0) / inner

    jx(), pin()
    rows = []
    for pause in (0.0, 0.02, 0.5):
        js, ps = [], []
        for _ in range(rounds):
            time.sleep(pause)
            ps.append(timed(pin))
            time.sleep(pause)
            js.append(timed(jx))
        j, p = float(np.median(js)), float(np.median(ps))
        rows.append({"pause_s": pause, "jaxmb_ms": 1e3 * j, "pinocchio_parallel_ms": 1e3 * p, "ratio": p / j})
        log(f"fd_wakeup: pause {pause} s: jaxmb {1e3 * j:.3f} ms, abaInParallel {1e3 * p:.3f} ms, ratio {p / j:.2f}")
    alone = float(np.median([timed(jx) for _ in range(rounds)]))
    rows.append({"pause_s": None, "jaxmb_alone_ms": 1e3 * alone})
    log(f"fd_wakeup: jaxmb alone, back to back {1e3 * alone:.3f} ms")
    return rows


def sincos_guard(log=print, rounds: int = 15) -> list:
    """Section 14: the range guard's cost, the function alone and in the kernels."""
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb import _math
    from jaxmb._engine import aba, crba, rnea

    kernels = (rnea, aba, crba)  # the engine modules that call sincos
    rows = []
    chain = common.chain_model(3)
    for dtype in (np.float64, np.float32):
        x = jnp.asarray(np.random.default_rng(0).uniform(-10, 10, 4_000_000).astype(dtype))
        args = tuple(jax.device_put(a) for a in common.states(chain, 10**6, seed=3, dtype=dtype))
        forms = {"guarded": _math.sincos, "unguarded": _sincos_unguarded}  # evaluated only, never differentiated
        cases = {}
        try:
            for form, fn in forms.items():
                for mod in kernels:
                    mod.sincos = fn
                jax.clear_caches()
                alone = jax.jit(lambda x, fn=fn: sum(fn(x))).lower(x).compile()
                inv = jax.jit(lambda *a: jaxmb.inverse_dynamics(chain, *a)).lower(*args).compile()
                fwd = jax.jit(lambda *a: jaxmb.forward_dynamics(chain, *a)).lower(*args).compile()
                cases[f"sincos {form}"] = lambda c=alone: common.block(c(x))
                cases[f"ID {form}"] = lambda c=inv: common.block(c(*args))
                cases[f"FD {form}"] = lambda c=fwd: common.block(c(*args))
        finally:
            for mod in kernels:
                mod.sincos = forms["guarded"]
            jax.clear_caches()
        t = common.alternate(cases, rounds)
        for what in ("sincos", "ID", "FD"):
            g, u = t[f"{what} guarded"]["median"], t[f"{what} unguarded"]["median"]
            row = {"dtype": np.dtype(dtype).name, "what": what, "guarded_ms": g * 1e3, "unguarded_ms": u * 1e3,
                   "ratio": g / u, "timings": {k: v for k, v in t.items() if k.startswith(what)}}  # fmt: skip
            rows.append(row)
            log(f"sincos_guard {row['dtype']} {what:6s} guarded {g * 1e3:8.2f} ms  unguarded {u * 1e3:8.2f} ms  "
                f"ratio {g / u:.3f}")  # fmt: skip
    return rows


SECTIONS = ("reductions", "adjoint_size", "solvers", "assembly", "in_loop", "gait_filter", "gait_padlen", "gait_parts",
            "gradient_parts", "gradient_compile_parts", "reverse_form", "adjoint_reduction",
            "kernel_crossover", "compile_backend", "sincos_guard", "fd_wakeup")  # fmt: skip

# One child process of compile_backend: the gradients w.r.t. the model of the human's
# inverse dynamics, forward dynamics and a 10-step simulate (B = 1e3, per-sample
# loads), each compiled from cleared caches (lower + compile) and run; JSON on stdout.
_COMPILE_CHILD = """
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import jaxmb
sys.path.insert(0, sys.argv[1])
from benchmarks import common
from benchmarks.design import human_functions
model, fns, _ = human_functions()
out = {}
for name, f in fns.items():
    g = jax.grad(lambda m, f=f: jnp.sum(f(m) ** 2))
    jax.clear_caches()
    t0 = time.perf_counter()
    c = jax.jit(g).lower(model).compile()
    compile_s = time.perf_counter() - t0
    common.block(c(model))
    t0 = time.perf_counter()
    for _ in range(20):
        common.block(c(model))
    out[name] = {"compile_s": compile_s, "run_ms": (time.perf_counter() - t0) / 20 * 1e3}
# the 3-chain's primal kernels at 1e5 samples: the setting's run time on a small model
chain = common.chain_model(3)
c3 = tuple(jax.device_put(a) for a in common.states(chain, 10**5, seed=5))
for name, f in (("chain3 inverse_dynamics B=1e5", jaxmb.inverse_dynamics), ("chain3 forward_dynamics B=1e5", jaxmb.forward_dynamics)):
    jax.clear_caches()
    t0 = time.perf_counter()
    c = jax.jit(lambda *a, f=f: f(chain, *a)).lower(*c3).compile()
    compile_s = time.perf_counter() - t0
    common.block(c(*c3))
    t0 = time.perf_counter()
    for _ in range(20):
        common.block(c(*c3))
    out[name] = {"compile_s": compile_s, "run_ms": (time.perf_counter() - t0) / 20 * 1e3}
print(json.dumps(out))
"""


def compile_backend(log=print, rounds: int = 3) -> list:
    """Section 13: how much of the compile time of the human's gradients w.r.t. the
    model XLA:CPU's code generation takes. Each round runs one child process per
    setting of ``XLA_FLAGS``, alternated: the default; ``--xla_backend_optimization_level=0``
    (LLVM's optimisation passes off: what they cost, and what the code then runs
    at); ``--xla_cpu_use_fusion_emitters=false`` (the older loop emitter). The
    flags are process-wide XLA settings, for this measurement only: the library
    sets none. The child also compiles and times the 3-chain's inverse and forward
    dynamics at 1e5 samples (no gradient): what each setting does to a small model's
    kernels."""
    import json
    import os
    import pathlib
    import subprocess

    root = str(pathlib.Path(__file__).resolve().parent.parent)
    settings = {"default": "", "llvm_O0": "--xla_backend_optimization_level=0",
                "no_fusion_emitters": "--xla_cpu_use_fusion_emitters=false"}  # fmt: skip
    rows = []
    for r in range(rounds):
        for key, flags in settings.items():
            env = dict(os.environ, XLA_FLAGS=(os.environ.get("XLA_FLAGS", "") + " " + flags).strip())
            res = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, root], env=env, capture_output=True,
                                 text=True, check=True, timeout=600)  # fmt: skip
            got = json.loads(res.stdout.strip().splitlines()[-1])
            for name, v in got.items():
                rows.append({"round": r, "xla_flags": flags, "setting": key, "gradient_of": name, **v,
                             "load": common.load()})  # fmt: skip
            log(f"compile_backend round {r} {key}: "
                + ", ".join(f"{k} {v['compile_s']:.2f} s ({v['run_ms']:.2f} ms)" for k, v in got.items()))
    return rows


def kernel_crossover(log=print) -> list:
    """Inverse dynamics by the unrolled recursion against the matrix form (section
    12): run time at 1e5 samples of chains of 3 to 10 segments (fixed base, relative
    angles) and the human (a tree of depth 4, absolute angles), the two kernels
    alternated, 15 rounds, compiled first."""
    import jax

    import jaxmb

    every = dict(common.models())
    models = [(f"chain{n}", common.chain_model(n)) for n in (3, 4, 5, 6, 7, 8, 10)] + [("human7", every["human7"])]
    B, rows = 10**5, []
    for name, model in models:
        args = tuple(jax.device_put(x) for x in common.states(model, B, seed=23))
        fns = {k: jax.jit(lambda q, qd, qdd, k=k, model=model: jaxmb.inverse_dynamics(model, q, qd, qdd, kernel=k))
               for k in ("unrolled", "matrix")}  # fmt: skip
        res = common.alternate({k: (lambda f=f: common.block(f(*args))) for k, f in fns.items()}, repeats=15)
        u, m = res["unrolled"]["median"], res["matrix"]["median"]
        rows.append({"model": name, "segments": model.segments, "batch": B, "unrolled_ms": u * 1e3,
                     "matrix_ms": m * 1e3, "load": common.load()})  # fmt: skip
        log(f"kernel_crossover {name}: unrolled {u * 1e3:.2f} ms, matrix {m * 1e3:.2f} ms (matrix/unrolled {m / u:.2f})")
    return rows


def adjoint_reduction(log=print) -> list:
    """Partial sums per row and input layout of the adjoint's reduction (section 11)."""
    import jax
    import jax.numpy as jnp

    from jaxmb import _engine

    every = dict(common.models())
    models = [(f"chain{n}", common.chain_model(n), 10**5, np.float64) for n in (3, 10, 16, 20, 24)]
    models += [("human7", every["human7"], 10**5, np.float64), ("chain3", common.chain_model(3), 10**6, np.float32)]
    saved = (None, _engine.TUNING.adjoint_first_min)  # (None: by dtype, the default)
    rows = []
    try:
        for name, model, B, dtype in models:
            if dtype == np.float32:
                variants = {f"L={L}": (L, saved[1]) for L in (2, 8, 64)}
            else:
                variants = {f"L={L}": (L, saved[1]) for L in (1, 2, 4, 8)}
                variants.update({"batch-first": (2, 0), "transposed": (2, 10**6)})
            model = model.astype(dtype)
            args = (model,) + tuple(jax.device_put(x.astype(dtype)) for x in common.states(model, B, seed=13))

            def loss(m, q, qd, qdd, tuning=_engine.TUNING):
                return jnp.sum(_engine.run(_engine.Spec("tau", tuning=tuning), m, q, qd, qdd) ** 2)

            cases = {}
            for key, (L, first_min) in variants.items():
                tuning = _engine.Tuning(lanes=L, adjoint_first_min=first_min)
                cases[key] = jax.jit(jax.grad(lambda *a, t=tuning: loss(*a, tuning=t))).lower(*args).compile()
            cases["loss"] = jax.jit(loss).lower(*args).compile()
            t = common.alternate({k: (lambda c=c: common.block(c(*args))) for k, c in cases.items()}, 9)
            row = {"model": name, "batch": B, "dtype": np.dtype(dtype).name,
                   "ms": {k: v["median"] * 1e3 for k, v in t.items()}, "load": common.load()}  # fmt: skip
            if dtype == np.float32:  # each L's error against the float64 gradient
                m64 = model.astype(np.float64)
                a64 = (m64,) + tuple(jax.device_put(x) for x in common.states(m64, B, seed=13))
                ref = np.concatenate([np.ravel(x) for x in jax.tree_util.tree_leaves(jax.jit(jax.grad(loss))(*a64))])
                row["max_rel_error"] = {}
                for key in variants:
                    got = np.concatenate([np.ravel(np.asarray(x, np.float64))
                                          for x in jax.tree_util.tree_leaves(cases[key](*args))])  # fmt: skip
                    row["max_rel_error"][key] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
            rows.append(row)
            log(f"adjoint_reduction {name} B={B} {row['dtype']}: "
                + ", ".join(f"{k} {v:.2f} ms" for k, v in row["ms"].items())
                + (f"; errors {row['max_rel_error']}" if "max_rel_error" in row else ""))  # fmt: skip
    finally:
        jax.clear_caches()
    return rows


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    common.check_args(argv, __doc__, flags=("--quick",), options=("--only",))
    quick = "--quick" in argv
    only = None
    if "--only" in argv:
        only = argv[argv.index("--only") + 1].split(",")
        bad = [x for x in only if x not in SECTIONS]
        if bad:
            raise SystemExit(f"unknown section(s) {bad}; choose from {SECTIONS}")
    common.enable_x64()
    res = {}
    if only is not None and OUT.exists():
        import json

        res = json.loads(OUT.read_text())
    res.update({"environment": common.environment(), "load_start": common.load()})
    run = {
        "reductions": reductions,
        "adjoint_size": lambda: adjoint_size(quick),
        "solvers": solvers,
        "assembly": assembly,
        "in_loop": in_loop,
        "gait_filter": gait_filter,
        "gait_padlen": gait_padlen,
        "gait_parts": gait_parts,
        "gradient_parts": gradient_parts,
        "gradient_compile_parts": gradient_compile_parts,
        "reverse_form": reverse_form,
        "adjoint_reduction": adjoint_reduction,
        "kernel_crossover": kernel_crossover,
        "compile_backend": compile_backend,
        "sincos_guard": sincos_guard,
        "fd_wakeup": fd_wakeup,
    }
    for name in SECTIONS:
        if only is None or name in only:
            res[name] = run[name]()
    res["load_end"] = common.load()
    common.save(res, OUT)
    print(f"results in {OUT}")


if __name__ == "__main__":
    main()
