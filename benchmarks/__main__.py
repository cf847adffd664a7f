"""Run every benchmark, record ``results.json``, refresh README.md's tables and the plot.

Usage::

    python -m benchmarks            # the full run (about 16 minutes on 2 cores)
    python -m benchmarks --quick    # smaller batches, fewer rounds: a smoke test
    python -m benchmarks --no-wait  # do not wait for the load average to fall
    python -m benchmarks --quick --no-wait --only simulation,gradient   # some sections
    python -m benchmarks --only gradient_compile --merge   # rerun sections into results.json
    python -m benchmarks --check    # rerun each recorded headline figure, small (a few
                                    # minutes): prints those more than 20 % below their
                                    # record (benchmarks/check.py; --check -h for its options)

Sections: inverse_dynamics, forward_dynamics, reactions, gradient, gradient_compile,
simulation, compile, latency, roofline, memory. A quick run writes
``results_quick.json`` and leaves ``results.json``, README.md and the plot alone.

The results JSON names the machine, the library versions and the load average; the
README's tables and the plot are regenerated from it (``python -m benchmarks.report``
alone redoes only that). No GPU is needed; on a machine with one, JAX uses it.
"""

from __future__ import annotations

import json
import sys
import time

from . import bench_inverse, bench_more, bench_sim, bench_system, common, report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if "--check" in argv:
        from . import check

        return check.main([a for a in argv if a != "--check"])
    common.check_args(argv, __doc__, flags=("--quick", "--no-wait", "--merge"), options=("--only",))
    quick = "--quick" in argv
    common.enable_x64()
    quiet = {"skipped": True, "load_at_start": common.load()} if "--no-wait" in argv else common.wait_for_quiet()
    print(f"load average {quiet['load_at_start']} (waited {quiet.get('waited_s', 0)} s)", flush=True)
    t0 = time.time()
    res = {"environment": common.environment(), "quiet": quiet, "quick": quick}

    def log(msg):
        print(msg, flush=True)

    sections = (
        ("inverse_dynamics", lambda: bench_inverse.run(quick, log)),
        ("forward_dynamics", lambda: bench_more.forward(quick, log)),
        ("reactions", lambda: bench_more.reactions(quick, log)),
        ("gradient", lambda: bench_more.gradient(quick, log)),
        ("gradient_compile", lambda: bench_more.gradient_compile(quick, log)),
        ("simulation", lambda: bench_sim.run(quick, log)),
        ("compile", lambda: bench_system.compile_times(quick, log)),
        ("latency", lambda: bench_system.latency(quick, log)),
        ("roofline", lambda: bench_system.roofline(quick, log)),
        ("memory", lambda: bench_system.memory(quick, log)),
    )
    only = next((a.split("=", 1)[1] if "=" in a else argv[i + 1] for i, a in enumerate(argv) if a.startswith("--only")), None)
    if only:
        sections = tuple(s for s in sections if s[0] in only.split(","))
    if quick:
        common.RESULTS = common.HERE / "results_quick.json"
    merge = "--merge" in argv and only and not quick
    if merge:
        # rerun some sections into the recorded results: the others are kept, and
        # the rerun is listed (what, when, on which commit and machine) under "reruns"
        old = json.loads(common.RESULTS.read_text())
        reruns = old.get("reruns", [])
        reruns = [reruns] if isinstance(reruns, dict) else reruns
        reruns.append({"sections": [k for k, _ in sections], "load_at_start": quiet["load_at_start"],
                       "environment": res["environment"]})  # fmt: skip
        res = {**old, "reruns": reruns}
    for key, fn in sections:
        t = time.time()
        res[key] = fn()
        res.setdefault("section_seconds", {})[key] = round(time.time() - t, 1)
        if not merge:
            res["run_seconds"] = time.time() - t0
            res["load_end"] = common.load()
        common.save(res, common.RESULTS)  # after every section, so that an interrupted run keeps its results
    res["targets"] = report.targets(res)
    common.save(res, common.RESULTS)
    if not quick and (merge or not only):
        report.plot(res)
        report.write_readme(res)
    print(f"done in {time.time() - t0:.0f} s; results in {common.RESULTS}")
    for t in res["targets"]:
        print(("MET  " if t["met"] else "MISS ") + t["target"], t["measured"])


if __name__ == "__main__":
    raise SystemExit(main())
