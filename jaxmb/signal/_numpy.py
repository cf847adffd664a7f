"""The NumPy/SciPy filter and derivative: :func:`lowpass` (``scipy.signal.sosfiltfilt``
of a Butterworth design) and :func:`derivative` (finite differences, second-order
accurate at every sample)."""

from __future__ import annotations

import numpy as np

from .._checks import _finite_array
from ._design import (_axis, _butter, _check_cutoff, _order, _padlen, _positive_rate, _scipy_signal, _weights,
                      warn_unsettled)


def lowpass(x, rate, cutoff, order: int = 2, axis: int = 0, *, correct: bool = False, padlen=None):
    """Zero-phase low-pass Butterworth filter (``scipy.signal.filtfilt``).

    The filter is designed by ``scipy.signal.butter(order, cutoff / (rate / 2))`` and
    run forward and backward (``filtfilt``, here in second-order sections, which is
    the same result and stays accurate at low normalised cut-offs), so it has no
    phase lag. Running it twice squares the gain: the result is a filter of order
    ``2 * order`` whose gain at ``cutoff`` is 1/2 (-6 dB), not 1/sqrt(2): its -3 dB
    point lies at about ``0.802 * cutoff`` for ``order=2`` (:func:`winter_correction`).

    By default ``cutoff`` is the design cut-off of each pass, as ``filtfilt`` (and most
    software and papers, "a 2nd-order zero-lag Butterworth filter at 6 Hz") use it.
    With ``correct=True`` the design cut-off is raised by Winter's correction
    (``cutoff / 0.802`` for order 2, mapped through the bilinear transform) so that
    ``cutoff`` is the -3 dB point of the zero-phase result.

    Args:
      x: array of samples, any shape; filtered along ``axis``. Must be finite.
      rate: sampling rate, Hz.
      cutoff: cut-off frequency, Hz; 0 < cutoff < rate / 2.
      order: order of the Butterworth filter of one pass (default 2; the zero-phase
        result has twice this order).
      axis: the time axis.
      correct: apply Winter's correction (see above). Default False.
      padlen: samples of odd extension at each end: an int, None (default: scipy's
        ``3 * (order + 1)``) or ``"auto"`` (:func:`settling_samples`: the samples in
        which the filter's slowest mode decays by 1e-4, at least scipy's, at most
        the signal's length less one; a UserWarning where the transient outlasts
        the signal, so that the padding cannot hold it). Scipy's padding is short next to the
        filter's memory where ``rate / cutoff`` is large, and its edge transient,
        differentiated, dominates accelerations near the ends: the bundled 10 kHz
        running data filtered at 30 Hz gives a hip moment RMS error of 96 N m with
        scipy's 9 samples and 2.2 N m with ``"auto"`` (692 samples;
        ``jaxmb.gait.analyze``'s default).

    Returns:
      Filtered array, the shape of ``x``, float.

    Raises:
      ValueError: cutoff <= 0 or >= the Nyquist frequency, a non-positive rate, a
        signal too short for the padding, or NaN / infinite values in ``x``.
    """
    ss = _scipy_signal()
    rate = _positive_rate(rate)
    order = _order(order)
    fc = _check_cutoff(cutoff, rate, order, correct)
    x = _finite_array(x)
    axis = _axis(axis, x.ndim)
    sos = _butter(order, fc / (rate / 2.0))
    if padlen == "auto":
        warn_unsettled(sos, x.shape[axis], rate, fc, stacklevel=3)
    padlen = _padlen(padlen, sos, order, x.shape[axis])
    if x.shape[axis] <= padlen:
        raise ValueError(f"x has {x.shape[axis]} samples along axis {axis}: lowpass needs more than padlen={padlen}")
    return ss.sosfiltfilt(sos, x, axis=axis, padtype="odd", padlen=padlen)



def derivative(x, rate, order: int = 1, axis: int = 0):
    """Derivative of a sampled signal, second-order accurate at every sample.

    Inside, central differences on the fewest samples (for order 1 and 2 the
    three-point ``(x[i+1] - x[i-1]) / (2 dt)`` and ``(x[i+1] - 2 x[i] + x[i-1]) / dt**2``,
    as the gait notebook's second differences); at the ends, where the central
    stencil does not fit, one-sided stencils of ``order + 2`` samples (order 1:
    ``(-3 x0 + 4 x1 - x2) / (2 dt)``; order 2: ``(2 x0 - 5 x1 + 4 x2 - x3) / dt**2``).
    Every stencil is exact for polynomials of degree ``order + 1`` or less, so a
    polynomial of the derivative's degree (order 2: a quadratic) is differentiated
    exactly at every sample, the first and last included; the error elsewhere is
    O(dt**2). Differentiating amplifies noise by about ``(2 rate)**order``: low-pass
    filter measured data first (:func:`lowpass`).

    Args:
      x: samples, any shape, along ``axis``; NaN propagates to its neighbours.
      rate: sampling rate, Hz (the spacing is 1 / rate).
      order: derivative order, 1 to 4.
      axis: the time axis.

    Returns:
      The ``order``-th derivative, the shape of ``x``, in x's units per s**order.

    Raises:
      ValueError: order not in 1..4, rate <= 0, or fewer than ``order + 2`` samples.
    """
    rate = _positive_rate(rate)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= 4:
        raise ValueError(f"order must be 1, 2, 3 or 4, got {order!r}")
    x = np.asarray(x)
    if x.dtype.kind not in "biufc":  # strings, objects: NumPy's UFuncTypeError otherwise
        raise ValueError(f"x must be a numeric array, got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.integer) or x.dtype == bool:
        x = x.astype(np.float64)
    axis = _axis(axis, x.ndim)
    T = x.shape[axis]
    n_one_sided = order + 2
    if T < n_one_sided:
        raise ValueError(f"derivative of order {order} needs at least {n_one_sided} samples, got {T}")
    xt = np.moveaxis(x, axis, 0)
    h = (order + 1) // 2  # half-width of the central stencil
    scale = rate**order
    out = np.empty(xt.shape, dtype=np.result_type(xt.dtype, np.float64) if xt.dtype.kind != "f" else xt.dtype)
    if T > 2 * h:
        w = _weights(np.arange(-h, h + 1, dtype=float), order)
        acc = np.zeros((T - 2 * h,) + xt.shape[1:], dtype=out.dtype)
        for j, wj in enumerate(w):
            if wj != 0.0:
                acc += wj * xt[j : T - 2 * h + j]
        out[h : T - h] = acc * scale
    base = np.arange(n_one_sided, dtype=float)
    for i in range(min(h, T)):
        # sample i from the start (stencil x[0 .. n-1]) and T-1-i from the end (mirror)
        w = _weights(base - i, order)
        out[i] = np.tensordot(w, xt[:n_one_sided], axes=(0, 0)) * scale
        w_end = _weights(i - base[::-1], order)  # offsets of x[T-n .. T-1] from T-1-i
        out[T - 1 - i] = np.tensordot(w_end, xt[T - n_one_sided :], axes=(0, 0)) * scale
    return np.moveaxis(out, 0, axis)
