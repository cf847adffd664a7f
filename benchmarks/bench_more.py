"""Forward dynamics, joint reactions and the gradient of a batched loss.

- forward dynamics, ``jaxmb.forward_dynamics(model, Q, QD, TAU)`` on (B, dof) arrays
  called directly (the reference; first call = compile), and ``jit(vmap(...))`` of the
  single-sample call, against ``pin.abaInParallel`` (2 threads), ``pin.aba`` and
  ``mj_forward`` in loops, and MuJoCo MJX ``jit(vmap(mjx.forward))``;
- joint reactions (``jaxmb.joint_reactions``, world frame, every joint, called
  directly) against ``jit(vmap(...))`` of the single-sample call (recursive and
  projection methods) and the NumPy recursion (which returns them);
- the gradient with respect to every model parameter of a batched squared-torque
  loss, ``sum(jaxmb.inverse_dynamics(model, Q, QD, QDD)**2)``, against the time of the
  loss itself, with the hand-derived adjoint (default, ``gradient="adjoint"``) and
  with ``gradient="autodiff"`` (JAX's reverse mode of the same pass), and the same
  gradient through ``jit(vmap(...))``; plus the compile time of the gradient.

Run: ``python -m benchmarks.bench_more [--quick]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common
from .baselines import (
    MjxBaseline,
    MujocoBaseline,
    PinocchioBaseline,
    optional,
    forces_to_relative,
    from_relative,
    numpy_rnea,
    to_relative,
)

LOOP_SAMPLES = 20000
MJX_MAX_SEGMENTS = 3  # MJX's XLA compile beyond takes minutes on this CPU (7 segments: over 10 min, unfinished)


def _models(names):
    every = dict(common.models())
    return [(n, every[n]) for n in names]


def _speedup_row(tag, name, model, B, compile_s, t, check, log) -> dict:
    """One result row: timings, speedups of jaxmb over every baseline, logged."""
    jt = t["jaxmb"]["median"]
    row = {"model": name, "segments": model.segments, "batch": B, "dtype": "float64",
           "compile_s": compile_s, "timings": t,
           "speedup": {k: v["median"] / jt for k, v in t.items() if k != "jaxmb"},
           "max_abs_diff": check, "load": common.load()}  # fmt: skip
    log(f"{tag} {name:7s} B={B:>7d} jaxmb {jt * 1e3:9.3f} ms  "
        + "  ".join(f"{k}:{v:.2f}x" for k, v in row["speedup"].items()))  # fmt: skip
    return row


def forward(quick: bool = False, log=print) -> list:
    import jax

    import jaxmb

    common.enable_x64()
    rows = []
    names = ["chain3", "chain20"] if quick else ["chain3", "chain7", "chain20", "human7"]
    for name, model in _models(names):
        mj, pb = MujocoBaseline(model), optional(PinocchioBaseline, model, threads=2, log=log)
        mjx = None
        if model.segments <= MJX_MAX_SEGMENTS:  # MJX's compile of the 20-chain's forward takes minutes
            try:
                mjx = MjxBaseline(mj)
            except ImportError as e:
                log(f"  (MJX skipped: {e})")
        for B in (10**3, 10**4) if quick else (10**3, 10**5):
            q, qd, qdd = common.states(model, B, seed=7)  # (B, dof)
            tau = np.asarray(jaxmb.inverse_dynamics(model, q, qd, qdd))
            xs = tuple(jax.device_put(x) for x in (q, qd, tau))
            direct = lambda a=xs: jaxmb.forward_dynamics(model, *a)  # noqa: E731
            acc, first_s = common.first_call(direct)
            run_s = common.alternate({"x": lambda: common.block(direct())}, 1, 1, warmup=0)["x"]["median"]
            compile_s = max(first_s - run_s, 0.0)
            acc = np.asarray(acc)
            cv, cv_s = common.compile_and_time(jax.vmap(lambda a, b, c: jaxmb.forward_dynamics(model, a, b, c)), *xs)
            rel = [np.ascontiguousarray(to_relative(model, q)), np.ascontiguousarray(to_relative(model, qd)),
                   np.ascontiguousarray(forces_to_relative(model, tau))]  # fmt: skip
            S = min(B, LOOP_SAMPLES)
            sub = [x[:S] for x in rel]
            fq = [np.asfortranarray(x.T) for x in rel]
            out = np.zeros((model.dof, B), order="F")
            cases = {
                "jaxmb": lambda: common.block(direct()),
                "jit_vmap": lambda: common.block(cv(*xs)),
                "mujoco_loop": lambda: mj.forward(*sub),
            }
            check = {
                "vs_qdd": float(np.abs(acc - qdd).max()),
                "jit_vmap": float(np.abs(np.asarray(cv(*xs)) - acc).max()),
                "mujoco_loop": float(np.abs(from_relative(model, mj.forward(*[x[:100] for x in rel])) - acc[:100]).max()),
            }
            if pb is not None:
                cases["pinocchio_parallel"] = lambda: pb.forward_parallel(*fq, out)
                cases["pinocchio_loop"] = lambda: pb.forward(*sub)
                check["pinocchio_parallel"] = float(np.abs(from_relative(model, pb.forward_parallel(*fq, out).T) - acc).max())
            if mjx is not None:
                jrel = tuple(jax.device_put(x) for x in rel)
                cm = mjx.forward_fn.lower(*jrel).compile()
                cases["mjx"] = lambda: common.block(cm(*jrel))
                check["mjx"] = float(np.abs(from_relative(model, np.asarray(cm(*jrel))[:100]) - acc[:100]).max())
            reps, inner = common.repeats_for(B, quick)
            if B > 10**3:
                reps, inner = min(reps, 5), 1
            t = common.alternate(cases, reps, inner)
            for k in ("pinocchio_loop", "mujoco_loop"):
                if k in t:
                    t[k] = common.scale(t[k], B / S, S)
            row = _speedup_row("FD", name, model, B, compile_s, t, check, log)
            row["compile_jit_vmap_s"] = cv_s
            rows.append(row)
    return rows


def reactions(quick: bool = False, log=print) -> list:
    import jax

    import jaxmb

    common.enable_x64()
    rows = []
    names = ["chain3", "human7"] if quick else ["chain3", "chain7", "chain20", "human7"]
    for name, model in _models(names):
        # 1e6 only where the slowest contender takes under a second (bounds the run time)
        sizes = (10**4,) if quick else (10**5, 10**6) if name in ("chain3", "human7") else (10**5,)
        for B in sizes:
            q, qd, qdd = common.states(model, B, seed=11)  # (B, dof)
            xs = tuple(jax.device_put(x) for x in (q, qd, qdd))
            ql, qdl, qddl = (np.ascontiguousarray(x.T) for x in (q, qd, qdd))
            direct = lambda a=xs: jaxmb.joint_reactions(model, *a)  # noqa: E731
            lam, first_s = common.first_call(direct)
            run_s = common.alternate({"x": lambda: common.block(direct())}, 1, 1, warmup=0)["x"]["median"]
            compile_s = max(first_s - run_s, 0.0)
            lam = np.asarray(lam)  # (B, n, 2)
            cp, _ = common.compile_and_time(
                jax.vmap(lambda a, b, c: jaxmb.joint_reactions(model, a, b, c, method="projection")), *xs)
            cr, _ = common.compile_and_time(jax.vmap(lambda a, b, c: jaxmb.joint_reactions(model, a, b, c)), *xs)
            cases = {
                "jaxmb": lambda: common.block(direct()),
                "jit_vmap_projection": lambda: common.block(cp(*xs)),
                "jit_vmap_recursive": lambda: common.block(cr(*xs)),
                "numpy": lambda: numpy_rnea(model, ql, qdl, qddl),
            }
            check = {
                "jit_vmap_projection": float(np.abs(np.asarray(cp(*xs)) - lam).max()),
                "jit_vmap_recursive": float(np.abs(np.asarray(cr(*xs)) - lam).max()),
                "numpy": float(np.abs(np.moveaxis(numpy_rnea(model, ql[:, :100], qdl[:, :100], qddl[:, :100])[1], -1, 0)
                                      - lam[:100]).max()),
            }  # fmt: skip
            reps, inner = common.repeats_for(B, quick)
            t = common.alternate(cases, reps, inner)
            rows.append(_speedup_row("JR", name, model, B, compile_s, t, check, log))
    return rows


def _grad_difference(g1, g2) -> float:
    """Largest difference between two gradients over the largest gradient entry
    (per leaf would divide round-off by an exact zero, e.g. d/d origin)."""
    import jax
    import jax.numpy as jnp

    a, b = jax.tree_util.tree_leaves(g1), jax.tree_util.tree_leaves(g2)
    scale = max(float(jnp.max(jnp.abs(y))) for y in b)
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(a, b)) / scale


def gradient(quick: bool = False, log=print) -> list:
    import jax
    import jax.numpy as jnp

    import jaxmb

    common.enable_x64()

    def loss(m, q, qd, qdd, gradient="adjoint"):  # batched squared-torque loss, N^2 m^2
        return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, gradient=gradient) ** 2)

    def loss_autodiff(m, q, qd, qdd):  # JAX's own reverse mode of the same batched pass
        return loss(m, q, qd, qdd, "autodiff")

    def loss_vmap(m, q, qd, qdd):
        return jnp.sum(jax.vmap(lambda a, b, c: jaxmb.inverse_dynamics(m, a, b, c))(q, qd, qdd) ** 2)

    rows = []
    configs = [("chain3", 10**5), ("chain3", 10**6), ("chain20", 10**5), ("human7", 10**5)]
    every = dict(common.models())
    for name, B in configs if not quick else [(n, 10**4) for n in ("chain3", "human7")]:
        model = every[name]
        q, qd, qdd = common.states(model, B, seed=13)
        args = (model,) + tuple(jax.device_put(x) for x in (q, qd, qdd))
        cf, _ = common.compile_and_time(loss, *args)
        jax.clear_caches()  # the gradient's compile time from a cold cache (jaxmb's internal jits too)
        cg, compile_s = common.compile_and_time(jax.grad(loss), *args)
        cgv, _ = common.compile_and_time(jax.grad(loss_vmap), *args)
        cga, compile_auto_s = common.compile_and_time(jax.grad(loss_autodiff), *args)
        g1, g2, g3 = cg(*args), cgv(*args), cga(*args)
        rel, rel_auto = _grad_difference(g1, g2), _grad_difference(g1, g3)
        cases = {
            "loss": lambda: common.block(cf(*args)),
            "grad": lambda: common.block(cg(*args)),
            "grad_autodiff": lambda: common.block(cga(*args)),
            "grad_jit_vmap": lambda: common.block(cgv(*args)),
        }
        reps, inner = common.repeats_for(B, quick)
        t = common.alternate(cases, reps, inner)
        ratio = t["grad"]["median"] / t["loss"]["median"]
        row = {"model": name, "segments": model.segments, "batch": B, "dtype": "float64",
               "parameters": int(sum(np.size(x) for x in jax.tree_util.tree_leaves(model))),
               "grad_compile_s": compile_s, "grad_autodiff_compile_s": compile_auto_s,
               "timings": t, "grad_over_loss": ratio,
               "grad_autodiff_over_loss": t["grad_autodiff"]["median"] / t["loss"]["median"],
               "grad_vmap_over_grad": t["grad_jit_vmap"]["median"] / t["grad"]["median"],
               "max_rel_diff_vs_vmap_grad": rel, "max_rel_diff_vs_autodiff": rel_auto,
               "load": common.load()}  # fmt: skip
        rows.append(row)
        log(f"GR {name:7s} B={B:>7d} loss {t['loss']['median'] * 1e3:8.2f} ms  grad {t['grad']['median'] * 1e3:8.2f} ms"
            f"  ratio {ratio:.2f}  (autodiff {t['grad_autodiff']['median'] * 1e3:.2f} ms,"
            f" jit(vmap) grad {t['grad_jit_vmap']['median'] * 1e3:.2f} ms)  compile {compile_s:.2f} s")  # fmt: skip
    return rows


def gradient_compile(quick: bool = False, log=print) -> list:
    """Compile time of ``jax.grad`` with respect to the model of a loss of each public
    dynamics function of ``jaxmb.seven_segment_human()`` (issue 8: < 2 s on the CPU),
    from a cleared cache: inverse dynamics with each gradient form (the median of
    three compiles, and the first un-jitted call), then joint moments, reactions,
    forward dynamics, the mass matrix, the bias forces and a 10-step simulation, and
    forward dynamics and the simulation with ``gradient="autodiff"`` (the
    median of three compiles each: one compile of the same code varies by 25 % on
    the 2-core VM), with per-sample loads where the function takes them. B = 1e3 (the
    compile time hardly depends on B without chunks), and forward dynamics also at
    B = 1e5, where its kernel runs in chunks; then the gradients of inverse and
    forward dynamics with respect to q, qd and the loads at B = 1e5."""
    import jax
    import jax.numpy as jnp

    import jaxmb

    common.enable_x64()
    model = jaxmb.seven_segment_human()
    B = 10**3
    q, qd, qdd = common.states(model, B, seed=17)
    loads = np.random.default_rng(18).normal(0.0, 10.0, (B, model.segments, 3))
    args = (model,) + tuple(jax.device_put(x) for x in (q, qd, qdd))
    rows = []
    for form in ("adjoint", "autodiff"):
        def loss(m, q, qd, qdd, form=form):
            return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, gradient=form) ** 2)

        reps = []
        for _ in range(1 if quick else 3):
            jax.clear_caches()
            _, s = common.compile_and_time(jax.grad(loss), *args)
            reps.append(s)
        jax.clear_caches()
        t0 = time.perf_counter()
        common.block(jax.grad(loss)(*args))  # the user's way: no jit, first call
        direct_s = time.perf_counter() - t0
        row = {"model": "seven_segment_human", "function": "inverse_dynamics", "gradient": form,
               "compile_s": float(np.median(reps)), "first_call_unjitted_s": direct_s, "load": common.load()}  # fmt: skip
        rows.append(row)
        log(f"GC human7 grad inverse_dynamics ({form:8s}) jit compile {row['compile_s']:.2f} s; "
            f"first un-jitted jax.grad call {direct_s:.2f} s")
    ld = jax.device_put(loads)
    # forward dynamics at B = 1e5 runs in chunks (at most 2048 samples; 1e5 is no
    # multiple of it), the size of a user's batch
    Bc = 10**5
    big = (model,) + tuple(jax.device_put(x) for x in common.states(model, Bc, seed=19))
    big += (jax.device_put(np.random.default_rng(20).normal(0.0, 10.0, (Bc, model.segments, 3))),)
    # (key, loss, arguments, argnums, extra row fields); the loss is sum(f ** 2)
    # w.r.t. the model, sum(sin(f)) w.r.t. the state (q, qd and the loads, as a
    # trajectory optimisation takes it)
    cases = [
        ("joint_moments", lambda m, q, qd, x: jaxmb.joint_moments(m, q, qd, x, ld)),
        ("joint_reactions", lambda m, q, qd, x: jaxmb.joint_reactions(m, q, qd, x, ld)),
        ("forward_dynamics", lambda m, q, qd, x: jaxmb.forward_dynamics(m, q, qd, x, ld)),
        ("mass_matrix", lambda m, q, qd, x: jaxmb.mass_matrix(m, q)),
        ("bias_forces", lambda m, q, qd, x: jaxmb.bias_forces(m, q, qd)),
        ("simulate", lambda m, q, qd, x: jaxmb.simulate(m, q, qd, x, 1e-3, steps=10).q),
        # the custom_jvp rule transposed by JAX, for comparison with the default's own
        # reverse-mode rule (not a target)
        ("forward_dynamics autodiff", lambda m, q, qd, x: jaxmb.forward_dynamics(m, q, qd, x, ld, gradient="autodiff")),
        ("simulate autodiff", lambda m, q, qd, x: jaxmb.simulate(m, q, qd, x, 1e-3, steps=10, gradient="autodiff").q),
    ]  # fmt: skip
    cases = [(k, lambda *a, f=f: jnp.sum(f(*a) ** 2), args, 0, {}) for k, f in cases]
    cases.append(("forward_dynamics", lambda *a: jnp.sum(jaxmb.forward_dynamics(*a) ** 2), big, 0, {"batch": Bc}))
    for name in ("inverse_dynamics", "forward_dynamics"):
        f = getattr(jaxmb, name)
        cases.append((name, lambda *a, f=f: jnp.sum(jnp.sin(f(*a))), big, (1, 2, 4),
                      {"batch": Bc, "wrt": "q, qd, loads"}))  # fmt: skip
    if quick:
        cases = [c for c in cases if c[0] in ("joint_reactions", "forward_dynamics") and not c[4]]
    for key, loss, a, argnums, extra in cases:
        name, _, form = key.partition(" ")
        reps = []
        for _ in range(1 if quick else 3):
            jax.clear_caches()
            reps.append(common.compile_and_time(jax.grad(loss, argnums=argnums), *a)[1])
        s = float(np.median(reps))
        rows.append({"model": "seven_segment_human", "function": name, "gradient": form or "default", **extra,
                     "compile_s": s, "compiles_s": reps, "load": common.load()})  # fmt: skip
        where = "".join(f" {k}={v:.0e}" if k == "batch" else f" w.r.t. {v}" for k, v in extra.items())
        log(f"GC human7 grad {key}{where} jit compile {s:.2f} s (median of {', '.join(f'{r:.2f}' for r in reps)})")
    return rows


if __name__ == "__main__":
    common.check_args(sys.argv[1:], __doc__, flags=("--quick",))
    quick = "--quick" in sys.argv
    forward(quick)
    reactions(quick)
    gradient(quick)
    gradient_compile(quick)
