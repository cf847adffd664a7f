"""Comparisons of a gait result with the truth: RMS errors, and the notebook's
quasi-static estimate with the effect of each term of the inverse dynamics."""

from __future__ import annotations

import numpy as np

from ._result import _MOMENT_SIGN, TERMS, GaitResult



def _rms(x, axis=0):
    return np.sqrt(np.nanmean(x**2, axis=axis))


def rms_errors(result: GaitResult, true_moments, true_force_magnitudes=None, *, where=None) -> dict:
    """RMS errors of the moments (and reaction magnitudes) against known true values.

    Args:
      result: an :class:`analyze` result of one trial (jaxmb or clinical convention:
        compared in jaxmb's, as the truth is given).
      true_moments: (T, 3) true hip, knee, ankle moments, N m, jaxmb convention.
      true_force_magnitudes: optional (T, 3) true reaction magnitudes, N.
      where: optional (T,) bool samples for the moments; default: where any true
        moment is non-zero (the running data give them from heel strike on).

    Returns:
      dict: "moments" (3,) N m, "moments_rms" (3,) the RMS true moments, and with
      forces "forces" (3,) N (over every valid sample) and "forces_rms" (3,).
    """
    r = result.to_convention("jaxmb")
    r.need("moments")
    tm = np.asarray(true_moments, float)
    if r.moments.shape != tm.shape:
        raise ValueError(f"true_moments must have shape {r.moments.shape}, got {tm.shape}")
    w = np.any(tm != 0, axis=-1) if where is None else np.asarray(where, bool)
    w = w & r.mask
    out = {"moments": _rms(r.moments[w] - tm[w]), "moments_rms": _rms(tm[w])}
    if true_force_magnitudes is not None:
        tf = np.asarray(true_force_magnitudes, float)
        mag = r.reaction_magnitudes
        out["forces"] = _rms(mag[r.mask] - tf[r.mask])
        out["forces_rms"] = _rms(tf[r.mask])
    return out


def term_effects(result: GaitResult, true_moments=None, true_force_magnitudes=None, *, where=None,
                 min_force: float = 20.0) -> dict:  # fmt: skip
    """The notebook's comparison: the quasi-static estimate and the effect of each term.

    Needs a result of ``analyze(..., terms=True)``. The moments and reactions are the
    sum of four terms (:data:`TERMS`): gravity (the weight of the segments), the
    ground reaction force, the linear inertia (m a of the centres of mass, velocity
    products included) and the rotational inertia (I alpha). Dropping the two inertial
    terms gives the quasi-static estimate.

    Args:
      result: an :func:`analyze` result with ``terms``, one trial.
      true_moments, true_force_magnitudes: optional (T, 3) truth (jaxmb convention),
        to report the error of each estimate against it.
      where: (T,) bool samples to summarise, e.g. the stance phase that the caller
        knows (default: the valid samples where the vertical ground reaction force
        exceeds ``min_force``, the stance phase as :func:`sagittal` finds it; not
        where it is non-zero: a filtered force is non-zero everywhere).
      min_force: N, for the default ``where``.

    Returns:
      dict with "where" (T,) bool and, for each of "full", "quasi_static" and
      "without_<term>": {"moments": (T, 3), "forces": (T, 3) magnitudes,
      "moment_change_rms": (3,) N m RMS change from the full estimate,
      "force_change_rms": (3,) N, and with the truth "moment_error_rms",
      "force_error_rms"}; and "terms": {term: {"moment_rms": (3,), "force_rms": (3,)}}
      the RMS of each term itself. Moments in the result's convention.
    """
    if result.terms is None:
        raise ValueError("term_effects needs analyze(..., terms=True)")
    if result.moments.ndim != 2:
        raise ValueError("term_effects takes the result of one trial")
    w = (result.force[:, 1] > min_force) & result.mask if where is None else np.asarray(where, bool) & result.mask
    full_m, full_r = result.moments, result.reactions
    variants = {"full": (full_m, full_r)}
    inert_m = result.terms["linear_inertia"][0] + result.terms["rotational_inertia"][0]
    inert_r = result.terms["linear_inertia"][1] + result.terms["rotational_inertia"][1]
    variants["quasi_static"] = (full_m - inert_m, full_r - inert_r)
    for k in TERMS:
        m_, r_ = result.terms[k]
        variants[f"without_{k}"] = (full_m - m_, full_r - r_)
    sign = _MOMENT_SIGN if result.convention == "clinical" else np.ones(3)
    out = {"where": w, "terms": {}}
    full_f = np.linalg.norm(full_r, axis=-1)
    for name, (m_, r_) in variants.items():
        f_ = np.linalg.norm(r_, axis=-1)
        d = {"moments": m_, "forces": f_, "moment_change_rms": _rms(m_[w] - full_m[w]),
             "force_change_rms": _rms(f_[w] - full_f[w])}  # fmt: skip
        if true_moments is not None:
            tm = np.asarray(true_moments, float) * sign
            d["moment_error_rms"] = _rms(m_[w] - tm[w])
        if true_force_magnitudes is not None:
            d["force_error_rms"] = _rms(f_[w] - np.asarray(true_force_magnitudes, float)[w])
        out[name] = d
    for k in TERMS:
        m_, r_ = result.terms[k]
        out["terms"][k] = {"moment_rms": _rms(m_[w]), "force_rms": _rms(np.linalg.norm(r_, axis=-1)[w])}
    return out
