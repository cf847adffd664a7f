"""jaxmb.sharded (issues 4 and 8): the batch split across devices, results unchanged.

Four CPU devices are simulated in a subprocess (``XLA_FLAGS`` must be set before JAX
starts): the sharded inverse dynamics, reactions and a two-output pipeline must put
one block of the batch on each device and return what one device computes; array
keyword arguments (per-sample loads) are split like positional ones, and bad input
raises the unsharded call's error before dispatch.
"""

import functools
import json
import os
import re
import subprocess
import sys
import textwrap

import jax
import numpy as np
import pytest
from jax.sharding import Mesh

import jaxmb
from jaxmb.sharding import batch_mesh, sharded

# Each device runs the very program that one jitted device runs on that block, so the
# blocks agree bit for bit. Against one device computing the whole batch at once the
# vectorised loop is split differently (blocks of 16 against 64 samples: other
# elements fall in the scalar remainder loop, which may round differently), so allow
# a few ulp of the largest moment (~1e3 N m).
WHOLE_ATOL = 1e-12

SCRIPT = textwrap.dedent(
    """
    import json
    import jax, numpy as np
    jax.config.update("jax_enable_x64", True)
    import jaxmb
    from jaxmb.sharding import sharded

    inverse = jaxmb.inverse_dynamics
    reactions = jaxmb.joint_reactions

    model = jaxmb.three_segment_leg(1.75, 70.0)  # small: the test is about the sharding, not the model
    rng = np.random.default_rng(0)
    B, ndev = 64, len(jax.devices())
    q, qd, qdd = (rng.standard_normal((B, model.dof)) for _ in range(3))

    def pipeline(model, q, qd, qdd):  # moments and segment-frame reactions together
        return (jaxmb.joint_moments(model, q, qd, qdd),
                jaxmb.joint_reactions(model, q, qd, qdd, frame="segment"))

    def inverse_last(model, q, qd, qdd):  # (dof, B) arrays: batch last
        return jaxmb.inverse_dynamics(model, q.T, qd.T, qdd.T).T

    def blocks(fn, *xs, axis=0):  # one device, block by block, concatenated
        fn = jax.jit(fn)
        parts = [fn(model, *[np.split(x, ndev, axis=axis)[k] for x in xs]) for k in range(ndev)]
        return jax.tree_util.tree_map(lambda *p: np.concatenate(p, axis=axis), *parts)

    out = {"devices": ndev, "dof": model.dof, "cases": {}}
    cases = {
        "inverse": (sharded(inverse), inverse, (q, qd, qdd), 0),
        "reactions": (sharded(reactions), reactions, (q, qd, qdd), 0),
        "pipeline": (sharded(pipeline), pipeline, (q, qd, qdd), 0),
        "batch_last": (sharded(inverse_last, batch_axis=-1), inverse_last, (q.T, qd.T, qdd.T), -1),
    }
    for name, (fn_sharded, fn, xs, axis) in cases.items():
        got = fn_sharded(model, *xs)
        leaves = jax.tree_util.tree_leaves(got)
        block = jax.tree_util.tree_leaves(blocks(fn, *xs, axis=axis))
        whole = jax.tree_util.tree_leaves(jax.jit(fn)(model, *xs))
        out["cases"][name] = {
            "shard_devices": [sorted(s.device.id for s in x.addressable_shards) for x in leaves],
            "shard_shapes": [sorted({s.data.shape for s in x.addressable_shards}) for x in leaves],
            "shapes": [x.shape for x in leaves],
            "specs": [str(x.sharding.spec) for x in leaves],
            "equal_blocks": all(np.array_equal(np.asarray(a), b) for a, b in zip(leaves, block)),
            "max_diff_whole": max(float(np.abs(np.asarray(a) - np.asarray(b)).max()) for a, b in zip(leaves, whole)),
        }
    # 30 samples on 4 devices: padded, split, cut
    got = sharded(inverse)(model, q[:30], qd[:30], qdd[:30])
    out["uneven_max_diff"] = float(np.abs(np.asarray(got) - np.asarray(inverse(model, q[:30], qd[:30], qdd[:30]))).max())
    out["uneven_shape"] = got.shape
    # per-sample loads given by keyword are split with the batch, padded like it (each
    # device once paired its block of q with the whole loads: silently wrong)
    L = rng.standard_normal((B, model.segments, 3))
    got = sharded(inverse)(model, q[:30], qd[:30], qdd[:30], loads=L[:30])
    ref = inverse(model, q[:30], qd[:30], qdd[:30], loads=L[:30])
    out["kw_loads_max_diff"] = float(np.abs(np.asarray(got) - np.asarray(ref)).max())
    # errors are those of the unsharded call: checked on the whole batch before dispatch
    bad_q = q.copy()
    bad_q[37, 1] = np.nan
    bad_L = L.copy()
    bad_L[50, 2, 0] = np.inf
    calls = {
        "nan": lambda f: f(model, bad_q, qd, qdd),
        "inf_loads": lambda f: f(model, q, qd, qdd, loads=bad_L),
        "dof": lambda f: f(model, q[:, 1:], qd[:, 1:], qdd[:, 1:]),
    }
    out["errors"] = {}
    for key, call in calls.items():
        msgs = []
        for f in (sharded(inverse), inverse):
            try:
                call(f)
                msgs.append(None)
            except ValueError as e:
                msgs.append(str(e))
        out["errors"][key] = msgs
    # an output axis that only equals the batch size (simulate's q, (steps + 1, B, dof),
    # with steps + 1 == B = 8) and a single sample (dof,) read as a batch of dof: each
    # returned a wrong result (shapes (32, 3, 3) and (4, ...)) or a block's error
    def trajectory(model, q0, qd0):
        return jaxmb.simulate(model, q0, qd0, 0.0, 0.01, steps=7).q

    out["block_errors"] = {}
    for key, call in {"steps_equal_batch": lambda: sharded(trajectory)(model, q[:8], qd[:8]),
                      "single_sample": lambda: sharded(inverse)(model, q[0], qd[0], qdd[0])}.items():
        try:
            out["block_errors"][key] = "no error, shape " + str(call().shape)
        except ValueError as e:
            out["block_errors"][key] = str(e)
    # the gradient of a loss over the sharded batch: each device sums its block
    # (the hand-derived adjoint, and JAX's reverse mode), the blocks are summed
    import jax.numpy as jnp
    out["gradient_rel_diff"] = {}
    for g in ("adjoint", "autodiff"):
        f = sharded(lambda m, *x: inverse(m, *x, gradient=g))
        gs = jax.jit(jax.grad(lambda m: jnp.sum(f(m, q, qd, qdd) ** 2)))(model)
        g1 = jax.jit(jax.grad(lambda m: jnp.sum(inverse(m, q, qd, qdd, gradient=g) ** 2)))(model)
        out["gradient_rel_diff"][g] = max(
            float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(1.0, np.abs(np.asarray(b)).max()))
            for a, b in zip(jax.tree_util.tree_leaves(gs), jax.tree_util.tree_leaves(g1)))
    print("RESULT" + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def four_devices():
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=4", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


def test_batch_really_split_over_four_devices(four_devices):
    assert four_devices["devices"] == 4
    for name, case in four_devices["cases"].items():
        for devices, shard_shapes, shape, spec in zip(
            case["shard_devices"], case["shard_shapes"], case["shapes"], case["specs"]
        ):
            assert devices == [0, 1, 2, 3], name  # one shard on each device
            # every shard holds a quarter of the batch, 64 / 4 = 16 samples
            axis = -1 if name == "batch_last" else 0
            expected = list(shape)
            expected[axis] = shape[axis] // 4
            assert shard_shapes == [expected], (name, shard_shapes, shape)
            assert "batch" in spec, (name, spec)


def test_sharded_results_equal_one_device(four_devices):
    for name, case in four_devices["cases"].items():
        assert case["equal_blocks"], name
        assert case["max_diff_whole"] <= WHOLE_ATOL, (name, case["max_diff_whole"])
    assert four_devices["uneven_shape"] == [30, four_devices["dof"]]
    assert four_devices["uneven_max_diff"] <= WHOLE_ATOL


def test_single_device_and_validation(monkeypatch):
    model = jaxmb.chain([0.4, 0.3], 0.2, [2.0, 1.5], [0.03, 0.02])
    rng = np.random.default_rng(3)
    q, qd, qdd = (rng.standard_normal((8, 2)) for _ in range(3))
    mesh = batch_mesh(jax.devices()[:1])
    got = sharded(jaxmb.inverse_dynamics, mesh)(model, q, qd, qdd)
    np.testing.assert_allclose(got, jaxmb.inverse_dynamics(model, q, qd, qdd), rtol=0, atol=WHOLE_ATOL)
    with pytest.raises(ValueError, match="one-dimensional"):
        sharded(jaxmb.inverse_dynamics, Mesh(np.asarray(jax.devices()[:1]).reshape(1, 1), ("a", "b")))
    with pytest.raises(ValueError, match="no batched argument"):
        sharded(lambda m: m.mass)(model)
    with pytest.raises(ValueError, match="same batch size"):
        sharded(jaxmb.inverse_dynamics)(model, q, qd, qdd[:4])
    with pytest.raises(ValueError, match="batch_axis"):
        sharded(jaxmb.inverse_dynamics, batch_axis=1)
    # before: accepted, and a TypeError at the call
    with pytest.raises(ValueError, match="batch_axis must be the int 0 or -1, got 0.0"):
        sharded(jaxmb.inverse_dynamics, batch_axis=0.0)
    # before: an AttributeError ('str' object has no attribute 'axis_names')
    with pytest.raises(ValueError, match="mesh must be a jax.sharding.Mesh .* got 'cpu'"):
        sharded(jaxmb.inverse_dynamics, "cpu")
    # a keyword array is a batch: one shared by every sample belongs in a partial
    shared = np.ones((model.segments, 3))
    with pytest.raises(ValueError, match=r"same batch size on axis 0, got q \(8, 2\), .*loads \(2, 3\).*partial"):
        sharded(jaxmb.inverse_dynamics, mesh)(model, q, qd, qdd, loads=shared)
    got = sharded(functools.partial(jaxmb.inverse_dynamics, loads=shared), mesh)(model, q, qd, qdd)
    np.testing.assert_allclose(got, jaxmb.inverse_dynamics(model, q, qd, qdd, loads=shared), rtol=0, atol=WHOLE_ATOL)
    # non-array keywords stay static options; validate=False lets NaN through
    lam = sharded(jaxmb.joint_reactions, mesh)(model, q, qd, qdd, joints=[1], frame="segment")
    np.testing.assert_allclose(lam, jaxmb.joint_reactions(model, q, qd, qdd, joints=[1], frame="segment"),
                               rtol=0, atol=WHOLE_ATOL)  # fmt: skip
    # an output without the batch on the batch axis (a reduced value; a batch on
    # another axis, as simulate's q) is refused: it gave one device's block, silently
    import jax.numpy as jnp

    with pytest.raises(ValueError, match=r"the output has shape \(\) for a batch of 8: every output must carry"):
        sharded(lambda m, *x: jnp.mean(jaxmb.inverse_dynamics(m, *x) ** 2), mesh)(model, q, qd, qdd)
    with pytest.raises(ValueError, match=r"\[1\] has shape \(3, 8, 2\) for a batch of 8"):
        sharded(lambda m, x: (x, jnp.stack([x, x, x])), mesh)(model, q)
    # a positional list of numbers is an array, as for the core functions; a nested
    # keyword list is refused (an array or a static option?)
    got = sharded(jaxmb.inverse_dynamics, mesh)(model, q.tolist(), qd, qdd)
    np.testing.assert_allclose(got, jaxmb.inverse_dynamics(model, q, qd, qdd), rtol=0, atol=WHOLE_ATOL)
    with pytest.raises(ValueError, match="loads= is a nested list: give an array"):
        sharded(jaxmb.inverse_dynamics, mesh)(model, q, qd, qdd, loads=np.zeros((8, 2, 3)).tolist())
    # a model given by keyword is replicated data, not a static option: the second
    # call reuses the compiled function (it traced and compiled anew: 0.28 s a call)
    import jaxmb.sharding as js

    builds, build = [], js._build
    monkeypatch.setattr(js, "_build", lambda *a: builds.append(1) or build(*a))
    ids = sharded(jaxmb.inverse_dynamics, mesh)
    for scale in (1.0, 2.0):
        m2 = model.replace(mass=model.mass * scale)
        got = ids(model=m2, q=q, qd=qd, qdd=qdd)
        np.testing.assert_allclose(got, jaxmb.inverse_dynamics(m2, q, qd, qdd), rtol=0, atol=WHOLE_ATOL)
    assert len(builds) == 1
    nan_q = q.copy()
    nan_q[3, 0] = np.nan
    with pytest.raises(ValueError, match=r"q is not finite at index \(3, 0\)"):
        sharded(jaxmb.inverse_dynamics, mesh)(model, nan_q, qd, qdd)
    out = sharded(jaxmb.inverse_dynamics, mesh, validate=False)(model, nan_q, qd, qdd)
    assert np.isnan(np.asarray(out)[3]).all() and np.isfinite(np.asarray(out)[:3]).all()
    # an angle beyond the kernels' range: the unsharded call's error (the shards,
    # traced, would give NaN)
    big_q = q.copy()
    big_q[5, model.nbase] = 1e17
    with pytest.raises(ValueError) as want:
        jaxmb.inverse_dynamics(model, big_q, qd, qdd)
    with pytest.raises(ValueError) as got:
        sharded(jaxmb.inverse_dynamics, mesh)(model, big_q, qd, qdd)
    assert str(got.value) == str(want.value) and "q has an angle of 1e+17 rad" in str(want.value)


def test_keyword_batches_are_split_and_errors_are_the_unsharded_ones(four_devices):
    # loads=L (B, segments, 3) is a batch like the positional arrays (30 samples:
    # padded to 32 and split over the 4 devices)
    assert four_devices["kw_loads_max_diff"] <= WHOLE_ATOL
    # a NaN (in q or in keyword loads) and a wrong dof raise what the unsharded call
    # raises, quoting the whole batch (not a device's block of 16 samples)
    errors = four_devices["errors"]
    dof = four_devices["dof"]
    assert errors["nan"][0] == errors["nan"][1] == "q is not finite at index (37, 1): nan"
    assert errors["inf_loads"][0] == errors["inf_loads"][1] == "loads is not finite at index (50, 2, 0): inf"
    assert errors["dof"][0] == errors["dof"][1] and f"got shape (64, {dof - 1})" in errors["dof"][0]


def test_outputs_and_inputs_are_checked_on_a_block_too(four_devices):
    dof = four_devices["dof"]
    err = four_devices["block_errors"]
    assert err["steps_equal_batch"].startswith(
        f"sharded: the output has shape (8, 8, {dof}) for a batch of 8 and (8, 2, {dof}) for a block of 2: "
        "every output must carry the batch on axis 0"), err["steps_equal_batch"]
    assert re.match(rf"sharded: the function takes the whole batch of {dof} but not one device's block of 1 "
                    r"samples \(q must have shape .* got shape \(1,\)\): is axis 0 of every batched array its "
                    "batch axis", err["single_sample"]), err["single_sample"]


def test_gradient_through_sharded_batch(four_devices):
    # jax.grad of a loss over the sharded batch equals the one-device gradient:
    # shard_map sums the per-device parameter cotangents.
    assert set(four_devices["gradient_rel_diff"]) == {"adjoint", "autodiff"}
    for g, diff in four_devices["gradient_rel_diff"].items():
        assert diff <= 1e-12, (g, diff)
