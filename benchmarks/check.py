"""Rerun each recorded headline figure, small, and say which fell below its record.

    python -m benchmarks --check [--only gait,inverse] [--tolerance 0.2] [--list]
    python -m benchmarks.check   (the same)

Each figure is a ratio against a baseline timed alternately in the same run (jaxmb
against the NumPy method, Pinocchio's ``*InParallel``, SciPy), so that a slow or
busy machine slows both sides: the figures are rates per sample or per problem, at
a size where the rate no longer depends on it (the gait pipeline at 200 trials: its
time per trial is flat from there, issue 39), not the record's full size. A figure
that falls more than ``--tolerance`` (default 0.2: 20 %) below its record is printed
under FELL, and the command exits with status 1. The records are read from the
results JSON files (each with its commit); nothing is written. ``--list`` prints the
figures and their records without timing anything. The output names the commit
(and whether the work tree has changes) and the load average at start and end:
rerun on a quiet machine (load below about 1.5) before believing a fall.

Sections (``--only``): inverse (inverse dynamics vs NumPy and Pinocchio, 1e5
samples), forward (forward dynamics vs Pinocchio, 1e5 samples), gait (the gait
pipeline's whole result and moments + reactions vs the NumPy method), reaching
(1,000 optimal reaches in one call vs SciPy per problem, the record's size: the
batch's time per problem depends on its size). About 3 to 5 minutes on 2 cores.
Not covered: figures without a baseline in the same run (compile times, identify's
absolute times), which depend on the machine's speed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from . import common

SECTIONS = ("inverse", "forward", "gait", "reaching")
TOLERANCE = 0.2
ID_BATCH = 10**5
ID_MODELS = ("chain3", "chain20", "human7")
FD_MODELS = ("chain3", "chain20")
GAIT_TRIALS, GAIT_BASELINE_TRIALS = 200, 10


def _rows(res: dict, section: str, **match) -> list:
    return [r for r in res.get(section, []) if all(r.get(k) == v for k, v in match.items())]


def records(load=None) -> list:
    """The recorded headline figures: dicts name, section, record (a ratio, higher is
    better), source (file and commit). ``load(name)`` reads a results JSON of
    ``benchmarks/`` (default: the files)."""
    load = load or (lambda name: json.loads((common.HERE / name).read_text()))
    out = []

    def add(section, name, value, file, res):
        commit = res.get("environment", {}).get("git_commit", "?")[:7]
        out.append({"section": section, "name": name, "record": float(value), "source": f"{file} @ {commit}"})

    res = load("results.json")
    for m in ID_MODELS:
        for row in _rows(res, "inverse_dynamics", model=m, batch=ID_BATCH, dtype="float64"):
            for k in ("numpy", "pinocchio_parallel"):
                if k in row["speedup"]:
                    add("inverse", f"inverse dynamics {m} B=1e5: x {k}", row["speedup"][k], "results.json", res)
    for m in FD_MODELS:
        for row in _rows(res, "forward_dynamics", model=m, batch=ID_BATCH):
            add("forward", f"forward dynamics {m} B=1e5: x pinocchio_parallel", row["speedup"]["pinocchio_parallel"],
                "results.json", res)  # fmt: skip
    g = load("results_gait.json")
    add("gait", "gait whole result: x NumPy method", g["speedup"], "results_gait.json", g)
    add("gait", "gait moments + reactions: x NumPy method", g["speedup_loads"], "results_gait.json", g)
    r = load("results_reaching.json")
    add("reaching", "reaching batch per problem: x SciPy", r["speedup_per_problem"], "results_reaching.json", r)
    return out


def compare(recorded: list, measured: dict, tolerance: float = TOLERANCE) -> list:
    """Each recorded figure with its ``measured`` value (``measured[name]``; None when
    not measured) and ``fell``: True when it is more than ``tolerance`` (a fraction)
    below the record."""
    rows = []
    for f in recorded:
        m = measured.get(f["name"])
        ratio = None if m is None else m / f["record"]
        rows.append({**f, "measured": m, "ratio": ratio, "fell": ratio is not None and ratio < 1 - tolerance})
    return rows


def _median_ratio(cases: dict, base: str, repeats: int) -> dict:
    t = common.alternate(cases, repeats=repeats, warmup=1)
    return {k: v["median"] / t["jaxmb"]["median"] for k, v in t.items() if k != "jaxmb"}


def measure_inverse(log=print) -> dict:
    import jax

    import jaxmb

    from .baselines import PinocchioBaseline, numpy_rnea, to_relative

    out, every = {}, dict(common.models())
    for name in ID_MODELS:
        model = every[name]
        q, qd, qdd = common.states(model, ID_BATCH, seed=ID_BATCH % 997)
        xs = tuple(jax.device_put(x) for x in (q, qd, qdd))
        common.block(jaxmb.inverse_dynamics(model, *xs))
        ql, qdl, qddl = (x.T.copy() for x in (q, qd, qdd))
        cases = {"jaxmb": lambda m=model, a=xs: common.block(jaxmb.inverse_dynamics(m, *a)),
                 "numpy": lambda m=model, a=(ql, qdl, qddl): numpy_rnea(m, *a)}  # fmt: skip
        try:
            import numpy as np

            pb = PinocchioBaseline(model, threads=2)
            fq = [np.asfortranarray(to_relative(model, x).T) for x in (q, qd, qdd)]
            buf = np.zeros((model.dof, ID_BATCH), order="F")
            cases["pinocchio_parallel"] = lambda pb=pb, fq=fq, buf=buf: pb.inverse_parallel(*fq, buf)
        except ImportError as e:
            log(f"  (Pinocchio skipped: {e})")
        for k, v in _median_ratio(cases, "jaxmb", 5).items():
            out[f"inverse dynamics {name} B=1e5: x {k}"] = v
    return out


def measure_forward(log=print) -> dict:
    import jax
    import numpy as np

    import jaxmb

    from .baselines import PinocchioBaseline, forces_to_relative, to_relative

    out, every = {}, dict(common.models())
    for name in FD_MODELS:
        model = every[name]
        try:
            pb = PinocchioBaseline(model, threads=2)
        except ImportError as e:
            log(f"  (Pinocchio skipped: {e})")
            continue
        q, qd, qdd = common.states(model, ID_BATCH, seed=7)
        tau = np.asarray(jaxmb.inverse_dynamics(model, q, qd, qdd))
        xs = tuple(jax.device_put(x) for x in (q, qd, tau))
        common.block(jaxmb.forward_dynamics(model, *xs))
        rel = [to_relative(model, q), to_relative(model, qd), forces_to_relative(model, tau)]
        fq = [np.asfortranarray(x.T) for x in rel]
        buf = np.zeros((model.dof, ID_BATCH), order="F")
        cases = {"jaxmb": lambda m=model, a=xs: common.block(jaxmb.forward_dynamics(m, *a)),
                 "pinocchio_parallel": lambda: pb.forward_parallel(*fq, buf)}  # fmt: skip
        out[f"forward dynamics {name} B=1e5: x pinocchio_parallel"] = _median_ratio(cases, "jaxmb", 5)[
            "pinocchio_parallel"]  # fmt: skip
    return out


def measure_gait(log=print) -> dict:
    from . import bench_gait

    res = bench_gait.run(GAIT_TRIALS, GAIT_BASELINE_TRIALS, log=log)
    return {"gait whole result: x NumPy method": res["speedup"],
            "gait moments + reactions: x NumPy method": res["speedup_loads"]}  # fmt: skip


def measure_reaching(log=print) -> dict:
    from . import bench_reaching

    res = bench_reaching.run(quick=False, log=log)  # the record's size: its quick run's ratio is not comparable
    return {"reaching batch per problem: x SciPy": res["speedup_per_problem"]}


MEASURE = {"inverse": measure_inverse, "forward": measure_forward, "gait": measure_gait, "reaching": measure_reaching}


def commit() -> str:
    """HEAD's short hash, "+ changes" when the work tree differs from it."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=common.HERE, capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=common.HERE,
                               capture_output=True, text=True).stdout.strip()  # fmt: skip
        return head + (" + changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse(argv) -> dict:
    """The command line: {"only": sections, "tolerance": fraction, "list": bool}."""
    common.check_args(argv, __doc__, flags=("--list", "--check"), options=("--only", "--tolerance"))
    opts = {"only": SECTIONS, "tolerance": TOLERANCE, "list": "--list" in argv}
    for i, a in enumerate(argv):
        name = a.split("=", 1)[0]
        if name in ("--only", "--tolerance"):
            value = a.split("=", 1)[1] if "=" in a else argv[i + 1]
            if name == "--only":
                only = tuple(s for s in value.split(",") if s)
                bad = [s for s in only if s not in SECTIONS]
                if bad or not only:
                    raise SystemExit(f"error: --only takes sections from {', '.join(SECTIONS)}, got {value!r}")
                opts["only"] = only
            else:
                try:
                    tol = float(value)
                except ValueError:
                    tol = -1.0
                if not 0 < tol < 1:
                    raise SystemExit(f"error: --tolerance takes a fraction between 0 and 1 (0.2: 20 %), got {value!r}")
                opts["tolerance"] = tol
    return opts


def report(rows: list, tolerance: float) -> str:
    """The table of figures (record, measured, ratio) and the list of those that fell."""
    lines = [f"{'figure':58s} {'record':>8s} {'now':>8s} {'now/record':>10s}  record from"]
    for r in rows:
        now = "-" if r["measured"] is None else f"{r['measured']:.2f}"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.2f}"
        mark = "  FELL" if r["fell"] else ""
        lines.append(f"{r['name']:58s} {r['record']:8.2f} {now:>8s} {ratio:>10s}  {r['source']}{mark}")
    fell = [r for r in rows if r["fell"]]
    if fell:
        lines.append(f"FELL more than {tolerance:.0%} below the record: " + "; ".join(
            f"{r['name']} ({r['measured']:.2f} against {r['record']:.2f})" for r in fell))  # fmt: skip
    else:
        lines.append(f"no figure measured fell more than {tolerance:.0%} below its record")
    missing = [r["name"] for r in rows if r["measured"] is None]
    if missing:
        lines.append("not measured (section not run, or its baseline not installed): " + "; ".join(missing))
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts = parse(argv)
    recorded = [f for f in records() if f["section"] in opts["only"]]
    print(f"commit {commit()}; load average {common.load()}", flush=True)
    if opts["list"]:
        print(report(compare(recorded, {}), opts["tolerance"]))
        return 0
    common.enable_x64()
    measured = {}
    t0 = time.time()
    for section in opts["only"]:
        t = time.time()
        measured.update(MEASURE[section]())
        print(f"[{section}: {time.time() - t:.0f} s]", flush=True)
    rows = compare(recorded, measured, opts["tolerance"])
    print(f"commit {commit()}; load average at the end {common.load()}; {time.time() - t0:.0f} s")
    print(report(rows, opts["tolerance"]))
    return 1 if any(r["fell"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
