"""Property-based checks over random topologies (hypothesis): any planar tree.

For every generated tree (random parent list, attachment points, off-axis centres of
mass, base and coordinate kind) and state: the recursive Newton-Euler pass equals the
projection D^T (Mp (D qdd + gamma) - h); M is symmetric positive definite; forward
dynamics inverts inverse dynamics; the reactions of both paths agree.
"""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jaxmb


@st.composite
def trees(draw):
    n = draw(st.integers(1, 6))
    parent = [-1] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    seed = draw(st.integers(0, 2**31 - 1))
    base = draw(st.sampled_from(["fixed", "floating"]))
    coords = draw(st.sampled_from(["relative", "absolute"]))
    rng = np.random.default_rng(seed)
    length = rng.uniform(0.1, 0.6, n)
    com = np.stack([rng.uniform(0, 1, n) * length, rng.uniform(-0.05, 0.05, n)], 1)
    attach = np.array([rng.uniform(0, length[p]) if p >= 0 else 0.0 for p in parent])
    model = jaxmb.tree(parent, length, com, rng.uniform(0.5, 10, n), rng.uniform(0.005, 0.2, n),
                       attach=attach, base=base, coordinates=coords, gravity=9.81)
    q, qd, qdd = (rng.normal(size=model.dof) for _ in range(3))
    loads = rng.normal(scale=[20, 20, 5], size=(n, 3))
    return model, q, qd, qdd, loads


SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(trees())
def test_recursive_equals_projection_on_any_tree(case):
    model, q, qd, qdd, loads = case
    a = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    b = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="projection")
    # round-off: both are exact formulas in float64
    np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(b).max())))
    ra = jaxmb.joint_reactions(model, q, qd, qdd, loads, method="recursive")
    rb = jaxmb.joint_reactions(model, q, qd, qdd, loads)
    np.testing.assert_allclose(ra, rb, rtol=1e-10, atol=1e-10 * max(1.0, float(np.abs(rb).max())))


@SETTINGS
@given(trees())
def test_mass_matrix_spd_and_forward_inverts_inverse(case):
    model, q, qd, qdd, loads = case
    M = np.asarray(jaxmb.mass_matrix(model, q))
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-13 * np.abs(M).max())
    assert np.linalg.eigvalsh(M).min() > 0
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    back = jaxmb.forward_dynamics(model, q, qd, tau, loads)
    # conditioning: errors scale with cond(M) times round-off
    np.testing.assert_allclose(back, qdd, rtol=0, atol=1e-12 * np.linalg.cond(M) * max(1.0, np.abs(qdd).max()))
