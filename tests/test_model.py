"""Joints at a parent's distal end follow its length (replace, grad), explicit ones stay;
segment indices and the checks of ragged fields."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb


def _chain():
    return jaxmb.chain([0.3, 0.25, 0.2], [0.13, 0.10, 0.08], [2.0, 1.5, 1.0], [0.02, 0.01, 0.005])


def test_replace_length_moves_default_joints():
    m = _chain()
    assert m.attach_end == (False, True, True)
    m2 = m.replace(length=[0.6, 0.5, 0.4])
    np.testing.assert_allclose(m2.attach, [0.0, 0.6, 0.5])
    q = jnp.array([0.3, 0.5, 0.2])
    # the hand (distal end of the last segment) is where the new lengths put it
    ang = np.cumsum(np.asarray(q))
    hand = sum(L * np.array([np.cos(a), np.sin(a)]) for L, a in zip([0.6, 0.5, 0.4], ang))
    np.testing.assert_allclose(jaxmb.distal_positions(m2, q)[-1], hand, rtol=1e-12)


def test_explicit_attach_is_kept_when_lengths_change():
    m = jaxmb.tree([-1, 0, 0], [0.5, 0.3, 0.3], [0.2, 0.1, 0.1], [3.0, 1.0, 1.0], [0.1, 0.01, 0.01],
                   attach=[0.0, 0.0, 0.4])
    m2 = m.replace(length=[1.0, 0.3, 0.3])
    np.testing.assert_allclose(m2.joint_attach, [0.0, 0.0, 0.4])
    m3 = _chain().replace(attach=[0.0, 0.1, 0.1])
    assert m3.attach_end == (False, False, False)
    np.testing.assert_allclose(m3.replace(length=[1.0, 1.0, 1.0]).joint_attach, [0.0, 0.1, 0.1])


def test_gradient_with_respect_to_length_moves_the_joints():
    m = _chain()
    q, qd, qdd = jnp.array([0.3, 0.5, 0.2]), jnp.array([1.0, -2.0, 0.5]), jnp.array([0.5, 3.0, 1.0])
    f = lambda model: jnp.sum(jaxmb.inverse_dynamics(model, q, qd, qdd) ** 2)  # noqa: E731
    g = jax.grad(f)(m)
    # the last segment's length moves no joint; the first two move the joints below them
    assert abs(g.length[0]) > 1e-3 and abs(g.length[1]) > 1e-3 and g.length[2] == 0
    np.testing.assert_allclose(g.attach, 0.0)  # the leaf is unused where attach_end
    h = 1e-6
    for i in range(2):
        e = np.zeros(3)
        e[i] = h
        fd = (f(m.replace(length=m.length + e)) - f(m.replace(length=m.length - e))) / (2 * h)
        np.testing.assert_allclose(g.length[i], fd, rtol=1e-6)


def test_none_entries_of_attach_follow_the_parents_length():
    # a tree mixing a joint at the parent's distal end (None) with an explicit one:
    # before, None was refused as "attach of segment 1 is not finite: nan"
    m = jaxmb.tree([-1, 0, 0], [0.5, 0.3, 0.3], [0.2, 0.1, 0.1], [3.0, 1.0, 1.0], [0.1, 0.01, 0.01],
                   attach=[None, None, 0.1])  # fmt: skip
    assert m.attach_end == (False, True, False)
    np.testing.assert_allclose(m.replace(length=[0.7, 0.3, 0.3]).joint_attach, [0.0, 0.7, 0.1])
    # replace(attach=...): numbers stay put, None stays at the distal end
    m2 = _chain().replace(attach=[0.0, None, 0.1])
    assert m2.attach_end == (False, True, False)
    np.testing.assert_allclose(m2.replace(length=[0.5, 0.5, 0.5]).joint_attach, [0.0, 0.5, 0.1])
    with pytest.raises(ValueError, match="attach must have 3 entries"):
        jaxmb.tree([-1, 0, 0], [0.5, 0.3, 0.3], 0.1, [3.0, 1.0, 1.0], [0.1, 0.01, 0.01], attach=[None, 0.1])


def test_human_joints_follow_the_segment_lengths():
    # seven_segment_human stored every joint as a number equal to its parent's
    # length: a longer thigh left the knee where it was, and the gradient of any
    # result with respect to the lengths was zero (all of it went to attach)
    h = jaxmb.seven_segment_human()
    assert h.attach_end == (False, False, True, True, True, True, True)
    L = np.asarray(h.length)
    longer = h.replace(length=h.length.at[1].mul(1.2))
    np.testing.assert_allclose(longer.joint_attach[2], 1.2 * L[1], rtol=1e-15)  # the knee
    q = jnp.linspace(0.1, 0.9, 9)
    f = lambda lengths: jnp.sum(jaxmb.joint_reactions(h.replace(length=lengths), q, q, 0 * q) ** 2)  # noqa: E731
    g = np.asarray(jax.grad(f)(h.length))
    step = 1e-6
    for i in range(7):
        e = np.zeros(7)
        e[i] = step
        fd = (f(h.length + e) - f(h.length - e)) / (2 * step)
        np.testing.assert_allclose(g[i], fd, rtol=1e-6, atol=1e-6)
    # trunk, thigh, shank and upper arm carry joints at their distal ends; foot, head and
    # forearm none
    assert np.all(np.abs(g[[0, 1, 2, 5]]) > 100) and np.all(g[[3, 4, 6]] == 0)


def test_index_accepts_any_integer_scalar():
    # NumPy ints worked but JAX integer scalars (e.g. the elements of jnp.array([0, 2]))
    # did not; floats, bools, arrays of several values and traced values still fail
    m = _chain()
    for i in (2, -1, np.int64(2), np.array(2), jnp.asarray(2), jnp.int32(-1), jnp.asarray([2])[0]):
        assert m.index(i) == 2
    for bad in (2.0, jnp.asarray(2.0), True, np.bool_(True), jnp.asarray(True), np.array([2]), None):
        with pytest.raises(ValueError, match="a segment is given by an int index or a str name"):
            m.index(bad)
    with pytest.raises(ValueError, match="segment index 3 out of range"):
        m.index(jnp.asarray(3))
    with pytest.raises(ValueError, match="must be concrete"):
        jax.jit(m.index)(2)
    q = jnp.array([0.3, 0.5, 0.2])
    lam = jaxmb.joint_reactions(m, q, q, q)
    np.testing.assert_array_equal(jaxmb.joint_reactions(m, q, q, q, joints=jnp.array([0, 2])), np.asarray(lam)[[0, 2]])


def test_ragged_or_non_numeric_fields_name_the_field():
    # NumPy's own message ("setting an array element with a sequence") named nothing
    args = dict(length=[0.3, 0.25], com=[0.13, 0.10], mass=[2.0, 1.5], inertia=[0.02, 0.01])
    for field, value in (("com", [(0.13, 0.01), (0.10,)]), ("length", [[0.3, 0.2], [0.25]]),
                         ("mass", ["two", 1.5]), ("origin", [0.0, [1.0]])):  # fmt: skip
        with pytest.raises(ValueError, match=rf"^{field} must be a rectangular array of numbers"):
            jaxmb.chain(**{**args, field: value})
    with pytest.raises(ValueError, match=r"^parent must be a rectangular array"):
        jaxmb.tree([-1, [0]], [0.3, 0.25], 0.1, [2.0, 1.5], [0.02, 0.01])


def test_chain_names_every_list_length_when_they_disagree():
    # the count of segments comes from length: the message blamed mass when length
    # was the short one
    with pytest.raises(ValueError, match="one value per segment, got length 2, com 3, mass 3, inertia 3"):
        jaxmb.chain(length=[0.3, 0.27], com=[0.13, 0.12, 0.07], mass=[2, 1.2, 0.4], inertia=[0.016, 0.008, 0.001])
    # scalars broadcast and a (n, 2) com is one row per segment: no false alarm
    assert jaxmb.chain([0.3, 0.27], [[0.13, 0.0], [0.12, 0.01]], 2.0, [0.016, 0.008]).segments == 2


def test_a_float32_model_used_at_float64_warns():
    # a model made before jax_enable_x64 is float32: used with float64 inputs its
    # parameters keep float32's rounding, silently before this warning
    m32 = jaxmb.chain([0.3, 0.27], [0.13, 0.12], [2.0, 1.2], [0.016, 0.008]).astype(np.float32)
    q = np.ones(2)
    with pytest.warns(UserWarning, match="parameters are float32 and are used at float64"):
        tau = jaxmb.inverse_dynamics(m32, q, q, q)
    assert tau.dtype == np.float64
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # float32 inputs, or a float64 model: no warning
        jaxmb.inverse_dynamics(m32, q.astype(np.float32), q.astype(np.float32), q.astype(np.float32))
        jaxmb.inverse_dynamics(jaxmb.chain([0.3, 0.27], [0.13, 0.12], [2.0, 1.2], [0.016, 0.008]), q, q, q)


def test_a_model_made_directly_is_checked():
    # Model(...) bypasses chain/tree: a cycle in parent hung ancestor_matrix forever
    # and an unknown base ran as a fixed one. Its arrays are not checked (gradients
    # are Models too, with any values): chain and tree check them
    kw = dict(length=jnp.array([0.3, 0.27]), com=jnp.zeros((2, 2)), inertia=jnp.array([0.01, 0.01]),
              attach=jnp.array([0.0, 0.3]), origin=jnp.zeros(2), gravity=jnp.array(9.81), names=("a", "b"),
              mass=jnp.array([1.0, 1.0]))  # fmt: skip
    ok = jaxmb.Model(parent=(-1, 0), **kw)
    assert ok.segments == 2
    for bad, match in ((dict(parent=(-1, 1)), "parents must come before their children"),
                       (dict(parent=(-1, 0), base="flying"), "base must be one of"),
                       (dict(parent=[-1, 0]), "parent and names must be tuples"),
                       (dict(parent=(-1, 0), names=("a", "a")), "duplicate segment name 'a'")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            jaxmb.Model(**{**kw, **bad})
    # the builders: float parent indices were truncated (0.9 -> 0), a str was split
    # into one-letter names, a negative gravity flipped the gravity terms
    with pytest.raises(ValueError, match="parent must hold integer indices"):
        jaxmb.tree([-1, 0.9, 1.9], [1, 1, 1], [0.5, 0.5, 0.5], [1, 1, 1], [1, 1, 1])
    with pytest.raises(ValueError, match="names must be a sequence of 2 segment names, got the str 'ab'"):
        jaxmb.chain([0.3, 0.27], [0.13, 0.12], [2.0, 1.2], [0.016, 0.008], names="ab")
    with pytest.raises(ValueError, match="gravity is the magnitude g >= 0"):
        jaxmb.chain([0.3, 0.27], [0.13, 0.12], [2.0, 1.2], [0.016, 0.008], gravity=-9.81)
    # a stack of models (leading axis) and models of tracers pass
    stacked = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), ok, ok)
    assert stacked.mass.shape == (2, 2)
    assert jax.jit(lambda m: m.replace(mass=2 * m.mass).mass)(ok).shape == (2,)
    assert jax.jit(lambda m: m.replace(mass=2 * m.mass, com=m.com).mass)(stacked).shape == (2, 2)


def test_traced_parameters_are_shape_checked_and_broadcast_like_numbers():
    # under jit, grad or vmap a parameter's values are unknown but its shape is not:
    # before, a (2,) mass of a 3-segment model was read past its end (clamped to
    # [1, 2, 2]) under jit, and a scalar inertia or a (n,) com, accepted in a direct
    # call, failed with an IndexError deep in the kernel under grad
    arm = jaxmb.chain([0.3, 0.27, 0.19], [0.13, 0.12, 0.07], [2.0, 1.2, 0.4], [0.016, 0.008, 0.001])
    q, qd, qdd = jnp.array([0.3, -0.2, 0.5]), jnp.array([1.0, -0.5, 0.3]), jnp.array([2.0, 1.0, -1.0])

    def loss(m):
        return jnp.sum(jaxmb.inverse_dynamics(m, q, qd, qdd) ** 2)

    with pytest.raises(ValueError, match=r"mass must have shape \(3,\) \(one value per segment\), got shape \(2,\)"):
        jax.jit(lambda m: loss(arm.replace(mass=m)))(jnp.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"com must have shape \(3,\) .* or \(3, 2\)"):
        jax.jit(lambda c: loss(arm.replace(com=c)))(jnp.ones((3, 3)))
    # a scalar inertia: every segment's; a (n,) com: distances along the axes
    g = jax.grad(lambda i: loss(arm.replace(inertia=i)))(0.01)
    g_all = jax.grad(lambda i: loss(arm.replace(inertia=i)))(jnp.full(3, 0.01))
    np.testing.assert_allclose(g, jnp.sum(g_all), rtol=1e-12)
    c = jnp.array([0.13, 0.12, 0.07])
    g = jax.grad(lambda c: loss(arm.replace(com=c)))(c)
    g2 = jax.grad(lambda c2: loss(arm.replace(com=c2)))(jnp.stack([c, jnp.zeros(3)], 1))
    np.testing.assert_allclose(g, g2[:, 0], rtol=1e-12)
    # a list holding a traced number, in chain: the gradient of the first length
    f = lambda L: loss(jaxmb.chain([L, 0.27, 0.19], [0.13, 0.12, 0.07], [2.0, 1.2, 0.4],  # noqa: E731
                                   [0.016, 0.008, 0.001]))  # fmt: skip
    eps = 1e-6
    np.testing.assert_allclose(jax.grad(f)(0.3), (f(0.3 + eps) - f(0.3 - eps)) / (2 * eps), rtol=1e-6)
    # the anthropometric models are built eagerly: a traced body mass says so
    with pytest.raises(ValueError, match="body_mass must be a concrete number in kg, got a traced value"):
        jax.grad(lambda M: jnp.sum(jaxmb.seven_segment_human(body_mass=M).mass))(70.0)
