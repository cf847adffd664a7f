"""The suite's XLA compile flags (tests/conftest.py): set in the test processes, and
not in the child process that runs an ``xla_defaults`` test."""

import os

import pytest

SUITE = ("--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0")
USER = os.environ.get("JAXMB_TEST_USER_XLA_FLAGS", "")


@pytest.mark.skipif(os.environ.get("JAXMB_TEST_XLA_DEFAULTS") == "1", reason="the whole run under XLA's defaults")
def test_the_suite_compiles_with_its_flags():
    flags = os.environ["XLA_FLAGS"].split()
    for flag in SUITE:
        name = flag.split("=")[0]
        assert flag in flags or name in USER, flag  # a choice of the user's is kept


@pytest.mark.xla_defaults
def test_an_xla_defaults_test_runs_without_them():
    assert os.environ.get("JAXMB_TEST_XLA_DEFAULTS") == "1"
    assert os.environ.get("XLA_FLAGS", "") == USER
