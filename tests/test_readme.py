"""The README's Python examples run as written (the README must stay true)."""

import pathlib
import re

import numpy as np

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _blocks():
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_has_examples():
    assert len(_blocks()) >= 1


def test_readme_examples_run():
    for code in _blocks():
        ns = {}
        exec(compile(code, str(README), "exec"), ns)
    # the API example's numbers are consistent with the single-sample functions
    import jaxmb

    if "taus" in ns:
        arm, Q, QD, QDD = ns["arm"], ns["Q"], ns["QD"], ns["QDD"]
        np.testing.assert_allclose(ns["taus"][7], jaxmb.inverse_dynamics(arm, Q[7], QD[7], QDD[7]), rtol=1e-12)
