"""Pure-JAX zero-phase low-pass filtering and finite-difference derivatives.

jit- and vmap-able counterparts of :func:`jaxmb.signal.lowpass` and
:func:`jaxmb.signal.derivative`, so that filtering and differentiation of a batch of
trials can run inside one jitted computation. The filter design (``scipy.signal.butter``
in second-order sections, ``sosfilt_zi``) and the finite-difference weights are
computed eagerly in NumPy from the static arguments (``rate``, ``cutoff``, ``order``,
``axis`` are Python numbers); only the data pass through JAX.

- :func:`lowpass_jax`: the ``scipy.signal.sosfiltfilt`` result (odd extension of
  ``padlen`` samples, forward and backward passes of the cascade of second-order
  sections in direct form II transposed, initial states ``zi`` times the first sample).
- :func:`sosfiltfilt_jax`: the same for given ``sos`` coefficients.
- :func:`derivative_jax`: the stencils of :func:`jaxmb.signal.derivative`.

Float32 input stays float32 (the coefficients are cast to the data's dtype); integer
input is computed in the default float dtype.
"""


from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from .._checks import _int_at_least
from ._design import _axis, _positive_rate, _scipy_signal, _weights, lowpass_design
from ._recursion import _METHODS, _float_input, _sosfiltfilt_bt, _sosfiltfilt_tc, _to_time_channels


def sosfiltfilt_jax(
    x, sos, axis: int = 0, padlen: int | None = None, *, method: str = "scan", block: int = 64, unroll: int = 4
) -> jax.Array:
    """``scipy.signal.sosfiltfilt(sos, x, axis, padtype="odd", padlen)`` in JAX.

    Args:
      x: array, any shape, filtered along ``axis`` (a traced value is fine).
      sos: (n_sections, 6) NumPy array of second-order sections (static: designed
        eagerly, e.g. ``scipy.signal.butter(..., output="sos")``).
      axis: the time axis (static).
      padlen: samples of odd extension at each end (static); default
        ``3 * (2 * n_sections + 1 - min(#trailing zeros of b, a))`` as scipy.
      method: ``"scan"`` (default): one ``lax.scan`` step per sample, all sections
        and channels updated together in direct form II transposed, as scipy's
        ``sosfilt`` (the same arithmetic); ``"blocked"``: the recursion by blocks of
        ``block`` samples as matrix products (algebraically the same; float64
        agrees with scipy to ~1e-12 relative; :func:`jaxmb.gait.analyze`'s filter,
        with blocks of 32 samples);
        ``"split"``: the signal cut into blocks of ``block`` samples that the
        recursion runs side by side as extra channels from a zero state, plus the
        free response to each block's start state (a short chain over blocks):
        ``block`` sequential steps instead of the signal's length, for few
        channels per call (float64 agrees with scipy to ~2e-12 relative);
        ``"strided"``: the same as ``"split"`` with the blocks cut in place along
        ``axis`` (no transposed copies of the signal, no reversed copies between
        the passes), for batches of signals with time in the middle, e.g.
        (trials, T, channels).
      block: samples per block of the ``"blocked"``, ``"split"`` and ``"strided"``
        methods. ``"scan"``, ``"blocked"`` and ``"split"`` filter only the samples
        whose outputs are kept; where a pad's outputs are discarded, only its final
        state is computed (by a product with the pad for the last two; for
        ``"blocked"`` the right pad's forward pass too, a product with the pad and
        the state after the signal), so a long ``padlen`` costs little.
      unroll: time steps per loop iteration of the ``"scan"``, ``"split"`` and
        ``"strided"`` methods.

    Returns:
      The filtered array, the shape and (float) dtype of ``x``.
    """
    sos = np.asarray(sos, dtype=float)
    if sos.ndim != 2 or sos.shape[1] != 6:
        raise ValueError(f"sos must have shape (n_sections, 6), got {sos.shape}")
    if not np.allclose(sos[:, 3], 1.0):
        sos = sos / sos[:, 3:4]  # normalise a0 (scipy's sosfilt does the same)
    x = _float_input(x)
    axis = _axis(axis, x.ndim)
    if padlen is None:
        # scipy: ntaps = 2 * n_sections + 1 - min(trailing zeros of b2, a2)
        ntaps = 2 * len(sos) + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))
        padlen = 3 * ntaps
    padlen = _int_at_least(padlen, "padlen", 0, " (samples of odd extension at each end)")
    unroll = _int_at_least(unroll, "unroll", 1, " (time steps per loop iteration)")
    block = _int_at_least(block, "block", 1, " (samples per block)")
    if x.shape[axis] <= padlen:
        raise ValueError(f"x has {x.shape[axis]} samples along axis {axis}: needs more than padlen={padlen}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    sos_key = (np.ascontiguousarray(sos).tobytes(), len(sos))
    return _sosfiltfilt_jit(x, sos_key, axis, padlen, method, int(unroll), int(block))


@functools.partial(precise_jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _sosfiltfilt_jit(x, sos_key, axis, padlen, method, unroll, block):
    # one compiled computation per design and shape (eager calls compile once)

    sos = np.frombuffer(sos_key[0], dtype=float).reshape(sos_key[1], 6)
    zi = _scipy_signal().sosfilt_zi(sos)
    if method == "strided":  # time stays where it is: (before, T, after), a free reshape
        shape = x.shape
        x3 = x.reshape(int(np.prod(shape[:axis], dtype=int)), shape[axis], -1)
        return _sosfiltfilt_bt(sos, zi, x3, padlen, block, unroll).reshape(shape)
    x2, back = _to_time_channels(x, axis)
    return back(_sosfiltfilt_tc(sos, zi, x2, padlen, method, unroll, block))


def lowpass_jax(
    x,
    rate,
    cutoff,
    order: int = 2,
    axis: int = 0,
    *,
    correct: bool = False,
    padlen=None,
    method: str = "scan",
    block: int = 64,
    unroll: int = 4,
):
    """Zero-phase low-pass Butterworth filter: :func:`jaxmb.signal.lowpass` in JAX.

    The same result (float64: to rounding) as ``jaxmb.signal.lowpass(x, rate, cutoff,
    order, axis, correct=correct, padlen=padlen)``, i.e. ``scipy.signal.sosfiltfilt``
    of ``butter(order, cutoff / (rate / 2), output="sos")`` with odd padding of
    ``3 * (order + 1)`` samples. ``rate``, ``cutoff``, ``order``, ``axis``,
    ``correct``, ``padlen`` are static Python values (the design is done eagerly);
    ``x`` may be traced, so the function works under ``jax.jit`` and ``jax.vmap``.
    Unlike the NumPy version, ``x`` is not checked for NaN (it may be traced).

    Args:
      x: array, any shape; filtered along ``axis``.
      rate: sampling rate, Hz.
      cutoff: cut-off frequency, Hz; 0 < cutoff < rate / 2.
      order: Butterworth order of one pass (default 2).
      axis: the time axis.
      correct: Winter's correction of the cut-off (see :func:`jaxmb.signal.lowpass`).
      padlen: odd-extension length at each end: an int, None (default ``3 * (order +
        1)``) or ``"auto"`` (see :func:`jaxmb.signal.lowpass`).
      method, block, unroll: how the recursion is computed (see :func:`sosfiltfilt_jax`).

    Returns:
      The filtered array, the shape of ``x``; float32 input stays float32.
    """
    x = _float_input(x)
    sos, padlen = lowpass_design(rate, cutoff, order, correct, padlen, x.shape[_axis(axis, x.ndim)])
    return sosfiltfilt_jax(x, sos, axis=axis, padlen=padlen, method=method, block=block, unroll=unroll)



@functools.lru_cache(maxsize=64)
def _derivative_stencils(order: int):
    """(h, central weights, [(w_start_i, w_end_i) for i < h]) as in jaxmb.signal.derivative."""
    n = order + 2
    h = (order + 1) // 2
    central = _weights(np.arange(-h, h + 1, dtype=float), order)
    base = np.arange(n, dtype=float)
    ends = tuple((_weights(base - i, order), _weights(i - base[::-1], order)) for i in range(h))
    return h, central, ends


def _stencil(w, xs, dt):
    """sum_j w[j] xs[j], added left to right: the end stencils of
    :func:`derivative_jax` and :func:`ragged_derivative` in one order of operations,
    so that a trial within a padded batch gets its alone value to the last bit (as a
    tensordot, the two contractions were summed in other orders: 3e-10 m/s^2 apart
    at 1 kHz, 1e-8 of a swing trial's peak reaction)."""
    acc = None
    for wj, xj in zip(np.asarray(w).tolist(), xs):
        term = jnp.asarray(wj, dt) * xj
        acc = term if acc is None else acc + term
    return acc


def derivative_jax(x, rate, order: int = 1, axis: int = 0) -> jax.Array:
    """Finite-difference derivative: :func:`jaxmb.signal.derivative` in JAX.

    Central stencils of ``2 * ((order + 1) // 2) + 1`` samples inside, one-sided
    stencils of ``order + 2`` samples at the ends; weights from the same Vandermonde
    solve (NumPy, eager), applied by slicing. ``rate``, ``order``, ``axis`` are static;
    ``x`` may be traced (jit, vmap).

    Args:
      x: samples, any shape, along ``axis``.
      rate: sampling rate, Hz.
      order: derivative order, 1 to 4.
      axis: the time axis.

    Returns:
      The ``order``-th derivative, the shape of ``x``; float32 stays float32.
    """
    rate = _positive_rate(rate)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= 4:
        raise ValueError(f"order must be 1, 2, 3 or 4, got {order!r}")
    order = int(order)
    x = _float_input(x)
    axis = _axis(axis, x.ndim)
    T = x.shape[axis]
    n = order + 2
    if T < n:
        raise ValueError(f"derivative of order {order} needs at least {n} samples, got {T}")
    h, central, ends = _derivative_stencils(order)
    scale = rate**order
    xt = jnp.moveaxis(x, axis, 0)
    dt = xt.dtype
    parts_start, parts_end = [], []
    for i in range(min(h, T)):
        w, w_end = ends[i]
        parts_start.append(_stencil(w, [xt[j] for j in range(n)], dt) * scale)
        parts_end.append(_stencil(w_end, [xt[T - n + j] for j in range(n)], dt) * scale)
    pieces = [p[None] for p in parts_start]
    if T > 2 * h:
        acc = None
        for j, wj in enumerate(central):
            if wj != 0.0:
                term = jnp.asarray(wj, dt) * xt[j : T - 2 * h + j]
                acc = term if acc is None else acc + term
        pieces.append(acc * scale)
    pieces += [p[None] for p in reversed(parts_end)]
    out = jnp.concatenate(pieces, axis=0)
    return jnp.moveaxis(out, 0, axis)


