"""Benchmark of jaxmb.wholebody (issue 42): segment parameters fitted to the plates,
float64, compilation timed apart from the runs.

Targets (this CPU, float64):
- one subject's 10 trials (150 frames each at 100 Hz) fitted in < 5 s after compilation
  (``fit_to_plates``: the root regressor, the exact bounded least squares, the
  identifiable combinations and the consistency check);
- 100 subjects x 10 trials in one call (``fit_subjects``, each subject its own model)
  in < 60 s after compilation.

The trials are synthetic, as the known-truth tests build them: an 11-segment lab
model (trunk with head as the floating root, both legs, both arms), smooth motions
with exact derivatives, and plate forces that close the root wrench exactly (one
wrench on each foot); the fit starts from masses 20 % off with 25 % priors.

Run: python -m benchmarks.bench_wholebody [--subjects 100] [--trials 10] [--frames 150]
[--rounds 3] [--no-save]; writes benchmarks/results_wholebody.json unless --no-save
(use --no-save, with small sizes, for a smoke run on a busy machine).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks import common

OUT = Path(__file__).resolve().parent / "results_wholebody.json"
PARENT = (-1, 0, 1, 2, 0, 4, 5, 0, 7, 0, 9)
NAMES = ("trunk", "thigh_r", "shank_r", "foot_r", "thigh_l", "shank_l", "foot_l", "uarm_r", "farm_r", "uarm_l", "farm_l")


def _options(argv):
    """{name: value} of the command line (check_args has vetted it)."""
    opts = {"--subjects": 100, "--trials": 10, "--frames": 150, "--rounds": 3}
    for k in opts:
        for i, a in enumerate(argv):
            if a == k:
                opts[k] = int(argv[i + 1])
            elif a.startswith(k + "="):
                opts[k] = int(a.split("=", 1)[1])
    return {k[2:]: v for k, v in opts.items()} | {"save": "--no-save" not in argv}


def subject(seed: int):
    """One subject's model (Dempster-like, 55-90 kg, 1.6-1.9 m scale)."""
    import jaxmb

    rng = np.random.default_rng(seed)
    k = rng.uniform(0.9, 1.1)
    length = k * np.array([0.52, 0.42, 0.43, 0.20, 0.42, 0.43, 0.20, 0.30, 0.40, 0.30, 0.40])
    frac = np.array([0.578, 0.1, 0.0465, 0.0145, 0.1, 0.0465, 0.0145, 0.028, 0.022, 0.028, 0.022])
    mass = rng.uniform(55.0, 90.0) * frac / frac.sum()
    along = np.array([0.5, 0.433, 0.433, 0.5, 0.433, 0.433, 0.5, 0.436, 0.68, 0.436, 0.68]) * length
    com = np.stack([along, rng.normal(0.0, 0.01, 11)], -1)
    inertia = mass * (0.3 * length) ** 2
    attach = [None, 0.0, None, None, 0.0, None, None, None, None, None, None]
    return jaxmb.tree(PARENT, length, com, mass, inertia, attach=attach, base="floating", coordinates="absolute",
                      names=NAMES)


def trials(model, n_trials: int, T: int, seed: int):
    """(q, qd, qdd) of shape (trials, T, dof): smooth motions at 100 Hz with exact derivatives."""
    rng = np.random.default_rng(seed)
    shape = (n_trials, 1, model.dof)
    q0 = np.r_[0.0, 0.95, np.pi / 2, -np.pi / 2 * np.ones(model.dof - 3)] + rng.normal(0, 0.2, shape)
    amp, w, ph = rng.uniform(0.05, 0.4, shape), rng.uniform(3.0, 9.0, shape), rng.uniform(0, 2 * np.pi, shape)
    t = (np.arange(T) / 100.0)[:, None]
    return q0 + amp * np.sin(w * t + ph), amp * w * np.cos(w * t + ph), -amp * w**2 * np.sin(w * t + ph)


def plate_loads(model, q, qd, qdd):
    """(..., segments, 3) loads closing the root wrench exactly: 60 % on the right foot, 40 % on the left."""
    import jaxmb
    from jaxmb import wholebody

    need = wholebody.residuals(model, q, qd, qdd, about="root")
    out = 0.0
    for foot, share in (("foot_r", 0.6), ("foot_l", 0.4)):
        out = out + jaxmb.point_load(model, q, foot, q[..., :2], share * need[..., :2], share * need[..., 2])
    return out


def dataset(S: int, n_trials: int, T: int):
    """Per subject: true model, start model, prior, motion, loads, body mass."""
    from jaxmb import wholebody

    rows = []
    for s in range(S):
        true = subject(s)
        q, qd, qdd = trials(true, n_trials, T, 1000 + s)
        start = true.replace(mass=true.mass * np.random.default_rng(s).uniform(0.8, 1.2, true.segments))
        rows.append((true, start, wholebody.prior_around(start), q, qd, qdd, plate_loads(true, q, qd, qdd),
                     float(true.mass.sum())))
    return rows


def _timed(fn, rounds: int):
    """(first call s (compilation and one run), median and min of ``rounds`` later calls s, last result)."""
    t0 = time.perf_counter()
    out = common.block(fn())
    first = time.perf_counter() - t0
    runs = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = common.block(fn())
        runs.append(time.perf_counter() - t0)
    return {"first_call_s": first, "median_s": float(np.median(runs)), "min_s": float(np.min(runs)),
            "runs_s": runs}, out  # fmt: skip


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    common.check_args(argv, __doc__, flags=("--no-save",), options=("--subjects", "--trials", "--frames", "--rounds"))
    opt = _options(argv)
    common.enable_x64()
    import jax.numpy as jnp

    from jaxmb import wholebody

    load_before = common.load()
    data = dataset(opt["subjects"], opt["trials"], opt["frames"])
    true, start, prior, q, qd, qdd, loads, mass = data[0]
    one, fit = _timed(lambda: wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=(5.0, 5.0, 1.0),
                                                      body_mass=mass, mass_sd=0.5).parameters, opt["rounds"])
    stack = lambda k: jnp.asarray(np.stack([d[k] for d in data]))  # noqa: E731
    args = ([d[1] for d in data], stack(3), stack(4), stack(5), jnp.stack([d[6] for d in data]))
    many, fits = _timed(lambda: wholebody.fit_subjects(*args, priors=[d[2] for d in data], sigma=(5.0, 5.0, 1.0),
                                                       body_mass=[d[7] for d in data]).parameters, opt["rounds"])
    err = float(np.max(np.abs(fits[:, 0::4].sum(-1) - np.array([d[7] for d in data]))))
    results = {
        "environment": common.environment(), "load_before": load_before, "load_after": common.load(),
        "sizes": {"subjects": opt["subjects"], "trials": opt["trials"], "frames": opt["frames"], "rate_hz": 100,
                  "segments": true.segments},
        "one_subject": one | {"target_s": 5.0},
        "many_subjects": many | {"target_s": 60.0},
        "check": {"total_mass_error_kg_max": err},
    }  # fmt: skip
    print(json.dumps({k: results[k] for k in ("sizes", "one_subject", "many_subjects", "check")}, indent=1))
    if opt["save"]:
        OUT.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
