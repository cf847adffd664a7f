"""The low-pass filter of :func:`jaxmb.gait.analyze`: its option value :class:`Filter`
and the choice of each trial's cut-off (given, or by Winter's residual analysis)."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from .._checks import _int_at_least, _positive
from ..signal import residual_analysis


@dataclasses.dataclass(frozen=True)
class Filter:
    """The zero-phase Butterworth low-pass filter of :func:`analyze`, as one value.

    ``analyze(..., filter=Filter(6.0, order=4))`` is ``analyze(..., cutoff=6.0,
    order=4)``: the same settings as :func:`analyze`'s keywords ``cutoff``,
    ``force_cutoff``, ``order`` and ``padlen`` (see there), grouped so that one
    filter can be passed to several analyses.

    Attributes:
      cutoff: None (no filtering), a cut-off in Hz, or "auto" (Winter's residual
        analysis per trial).
      force_cutoff: "same" (the kinematics' cut-off), None (unfiltered) or Hz.
      order: Butterworth order of one pass (2: a 4th-order zero-phase filter).
      padlen: the odd extension at each end of a trial, samples: "auto", None
        (scipy's ``3 * (order + 1)``) or an int.

    Example:
      >>> from jaxmb.gait import Filter
      >>> Filter(6.0).force_cutoff
      'same'
    """

    cutoff: float | str | None = None
    force_cutoff: float | str | None = "same"
    order: int = 2
    padlen: int | str | None = "auto"


class _Cutoffs(NamedTuple):
    """analyze's filter settings, checked, and each trial's kinematics cut-off."""

    order: int
    padlen: int | str | None  # "auto", None or samples
    least: int  # samples a trial needs to be filtered: more than this
    auto: bool  # cutoff="auto"
    cutoff: float | None  # Hz, the given one (None: no filter, or "auto")
    same: bool  # force_cutoff="same"
    force_cutoff: float | None  # Hz, the given one (unused with same)
    trial: np.ndarray  # (B,) each trial's kinematics cut-off, Hz, NaN: unfiltered


def _filter_settings(filter, cutoff, force_cutoff, order, padlen) -> tuple:
    """(cutoff, force_cutoff, order, padlen) from ``filter=`` or from the keywords."""
    if filter is None:
        return cutoff, force_cutoff, order, padlen
    if not isinstance(filter, Filter):
        raise ValueError(f"filter must be a jaxmb.gait.Filter, got {type(filter).__name__}")
    if cutoff is not None or force_cutoff != "same" or order != 2 or padlen != "auto":
        raise ValueError("give the filter as filter=Filter(...) or as the keywords cutoff=, force_cutoff=, order=, "
                         "padlen=, not both")  # fmt: skip
    return filter.cutoff, filter.force_cutoff, filter.order, filter.padlen


def _below_nyquist(cutoff, name: str, rate: float, whose: str) -> float:
    """A cut-off, Hz: a number in (0, rate / 2), or a ValueError naming it."""
    cutoff = _positive(cutoff, name, "Hz")
    if cutoff >= rate / 2:
        raise ValueError(f"{name} {cutoff} Hz must be below the {whose} Nyquist frequency {rate / 2} Hz")
    return cutoff


def _cutoffs(trials, cutoff, force_cutoff, order, padlen, rate: float, force_rate: float) -> _Cutoffs:
    """analyze's cut-offs, checked against the Nyquist frequencies; with
    ``cutoff="auto"`` each trial's from the residual analysis of its eight joint-centre
    coordinates (the highest of theirs: no coordinate is over-smoothed)."""
    order = _int_at_least(order, "order", 1)
    if padlen is None or isinstance(padlen, str):
        if padlen not in (None, "auto"):
            raise ValueError(f"padlen must be 'auto', None or an int >= 0 (samples), got {padlen!r}")
        least = 3 * (order + 1)
    else:
        padlen = least = _int_at_least(padlen, "padlen", 0, " (samples), 'auto' or None")
    auto = isinstance(cutoff, str)
    if auto and cutoff != "auto":
        raise ValueError(f"cutoff must be None, a number (Hz) or 'auto', got {cutoff!r}")
    if cutoff is not None and not auto:
        cutoff = _below_nyquist(cutoff, "cutoff", rate, "kinematics'")
    same = isinstance(force_cutoff, str)
    if same and force_cutoff != "same":
        raise ValueError(f"force_cutoff must be 'same', None or a number (Hz), got {force_cutoff!r}")
    if force_cutoff is not None and not same:
        force_cutoff = _below_nyquist(force_cutoff, "force_cutoff", force_rate, "force's")
    B = trials.points[0].shape[0]
    trial_cut = np.full(B, np.nan)
    if auto:
        for b in range(B):
            P = np.concatenate([a[b, : trials.frames[b]] for a in trials.points], -1)  # (T, 8)
            ra = residual_analysis(P, rate, axis=0, order=order)
            trial_cut[b] = float(np.max(ra.cutoff))
    elif cutoff is not None:
        trial_cut[:] = cutoff
    for c in trial_cut:
        if np.isfinite(c) and same and c >= force_rate / 2:
            raise ValueError(f"cutoff {c} Hz must be below the force's Nyquist frequency {force_rate / 2} Hz")
    return _Cutoffs(order, padlen, least, auto, None if auto else cutoff, same, force_cutoff, trial_cut)
