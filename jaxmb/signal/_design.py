"""Filter designs and finite-difference weights, computed eagerly in NumPy/SciPy from
static arguments, and the checks of the arguments they take: the Butterworth
second-order sections (cached), Winter's cut-off correction, the settling samples of
the odd extension, and the Vandermonde weights of the derivative stencils."""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np

from .._checks import _int_at_least, _positive


def _scipy_signal():
    """``scipy.signal``, imported on first use (a few hundred ms: ``import jaxmb``
    does not pay for it)."""
    try:
        import scipy.signal as ss
    except ImportError as e:  # pragma: no cover - scipy is a dependency of jaxmb.signal
        raise ImportError("jaxmb.signal needs SciPy: pip install scipy") from e
    return ss


def _positive_rate(rate) -> float:
    """A sampling rate, Hz: a finite number > 0."""
    return _positive(rate, "rate", "Hz")


def _order(order) -> int:
    """A Butterworth order: an int >= 1."""
    return _int_at_least(order, "order", 1)


def _axis(axis, ndim: int) -> int:
    """The time axis of an array of ``ndim`` dimensions, in 0..ndim-1."""
    if ndim == 0:
        raise ValueError("x must have at least one dimension (the time axis)")
    if not isinstance(axis, (int, np.integer)) or not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis!r} is out of range for an array of {ndim} dimension(s)")
    return int(axis) % ndim


def winter_correction(order: int = 2, passes: int = 2) -> float:
    """Winter's correction factor of the cut-off for a filter applied several times.

    Applying a Butterworth filter of order ``n`` ``passes`` times (``filtfilt``: twice,
    forward and backward) lowers the -3 dB point: the combined gain at the design
    cut-off ``fc`` is ``2 ** (-passes / 2)`` (-6 dB for filtfilt). The combined -3 dB
    point is at ``C fc`` (in the analogue prototype) with

        C = (2 ** (1 / passes) - 1) ** (1 / (2 n))     (0.802 for n = 2, passes = 2).

    Returns:
      C (dimensionless, < 1).
    """
    passes = _int_at_least(passes, "passes", 1, " (filtfilt: 2)")
    return float((2.0 ** (1.0 / passes) - 1.0) ** (1.0 / (2.0 * _order(order))))


def _design_cutoff(cutoff: float, rate: float, order: int, correct: bool) -> float:
    """The cut-off (Hz) given to ``butter``; with ``correct``, the one that puts the
    -3 dB point of the filtfilt result at ``cutoff`` (in the digital domain: the
    bilinear transform maps f to tan(pi f / rate), so the correction applies there)."""
    if not correct:
        return cutoff
    w = math.tan(math.pi * cutoff / rate) / winter_correction(order, 2)
    return math.atan(w) * rate / math.pi


def _check_cutoff(cutoff, rate: float, order: int, correct: bool) -> float:
    """The design cut-off, Hz, of a cut-off in (0, rate / 2) (see :func:`_design_cutoff`)."""
    try:
        fc = float(cutoff)
    except (TypeError, ValueError):
        raise ValueError(f"cutoff must be a number (Hz), got {cutoff!r}") from None
    nyquist = rate / 2.0
    if not math.isfinite(fc) or fc <= 0:
        raise ValueError(f"cutoff must be > 0 Hz, got {fc}")
    if fc >= nyquist:
        raise ValueError(f"cutoff {fc} Hz must be below the Nyquist frequency {nyquist} Hz (rate {rate} Hz)")
    return _design_cutoff(fc, rate, order, correct)


def _butter(order: int, wn: float) -> np.ndarray:
    """``scipy.signal.butter(order, wn, output="sos")``, from a cache: the design took
    half of :func:`residual_analysis`'s time (200 designs per call, the same for
    every trial at one rate). A fresh copy (scipy's sosfilt needs a writeable one)."""
    return _butter_cached(int(order), float(wn)).copy()


@functools.lru_cache(maxsize=1024)
def _butter_cached(order: int, wn: float) -> np.ndarray:
    sos = _scipy_signal().butter(order, wn, btype="low", output="sos")
    sos.flags.writeable = False
    return sos


#: the factor by which the filter's slowest mode decays over ``padlen="auto"``
_SETTLE = 1e-4


def settling_samples(sos, tol: float = _SETTLE) -> int:
    """Samples in which the slowest mode of an IIR filter decays by ``tol``.

    ``ceil(log(tol) / log(r))`` for ``r`` the largest pole modulus of the second-order
    sections ``sos`` (``scipy.signal.butter(..., output="sos")``). It is the odd
    extension that :func:`lowpass` takes with ``padlen="auto"``: the transient of
    the filter's start (its state matches the extended signal's first value, not its
    slope) has decayed by ``tol`` before the data begin. For a Butterworth filter of
    order 2 at cut-off fc and rate fs it is about ``2.07 fs / fc`` (two periods of
    the cut-off; order 4: 3.8 periods).

    Args:
      sos: (sections, 6) second-order sections, a0 = 1.
      tol: the decay factor, in (0, 1).

    Returns:
      The number of samples, an int >= 0 (0 for a filter without poles).
    """
    sos = np.atleast_2d(np.asarray(sos, dtype=float))
    if sos.ndim != 2 or sos.shape[1] != 6:
        raise ValueError(f"sos must have shape (sections, 6), got {sos.shape}")
    if not 0.0 < tol < 1.0:
        raise ValueError(f"tol must be in (0, 1), got {tol}")
    r = max((float(np.max(np.abs(np.roots(s[3:])), initial=0.0)) for s in sos), default=0.0)
    if r >= 1.0:
        raise ValueError(f"the filter is not stable (a pole of modulus {r:.6g})")
    if r == 0.0:
        return 0
    return int(math.ceil(math.log(tol) / math.log(r)))


def warn_unsettled(sos, n: int, rate: float, cutoff: float, stacklevel: int = 2, what: str = "signal") -> bool:
    """Warn (and return True) where the filter's transient outlasts a signal of ``n``
    samples: ``padlen="auto"`` is then cut to n - 1 samples and the start-up
    transient stays in the filtered signal at both ends."""
    k = settling_samples(sos)
    if k <= n - 1:
        return False
    warnings.warn(f"a {cutoff:.6g} Hz low-pass at {rate:.6g} Hz settles in {k} samples ({k / rate:.3g} s), longer "
                  f"than the {n}-sample {what}: its start-up transient stays in the result at both ends (a cut-off "
                  f"of about {cutoff * k / (n - 1):.3g} Hz or more settles within it)", UserWarning, stacklevel=stacklevel)  # fmt: skip
    return True



def _padlen(padlen, sos, order: int, n: int) -> int:
    """``lowpass``'s padlen: None -> scipy's 3 * (order + 1); "auto" ->
    :func:`settling_samples`, at least scipy's, at most n - 1; else an int >= 0."""
    if padlen is None:
        return 3 * (order + 1)  # filtfilt's default 3 * max(len(a), len(b))
    if isinstance(padlen, str):
        if padlen != "auto":
            raise ValueError(f"padlen must be an int >= 0, None or 'auto', got {padlen!r}")
        return max(3 * (order + 1), min(settling_samples(sos), n - 1))
    return _int_at_least(padlen, "padlen", 0, " (samples of odd extension at each end)")


def lowpass_design(rate, cutoff, order, correct, padlen, n):
    """(sos, padlen): the second-order sections of :func:`jaxmb.signal.lowpass`'s
    Butterworth filter (rate, cutoff Hz; ``order`` of one pass; ``correct``: Winter's
    correction) and its odd extension, samples, for a signal of ``n`` samples
    (``padlen`` as :func:`jaxmb.signal.lowpass` takes it), checked."""
    rate = _positive_rate(rate)
    order = _order(order)
    fc = _check_cutoff(cutoff, rate, order, correct)
    sos = _butter(order, fc / (rate / 2.0))
    return sos, _padlen(padlen, sos, order, n)


def _weights(offsets: np.ndarray, order: int) -> np.ndarray:
    """Finite-difference weights w with sum_j w_j p(offsets_j) = p^(order)(0) for every
    polynomial p of degree < len(offsets) (unit spacing): the Vandermonde system
    sum_j w_j o_j^k / k! = delta(k, order), k = 0 .. len(offsets) - 1."""
    s = len(offsets)
    V = np.array([[o**k / math.factorial(k) for o in offsets] for k in range(s)], dtype=float)
    rhs = np.zeros(s)
    rhs[order] = 1.0
    return np.linalg.solve(V, rhs)

