"""Batched inverse dynamics: jaxmb's one API against NumPy, SymPy, MuJoCo, MJX and Pinocchio.

For every model (chains of 2, 3, 7 and 20 segments, the seven-segment human), batch
(1e3, 1e5, 1e6) and dtype (float64, float32), on (B, dof) arrays:

- ``jaxmb`` (reference of the speedups): ``jaxmb.inverse_dynamics(model, Q, QD, QDD)``
  called directly from Python, with no ``jax.jit`` around it, as a user types it. Its
  first call compiles (``compile_s`` is that first call less one run), later calls
  are timed;
- ``jaxmb_jit``: ``jax.jit`` around the same call, compiled ahead of time;
- ``jit_vmap``: ``jax.jit(jax.vmap(lambda q, qd, qdd: jaxmb.inverse_dynamics(model, q,
  qd, qdd)))``, the single-sample call vmapped (dispatches to the same kernel);

and, in float64 only, the baselines:

- ``numpy``: the gait notebook's recursion vectorised over the samples ((dof, B));
- ``sympy``: lambdified Lagrange equations (chains of 2 and 3 segments);
- ``mujoco_loop`` / ``pinocchio_loop``: ``mj_inverse`` / ``pin.rnea`` in a Python loop,
  timed on at most 20000 samples and scaled to the batch;
- ``pinocchio_parallel``: ``pin.rneaInParallel`` with 2 threads on the whole batch;
- ``mjx``: MuJoCo MJX ``jax.jit(jax.vmap(mjx.inverse))`` on the MuJoCo twin (where
  ``mujoco-mjx`` is installed; at most 1e5 samples timed and scaled: its per-sample
  cost is flat).

Every contender's numbers are checked against jaxmb's in the same run (``max_abs_diff``).

Run: ``python -m benchmarks.bench_inverse [--quick]``.
"""

from __future__ import annotations

import sys

import numpy as np

from . import common
from .baselines import (
    MujocoBaseline,
    MjxBaseline,
    PinocchioBaseline,
    optional,
    forces_to_model,
    numpy_rnea,
    sympy_chain,
    to_relative,
)

LOOP_SAMPLES = 20000
MJX_MAX_SEGMENTS = 3  # MJX's XLA compile beyond takes minutes on this CPU (7 segments: over 10 min, unfinished)
MJX_SAMPLES = 10**5


def mjx_or_none(mj, log=print):
    """An :class:`MjxBaseline` for the twin, or None (logged) without ``mujoco-mjx``."""
    try:
        return MjxBaseline(mj)
    except ImportError as e:
        log(f"  (MJX skipped: {e})")
        return None


def run(quick: bool = False, log=print) -> list:
    import jax
    import jax.numpy as jnp

    import jaxmb

    common.enable_x64()
    batches = (10**3, 10**4) if quick else common.BATCHES
    names = ("chain3", "chain20", "human7") if quick else None
    rows = []
    sympy_cache = {}
    for name, model in common.models():
        if names and name not in names:
            continue
        mj = MujocoBaseline(model)
        pb = optional(PinocchioBaseline, model, threads=2, log=log)
        mjx = mjx_or_none(mj, log) if model.segments <= MJX_MAX_SEGMENTS else None
        for B in batches:
            for dtype in (np.float64, np.float32):
                dt = np.dtype(dtype).name
                q, qd, qdd = common.states(model, B, seed=B % 997)  # (B, dof) float64
                m = model.astype(dtype)
                xs = tuple(jax.device_put(x.astype(dtype)) for x in (q, qd, qdd))
                direct = lambda a=xs, m=m: jaxmb.inverse_dynamics(m, *a)  # noqa: E731
                tau, first_s = common.first_call(direct)
                run_s = common.alternate({"x": lambda: common.block(direct())}, 1, 1, warmup=0)["x"]["median"]
                compile_s = max(first_s - run_s, 0.0)
                tau = np.asarray(tau)  # (B, dof)
                cj, cj_s = common.compile_and_time(lambda m, *a: jaxmb.inverse_dynamics(m, *a), m, *xs)
                cv, cv_s = common.compile_and_time(jax.vmap(lambda a, b, c, m=m: jaxmb.inverse_dynamics(m, a, b, c)), *xs)
                cases = {
                    "jaxmb": lambda: common.block(direct()),
                    "jaxmb_jit": lambda c=cj, a=xs, m=m: common.block(c(m, *a)),
                    "jit_vmap": lambda c=cv, a=xs: common.block(c(*a)),
                }
                check = {"jaxmb_jit": float(np.abs(np.asarray(cj(m, *xs)) - tau).max()),
                         "jit_vmap": float(np.abs(np.asarray(cv(*xs)) - tau).max())}  # fmt: skip
                scaled = {}
                if dtype == np.float64:
                    ql, qdl, qddl = (np.ascontiguousarray(x.T) for x in (q, qd, qdd))  # NumPy's (dof, B)
                    cases["numpy"] = lambda: numpy_rnea(model, ql, qdl, qddl)
                    check["numpy"] = float(np.abs(numpy_rnea(model, ql[:, :100], qdl[:, :100], qddl[:, :100])[0].T - tau[:100]).max())
                    if model.segments <= 3 and model.base == "fixed":
                        if name not in sympy_cache:
                            sympy_cache[name] = sympy_chain(model)
                        fn, _ = sympy_cache[name]
                        cases["sympy"] = lambda fn=fn: fn(ql, qdl, qddl)
                        check["sympy"] = float(np.abs(fn(ql[:, :100], qdl[:, :100], qddl[:, :100]).T - tau[:100]).max())
                    rel = [np.ascontiguousarray(to_relative(model, x)) for x in (q, qd, qdd)]
                    S = min(B, LOOP_SAMPLES)
                    sub = [x[:S] for x in rel]
                    cases["mujoco_loop"] = lambda s=sub: mj.inverse(*s)
                    scaled["mujoco_loop"] = S
                    check["mujoco_loop"] = float(np.abs(forces_to_model(model, mj.inverse(*[x[:100] for x in rel])) - tau[:100]).max())
                    if pb is not None:
                        cases["pinocchio_loop"] = lambda s=sub: pb.inverse(*s)
                        scaled["pinocchio_loop"] = S
                        fq = [np.asfortranarray(x.T) for x in rel]
                        out = np.zeros((model.dof, B), order="F")
                        cases["pinocchio_parallel"] = lambda fq=fq, out=out: pb.inverse_parallel(*fq, out)
                        check["pinocchio_parallel"] = float(np.abs(forces_to_model(model, pb.inverse_parallel(*fq, out).T[:100]) - tau[:100]).max())
                    if mjx is not None:
                        Sx = min(B, MJX_SAMPLES)
                        jrel = tuple(jax.device_put(x[:Sx]) for x in rel)
                        cm = mjx.inverse_fn.lower(*jrel).compile()
                        cases["mjx"] = lambda c=cm, a=jrel: common.block(c(*a))
                        scaled["mjx"] = Sx
                        check["mjx"] = float(np.abs(forces_to_model(model, np.asarray(cm(*jrel))[:100]) - tau[:100]).max())
                reps, inner = common.repeats_for(B, quick)
                timings = common.alternate(cases, reps, inner)
                for k, S in scaled.items():
                    timings[k] = common.scale(timings[k], B / S, S)
                jt = timings["jaxmb"]["median"]
                row = {
                    "model": name, "segments": model.segments, "dof": model.dof, "batch": B, "dtype": dt,
                    "compile_s": compile_s, "compile_jit_s": cj_s, "compile_jit_vmap_s": cv_s, "timings": timings,
                    "per_sample_ns": {k: v["median"] / B * 1e9 for k, v in timings.items()},
                    "speedup": {k: v["median"] / jt for k, v in timings.items() if k != "jaxmb"},
                    "max_abs_diff": check, "load": common.load(),
                }  # fmt: skip
                rows.append(row)
                log(f"ID {name:7s} B={B:>7d} {dt:7s} jaxmb {jt * 1e3:9.3f} ms (first call {first_s:.2f} s)  "
                    + "  ".join(f"{k}:{v:.2f}x" for k, v in row["speedup"].items()))  # fmt: skip
                del xs, cases
                jnp.zeros(1).block_until_ready()
    return rows


if __name__ == "__main__":
    common.check_args(sys.argv[1:], __doc__, flags=("--quick",))
    rows = run(quick="--quick" in sys.argv)
