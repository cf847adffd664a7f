"""Minimum-jerk trajectories, two-link inverse kinematics and the `jaxmb reach` job.

References: the closed form of the minimum-jerk profile (peak speed 1.875 D/T at
mid-movement, zero velocity and acceleration at both ends), forward kinematics for
the inverse kinematics, finite differences for the exact time derivatives, and the
qualitative findings of the multibody notes (slow reach: the torques essentially
compensate gravity; fast reach: the interaction/inertial torques dominate).
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.cli import main
from jaxmb.optimal import minimum_jerk, time_derivatives, two_link_ik
from jaxmb.reaching import reaching_torques


def test_minimum_jerk_profile():
    x0, x1, T = np.array([0.1, -0.6]), np.array([0.3, 0.2]), 0.8
    t = jnp.linspace(0.0, T, 101)
    x, v, a = time_derivatives(lambda s: minimum_jerk(x0, x1, T, s), t)
    np.testing.assert_allclose(x[0], x0, atol=1e-15)
    np.testing.assert_allclose(x[-1], x1, atol=1e-15)
    np.testing.assert_allclose(np.asarray(v)[[0, -1]], 0.0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(a)[[0, -1]], 0.0, atol=1e-10)
    # peak speed of the 5th-order profile: 15/8 * distance / duration, at t = T/2
    np.testing.assert_allclose(v[50], 1.875 * (x1 - x0) / T, rtol=1e-12)


def test_time_derivatives_match_finite_differences():
    f = lambda s: jnp.stack([jnp.sin(3 * s), s**3])  # noqa: E731
    t = jnp.linspace(0.1, 1.0, 7)
    x, xd, xdd = time_derivatives(f, t)
    h = 1e-5
    fd1 = (np.asarray(jnp.stack([f(ti + h) for ti in t])) - np.asarray(jnp.stack([f(ti - h) for ti in t]))) / (2 * h)
    np.testing.assert_allclose(xd, fd1, rtol=1e-8)
    np.testing.assert_allclose(xdd[:, 0], -9 * np.sin(3 * np.asarray(t)), rtol=1e-12)
    np.testing.assert_allclose(xdd[:, 1], 6 * np.asarray(t), rtol=1e-12)


@pytest.mark.parametrize("elbow", ["up", "down"])
def test_two_link_ik_inverts_forward_kinematics(elbow):
    arm = jaxmb.two_link_arm()
    L1, L2 = (float(v) for v in arm.length)
    rng = np.random.default_rng(3)
    for _ in range(10):
        r = rng.uniform(abs(L1 - L2) + 0.02, L1 + L2 - 0.02)
        ang = rng.uniform(-np.pi, np.pi)
        p = r * np.array([np.cos(ang), np.sin(ang)])
        q = two_link_ik(p, L1, L2, elbow=elbow)
        assert (q[1] > 0) == (elbow == "up")
        hand = jaxmb.point_position(arm, q, 1, (L2, 0.0))
        np.testing.assert_allclose(hand, p, atol=1e-12)


def test_slow_reach_is_gravity_dominated_and_fast_is_not():
    slow = reaching_torques(4.0, samples=101)
    fast = reaching_torques(0.5, samples=101)
    for j in range(2):
        # slow: the total differs from gravity by under 10 % (RMS), as the notes find
        err = np.sqrt(np.mean((slow["total"][:, j] - slow["gravity"][:, j]) ** 2))
        assert err < 0.1 * np.sqrt(np.mean(slow["gravity"][:, j] ** 2))
        # fast: inertial + interaction terms exceed gravity for most of the movement
        dyn = fast["inertial"][:, j] + fast["coriolis"][:, j]
        assert np.mean(np.abs(dyn) > np.abs(fast["gravity"][:, j])) > 0.6
    # the decomposition sums to the inverse dynamics
    arm = jaxmb.two_link_arm()
    k = 37
    np.testing.assert_allclose(
        fast["total"][k], jaxmb.inverse_dynamics(arm, fast["q"][k], fast["qd"][k], fast["qdd"][k]), rtol=1e-12
    )
    # the path starts and ends at the planned postures
    np.testing.assert_allclose(fast["q"][-1], [0.0, np.pi / 2], atol=1e-9)
    np.testing.assert_allclose(fast["q"][0], [-np.pi / 2, np.deg2rad(10)], atol=1e-9)


def test_cli_reach_writes_figure_and_summary(tmp_path, capsys):
    assert main(["reach", "--duration", "0.5", "--samples", "51", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "shoulder" in out and "elbow" in out
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == [".jaxmb-reach.json", "reach.png", "reach_summary.json", "reach_torques.csv"]
    summary = json.loads((tmp_path / "reach_summary.json").read_text())
    assert summary["elbow"]["gravity"]["peak"] > 0 and summary["duration_s"] == 0.5
    # the torques over time (before: only the peaks and a figure, though the help said
    # "the data"), the very values of reaching_torques, the terms adding up
    table = np.genfromtxt(tmp_path / "reach_torques.csv", delimiter=",", names=True)
    ref = reaching_torques(0.5, samples=51)
    np.testing.assert_allclose(table["time_s"], ref["t"], rtol=0, atol=1e-12)
    for j, joint in enumerate(("shoulder", "elbow")):
        np.testing.assert_allclose(table[f"{joint}_angle_rad"], ref["q"][:, j], rtol=1e-9, atol=1e-12)
        for k in ("inertial", "coriolis", "gravity", "total"):
            np.testing.assert_allclose(table[f"{joint}_{k}_Nm"], ref[k][:, j], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(table[f"{joint}_total_Nm"], sum(table[f"{joint}_{k}_Nm"] for k in
                                   ("inertial", "coriolis", "gravity")), rtol=1e-8, atol=1e-8)  # fmt: skip
        assert summary[joint]["total"]["peak"] == pytest.approx(np.abs(table[f"{joint}_total_Nm"]).max(), rel=1e-9)
    # another run into the same folder replaces the set (before: files named by the
    # duration, so runs piled up beside each other)
    assert main(["reach", "--duration", "0.25", "--samples", "51", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    assert json.loads((tmp_path / "reach_summary.json").read_text())["duration_s"] == 0.25
    capsys.readouterr()
    # an output folder that cannot be made: one line, exit 2, before the work (before:
    # the table, then a traceback)
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["reach", "--out", str(afile / "sub")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("jaxmb reach: error: cannot create --out folder")
    assert len(captured.err.strip().splitlines()) == 1


@pytest.mark.parametrize("duration", [0.0, -1.0, float("nan"), float("inf")])
def test_minimum_jerk_rejects_a_duration_that_is_not_positive_and_finite(duration):
    # before: 0 gave NaN and -1 returned x0
    with pytest.raises(ValueError, match="duration must be a finite number > 0"):
        minimum_jerk([0.0, 0.0], [1.0, 1.0], duration, np.linspace(0, 1, 5))


def test_minimum_jerk_and_two_link_ik_refuse_nan_and_mismatched_points():
    # before: NaN positions came back (no error), a (3,) start against a (2,) end gave
    # JAX's broadcasting TypeError, and a NaN point was "out of reach: |p| = nan m"
    t = np.linspace(0, 0.5, 5)
    with pytest.raises(ValueError, match="x0 must be finite"):
        minimum_jerk([np.nan, 0.0], [1.0, 1.0], 0.5, t)
    with pytest.raises(ValueError, match="t must be finite"):
        minimum_jerk([0.0, 0.0], [1.0, 1.0], 0.5, [0.1, np.inf])
    with pytest.raises(ValueError, match=r"one shape \(d,\), got \(3,\) and \(2,\)"):
        minimum_jerk([0.0, 0.0, 0.0], [1.0, 1.0], 0.5, t)
    np.testing.assert_allclose(minimum_jerk(0.0, 2.0, 0.5, 0.25), [1.0])  # a scalar coordinate: (1,)
    with pytest.raises(ValueError, match="must be finite"):
        two_link_ik([np.nan, 0.2], 0.3, 0.3)


def test_two_link_ik_rejects_unknown_elbow_and_unreachable_points():
    with pytest.raises(ValueError, match="elbow must be 'up' or 'down', got 'UP'"):
        two_link_ik([0.3, 0.2], 0.3, 0.3, elbow="UP")  # before: silently "down"
    with pytest.raises(ValueError, match="out of reach"):
        two_link_ik([2.0, 0.0], 0.3, 0.3)  # before: [0, 0]
    with pytest.raises(ValueError, match="out of reach"):
        two_link_ik([0.01, 0.0], 0.3, 0.2)
    # on the boundary: the straight arm (no NaN)
    np.testing.assert_allclose(two_link_ik([0.0, 0.6], 0.3, 0.3), [np.pi / 2, 0.0], atol=1e-7)
    # traced (values unknown): the radial projection, outside and inside the annulus
    arm = jaxmb.chain([0.3, 0.2], [0.1, 0.1], [1.0, 1.0], [0.01, 0.01])
    for p, r in (([2.0, 1.0], 0.5), ([0.02, -0.01], 0.1)):
        q = jax.jit(lambda x: two_link_ik(x, 0.3, 0.2))(jnp.asarray(p))
        hand = np.asarray(jaxmb.point_position(arm, q, 1, (0.2, 0.0)))
        np.testing.assert_allclose(hand, r * np.asarray(p) / np.linalg.norm(p), atol=1e-12)


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    for args in (["--duration", "-1"], ["--duration", "nan"], ["--duration", "inf"], ["--gravity", "nan"],
                 ["--samples", "2"], ["--duration", "61"]):  # fmt: skip
        # before: --duration nan wrote NaN results (bare NaN in the JSON) and exited 0
        assert main(["reach", *args, "--out", str(tmp_path)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("jaxmb reach: error: --"), err
        # the function this command calls (it once named jaxmb.optimize)
        assert args[1] != "61" or "(jaxmb.reaching.reaching_torques takes any)" in err[0], err
    assert list(tmp_path.iterdir()) == []
    afile = tmp_path / "afile"
    afile.write_text("")
    assert main(["reach", "--out", str(afile)]) == 2
    assert "exists and is not a folder" in capsys.readouterr().err


def test_cli_reach_json_is_strict_and_files_follow_the_umask(tmp_path):
    assert main(["reach", "--duration", "0.5", "--samples", "21", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "reach_summary.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    umask = os.umask(0)
    os.umask(umask)
    for p in tmp_path.iterdir():
        assert p.stat().st_mode & 0o777 == 0o666 & ~umask, p
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [".jaxmb-reach.json"]  # no temporaries


def test_every_command_writes_under_jaxmb_out_by_default(capsys):
    """One default output root, a folder per command (identify used to write to
    jaxmb-identify/ and reach and optimal to jaxmb-out/ itself, where their files mixed)."""
    for command in ("reach", "optimal", "identify", "gait"):
        with pytest.raises(SystemExit) as stop:
            main([command, "--help"])
        assert stop.value.code == 0
        text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, also at hyphens
        assert f"(defaultjaxmb-out/{command}" in text, (command, text)
