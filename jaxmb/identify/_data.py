"""The inputs of :func:`jaxmb.identify.fit`: the movement, the free parameters, the
weights, and each measured data kind as rows of the regressor."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._checks import _as_array, check_finite
from ..model import Model
from ._regressor import regressor


def _as_float_array(x, name):
    """``x`` as a float64 NumPy array (ValueError naming ``name`` for complex or
    non-numeric values, or a ragged list)."""
    if np.iscomplexobj(x):  # NumPy would drop the imaginary part with a ComplexWarning
        raise ValueError(f"{name} must be real numbers, got complex values")
    try:
        return np.asarray(_as_array(x, name), dtype=float)
    except (TypeError, ValueError) as e:
        if str(e).startswith(name):
            raise
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from None


def _check_finite(a, name):
    """:func:`jaxmb._checks.check_finite`, with what to do about a bad sample."""
    try:
        check_finite(a, name)
    except ValueError as e:
        raise ValueError(f"{e}: remove or fill those samples (weights of 0 ignore a sample, but it must be "
                         "finite)") from None


def _some_weight(w, kind: str, arg: str) -> None:
    if not (np.asarray(w) > 0).any():
        raise ValueError(f"{kind}_weights are 0 everywhere: no {kind} would be fitted; leave out {arg}= "
                         "or give some weights > 0")  # fmt: skip


def _free_mask(model: Model, free) -> np.ndarray:
    n = model.segments
    if free is None:
        return np.ones((n, 4), bool)
    if isinstance(free, str):
        free = [free]
    arr = None
    if not isinstance(free, (list, tuple)) or not all(isinstance(f, str) for f in free):
        try:
            arr = np.asarray(free)
        except ValueError:
            raise ValueError(f"free must be None, a (segments, 4) bool mask or names, got {free!r}") from None
    if arr is not None and arr.dtype.kind in "iu" and arr.size and np.isin(arr, (0, 1)).all():
        arr = arr.astype(bool)  # an integer 0/1 mask
    if arr is not None and arr.dtype.kind not in "bU":
        raise ValueError(f"free as a mask must be bool (or integer 0/1) of shape ({n}, 4), got dtype {arr.dtype}"
                         + (" with values other than 0 and 1" if arr.dtype.kind in "iu" else ""))
    if arr is not None and arr.dtype == bool:
        if arr.shape == (4 * n,):
            arr = arr.reshape(n, 4)
        if arr.shape != (n, 4):
            raise ValueError(f"free as a mask must have shape ({n}, 4) (mass, com_along, com_across, inertia), "
                             f"got {arr.shape}")  # fmt: skip
        mask = arr.copy()
    else:
        mask = np.zeros((n, 4), bool)
        groups = {"mass": [0], "com": [1, 2], "com_along": [1], "com_across": [2], "inertia": [3],
                  "all": [0, 1, 2, 3]}  # fmt: skip
        for f in free:
            if not isinstance(f, str):
                raise ValueError(f"free must be None, a (segments, 4) bool mask or names, got {f!r}")
            seg, _, what = f.rpartition(".")
            if what not in groups:
                raise ValueError(f"unknown parameter {what!r} in free={f!r}; use one of {sorted(groups)}, "
                                 "optionally as 'segment.parameter'")  # fmt: skip
            rows = range(n) if not seg else [model.index(seg)]
            for i in rows:
                mask[i, groups[what]] = True
    if not mask.any():
        raise ValueError("free selects no parameter to fit")
    return mask


def _leading(model, q, qd, qdd):
    dof = model.dof
    arrs = []
    for x, nm in ((q, "q"), (qd, "qd"), (qdd, "qdd")):
        a = _as_float_array(x, nm)
        if a.ndim < 1 or a.shape[-1] != dof:
            raise ValueError(f"{nm} must have shape (..., {dof}) for this model (dof={dof}), got {a.shape}")
        _check_finite(a, nm)
        arrs.append(a)
    try:
        lead = np.broadcast_shapes(*(a.shape[:-1] for a in arrs))
    except ValueError:
        raise ValueError(f"q {arrs[0].shape}, qd {arrs[1].shape} and qdd {arrs[2].shape} do not broadcast") from None
    return [np.broadcast_to(a, lead + (dof,)) for a in arrs], lead


def _weights(w, lead, core, name):
    """Weights (lead + core) from None, per-sample (lead) or per-value weights."""
    if w is None:
        return np.ones(lead + core)
    w = _as_float_array(w, name)
    _check_finite(w, name)
    if (w < 0).any():
        raise ValueError(f"{name} must be >= 0")
    full = lead + core
    # a shape that broadcasts to the samples, e.g. (trials, 1) for samples (trials, T):
    # one weight per sample (refused before as broadcasting to neither), unless it
    # also reads as the data's last axes
    as_samples = w.ndim == len(lead) and all(a in (1, b) for a, b in zip(w.shape, lead))
    if as_samples and w.shape != lead:
        try:
            as_data = np.broadcast_shapes(w.shape, full) == full
        except ValueError:
            as_data = False
        if as_data:
            raise ValueError(f"{name} of shape {w.shape} is ambiguous: one weight per sample of {lead} (give shape "
                             f"{w.shape + (1,) * len(core)}) or per value of the data {full} along its last axes "
                             f"(give shape {(1,) * len(core) + w.shape})")  # fmt: skip
    if as_samples:
        w = w.reshape(w.shape + (1,) * len(core))
    # weights over the leading axes only, e.g. one per trial (trials,) for samples
    # (trials, T): NumPy aligns them with the last axes instead, the joints when
    # trials == segments, silently. Refused, with the shape that says either
    lead_only = 0 < w.ndim < len(full) and w.shape == full[: w.ndim] and any(d > 1 for d in w.shape)
    fix = (f"; for one weight per entry of the leading axes give shape "
           f"{w.shape + (1,) * (len(full) - w.ndim)}" if lead_only else "")  # fmt: skip
    try:
        out = np.broadcast_to(w, full).astype(float)
    except ValueError:
        raise ValueError(f"{name} has shape {w.shape}, which broadcasts neither to the samples {lead} "
                         f"nor to the data {full}{fix}") from None
    if lead_only:
        raise ValueError(f"{name} of shape {w.shape} is ambiguous: it broadcasts to the data {full} along "
                         f"its last axes{fix}, or {(1,) * (len(full) - w.ndim) + w.shape} for the last axes")
    return out


@dataclasses.dataclass(eq=False)
class _Kind:
    """One measured data kind of a fit as rows of its regressor: the stage input of
    every step after the checks (linear fit, consistent fit, standard errors,
    residuals). A new kind (e.g. residual wrenches at the root that must be zero) is
    one more builder that returns a ``_Kind``.

    Attributes:
      name: its key in ``sigma``, ``residuals``, ``rms`` and ``noise`` ("moments").
      form: "linear" (rows Y (N, 4 n)) or "magnitude" (rows Y (N, 2, 4 n): the
        data are |Y pi + y0|).
      quantity: what :func:`regressor` builds its rows from (identifiability checks
        on another movement).
      unit: of the data ("N m", "N").
      Y, y0, meas: the rows of the values of weight > 0.
      w: (N,) their weights divided by ``scale``.
      scale: the data's noise scale at the start: ``sigma``, else the data's RMS.
      sigma: the noise level given (None: estimated).
      count: data values (N, or 2 N for vectors kept as linear rows).
      data_rms: RMS of the values kept.
      outputs: (segments,) bool, the joints measured.
      full: (Y, y0, weights, measured) over every sample, for the residuals.
    """

    name: str
    form: str
    quantity: str
    unit: str
    Y: np.ndarray
    y0: np.ndarray
    meas: np.ndarray
    w: np.ndarray
    scale: float
    sigma: float | None
    count: int
    data_rms: float
    outputs: np.ndarray
    full: tuple

    def linear_rows(self) -> tuple:
        """(A, b): the rows of linear least squares, w Y pi = w (meas - y0)."""
        return self.Y * self.w[:, None], (self.meas - self.y0) * self.w


def _noise_scale(meas, sigma, name) -> tuple:
    """(data RMS, starting noise scale) of the values kept."""
    rms = float(np.sqrt(np.mean(meas**2))) if meas.size else 1.0
    return rms, float(sigma.get(name, rms)) or 1.0


def _moment_kind(model: Model, motion, loads, moments, weights, sigma) -> _Kind:
    """Measured joint moments (..., segments), N m, as rows of the regressor."""
    (q, qd, qdd), lead = motion
    n = model.segments
    mom = _as_float_array(moments, "moments")
    if mom.shape != lead + (n,):
        raise ValueError(f"moments must have shape {lead + (n,)} (the samples, then one moment per segment, "
                         f"N m), got {mom.shape}")  # fmt: skip
    _check_finite(mom, "moments")
    w = _weights(weights, lead, (n,), "moment_weights")
    _some_weight(w, "moment", "moments")
    Y, y0 = regressor(model, q, qd, qdd, loads, quantity="joint_moments")
    keep = w.reshape(-1) > 0
    meas = mom.reshape(-1)[keep]
    rms, s = _noise_scale(meas, sigma, "moments")
    return _Kind("moments", "linear", "joint_moments", "N m", np.asarray(Y).reshape(-1, 4 * n)[keep],
                 np.asarray(y0).reshape(-1)[keep], meas, w.reshape(-1)[keep] / s, s, sigma.get("moments"),
                 int(keep.sum()), rms, (w > 0).reshape(-1, n).any(0), (Y, y0, w, mom))  # fmt: skip


def _reaction_kind(model: Model, motion, loads, reactions, weights, sigma) -> _Kind:
    """Measured joint reaction forces, (..., segments, 2) vectors or (..., segments)
    magnitudes, N, as rows of the regressor."""
    (q, qd, qdd), lead = motion
    n = model.segments
    rea = _as_float_array(reactions, "reactions")
    if rea.shape == lead + (n, 2):
        vector = True
    elif rea.shape == lead + (n,):
        vector = False
    else:
        raise ValueError(f"reactions must have shape {lead + (n, 2)} (vectors, N) or {lead + (n,)} "
                         f"(magnitudes, N), got {rea.shape}")  # fmt: skip
    _check_finite(rea, "reactions")
    if not vector and (rea < 0).any():
        raise ValueError("reaction magnitudes must be >= 0")
    w = _weights(weights, lead, (n,), "reaction_weights")
    _some_weight(w, "reaction", "reactions")
    Y, y0 = regressor(model, q, qd, qdd, loads, quantity="joint_reactions")
    keep = w.reshape(-1) > 0
    Yr = np.asarray(Y).reshape(-1, 2, 4 * n)[keep]
    y0r = np.asarray(y0).reshape(-1, 2)[keep]
    meas = rea.reshape((-1, 2) if vector else (-1,))[keep]
    rms, s = _noise_scale(meas, sigma, "reactions")
    wr = w.reshape(-1)[keep] / s
    if vector:  # linear rows, two per vector
        rows = ("linear", Yr.reshape(-1, 4 * n), y0r.reshape(-1), meas.reshape(-1), np.repeat(wr, 2))
    else:
        rows = ("magnitude", Yr, y0r, meas, wr)
    return _Kind("reactions", rows[0], "joint_reactions", "N", *rows[1:], s, sigma.get("reactions"),
                 int(keep.sum()) * (2 if vector else 1), rms, (w > 0).reshape(-1, n).any(0), (Y, y0, w, rea))
