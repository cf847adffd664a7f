"""``jaxmb reach``: the joint torques of a minimum-jerk reach of the two-link arm
(:func:`jaxmb.reaching.reaching_torques`), printed term by term and written to
``--out`` as CSV, JSON and a figure."""

from __future__ import annotations

import json
import math
import os
import sys

import numpy as np

from ..anthropometry import two_link_arm
from ..plot import torque_components_figure
from ..reaching import reach_endpoints, reaching_torques, torque_summary
from . import _output


def add_command(sub) -> None:
    """Add the ``reach`` subcommand to an argparse subparsers object."""
    p = sub.add_parser("reach", help="joint torques of a minimum-jerk reach of the two-link arm",
                       description="Joint torques (N m) of a minimum-jerk reach (Flash & Hogan: a straight hand path "
                       "from --start to --end in --duration) of the notes' two-link arm (1.70 m, 70 kg; shoulder at "
                       "the origin, x forward, y up, gravity along -y, the elbow flexed counter-clockwise), from the "
                       "inverse kinematics and jaxmb's inverse dynamics, with the share of each term (inertial, "
                       "Coriolis, gravity). It prints the movement (hand points and joint angles at both ends); in "
                       "--out the torques over time (reach_torques.csv), the movement, peaks and RMS "
                       "(reach_summary.json) and a figure (reach.png).")
    p.add_argument("--start", type=float, nargs=2, default=None, metavar=("X", "Y"),
                   help="hand start, m, in the shoulder frame (default: the notes' start, upper arm hanging "
                        "vertically, elbow flexed 10 deg: (0.0747, -0.7432) m for the default arm)")
    p.add_argument("--end", type=float, nargs=2, default=None, metavar=("X", "Y"),
                   help="hand end, m, in the shoulder frame (default: the notes' end, upper arm forward and "
                        "horizontal, elbow at 90 deg: (0.3196, 0.4301) m)")
    p.add_argument("--duration", type=float, default=0.5, help="movement time, s (default 0.5)")
    p.add_argument("--gravity", type=float, default=9.81, help="m/s^2 (default 9.81; 0: horizontal plane)")
    p.add_argument("--samples", type=int, default=201, help="time samples of the movement (default 201)")
    p.add_argument("--out", default="jaxmb-out/reach",
                   help="folder for the torques, summary and figure (default jaxmb-out/reach; '' for none)")  # fmt: skip
    p.set_defaults(func=run)


def _movement(res, duration: float) -> str:
    """The reach in words: hand endpoints (m) and joint angles (deg) at both ends."""
    (x0, y0), (x1, y1) = res["start"], res["end"]
    sh, el = np.rad2deg(res["q"][[0, -1], 0]), np.rad2deg(res["q"][[0, -1], 1])
    return (f"hand ({x0:.4f}, {y0:.4f}) m -> ({x1:.4f}, {y1:.4f}) m, straight, in {duration:g} s (shoulder at "
            f"the origin, x forward, y up); shoulder {sh[0]:.1f} -> {sh[1]:.1f} deg from +x, elbow {el[0]:.1f} -> "
            f"{el[1]:.1f} deg")


def _figure(res, duration: float, gravity: float):
    """The torque components' figure: the joint torques (N m) of each joint, the reach
    in the title."""
    (x0, y0), (x1, y1) = res["start"], res["end"]
    title = (f"Joint torques of a minimum-jerk reach, hand ({x0:.3f}, {y0:.3f}) m $\\rightarrow$ "
             f"({x1:.3f}, {y1:.3f}) m in {duration:g} s\n(shoulder at the origin, x forward, y up; "
             f"g = {gravity:g} m/s$^2$)")
    fig = torque_components_figure(res["t"], res, joint_names=("shoulder", "elbow"), title=title,
                                   model=two_link_arm())  # the units: two joint angles, N m  # fmt: skip
    for ax, joint in zip(fig.axes, ("shoulder", "elbow")):  # joint angles: the generalized forces are torques
        ax.set_ylabel(f"{joint} torque (N m)")
    return fig


def _plot(res, duration: float, gravity: float) -> bytes:
    """The torque components' figure (:func:`_figure`) as PNG bytes."""
    return _output._png(_figure(res, duration, gravity), dpi=120)


def _json_text(obj) -> str:
    """JSON with non-finite numbers as null (strict JSON has no NaN or Infinity)."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return None if isinstance(x, float) and not math.isfinite(x) else x

    return json.dumps(clean(obj), indent=1, allow_nan=False)


def run(args) -> int:
    """``jaxmb reach``: check the options, compute, print, write; returns the exit status."""
    problem = _check(args)
    if problem:
        print(f"jaxmb reach: error: {problem}", file=sys.stderr)
        return 2
    res = reaching_torques(args.duration, gravity=args.gravity, samples=args.samples, start=args.start, end=args.end)
    summary = torque_summary(res)
    movement = _movement(res, args.duration)
    _print(args, summary, movement)
    return _write(args, res, summary, movement) if args.out else 0


def _check(args):
    """The problem with the options (the endpoints, the ``--out`` folder, created
    here), before the work: a message, or None."""
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        return f"--out {args.out} exists and is not a folder"
    try:  # the endpoints before the work and before the folder
        L1, L2 = (float(x) for x in two_link_arm().length)
        reach_endpoints(args.start, args.end, L1, L2, names=("--start", "--end"))
    except ValueError as e:
        return str(e)
    if args.out:
        try:  # before the work: an error, not a traceback after it
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            return f"cannot create --out folder {args.out!r}: {e.strerror or e}"
    return None


def _print(args, summary, movement) -> None:
    """The reach and each torque term's peak and RMS per joint, on stdout."""
    print(f"Two-link arm (Dempster via the notes: 1.70 m, 70 kg), minimum-jerk reach in {args.duration} s, "
          f"g = {args.gravity} m/s^2")
    print(f"reach: {movement}")
    print(f"{'joint':10s}{'term':>10s}{'peak N m':>12s}{'rms N m':>12s}")
    for joint, r in summary.items():
        for k in ("inertial", "coriolis", "gravity", "total"):
            print(f"{joint:10s}{k:>10s}{r[k]['peak']:12.3f}{r[k]['rms']:12.3f}")
        print(f"{joint:10s} |M qdd + C| > |G| during {100 * r['fraction_dynamic_gt_gravity']:.0f}% of the movement")


def _write(args, res, summary, movement) -> int:
    """The torques (CSV), the summary (JSON) and the figure, as one set into ``--out``."""
    png = _plot(res, args.duration, args.gravity)
    angles = {f"{end}_angles_deg": {joint: float(np.rad2deg(res["q"][k, j])) for j, joint in
                                    enumerate(("shoulder", "elbow"))} for end, k in (("start", 0), ("end", -1))}
    meta = {"movement": movement, "start_hand_m": res["start"].tolist(), "end_hand_m": res["end"].tolist(),
            **angles, "duration_s": args.duration, "gravity_m_s2": args.gravity, "samples": args.samples}
    files = {os.path.join(args.out, "reach_torques.csv"): _reach_csv(res),
             os.path.join(args.out, "reach_summary.json"): _json_text({**meta, **summary}),
             os.path.join(args.out, "reach.png"): png}  # fmt: skip
    try:  # one set, atomically (the writer names the file it could not write)
        removed = _output._write_outputs(files, "reach")
    except OSError as e:
        print(f"jaxmb reach: error: cannot write the outputs (nothing was written): {e}", file=sys.stderr)
        return 2
    print("\n".join(f"{what}: {path}" for what, path in zip(("torques", "summary", "figure"), files)))
    for path in removed:
        print(f"removed {path} of an earlier run")
    return 0


def _reach_csv(res) -> str:
    """The reach's time series as CSV text: time, joint angles, and each torque term
    of each joint (N m), the units in the column names."""
    cols = {"time_s": res["t"]}
    for j, joint in enumerate(("shoulder", "elbow")):
        cols[f"{joint}_angle_rad"] = res["q"][:, j]
    for k in ("inertial", "coriolis", "gravity", "total"):
        for j, joint in enumerate(("shoulder", "elbow")):
            cols[f"{joint}_{k}_Nm"] = res[k][:, j]
    rows = np.column_stack(list(cols.values()))
    return ",".join(cols) + "\n" + "".join(",".join(f"{v:.10g}" for v in row) + "\n" for row in rows)
