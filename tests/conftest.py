"""Tests run in float64: switched on here, never on import of jaxmb.

``python -m pytest -q`` runs every test, the combinatorial ones (every chain/tree x
fixed/floating x relative/absolute configuration, every MuJoCo twin) on a subset that
covers each value of each factor; ``python -m pytest -q --slow`` (or ``JAXMB_SLOW=1``)
adds the rest of the matrix. Each compile of the batched kernels for a new model
topology costs a second or so; the rest of the matrix alone took 5 minutes on 2 cores
(docs/verification.md).
"""

import os
import shutil
import subprocess
import sys
import tempfile

# The suite is bound by XLA compilation. XLA:CPU compiles here with its classic
# elemental emitters instead of its newer fusion emitters, and LLVM's optimisation
# level 0: the same HLO programs (every XLA pass before code generation is the same),
# compiled in about a third of the time; the whole default run took 1,708 s with XLA's
# defaults and 529-875 s so (docs/verification.md). The compiled code runs slower,
# which the suite's small problems do not feel. What changes besides: XLA lets LLVM
# fuse a multiply and an add into one FMA, and these flags together form none, so
# results differ from the defaults' by rounding, and two programs that agree to the
# bit under the defaults may not here. A test whose tolerance is at that rounding is
# marked ``xla_defaults`` and runs in a child process under XLA's defaults.
# JAXMB_TEST_XLA_DEFAULTS=1 runs the whole suite under XLA's defaults (and a choice of
# either flag in XLA_FLAGS is kept). Set before JAX's CPU backend starts.
_DEFAULTS_ENV = "JAXMB_TEST_XLA_DEFAULTS"
_USER_ENV = "JAXMB_TEST_USER_XLA_FLAGS"  # the user's XLA_FLAGS, kept for xdist's workers and children
if _USER_ENV not in os.environ:
    os.environ[_USER_ENV] = os.environ.get("XLA_FLAGS", "")
_USER_XLA_FLAGS = os.environ[_USER_ENV]
_FAST_COMPILE = {"--xla_cpu_use_fusion_emitters": "false", "--xla_backend_optimization_level": "0"}
if os.environ.get(_DEFAULTS_ENV) != "1":
    _flags = [f"{k}={v}" for k, v in _FAST_COMPILE.items() if k not in _USER_XLA_FLAGS]
    os.environ["XLA_FLAGS"] = " ".join([_USER_XLA_FLAGS] + _flags).strip()

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)

# The suite is bound by XLA compilation, and many tests compile the same programs
# (the kernels for the same model topology and shapes, from different tests, files
# and xdist workers). A persistent compilation cache shared by the workers of one
# run compiles each once; it lives in a temporary directory made by the controlling
# process and removed at the end, so nothing carries over between runs.
_CACHE_ENV = "JAXMB_TEST_XLA_CACHE"


def _enable_cache(path: str):
    jax.config.update("jax_compilation_cache_dir", path)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the rest of the combinatorial matrix (about 5 min more on 2 cores)")  # fmt: skip


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the rest of a combinatorial matrix (run with --slow)")
    config.addinivalue_line("markers", "xla_defaults: a tolerance at the rounding of XLA's default code generation "
                            "(runs in a child process under XLA's defaults)")  # fmt: skip
    if _CACHE_ENV not in os.environ:  # the controlling process (or a run without xdist)
        os.environ[_CACHE_ENV] = tempfile.mkdtemp(prefix="jaxmb-xla-cache-")
        config._jaxmb_cache_owner = True
    _enable_cache(os.environ[_CACHE_ENV])


def pytest_unconfigure(config):
    if getattr(config, "_jaxmb_cache_owner", False):
        shutil.rmtree(os.environ.pop(_CACHE_ENV), ignore_errors=True)


# The longest files of the default run (summed durations, longest first, from
# `--durations=0` on 2026-11-28). They run first: with --dist loadfile each file runs
# on one worker, in collection order, so a long file collected last (alphabetically,
# test_wholebody.py) kept one worker busy for minutes after the other had finished.
_LONGEST_FIRST = ("test_batch.py", "test_optimal.py", "test_gait.py", "test_wholebody.py", "test_aba.py",
                  "test_identify.py", "test_reactions.py", "test_one_api.py", "test_simulate.py")  # fmt: skip


def _longest_first(items):
    rank = {name: k for k, name in enumerate(_LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def pytest_collection_modifyitems(config, items):
    _longest_first(items)
    if config.getoption("--slow") or os.environ.get("JAXMB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="rest of the combinatorial matrix: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """An ``xla_defaults`` test runs in a child pytest under XLA's default code
    generation (see the top of this file), unless this process has those already."""
    if pyfuncitem.get_closest_marker("xla_defaults") is None or os.environ.get(_DEFAULTS_ENV) == "1":
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", _CACHE_ENV)}
    env[_DEFAULTS_ENV] = "1"
    if _USER_XLA_FLAGS:
        env["XLA_FLAGS"] = _USER_XLA_FLAGS
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", pyfuncitem.nodeid]
    run = subprocess.run(cmd, cwd=pyfuncitem.config.rootpath, env=env, capture_output=True, text=True)
    if run.returncode != 0:
        pytest.fail(f"under XLA's defaults ({' '.join(cmd)}):\n{run.stdout[-6000:]}{run.stderr[-2000:]}", pytrace=False)
    return True
