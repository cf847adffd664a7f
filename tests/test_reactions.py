"""Joint reaction forces (issue 3): two methods, Newton-Euler per segment, frames, physics.

The projection reactions lambda = E^T (Mp (D qdd + gamma) - h) are checked against
the recursive Newton-Euler forces, against Newton's and Euler's laws written by hand
for every segment's free-body diagram (with accelerations from the pose map), and
against closed forms for a column, a hanging and a swinging pendulum.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from random_models import (CONFIG_IDS, CONFIGS, PAIR_CONFIG_PARAMS, PAIR_CONFIGS, config_fixture_params, random_case,
                           random_state)

# Reactions are O(10-1e3) N; two float64 evaluations by different operation orders
# agree to a few hundred ulp of the largest term.
RTOL = 1e-10
ATOL = 1e-9
# After a Cholesky solve (forward dynamics) the error scales with cond(M) <~ 1e4.
SOLVE_ATOL = 1e-8
G = 9.81

N_SEGMENTS = 5
IDS = CONFIG_IDS


def _case(seed, tree, base, coordinates, n=N_SEGMENTS):
    return random_case(seed, tree, base, coordinates, n)


# the default pair covers each value of each factor (a fixed chain in relative angles,
# a floating tree in absolute angles); the third core configuration (a floating chain
# in relative angles, 13 s of compiling) and the rest with --slow
@pytest.fixture(params=config_fixture_params(indexed=True, default=PAIR_CONFIGS))
def case(request):
    k, (tree, base, coordinates) = request.param
    return _case(200 + k, tree, base, coordinates)


def _cross(a, b):
    """z-component of the planar cross product, over the last axis."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def test_projection_equals_recursive(case):
    model, q, qd, qdd, loads = case
    proj = jaxmb.joint_reactions(model, q, qd, qdd, loads, method="projection")
    rec = jaxmb.joint_reactions(model, q, qd, qdd, loads, method="recursive")
    assert proj.shape == (model.segments, 2)
    np.testing.assert_allclose(proj, rec, rtol=RTOL, atol=ATOL)
    # and the recursive forces are those of joint_loads, with either kernel (the matrix
    # one is the gait pipeline's), whose moments are joint_moments'
    T = jaxmb.joint_moments(model, q, qd, qdd, loads)
    for kernel in ("unrolled", "matrix"):
        _, F, T_full = jaxmb.joint_loads(model, q, qd, qdd, loads, kernel=kernel)
        np.testing.assert_allclose(F, rec, rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(T_full, T, rtol=RTOL, atol=ATOL)


def test_newton_euler_on_every_segment(case):
    """Free-body diagram of segment i: parent force F_i at P_i, -F_c at each child's P_c,
    moments T_i and -T_c, gravity and the load at the centre of mass c_i."""
    model, q, qd, qdd, loads = case
    F = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd, loads))
    T = np.asarray(jaxmb.joint_moments(model, q, qd, qdd, loads))
    acc = np.asarray(jaxmb.pose_acceleration(model, q, qd, qdd))  # (a_x, a_y, alpha)
    P = np.asarray(jaxmb.joint_positions(model, q))
    c = np.asarray(jaxmb.com_positions(model, q))
    m, inertia = np.asarray(model.mass), np.asarray(model.inertia)
    for i in range(model.segments):
        kids = list(model.children[i])
        # Newton: F_i - sum_c F_c + (Fx, Fy - m g) = m a_i
        force = F[i] - F[kids].sum(0) + loads[i, :2] + np.array([0.0, -m[i] * G])
        np.testing.assert_allclose(force, m[i] * acc[i, :2], rtol=RTOL, atol=ATOL, err_msg=f"segment {i}")
        # Euler about c_i: T_i - sum T_c + Mz + (P_i - c_i) x F_i - sum (P_c - c_i) x F_c = I alpha
        moment = (T[i] - T[kids].sum() + loads[i, 2] + _cross(P[i] - c[i], F[i])
                  - _cross(P[kids] - c[i], F[kids]).sum())
        np.testing.assert_allclose(moment, inertia[i] * acc[i, 2], rtol=RTOL, atol=ATOL, err_msg=f"segment {i}")


def test_joint_subsets_match_full():
    model, q, qd, qdd, loads = _case(3, True, "floating", "relative")
    # the projection forms only the requested columns of E: a new shape per subset size,
    # cheaper to compile once under jit (joints static, as a tuple) than to run eagerly
    jitted = jax.jit(jaxmb.joint_reactions, static_argnames=("joints", "frame", "method"))
    for method in ("projection", "recursive"):
        react = jitted if method == "projection" else jaxmb.joint_reactions
        full = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd, loads, method=method))
        for joints in ((4, 1), ("s4", "s1"), (0, "s3", 2), (3, 1, 3)):  # a repeat: both copies
            idx = [model.index(j) for j in joints]
            sub = react(model, q, qd, qdd, loads, joints=joints, method=method)
            np.testing.assert_allclose(sub, full[idx], rtol=RTOL, atol=ATOL, err_msg=f"{method} {joints}")
        for single in (4, "s4", -1, [4]):
            sub = jaxmb.joint_reactions(model, q, qd, qdd, loads, joints=single, method=method)
            assert sub.shape == (1, 2)
            np.testing.assert_allclose(sub[0], full[4], rtol=RTOL, atol=ATOL)
        seg = jaxmb.joint_reactions(model, q, qd, qdd, loads, joints=["s2"], frame="segment", method=method)
        seg_full = jaxmb.joint_reactions(model, q, qd, qdd, loads, frame="segment", method=method)
        np.testing.assert_allclose(seg[0], seg_full[2], rtol=RTOL, atol=ATOL)


def test_bad_arguments_raise():
    # each check's own message: JAX raises a ValueError of its own for some of these
    # (a q of the wrong length fails to broadcast), which a bare raises(ValueError)
    # would accept with the check gone
    model, q, qd, qdd, loads = _case(4, False, "fixed", "relative")
    cases = [
        (dict(joints=["nope"]), "unknown segment name 'nope'; the model's segments are"),
        (dict(joints=[5]), "segment index 5 out of range for a model with 5 segments"),
        (dict(joints=[]), "joints is empty"),
        (dict(frame="local"), "frame must be 'world' or 'segment', got 'local'"),
        (dict(method="fast"), "method must be 'recursive' or 'projection', got 'fast'"),
    ]
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            jaxmb.joint_reactions(model, q, qd, qdd, loads, **kw)
    with pytest.raises(ValueError, match=r"loads must have shape \(5, 3\) or \(\.\.\., 5, 3\).*got shape \(4, 3\)"):
        jaxmb.joint_reactions(model, q, qd, qdd, loads[:4])
    with pytest.raises(ValueError, match=r"q must have shape \(5,\) .*got shape \(2,\)"):
        jaxmb.joint_reactions(model, q[:2], qd, qdd)


def test_segment_frame_rotates_back_to_world(case):
    # on the case fixture's models (each value of each factor by default, the rest
    # with --slow): their world-frame reactions are compiled already (two random
    # models of their own compiled them again)
    model, q, qd, qdd, loads = case
    world = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd, loads))
    axial, shear = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd, loads, frame="segment")).T
    theta = np.asarray(jaxmb.segment_angles(model, q))
    u = np.stack([np.cos(theta), np.sin(theta)], 1)  # axis of the child segment
    n = np.stack([-np.sin(theta), np.cos(theta)], 1)  # axis rotated by +90 degrees
    np.testing.assert_allclose(axial[:, None] * u + shear[:, None] * n, world, rtol=RTOL, atol=ATOL)


# A chain of five uniform rods (five segments like the random cases, so that the eager
# computations reuse their compiled shapes).
ROD_LENGTH = np.array([0.5, 0.4, 0.45, 0.3, 0.35])
ROD_MASS = np.array([4.0, 3.0, 3.5, 2.0, 1.5])


def _rods(coordinates="relative"):
    return jaxmb.chain(ROD_LENGTH, ROD_LENGTH / 2, ROD_MASS, ROD_MASS * ROD_LENGTH**2 / 12, gravity=G,
                       coordinates=coordinates)


def _weight_beyond():
    """Weight (N) carried by each joint of a straight chain at rest: all segments distal to it."""
    return G * np.cumsum(ROD_MASS[::-1])[::-1]


def test_standing_column_is_in_compression():
    # a static column standing on the ground: each joint pushes up with the weight of
    # everything above it, along +axis, i.e. compression: positive axial
    model = _rods()
    q, z = np.array([np.pi / 2, 0, 0, 0, 0]), np.zeros(5)
    W = _weight_beyond()
    world = jaxmb.joint_reactions(model, q, z, z)
    np.testing.assert_allclose(world, np.stack([np.zeros(5), W], 1), atol=ATOL)
    seg = jaxmb.joint_reactions(model, q, z, z, frame="segment")
    np.testing.assert_allclose(seg, np.stack([W, np.zeros(5)], 1), atol=ATOL)
    assert (seg[:, 0] > 0).all()


def test_hanging_chain_is_in_tension():
    # hanging from the pivot, each joint pulls up the weight below it, i.e. along -axis:
    # tension, negative axial; the same in absolute coordinates
    W = _weight_beyond()
    z = np.zeros(5)
    for coordinates, q in (("relative", np.array([-np.pi / 2, 0, 0, 0, 0])), ("absolute", np.full(5, -np.pi / 2))):
        seg = jaxmb.joint_reactions(_rods(coordinates), q, z, z, frame="segment")
        np.testing.assert_allclose(seg, np.stack([-W, np.zeros(5)], 1), atol=ATOL)


def test_horizontal_cantilever_is_in_shear():
    # a straight horizontal chain held at rest: each joint carries the weight beyond it
    # as pure shear, and the moment of that weight about the joint
    model = _rods()
    z = np.zeros(5)
    W = _weight_beyond()
    np.testing.assert_allclose(jaxmb.joint_reactions(model, z, z, z, frame="segment"),
                               np.stack([np.zeros(5), W], 1), atol=ATOL)
    x_joint = np.concatenate([[0.0], np.cumsum(ROD_LENGTH)[:-1]])
    x_com = x_joint + ROD_LENGTH / 2
    moment = [G * ROD_MASS[i:] @ (x_com[i:] - x_joint[i]) for i in range(5)]
    np.testing.assert_allclose(jaxmb.joint_moments(model, z, z, z), moment, rtol=RTOL, atol=ATOL)


def test_swinging_chain_at_the_bottom():
    # a straight chain hanging down (theta = -90 deg) turning rigidly about the pivot at
    # rate w and angular acceleration a: the centre of mass of rod k, at distance r_k
    # from the pivot, accelerates w^2 r_k up (towards the pivot) and a r_k along
    # n = (1, 0); joint i carries the rods beyond it:
    # lambda_i = sum_{k >= i} m_k (a r_k, g + w^2 r_k), axial = -y, shear = x
    w, a = 2.5, -1.5
    model = _rods()
    q = np.array([-np.pi / 2, 0, 0, 0, 0])
    qd, qdd = np.array([w, 0, 0, 0, 0]), np.array([a, 0, 0, 0, 0])
    r = np.concatenate([[0.0], np.cumsum(ROD_LENGTH)[:-1]]) + ROD_LENGTH / 2
    lam = np.array([[ROD_MASS[i:] @ (a * r[i:]), ROD_MASS[i:] @ (G + w**2 * r[i:])] for i in range(5)])
    np.testing.assert_allclose(jaxmb.joint_reactions(model, q, qd, qdd), lam, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(jaxmb.joint_reactions(model, q, qd, qdd, frame="segment"),
                               np.stack([-lam[:, 1], lam[:, 0]], 1), rtol=RTOL, atol=ATOL)
    # moment at the pivot: the whole chain's moment of inertia about it times a
    # (gravity and the centripetal forces pass through the pivot)
    I_pivot = np.sum(ROD_MASS * ROD_LENGTH**2 / 12 + ROD_MASS * r**2)
    np.testing.assert_allclose(jaxmb.joint_moments(model, q, qd, qdd)[0], I_pivot * a, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("tree, coordinates", [(True, "relative"), (False, "absolute")])
def test_free_flight_root_reaction_vanishes(tree, coordinates):
    # a floating body under gravity with internal joint moments only: the base supplies
    # neither force nor moment, so the root reaction is zero and the whole-body centre
    # of mass falls freely
    model, q, qd, _, _ = _case(8, tree, "floating", coordinates)
    rng = np.random.default_rng(9)
    tau_rel = np.concatenate([[0.0, 0.0, 0.0], 20.0 * rng.standard_normal(model.segments - 1)])
    rel = model.replace(coordinates="relative")
    tau = jaxmb.forces_to(rel, tau_rel, coordinates)
    qdd = jaxmb.forward_dynamics(model, q, qd, tau)
    for method in ("projection", "recursive"):
        lam = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd, method=method))
        np.testing.assert_allclose(lam[0], 0, atol=SOLVE_ATOL)
        assert np.abs(lam[1:]).max() > 1.0  # the internal joints do carry loads
    np.testing.assert_allclose(jaxmb.joint_moments(model, q, qd, qdd)[0], 0, atol=SOLVE_ATOL)
    acc = np.asarray(jaxmb.pose_acceleration(model, q, qd, qdd))
    m = np.asarray(model.mass)
    np.testing.assert_allclose(m @ acc[:, :2] / m.sum(), [0, -G], atol=SOLVE_ATOL)


def test_reactions_differentiable_wrt_mass():
    # reactions of the motion produced by given torques: nonlinear in the masses through
    # forward dynamics; autodiff (forward and reverse) against central differences
    model, q, qd, _, loads = _case(10, True, "fixed", "relative")
    tau = 10.0 * np.random.default_rng(11).standard_normal(model.dof)
    k, j = 1, 2  # mass of segment 1; reaction at joint 2

    def lam(mass, method):
        mdl = model.replace(mass=mass)
        qdd = jaxmb.forward_dynamics(mdl, q, qd, tau, loads)
        return jaxmb.joint_reactions(mdl, q, qd, qdd, loads, method=method)[j]

    m0 = np.asarray(model.mass)  # NumPy: no eager jnp steps
    h = 1e-5 * float(m0[k])
    e = np.zeros_like(m0)
    e[k] = h
    for method in ("projection", "recursive"):
        # one compiled program gives the value (for the central difference) and the
        # Jacobian (a jitted value and a jitted jacrev compiled two)
        f = lambda m_: lam(m_, method)  # noqa: B023, E731
        both = jax.jit(lambda m_: (f(m_), jax.jacrev(f)(m_)))  # noqa: B023
        fd = (np.asarray(both(m0 + e)[0]) - np.asarray(both(m0 - e)[0])) / (2 * h)
        rev = np.asarray(both(m0)[1])[:, k]
        assert np.abs(fd).max() > 0.1  # a non-trivial sensitivity
        # central differences: truncation O(h^2) ~ 1e-10, round-off ~ eps |lambda| / h ~ 1e-8
        np.testing.assert_allclose(rev, fd, rtol=1e-6, atol=1e-6)
    # forward mode (gradient="autodiff": the default adjoint is reverse mode only)
    # agrees with reverse mode
    def lam_autodiff(mass):
        mdl = model.replace(mass=mass)
        qdd = jaxmb.forward_dynamics(mdl, q, qd, tau, loads, gradient="autodiff")
        return jaxmb.joint_reactions(mdl, q, qd, qdd, loads, gradient="autodiff")[j]

    fwd = jax.jit(jax.jacfwd(lam_autodiff))(m0)[:, k]
    np.testing.assert_allclose(fwd, rev, rtol=RTOL, atol=ATOL)


def test_vmap_equals_loop():
    # (vmap under jit: one compilation instead of eager batched primitives); the case
    # fixture's tree (seed 200 + its index in CONFIGS), whose single-sample reactions
    # the loop reuses compiled
    model, *_ = _case(200 + CONFIGS.index((True, "floating", "absolute")), True, "floating", "absolute")
    rng = np.random.default_rng(13)
    batch = [random_state(rng, model) for _ in range(4)]
    q, qd, qdd, loads = (np.stack(x) for x in zip(*batch))
    f = lambda *s: jaxmb.joint_reactions(model, *s)  # noqa: E731
    loop = np.stack([np.asarray(f(*s)) for s in batch])
    np.testing.assert_allclose(jax.jit(jax.vmap(f))(q, qd, qdd, loads), loop, rtol=RTOL, atol=ATOL)
    # a batch of models (masses) for one state
    masses = np.asarray(model.mass) * rng.uniform(0.5, 2.0, (3, model.segments))
    g = lambda m_: jaxmb.joint_reactions(model.replace(mass=m_), *batch[0])  # noqa: E731
    np.testing.assert_allclose(jax.jit(jax.vmap(g))(masses), np.stack([np.asarray(g(m_)) for m_ in masses]),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("tree", "base", "coordinates"), PAIR_CONFIG_PARAMS)
def test_reaction_adjoint_equals_reverse_mode_of_the_projection(tree, base, coordinates):
    # The parameter adjoint of the reactions (gradient="adjoint", the default: a
    # reaction's cotangent is a virtual translation of its joint's subtree) against
    # JAX's reverse mode of the projection formula, sample by sample, for every
    # parameter and for q, qd, qdd and the loads: world and segment frames, all joints
    # and a subset with a repeat, per-sample and shared loads, a weighted nonlinear
    # loss so that every sample, joint and component gets its own cotangent.
    c = CONFIGS.index((tree, base, coordinates))
    rng = np.random.default_rng(230 + c)
    model = random_case(231, tree, base, coordinates, n=4)[0]
    B = 11
    states = [random_state(rng, model) for _ in range(B)]
    q, qd, qdd, loads = (jnp.asarray(np.stack([st[k] for st in states])) for k in range(4))
    cases = [("world", None, loads), ("segment", (3, 1, 3), loads[0])]  # one per configuration, in turn
    for frame, joints, ld in [cases[c % 2]]:
        k = model.segments if joints is None else len(joints)
        w = jnp.asarray(rng.uniform(0.5, 2.0, (B, k, 2)))

        def loss(m, q, qd, qdd, ld, method="recursive"):
            lam = jaxmb.joint_reactions(m, q, qd, qdd, ld, joints=joints, frame=frame, method=method)
            return jnp.sum(w * (jnp.sin(lam / 50.0) + 0.5 * (lam / 50.0) ** 2))

        got = jax.jit(jax.grad(loss, (0, 1, 2, 3, 4)))(model, q, qd, qdd, ld)
        ref = jax.jit(jax.grad(lambda *a: loss(*a, method="projection"), (0, 1, 2, 3, 4)))(model, q, qd, qdd, ld)
        only_model = jax.jit(jax.grad(loss))(model, q, qd, qdd, ld)
        for name in ("length", "com", "mass", "inertia", "attach", "gravity", "origin"):
            for g in (got[0], only_model):
                np.testing.assert_allclose(getattr(g, name), getattr(ref[0], name), rtol=RTOL, atol=1e-9,
                                           err_msg=f"d/d{name}, {frame} frame, joints {joints}")  # fmt: skip
        for i, name in enumerate(("q", "qd", "qdd", "loads")):
            np.testing.assert_allclose(got[i + 1], ref[i + 1], rtol=RTOL, atol=1e-9, err_msg=f"d/d{name}, {frame}")
    # forward mode needs gradient="autodiff"; it gives the same derivative
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(lambda m: jaxmb.joint_reactions(m, q, qd, qdd), (model,), (model,))
    # (each under jit: one compiled program apiece; an eager vjp compiles two, the
    # forward pass and its transpose)
    t = jax.tree_util.tree_map(lambda x: 0.1 * np.ones(np.shape(x)), model)
    tan = np.asarray(jax.jit(lambda m, t: jax.jvp(lambda m: jaxmb.joint_reactions(m, q, qd, qdd, gradient="autodiff"),
                                                  (m,), (t,))[1])(model, t))  # fmt: skip
    c = rng.standard_normal(tan.shape)
    cot = jax.jit(lambda m, c: jax.vjp(lambda m: jaxmb.joint_reactions(m, q, qd, qdd), m)[1](c)[0])(model, c)
    lhs = np.sum(c * tan)
    rhs = sum(np.sum(np.asarray(a) * b) for a, b in zip(jax.tree_util.tree_leaves(cot), jax.tree_util.tree_leaves(t)))
    np.testing.assert_allclose(lhs, rhs, rtol=1e-10)
