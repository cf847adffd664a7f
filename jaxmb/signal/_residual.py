"""Winter's residual analysis: the cut-off where the residual of the filtered signal
comes down to the noise level."""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np

from .._checks import _finite_array
from ._design import _axis, _positive_rate
from ._numpy import lowpass


@dataclasses.dataclass(frozen=True)
class ResidualAnalysis:
    """Result of :func:`residual_analysis`.

    Attributes:
      cutoff: chosen cut-off, Hz: a float for a 1-D signal, else an array of the
        shape of ``x`` without the time axis (one per channel).
      cutoffs: (F,) tested cut-offs, Hz.
      residuals: (F, ...) RMS residual ``sqrt(mean((x - lowpass(x, fc))**2))`` for
        each tested cut-off and channel, in the units of ``x``.
      intercept: (...) the noise level: the intercept at 0 Hz of the straight line
        fitted to the residuals at high cut-offs.
      slope: (...) that line's slope, units of x per Hz.
      fit_range: (2,) the cut-offs (Hz) between which the line was fitted.
    """

    cutoff: float | np.ndarray
    cutoffs: np.ndarray
    residuals: np.ndarray
    intercept: np.ndarray
    slope: np.ndarray
    fit_range: tuple

    def figure(self, channel=None, ax=None):
        """The residual curve, the fitted noise line and the chosen cut-off.

        Args:
          channel: index into the channel dimensions (default: the first channel;
            0 or None for a single signal).
          ax: optional matplotlib Axes; a new Figure (object API) otherwise.

        Returns:
          The matplotlib Figure.
        """
        from matplotlib.figure import Figure

        res = self.residuals.reshape(len(self.cutoffs), -1)
        shape = self.residuals.shape[1:]
        if channel is None or (not shape and np.ndim(channel) == 0 and int(channel) in (0, -1)):
            k = 0
        else:
            idx = np.atleast_1d(channel)
            if len(idx) != len(shape) or not all(-n <= int(i) < n for i, n in zip(idx, shape)):
                raise ValueError(f"channel {channel!r} is no index into the channels, of shape {shape}")
            k = int(np.ravel_multi_index(tuple(int(i) % n for i, n in zip(idx, shape)), shape))
        a = np.ravel(self.intercept)[k]
        b = np.ravel(self.slope)[k]
        fc = np.ravel(self.cutoff)[k]
        if ax is None:
            fig = Figure(figsize=(6, 4))
            ax = fig.add_subplot()
        else:
            fig = ax.figure
        ax.plot(self.cutoffs, res[:, k], label="residual")
        f = np.array([0.0, self.cutoffs[-1]])
        ax.plot(f, a + b * f, "--", label="noise line")
        ax.axhline(a, color="0.5", lw=0.8)
        ax.axvline(fc, color="C3", lw=1, label=f"chosen cut-off {fc:.3g} Hz")
        ax.set_xlabel("cut-off (Hz)")
        ax.set_ylabel("RMS residual")
        ax.legend(frameon=False)
        return fig


def residual_analysis(x, rate, cutoffs=None, axis: int = 0, *, order: int = 2, fit_from: float = 0.5):
    """Winter's residual analysis: choose the cut-off from the residual curve.

    For each tested cut-off ``fc`` the residual ``R(fc) = sqrt(mean((x - x_fc)**2))``
    of the filtered signal ``x_fc`` (:func:`lowpass`) is computed. Where ``fc`` is
    above the signal's content, only noise is removed and, for white noise, ``R``
    falls almost linearly with ``fc``; the straight line fitted to that part (the
    tested cut-offs above ``fit_from`` of the highest) extrapolated to 0 Hz gives the
    noise level ``a``. The chosen cut-off is where the residual curve comes down to
    ``a`` (Winter 2009, section 3.4.4): below it the filter would remove signal
    along with the noise, above it noise would pass. Each channel (every index of the
    dimensions other than ``axis``) is analysed on its own.

    Args:
      x: samples, any shape, along ``axis``; finite.
      rate: sampling rate, Hz.
      cutoffs: (F,) increasing cut-offs to test, Hz, each in (0, rate/2); default
        200 equally spaced values from rate/800 to rate/4 (0.125 to 25 Hz at
        100 Hz), so that the noise line is fitted between rate/8 and rate/4.
      axis: the time axis.
      order: Butterworth order of one pass (as :func:`lowpass`).
      fit_from: the line is fitted to the cut-offs at or above ``fit_from`` times the
        highest tested one (default 0.5); at least 3 cut-offs are used.

    Returns:
      :class:`ResidualAnalysis` with ``cutoff`` (Hz, per channel) and the curve. A
      UserWarning where a channel's cut-off lands at the edge of the tested range:
      the line's band then holds signal (Winter's method assumes noise alone there)
      or the signal is all noise.

    Raises:
      ValueError: as :func:`lowpass`, or fewer than 4 cut-offs, or cut-offs not
        increasing.
    """
    rate = _positive_rate(rate)
    x = _finite_array(x)
    axis = _axis(axis, x.ndim)
    if cutoffs is None:
        cutoffs = np.linspace(rate / 800.0, rate / 4.0, 200)
    cutoffs = np.asarray(cutoffs, dtype=float).reshape(-1)
    if cutoffs.size < 4:
        raise ValueError(f"residual_analysis needs at least 4 cut-offs, got {cutoffs.size}")
    if np.any(np.diff(cutoffs) <= 0):
        raise ValueError("cutoffs must be strictly increasing")
    if not 0.0 < fit_from < 1.0:
        raise ValueError(f"fit_from must be in (0, 1), got {fit_from}")
    xt = np.moveaxis(x, axis, 0)
    res = np.stack([np.sqrt(np.mean((xt - lowpass(xt, rate, fc, order, 0)) ** 2, axis=0)) for fc in cutoffs])
    sel = cutoffs >= fit_from * cutoffs[-1]
    if sel.sum() < 3:
        sel = np.zeros_like(sel)
        sel[-3:] = True
    f = cutoffs[sel]
    flat = res.reshape(len(cutoffs), -1)
    A = np.stack([np.ones_like(f), f], 1)
    (a, b), *_ = np.linalg.lstsq(A, flat[sel], rcond=None)  # (channels,) each
    chosen = np.array([_crossing(cutoffs, flat[:, k], a[k]) for k in range(flat.shape[1])])
    edge = np.flatnonzero((chosen <= cutoffs[0]) | (chosen >= cutoffs[-1]))
    if edge.size:
        # the residual never crosses the noise line inside the tested range: the line's
        # range (its cut-offs) holds signal, not only noise (a 15 Hz sine at 100 Hz got
        # 0.125 Hz, removing it all), or the signal is noise throughout
        which = "" if flat.shape[1] == 1 else f" (channels {edge[:6].tolist()}{', ...' if edge.size > 6 else ''} of the flattened other axes)"
        warnings.warn(f"residual_analysis: the cut-off is at the edge of the tested range, {float(chosen[edge[0]]):.4g} "
                      f"Hz{which}: the straight line fitted from {float(f[0]):.4g} to {float(f[-1]):.4g} Hz does not "
                      "describe noise alone there (signal in that band, or a signal that is all noise); check "
                      "the curve (.figure()) and give cutoffs= or fit_from=", UserWarning, stacklevel=2)  # fmt: skip
    shape = res.shape[1:]
    cutoff = float(chosen[0]) if not shape else chosen.reshape(shape)
    return ResidualAnalysis(cutoff=cutoff, cutoffs=cutoffs, residuals=res, intercept=a.reshape(shape),
                            slope=b.reshape(shape), fit_range=(float(f[0]), float(f[-1])))  # fmt: skip


def _crossing(fc: np.ndarray, r: np.ndarray, level: float) -> float:
    """The lowest cut-off at which the residual curve r(fc) comes down to ``level``
    (linear interpolation between tested cut-offs)."""
    below = np.flatnonzero(r <= level)
    if below.size == 0:
        return float(fc[-1])
    k = int(below[0])
    if k == 0:
        return float(fc[0])
    r0, r1 = r[k - 1], r[k]
    t = (r0 - level) / (r0 - r1) if r0 != r1 else 1.0
    return float(fc[k - 1] + t * (fc[k] - fc[k - 1]))

