"""Compile time, single-call latency and peak memory.

- compile time: ``jax.jit(f).lower(args).compile()`` timed apart from running (after
  ``jax.clear_caches()``; the backend is warmed up first), for the seven-segment
  human's batched inverse dynamics, reactions and forward dynamics, a 20-segment
  chain, and the single-sample core functions;
- latency: one sample per call (jitted, dispatch included) for jaxmb's core and
  batched functions, ``pin.rnea``, ``mj_inverse``, the NumPy recursion and SymPy;
- roofline: batched inverse dynamics against the memory bandwidth measured on the same
  device (STREAM-like scale and triad), float32 and float64;
- memory: XLA's own account of the compiled batched inverse dynamics (arguments,
  outputs, temporaries) and the peak resident memory of a fresh process around one
  call, for a 3-segment chain and a batch of 1e6 in float64, against NumPy and
  ``jit(vmap(...))``.

Run: ``python -m benchmarks.bench_system [--quick]``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common
from .baselines import MujocoBaseline, PinocchioBaseline, numpy_rnea, optional, sympy_chain, to_relative


def compile_times(quick: bool = False, log=print) -> list:
    import jax
    import jax.numpy as jnp

    import jaxmb

    common.enable_x64()
    jax.jit(lambda x: x + 1).lower(jnp.zeros(3)).compile()  # backend start-up, not counted
    every = dict(common.models())
    B = 10**5
    fns = {
        "inverse_dynamics": lambda m, q, qd, qdd: jaxmb.inverse_dynamics(m, q, qd, qdd),
        "joint_reactions": lambda m, q, qd, qdd: jaxmb.joint_reactions(m, q, qd, qdd),
        "joint_reactions(segment frame)": lambda m, q, qd, qdd: jaxmb.joint_reactions(m, q, qd, qdd, frame="segment"),
        "forward_dynamics": lambda m, q, qd, qdd: jaxmb.forward_dynamics(m, q, qd, qdd),
        "inverse_dynamics (one sample)": lambda m, q, qd, qdd: jaxmb.inverse_dynamics(m, q[0], qd[0], qdd[0]),
        "joint_reactions (one sample)": lambda m, q, qd, qdd: jaxmb.joint_reactions(m, q[0], qd[0], qdd[0]),
    }
    rows = []
    for name in ("human7", "chain20", "chain3"):
        model = every[name]
        args = (model,) + tuple(jax.ShapeDtypeStruct((B, model.dof), jnp.float64) for _ in range(3))
        for fname, fn in fns.items():
            if name != "human7" and "one sample" in fname:
                continue
            reps = []
            for _ in range(1 if quick else 3):
                jax.clear_caches()
                t0 = time.perf_counter()
                lowered = jax.jit(fn).lower(*args)
                t1 = time.perf_counter()
                lowered.compile()
                t2 = time.perf_counter()
                reps.append((t1 - t0, t2 - t1))
            trace, comp = np.median([r[0] for r in reps]), np.median([r[1] for r in reps])
            rows.append({"model": name, "function": fname, "batch": B, "trace_lower_s": float(trace),
                         "compile_s": float(comp), "total_s": float(trace + comp), "load": common.load()})  # fmt: skip
            log(f"CT {name:7s} {fname:38s} trace+lower {trace:6.3f} s  compile {comp:6.3f} s")
    return rows


def latency(quick: bool = False, log=print) -> list:
    import jax

    import jaxmb
    common.enable_x64()
    every = dict(common.models())
    rows = []
    core = jax.jit(jaxmb.inverse_dynamics)
    for name in ("chain3", "human7"):
        model = every[name]
        q, qd, qdd = (x[0] for x in common.states(model, 1, seed=3))
        jq = tuple(jax.device_put(x) for x in (q, qd, qdd))
        jb1 = tuple(jax.device_put(x[None]) for x in (q, qd, qdd))
        rel = [to_relative(model, x[None]) for x in (q, qd, qdd)]
        mj, pb = MujocoBaseline(model), optional(PinocchioBaseline, model, log=log)
        d, mjm = mj.data, mj.mj

        def mj_one():
            d.qpos[:] = rel[0][0]
            d.qvel[:] = rel[1][0]
            d.qacc[:] = rel[2][0]
            mj.mujoco.mj_inverse(mjm, d)
            return d.qfrc_inverse

        cases = {
            "jaxmb inverse_dynamics (jit, one sample)": lambda: core(model, *jq).block_until_ready(),
            "jaxmb inverse_dynamics (direct, one sample)": lambda: jaxmb.inverse_dynamics(model, *jq).block_until_ready(),
            "jaxmb inverse_dynamics (direct, B=1)": lambda: jaxmb.inverse_dynamics(model, *jb1).block_until_ready(),
            "mujoco mj_inverse": mj_one,
            "numpy recursion (B=1)": lambda: numpy_rnea(model, q[:, None], qd[:, None], qdd[:, None]),
        }
        if pb is not None:
            cases["pinocchio rnea"] = lambda: pb.pin.rnea(pb.pm, pb.data, rel[0][0], rel[1][0], rel[2][0])
        if name == "chain3":
            fn, _ = sympy_chain(model)
            cases["sympy lambdified"] = lambda: fn(q[:, None], qd[:, None], qdd[:, None])
        t = common.alternate(cases, 5 if quick else 15, inner=200, warmup=50)
        for k, v in t.items():
            rows.append({"model": name, "what": k, "median_us": v["median"] * 1e6, "min_us": v["min"] * 1e6,
                         "load": common.load()})  # fmt: skip
            log(f"LT {name:7s} {k:42s} {v['median'] * 1e6:9.2f} us")
    return rows


def roofline(quick: bool = False, log=print) -> dict:
    """Batched inverse dynamics against the measured memory bandwidth of the device.

    The bandwidth is measured on the same device in the same run: the best of a
    STREAM-like copy-scale (``3.0 * b``: one read, one write) and triad (``b + 3.0 *
    c``: two reads, one write) over 256 MiB arrays. Inverse dynamics must read q, qd
    and qdd and write tau, 4 dof B values, so its floor is that traffic at that
    bandwidth; the fraction is floor / measured time (1 = memory bound at the
    measured peak; lower means compute or overheads dominate).
    """
    import jax
    import jax.numpy as jnp

    import jaxmb

    common.enable_x64()
    backend = jax.default_backend()
    out = {"device": str(jax.devices()[0].device_kind), "backend": backend, "bandwidth": [], "inverse_dynamics": []}
    reps = 5 if quick else 15
    for dtype in (jnp.float32, jnp.float64):
        itemsize = jnp.dtype(dtype).itemsize
        n = (256 * 2**20) // itemsize
        arrays = (jnp.arange(n, dtype=dtype), jnp.ones(n, dtype))
        scale = jax.jit(lambda b: 3.0 * b).lower(arrays[0]).compile()
        triad = jax.jit(lambda b, c: b + 3.0 * c).lower(*arrays).compile()
        t = common.alternate(
            {"scale": lambda a=arrays: common.block(scale(a[0])), "triad": lambda a=arrays: common.block(triad(*a))}, reps
        )
        gbs = {"scale": 2 * n * itemsize / t["scale"]["median"] / 1e9, "triad": 3 * n * itemsize / t["triad"]["median"] / 1e9}
        best = max(gbs.values())
        out["bandwidth"].append({"dtype": jnp.dtype(dtype).name, "GB_s": gbs, "best_GB_s": best})
        log(f"BW {jnp.dtype(dtype).name}: scale {gbs['scale']:.1f} GB/s, triad {gbs['triad']:.1f} GB/s")
        every = dict(common.models())
        configs = [("chain3", 10**6), ("human7", 10**6), ("chain20", 10**5)]
        if backend != "cpu":
            configs.append(("chain3", 10**7))
        for name, B in configs if not quick else [("chain3", 10**5)]:
            model = every[name].astype(dtype)
            xs = tuple(jax.device_put(x) for x in common.states(model, B, seed=5, dtype=np.dtype(jnp.dtype(dtype).name)))
            f = jax.jit(lambda m, q, qd, qdd: jaxmb.inverse_dynamics(m, q, qd, qdd))
            cf = f.lower(model, *xs).compile()
            r, inner = common.repeats_for(B, quick)
            t = common.alternate({"jaxmb": lambda: common.block(cf(model, *xs))}, r, inner)["jaxmb"]
            traffic = 4 * model.dof * B * itemsize
            floor = traffic / (best * 1e9)
            row = {"model": name, "batch": B, "dtype": jnp.dtype(dtype).name, "ms": t["median"] * 1e3,
                   "bytes": traffic, "GB_s": traffic / t["median"] / 1e9, "floor_ms": floor * 1e3,
                   "fraction": floor / t["median"], "load": common.load()}  # fmt: skip
            out["inverse_dynamics"].append(row)
            log(f"RF {name:7s} B={B:>8d} {row['dtype']}: {row['ms']:8.2f} ms, {row['GB_s']:6.1f} GB/s, "
                f"{row['fraction'] * 100:5.1f}% of the measured bandwidth")  # fmt: skip
    return out


def memory(quick: bool = False, log=print) -> dict:
    """Peak memory of one batched inverse dynamics call, 3-segment chain, float64.

    JAX: XLA's account of the compiled call (its arguments, outputs and temporary
    buffers: everything it allocates); NumPy: ``tracemalloc``'s peak of the arrays
    allocated during the call (NumPy reports its allocations to it), plus the inputs.
    """
    import tracemalloc

    import jax
    import jax.numpy as jnp

    import jaxmb
    common.enable_x64()
    B = 10**5 if quick else 10**6
    model = common.chain_model(3)
    first = tuple(jax.ShapeDtypeStruct((B, model.dof), jnp.float64) for _ in range(3))
    out = {"model": "chain3", "batch": B, "dtype": "float64"}
    cases = (
        ("jaxmb", lambda m, *x: jaxmb.inverse_dynamics(m, *x), first),
        ("jaxmb matrix kernel", lambda m, *x: jaxmb.inverse_dynamics(m, *x, kernel="matrix"), first),
        ("jit_vmap", jax.vmap(jaxmb.inverse_dynamics, in_axes=(None, 0, 0, 0)), first),
    )
    for label, fn, spec in cases:
        ma = jax.jit(fn).lower(model, *spec).compile().memory_analysis()
        args, outs, temp = ma.argument_size_in_bytes, ma.output_size_in_bytes, ma.temp_size_in_bytes
        out[label] = {
            "inputs_mib": args / 2**20, "outputs_mib": outs / 2**20, "temporaries_mib": temp / 2**20,
            "peak_over_inputs_outputs": (args + outs + temp) / (args + outs), "source": "XLA memory_analysis",
        }  # fmt: skip
        log(f"MEM {label:18s} inputs {args / 2**20:7.1f} MiB  outputs {outs / 2**20:6.1f} MiB  "
            f"temporaries {temp / 2**20:8.1f} MiB  peak/(in+out) {out[label]['peak_over_inputs_outputs']:.2f}")  # fmt: skip
    q, qd, qdd = (np.ascontiguousarray(x.T) for x in common.states(model, B))  # NumPy's (dof, B)
    tracemalloc.start()
    tracemalloc.reset_peak()
    tau = numpy_rnea(model, q, qd, qdd)[0]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ins = q.nbytes * 3
    out["numpy"] = {
        "inputs_mib": ins / 2**20, "outputs_mib": tau.nbytes / 2**20, "temporaries_mib": (peak - tau.nbytes) / 2**20,
        "peak_over_inputs_outputs": (ins + peak) / (ins + tau.nbytes), "source": "tracemalloc",
    }  # fmt: skip
    log(f"MEM numpy              peak during the call {peak / 2**20:8.1f} MiB  "
        f"peak/(in+out) {out['numpy']['peak_over_inputs_outputs']:.2f}")  # fmt: skip
    return out


if __name__ == "__main__":
    common.check_args(sys.argv[1:], __doc__, flags=("--quick",))
    quick = "--quick" in sys.argv
    compile_times(quick)
    latency(quick)
    roofline(quick)
    memory(quick)
