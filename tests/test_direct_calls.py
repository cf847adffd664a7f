"""Direct calls of the kinematics (and of the projection method) run compiled, with their inputs checked first.

A call from Python with concrete arrays (no caller's ``jit``, ``grad`` or ``vmap``)
checks the inputs' values, then evaluates one cached compiled program
(``jaxmb.kinematics.compiled_call``); op by op, ``pose`` of 1,000 samples took 35 ms
a call. These tests check that the compiled path gives the op-by-op values, compiles
once per shape, and still refuses bad values before anything is traced.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.kinematics import compiled_call

MODEL = jaxmb.seven_segment_human()


def _states(shape, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.normal(0.0, 0.4, shape + (MODEL.dof,)) for _ in range(3))


CALLS = {
    "pose": lambda q, qd, qdd: jaxmb.pose(MODEL, q),
    "whole_body_com": lambda q, qd, qdd: jaxmb.whole_body_com(MODEL, q),
    "point_position": lambda q, qd, qdd: jaxmb.point_position(MODEL, q, "foot", (0.1, 0.02)),
    "point_velocity": lambda q, qd, qdd: jaxmb.point_velocity(MODEL, q, qd, 3, np.array([0.2, 0.0])),
    "pose_acceleration": lambda q, qd, qdd: jaxmb.pose_acceleration(MODEL, q, qd, qdd),
    "kinetic_energy": lambda q, qd, qdd: jaxmb.kinetic_energy(MODEL, q, qd),
    "point_load": lambda q, qd, qdd: jaxmb.point_load(MODEL, q, "foot", qd[..., :2], qdd[..., 2:4], 1.5),
    "inverse_dynamics_projection": lambda q, qd, qdd: jaxmb.inverse_dynamics(MODEL, q, qd, qdd, method="projection"),
    "joint_reactions_projection": lambda q, qd, qdd: jaxmb.joint_reactions(
        MODEL, q, qd, qdd, joints=("thigh", "trunk", "thigh"), frame="segment", method="projection"),
}


@pytest.mark.parametrize("name", CALLS)
@pytest.mark.parametrize("shape", [(), (4, 3)])
def test_direct_call_equals_op_by_op_and_traced(name, shape):
    f = CALLS[name]
    x = _states(shape)
    direct = f(*x)
    with jax.disable_jit():  # the op-by-op evaluation the direct call replaced
        eager = f(*x)
    traced = jax.jit(f)(*x)  # under a caller's jit: the function traced as it stands
    assert direct.shape == eager.shape == traced.shape
    scale = float(jnp.abs(eager).max())
    np.testing.assert_allclose(direct, eager, rtol=0, atol=1e-14 * scale)
    np.testing.assert_allclose(direct, traced, rtol=0, atol=1e-14 * scale)


def test_one_compilation_per_shape():
    q, qd, _ = _states((5,), seed=1)
    jaxmb.pose(MODEL, q)
    jaxmb.point_velocity(MODEL, q, qd, "trunk")
    size = compiled_call._cache_size()
    for seed in (2, 3):  # other values, the same shapes, dtypes and static arguments
        q, qd, _ = _states((5,), seed=seed)
        jaxmb.pose(MODEL, q)
        jaxmb.point_velocity(MODEL, q, qd, "trunk")
    assert compiled_call._cache_size() == size
    jaxmb.pose(MODEL, np.concatenate([q, q]))  # another shape: one more program
    jaxmb.point_velocity(MODEL, q, qd, "thigh")  # another segment: one more
    assert compiled_call._cache_size() == size + 2
    for joints in (("foot",), ("foot",), ("shank", "foot")):  # the joints are part of the key
        jaxmb.joint_reactions(MODEL, q, qd, qd, joints=joints, method="projection")
    assert compiled_call._cache_size() == size + 4


def test_values_still_checked_before_tracing():
    q, qd, _ = _states((3,))
    bad = q.copy()
    bad[1, 4] = np.nan
    with pytest.raises(ValueError, match=r"q is not finite at index \(1, 4\)"):
        jaxmb.pose(MODEL, bad)
    with pytest.raises(ValueError, match=r"q is not finite at index 4"):
        jaxmb.whole_body_com(MODEL, bad[1])
    with pytest.raises(ValueError, match="point is not finite"):
        jaxmb.point_position(MODEL, q, 2, (np.nan, 0.0))
    with pytest.raises(ValueError, match="z is not finite"):
        jaxmb.pose(MODEL, q[0], z=np.full((MODEL.segments, 2), np.inf))
    with pytest.raises(ValueError, match="force is not finite"):
        jaxmb.point_load(MODEL, q, "foot", (0.0, 0.0), (np.nan, 1.0))
    with pytest.raises(ValueError, match="nose"):  # an unknown segment is named
        jaxmb.point_velocity(MODEL, q, qd, "nose")
    with pytest.raises(ValueError, match="segment"):  # unhashable: the function's own check
        jaxmb.point_position(MODEL, q, ["trunk"])
    with pytest.raises(ValueError, match="the model must be a jaxmb.Model"):
        jaxmb.pose(q, MODEL)


def test_gradients_and_vmap_still_trace_the_function():
    q, qd, _ = _states(())
    g = jax.grad(lambda q_: jaxmb.kinetic_energy(MODEL, q_, qd))(q)
    with jax.disable_jit():
        g_eager = jax.grad(lambda q_: jaxmb.kinetic_energy(MODEL, q_, qd))(q)
    np.testing.assert_allclose(g, g_eager, rtol=1e-12, atol=1e-14)
    many = jax.vmap(lambda q_: jaxmb.whole_body_com(MODEL, q_))(_states((6,))[0])
    np.testing.assert_allclose(many, jaxmb.whole_body_com(MODEL, _states((6,))[0]), rtol=0, atol=1e-14)
