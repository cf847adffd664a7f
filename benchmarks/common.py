"""Shared pieces of the benchmarks: models, states, timing, the environment record."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"

CHAINS = (2, 3, 7, 20)
BATCHES = (10**3, 10**5, 10**6)
HUMAN_PARENT = (-1, 0, 1, 2, 0, 0, 5)


def check_args(argv, doc: str | None, flags=(), options=()) -> None:
    """The command line of a benchmark module: ``-h``/``--help`` prints ``doc`` (the
    module's docstring) and exits; anything but the known ``flags`` (no value) and
    ``options`` (a value, as ``--x V`` or ``--x=V``) exits with an error, so that a
    mistyped or unknown option never starts a run that overwrites recorded results."""
    if "-h" in argv or "--help" in argv:
        print((doc or "").strip())
        raise SystemExit(0)
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if a in flags:
            i += 1
        elif name in options:
            if "=" not in a and i + 1 >= len(argv):
                raise SystemExit(f"error: {a} needs a value")
            i += 1 if "=" in a else 2
        else:
            known = ", ".join(sorted(flags) + [f"{o} VALUE" for o in sorted(options)]) or "none"
            raise SystemExit(f"error: unknown argument {a!r} (known: {known}; -h for help)")


def enable_x64():
    import jax

    jax.config.update("jax_enable_x64", True)


# ------------------------------------------------------------------- models


def chain_model(n: int):
    """A planar chain of n segments with human-like parameters (seeded)."""
    import jaxmb

    rng = np.random.default_rng(100 + n)
    length = rng.uniform(0.25, 0.5, n)  # m
    mass = rng.uniform(1.0, 8.0, n)  # kg
    com = np.stack([0.43 * length, rng.uniform(-0.02, 0.02, n)], 1)  # m, slightly off-axis
    inertia = mass * length**2 * rng.uniform(0.05, 0.09, n)  # kg m^2 about the com
    return jaxmb.chain(length, com, mass, inertia, names=[f"s{i}" for i in range(n)])


def human_model():
    """Blajer & Czaplicki's seven-segment human: floating base, absolute coordinates.

    jaxmb.anthropometry.seven_segment_human where it exists, else the same tree
    (parent (-1, 0, 1, 2, 0, 0, 5)) with Dempster-like parameters for 1.75 m, 70 kg.
    """
    import jaxmb

    try:
        from jaxmb.anthropometry import seven_segment_human

        return seven_segment_human(), "jaxmb.anthropometry.seven_segment_human()"
    except ImportError:
        H, M = 1.75, 70.0
        length = np.array([0.288, 0.245, 0.246, 0.152, 0.118, 0.186, 0.146]) * H
        frac = np.array([0.497, 0.200, 0.093, 0.029, 0.081, 0.056, 0.044])
        mass = frac * M
        com = length * np.array([0.538, 0.433, 0.433, 0.5, 0.5, 0.436, 0.43])
        inertia = mass * (length * 0.3) ** 2
        attach = [0.0, 0.0, length[1], length[2], length[0], length[0], length[5]]
        model = jaxmb.tree(HUMAN_PARENT, length, com, mass, inertia, attach=attach,
                           base="floating", coordinates="absolute")  # fmt: skip
        return model, "jaxmb.tree equivalent (anthropometry not available)"


def models():
    """[(name, model)] for the inverse-dynamics sweep."""
    out = [(f"chain{n}", chain_model(n)) for n in CHAINS]
    out.append(("human7", human_model()[0]))
    return out


def states(model, batch: int, seed: int = 0, dtype=np.float64):
    """(q, qd, qdd), each (B, dof) (the one API's layout; ``.T`` gives the NumPy
    baselines' (dof, B)): angles U(-pi, pi) rad, rates N(0, 2^2)
    rad/s, accelerations N(0, 5^2) rad/s^2, a floating base within 1 m."""
    rng = np.random.default_rng(seed)
    dof = model.dof
    q = rng.uniform(-np.pi, np.pi, (dof, batch))
    if model.base == "floating":
        q[:2] = rng.uniform(-1.0, 1.0, (2, batch))
    qd = 2.0 * rng.standard_normal((dof, batch))
    qdd = 5.0 * rng.standard_normal((dof, batch))
    return tuple(np.ascontiguousarray(x.T, dtype=dtype) for x in (q, qd, qdd))


# ------------------------------------------------------------------- timing


def compile_and_time(fn, *args):
    """(compiled, seconds): ``jax.jit(fn)`` lowered and compiled ahead of time, so
    that compilation is measured apart from the run time."""
    import jax

    t0 = time.perf_counter()
    c = jax.jit(fn).lower(*args).compile()
    return c, time.perf_counter() - t0


def first_call(fn, *args):
    """(result, seconds) of the first call of a function that compiles on first use
    (the one API called directly): its compile time plus one run."""
    t0 = time.perf_counter()
    out = block(fn(*args))
    return out, time.perf_counter() - t0


def block(x):
    import jax

    return jax.block_until_ready(x)


def alternate(cases: dict, repeats: int, inner: int = 1, warmup: int = 1, pause: float = 0.02) -> dict:
    """Time callables in turn, round after round, so that a change of machine load
    affects them alike. In each round a callable runs ``inner`` times back to back
    (its time is the mean of those calls); each call runs its whole computation and
    waits for it. A short untimed ``pause`` before each contender lets the worker
    threads of the previous one (XLA's, Pinocchio's) go idle instead of competing.

    Returns:
      {name: {"median": s, "min": s, "runs": [s, ...]}} over the rounds.
    """
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    runs = {k: [] for k in cases}
    for _ in range(repeats):
        for k, fn in cases.items():
            time.sleep(pause)
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            runs[k].append((time.perf_counter() - t0) / inner)
    return {k: {"median": float(np.median(v)), "min": float(np.min(v)), "runs": [float(x) for x in v]}
            for k, v in runs.items()}  # fmt: skip


def scale(entry: dict, factor: float, measured: int) -> dict:
    """A timing measured on ``measured`` samples, scaled to the whole batch."""
    out = {k: entry[k] * factor for k in ("median", "min")}
    out["runs"] = [x * factor for x in entry["runs"]]
    out["measured_samples"] = measured
    out["extrapolated"] = factor != 1.0
    return out


def repeats_for(batch: int, quick: bool) -> tuple:
    """(rounds, calls per round) for a batch size."""
    r, inner = (15, 10) if batch <= 10**3 else (7, 3) if batch <= 10**5 else (3, 1)
    return (max(2, r // 3), inner) if quick else (r, inner)


def load() -> list:
    return [round(x, 2) for x in os.getloadavg()]


def wait_for_quiet(threshold: float = 1.5, max_wait: float = 900.0, poll: float = 15.0) -> dict:
    """Wait (up to ``max_wait`` s) for the 1-minute load average to fall below
    ``threshold``; returns what was seen."""
    t0 = time.time()
    seen = [load()]
    while seen[-1][0] >= threshold and time.time() - t0 < max_wait:
        time.sleep(poll)
        seen.append(load())
    return {"threshold": threshold, "waited_s": round(time.time() - t0, 1), "load_at_start": seen[-1],
            "quiet": seen[-1][0] < threshold}  # fmt: skip


def environment() -> dict:
    import jax
    import jaxlib

    import jaxmb

    def version(mod):
        try:
            return __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            return f"unavailable ({type(e).__name__})"

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()
    except OSError:
        commit = ""
    commit = commit or os.environ.get("JAXMB_COMMIT", "")  # a copy without .git (a lent GPU machine) names it
    mem = None
    try:
        with open("/proc/meminfo") as f:
            mem = round(int(next(line.split()[1] for line in f if line.startswith("MemTotal"))) / 2**20, 1)
    except (OSError, StopIteration):
        pass
    return {
        "machine": {
            "cpu": cpu,
            "cores": os.cpu_count(),
            "memory_gib": mem,
            "platform": platform.platform(),
            "python": sys.version.split()[0],
            "jax_devices": [str(d) for d in jax.devices()],
            "jax_backend": jax.default_backend(),
            "jax_device_kind": jax.devices()[0].device_kind,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "versions": {
            "jaxmb": jaxmb.__version__,
            "jax": jax.__version__,
            "jaxlib": jaxlib.__version__,
            "numpy": np.__version__,
            "mujoco": version("mujoco"),
            "pinocchio": version("pinocchio"),
            "sympy": version("sympy"),
        },
        "git_commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def rusage(fn) -> dict:
    """User and system CPU seconds and minor page faults of one call of ``fn``
    (``getrusage`` of this process; NaN and -1 where the platform has no ``resource``)."""
    try:
        import resource
    except ImportError:  # not on this platform
        fn()
        return {"user_s": float("nan"), "system_s": float("nan"), "minor_faults": -1}
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    fn()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"user_s": r1.ru_utime - r0.ru_utime, "system_s": r1.ru_stime - r0.ru_stime,
            "minor_faults": r1.ru_minflt - r0.ru_minflt}  # fmt: skip


HUGEPAGES = "glibc.malloc.hugetlb=1"


def hugepage_children(module: str, args: list, rounds: int, log=print, after=None) -> dict:
    """Run ``python -m module --json PATH *args`` in child processes, alternately
    without and with glibc's transparent huge pages (``GLIBC_TUNABLES=HUGEPAGES``,
    read only when a process starts), ``rounds`` of each; returns {"default": [...],
    "hugepages": [...]}, the JSON each child wrote, in order. ``after(name, result)``
    is called after each child (to log it)."""
    import tempfile

    base = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    runs = {"default": [], "hugepages": []}
    for r in range(rounds):
        for name, env in (("default", base), ("hugepages", dict(base, GLIBC_TUNABLES=HUGEPAGES))):
            log(f"round {r + 1}/{rounds}, {name}:")
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "result.json")
                subprocess.run([sys.executable, "-m", module, "--json", out] + list(args), env=env,
                               cwd=HERE.parent, check=True)  # fmt: skip
                with open(out) as f:
                    runs[name].append(json.load(f))
            if after is not None:
                after(name, runs[name][-1])
    return runs


def save(results: dict, path: Path = RESULTS):
    """Write ``results`` as JSON atomically: a temporary file beside ``path``, then
    renamed (an interrupted run leaves the previous file whole)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(results, indent=1, default=float) + "\n")
    os.replace(tmp, path)
