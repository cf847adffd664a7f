"""One public function per quantity (issue 8): any leading batch shape equals a loop of
single samples; nested vmap, forward mode and gradients; what float32 costs per model;
finite forward dynamics for positive definite mass matrices in float32."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradcheck
import jaxmb
from jaxmb._engine import rules, solve
from random_models import CONFIGS, PAIR_CONFIG_PARAMS, random_model, random_state

LEAD = (2, 3)
TOL = dict(rtol=1e-10, atol=1e-9)


def _states(seed, model, lead=LEAD):
    rng = np.random.default_rng(seed)
    n = int(np.prod(lead))
    s = [random_state(rng, model) for _ in range(n)]
    return tuple(np.stack([x[k] for x in s]).reshape(lead + s[0][k].shape) for k in range(4))


def _functions(all_of_them: bool):
    f = {
        "inverse_dynamics": lambda m, q, qd, qdd, ld: jaxmb.inverse_dynamics(m, q, qd, qdd, ld),
        "joint_moments": lambda m, q, qd, qdd, ld: jaxmb.joint_moments(m, q, qd, qdd, ld),
        "joint_reactions": lambda m, q, qd, qdd, ld: jaxmb.joint_reactions(m, q, qd, qdd, ld, frame="segment"),
        "forward_dynamics": lambda m, q, qd, qdd, ld: jaxmb.forward_dynamics(m, q, qd, qdd, ld),
    }
    if all_of_them:
        f.update({
            "mass_matrix": lambda m, q, qd, qdd, ld: jaxmb.mass_matrix(m, q),
            "bias_forces": lambda m, q, qd, qdd, ld: jaxmb.bias_forces(m, q, qd),
            "gravity_forces": lambda m, q, qd, qdd, ld: jaxmb.gravity_forces(m, q),
            "external_forces": lambda m, q, qd, qdd, ld: jaxmb.external_forces(m, q, ld),
            "joint_loads": lambda m, q, qd, qdd, ld: jnp.concatenate(
                [x.reshape(x.shape[: q.ndim - 1] + (-1,)) for x in jaxmb.joint_loads(m, q, qd, qdd, ld)], -1),
            "torque_components": lambda m, q, qd, qdd, ld: jaxmb.torque_components(m, q, qd, qdd, ld)["coriolis"],
        })  # fmt: skip
    return f


@pytest.mark.parametrize("tree,base,coordinates", PAIR_CONFIG_PARAMS)
def test_leading_shape_equals_a_loop_of_single_samples(tree, base, coordinates):
    # (2, 3, dof) inputs, per-sample loads (2, 3, segments, 3) and shared loads
    # (segments, 3), against a Python loop of (dof,) calls; every public function and
    # shared loads on two of the configurations, the four main ones on all
    model = random_model(np.random.default_rng(20), 3, tree=tree, base=base, coordinates=coordinates)
    q, qd, qdd, loads = _states(21, model)
    every = (tree, base, coordinates) in (CONFIGS[0], CONFIGS[-1])
    for name, f in _functions(every).items():
        for ld, shared in ((loads, False), (loads[0, 0], True))[: 2 if every else 1]:
            got = np.asarray(f(model, q, qd, qdd, ld))  # NumPy: indexing a jax.Array compiles per index
            assert got.shape[:2] == LEAD, name
            for i in np.ndindex(LEAD):
                one = f(model, q[i], qd[i], qdd[i], ld if shared else ld[i])
                np.testing.assert_allclose(got[i], one, **TOL, err_msg=f"{name} {i} shared={shared}")


def test_pose_map_functions_energies_and_point_load_over_leading_shapes():
    # the pose-map (kinematics) functions, the energies, coriolis_matrix, point_load and
    # the coordinate conversions take any leading shape too, broadcasting NumPy-style:
    # a (2, 3, dof) q against a (3, dof) qd and a (2, 1, dof) qdd is a (2, 3) batch that
    # equals a loop of single samples (they once refused any batch)
    model = random_model(np.random.default_rng(30), 3, tree=True, base="floating")
    rng = np.random.default_rng(31)
    dof = model.dof
    q, qd, qdd = rng.normal(size=(2, 3, dof)), rng.normal(size=(3, dof)), rng.normal(size=(2, 1, dof))
    point, force, moment = rng.normal(size=(3, 2)), rng.normal(size=(2, 1, 2)), rng.normal(size=(2, 3))
    absolute = model.replace(coordinates="absolute")
    pt = (0.1, 0.02)
    fns = {
        "pose": lambda a, b, c, p, f, mz: jaxmb.pose(model, a),
        "segment_angles": lambda a, b, c, p, f, mz: jaxmb.segment_angles(model, a),
        "joint_positions": lambda a, b, c, p, f, mz: jaxmb.joint_positions(model, a),
        "distal_positions": lambda a, b, c, p, f, mz: jaxmb.distal_positions(model, a),
        "com_positions": lambda a, b, c, p, f, mz: jaxmb.com_positions(model, a),
        "whole_body_com": lambda a, b, c, p, f, mz: jaxmb.whole_body_com(model, a),
        "point_position": lambda a, b, c, p, f, mz: jaxmb.point_position(model, a, 2, pt),
        "point_jacobian": lambda a, b, c, p, f, mz: jaxmb.point_jacobian(model, a, 2, pt),
        "point_velocity": lambda a, b, c, p, f, mz: jaxmb.point_velocity(model, a, b, 2, pt),
        "point_acceleration": lambda a, b, c, p, f, mz: jaxmb.point_acceleration(model, a, b, c, 2, pt),
        "pose_jacobian": lambda a, b, c, p, f, mz: jaxmb.pose_jacobian(model, a),
        "constraint_jacobian": lambda a, b, c, p, f, mz: jaxmb.constraint_jacobian(model, a),
        "pose_velocity": lambda a, b, c, p, f, mz: jaxmb.pose_velocity(model, a, b),
        "pose_acceleration": lambda a, b, c, p, f, mz: jaxmb.pose_acceleration(model, a, b, c),
        "coordinates_to": lambda a, b, c, p, f, mz: jaxmb.coordinates_to(model, a, "absolute"),
        "coordinates_to relative": lambda a, b, c, p, f, mz: jaxmb.coordinates_to(absolute, a, "relative"),
        "forces_to": lambda a, b, c, p, f, mz: jaxmb.forces_to(model, a, "absolute"),
        "forces_to relative": lambda a, b, c, p, f, mz: jaxmb.forces_to(absolute, a, "relative"),
        "coriolis_matrix": lambda a, b, c, p, f, mz: jaxmb.coriolis_matrix(model, a, b),
        "kinetic_energy": lambda a, b, c, p, f, mz: jaxmb.kinetic_energy(model, a, b),
        "potential_energy": lambda a, b, c, p, f, mz: jaxmb.potential_energy(model, a),
        "total_energy": lambda a, b, c, p, f, mz: jaxmb.total_energy(model, a, b),
        "point_load": lambda a, b, c, p, f, mz: jaxmb.point_load(model, a, 1, p, f, mz),
        "point_load segment": lambda a, b, c, p, f, mz: jaxmb.point_load(model, a, 2, p, f, mz, frame="segment"),
    }
    # all of them in one jitted call (op-by-op, the first eager calls of the
    # Jacobians compile for seconds); the eager path is the same code plus the value checks
    every = jax.jit(lambda *xs: {name: f(*xs) for name, f in fns.items()})
    got = jax.tree_util.tree_map(np.asarray, every(q, qd, qdd, point, force, moment))  # NumPy: indexed below
    for i, j in np.ndindex(2, 3):
        one = every(q[i, j], qd[j], qdd[i, 0], point[j], force[i, 0], moment[i, j])
        for name in fns:
            assert got[name].shape == (2, 3) + one[name].shape, name
            np.testing.assert_allclose(got[name][i, j], one[name], **TOL, err_msg=f"{name} {(i, j)}")
    for name in ("point_load", "coordinates_to", "forces_to relative"):  # eager too
        np.testing.assert_allclose(fns[name](q, qd, qdd, point, force, moment), got[name], **TOL)
    # the conversions are each other's inverse over a batch, and jit of a batch works
    np.testing.assert_allclose(jaxmb.coordinates_to(absolute, jaxmb.coordinates_to(model, q, "absolute"),
                                                    "relative"), q, **TOL)  # fmt: skip
    np.testing.assert_allclose(jax.jit(lambda a: jaxmb.pose(model, a))(qdd), jaxmb.pose(model, qdd), **TOL)
    with pytest.raises(ValueError, match=r"do not broadcast: q \(2, 3\), qd \(4,\)"):
        jaxmb.pose_velocity(model, q, qd[[0, 1, 2, 0]])
    with pytest.raises(ValueError, match=r"q must have shape \(5,\) for one sample or \(\.\.\., 5\)"):
        jaxmb.kinetic_energy(model, q[..., :4], qd)


def test_broadcasting_and_errors():
    model = jaxmb.seven_segment_human()
    q, qd, qdd, loads = _states(22, model, (4,))
    # a (T, dof) series against one shared velocity: NumPy broadcasting
    got = jaxmb.inverse_dynamics(model, q, qd[0], qdd)
    ref = jaxmb.inverse_dynamics(model, q, np.broadcast_to(qd[0], q.shape), qdd)
    np.testing.assert_allclose(got, ref, **TOL)
    with pytest.raises(ValueError, match="do not broadcast"):
        jaxmb.inverse_dynamics(model, q, qd[:3], qdd)
    with pytest.raises(ValueError, match="q"):
        jaxmb.inverse_dynamics(model, q[:, :3], qd, qdd)


def test_nested_vmap_subjects_trials_time():
    # subjects x trials x time: vmap(vmap(vmap(single sample))) equals one call on
    # (S, R, T, dof) (the custom_vmap rule adds a leading dimension per level), also
    # with a different model per subject (JAX's batching of the kernel)
    model = random_model(np.random.default_rng(23), 4, base="floating", coordinates="absolute")
    q, qd, qdd, loads = _states(24, model, (2, 2, 5))
    f = lambda m, a, b, c, d: jaxmb.joint_moments(m, a, b, c, d)  # noqa: E731
    nested = jax.jit(jax.vmap(jax.vmap(jax.vmap(f, (None, 0, 0, 0, 0)), (None, 0, 0, 0, 0)), (None, 0, 0, 0, 0)))
    np.testing.assert_allclose(nested(model, q, qd, qdd, loads), f(model, q, qd, qdd, loads), **TOL)
    subjects = jax.tree_util.tree_map(lambda x: np.stack([x, 1.2 * x]), model)
    # jitted: op by op, each batched operation compiles on its own
    per_subject = np.asarray(jax.jit(jax.vmap(lambda m, a, b, c, d: f(m, a, b, c, d)))(subjects, q, qd, qdd, loads))
    for s in range(2):
        m_s = jax.tree_util.tree_map(lambda x: x[s], subjects)
        np.testing.assert_allclose(per_subject[s], f(m_s, q[s], qd[s], qdd[s], loads[s]), **TOL)


def test_forward_mode_against_the_projection():
    # jvp of the batched kernel (gradient="autodiff": the default adjoint is reverse
    # mode only) against the jvp of the pose-map formulas
    model = random_model(np.random.default_rng(25), 3, tree=True, base="floating")
    q, qd, qdd, loads = (jnp.asarray(x) for x in _states(26, model, (6,)))
    dq = jnp.asarray(np.random.default_rng(27).normal(size=q.shape))
    for fn, kw in ((jaxmb.inverse_dynamics, dict(gradient="autodiff")), (jaxmb.joint_reactions, dict(gradient="autodiff"))):
        # jitted: the projection's jvp op by op dispatches thousands of small ops
        _, t = jax.jit(lambda x: jax.jvp(lambda x: fn(model, x, qd, qdd, loads, **kw), (x,), (dq,)))(q)  # noqa: B023
        _, r = jax.jit(lambda x: jax.jvp(lambda x: fn(model, x, qd, qdd, loads, method="projection"), (x,), (dq,)))(q)  # noqa: B023
        np.testing.assert_allclose(t, r, rtol=1e-9, atol=1e-8)
    # forward dynamics: d/dq of qdd(q) from M qdd = tau - bias, by central differences
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    def jvp(x):
        return jax.jvp(lambda x: jaxmb.forward_dynamics(model, x, qd, tau, loads, gradient="autodiff"), (x,), (dq,))

    _, t = jvp(q)
    h = 1e-6  # the values for the difference from the same compiled jvp (its primal output)
    fd = (jvp(q + h * dq)[0] - jvp(q - h * dq)[0]) / (2 * h)
    np.testing.assert_allclose(t, fd, rtol=1e-6, atol=1e-5)


def test_gradients_through_the_human():
    # every public function of the seven-segment human differentiates (reverse mode
    # w.r.t. the model and the state) and agrees with a central difference of the
    # loss along a random direction in every model parameter and q at once
    model = jaxmb.seven_segment_human()
    q, qd, qdd, loads = (jnp.asarray(x) for x in _states(28, model, (3,)))
    fns = {
        "inverse_dynamics": lambda m, x: jaxmb.inverse_dynamics(m, x, qd, qdd, loads),
        "joint_moments": lambda m, x: jaxmb.joint_moments(m, x, qd, qdd, loads),
        "joint_reactions": lambda m, x: jaxmb.joint_reactions(m, x, qd, qdd, loads),
        "forward_dynamics": lambda m, x: jaxmb.forward_dynamics(m, x, qd, qdd, loads),
        "mass_matrix": lambda m, x: jaxmb.mass_matrix(m, x),
    }
    for name, f in fns.items():
        # one program for the loss and its gradient: the central difference reads the
        # loss's values from it (no compilation of the loss alone)
        value_and_grad = jax.jit(jax.value_and_grad(lambda m, x, f=f: jnp.sum(jnp.sin(f(m, x))), argnums=(0, 1)))
        gm, gq = value_and_grad(model, q)[1]
        assert np.isfinite(gq).all() and all(np.isfinite(x).all() for x in jax.tree_util.tree_leaves(gm)), name
        if name in ("inverse_dynamics", "joint_moments"):
            continue  # the adjoint against central differences: tests/test_batch.py
        gradcheck.directional(lambda m, x: value_and_grad(m, x)[0], (gm, gq), (model, q), 3, msg=name)  # noqa: B023


# float32 against float64, relative to the largest entry, over 2048 random states
# (angles U(-pi, pi), rates N(0, 2^2), accelerations N(0, 5^2)). Measured on this
# CPU: inverse dynamics 1.1e-7 to 8.6e-7, reactions 1.1e-7 to 6.3e-7, forward of
# inverse 1.4e-5 (chain 3), 1.4e-4 (chain 7), 5.9e-3 (chain 20: M's condition
# number), 6e-6 (human); the bounds below leave a factor of about 5.
F32_BOUNDS = {"chain3": (5e-6, 1e-4), "chain7": (5e-6, 1e-3), "chain20": (5e-6, 3e-2), "human": (5e-6, 5e-5)}


def _bench_model(name):
    if name == "human":
        return jaxmb.seven_segment_human()
    n = int(name[5:])
    rng = np.random.default_rng(100 + n)
    length = rng.uniform(0.25, 0.5, n)
    mass = rng.uniform(1.0, 8.0, n)
    com = np.stack([0.43 * length, rng.uniform(-0.02, 0.02, n)], 1)
    return jaxmb.chain(length, com, mass, mass * length**2 * rng.uniform(0.05, 0.09, n))


@pytest.mark.parametrize("name", [
    # chain7 with --slow: the chains' bounds are checked by default on chain3 and chain20
    # (either side of it), the tree's on the human
    pytest.param(name, marks=pytest.mark.slow) if name == "chain7" else name for name in F32_BOUNDS
])  # fmt: skip
def test_float32_cost_per_model(name):
    model = _bench_model(name)
    rng = np.random.default_rng(29)
    B, dof = 2048, model.dof
    q = rng.uniform(-np.pi, np.pi, (B, dof))
    if model.base == "floating":
        q[:, :2] = rng.uniform(-1, 1, (B, 2))
    qd, qdd = 2 * rng.standard_normal((B, dof)), 5 * rng.standard_normal((B, dof))
    x32 = [x.astype(np.float32) for x in (q, qd, qdd)]
    x64 = [x.astype(np.float64) for x in x32]
    id_bound, fd_bound = F32_BOUNDS[name]
    for fn in (jaxmb.inverse_dynamics, jaxmb.joint_reactions):
        a, b = fn(model, *x32), fn(model, *x64)
        assert a.dtype == jnp.float32
        a, b = np.asarray(a, np.float64), np.asarray(b)  # the comparison in NumPy
        assert float(np.max(np.abs(a - b)) / np.max(np.abs(b))) < id_bound, fn.__name__
    tau = jaxmb.inverse_dynamics(model, *x32)
    acc = np.asarray(jaxmb.forward_dynamics(model, x32[0], x32[1], tau), np.float64)
    assert np.isfinite(acc).all()
    assert np.abs(acc - x64[2]).max() / np.abs(x64[2]).max() < fd_bound


@pytest.mark.parametrize("solver", [solve._ldl_solve_rows, solve._cholesky_solve_rows], ids=["ldl", "cholesky"])
def test_float32_solve_stays_finite_near_singular(solver):
    # symmetric positive definite matrices whose condition number (1e9) is beyond
    # float32: rounding makes some pivots zero or negative; the floor keeps the
    # solution finite. In float64 the floor does not act (the exact solve).
    rng = np.random.default_rng(30)
    d, b = 6, 256
    Q = np.linalg.qr(rng.normal(size=(b, d, d)))[0]
    eig = np.logspace(0, -9, d)
    M = np.einsum("bij,j,bkj->ikb", Q, eig, Q)  # (d, d, b)
    r = rng.normal(size=(d, b))
    x32 = solver(jnp.asarray(M, jnp.float32), jnp.asarray(r, jnp.float32))
    assert x32.dtype == jnp.float32 and np.isfinite(np.asarray(x32)).all()
    well = np.einsum("bij,j,bkj->ikb", Q, np.logspace(0, -2, d), Q)
    x64 = solver(jnp.asarray(well), jnp.asarray(r))
    ref = np.stack([np.linalg.solve(well[:, :, k], r[:, k]) for k in range(b)], 1)
    np.testing.assert_allclose(x64, ref, rtol=1e-10, atol=1e-10)


def test_direct_call_compiles_once_and_is_cached():
    # a direct call from Python dispatches to the compiled kernel: a second call with
    # new values (same shapes, a new mass) does not compile again
    model = random_model(np.random.default_rng(31), 3)
    q, qd, qdd, _ = _states(32, model, (50,))
    jaxmb.inverse_dynamics(model, q, qd, qdd)
    before = rules._jitted._cache_size()
    jaxmb.inverse_dynamics(model.replace(mass=model.mass * 1.1), q + 0.1, qd, qdd)
    assert rules._jitted._cache_size() == before


def test_default_gradients_are_reverse_mode_and_hessians_work():
    # The default gradient="adjoint" rules (custom_vjp) refuse forward mode applied
    # first, with JAX's message, but forward over reverse (jax.hessian) works and
    # equals the "autodiff" Hessian, for inverse dynamics (w.r.t. q and the masses)
    # and forward dynamics (w.r.t. q)
    model = random_model(np.random.default_rng(28), 2, tree=False, base="fixed")  # small: six Hessians compile
    q, qd, qdd, loads = (jnp.asarray(x) for x in _states(29, model, ()))
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)

    def inv(gradient):
        return lambda x: jnp.sum(jnp.sin(jaxmb.inverse_dynamics(model, x, qd, qdd, loads, gradient=gradient)))

    def inv_mass(gradient):
        return lambda m: jnp.sum(jnp.sin(jaxmb.inverse_dynamics(model.replace(mass=m), q, qd, qdd, loads,
                                                                 gradient=gradient)))  # fmt: skip

    def fwd(gradient):
        return lambda x: jnp.sum(jnp.sin(jaxmb.forward_dynamics(model, x, qd, tau, loads, gradient=gradient)))

    for f, x in ((inv, q), (inv_mass, model.mass), (fwd, q)):
        with pytest.raises(TypeError, match="forward-mode.*pass gradient='autodiff'"):
            jax.jvp(f("adjoint"), (x,), (jnp.ones_like(x),))
        H = jax.jit(jax.hessian(f("adjoint")))(x)
        np.testing.assert_allclose(H, jax.jit(jax.hessian(f("autodiff")))(x), rtol=1e-9, atol=1e-9)
        assert np.abs(np.asarray(H)).max() > 1e-3  # not trivially zero
    # simulate, whose kernel is called inside its own compiled integration, says so too
    sim = lambda x: jaxmb.simulate(model, x, qd, tau=tau, dt=1e-3, steps=2).q  # noqa: E731
    with pytest.raises(TypeError, match="forward-mode.*pass gradient='autodiff'"):
        jax.jacfwd(sim)(q)
