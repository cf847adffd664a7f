"""Run every benchmark, record ``results.json``, refresh README.md's tables and the plot.

Usage::

    python -m benchmarks            # the full run (about 10 minutes on 2 cores)
    python -m benchmarks --quick    # smaller batches, fewer rounds: a smoke test
    python -m benchmarks --no-wait  # do not wait for the load average to fall

The results JSON names the machine, the library versions and the load average; the
README's tables and the plot are regenerated from it (``python -m benchmarks.report``
alone redoes only that). No GPU is needed; on a machine with one, JAX uses it.
"""

from __future__ import annotations

import sys
import time

from . import bench_inverse, bench_more, bench_system, common, report


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
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
        ("compile", lambda: bench_system.compile_times(quick, log)),
        ("latency", lambda: bench_system.latency(quick, log)),
        ("roofline", lambda: bench_system.roofline(quick, log)),
        ("memory", lambda: bench_system.memory(quick, log)),
    )
    for key, fn in sections:
        t = time.time()
        res[key] = fn()
        res.setdefault("section_seconds", {})[key] = round(time.time() - t, 1)
        res["run_seconds"] = time.time() - t0
        res["load_end"] = common.load()
        common.save(res)  # after every section, so that an interrupted run keeps its results
    res["targets"] = report.targets(res)
    common.save(res)
    report.plot(res)
    report.write_readme(res)
    print(f"done in {time.time() - t0:.0f} s; results in {common.RESULTS}")
    for t in res["targets"]:
        print(("MET  " if t["met"] else "MISS ") + t["target"], t["measured"])


if __name__ == "__main__":
    main()
