"""Issue 38, items 8 to 11: the Python API with a stranger's inputs.

A model made directly is checked like one made by chain or tree (item 10); values
are checked in the dtype they are computed in, not before a cast to float32 (item
11); ``optimize`` refuses two numbers that read both as joint angles and as a hand
position (item 8); identification builds the wrenches of a force for the model it
fits (item 9).
"""

import functools
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import identify
from jaxmb.cli.identify_running import perturbed  # demo code of the `jaxmb identify` command

ARM = dict(length=[0.30, 0.27], com=[0.13, 0.12], mass=[2.0, 1.2], inertia=[0.016, 0.008])


def _fields(**changes):
    kw = dict(length=jnp.array([0.3, 0.27, 0.2]), com=jnp.array([[0.13, 0.0], [0.12, 0.0], [0.1, 0.0]]),
              mass=jnp.array([2.0, 1.2, 0.5]), inertia=jnp.array([0.016, 0.008, 0.002]),
              attach=jnp.array([0.0, 0.3, 0.27]), origin=jnp.zeros(2), gravity=jnp.array(9.81),
              parent=(-1, 0, 1), names=("upper", "fore", "hand"))  # fmt: skip
    kw.update(changes)
    return kw


# ------------------------------------------------------------------ item 10


@pytest.mark.parametrize("change, match", [
    (dict(mass=jnp.array([2.0, 1.2])), r"mass must have shape \(3,\) \(one value per segment\), got shape \(2,\)"),
    (dict(mass=jnp.array([2.0, -1.2, 0.5])), r"mass of segment 1 \('fore'\) must be > 0, got -1.2"),
    (dict(mass=jnp.array([2.0, 1.2, np.nan])), r"mass of segment 2 \('hand'\) is not finite: nan"),
    (dict(inertia=jnp.array([0.016, 0.0, 0.002])), r"inertia of segment 1 \('fore'\) must be > 0, got 0.0"),
    (dict(inertia=jnp.array([np.nan, 0.008, 0.002])), r"inertia of segment 0 \('upper'\) is not finite"),
    (dict(length=jnp.array([0.3, -0.27, 0.2])), r"length of segment 1 \('fore'\) must be >= 0"),
    (dict(com=jnp.array([0.13, 0.12, 0.1])), r"com must have shape \(3, 2\)"),
    (dict(com=jnp.array([[0.13, 0.0], [0.12, np.inf], [0.1, 0.0]])), r"com of segment 1 \('fore'\) is not finite"),
    (dict(attach=jnp.array([0.0, np.nan, 0.27])), r"attach of segment 1 \('fore'\) is not finite"),
    (dict(origin=jnp.zeros(3)), r"origin must have shape \(2,\)"),
    (dict(gravity=jnp.array(-9.81)), r"gravity is the magnitude g >= 0, a scalar \(m/s\^2; it acts along -y\), "
                                     r"got -9.81$"),
    # a vector (x, y) read as a stack of two models' g: the message said "got 0.0"
    (dict(gravity=jnp.array([0.0, -9.81])), r"got \[0.0, -9.81\] \(an array: one g per model of a stack\)"),
    (dict(mass=jnp.array([True, True, True])), "mass must be real numbers"),
])  # fmt: skip
def test_a_model_made_directly_checks_its_parameters(change, match):
    # Model(...) used a 2-value mass for 3 segments, negative and NaN masses and
    # inertias silently (only chain and tree checked them)
    with pytest.raises(ValueError, match=match):
        jaxmb.Model(**_fields(**change))


def test_a_model_made_directly_is_the_model_chain_makes():
    ok = jaxmb.Model(**_fields(mass=np.array([2.0, 1.2, 0.5]), inertia=[0.016, 0.008, 0.002]))
    assert all(isinstance(getattr(ok, f), jax.Array) for f in ("mass", "inertia"))  # converted
    ref = jaxmb.chain([0.3, 0.27, 0.2], [0.13, 0.12, 0.1], [2.0, 1.2, 0.5], [0.016, 0.008, 0.002])
    q = np.array([0.3, -0.5, 0.8])
    np.testing.assert_allclose(jaxmb.inverse_dynamics(ok, q, q, q), jaxmb.inverse_dynamics(ref, q, q, q), rtol=1e-12)


def test_models_made_by_jax_are_not_checked():
    # gradients, tangents, tree_map and traced models have any values: JAX's
    # unflattening bypasses the constructor's checks
    m = jaxmb.chain(**ARM)
    q = np.array([0.3, 0.4])
    g = jax.grad(lambda m_: jaxmb.inverse_dynamics(m_, q, q, q, gradient="autodiff")[1])(m)
    assert isinstance(g, jaxmb.Model) and float(g.mass[0]) == 0.0  # the elbow moment: no upper-arm mass
    neg = jax.tree_util.tree_map(lambda x: -x, m)
    assert float(neg.mass[0]) == -2.0
    zeros = jax.tree_util.tree_map(jnp.zeros_like, m)
    assert float(zeros.inertia[1]) == 0.0
    made = jax.jit(lambda mass: jaxmb.Model(**{**_fields(), "mass": mass}).mass.sum())(jnp.array([-1.0, 1.0, 1.0]))
    assert float(made) == 1.0  # traced fields: values unknown, not checked
    stacked = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), m, m)
    assert stacked.mass.shape == (2, 2)
    # a model the library derives (massless, no gravity) is not refused either
    Y, y0 = identify.regressor(m, q, q, q, np.zeros((2, 3)), quantity="joint_moments")
    assert np.all(np.asarray(y0) == 0)


def test_from_physical_refuses_a_negative_mass_through_model():
    m = jaxmb.chain(**ARM)
    phys = np.asarray(identify.to_physical(m)).copy()
    phys[1, 0] = -1.0
    with pytest.raises(ValueError, match=r"mass of segment 1 \('segment1'\) must be > 0, got -1.0"):
        identify.from_physical(m, phys)


# ------------------------------------------------------------------ item 11


def test_parameters_are_checked_in_float32_where_jax_computes_in_it():
    # chain checked 1e39 in float64 and stored inf; 1e-46 became 0.0 and passed "> 0"
    with jax.enable_x64(False):
        with pytest.raises(ValueError, match=r"mass of segment 0 \('segment0'\) is 1e\+39 kg, beyond the range "
                                             r"of float32 \(\+-3.4e\+38\)"):  # fmt: skip
            jaxmb.chain(ARM["length"], ARM["com"], [1e39, 1.2], ARM["inertia"])
        with pytest.raises(ValueError, match=r"inertia of segment 1 \('segment1'\) is 1e-46 kg m\^2, below the "
                                             "smallest normal float32"):  # fmt: skip
            jaxmb.chain(ARM["length"], ARM["com"], ARM["mass"], [0.016, 1e-46])
        m32 = jaxmb.chain(**ARM)
        assert m32.mass.dtype == np.float32
    # float64 (as the tests run): the same values hold
    big = jaxmb.chain(ARM["length"], ARM["com"], [1e39, 1.2], ARM["inertia"])
    assert float(big.mass[0]) == 1e39
    # ... until cast to float32: by astype, or by float32 inputs in the compiled call
    with pytest.raises(ValueError, match=r"mass of segment 0 \('segment0'\) is 1e\+39 kg, beyond the range of float32"):
        big.astype(np.float32)
    q32 = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match=r"mass of segment 0 .* beyond the range of float32"):
        jaxmb.inverse_dynamics(big, q32, q32, q32)
    tiny = jaxmb.chain(ARM["length"], ARM["com"], ARM["mass"], [0.016, 1e-46])
    with pytest.raises(ValueError, match=r"inertia of segment 1 .* below the smallest normal float32"):
        jaxmb.mass_matrix(tiny, q32)
    # a float64 model whose values float32 holds works with float32 inputs
    ok = jaxmb.chain(**ARM)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert jaxmb.inverse_dynamics(ok, q32, q32, q32).dtype == np.float32


def test_inputs_beyond_float32_are_refused_naming_the_argument():
    # a velocity of 1e39 became inf in JAX's float32 and inverse dynamics returned NaN
    with jax.enable_x64(False):
        m = jaxmb.chain(**ARM)
        z = np.zeros(2)
        with pytest.raises(ValueError, match=r"qd is 1e\+39 at index 1, beyond the range of float32 .* "
                                             "64-bit mode is off"):  # fmt: skip
            jaxmb.inverse_dynamics(m, z, np.array([0.0, 1e39]), z)
        with pytest.raises(ValueError, match=r"qdd is -2e\+39 at index \(1, 0\), beyond the range of float32"):
            jaxmb.inverse_dynamics(m, z, z, [[0.0, 0.0], [-2e39, 0.0]])
        with pytest.raises(ValueError, match=r"loads is 1e\+40 at index \(1, 1\)"):
            jaxmb.inverse_dynamics(m, z, z, z, [[0.0, 0.0, 0.0], [0.0, 1e40, 0.0]])
        with pytest.raises(ValueError, match=r"qd is 1e\+39 at index 0"):
            jaxmb.kinetic_energy(m, z, [1e39, 0.0])
        # values float32 holds: a finite answer, equal to float64's to float32 rounding
        qd = np.array([3.0, -2.0])
        tau32 = np.asarray(jaxmb.inverse_dynamics(m, z + 0.3, qd, z))
        assert tau32.dtype == np.float32
    tau64 = jaxmb.inverse_dynamics(jaxmb.chain(**ARM), z + 0.3, qd, z)
    np.testing.assert_allclose(tau32, tau64, rtol=1e-5)


def test_long_double_inputs_are_converted():
    # np.longdouble q raised a raw JAX TypeError ("Error interpreting argument")
    m = jaxmb.chain(**ARM)
    q, qd, qdd = np.array([0.3, -0.4]), np.array([1.0, 2.0]), np.array([-3.0, 0.5])
    ref = np.asarray(jaxmb.inverse_dynamics(m, q, qd, qdd))
    got = jaxmb.inverse_dynamics(m, q.astype(np.longdouble), qd, qdd.astype(np.longdouble))
    np.testing.assert_allclose(got, ref, rtol=1e-14)
    np.testing.assert_allclose(jaxmb.pose(m, q.astype(np.longdouble)), jaxmb.pose(m, q), rtol=1e-14)
    if np.finfo(np.longdouble).max > np.finfo(np.float64).max:  # x86: 80-bit long double
        with pytest.raises(ValueError, match=r"qd is 1e\+400 at index 0, beyond the range of float64"):
            jaxmb.inverse_dynamics(m, q, np.array([np.longdouble("1e400"), 0.0]), qdd)


# ------------------------------------------------------------------- item 8


def test_optimize_asks_which_two_numbers_a_two_link_arm_gets():
    # hand positions (m) were read as joint angles (the default target="joint") and
    # the "optimal" movement between those postures reported converged
    arm = jaxmb.two_link_arm(gravity=0.0)
    with pytest.raises(ValueError, match=r"target is required for a model of two coordinates \(dof=2\)"):
        jaxmb.optimize(arm, [0.1, 0.45], [0.3, 0.30], 0.6, cost="torque_change")
    with pytest.raises(ValueError, match="target is required"):  # a batch as well
        jaxmb.optimize(arm, np.zeros((4, 2)), [0.3, 0.30], 0.6)
    with pytest.raises(ValueError, match="target must be 'joint'"):
        jaxmb.optimize(arm, [0.1, 0.45], [0.3, 0.30], 0.6, target="hands")


def test_optimize_without_target_elsewhere_reads_coordinates_and_names_the_hand():
    # any other model: the shape tells the readings apart (hand positions are 2
    # numbers), so None is "joint"; 2 numbers for 3 coordinates name target="hand"
    arm3 = jaxmb.chain([0.3, 0.28, 0.1], [0.13, 0.12, 0.05], [2.0, 1.2, 0.4], [0.02, 0.01, 0.001], gravity=0.0)
    with pytest.raises(ValueError, match=r"start must have shape \(3,\) .* with target='joint': coordinates \(dof=3\), "
                                         r"got shape \(2,\) \(give target='hand' for \(x, y\) hand positions\)"):
        jaxmb.optimize(arm3, [0.1, 0.45], [0.3, 0.30], 0.6)
    with pytest.raises(ValueError, match=r"start must have shape \(2,\) .* with target='hand'"):
        jaxmb.optimize(arm3, [0.1, 0.45, 0.2], [0.3, 0.30], 0.6, target="hand")


# ------------------------------------------------------------------- item 9


@functools.lru_cache(maxsize=1)
def _pushed_leg():
    """A three-link chain pushed at a world point on its last segment (a centre of
    pressure moving along it): its true moments and reactions with that force
    (cached: every fit below has the same data shapes and kinds, so one compiled fit
    serves them all)."""
    rng = np.random.default_rng(5)
    true = jaxmb.chain([0.45, 0.42, 0.2], np.array([[0.19, 0.01], [0.18, -0.01], [0.07, 0.01]]), [7.0, 3.2, 1.1],
                       [0.12, 0.05, 0.004], names=["thigh", "shank", "foot"])  # fmt: skip
    T = 60
    q = rng.uniform(-np.pi, np.pi, (T, 3))
    qd, qdd = 2.0 * rng.standard_normal((T, 3)), 5.0 * rng.standard_normal((T, 3))
    along = rng.uniform(0.02, 0.18, T)  # the point on the foot, m from its joint
    point = np.asarray(jax.vmap(lambda a, s: jaxmb.point_position(true, a, "foot", jnp.stack([s, 0.0 * s])))(q, along))
    force = np.stack([rng.normal(0, 40, T), rng.uniform(200, 800, T)], 1)
    loads = np.asarray(jaxmb.point_load(true, q, "foot", point, force))  # for the true model only
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd, loads))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd, loads))
    return true, (q, qd, qdd), point, force, loads, mom, rea


def test_fit_refuses_wrenches_made_for_another_model():
    # running_trial()'s loads (for the true model) given with another starting model
    # "converged" to thigh inertia -100 % and shank +325 %, without an error
    true, states, point, force, loads, mom, rea = _pushed_leg()
    start = perturbed(true, 0.3, seed=1)
    with pytest.raises(ValueError, match=r"loads as an array of wrenches at the centres of mass belong to the "
                                         r"model they were made for .*PointForce\(segment, point, force\)"):
        identify.fit(start, *states, moments=mom, reactions=rea, loads=loads)
    # pure moments (no force) belong to no model and are accepted
    free_moment = np.zeros_like(loads)
    free_moment[:, 2, 2] = 3.0
    ok = identify.fit(start, *states, moments=np.asarray(jaxmb.joint_moments(true, *states, free_moment)),
                      reactions=np.asarray(jaxmb.joint_reactions(true, *states, free_moment)), loads=free_moment)
    np.testing.assert_allclose(ok.parameters, identify.to_parameters(true), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("how", ["point_force", "function"])
def test_fit_builds_the_wrenches_for_the_model_it_fits(how):
    # the force and its point (or a function of the model): the same data fit from a
    # start 30 % off recover the true parameters
    true, states, point, force, loads, mom, rea = _pushed_leg()
    start = perturbed(true, 0.3, seed=1)
    given = (identify.PointForce("foot", point, force) if how == "point_force" else
             lambda m: jaxmb.point_load(m, states[0], "foot", point, force))  # fmt: skip
    res = identify.fit(start, *states, moments=mom, reactions=rea, loads=given)
    assert res.converged, res.status
    np.testing.assert_allclose(res.physical, identify.to_physical(true), rtol=1e-7, atol=1e-9)
    # the wrenches it built are those of the starting model, not of the true one
    wrench = identify.PointForce("foot", point, force).loads(start, states[0])
    np.testing.assert_allclose(wrench, jaxmb.point_load(start, states[0], "foot", point, force), rtol=1e-14)
    assert np.abs(wrench - loads).max() > 1.0


def test_fit_without_the_loads_that_act_warns_that_it_explains_little():
    # the README's fit with loads= left out "converged" to a 42 kg thigh with no word;
    # with them, no warning
    true, states, point, force, loads, mom, rea = _pushed_leg()
    start = perturbed(true, 0.3, seed=1)
    with pytest.warns(UserWarning) as caught:
        identify.fit(start, *states, moments=mom, reactions=rea)
    texts = [str(w.message) for w in caught]
    for kind in ("moments", "reactions"):
        assert any(re.match(rf"fit: the fitted model leaves .* RMS of the measured {kind} unexplained, \d+ % of "
                            r"their own RMS .* no loads were given", t) for t in texts), texts  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert identify.fit(start, *states, moments=mom, reactions=rea,
                            loads=identify.PointForce("foot", point, force)).converged  # fmt: skip


def test_point_force_checks_its_samples():
    true, states, point, force, loads, mom, rea = _pushed_leg()
    with pytest.raises(ValueError, match="do not broadcast"):
        identify.fit(true, *states, moments=mom, loads=identify.PointForce("foot", point[:10], force[:10]))
    with pytest.raises(ValueError, match="unknown segment name 'toe'"):
        identify.fit(true, *states, moments=mom, loads=identify.PointForce("toe", point, force))
    with pytest.raises(ValueError, match=r"loads\(model\) must have shape \(3, 3\) or \(\.\.\., 3, 3\)"):
        identify.fit(true, *states, moments=mom, loads=lambda m: np.zeros((60, 2, 3)))
    sel = identify.PointForce("foot", point, force).select(slice(0, 10))
    assert sel.point.shape == (10, 2) and sel.force.shape == (10, 2) and sel.moment == 0.0
