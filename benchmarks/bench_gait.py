"""A batch of perturbed running trials through jaxmb.gait.analyze, filtering included,
against the NumPy notebook method (SciPy filtfilt and a segment-by-segment
``invdyn2d`` per trial), timed in the same run.

    python -m benchmarks.bench_gait [--trials 1000] [--baseline-trials 40] [--quick]
    python -m benchmarks.bench_gait --hugepages [--rounds 2]
    python -m benchmarks.bench_gait --scaling 500,1000,2000,4000 [--outputs moments,reactions] --no-save

jaxmb is timed twice: the whole result (``analyze``'s default: angles, velocities,
moments, powers, reactions in two frames, base residual, segment angles, force and
centre of pressure, 34 values a frame) and ``outputs=("moments", "reactions")``,
what the notebook's ``invdyn2d`` returns (the joint moments and forces, 9 values a
frame); the NumPy method computes those too.

The 1,000 trials are van den Bogert's running trial (6,001 frames at 10 kHz) with
each trial's marker positions shifted and scaled and its force scaled by a few per
cent (seeded), so that every trial is different. Both methods filter markers and
force at 15 Hz (4th-order zero-phase Butterworth) and differentiate the same way.
The NumPy method runs on ``--baseline-trials`` trials and is scaled to the whole
batch (per-trial work, so linear in the trial count). Writes
``benchmarks/results_gait.json`` with the machine and the versions.

With ``--hugepages`` the same measurement runs in child processes, alternately in
the default environment and with glibc's malloc backing its large allocations by
transparent huge pages (``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``, glibc 2.35 or
later, Linux with transparent huge pages in ``madvise`` or ``always`` mode); each
child times jaxmb and NumPy alternated as above, and the JSON records both
configurations (medians over the children) with each child's page faults and CPU
times. Until issue 39, XLA:CPU allocated the whole batch's outputs afresh each call,
and glibc mapped each one of more than 32 MiB with its own ``mmap``, so that the
pipeline's 1.6 GB of results (34 float64 values a frame) cost one minor page fault
per 4 KiB page (about 0.5 million a call) in the default environment; analyze now
steps through the batch into NumPy arrays allocated once (NumPy asks the kernel for
transparent huge pages for large arrays, ``madvise`` mode: about 30,000 faults),
and since 2026-11-29 into the memory of a dropped result, kept for the next call
(``jaxmb.gait.release_memory``): no fresh pages from the second call of a loop on.

With ``--scaling`` each batch size runs in a fresh process (``--one``): after a first
call that compiles, the median time per trial of three calls (each result dropped
before the next, as a loop over batches does) and the CPU time (user + system) and
page faults a call, the
process's peak memory (``ru_maxrss``) and the sizes of the inputs and of the result,
so that a cost growing faster than the work, or memory growing with the batch beyond
the results, shows (issue 39: time per trial flat from 500 to 4,000 trials, peak
memory the inputs and results plus a fixed working set). Prints, and writes nothing
unless ``--json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np

from . import common

CUTOFF = 15.0
#: the NumPy method's outputs (invdyn2d's Fp and Mp): analyze's outputs= for the like-for-like timing
LOADS = ("moments", "reactions")
HUGEPAGES = common.HUGEPAGES


def make_trials(n: int, seed: int = 0):
    from jaxmb import gait

    d = gait.running_data()
    rng = np.random.default_rng(seed)
    shift = rng.normal(scale=0.02, size=(n, 1, 2))
    stretch = rng.uniform(0.97, 1.03, size=(n, 1, 1))
    gain = rng.uniform(0.95, 1.05, size=(n, 1, 1))
    pts = {k: getattr(d, k)[None] * stretch + shift for k in ("hip", "knee", "ankle", "toe")}
    force = d.force[None] * gain
    cop = d.cop[None] * stretch[..., 0] + shift[..., 0]
    return d, pts, force, cop


def numpy_method(d, pts, force, cop, b):
    """One trial the notebook's way: filtfilt, second differences, invdyn2d.
    Returns the hip, knee, ankle moments (T, 3) and forces (T, 3, 2): the force and
    moment that each segment's proximal neighbour exerts on it, as invdyn2d's Fp and
    Mp (jaxmb's joint_reactions and joint_moments)."""
    import scipy.signal as ss

    from jaxmb import signal

    rate = d.rate
    bb, aa = ss.butter(2, CUTOFF / (rate / 2))
    # odd extension of as many samples as jaxmb's pipeline takes (padlen="auto")
    pad = signal.settling_samples(ss.butter(2, CUTOFF / (rate / 2), output="sos"))
    P = {k: ss.filtfilt(bb, aa, pts[k][b], axis=0, padlen=pad) for k in pts}
    f = ss.filtfilt(bb, aa, force[b], axis=0, padlen=pad)
    # the force's moment about the origin filtered, as jaxmb's pipeline filters it
    # (not the centre of pressure: undefined where the force is zero): the force at
    # the origin with that couple
    m0 = ss.filtfilt(bb, aa, cop[b] * force[b][:, 1], axis=0, padlen=pad)
    seg = d.segments
    names = (("hip", "knee"), ("knee", "ankle"), ("ankle", "toe"))
    L = np.array([np.linalg.norm(P[q] - P[p], axis=1).mean() for p, q in names])
    g = np.array([0.0, -d.gravity])
    F_d, M_d, p_d = f, m0, np.zeros_like(f)
    out, forces = [], []
    for j in (2, 1, 0):
        p, q = names[j]
        v = P[q] - P[p]
        com = P[p] + seg["com"][j] * v
        a = signal.derivative(com, rate, 2)
        alpha = signal.derivative(np.unwrap(np.arctan2(v[:, 1], v[:, 0])), rate, 2)
        F_p = seg["mass"][j] * (a - g) - F_d
        cr = lambda r, F: r[:, 0] * F[:, 1] - r[:, 1] * F[:, 0]  # noqa: E731
        M_p = seg["inertia"][j] * alpha - M_d - cr(p_d - com, F_d) - cr(P[p] - com, F_p)
        out.append(M_p)
        forces.append(F_p)
        F_d, M_d, p_d = -F_p, -M_p, P[p]
    del L
    return np.stack(out[::-1], 1), np.stack(forces[::-1], 1)


def run(trials: int = 1000, baseline_trials: int = 40, quick: bool = False, log=print) -> dict:
    common.enable_x64()
    from jaxmb import gait

    if quick:
        trials, baseline_trials = min(trials, 50), min(baseline_trials, 5)
    d, pts, force, cop = make_trials(trials)
    kw = dict(rate=d.rate, segments=d.segments, gravity=d.gravity, cutoff=CUTOFF)
    log(f"{trials} trials x {pts['hip'].shape[1]} frames; cut-off {CUTOFF} Hz for markers and force")
    # first call: compiles the JAX part for this batch shape
    t0 = time.perf_counter()
    first = gait.analyze(**pts, force=force, cop=cop, **kw)
    t_first = time.perf_counter() - t0
    sub = slice(0, baseline_trials)
    sub_pts = {k: v[sub] for k, v in pts.items()}

    def jaxmb_all():
        return gait.analyze(**pts, force=force, cop=cop, **kw)

    def jaxmb_loads():
        return gait.analyze(**pts, force=force, cop=cop, outputs=LOADS, **kw)

    def numpy_sub():
        return [numpy_method(d, sub_pts, force[sub, :, :], cop[sub], b) for b in range(baseline_trials)]

    t0 = time.perf_counter()
    loads = jaxmb_loads()
    t_first_loads = time.perf_counter() - t0
    fns = {"jaxmb": jaxmb_all, "jaxmb_loads": jaxmb_loads, "numpy": numpy_sub}
    t = common.alternate(fns, repeats=2 if quick else 3, warmup=0)
    one_call = common.rusage(jaxmb_all)  # after the timed calls: a steady state
    one_call_loads = common.rusage(jaxmb_loads)
    t_np = t["numpy"]["median"] * trials / baseline_trials
    t_jx = t["jaxmb"]["median"]
    t_ld = t["jaxmb_loads"]["median"]
    # the two methods agree (the same filtering and differentiation, two formulations)
    ref_m, ref_f = numpy_sub()[0]
    on = slice(d.heel_strike, d.toe_off)
    agree = float(np.abs(first.moments[0, on] - ref_m[on]).max() / np.abs(ref_m[on]).max())
    agree_f = float(np.abs(first.reactions[0, on] - ref_f[on]).max() / np.abs(ref_f[on]).max())
    same = float(max(np.abs(loads.moments - first.moments).max(), np.abs(loads.reactions - first.reactions).max()))
    frames = trials * pts["hip"].shape[1]
    res = {
        "environment": common.environment(),
        "trials": trials,
        "frames_per_trial": int(pts["hip"].shape[1]),
        "cutoff_hz": CUTOFF,
        "first_call_s": t_first,
        "jaxmb_s": t_jx,
        "jaxmb_frames_per_s": frames / t_jx,
        "numpy_s_extrapolated": t_np,
        "numpy_measured_trials": baseline_trials,
        "numpy_frames_per_s": frames / t_np,
        "speedup": t_np / t_jx,
        "loads_outputs": list(LOADS),
        "first_call_loads_s": t_first_loads,
        "jaxmb_loads_s": t_ld,
        "jaxmb_loads_frames_per_s": frames / t_ld,
        "speedup_loads": t_np / t_ld,
        "max_moment_difference_relative": agree,
        "max_force_difference_relative": agree_f,
        "loads_vs_whole_max_difference": same,
        "one_call": one_call,
        "one_call_loads": one_call_loads,
        "glibc_tunables": os.environ.get("GLIBC_TUNABLES", ""),
        "timings": t,
    }
    log(f"jaxmb.gait.analyze, {trials} trials in one call: first call {t_first:.2f} s, then {t_jx:.2f} s "
        f"({frames / t_jx:.3g} frames/s)")  # fmt: skip
    log(f"NumPy notebook method (filtfilt + invdyn2d per trial): {t_np:.2f} s for {trials} trials "
        f"(measured on {baseline_trials}, scaled), {frames / t_np:.3g} frames/s")  # fmt: skip
    log(f"jaxmb.gait.analyze(..., outputs={LOADS}), the NumPy method's outputs: first call "
        f"{t_first_loads:.2f} s, then {t_ld:.2f} s ({frames / t_ld:.3g} frames/s)")  # fmt: skip
    log(f"speed-up {t_np / t_jx:.1f}x (whole result), {t_np / t_ld:.1f}x (moments and reactions; targets 3x and 5x "
        f"on a 2-core CPU); moments agree within {100 * agree:.2g} %, forces within {100 * agree_f:.2g} % of "
        f"the peak")  # fmt: skip
    log(f"one call of jaxmb: {one_call['user_s']:.2f} s user, {one_call['system_s']:.2f} s system CPU time, "
        f"{one_call['minor_faults']} minor page faults")  # fmt: skip
    return res


def run_hugepages(argv: list, rounds: int = 2, log=print) -> dict:
    """The benchmark in child processes, alternately without and with ``HUGEPAGES``
    in ``GLIBC_TUNABLES``, ``rounds`` children each; medians over the children."""
    runs = common.hugepage_children("benchmarks.bench_gait", argv, rounds, log)
    res = dict(runs["default"][0])
    med = lambda name, key: statistics.median(x[key] for x in runs[name])  # noqa: E731
    summary = {
        name: {
            "children": len(runs[name]),
            "glibc_tunables": runs[name][0]["glibc_tunables"],
            "jaxmb_s": med(name, "jaxmb_s"),
            "jaxmb_loads_s": med(name, "jaxmb_loads_s"),
            "numpy_s_extrapolated": med(name, "numpy_s_extrapolated"),
            "speedup": med(name, "speedup"),
            "speedup_loads": med(name, "speedup_loads"),
            "system_s": statistics.median(x["one_call"]["system_s"] for x in runs[name]),
            "minor_faults": statistics.median(x["one_call"]["minor_faults"] for x in runs[name]),
            "runs": [{k: x[k] for k in ("jaxmb_s", "jaxmb_loads_s", "numpy_s_extrapolated", "speedup", "speedup_loads",
                                        "one_call", "one_call_loads")} for x in runs[name]],  # fmt: skip
        }
        for name in runs
    }
    # the top-level figures: the default environment, medians over its children
    for k in ("jaxmb_s", "jaxmb_loads_s", "numpy_s_extrapolated", "speedup", "speedup_loads"):
        res[k] = summary["default"][k]
    frames = res["trials"] * res["frames_per_trial"]
    res["jaxmb_frames_per_s"] = frames / res["jaxmb_s"]
    res["jaxmb_loads_frames_per_s"] = frames / res["jaxmb_loads_s"]
    res["numpy_frames_per_s"] = frames / res["numpy_s_extrapolated"]
    res["environment"] = common.environment()
    res["configurations"] = summary
    res["note"] = ("jaxmb_s, jaxmb_loads_s, numpy_s_extrapolated, speedup, speedup_loads and the frame rates: "
                   "medians over the default environment's children; first_call_s, one_call, timings and the "
                   "differences: its first child; every child's figures under configurations")  # fmt: skip
    for name, v in summary.items():
        log(f"{name} ({v['glibc_tunables'] or 'no GLIBC_TUNABLES'}), medians of {v['children']} processes: "
            f"jaxmb {v['jaxmb_s']:.2f} s, {v['speedup']:.2f}x (moments and reactions: {v['jaxmb_loads_s']:.2f} s, "
            f"{v['speedup_loads']:.2f}x), NumPy {v['numpy_s_extrapolated']:.2f} s; "
            f"one call {v['system_s']:.2f} s system time, {v['minor_faults']:.0f} minor page faults")  # fmt: skip
    return res


def one(trials: int, outputs=None, rounds: int = 3) -> dict:
    """One batch size in this process: analyze once to compile, then ``rounds`` calls
    (each result dropped before the next): their median wall time, the CPU time and
    page faults a call, the peak memory of the process."""
    import resource

    common.enable_x64()
    from jaxmb import gait

    d, pts, force, cop = make_trials(trials)
    kw = dict(rate=d.rate, segments=d.segments, gravity=d.gravity, cutoff=CUTOFF, outputs=outputs)
    r = gait.analyze(**pts, force=force, cop=cop, **kw)
    result_bytes = sum(getattr(r, k).nbytes for k in gait.OUTPUTS if getattr(r, k) is not None)  # no name left bound to an output
    del r
    use = lambda: resource.getrusage(resource.RUSAGE_SELF)  # noqa: E731
    walls, a = [], use()
    for _ in range(rounds):  # the median of a few calls: one call's time varies by 20 % on this VM
        t0 = time.perf_counter()
        r = gait.analyze(**pts, force=force, cop=cop, **kw)
        walls.append(time.perf_counter() - t0)
        del r
    wall, b = float(np.median(walls)), use()
    return {"trials": trials, "frames_per_trial": int(pts["hip"].shape[1]), "outputs": outputs or "all",
            "wall_s": wall, "walls_s": walls, "per_trial_ms": 1e3 * wall / trials,
            "user_s": (b.ru_utime - a.ru_utime) / rounds, "system_s": (b.ru_stime - a.ru_stime) / rounds,
            "minor_faults": (b.ru_minflt - a.ru_minflt) // rounds,
            "peak_rss_gb": use().ru_maxrss / 2**20, "result_gb": result_bytes / 2**30,
            "inputs_gb": (sum(v.nbytes for v in pts.values()) + force.nbytes + cop.nbytes) / 2**30,
            "load": common.load()}  # fmt: skip


def scaling(sizes, outputs=None, log=print) -> list:
    """:func:`one` for each batch size, each in a fresh process."""
    import json
    import subprocess
    import sys

    rows = []
    for n in sizes:
        cmd = [sys.executable, "-m", "benchmarks.bench_gait", "--one", str(n)]
        if outputs:
            cmd += ["--outputs", ",".join(outputs)]
        out = subprocess.run(cmd, cwd=common.HERE.parent, capture_output=True, text=True)
        if out.returncode:
            log(f"{n} trials: failed ({out.stderr.strip().splitlines()[-1:]})")
            continue
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        log(f"{n:6d} trials: {row['per_trial_ms']:.2f} ms a trial ({row['wall_s']:.2f} s; CPU {row['user_s']:.2f} s "
            f"user + {row['system_s']:.2f} s system, {row['minor_faults']} page faults); peak memory "
            f"{row['peak_rss_gb']:.2f} GiB for {row['inputs_gb']:.2f} GiB of inputs and {row['result_gb']:.2f} GiB "
            f"of results; load {row['load'][0]}")  # fmt: skip
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=1000)
    p.add_argument("--baseline-trials", type=int, default=40)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-save", action="store_true")
    p.add_argument("--hugepages", action="store_true",
                   help=f"child processes alternately without and with GLIBC_TUNABLES={HUGEPAGES}")
    p.add_argument("--rounds", type=int, default=2, help="child processes per configuration (--hugepages)")
    p.add_argument("--json", help="write the results to this file instead of benchmarks/results_gait.json")
    p.add_argument("--scaling", help="batch sizes, comma-separated: each in a fresh process (time per trial, memory)")
    p.add_argument("--outputs", help="analyze's outputs= for --scaling, comma-separated (default: the whole result)")
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # --scaling's child: one batch size, JSON on stdout
    a = p.parse_args(argv)
    outputs = tuple(a.outputs.split(",")) if a.outputs else None
    if a.one:
        import json

        print(json.dumps(one(a.one, outputs)))
        return
    if a.scaling:
        try:
            sizes = [int(x) for x in a.scaling.split(",")]
        except ValueError:
            p.error(f"--scaling takes batch sizes separated by commas, got {a.scaling!r}")
        rows = scaling(sizes, outputs)
        if a.json:
            common.save({"environment": common.environment(), "scaling": rows}, Path(a.json))
        return
    if a.hugepages:
        child = ["--trials", str(a.trials), "--baseline-trials", str(a.baseline_trials)] + (["--quick"] if a.quick else [])
        res = run_hugepages(child, a.rounds)
    else:
        res = run(a.trials, a.baseline_trials, a.quick)
    if a.json:
        common.save(res, Path(a.json))
    elif not a.no_save:
        path = common.HERE / "results_gait.json"
        common.save(res, path)
        print(f"saved {path}")


if __name__ == "__main__":
    main()
