"""The somersault experiment (Blajer & Czaplicki 2005, Fig. 2): a short, coarse run.

The machinery lives in experiments/somersault.py (imported here from that folder).
The reference is a simulation in maximal coordinates (jaxmb.maximal: x, y, theta per
segment, the joints as implicit constraints with Lagrange multipliers, no pose map);
its multipliers are the joint forces. The projection (jaxmb.joint_reactions), from the
simulated kinematics and the bed force alone, must reproduce them, and jaxmb.simulate
(minimal coordinates) must reproduce the trajectory. The experiment's own building
blocks (bed, plan, controller) are checked first; jaxmb.maximal itself is tested on
random models in test_maximal.py.
"""

import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import maximal
from jaxmb.anthropometry import seven_segment_human

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "experiments"))
import somersault as so  # noqa: E402  (experiments/somersault.py)

# Two float64 evaluations of the same kinematics by different formulas (the bed
# point from maximal coordinates vs the pose map): a few hundred ulp of the largest term.
ROUNDOFF = 1e-10
# A linear solve (of the mass matrix in the controller) multiplies round-off by the
# condition number (<~ 1e4 for this model).
SOLVE_RTOL = 1e-8
# Along a simulated motion the multipliers differ from the projection by the
# Baumgarte terms m (2 alpha Phidot + beta^2 Phi) and the drift of the recovered q;
# with RK4 at dt = 1 ms and alpha = beta = 20/s both are far below 1e-6 of the peak.
SIM_REL = 1e-6
# Two RK4 integrations of the same closed loop in different coordinates agree to
# the integration error, amplified by the inverted-pendulum phase on the bed.
TRAJ_ATOL = 1e-6
DRIFT_ATOL = 1e-8  # m


@pytest.fixture(scope="module")
def model():
    return seven_segment_human(height=1.75, body_mass=70.0, table="dempster")


@pytest.fixture(scope="module")
def scenario(model):
    return so.back_somersault(model)


def _random_state(model, seed):
    rng = np.random.default_rng(seed)
    q = np.concatenate([rng.normal(size=2), rng.uniform(-np.pi, np.pi, model.segments)])
    qd = rng.normal(scale=3.0, size=model.dof)
    qdd = rng.normal(scale=20.0, size=model.dof)
    return jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)


def test_bed_force():
    k, c = 6000.0, 100.0
    assert so.bed_force(0.1, -5.0, k, c) == 0.0  # above the bed: no force
    np.testing.assert_allclose(so.bed_force(-0.2, -1.0, k, c), 1200.0 + 100.0)
    assert so.bed_force(-0.01, 5.0, k, c) == 0.0  # rising fast: the bed does not pull


def test_plan_derivatives(scenario):
    # the analytic rates and accelerations of the minimum-jerk plan vs forward-mode AD
    f = lambda s: so.plan_angles(scenario.plan, s)[0]  # noqa: E731
    ad = jax.jit(jax.vmap(lambda s: (jax.jacfwd(f)(s), jax.jacfwd(jax.jacfwd(f))(s))))
    t = jnp.array([0.03, 0.2, 0.5, 1.0])
    _, phid, phidd = jax.vmap(lambda s: so.plan_angles(scenario.plan, s))(t)
    d1, d2 = ad(t)
    np.testing.assert_allclose(phid, d1, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(phidd, d2, rtol=1e-12, atol=1e-9)


def test_bed_from_maximal_coordinates_matches_minimal(model, scenario):
    """The two simulations compute the bed's wrench from p, pd and from q, qd: the same."""
    q, qd, _ = _random_state(model, 5)
    q = q.at[1].set(-0.8)  # low enough for the foot to be in the bed
    qd = qd.at[1].set(-3.0)

    @jax.jit
    def both(q, qd):
        p, pd = maximal.from_minimal(model, q, qd)
        return so._bed_maximal(model, scenario.bed, p, pd), so.bed_loads(model, scenario.bed, q, qd)

    (w_max, fy_max), (w_min, fy_min) = both(q, qd)
    assert fy_min > 0.0  # the bed pushes at this state
    np.testing.assert_allclose(fy_max, fy_min, rtol=ROUNDOFF)
    np.testing.assert_allclose(w_max, w_min, atol=ROUNDOFF * float(fy_min))


def test_computed_torque_tracks_the_commanded_acceleration(model, scenario):
    q, qd, _ = _random_state(model, 4)
    t, kp, kd = 0.3, 400.0, 40.0
    q = q.at[1].set(-0.5)  # hip low: the bed may push the foot
    rel = model.replace(coordinates="relative")

    @jax.jit
    def closed_loop(q, qd):
        loads = so.bed_loads(model, scenario.bed, q, qd)[0]
        tau = so.computed_torque(model, scenario.plan, t, q, qd, loads, kp=kp, kd=kd)
        Q = jaxmb.forces_to(rel, jnp.concatenate([jnp.zeros(2), tau]), "absolute")
        return tau, jaxmb.forward_dynamics(model, q, qd, Q, loads)

    tau, qdd = closed_loop(q, qd)
    assert tau[0] == 0.0  # the root is not actuated
    # relative joint coordinates phi_i = theta_i - theta_parent
    par = np.asarray([max(p, 0) for p in model.parent])[1:]
    th, thd, thdd = q[2:], qd[2:], qdd[2:]
    phi, phid, phidd = th[1:] - th[par], thd[1:] - thd[par], thdd[1:] - thdd[par]
    pd, pdd_, pddd = so.plan_angles(scenario.plan, t)
    commanded = pddd + kd * (pdd_ - phid) + kp * (pd - phi)
    np.testing.assert_allclose(phidd, commanded, rtol=SOLVE_RTOL, atol=SOLVE_RTOL * float(np.abs(commanded).max()))


@pytest.fixture(scope="module")
def coarse(model, scenario):
    # support (0-0.36 s), take-off and the start of the pike, at a coarse step
    return so.run_somersault(model, scenario, duration=0.6, dt=1e-3)


def test_projection_reproduces_the_simulated_joint_forces(coarse):
    assert coarse.contact.any() and coarse.i_takeoff > 0  # the run has a support phase
    for other in ("projection", "recursive"):
        rows = so.comparison_table(coarse, other=other)
        assert rows[0]["peak"] > 2000.0  # the comparison is made at real loads
        worst = max(r["rel_max"] for r in rows)
        assert worst < SIM_REL, (other, rows)
    assert coarse.drift.max() < DRIFT_ATOL
    # jaxmb.simulate in minimal coordinates gives the same motion
    np.testing.assert_allclose(coarse.q_minimal, coarse.q, atol=TRAJ_ATOL)


def test_comparison_is_sensitive_to_the_bed_force(model, scenario, coarse):
    """Leaving the bed force out of the projection shifts the ankle reaction by exactly it."""
    k = int(np.argmax(coarse.bed))
    q, qd, qdd = coarse.q[k], coarse.qd[k], coarse.qdd[k]
    lam = jax.jit(lambda *x: jaxmb.joint_reactions(model, *x, joints=["foot"]))(q, qd, qdd)[0]
    np.testing.assert_allclose(lam - coarse.simulated[k, 2], [0.0, coarse.bed[k]],
                               atol=SIM_REL * coarse.bed[k])


def test_vertical_reaction_drops_from_ankle_to_hip(model, coarse):
    """The paper's observation, and its cause: the thighs and shanks decelerated by the bed."""
    s = so.support_summary(coarse)
    for stat in (0, 1):  # mean, peak
        assert s["ankle"][stat] > s["knee"][stat] > s["hip"][stat] > 0
    assert s["drop"][1] > 15.0  # percent of the ankle's mean vertical reaction
    # Newton on the legs between hip and ankle: the drop is sum m (y_com'' + g) of
    # thigh and shank, here from the pose accelerations of the simulated motion
    sup = np.where(coarse.contact)[0]
    acc = jax.vmap(lambda q, qd, qdd: jaxmb.pose_acceleration(model, q, qd, qdd))(
        coarse.q[sup], coarse.qd[sup], coarse.qdd[sup])
    m = np.asarray(model.mass)
    legs = [model.index("thigh"), model.index("shank")]
    drop = sum(m[i] * (np.asarray(acc)[:, i, 1] + float(model.gravity)) for i in legs)
    ankle_minus_hip = -coarse.projection[sup, 2, 1] + coarse.projection[sup, 0, 1]
    np.testing.assert_allclose(ankle_minus_hip, drop, atol=SIM_REL * float(np.abs(drop).max()))
