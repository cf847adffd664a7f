"""Input validation: every bad model or bad argument raises a ValueError that says what.

Construction is eager and checks everything it can, naming the field and the segment;
the core functions check shapes (statically, so also under jit) and name the expected
shape; keyword choices (method, frame, kind) reject typos. Importing jaxmb changes no
global setting. The fixtures are written here so that this file stands alone.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb as mb

# A valid four-segment tree; its names appear in the messages below.
NAMES = ("trunk", "arm", "thigh", "shank")
VALID = dict(
    parent=(-1, 0, 0, 2),
    length=[0.50, 0.45, 0.42, 0.40],
    com=[[0.25, 0.02], [0.20, 0.0], [0.18, -0.01], [0.17, 0.0]],
    mass=[30.0, 7.0, 5.0, 3.5],
    inertia=[1.2, 0.10, 0.08, 0.05],
    attach=[0.0, 0.50, 0.30, 0.42],
    names=NAMES,
)


def build(**changes):
    """mb.tree with VALID arguments, some of them changed."""
    kw = {**VALID, **changes}
    args = [kw.pop(k) for k in ("parent", "length", "com", "mass", "inertia")]
    return mb.tree(*args, **kw)


def with_entry(field, i, value):
    """VALID[field] with entry i replaced (row i for com)."""
    arr = np.array(VALID[field], dtype=float)
    arr[i] = value
    return arr


def test_the_fixture_is_valid():
    model = build()
    assert model.segments == 4 and model.names == NAMES


# ------------------------------------------------------------- construction

CONSTRUCTION_CASES = [
    # wrong array lengths: the field and the expected shape
    (dict(length=[0.5, 0.45, 0.42]), r"length must have shape \(4,\)"),
    (dict(com=[[0.25, 0.0]] * 3), r"com must have shape \(4,\) .* or \(4, 2\)"),
    (dict(com=np.zeros((4, 3))), r"com must have shape \(4,\) .* or \(4, 2\)"),
    (dict(mass=[30.0, 7.0, 5.0, 3.5, 1.0]), r"mass must have shape \(4,\)"),
    (dict(inertia=[[1.2, 0.1, 0.08, 0.05]]), r"inertia must have shape \(4,\)"),
    (dict(attach=[0.0, 0.5]), r"attach must have shape \(4,\)"),
    # non-finite values: the field, the segment's index and name
    *[
        (dict({field: with_entry(field, 2, bad)}), rf"{field} of segment 2 \('thigh'\) is not finite")
        for field in ("length", "mass", "inertia", "attach")
        for bad in (np.nan, np.inf, -np.inf)
    ],
    (dict(com=with_entry("com", 1, [np.nan, 0.0])), r"com of segment 1 \('arm'\) is not finite"),
    (dict(com=with_entry("com", 3, [0.1, np.inf])), r"com of segment 3 \('shank'\) is not finite"),
    (dict(origin=(np.nan, 0.0)), r"origin is not finite"),
    (dict(gravity=np.inf), r"gravity is not finite"),
    (dict(gravity=np.nan), r"gravity is not finite"),
    # physical bounds
    (dict(mass=with_entry("mass", 3, 0.0)), r"mass of segment 3 \('shank'\) must be > 0"),
    (dict(mass=with_entry("mass", 1, -2.0)), r"mass of segment 1 \('arm'\) must be > 0"),
    (dict(inertia=with_entry("inertia", 0, 0.0)), r"inertia of segment 0 \('trunk'\) must be > 0"),
    (dict(inertia=with_entry("inertia", 2, -0.1)), r"inertia of segment 2 \('thigh'\) must be > 0"),
    (dict(length=with_entry("length", 1, -0.3)), r"length of segment 1 \('arm'\) must be >= 0"),
    # topology
    (dict(parent=(-1, 0, 3, 2)), r"parent of segment 2 is 3: parents must come before their children"),
    (dict(parent=(-1, 1, 0, 2)), r"parent of segment 1 is 1: parents must come before their children"),
    (dict(parent=(-1, 0, 9, 2)), r"parent of segment 2 is 9"),
    (dict(parent=(-1, 0, -1, 2)), r"exactly one root \(-1\), found 2 at \[0, 2\]"),
    (dict(parent=(0, 0, 1, 2)), r"exactly one root \(-1\), found 0"),
    (dict(parent=(1, -1, 1, 2)), r"the root must be segment 0 .* found at 1"),
    (dict(parent=(-1, 0, -2, 2)), r"parent of segment 2 is -2; use -1 for the root"),
    (dict(parent=(), length=[], com=np.zeros((0, 2)), mass=[], inertia=[], attach=[], names=()),
     r"at least one segment"),
    # kinds
    (dict(base="floting"), r"base must be one of \('fixed', 'floating'\), got 'floting'"),
    (dict(coordinates="abs"), r"coordinates must be one of \('relative', 'absolute'\), got 'abs'"),
    # names
    (dict(names=("trunk", "arm", "arm", "shank")), r"duplicate segment name 'arm' \(segments 1 and 2\)"),
    (dict(names=("trunk", "arm", "thigh")), r"names must have 4 entries .* got 3"),
    (dict(names=("trunk", "arm", "thigh", "shank", "foot")), r"names must have 4 entries .* got 5"),
    (dict(names=("trunk", "", "thigh", "shank")), r"name of segment 1 must be a non-empty str"),
    (dict(names=("trunk", 7, "thigh", "shank")), r"name of segment 1 must be a non-empty str"),
    # base origin and gravity
    (dict(origin=(0.0, 0.0, 0.0)), r"origin must have shape \(2,\)"),
    (dict(origin=0.0), r"origin must have shape \(2,\)"),
    (dict(gravity=[9.81]), r"gravity must be a scalar"),
    (dict(gravity=[[0.0, -9.81]]), r"gravity must be a scalar"),
    # booleans: True as 1 kg (before: accepted)
    (dict(mass=[True, True, True, True]), r"mass must be numbers, got booleans"),
    # a boolean among the parents (before: read as 1, then "parent of segment 1 is 1")
    (dict(parent=[-1, True, 1, 1]), r"parent must hold integer indices .* got booleans"),
]


@pytest.mark.parametrize(
    "changes, message", CONSTRUCTION_CASES, ids=[f"{i}-{m[:30]}" for i, (_, m) in enumerate(CONSTRUCTION_CASES)]
)
def test_construction_rejects(changes, message):
    with pytest.raises(ValueError, match=message):
        build(**changes)


def test_chain_validates_like_tree():
    """chain builds the parent list itself; every parameter check still applies."""
    with pytest.raises(ValueError, match=r"one value per segment, got length 2, mass 3"):
        mb.chain([0.3, 0.3], 0.15, [1.0, 1.0, 1.0], 0.01)
    with pytest.raises(ValueError, match=r"inertia of segment 1 \('forearm'\) must be > 0"):
        mb.chain([0.3, 0.3], 0.15, 1.0, [0.01, 0.0], names=("upper", "forearm"))
    with pytest.raises(ValueError, match=r"length of segment 0 \('segment0'\) is not finite"):
        mb.chain([np.nan, 0.3], 0.15, 1.0, 0.01)
    with pytest.raises(ValueError, match=r"base must be one of"):
        mb.chain([0.3, 0.3], 0.15, 1.0, 0.01, base="free")


def test_replace_validates_like_construction():
    model = build()
    with pytest.raises(ValueError, match=r"Model has no field\(s\) \['mas'\]"):
        model.replace(mas=[1.0, 1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"Model has no field\(s\) \['dof'\]"):
        model.replace(dof=3)
    with pytest.raises(ValueError, match=r"mass of segment 2 \('thigh'\) must be > 0"):
        model.replace(mass=with_entry("mass", 2, -5.0))
    with pytest.raises(ValueError, match=r"inertia of segment 3 \('shank'\) is not finite"):
        model.replace(inertia=with_entry("inertia", 3, np.nan))
    with pytest.raises(ValueError, match=r"mass must have shape \(4,\)"):
        model.replace(mass=[1.0, 2.0])
    with pytest.raises(ValueError, match=r"duplicate segment name 'trunk'"):
        model.replace(names=("trunk", "trunk", "thigh", "shank"))
    with pytest.raises(ValueError, match=r"parent of segment 3 is 3"):
        model.replace(parent=(-1, 0, 1, 3))
    with pytest.raises(ValueError, match=r"coordinates must be one of"):
        model.replace(coordinates="joint")
    with pytest.raises(ValueError, match=r"gravity must be a scalar"):
        model.replace(gravity=(0.0, 9.81))


# ------------------------------------------------------------- segments

# the deprecated rnea and rnea_full are validated like the others (their warnings are
# tested in test_identities.py)
pytestmark = pytest.mark.filterwarnings(r"ignore:jaxmb\.rnea(_full)? is deprecated:DeprecationWarning")

MODEL = build(base="floating")  # dof = 6, segments = 4: the messages must say which
DOF = MODEL.dof
Z = np.zeros(DOF)


@pytest.mark.parametrize(
    "segment, message",
    [
        ("foot", r"unknown segment name 'foot'; the model's segments are \['trunk', 'arm', 'thigh', 'shank'\]"),
        ("Trunk", r"unknown segment name 'Trunk'"),
        (4, r"segment index 4 out of range for a model with 4 segments"),
        (-5, r"segment index -5 out of range"),
        (1.0, r"a segment is given by an int index or a str name, got 1.0"),
        (True, r"a segment is given by an int index or a str name, got True"),
        (None, r"a segment is given by an int index or a str name"),
    ],
)
def test_bad_segments_are_rejected_everywhere(segment, message):
    with pytest.raises(ValueError, match=message):
        MODEL.index(segment)
    with pytest.raises(ValueError, match=message):
        mb.point_load(MODEL, Z, segment, (0.0, 0.0), (1.0, 0.0))
    with pytest.raises(ValueError, match=message):
        mb.joint_reactions(MODEL, Z, Z, Z, joints=["arm", segment])
    for f, args in (
        (mb.point_position, (Z,)),
        (mb.point_jacobian, (Z,)),
        (mb.point_velocity, (Z, Z)),
        (mb.point_acceleration, (Z, Z, Z)),
    ):
        with pytest.raises(ValueError, match=message):
            f(MODEL, *args, segment)


def test_good_segments_are_accepted():
    """Names, indices, negative indices and numpy integers all select the same segment."""
    assert MODEL.index("thigh") == MODEL.index(2) == MODEL.index(-2) == MODEL.index(np.int64(2)) == 2
    react = lambda **kw: np.asarray(mb.joint_reactions(MODEL, Z, Z, Z, method="recursive", **kw))  # noqa: E731
    lam = react()
    for joints in ("thigh", 2, -2, np.int64(2), ["thigh"], (2,)):
        np.testing.assert_array_equal(react(joints=joints), lam[[2]])
    np.testing.assert_array_equal(react(joints=["shank", 0]), lam[[3, 0]])
    with pytest.raises(ValueError, match=r"joints is empty"):
        mb.joint_reactions(MODEL, Z, Z, Z, joints=[])


# ------------------------------------------------------------- shapes

Q = np.linspace(-0.5, 0.5, DOF)
LOADS = np.ones((MODEL.segments, 3))
P2 = np.array([0.1, 0.0])

# name -> (call(model, a) with a dict of arguments, the checked vector arguments as
# (key in a, name in the message)); vectors are (dof,) = (6,), loads (segments, 3) = (4, 3).
CALLS = {
    "pose": (lambda m, a: mb.pose(m, a["q"]), [("q", "q")]),
    "segment_angles": (lambda m, a: mb.segment_angles(m, a["q"]), [("q", "q")]),
    "joint_positions": (lambda m, a: mb.joint_positions(m, a["q"]), [("q", "q")]),
    "distal_positions": (lambda m, a: mb.distal_positions(m, a["q"]), [("q", "q")]),
    "com_positions": (lambda m, a: mb.com_positions(m, a["q"]), [("q", "q")]),
    "whole_body_com": (lambda m, a: mb.whole_body_com(m, a["q"]), [("q", "q")]),
    "point_position": (lambda m, a: mb.point_position(m, a["q"], 1, P2), [("q", "q")]),
    "point_jacobian": (lambda m, a: mb.point_jacobian(m, a["q"], 1, P2), [("q", "q")]),
    "point_velocity": (lambda m, a: mb.point_velocity(m, a["q"], a["qd"], 1, P2), [("q", "q"), ("qd", "qd")]),
    "point_acceleration": (
        lambda m, a: mb.point_acceleration(m, a["q"], a["qd"], a["qdd"], 1, P2),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "pose_jacobian": (lambda m, a: mb.pose_jacobian(m, a["q"]), [("q", "q")]),
    "constraint_jacobian": (lambda m, a: mb.constraint_jacobian(m, a["q"]), [("q", "q")]),
    "pose_velocity": (lambda m, a: mb.pose_velocity(m, a["q"], a["qd"]), [("q", "q"), ("qd", "qd")]),
    "pose_acceleration": (
        lambda m, a: mb.pose_acceleration(m, a["q"], a["qd"], a["qdd"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "coordinates_to": (lambda m, a: mb.coordinates_to(m, a["q"], "relative"), [("q", "x")]),
    "forces_to": (lambda m, a: mb.forces_to(m, a["tau"], "relative"), [("tau", "Q")]),
    "mass_matrix": (lambda m, a: mb.mass_matrix(m, a["q"]), [("q", "q")]),
    "bias_forces": (lambda m, a: mb.bias_forces(m, a["q"], a["qd"]), [("q", "q"), ("qd", "qd")]),
    "gravity_forces": (lambda m, a: mb.gravity_forces(m, a["q"]), [("q", "q")]),
    "external_forces": (lambda m, a: mb.external_forces(m, a["q"], a["loads"]), [("q", "q")]),
    "applied_wrenches": (lambda m, a: mb.applied_wrenches(m, a["loads"]), []),
    "inverse_dynamics": (
        lambda m, a: mb.inverse_dynamics(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "inverse_dynamics_projection": (
        lambda m, a: mb.inverse_dynamics(m, a["q"], a["qd"], a["qdd"], a["loads"], method="projection"),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "forward_dynamics": (
        lambda m, a: mb.forward_dynamics(m, a["q"], a["qd"], a["tau"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("tau", "tau")],
    ),
    "joint_moments": (
        lambda m, a: mb.joint_moments(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "joint_reactions": (
        lambda m, a: mb.joint_reactions(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "joint_reactions_recursive": (
        lambda m, a: mb.joint_reactions(m, a["q"], a["qd"], a["qdd"], a["loads"], method="recursive"),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "coriolis_matrix": (lambda m, a: mb.coriolis_matrix(m, a["q"], a["qd"]), [("q", "q"), ("qd", "qd")]),
    "kinetic_energy": (lambda m, a: mb.kinetic_energy(m, a["q"], a["qd"]), [("q", "q"), ("qd", "qd")]),
    "potential_energy": (lambda m, a: mb.potential_energy(m, a["q"]), [("q", "q")]),
    "total_energy": (lambda m, a: mb.total_energy(m, a["q"], a["qd"]), [("q", "q"), ("qd", "qd")]),
    "torque_components": (
        lambda m, a: mb.torque_components(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "point_load": (lambda m, a: mb.point_load(m, a["q"], 1, P2, P2), [("q", "q")]),
    "hand_position": (lambda m, a: mb.hand_position(m, a["q"]), [("q", "q")]),
    "rnea": (lambda m, a: mb.rnea(m, a["q"], a["qd"], a["qdd"], a["loads"]), [("q", "q"), ("qd", "qd"), ("qdd", "qdd")]),
    "rnea_full": (
        lambda m, a: mb.rnea_full(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "joint_loads": (
        lambda m, a: mb.joint_loads(m, a["q"], a["qd"], a["qdd"], a["loads"]),
        [("q", "q"), ("qd", "qd"), ("qdd", "qdd")],
    ),
    "simulate": (
        lambda m, a: mb.simulate(m, a["q"], a["qd"], a["tau"], 0.01, loads=a["loads"], steps=2),
        [("q", "q0"), ("qd", "qd0"), ("tau", "tau")],
    ),
}
TAKES_LOADS = [
    "external_forces", "applied_wrenches", "inverse_dynamics", "inverse_dynamics_projection",
    "forward_dynamics", "joint_moments", "joint_reactions", "joint_reactions_recursive",
    "torque_components", "rnea", "rnea_full", "joint_loads", "simulate",
]


# the functions that take any leading batch shape (issue 8; the kinematics, energies,
# coriolis_matrix, point_load and the coordinate conversions too since the core review)
BATCHED = {
    "mass_matrix", "bias_forces", "gravity_forces", "external_forces", "inverse_dynamics",
    "inverse_dynamics_projection", "forward_dynamics", "joint_moments", "joint_reactions",
    "joint_reactions_recursive", "torque_components", "rnea", "rnea_full", "joint_loads", "simulate", "hand_position",
    "pose", "segment_angles", "joint_positions", "distal_positions", "com_positions", "whole_body_com",
    "point_position", "point_jacobian", "point_velocity", "point_acceleration", "pose_jacobian",
    "constraint_jacobian", "pose_velocity", "pose_acceleration", "coordinates_to", "forces_to",
    "coriolis_matrix", "kinetic_energy", "potential_energy", "total_energy", "point_load",
}


def _args(**changes):
    return {**dict(q=Q, qd=Q, qdd=Q, tau=Q, loads=LOADS), **changes}


VECTOR_CASES = [(fname, key, shown) for fname, (_, vecs) in CALLS.items() for key, shown in vecs]


@pytest.mark.parametrize("fname, key, shown", VECTOR_CASES, ids=[f"{f}-{s}" for f, _, s in VECTOR_CASES])
def test_wrong_vector_shape_names_the_expected_shape(fname, key, shown):
    """(dof - 1,), (dof + 1,), (segments,) and a scalar are rejected (except simulate's
    constant tau, which need only broadcast); a batch (1, dof) too by the
    single-sample functions, while the batched ones (any leading shape) reject a
    batch of wrong vectors (2, dof + 1)."""
    call = CALLS[fname][0]
    bads = [np.zeros(DOF - 1), np.zeros(DOF + 1), np.zeros(MODEL.segments)]
    if (fname, key) != ("simulate", "tau"):
        bads.append(np.float64(0.0))
    if fname in BATCHED:
        bads.append(np.zeros((2, DOF + 1)))
        if (fname, key) != ("simulate", "tau"):  # there (1, dof) is tau over one step
            # a batch of one is valid: the same shape checks, traced (jax.eval_shape)
            # rather than compiled and run (test_one_api runs batches of every shape)
            jax.eval_shape(lambda a: call(MODEL, a), _args(**{key: np.zeros((1, DOF))}))
    else:
        bads.append(np.zeros((1, DOF)))
    for bad in bads:
        with pytest.raises(ValueError, match=rf"\b{shown} must .*\(6,\)"):
            call(MODEL, _args(**{key: bad}))


@pytest.mark.parametrize("fname", TAKES_LOADS)
def test_wrong_loads_shape_names_segments_by_3(fname):
    call = CALLS[fname][0]
    bads = [np.zeros((4, 2)), np.zeros((3, 3)), np.zeros(3), np.zeros((6, 3))]
    # (1, segments, 3) is a batch of one for the batched functions (and loads over one
    # step for simulate); a batch of wrong wrenches is not
    bads.append(np.zeros((2, 4, 2)) if fname in BATCHED or fname == "applied_wrenches" else np.zeros((1, 4, 3)))
    for bad in bads:
        with pytest.raises(ValueError, match=r"loads must .*\(4, 3\)"):
            call(MODEL, _args(loads=bad))


def test_all_shape_cases_accept_good_inputs():
    """The table above is right: with good shapes every call succeeds (so the
    failures in the shape tests come from the checks, not from the table).

    Traced with jax.eval_shape (the same checks run; running them all eagerly
    would only add seconds of compilation).
    """
    for fname, (call, _) in CALLS.items():
        jax.eval_shape(lambda a: call(MODEL, a), _args())


def test_every_public_function_of_q_is_in_the_shape_table():
    """A new public function taking (model, q-like, ...) must be added to CALLS."""
    missing = []
    for name in mb.__all__:
        obj = getattr(mb, name)
        if not inspect.isfunction(obj):
            continue
        params = list(inspect.signature(obj).parameters)
        if params[:1] == ["model"] and len(params) > 1 and params[1] in ("q", "q0", "x", "Q", "loads"):
            if name not in CALLS and not name.endswith("_batch"):  # batch shapes: test_batch.py
                missing.append(name)
    assert not missing, f"add shape checks for {missing} to CALLS in tests/test_validation.py"


def test_pose_checks_z_and_points():
    with pytest.raises(ValueError, match=r"z must have shape \(4, 2\)"):
        mb.pose(MODEL, Q, np.zeros((4, 3)))
    with pytest.raises(ValueError, match=r"z must have shape \(4, 2\)"):
        mb.pose(MODEL, Q, np.zeros(8))
    with pytest.raises(ValueError, match=r"point must have shape \(2,\)"):
        mb.point_position(MODEL, Q, 1, (0.1, 0.0, 0.0))
    with pytest.raises(ValueError, match=r"point must have shape \(2,\)"):
        mb.point_load(MODEL, Q, 1, (0.1,), (1.0, 0.0))
    with pytest.raises(ValueError, match=r"force must have shape \(2,\)"):
        mb.point_load(MODEL, Q, 1, (0.1, 0.0), (1.0, 0.0, 0.0))
    # leading shapes broadcast NumPy-style: a (2,) moment is two samples
    assert mb.point_load(MODEL, Q, 1, (0.1, 0.0), (1.0, 0.0), moment=(1.0, 2.0)).shape == (2, 4, 3)
    with pytest.raises(ValueError, match=r"do not broadcast: q \(3,\), point \(\), force \(\), moment \(2,\)"):
        mb.point_load(MODEL, np.zeros((3, DOF)), 1, (0.1, 0.0), (1.0, 0.0), moment=(1.0, 2.0))


def test_shape_checks_also_hold_under_jit_and_vmap():
    """Shapes are static, so the checks fire while tracing, with the same message."""
    with pytest.raises(ValueError, match=r"q must have shape \(6,\)"):
        jax.jit(lambda q: mb.inverse_dynamics(MODEL, q, Z, Z))(np.zeros(5))
    with pytest.raises(ValueError, match=r"qd must have shape \(6,\)"):
        jax.vmap(lambda q, qd: mb.kinetic_energy(MODEL, q, qd))(np.zeros((3, 6)), np.zeros((3, 5)))


# ------------------------------------------------------------- keyword choices


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: mb.inverse_dynamics(MODEL, Z, Z, Z, method="recursve"),
         r"method must be 'recursive' or 'projection', got 'recursve'"),
        (lambda: mb.inverse_dynamics(MODEL, Z, Z, Z, method="Projection"), r"method must be .* got 'Projection'"),
        (lambda: mb.joint_reactions(MODEL, Z, Z, Z, method="rnea"),
         r"method must be 'recursive' or 'projection', got 'rnea'"),
        (lambda: mb.joint_reactions(MODEL, Z, Z, Z, frame="local"), r"frame must be 'world' or 'segment', got 'local'"),
        (lambda: mb.point_load(MODEL, Z, 1, (0.0, 0.0), (1.0, 0.0), frame="segmnet"),
         r"frame must be 'world' or 'segment', got 'segmnet'"),
        (lambda: mb.simulate(MODEL, Z, Z, Z, 0.01, steps=2, method="rk45"), r"method must be 'rk4' or 'euler', got 'rk45'"),
        (lambda: mb.coordinates_to(MODEL, Z, "abs"), r"kind must be 'relative' or 'absolute', got 'abs'"),
        (lambda: mb.forces_to(MODEL, Z, "Relative"), r"kind must be 'relative' or 'absolute', got 'Relative'"),
        (lambda: mb.joint_loads(MODEL, Z, Z, Z, kernel="matrx"), r"kernel must be one of .* got 'matrx'"),
        (lambda: mb.joint_loads(MODEL, Z, Z, Z, chunk=-1), r"chunk must be an int >= 0"),
        (lambda: mb.joint_moments(MODEL, Z, Z, Z, kernel="fused"), r"kernel must be one of .* got 'fused'"),
    ],
)
def test_keyword_typos_are_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ------------------------------------------------------------- non-finite inputs


@pytest.mark.parametrize("key", ["q", "qd", "qdd", "loads"])
def test_non_finite_input_raises_eagerly_naming_it(key):
    """Eager calls reject NaN/inf in q, qd, qdd and loads (a silent NaN is a defect)."""
    args = dict(q=Q.copy(), qd=Z.copy(), qdd=Z.copy(), loads=np.zeros((MODEL.segments, 3)))
    bad = args[key]
    bad.flat[3] = np.nan if key != "qd" else np.inf
    with pytest.raises(ValueError, match=rf"{key} is not finite at index"):
        mb.inverse_dynamics(MODEL, args["q"], args["qd"], args["qdd"], args["loads"])
    with pytest.raises(ValueError, match=rf"{key} is not finite"):
        mb.joint_reactions(MODEL, args["q"], args["qd"], args["qdd"], args["loads"])


def test_check_finite_names_a_non_finite_scalar():
    """A 0-d NaN or inf is named without an index (formatting one raised IndexError)."""
    from jaxmb._checks import check_finite

    for x in (np.float64(np.nan), np.array(np.inf), jnp.asarray(np.nan)):
        with pytest.raises(ValueError, match=r"^dt is not finite: (nan|inf)$"):
            check_finite(x, "dt")
    check_finite(np.float64(1.0), "dt")


@pytest.mark.parametrize("bad", [5j * np.ones((4, 3)), np.full((4, 3), "1")], ids=["complex", "str"])
def test_loads_must_be_real(bad):
    """Complex loads once lost their imaginary part silently, str loads raised a JAX
    TypeError: both are refused like a complex q, naming loads."""
    calls = [
        lambda: mb.inverse_dynamics(MODEL, Q, Z, Z, loads=bad),
        lambda: mb.joint_reactions(MODEL, Q, Z, Z, loads=bad),
        lambda: mb.external_forces(MODEL, Q, bad),
        lambda: mb.applied_wrenches(MODEL, bad),
        lambda: mb.inverse_dynamics(MODEL, Q, Z, Z, loads=bad[None], method="projection"),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=r"loads must be a real array, got dtype"):
            call()


def test_point_load_rejects_non_finite_point_force_and_moment():
    cases = [
        (dict(point=(np.inf, 0.0)), r"point is not finite at index 0: inf"),
        (dict(force=(np.nan, 0.0)), r"force is not finite at index 0: nan"),
        (dict(moment=np.nan), r"moment is not finite: nan"),
        (dict(force=np.array([[1.0, 0.0], [0.0, np.nan]])), r"force is not finite at index \(1, 1\)"),
        (dict(force=(1j, 0.0)), r"force must be a real array"),
    ]
    for kw, message in cases:
        args = {"point": (0.1, 0.0), "force": (1.0, 0.0), "moment": 0.0, **kw}
        with pytest.raises(ValueError, match=message):
            mb.point_load(MODEL, Q, "shank", args["point"], args["force"], args["moment"], frame="segment")


def test_tuples_of_traced_values_are_arrays():
    """A point or force given as a tuple of traced scalars (under jit or grad) is
    stacked, not handed to NumPy (a regression of the ragged-list check)."""

    def f(x, fy):
        return mb.point_load(MODEL, Q, "shank", (x, 0.0), (0.0, fy), frame="segment")

    want = mb.point_load(MODEL, Q, "shank", (0.2, 0.0), (0.0, -3.0), frame="segment")
    np.testing.assert_allclose(jax.jit(f)(0.2, -3.0), want, rtol=1e-14)
    g = jax.grad(lambda x: jnp.sum(f(x, -3.0)))(0.2)
    assert np.isfinite(g)


def test_ragged_inputs_name_the_argument():
    """A ragged nested list raised NumPy's bare 'setting an array element with a sequence'."""
    ragged = [list(Q), [0.0]]
    for call, name in (
        (lambda: mb.inverse_dynamics(MODEL, ragged, Z, Z), "q"),
        (lambda: mb.inverse_dynamics(MODEL, Q, Z, Z, loads=[[0.0, 0.0, 0.0]] * 3 + [[0.0]]), "loads"),
        (lambda: mb.pose(MODEL, ragged), "q"),
        (lambda: mb.point_load(MODEL, Q, 1, [[0.1, 0.0], [0.1]], (1.0, 0.0)), "point"),
    ):
        with pytest.raises(ValueError, match=rf"^{name} must be a rectangular array of real numbers"):
            call()


def test_booleans_and_strings_are_no_coordinates():
    # before: True read as 1 rad, and a string got "q must have shape (4,) ... got shape ()"
    for q in (np.ones(len(Q), bool), "abc"):
        with pytest.raises(ValueError, match=r"^q must be a real array, got dtype"):
            mb.inverse_dynamics(MODEL, q, Z, Z)
    # the root's attach is ignored, a NaN there too (before: "attach of segment 0 ... is
    # not finite"); the children's are checked
    m = mb.tree([-1, 0], [0.3, 0.2], [0.1, 0.1], [1.0, 1.0], [0.01, 0.01], attach=[np.nan, 0.25])
    np.testing.assert_array_equal(np.asarray(m.attach), [0.0, 0.25])
    with pytest.raises(ValueError, match=r"attach of segment 1 \('segment1'\) is not finite"):
        mb.tree([-1, 0], [0.3, 0.2], [0.1, 0.1], [1.0, 1.0], [0.01, 0.01], attach=[0.0, np.nan])


def test_non_finite_inside_jit_is_not_checked_but_propagates():
    """Under jit the values are unknown at trace time: no check, and the NaN shows."""
    q = Q.copy()
    q[3] = np.nan
    out = jax.jit(lambda q_: mb.inverse_dynamics(MODEL, q_, Z, Z))(q)
    assert np.isnan(out).any()


def test_large_concrete_inputs_closed_over_by_a_jitted_function():
    """A concrete array above the exact-check size (its sum is checked first) closed
    over by a user's jitted function: still checked, at trace time, and a finite one
    passes (the sum's jitted check once raised a TracerBoolConversionError there)."""
    from jaxmb._checks import _EXACT_FINITE

    B = _EXACT_FINITE // MODEL.dof + 2
    rng = np.random.default_rng(5)
    q = jnp.asarray(rng.uniform(-1, 1, (B, MODEL.dof)))
    zero = jnp.zeros_like(q)
    for fn in (mb.inverse_dynamics, mb.forward_dynamics):
        g = jax.jit(jax.grad(lambda m: jnp.sum(fn(m, q, zero, zero))))  # noqa: B023
        assert np.isfinite(np.asarray(g(MODEL).mass)).all()
    bad = q.at[B - 1, 0].set(jnp.nan)
    with pytest.raises(ValueError, match="q is not finite"):
        jax.jit(lambda m: mb.inverse_dynamics(m, bad, zero, zero))(MODEL)



@pytest.mark.parametrize("bad, message", [(np.nan, "q is not finite at index"), (-np.inf, "q is not finite at index"),
                                          (3e9, "q has an angle of 3e[+]?09 rad at index")])  # fmt: skip
def test_large_numpy_inputs_cleared_by_their_extremes_still_name_the_bad_value(bad, message):
    """NumPy arrays above the exact-check size are cleared by their minimum and
    maximum (NaN and inf propagate, the largest magnitude bounds every angle); a bad
    value still gets the element-wise search and its index."""
    from jaxmb._checks import _EXACT_FINITE

    B = _EXACT_FINITE // MODEL.dof + 2
    q = np.random.default_rng(6).uniform(-1, 1, (B, MODEL.dof))
    zero = np.zeros_like(q)
    assert np.isfinite(mb.forward_dynamics(MODEL, q, zero, zero)).all()
    q[B - 2, MODEL.dof - 1] = bad
    with pytest.raises(ValueError, match=message) as err:
        mb.inverse_dynamics(MODEL, q, zero, zero)
    assert f"({B - 2}, {MODEL.dof - 1})" in str(err.value)


# ------------------------------------------------------------- global state


def test_import_changes_no_global_setting():
    """import jaxmb leaves float64 off and does not import pyplot or choose a backend."""
    code = (
        "import sys, jax, matplotlib\n"
        "before = matplotlib.rcParams._get('backend')\n"
        "import jaxmb\n"
        "print(jax.config.jax_enable_x64)\n"
        "print('matplotlib.pyplot' in sys.modules)\n"
        "print(matplotlib.rcParams._get('backend') == before)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_ENABLE_X64", "MPLBACKEND")}
    env["JAX_PLATFORMS"] = "cpu"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    x64, pyplot, same_backend = out.stdout.split()
    assert x64 == "False", "import jaxmb switched jax_enable_x64 on"
    assert pyplot == "False", "import jaxmb imported matplotlib.pyplot"
    assert same_backend == "True", "import jaxmb changed the matplotlib backend"


def test_points_offsets_and_missing_states_are_checked():
    # a NaN or complex point and a NaN z went through silently (NaN positions, the
    # imaginary part dropped); qd=None failed deep in the kernel; joints=1.0 with a
    # bare TypeError
    with pytest.raises(ValueError, match="point is not finite"):
        mb.point_position(MODEL, Q, 1, (np.nan, 0.0))
    with pytest.raises(ValueError, match="point must be a real array"):
        mb.point_jacobian(MODEL, Q, 1, (0.1 + 1j, 0.0))
    with pytest.raises(ValueError, match="z is not finite"):
        mb.pose(MODEL, Q, z=np.full((MODEL.segments, 2), np.nan))
    with pytest.raises(ValueError, match="qd is required, got None"):
        mb.inverse_dynamics(MODEL, Q, None, Q)
    with pytest.raises(ValueError, match="a segment is given by an int index or a str name, got 1.0"):
        mb.joint_reactions(MODEL, Q, Q, Q, joints=1.0)


def test_torque_components_share_the_broadcast_leading_shape():
    # the terms depend on different inputs: each had its own leading shape
    QD = np.random.default_rng(3).normal(size=(5, MODEL.dof))
    loads = np.random.default_rng(4).normal(size=(4, 1, MODEL.segments, 3))
    parts = mb.torque_components(MODEL, Q, QD, np.zeros(MODEL.dof), loads)
    assert {v.shape for v in parts.values()} == {(4, 5, MODEL.dof)}
    np.testing.assert_allclose(parts["total"], mb.inverse_dynamics(MODEL, Q, QD, np.zeros(MODEL.dof), loads),
                               rtol=1e-12, atol=1e-9)  # fmt: skip


def test_velocity_maps_promote_like_the_dynamics():
    # float32 q with float64 qd: the velocity maps cast qd down to q's float32, the
    # dynamics promote to float64; now both promote, and all-float32 stays float32
    q32, q64 = np.zeros(MODEL.dof, np.float32), np.full(MODEL.dof, 0.1)
    assert mb.pose_velocity(MODEL, q32, q64).dtype == np.float64
    assert mb.point_acceleration(MODEL, q32, q64, q64, 1).dtype == np.float64
    assert mb.pose_acceleration(MODEL, q32, q32, q32).dtype == np.float32


def test_the_model_must_come_first():
    # the arguments swapped gave AttributeError: 'numpy.ndarray' object has no
    # attribute 'dof' (or 'segments')
    model = mb.chain([0.5, 0.4], [0.2, 0.15], [2.0, 1.5], [0.05, 0.03])
    q = np.zeros(2)
    for call in (lambda: mb.inverse_dynamics(q, model, q, q), lambda: mb.forward_dynamics(q, model, q, q),
                 lambda: mb.joint_reactions(q, model, q, q), lambda: mb.mass_matrix(q, model),
                 lambda: mb.joint_moments(q, model, q, q)):  # fmt: skip
        with pytest.raises(ValueError, match=r"the model must be a jaxmb.Model .*got ndarray: the model comes first"):
            call()
