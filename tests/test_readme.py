"""The README is a short front page whose examples run as written and say what is true.

Every ```python block runs (in order, in one namespace each); its numbers are then
checked against independent calls or computations. The quick start comes first, the
front page stays short, and every command it lists is one that the command line has.
"""

import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _text():
    return README.read_text()


def _blocks(lang="python"):
    return re.findall(rf"```{lang}\n(.*?)```", _text(), flags=re.S)


def _run(code):
    ns = {}
    exec(compile(code, str(README), "exec"), ns)
    return ns


def _block(word):
    """The one python block that contains ``word``."""
    found = [b for b in _blocks() if word in b]
    assert len(found) == 1, f"expected one README python block with {word!r}, found {len(found)}"
    return found[0]


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # the examples name files relative to the repository root


def test_readme_is_a_front_page():
    text = _text()
    words = len(text.split())
    assert words <= 1300, f"README has {words} words: keep the front page under about 1,200"
    first = _blocks("bash")[:2]
    assert "pip install" in first[1] and "jaxmb gait" in first[1] and "pytest" in first[1], (
        "the second bash block (after the install lines) must be the two quick-start commands"
    )
    assert text.index("## Quick start") < text.index("## Examples")
    assert 4 <= len(_blocks()) <= 6


def test_readme_commands_exist():
    section = _text().split("## Command line", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`jaxmb ([a-z]+)", section))
    assert {"gait", "reach", "optimal", "identify"} <= named
    out = subprocess.run([sys.executable, "-m", "jaxmb", "--help"], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout  # fmt: skip
    listed = set(re.search(r"\{([a-z,]+)\}", out).group(1).split(","))
    assert named <= listed, f"README lists commands the CLI lacks: {named - listed}"


def test_readme_inverse_dynamics_example():
    import jax.numpy as jnp

    import jaxmb

    ns = _run(_block("inverse_dynamics"))
    arm, Q, QD, QDD = ns["arm"], ns["Q"], ns["QD"], ns["QDD"]
    # the batch equals the single-sample calls
    np.testing.assert_allclose(ns["taus"][7], jaxmb.inverse_dynamics(arm, Q[7], QD[7], QDD[7]), rtol=1e-12)
    np.testing.assert_allclose(ns["lams"][7], jaxmb.joint_reactions(arm, Q[7], QD[7], QDD[7]), rtol=1e-10, atol=1e-10)
    # the gradient with respect to a mass equals a central difference of the loss
    def loss(mass):
        m = arm.replace(mass=jnp.asarray(mass))
        return float(jnp.sum(jaxmb.inverse_dynamics(m, Q, QD, QDD) ** 2))

    h, m0 = 1e-5, np.asarray(arm.mass)
    e = np.eye(3)[1] * h
    fd = (loss(m0 + e) - loss(m0 - e)) / (2 * h)
    np.testing.assert_allclose(float(ns["grad"].mass[1]), fd, rtol=1e-6)


def test_readme_optimal_example():
    ns = _run(_block("optimize"))
    r, arm = ns["r"], ns["arm"]
    assert bool(r.converged)
    # the hand path, by the arm's own forward kinematics in NumPy, joins the two targets
    L1, L2 = np.asarray(arm.length)
    q = np.asarray(r.q)
    hand = np.stack([L1 * np.cos(q[:, 0]) + L2 * np.cos(q[:, 0] + q[:, 1]),
                     L1 * np.sin(q[:, 0]) + L2 * np.sin(q[:, 0] + q[:, 1])], -1)  # fmt: skip
    np.testing.assert_allclose(np.asarray(r.hand), hand, atol=1e-9)
    np.testing.assert_allclose(hand[0], [-0.25, 0.40], atol=1e-6)
    np.testing.assert_allclose(hand[-1], [0.25, 0.40], atol=1e-6)


def test_readme_identify_example():
    ns = _run(_block("identify.fit"))
    fit, true = ns["fit"], ns["t"]["model"]
    assert bool(fit.converged)
    # the true masses of van den Bogert's segment table are recovered from a 30 % error
    np.testing.assert_allclose(np.asarray(fit.model.mass), np.asarray(true.mass), rtol=1e-3)
    assert np.all(np.asarray(fit.stderr_physical) > 0)


def test_readme_gait_example():
    pytest.importorskip("ezc3d")
    ns = _run(_block("read_c3d"))
    res, leg = ns["res"], ns["leg"]
    start, stop = leg.stance
    mass = leg.body_weight / 9.81
    peaks = np.asarray(res.moments_per_kg[start:stop]).max(axis=0)
    np.testing.assert_allclose(peaks, np.asarray(res.moments[start:stop]).max(axis=0) / mass, rtol=1e-12)
    # normal walking (Winter): knee extensor peak 0.5-1.5 N m/kg, plantarflexor peak 1.2-1.8 N m/kg
    assert 0.5 < peaks[1] < 1.5 and 1.2 < peaks[2] < 1.8
