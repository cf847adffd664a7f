"""jaxmb.gait.analyze on large batches (issue 39): the compiled pipeline runs a few
trials a step into result arrays allocated once (no whole-batch buffers), with the
same values as each trial alone; ``out=`` writes the results to memory-mapped files."""

import functools

import numpy as np
import pytest

from jaxmb import gait, signal
from jaxmb.gait import _pipeline, _steps

FRAMES = 121  # the running trial at 200 Hz
STEP = 8  # trials per compiled call in these tests (the steps' samples set to match)


@pytest.fixture(scope="module")
def trials():
    """19 perturbed copies of the running trial at 200 Hz (two full steps of 8 trials
    and a last one of 3), as benchmarks/bench_gait.py makes them at 10 kHz."""
    d = gait.running_data()
    rng = np.random.default_rng(1)
    n = 19
    shift = rng.normal(scale=0.02, size=(n, 1, 2))
    stretch = rng.uniform(0.97, 1.03, size=(n, 1, 1))
    gain = rng.uniform(0.95, 1.05, size=(n, 1, 1))
    sub = slice(None, None, 50)
    pts = {k: getattr(d, k)[sub][None] * stretch + shift for k in ("hip", "knee", "ankle", "toe")}
    force = d.force[sub][None] * gain
    cop = d.cop[sub][None] * stretch[..., 0] + shift[..., 0]
    kw = dict(rate=d.rate / 50, segments=d.segments, gravity=d.gravity, cutoff=15.0)
    return pts, force, cop, kw


@pytest.fixture
def steps(monkeypatch):
    """Every compiled call's number of trials, with steps of STEP trials."""
    monkeypatch.setattr(_steps, "_step_trials", functools.partial(_steps._step_trials, samples=FRAMES * STEP))
    calls = []
    jitted = _pipeline._jitted

    def recording(**static):
        fn = jitted(**static)

        def call(*args):
            calls.append(args[1].shape[0])  # the force (trials, samples, 2)
            return fn(*args)

        return call

    monkeypatch.setattr(_pipeline, "_jitted", recording)
    return calls


def _alone(pts, force, cop, kw, b, n=FRAMES, **more):
    return gait.analyze(**{k: v[b, :n] for k, v in pts.items()}, force=force[b, :n], cop=cop[b, :n], **kw, **more)


def test_batch_runs_in_bounded_steps_with_each_trials_values(trials, steps):
    pts, force, cop, kw = trials
    got = gait.analyze(**pts, force=force, cop=cop, **kw)
    # three calls of at most STEP trials (the last padded to STEP: one compiled shape),
    # never one call of the whole batch (whose outputs were allocated afresh)
    assert steps == [STEP, STEP, STEP]
    for b in (0, 7, 8, 16, 18):  # the first and last trial of each step
        one = _alone(pts, force, cop, kw, b)
        for name in gait.OUTPUTS:
            ref = getattr(one, name)
            np.testing.assert_allclose(getattr(got, name)[b], ref, rtol=0, atol=1e-9 * np.abs(ref).max(), err_msg=name)
        np.testing.assert_allclose(got.segments["length"][b], one.segments["length"], rtol=1e-12)
    assert got.moments.flags.writeable  # the result's own arrays (XLA's were read-only)


def test_padded_batch_in_steps_is_nan_past_its_frames(trials, steps):
    # padded arrays with frames= (one length, shorter than the arrays): the samples
    # past it NaN, the rest as the trial alone
    pts, force, cop, kw = trials
    n = 110
    got = gait.analyze(**pts, force=force, cop=cop, frames=np.full(19, n), **kw, outputs=("moments", "reactions"))
    assert steps == [STEP, STEP, STEP]
    assert np.isnan(got.moments[:, n:]).all() and np.isnan(got.reactions[:, n:]).all()
    one = _alone(pts, force, cop, kw, 18, n, outputs=("moments", "reactions"))
    ref = one.moments
    np.testing.assert_allclose(got.moments[18, :n], ref, rtol=0, atol=1e-9 * np.abs(ref).max())


def test_out_writes_memory_mapped_files(trials, steps, tmp_path):
    pts, force, cop, kw = trials
    outs = ("moments", "reactions", "angles")
    ref = gait.analyze(**pts, force=force, cop=cop, **kw, outputs=outs, convention="clinical")
    folder = tmp_path / "results"
    got = gait.analyze(**pts, force=force, cop=cop, **kw, outputs=outs, convention="clinical", out=folder)
    assert sorted(p.name for p in folder.iterdir()) == ["angles.npy", "moments.npy", "reactions.npy"]
    for name in outs:
        assert isinstance(getattr(got, name), np.memmap), name
        np.testing.assert_array_equal(getattr(got, name), getattr(ref, name))
        np.testing.assert_array_equal(np.load(folder / f"{name}.npy"), getattr(ref, name))  # clinical, in the file
    assert got.convention == "clinical" and got.powers is None


def test_out_with_terms_names_each_terms_file(trials, steps, tmp_path):
    pts, force, cop, kw = trials
    few = {k: v[:3] for k, v in pts.items()}
    got = gait.analyze(**few, force=force[:3], cop=cop[:3], **kw, outputs="moments", terms=True, out=tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert {f"terms_{t}_{x}.npy" for t in gait.TERMS for x in ("moments", "reactions")} <= names
    np.testing.assert_array_equal(np.load(tmp_path / "terms_gravity_moments.npy"), got.terms["gravity"][0])


def test_out_error_leaves_no_file(trials, steps, tmp_path):
    pts, force, cop, kw = trials
    bad = {k: v.copy() for k, v in pts.items()}
    bad["knee"][17] = bad["hip"][17]  # a thigh of zero length: found after the computation
    folder = tmp_path / "results"
    with pytest.raises(ValueError, match=r"the thigh has zero length \(trial 17\)"):
        gait.analyze(**bad, force=force, cop=cop, **kw, outputs="moments", out=folder)
    assert list(folder.iterdir()) == []  # no .npy, no .npy.partial


def test_out_refuses_a_file_and_ragged_trials(trials, tmp_path):
    pts, force, cop, kw = trials
    f = tmp_path / "moments.npy"
    f.write_bytes(b"")
    with pytest.raises(ValueError, match=r"out=.*moments\.npy' is a file: give a folder"):
        gait.analyze(**pts, force=force, cop=cop, **kw, out=f)
    with pytest.raises(ValueError, match=r"out must be None or a folder"):
        gait.analyze(**pts, force=force, cop=cop, **kw, out=3)
    lists = {k: [v[0], v[1, :100]] for k, v in pts.items()}
    with pytest.raises(ValueError, match=r"out= takes trials of one length and cut-off; these come in 2 groups"):
        gait.analyze(**lists, force=[force[0], force[1, :100]], cop=[cop[0], cop[1, :100]], **kw, out=tmp_path / "r")
    assert not (tmp_path / "r").exists() or list((tmp_path / "r").iterdir()) == []


def _scan_lengths(jaxpr):
    """The lengths of every lax.scan in a jaxpr, nested ones included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan":
            out.append(eqn.params["length"])
        for v in eqn.params.values():
            inner = getattr(v, "jaxpr", None)
            if inner is not None:
                out += _scan_lengths(getattr(inner, "jaxpr", inner))
    return out


def test_filter_pads_cost_no_pass_over_them():
    # the pipeline's filter (method "blocked", blocks of 32) at 10 kHz, 15 Hz: padlen
    # "auto" is 1,383 samples at each end; only the states the pads leave are used,
    # so neither pass runs over them (the forward pass ran over the right pad: 231
    # blocks instead of 188), and the result is scipy's
    import jax
    import scipy.signal as ss

    from jaxmb.signal import lowpass_jax

    rate, cut, n = 10000.0, 15.0, 6001
    sos = ss.butter(2, cut / (rate / 2), output="sos")
    pad = signal.settling_samples(sos)
    assert pad == 1383
    x = np.cumsum(np.random.default_rng(3).normal(size=(n, 3)), 0)

    def f(x):
        return lowpass_jax(x, rate, cut, 2, padlen="auto", method="blocked", block=32)

    lengths = _scan_lengths(jax.make_jaxpr(f)(x).jaxpr)
    assert lengths == [-(-n // 32)] * 2  # forward and backward: the signal's blocks only
    ref = ss.sosfiltfilt(sos, x, axis=0, padlen=pad)
    np.testing.assert_allclose(np.asarray(jax.jit(f)(x)), ref, rtol=0, atol=1e-11 * np.abs(ref).max())
    # a length that is not a multiple of the block (the state after the last, partial block)
    ref = ss.sosfiltfilt(sos, x[:5000], axis=0, padlen=pad)
    np.testing.assert_allclose(np.asarray(jax.jit(f)(x[:5000])), ref, rtol=0, atol=1e-11 * np.abs(ref).max())


def test_out_interrupted_between_steps_leaves_no_file(trials, monkeypatch, tmp_path):
    pts, force, cop, kw = trials
    monkeypatch.setattr(_steps, "_step_trials", functools.partial(_steps._step_trials, samples=FRAMES * STEP))
    jitted, calls = _pipeline._jitted, []

    def interrupted(**static):
        fn = jitted(**static)

        def call(*args):
            calls.append(1)
            if len(calls) == 3:  # the first step is in the files by now
                raise KeyboardInterrupt
            return fn(*args)

        return call

    monkeypatch.setattr(_pipeline, "_jitted", interrupted)
    folder = tmp_path / "results"
    with pytest.raises(KeyboardInterrupt):
        gait.analyze(**pts, force=force, cop=cop, **kw, outputs="moments", out=folder)
    assert len(calls) == 3 and list(folder.iterdir()) == []


def test_dropped_results_memory_is_reused_and_never_shared(trials, steps):
    """analyze's per-sample result arrays lie over maps that come back for the next
    call only when no array or view over them is left: the next result takes the
    same pages (no fresh page faults) with the same values, and a view kept from an
    earlier result keeps its map (and its values) out of reach."""
    pts, force, cop, kw = trials
    outs = ("moments", "reactions")
    _steps.release_memory()
    first = gait.analyze(**pts, force=force, cop=cop, **kw, outputs=outs)
    ref = {k: getattr(first, k).copy() for k in outs}
    where = first.moments.ctypes.data
    kept = first.reactions[3]  # a view: the reactions' map stays with it
    kept_ref = kept.copy()
    del first
    again = gait.analyze(**pts, force=force, cop=cop, **kw, outputs=outs)
    assert again.moments.ctypes.data == where  # the dropped moments' map, reused
    assert not np.shares_memory(again.reactions, kept)
    for k in outs:
        np.testing.assert_array_equal(getattr(again, k), ref[k])
    np.testing.assert_array_equal(kept, kept_ref)
    # what is kept: the dropped arrays only, at most one result's bytes
    del again
    assert 0 < _steps._MEMORY.release() <= _steps._MEMORY._limit
    assert _steps.release_memory() == 0  # nothing left
    del kept
    assert 0 < _steps.release_memory() <= ref["reactions"].nbytes


def test_dropped_result_memory_kept_up_to_one_result():
    from jaxmb.gait._steps import _ResultMemory

    pool = _ResultMemory()
    pool.call_bytes(3 * 8 * 2**20)  # a result of 3 arrays of 8 MiB
    arrays = [pool.empty((2**20,), np.float64) for _ in range(5)]
    for a in arrays:
        a[:] = 1.0
    del a
    arrays.clear()  # five dropped: the oldest two unmapped
    assert pool.release() == 3 * 8 * 2**20
    b = pool.empty((3, 5), np.float32)
    assert b.flags.c_contiguous and b.flags.writeable and b.dtype == np.float32 and b.shape == (3, 5)


def test_result_dropped_while_the_memory_is_busy_waits_for_no_lock():
    # a finalizer runs wherever the last reference goes: in another thread, or in a
    # garbage collection inside the pool's own critical section. It must not wait for
    # the lock (a deadlock in the second case); the map joins the kept ones later.
    from jaxmb.gait._steps import _ResultMemory

    pool = _ResultMemory()
    pool.call_bytes(2**20)
    a = pool.empty((2**17,), np.float64)
    with pool._lock:
        del a  # the finalizer runs here, the lock held
        assert len(pool._returned) == 1 and not pool._free
    b = pool.empty((2**17,), np.float64)  # takes the given-back map
    assert not pool._returned and not pool._free
    del b
    assert pool.release() == 2**20
