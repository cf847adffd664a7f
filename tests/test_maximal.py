"""jaxmb.maximal: maximal coordinates with Lagrange multipliers vs the minimal-coordinate path.

The maximal formulation never uses the pose map's derivatives: its joints are
hand-written constraints Phi(p) = 0 and its joint forces the multipliers of the
classical formula (C Mp^-1 C^T) mu = rhs - C Mp^-1 h. So it is an independent
reference for the projection (jaxmb.joint_reactions) and for forward dynamics, on
random chains and trees, fixed and floating, in both kinds of coordinates.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmb
from jaxmb import maximal
from random_models import CONFIGS, PAIR_CONFIGS, config_fixture_params, random_case

# Two float64 evaluations of the same kinematics by different formulas (the
# constraint map vs the pose map): a few hundred ulp of the largest term (~1 m, ~10 m/s).
ROUNDOFF = 1e-12
# A linear solve (of C Mp^-1 C^T, or of M in forward dynamics) multiplies round-off
# by the condition number (<~ 1e4 for these models), relative to the largest force.
SOLVE_RTOL = 1e-10


def _moment_forces(model, tau):
    """Generalized forces of joint moments tau (segments,) in the model's coordinates."""
    rel = model.replace(coordinates="relative")
    Q_rel = jnp.concatenate([jnp.zeros(model.nbase, tau.dtype), tau])
    return jaxmb.forces_to(rel, Q_rel, model.coordinates)


@pytest.fixture(scope="module", params=config_fixture_params(default=PAIR_CONFIGS))  # the rest with --slow
def case(request):
    """One random model and state, and everything the tests compare, in one compiled call."""
    tree, base, coordinates = request.param
    seed = 100 + CONFIGS.index(request.param)
    model, q, qd, qdd, loads = random_case(seed, tree, base, coordinates, n=6)
    rng = np.random.default_rng(seed + 1000)
    tau = 10.0 * rng.standard_normal(model.segments)  # joint moments, N m
    if base == "floating":
        tau[0] = 0.0  # nothing holds a floating root

    @jax.jit
    def evaluate(q, qd, qdd, loads, tau):
        p, pd, pdd = maximal.from_minimal(model, q, qd, qdd)
        out = dict(
            p=p, pd=pd, pdd=pdd,
            phi=maximal.constraints(model, p),
            back=maximal.to_minimal(model, p, pd, pdd),
            # the classical multipliers of the given motion vs the projection
            mu=maximal.reactions(model, q, qd, qdd, loads),
            lam_projection=jaxmb.joint_reactions(model, q, qd, qdd, loads, method="projection"),
            lam_recursive=jaxmb.joint_reactions(model, q, qd, qdd, loads, method="recursive"),
        )
        # forward dynamics with joint moments tau, both ways
        w = loads + maximal.joint_moment_loads(model, tau)
        pdd_f, mu_f = maximal.accelerations(model, p, pd, w)
        qdd_f = jaxmb.forward_dynamics(model, q, qd, _moment_forces(model, tau), loads)
        out.update(
            w=w, pdd_f=pdd_f, mu_f=mu_f, qdd_f=qdd_f,
            qdd_back=maximal.to_minimal(model, p, pd, pdd_f)[2],
            pdd_min=jaxmb.pose_acceleration(model, q, qd, qdd_f),
            lam_f=jaxmb.joint_reactions(model, q, qd, qdd_f, loads, method="projection"),
            P=maximal.maximal_joint_positions(model, p),
            C=maximal.jacobian(model, p),
        )
        return out

    res = evaluate(*(jnp.asarray(x) for x in (q, qd, qdd, loads, tau)))
    res = {k: (tuple(np.asarray(x) for x in v) if isinstance(v, tuple) else np.asarray(v)) for k, v in res.items()}
    return dict(model=model, q=q, qd=qd, qdd=qdd, loads=loads, tau=tau, **res)


def test_pose_map_satisfies_the_constraints(case):
    # jaxmb's pose map and the hand-written joint constraints describe the same joints
    np.testing.assert_allclose(case["phi"], 0.0, atol=ROUNDOFF)
    # and to_minimal inverts from_minimal (q, qd, qdd)
    for got, want in zip(case["back"], (case["q"], case["qd"], case["qdd"])):
        np.testing.assert_allclose(got, want, rtol=ROUNDOFF, atol=ROUNDOFF * 10)


def test_joint_positions(case):
    model, P = case["model"], case["P"]
    np.testing.assert_allclose(P, jaxmb.joint_positions(model, case["q"]), atol=ROUNDOFF)
    i = model.segments - 1
    np.testing.assert_allclose(maximal.maximal_point_position(model, case["p"], i, (0.3, -0.1)),
                               jaxmb.point_position(model, case["q"], i, (0.3, -0.1)), atol=ROUNDOFF)


def test_multipliers_are_the_projection_reactions(case):
    """The classical formula (C Mp^-1 C^T) mu = ... equals Blajer & Czaplicki's projection."""
    lam = case["lam_projection"]
    atol = SOLVE_RTOL * np.abs(lam).max()
    np.testing.assert_allclose(case["mu"], lam, atol=atol)
    np.testing.assert_allclose(case["mu"], case["lam_recursive"], atol=atol)


def test_accelerations_are_forward_dynamics(case):
    """Maximal forward dynamics with joint moments maps back to jaxmb.forward_dynamics."""
    qdd = case["qdd_f"]
    np.testing.assert_allclose(case["qdd_back"], qdd, atol=SOLVE_RTOL * np.abs(qdd).max())
    np.testing.assert_allclose(case["pdd_f"], case["pdd_min"], atol=SOLVE_RTOL * np.abs(case["pdd_min"]).max())
    # its multipliers are the reactions of that motion (for a floating root, which
    # nothing holds, both are zero: the motion obeys Newton's law)
    lam = case["lam_f"]
    np.testing.assert_allclose(case["mu_f"], lam, atol=SOLVE_RTOL * np.abs(lam).max())
    if case["model"].base == "floating":
        np.testing.assert_array_equal(case["mu_f"][0], 0.0)


def test_newton_euler_per_segment(case):
    """m a = F and I alpha = M for every segment, with the forces written out by hand.

    Segment i feels gravity, its load, +mu_i at its joint P_i and -mu_c at the joint of
    each child c (Newton's third law), and the moments of those forces about its centre
    of mass plus +tau_i and -tau_c (joint moments).
    """
    model, p, pdd, mu, tau = case["model"], case["p"], case["pdd_f"], case["mu_f"], case["tau"]
    P, loads = case["P"], case["loads"]
    m, inertia, g = np.asarray(model.mass), np.asarray(model.inertia), float(model.gravity)
    cross = lambda r, f: r[0] * f[1] - r[1] * f[0]  # noqa: E731
    for i in range(model.segments):
        c = p[i, :2]
        force = loads[i, :2] + np.array([0.0, -m[i] * g]) + mu[i]
        moment = loads[i, 2] + tau[i] + cross(P[i] - c, mu[i])
        for k in model.children[i]:
            force = force - mu[k]
            moment = moment - tau[k] - cross(P[k] - c, mu[k])
        scale = np.abs(mu).max() + m[i] * g
        np.testing.assert_allclose(m[i] * pdd[i, :2], force, atol=SOLVE_RTOL * scale)
        np.testing.assert_allclose(inertia[i] * pdd[i, 2], moment, atol=SOLVE_RTOL * scale)
    # the same balance in matrix form: Mp pdd = h + C^T mu
    n = model.segments
    h = case["w"] + np.stack([np.zeros(n), -m * g, np.zeros(n)], 1)
    w = np.stack([m, m, inertia], 1)
    np.testing.assert_allclose(w * pdd, h + np.einsum("icjk,ic->jk", case["C"], mu),
                               atol=SOLVE_RTOL * (np.abs(mu).max() + m.max() * g))


def test_jacobian_is_the_identity_on_the_own_joint(case):
    model, C = case["model"], case["C"]
    for i in range(model.segments):
        if model.base == "floating" and i == 0:
            np.testing.assert_array_equal(C[0], 0.0)
        else:
            np.testing.assert_allclose(C[i, :, i, :2], np.eye(2), atol=ROUNDOFF)


@pytest.mark.parametrize("tree, base, coordinates", [(True, "floating", "relative"), (False, "fixed", "absolute")])
def test_simulation_follows_jaxmb_simulate(tree, base, coordinates):
    """RK4 in maximal coordinates vs RK4 in minimal coordinates, joint moments and loads."""
    model, q0, qd0, _, loads = random_case(7, tree, base, coordinates, n=4)
    tau = np.array([0.0 if base == "floating" else 3.0, -2.0, 1.5, 0.5])  # N m
    dt, steps = 2e-3, 100

    @jax.jit
    def both(q0, qd0):
        p0, pd0 = maximal.from_minimal(model, q0, qd0)
        w = jnp.asarray(loads) + maximal.joint_moment_loads(model, jnp.asarray(tau))
        tr = maximal.simulate_maximal(model, p0, pd0, dt, steps, loads=lambda t, p, pd: w, alpha=20.0, beta=20.0)
        q = jax.vmap(lambda p, pd: maximal.to_minimal(model, p, pd)[0])(tr.p, tr.pd)
        ref = jaxmb.simulate(model, q0, qd0, _moment_forces(model, jnp.asarray(tau)), dt, loads=loads,
                             steps=steps)
        return tr, q, ref.q

    tr, q, q_ref = both(jnp.asarray(q0), jnp.asarray(qd0))
    assert tr.p.shape == (steps + 1, model.segments, 3) and tr.aux is None
    assert float(tr.drift.max()) < 1e-8  # m: RK4 plus Baumgarte keeps the joints closed
    # two fourth-order integrations of the same motion: agree to their truncation error
    np.testing.assert_allclose(q, q_ref, atol=1e-7)


def test_backward_simulation_keeps_the_joints_closed():
    # dt < 0 integrates backwards, as jaxmb.simulate does. With the Baumgarte damping
    # unturned the constraint error grew backwards in time: drift 8e-3 m and 0.06 rad
    # off jaxmb.simulate at t = -1 s, NaN from t = -1.59 s
    model = jaxmb.chain([0.4, 0.35], [0.18, 0.15], [5.0, 3.0], [0.08, 0.04])
    q0, qd0 = jnp.array([0.3, -0.5]), jnp.array([1.0, -2.0])
    p0, pd0 = maximal.from_minimal(model, q0, qd0)
    tr = maximal.simulate_maximal(model, p0, pd0, -1e-3, 1000)
    q = jax.vmap(lambda p, pd: maximal.to_minimal(model, p, pd)[0])(tr.p[::100], tr.pd[::100])
    ref = jaxmb.simulate(model, q0, qd0, 0.0, -1e-3, steps=1000).q[::100]
    assert float(tr.drift.max()) < 1e-8 and float(tr.t[-1]) == pytest.approx(-1.0)
    np.testing.assert_allclose(q, ref, atol=1e-7)


def test_reactions_in_forward_mode_with_autodiff():
    # before: jax.jacfwd raised 'pass gradient="autodiff"' and reactions took no such option
    model, q, qd, qdd, loads = random_case(13, True, "floating", "relative", n=3)
    f = lambda g: lambda q: maximal.reactions(model, q, qd, qdd, loads, gradient=g)  # noqa: E731
    jf = jax.jit(jax.jacfwd(f("autodiff")))(q)
    np.testing.assert_allclose(jf, jax.jit(jax.jacrev(f("adjoint")))(q), rtol=1e-9, atol=1e-9 * np.abs(jf).max())


def test_simulate_records_aux_and_constant_loads():
    model, q0, qd0, _, loads = random_case(8, False, "fixed", "relative", n=3)

    @jax.jit
    def both(q0, qd0, loads):
        p0, pd0 = maximal.from_minimal(model, q0, qd0)
        a = maximal.simulate_maximal(model, p0, pd0, 1e-3, 5, loads=loads)
        b = maximal.simulate_maximal(model, p0, pd0, 1e-3, 5, loads=lambda t, p, pd: (loads, t), has_aux=True)
        return a, b

    a, b = both(q0, qd0, loads)
    np.testing.assert_allclose(a.p, b.p, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(b.aux, a.t, atol=1e-15)  # aux is recorded at every sample


def test_float32_stays_float32_and_jit_matches():
    model, q, qd, _, loads = random_case(9, True, "fixed", "absolute", n=4)
    p, pd = maximal.from_minimal(model, q, qd)
    pdd, mu = maximal.accelerations(model, p, pd, loads)
    pdd_j, mu_j = jax.jit(lambda *a: maximal.accelerations(model, *a))(p, pd, loads)
    # compiled and eager evaluation order differ: round-off of the linear solve
    np.testing.assert_allclose(pdd, pdd_j, atol=SOLVE_RTOL * np.abs(pdd).max())
    np.testing.assert_allclose(mu, mu_j, atol=SOLVE_RTOL * np.abs(mu).max())
    out = jax.jit(lambda *a: maximal.accelerations(model, *a))(
        p.astype(jnp.float32), pd.astype(jnp.float32), loads.astype(np.float32))
    assert all(x.dtype == jnp.float32 for x in out)


def test_gradients():
    model, q, qd, _, loads = random_case(11, True, "floating", "relative", n=3)
    p, pd = maximal.from_minimal(model, q, qd)
    f = jax.jit(lambda p, pd, w: maximal.accelerations(model, p, pd, w, alpha=5.0, beta=5.0))
    check_grads(f, (p, pd, jnp.asarray(loads)), order=1, modes=("fwd", "rev"))


def test_bad_shapes_name_the_argument():
    model, q, qd, _, _ = random_case(12, False, "fixed", "relative", n=3)
    p, pd = maximal.from_minimal(model, q, qd)
    with pytest.raises(ValueError, match="p must have shape"):
        maximal.constraints(model, p[:2])
    with pytest.raises(ValueError, match="loads must have shape"):
        maximal.accelerations(model, p, pd, np.zeros((3, 2)))
    with pytest.raises(ValueError, match="tau must have shape"):
        maximal.joint_moment_loads(model, np.zeros(4))
    with pytest.raises(ValueError, match="has_aux"):
        maximal.simulate_maximal(model, p, pd, 1e-3, 2, has_aux=True)
    with pytest.raises(ValueError, match="loads must have shape"):
        maximal.reactions(model, q, qd, qd, np.zeros((3, 2)))


def test_non_finite_inputs_bad_steps_and_ragged_lists_raise():
    # NaN positions gave NaN multipliers, steps=-3 an empty trajectory, and a ragged
    # list NumPy's bare "setting an array element with a sequence"
    model, q, qd, _, _ = random_case(13, False, "fixed", "relative", n=3)
    p, pd = maximal.from_minimal(model, q, qd)
    nan_p = p.at[0, 0].set(jnp.nan)
    inf_w = jnp.zeros((3, 3)).at[2, 1].set(jnp.inf)
    cases = [
        (lambda: maximal.accelerations(model, nan_p, pd), r"p is not finite at index \(0, 0\): nan"),
        (lambda: maximal.accelerations(model, p, pd, inf_w), r"loads is not finite at index \(2, 1\): inf"),
        (lambda: maximal.constraints(model, nan_p), r"p is not finite"),
        (lambda: maximal.reactions(model, q, qd, qd, inf_w), r"loads is not finite"),
        (lambda: maximal.joint_moment_loads(model, jnp.array([0.0, jnp.nan, 0.0])), r"tau is not finite at index 1"),
        (lambda: maximal.maximal_point_position(model, p, 1, (jnp.nan, 0.0)), r"point is not finite"),
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, -3), r"steps must be an int >= 0 .* got -3"),
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, 2.5), r"steps must be an int >= 0 .* got 2.5"),
        (lambda: maximal.simulate_maximal(model, p, pd, np.nan, 2), r"dt is not finite: nan"),
        (lambda: maximal.simulate_maximal(model, nan_p, pd, 1e-3, 2), r"p0 is not finite"),
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, 2, loads=inf_w), r"loads is not finite"),
        # the Baumgarte parameters: a NaN gave an all-NaN trajectory without an error
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, 2, alpha=np.nan), r"alpha is not finite: nan"),
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, 2, beta=np.inf), r"beta is not finite: inf"),
        (lambda: maximal.simulate_maximal(model, p, pd, 1e-3, 2, alpha=-5.0), r"alpha must be >= 0 .* got -5.0"),
        (lambda: maximal.accelerations(model, p, pd, beta=-1.0), r"beta must be >= 0 .* got -1.0"),
        (lambda: maximal.accelerations(model, p, pd, alpha=[1.0, 2.0]), r"alpha must be a scalar"),
        (lambda: maximal.accelerations(model, [[0.0, 0.0, 0.0], [0.0, 0.0], [0.0, 0.0, 0.0]], pd),
         r"^p must be a rectangular array of real numbers"),
        (lambda: maximal.from_minimal(model, [[0.0, 0.0, 0.0], [0.0]], qd), r"^q must be a rectangular array"),
        (lambda: maximal.reactions(model, np.zeros((2, 3)), qd, qd), r"q must have shape \(3,\)"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message):
            call()
    assert maximal.simulate_maximal(model, p, pd, 1e-3, 0).p.shape == (1, 3, 3)


def test_deprecated_names_warn_and_forward():
    # joint_positions, point_position, simulate and Trajectory repeated top-level names
    # of minimal coordinates: deprecated aliases of the maximal_* names for one release
    for old, new in maximal._DEPRECATED.items():
        with pytest.warns(DeprecationWarning, match=f"jaxmb.maximal.{new}"):
            assert getattr(maximal, old) is getattr(maximal, new)
