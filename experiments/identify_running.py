"""Segment parameters of van den Bogert's running leg from its true moments and forces.

Start from the simulation's thigh, shank and foot with every parameter off by +-30 %
(random signs; a zero centre-of-mass coordinate starts at +-10 % of the segment
length), fit the physically consistent model to the true joint moments (from heel
strike on, where they are given) and the joint force magnitudes of all 6001 frames,
and compare each recovered parameter with the true one. Then: what the moments alone
can identify (the base parameters), and the band of joint moments that the spread
of the anthropometric tables (Dempster vs de Leva) induces around the true model.

Writes docs/identify_recovery.png and docs/identify_bands.png; prints the numbers.
Run from the repository root: python experiments/identify_running.py
"""

import pathlib
import time

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from jaxmb import identify  # noqa: E402
from jaxmb.cli.identify_running import bands_figure, recover_running, recovery_figure  # noqa: E402

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def main():
    t0 = time.perf_counter()
    out = recover_running(0.3, seed=0, loss="huber")
    res, true, trial = out["fit"], out["true"], out["trial"]
    print(f"fit of 12 parameters to {len(trial['q'])} frames ({time.perf_counter() - t0:.1f} s with compilation)")
    print(res.report(true))
    print()
    print(f"{'parameter':20s}{'true':>11s}{'fitted':>11s}{'error':>10s}  moments alone identify")
    for r in out["rows"]:
        unit = "%L" if r["relative_to"] == "length" else "%"
        print(f"{r['parameter']:20s}{r['true']:11.5g}{r['fitted']:11.5g}{100 * r['relative_error']:9.3f}{unit:2s}"
              f"  {r['barycentric']}: {'yes' if r['barycentric_identifiable_from_moments'] else 'no'}")
    print("\nfrom the joint moments alone (rank of the stacked regressor over stance):")
    print(out["moments_only"].report())
    print("\nwith the joint force magnitudes (linearised at the true parameters):")
    print(out["with_forces"].report().split("\n")[0])
    # the linear estimate of the base parameters from moments alone, against the truth
    bp = out["moments_only"]
    base = res.base
    want = bp.values(identify.to_parameters(true))
    print("\nbase parameters from moments alone (linear least squares) against the truth:")
    for c, v, e, w in zip(base.parameters.combinations, base.values, base.stderr, want):
        print(f"  {c:60s} {v:10.5f} +- {e:.1e}   true {w:10.5f}")

    fig = recovery_figure(out["rows"])
    fig.savefig(DOCS / "identify_recovery.png", dpi=100)

    # moment bands from the tables' spread, around the true model
    spread = identify.table_prior(true, center=true)
    print("\nrelative spread of the tables (sd / value; com: sd / length):")
    L = np.asarray(true.length)
    for i, s in enumerate(true.names):
        sd = spread.sd[i]
        print(f"  {s:6s} mass {sd[0] / spread.mean[i, 0]:.3f}  com {sd[1] / L[i]:.3f}  inertia "
              f"{sd[3] / spread.mean[i, 3]:.3f}")
    t0 = time.perf_counter()
    bands = identify.monte_carlo(true, trial["q"], trial["qd"], trial["qdd"], trial["loads"], spread=spread,
                                 draws=1000, seed=0)
    print(f"\n1000 draws x {len(trial['q'])} frames: {time.perf_counter() - t0:.2f} s (with compilation)")
    stance = trial["moment_weights"] > 0
    width = (bands.quantiles[-1] - bands.quantiles[0])[stance]
    rms = np.sqrt(np.mean(bands.nominal[stance] ** 2, 0))
    for j, joint in enumerate(("hip", "knee", "ankle")):
        print(f"  {joint:5s} stance: 95 % band median width {np.median(width[:, j]):6.2f} N m, max "
              f"{width[:, j].max():6.1f} N m (RMS moment {rms[j]:.1f} N m)")
    mom = np.where(stance[:, None], trial["moments"], np.nan)
    fig = bands_figure(trial["data"].time, bands, mom)
    fig.savefig(DOCS / "identify_bands.png", dpi=100)
    print(f"figures: {DOCS / 'identify_recovery.png'}, {DOCS / 'identify_bands.png'}")


if __name__ == "__main__":
    main()
