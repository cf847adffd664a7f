"""Optimal reaching: ``jaxmb.optimize`` against SciPy's L-BFGS-B with finite differences.

The problem: the notes' two-link arm (``jaxmb.two_link_arm``, 1.70 m, 70 kg) in the
horizontal plane, minimum torque change (int |d tau / dt|^2 dt) over T = 0.5 s, 100
nodes, 10 correction functions per joint (20 unknowns), between joint postures
(the inverse kinematics of the hand targets is done once beforehand and not timed).

- ``single``: one lateral reach in front of the body. Compilation is timed apart
  (``lower(...).compile()`` of the solver) from the run of the compiled solver, and
  the first and later calls of the public ``jaxmb.optimize`` are timed too.
  Targets: converged, under 1 s after compilation; compilation under 5 s.
- ``batch``: 1,000 reaches from one start to targets spread over the workspace in one
  ``optimize`` call (``lax.map`` over the solver, the default ``batching``; L-BFGS
  preconditioned by the mass matrix, ``precondition=True``). Target: under 60 s.
- ``batch_scipy_accuracy``: the same 1,000 with the tolerances loosened to gtol =
  1e-5, ftol = 1e-9, which stop within ~1e-5 of the optimum as SciPy's defaults do.
- ``scipy``: the same problems as a NumPy user would solve them:
  ``scipy.optimize.minimize(method="L-BFGS-B")`` with its default two-point
  finite-difference gradient, on the same parametrisation (``jaxmb.optimal.
  basis_matrices``: same basis, same Gauss-Legendre quadrature, same normalisation by
  the initial cost) with the torque rate of the notes' closed-form two-link equations
  (M, C differentiated by hand) in NumPy; SciPy's default tolerances, at most 300
  iterations. Timed on the first ``n_scipy`` of the 1,000 problems, per problem.
  Target: jaxmb at least 20x faster per problem, in the same run. The final costs of
  both are compared (the speed-up means something only if SciPy gets as low).

Run: ``python -m benchmarks.bench_reaching [--quick]`` (float64; writes
``benchmarks/results_reaching.json`` and prints a table).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from . import common

RESULTS = common.HERE / "results_reaching.json"
DURATION, NODES, BASIS = 0.5, 100, 10
START = np.array([-0.25, 0.40])  # m, shoulder at the origin (x right, y forward)
END = np.array([0.25, 0.40])


def _arm_params(model):
    m1, m2 = (float(x) for x in model.mass)
    l1 = float(model.length[0])
    d1, d2 = (float(x) for x in np.asarray(model.com)[:, 0])
    i1, i2 = (float(x) for x in model.inertia)
    return m1, m2, l1, d1, d2, i1, i2


class NumpyProblem:
    """The minimum-torque-change objective of one reach, in NumPy (closed form)."""

    def __init__(self, model, q_start, q_end, duration, nodes, basis):
        from jaxmb.optimal import basis_matrices

        self.p = _arm_params(model)
        s, w, self.base, self.psi = basis_matrices(nodes, basis, "gauss")
        self.w = w * duration
        self.T = duration
        self.q0, self.dq = np.asarray(q_start, float), np.asarray(q_end, float) - np.asarray(q_start, float)
        self.shape = (basis, 2)
        self.scale = 1.0
        self.scale = abs(self.raw(np.zeros(basis * 2))) or 1.0

    def raw(self, a):
        a = a.reshape(self.shape)
        d = [(self.base[:, k, None] * self.dq + self.psi[k] @ a) / self.T**k for k in range(4)]
        d[0] = d[0] + self.q0
        rate = tau_rate(self.p, *d)
        return float(np.sum(self.w[:, None] * rate**2))

    def __call__(self, a):
        return self.raw(a) / self.scale


def tau_rate(p, q, qd, qdd, qddd):
    """d tau / dt for tau = M(q2) qdd + C(q2, qd), the notes' two-link arm without gravity."""
    m1, m2, l1, d1, d2, i1, i2 = p
    a = i1 + i2 + m1 * d1**2 + m2 * (l1**2 + d2**2)
    b = m2 * l1 * d2
    c = i2 + m2 * d2**2
    q2, w1, w2 = q[:, 1], qd[:, 0], qd[:, 1]
    a1, a2, j1, j2 = qdd[:, 0], qdd[:, 1], qddd[:, 0], qddd[:, 1]
    s, co = np.sin(q2), np.cos(q2)
    t1 = (-2 * b * s * w2 * a1 + (a + 2 * b * co) * j1 - b * s * w2 * a2 + (c + b * co) * j2
          - b * co * w2 * (2 * w1 * w2 + w2**2) - b * s * (2 * a1 * w2 + 2 * w1 * a2 + 2 * w2 * a2))
    t2 = -b * s * w2 * a1 + (c + b * co) * j1 + c * j2 + b * co * w2 * w1**2 + 2 * b * s * w1 * a1
    return np.stack([t1, t2], -1)


def targets(n, seed=0):
    """n reachable targets spread over the front of the body (and away from the start)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        t = rng.uniform([-0.55, -0.10], [0.55, 0.65])
        r = np.linalg.norm(t)
        if 0.25 < r < 0.68 and np.linalg.norm(t - START) > 0.1:
            out.append(t)
    return np.array(out)


def run(quick: bool = False, log=print) -> dict:
    import jax
    import jax.numpy as jnp
    import scipy
    import scipy.optimize

    import jaxmb
    from jaxmb import optimal
    from jaxmb.optimal._movement import _NAMES, _Config
    from jaxmb.optimal._solve import _solve_single

    common.enable_x64()
    model = jaxmb.two_link_arm(gravity=0.0)
    n_batch = 200 if quick else 1000
    n_scipy = 5 if quick else 20
    # postures (the inverse kinematics is not what is timed)
    q_start = np.asarray(jaxmb.inverse_kinematics(model, START))
    tg = targets(n_batch)
    q_ends = np.asarray(jaxmb.inverse_kinematics(model, tg, q_start))
    q_end = np.asarray(jaxmb.inverse_kinematics(model, END, q_start))
    out = {"problem": dict(model="two_link_arm(1.70 m, 70 kg, g = 0)", cost="torque_change", duration=DURATION,
                           nodes=NODES, basis=BASIS, unknowns=2 * BASIS, start=START.tolist(), end=END.tolist(),
                           n_batch=n_batch, n_scipy=n_scipy)}

    # ---- the NumPy objective is the same function as jaxmb's
    rng = np.random.default_rng(1)
    a = rng.normal(scale=0.3, size=(BASIS, 2))
    npp = NumpyProblem(model, q_start, q_end, DURATION, NODES, BASIS)
    m = optimal.movement(model, q_start, q_end, DURATION, a, nodes=NODES, quadrature="gauss")
    rel = abs(npp.raw(a.ravel()) - float(optimal.COSTS["torque_change"](m))) / npp.raw(a.ravel())
    out["numpy_objective_relative_difference"] = rel
    log(f"NumPy objective vs jaxmb's at random coefficients: relative difference {rel:.1e}")

    # ---- one reach: compilation, then the compiled solver
    # as optimize(cost="torque_change") configures it (max_iter 1000 since the recorded run's
    # 300: these reaches converge in tens of iterations; the learning rate is Adam's only)
    cfg = _Config(None, NODES, BASIS, "lbfgs", 1000, 1e-7, 1e-13, 20, 0.1, 30, 1, None, "gauss",
                          ("torque_change",), True, 3)
    w = jnp.asarray([0.0, 0.0, 0.0, 1.0])  # the built-in costs, in sorted order: torque_change only
    assert _NAMES[3] == "torque_change"
    args = (model.astype(jnp.float64), jnp.asarray(q_start), jnp.asarray(q_end), jnp.asarray(DURATION),
            jnp.zeros((BASIS, 2)), w)
    t0 = time.perf_counter()
    lowered = _solve_single.lower(*args, cfg=cfg)
    t_trace = time.perf_counter() - t0
    t0 = time.perf_counter()
    compiled = lowered.compile()
    t_compile = time.perf_counter() - t0
    res = compiled(*args)
    rounds = 3 if quick else 7
    t_single = common.alternate({"solver": lambda: jax.block_until_ready(compiled(*args))}, rounds)["solver"]
    call = lambda: optimize_call(jaxmb, model, q_start, q_end)  # noqa: E731
    first = optimize_call(jaxmb, model, q_start, q_end, nodes=NODES + 1)  # a fresh configuration: compiles
    t_public = common.alternate({"optimize": call}, rounds)["optimize"]
    out["single"] = dict(trace_s=t_trace, compile_s=t_compile, trace_plus_compile_s=t_trace + t_compile,
                         run_s=t_single, optimize_first_call_s=first[1], optimize_call_s=t_public,
                         converged=bool(res.converged), iterations=int(res.iterations), cost=float(res.cost))
    log(f"single reach: trace {t_trace:.2f} s + compile {t_compile:.2f} s; run {1e3 * t_single['median']:.1f} ms "
        f"({int(res.iterations)} iterations, converged={bool(res.converged)}); jaxmb.optimize first call "
        f"{first[1]:.2f} s, later calls {1e3 * t_public['median']:.1f} ms")

    # ---- 1,000 reaches in one call
    t0 = time.perf_counter()
    rb = jaxmb.optimize(model, q_start, q_ends, DURATION, target="joint", cost="torque_change",
                        nodes=NODES, basis=BASIS)
    jax.block_until_ready(rb)
    t_batch_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    rb = jaxmb.optimize(model, q_start, q_ends, DURATION, target="joint", cost="torque_change",
                        nodes=NODES, basis=BASIS)
    jax.block_until_ready(rb)
    t_batch = time.perf_counter() - t0
    conv = int(np.sum(rb.converged))
    out["batch"] = dict(n=n_batch, first_call_s=t_batch_first, run_s=t_batch, per_problem_s=t_batch / n_batch,
                        converged=conv, max_iterations=int(np.max(rb.iterations)),
                        median_iterations=float(np.median(rb.iterations)))
    log(f"{n_batch} reaches in one call: {t_batch:.2f} s ({1e3 * t_batch / n_batch:.2f} ms per reach; first call "
        f"with compilation {t_batch_first:.1f} s); {conv}/{n_batch} converged, iterations median "
        f"{np.median(rb.iterations):.0f}, max {int(np.max(rb.iterations))}")

    # ---- the same at SciPy's accuracy (its default tolerances stop within ~1e-5 of the optimum)
    loose = dict(target="joint", cost="torque_change", nodes=NODES, basis=BASIS,
                 solver=jaxmb.optimal.LBFGS(gtol=1e-5, ftol=1e-9))
    jax.block_until_ready(jaxmb.optimize(model, q_start, q_ends, DURATION, **loose))
    t0 = time.perf_counter()
    rl = jaxmb.optimize(model, q_start, q_ends, DURATION, **loose)
    jax.block_until_ready(rl)
    t_loose = time.perf_counter() - t0
    loose_ratio = np.asarray(rl.cost) / np.asarray(rb.cost)
    out["batch_scipy_accuracy"] = dict(gtol=1e-5, ftol=1e-9, run_s=t_loose, per_problem_s=t_loose / n_batch,
                                       median_iterations=float(np.median(rl.iterations)),
                                       final_cost_over_tight_max=float(loose_ratio.max()))
    log(f"{n_batch} reaches at gtol 1e-5, ftol 1e-9: {t_loose:.2f} s ({1e3 * t_loose / n_batch:.2f} ms per reach), "
        f"final cost / tight solution's: max {loose_ratio.max():.7f}")

    # ---- SciPy L-BFGS-B with finite differences, same problems
    times, ratios, iters, ok = [], [], [], []
    for k in range(n_scipy):
        prob = NumpyProblem(model, q_start, q_ends[k], DURATION, NODES, BASIS)
        t0 = time.perf_counter()
        sol = scipy.optimize.minimize(prob, np.zeros(2 * BASIS), method="L-BFGS-B", options=dict(maxiter=300))
        times.append(time.perf_counter() - t0)
        ratios.append(prob.raw(sol.x) / float(rb.cost[k]))
        iters.append(int(sol.nit))
        ok.append(bool(sol.success))
    t_scipy = float(np.median(times))
    out["scipy"] = dict(version=scipy.__version__, n=n_scipy, per_problem_median_s=t_scipy,
                        per_problem_mean_s=float(np.mean(times)), success=int(np.sum(ok)),
                        median_iterations=float(np.median(iters)),
                        final_cost_over_jaxmb_median=float(np.median(ratios)),
                        final_cost_over_jaxmb_max=float(np.max(ratios)))
    speedup = float(np.mean(times)) / (t_batch / n_batch)
    out["speedup_per_problem"] = speedup
    out["speedup_per_problem_scipy_accuracy"] = float(np.mean(times)) / (t_loose / n_batch)
    log(f"scipy L-BFGS-B + finite differences: {1e3 * t_scipy:.0f} ms per reach (median of {n_scipy}; "
        f"{int(np.sum(ok))} successes, {np.median(iters):.0f} iterations), final cost / jaxmb's: median "
        f"{np.median(ratios):.6f}, max {np.max(ratios):.6f}")
    targets_met = {
        "single_converged": bool(res.converged),
        "single_run_under_1s": t_single["median"] < 1.0,
        "single_compile_under_5s": t_trace + t_compile < 5.0,
        "batch_under_60s": t_batch < 60.0,
        "speedup_at_least_20x": speedup >= 20.0,
        "speedup_at_least_20x_at_scipy_accuracy": out["speedup_per_problem_scipy_accuracy"] >= 20.0,
    }
    out["targets"] = targets_met
    return out


def optimize_call(jaxmb, model, q_start, q_end, nodes=NODES):
    import jax

    t0 = time.perf_counter()
    r = jaxmb.optimize(model, q_start, q_end, DURATION, target="joint", cost="torque_change", nodes=nodes, basis=BASIS)
    jax.block_until_ready(r)
    return r, time.perf_counter() - t0


def table(out: dict) -> str:
    s, b, sp = out["single"], out["batch"], out["scipy"]
    rows = [
        ("one reach: trace + compile", f"{s['trace_plus_compile_s']:.2f} s", "< 5 s"),
        ("one reach: compiled run", f"{1e3 * s['run_s']['median']:.1f} ms ({s['iterations']} it.)", "< 1 s"),
        ("one reach: jaxmb.optimize, later calls", f"{1e3 * s['optimize_call_s']['median']:.1f} ms", ""),
        (f"{b['n']} reaches, one call", f"{b['run_s']:.2f} s", "< 60 s"),
        (f"{b['n']} reaches, first call (with compile)", f"{b['first_call_s']:.1f} s", ""),
        ("jaxmb per reach (batched)", f"{1e3 * b['per_problem_s']:.2f} ms", ""),
        ("scipy L-BFGS-B + FD per reach (mean)", f"{1e3 * sp['per_problem_mean_s']:.0f} ms", ""),
        ("speed-up per reach", f"{out['speedup_per_problem']:.0f}x", ">= 20x"),
        ("jaxmb per reach at scipy's accuracy", f"{1e3 * out['batch_scipy_accuracy']['per_problem_s']:.2f} ms", ""),
        ("speed-up per reach at scipy's accuracy", f"{out['speedup_per_problem_scipy_accuracy']:.0f}x", ">= 20x"),
        ("scipy final cost / jaxmb's (median)", f"{sp['final_cost_over_jaxmb_median']:.6f}", ""),
    ]
    w = max(len(r[0]) for r in rows) + 2
    lines = [f"{'':{w}}{'measured':>24}{'target':>10}"]
    lines += [f"{a:{w}}{m:>24}{t:>10}" for a, m, t in rows]
    lines.append("targets met: " + ", ".join(f"{k}={v}" for k, v in out["targets"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    common.check_args(argv, __doc__, flags=("--quick",))
    quick = "--quick" in argv
    env = common.environment()
    env["load_at_start"] = common.load()
    t0 = time.perf_counter()
    out = run(quick=quick)
    env["load_at_end"] = common.load()
    out["environment"] = env
    out["wall_s"] = time.perf_counter() - t0
    out["quick"] = quick
    print(table(out))
    print(f"(wall {out['wall_s']:.0f} s; load {env['load_at_start']} -> {env['load_at_end']})")
    if not quick:
        common.save(out, RESULTS)
        print(f"results: {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
