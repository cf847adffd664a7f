"""Large batches with and without glibc's transparent huge pages.

    python -m benchmarks.bench_hugepages [--rounds 3] [--quick]

XLA:CPU allocates every output buffer afresh on each call, and JAX copies NumPy inputs
that are not 64-byte aligned; glibc serves an allocation above its mmap threshold (at
most 32 MiB) with a fresh ``mmap``, so every 4 KiB page of it costs a minor page fault
when first written. ``GLIBC_TUNABLES=glibc.malloc.hugetlb=1`` (glibc 2.35 or later,
Linux with transparent huge pages in ``madvise`` or ``always`` mode) makes malloc ask
for 2 MiB pages instead. It is read when a process starts, so this script runs child
processes, alternately without and with it, ``--rounds`` of each; every child times
direct calls (no ``jax.jit`` around them, NumPy inputs, what a user types) of
``jaxmb.inverse_dynamics`` and ``jaxmb.forward_dynamics`` on batches whose arrays
exceed 32 MiB, with the system CPU time and minor page faults of one call
(``getrusage``). Writes ``benchmarks/results_hugepages.json``; the gait pipeline's
own comparison is ``python -m benchmarks.bench_gait --hugepages``.
"""

from __future__ import annotations

import argparse
import statistics
import time

from . import common

HUGEPAGES = common.HUGEPAGES
CASES = (("chain3", 10**7), ("human7", 2 * 10**6))
QUICK_CASES = (("chain3", 5 * 10**6),)


def child(quick: bool) -> list:
    """Median seconds, system time and faults of one call, for each case (this process)."""
    common.enable_x64()
    import jaxmb

    every = dict(common.models())
    rows = []
    for name, B in QUICK_CASES if quick else CASES:
        m = every[name]
        q, qd, qdd = common.states(m, B, seed=1)
        tau = common.block(jaxmb.inverse_dynamics(m, q, qd, qdd))
        for fn, args in (("inverse_dynamics", (q, qd, qdd)), ("forward_dynamics", (q, qd, tau))):
            f = getattr(jaxmb, fn)
            common.block(f(m, *args))  # compiles
            times, use = [], []
            for _ in range(3 if quick else 5):
                t0 = time.perf_counter()
                use.append(common.rusage(lambda: common.block(f(m, *args))))
                times.append(time.perf_counter() - t0)
            rows.append({"model": name, "batch": B, "function": fn, "median_s": statistics.median(times),
                         "system_s": statistics.median(u["system_s"] for u in use),
                         "minor_faults": statistics.median(u["minor_faults"] for u in use)})  # fmt: skip
    return rows


def run(rounds: int = 3, quick: bool = False, log=print) -> dict:
    def show(name, rows):
        log(f"  {name}: " + "; ".join(
            f"{x['function']} {x['model']} B={x['batch']:.0e} {x['median_s'] * 1e3:.0f} ms "
            f"(system {x['system_s']:.2f} s, {x['minor_faults']:.0f} faults)" for x in rows))  # fmt: skip

    runs = common.hugepage_children("benchmarks.bench_hugepages", ["--child"] + (["--quick"] if quick else []),
                                    rounds, log, show)  # fmt: skip
    table = []
    for i, row in enumerate(runs["default"][0]):
        entry = {k: row[k] for k in ("model", "batch", "function")}
        for name in runs:
            for key in ("median_s", "system_s", "minor_faults"):
                entry[f"{name}_{key}"] = statistics.median(rr[i][key] for rr in runs[name])
            entry[f"{name}_per_round_s"] = [rr[i]["median_s"] for rr in runs[name]]
        entry["speedup"] = entry["default_median_s"] / entry["hugepages_median_s"]
        table.append(entry)
        log(f"{entry['function']} {entry['model']} B={entry['batch']:.0e}: default {entry['default_median_s'] * 1e3:.0f} ms, "
            f"huge pages {entry['hugepages_median_s'] * 1e3:.0f} ms ({entry['speedup']:.2f}x); faults per call "
            f"{entry['default_minor_faults']:.0f} -> {entry['hugepages_minor_faults']:.0f}")  # fmt: skip
    return {"environment": common.environment(), "glibc_tunables": HUGEPAGES, "rounds": rounds, "cases": table}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="child processes per configuration")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", help=argparse.SUPPRESS)  # a child's output file
    a = p.parse_args(argv)
    if a.child:
        common.save(child(a.quick), common.Path(a.json))
        return
    res = run(a.rounds, a.quick)
    path = common.HERE / ("results_hugepages_quick.json" if a.quick else "results_hugepages.json")
    common.save(res, path)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
