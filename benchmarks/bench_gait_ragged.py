"""Trials of unequal lengths through jaxmb.gait.analyze: one call for the batch against
one call per trial, first call (compilation included) and warm, in fresh processes.

    python -m benchmarks.bench_gait_ragged [--trials 16] [--rounds 2]

The trials are van den Bogert's running trial at 1 kHz (601 frames, every tenth
sample), cut to distinct lengths from 400 to 601 frames, each shifted by a few
millimetres, as a lab's trials of one session differ: ``--trials`` of them, filtered
at 50 Hz (``cutoff=50.0``) and, apart, with a cut-off of each trial's own
(``cutoff="auto"``, Winter's residual analysis). Two ways, what a user types:

- ``batch``: ``gait.analyze(**lists_of_trials, ...)``: one compiled computation for
  all lengths and cut-offs (each trial filtered and differentiated within its own
  frames; shapes rounded up to a few sizes, so that another batch reuses it);
- ``per_trial``: ``[gait.analyze(**trial, ...) for trial in trials]``: a compiled
  computation per length (and per cut-off), as a loop over trials costs, and as
  ``analyze`` itself ran trials of unequal lengths before one computation took them
  all (in groups of equal length and cut-off).

Each way runs in a fresh Python process (no persistent compilation cache): the first
analysis of the set (imports excluded, compilation included) and the median of 3
more. The processes alternate between the ways for ``--rounds`` rounds; the figures
are medians. Writes ``benchmarks/results_gait_ragged.json`` with the machine and the
versions.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from . import common

RESULTS = Path(__file__).with_name("results_gait_ragged.json")
WAYS = ("batch", "per_trial")
CUTOFFS = (50.0, "auto")


def make_trials(n: int):
    import numpy as np

    from jaxmb import gait

    d = gait.running_data()
    rng = np.random.default_rng(0)
    lens = np.linspace(400, 601, n).astype(int)
    trials = []
    for k, m in enumerate(lens):
        shift = rng.normal(scale=0.005, size=2)
        t = {key: getattr(d, key)[::10][:m] + shift for key in ("hip", "knee", "ankle", "toe")}
        t["force"] = d.force[::10][:m] * rng.uniform(0.95, 1.05)
        t["cop"] = d.cop[::10][:m] + shift[0]
        trials.append(t)
    return trials, dict(rate=d.rate / 10, segments=d.segments, gravity=9.80665, outputs=("moments", "reactions"))


def child(way: str, n: int, cutoff) -> dict:
    import jax

    from jaxmb import gait

    jax.config.update("jax_enable_x64", True)
    trials, kw = make_trials(n)
    kw["cutoff"] = cutoff

    def once():
        if way == "batch":
            return gait.analyze(**{k: [t[k] for t in trials] for k in trials[0]}, **kw).moments
        return [gait.analyze(**t, **kw).moments for t in trials]

    t0 = time.perf_counter()
    once()
    first = time.perf_counter() - t0
    warm = []
    for _ in range(3):
        t0 = time.perf_counter()
        once()
        warm.append(time.perf_counter() - t0)
    return {"first_s": first, "warm_s": statistics.median(warm)}


def _option(argv, name: str, default: int) -> int:
    for i, a in enumerate(argv):
        if a == name:
            return int(argv[i + 1])
        if a.startswith(name + "="):
            return int(a.split("=", 1)[1])
    return default


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        _, way, n, cutoff = argv
        print(json.dumps(child(way, int(n), cutoff if cutoff == "auto" else float(cutoff))))
        return 0
    common.check_args(argv, __doc__, options=("--trials", "--rounds"))
    n, rounds = _option(argv, "--trials", 16), _option(argv, "--rounds", 2)
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "JAXMB_CACHE_DIR"}
    results = {"environment": common.environment(), "load_before": common.load(), "trials": n, "rounds": rounds,
               "frames": "400 to 601 at 1 kHz, distinct", "cutoffs": {}}  # fmt: skip
    for cutoff in CUTOFFS:
        runs = {w: [] for w in WAYS}
        for r in range(rounds):
            for way in WAYS if r % 2 == 0 else WAYS[::-1]:
                out = subprocess.run([sys.executable, "-m", "benchmarks.bench_gait_ragged", "--child", way, str(n),
                                      str(cutoff)], env=env, check=True, capture_output=True, text=True)  # fmt: skip
                runs[way].append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(f"cutoff {cutoff}, {way}, round {r}: first {runs[way][-1]['first_s']:.2f} s, "
                      f"warm {runs[way][-1]['warm_s']:.3f} s", flush=True)  # fmt: skip
        summary = {w: {k: statistics.median(x[k] for x in runs[w]) for k in ("first_s", "warm_s")} for w in WAYS}
        for w in WAYS:
            summary[w]["runs"] = runs[w]
        summary["first_call_speedup"] = summary["per_trial"]["first_s"] / summary["batch"]["first_s"]
        summary["warm_speedup"] = summary["per_trial"]["warm_s"] / summary["batch"]["warm_s"]
        results["cutoffs"][str(cutoff)] = summary
        print(f"cutoff {cutoff}: first call {summary['batch']['first_s']:.2f} s batch vs "
              f"{summary['per_trial']['first_s']:.2f} s per trial ({summary['first_call_speedup']:.1f}x); warm "
              f"{summary['batch']['warm_s']:.3f} vs {summary['per_trial']['warm_s']:.3f} s", flush=True)  # fmt: skip
    results["load_after"] = common.load()
    common.save(results, RESULTS)
    print(f"results in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
