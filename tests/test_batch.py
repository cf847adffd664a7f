"""The batched kernels (issues 4 and 8) through the one public API, against references.

References: ``jax.vmap`` of the single-sample functions evaluated by the projection
formulas (tau = D^T (Mp (D qdd + gamma) - h), lambda = E^T (...), derivatives of the
pose map: a different algorithm from the recursion that the batch path runs), NumPy's
sin and cos for :func:`jaxmb._math.sincos`, and the inverse of inverse dynamics for
the forward dynamics. Random models and states with fixed seeds, every combination
of chain/tree, fixed/floating base and relative/absolute coordinates, both methods.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import gradcheck
import jaxmb
from jaxmb import _engine, _math
from jaxmb._engine import adjoint, evaluate, layout, rules, solve
from random_models import CONFIG_IDS, CONFIGS, PAIR_CONFIG_PARAMS, random_model, random_state

# The recursion and the projection differ in operation order: a few hundred ulp of
# the largest term (forces up to ~1e3 N, moments ~1e3 N m).
RTOL = 1e-10
ATOL = 1e-9
# Through a Cholesky solve: the condition number of M (up to ~1e4 for random trees).
SOLVE_RTOL = 1e-8
SOLVE_ATOL = 1e-8
# float32: ~1e-7 relative per operation, accumulated over the recursion; moments
# ~1e3 N m.
F32_RTOL = 2e-4
F32_ATOL = 2e-2

B = 13  # odd: chunks of at most 4 are four of 4, the last overlapping by 3


def batch_state(seed, model, batch=B):
    """(q, qd, qdd, loads), each with the batch first: (B, dof) and (B, segments, 3)."""
    rng = np.random.default_rng(seed)
    states = [random_state(rng, model) for _ in range(batch)]
    return tuple(np.stack([s[k] for s in states]) for k in range(4))


def vmapped(fn, model, *xs, **kw):
    return jax.vmap(lambda *a: fn(model, *a, **kw))(*xs)


# ------------------------------------------------------------------ sincos


def test_sincos_matches_numpy_float64():
    rng = np.random.default_rng(0)
    # angles of a motion (|x| < 100 rad) and far beyond, up to 1e5 rad
    x = np.concatenate([rng.uniform(-100, 100, 20000), rng.uniform(-1e5, 1e5, 20000),
                        np.arange(-8, 9) * np.pi / 4])  # fmt: skip
    c, s = jax.jit(_math.sincos)(jnp.asarray(x))
    assert c.dtype == jnp.float64 and s.dtype == jnp.float64
    # the reduction is exact and the polynomials are below half an ulp: about 1 ulp
    # of the result (<= 1.2e-16 on [-1, 1]); numpy's libm is itself within 1 ulp
    np.testing.assert_allclose(np.asarray(c), np.cos(x), rtol=0, atol=3e-16)
    np.testing.assert_allclose(np.asarray(s), np.sin(x), rtol=0, atol=3e-16)


def test_sincos_float32_and_derivative():
    rng = np.random.default_rng(1)
    x = rng.uniform(-50, 50, 20000).astype(np.float32)
    c, s = _math.sincos(jnp.asarray(x))
    assert c.dtype == jnp.float32
    # float32: one rounding of the argument's reduction and of the result, ~1e-7
    np.testing.assert_allclose(np.asarray(c), np.cos(x.astype(np.float64)), atol=3e-7)
    np.testing.assert_allclose(np.asarray(s), np.sin(x.astype(np.float64)), atol=3e-7)
    # custom JVP: d cos = -sin dx, d sin = cos dx, in both modes
    x64 = jnp.asarray(rng.uniform(-5, 5, 7))
    # jitted: op by op, each of these operations compiles on its own
    dc = jax.jit(jax.vmap(jax.grad(lambda t: _math.sincos(t)[0])))(x64)
    ds = jax.jit(jax.vmap(jax.jacfwd(lambda t: _math.sincos(t)[1])))(x64)
    np.testing.assert_allclose(dc, -np.sin(np.asarray(x64)), rtol=0, atol=3e-16)
    np.testing.assert_allclose(ds, np.cos(np.asarray(x64)), rtol=0, atol=3e-16)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sincos_large_angles_within_the_input_resolution_then_nan(dtype):
    # up to SINCOS_LIMIT the result is within half the spacing of the floats near x
    # (what the input itself resolves), beyond it NaN: before, float32 gave
    # sin(1e9) = 1.8e14 and float64 a sine of -2 from 3.4e9 rad (int32 quadrant)
    bits = 64 if dtype == np.float64 else 32
    limit = _math.SINCOS_LIMIT[bits]
    rng = np.random.default_rng(2)
    mags = [1e3, 1e5, 1e7, 1e9, limit] if bits == 64 else [1e3, 1e5, 1e6, 1e7, limit]
    x = np.concatenate([rng.uniform(m / 2, m, 4000) * rng.choice([-1, 1], 4000) for m in mags] + [[limit, -limit]])
    x = x[np.abs(x) <= limit].astype(dtype)
    c, s = jax.jit(_math.sincos)(jnp.asarray(x))
    xs = x.astype(np.float64)
    half = 0.5 * np.spacing(np.abs(x)).astype(np.float64) + (4e-16 if bits == 64 else 2e-7)
    assert (np.abs(np.asarray(c, np.float64) - np.cos(xs)) <= half).all()
    assert (np.abs(np.asarray(s, np.float64) - np.sin(xs)) <= half).all()
    beyond = np.array([np.nextafter(dtype(limit), dtype(np.inf)), -4 * limit, 3.4e9, 1e30], dtype)
    c, s = jax.jit(_math.sincos)(jnp.asarray(beyond))
    assert np.isnan(np.asarray(c)).all() and np.isnan(np.asarray(s)).all()


@pytest.mark.parametrize("size", [1, 100000])  # exact check / one pass then the search
@pytest.mark.parametrize("kind", ["numpy", "jax"])
def test_angles_beyond_the_limit_refused_in_concrete_inputs(size, kind):
    arm = jaxmb.chain([0.3, 0.3], [0.15, 0.15], [2.0, 1.5], [0.02, 0.015])
    q = np.zeros((size, 2), np.float32)
    q[-1, 1] = 3e7  # beyond 2^24 rad in float32
    q = q if kind == "numpy" else jnp.asarray(q)
    z = np.zeros(2, np.float32)
    with pytest.raises(ValueError, match=r"q has an angle of 3e\+07 rad at index .*float32.*wrap the angles"):
        jaxmb.inverse_dynamics(arm, q, z, z)
    with pytest.raises(ValueError, match=r"q0 has an angle"):
        jaxmb.simulate(arm, q, np.zeros_like(q), np.zeros(2, np.float32), 0.01, steps=2)
    # in float64 the same angle is taken (and accurate to its float's resolution)
    q64 = np.asarray(q, np.float64)
    tau = jaxmb.inverse_dynamics(arm, q64[-1], np.zeros(2), np.zeros(2))
    want = jaxmb.inverse_dynamics(arm, np.array([0.0, np.remainder(3e7, 2 * np.pi)]), np.zeros(2), np.zeros(2))
    np.testing.assert_allclose(tau, want, rtol=0, atol=1e-8)
    # a floating base's position is no angle: far from the origin is fine
    h = jaxmb.seven_segment_human()
    qh = np.zeros((size, h.dof), np.float32)
    qh[:, 0] = 1e9
    assert np.isfinite(np.asarray(jaxmb.inverse_dynamics(h, qh, 0 * qh, 0 * qh))).all()
    # traced (values unknown): NaN, never a number outside [-1, 1] in the sines
    got = jax.jit(lambda q: jaxmb.inverse_dynamics(arm, q, z, z))(jnp.asarray(q[-1]))
    assert np.isnan(np.asarray(got)).all()


# ------------------------------------------------------- inverse dynamics


@jax.jit
def _references(model, q, qd, qdd, loads):
    tau = vmapped(jaxmb.inverse_dynamics, model, q, qd, qdd, loads, method="projection")
    lam = vmapped(jaxmb.joint_reactions, model, q, qd, qdd, loads, frame="segment", method="projection")
    return tau, lam


@jax.jit
def _batched(model, q, qd, qdd, loads):
    out = {}
    for method, chunk in (("unrolled", 0), ("matrix", 4)):
        kw = dict(kernel=method, chunk=chunk)
        out[method] = (
            jaxmb.inverse_dynamics(model, q, qd, qdd, loads, **kw),
            jaxmb.joint_reactions(model, q, qd, qdd, loads, frame="segment", **kw),
        )
    return out


@pytest.mark.parametrize("tree,base,coordinates", PAIR_CONFIG_PARAMS)  # the rest with --slow
def test_batch_matches_projection(tree, base, coordinates):
    rng = np.random.default_rng(10)
    model = random_model(rng, 4, tree=tree, base=base, coordinates=coordinates)
    q, qd, qdd, loads = batch_state(11, model)
    refs = _references(model, q, qd, qdd, loads)
    for method, outs in _batched(model, q, qd, qdd, loads).items():
        for name, got, ref in zip(("tau", "reactions"), outs, refs):
            assert got.shape == ref.shape
            np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL, err_msg=f"{method} {name}")


@pytest.mark.parametrize("method", ["unrolled", "matrix"])
def test_moments_and_batch_last_layout(method):
    # the seven-segment human (floating base, absolute coordinates, a tree):
    # joint moments, batch-last arrays, loads shared by all samples
    model = jaxmb.seven_segment_human()
    q, qd, qdd, loads = batch_state(12, model)

    @jax.jit
    def run(model, q, qd, qdd, loads):
        T = jaxmb.joint_moments(model, q, qd, qdd, loads, kernel=method, chunk=4)
        tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads[0], kernel=method, chunk=4)
        # references: the projection, and the joint moments from it (absolute angles:
        # T_i = sum of the generalized forces over the subtree of i)
        ref_tau = vmapped(jaxmb.inverse_dynamics, model, q, qd, qdd, loads=loads[0], method="projection")
        tau_l = vmapped(jaxmb.inverse_dynamics, model, q, qd, qdd, loads, method="projection")
        A = jnp.asarray(jaxmb.model.ancestor_matrix(model.parent))
        ref_T = tau_l[:, model.nbase:] @ A
        return T, ref_T, tau, ref_tau

    T, ref_T, tau, ref_tau = run(model, q, qd, qdd, loads)
    assert tau.shape == (B, model.dof)
    np.testing.assert_allclose(T, ref_T, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(tau, ref_tau, rtol=RTOL, atol=ATOL)


def test_long_chain_auto_uses_matrix_form_and_matches():
    # 14 segments: "auto" takes the matrix form; three chunks of 5, the last overlapping by 2
    rng = np.random.default_rng(20)
    model = random_model(rng, 14, coordinates="relative")
    q, qd, qdd, loads = batch_state(21, model)
    assert layout._plan(model, "auto", None, 10**6) == ("matrix", layout._CHUNK)

    @jax.jit
    def run(model, q, qd, qdd, loads):
        tau = jaxmb.inverse_dynamics(model, q, qd, qdd, chunk=5)
        lam = jaxmb.joint_reactions(model, q, qd, qdd, loads, joints=["s13", 2], chunk=5)
        ref = vmapped(jaxmb.inverse_dynamics, model, q, qd, qdd, method="projection")
        ref_lam = vmapped(jaxmb.joint_reactions, model, q, qd, qdd, loads, joints=["s13", 2], method="projection")
        return tau, ref, lam, ref_lam

    tau, ref, lam, ref_lam = run(model, q, qd, qdd, loads)
    np.testing.assert_allclose(tau, ref, rtol=RTOL, atol=ATOL)
    assert lam.shape == (B, 2, 2)
    np.testing.assert_allclose(lam, ref_lam, rtol=RTOL, atol=ATOL)


def test_deep_chain_auto_is_matrix_on_cpu_unrolled_elsewhere():
    # Within 10 segments, "auto" takes the matrix form on the CPU for paths longer
    # than layout._UNROLLED_DEPTH_CPU (6) segments and keeps the unrolled recursion on
    # other platforms: the matrix form's products (dot_general) are in the CPU
    # lowering and absent from the CUDA one (lowered without a GPU by jax.export).
    # The human (7 segments, depth 4) and a 6-chain stay unrolled everywhere. Values,
    # the jvp and reverse mode of "auto" equal the unrolled kernel's on the CPU.
    rng = np.random.default_rng(22)
    human = jaxmb.seven_segment_human()
    assert layout._depth(human) == 4 and layout._depth(random_model(rng, 8)) == 8
    for model, deep in ((random_model(rng, 6), False), (human, False), (random_model(rng, 8, tree=True), None),
                        (random_model(rng, 10, base="floating", coordinates="absolute"), True)):  # fmt: skip
        deep = layout._depth(model) > 6 if deep is None else deep
        assert layout._cpu_takes_matrix(_engine.Spec("tau"), model) == deep
        assert not layout._cpu_takes_matrix(_engine.Spec("forward"), model)
        assert not layout._cpu_takes_matrix(_engine.Spec("tau", "unrolled"), model)
        x = jnp.zeros((3, model.dof))
        f = jax.jit(lambda q, model=model: jaxmb.inverse_dynamics(model, q, q, q))
        for platform, matrix in (("cpu", deep), ("cuda", False)):
            text = jax.export.export(f, platforms=[platform])(x).mlir_module()
            assert ("dot_general" in text) == matrix, (model.segments, platform)

    model = random_model(rng, 8, base="floating", coordinates="absolute")
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(23, model))
    w = jnp.asarray(rng.standard_normal(q.shape))

    def f(kernel):
        return lambda q, qd: jaxmb.inverse_dynamics(model, q, qd, qdd, loads, kernel=kernel, gradient="autodiff")

    @jax.jit
    def run(q, qd):
        out = []
        for k in ("auto", "unrolled"):
            out.append((f(k)(q, qd), jax.jvp(f(k), (q, qd), (w, w))[1],
                        jax.grad(lambda q, qd: jnp.sum(w * jnp.sin(f(k)(q, qd))), (0, 1))(q, qd)))  # fmt: skip
        return out

    auto, unrolled = run(q, qd)
    for a, u in zip(jax.tree_util.tree_leaves(auto), jax.tree_util.tree_leaves(unrolled)):
        np.testing.assert_allclose(a, u, rtol=1e-9, atol=1e-9 * np.abs(u).max())


@pytest.mark.parametrize("tree,base,coordinates", CONFIGS[::3], ids=CONFIG_IDS[::3])
def test_forward_dynamics_batch_inverts_inverse(tree, base, coordinates):
    rng = np.random.default_rng(40)
    model = random_model(rng, 4, tree=tree, base=base, coordinates=coordinates)
    q, qd, qdd, loads = batch_state(41, model)

    @jax.jit  # the projection in the same program (op by op it compiled ~100 small programs)
    def forward(model, q, qd, qdd, loads):
        tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="projection")
        return [jaxmb.forward_dynamics(model, q, qd, tau, loads, chunk=c) for c in (0, 4)]

    for acc in forward(model, q, qd, qdd, loads):
        np.testing.assert_allclose(acc, qdd, rtol=SOLVE_RTOL, atol=SOLVE_ATOL)


def test_overlapping_chunks_values_and_cotangents():
    # B = 13 in chunks of at most 4: four chunks of 4 at 0, 4, 8 and 9, the last
    # overwriting samples 9-11 of the third. The values and the reverse-mode
    # cotangents of every input (q, qd, x and loads, through the transposes of the
    # chunks' slices and overlapping updates) equal those of the unchunked call, for
    # the articulated-body kernel (5 segments: chunked by default) and the matrix
    # form of inverse dynamics.
    rng = np.random.default_rng(48)
    model = random_model(rng, 5, tree=True, base="floating")
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(49, model))
    w = jnp.asarray(rng.standard_normal(q.shape))
    tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    fns = {
        "forward": lambda c, q, qd, x, ld: jaxmb.forward_dynamics(model, q, qd, x, ld, chunk=c),
        "matrix": lambda c, q, qd, x, ld: jaxmb.inverse_dynamics(model, q, qd, x, ld, kernel="matrix", chunk=c),
    }
    for name, f in fns.items():
        x = tau if name == "forward" else qdd

        @jax.jit
        def both(q, qd, x, ld, f=f):
            return [jax.value_and_grad(lambda *a: jnp.sum(w * jnp.sin(f(c, *a))), argnums=(0, 1, 2, 3))(q, qd, x, ld)
                    for c in (4, 0)]  # fmt: skip

        (v4, g4), (v0, g0) = both(q, qd, x, loads)
        np.testing.assert_allclose(v4, v0, rtol=1e-12)
        for a, b in zip(g4, g0):
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10 * np.abs(b).max(), err_msg=name)
            # every sample has a cotangent (none lost in the overlap; a base's position
            # and velocity alone have none)
            assert np.all(np.any(a != 0.0, axis=tuple(range(1, a.ndim))))


def test_batched_solvers_match_numpy():
    # Both per-sample solvers of the forward dynamics (the unrolled LDL^T used up to
    # 12 coordinates, the Cholesky column loop beyond) against numpy.linalg.solve on
    # random symmetric positive definite matrices, condition numbers up to ~1e4.
    rng = np.random.default_rng(45)
    for d in (1, 5, 13):
        a = rng.standard_normal((7, d, d))
        scales = np.logspace(0, 4, d)
        M = np.einsum("bij,j,bkj->bik", a, scales, a) + 1e-3 * np.eye(d)
        r = rng.standard_normal((7, d))
        ref = np.linalg.solve(M, r[..., None])[..., 0]
        Mb, rb = jnp.asarray(np.moveaxis(M, 0, -1)), jnp.asarray(r.T)  # (d, d, b), (d, b)
        for solver in (solve._ldl_solve_rows, solve._cholesky_solve_rows):
            got = np.asarray(jax.jit(solver)(Mb, rb)).T
            np.testing.assert_allclose(got, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max(), err_msg=f"{solver.__name__}, d={d}")


def test_forward_dynamics_batch_long_chain_column_loop():
    # 14 coordinates (12-segment chain on a floating base): past the unrolled LDL^T,
    # the Cholesky column loop; forward dynamics still inverts the inverse dynamics.
    rng = np.random.default_rng(46)
    model = random_model(rng, 12, base="floating")
    assert model.dof > _engine.TUNING.ldl_max
    q, qd, qdd, loads = batch_state(47, model, 9)
    # one program (the projection op by op compiled ~90 small programs)
    @jax.jit
    def forward(model, q, qd, qdd, loads):
        tau = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="projection")
        return jaxmb.forward_dynamics(model, q, qd, tau, loads)

    acc = forward(model, q, qd, qdd, loads)
    np.testing.assert_allclose(acc, qdd, rtol=SOLVE_RTOL, atol=SOLVE_ATOL)


# ------------------------------------------------ dtype, jit, grad, memory


def test_float32_stays_float32():
    model = jaxmb.seven_segment_human()
    q, qd, qdd, _ = batch_state(50, model)
    f32 = [x.astype(np.float32) for x in (q, qd, qdd)]
    run = jax.jit(lambda m, *x: (jaxmb.inverse_dynamics(m, *x), jaxmb.joint_reactions(m, *x, kernel="matrix")))
    tau32, lam32 = run(model, *f32)
    assert tau32.dtype == jnp.float32 and lam32.dtype == jnp.float32
    tau64, lam64 = run(model, *[x.astype(np.float64) for x in f32])
    assert tau64.dtype == jnp.float64
    np.testing.assert_allclose(tau32, tau64, rtol=F32_RTOL, atol=F32_ATOL)
    np.testing.assert_allclose(lam32, lam64, rtol=F32_RTOL, atol=F32_ATOL)


@pytest.mark.parametrize("tree", [True, False], ids=["tree-explicit-attach", "chain-joints-at-ends"])
def test_gradient_equals_vmapped_core(tree):
    # d/d(parameters) of a batched squared-torque loss, through jit, against the same
    # loss built on jax.vmap of the core function (reverse mode through both). In the
    # chain the joints sit at the parents' distal ends, so lengths move them.
    rng = np.random.default_rng(60)
    model = random_model(rng, 3, tree=tree, base="floating", coordinates="absolute")
    q, qd, qdd, loads = batch_state(61, model)

    def loss_batch(m, method):
        return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, loads, kernel=method, chunk=5) ** 2)

    def loss_ref(m):
        return jnp.sum(vmapped(jaxmb.inverse_dynamics, m, q, qd, qdd, loads, method="projection") ** 2)

    grads = jax.jit(lambda m: [jax.grad(loss_ref)(m)] + [jax.grad(loss_batch)(m, k) for k in ("unrolled", "matrix")])
    ref, *got = grads(model)
    for method, g in zip(("unrolled", "matrix"), got):
        for name in ("length", "com", "mass", "inertia", "attach", "gravity"):
            np.testing.assert_allclose(getattr(g, name), getattr(ref, name), rtol=RTOL, atol=1e-7,
                                       err_msg=f"{method} d/d{name}")  # fmt: skip


def _weighted_loss(gradient, loads_kind, axis, weights):
    """A loss that is not a plain sum of squares: sum_b sum_i w_i sin(tau_bi) + tau_bi^2/2,
    so that every sample and coordinate gets a different cotangent."""

    def loss(m, q, qd, qdd, loads):
        ld = None if loads_kind == "none" else loads
        if axis == -1:  # a (T, trials) leading shape: the batch in two dimensions
            q, qd, qdd = (x.reshape(-1, 1, x.shape[-1]) for x in (q, qd, qdd))
            if loads_kind == "per-sample":
                ld = ld.reshape((-1, 1) + ld.shape[-2:])
        tau = jaxmb.inverse_dynamics(m, q, qd, qdd, ld, gradient=gradient)
        tau = tau.reshape(-1, tau.shape[-1])
        return jnp.sum(weights * (jnp.sin(tau) + 0.5 * tau**2))

    return loss


@pytest.mark.parametrize(("tree", "base", "coordinates"), PAIR_CONFIG_PARAMS)
def test_adjoint_gradient_of_every_input(tree, base, coordinates):
    # The hand-derived parameter adjoint (gradient="adjoint", the default) against
    # reverse mode through jax.vmap of the core function (the projection formulas),
    # for the model's parameters, q, qd, qdd and the loads: per-sample loads, shared
    # loads and none, one and two leading dimensions, and batch sizes that exercise the (B // L, L) view
    # (L = adjoint._lanes(float64) = 2) alone (16), with a remainder (13) and the remainder alone (1).
    rng = np.random.default_rng(80)
    model = random_model(rng, 4, tree=tree, base=base, coordinates=coordinates)
    assert adjoint._lanes(jnp.float64) == 2  # the batch sizes below are chosen for it
    cases = [("per-sample", 0, 13), ("shared", 0, 16), ("none", -1, 1), ("per-sample", -1, 16)]
    k = 2 * (CONFIGS.index((tree, base, coordinates)) % 2)  # two cases each: all four over the default pair
    for loads_kind, axis, batch in cases[k : k + 2]:
        q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(81, model, batch))
        ld = loads[0] if loads_kind == "shared" else loads
        w = jnp.asarray(rng.uniform(0.5, 2.0, (batch, model.dof)))
        loss = _weighted_loss("adjoint", loads_kind, axis, w)

        def ref_loss(m, q, qd, qdd, loads):
            ld_ = None if loads_kind == "none" else (jnp.broadcast_to(loads, (batch,) + loads.shape)
                                                      if loads_kind == "shared" else loads)  # fmt: skip
            tau = vmapped(jaxmb.inverse_dynamics, m, q, qd, qdd, ld_, method="projection")
            return jnp.sum(w * (jnp.sin(tau) + 0.5 * tau**2))

        argnums = (0, 1, 2, 3) + (() if loads_kind == "none" else (4,))
        got = jax.jit(jax.grad(loss, argnums))(model, q, qd, qdd, ld)
        ref = jax.jit(jax.grad(ref_loss, argnums))(model, q, qd, qdd, ld)
        # the model alone (its inputs' cotangents are then never formed)
        only_model = jax.jit(jax.grad(loss))(model, q, qd, qdd, ld)
        where = f"{loads_kind} loads, leading dims={1 if axis == 0 else 2}, B={batch}"
        for name in ("length", "com", "mass", "inertia", "attach", "gravity", "origin"):
            for g in (got[0], only_model):
                np.testing.assert_allclose(getattr(g, name), getattr(ref[0], name), rtol=RTOL, atol=1e-7,
                                           err_msg=f"d/d{name}, {where}")  # fmt: skip
        for k, name in enumerate(("q", "qd", "qdd", "loads")[: len(argnums) - 1]):
            np.testing.assert_allclose(got[k + 1], ref[k + 1], rtol=RTOL, atol=1e-7, err_msg=f"d/d{name}, {where}")


def test_reverse_mode_of_long_unrolled_recursions_goes_through_the_matrix_form():
    # From Tuning.reverse_matrix_min segments on, the cotangents of an unrolled
    # recursion's inputs are the matrix form's reverse mode (XLA:CPU recomputes the
    # unrolled tape per cotangent: 8x slower for a 7-chain). They equal the unrolled
    # kernel's own reverse mode, for the adjoint's state cotangents and for every
    # cotangent with gradient="autodiff", whose forward mode stays the unrolled JVP.
    rng = np.random.default_rng(86)
    model = random_model(rng, 5, tree=True, base="floating", coordinates="absolute")
    short = random_model(rng, _engine.TUNING.reverse_matrix_min - 1)
    raw = object()
    for m, switched in ((model, True), (short, False)):
        assert (rules._reverse_raw(_engine.Spec("reactions"), m, raw) is not raw) == switched
    assert rules._reverse_raw(_engine.Spec("reactions", "matrix"), model, raw) is raw
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(87, model, 3))
    joints = (0, 2, 4)
    w = jnp.asarray(rng.uniform(0.5, 2.0, (3, len(joints), 2)))
    unrolled = _engine.Spec("reactions", "unrolled", gradient="autodiff", joints=joints, frame="segment")

    def ref(params, *x):  # the unrolled kernel with no derivative rules
        return jnp.sum(w * jnp.sin(evaluate._evaluate_once(unrolled, model, params, *x)))

    params = rules._model_params(model)
    ref_g = jax.grad(ref, argnums=(0, 1, 2, 3, 4))(params, q, qd, qdd, loads)

    def loss(m, *x, gradient):
        lam = jaxmb.joint_reactions(m, *x, joints=joints, frame="segment", gradient=gradient)
        return jnp.sum(w * jnp.sin(lam))

    for gradient in ("adjoint", "autodiff"):
        grad = jax.jit(jax.grad(functools.partial(loss, gradient=gradient), argnums=(0, 1, 2, 3, 4)))
        got = grad(model, q, qd, qdd, loads)
        for a, b, name in zip(got[1:], ref_g[1:], ("q", "qd", "qdd", "loads")):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-9, err_msg=f"{gradient}: d/d{name}")
        for a, b in zip((got[0].joint_attach, got[0].com, got[0].mass, got[0].inertia, got[0].gravity), ref_g[0]):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-9, err_msg=gradient)
    # forward mode (gradient="autodiff" only) along all-ones in q: the sum of d/dq
    t = jax.jvp(lambda x: loss(model, x, qd, qdd, loads, gradient="autodiff"), (q,), (jnp.ones_like(q),))[1]
    np.testing.assert_allclose(t, jnp.sum(ref_g[1]), rtol=RTOL)


def test_adjoint_against_finite_differences_and_autodiff():
    # Independent of any reverse mode: a central difference of the loss along a
    # random direction in parameter space, and equal to the batched path's own JAX
    # reverse mode (gradient="autodiff") for both methods.
    rng = np.random.default_rng(82)
    model = random_model(rng, 5, tree=True, base="floating", coordinates="relative")
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(83, model, 11))
    for method, chunk in (("unrolled", None), ("matrix", 4)):
        def loss(m, gradient="adjoint"):
            tau = jaxmb.inverse_dynamics(m, q, qd, qdd, loads, kernel=method, chunk=chunk, gradient=gradient)
            return jnp.sum(jnp.sin(tau))

        got, ref = jax.jit(jax.grad(loss))(model), jax.jit(jax.grad(lambda m: loss(m, "autodiff")))(model)
        gradcheck.directional(jax.jit(loss), (got,), (model,), 82, msg=method)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-7, err_msg=method)


def test_adjoint_float32_large_batch():
    # float32 sums of 2^15 + 5 samples: with its lanes the adjoint stays within 1e-5
    # (relative to the largest entry) of the float64 gradient; JAX's own reverse mode
    # in float32 is computed alongside and reported on failure.
    rng = np.random.default_rng(84)
    model = random_model(rng, 3)
    batch = 2**15 + 5
    q, qd, qdd = (rng.uniform(-3.0, 3.0, (batch, model.dof)) for _ in range(3))

    def grad(m, x, gradient):
        return jax.jit(jax.grad(lambda m: jnp.sum(jaxmb.inverse_dynamics(m, *x, gradient=gradient) ** 2)))(m)

    ref = grad(model, (q, qd, qdd), "autodiff")
    m32, x32 = model.astype(jnp.float32), tuple(x.astype(np.float32) for x in (q, qd, qdd))
    got, auto = grad(m32, x32, "adjoint"), grad(m32, x32, "autodiff")
    for name in ("length", "com", "mass", "inertia", "gravity"):
        a, r, b = getattr(got, name), getattr(ref, name), getattr(auto, name)
        assert a.dtype == jnp.float32
        a, r, b = (np.asarray(x, np.float64) for x in (a, r, b))
        scale = float(np.max(np.abs(r)))
        err, err_auto = float(np.max(np.abs(a - r))) / scale, float(np.max(np.abs(b - r))) / scale
        assert err < 1e-5, (name, err, err_auto)


def test_adjoint_is_reverse_mode_only_and_autodiff_has_both():
    rng = np.random.default_rng(85)
    model = random_model(rng, 3)
    q, qd, qdd, _ = (jnp.asarray(x) for x in batch_state(86, model, 5))
    with pytest.raises(TypeError, match="forward-mode"):
        jax.jvp(lambda x: jaxmb.inverse_dynamics(model, x, qd, qdd), (q,), (q,))
    # gradient="autodiff": forward mode works and matches the projection's
    # (jitted: these transforms op by op dispatch thousands of small ops)
    _, tangent = jax.jit(lambda x: jax.jvp(
        lambda x: jaxmb.inverse_dynamics(model, x, qd, qdd, gradient="autodiff"), (x,), (qd,)))(q)  # fmt: skip
    _, ref = jax.jit(lambda x: jax.jvp(
        lambda x: vmapped(jaxmb.inverse_dynamics, model, x, qd, qdd, method="projection"), (x,), (qd,)))(q)  # fmt: skip
    np.testing.assert_allclose(tangent, ref, rtol=RTOL, atol=ATOL)
    # reverse over reverse through the adjoint (it is written in JAX)
    def inner(x, gradient):
        return jax.grad(lambda m: jnp.sum(jaxmb.inverse_dynamics(m, x, qd, qdd, gradient=gradient) ** 2))(model).mass

    second, second_ref = (jax.jit(jax.grad(lambda x: jnp.sum(inner(x, g))))(q) for g in ("adjoint", "autodiff"))  # noqa: B023
    np.testing.assert_allclose(second, second_ref, rtol=RTOL, atol=1e-6)
    with pytest.raises(ValueError, match="gradient must be one of"):
        jaxmb.inverse_dynamics(model, q, qd, qdd, gradient="fast")


def test_adjoint_of_the_other_generalized_forces():
    # bias_forces, gravity_forces, external_forces and torque_components take the
    # same parameter adjoint by default: equal to plain JAX reverse mode
    # (gradient="autodiff"), which also keeps their forward mode. The parts of
    # torque_components are the four evaluations (M qdd, C, G, E) with their own
    # weights in one loss: one compile per gradient form.
    rng = np.random.default_rng(90)
    model = random_model(rng, 4, tree=True, base="floating", coordinates="absolute")
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(91, model, 9))
    w = {k: jnp.asarray(rng.uniform(0.5, 2.0, q.shape)) for k in ("inertial", "coriolis", "gravity", "external")}

    def loss(m, g):
        parts = jaxmb.torque_components(m, q, qd, qdd, loads, gradient=g)
        return sum(jnp.sum(jnp.sin(w[k] * parts[k])) for k in w)

    got, ref = (jax.jit(jax.grad(loss), static_argnums=1)(model, g) for g in ("adjoint", "autodiff"))
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-9)
    # the public functions pass gradient= through: the default is reverse mode only
    # (jvp raises while tracing, before compiling); "autodiff" has forward mode,
    # equal to a central difference along the tangent (jax.eval_shape would not
    # do: it does not trace the jvp of the compiled call and passes either way)
    h = 1e-6
    along = lambda t: jax.tree_util.tree_map(lambda a: a * (1 + t), model)  # noqa: E731
    fns = {
        "bias_forces": lambda m, x, g: jaxmb.bias_forces(m, x, qd, gradient=g),
        "gravity_forces": lambda m, x, g: jaxmb.gravity_forces(m, x, gradient=g),
        "external_forces": lambda m, x, g: jaxmb.external_forces(m, x, loads, gradient=g),
    }
    for name, f in fns.items():
        jvp = lambda g, at=model: jax.jvp(lambda m: f(m, q, g), (at,), (model,))  # noqa: B023, E731
        with pytest.raises(TypeError, match="custom_vjp"):
            jvp("adjoint")
        # the values for the difference from the same compiled jvp (its primal output)
        fd = (jvp("autodiff", along(h))[0] - jvp("autodiff", along(-h))[0]) / (2 * h)
        np.testing.assert_allclose(jvp("autodiff")[1], fd, rtol=1e-6, atol=1e-6, err_msg=name)


def test_gpu_lowering_splits_the_adjoint_reduction():
    # On accelerators the adjoint's variadic reduction is split into reductions of at
    # most _GPU_GROUP outputs (one reduction with the human's 35 outputs overflowed an
    # H100's shared memory in float32); the CPU keeps one. Checked without a GPU by
    # lowering the same gradient for both platforms.
    import re

    model = jaxmb.seven_segment_human()
    B = 101  # not a multiple of the lanes: the remainder is a reduction of its own
    q, qd, qdd = (jnp.asarray(np.random.default_rng(92).normal(size=(B, model.dof))) for _ in range(3))
    fns = {
        "inverse_dynamics": lambda m: jaxmb.inverse_dynamics(m, q, qd, qdd),
        "joint_reactions": lambda m: jaxmb.joint_reactions(m, q, qd, qdd, frame="segment"),
    }
    for name, f in fns.items():
        traced = jax.jit(jax.grad(lambda m: jnp.sum(f(m) ** 2))).trace(model)  # noqa: B023
        outputs = {}
        for platform in ("cpu", "cuda"):
            text = traced.lower(lowering_platforms=(platform,)).as_text()
            outputs[platform] = [int(k) for k in re.findall(r"%[\w#]+:(\d+) = stablehlo\.reduce\(", text)]
        # rows: joint distances (n - 1), com (2 n), mass, inertia (n each), gravity;
        # one reduction over the views of L lanes and, when B is not a multiple of L,
        # one over the remainder: one variadic reduction each on the CPU
        n_rows = 5 * model.segments
        parts = 1 + bool(B % adjoint._lanes(q.dtype))
        assert parts == 2
        assert outputs["cpu"] == [n_rows] * parts, (name, outputs)
        assert max(outputs["cuda"]) <= adjoint._GPU_GROUP and sum(outputs["cuda"]) == parts * n_rows, (name, outputs)


def test_adjoint_under_vmap_over_subjects_and_trials():
    # jax.vmap of the gradient over a stack of models (subjects) and over stacks of
    # trials, against the same with gradient="autodiff".
    rng = np.random.default_rng(87)
    model = random_model(rng, 3, tree=False, base="floating")
    subjects = jax.tree_util.tree_map(lambda x: np.stack([x, 1.1 * x, 0.9 * x]), model)
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(88, model, 20))

    def grad(m, q, gradient):
        return jax.grad(lambda m: jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, loads, gradient=gradient) ** 2))(m)

    for axes, args in (((0, None), (subjects, q)), ((None, 0), (model, jnp.stack([q, 0.5 * q])))):
        got = jax.jit(jax.vmap(lambda m, x: grad(m, x, "adjoint"), in_axes=axes))(*args)
        ref = jax.jit(jax.vmap(lambda m, x: grad(m, x, "autodiff"), in_axes=axes))(*args)
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-12 * float(np.max(np.abs(b))))


def test_adjoint_limited_in_size():
    # Beyond Tuning.adjoint_max (32) segments the adjoint's single loop runs slower than
    # reverse mode and compiles too slowly (minutes at 80):
    # such models get JAX's reverse mode (tested against the core function elsewhere),
    # so forward mode works there.
    rng = np.random.default_rng(89)
    model = random_model(rng, _engine.TUNING.adjoint_max + 1)
    q, qd, qdd = (jnp.asarray(rng.uniform(-1.0, 1.0, (3, model.dof))) for _ in range(3))
    # (traced alone: the adjoint would refuse the jvp while tracing, before compiling)
    _, tangent = jax.eval_shape(lambda q: jax.jvp(lambda x: jaxmb.inverse_dynamics(model, x, qd, qdd), (q,), (qd,)), q)
    assert tangent.shape == q.shape
    grads = jax.jit(lambda m: [jax.grad(lambda m: jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd, gradient=g) ** 2))(m)
                               for g in ("adjoint", "autodiff")])  # fmt: skip
    got, ref = grads(model)
    for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        np.testing.assert_array_equal(a, b)  # the same computation


def test_no_per_sample_matrices_and_no_recompilation():
    # The inverse dynamics path writes nothing but its output for a short chain, and
    # a bounded per-chunk workspace for the matrix form: no (B, dof, dof) array.
    rng = np.random.default_rng(70)
    batch = 4096
    for n, method, chunk in ((3, "unrolled", None), (12, "matrix", 1024)):
        model = random_model(rng, n)
        x = jnp.zeros((batch, n))
        f = jax.jit(lambda m, a, b, c: jaxmb.inverse_dynamics(m, a, b, c, kernel=method, chunk=chunk))
        compiled = f.lower(model, x, x, x).compile()
        mem = compiled.memory_analysis()
        inputs_outputs = 4 * x.size * x.dtype.itemsize
        # per-sample dense matrices would need n * n * batch * 8 bytes of workspace
        assert mem.temp_size_in_bytes < 0.5 * n * n * batch * 8, (n, mem.temp_size_in_bytes)
        if method == "unrolled":
            assert mem.temp_size_in_bytes < 0.05 * inputs_outputs
    # a new parameter value does not recompile (parameters are traced leaves)
    g = jax.jit(lambda m, a: jaxmb.inverse_dynamics(m, a, a, a))
    model = random_model(rng, 3)
    a = jnp.ones((5, 3))
    g(model, a)
    n_compiled = g._cache_size()
    g(model.replace(mass=model.mass * 2), a)
    assert g._cache_size() == n_compiled


def test_invalid_inputs_raise():
    model = jaxmb.chain([1.0, 1.0], 0.5, 1.0, 0.1)
    q = np.zeros((4, 2))
    with pytest.raises(ValueError, match=r"q must have shape \(2,\) for one sample or \(\.\.\., 2\)"):
        jaxmb.inverse_dynamics(model, q.T, q, q)
    with pytest.raises(ValueError, match=r"do not broadcast: q \(4,\), qd \(4,\), qdd \(3,\)"):
        jaxmb.inverse_dynamics(model, q, q, q[:3])
    with pytest.raises(ValueError, match="kernel"):
        jaxmb.inverse_dynamics(model, q, q, q, kernel="scan")
    with pytest.raises(ValueError, match="method"):
        jaxmb.inverse_dynamics(model, q, q, q, method="scan")
    with pytest.raises(ValueError, match="chunk"):
        jaxmb.inverse_dynamics(model, q, q, q, chunk=-1)
    with pytest.raises(ValueError, match="loads must have shape"):
        jaxmb.inverse_dynamics(model, q, q, q, np.zeros((4, 3, 2)))
    with pytest.raises(ValueError, match=r"loads \(3,\)"):
        jaxmb.inverse_dynamics(model, q, q, q, np.zeros((3, 2, 3)))
    with pytest.raises(ValueError, match="frame"):
        jaxmb.joint_reactions(model, q, q, q, frame="body")
    with pytest.raises(ValueError, match="joints is empty"):
        jaxmb.joint_reactions(model, q, q, q, joints=[])
    with pytest.raises(ValueError, match="tau must have shape"):
        jaxmb.forward_dynamics(model, q, q, q[:, :1])
    bad = q.copy()
    bad[2, 1] = np.nan
    with pytest.raises(ValueError, match=r"qd is not finite at index \(2, 1\)"):
        jaxmb.inverse_dynamics(model, q, bad, q)
    big = np.zeros((40000, 2))
    big[39999, 0] = np.inf
    with pytest.raises(ValueError, match=r"q is not finite at index \(39999, 0\)"):
        jaxmb.inverse_dynamics(model, jnp.asarray(big), big, big)
    # an empty batch is an empty result, as in NumPy
    assert jaxmb.inverse_dynamics(model, q[:0], q[:0], q[:0]).shape == (0, 2)


@functools.lru_cache(maxsize=None)
def _layout_case(first_min):
    """The model, the inputs and the four gradients of test_adjoint_layouts, with the
    adjoint's layout forced by ``first_min``; the "autodiff" references (the adjoint
    alone reads Tuning.adjoint_first_min) are computed once for both layouts."""
    rng = np.random.default_rng(93)
    model = random_model(rng, 3, tree=True, base="floating", coordinates="absolute")
    q, qd, qdd, loads = (jnp.asarray(x) for x in batch_state(94, model, 13))
    tuning = _engine.Tuning(adjoint_first_min=first_min) if first_min is not None else _engine.TUNING

    def run(kind, m, g, **kw):  # the public function of ``kind`` with the engine's tuning
        return _engine.run(_engine.Spec(kind, gradient=g, tuning=tuning, **kw), m, q, qd, qdd, loads)

    every = tuple(range(model.segments))
    fns = {
        "inverse_dynamics": lambda m, g: run("tau", m, g),
        "joint_moments": lambda m, g: run("moments", m, g),
        "joint_reactions": lambda m, g: run("reactions", m, g, joints=every, frame="segment"),
        "forward_dynamics": lambda m, g: run("forward", m, g),
    }
    g = "autodiff" if first_min is None else "adjoint"
    return {name: jax.jit(jax.grad(lambda m, f=f: jnp.sum(jnp.sin(f(m, g)))))(model) for name, f in fns.items()}


@pytest.mark.parametrize("first_min", [0, 10**6])  # every model batch-first / every model batch-last
def test_adjoint_layouts(first_min):
    # The adjoint reads q, qd, qdd and tbar batch-first from Tuning.adjoint_first_min
    # coordinates on (long chains), batch-last below: both layouts, forced on a small
    # floating-base absolute tree, against gradient="autodiff" for inverse dynamics
    # (per-sample loads), joint moments, reactions in the segment frame and forward
    # dynamics, at a batch with a remainder (13 samples).
    assert _engine.TUNING.adjoint_first_min not in (0, 10**6)  # the reference's tuning is neither
    refs = _layout_case(None)
    for name, got in _layout_case(first_min).items():
        for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(refs[name])):
            np.testing.assert_allclose(a, b, rtol=RTOL, atol=1e-8, err_msg=name)


def test_batch_module_is_a_deprecated_shim():
    # jaxmb.batch (the engine's old module) warns on import and forwards its names
    import importlib
    import sys

    sys.modules.pop("jaxmb.batch", None)
    with pytest.warns(DeprecationWarning, match="jaxmb.batch is deprecated"):
        batch = importlib.import_module("jaxmb.batch")
    assert batch.sincos is _math.sincos and batch.SINCOS_LIMIT is _math.SINCOS_LIMIT
    assert batch.Spec is _engine.Spec and batch.run is _engine.run and batch._aba_rows is not None
    with pytest.raises(AttributeError):
        batch._FD_SOLVER  # a Tuning field now: Spec(..., tuning=Tuning(solver=...))
