"""jaxmb.signal's JAX functions: the JAX low-pass filter and derivative agree with jaxmb.signal / scipy."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.signal as ss

from jaxmb import signal
from jaxmb.signal import derivative_jax, lowpass_jax, sosfiltfilt_jax

RATE = 200.0


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return np.abs(a - b).max() / np.abs(b).max()


def _data(shape, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape).cumsum(axis=-2 if len(shape) > 1 else 0)


@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("cutoff", [3.0, 60.0])
def test_lowpass_matches_signal_and_filtfilt(order, cutoff, method="scan"):
    x = _data((300, 3), seed=order)
    got = lowpass_jax(x, RATE, cutoff, order, axis=0, method=method)
    ref = signal.lowpass(x, RATE, cutoff, order, axis=0)
    assert got.dtype == jnp.float64
    assert _rel(got, ref) < 1e-10
    b, a = ss.butter(order, cutoff / (RATE / 2))
    assert _rel(got, ss.filtfilt(b, a, x, axis=0)) < 1e-8
    x1 = x[:, 0]
    assert _rel(lowpass_jax(x1, RATE, cutoff, order, method=method), signal.lowpass(x1, RATE, cutoff, order)) < 1e-10


@pytest.mark.parametrize("method", ["scan", "blocked", "split", "strided"])
def test_lowpass_batch_axis1_jit_vmap(method):
    x = _data((4, 250, 8), seed=3)
    ref = signal.lowpass(x, RATE, 8.0, 2, axis=1)
    f = jax.jit(lambda v: lowpass_jax(v, RATE, 8.0, 2, axis=1, method=method))
    assert _rel(f(x), ref) < 1e-10
    g = jax.jit(jax.vmap(lambda v: lowpass_jax(v, RATE, 8.0, 2, axis=0, method=method)))
    assert _rel(g(x), ref) < 1e-10


@pytest.mark.parametrize(
    "order, block, axis, padlens",
    [(1, 1000, 0, (None,)), (2, 7, 1, (None, 0)), (4, 64, 2, (None,))],
)
def test_strided_method_matches_sosfiltfilt(order, block, axis, padlens):
    # blocks cut in place along any axis: a block longer than the signal, partial
    # last blocks (250 + 2 padlen samples in blocks of 7 or 64), one section or two,
    # with and without padding
    x = np.moveaxis(_data((3, 250, 5), seed=order), 1, axis)  # 250 samples along axis
    sos = ss.butter(order, 15.0 / (RATE / 2), output="sos")
    for padlen in padlens:
        kw = {} if padlen is None else {"padlen": padlen}
        got = sosfiltfilt_jax(x, sos, axis=axis, method="strided", block=block, **kw)
        assert _rel(got, ss.sosfiltfilt(sos, x, axis=axis, **kw)) < 1e-10, padlen
    if order == 2:
        got32 = sosfiltfilt_jax(x.astype(np.float32), sos, axis=axis, method="strided", block=block)
        assert got32.dtype == jnp.float32
        assert _rel(got32, ss.sosfiltfilt(sos, x, axis=axis)) < 1e-4


def test_lowpass_options_and_sosfiltfilt():
    x = _data((200, 2), seed=5)
    ref = signal.lowpass(x, RATE, 12.0, 2, correct=True, padlen=20)
    assert _rel(lowpass_jax(x, RATE, 12.0, 2, correct=True, padlen=20), ref) < 1e-10
    sos = ss.butter(3, 0.1, output="sos")
    got = lowpass_jax(x, RATE, 12.0, 4, method="blocked", block=16)
    assert _rel(got, signal.lowpass(x, RATE, 12.0, 4)) < 1e-10
    assert _rel(sosfiltfilt_jax(x, sos), ss.sosfiltfilt(sos, x, axis=0)) < 1e-10
    assert _rel(sosfiltfilt_jax(x, sos, padlen=0), ss.sosfiltfilt(sos, x, axis=0, padlen=0)) < 1e-10
    # padlen="auto": the settling samples from the static length (70 at 200 Hz, 6 Hz,
    # order 2), also under jit and along another axis; capped at n - 1 = 199 (order 4, 3 Hz: 256)
    for order, fc in ((2, 6.0), (4, 3.0)):
        if fc == 3.0:  # the cap: lowpass says the transient outlasts the signal
            with pytest.warns(UserWarning, match="settles in 256 samples"):
                ref = signal.lowpass(x, RATE, fc, order, padlen="auto")
        else:
            ref = signal.lowpass(x, RATE, fc, order, padlen="auto")
        assert _rel(lowpass_jax(x, RATE, fc, order, padlen="auto", method="blocked", block=16), ref) < 1e-10
        jitted = jax.jit(lambda y: lowpass_jax(y, RATE, fc, order, axis=-1, padlen="auto"))  # noqa: B023
        assert _rel(jitted(x.T).T, ref) < 1e-10
    assert _rel(ref, ss.sosfiltfilt(ss.butter(4, 3.0 / (RATE / 2), output="sos"), x, axis=0, padlen=199)) < 1e-10
    # the library's own messages (SciPy raises a ValueError of its own without them)
    with pytest.raises(ValueError, match="must be below the Nyquist frequency"):
        lowpass_jax(x, RATE, 150.0)
    with pytest.raises(ValueError, match=r"x has 5 samples along axis 0: .*needs more than padlen"):
        lowpass_jax(x[:5], RATE, 10.0)


@pytest.mark.parametrize("method", ["scan", "blocked"])  # "blocked": the gait pipeline's
def test_lowpass_float32(method):
    x = _data((3, 400, 4), seed=7)
    got = jax.jit(lambda v: lowpass_jax(v, RATE, 20.0, 2, axis=1, method=method, block=32))(x.astype(np.float32))
    assert got.dtype == jnp.float32
    assert _rel(got, signal.lowpass(x, RATE, 20.0, 2, axis=1)) < 1e-4


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivative_matches_signal(order):
    x = _data((40, 3), seed=order)
    assert _rel(derivative_jax(x, 100.0, order), signal.derivative(x, 100.0, order)) < 1e-12
    xb = np.moveaxis(x, 0, 1)[None]
    got = jax.jit(jax.vmap(lambda v: derivative_jax(v, 100.0, order, axis=1)))(xb)
    assert _rel(got, signal.derivative(xb, 100.0, order, axis=2)) < 1e-12
    assert derivative_jax(x.astype(np.float32), 100.0, order).dtype == jnp.float32
    n = order + 2
    assert _rel(derivative_jax(x[:n], 100.0, order), signal.derivative(x[:n], 100.0, order)) < 1e-12


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivative_exact_on_polynomials(order):
    rate = 50.0
    t = np.arange(30) / rate
    coeffs = np.array([0.3, -1.2, 0.7, 2.0, -0.5, 0.25])[: order + 2]  # degree order + 1
    p = np.polynomial.Polynomial(coeffs)
    got = derivative_jax(p(t), rate, order)
    assert _rel(got, p.deriv(order)(t)) < 1e-8  # roundoff amplified by rate**order


def test_derivative_errors():
    with pytest.raises(ValueError, match="order must be 1, 2, 3 or 4, got 5"):
        derivative_jax(np.zeros(10), 100.0, 5)
    with pytest.raises(ValueError, match="derivative of order 1 needs at least .* samples, got 2"):
        derivative_jax(np.zeros(2), 100.0, 1)


# The "split" method reorders the arithmetic (blocks from a zero state, then the free
# response to each block's start state); in float64 it agrees with scipy to ~2e-12
# relative on these data (measured), so 1e-11 leaves a margin of rounding only.
@pytest.mark.parametrize("block", [1, 7, 64, 128, 10_000])
def test_split_method_matches_scipy_on_running_data(block):
    from jaxmb import gait

    d = gait.running_data()
    x = np.concatenate([np.stack([d.hip, d.knee, d.ankle, d.toe], 1).reshape(len(d.hip), 8), d.force, d.cop[:, None]], 1)
    sos = ss.butter(2, 15.0 / (d.rate / 2), output="sos")
    ref = ss.sosfiltfilt(sos, x, axis=0)
    got = np.asarray(lowpass_jax(x, d.rate, 15.0, 2, method="split", block=block))
    assert (np.abs(got - ref).max(0) / np.abs(ref).max(0)).max() < 1e-11


# by default every order and every padlen at least once (seven of the twelve
# pairs); all twelve with --slow
_SPLIT_DEFAULT = {(1, None), (2, None), (4, None), (2, 0), (4, 0), (1, 25), (3, 25)}


@pytest.mark.parametrize("order,padlen", [
    pytest.param(o, p, id=f"{p}-{o}", marks=() if (o, p) in _SPLIT_DEFAULT else pytest.mark.slow)
    for p in (None, 0, 25) for o in (1, 2, 3, 4)
])  # fmt: skip
def test_split_method_matches_scipy_random(order, padlen):
    rng = np.random.default_rng(10 + order)
    x = rng.standard_normal((3, 1001, 2)) + rng.standard_normal((3, 1, 2)) * 5  # noise on offsets
    sos = ss.butter(order, 0.05, output="sos")
    ref = ss.sosfiltfilt(sos, x, axis=1, padlen=padlen)
    for block in (16, 100, 333):
        got = sosfiltfilt_jax(x, sos, axis=1, padlen=padlen, method="split", block=block)
        assert _rel(got, ref) < 1e-11
    got = lowpass_jax(x.astype(np.float32), RATE, 5.0, order, axis=1, method="split", block=50)
    assert got.dtype == jnp.float32
    assert _rel(got, signal.lowpass(x, RATE, 5.0, order, axis=1)) < 1e-4


def test_filter_options_are_checked():
    # unroll=0 hung the XLA compile, block=0 divided by zero, a negative or
    # fractional padlen failed in a reshape or was truncated
    import jaxmb

    x = np.sin(np.linspace(0.0, 3.0, 200))
    for kw, match in ((dict(unroll=0), "unroll must be an int >= 1"),
                      (dict(method="blocked", block=0), "block must be an int >= 1"),
                      (dict(padlen=-3, method="strided"), "padlen must be an int >= 0"),
                      (dict(padlen=2.5), "padlen must be an int >= 0")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            lowpass_jax(x, 100.0, 6.0, **kw)
    with pytest.raises(ValueError, match="padlen must be an int >= 0"):
        signal.lowpass(x, 100.0, 6.0, padlen=2.5)
    with pytest.raises(ValueError, match="pointing has 2 entries but the angles' last axis has 7"):
        jaxmb.from_vertical(np.zeros(7), ("up", "down"))


def test_ragged_filtfilt_and_derivative_equal_each_trial_alone():
    # trials of unequal lengths padded to one shape (NaN after each end), each with its
    # own filter and odd extension: each equals scipy's sosfiltfilt and jaxmb's
    # derivative of the trial alone; one shared filter gives the same as the stack
    rng = np.random.default_rng(5)
    B, N, C, rate = 4, 300, 3, 100.0
    x = rng.normal(size=(B, N, C)).cumsum(1)
    n = np.array([300, 120, 57, 200])
    cuts = [6.0, 10.0, 6.0, 20.0]
    pads = np.array([50, 30, 9, 100])
    sos = [ss.butter(2, c / (rate / 2), output="sos") for c in cuts]
    xp = x.copy()
    for b in range(B):
        xp[b, n[b] :] = np.nan
    clean = np.where(np.isnan(xp), 0.0, xp)  # as analyze passes them (a select, not NaN)
    mats, p = signal.ragged_design(sos, n, pads, 32)
    assert mats[0].shape == (B, 32, 32)
    y = np.asarray(signal.ragged_sosfiltfilt(clean, n, p, mats, int(pads.max())))
    for b in range(B):
        want = ss.sosfiltfilt(sos[b], x[b, : n[b]], axis=0, padlen=pads[b])
        np.testing.assert_allclose(y[b, : n[b]], want, rtol=0, atol=1e-12 * np.abs(want).max())
    assert np.isfinite(y).all()
    one, p1 = signal.ragged_design([sos[0]] * B, n, pads, 16)
    assert one[0].shape == (16, 16)  # one filter: no per-trial matrices
    y1 = np.asarray(signal.ragged_sosfiltfilt(clean, n, p1, one, 128))
    for b in range(B):
        want = ss.sosfiltfilt(sos[0], x[b, : n[b]], axis=0, padlen=pads[b])
        np.testing.assert_allclose(y1[b, : n[b]], want, rtol=0, atol=1e-12 * np.abs(want).max())
    with pytest.raises(ValueError, match="padlen"):
        signal.ragged_design(sos, n, n, 32)
    for order in (1, 2, 3, 4):
        d = np.asarray(signal.ragged_derivative(clean, rate, order, n))
        for b in range(B):
            want = signal.derivative(x[b, : n[b]], rate, order, axis=0)
            np.testing.assert_allclose(d[b, : n[b]], want, rtol=0, atol=1e-12 * np.abs(want).max())
