"""Joint reactions in a back somersault on a trampoline (Blajer & Czaplicki 2005, Fig. 2).

The paper's measured somersault is not public, so this script makes dynamically
consistent data and checks the projection against it:

1. The seven-segment human (``seven_segment_human``, Dempster, 1.75 m, 70 kg) lands
   on the trampoline bed (a vertical spring-damper on one point of the foot) at
   -6 m/s, leaning slightly back, and a computed-torque controller tracks a planned
   pattern: knees and hips give and push during the support, the arms swing up,
   then a pike in the flight and an opening before the landing. The backward lean
   is calibrated (bisection) for one backward rotation of the trunk at the landing.
2. The motion is simulated in MAXIMAL coordinates with ``jaxmb.maximal`` (x, y,
   theta per segment; the 12 joint constraints by Lagrange multipliers,
   Baumgarte-stabilised, RK4): the multipliers are the simulation's own joint forces.
3. From the simulated kinematics (q, qd, qdd recovered from p, pd, pdd) and the bed
   force alone, ``jaxmb.joint_reactions`` (projection) gives the hip, knee and ankle
   reactions, which are compared with the multipliers. ``jaxmb.simulate`` (minimal
   coordinates) of the same closed loop cross-checks the trajectory.

The bed, the controller, the plan, the scenario and the pipeline live in
experiments/somersault.py, next to this script.

Writes experiments/out/somersault_reactions.png (and a copy in docs/), prints the
comparison and the paper's observation: the vertical reaction drops from the ankle
to the hip during the support.

Run:  python experiments/somersault_reactions.py   (about 20 s on 2 CPU cores)
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import time

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

import somersault as so  # noqa: E402  (experiments/somersault.py, next to this script)
from jaxmb.anthropometry import seven_segment_human  # noqa: E402
from jaxmb.plot import stick_figure  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
JOINTS = so.LEG_JOINTS  # thigh, shank, foot: the hip, knee and ankle joints


def figure(model, res, path):
    """Fig. 2 of the paper: Fx, Fy at hip, knee, ankle vs time, plus the motion."""
    from matplotlib.figure import Figure

    t = res.t
    fig = Figure(figsize=(10, 11), layout="constrained")
    gs = fig.add_gridspec(4, 1, height_ratios=[1.25, 1, 1, 1])
    ax0 = fig.add_subplot(gs[0])
    every = max(1, int(round(0.1 / (t[1] - t[0]))))
    frames = list(range(0, len(t), every))
    shift = 0.75  # m between successive poses in the strip
    for k, i in enumerate(frames):
        q = res.q[i].copy()
        q[0] += shift * k
        stick_figure(model, q[None], ax=ax0, color="C3" if i < res.i_takeoff else "C0")
        ax0.text(q[0], -1.1, f"{t[i]:.1f}", ha="center", fontsize=7, color="0.3")
    ax0.set_ylim(-1.3, None)
    ax0.axhline(0.0, color="0.6", lw=0.8, ls=":")
    ax0.set_title(
        f"Simulated back somersault in the pike position, every {every * (t[1] - t[0]):.1f} s "
        "(red: on the bed; dotted: the bed at rest; numbers: time, s)", fontsize=9)
    ax0.set_xlabel("")
    ax0.set_xticks([])

    axes = [fig.add_subplot(gs[r]) for r in (1, 2, 3)]
    t_off = t[res.i_takeoff]
    mark = slice(0, len(t), max(1, int(round(0.015 / (t[1] - t[0])))))
    for ax, j in zip(axes, range(len(JOINTS))):
        name = so.JOINT_LABELS[JOINTS[j]]
        for c, (comp, col) in enumerate((("Fx", "C0"), ("Fy", "C3"))):
            # the paper's lambda: force of the distal segment on the proximal one
            ax.plot(t, -res.projection[:, j, c], color=col, lw=1.6, label=f"{comp}, projection (jaxmb)")
            ax.plot(t[mark], -res.simulated[mark, j, c], ls="none", marker="o", ms=3, mfc="none",
                    color=col, label=f"{comp}, simulation multipliers")
        if name == "ankle":
            ax.plot(t, res.bed, color="0.5", lw=1, ls="--", label="bed force Ry")
        ax.axvspan(t[0], t_off, color="0.9", zorder=0)
        ax.axhline(0.0, color="0.7", lw=0.8)
        ax.set_ylabel(f"{name} reaction (N)")
        ax.set_xlim(t[0], t[-1])
        ax.text(0.01, 0.93, name.upper(), transform=ax.transAxes, fontsize=10, weight="bold", va="top")
    axes[0].legend(fontsize=7, loc="upper right", ncol=2)
    axes[-1].legend(fontsize=7, loc="upper right", ncol=3)
    axes[-1].set_xlabel("time (s)  (shaded: support phase on the bed)")
    worst = max(r["max_abs"] for r in so.comparison_table(res))
    axes[0].set_title("Joint reactions, force of the distal on the proximal segment (Blajer & Czaplicki's "
                      f"sign), world frame; cf. their Fig. 2\nprojection vs multipliers: max |difference| "
                      f"{worst:.1e} N", fontsize=9)
    fig.savefig(path, dpi=110)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dt", type=float, default=2e-4, help="RK4 step of the simulations, s")
    ap.add_argument("--duration", type=float, default=1.6, help="simulated time, s (cut at the landing)")
    ap.add_argument("--no-calibrate", action="store_true", help="use the default lean, no bisection")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "experiments" / "out")
    ap.add_argument("--no-docs", action="store_true", help="do not copy the figure to docs/")
    args = ap.parse_args(argv)

    model = seven_segment_human(height=1.75, body_mass=70.0, table="dempster")
    scenario = so.back_somersault(model)
    print(f"model: {model}")
    print(f"bed: k = {scenario.bed.stiffness:.0f} N/m, c = {scenario.bed.damping:.0f} N s/m, on the foot at "
          f"{scenario.bed.point[0]:.3f} m from the ankle; touchdown {scenario.v0:.1f} m/s")

    t0 = time.perf_counter()
    if not args.no_calibrate:
        lean, rot = so.calibrate_lean(model, scenario, duration=args.duration)
        scenario = scenario._replace(lean=lean)
        print(f"calibrated backward lean at touchdown: {np.degrees(lean):.4f} deg "
              f"(rotation {np.degrees(rot):.1f} deg at dt = 1 ms; {time.perf_counter() - t0:.1f} s)")
    t1 = time.perf_counter()
    res = so.run_somersault(model, scenario, duration=args.duration, dt=args.dt)
    print(f"simulations and reactions: {time.perf_counter() - t1:.1f} s (compile included), "
          f"dt = {args.dt:g} s, RK4, {len(res.t)} samples up to the landing")

    t = res.t
    rot = np.degrees(res.q[-1, 2] - res.q[0, 2])
    print(f"\nmotion: support 0 - {t[res.i_takeoff]:.3f} s, flight to the landing at {t[-1]:.3f} s; "
          f"trunk rotation {rot:.1f} deg (backward); peak hip flexion "
          f"{np.degrees(np.max(res.q[:, 3] - res.q[:, 2] + np.pi)):.0f} deg; "
          f"peak hip height {res.q[:, 1].max():.2f} m")
    print("peak |joint moment| (N m): " + ", ".join(
        f"{nm} {v:.0f}" for nm, v in zip(("hip", "knee", "ankle", "neck", "shoulder", "elbow"),
                                          np.abs(res.tau[:, 1:]).max(0))))

    print("\nreactions: projection (kinematics + bed force) vs the simulation's multipliers")
    print(f"{'joint':6s} {'comp':4s} {'max |diff| N':>13s} {'RMS N':>10s} {'max/peak':>10s}")
    rows = so.comparison_table(res)
    for r in rows:
        print(f"{r['joint']:6s} {r['component']:4s} {r['max_abs']:13.3e} {r['rms']:10.3e} {r['rel_max']:10.2e}")
    print(f"(peak reaction {rows[0]['peak']:.0f} N; max constraint drift {res.drift.max():.1e} m; "
          f"recursive Newton-Euler vs multipliers: max/peak "
          f"{max(r['rel_max'] for r in so.comparison_table(res, other='recursive')):.1e})")
    dq = np.abs(res.q_minimal - res.q).max(0)
    print(f"minimal-coordinate jaxmb.simulate vs maximal simulation: max |dq| position {dq[:2].max():.1e} m, "
          f"angles {dq[2:].max():.1e} rad")

    s = so.support_summary(res)
    print("\nsupport phase, vertical reaction (force of the distal on the proximal segment, up +):")
    print(f"  bed   mean {s['bed'][0]:7.0f} N   peak {s['bed'][1]:7.0f} N  ({s['bed'][1] / (70 * 9.81):.1f} BW)")
    for nm in ("ankle", "knee", "hip"):
        print(f"  {nm:5s} mean {s[nm][0]:7.0f} N   peak {s[nm][1]:7.0f} N")
    d = s["drop"]
    print(f"  drop ankle -> hip: mean {d[0]:.0f} N ({d[1]:.0f} %), peak {d[2]:.0f} N ({d[3]:.0f} %) "
          "-- the paper's 'significant drop of the vertical reaction from the ankle to hip level'")

    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "somersault_reactions.png"
    figure(model, res, path)
    print(f"\nwrote {path}")
    if not args.no_docs:
        shutil.copyfile(path, ROOT / "docs" / "somersault_reactions.png")
        print(f"wrote {ROOT / 'docs' / 'somersault_reactions.png'}")
    print(f"total {time.perf_counter() - t0:.1f} s")
    return res


if __name__ == "__main__":
    main()
