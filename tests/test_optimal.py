"""Optimal reaching (jaxmb.optimal): references independent of the optimiser.

- Minimum hand jerk: Flash & Hogan's closed form, :func:`jaxmb.optimal.minimum_jerk`
  (5th-order polynomial, straight path) -- the optimiser only sees the hand jerk of a
  joint-space parametrisation, so it must rediscover the line and its timing.
- Minimum joint jerk and, for one link without gravity (tau = I qdd, so
  tau_dot = I qddd), minimum torque change: the same closed form in joint space.
- The torque-change cost against a NumPy evaluation of the notes' closed-form
  two-link equations (M, C) differentiated by hand.
- The literature's qualitative finding: Uno, Kawato & Suzuki (1989) report gently
  curved minimum-torque-change paths for movements across the front of the body,
  where the minimum-jerk path is straight.

Problems are small (few nodes and basis functions) and share one solver
configuration per cost, so that each compiles once.
"""

import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.optimal import COSTS, LBFGS, STATUS, Adam, minimum_jerk, movement, optimize
from jaxmb.optimal._movement import _NAMES, _Config, _movement
from jaxmb.optimal._solve import _metric, _preconditioner

NODES, BASIS = 32, 10
KW = dict(nodes=NODES, basis=BASIS)

# Uno, Kawato & Suzuki (1989), Table 1 as usually quoted (see experiments/
# optimal_reaching.py for the provenance): inertias about the joints, converted to
# the centre of mass (I_cm = I_joint - m d^2). Horizontal plane: no gravity.
M1, M2, L1, L2, D1, D2, IJ1, IJ2 = 0.9, 1.1, 0.25, 0.35, 0.11, 0.15, 0.065, 0.100
UNO = jaxmb.chain([L1, L2], [D1, D2], [M1, M2], [IJ1 - M1 * D1**2, IJ2 - M2 * D2**2], gravity=0.0)
# a lateral movement in front of the body (shoulder at the origin, y forward)
LATERAL = (np.array([-0.2, 0.35]), np.array([0.2, 0.35]), 0.5)


def lateral_deviation(hand):
    """Maximal distance of the path from the start-end chord over the chord length."""
    h = np.asarray(hand)
    d = h[-1] - h[0]
    n = np.array([-d[1], d[0]]) / np.linalg.norm(d)
    return np.max(np.abs((h - h[0]) @ n)) / np.linalg.norm(d)


@pytest.fixture(scope="module")
def lateral():
    """The lateral reach of Uno's arm optimised for every built-in cost."""
    x0, x1, T = LATERAL
    return {c: optimize(UNO, x0, x1, T, target="hand", cost=c, **KW) for c in COSTS}


def test_every_cost_converges_with_exact_boundary_conditions(lateral):
    x0, x1, _ = LATERAL
    for cost, r in lateral.items():
        assert bool(r.converged), (cost, STATUS[int(r.status)])
        assert np.all(np.diff(np.asarray(r.history)) <= 1e-12 * abs(float(r.history[0]))), cost  # L-BFGS descends
        q, qd, qdd = (np.asarray(x) for x in (r.q, r.qd, r.qdd))
        # postures: exact to round-off (the correction is zero at s = 0, 1 analytically)
        np.testing.assert_allclose(q[[0, -1]], np.stack([r.q_start, r.q_end]), rtol=0, atol=1e-14)
        # at rest at both ends: the correction's first derivative vanishes there, and
        # its second for the costs of third order; the minimum torque (second order)
        # leaves the end accelerations free, and they are not zero
        np.testing.assert_allclose(qd[[0, -1]], 0.0, atol=1e-12)
        assert int(r.end_conditions) == (2 if cost == "torque" else 3), cost
        if cost == "torque":
            assert np.min(np.abs(qdd[[0, -1]])) > 0.1 * np.max(np.abs(qdd)), qdd[[0, -1]]
        else:
            np.testing.assert_allclose(qdd[[0, -1]], 0.0, atol=1e-10)
        np.testing.assert_allclose(np.asarray(r.hand)[[0, -1]], np.stack([x0, x1]), atol=1e-12)
        np.testing.assert_allclose(np.asarray(r.hand_vel)[[0, -1]], 0.0, atol=1e-12)


def test_minimum_hand_jerk_is_the_closed_form(lateral):
    x0, x1, T = LATERAL
    r = lateral["hand_jerk"]
    ref = minimum_jerk(x0, x1, T, r.t)
    # 10 jerk-orthonormal functions resolve the straight line in joint space to ~3e-5
    # of the amplitude (the error falls ~6x per 2 more functions): 1e-4 has margin
    err = np.max(np.linalg.norm(np.asarray(r.hand) - np.asarray(ref), axis=-1))
    assert err < 1e-4 * np.linalg.norm(x1 - x0)


def test_an_unresolved_minimum_hand_jerk_is_named(lateral):
    # A reach whose straight hand path passes 0.14 m from the shoulder (the joint
    # angles turn fast along it): 10 functions cost 37 % above the straight path's
    # 720 |x1 - x0|^2 / T^5, the lower bound, and the result said nothing. A larger
    # basis comes closer: the excess was the basis's. The lateral reach is resolved.
    x0, x1, T = np.array([-0.2, 0.35]), np.array([0.35, -0.1]), 0.5
    bound = 720 * np.sum((x1 - x0) ** 2) / T**5
    with pytest.warns(RuntimeWarning, match=r"1 of 1 movements cost more than 1 % above .* excess 37.2 %\): basis=10"):
        r = optimize(UNO, x0, x1, T, target="hand", cost="hand_jerk", **KW)
    assert bool(r.converged) and float(r.cost) > 1.3 * bound
    with pytest.warns(RuntimeWarning, match="basis=30"):  # 4.2 % above, still named
        finer = optimize(UNO, x0, x1, T, target="hand", cost="hand_jerk", nodes=66, basis=30)
    assert float(finer.cost) < 1.05 * bound
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optimize(UNO, *LATERAL[:2], LATERAL[2], target="hand", cost="hand_jerk", **KW)


def test_minimum_torque_change_path_is_curved_where_minimum_jerk_is_straight(lateral):
    # Uno et al. (1989): minimum torque change gives gently curved hand paths for
    # movements across the front of the body; minimum jerk, a straight line. Curved:
    # a lateral deviation above 1 % of the path length (2.5 % here), ten times the
    # bound we hold the minimum-jerk path to (0.1 %; 1e-5 here).
    assert lateral_deviation(lateral["torque_change"].hand) > 0.01
    assert lateral_deviation(lateral["hand_jerk"].hand) < 1e-3
    # and the optimum is lower than the straight minimum-jerk path's torque change
    assert float(lateral["torque_change"].cost) < float(lateral["torque_change"].history[0])


def test_minimum_joint_jerk_is_the_closed_form_in_joint_space(lateral):
    r = lateral["joint_jerk"]
    ref = minimum_jerk(r.q_start, r.q_end, LATERAL[2], r.t)
    np.testing.assert_allclose(r.q, ref, atol=1e-9)


def test_torques_are_the_inverse_dynamics_and_their_components_sum(lateral):
    r = lateral["torque"]
    parts = jaxmb.torque_components(UNO, r.q, r.qd, r.qdd)
    tau = jaxmb.inverse_dynamics(UNO, r.q, r.qd, r.qdd)
    np.testing.assert_allclose(parts["inertial"] + parts["coriolis"] + parts["gravity"] + parts["external"],
                               tau, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(r.tau, tau, rtol=1e-12, atol=1e-12)


def test_torque_costs_are_of_joint_moments_in_segment_angles():
    # the same arm and postures in joint angles and in segment angles: the same optimal
    # movement and cost. Before, the torque costs of a model in segment angles took the
    # generalized forces (a joint moment minus its children's): a torque-change optimum
    # with 12 % more of the joint-moment criterion and a hand path curved otherwise.
    # Uno's two links (the shoulder's generalized force in segment angles is its joint
    # moment minus the elbow's): the joint-angle solve is the one that
    # test_batched_call_equals_a_loop_of_single_calls compiles
    rel = UNO
    seg = jaxmb.chain([L1, L2], [D1, D2], [M1, M2], [IJ1 - M1 * D1**2, IJ2 - M2 * D2**2], gravity=0.0,
                      coordinates="absolute")  # fmt: skip
    qs, qe = np.array([0.3, 1.6]), np.array([1.0, 1.1])
    a = optimize(rel, qs, qe, 0.5, target="joint", cost="torque_change", **KW)
    b = optimize(seg, *(jaxmb.coordinates_to(rel, x, "absolute") for x in (qs, qe)), 0.5, target="joint",
                 cost="torque_change", **KW)  # fmt: skip
    assert a.converged and b.converged
    np.testing.assert_allclose(b.cost, a.cost, rtol=1e-8)
    # (the optimum is flat: ftol stops within 4e-5 rad; the generalized forces gave 0.1 rad)
    np.testing.assert_allclose(jaxmb.coordinates_to(seg, b.q, "relative"), a.q, atol=2e-4)
    np.testing.assert_allclose(b.tau, jaxmb.joint_moments(seg, b.q, b.qd, b.qdd), rtol=1e-12, atol=1e-12)


def _two_link_tau_rate(p, q, qd, qdd, qddd):
    """d tau / dt of the notes' closed form tau = M(q2) qdd + C(q2, qd) (no gravity), NumPy."""
    m1, m2, l1, d1, d2, i1, i2 = p
    a = i1 + i2 + m1 * d1**2 + m2 * (l1**2 + d2**2)
    b = m2 * l1 * d2
    c = i2 + m2 * d2**2
    q2, w1, w2 = q[:, 1], qd[:, 0], qd[:, 1]
    a1, a2, j1, j2 = qdd[:, 0], qdd[:, 1], qddd[:, 0], qddd[:, 1]
    s, co = np.sin(q2), np.cos(q2)
    # tau1 = (a + 2b cos q2) a1 + (c + b cos q2) a2 - b sin q2 (2 w1 w2 + w2^2)
    t1 = (-2 * b * s * w2 * a1 + (a + 2 * b * co) * j1 - b * s * w2 * a2 + (c + b * co) * j2
          - b * co * w2 * (2 * w1 * w2 + w2**2) - b * s * (2 * a1 * w2 + 2 * w1 * a2 + 2 * w2 * a2))
    # tau2 = (c + b cos q2) a1 + c a2 + b sin q2 w1^2
    t2 = -b * s * w2 * a1 + (c + b * co) * j1 + c * j2 + b * co * w2 * w1**2 + 2 * b * s * w1 * a1
    return np.stack([t1, t2], -1)


def test_torque_change_matches_a_closed_form():
    rng = np.random.default_rng(7)
    coef = rng.normal(scale=0.3, size=(BASIS, 2))
    m = movement(UNO, [0.3, 1.2], [1.1, 0.6], 0.7, coef, nodes=50)
    p = (M1, M2, L1, D1, D2, IJ1 - M1 * D1**2, IJ2 - M2 * D2**2)
    ref = _two_link_tau_rate(p, *(np.asarray(x) for x in (m.q, m.qd, m.qdd, m.qddd)))
    np.testing.assert_allclose(m.tau_dot, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    # and the trapezoidal integral of it is the cost
    w = np.full(50, 0.7 / 49)
    w[[0, -1]] /= 2
    np.testing.assert_allclose(COSTS["torque_change"](m), np.sum(w[:, None] * ref**2), rtol=1e-10)


# one link in the horizontal plane: tau = I_joint qdd, so tau_dot = I qddd and the
# minimum torque change is the minimum (joint) jerk, whatever the inertia
PENDULUM = jaxmb.chain([0.4], [0.2], [2.0], [0.03], gravity=0.0)


def test_one_link_minimum_torque_change_is_minimum_jerk():
    init = np.random.default_rng(1).normal(scale=0.2, size=(BASIS, 1))  # start off the optimum
    r = optimize(PENDULUM, [0.2], [1.4], 0.6, cost="torque_change", init=init, **KW)
    assert bool(r.converged)
    np.testing.assert_allclose(r.q, minimum_jerk([0.2], [1.4], 0.6, r.t), atol=1e-9)


def test_one_link_minimum_torque_is_the_cubic_with_free_end_accelerations():
    # tau = I qdd: int tau^2 dt is least for the cubic q0 + dq (3 s^2 - 2 s^3), at rest
    # at both ends but with end accelerations +-6 dq / T^2 (its Euler-Lagrange equation,
    # q^(4) = 0, admits q and qd at the ends, not qdd). Before: every path had zero end
    # accelerations, the optimum was outside the family and the cost fell with the basis
    q0, q1, T = 0.2, 1.4, 0.6
    r = optimize(PENDULUM, [q0], [q1], T, cost={"torque": jnp.asarray(1.0)}, **KW)  # before: a 0-d array refused
    assert bool(r.converged) and int(r.end_conditions) == 2
    s, dq, inertia = np.asarray(r.t) / T, q1 - q0, 0.03 + 2.0 * 0.2**2  # about the joint
    np.testing.assert_allclose(r.q[:, 0], q0 + dq * (3 * s**2 - 2 * s**3), atol=1e-9)
    np.testing.assert_allclose(float(r.cost), 12 * inertia**2 * dq**2 / T**3, rtol=1e-9)
    np.testing.assert_allclose(r.tau[[0, -1], 0], np.array([6, -6]) * inertia * dq / T**2, rtol=1e-8)


def _jerk(m):  # joint jerk written by hand: the optimum is the closed form
    return jnp.sum(m.weights[:, None] * m.qddd**2)


def test_user_cost_function():
    init = np.full((BASIS, 1), 0.1)
    r = optimize(PENDULUM, [0.0], [-1.0], 0.8, cost=_jerk, init=init, **KW)
    assert bool(r.converged)
    np.testing.assert_allclose(r.q, minimum_jerk([0.0], [-1.0], 0.8, r.t), atol=1e-9)
    # what a cost function sees: Gauss-Legendre points whose weights integrate to T
    m = movement(PENDULUM, [0.0], [-1.0], 0.8, init, nodes=NODES, quadrature="gauss")
    np.testing.assert_allclose(float(m.integral(jnp.ones_like(m.t))), 0.8, rtol=1e-12)
    np.testing.assert_allclose(float(_jerk(m)), float(COSTS["joint_jerk"](m)), rtol=1e-12)


@pytest.mark.parametrize("kwargs, match", [
    (dict(duration=-0.6), "duration must be a finite number > 0"),  # before: a negative "squared" cost
    (dict(duration=0.0), "duration must be a finite number > 0"),  # before: NaN
    (dict(duration="0.6"), "duration must be real"),
    (dict(duration=[0.5, 0.6]), r"duration must have shape \(\) \(a scalar\)"),
    (dict(q_start=[0.2, 0.3]), r"q_start must have shape \(1,\)"),  # before: a JAX TypeError
    (dict(q_end=[[1.4]]), r"q_end must have shape \(1,\)"),
    (dict(q_end=[np.nan]), "q_end is not finite"),
    (dict(q_start=["a"]), "q_start must be real"),
    (dict(coef=np.zeros((BASIS, 2))), r"coef must have shape \(K, dof=1\)"),
    (dict(coef=np.full((BASIS, 1), np.inf)), "coef is not finite"),
    (dict(end_conditions=1), "end_conditions must be 2"),
])  # fmt: skip
def test_movement_checks_its_inputs(kwargs, match):
    args = dict(q_start=[0.2], q_end=[1.4], duration=0.6, coef=np.zeros((BASIS, 1)))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        movement(PENDULUM, *(args.pop(k) for k in ("q_start", "q_end", "duration", "coef")), nodes=NODES, **args)


def test_movement_checks_leave_jit_vmap_and_grad_working():
    # traced values are not checked (their shapes are): the joint jerk of the
    # minimum-jerk path, 720 dq^2 / T^5, differentiated in T through movement()
    a = np.zeros((BASIS, 1))

    def jerk(T, q1):
        return COSTS["joint_jerk"](movement(PENDULUM, jnp.array([0.2]), q1, T, a, nodes=NODES, quadrature="gauss"))

    T, q1 = jnp.array([0.5, 0.6]), jnp.array([[1.4], [0.7]])
    dq = np.asarray(q1)[:, 0] - 0.2
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.grad(jerk)))(T, q1), -5 * 720 * dq**2 / T**6, rtol=1e-10)


def test_optimize_under_a_transformation_says_what_to_use():
    # before: a TracerArrayConversionError deep in the call (jit, vmap), or JAX's
    # "Reverse-mode differentiation does not work for lax.while_loop" (grad)
    def solve(T):
        return optimize(PENDULUM, np.array([0.2]), np.array([1.0]), T, cost="joint_jerk").cost

    for transform in (jax.jit, jax.grad, jax.vmap):
        with pytest.raises(ValueError, match=r"optimize cannot run under jax.jit, jax.vmap or jax.grad \(duration "
                                             r"traced\).*jaxmb.optimal.movement"):  # fmt: skip
            transform(solve)(jnp.array([0.5]) if transform is jax.vmap else 0.5)


def test_non_finite_cost_is_reported_not_returned():
    # finite only within 1e-9 rad of the initial path: Adam's first step leaves it
    init = np.full((BASIS, 1), 0.1)
    q0 = movement(PENDULUM, [0.0], [1.0], 0.5, init, nodes=NODES, quadrature="gauss").q

    def cost(m):
        return m.integral(m.qddd**2) + jnp.log(1e-9 - jnp.max(jnp.abs(m.q - q0)))

    r = optimize(PENDULUM, [0.0], [1.0], 0.5, cost=cost, init=init, solver=Adam(), **KW)
    assert not bool(r.converged) and int(r.status) == 3 and int(r.iterations) == 1
    assert np.all(np.isfinite(r.q)) and np.all(np.isfinite(r.tau)) and np.isfinite(float(r.cost))
    np.testing.assert_array_equal(r.coef, init)  # the last finite iterate


def test_a_stall_at_the_edge_of_the_cost_domain_is_not_convergence():
    # a cost not finite beyond max q = 1.1 whose minimum (a path pulled towards 2 rad)
    # lies beyond: before, the line search shrank its steps against the boundary (to
    # 8e-16) until the decrease fell below ftol, and the stop was reported as status 1,
    # "converged", with a gradient 3e4 times gtol. The same margin with the pull
    # towards 0.9 has its minimum inside the domain: converged as before
    def cost(target):
        return lambda m: m.integral(m.qddd**2) + 1e8 * m.integral((m.q - target) ** 2) + jnp.sqrt(1.1 - jnp.max(m.q))

    r = optimize(PENDULUM, [0.0], [1.0], 0.5, cost=cost(2.0), **KW)
    assert int(r.status) == 4 and not bool(r.converged), STATUS[int(r.status)]
    assert float(r.grad_norm) > 1e3 * 1e-7 and np.all(np.isfinite(r.q)) and np.isfinite(float(r.cost))
    assert 1.09 < float(jnp.max(r.q)) < 1.1
    inside = optimize(PENDULUM, [0.0], [1.0], 0.5, cost=cost(0.9), **KW)
    assert bool(inside.converged), STATUS[int(inside.status)]


def test_a_cost_not_finite_at_the_initial_guess_raises():
    # before: a NaN cost returned with status 3
    with pytest.raises(ValueError, match="not finite at the initial guess"):
        optimize(PENDULUM, [0.0], [1.0], 0.5, cost=lambda m: jnp.log(-m.integral(m.qddd**2)), **KW)


def test_batched_call_equals_a_loop_of_single_calls():
    # two arms (stacked parameters) with two reaches in one call; three in chunks of
    # two (the last chunk padded): one compiled batch of two serves both
    arms = [UNO, UNO.replace(mass=np.array([1.2, 0.8])), UNO.replace(length=np.array([0.3, 0.33]))]
    stack = lambda ms: jax.tree_util.tree_map(lambda *x: jnp.stack(x), *ms)  # noqa: E731
    starts = np.array([[0.3, 1.6], [-0.2, 1.9], [0.5, 1.2]])
    ends = np.array([[1.0, 1.1], [0.6, 1.3], [0.9, 0.7]])
    batch = optimize(stack(arms[:2]), starts[:2], ends[:2], 0.5, target="joint", **KW)
    chunked = optimize(stack(arms), starts, ends, 0.5, target="joint", chunk=2, **KW)
    assert chunked.q.shape == (3, NODES, 2) and chunked.history.shape[0] == 3
    for k in range(3):
        one = optimize(arms[k], starts[k], ends[k], 0.5, target="joint", **KW)
        assert bool(one.converged)
        for f in ("q", "tau", "hand", "cost"):
            # vmap turns the line search's branches into selects: same steps, other
            # rounding, so agreement to the convergence tolerance, not to round-off
            ref = np.asarray(getattr(one, f))
            np.testing.assert_allclose(getattr(chunked, f)[k], ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())
            if k < 2:
                np.testing.assert_allclose(getattr(batch, f)[k], ref, rtol=1e-6, atol=1e-8 * np.abs(ref).max())


@pytest.mark.parametrize("cost", [
    "torque_change",
    pytest.param({"torque_change": 1.0, "hand_jerk": 1e-3}, id="mixed", marks=pytest.mark.slow),
])  # fmt: skip
def test_preconditioning_changes_the_iterations_not_the_optimum(cost):
    # L-BFGS on b = a S (S^2 the leading-order metric of the cost): the same minima
    # as on the plain coefficients, in fewer iterations (a weighted sum with --slow).
    # The three problems one at a time: the preconditioned single solve is the one
    # test_batched_call_equals_a_loop_of_single_calls compiles (batches are tested there)
    starts = np.array([[0.3, 1.6], [-0.2, 1.9], [0.5, 1.2]])
    ends = np.array([[1.0, 1.1], [0.6, 1.3], [0.9, 0.7]])
    plain = [optimize(UNO, a, b, 0.5, target="joint", cost=cost, solver=LBFGS(precondition=False), **KW)
             for a, b in zip(starts, ends)]  # fmt: skip
    pre = [optimize(UNO, a, b, 0.5, target="joint", cost=cost, **KW) for a, b in zip(starts, ends)]
    stack = lambda rs, f: np.stack([np.asarray(getattr(r, f)) for r in rs])  # noqa: E731
    assert np.all(stack(plain, "converged")) and np.all(stack(pre, "converged"))
    np.testing.assert_allclose(stack(pre, "cost"), stack(plain, "cost"), rtol=1e-9)
    np.testing.assert_allclose(stack(pre, "q"), stack(plain, "q"), atol=1e-6)
    its_pre, its_plain = stack(pre, "iterations"), stack(plain, "iterations")
    assert np.sum(its_pre) < 0.6 * np.sum(its_plain), (cost, its_pre, its_plain)


# a redundant arm: three links for a planar hand position (J^T J of rank 2)
ARM3 = jaxmb.chain([0.3, 0.28, 0.1], [0.13, 0.12, 0.05], [2.0, 1.2, 0.4], [0.02, 0.01, 0.001], gravity=0.0)


def test_redundant_arm_converges_with_the_default_preconditioning():
    # before: the metric's null space (self-motions, unseen by the hand jerk) floored at
    # 1e-8 of its largest eigenvalue was stretched 1e4 times, and L-BFGS stopped at
    # maxiter (1,000 iterations here, 2,000 with 100 nodes; plain coefficients: 792).
    # The lateral hand reach (-0.25, 0.4) -> (0.25, 0.4) m, from its inverse kinematics
    q0 = np.array([1.3155596888917271, 1.252080995265489, 1.010799017018221])
    q1 = np.array([0.1983610582046058, 1.252080995265489, 1.010799017018221])
    r = optimize(ARM3, q0, q1, 0.5, cost="hand_jerk", **KW)
    assert bool(r.converged) and int(r.iterations) < 300, (STATUS[int(r.status)], int(r.iterations))
    np.testing.assert_allclose(np.asarray(r.hand)[[0, -1]], [[-0.25, 0.4], [0.25, 0.4]], atol=1e-12)
    # Flash & Hogan's closed form, 720 D^2 / T^5, approached from above by the basis
    assert 0 <= float(r.cost) / (720 * 0.5**2 / 0.5**5) - 1 < 1e-6


def test_adam_converges_with_its_defaults(lateral):
    # before: Adam on the plain coefficients with step 1e-2 stopped at maxiter 300 far
    # from the optimum (4075 against 3329 on the notes' arm); it now iterates on the
    # preconditioned coefficients, where the step is relative to the problem's scale
    x0, x1, T = LATERAL
    r = optimize(UNO, x0, x1, T, target="hand", cost="torque_change", solver=Adam(), **KW)
    assert bool(r.converged), (STATUS[int(r.status)], int(r.iterations))
    np.testing.assert_allclose(float(r.cost), float(lateral["torque_change"].cost), rtol=1e-8)


def test_the_metric_conditions_the_torque_change_hessian():
    # the Hessian of the normalised torque-change cost at the minimum-jerk path against
    # I_K (x) G, G = S^2 from the mass matrix along it (see jaxmb.optimal._solve._metric)
    cfg = _Config(None, NODES, BASIS, "lbfgs", 1, 0.0, 0.0, 1, 0.0, 1, 1, None, "gauss", ("torque_change",))
    w = jnp.asarray([float(k == "torque_change") for k in _NAMES])
    qs, qe, T = jnp.asarray([0.3, 1.6]), jnp.asarray([1.0, 1.1]), jnp.asarray(0.5)
    f = lambda a: COSTS["torque_change"](_movement(UNO, qs, qe, T, a, cfg))  # noqa: E731
    H = np.asarray(jax.jit(jax.hessian(f))(jnp.zeros((BASIS, 2)))).reshape(2 * BASIS, 2 * BASIS)
    _, S_inv = _preconditioner(_metric(UNO, qs, qe, T, w, cfg, ("torque_change",)), jnp.float64)
    P = np.kron(np.eye(BASIS), np.asarray(S_inv))  # a = b S^-1, row by row
    cond = lambda A: np.linalg.cond(A)  # noqa: E731
    assert cond(H) > 50 and cond(P.T @ H @ P) < 3
    # scaled as the Hessian itself (the first L-BFGS step is about a unit step)
    ev = np.linalg.eigvalsh(P.T @ H @ P)
    assert 0.5 < ev[0] and ev[-1] < 2


def test_zero_weights_are_not_evaluated():
    # a term of zero weight is skipped; all weights zero: nothing to minimise, an
    # error (before: the start path returned as converged, cost 0)
    a = optimize(PENDULUM, [0.2], [1.4], 0.6, cost={"torque_change": 1.0, "hand_jerk": 0.0}, **KW)
    b = optimize(PENDULUM, [0.2], [1.4], 0.6, cost="torque_change", **KW)
    np.testing.assert_array_equal(a.q, b.q)
    with pytest.raises(ValueError, match="every weight of cost .* is 0"):
        optimize(PENDULUM, [0.2], [1.4], 0.6, cost={"torque": 0.0}, **KW)
    with pytest.raises(ValueError, match="every weight of cost .* is 0"):
        optimize(PENDULUM, [0.2], [1.4], 0.6, cost={"torque": 0.0, "hand_jerk": np.float32(0)}, **KW)


def test_out_of_reach_hand_targets():
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        r = optimize(PENDULUM, [0.4, 0.0], [0.0, 0.9], 0.5, target="hand", **KW)
    assert any("out of reach" in str(x.message) for x in w)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(r.hand)[-1]), 0.4, rtol=1e-10)  # onto the circle
    with pytest.raises(ValueError, match="out of reach"):
        optimize(PENDULUM, [0.4, 0.0], [0.0, 0.9], 0.5, target="hand", out_of_reach="raise", **KW)


@pytest.mark.parametrize("kwargs, match", [
    (dict(duration=0.0), "duration must be a finite number > 0"),
    (dict(duration=-1.0), "duration must be a finite number > 0"),
    (dict(duration=float("nan")), "duration must be a finite number > 0 .*got nan"),  # before: IndexError
    (dict(duration=[0.5, float("inf")]), "duration must be a finite number > 0 .* at flat index 1"),
    (dict(duration="0.5"), "duration must be a finite number > 0 .* or an array of them"),
    (dict(start=["a", "b"]), "start must be an array of real numbers"),
    (dict(cost={}), "cost is an empty dict"),  # before: a JAX TypeError
    (dict(nodes=8), r"nodes=8 is too few for basis=10 .* nodes >= 26"),
    (dict(nodes=155, quadrature="trapezoid"), r"nodes >= 156"),
    (dict(end=[0.1, 0.2, 0.3]), r"end must have shape \(2,\)"),
    (dict(start=[[0.1, 0.2]] * 3, end=[[0.1, 0.2]] * 2), "batch shapes do not broadcast"),
    (dict(target="hand"), r"start must have shape \(2,\)"),
    (dict(cost="minimum_effort"), "unknown cost 'minimum_effort'"),
    (dict(cost=3), "cost must be a name"),
    (dict(nodes=1), "nodes must be >= 2"),
    (dict(nodes=10.0), "nodes must be an int"),
    (dict(basis=0), "basis must be >= 1"),
    (dict(target="joints"), "target must be 'joint'"),
    (dict(solver="bfgs"), "solver must be jaxmb.optimal.LBFGS"),
    (dict(start=[np.nan, 0.0]), "start is not finite"),
    (dict(init=np.zeros((3, 2))), "init must have shape"),
    (dict(cost={"torque": 0.0}), "every weight of cost .* is 0"),  # before: start path returned, "converged"
    (dict(cost={"torque": np.array([1.0])}), "weight of cost 'torque' must be a finite real number"),
    (dict(cost={"torque": jnp.asarray(-1.0)}), "weight of cost 'torque' must be a finite real number"),
    (dict(cost={"torque": "1"}), "weight of cost 'torque' must be a finite real number"),
    (dict(end_conditions=4), "end_conditions must be 'auto', 2 or 3"),
])
def test_bad_inputs_get_clear_errors(kwargs, match):
    args = dict(start=[0.1, 1.0], end=[0.5, 0.7], duration=0.5)
    args.update({k: kwargs.pop(k) for k in list(kwargs) if k in args})
    if kwargs.get("target") == "hand":
        args["start"] = [0.1, 0.2, 0.3]
    with pytest.raises(ValueError, match=match):
        optimize(UNO, args["start"], args["end"], args["duration"], **{"target": "joint", **kwargs})


def test_hand_start_guess_is_checked_under_its_own_name():
    hand = dict(target="hand", **KW)
    with pytest.raises(ValueError, match=r"q_guess must be real, of shape \(2,\)"):
        optimize(UNO, [-0.2, 0.35], [0.2, 0.35], 0.5, q_guess=[0.1, 0.2, 0.3], **hand)
    with pytest.raises(ValueError, match="q_guess is not finite"):  # before: reported as "q0"
        optimize(UNO, [-0.2, 0.35], [0.2, 0.35], 0.5, q_guess=[np.nan, 0.2], **hand)
    with pytest.raises(ValueError, match="q_guess's batch .* does not broadcast"):
        optimize(UNO, [-0.2, 0.35], [0.2, 0.35], 0.5, q_guess=np.zeros((3, 2)), **hand)


def test_few_nodes_are_refused_and_enough_give_the_true_cost(lateral):
    # nodes=8 with basis=10 reported 9.4e-7, converged, for a path whose torque change is
    # 1.1e6: the optimiser had minimised the quadrature error. min_nodes is the rule
    from jaxmb.optimal import min_nodes

    assert min_nodes(10) == 26 and min_nodes(10, "trapezoid") == 156 and min_nodes(1) == 8
    assert NODES >= min_nodes(BASIS)
    with pytest.raises(ValueError, match="too few"):
        optimize(UNO, *LATERAL, target="hand", nodes=25, basis=BASIS)
    # with enough nodes the reported cost is the cost of the path, integrated finely
    for cost, r in lateral.items():
        fine = movement(UNO, r.q_start, r.q_end, LATERAL[2], r.coef, nodes=400, quadrature="gauss",
                        end_conditions=r.end_conditions)
        np.testing.assert_allclose(float(r.cost), float(COSTS[cost](fine)), rtol=1e-4, err_msg=cost)
    # the trapezoidal rule's O(h^2) error is a bias the optimiser follows: at its
    # minimum nodes the reported cost stays within 5e-4 of the exact integral's minimum
    # and so does the path's true cost (before, at 52 nodes: 0.7 % below, the path 0.6 % above)
    r = optimize(UNO, *LATERAL, target="hand", basis=BASIS, quadrature="trapezoid",
                 nodes=min_nodes(BASIS, "trapezoid"))  # fmt: skip
    fine = movement(UNO, r.q_start, r.q_end, LATERAL[2], r.coef, nodes=400, quadrature="gauss")
    best = float(lateral["torque_change"].cost)
    assert abs(float(r.cost) / best - 1) < 5e-4 and 0 <= float(COSTS["torque_change"](fine)) / best - 1 < 5e-4


def test_batched_durations_give_each_problem_its_times():
    # before: r.t was the first problem's times for every problem
    T = np.array([0.5, 1.0])
    r = optimize(PENDULUM, [0.2], [1.4], T, cost="joint_jerk", **KW)
    assert r.t.shape == (2, NODES) and r.q.shape == (2, NODES, 1)
    np.testing.assert_allclose(r.t[:, -1], T, rtol=1e-15)
    for k in range(2):
        np.testing.assert_allclose(r.q[k], minimum_jerk([0.2], [1.4], T[k], r.t[k]), atol=1e-9)
    # one duration: one time axis shared by the batch
    r = optimize(PENDULUM, [[0.2], [0.1]], [1.4], 0.7, cost="joint_jerk", **KW)
    assert r.t.shape == (NODES,) and float(r.t[-1]) == 0.7


def test_progress_without_chunk_shows_a_bar(capsys):
    # before: progress=True did nothing unless chunk was given; now a batch is cut into
    # at most 20 chunks (here 2 problems each: the compiled batch of two above, reused)
    r = optimize(PENDULUM, np.linspace(0.0, 1.0, 40)[:, None], [1.4], 0.6, cost="joint_jerk", progress=True, **KW)
    assert r.q.shape == (40, NODES, 1) and np.all(r.converged)
    assert "40/40" in capsys.readouterr().err


def test_float32_hand_targets_are_reached_without_a_warning():
    # the README's example without x64: the inverse kinematics meets the targets to
    # float32's resolution (1.07e-7 m), which the float64 threshold (1e-8 of the arm)
    # called out of reach
    arm = jaxmb.two_link_arm(gravity=0.0)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        r = optimize(arm.astype(np.float32), [-0.25, 0.40], [0.25, 0.40], 0.5, target="hand", cost="joint_jerk",
                     out_of_reach="raise", solver=LBFGS(max_iter=3), **KW)  # fmt: skip
        assert r.q.dtype == np.float32
    np.testing.assert_allclose(np.asarray(r.hand)[[0, -1]], [[-0.25, 0.40], [0.25, 0.40]], atol=1e-5)
    # an unreachable target is still one in float32
    with jax.enable_x64(False), pytest.raises(ValueError, match="out of reach"):
        optimize(arm.astype(np.float32), [-0.25, 0.40], [0.25, 0.75], 0.5, target="hand", cost="joint_jerk",
                 out_of_reach="raise", solver=LBFGS(max_iter=3), **KW)  # fmt: skip


def test_float32_with_x64_on_stays_float32_without_a_warning():
    # with x64 on, optax's line search stepped by float64 scalars and the cost was
    # evaluated in float64 (the float32 model cast up, with a warning that told the
    # user to cast it to float32, which they had done)
    arm = jaxmb.two_link_arm(gravity=0.0)
    q0, q1 = np.array([0.5, 1.0]), np.array([1.0, 1.2])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = optimize(arm.astype(np.float32), q0.astype(np.float32), q1.astype(np.float32), np.float32(0.5),
                     target="joint", cost="torque_change", **KW)  # fmt: skip
    assert r.q.dtype == np.float32 and r.cost.dtype == np.float32 and bool(r.converged)
    ref = optimize(arm, q0, q1, 0.5, target="joint", cost="torque_change", **KW)
    assert abs(float(r.cost) / float(ref.cost) - 1) < 1e-5


def test_vmap_batching_equals_map():
    # the lock-step form (for accelerators) solves the same problems
    kw = dict(cost="torque_change", **KW)
    starts, ends = np.array([[0.2], [-0.3]]), np.array([[1.4], [0.5]])
    a = optimize(PENDULUM, starts, ends, 0.6, batching="vmap", **kw)
    b = optimize(PENDULUM, starts, ends, 0.6, **kw)
    np.testing.assert_allclose(a.q, b.q, rtol=1e-6, atol=1e-9)
    assert np.all(a.converged) and np.all(b.converged)


def test_cli_optimal_writes_figure_and_csv(tmp_path, capsys):
    from jaxmb.cli import main

    from jaxmb.cli._output import _write_outputs

    # a file of an earlier run with --grid (written as the command writes, with its
    # manifest) is removed; one of the user's by the same name in another folder
    # is not (before, any file by that name was removed: a user's file, too)
    _write_outputs({tmp_path / "optimal_workspace.csv": "x_m,y_m\n"}, "optimal")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "optimal_workspace.csv").write_text("my notes\n")
    assert main(["optimal", "--cost", "hand_jerk", "--nodes", str(NODES), "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "hand_jerk" in out and "removed" in out and "optimal_workspace.csv of an earlier run" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [".jaxmb-optimal.json", "mine", "optimal_reach.csv",
                                                          "optimal_reach.png"]  # fmt: skip
    assert _write_outputs({mine / "optimal_reach.csv": "x\n"}, "optimal") == []  # as a run writes it there
    assert (mine / "optimal_workspace.csv").read_text() == "my notes\n"
    rows = (tmp_path / "optimal_reach.csv").read_text().splitlines()
    assert rows[0].startswith("criterion,t_s") and len(rows) == 1 + NODES
    # the values written: the default reach (-0.25, 0.4) -> (0.25, 0.4) m in 0.5 s by
    # minimum hand jerk is Flash and Hogan's (1985) straight path, x = x0 + D (10 s^3 -
    # 15 s^4 + 6 s^5), its speed peaking at 1.875 D / T; the angles put the hand there
    # (the default arm: two_link_arm(height=1.70, body_mass=70))
    assert rows[0].split(",") == ["criterion", "t_s", "q1_rad", "q2_rad", "x_m", "y_m", "vx_m_s", "vy_m_s",
                                  "tau1_Nm", "tau2_Nm"]  # fmt: skip
    tab = np.loadtxt(tmp_path / "optimal_reach.csv", delimiter=",", skiprows=1, usecols=range(1, 10))
    t, q, xy, v = tab[:, 0], tab[:, 1:3], tab[:, 3:5], tab[:, 5:7]
    sn = t / 0.5
    np.testing.assert_allclose(t[[0, -1]], [0.0, 0.5], atol=1e-12)
    np.testing.assert_allclose(xy[:, 0], -0.25 + 0.5 * (10 * sn**3 - 15 * sn**4 + 6 * sn**5), atol=2e-3)
    np.testing.assert_allclose(xy[:, 1], 0.4, atol=2e-3)
    np.testing.assert_allclose(v[:, 0], 0.5 / 0.5 * (30 * sn**2 - 60 * sn**3 + 30 * sn**4), atol=2e-2)
    assert abs(v[:, 0].max() - 1.875) < 0.02
    arm = jaxmb.two_link_arm(height=1.70, body_mass=70.0, gravity=0.0)
    l1, l2 = float(arm.length[0]), float(arm.length[1])
    hand = np.stack([l1 * np.cos(q[:, 0]) + l2 * np.cos(q.sum(1)), l1 * np.sin(q[:, 0]) + l2 * np.sin(q.sum(1))], 1)
    np.testing.assert_allclose(hand, xy, atol=1e-8)
    umask = os.umask(0)
    os.umask(umask)
    for p in tmp_path.iterdir():  # before: 0600 (mkstemp's mode)
        assert p.is_dir() or p.stat().st_mode & 0o777 == 0o666 & ~umask, p
    # bad input: a one-line message and a non-zero exit, nothing written
    out = tmp_path / "bad"
    assert main(["optimal", "--end", "2", "2", "--out", str(out)]) == 2
    assert "out of reach" in capsys.readouterr().err and not out.exists()


@pytest.mark.parametrize("args, match", [
    (["--nodes", "8"], "--nodes must be >= 26"),
    (["--basis", "0"], "--basis must be >= 1"),
    (["--height", "175"], "--height 175 m is outside a person's 0.3 to 3 m"),  # before: a 42.9 m upper arm
    (["--basis", "20", "--nodes", "40"], "--nodes must be >= 46 .* for the 20 correction functions"),
    (["--duration", "nan"], "--duration must be a finite number > 0"),
    # before: accepted, peak hand speeds of 9e8 m/s
    (["--duration", "1e-9"], r"--duration must be between 0.05 and 60 s for a human arm's movement, got 1e-09 s"),
    (["--grid", "1"], r"--grid must be 0 \(off\) or >= 2"),
    # before: "|p| = 0.750 m, the arm reaches 0.110 m < |p| < 0.750 m"
    (["--end", "0.7499", "0"], r"\|p\| = 0.7499 m, the arm reaches 0.1105 m <= \|p\| <= 0.7497 m"),
    (["--grid", "-3"], r"--grid must be 0 \(off\) or >= 2"),
    (["--start", "nan", "0.4"], "--start and --end must be finite"),
    (["--start", "0.25", "0.4"], "--start and --end are the same point"),  # before: a curvature of 30.77 %
])  # fmt: skip
def test_cli_optimal_checks_everything_before_optimising(tmp_path, capsys, args, match):
    from jaxmb.cli import main

    out = tmp_path / "out"
    assert main(["optimal", *args, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.search(match, err[0]), err
    assert not out.exists()


def test_cli_optimal_out_must_be_a_folder(tmp_path, capsys, monkeypatch):
    from jaxmb.cli import main

    afile = tmp_path / "afile"
    afile.write_text("")
    monkeypatch.setattr(jaxmb, "optimize", lambda *a, **k: pytest.fail("optimised before checking --out"))
    assert main(["optimal", "--out", str(afile)]) == 2  # before: FileExistsError after optimising
    assert "exists and is not a folder" in capsys.readouterr().err
    # a folder that cannot be made (under a file): before, a traceback after optimising
    assert main(["optimal", "--out", str(afile / "sub")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot create --out folder" in err[0], err


def test_cli_curvature_of_a_vanishing_chord_is_nan(capsys):
    # before: a 1e-17 m chord (start = end up to round-off) gave a curvature of 30.77 %
    from jaxmb.cli.optimal import curvature
    from jaxmb.cli import main

    loop = np.array([[0.25, 0.4], [0.27, 0.41], [0.25 + 1e-17, 0.4]])
    assert np.isnan(curvature(loop))
    arc = np.array([[[0.0, 0.0], [0.5, 0.1], [1.0, 0.0]], [[0.0, 0.0], [0.5, -0.2], [1.0, 0.0]]])
    np.testing.assert_allclose(curvature(arc), [0.1, -0.2])
    # --grid maps the minimum torque change whatever --cost says: its help says so
    with pytest.raises(SystemExit):
        main(["optimal", "--help"])
    assert "minimum torque change paths (whatever --cost says)" in " ".join(capsys.readouterr().out.split())


# ------------------------------------------------- solver option values (issue 40)


@pytest.mark.parametrize("make, match", [
    (lambda: LBFGS(max_iter=0), "max_iter must be >= 1"),
    (lambda: LBFGS(max_iter=2.0), "max_iter must be an int"),
    (lambda: LBFGS(gtol=-1.0), "gtol must be a finite number >= 0"),
    (lambda: LBFGS(ftol=float("nan")), "ftol must be a finite number >= 0"),
    (lambda: LBFGS(memory=0), "memory must be >= 1"),
    (lambda: LBFGS(precondition="yes"), "precondition must be True or False"),
    (lambda: Adam(learning_rate=float("inf")), "learning_rate must be a finite number >= 0"),
])  # fmt: skip
def test_solver_options_check_their_settings(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_the_old_solver_keywords_still_work_with_a_deprecation_warning():
    # method, maxiter, gtol, ... became solver=LBFGS(...)/Adam(...): the old spelling
    # gives the same result for one release, and names the new one
    q0, q1 = [0.3, 1.6], [1.0, 1.1]
    new = optimize(UNO, q0, q1, 0.5, target="joint", cost="torque", solver=LBFGS(max_iter=3, precondition=False),
                   **KW)  # fmt: skip
    with pytest.warns(DeprecationWarning, match=r"solver=LBFGS\(max_iter=\.\.\., precondition=\.\.\.\)"):
        old = optimize(UNO, q0, q1, 0.5, target="joint", cost="torque", maxiter=3, precondition=False, **KW)
    np.testing.assert_array_equal(old.coef, new.coef)
    with pytest.warns(DeprecationWarning, match=r"solver=Adam\("):
        adam = optimize(UNO, q0, q1, 0.5, target="joint", cost="torque", method="adam", maxiter=2, **KW)
    new = optimize(UNO, q0, q1, 0.5, target="joint", cost="torque", solver=Adam(max_iter=2), **KW)
    np.testing.assert_array_equal(adam.coef, new.coef)
    with pytest.raises(ValueError, match="method must be 'lbfgs' or 'adam'"):
        optimize(UNO, q0, q1, 0.5, target="joint", method="bfgs", **KW)
    with pytest.raises(ValueError, match="not both"):
        optimize(UNO, q0, q1, 0.5, target="joint", solver=LBFGS(), maxiter=3, **KW)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_iters'"):
        optimize(UNO, q0, q1, 0.5, target="joint", max_iters=3, **KW)
