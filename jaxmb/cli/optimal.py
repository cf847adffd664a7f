"""``jaxmb optimal``: optimal reaches of the two-link arm, figure and CSV.

Registered by :mod:`jaxmb.cli`. Defaults: the notes' arm (1.70 m,
70 kg) in the horizontal plane, a lateral reach in front of the body in 0.5 s,
compared under minimum hand jerk, minimum torque change and minimum torque.
``--grid N`` adds the curvature of the minimum-torque-change paths (whatever
``--cost`` says) to N x N targets, N distances from the shoulder times N directions,
all within reach (one batched call, with a progress bar), and its map to the figure;
targets within 5 cm of the start are skipped and named.
"""

from __future__ import annotations

import csv
import io
import math
import os
import sys
import warnings

import numpy as np

from .. import optimal
from ..anthropometry import two_link_arm
from . import _output

COSTS = ("hand_jerk", "joint_jerk", "torque", "torque_change")


def add_command(sub) -> None:
    """Add the ``optimal`` subcommand to an argparse subparsers object."""
    p = sub.add_parser("optimal", help="optimal reaches of the two-link arm (minimum jerk / torque change / torque)",
                       description="Optimal reaches of the notes' two-link arm (1.70 m, 70 kg; shoulder at the "
                       "origin, hand positions in m, the horizontal plane by default) under each --cost "
                       "(jaxmb.optimize): per cost, the path's curvature (largest deviation from the start-end line, "
                       "in % of its length, positive to the left of the motion), peak hand speed and cost (hand jerk "
                       "m^2/s^5, joint jerk rad^2/s^5, torque N^2 m^2 s, torque change N^2 m^2/s); a figure and a CSV "
                       "in --out (with --grid, the curvature map in the figure and optimal_workspace.csv, "
                       "curvature_pct in %).")
    p.add_argument("--cost", default="hand_jerk,torque_change,torque",
                   help=f"comma-separated criteria among {', '.join(COSTS)} (default: hand_jerk,torque_change,torque)")
    p.add_argument("--start", type=float, nargs=2, default=(-0.25, 0.40), metavar=("X", "Y"),
                   help="hand start, m, shoulder at the origin (default -0.25 0.40)")
    p.add_argument("--end", type=float, nargs=2, default=(0.25, 0.40), metavar=("X", "Y"),
                   help="hand target, m (default 0.25 0.40)")
    p.add_argument("--duration", type=float, default=0.5, help="movement time, s (default 0.5)")
    p.add_argument("--gravity", type=float, default=0.0, help="m/s^2, along -y (default 0: horizontal plane)")
    p.add_argument("--height", type=float, default=1.70, help="body height, m (default 1.70)")
    p.add_argument("--mass", type=float, default=70.0, help="body mass, kg (default 70)")
    p.add_argument("--nodes", type=int, default=100, help="time nodes (default 100)")
    p.add_argument("--basis", type=int, default=10, metavar="K",
                   help="correction functions per joint (default 10; a hand-jerk reach whose straight path passes "
                        "near the shoulder needs 40 or more, and a note says so)")
    p.add_argument("--grid", type=int, default=0, metavar="N",
                   help="also map the curvature of the minimum torque change paths (whatever --cost says) to "
                        "N x N targets: N distances from the shoulder, evenly spaced across the arm's reach clear of "
                        "its edges, times N directions evenly spaced around it from +y; a target within 5 cm of "
                        "the start is skipped and named (default 0: off)")
    p.add_argument("--out", default="jaxmb-out/optimal",
                   help="folder for the figure and CSV files (default jaxmb-out/optimal)")
    p.set_defaults(func=run)


def _fail(msg: str) -> int:
    print(f"jaxmb optimal: error: {msg}", file=sys.stderr)
    return 2


#: chords shorter than this (m) have no curvature: NaN (a path back to its start)
MIN_CHORD = 1e-9


def curvature(hand):
    """Signed maximal lateral deviation from the start-end chord over its length, (...);
    NaN where the chord is shorter than MIN_CHORD (1e-9 m)."""
    h = np.asarray(hand)
    d = h[..., -1, :] - h[..., 0, :]
    length = np.linalg.norm(d, axis=-1)
    ok = length >= MIN_CHORD
    n = np.stack([-d[..., 1], d[..., 0]], -1) / np.where(ok, length, 1.0)[..., None]
    lateral = np.einsum("...ti,...i->...t", h - h[..., :1, :], n)
    k = np.argmax(np.abs(lateral), axis=-1)
    return np.take_along_axis(lateral, k[..., None], -1)[..., 0] / np.where(ok, length, np.nan)


def figure(results, title, grid=None):
    """Hand paths and speed profiles of the criteria, one figure; with ``grid`` (the
    arguments of :func:`map_panel` after its ``ax``), a third panel: the --grid map."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9.5 if grid is None else 14.5, 4), layout="constrained")
    ax_p, ax_v, *ax_m = fig.subplots(1, 2 if grid is None else 3)
    for k, (c, r) in enumerate(results.items()):
        h = np.asarray(r.hand)
        ax_p.plot(h[:, 0], h[:, 1], color=f"C{k}", lw=2, label=c.replace("_", " "))
        ax_v.plot(np.asarray(r.t), np.linalg.norm(np.asarray(r.hand_vel), axis=-1), color=f"C{k}", lw=2)
    ax_p.plot(0, 0, "ks")
    ax_p.set_aspect("equal", adjustable="datalim")
    ax_p.set_xlabel("x (m)")
    ax_p.set_ylabel("y (m)")
    ax_p.legend(fontsize=8)
    ax_p.set_title("hand paths (shoulder at the square)", fontsize=10)
    ax_v.set_xlabel("time (s)")
    ax_v.set_ylabel("hand speed (m/s)")
    ax_v.set_title("speed profiles", fontsize=10)
    if grid is not None:
        sc = map_panel(ax_m[0], *grid)
        fig.colorbar(sc, ax=ax_m[0], label="curvature (% of the chord, + left of the motion)")
    fig.suptitle(title, fontsize=10)
    return fig


#: --grid targets closer than this to the start (m) are skipped: a chord too short
#: for its curvature to mean anything
GRID_MIN_CHORD = 0.05


def grid_targets(model, n: int):
    """The --grid targets: n distances from the shoulder evenly spaced across the
    arm's reach, clear of its edges (from r_min + 2 % of r_max to 97 % of r_max), times
    n directions evenly spaced around the shoulder, counter-clockwise from +y. All
    are reachable. (n * n, 2) array, m, distance by distance."""
    r_min, r_max = optimal.workspace(model)
    radii = np.linspace(r_min + 0.02 * r_max, 0.97 * r_max, n)
    angles = np.pi / 2 + 2 * np.pi * np.arange(n) / n
    xy = np.stack([np.outer(radii, np.cos(angles)), np.outer(radii, np.sin(angles))], -1).reshape(-1, 2)
    return np.where(np.abs(xy) < 1e-12, 0.0, xy)  # 0, not cos(pi/2)'s 6e-17


def map_panel(ax, start, targets, curvature_pct, converged, skipped, reach):
    """Draw the --grid map on ``ax``: each target coloured by the curvature (%) of the
    minimum-torque-change path from ``start``; unconverged ones crossed, skipped ones
    (within GRID_MIN_CHORD of the start) grey, the reach's edges ``reach`` = (r_min,
    r_max) dashed. Returns the colour scale (for a colour bar)."""
    finite = np.abs(curvature_pct)[np.isfinite(curvature_pct)]
    lim = max(float(finite.max()), 1e-9) if finite.size else 1.0  # a symmetric scale around 0 %
    sc = ax.scatter(targets[:, 0], targets[:, 1], c=curvature_pct, cmap="RdBu_r", vmin=-lim, vmax=lim, s=70,
                    edgecolors="k", linewidths=0.5, zorder=3)
    bad = ~np.asarray(converged, bool)
    if bad.any():
        ax.plot(targets[bad, 0], targets[bad, 1], "kx", ms=9, zorder=4, label="not converged")
    if len(skipped):
        ax.plot(skipped[:, 0], skipped[:, 1], "o", color="0.75", ms=8, zorder=3,
                label=f"skipped (< {100 * GRID_MIN_CHORD:g} cm from the start)")
    a = np.linspace(0, 2 * np.pi, 200)
    for r in reach:
        ax.plot(r * np.cos(a), r * np.sin(a), color="0.6", lw=0.8, ls="--")
    ax.plot(0, 0, "ks")
    ax.plot(*start, "k*", ms=12, zorder=5, label="start")
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.legend(fontsize=7, loc="lower left")
    ax.set_title(f"map: minimum torque change from the start (star)\nto each of {len(targets)} targets "
                 f"({len(skipped)} skipped)", fontsize=10)
    return sc


def run(args) -> int:
    """``jaxmb optimal``: check every option, optimise, print, write; returns the exit status."""
    checked = _check(args)
    if isinstance(checked, int):
        return checked
    costs, model, start, end, tg, skipped = checked
    done = _optimise(args, costs, model, start, end, tg, skipped)
    if isinstance(done, int):
        return done
    results, grid_rows, grid_result = done
    if not args.out:
        return 0
    return _write(args, results, model, start, tg, skipped, grid_rows, grid_result)


def _check(args):
    """Every check before the first optimisation (and the ``--out`` folder, created):
    the exit status 2 after the error line, or (costs, model, start, end (m), the grid's
    targets or None, the targets it skips or None)."""
    costs = [c.strip() for c in args.cost.split(",") if c.strip()]
    bad = [c for c in costs if c not in COSTS]
    if not costs or bad:
        return _fail(f"unknown cost {bad[0] if bad else '(none)'!r}: choose among {', '.join(COSTS)}")
    if args.basis < 1:
        return _fail(f"--basis must be >= 1, got {args.basis}")
    need = optimal.min_nodes(args.basis)  # optimize's default quadrature
    if args.nodes < need:
        return _fail(f"--nodes must be >= {need} (2 (basis + 3) Gauss-Legendre points for the {args.basis} "
                     f"correction functions; fewer let the optimiser exploit the quadrature error), got {args.nodes}")
    if not (args.height > 0 and args.mass > 0 and math.isfinite(args.height) and math.isfinite(args.mass)):
        return _fail("--height and --mass must be finite numbers > 0")
    if args.grid < 0 or args.grid == 1:
        return _fail("--grid must be 0 (off) or >= 2")
    if not all(math.isfinite(v) for v in (*args.start, *args.end)):
        return _fail("--start and --end must be finite numbers (m)")
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        return _fail(f"--out {args.out} exists and is not a folder")
    try:
        model = two_link_arm(height=args.height, body_mass=args.mass, gravity=args.gravity)
    except ValueError as e:  # e.g. a height in centimetres
        return _fail(str(e).replace("height ", "--height ", 1).replace("body_mass ", "--mass ", 1))
    r_min, r_max = optimal.workspace(model)
    for name, p in (("--start", args.start), ("--end", args.end)):
        r = float(np.hypot(*p))
        if not r_min <= r <= r_max:
            # the digits that tell |p| from the bound it passes (0.750 against 0.750 once)
            bound = r_max if r > r_max else r_min
            d = next((d for d in range(3, 16) if f"{r:.{d}f}" != f"{bound:.{d}f}"), 16)
            return _fail(f"{name} {p[0]:g} {p[1]:g} is out of reach: |p| = {r:.{d}f} m, the arm reaches "
                         f"{r_min:.{d}f} m <= |p| <= {r_max:.{d}f} m")
    start, end = np.asarray(args.start), np.asarray(args.end)
    if np.linalg.norm(end - start) < MIN_CHORD:
        return _fail(f"--start and --end are the same point ({args.start[0]:g} {args.start[1]:g}): a reach needs "
                     f"a target {MIN_CHORD:g} m or more from the start")
    tg = None
    if args.grid:
        tg = grid_targets(model, args.grid)
        near = np.linalg.norm(tg - start, axis=-1) < GRID_MIN_CHORD
        tg, skipped = tg[~near], tg[near]
        if len(tg) == 0:  # an N x N grid around the shoulder: not for N >= 2
            return _fail(f"--grid {args.grid}: every target is within {100 * GRID_MIN_CHORD:g} cm of the start")
    if args.out:
        try:  # after the checks, before the optimisations: not a traceback after them
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            return _fail(f"cannot create --out folder {args.out!r}: {e.strerror or e}")
    return costs, model, start, end, tg, (skipped if args.grid else None)


def _optimise(args, costs, model, start, end, tg, skipped):
    """The optimal reaches of each cost and those of the grid, printed: the exit status 2
    after the error line, or (results, the grid's rows as CSV text or None, its
    curvature (%) and convergence)."""
    try:
        with warnings.catch_warnings(record=True) as caught:  # as notes, not warning lines with a source path
            warnings.simplefilter("always")
            results = {c: optimal.optimize(model, start, end, args.duration, target="hand", cost=c, nodes=args.nodes,
                                         basis=args.basis)
                       for c in costs}  # fmt: skip
    except ValueError as e:
        return _fail(str(e).splitlines()[0])
    for w in {str(w.message): w for w in caught}.values():
        note = str(w.message).replace("Raise basis= (nodes >= 2 (basis + 3))", "Raise --basis (--nodes >= 2 (basis + 3))")
        print(f"jaxmb optimal: note: {note}", file=sys.stderr)
    print(f"Two-link arm ({args.height:g} m, {args.mass:g} kg), g = {args.gravity:g} m/s^2, "
          f"hand {tuple(args.start)} -> {tuple(args.end)} m in {args.duration:g} s")
    print(f"{'criterion':>15s}{'curvature':>11s}{'peak speed':>12s}{'cost':>12s}{'iterations':>11s}  status")
    for c, r in results.items():
        speed = np.linalg.norm(np.asarray(r.hand_vel), axis=-1)
        print(f"{c:>15s}{100 * float(curvature(r.hand)):10.2f}%{speed.max():10.3f} m/s{float(r.cost):12.4g}"
              f"{int(r.iterations):11d}  {optimal.STATUS[int(r.status)]}")
    grid_rows = None
    if tg is not None:
        try:
            res = optimal.optimize(model, start, tg, args.duration, target="hand", cost="torque_change",
                                 nodes=args.nodes, basis=args.basis, chunk=max(1, -(-len(tg) // 20)), progress=True)
        except ValueError as e:
            return _fail(str(e).splitlines()[0])
        k = 100 * curvature(res.hand)  # %, as the console prints it
        converged = np.asarray(res.converged)
        buf = io.StringIO()
        w = csv.writer(buf)
        w.writerow(["x_m", "y_m", "curvature_pct", "converged"])  # deviation, % of the chord's length
        for (x, y), kk, ok in zip(tg, k, converged):
            w.writerow([f"{x:.6g}", f"{y:.6g}", f"{kk:.6g}", int(ok)])
        grid_rows = buf.getvalue()
        print(f"workspace: {args.grid} x {args.grid} targets ({args.grid} distances x {args.grid} directions): "
              f"{len(tg)} minimum-torque-change reaches, {int(np.sum(converged))} converged, "
              f"|curvature| median {np.median(np.abs(k)):.1f} %, max {np.max(np.abs(k)):.1f} %")
        for x, y in skipped:
            print(f"workspace: skipped target ({x:.4f}, {y:.4f}) m: within {100 * GRID_MIN_CHORD:g} cm of the start")
    return results, grid_rows, (k, converged) if tg is not None else None


def _write(args, results, model, start, tg, skipped, grid_rows, grid_result) -> int:
    """The trajectories (CSV), the figure and the grid's curvatures, as one set into
    ``--out``."""
    k, converged = grid_result if grid_result is not None else (None, None)
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(["criterion", "t_s", "q1_rad", "q2_rad", "x_m", "y_m", "vx_m_s", "vy_m_s", "tau1_Nm", "tau2_Nm"])
    for c, r in results.items():
        for row in zip(np.asarray(r.t), *np.asarray(r.q).T, *np.asarray(r.hand).T, *np.asarray(r.hand_vel).T,
                       *np.asarray(r.tau).T):
            w.writerow([c] + [f"{v:.10g}" for v in row])
    grid = None if tg is None else (start, tg, k, converged, skipped, optimal.workspace(model))
    fig = figure(results, f"optimal reaches, hand ({args.start[0]:g}, {args.start[1]:g}) m $\\rightarrow$ "
                 f"({args.end[0]:g}, {args.end[1]:g}) m in {args.duration:g} s, g = {args.gravity:g} m/s$^2$", grid)
    files = {os.path.join(args.out, "optimal_reach.csv"): buf.getvalue(),
             os.path.join(args.out, "optimal_reach.png"): _output._png(fig)}
    workspace = os.path.join(args.out, "optimal_workspace.csv")
    if grid_rows is not None:
        files[workspace] = grid_rows
    try:  # every file or none (the writer names the file it could not write)
        removed = _output._write_outputs(files, "optimal")
    except OSError as e:
        return _fail(f"cannot write the outputs (nothing was written): {e}")
    print("\n".join(f"{what}: {path}" for what, path in zip(("trajectories", "figure", "workspace"), files)))
    for path in removed:
        print(f"removed {path} of an earlier run" + (" (no --grid this time)" if os.path.basename(path) == os.path.basename(workspace) else ""))
    return 0
