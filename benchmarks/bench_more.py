"""Forward dynamics, joint reactions and the gradient of a batched loss.

- forward dynamics (``forward_dynamics_batch``) against ``pin.abaInParallel`` (2
  threads), ``pin.aba`` and ``mj_forward`` in loops, and ``jit(vmap(forward_dynamics))``;
- joint reactions (``joint_reactions_batch``, world frame, every joint) against the
  NumPy recursion (which returns them) and ``jit(vmap(joint_reactions))`` by the
  projection of Blajer & Czaplicki;
- the gradient with respect to every model parameter of a batched squared-torque
  loss, ``sum(inverse_dynamics_batch(...)**2)``, against the time of the loss itself,
  with the hand-derived adjoint (default) and with ``gradient="autodiff"`` (JAX's
  reverse mode of the same pass), and the same gradient through
  ``jit(vmap(inverse_dynamics))``.

Run: ``python -m benchmarks.bench_more [--quick]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common
from .baselines import (
    MujocoBaseline,
    PinocchioBaseline,
    forces_to_relative,
    from_relative,
    numpy_rnea,
    to_relative,
)

LOOP_SAMPLES = 20000


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
    from jaxmb.batch import forward_dynamics_batch, inverse_dynamics_batch

    common.enable_x64()
    fd = jax.jit(lambda m, q, qd, tau: forward_dynamics_batch(m, q, qd, tau, batch_axis=-1))
    vm = jax.jit(jax.vmap(jaxmb.forward_dynamics, in_axes=(None, 0, 0, 0)))
    rows = []
    for name, model in _models(["chain3", "chain7", "chain20", "human7"]):
        mj, pb = MujocoBaseline(model), PinocchioBaseline(model, threads=2)
        for B in (10**3, 10**5):
            q, qd, qdd = common.states(model, B, seed=7)
            tau = np.asarray(inverse_dynamics_batch(model, q, qd, qdd, batch_axis=-1))
            args = (model,) + tuple(jax.device_put(x) for x in (q, qd, tau))
            first = (model,) + tuple(jax.device_put(np.ascontiguousarray(x.T)) for x in (q, qd, tau))
            t0 = time.perf_counter()
            c = fd.lower(*args).compile()
            compile_s = time.perf_counter() - t0
            acc = np.asarray(c(*args))
            cv = vm.lower(*first).compile()
            rel = [np.ascontiguousarray(to_relative(model, q.T)), np.ascontiguousarray(to_relative(model, qd.T)),
                   np.ascontiguousarray(forces_to_relative(model, tau.T))]  # fmt: skip
            S = min(B, LOOP_SAMPLES)
            sub = [x[:S] for x in rel]
            fq = [np.asfortranarray(x.T) for x in rel]
            out = np.zeros((model.dof, B), order="F")
            cases = {
                "jaxmb": lambda: common.block(c(*args)),
                "jax_vmap": lambda: common.block(cv(*first)),
                "pinocchio_parallel": lambda: pb.forward_parallel(*fq, out),
                "pinocchio_loop": lambda: pb.forward(*sub),
                "mujoco_loop": lambda: mj.forward(*sub),
            }
            check = {
                "vs_qdd": float(np.abs(acc - qdd).max()),
                "jax_vmap": float(np.abs(np.asarray(cv(*first)).T - acc).max()),
                "pinocchio_parallel": float(np.abs(from_relative(model, pb.forward_parallel(*fq, out).T) - acc.T).max()),
                "mujoco_loop": float(np.abs(from_relative(model, mj.forward(*[x[:100] for x in rel])) - acc.T[:100]).max()),
            }
            reps, inner = common.repeats_for(B, quick)
            if B > 10**3:  # slow contenders (jit(vmap) of the Cholesky path for 20 segments: ~4 s)
                reps, inner = min(reps, 5), 1
            t = common.alternate(cases, reps, inner)
            for k in ("pinocchio_loop", "mujoco_loop"):
                t[k] = common.scale(t[k], B / S, S)
            rows.append(_speedup_row("FD", name, model, B, compile_s, t, check, log))
    return rows


def reactions(quick: bool = False, log=print) -> list:
    import jax

    import jaxmb
    from jaxmb.batch import joint_reactions_batch

    common.enable_x64()
    jr = jax.jit(lambda m, q, qd, qdd: joint_reactions_batch(m, q, qd, qdd, batch_axis=-1))
    vproj = jax.jit(jax.vmap(jaxmb.joint_reactions, in_axes=(None, 0, 0, 0)))
    vrec = jax.jit(jax.vmap(lambda m, q, qd, qdd: jaxmb.joint_reactions(m, q, qd, qdd, method="recursive"),
                            in_axes=(None, 0, 0, 0)))  # fmt: skip
    rows = []
    for name, model in _models(["chain3", "chain7", "chain20", "human7"]):
        # 1e6 only where the slowest contender takes under a second (bounds the run time)
        for B in (10**5, 10**6) if not quick and name in ("chain3", "human7") else (10**5,):
            q, qd, qdd = common.states(model, B, seed=11)
            args = (model,) + tuple(jax.device_put(x) for x in (q, qd, qdd))
            first = (model,) + tuple(jax.device_put(np.ascontiguousarray(x.T)) for x in (q, qd, qdd))
            t0 = time.perf_counter()
            c = jr.lower(*args).compile()
            compile_s = time.perf_counter() - t0
            lam = np.asarray(c(*args))  # (n, 2, B)
            cp, cr = vproj.lower(*first).compile(), vrec.lower(*first).compile()
            cases = {
                "jaxmb": lambda: common.block(c(*args)),
                "jax_vmap_projection": lambda: common.block(cp(*first)),
                "jax_vmap_recursive": lambda: common.block(cr(*first)),
                "numpy": lambda: numpy_rnea(model, q, qd, qdd),
            }
            check = {
                "jax_vmap_projection": float(np.abs(np.moveaxis(np.asarray(cp(*first)), 0, -1) - lam).max()),
                "numpy": float(np.abs(numpy_rnea(model, q[:, :100], qd[:, :100], qdd[:, :100])[1] - lam[..., :100]).max()),
            }
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
    from jaxmb.batch import inverse_dynamics_batch

    common.enable_x64()

    def loss(m, q, qd, qdd, gradient="adjoint"):  # batched squared-torque loss, N^2 m^2
        return jnp.sum(inverse_dynamics_batch(m, q, qd, qdd, batch_axis=-1, gradient=gradient) ** 2)

    def loss_autodiff(m, q, qd, qdd):  # JAX's own reverse mode of the same batched pass
        return loss(m, q, qd, qdd, "autodiff")

    def loss_vmap(m, q, qd, qdd):
        return jnp.sum(jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0))(m, q, qd, qdd) ** 2)

    f, g, gv = jax.jit(loss), jax.jit(jax.grad(loss)), jax.jit(jax.grad(loss_vmap))
    ga = jax.jit(jax.grad(loss_autodiff))
    rows = []
    configs = [("chain3", 10**5), ("chain3", 10**6), ("chain20", 10**5), ("human7", 10**5)]
    every = dict(common.models())
    for name, B in configs if not quick else [(n, 10**5) for n in ("chain3", "human7")]:
        model = every[name]
        q, qd, qdd = common.states(model, B, seed=13)
        args = (model,) + tuple(jax.device_put(x) for x in (q, qd, qdd))
        first = (model,) + tuple(jax.device_put(np.ascontiguousarray(x.T)) for x in (q, qd, qdd))
        cf = f.lower(*args).compile()
        t0 = time.perf_counter()
        cg = g.lower(*args).compile()
        compile_s = time.perf_counter() - t0
        cgv = gv.lower(*first).compile()
        cga = ga.lower(*args).compile()
        g1, g2, g3 = cg(*args), cgv(*first), cga(*args)
        rel, rel_auto = _grad_difference(g1, g2), _grad_difference(g1, g3)
        cases = {
            "loss": lambda: common.block(cf(*args)),
            "grad": lambda: common.block(cg(*args)),
            "grad_autodiff": lambda: common.block(cga(*args)),
            "grad_jax_vmap": lambda: common.block(cgv(*first)),
        }
        reps, inner = common.repeats_for(B, quick)
        t = common.alternate(cases, reps, inner)
        ratio = t["grad"]["median"] / t["loss"]["median"]
        row = {"model": name, "segments": model.segments, "batch": B, "dtype": "float64",
               "parameters": int(sum(np.size(x) for x in jax.tree_util.tree_leaves(model))),
               "grad_compile_s": compile_s, "timings": t, "grad_over_loss": ratio,
               "grad_autodiff_over_loss": t["grad_autodiff"]["median"] / t["loss"]["median"],
               "grad_vmap_over_grad": t["grad_jax_vmap"]["median"] / t["grad"]["median"],
               "max_rel_diff_vs_vmap_grad": rel, "max_rel_diff_vs_autodiff": rel_auto,
               "load": common.load()}  # fmt: skip
        rows.append(row)
        log(f"GR {name:7s} B={B:>7d} loss {t['loss']['median'] * 1e3:8.2f} ms  grad {t['grad']['median'] * 1e3:8.2f} ms"
            f"  ratio {ratio:.2f}  (autodiff {t['grad_autodiff']['median'] * 1e3:.2f} ms,"
            f" vmap grad {t['grad_jax_vmap']['median'] * 1e3:.2f} ms)")  # fmt: skip
    return rows


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    forward(quick)
    reactions(quick)
    gradient(quick)
