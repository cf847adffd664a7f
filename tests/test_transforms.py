"""JAX transformations of the core functions: grad, jit, vmap, dtypes, retracing, pytree.

The references here are independent of jaxmb's derivatives: central finite
differences (``jax.test_util.check_grads``), a plain Python loop (for vmap), eager
evaluation (for jit), and closed forms for parameter derivatives (the kinetic
energy is linear in masses and inertias; in absolute coordinates the generalized
force of a segment's angle is I_k alpha_k plus terms free of I_k; the potential
energy moves with the origin as g times the total mass).

The fixtures are written here (not shared) so that this file stands alone.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import jaxmb as mb

# Central differences in float64: truncation ~ EPS^2 * f''' ~ 1e-10 and round-off
# ~ 1e-16 / EPS ~ 1e-11 for these O(1) models, so 1e-6 leaves a wide margin while a
# wrong derivative (an error of O(1) in some entry) still fails by orders of magnitude.
EPS = 1e-5
GRAD_TOL = 1e-6
# jit vs eager, vmap vs loop: the same float64 arithmetic, possibly reordered or
# fused by XLA; round-off of a few ulps amplified at most by the Cholesky solve.
SAME_TOL = 1e-10
# float32 result vs float64 result: float32 has ~6e-8 relative precision, amplified
# by the O(10) condition number of the mass matrices of these fixtures.
F32_TOL = 1e-3


# ------------------------------------------------------------------ fixtures


def arm():
    """Fixed base, relative coordinates: a three-segment arm with off-axis centres of mass."""
    return mb.chain(
        [0.30, 0.27, 0.19],
        [[0.13, 0.010], [0.12, -0.008], [0.07, 0.004]],
        [2.0, 1.3, 0.5],
        [0.021, 0.0093, 0.0014],
        gravity=9.81,
        origin=(0.10, 1.40),
        names=("upper_arm", "forearm", "hand"),
    )


def branched():
    """Floating base, absolute coordinates: a tree with a child attached mid-parent."""
    return mb.tree(
        (-1, 0, 0, 2),
        [0.50, 0.45, 0.42, 0.40],
        [[0.25, 0.02], [0.20, 0.0], [0.18, -0.01], [0.17, 0.0]],
        [30.0, 7.0, 5.0, 3.5],
        [1.2, 0.10, 0.08, 0.05],
        attach=[0.0, 0.50, 0.30, 0.42],
        gravity=9.81,
        base="floating",
        coordinates="absolute",
        names=("trunk", "arm", "thigh", "shank"),
    )




def state(model, seed=0):
    """Random (q, qd, qdd, loads) of moderate size, fixed seed."""
    rng = np.random.default_rng(seed)
    q, qd, qdd = (rng.uniform(-1.0, 1.0, model.dof) for _ in range(3))
    loads = rng.normal(0.0, 5.0, (model.segments, 3))
    return q, qd, qdd, loads


# Every function as f(model, q, qd, x, loads); x is qdd or tau.
FUNCS = {
    # forward and reverse mode are both checked: plain JAX differentiation (the default
    # hand-derived adjoint is reverse mode only; tests/test_batch.py,
    # tests/test_reactions.py and, for forward dynamics, tests/test_aba.py check it)
    "inverse_dynamics_recursive": lambda m, q, qd, x, l: mb.inverse_dynamics(
        m, q, qd, x, l, method="recursive", gradient="autodiff"),
    "inverse_dynamics_projection": lambda m, q, qd, x, l: mb.inverse_dynamics(m, q, qd, x, l, method="projection"),
    "forward_dynamics": lambda m, q, qd, x, l: mb.forward_dynamics(m, q, qd, x, l, gradient="autodiff"),
    "joint_reactions_projection": lambda m, q, qd, x, l: mb.joint_reactions(m, q, qd, x, l, method="projection"),
    "joint_reactions_recursive": lambda m, q, qd, x, l: mb.joint_reactions(
        m, q, qd, x, l, method="recursive", gradient="autodiff"),
    "mass_matrix": lambda m, q, qd, x, l: mb.mass_matrix(m, q),
    "kinetic_energy": lambda m, q, qd, x, l: mb.kinetic_energy(m, q, qd),
    # the dynamics do not depend on segment lengths (only on attach) nor, by
    # translation invariance, on the origin: these two make those leaves count
    "distal_positions": lambda m, q, qd, x, l: mb.distal_positions(m, q),
    "pose": lambda m, q, qd, x, l: mb.pose(m, q),
}
PARAMS = ("length", "com", "mass", "inertia", "attach", "origin", "gravity")

# Cost note: eager evaluation compiles every primitive once per shape, and that
# warm-up dominates this file; the gradient checks therefore all use one model (one
# set of shapes) and run eagerly, which shares it.


def _scaled(model):
    """A function of a Model-shaped perturbation delta: p = p0 + (|p0| + 0.01) delta.

    check_grads draws unit tangents: added as they are, a step EPS would move a
    small inertia (the arm's hand, 0.0014 kg m^2) by 0.7 %, where qdd ~ 1/I curves
    enough to spoil the central difference (seen: 2e-6 relative error). Scaling each
    entry by its own size keeps every step relative (1e-2 absolute for zero entries).
    Returns (f, zero): f(delta) -> Model, and the zero perturbation (a Model pytree).
    """
    scale = jax.tree_util.tree_map(lambda p: jnp.abs(p) + 1e-2, model)
    zero = jax.tree_util.tree_map(jnp.zeros_like, model)
    return (lambda delta: jax.tree_util.tree_map(lambda p, s, d: p + s * d, model, scale, delta)), zero


def _check(f, args, order=1):
    check_grads(f, args, order=order, modes=("fwd", "rev"), atol=GRAD_TOL, rtol=GRAD_TOL, eps=EPS)


# ------------------------------------------------------------------ gradients


@pytest.mark.parametrize("func", FUNCS)
def test_grads_wrt_inputs(func):
    """d/d(q, qd, qdd or tau, loads) by forward and reverse mode match central differences.

    On the floating-base, absolute-coordinate tree (base translations in q, a
    child attached mid-parent).
    """
    model = branched()
    f = FUNCS[func]
    _check(lambda q, qd, x, loads: f(model, q, qd, x, loads), state(model))


@pytest.mark.parametrize("func", FUNCS)
def test_grads_wrt_model_pytree(func):
    """d/d(all seven parameter leaves at once, a random direction) match central differences.

    distal_positions and pose make the lengths count (the dynamics use attach, not
    length); the origin, unused by a floating base, is checked on the arm below.
    """
    model = branched()
    q, qd, x, loads = state(model, seed=1)
    at, zero = _scaled(model)
    _check(lambda delta: FUNCS[func](at(delta), q, qd, x, loads), (zero,))


def test_grads_wrt_model_pytree_fixed_base():
    """On the fixed-base arm, where the origin moves the pose and the potential energy."""
    model = arm()
    q, qd, x, loads = state(model, seed=7)
    at, zero = _scaled(model)

    def f(delta):
        m = at(delta)
        return jnp.concatenate(
            [
                mb.pose(m, q).ravel(),
                mb.potential_energy(m, q)[None],
                mb.inverse_dynamics(m, q, qd, x, loads, gradient="autodiff"),
            ]
        )

    _check(f, (zero,))
    g = jax.grad(lambda m: mb.potential_energy(m, q))(model)
    # V = g sum m_i y_i, and every y_i moves with the origin's y: dV/d origin = (0, g sum m)
    np.testing.assert_allclose(g.origin, [0.0, 9.81 * float(model.mass.sum())], rtol=1e-12, atol=1e-12)


def test_second_order_grads_wrt_q():
    """Second derivatives in q (fwd-over-fwd, rev-over-fwd, ...) of the recursive pass.

    Joint moments and reactions together; only q (where the trigonometry is) and
    only the recursive path: eager second-order checks of the nested projection
    derivatives cost seconds each.
    """
    model = branched()
    q, qd, x, loads = state(model, seed=6)

    def f(q):
        tau, F, T = mb.joint_loads(model, q, qd, x, loads)
        return jnp.concatenate([tau, F.ravel(), T])

    _check(f, (q,), order=2)


def test_kinetic_energy_gradient_wrt_mass_and_inertia_closed_form():
    """T = 1/2 sum(m_i |v_i|^2 + I_i omega_i^2) is linear in m and I.

    dT/dm_i = |v_i|^2 / 2 and dT/dI_i = omega_i^2 / 2; in absolute coordinates
    omega_i is the segment's own rate qd[2 + i] (independent of jaxmb's derivatives).
    """
    model = branched()
    q, qd, _, _ = state(model, seed=3)
    g = jax.jit(jax.grad(lambda m: mb.kinetic_energy(m, q, qd)))(model)  # one compiled program
    assert isinstance(g, mb.Model)  # the cotangent has the model's structure
    omega = qd[2:]
    v = np.asarray(mb.pose_velocity(model, q, qd))[:, :2]
    np.testing.assert_allclose(g.inertia, 0.5 * omega**2, rtol=1e-12)
    np.testing.assert_allclose(g.mass, 0.5 * (v**2).sum(1), rtol=1e-12)
    # T does not depend on lengths (only on attach), origin or gravity
    np.testing.assert_array_equal(g.length, 0.0)
    np.testing.assert_array_equal(g.origin, 0.0)
    assert g.gravity == 0.0


def test_generalized_force_jacobian_wrt_inertia_closed_form():
    """Absolute coordinates: Q_(2+k) = I_k alpha_k + (terms free of I), alpha_k = qdd[2 + k].

    So dQ/dI is zero in the two base rows and diag(qdd[2:]) below, through
    model.replace on traced inertias, for both methods.
    """
    model = branched()
    q, qd, qdd, loads = state(model, seed=4)
    expected = np.vstack([np.zeros((2, 4)), np.diag(qdd[2:])])
    for method in ("recursive", "projection"):
        # under jit: one compiled program; eagerly, the reverse mode compiled its forward
        # pass and its transpose apart and the steps around them one by one (measured
        # alone: 145 compiles, 29 s of XLA, against 76 and 14 s)
        J = jax.jit(jax.jacrev(
            lambda inertia: mb.inverse_dynamics(model.replace(inertia=inertia), q, qd, qdd, loads, method=method)  # noqa: B023
        ))(model.inertia)  # fmt: skip
        np.testing.assert_allclose(J, expected, rtol=1e-12, atol=1e-12, err_msg=method)


# ------------------------------------------------------------------ jit


def test_jit_matches_eager_and_takes_model_as_argument():
    """jit(f)(model, ...) with the model as a traced argument equals the eager result."""
    model = branched()
    args = state(model, seed=5)
    for name in ("inverse_dynamics_recursive", "inverse_dynamics_projection", "forward_dynamics",
                 "joint_reactions_projection", "mass_matrix", "kinetic_energy", "pose"):
        f = FUNCS[name]
        eager = f(model, *args)
        jitted = jax.jit(f)(model, *args)
        np.testing.assert_allclose(jitted, eager, rtol=SAME_TOL, atol=SAME_TOL, err_msg=name)


def test_model_is_returned_from_jit():
    """A model can be an output of a jitted function (replace works on traced leaves)."""
    model = arm()
    doubled = jax.jit(lambda m: m.replace(mass=2.0 * m.mass))(model)
    assert isinstance(doubled, mb.Model)
    assert doubled.parent == model.parent and doubled.names == model.names
    np.testing.assert_allclose(doubled.mass, 2.0 * np.asarray(model.mass))
    np.testing.assert_array_equal(doubled.inertia, model.inertia)


def test_jit_does_not_retrace_for_new_parameter_values_but_does_for_new_topology():
    """Parameters are traced leaves, topology is static: count traces with a side effect."""
    traces = []

    @jax.jit
    def f(model, q, qd, qdd):
        traces.append(model.parent)  # runs only while tracing
        return mb.inverse_dynamics(model, q, qd, qdd)

    model = arm()
    z = jnp.zeros(3)
    outs = [f(model, z, z, z)]
    assert len(traces) == 1
    same_topology = [
        model.replace(mass=[2.5, 1.0, 0.4]),
        model.replace(length=[0.31, 0.28, 0.20]),
        model.replace(gravity=1.62),
        model.replace(com=[[0.1, 0.0], [0.1, 0.0], [0.05, 0.0]], inertia=[0.03, 0.01, 0.002]),
        model.replace(origin=(0.3, 0.1)),
        # a new model, built from scratch, with the same topology and names
        mb.chain([0.4, 0.3, 0.2], [0.2, 0.15, 0.1], [3.0, 2.0, 1.0], [0.05, 0.02, 0.01],
                 gravity=9.0, origin=(1.0, 2.0), names=("upper_arm", "forearm", "hand")),
    ]
    for m in same_topology:
        outs.append(f(m, z, z, z))
    assert len(traces) == 1, f"re-traced {len(traces) - 1} times for new parameter values"
    # and the new values were used: the gravity moments at q = 0 change (the lengths
    # too: the chain's joints sit at the parents' distal ends), except the origin
    for k, o in enumerate(outs[1:]):
        changed = not np.allclose(o, outs[0], rtol=1e-12, atol=0.0)
        assert changed == (k != 4), k

    # explicit joint distances: detaching the joints from the parents' ends is a
    # structural change (one trace); new distances after that are values (none)
    explicit = model.replace(attach=[0.0, 0.3, 0.25])
    o1 = f(explicit, z, z, z)
    assert len(traces) == 2
    o2 = f(explicit.replace(attach=[0.0, 0.25, 0.3]), z, z, z)
    assert len(traces) == 2
    assert not np.allclose(o1, o2, rtol=1e-12, atol=0.0)

    branched_model = mb.tree((-1, 0, 0), [0.3, 0.3, 0.3], 0.15, 1.0, 0.01)
    f(branched_model, z, z, z)
    assert len(traces) == 3
    f(model.replace(coordinates="absolute"), z, z, z)
    assert len(traces) == 4
    floating = model.replace(base="floating")
    zf = jnp.zeros(floating.dof)
    f(floating, zf, zf, zf)
    assert len(traces) == 5


# ------------------------------------------------------------------ vmap


# The four functions of the brief, both methods where there are two.
VMAPPED = ("inverse_dynamics_recursive", "inverse_dynamics_projection", "forward_dynamics",
           "joint_reactions_projection", "joint_reactions_recursive", "mass_matrix")


def test_vmap_over_samples_equals_loop():
    """vmap over a batch of (q, qd, qdd or tau, loads) equals a Python loop of single calls.

    The batched version is jitted (as users run it; eager vmap re-traces every call);
    the loop calls the eager single-sample function.
    """
    model = branched()
    batch = [state(model, seed=10 + b) for b in range(3)]
    Q, QD, X, L = (jnp.stack([s[k] for s in batch]) for k in range(4))
    for name in VMAPPED:
        f = FUNCS[name]
        vm = jax.jit(jax.vmap(lambda q, qd, x, loads: f(model, q, qd, x, loads)))(Q, QD, X, L)
        loop = np.stack([np.asarray(f(model, *s)) for s in batch])
        assert vm.shape == loop.shape, name
        np.testing.assert_allclose(vm, loop, rtol=SAME_TOL, atol=SAME_TOL, err_msg=name)


def test_vmap_over_model_parameters_equals_loop():
    """vmap over a batch of models (stacked leaves) equals a loop over the models."""
    model = branched()
    q, qd, qdd, loads = state(model, seed=20)
    masses = jnp.array([[30.0, 7.0, 5.0, 3.5], [25.0, 6.0, 8.0, 4.0], [40.0, 9.0, 4.0, 3.0]])
    gravities = jnp.array([9.81, 1.62, 3.71])
    models = jax.vmap(lambda m, g: model.replace(mass=m, gravity=g))(masses, gravities)
    vm = jax.vmap(lambda m: mb.inverse_dynamics(m, q, qd, qdd, loads))(models)
    loop = np.stack(
        [np.asarray(mb.inverse_dynamics(model.replace(mass=m, gravity=g), q, qd, qdd, loads))
         for m, g in zip(masses, gravities)]
    )
    np.testing.assert_allclose(vm, loop, rtol=SAME_TOL, atol=SAME_TOL)


# ------------------------------------------------------------------ dtypes


DTYPE_FUNCS = {
    **FUNCS,
    "joint_reactions_segment_frame": lambda m, q, qd, x, l: mb.joint_reactions(m, q, qd, x, l, frame="segment"),
    "joint_moments": lambda m, q, qd, x, l: mb.joint_moments(m, q, qd, x, l),
    "bias_forces": lambda m, q, qd, x, l: mb.bias_forces(m, q, qd),
    "gravity_forces": lambda m, q, qd, x, l: mb.gravity_forces(m, q),
    "external_forces": lambda m, q, qd, x, l: mb.external_forces(m, q, l),
    "potential_energy": lambda m, q, qd, x, l: mb.potential_energy(m, q),
    "point_position": lambda m, q, qd, x, l: mb.point_position(m, q, 1, jnp.asarray([0.1, 0.0], q.dtype)),
    "point_load": lambda m, q, qd, x, l: mb.point_load(
        m, q, 1, jnp.asarray([0.1, 0.0], q.dtype), jnp.asarray([1.0, 2.0], q.dtype)
    ),
}


def test_output_dtype_follows_inputs_with_a_float64_model():
    """With x64 on and float64 parameters, float32 inputs give float32 outputs; 64 stays 64.

    The dtypes come from jax.eval_shape (the same trace as an eager call, without
    running it); a few functions are also run to compare the float32 numbers.
    """
    assert jax.config.jax_enable_x64
    model = branched()
    assert model.mass.dtype == jnp.float64
    args64 = tuple(jnp.asarray(a) for a in state(model, seed=30))
    args32 = tuple(a.astype(jnp.float32) for a in args64)
    for name, f in DTYPE_FUNCS.items():
        for args, dtype in ((args64, jnp.float64), (args32, jnp.float32)):
            out = jax.eval_shape(lambda *a: f(model, *a), *args)
            assert out.dtype == dtype, f"{name}: {out.dtype} for {dtype.__name__} inputs"
    for name in ("inverse_dynamics_recursive",):  # eager float32 compiles anew: one is enough
        f = DTYPE_FUNCS[name]
        out64 = f(model, *args64)
        out32 = f(model, *args32)
        assert (out64.dtype, out32.dtype) == (jnp.float64, jnp.float32), name
        # the same numbers to float32 precision (not a silently different computation)
        scale = float(jnp.max(jnp.abs(out64))) + 1.0
        np.testing.assert_allclose(out32, out64, atol=F32_TOL * scale, err_msg=name)


def test_float32_model_with_float32_inputs_stays_float32_under_jit():
    """A model cast with astype(float32) and float32 inputs give float32 through jit and grad."""
    model = branched().astype(jnp.float32)
    q, qd, qdd, loads = (jnp.asarray(a, jnp.float32) for a in state(model, seed=31))
    tau = jax.jit(mb.inverse_dynamics)(model, q, qd, qdd, loads)
    assert tau.dtype == jnp.float32
    g = jax.jit(jax.grad(lambda m: mb.inverse_dynamics(m, q, qd, qdd, loads).sum()))(model)  # one compiled program
    assert all(leaf.dtype == jnp.float32 for leaf in jax.tree_util.tree_leaves(g))


def test_coordinate_maps_return_floats_also_when_nothing_converts():
    """Integer input to coordinates_to / forces_to gives a float array for either target
    kind: converting to the model's own kind (the identity) promotes like the other."""
    model = branched()
    x = np.arange(model.dof)  # integers
    for kind in ("relative", "absolute"):
        for f in (mb.coordinates_to, mb.forces_to):
            out = f(model, x, kind)
            assert out.dtype == jnp.float64, (f.__name__, kind, out.dtype)
        np.testing.assert_array_equal(mb.coordinates_to(model, x, model.coordinates), x)


# ------------------------------------------------------------------ pytree


def test_model_is_a_pytree_of_its_seven_parameter_arrays():
    model = branched()
    leaves, treedef = jax.tree_util.tree_flatten(model)
    assert len(leaves) == 7
    n = model.segments
    expected_shapes = [(n,), (n, 2), (n,), (n,), (n,), (2,), ()]
    for leaf, name, shape in zip(leaves, PARAMS, expected_shapes):
        assert leaf is getattr(model, name), name
        assert leaf.shape == shape, name
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert isinstance(back, mb.Model)
    for name in ("parent", "names", "base", "coordinates"):
        assert getattr(back, name) == getattr(model, name)
    for name in PARAMS:
        assert getattr(back, name) is getattr(model, name)
    # topology lives in the treedef: same topology, same treedef; other topology, other treedef
    assert jax.tree_util.tree_structure(model.replace(mass=[1.0, 2.0, 3.0, 4.0])) == treedef
    assert jax.tree_util.tree_structure(arm()) != treedef
    # tree_map keeps the static fields
    scaled = jax.tree_util.tree_map(lambda x: 2 * x, model)
    assert scaled.parent == model.parent and scaled.base == "floating"
    np.testing.assert_allclose(scaled.mass, 2 * np.asarray(model.mass))
