"""Benchmark of jaxmb.identify (issue 11): the running leg's consistent fit and the
Monte Carlo moment bands, float64, compilation timed apart from the runs.

Targets (2-core CPU, float64):
- the consistent fit of the three-segment leg to all 6,001 frames (true moments from
  heel strike, force magnitudes throughout, start 30 % off): converged in < 5 s after
  compilation;
- Monte Carlo: 1,000 parameter draws x 6,001 frames of joint moments in < 5 s.

Also timed: the regressors (one engine pass with 12 forward-mode tangents), the
sensitivity Jacobian, and, for comparison with the regressor's matrix product, the
same 6 million joint-moment evaluations through the engine (vmap over 1,000 stacked
models). Writes benchmarks/results_identify.json. Run: python -m benchmarks.bench_identify
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import common

OUT = Path(__file__).resolve().parent / "results_identify.json"


def main(argv=None) -> int:
    common.check_args(sys.argv[1:] if argv is None else argv, __doc__)
    common.enable_x64()
    import jax
    import jax.numpy as jnp

    import jaxmb
    from jaxmb import identify
    from jaxmb.cli.identify_running import perturbed
    from jaxmb.identify._parameters import _with_physical
    from jaxmb.identify._uncertainty import _draw_physical

    load_before = common.load()
    trial = identify.running_trial()
    true = trial["model"]
    q, qd, qdd = trial["q"], trial["qd"], trial["qdd"]
    T = q.shape[0]
    start = perturbed(true, 0.3, seed=0)
    loads = trial["ground"]  # the force at its point: fit builds the wrenches for the model it fits
    kw = dict(moments=trial["moments"], reactions=trial["force_magnitudes"], loads=loads,
              moment_weights=trial["moment_weights"])  # fmt: skip
    results = {"environment": common.environment(), "frames": T, "load_before": load_before, "cases": {}}
    cases = results["cases"]

    def fit(loss):
        return identify.fit(start, q, qd, qdd, loss=loss, **kw)

    for loss in ("l2", "huber"):
        t0 = time.perf_counter()
        r = fit(loss)
        first = time.perf_counter() - t0
        timing = common.alternate({loss: lambda: fit(loss)}, repeats=5)[loss]
        err = np.abs(r.physical - np.asarray(identify.to_physical(true)))
        cases[f"fit_{loss}"] = dict(first_call_s=first, **timing, converged=r.converged, iterations=r.iterations,
                                    max_abs_error=float(err.max()), target_s=5.0)  # fmt: skip

    # regressors alone (moments and reactions, 6001 frames)
    def regs():
        a = identify.regressor(start, q, qd, qdd, trial["loads"], quantity="joint_moments")
        b = identify.regressor(start, q, qd, qdd, trial["loads"], quantity="joint_reactions")
        return common.block((a, b))

    _, first = common.first_call(regs)
    cases["regressors"] = dict(first_call_s=first, **common.alternate({"r": regs}, repeats=5)["r"])

    # Monte Carlo: 1000 draws x 6001 frames (regressor once, then one matrix product)
    spread = identify.table_prior(true, center=true)

    def mc():
        return identify.monte_carlo(true, q, qd, qdd, trial["loads"], spread=spread, draws=1000, seed=0)

    t0 = time.perf_counter()
    mc()
    first = time.perf_counter() - t0
    cases["monte_carlo_1000x6001"] = dict(first_call_s=first, **common.alternate({"mc": mc}, repeats=5)["mc"],
                                          target_s=5.0)  # fmt: skip

    # the same 6e6 moment evaluations through the engine: vmap over 1000 stacked models
    phys = _draw_physical(true, spread, 1000, 0)[1]
    models = jax.vmap(lambda p: _with_physical(true, p))(jnp.asarray(phys))

    def engine(ms, q, qd, qdd, ld):
        return jax.vmap(lambda m: jaxmb.joint_moments(m, q, qd, qdd, ld, gradient="autodiff"))(ms)

    args = (models, jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd), jnp.asarray(trial["loads"]))
    compiled, ct = common.compile_and_time(engine, *args)
    cases["engine_1000_models_x6001"] = dict(compile_s=ct, **common.alternate(
        {"e": lambda: common.block(compiled(*args))}, repeats=3)["e"])  # fmt: skip

    # sensitivity Jacobian over the trial (T x 3 moments x 3 segments x 4 parameters)
    def sens():
        return common.block(identify.sensitivity(true, q, qd, qdd))

    _, first = common.first_call(sens)
    cases["sensitivity"] = dict(first_call_s=first, **common.alternate({"s": sens}, repeats=5)["s"])

    results["load_after"] = common.load()
    OUT.write_text(json.dumps(results, indent=1, default=float) + "\n")
    print(f"jaxmb.identify, running leg, {T} frames, float64, {results['environment']['machine']['cpu']}, "
          f"load {load_before} -> {results['load_after']}")
    print(f"{'case':28s}{'first call s':>14s}{'median s':>11s}{'min s':>9s}{'target s':>10s}")
    for k, v in cases.items():
        first = v.get("first_call_s", v.get("compile_s", float("nan")))
        tgt = f"{v['target_s']:.1f}" if "target_s" in v else ""
        print(f"{k:28s}{first:14.2f}{v['median']:11.3f}{v['min']:9.3f}{tgt:>10s}")
    for loss in ("l2", "huber"):
        c = cases[f"fit_{loss}"]
        print(f"fit ({loss}): converged {c['converged']}, {c['iterations']} iterations, max |error| "
              f"{c['max_abs_error']:.2e}")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
