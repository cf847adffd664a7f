"""The README is a short front page whose examples run as written and say what is true.

Every ```python block runs (in order, in one namespace each); its numbers are then
checked against independent calls or computations. Every ```bash block is checked
line by line: the extras that ``pip install`` names exist, each ``jaxmb`` command's
``--help`` runs and lists every option the line uses, and ``python -m pytest`` runs.
The quick-start command itself (``jaxmb gait`` on the bundled data) runs in
tests/test_cli_gait.py::test_gait_default_writes_every_result_and_meets_the_targets,
which checks what it prints and writes. The quick start comes first, the front page
stays short, and every command it lists is one that the command line has.
"""

import pathlib
import re
import shlex
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


def _bash_commands():
    """Every command of the README's bash blocks, as argv lists (comments dropped, ``&&``
    chains split)."""
    commands = []
    for block in _blocks("bash"):
        for line in block.splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                if part.strip():
                    commands.append(shlex.split(part))
    return commands


def _extras():
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    return set(project.get("optional-dependencies", {})), project.get("scripts", {})


def _help(*argv):
    done = subprocess.run([sys.executable, *argv, "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, f"{' '.join(argv)} --help failed:\n{done.stderr[-2000:]}"
    return done.stdout


def test_readme_bash_blocks_name_commands_that_exist():
    commands = _bash_commands()
    programs = {c[0] if c[0] != "python" else " ".join(c[:3]) for c in commands}
    assert programs <= {"pip", "jaxmb", "python -m pytest"}, f"a README command this test does not check: {programs}"
    extras, scripts = _extras()
    assert "jaxmb" in scripts, "pyproject.toml installs no `jaxmb` command"
    helps = {}
    for argv in commands:
        if argv[0] == "pip":  # pip install -e ".[c3d]": every extra named exists
            for target in argv[2:]:
                named = re.search(r"\[(.*)\]", target)
                missing = set(named.group(1).split(",")) - extras if named else set()
                assert not missing, f"`{shlex.join(argv)}` names extras that pyproject.toml lacks: {missing}"
        elif argv[0] == "jaxmb":  # python -m jaxmb CMD --help runs and lists every option used
            command = argv[1] if len(argv) > 1 and not argv[1].startswith("-") else None
            key = command or ""
            if key not in helps:
                helps[key] = _help("-m", "jaxmb", *([command] if command else []))
            options = {a.split("=", 1)[0] for a in argv[1:] if a.startswith("--")}
            unknown = {o for o in options if not re.search(rf"{re.escape(o)}\b", helps[key])}
            assert not unknown, f"`{shlex.join(argv)}` uses options that `jaxmb {key} --help` lacks: {unknown}"
        else:  # python -m pytest -q
            assert "--slow" in _help("-m", "pytest", *argv[3:]), "pytest lacks the suite's --slow"
