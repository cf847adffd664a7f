"""The articulated-body forward dynamics (jaxmb._engine.aba._aba_rows) against a dense
solve of the mass matrix and bias, for every tree/base/coordinate kind, with loads,
in each of its forms (one fused expression, and materialised every k-th segment)."""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb
from jaxmb import _engine
from jaxmb._engine import aba, layout, rules
from random_models import CONFIG_PARAMS, random_model, random_state

# float64 round-off of an O(n) recursion on well-conditioned human-like models
# (measured: at most about 1e-12 relative): 1e-10 leaves a wide margin.
RTOL = 1e-10


def _dense(model, q, qd, tau, loads):
    """qdd = M^-1 (tau - C - G - E) by numpy.linalg.solve, sample by sample."""
    M = np.asarray(jaxmb.mass_matrix(model, q))
    h = np.asarray(jaxmb.inverse_dynamics(model, q, qd, np.zeros_like(q), loads))  # C + G + E
    return np.linalg.solve(M, (tau - h)[..., None])[..., 0]


# by default every n (the public function's three forms: fused, cut 1, cut 3) for the
# richest configuration and the longest for the simplest one; the rest with --slow
# (tree-floating-absolute-12 is slow: n = 12's form is covered by chain-fixed-relative-12,
# the richest configuration by tree-floating-absolute-1 and -6)
_DEFAULT_ABA = {("tree-floating-absolute", 1), ("tree-floating-absolute", 6), ("chain-fixed-relative", 12)}


@pytest.mark.parametrize("tree,base,coordinates,n", [
    pytest.param(*p.values, n, id=f"{p.id}-{n}", marks=() if (p.id, n) in _DEFAULT_ABA else pytest.mark.slow)
    for p in CONFIG_PARAMS for n in (1, 6, 12)
])  # fmt: skip
def test_aba_matches_the_mass_matrix_solve(tree, base, coordinates, n):
    rng = np.random.default_rng(60 + n)
    model = random_model(rng, n, tree=tree, base=base, coordinates=coordinates)
    states = [random_state(rng, model) for _ in range(16)]
    q, qd, _, loads = (np.stack([s[k] for s in states]) for k in range(4))
    tau = 30.0 * rng.standard_normal(q.shape)
    ref = _dense(model, q, qd, tau, loads)
    m = layout._Params(model, *rules._model_params(model))
    args = [jnp.asarray(x.T) for x in (q, qd, tau)] + [jnp.asarray(np.moveaxis(loads, 0, -1))]
    for cut in (0, 1, 3):
        rows = aba._aba_rows(m, *args, cut)
        got = np.stack([np.broadcast_to(np.asarray(r), (len(q),)) for r in rows], 1)
        err = np.abs(got - ref).max() / np.abs(ref).max()
        assert err < RTOL, (cut, err)
    # the public function (whichever form it picks for n), shared loads too
    np.testing.assert_allclose(jaxmb.forward_dynamics(model, q, qd, tau, loads), ref,
                               rtol=RTOL, atol=RTOL * np.abs(ref).max())
    ref_shared = _dense(model, q, qd, tau, loads[0])
    np.testing.assert_allclose(jaxmb.forward_dynamics(model, q, qd, tau, loads[0]), ref_shared,
                               rtol=RTOL, atol=RTOL * np.abs(ref_shared).max())


def test_aba_float32_stays_finite_near_singular():
    # a chain whose distal segments are 1e-6 as heavy as its root: the mass matrix is
    # positive definite but far beyond float32's resolution, so rounding can make
    # articulated pivots non-positive; the floor (each segment's own inertia about
    # its joint, an exact lower bound) keeps every result finite.
    n = 10
    mass = np.logspace(0, -6, n)
    length = np.full(n, 0.4)
    com = np.stack([0.2 * length, np.zeros(n)], 1)
    model = jaxmb.chain(length, com, mass, mass * length**2 / 12)
    rng = np.random.default_rng(61)
    q = rng.uniform(-np.pi, np.pi, (512, n)).astype(np.float32)
    qd = (2 * rng.standard_normal((512, n))).astype(np.float32)
    tau = rng.standard_normal((512, n)).astype(np.float32)
    acc = jaxmb.forward_dynamics(model, q, qd, tau)
    assert acc.dtype == jnp.float32 and np.isfinite(np.asarray(acc)).all()


def _forward_case(seed, n, tree, base, coordinates, samples):
    """A random model, (samples, dof) q, qd, tau and (samples, segments, 3) loads."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, n, tree=tree, base=base, coordinates=coordinates)
    states = [random_state(rng, model) for _ in range(samples)]
    q, qd, _, loads = (jnp.asarray(np.stack([s[k] for s in states])) for k in range(4))
    return model, q, qd, jnp.asarray(5.0 * rng.standard_normal(q.shape)), loads, rng


@pytest.mark.parametrize("tree,base,coordinates,gradient", [
    pytest.param(*p.values, g, id=f"{p.id}-{g}",
                 marks=() if (p.id, g) == ("tree-floating-absolute", "adjoint") else pytest.mark.slow)
    for p in CONFIG_PARAMS for g in ("adjoint", "autodiff")
])  # fmt: skip
def test_forward_dynamics_model_derivatives(tree, base, coordinates, gradient):
    # By default the richest configuration with gradient="adjoint" (each compiles five
    # derivatives); the rest with --slow. "autodiff"'s forward mode and second orders
    # are covered by default in test_forward_dynamics_state_derivatives[autodiff],
    # its model-parameter gradient in test_forward_dynamics_gradient_of_every_model_parameter
    # and its agreement with the adjoint in test_forward_dynamics_adjoint_equals_autodiff.
    # "autodiff": the model's term of d qdd goes through a custom_linear_solve whose
    # transpose is the parameter adjoint (rules._params_tangent); "adjoint": a custom_vjp
    # calls the parameter adjoint itself (rules._forward_vjp). Reverse mode, forward mode
    # ("autodiff" only; "adjoint" must refuse it), forward over reverse and reverse
    # over reverse against central differences, with per-sample loads.
    import jax

    model, q, qd, tau, loads, _ = _forward_case(61, 3, tree, base, coordinates, 3)

    def loss(mass, gravity):
        m = model.replace(mass=mass, gravity=gravity)
        return jnp.sum(jnp.sin(jaxmb.forward_dynamics(m, q, qd, tau, loads, gradient=gradient)))

    # one compiled program (value and gradient in mass and gravity) serves the central
    # differences of the value and of the gradient and the first orders: a jitted
    # value, an eager grad of it and a jitted mass gradient compiled four programs
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
    f = lambda m, g: value_and_grad(m, g)[0]  # noqa: E731
    mass, g, eps = np.asarray(model.mass), np.asarray(model.gravity), 1e-6  # NumPy: no eager jnp steps
    dm, dg = value_and_grad(mass, g)[1]
    e = np.eye(len(mass))
    fd = np.array([(f(mass + eps * e[i], g) - f(mass - eps * e[i], g)) / (2 * eps) for i in range(len(mass))])
    np.testing.assert_allclose(dm, fd, rtol=1e-6, atol=1e-7 * np.abs(fd).max())
    np.testing.assert_allclose(dg, (f(mass, g + eps) - f(mass, g - eps)) / (2 * eps), rtol=1e-6)
    if gradient == "autodiff":
        t = jax.jit(lambda m: jax.jvp(lambda m: loss(m, g), (m,), (jnp.ones_like(m),))[1])(mass)
        np.testing.assert_allclose(t, fd.sum(), rtol=1e-6, atol=1e-7 * np.abs(fd).max())
    else:
        with pytest.raises(TypeError, match="forward-mode"):
            jax.jvp(lambda m: loss(m, g), (mass,), (jnp.ones_like(mass),))
    grad = lambda m: value_and_grad(m, g)[1][0]  # noqa: E731
    H_fd = np.stack([(np.asarray(grad(mass + eps * e[i])) - np.asarray(grad(mass - eps * e[i]))) / (2 * eps)
                     for i in range(len(mass))])  # fmt: skip
    # the second orders of a jitted mass gradient (never called itself, so never
    # compiled): those of the value-and-gradient program compiled for twice as long,
    # and jit(jacfwd) and jit(jacrev) longer than these (measured under load)
    grad_mass = jax.jit(jax.grad(lambda m: loss(m, g)))
    for H in (jax.jacfwd(grad_mass)(mass), jax.jacrev(grad_mass)(mass)):
        np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-6 * np.abs(H_fd).max())


@pytest.mark.parametrize("gradient", ["adjoint", "autodiff"])
def test_forward_dynamics_gradient_of_every_model_parameter(gradient):
    # Every leaf of the model (lengths, joint attachments, centres of mass, masses,
    # inertias, gravity), not only mass and gravity: jax.grad along a random direction
    # of each leaf against a central difference of the function itself. Both gradient
    # forms share the parameter adjoint for the model's term, so their agreement with
    # each other would not catch an error in it.
    import jax

    model, q, qd, tau, loads, rng = _forward_case(63, 4, True, "floating", "relative", 3)

    def loss(m):
        return jnp.sum(jnp.sin(jaxmb.forward_dynamics(m, q, qd, tau, loads, gradient=gradient)))

    # one compiled program for the value (the central differences) and the gradient
    # (a jitted value and an eager grad of it compiled three)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    f = lambda m: value_and_grad(m)[0]  # noqa: E731
    leaves, tree = jax.tree_util.tree_flatten(model)
    grads = jax.tree_util.tree_leaves(value_and_grad(model)[1])
    assert len(grads) == len(leaves)
    checked = 0
    for k, (leaf, g) in enumerate(zip(leaves, grads)):
        if not jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating):
            continue
        d = rng.standard_normal(np.shape(leaf))
        eps = 1e-6 * max(float(np.abs(leaf).max()), 1e-3)

        def at(t, k=k, d=d):
            moved = list(leaves)
            moved[k] = leaves[k] + t * d
            return f(jax.tree_util.tree_unflatten(tree, moved))

        fd = (at(eps) - at(-eps)) / (2 * eps)
        np.testing.assert_allclose(np.sum(np.asarray(g) * d), fd, rtol=1e-6, atol=1e-8, err_msg=str(k))
        checked += 1
    assert checked >= 5  # lengths or attachments, com, mass, inertia, gravity


@pytest.mark.parametrize("gradient", [
    # the adjoint's state derivatives with --slow: by default its reverse and second
    # orders are checked in test_forward_dynamics_model_derivatives[...-adjoint] and its
    # state cotangents against autodiff's in test_forward_dynamics_adjoint_equals_autodiff
    pytest.param("adjoint", marks=pytest.mark.slow),
    "autodiff",
])
def test_forward_dynamics_state_derivatives(gradient):
    # "autodiff": the state's term of d qdd (q, qd, loads) goes through a
    # custom_linear_solve (rules._tangent_split): forward mode by the unrolled kernel's
    # JVP, reverse mode by the matrix form's VJP, higher orders through the matrix
    # form's JVP; "adjoint": the custom_vjp's reverse mode of the matrix form. Each
    # against central differences (first order of the value, second order of the
    # gradient), on the floating-base absolute tree with per-sample loads.
    import jax

    model, q, qd, tau, loads, rng = _forward_case(62, 3, True, "floating", "absolute", 2)
    assert layout._plan(model, "auto", None, 2)[0] == "unrolled"  # the split applies

    def loss(q, qd, loads):
        return jnp.sum(jnp.sin(jaxmb.forward_dynamics(model, q, qd, tau, loads, gradient=gradient)))

    # one compiled program for the value (the central differences) and the gradients
    # (first and, differentiated by central differences, second order)
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    f = lambda *a: value_and_grad(*a)[0]  # noqa: E731
    grad_all = lambda *a: value_and_grad(*a)[1]  # noqa: E731
    eps = 1e-6
    args = tuple(np.asarray(a) for a in (q, qd, loads))  # NumPy: no eager jnp steps
    grads = grad_all(*args)
    dirs = [rng.standard_normal(a.shape) for a in args]
    # forward mode along a random direction in every input at once, and reverse mode
    # dotted with it, against a central difference
    cd = (f(*[a + eps * d for a, d in zip(args, dirs)]) - f(*[a - eps * d for a, d in zip(args, dirs)])) / (2 * eps)
    if gradient == "autodiff":
        t = jax.jit(lambda *d: jax.jvp(loss, args, d)[1])(*dirs)
        np.testing.assert_allclose(t, cd, rtol=1e-6)
    rev = sum(float(np.sum(np.asarray(g) * d)) for g, d in zip(grads, dirs))
    np.testing.assert_allclose(rev, cd, rtol=1e-6)
    # second order in q: forward over reverse (differentiates the reverse mode's
    # custom_linear_solve through its matvec)
    grad_q = lambda *a: np.asarray(grad_all(*a)[0])  # noqa: E731  (the compiled gradient above, not another)
    flat = args[0].ravel()
    e = np.eye(flat.size)
    H_fd = np.stack([(grad_q((flat + eps * e[i]).reshape(q.shape), qd, loads)
                      - grad_q((flat - eps * e[i]).reshape(q.shape), qd, loads)).ravel() / (2 * eps)
                     for i in range(flat.size)])  # fmt: skip
    g_flat = lambda x: grad_all(x.reshape(q.shape), qd, loads)[0].ravel()  # noqa: E731
    H = jax.jit(jax.jacfwd(g_flat))(flat)
    np.testing.assert_allclose(H, H_fd, rtol=1e-5, atol=1e-6 * np.abs(H_fd).max())


@pytest.mark.parametrize("case", ["chain-shared", "tree5-chunked", "no-adjoint"])
def test_forward_dynamics_adjoint_equals_autodiff(case):
    # The custom_vjp of gradient="adjoint" (rules._forward_vjp) against the custom_jvp
    # rule of "autodiff" transposed by JAX, every input at once: the model, q, qd,
    # tau and loads, with broadcast inputs (one tau and one load shared by the
    # batch: their cotangents are sums over it), the chunked articulated-body
    # kernel of a five-segment tree (chunks of 2, the last overlapping; beyond
    # layout.ABA_FUSED_MAX segments: every segment's state materialised, as for the
    # seven-segment human, whose two gradients compiled for 11 s each), and the
    # branch for models beyond Tuning.adjoint_max (JAX's reverse mode for the model
    # too), and (on that small tree) vmap of the single-sample gradient against the
    # batched one.
    import jax

    rng = np.random.default_rng(63)
    chunk = None
    if case == "tree5-chunked":
        model, chunk = random_model(rng, 5, tree=True, base="floating", coordinates="relative"), 2
        assert layout._aba_cut(model) == 1  # the materialised form, as the human's
    else:
        model = random_model(rng, 3, tree=True, base="floating", coordinates="absolute")
    tuning = _engine.Tuning(adjoint_max=0) if case == "no-adjoint" else _engine.TUNING
    states = [random_state(rng, model) for _ in range(5)]
    q, qd, _, loads = (jnp.asarray(np.stack([s[k] for s in states])) for k in range(4))
    tau = jnp.asarray(5.0 * rng.standard_normal(q.shape))
    if case == "chain-shared":
        tau, loads = tau[0], loads[0]  # (dof,) and (segments, 3): shared by the batch

    def loss(gradient):
        spec = _engine.Spec("forward", chunk=chunk, gradient=gradient, tuning=tuning)

        def f(m, q, qd, tau, loads):  # jaxmb.forward_dynamics with the engine's tuning
            return jnp.sum(jnp.sin(_engine.run(spec, m, q, qd, tau, loads)))
        return f

    args = (model, q, qd, tau, loads)
    # the five-segment tree: the model and tau only (the autodiff reference of its
    # state's cotangents compiles for seconds more; the small tree covers them)
    argnums = (0, 3) if case == "tree5-chunked" else tuple(range(5))
    ga = jax.jit(jax.grad(loss("adjoint"), argnums=argnums))(*args)
    gd = jax.jit(jax.grad(loss("autodiff"), argnums=argnums))(*args)
    for a, d in zip(jax.tree_util.tree_leaves(ga), jax.tree_util.tree_leaves(gd)):
        assert a.shape == d.shape
        np.testing.assert_allclose(a, d, rtol=1e-9, atol=1e-9 * (1 + np.abs(d).max()))
    if case == "no-adjoint":
        # vmap of the single-sample gradient with respect to the state: per-sample
        # rows of the batched one
        per = jax.jit(jax.vmap(jax.grad(loss("adjoint"), argnums=(1, 2, 3, 4)), in_axes=(None, 0, 0, 0, 0)))(*args)
        for a, d in zip(per, ga[1:]):
            np.testing.assert_allclose(a, d, rtol=1e-9, atol=1e-9 * (1 + np.abs(d).max()))
