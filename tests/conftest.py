"""Tests run in float64: switched on here, never on import of jaxmb.

``python -m pytest -q`` runs every test, the combinatorial ones (every chain/tree x
fixed/floating x relative/absolute configuration, every MuJoCo twin) on a subset that
covers each value of each factor; ``python -m pytest -q --slow`` (or ``JAXMB_SLOW=1``)
adds the rest of the matrix. Each compile of the batched kernels for a new model
topology costs a second or so, and the whole matrix takes about 20 minutes on 2 cores.
"""

import os
import shutil
import tempfile

# XLA:CPU compiles with its classic elemental emitters here, not its newer fusion
# emitters: the same HLO programs (every pass before code generation is the same) and
# the same IEEE arithmetic, in 40 % less compile time; the suite is bound by
# compilation (1,708 s -> 1,033 s on 2 cores, docs/verification.md). Set before JAX's
# CPU backend starts; JAXMB_TEST_XLA_DEFAULTS=1, or a choice of the flag in XLA_FLAGS,
# keeps XLA's defaults.
_EMITTERS = "--xla_cpu_use_fusion_emitters"
if os.environ.get("JAXMB_TEST_XLA_DEFAULTS") != "1" and _EMITTERS not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_EMITTERS}=false".strip()

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
                     help="also run the rest of the combinatorial matrix (about 20 min on 2 cores)")  # fmt: skip


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the rest of a combinatorial matrix (run with --slow)")
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
