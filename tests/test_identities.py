"""Identities of the equations of motion on random chains and trees (issue 2).

Every test checks a relation that holds exactly in the mechanics, between quantities
computed by different paths (autodiff of the pose map, the recursive Newton-Euler
pass, Cholesky forward dynamics, energy), on random models and states with fixed
seeds, for every combination of chain/tree, fixed/floating base and
relative/absolute coordinates.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from random_models import CONFIG_IDS, PAIR_CONFIGS, config_fixture_params, random_case

# Tolerances. The quantities are O(1-1e3) (masses up to 10 kg, lengths up to 1 m,
# rates ~2 rad/s, loads ~20 N); two float64 computations of the same quantity by
# different operation orders differ by a few hundred ulp of the largest term.
RTOL = 1e-10
ATOL = 1e-9
# Through a Cholesky solve the error grows with the condition number of M (up to
# ~1e4 for random trees with light distal segments).
SOLVE_RTOL = 1e-8
SOLVE_ATOL = 1e-8

N_SEGMENTS = 5
IDS = CONFIG_IDS


def _case(seed, tree, base, coordinates, n=N_SEGMENTS):
    return random_case(seed, tree, base, coordinates, n)


@pytest.fixture(params=config_fixture_params(indexed=True, default=PAIR_CONFIGS))  # the rest with --slow
def case(request):
    k, (tree, base, coordinates) = request.param
    return _case(100 + k, tree, base, coordinates)


def test_mass_matrix_symmetric_positive_definite(case):
    model, q, *_ = case
    M = np.asarray(jaxmb.mass_matrix(model, q))
    assert M.shape == (model.dof, model.dof)
    np.testing.assert_allclose(M, M.T, rtol=0, atol=1e-12 * np.abs(M).max())
    # every segment has positive mass and inertia and the coordinates are independent,
    # so T = 1/2 qd^T M qd > 0 for qd != 0
    assert np.linalg.eigvalsh(M).min() > 0


def test_mdot_minus_2c_skew_symmetric(case):
    model, q, qd, *_ = case
    C = jaxmb.coriolis_matrix(model, q, qd)
    # Mdot = dM/dq . qd, a directional derivative along qd
    Mdot = jax.jvp(lambda q_: jaxmb.mass_matrix(model, q_), (jnp.asarray(q),), (jnp.asarray(qd),))[1]
    N = np.asarray(Mdot - 2 * C)
    np.testing.assert_allclose(N + N.T, 0, atol=ATOL * np.abs(N).max())
    # and the Christoffel matrix reproduces the bias vector: C(q, qd) qd = C
    np.testing.assert_allclose(C @ qd, jaxmb.bias_forces(model, q, qd), rtol=RTOL, atol=ATOL)


def test_forward_inverse_roundtrip(case):
    model, q, qd, qdd, loads = case
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    np.testing.assert_allclose(jaxmb.forward_dynamics(model, q, qd, tau, loads), qdd,
                               rtol=SOLVE_RTOL, atol=SOLVE_ATOL)
    tau2 = 10.0 * np.random.default_rng(1).standard_normal(model.dof)
    qdd2 = jaxmb.forward_dynamics(model, q, qd, tau2, loads)
    np.testing.assert_allclose(jaxmb.inverse_dynamics(model, q, qd, qdd2, loads), tau2,
                               rtol=SOLVE_RTOL, atol=SOLVE_ATOL)


def test_recursive_equals_projection(case):
    model, q, qd, qdd, loads = case
    rec = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="recursive")
    proj = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="projection")
    np.testing.assert_allclose(rec, proj, rtol=RTOL, atol=ATOL)


def test_matrix_form_terms_sum_to_inverse_dynamics(case):
    model, q, qd, qdd, loads = case
    M = jaxmb.mass_matrix(model, q)
    C = jaxmb.bias_forces(model, q, qd)
    G = jaxmb.gravity_forces(model, q)
    E = jaxmb.external_forces(model, q, loads)
    # tau = M qdd + C + G + E, E = -J^T F
    np.testing.assert_allclose(M @ qdd + C + G + E, jaxmb.inverse_dynamics(model, q, qd, qdd, loads),
                               rtol=RTOL, atol=ATOL)


def rnea(model, q, qd, qdd, loads=None):
    """Pinocchio's rnea: inverse dynamics by the recursion, plain JAX derivatives."""
    return jaxmb.inverse_dynamics(model, q, qd, qdd, loads, gradient="autodiff")


def test_pinocchio_rnea_identities(case):
    model, q, qd, qdd, loads = case
    z = np.zeros(model.dof)
    g_rnea = rnea(model, q, z, z)
    # gravity = rnea(q, 0, 0); bias = rnea(q, qd, 0) - rnea(q, 0, 0)
    np.testing.assert_allclose(jaxmb.gravity_forces(model, q), g_rnea, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.bias_forces(model, q, qd), rnea(model, q, qd, z) - g_rnea,
                               rtol=RTOL, atol=ATOL)
    # with loads: rnea(q, 0, 0, loads) = G + E
    np.testing.assert_allclose(rnea(model, q, z, z, loads),
                               g_rnea + jaxmb.external_forces(model, q, loads), rtol=RTOL, atol=ATOL)
    # the gravity term is the gradient of the potential energy, G = dV/dq
    np.testing.assert_allclose(jax.grad(lambda q_: jaxmb.potential_energy(model, q_))(jnp.asarray(q)),
                               g_rnea, rtol=RTOL, atol=ATOL)


def test_mass_matrix_columns_from_rnea(case):
    model, q, *_ = case
    # column j of M is the inverse dynamics of a unit acceleration e_j at rest without gravity
    nog = model.replace(gravity=0.0)
    z = np.zeros(model.dof)
    cols = np.stack([np.asarray(rnea(nog, q, z, np.eye(model.dof)[j])) for j in range(model.dof)], 1)
    np.testing.assert_allclose(jaxmb.mass_matrix(model, q), cols, rtol=RTOL, atol=ATOL)


def test_kinetic_energy_quadratic_form(case):
    model, q, qd, *_ = case
    M = jaxmb.mass_matrix(model, q)
    np.testing.assert_allclose(jaxmb.kinetic_energy(model, q, qd), 0.5 * qd @ M @ qd, rtol=RTOL)


def test_power_balance(case):
    model, q, qd, qdd, loads = case
    # d/dt (T + V) = qd^T (tau - E) along (q, qd, qdd): the work rate of the generalized
    # forces, less that of the (non-conservative) loads, since tau = M qdd + C + G + E
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    E = jaxmb.external_forces(model, q, loads)
    H = lambda q_, qd_: jaxmb.total_energy(model, q_, qd_)  # noqa: E731
    dH = jax.jvp(H, (jnp.asarray(q), jnp.asarray(qd)), (jnp.asarray(qd), jnp.asarray(qdd)))[1]
    scale = np.abs(qd * tau).sum() + np.abs(qd * E).sum()
    np.testing.assert_allclose(dH, qd @ (tau - E), rtol=0, atol=RTOL * scale)


def test_relative_absolute_conversion(case):
    model, q, qd, qdd, loads = case
    other_kind = "absolute" if model.coordinates == "relative" else "relative"
    other = model.replace(coordinates=other_kind)
    q2, qd2, qdd2 = (jaxmb.coordinates_to(model, x, other_kind) for x in (q, qd, qdd))
    # the same motion: same poses, and the conversion round-trips
    np.testing.assert_allclose(jaxmb.pose(other, q2), jaxmb.pose(model, q), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.coordinates_to(other, q2, model.coordinates), q, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.pose_velocity(other, q2, qd2), jaxmb.pose_velocity(model, q, qd),
                               rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.pose_acceleration(other, q2, qd2, qdd2),
                               jaxmb.pose_acceleration(model, q, qd, qdd), rtol=RTOL, atol=ATOL)

    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    tau2 = jaxmb.inverse_dynamics(other, q2, qd2, qdd2, loads)
    # generalized forces of the same motion are related by forces_to ...
    np.testing.assert_allclose(jaxmb.forces_to(model, tau, other_kind), tau2, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.forces_to(other, tau2, model.coordinates), tau, rtol=RTOL, atol=ATOL)
    # ... and deliver the same power (independent of how forces_to is written)
    np.testing.assert_allclose(tau @ qd, tau2 @ qd2, rtol=RTOL, atol=ATOL * np.abs(tau * qd).sum())
    # the joint moments are physical, the same in both kinds
    np.testing.assert_allclose(jaxmb.joint_moments(model, q, qd, qdd, loads),
                               jaxmb.joint_moments(other, q2, qd2, qdd2, loads), rtol=RTOL, atol=ATOL)
    # M transforms as a quadratic form: M = A^T M2 A with A = d q2 / d q
    A = jax.jacfwd(lambda x: jaxmb.coordinates_to(model, x, other_kind))(jnp.asarray(q))
    np.testing.assert_allclose(A.T @ jaxmb.mass_matrix(other, q2) @ A, jaxmb.mass_matrix(model, q),
                               rtol=RTOL, atol=ATOL)


def test_joint_moments_are_generalized_forces_in_relative_fixed():
    # with relative coordinates and a fixed base the generalized forces are the joint moments
    model, q, qd, qdd, loads = _case(7, True, "fixed", "relative")
    np.testing.assert_allclose(jaxmb.joint_moments(model, q, qd, qdd, loads),
                               jaxmb.inverse_dynamics(model, q, qd, qdd, loads), rtol=RTOL, atol=ATOL)


def test_deprecated_rnea_names_warn_and_agree(case):
    # rnea is inverse_dynamics(gradient="autodiff") under another name, rnea_full is
    # joint_loads: deprecated aliases for one release, same results
    model, q, qd, qdd, loads = case
    with pytest.warns(DeprecationWarning, match=r'inverse_dynamics\(model, q, qd, qdd, loads, gradient="autodiff"\)'):
        got = jaxmb.rnea(model, q, qd, qdd, loads)
    np.testing.assert_array_equal(got, rnea(model, q, qd, qdd, loads))
    with pytest.warns(DeprecationWarning, match="jaxmb.joint_loads"):
        old = jaxmb.rnea_full(model, q, qd, qdd, loads)
    for a, b in zip(old, jaxmb.joint_loads(model, q, qd, qdd, loads)):
        np.testing.assert_array_equal(a, b)
