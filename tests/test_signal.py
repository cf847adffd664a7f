"""jaxmb.signal against SciPy's filtfilt, Winter's residual method on a signal whose
band is known, and derivatives that are exact for polynomials."""

import warnings

import numpy as np
import pytest
import scipy.signal as ss

from jaxmb import signal
from jaxmb.signal import _design


def test_lowpass_is_scipy_filtfilt():
    # the reference: SciPy's transfer-function filtfilt with its default odd padding
    rng = np.random.default_rng(0)
    rate = 200.0
    x = np.cumsum(rng.normal(size=(500, 3)), axis=0)
    for order, cutoff in ((2, 6.0), (4, 20.0), (1, 50.0)):
        b, a = ss.butter(order, cutoff / (rate / 2))
        ref = ss.filtfilt(b, a, x, axis=0)
        got = signal.lowpass(x, rate, cutoff, order)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


def test_lowpass_batches_along_any_axis():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(4, 300, 2))  # (trials, T, channels)
    got = signal.lowpass(x, 100.0, 8.0, axis=1)
    for b in range(4):
        np.testing.assert_allclose(got[b], signal.lowpass(x[b], 100.0, 8.0, axis=0), rtol=1e-13, atol=1e-13)


def test_lowpass_gain_and_winter_correction():
    # a 2nd-order Butterworth run twice has gain 1/2 at its design cut-off; with
    # Winter's correction the -3 dB point of the zero-phase result is at the cut-off
    rate, fc, n = 1000.0, 10.0, 20000
    t = np.arange(n) / rate
    tone = np.sin(2 * np.pi * fc * t)
    mid = slice(n // 4, 3 * n // 4)
    gain = np.abs(signal.lowpass(tone, rate, fc)[mid]).max()
    assert abs(gain - 0.5) < 2e-3
    gain_c = np.abs(signal.lowpass(tone, rate, fc, correct=True)[mid]).max()
    assert abs(gain_c - 2**-0.5) < 2e-3
    assert abs(signal.winter_correction(2, 2) - 0.802) < 1e-3
    for passes in (0, -1, 2.0):  # before: ZeroDivisionError, a complex power
        with pytest.raises(ValueError, match=r"passes must be an int >= 1 \(filtfilt: 2\)"):
            signal.winter_correction(2, passes)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(cutoff=50.0), "Nyquist"),
        (dict(cutoff=60.0), "Nyquist"),
        (dict(cutoff=-1.0), "> 0"),
        (dict(cutoff=5.0, order=0), "order"),
    ],
)
def test_lowpass_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        signal.lowpass(np.zeros(100), 100.0, **kwargs)


def test_lowpass_rejects_nan_and_short_signals():
    x = np.ones(100)
    x[40] = np.nan
    with pytest.raises(ValueError, match="NaN|finite"):
        signal.lowpass(x, 100.0, 5.0)
    with pytest.raises(ValueError, match="samples"):
        signal.lowpass(np.ones(5), 100.0, 5.0)


def _butter2_pole_modulus(rate, cutoff):
    # by hand, not from scipy's design: the analog prototype's poles
    # w (-1 +- i) / sqrt(2), pre-warped (w = 2 rate tan(pi cutoff / rate)), mapped by
    # the bilinear transform z = (1 + s / (2 rate)) / (1 - s / (2 rate))
    w = 2 * rate * np.tan(np.pi * cutoff / rate)
    s = w * (-1 + 1j) / np.sqrt(2)
    return abs((1 + s / (2 * rate)) / (1 - s / (2 * rate)))


@pytest.mark.parametrize("rate, cutoff", [(10000.0, 30.0), (100.0, 6.0), (1000.0, 15.0)])
def test_settling_samples_is_the_slowest_modes_decay(rate, cutoff):
    sos = ss.butter(2, cutoff / (rate / 2), output="sos")
    k = signal.settling_samples(sos)
    r = _butter2_pole_modulus(rate, cutoff)
    assert r**k <= 1e-4 < r ** (k - 1)
    assert 2.0 < k * cutoff / rate < 2.2  # about two periods of the cut-off
    # the impulse response has decayed by that much (its envelope: a constant times r^n)
    h = ss.sosfilt(sos, np.r_[1.0, np.zeros(4 * k)])
    assert np.abs(h[k:]).max() < 2e-4 * np.abs(h).max()
    assert np.abs(h[k // 4 : k // 2]).max() > 1e-3 * np.abs(h).max()
    # a 4th-order filter rings longer (its slowest poles are less damped)
    assert signal.settling_samples(ss.butter(4, cutoff / (rate / 2), output="sos")) > 1.8 * k
    assert signal.settling_samples(np.array([[1.0, 0, 0, 1, 0, 0]])) == 0  # no poles
    with pytest.raises(ValueError, match="not stable"):
        signal.settling_samples(np.array([[1.0, 0, 0, 1, -1.0, 0]]))
    with pytest.raises(ValueError, match="tol"):
        signal.settling_samples(sos, tol=1.0)


def test_lowpass_auto_padding_removes_the_edge_transient():
    # A smooth signal sampled at 10 kHz and filtered well above its band: the filter
    # should leave it alone. Scipy's default odd extension (9 samples) is short next
    # to the filter's memory (692 samples at 30 Hz): its start-up transient reaches
    # far into the signal, and differentiated twice it dominates the acceleration.
    # padlen="auto" extends by the settling samples: the result is that of the
    # longest odd extension there is (n - 1), whose only error left is odd
    # extension's own (the curvature changes sign at the ends: within ~10 ms).
    rate, cutoff = 10000.0, 30.0
    t = np.arange(6001) / rate
    x = 0.3 * np.sin(2 * np.pi * 1.5 * t + 0.4) + 0.1 * t**2
    acc = -0.3 * (2 * np.pi * 1.5) ** 2 * np.sin(2 * np.pi * 1.5 * t + 0.4) + 0.2
    sos = ss.butter(2, cutoff / (rate / 2), output="sos")
    k = signal.settling_samples(sos)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # settled within the signal: no warning
        auto = signal.lowpass(x, rate, cutoff, padlen="auto")
    np.testing.assert_allclose(auto, ss.sosfiltfilt(sos, x, padlen=k), rtol=0, atol=1e-13)
    err = {name: np.abs(signal.derivative(y, rate, 2) - acc)
           for name, y in (("auto", auto), ("longest", signal.lowpass(x, rate, cutoff, padlen=x.size - 1)),
                           ("scipy", signal.lowpass(x, rate, cutoff)))}  # fmt: skip
    peak = np.abs(acc).max()
    assert np.abs(err["auto"] - err["longest"]).max() < 1e-3 * peak  # settled
    inner = slice(400, -400)  # 40 ms from the ends
    assert err["auto"][inner].max() < 0.002 * peak and err["scipy"][inner].max() > 0.05 * peak
    assert err["scipy"].max() > 10 * err["auto"].max()
    # at most the signal's length less one; other strings refused
    # (a warning: the 692-sample transient outlasts the 100 samples and stays in)
    with pytest.warns(UserWarning, match=r"settles in 692 samples .* longer than the 100-sample signal"):
        short = signal.lowpass(x[:100], rate, cutoff, padlen="auto")
    np.testing.assert_allclose(short, ss.sosfiltfilt(sos, x[:100], padlen=99), rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="'auto'"):
        signal.lowpass(x, rate, cutoff, padlen="long")


def test_residual_analysis_warns_at_the_edge_of_its_range():
    # a 15 Hz sine at 100 Hz lies in the band of the noise line (12.5 to 25 Hz): the
    # residual never comes down to the line's intercept inside the range and the
    # lowest cut-off tested, 0.125 Hz, was returned silently (it removes the signal)
    rng = np.random.default_rng(0)
    t = np.arange(500) / 100.0
    x = np.sin(2 * np.pi * 15 * t) + 0.001 * rng.standard_normal(t.size)
    with pytest.warns(UserWarning, match=r"edge of the tested range, 0.125 Hz.*from 12.5 to 25 Hz"):
        ra = signal.residual_analysis(x, 100.0)
    assert ra.cutoff == 0.125
    slow = np.sin(2 * np.pi * 2 * t) + 0.001 * rng.standard_normal(t.size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # content well below the band: no warning
        assert 2 < signal.residual_analysis(slow, 100.0).cutoff < 12.5


def test_residual_analysis_matches_the_frequency_domain_prediction():
    # Tones at 1, 2.5 and 5 Hz plus white noise (sigma 0.01) at 500 Hz. In the
    # frequency domain the zero-phase filter has gain G(f) = |H(f)|^2 (H: SciPy's
    # Butterworth response), so the expected residual is
    #   R(fc)^2 = sum_k A_k^2 / 2 (1 - G(f_k))^2 + sigma^2 mean_f (1 - G(f))^2;
    # Winter's cut-off is where R comes down to the noise intercept. The time-domain
    # analysis must choose the cut-off that this independent prediction gives.
    rng = np.random.default_rng(2)
    rate, sigma = 500.0, 0.01
    t = np.arange(20000) / rate
    tones = ((1.0, 1.0, 0.3), (2.5, 0.4, 1.0), (5.0, 0.2, 2.0))  # (f Hz, amplitude, phase)
    clean = sum(A * np.sin(2 * np.pi * f * t + p) for f, A, p in tones)
    x = clean + rng.normal(scale=sigma, size=t.shape)
    cutoffs = np.linspace(0.5, 60.0, 120)
    ra = signal.residual_analysis(x, rate, cutoffs=cutoffs)
    grid = np.linspace(0, rate / 2, 4001)

    def predicted_residual(fc):
        sos = ss.butter(2, fc / (rate / 2), output="sos")
        G = lambda f: np.abs(ss.sosfreqz(sos, worN=np.atleast_1d(f), fs=rate)[1]) ** 2  # noqa: E731
        r2 = sum(A**2 / 2 * (1 - G(f)[0]) ** 2 for f, A, _ in tones) + sigma**2 * np.mean((1 - G(grid)) ** 2)
        return np.sqrt(r2)

    pred = np.array([predicted_residual(fc) for fc in cutoffs])
    np.testing.assert_allclose(ra.residuals, pred, rtol=0.05)
    crossing = cutoffs[np.flatnonzero(pred <= float(ra.intercept))[0]]
    assert abs(ra.cutoff - crossing) <= 1.0, (ra.cutoff, crossing)
    assert ra.cutoff > 5.0  # above the signal's band
    assert abs(float(ra.intercept) - sigma) < 0.1 * sigma  # the intercept is the noise level
    # each channel on its own: a scaled copy has the same cut-off
    ra2 = signal.residual_analysis(np.stack([x, 2 * x], 1), rate, cutoffs=cutoffs)
    assert ra2.cutoff.shape == (2,)
    np.testing.assert_allclose(ra2.cutoff, ra.cutoff, rtol=1e-9)
    assert ra.figure() is not None and ra.figure(channel=0) is not None  # before: a NumPy error for 1-D
    line = ra2.figure(channel=1).axes[0].lines[0]
    np.testing.assert_allclose(line.get_ydata(), ra2.residuals[:, 1])  # the channel asked for
    with pytest.raises(ValueError, match=r"channel 2 is no index into the channels, of shape \(2,\)"):
        ra2.figure(channel=2)


@pytest.mark.parametrize("order", [1, 2, 3, 4])
def test_derivative_exact_for_polynomials(order):
    # every stencil is exact for polynomials of degree order + 1, ends included
    rng = np.random.default_rng(10 + order)
    rate = 50.0
    t = np.arange(40) / rate
    c = rng.normal(size=order + 2)  # degree order + 1
    p = np.polynomial.Polynomial(c)
    x = np.stack([p(t), 3 * p(t)], 1)
    ref = p.deriv(order)(t)
    got = signal.derivative(x, rate, order, axis=0)
    scale = np.abs(ref).max() + 1
    np.testing.assert_allclose(got[:, 0], ref, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(got[:, 1], 3 * ref, rtol=0, atol=3e-8 * scale)


def test_derivative_second_order_convergence_and_errors():
    # on a non-polynomial signal the error falls 4x per halving of the step
    errs = []
    for rate in (100.0, 200.0):
        t = np.arange(int(rate) + 1) / rate
        errs.append(np.abs(signal.derivative(np.sin(3 * t), rate, 2) + 9 * np.sin(3 * t)).max())
    assert 3.5 < errs[0] / errs[1] < 4.5
    with pytest.raises(ValueError, match="order"):
        signal.derivative(np.zeros(10), 100.0, order=5)
    with pytest.raises(ValueError, match="at least"):
        signal.derivative(np.zeros(3), 100.0, order=2)
    with pytest.raises(ValueError, match="x must be a numeric array, got dtype <U"):
        signal.derivative(np.array(["1", "2", "3", "4", "5"]), 100.0)  # before: NumPy's UFuncTypeError


def test_cached_filter_design_is_scipys_and_not_shared():
    # designs are cached (half of residual_analysis's time was butter): each call
    # gets scipy's design as a fresh, writeable array that a caller may change
    a = _design._butter(2, 0.12)
    np.testing.assert_array_equal(a, ss.butter(2, 0.12, output="sos"))
    a[0, 0] = 99.0
    assert _design._butter(2, 0.12)[0, 0] != 99.0
