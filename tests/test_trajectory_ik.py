"""Inverse kinematics for any chain and the hand's closed-form time derivatives.

References: forward kinematics (:func:`jaxmb.point_position`, the pose map) for the
round trips, the closed-form two-link inverse (:func:`two_link_ik`) for the elbow
branch, the workspace annulus |L1 - L2| <= r <= L1 + L2, and JAX's nested
forward-mode derivatives of the pose map for the hand's velocity, acceleration and
jerk.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb.optimal import hand_position, inverse_kinematics, two_link_ik, workspace
from jaxmb.optimal._hand import _hand_derivatives

ARM = jaxmb.two_link_arm()
L1, L2 = (float(v) for v in ARM.length)


def _annulus(rng, n, r_min, r_max, margin=1e-3):
    r = rng.uniform(r_min + margin, r_max - margin, n)
    a = rng.uniform(-np.pi, np.pi, n)
    return np.stack([r * np.cos(a), r * np.sin(a)], -1)


def test_workspace_of_the_two_link_arm():
    np.testing.assert_allclose(workspace(ARM), (abs(L1 - L2), L1 + L2), rtol=1e-15)
    assert workspace(ARM.replace(base="floating")) == (0.0, float("inf"))


def test_two_link_round_trip_and_elbow_branch():
    targets = _annulus(np.random.default_rng(0), 64, *workspace(ARM))
    q = inverse_kinematics(ARM, targets)
    assert q.shape == (64, 2)
    np.testing.assert_allclose(hand_position(ARM, q), targets, atol=1e-11)
    # the default start bends the elbow up: the closed form's elbow="up" branch (mod 2 pi)
    ref = jax.vmap(lambda p: two_link_ik(p, L1, L2, elbow="up"))(targets)
    np.testing.assert_allclose(np.angle(np.exp(1j * (np.asarray(q) - np.asarray(ref)))), 0.0, atol=1e-9)
    # the other branch from a start posture on it
    qd = inverse_kinematics(ARM, targets, np.array([0.0, -0.5]))
    assert np.all(np.asarray(qd)[:, 1] < 0)
    np.testing.assert_allclose(hand_position(ARM, qd), targets, atol=1e-11)


@pytest.mark.parametrize("model, segment, point", [
    (jaxmb.chain([0.3, 0.25, 0.2], [0.15, 0.12, 0.1], [2.0, 1.5, 0.5], [0.02, 0.01, 0.005],
                 coordinates="absolute"), -1, None),  # redundant, absolute angles
    (jaxmb.seven_segment_human(), "forearm_hand", (0.2, 0.03)),  # a tree, a point off the axis
    (jaxmb.two_link_arm(base="floating"), -1, None),  # the base moves too
])
def test_round_trip_for_other_chains(model, segment, point):
    pt = None if point is None else np.asarray(point)
    r_min, r_max = workspace(model, segment=segment, point=pt)
    origin = np.zeros(2) if model.base == "floating" else np.asarray(model.origin)
    targets = origin + _annulus(np.random.default_rng(1), 50, r_min, min(r_max, 1.0), margin=0.02)
    q = inverse_kinematics(model, targets, segment=segment, point=pt)
    np.testing.assert_allclose(hand_position(model, q, segment=segment, point=pt), targets, atol=1e-10)
    # and the same point through the public forward kinematics
    i = model.index(segment)
    p = (float(model.length[i]), 0.0) if pt is None else pt
    np.testing.assert_allclose(jaxmb.point_position(model, q[7], i, p), targets[7], atol=1e-10)


def test_out_of_reach_targets_are_projected_with_a_warning_or_rejected():
    far, near = np.array([1.0, 0.5]), np.array([0.01, -0.02])
    with pytest.warns(RuntimeWarning, match="2 target.*out of reach"):
        q = inverse_kinematics(ARM, np.stack([far, near, [0.3, 0.2]]))
    h = np.asarray(hand_position(ARM, q))
    # projected radially: onto the outer and the inner circle, same direction
    np.testing.assert_allclose(np.linalg.norm(h[:2], axis=1), [L1 + L2, abs(L1 - L2)], rtol=1e-9)
    np.testing.assert_allclose(h[0] / np.linalg.norm(h[0]), far / np.linalg.norm(far), atol=1e-9)
    np.testing.assert_allclose(h[1] / np.linalg.norm(h[1]), near / np.linalg.norm(near), atol=1e-7)
    np.testing.assert_allclose(h[2], [0.3, 0.2], atol=1e-11)
    with pytest.raises(ValueError, match="out of reach"):
        inverse_kinematics(ARM, far, out_of_reach="raise")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # reachable: no warning
        inverse_kinematics(ARM, [0.3, 0.2], out_of_reach="raise")


def test_jit_and_vmap():
    targets = _annulus(np.random.default_rng(2), 8, *workspace(ARM))
    eager = inverse_kinematics(ARM, targets)
    jitted = jax.jit(lambda t: inverse_kinematics(ARM, t))(targets)
    vmapped = jax.vmap(lambda t: inverse_kinematics(ARM, t))(jnp.asarray(targets))
    np.testing.assert_allclose(jitted, eager, atol=1e-12)
    np.testing.assert_allclose(vmapped, eager, atol=1e-12)
    with pytest.raises(ValueError, match="unknown under jit/vmap"):
        jax.jit(lambda t: inverse_kinematics(ARM, t, out_of_reach="raise"))(targets)


@pytest.mark.parametrize("kwargs, match", [
    (dict(target=[0.1, 0.2, 0.3]), r"target must have shape \(2,\)"),
    (dict(target=[np.nan, 0.2]), "target is not finite"),
    (dict(q0=[0.1, 0.2, 0.3]), "q0 must have shape"),
    (dict(out_of_reach="clip"), "out_of_reach must be"),
    (dict(damping=0.0), "damping must be > 0"),
    (dict(damping="a"), "damping must be a number"),
    (dict(tol=-1.0), "tol must be > 0"),
    (dict(tol=float("nan")), "tol must be > 0 and finite"),
    (dict(max_iter=0), "max_iter must be an int >= 1"),
    (dict(max_iter=0.5), "max_iter must be an int >= 1"),
    (dict(max_iter="a"), "max_iter must be an int >= 1"),
    (dict(target=np.full((3, 2), 0.3), q0=np.zeros((4, 2))), "batches of target .* and q0 .* do not broadcast"),
    (dict(point=[0.1]), r"point must have shape \(2,\)"),
    (dict(segment="hand"), "unknown segment name"),
])
def test_bad_inputs(kwargs, match):
    kwargs.setdefault("target", [0.3, 0.2])
    with pytest.raises(ValueError, match=match):
        inverse_kinematics(ARM, **kwargs)


def test_a_failed_solve_is_reported():
    # one iteration leaves the hand about 0.2 m off: a warning, or the flags
    target = np.array([0.25, 0.4])
    with pytest.warns(RuntimeWarning, match="1 of 1 solve.*did not converge in max_iter=1"):
        q = inverse_kinematics(ARM, target, max_iter=1)
    assert np.linalg.norm(np.asarray(hand_position(ARM, q)) - target) > 0.1
    r = inverse_kinematics(ARM, np.stack([target, [0.3, 0.2]]), max_iter=1, full_output=True)
    assert r.q.shape == (2, 2) and r.converged.shape == (2,) and not np.any(r.converged)
    np.testing.assert_allclose(r.error, np.linalg.norm(np.asarray(hand_position(ARM, r.q)) - [target, [0.3, 0.2]],
                                                       axis=-1), rtol=1e-12)  # fmt: skip
    assert np.all(np.asarray(r.iterations) == 1)
    # converged: no warning, flags True, the error below tol
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = inverse_kinematics(ARM, target, full_output=True, tol=1e-11)
    assert bool(r.converged) and float(r.error) <= 1e-11 and 1 <= int(r.iterations) < 100
    # under jit the flags come back (no warning: the values are traced)
    ok = jax.jit(lambda t: inverse_kinematics(ARM, t, max_iter=1, full_output=True).converged)(target)
    assert not bool(ok)


def test_closed_form_hand_derivatives_match_autodiff():
    rng = np.random.default_rng(3)
    for model, seg, pt in [(ARM, 1, None), (jaxmb.seven_segment_human(), 6, jnp.array([0.1, 0.05])),
                           (jaxmb.chain([0.3, 0.2], [0.1, 0.1], [1.0, 1.0], [0.01, 0.01], base="floating",
                                        coordinates="absolute"), 1, None)]:
        q, qd, qdd, qddd = (jnp.asarray(rng.normal(size=model.dof)) for _ in range(4))

        @jax.jit
        def ref(q, qd, qdd, qddd):  # derivatives of the pose map along the Taylor polynomial of q(t)
            g = lambda h: hand_position(model, q + h * qd + h**2 / 2 * qdd + h**3 / 6 * qddd,  # noqa: E731
                                        segment=seg, point=pt)
            d1 = lambda h: jax.jvp(g, (h,), (jnp.ones_like(h),))[1]  # noqa: E731
            d2 = lambda h: jax.jvp(d1, (h,), (jnp.ones_like(h),))[1]  # noqa: E731
            d3 = lambda h: jax.jvp(d2, (h,), (jnp.ones_like(h),))[1]  # noqa: E731
            h0 = jnp.zeros((), q.dtype)
            return g(h0), d1(h0), d2(h0), d3(h0)

        ref = ref(q, qd, qdd, qddd)
        got = _hand_derivatives(model, seg, pt, q, qd, qdd, qddd)
        for a, b in zip(got, ref):
            np.testing.assert_allclose(a, b, atol=1e-12)


def test_workspace_and_builders_name_what_they_cannot_take():
    # workspace under jit raised JAX's TracerArrayConversionError; two_link_arm(table=)
    # a TypeError about tree(); batch_mesh with a device twice a bare AssertionError
    # later, in JAX's device_put
    from jaxmb.sharding import batch_mesh

    arm = jaxmb.two_link_arm()
    with pytest.raises(ValueError, match="workspace needs concrete lengths"):
        jax.jit(lambda m: jnp.asarray(jaxmb.workspace(m)[1]))(arm)
    with pytest.raises(ValueError, match="two_link_arm reproduces the notes' arm.*it takes no table="):
        jaxmb.two_link_arm(table="deleva_male")
    with pytest.raises(ValueError, match="devices lists a device more than once"):
        batch_mesh([jax.devices()[0]] * 2)


@pytest.mark.parametrize("model", [
    ARM,
    jaxmb.chain([0.3, 0.25, 0.2], [0.15, 0.12, 0.1], [2.0, 1.5, 0.5], [0.02, 0.01, 0.005], coordinates="absolute"),
])  # fmt: skip
def test_a_straight_or_folded_start_is_bent(model):
    # from q0 = 0 (straight) or a folded elbow, no joint moves the hand along the arm
    # and the damped least-squares steps never left the line: 100 iterations and the
    # hand 0.39 m off its target, silently with full_output. The start is now bent as
    # the default start is (the same solution for the two-link arm) and the solve
    # converges; a straight start that is already at its target stays
    targets = _annulus(np.random.default_rng(2), 20, *workspace(model), margin=0.02)
    default = inverse_kinematics(model, targets, full_output=True)
    folded = np.zeros(model.dof)
    folded[1] = np.pi
    for q0 in (np.zeros(model.dof), folded):
        r = inverse_kinematics(model, targets, q0, full_output=True)
        assert np.all(r.converged) and np.all(np.asarray(r.iterations) < 50)
        np.testing.assert_allclose(hand_position(model, r.q), targets, atol=1e-10)
        if model is ARM and q0 is not folded:
            np.testing.assert_allclose(r.q, default.q, atol=1e-9)
    reach = float(np.sum(np.asarray(model.length)))
    q = inverse_kinematics(model, np.array([reach, 0.0]), np.zeros(model.dof))
    np.testing.assert_allclose(q, 0.0, atol=1e-12)


def test_the_trajectory_module_is_a_deprecated_alias_of_optimal():
    # issue 40: jaxmb.trajectory's names moved to jaxmb.optimal ("trajectory" names
    # what jaxmb.simulate integrates); the old module keeps them for one release
    import jaxmb.optimal
    import jaxmb.trajectory

    for name in jaxmb.trajectory.__all__:
        with pytest.warns(DeprecationWarning, match=f"use jaxmb.optimal.{name}"):
            assert getattr(jaxmb.trajectory, name) is getattr(jaxmb.optimal, name)
    with pytest.raises(AttributeError):
        jaxmb.trajectory._hand_derivatives  # noqa: B018
