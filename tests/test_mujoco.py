"""jaxmb against MuJoCo on the same random chains and branched trees (issue 2).

MuJoCo (an independent O(n) composite-rigid-body / Newton-Euler implementation in C)
evaluates the twin of every model built by :mod:`mujoco_models`: the same bodies in
the x-y plane, hinges about z, gravity (0, -g, 0). Compared, in the jaxmb model's
coordinates:

- kinematics: centres of mass (``xipos``) and segment angles (``xmat``): this pins
  the frame conventions (zero angle along the parent's +x, children on the parent's
  axis at ``attach``, centre of mass (along, across) in the segment frame);
- mass matrix M vs ``mj_fullM``;
- bias C + G vs ``qfrc_bias``;
- external term E = -J^T F vs ``mj_applyFT`` at each body's centre of mass;
- inverse dynamics tau = M qdd + C + G + E vs ``mj_inverse`` (whose
  ``qfrc_inverse`` is the *net* applied force, so tau = qfrc_inverse - J^T F);
- forward dynamics vs ``qacc`` of ``mj_forward`` with ``qfrc_applied = tau`` and
  the loads in ``xfrc_applied`` (world-frame force and torque at the body's COM).

MuJoCo's angles are relative. For ``coordinates="absolute"`` the twin converts with
theta = A q_rel (A: ancestor matrix, T = blockdiag(I, A) on the whole q, constant):
q, qd, qdd map with T, generalized forces with Q_abs = T^{-T} Q_rel (equal power),
and M_abs = T^{-T} M_rel T^{-1} (equal kinetic energy qd^T M qd / 2).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

import jaxmb

mujoco = pytest.importorskip("mujoco")

from mujoco_models import MujocoTwin, angle_map  # noqa: E402

# Both sides compute in float64 with O(n) recursions over at most 7 segments, so they
# agree to a few ulps of the largest term (observed: relative errors below 1e-14).
# RTOL = 1e-10 of the quantity's scale (its largest entry, at least 1) leaves a wide
# margin for round-off, even for forward dynamics, whose error grows with cond(M),
# while a modelling mismatch is far larger: moving one centre of mass by 1 um already
# changes tau by ~2e-8 of its scale (test_a_small_parameter_change_is_detected).
RTOL = 1e-10

SEEDS_PER_MODEL = 2  # random states (q, qd, qdd, tau, loads) per model

# (name, parent, seed): chains of 1 to 7 segments and branched trees whose index
# order is not MuJoCo's depth-first order, so the dof permutation is exercised.
TOPOLOGIES = [
    ("chain1", (-1,), 1),
    ("chain2", (-1, 0), 2),
    ("chain3", (-1, 0, 1), 3),
    ("chain5", (-1, 0, 1, 2, 3), 5),
    ("chain7", (-1, 0, 1, 2, 3, 4, 5), 7),
    # trunk, head, upper arm, thigh, forearm, shank, foot: three children on the trunk
    ("human7", (-1, 0, 0, 0, 2, 3, 5), 11),
    ("star5", (-1, 0, 0, 0, 0), 12),
    # sizes repeat on purpose: JAX's op-by-op cache is per array shape (run time)
    ("tree7", (-1, 0, 0, 1, 1, 2, 3), 13),
]
QUANTITIES = ["com", "angle", "mass_matrix", "bias", "external", "inverse-recursive",
              "inverse-projection", "forward"]
BASES = ("fixed", "floating")
COORDS = ("relative", "absolute")

# Each model compiles jaxmb's kernels anew (about 3 s a model): the default run keeps,
# for each topology, one of the four base x coordinate combinations, taken in turn
# (fixed-relative, floating-absolute, fixed-absolute, floating-relative), so that each
# combination meets two topologies (one of them a tree or a chain of 5 or more) and
# every quantity is compared on every topology; --slow runs all.
_DEFAULT_COMBOS = [(0, 0), (1, 1), (0, 1), (1, 0)]
CASES = [
    pytest.param(name, parent, seed, base, coords, id=f"{name}-{base}-{coords}",
                 marks=() if (b, c) == _DEFAULT_COMBOS[t % 4] else pytest.mark.slow)  # fmt: skip
    for t, (name, parent, seed) in enumerate(TOPOLOGIES)
    for b, base in enumerate(BASES)
    for c, coords in enumerate(COORDS)
]


def random_model(parent, seed, base, coordinates) -> jaxmb.Model:
    """A random planar tree: centres of mass off the axis, children attached anywhere."""
    rng = np.random.default_rng(seed)
    n = len(parent)
    length = rng.uniform(0.2, 0.6, n)
    com = np.stack([length * rng.uniform(0.1, 0.9, n), rng.uniform(-0.1, 0.1, n)], axis=1)
    mass = rng.uniform(0.5, 10.0, n)
    inertia = rng.uniform(0.01, 0.5, n)
    # attachment anywhere along the parent's axis (root: unused)
    attach = np.array([0.0] + [rng.uniform(0.0, length[p]) for p in parent[1:]])
    return jaxmb.tree(
        parent, length, com, mass, inertia,
        attach=attach, origin=rng.uniform(-1.0, 1.0, 2), gravity=rng.uniform(9.0, 10.0),
        base=base, coordinates=coordinates,
    )


def random_state(model: jaxmb.Model, seed: int):
    """q, qd, qdd, tau (dof,) and loads (segments, 3) of a fixed seed."""
    rng = np.random.default_rng(1000 + seed)
    dof, n = model.dof, model.segments
    q = rng.uniform(-np.pi, np.pi, dof)
    q[: model.nbase] = rng.uniform(-1.0, 1.0, model.nbase)  # base position, m
    qd = rng.normal(0.0, 2.0, dof)
    qdd = rng.normal(0.0, 5.0, dof)
    tau = rng.normal(0.0, 20.0, dof)
    loads = np.column_stack([rng.normal(0.0, 50.0, (n, 2)), rng.normal(0.0, 10.0, n)])
    return q, qd, qdd, tau, loads


@functools.lru_cache(maxsize=None)
def twin(name, parent, seed, base, coords):
    model = random_model(parent, seed, base, coords)
    return model, MujocoTwin(model)


def _jaxmb_quantities(model, states):
    """{quantity: (states, ...) array} of jaxmb for the random states of one model.

    Evaluated op by op, not jitted: JAX caches each operation by shape, so after the
    first model of a given size the others cost little, while a jit would compile
    every model structure anew (slower in total).
    """
    ours = {k: [] for k in QUANTITIES}
    for q, qd, qdd, tau, loads in states:
        ours["com"].append(jaxmb.com_positions(model, q))
        ours["angle"].append(jaxmb.segment_angles(model, q))
        ours["mass_matrix"].append(jaxmb.mass_matrix(model, q))
        ours["bias"].append(jaxmb.bias_forces(model, q, qd) + jaxmb.gravity_forces(model, q))
        ours["external"].append(jaxmb.external_forces(model, q, loads))
        for method in ("recursive", "projection"):
            ours[f"inverse-{method}"].append(jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method=method))
        ours["forward"].append(jaxmb.forward_dynamics(model, q, qd, tau, loads))
    return {k: np.stack([np.asarray(x) for x in v]) for k, v in ours.items()}


@functools.lru_cache(maxsize=None)
def compared(name, parent, seed, base, coords):
    """{quantity: (jaxmb, MuJoCo)} arrays stacked over the random states of one model."""
    model, mj = twin(name, parent, seed, base, coords)
    states = [random_state(model, 100 * seed + s) for s in range(SEEDS_PER_MODEL)]
    ours = _jaxmb_quantities(model, states)
    ref = {k: [] for k in ours}
    for q, qd, qdd, tau, loads in states:
        ref["com"].append(mj.com_positions(q))
        ref["angle"].append(mj.segment_angles(q))
        ref["mass_matrix"].append(mj.mass_matrix(q))
        ref["bias"].append(mj.bias(q, qd))
        ref["external"].append(mj.external(q, loads))
        tau_mj = mj.inverse(q, qd, qdd, loads)
        ref["inverse-recursive"].append(tau_mj)
        ref["inverse-projection"].append(tau_mj)
        ref["forward"].append(mj.forward(q, qd, tau, loads))
    ref = {k: np.stack(v) for k, v in ref.items()}
    # MuJoCo's angle is atan2 of the body's x axis: compare the difference modulo 2 pi
    d = ours["angle"] - ref["angle"]
    ours["angle"], ref["angle"] = (d + np.pi) % (2 * np.pi) - np.pi, np.zeros_like(d)
    return {k: (ours[k], ref[k]) for k in ours}


def errors(quantity: str, *case):
    """(max abs error, scale = max(1, max |MuJoCo|)) of one quantity for one model."""
    ours, ref = compared(*case)[quantity]
    assert ours.shape == ref.shape
    return float(np.abs(ours - ref).max()), max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("quantity", QUANTITIES)
@pytest.mark.parametrize("name, parent, seed, base, coords", CASES)
def test_matches_mujoco(quantity, name, parent, seed, base, coords):
    err, scale = errors(quantity, name, parent, seed, base, coords)
    assert err <= RTOL * scale, f"{quantity}: max |jaxmb - MuJoCo| = {err:.3e}, scale {scale:.3e}"


def test_angle_map_agrees_with_jaxmb_conversion():
    """The twin's T (built from the parent list) is jaxmb's coordinates_to map."""
    model = random_model((-1, 0, 0, 1, 2, 1), 3, "floating", "relative")
    q_rel = np.random.default_rng(0).normal(size=model.dof)
    T = angle_map(model.replace(coordinates="absolute"))
    np.testing.assert_allclose(T @ q_rel, jaxmb.coordinates_to(model, q_rel, "absolute"), rtol=0, atol=1e-14)


def test_mujoco_inverse_ignores_xfrc_applied():
    """qfrc_inverse does not depend on xfrc_applied: the twin must subtract J^T F itself.

    mjdata.h: qfrc_inverse is the net external force, qfrc_applied + J^T xfrc_applied
    + qfrc_actuator; so it is the same with and without loads, and the actuation is
    what remains after the loads' share J^T F.
    """
    model, mj = twin(*TOPOLOGIES[5], "fixed", "relative")
    q, qd, qdd, _, loads = random_state(model, 0)
    raw = []
    for ld in (None, loads):
        mj._set_state(q, qd, qdd, ld)
        mujoco.mj_inverse(mj.mj, mj.data)
        raw.append(mj.data.qfrc_inverse.copy())
    np.testing.assert_allclose(raw[1], raw[0], rtol=0, atol=RTOL * np.abs(raw[0]).max())
    assert np.abs(mj.data.xfrc_applied).max() > 0  # the loads were really set


def test_a_small_parameter_change_is_detected():
    """A twin of a slightly different model (one across-COM offset changed by 1 um) fails RTOL.

    The inverse dynamics change by about m |a| 1e-6 (~4e-6 N m here), more than
    100 RTOL times the scale of tau, so the comparisons above can fail.
    """
    model, _ = twin(*TOPOLOGIES[5], "floating", "absolute")
    com = np.array(model.com)
    com[4, 1] += 1e-6
    other = MujocoTwin(model.replace(com=com))
    q, qd, qdd, _, loads = random_state(model, 0)
    ref = other.inverse(q, qd, qdd, loads)
    err = np.abs(np.asarray(jaxmb.inverse_dynamics(model, q, qd, qdd, loads)) - ref).max()
    assert err > 100 * RTOL * max(1.0, np.abs(ref).max())
