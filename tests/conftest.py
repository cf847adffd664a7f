"""Tests run in float64: switched on here, never on import of jaxmb.

``python -m pytest -q`` runs every test, the combinatorial ones (every chain/tree x
fixed/floating x relative/absolute configuration, every MuJoCo twin) on a subset that
covers each value of each factor; ``python -m pytest -q --slow`` (or ``JAXMB_SLOW=1``)
adds the rest of the matrix. Each compile of the batched kernels for a new model
topology costs a second or so, and the whole matrix takes about 20 minutes on 2 cores.
"""

import os

import jax
import pytest

jax.config.update("jax_enable_x64", True)


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the rest of the combinatorial matrix (about 20 min on 2 cores)")  # fmt: skip


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: the rest of a combinatorial matrix (run with --slow)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--slow") or os.environ.get("JAXMB_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="rest of the combinatorial matrix: run with --slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
