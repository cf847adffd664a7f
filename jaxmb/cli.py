"""Command line: ``jaxmb gait`` (the quick-start job), ``jaxmb reach`` and the subcommands of
the modules in ``_COMMANDS``. ``jaxmb bench`` only says that the benchmarks run from a source
checkout (``python -m benchmarks``): they are not installed with the package.

The command line switches float64 on for its own computations, and JAX's persistent
compilation cache (see :func:`_compile_cache`); the library does neither on import.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

__all__ = ["main", "reaching_torques"]

# modules of this package that each define ``add_command(subparsers)``: a subcommand
# whose arguments and work live beside the feature it runs
_COMMANDS: tuple[str, ...] = ("_cmd_gait", "_cmd_identify", "_cmd_optimal")

#: the movement times (s) that ``jaxmb reach`` and ``jaxmb optimal`` accept: the
#: fastest human reaches take about 0.1 s, slow ones tens of seconds
_DURATION = (0.05, 60.0)


def reaching_torques(duration: float = 0.5, *, gravity: float = 9.81, samples: int = 201,
                     height: float = 1.70, body_mass: float = 70.0, elbow0_deg: float = 10.0,
                     start=None, end=None):
    """Joint torques of a minimum-jerk reach with the two-link arm of the notes.

    The hand moves along a straight minimum-jerk path from ``start`` to ``end``
    (Flash & Hogan), the elbow flexed counter-clockwise (``two_link_ik``'s "up"),
    in the arm's plane: shoulder at the origin, x forward, y up, gravity along -y.
    By default, the notes' reach: from below the shoulder (upper arm vertical, elbow
    flexed ``elbow0_deg``; the notes start fully extended, a singular point of the
    inverse kinematics that they coerce) to the upper arm forward and horizontal with
    the elbow at 90 degrees. Angles come from the inverse kinematics and their time
    derivatives from forward-mode autodiff (exact); the torques are decomposed into
    M qdd, C and G with jit and vmap over time.

    Args:
      duration: movement time, s.
      start, end: hand positions (x, y), m, in the shoulder frame; None: the notes'
        points above. Both must lie strictly inside the arm's reach
        (|L1 - L2| < |p| < L1 + L2: on its edges the arm is straight or folded and the
        joint speeds infinite), and so must the straight path between them.

    Returns:
      dict of numpy arrays: t (T,), q, qd, qdd (T, 2) (q: shoulder angle from +x and
      elbow angle, rad, continuous in time) and the torque terms "inertial",
      "coriolis", "gravity", "total" (T, 2), N m; "start", "end" (2,) the hand's
      endpoints, m.

    Raises:
      ValueError: a start or end that is not two finite numbers, is out of reach,
      or equals the other; a straight path that passes inside the arm's inner reach.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    from . import anthropometry, torque_components
    from .optimal import minimum_jerk, time_derivatives, two_link_ik

    model = anthropometry.two_link_arm(height=height, body_mass=body_mass, gravity=gravity)
    L1, L2 = (float(x) for x in model.length)
    x0, x1 = _reach_endpoints(start, end, L1, L2, elbow0_deg=elbow0_deg)
    t = np.linspace(0.0, duration, samples)

    q_of_t = lambda s: two_link_ik(minimum_jerk(x0, x1, duration, s), L1, L2, elbow="up")  # noqa: E731
    q, qd, qdd = time_derivatives(q_of_t, jnp.asarray(t))
    parts = jax.jit(jax.vmap(lambda a, b, c: torque_components(model, a, b, c)))(q, qd, qdd)
    out = {k: np.asarray(v) for k, v in parts.items() if k != "external"}
    # the angles without arctan2's jumps of 2 pi (the torques depend on them through
    # sines and cosines only, and the rates come from autodiff)
    out.update(t=t, q=np.unwrap(np.asarray(q), axis=0), qd=np.asarray(qd), qdd=np.asarray(qdd), start=x0, end=x1)
    return out


def _reach_endpoints(start, end, L1: float, L2: float, *, elbow0_deg: float = 10.0, names=("start", "end")):
    """The checked hand endpoints of :func:`reaching_torques`, two (2,) arrays, m.

    ``start``/``end`` None: the notes' points (upper arm vertical with the elbow
    flexed ``elbow0_deg``; upper arm forward and horizontal, elbow at 90 degrees).
    ``names`` are the names the errors use (the command line's ``--start``, ``--end``).

    Raises:
      ValueError: naming the point: not two finite numbers, not strictly inside
      |L1 - L2| < |p| < L1 + L2 (m), both the same point, or a straight path between
      them that passes inside the inner reach |L1 - L2| (where the hand cannot go).
    """
    import numpy as np

    e0 = np.deg2rad(elbow0_deg)
    default = (np.array([L2 * np.sin(e0), -L1 - L2 * np.cos(e0)]), np.array([L1, L2]))
    inner, outer = abs(L1 - L2), L1 + L2
    points = []
    for name, p, d in zip(names, (start, end), default):
        if p is None:
            points.append(d)
            continue
        a = np.asarray(p, dtype=float)
        if a.shape != (2,) or not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be two finite numbers, the hand's x and y in m, "
                             f"got {np.asarray(p).tolist()}")
        r = float(np.hypot(*a))
        if not inner < r < outer:
            bound = outer if r >= outer else inner
            digits = next((k for k in range(3, 16) if f"{r:.{k}f}" != f"{bound:.{k}f}"), 4)  # 4: on the edge
            raise ValueError(f"{name} {a[0]:g} {a[1]:g} is out of reach: |p| = {r:.{digits}f} m from the shoulder, "
                             f"the hand reaches {inner:.{digits}f} m < |p| < {outer:.{digits}f} m (on the edges the "
                             "arm is straight or folded and its joint speeds infinite)")
        points.append(a)
    x0, x1 = points
    chord = x1 - x0
    length = float(np.linalg.norm(chord))
    if length < 1e-9:
        raise ValueError(f"{names[0]} and {names[1]} are the same point ({x0[0]:g} {x0[1]:g}): a reach needs a "
                         "target 1e-9 m or more from the start")
    s = float(np.clip(-x0 @ chord / length**2, 0.0, 1.0))
    closest = float(np.linalg.norm(x0 + s * chord))
    if closest <= inner:
        raise ValueError(f"the straight hand path from {names[0]} {x0[0]:g} {x0[1]:g} to {names[1]} {x1[0]:g} "
                         f"{x1[1]:g} passes {closest:.4f} m from the shoulder, inside the arm's inner reach "
                         f"|L1 - L2| = {inner:.4f} m, where the hand cannot go")
    return x0, x1


def _summary(res):
    """Peak and RMS of each term, and the fraction of time the dynamic terms exceed gravity."""
    import numpy as np

    dyn = res["inertial"] + res["coriolis"]
    rows = {}
    for j, joint in enumerate(("shoulder", "elbow")):
        r = {k: {"peak": float(np.max(np.abs(res[k][:, j]))), "rms": float(np.sqrt(np.mean(res[k][:, j] ** 2)))}
             for k in ("inertial", "coriolis", "gravity", "total")}
        r["fraction_dynamic_gt_gravity"] = float(np.mean(np.abs(dyn[:, j]) > np.abs(res["gravity"][:, j])))
        rows[joint] = r
    return rows


def _movement(res, duration: float) -> str:
    """The reach in words: hand endpoints (m) and joint angles (deg) at both ends."""
    import numpy as np

    (x0, y0), (x1, y1) = res["start"], res["end"]
    sh, el = np.rad2deg(res["q"][[0, -1], 0]), np.rad2deg(res["q"][[0, -1], 1])
    return (f"hand ({x0:.4f}, {y0:.4f}) m -> ({x1:.4f}, {y1:.4f}) m, straight, in {duration:g} s (shoulder at "
            f"the origin, x forward, y up); shoulder {sh[0]:.1f} -> {sh[1]:.1f} deg from +x, elbow {el[0]:.1f} -> "
            f"{el[1]:.1f} deg")


def _figure(res, duration: float, gravity: float):
    """The torque components' figure: the joint torques (N m) of each joint, the reach
    in the title."""
    from .anthropometry import two_link_arm
    from .plot import torque_components_figure

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
    from .io import _png

    return _png(_figure(res, duration, gravity), dpi=120)


def _json_text(obj) -> str:
    """JSON with non-finite numbers as null (strict JSON has no NaN or Infinity)."""
    import math

    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [clean(v) for v in x]
        return None if isinstance(x, float) and not math.isfinite(x) else x

    return json.dumps(clean(obj), indent=1, allow_nan=False)


def _cmd_reach(args):
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"jaxmb reach: error: --out {args.out} exists and is not a folder", file=sys.stderr)
        return 2
    from .anthropometry import two_link_arm

    try:  # the endpoints before the work and before the folder
        L1, L2 = (float(x) for x in two_link_arm().length)
        _reach_endpoints(args.start, args.end, L1, L2, names=("--start", "--end"))
    except ValueError as e:
        print(f"jaxmb reach: error: {e}", file=sys.stderr)
        return 2
    if args.out:
        try:  # before the work: an error, not a traceback after it
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            print(f"jaxmb reach: error: cannot create --out folder {args.out!r}: {e.strerror or e}", file=sys.stderr)
            return 2
    res = reaching_torques(args.duration, gravity=args.gravity, samples=args.samples, start=args.start, end=args.end)
    summary = _summary(res)
    movement = _movement(res, args.duration)
    print(f"Two-link arm (Dempster via the notes: 1.70 m, 70 kg), minimum-jerk reach in {args.duration} s, "
          f"g = {args.gravity} m/s^2")
    print(f"reach: {movement}")
    print(f"{'joint':10s}{'term':>10s}{'peak N m':>12s}{'rms N m':>12s}")
    for joint, r in summary.items():
        for k in ("inertial", "coriolis", "gravity", "total"):
            print(f"{joint:10s}{k:>10s}{r[k]['peak']:12.3f}{r[k]['rms']:12.3f}")
        print(f"{joint:10s} |M qdd + C| > |G| during {100 * r['fraction_dynamic_gt_gravity']:.0f}% of the movement")
    if args.out:
        import numpy as np

        from .io import _write_outputs

        png = _plot(res, args.duration, args.gravity)
        angles = {f"{end}_angles_deg": {joint: float(np.rad2deg(res["q"][k, j])) for j, joint in
                                        enumerate(("shoulder", "elbow"))} for end, k in (("start", 0), ("end", -1))}
        meta = {"movement": movement, "start_hand_m": res["start"].tolist(), "end_hand_m": res["end"].tolist(),
                **angles, "duration_s": args.duration, "gravity_m_s2": args.gravity, "samples": args.samples}
        files = {os.path.join(args.out, "reach_torques.csv"): _reach_csv(res),
                 os.path.join(args.out, "reach_summary.json"): _json_text({**meta, **summary}),
                 os.path.join(args.out, "reach.png"): png}  # fmt: skip
        try:  # one set, atomically (the writer names the file it could not write)
            removed = _write_outputs(files, "reach")
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
    import numpy as np

    cols = {"time_s": res["t"]}
    for j, joint in enumerate(("shoulder", "elbow")):
        cols[f"{joint}_angle_rad"] = res["q"][:, j]
    for k in ("inertial", "coriolis", "gravity", "total"):
        for j, joint in enumerate(("shoulder", "elbow")):
            cols[f"{joint}_{k}_Nm"] = res[k][:, j]
    rows = np.column_stack(list(cols.values()))
    return ",".join(cols) + "\n" + "".join(",".join(f"{v:.10g}" for v in row) + "\n" for row in rows)


def _cmd_bench(args):
    """``jaxmb bench``, removed: the benchmarks are the ``benchmarks/`` folder of a source
    checkout, which is not installed with the package (the command could never find it
    from the installed ``jaxmb``); say where they run instead of running anything."""
    print("jaxmb bench: error: removed: the benchmarks are not installed with the package; in a source "
          "checkout (pip install -e \".[bench]\"), run them from its root: python -m benchmarks "
          "(python -m benchmarks --help; benchmarks/README.md)", file=sys.stderr)
    return 2


def default_cache_dir() -> str:
    """Where the command line keeps compiled programs: ``$JAXMB_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/jaxmb/xla``, else ``~/.cache/jaxmb/xla``."""
    path = os.environ.get("JAXMB_CACHE_DIR")
    if path:
        return path
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jaxmb", "xla")


def _compile_cache(path: str | None, explicit: bool = False) -> str | None:
    """Switch on JAX's persistent compilation cache for this command-line process.

    The same command run again (on other files of the same shapes, or with options
    that do not change the programs) then loads its compiled programs from disk
    instead of compiling them again: ``jaxmb optimal`` took 10.4 s on a cold cache
    and 4.0 s on a warm one, ``jaxmb identify`` 6.8 s and 3.6 s (medians on this
    project's 2-core CPU; ``python -m benchmarks.bench_cli``, recorded in
    ``benchmarks/results_cli.json``).

    ``path`` None (``--no-cache``): JAX's cache is switched off, even one set by
    ``JAX_COMPILATION_CACHE_DIR``. Otherwise a cache that JAX was already given
    (that variable, or a caller's ``jax.config``) is kept, unless ``explicit``
    (``--cache-dir``). Every program is stored however short its compile, unless
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS`` says otherwise. A folder that
    cannot be created or written means no cache and a note on stderr, never a
    failure. Returns the folder in use, or None."""
    import jax

    if path is None:
        jax.config.update("jax_enable_compilation_cache", False)
        return None
    if jax.config.jax_compilation_cache_dir and not explicit:
        return jax.config.jax_compilation_cache_dir
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK):
            raise OSError("not writable")
    except OSError as e:
        print(f"jaxmb: no compilation cache ({path}: {e})", file=sys.stderr)
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    if "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return path


def _plain(text: str) -> str:
    """reST roles and literals as plain text (``:func:`jaxmb.x``` and ````x```` -> x)."""
    import re

    return re.sub(r":[a-z]+:`~?([^`]+)`", r"\1", text).replace("``", "")


def _run(argv, ran: dict) -> int:
    parser = argparse.ArgumentParser(
        prog="jaxmb", description="Planar multibody dynamics in JAX",
        epilog="Compiled programs are kept in a cache folder between runs (default "
               f"{default_cache_dir()}; JAXMB_CACHE_DIR sets it); --no-cache switches that off.",
    )  # fmt: skip
    parser.add_argument("--cache-dir", default=None,
                        help="folder of the persistent compilation cache (default: $JAX_COMPILATION_CACHE_DIR when "
                             "JAX was given one, else $JAXMB_CACHE_DIR, else $XDG_CACHE_HOME/jaxmb/xla, "
                             "else ~/.cache/jaxmb/xla)")  # fmt: skip
    parser.add_argument("--no-cache", action="store_true", help="compile everything afresh; keep nothing on disk")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{gait,reach,optimal,identify}")
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
    p.set_defaults(func=_cmd_reach)
    # not listed in --help (it only points elsewhere): sub's metavar names the others
    b = sub.add_parser("bench", add_help=False, prefix_chars="+")  # any arguments (--help, --only ...): the pointer, not a usage error
    b.add_argument("rest", nargs="*")
    b.set_defaults(func=_cmd_bench)
    import importlib

    for name in _COMMANDS:  # each module's add_command(sub) adds its subcommand
        importlib.import_module(f"{__package__}.{name}").add_command(sub)
    for p in sub.choices.values():  # descriptions from docstrings: no reST markup in --help
        if p.description:
            p.description = _plain(p.description)
    args = parser.parse_args(argv)
    ran["command"] = args.command
    if args.command != "bench":
        import jax

        jax.config.update("jax_enable_x64", True)  # the command line computes in float64
        _compile_cache(None if args.no_cache else (args.cache_dir or default_cache_dir()), bool(args.cache_dir))
    import math

    # the options that the reach and optimal commands share: a one-line error, exit 2.
    # Both move a human arm: a duration outside 0.05 to 60 s is no arm movement (at
    # 1e-9 s the default reach had peak hand speeds of 9e8 m/s), most likely a typo
    duration, gravity = getattr(args, "duration", 1.0), getattr(args, "gravity", 0.0)
    problem = ("--duration must be a finite number > 0 (s)" if not (math.isfinite(duration) and duration > 0) else
               f"--duration must be between {_DURATION[0]:g} and {_DURATION[1]:g} s for a human arm's movement, "
               f"got {duration:g} s ({'jaxmb.cli.reaching_torques' if args.command == 'reach' else 'jaxmb.optimize'} "
               "takes any)"
               if not _DURATION[0] <= duration <= _DURATION[1] else
               "--gravity must be a finite number (m/s^2)" if not math.isfinite(gravity) else
               "--samples must be >= 3" if getattr(args, "samples", 3) < 3 else None)  # fmt: skip
    if problem:
        print(f"jaxmb {args.command}: error: {problem}", file=sys.stderr)
        return 2
    return args.func(args)


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is: the same
    clean-up (a set of output files is left complete or as it was), then exit 143."""


def _terminate(signum, frame):
    _RECEIVED.append("SIGTERM")
    raise _Terminated()


def _interrupt(signum, frame):
    _RECEIVED.append("SIGINT")
    raise KeyboardInterrupt


#: the signals received during this command: an interrupt raised where Python ignores
#: exceptions (a garbage-collection callback of JAX's printed "Exception ignored" and
#: the command ran on to exit 0) still ends the command with its status
_RECEIVED: list = []


def main(argv=None) -> int:
    """Run the ``jaxmb`` command line (``argv``: its arguments, default
    ``sys.argv[1:]``); returns the exit status (141 when its output pipe closes:
    ``jaxmb reach | head -1``, without a traceback). Ctrl-C (SIGINT) or SIGTERM ends it
    with one line on stderr, ``jaxmb <command>: interrupted (SIGINT)``, and the
    status 130 (SIGTERM: 143), not a traceback; output files being written are left
    as the earlier set or the complete new one (:func:`jaxmb.io._write_outputs`)."""
    import signal
    import threading

    ran = {"command": None}
    main_thread = threading.current_thread() is threading.main_thread()
    del _RECEIVED[:]
    previous = {}
    if main_thread:
        previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, _terminate)
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not where SIGINT is ignored
            previous[signal.SIGINT] = signal.signal(signal.SIGINT, _interrupt)
    try:
        status = _run(argv, ran)
        if not _RECEIVED:
            return status
        name = _RECEIVED[0]  # raised where Python swallowed it: the command ran on
    except KeyboardInterrupt as e:
        name = "SIGTERM" if isinstance(e, _Terminated) else "SIGINT"
    except BrokenPipeError:
        # stdout closed by its reader (jaxmb reach | head -1): no traceback; Python's
        # flush at exit would raise again, so stdout goes to /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a process killed by it
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    print(f"jaxmb{' ' + ran['command'] if ran['command'] else ''}: interrupted ({name})", file=sys.stderr)
    return 143 if name == "SIGTERM" else 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
