"""Machinery of the somersault experiment (Blajer & Czaplicki 2005, Fig. 2).

Imported by ``experiments/somersault_reactions.py`` (and by the tests, which put this
folder on ``sys.path``). Blajer & Czaplicki computed the hip, knee and ankle reactions
of a back somersault in the pike position from measured kinematics and the bed force.
The measurements are not public, so this module makes dynamically consistent data:

1. **Maximal-coordinate simulation** (the reference, independent of the pose map):
   :func:`jaxmb.maximal.simulate_maximal` integrates the constrained Newton-Euler equations of
   the seven segments with Lagrange multipliers (Baumgarte-stabilised, RK4); the
   multipliers are the simulation's own joint forces (parent on child, world frame).
2. **Minimal-coordinate simulation** with :func:`jaxmb.simulate` of the same closed
   loop (controller and bed), as a cross-check of the trajectory.

The athlete is driven by a computed-torque tracking controller of a planned
pike-and-open pattern (minimum-jerk joint angles with PD feedback); the trampoline
bed is a vertical spring-damper on one point of the foot (it pushes only, while the
point is below the bed's rest level y = 0).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import (
    coordinates_to,
    forces_to,
    inverse_dynamics,
    joint_reactions,
    mass_matrix,
    maximal,
    point_load,
    point_position,
    point_velocity,
    simulate,
    whole_body_com,
)
from jaxmb.model import Model, ancestor_matrix

__all__ = [
    "Bed",
    "JointPlan",
    "bed_force",
    "bed_loads",
    "pike_plan",
    "plan_angles",
    "computed_torque",
    "simulate_maximal",
    "simulate_minimal",
    "MaximalRun",
    "Scenario",
    "back_somersault",
    "initial_state",
    "landing_index",
    "calibrate_lean",
    "SomersaultResult",
    "run_somersault",
    "comparison_table",
    "support_summary",
    "LEG_JOINTS",
    "JOINT_LABELS",
]


# ---------------------------------------------------------------------------- bed


class Bed(NamedTuple):
    """The trampoline bed: a vertical spring-damper acting on one point of a segment.

    Attributes:
      stiffness: k, N/m.
      damping: c, N s/m.
      segment: index of the segment the bed pushes (the foot).
      point: (2,) the contact point in that segment's frame (along, across) from its
        proximal joint, m.
    """

    stiffness: float
    damping: float
    segment: int
    point: tuple


def bed_force(y, yd, stiffness, damping):
    """Vertical bed force Fy = max(0, -k y - c yd) while y < 0, else 0, N.

    Args:
      y: contact point height above the bed's rest level, m.
      yd: its vertical velocity, m/s.
      stiffness, damping: k (N/m) and c (N s/m).

    The force is continuous at lift-off (the clip at zero acts before y returns to 0);
    the bed only pushes.
    """
    f = -stiffness * y - damping * yd
    return jnp.where(y < 0, jnp.maximum(f, 0.0), 0.0)


def bed_loads(model: Model, bed: Bed, q, qd):
    """Loads (segments, 3) of the bed from the minimal coordinates, and the force Fy."""
    pt = point_position(model, q, bed.segment, bed.point)
    vel = point_velocity(model, q, qd, bed.segment, bed.point)
    fy = bed_force(pt[1], vel[1], bed.stiffness, bed.damping)
    loads = point_load(model, q, bed.segment, pt, jnp.stack([jnp.zeros_like(fy), fy]))
    return loads, fy


# -------------------------------------------------------------------- the plan


class JointPlan(NamedTuple):
    """Joint-angle pattern as a sum of minimum-jerk transitions.

    phi_j(t) = start_j + sum_k delta_jk S((t - t0_jk) / T_jk),
    S(s) = 10 s^3 - 15 s^4 + 6 s^5 for s in [0, 1] (0 before, 1 after).

    Attributes:
      start: (joints,) initial joint angles, rad.
      t0: (joints, K) start times of the transitions, s.
      duration: (joints, K) their durations, s (> 0).
      delta: (joints, K) their amplitudes, rad (0 for an unused slot).
    """

    start: jax.Array
    t0: jax.Array
    duration: jax.Array
    delta: jax.Array


def plan_angles(plan: JointPlan, t):
    """Planned joint angles, rates and accelerations at time t, each (joints,)."""
    T = plan.duration
    s = jnp.clip((t - plan.t0) / T, 0.0, 1.0)
    S = 10 * s**3 - 15 * s**4 + 6 * s**5
    dS = (30 * s**2 - 60 * s**3 + 30 * s**4) / T
    ddS = (60 * s - 180 * s**2 + 120 * s**3) / T**2
    phi = plan.start + jnp.sum(plan.delta * S, axis=1)
    return phi, jnp.sum(plan.delta * dS, axis=1), jnp.sum(plan.delta * ddS, axis=1)


def pike_plan(keyframes, start):
    """Build a :class:`JointPlan` from per-joint lists of (t0, duration, target).

    Args:
      keyframes: sequence (one per joint) of lists of (t0 s, duration s, target rad):
        from t0 the joint moves by minimum jerk to ``target`` over ``duration``.
      start: (joints,) initial angles, rad.
    """
    start = np.asarray(start, float)
    K = max(len(k) for k in keyframes)
    t0 = np.zeros((len(keyframes), K))
    dur = np.ones((len(keyframes), K))
    delta = np.zeros((len(keyframes), K))
    for j, frames in enumerate(keyframes):
        prev = start[j]
        for k, (a, T, target) in enumerate(frames):
            t0[j, k], dur[j, k], delta[j, k] = a, T, target - prev
            prev = target
    return JointPlan(jnp.asarray(start), jnp.asarray(t0), jnp.asarray(dur), jnp.asarray(delta))


# ------------------------------------------------------------------ controller


def computed_torque(model: Model, plan: JointPlan, t, q, qd, loads, *, kp=400.0, kd=40.0):
    """Joint moments of a computed-torque tracking controller for a floating base.

    In relative coordinates q_r = (x, y, theta_root, phi) the equations of motion are
    M q_r'' + b = (0, 0, 0, tau), b = C + G + E (one Newton-Euler pass with zero
    acceleration, loads included). With the commanded joint accelerations
    a* = phi_d'' + kd (phi_d' - phi') + kp (phi_d - phi), the three unactuated rows
    give the base accelerations u'' = -M_uu^-1 (M_ua a* + b_u), and the actuated rows
    the moments tau = M_au u'' + M_aa a* + b_a, so that the tracking error obeys
    e'' + kd e' + kp e = 0.

    Args:
      model: a floating-base model (either kind of coordinates).
      plan: the joint-angle plan, one joint per non-root segment, relative angles
        phi_i = theta_i - theta_parent (rad).
      t: time, s.
      q, qd: (dof,) coordinates and velocities of ``model``.
      loads: (segments, 3) external wrenches at the centres of mass (the bed).
      kp, kd: feedback gains, 1/s^2 and 1/s.

    Returns:
      (segments,) joint moments tau_i on segment i (CCW +; -tau_i on its parent),
      tau_0 = 0 (the root is unactuated).
    """
    rel = model.replace(coordinates="relative") if model.coordinates != "relative" else model
    qr = coordinates_to(model, q, "relative")
    qdr = coordinates_to(model, qd, "relative")
    nb = 3  # x, y, root angle
    phi_d, phid_d, phidd_d = plan_angles(plan, t)
    a_star = phidd_d + kd * (phid_d - qdr[nb:]) + kp * (phi_d - qr[nb:])
    M = mass_matrix(rel, qr)
    b = inverse_dynamics(rel, qr, qdr, jnp.zeros_like(qr), loads, gradient="autodiff")
    u_dd = -jnp.linalg.solve(M[:nb, :nb], M[:nb, nb:] @ a_star + b[:nb])
    tau_a = M[nb:, :nb] @ u_dd + M[nb:, nb:] @ a_star + b[nb:]
    return jnp.concatenate([jnp.zeros((1,), tau_a.dtype), tau_a])


# ------------------------------------------------------- maximal coordinates


def _bed_maximal(model: Model, bed: Bed, p, pd):
    """Bed loads (segments, 3) and Fy from the maximal coordinates."""
    i = bed.segment
    pt, vel = jax.jvp(lambda x: maximal.maximal_point_position(model, x, i, bed.point), (p,), (pd,))
    fy = bed_force(pt[1], vel[1], bed.stiffness, bed.damping)
    d = pt - p[i, :2]
    row = jnp.stack([jnp.zeros_like(fy), fy, d[0] * fy])  # moment (pt - c) x (0, fy)
    return jnp.zeros((model.segments, 3), p.dtype).at[i].set(row), fy


class MaximalRun(NamedTuple):
    """The maximal-coordinate simulation of the closed loop (steps + 1 samples).

    Attributes:
      t: (T,) time, s.
      p, pd, pdd: (T, segments, 3) maximal coordinates, velocities, accelerations.
      mu: (T, segments, 2) joint forces of the simulation (parent on child, world
        frame, N; zero for the floating root).
      bed: (T,) vertical bed force, N.
      tau: (T, segments) joint moments of the controller, N m.
      drift: (T,) max |Phi|, m: the constraint violation.
    """

    t: jax.Array
    p: jax.Array
    pd: jax.Array
    pdd: jax.Array
    mu: jax.Array
    bed: jax.Array
    tau: jax.Array
    drift: jax.Array


def simulate_maximal(model: Model, plan: JointPlan, bed: Bed, p0, pd0, dt, steps, *,
                     kp=400.0, kd=40.0, alpha=20.0, beta=20.0) -> MaximalRun:
    """The closed loop (controller and bed) with :func:`jaxmb.maximal.simulate_maximal` (RK4).

    The controller sees q, qd recovered from (p, pd) (:func:`jaxmb.maximal.to_minimal`);
    the bed force comes from the contact point of p. Joint moment tau_i adds +tau_i to
    segment i's moment and -tau_i to its parent's (:func:`jaxmb.maximal.joint_moment_loads`).

    Args:
      model: floating-base model.
      plan: joint-angle plan (see :func:`computed_torque`).
      bed: the bed.
      p0, pd0: (segments, 3) initial maximal coordinates and velocities.
      dt: time step, s. steps: number of steps.
      kp, kd: controller gains. alpha, beta: Baumgarte parameters, 1/s.

    Returns:
      :class:`MaximalRun`.
    """

    def loads(t, p, pd):
        q, qd = maximal.to_minimal(model, p, pd)
        bed_w, fy = _bed_maximal(model, bed, p, pd)
        tau = computed_torque(model, plan, t, q, qd, bed_w, kp=kp, kd=kd)
        return bed_w + maximal.joint_moment_loads(model, tau), (fy, tau)

    tr = maximal.simulate_maximal(model, p0, pd0, dt, steps, loads=loads, has_aux=True, alpha=alpha, beta=beta)
    fy, tau = tr.aux
    return MaximalRun(tr.t, tr.p, tr.pd, tr.pdd, tr.mu, fy, tau, tr.drift)


def simulate_minimal(model: Model, plan: JointPlan, bed: Bed, q0, qd0, dt, steps, *, kp=400.0, kd=40.0):
    """The same closed loop in minimal coordinates with :func:`jaxmb.simulate` (RK4).

    Returns:
      :class:`jaxmb.Trajectory` (t, q, qd) with steps + 1 samples.
    """
    rel = model.replace(coordinates="relative")

    def tau_fn(t, q, qd):
        loads = bed_loads(model, bed, q, qd)[0]
        tau = computed_torque(model, plan, t, q, qd, loads, kp=kp, kd=kd)
        # joint moments are the relative-coordinate generalized forces of the angles
        Q_rel = jnp.concatenate([jnp.zeros(2, tau.dtype), tau])
        return forces_to(rel, Q_rel, model.coordinates)

    def loads_fn(t, q, qd):
        return bed_loads(model, bed, q, qd)[0]

    return simulate(model, q0, qd0, tau_fn, dt, loads=loads_fn, steps=steps, method="rk4")


# ------------------------------------------------------------------- scenario

_DEG = np.pi / 180.0
#: the joints of the comparison (Blajer & Czaplicki's Fig. 2): the proximal joint
#: of the thigh (hip), shank (knee) and foot (ankle).
LEG_JOINTS = ("thigh", "shank", "foot")
JOINT_LABELS = {"thigh": "hip", "shank": "knee", "foot": "ankle"}


class Scenario(NamedTuple):
    """A back somersault in the pike position: plan, bed and touchdown conditions.

    Attributes:
      plan: joint-angle plan (relative angles of thigh, shank, foot, head,
        upper_arm, forearm_hand), rad.
      bed: the trampoline bed.
      lean: backward lean of the straight body at touchdown, rad (CCW).
      v0: vertical velocity at touchdown, m/s (< 0).
      kp, kd: controller gains, 1/s^2, 1/s.
    """

    plan: JointPlan
    bed: Bed
    lean: float
    v0: float
    kp: float = 400.0
    kd: float = 40.0


def back_somersault(model: Model, *, lean=1.4 * _DEG, v0=-6.0, stiffness=6000.0, damping=100.0,
                    pike=115 * _DEG, t_pike=0.42, t_open=0.95) -> Scenario:
    """The somersault of the experiment, for a seven-segment model.

    Relative joint angles phi_i = theta_i - theta_parent: the hip phi = flexion - pi
    (thigh down, trunk up), the knee phi = -flexion, the ankle phi = pi/2 + dorsiflexion
    (foot horizontal when the shank is vertical), the neck phi = 0 upright, the shoulder
    phi = flexion - pi (arm down), the elbow phi = flexion.

    Support (bed contact, about 0-0.35 s): knees give 10 -> 25 degrees and extend, the
    hips flex 10 degrees and extend 5 degrees past straight, the arms swing up from 20
    to 170 degrees of shoulder flexion. Flight: pike (hip flexion ``pike`` from
    ``t_pike`` over 0.25 s, knees straight, toes pointed, arms to 80 degrees), then
    opening from ``t_open`` over 0.3 s (hips straight, feet flat, arms forward) for
    the landing. The bed pushes the sole at the point below the whole-body centre of
    mass of the upright touchdown posture; the rotation comes from the backward
    ``lean`` at touchdown, which moves the centre of mass behind the bed force.

    Args:
      model: a seven-segment model (``jaxmb.anthropometry.seven_segment_human``).
      lean: backward lean at touchdown, rad.
      v0: touchdown velocity, m/s.
      stiffness, damping: bed k (N/m) and c (N s/m). k = 6 kN/m gives a 0.35 s
        contact for a 70 kg body, as on a competition trampoline.
      pike: hip flexion of the pike, rad.
      t_pike, t_open: start times of the pike and of the opening, s.
    """
    for name in ("trunk",) + LEG_JOINTS + ("head", "upper_arm", "forearm_hand"):
        model.index(name)  # raises for a model without the seven segments
    hip = lambda f: f * _DEG - np.pi  # noqa: E731  flexion (deg) -> relative angle
    sh = hip
    start = np.array([hip(0.0), -10 * _DEG, np.pi / 2, 0.0, sh(20.0), 17 * _DEG])
    keyframes = [
        [(0.0, 0.15, hip(10.0)), (0.15, 0.2, hip(-5.0)), (t_pike, 0.25, pike - np.pi), (t_open, 0.3, hip(0.0))],
        [(0.0, 0.15, -25 * _DEG), (0.15, 0.2, 0.0)],
        [(0.25, 0.2, np.pi / 2 - 35 * _DEG), (t_open, 0.3, np.pi / 2)],
        [(0.3, 0.2, 10 * _DEG), (t_open, 0.3, 0.0)],
        [(0.05, 0.3, sh(170.0)), (t_pike + 0.03, 0.25, sh(80.0)), (t_open, 0.3, sh(100.0))],
        [(0.05, 0.3, 6 * _DEG)],
    ]
    plan = pike_plan(keyframes, start)
    # The bed acts at the point of the sole right below the whole-body centre of mass of
    # the upright touchdown posture: with no lean the body is balanced, and the lean
    # alone moves the centre of mass behind the bed force.
    foot = model.index("foot")
    absm = model.replace(coordinates="absolute") if model.coordinates != "absolute" else model
    q_up, _, com, ankle = _touchdown(absm, plan, float(v0), 0.0, segment=foot, point=(0.0, 0.0))
    along = (com[0] - ankle[0]) / np.cos(q_up[absm.nbase + foot])
    along = float(np.clip(along, 0.0, float(model.length[foot])))
    bed = Bed(float(stiffness), float(damping), foot, (along, 0.0))
    return Scenario(plan, bed, float(lean), float(v0))


def initial_state(model: Model, scenario: Scenario, lean=None):
    """Touchdown state (q0, qd0): planned posture at t = 0 leaned back, bed point at (0, 0).

    Every point moves down at v0 (no rotation). ``lean`` overrides the scenario's
    (it may be traced, for calibration).
    """
    lean = scenario.lean if lean is None else lean
    absm = model.replace(coordinates="absolute") if model.coordinates != "absolute" else model
    q, qd, _, _ = _touchdown(absm, scenario.plan, scenario.v0, lean,
                             segment=scenario.bed.segment, point=tuple(scenario.bed.point))
    if model.coordinates == "relative":
        q, qd = coordinates_to(absm, q, "relative"), coordinates_to(absm, qd, "relative")
    return q, qd


@functools.partial(jax.jit, static_argnames=("segment", "point"))
def _touchdown(model, plan, v0, lean, *, segment, point):
    """q, qd (absolute coordinates) at touchdown, the whole-body CM and segment's joint point."""
    phi0 = plan_angles(plan, 0.0)[0]
    # absolute angles: theta = A (theta_root, phi), A the ancestor matrix
    A = jnp.asarray(ancestor_matrix(model.parent), phi0.dtype)
    theta = A @ jnp.concatenate([jnp.reshape(np.pi / 2 + lean, (1,)).astype(phi0.dtype), phi0])
    q = jnp.concatenate([jnp.zeros(2, theta.dtype), theta])
    q = q.at[:2].add(-point_position(model, q, segment, point))
    qd = jnp.zeros_like(q).at[1].set(v0)
    return q, qd, whole_body_com(model, q), point_position(model, q, segment)


def landing_index(fy, y, t, min_flight=0.1):
    """Indices of take-off (bed force back to 0) and of landing (bed point below 0 again).

    Args:
      fy: (T,) bed force, N. y: (T,) bed point height, m. t: (T,) time, s.

    Returns:
      (i_takeoff, i_landing); i_landing = len(t) when there is no landing.
    """
    fy, y, t = np.asarray(fy), np.asarray(y), np.asarray(t)
    on = np.where(fy > 0)[0]
    i_off = int(on[0] + np.argmax(fy[on[0]:] == 0)) if len(on) else 0
    later = np.where((y < 0) & (t > t[i_off] + min_flight))[0]
    return i_off, int(later[0]) if len(later) else len(t)


def calibrate_lean(model: Model, scenario: Scenario, *, target=2 * np.pi, duration=1.6, dt=1e-3,
                   bracket=(0.5 * _DEG, 3.0 * _DEG), grid=12, rounds=4):
    """Backward lean at touchdown that gives a trunk rotation of ``target`` at landing.

    The support phase amplifies the lean like an inverted pendulum, so the rotation
    is steep in the lean. A grid of leans (vmapped minimal-coordinate simulations)
    brackets the first crossing of ``target``; each further round puts the grid in
    that bracket (so one compiled batch serves every round).

    Args:
      model, scenario: as for :func:`run_somersault`.
      target: trunk rotation at the landing, rad (2 pi: one backward somersault).
      duration, dt: simulated time and RK4 step of the search, s.
      bracket: (low, high) leans to search, rad. grid: leans per round. rounds: rounds.

    Returns:
      (lean rad, its rotation at the landing rad, at this dt).

    Raises:
      ValueError: when no lean in ``bracket`` reaches the target.
    """
    steps = int(round(duration / dt))

    @jax.jit
    @jax.vmap
    def sim(lean):
        q0, qd0 = initial_state(model, scenario, lean)
        tr = simulate_minimal(model, scenario.plan, scenario.bed, q0, qd0, dt, steps,
                              kp=scenario.kp, kd=scenario.kd)
        y, fy = jax.vmap(lambda q, qd: _bed_point_and_force(model, scenario.bed, q, qd))(tr.q, tr.qd)
        return tr.t, tr.q[:, model.nbase], y, fy  # the root's angle is absolute in both kinds

    def rotations(leans):
        t, th, y, fy = (np.asarray(x) for x in sim(jnp.asarray(leans)))
        out = []
        for k in range(len(leans)):
            _, i_land = landing_index(fy[k], y[k], t[k])
            out.append(th[k, i_land - 1] - th[k, 0])
        return np.array(out)

    lo, hi = bracket
    for r in range(rounds):
        leans = np.linspace(lo, hi, grid)
        rots = rotations(leans)
        above = np.where(rots >= target)[0]
        if len(above) == 0 or above[0] == 0:
            raise ValueError(f"no lean in [{lo}, {hi}] rad crosses the target rotation {target} rad; "
                             f"rotations {rots}")
        lo, hi = leans[above[0] - 1], leans[above[0]]
    best = int(np.argmin(np.abs(rots - target)))
    return float(leans[best]), float(rots[best])


def _bed_point_and_force(model, bed, q, qd):
    y = point_position(model, q, bed.segment, bed.point)[1]
    return y, bed_loads(model, bed, q, qd)[1]


# ------------------------------------------------------------------- pipeline


class SomersaultResult(NamedTuple):
    """Everything the experiment compares (all samples up to the landing).

    Attributes:
      t: (T,) time, s.
      q, qd, qdd: (T, dof) coordinates recovered from the maximal simulation.
      bed: (T,) bed force Fy, N. contact: (T,) bool, bed force > 0.
      simulated: (T, 3, 2) hip, knee, ankle forces of the simulation (its Lagrange
        multipliers), parent on child, world frame, N.
      projection: (T, 3, 2) the same from jaxmb.joint_reactions (projection) with the
        kinematics and the bed force only.
      recursive: (T, 3, 2) the same by the recursive Newton-Euler pass.
      q_minimal: (T, dof) the minimal-coordinate simulation of the same closed loop.
      drift: (T,) max constraint violation of the maximal simulation, m.
      tau: (T, segments) joint moments, N m.
      i_takeoff, i_landing: sample indices of the take-off and of the first sample
        back on the bed (= len(t), the samples stop just before it; or the last
        sample + 1 when the simulation ends in the air).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    bed: np.ndarray
    contact: np.ndarray
    simulated: np.ndarray
    projection: np.ndarray
    recursive: np.ndarray
    q_minimal: np.ndarray
    drift: np.ndarray
    tau: np.ndarray
    i_takeoff: int
    i_landing: int


def run_somersault(model: Model, scenario: Scenario, *, duration=1.6, dt=2e-4, alpha=20.0, beta=20.0,
                   joints=LEG_JOINTS) -> SomersaultResult:
    """Simulate (maximal and minimal coordinates) and compute the reactions two ways.

    Args:
      model: floating-base seven-segment model.
      scenario: from :func:`back_somersault`.
      duration: simulated time, s; the results are cut at the landing.
      dt: RK4 step, s.
      alpha, beta: Baumgarte parameters, 1/s. The multipliers differ from the
        projection by about m (2 alpha Phidot + beta^2 Phi), so gentle values do
        best: with RK4 the drift stays near round-off anyway (20/s, dt = 0.2 ms:
        1e-12 m).
      joints: the joints to compare (segment names).

    Returns:
      :class:`SomersaultResult`.
    """
    steps = int(round(duration / dt))
    q0, qd0 = initial_state(model, scenario)
    p0, pd0 = maximal.from_minimal(model, q0, qd0)
    sc = scenario
    rows = np.asarray([model.index(j) for j in joints])

    @jax.jit
    def pipeline(p0, pd0, q0, qd0):
        tr = simulate_maximal(model, sc.plan, sc.bed, p0, pd0, dt, steps, kp=sc.kp, kd=sc.kd,
                              alpha=alpha, beta=beta)
        q, qd, qdd = jax.vmap(lambda p, pd, pdd: maximal.to_minimal(model, p, pd, pdd))(tr.p, tr.pd, tr.pdd)

        def react(q, qd, qdd, fy, method):
            # the bed force alone (the "measured" Ry; Rx = 0), at the bed point of q
            pt = point_position(model, q, sc.bed.segment, sc.bed.point)
            loads = point_load(model, q, sc.bed.segment, pt, jnp.stack([jnp.zeros_like(fy), fy]))
            return joint_reactions(model, q, qd, qdd, loads, joints=list(joints), method=method)

        proj = jax.vmap(lambda *a: react(*a, "projection"))(q, qd, qdd, tr.bed)
        rec = jax.vmap(lambda *a: react(*a, "recursive"))(q, qd, qdd, tr.bed)
        mini = simulate_minimal(model, sc.plan, sc.bed, q0, qd0, dt, steps, kp=sc.kp, kd=sc.kd)
        y = jax.vmap(lambda q: point_position(model, q, sc.bed.segment, sc.bed.point)[1])(q)
        return tr, q, qd, qdd, proj, rec, mini.q, y

    tr, q, qd, qdd, proj, rec, qmin, y = pipeline(p0, pd0, q0, qd0)
    i_off, i_land = landing_index(tr.bed, y, tr.t)
    cut = slice(0, i_land)  # the flight ends with the sample before the bed is touched again
    fy = np.asarray(tr.bed)[cut]
    return SomersaultResult(
        t=np.asarray(tr.t)[cut], q=np.asarray(q)[cut], qd=np.asarray(qd)[cut], qdd=np.asarray(qdd)[cut],
        bed=fy, contact=fy > 0, simulated=np.asarray(tr.mu)[cut][:, rows],
        projection=np.asarray(proj)[cut], recursive=np.asarray(rec)[cut], q_minimal=np.asarray(qmin)[cut],
        drift=np.asarray(tr.drift)[cut], tau=np.asarray(tr.tau)[cut], i_takeoff=i_off, i_landing=i_land,
    )


def comparison_table(res: SomersaultResult, joints=LEG_JOINTS, *, other="projection"):
    """Max abs and RMS differences, per joint and component, projection vs simulation.

    Returns:
      list of dicts with keys joint, component, max_abs (N), rms (N), peak (N, the
      largest |simulated| force over all compared joints), rel_max (max_abs / peak).
    """
    sim = res.simulated
    oth = getattr(res, other)
    peak = float(np.abs(sim).max())
    rows = []
    for j, name in enumerate(joints):
        for c, comp in enumerate(("Fx", "Fy")):
            d = oth[:, j, c] - sim[:, j, c]
            rows.append(dict(joint=JOINT_LABELS.get(name, name), component=comp,
                             max_abs=float(np.abs(d).max()), rms=float(np.sqrt(np.mean(d**2))),
                             peak=peak, rel_max=float(np.abs(d).max() / peak)))
    return rows


def support_summary(res: SomersaultResult, joints=LEG_JOINTS):
    """Vertical reactions in the support phase, Blajer & Czaplicki's sign (child on parent).

    Returns:
      dict: joint label -> (mean N, peak N) of the vertical force the distal segment
      exerts on the proximal one over the samples with bed contact; and "drop" ->
      (mean drop ankle - hip N, %, peak drop N, %), "bed" -> (mean, peak) N.
    """
    sup = res.contact
    out = {}
    for j, name in enumerate(joints):
        fy = -res.projection[sup, j, 1]  # paper's lambda = -(parent on child)
        out[JOINT_LABELS.get(name, name)] = (float(fy.mean()), float(fy.max()))
    a, h = out["ankle"], out["hip"]
    out["drop"] = (a[0] - h[0], 100 * (a[0] - h[0]) / a[0], a[1] - h[1], 100 * (a[1] - h[1]) / a[1])
    out["bed"] = (float(res.bed[sup].mean()), float(res.bed[sup].max()))
    return out
