"""Whole-body residuals: known truth, independent of inverse dynamics."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import wholebody

NAMES = ("pelvis", "trunk", "thigh_r", "shank_r", "foot_r", "thigh_l", "shank_l", "foot_l", "uarm", "farm")
PARENT = (-1, 0, 0, 2, 3, 0, 5, 6, 1, 8)


def body(coordinates="relative", mass_scale=None):
    """A 10-segment floating body with known, slightly off-axis parameters."""
    length = np.array([0.20, 0.50, 0.42, 0.43, 0.20, 0.42, 0.43, 0.20, 0.30, 0.40])
    mass = np.array([9.0, 25.0, 7.0, 3.0, 1.0, 7.1, 3.1, 1.05, 2.0, 1.6])
    if mass_scale is not None:
        mass = mass * mass_scale
    along = np.array([0.4, 0.45, 0.43, 0.43, 0.3, 0.44, 0.42, 0.35, 0.44, 0.5]) * length
    across = np.array([0.01, -0.02, 0.0, 0.005, 0.02, 0.0, -0.005, 0.015, 0.0, 0.01])
    inertia = mass * (0.3 * length) ** 2
    attach = [None, None, 0.0, None, None, 0.0, None, None, 0.45, None]
    return jaxmb.tree(PARENT, length, np.stack([along, across], -1), mass, inertia, attach=attach,
                      base="floating", coordinates=coordinates, names=NAMES)


# One set of shapes for the whole file (T frames of 2 trials): the library's compiled
# programs (inverse dynamics, the regressor, the posterior) are compiled once per
# model and reused across tests instead of once per test.
T, TRIALS = 20, (2,)


def small_body(mass_scale=1.0):
    """A 3-segment floating body (trunk, thigh, shank), centres of mass off the axes."""
    return jaxmb.tree([-1, 0, 1], [0.5, 0.42, 0.43], np.array([[0.2, 0.01], [0.18, -0.01], [0.19, 0.015]]),
                      np.array([30.0, 7.0, 3.0]) * mass_scale, [1.2, 0.12, 0.05], base="floating",
                      names=("trunk", "thigh", "shank"))  # fmt: skip


def motion(model, T=T, trials=TRIALS):
    """A smooth motion (q, qd, qdd) with exact derivatives, shape trials + (T, dof)."""
    rng = np.random.default_rng(3)
    shape = tuple(trials) + (1, model.dof)
    q0 = rng.normal(0, 0.4, shape) + np.r_[0.0, 0.9, np.pi / 2, np.zeros(model.dof - 3)]
    amp = rng.uniform(0.1, 0.5, shape)
    w = rng.uniform(2.0, 7.0, shape)
    ph = rng.uniform(0, 2 * np.pi, shape)
    t = np.linspace(0, 1.0, T)[:, None]
    q = q0 + amp * np.sin(w * t + ph)
    qd = amp * w * np.cos(w * t + ph)
    qdd = -amp * w**2 * np.sin(w * t + ph)
    return jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)


def cross(a, b):
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def plate_loads(model, q, qd, qdd, share=0.6):
    """Two feet's forces that close the root wrench exactly (and the forces)."""
    need = wholebody.residuals(model, q, qd, qdd)  # wrench without any load
    c = jaxmb.whole_body_com(model, q)
    p_r = jaxmb.point_position(model, q, "foot_r", (0.15, 0.0))
    p_l = jaxmb.point_position(model, q, "foot_l", (0.05, 0.0))
    f_r, f_l = share * need[..., :2], (1 - share) * need[..., :2]
    free = need[..., 2] - cross(p_r - c, f_r) - cross(p_l - c, f_l)
    loads = jaxmb.point_load(model, q, "foot_r", p_r, f_r, free) + jaxmb.point_load(model, q, "foot_l", p_l, f_l)
    return loads, need


@pytest.fixture(scope="module")
def rel():
    """The relative-coordinates body, its motion and the plates' loads that close it."""
    model = body()
    q, qd, qdd = motion(model)
    loads, need = plate_loads(model, q, qd, qdd)
    return model, q, qd, qdd, loads, need


@pytest.fixture(scope="module")
def absolute():
    model = body("absolute")
    q, qd, qdd = motion(model)
    loads, need = plate_loads(model, q, qd, qdd)
    return model, q, qd, qdd, loads, need


@pytest.mark.parametrize("coordinates", ["relative", "absolute"])
def test_true_model_residuals_are_zero(coordinates, request):
    model, q, qd, qdd, loads, need = request.getfixturevalue("rel" if coordinates == "relative" else "absolute")
    r = wholebody.residuals(model, q, qd, qdd, loads)
    assert r.shape == (2, T, 3)
    scale = float(np.abs(need).max())
    # Round-off of a sum of ~10 segment wrenches of ~1e3 N.
    assert float(jnp.abs(r).max()) < 1e-11 * scale


@jax.jit
def _momentum_rates(model, q, qd, qdd):
    """Per frame, along the path q + qd t + qdd t^2 / 2 at t = 0, by JAX of the pose:
    the com's acceleration, the rate of the angular momentum about the com, the com.
    One compiled program for every frame (eager nested jacfwd compiles op by op)."""

    def one(q0, v, a):
        path = lambda t: q0 + v * t + 0.5 * a * t**2  # noqa: E731

        def com(t):
            return jaxmb.whole_body_com(model, path(t))

        def ang_mom(t):
            q = path(t)
            p = jaxmb.pose(model, q)
            pd = jaxmb.pose_velocity(model, q, jax.jacfwd(path)(t))
            c = jaxmb.whole_body_com(model, q)
            return jnp.sum(model.mass * cross(p[:, :2] - c, pd[:, :2]) + model.inertia * pd[:, 2])

        return jax.jacfwd(jax.jacfwd(com))(0.0), jax.jacfwd(ang_mom)(0.0), com(0.0)

    return jax.vmap(jax.vmap(one))(q, qd, qdd)


def test_residual_matches_momentum_rate(rel):
    """F = M (a_c + g) - sum F_k and M_c = dH_c/dt - sum moments, by JAX of the pose,
    at every frame of the motion."""
    model, q, qd, qdd, _, _ = rel
    acc_c, hdot, c = (np.asarray(x) for x in _momentum_rates(model, q, qd, qdd))
    M = float(model.mass.sum())
    force = np.array([3.0, 500.0])
    point = np.array([0.3, 0.0])
    loads = jaxmb.point_load(model, q, "foot_r", point, force, 7.0)
    expect_f = M * (acc_c + np.array([0.0, model.gravity])) - force
    expect_m = hdot - cross(point - c, force) - 7.0
    r = np.asarray(wholebody.residuals(model, q, qd, qdd, loads))
    np.testing.assert_allclose(r[..., :2], expect_f, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(r[..., 2], expect_m, rtol=1e-12, atol=1e-9)


def test_wrong_mass_gives_newtons_law_residual(rel):
    model, q, qd, qdd, loads, _ = rel
    dm = 0.7
    wrong = model.replace(mass=model.mass.at[1].add(dm), inertia=model.inertia)
    r = wholebody.residuals(wrong, q, qd, qdd, loads, about="root")
    a = np.asarray(jaxmb.pose_acceleration(model, q, qd, qdd))[..., 1, :]
    p = np.asarray(jaxmb.pose(model, q))[..., 1, :2]
    f = dm * (a[..., :2] + np.array([0.0, model.gravity]))
    np.testing.assert_allclose(r[..., :2], f, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(r[..., 2], cross(p - np.asarray(q)[..., :2], f), rtol=1e-10, atol=1e-10)


def test_jit_grad_and_fixed_base_refused(rel):
    model, q, qd, qdd, loads, _ = rel

    def f(m):  # residuals under jit and grad at once: one compiled program
        r = wholebody.residuals(m, q, qd, qdd, loads)
        return jnp.sum(r**2), r

    g, r_jit = jax.jit(jax.grad(f, has_aux=True))(model.replace(mass=model.mass * 1.01))
    assert np.all(np.isfinite(g.mass)) and float(np.abs(g.mass).max()) > 0
    np.testing.assert_allclose(r_jit, wholebody.residuals(model.replace(mass=model.mass * 1.01), q, qd, qdd, loads),
                               atol=1e-12)
    fixed = jaxmb.chain([1.0], [0.5], [1.0], [0.1])
    with pytest.raises(ValueError, match="floating"):
        wholebody.residuals(fixed, jnp.zeros(1), jnp.zeros(1), jnp.zeros(1))


def test_summarize_units_and_mask():
    r = jnp.array([[1.0, 2.0, 3.0], [-3.0, 0.0, 1.0], [100.0, 100.0, 100.0]])
    s = wholebody.summarize(r, body_mass=10.0, height=2.0, gravity=10.0, mask=[1, 1, 0])
    np.testing.assert_allclose(s.rms, np.sqrt([5.0, 2.0, 5.0]))
    np.testing.assert_allclose(s.peak, [3.0, 2.0, 3.0])
    np.testing.assert_allclose(s.rms_percent, np.sqrt([5.0, 2.0, 5.0]) / np.array([1.0, 1.0, 2.0]))
    assert float(s.frames) == 2


def _prior_around(model, scale=1.2):
    start = model.replace(mass=model.mass * scale)
    phys = np.asarray(jaxmb.identify.to_physical(start))
    sd = np.abs(phys) * np.array([0.25, 0, 0, 0.5]) + np.array([0, 0.02, 0.02, 0])
    return start, jaxmb.identify.Prior(mean=phys, sd=sd)


def test_fit_recovers_identifiable_combinations_noiseless(rel):
    model, q, qd, qdd, loads, _ = rel
    start, prior = _prior_around(model)
    fit = wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=1e-6)
    truth = np.asarray(jaxmb.identify.to_parameters(model))
    base = fit.base
    K = np.zeros((base.rank, truth.size))
    K[np.arange(base.rank), list(base.independent)] = 1.0
    K[:, list(base.dependent)] = base.beta
    assert base.rank == 31  # 40 parameters; 9 combinations invisible from the root
    np.testing.assert_allclose(fit.combinations, K @ truth, rtol=1e-8, atol=1e-8)
    assert fit.consistent
    # The residuals of the fitted parameters (regressor form, about the com) vanish.
    Y, y0 = wholebody.root_regressor(start, q, qd, qdd, loads)
    r = wholebody.about_com(start, q, Y @ fit.parameters + y0, fit.parameters)
    assert float(jnp.abs(r).max()) < 1e-6
    # about_com agrees with residuals() for a consistent model.
    r_true = wholebody.about_com(start, q, Y @ truth + y0, truth)
    np.testing.assert_allclose(r_true, wholebody.residuals(model, q, qd, qdd, loads), atol=1e-9)


def test_fit_intervals_cover_the_truth(rel):
    """Truth drawn from the prior, noise on the plates' force and moment: 95 % intervals
    of the identifiable combinations cover it in 93-97 % of 200 repetitions."""
    model, q, qd, qdd, loads, _ = rel
    start, prior = _prior_around(model)
    Y, y0 = wholebody.root_regressor(start, q, qd, qdd, loads)
    mean, L = wholebody.barycentric_prior(prior)
    cov = np.linalg.inv(np.asarray(L).T @ np.asarray(L))
    rng = np.random.default_rng(7)
    sigma = np.array([20.0, 20.0, 5.0])  # N, N, N m: real plates' order
    hits = []
    for _ in range(200):
        truth = rng.multivariate_normal(np.asarray(mean), cov)
        meas = -(np.asarray(Y) @ truth) + sigma * rng.standard_normal(Y.shape[:-1])
        fit = wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=sigma, regressor=(Y, meas))
        base = fit.base
        K = np.zeros((base.rank, truth.size))
        K[np.arange(base.rank), list(base.independent)] = 1.0
        K[:, list(base.dependent)] = base.beta
        hits.append(np.abs(fit.combinations - K @ truth) <= 1.959964 * fit.combinations_stderr)
    assert 0.93 <= np.mean(hits) <= 0.97


def test_prior_around_and_bad_free():
    model = body()
    prior = wholebody.prior_around(model, mass=0.1, com=0.01, inertia=0.3)
    np.testing.assert_allclose(prior.sd[:, 0], 0.1 * np.asarray(model.mass))
    np.testing.assert_allclose(prior.sd[:, 1:3], 0.01)
    with pytest.raises(ValueError, match="unknown quantities"):
        wholebody.fit_to_plates(model, jnp.zeros(model.dof), jnp.zeros(model.dof), jnp.zeros(model.dof), None,
                                prior=prior, sigma=1.0, free=("masses",))
    s = wholebody.summarize(jnp.ones((4, 3)), body_mass=10.0)
    assert np.isnan(float(s.rms_percent[2])) and float(s.rms_percent[0]) == pytest.approx(100 / 98.1)


def _closing_load(model, q, qd, qdd):
    """One force under the shank, and a free moment, that close the root wrench exactly."""
    need = wholebody.residuals(model, q, qd, qdd)
    p = jaxmb.point_position(model, q, "shank", (0.15, 0.0))
    free = need[..., 2] - cross(p - jaxmb.whole_body_com(model, q), need[..., :2])
    return jaxmb.point_load(model, q, "shank", p, need[..., :2], free)


def test_many_subjects_in_one_call_equal_the_single_fits():
    """fit_subjects (one vmapped, compiled call) equals fit_to_plates per subject to round-off.
    A three-segment floating body: the batching does not depend on the size, and the
    vmapped regressor of ten segments is the file's largest compile."""
    subjects = [small_body(mass_scale=s) for s in (1.0, 1.15, 0.9)]
    motions = [motion(m) for m in subjects]
    for k, (q, qd, qdd) in enumerate(motions):  # other motions per subject
        motions[k] = (q + 0.05 * k, qd, qdd)
    loads = [_closing_load(m, *mo) for m, mo in zip(subjects, motions)]
    starts, priors = zip(*[_prior_around(m, scale=1.1) for m in subjects])
    stack = lambda k: jnp.stack([mo[k] for mo in motions])  # noqa: E731
    w = np.ones((3, 2, T))
    w[1, 1, 10:] = 0.0  # a ragged subject: padded frames weigh 0
    sigma = np.array([5.0, 5.0, 1.0])
    fits = wholebody.fit_subjects(list(starts), stack(0), stack(1), stack(2), jnp.stack(loads), priors=list(priors),
                                  sigma=sigma, weights=w, body_mass=[float(m.mass.sum()) for m in subjects])
    assert fits.parameters.shape == (3, 12) and fits.covariance.shape == (3, 12, 12)
    for k in range(3):
        one = wholebody.fit_to_plates(starts[k], *motions[k], loads[k], prior=priors[k], sigma=sigma, weights=w[k],
                                      body_mass=float(subjects[k].mass.sum()))
        # Round-off of one SVD of the same rows, batched or not.
        np.testing.assert_allclose(fits.parameters[k], one.parameters, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(fits.covariance[k], one.covariance, rtol=1e-8, atol=1e-14)
        np.testing.assert_allclose(fits.physical[k], one.physical, rtol=1e-9, atol=1e-10)
        assert bool(fits.consistent[k]) == one.consistent and not fits.held[k].any()
    with pytest.raises(ValueError, match="another topology"):
        wholebody.fit_subjects([starts[0], jaxmb.chain([1.0], [0.5], [1.0], [0.1], base="floating")], stack(0)[:2],
                               stack(1)[:2], stack(2)[:2], jnp.stack(loads)[:2], priors=list(priors[:2]), sigma=1.0)
    w[2] = 0.0
    with pytest.raises(ValueError, match=r"subjects \[2\] have no frame"):
        wholebody.fit_subjects(list(starts), stack(0), stack(1), stack(2), jnp.stack(loads), priors=list(priors),
                               sigma=sigma, weights=w)


def _upper_body_moment(model, q, qd, qdd):
    """Independent top-down hip moment: the upper body (pelvis, trunk, arm) as its own floating model."""
    keep = [0, 1, 8, 9]
    sub = jaxmb.tree([-1, 0, 1, 2], np.asarray(model.length)[keep], np.asarray(model.com)[keep],
                     np.asarray(model.mass)[keep], np.asarray(model.inertia)[keep], attach=[None, None, 0.45, None],
                     base="floating", coordinates="absolute")
    cols = [0, 1] + [2 + i for i in keep]
    tau = jaxmb.inverse_dynamics(sub, q[..., cols], qd[..., cols], qdd[..., cols])
    return -tau[..., 2:].sum(-1)  # the moment the legs must supply about the hip point


def test_hip_moments_top_down_and_bottom_up_before_and_after_the_fit(absolute):
    model, q, qd, qdd, loads, _ = absolute
    true = wholebody.whole_body_moments(model, q, qd, qdd, loads)
    np.testing.assert_allclose(true.hips_top_down, _upper_body_moment(model, q, qd, qdd), rtol=1e-10, atol=1e-9)
    np.testing.assert_allclose(true.hips, jaxmb.joint_moments(model, q, qd, qdd, loads)[..., [2, 5]], atol=1e-12)
    # True model: both ways agree to round-off (its residual is zero).
    np.testing.assert_allclose(true.hips.sum(-1), true.hips_top_down, atol=1e-9 * float(jnp.abs(true.hips).max()))
    start, prior = _prior_around(model)
    before = wholebody.whole_body_moments(start, q, qd, qdd, loads)
    gap = before.hips.sum(-1) - before.hips_top_down
    r = wholebody.residuals(start, q, qd, qdd, loads, about="root")
    np.testing.assert_allclose(gap, r[..., 2], atol=1e-9)  # the difference is the root's residual moment
    assert float(jnp.abs(gap).max()) > 1.0
    fit = wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=1e-6)
    after = wholebody.whole_body_moments(fit.model(start), q, qd, qdd, loads, loads_for=start)
    assert float(jnp.abs(after.hips.sum(-1) - after.hips_top_down).max()) < 1e-6
    with pytest.raises(ValueError, match="one point of one parent"):
        wholebody.whole_body_moments(model, q, qd, qdd, loads, hips=("thigh_r", "uarm"))


def test_residual_bands_match_the_posterior(rel):
    """Monte Carlo bands of the root residual against the exact spread sqrt(Y cov Y^T)."""
    model, q, qd, qdd, loads, _ = rel
    start, prior = _prior_around(model)
    fit = wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=(20.0, 20.0, 5.0))
    lo, mid, hi = wholebody.residual_bands(start, fit, q, qd, qdd, loads, draws=4000, about="root")
    Y, y0 = wholebody.root_regressor(start, q, qd, qdd, loads)
    sd = np.sqrt(np.einsum("...ij,jk,...ik->...i", Y, fit.covariance, Y))
    nominal = Y @ fit.parameters + y0
    # 4000 draws: the band's half-width within 6 % of 1.96 sd, its median within 0.1 sd.
    np.testing.assert_allclose((hi - lo) / 2, 1.959964 * sd, rtol=0.06)
    assert float(jnp.max(jnp.abs(mid - nominal) / sd)) < 0.1
    com = wholebody.residual_bands(start, fit, q, qd, qdd, loads, draws=50)
    assert com.shape == (3, 2, T, 3) and np.all(np.isfinite(com))


def test_masses_held_at_their_floor(rel):
    """Data that want a negative mass: it is held at mass_floor x its prior mean, the rest refitted exactly."""
    model, q, qd, qdd, loads, _ = rel
    start, prior = _prior_around(model)
    Y, _ = wholebody.root_regressor(start, q, qd, qdd, loads)
    phys = np.asarray(jaxmb.identify.to_physical(model)).copy()
    phys[8, 0] = -5.0  # the upper arm "weighs" -5 kg in the data
    m, cx, cy, inertia = phys.T
    truth = np.stack([m, m * cx, m * cy, inertia + m * (cx**2 + cy**2)], -1).reshape(-1)
    meas = -(np.asarray(Y) @ truth)
    sigma = np.array([1.0, 1.0, 0.2])
    fit = wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=sigma, regressor=(Y, meas))
    floor = 0.1 * np.asarray(prior.mean)[:, 0]
    assert fit.held[8] and fit.parameters[32] == pytest.approx(floor[8], rel=1e-12)
    assert np.all(fit.parameters[0::4] >= floor * (1 - 1e-12)) and fit.stderr[32] == 0.0
    # Independent: NumPy least squares of the same rows with the held masses' columns fixed.
    mean, L = (np.asarray(x) for x in wholebody.barycentric_prior(prior))
    A = np.concatenate([(np.asarray(Y) / sigma[:, None]).reshape(-1, 40), L])
    b = np.concatenate([(-meas / sigma).reshape(-1), L @ mean])
    held = 4 * np.where(fit.held)[0]
    free_cols = np.setdiff1d(np.arange(40), held)
    x = np.zeros(40)
    x[held] = floor[fit.held]
    x[free_cols] = np.linalg.lstsq(A[:, free_cols], b - A[:, held] @ x[held], rcond=None)[0]
    np.testing.assert_allclose(fit.parameters, x, rtol=1e-8, atol=1e-9)
    # Without the bound the same rows give a negative mass.
    assert np.linalg.lstsq(A, b, rcond=None)[0][32] < 0
    with pytest.raises(ValueError, match="mass_floor"):
        wholebody.fit_to_plates(start, q, qd, qdd, loads, prior=prior, sigma=sigma, regressor=(Y, meas), mass_floor=0)


def test_bounded_solve_batches_with_different_active_sets():
    """vmap of the active-set solve (a while_loop) equals each solve alone, held masses differing per item."""
    from jaxmb.wholebody._fit import _bounded_solve

    rng = np.random.default_rng(5)
    n = 3
    A = jnp.asarray(rng.normal(size=(2, 30, 4 * n)))
    x_true = np.tile([2.0, 0.3, 0.1, 1.0], (2, n))
    x_true[0, 4] = -1.0  # item 0 wants mass 1 negative, item 1 none
    b = jnp.einsum("kij,kj->ki", A, x_true)
    floor = jnp.full((2, n), 0.2)
    xs, covs, held = jax.vmap(_bounded_solve)(A, b, floor)
    assert held[0].tolist() == [False, True, False] and not held[1].any()
    alone = jax.jit(_bounded_solve)  # as the library calls it (inside its jitted posterior); one compile
    for k in range(2):
        x, cov, h = alone(A[k], b[k], floor[k])
        np.testing.assert_allclose(xs[k], x, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(covs[k], cov, rtol=1e-10, atol=1e-12)
        assert (np.asarray(h) == np.asarray(held[k])).all()
    np.testing.assert_allclose(xs[1], x_true[1], rtol=1e-10)
    assert float(xs[0, 4]) == pytest.approx(0.2, rel=1e-12)
