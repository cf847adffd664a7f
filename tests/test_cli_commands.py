"""The bench, optimal and reach commands (issue 38, items 12, 13, 14 and 17's figures)."""

import json
import re
import sys
import types

import numpy as np
import pytest

from jaxmb.cli import main


@pytest.mark.parametrize("args", [[], ["--only", "inverse_dynamics"], ["--help"], ["--quick", "--no-wait"]])
def test_bench_is_gone_and_points_to_python_m_benchmarks(monkeypatch, capsys, args):
    # before: from a source checkout's root it ran benchmarks/ (its options only after
    # an undocumented --), from the installed command anywhere else it said "run it
    # from the repository root"; now it runs nothing anywhere and says where they run
    fake = types.ModuleType("benchmarks.__main__")
    fake.main = lambda argv=None: pytest.fail(f"jaxmb bench ran the benchmarks with {argv}")
    monkeypatch.setitem(sys.modules, "benchmarks.__main__", fake)
    assert main(["bench", *args]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1, captured
    assert err[0].startswith("jaxmb bench: error: removed: the benchmarks are not installed with the package")
    assert "run them from its root: python -m benchmarks" in err[0]


def test_help_lists_only_the_commands_that_run(capsys):
    # bench, which only points to python -m benchmarks, was listed as a command
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "{gait,reach,optimal,identify,residuals}" in out and "bench" not in out


def test_an_interrupt_that_python_swallowed_still_ends_with_status_130(monkeypatch, capsys):
    # a SIGINT raised inside a callback whose exceptions Python ignores (JAX's
    # garbage-collection hook printed "Exception ignored ... KeyboardInterrupt") let
    # the command run on and exit 0
    import signal

    from jaxmb import cli

    def run(argv, ran):
        ran["command"] = "optimal"
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # swallowed, as in an ignored callback
        return 0

    monkeypatch.setattr(cli, "_run", run)
    assert main(["optimal"]) == 130
    assert capsys.readouterr().err.strip().splitlines() == ["jaxmb optimal: interrupted (SIGINT)"]
    # and the handler is the caller's again afterwards
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_output_into_a_closed_pipe_is_no_traceback():
    # jaxmb reach | head -1 printed a BrokenPipeError traceback and exited 1
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "jaxmb", "--no-cache", "reach", "--samples", "21", "--out", ""],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    proc.stdout.close()  # the reader is gone before the command prints (it takes seconds to start)
    err = proc.stderr.read()
    assert proc.wait(timeout=300) == 141 and err == "", err  # 128 + SIGPIPE, as a shell reports it


# ---------------------------------------------------------------- jaxmb reach (item 14, 17)


def _arm_lengths():
    import jaxmb

    arm = jaxmb.two_link_arm(height=1.70, body_mass=70.0)
    return float(arm.length[0]), float(arm.length[1])


def _hand(q, l1, l2):
    """Forward kinematics of the two-link arm (shoulder angle from +x, relative elbow)."""
    return np.stack([l1 * np.cos(q[:, 0]) + l2 * np.cos(q.sum(1)), l1 * np.sin(q[:, 0]) + l2 * np.sin(q.sum(1))], 1)


def test_reach_takes_start_end_and_duration_and_says_which_reach(tmp_path, capsys):
    # before: no --start/--end (argparse's usage error), and neither the output nor the
    # summary said which movement the torques were of
    out = tmp_path / "out"
    assert main(["reach", "--start", "0.3", "0.2", "--end", "-0.1", "0.5", "--duration", "0.8", "--samples", "21",
                 "--out", str(out)]) == 0  # fmt: skip
    text = capsys.readouterr().out
    movement = "hand (0.3000, 0.2000) m -> (-0.1000, 0.5000) m, straight, in 0.8 s"
    assert f"reach: {movement}" in text
    summary = json.loads((out / "reach_summary.json").read_text())
    assert summary["movement"].startswith(movement) and summary["duration_s"] == 0.8
    assert summary["start_hand_m"] == [0.3, 0.2] and summary["end_hand_m"] == [-0.1, 0.5]
    # the angles written put the hand on the straight minimum-jerk path between the
    # points given (forward kinematics, Flash and Hogan's 10 s^3 - 15 s^4 + 6 s^5)
    table = np.genfromtxt(out / "reach_torques.csv", delimiter=",", names=True)
    q = np.stack([table["shoulder_angle_rad"], table["elbow_angle_rad"]], 1)
    s = table["time_s"] / 0.8
    np.testing.assert_allclose(table["time_s"][[0, -1]], [0.0, 0.8], atol=1e-12)
    path = np.array([0.3, 0.2]) + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, [-0.4, 0.3])
    np.testing.assert_allclose(_hand(q, *_arm_lengths()), path, atol=1e-9)
    assert np.all(q[:, 1] > 0)  # the elbow flexed counter-clockwise, as the help says
    for end, k in (("start", 0), ("end", -1)):  # the summary's postures are the table's
        np.testing.assert_allclose([summary[f"{end}_angles_deg"][j] for j in ("shoulder", "elbow")],
                                   np.rad2deg(q[k]), atol=1e-9)  # fmt: skip
        assert f"{'shoulder' if k == 0 else 'elbow'}" in summary["movement"]


@pytest.mark.parametrize("args, match", [
    (["--start", "nan", "0.2"], r"--start must be two finite numbers, the hand's x and y in m, got \[nan, 0.2\]"),
    (["--end", "1", "1"], r"--end 1 1 is out of reach: \|p\| = 1.414 m from the shoulder, the hand reaches "
                          r"0.110 m < \|p\| < 0.750 m"),
    (["--start", "0.05", "0"], r"--start 0.05 0 is out of reach: \|p\| = 0.050 m"),
    # on the edge: the arm straight, its joint speeds infinite at the start (NaN torques)
    (["--start", "0", "-0.7497"], r"--start 0 -0.7497 is out of reach: \|p\| = 0.7497 m .* < \|p\| < 0.7497 m"),
    (["--start", "0.3", "0.4", "--end", "0.3", "0.4"], "--start and --end are the same point"),
    # the straight path through the shoulder: traced, the inverse kinematics would
    # have projected it onto the workspace without a word
    (["--start", "0.3", "0", "--end", "-0.3", "0"], r"the straight hand path from --start 0.3 0 to --end -0.3 0 "
                                                    r"passes 0.0000 m from the shoulder, inside the arm's inner "
                                                    r"reach \|L1 - L2\| = 0.1105 m"),
])  # fmt: skip
def test_reach_refuses_bad_endpoints_before_any_work(tmp_path, capsys, args, match):
    out = tmp_path / "out"
    assert main(["reach", *args, "--out", str(out)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1 and re.search("^jaxmb reach: error: " + match, err[0]), err
    assert not out.exists()


def test_reaching_torques_checks_its_endpoints():
    from jaxmb.reaching import reaching_torques

    with pytest.raises(ValueError, match=r"^end 0.8 0 is out of reach"):
        reaching_torques(0.5, start=(0.3, 0.2), end=(0.8, 0.0))
    with pytest.raises(ValueError, match=r"^start must be two finite numbers"):
        reaching_torques(0.5, start=(0.3, 0.2, 0.1))


def test_cli_reaching_torques_is_deprecated_for_jaxmb_reaching():
    # the command line is no library: the function moved to jaxmb.reaching, and the old
    # name works for one release with a warning naming the new one
    import jaxmb.cli
    import jaxmb.reaching

    with pytest.warns(DeprecationWarning, match="jaxmb.reaching.reaching_torques"):
        assert jaxmb.cli.reaching_torques is jaxmb.reaching.reaching_torques
    with pytest.raises(AttributeError):
        jaxmb.cli.no_such_name


def test_reach_figure_names_joint_torques_and_the_reach(tmp_path, capsys, monkeypatch):
    # before: the panels read "generalized force (N m)" and the title only the duration
    import jaxmb.cli._output
    from jaxmb.reaching import reaching_torques

    figures, png = [], jaxmb.cli._output._png
    monkeypatch.setattr(jaxmb.cli._output, "_png", lambda fig, **kw: figures.append(fig) or png(fig, **kw))
    assert main(["reach", "--start", "0.3", "0.2", "--end", "-0.1", "0.5", "--duration", "0.6", "--samples", "21",
                 "--out", str(tmp_path)]) == 0  # fmt: skip
    (fig,) = figures
    ylabels = [ax.get_ylabel() for ax in fig.axes]
    assert ylabels == ["shoulder torque (N m)", "elbow torque (N m)"]
    texts = [fig.get_suptitle(), *ylabels, *(ax.get_title() for ax in fig.axes)]
    assert not any("generalized" in t for t in texts), texts
    title = fig.get_suptitle()
    assert title.startswith("Joint torques of a minimum-jerk reach, hand (0.300, 0.200) m") and \
        "(-0.100, 0.500) m in 0.6 s" in title and "g = 9.81 m/s" in title  # fmt: skip
    # the help's default endpoints are the function's (the notes' reach)
    default = reaching_torques(0.5, samples=5)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["reach", "--help"])
    helptext = " ".join(capsys.readouterr().out.split())
    for p in (default["start"], default["end"]):
        assert f"({p[0]:.4f}, {p[1]:.4f}) m" in helptext, (p, helptext)


# ---------------------------------------------------------------- jaxmb optimal --grid (item 13)


def _png_size(path):
    """Width and height of a PNG, px (its IHDR chunk)."""
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_optimal_grid_runs_n_by_n_reaches_names_the_skipped_and_draws_the_map(tmp_path, capsys, monkeypatch):
    # before: --grid 5 ran 8 of its 25 targets without a word (a square grid, most of it
    # out of reach), drew no map (the PNG was the run's without --grid) and wrote the
    # curvature as a fraction where the console printed %
    import jaxmb
    import jaxmb.cli._output

    figures, png = [], jaxmb.cli._output._png
    monkeypatch.setattr(jaxmb.cli._output, "_png", lambda fig, **kw: figures.append(fig) or png(fig, **kw))
    # the help's grid: 2 distances from the shoulder, evenly from r_min + 2 % of r_max to
    # 97 % of r_max, times 2 directions from +y; the start within 5 cm of the farthest ahead
    r_min, r_max = jaxmb.workspace(jaxmb.two_link_arm(height=1.70, body_mass=70.0, gravity=0.0))
    radii = [r_min + 0.02 * r_max, 0.97 * r_max]
    promised = [(0.0, r) for r in radii] + [(0.0, -r) for r in radii]
    start = (0.02, radii[1] - 0.03)
    # --nodes 32 as test_optimal.py's command test: the suite's shared cache has its main reach
    common = ["optimal", "--cost", "hand_jerk", "--nodes", "32", "--start", f"{start[0]!r}", f"{start[1]!r}"]
    grid, plain = tmp_path / "grid", tmp_path / "plain"
    assert main([*common, "--grid", "2", "--out", str(grid)]) == 0
    out = capsys.readouterr().out
    assert "workspace: 2 x 2 targets (2 distances x 2 directions): 3 minimum-torque-change reaches" in out
    assert f"workspace: skipped target (0.0000, {radii[1]:.4f}) m: within 5 cm of the start" in out
    table = np.genfromtxt(grid / "optimal_workspace.csv", delimiter=",", names=True)
    assert table.dtype.names == ("x_m", "y_m", "curvature_pct", "converged")
    run = sorted(zip(table["x_m"], table["y_m"]))
    np.testing.assert_allclose(run, sorted(p for p in promised if abs(p[1] - radii[1]) > 1e-9), atol=1e-6)
    # the CSV's unit is the console's: the largest |curvature| as printed, in %
    largest = float(re.search(r"max (\S+) %", out).group(1))
    assert np.max(np.abs(table["curvature_pct"])) == pytest.approx(largest, abs=0.051) and largest > 0.5
    # the map: a third panel with the targets and their curvature (%), a wider PNG
    assert main([*common, "--out", str(plain)]) == 0
    fig = figures[0]
    titles = [ax.get_title() for ax in fig.axes]
    assert titles[2] == "map: minimum torque change from the start (star)\nto each of 3 targets (1 skipped)", titles
    assert fig.axes[3].get_ylabel() == "curvature (% of the chord, + left of the motion)"  # the colour bar
    assert len(figures[1].axes) == 2
    assert _png_size(grid / "optimal_reach.png")[0] > _png_size(plain / "optimal_reach.png")[0]
    assert (grid / "optimal_reach.png").read_bytes() != (plain / "optimal_reach.png").read_bytes()


# ---------------------------------------------------------------- docs/conventions.png (item 17)


def _overlaps(fig):
    """The (label, what) pairs of a figure's first axes where a text's box meets
    another text's box or the path of a line, arc or arrow (display coordinates)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.path import Path

    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    ax = fig.axes[0]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in ax.texts]
    # each artist as polylines (an arrow's path closes its heads with a (0, 0) vertex
    # that intersects_bbox would take for a point)
    shapes = [(f"{type(a).__name__} {k}", [Path(v) for v in a.get_path().transformed(a.get_transform())
                                           .to_polygons(closed_only=False)])
              for k, a in enumerate([*ax.lines, *ax.patches])]  # fmt: skip
    found = [(a, b) for i, (a, box) in enumerate(boxes) for b, other in boxes[i + 1:] if box.overlaps(other)]
    found += [(a, b) for a, box in boxes for b, lines in shapes if any(p.intersects_bbox(box, filled=False)
                                                                       for p in lines)]  # fmt: skip
    return found


def test_conventions_figure_labels_overlap_nothing():
    # before: theta_i's label lay on its arc, attach_i's on the reaction's arrow (which
    # crossed attach's dimension line), q_i's against d_i's arrow
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).parents[1] / "docs" / "make_conventions_figure.py"
    spec = importlib.util.spec_from_file_location("make_conventions_figure", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fig = module.draw()
    assert len(fig.axes[0].texts) >= 15
    assert _overlaps(fig) == []
