"""Matrix products in full precision on every backend.

On NVIDIA GPUs from Ampere on, JAX computes float32 matrix products in TensorFloat-32
unless told otherwise (10 bits of mantissa: relative errors near 5e-4), which would
break the float32 error bounds jaxmb states. Every compiled program of jaxmb traces
its products under ``jax.default_matmul_precision("highest")``
(:func:`jaxmb._math.precise_jit`); the precision is an attribute of each
``dot_general`` in the lowered program, so it is checked here on the CPU.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb._math import precise_jit
from random_models import random_model, random_state

DOT = re.compile(r"stablehlo\.dot_general[^\n]*")


def _dots(fn, *args):
    """The dot_general lines of ``jax.jit(fn)`` lowered on ``args`` (nested calls inlined)."""
    return DOT.findall(jax.jit(fn).lower(*args).as_text())


def _imprecise(dots):
    return [d for d in dots if "precision = [HIGHEST, HIGHEST]" not in d]


@pytest.fixture(scope="module")
def f32():
    rng = np.random.default_rng(3)
    model = random_model(rng, 5, tree=True, base="floating").astype(np.float32)
    states = [random_state(rng, model) for _ in range(8)]
    q, qd, qdd, _ = (np.stack([s[i] for s in states]).astype(np.float32) for i in range(4))
    return model, q, qd, qdd, np.asarray(states[0][3], np.float32)


def test_a_plain_product_is_imprecise_by_default_and_precise_under_precise_jit():
    # the premise (JAX's default is not HIGHEST) and the remedy, on one product
    a = jnp.ones((3, 3), jnp.float32)
    assert _imprecise(_dots(lambda x: x @ x, a))
    assert not _imprecise(DOT.findall(precise_jit(lambda x: x @ x).lower(a).as_text()))


@pytest.mark.parametrize("kernel", ["unrolled", "matrix"])
def test_dynamics_programs_and_their_gradients_multiply_in_full_precision(f32, kernel):
    model, q, qd, qdd, loads = f32

    def loss(m, q):
        return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, loads, kernel=kernel) ** 2)

    programs = {
        "inverse_dynamics": (lambda q: jaxmb.inverse_dynamics(model, q, qd, qdd, loads, kernel=kernel), q),
        "mass_matrix": (lambda q: jaxmb.mass_matrix(model, q), q),
        "forward_dynamics": (lambda q: jaxmb.forward_dynamics(model, q, qd, qdd, loads), q),
        "joint_reactions": (lambda q: jaxmb.joint_reactions(model, q, qd, qdd, loads), q),
        "grad (model, q)": (lambda q: jax.grad(loss, argnums=(0, 1))(model, q), q),
    }
    every = []
    for name, (fn, x) in programs.items():
        dots = _dots(fn, x)
        assert not _imprecise(dots), (name, _imprecise(dots)[:2])
        every += dots
    assert every, "no matrix product found: the check would pass vacuously"


def test_simulate_multiplies_in_full_precision(f32):
    model, q, qd, qdd, _ = f32
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd)
    dots = _dots(lambda q0: jaxmb.simulate(model, q0, qd, tau, 1e-3, steps=5).q, q)
    assert not _imprecise(dots)
