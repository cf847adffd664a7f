"""Batched inverse dynamics: jaxmb against NumPy, SymPy, MuJoCo, Pinocchio and jit(vmap).

For every model (chains of 2, 3, 7 and 20 segments, the seven-segment human), batch
(1e3, 1e5, 1e6) and dtype (float64, float32): the compile time of
``jaxmb.inverse_dynamics_batch`` (batch-last arrays, ``method="auto"``) and its run
time, alternated round by round with the float64 baselines:

- ``numpy``: the gait notebook's recursion vectorised over the samples;
- ``sympy``: lambdified Lagrange equations (chains of 2 and 3 segments);
- ``mujoco_loop`` / ``pinocchio_loop``: ``mj_inverse`` / ``pin.rnea`` in a Python loop,
  timed on at most 20000 samples and scaled to the batch;
- ``pinocchio_parallel``: ``pin.rneaInParallel`` with 2 threads on the whole batch;
- ``jax_vmap``: ``jit(vmap(jaxmb.inverse_dynamics))`` on (B, dof) arrays, the naive way;
- ``jaxmb_batch_first``: ``inverse_dynamics_batch`` on (B, dof) arrays (it transposes).

Run: ``python -m benchmarks.bench_inverse [--quick]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common
from .baselines import MujocoBaseline, PinocchioBaseline, forces_to_model, numpy_rnea, sympy_chain, to_relative

LOOP_SAMPLES = 20000


def _jax_fns():
    import jax

    import jaxmb
    from jaxmb.batch import inverse_dynamics_batch

    batched = jax.jit(lambda m, q, qd, qdd: inverse_dynamics_batch(m, q, qd, qdd, batch_axis=-1))
    first = jax.jit(lambda m, q, qd, qdd: inverse_dynamics_batch(m, q, qd, qdd, batch_axis=0))
    vmapped = jax.jit(jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0)))
    return batched, first, vmapped


def run(quick: bool = False, log=print) -> list:
    import jax
    import jax.numpy as jnp

    common.enable_x64()
    batched, first, vmapped = _jax_fns()
    batches = (10**3, 10**5) if quick else common.BATCHES
    rows = []
    sympy_cache = {}
    for name, model in common.models():
        mj = MujocoBaseline(model)
        pb = PinocchioBaseline(model, threads=2)
        for B in batches:
            for dtype in (np.float64, np.float32):
                dt = np.dtype(dtype).name
                q, qd, qdd = common.states(model, B, seed=B % 997)
                m = model.astype(dtype)
                args = (m,) + tuple(jax.device_put(x.astype(dtype)) for x in (q, qd, qdd))
                args_first = (m,) + tuple(jax.device_put(np.ascontiguousarray(x.T.astype(dtype))) for x in (q, qd, qdd))
                t0 = time.perf_counter()
                compiled = batched.lower(*args).compile()
                compile_s = time.perf_counter() - t0
                tau = np.asarray(compiled(*args))
                cases = {"jaxmb": lambda c=compiled, a=args: common.block(c(*a))}
                vm = vmapped.lower(*args_first).compile()
                cases["jax_vmap"] = lambda c=vm, a=args_first: common.block(c(*a))
                check = {"jax_vmap": float(np.abs(np.asarray(vm(*args_first)).T - tau).max())}
                loops = {}
                if dtype == np.float64:
                    fc = first.lower(*args_first).compile()
                    cases["jaxmb_batch_first"] = lambda c=fc, a=args_first: common.block(c(*a))
                    cases["numpy"] = lambda: numpy_rnea(model, q, qd, qdd)
                    check["numpy"] = float(np.abs(numpy_rnea(model, q[:, :100], qd[:, :100], qdd[:, :100])[0] - tau[:, :100]).max())
                    if model.segments <= 3 and model.base == "fixed":
                        if name not in sympy_cache:
                            sympy_cache[name] = sympy_chain(model)
                        fn, _ = sympy_cache[name]
                        cases["sympy"] = lambda fn=fn: fn(q, qd, qdd)
                        check["sympy"] = float(np.abs(fn(q[:, :100], qd[:, :100], qdd[:, :100]) - tau[:, :100]).max())
                    rel = [np.ascontiguousarray(to_relative(model, x.T)) for x in (q, qd, qdd)]
                    S = min(B, LOOP_SAMPLES)
                    sub = [x[:S] for x in rel]
                    loops = {"mujoco_loop": (lambda s=sub: mj.inverse(*s)), "pinocchio_loop": (lambda s=sub: pb.inverse(*s))}
                    cases.update(loops)
                    fq = [np.asfortranarray(x.T) for x in rel]
                    out = np.zeros((model.dof, B), order="F")
                    cases["pinocchio_parallel"] = lambda fq=fq, out=out: pb.inverse_parallel(*fq, out)
                    check["mujoco_loop"] = float(np.abs(forces_to_model(model, mj.inverse(*[x[:100] for x in rel])) - tau[:, :100].T).max())
                    check["pinocchio_parallel"] = float(np.abs(forces_to_model(model, pb.inverse_parallel(*fq, out).T[:100]) - tau[:, :100].T).max())
                reps, inner = common.repeats_for(B, quick)
                timings = common.alternate(cases, reps, inner)
                if loops:
                    S = min(B, LOOP_SAMPLES)
                    for k in loops:
                        timings[k] = common.scale(timings[k], B / S, S)
                jt = timings["jaxmb"]["median"]
                row = {
                    "model": name, "segments": model.segments, "dof": model.dof, "batch": B, "dtype": dt,
                    "method": "unrolled" if model.segments <= 10 else "matrix",
                    "compile_s": compile_s, "timings": timings,
                    "per_sample_ns": {k: v["median"] / B * 1e9 for k, v in timings.items()},
                    "speedup": {k: v["median"] / jt for k, v in timings.items() if k != "jaxmb"},
                    "max_abs_diff": check, "load": common.load(),
                }  # fmt: skip
                rows.append(row)
                sp = row["speedup"]
                log(f"ID {name:7s} B={B:>7d} {dt:7s} jaxmb {jt * 1e3:9.3f} ms  "
                    + "  ".join(f"{k}:{v:.2f}x" for k, v in sp.items()))  # fmt: skip
                del args, args_first, cases
                jnp.zeros(1).block_until_ready()
    return rows


if __name__ == "__main__":
    rows = run(quick="--quick" in sys.argv)
