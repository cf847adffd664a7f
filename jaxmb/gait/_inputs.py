"""Checks of :func:`jaxmb.gait.analyze`'s inputs: joint centres, force and centre of
pressure as (B, T, ...) arrays with the valid samples of each trial, the segment
parameters, per-trial quantities, the force's resampling to the kinematics."""

from __future__ import annotations

import math
from typing import Mapping, NamedTuple

import numpy as np

from .._checks import _as_float, _positive
from ..anthropometry import table_row
from ..datasets import SEGMENTS
from ._result import _CONVENTIONS



# Dempster (Winter's table) rows for thigh, shank, foot.
_TABLE_ROWS = {
    "dempster": ("thigh", "leg", "foot"),
    "deleva_male": ("thigh", "shank", "foot"),
    "deleva_female": ("thigh", "shank", "foot"),
}


def _check_points(arrays: dict) -> tuple:
    shape = None
    for name, a in arrays.items():
        if a.ndim < 2 or a.shape[-1] != 2:
            raise ValueError(f"{name} must have shape (T, 2) or (..., T, 2) (x forward, y up, m), got {a.shape}")
        if shape is None:
            shape = a.shape
        elif a.shape != shape:
            first = next(iter(arrays))
            raise ValueError(f"{name} has shape {a.shape} but {first} has {shape}: joint centres must match")
    return shape


def _check_finite_valid(a: np.ndarray, name: str, mask: np.ndarray):
    """NaN/inf is an error on valid samples (a: (B, T, ...), mask: (B, T))."""
    if np.isfinite(a).all():  # the common case, one quick pass over the data
        return
    bad = ~np.isfinite(a).reshape(a.shape[:2] + (-1,)).all(-1) & mask
    if bad.any():
        b, t = (int(i) for i in np.argwhere(bad)[0])
        where = f"trial {b}, sample {t}" if a.shape[0] > 1 else f"sample {t}"
        raise ValueError(f"{name} contains NaN or infinite values ({where}): fill gaps before the analysis")


def _pad_list(x, name: str, core: tuple):
    """A list of per-trial arrays of unequal length -> padded (B, T, ...) and frames."""
    arrs = [_as_float(a, f"{name}[{i}]") for i, a in enumerate(x)]
    if not arrs:
        raise ValueError(f"{name} is an empty list of trials")
    for i, a in enumerate(arrs):
        if a.ndim != 1 + len(core) or a.shape[1:] != core:
            want = "(T,)" if not core else f"(T, {', '.join(map(str, core))})"
            raise ValueError(f"{name}[{i}] must have shape {want}, got {a.shape}")
    frames = np.array([a.shape[0] for a in arrs])
    out = np.zeros((len(arrs), int(frames.max())) + core)
    for i, a in enumerate(arrs):
        out[i, : a.shape[0]] = a
    return out, frames


def _is_ragged(x) -> bool:
    # an empty list too: _pad_list names it (as an array it was "shape (0,)")
    return isinstance(x, (list, tuple)) and (len(x) == 0 or all(np.ndim(a) >= 1 for a in x) and (
        len({np.shape(a)[0] for a in x}) > 1 or isinstance(x[0], np.ndarray)
    ))


def _segment_spec(segments, body_mass, table, lead: tuple):
    """(a, b, c, from_table), each (B, 3) but the flag, from which the jitted pipeline
    makes mass, inertia and com once it knows the lengths L:
    given segments: mass = a, inertia = b, com = c L; from a table: mass = a,
    inertia = a (b L)^2 (b: radius of gyration as a fraction of L), com = c L."""
    B = int(np.prod(lead, dtype=int))
    if segments is not None:
        if not isinstance(segments, Mapping):
            raise ValueError("segments must be a dict with 'mass', 'inertia', 'com' (thigh, shank, foot)")
        unknown = set(segments) - {"mass", "inertia", "com"}
        missing = {"mass", "inertia", "com"} - set(segments)
        if unknown or missing:
            raise ValueError(f"segments needs keys 'mass', 'inertia', 'com'; missing {sorted(missing)}, "
                             f"unknown {sorted(unknown)}")  # fmt: skip
        out = {}
        for k in ("mass", "inertia", "com"):
            v = _as_float(segments[k], f"segments['{k}']")
            if v.shape[-1:] != (3,):
                raise ValueError(f"segments['{k}'] must have shape (3,) (thigh, shank, foot) or (..., 3), got {v.shape}")
            try:
                v = np.broadcast_to(v, lead + (3,))
            except ValueError:
                raise ValueError(f"segments['{k}'] has shape {v.shape}, which does not fit the trials {lead}") from None
            if not np.isfinite(v).all():
                raise ValueError(f"segments['{k}'] is not finite")
            if k != "com" and (v <= 0).any():
                j = int(np.argwhere(v <= 0)[0][-1])
                raise ValueError(f"segments['{k}'] of the {SEGMENTS[j]} must be > 0, got {v[..., j].min()}")
            if k == "com" and ((v < 0) | (v > 1)).any():
                j = int(np.argwhere((v < 0) | (v > 1))[0][-1])
                bad = v[..., j].reshape(-1)[np.argmax(np.abs(v[..., j] - 0.5).reshape(-1))]
                hint = f" (a percentage? {bad / 100:.4g}, not {bad:g})" if 1 < bad <= 100 else ""
                raise ValueError(f"segments['com'] of the {SEGMENTS[j]} must be a fraction of its length from the "
                                 f"proximal joint, between 0 and 1, got {bad:g}{hint}")  # fmt: skip
            out[k] = v.reshape(B, 3)
        return out["mass"], out["inertia"], out["com"], False
    if body_mass is None:
        raise ValueError("give segments={'mass', 'inertia', 'com'} or body_mass= (kg) for Dempster's parameters")
    if table not in _TABLE_ROWS:
        raise ValueError(f"table must be one of {sorted(_TABLE_ROWS)}, got {table!r}")
    M = np.broadcast_to(_per_trial(body_mass, "body_mass", "kg", lead), lead).reshape(B)
    rows = [table_row(table, s) for s in _TABLE_ROWS[table]]
    fm = np.array([r["mass"] for r in rows])
    fc = np.array([r["com"] for r in rows])
    fk = np.array([r["gyration"] for r in rows])
    return M[:, None] * fm, np.broadcast_to(fk, (B, 3)), np.broadcast_to(fc, (B, 3)), True


def _counts(x, name: str, what: str, lead: tuple, most: int) -> np.ndarray:
    """Valid sample counts per trial (``frames``, ``force_frames``): integers of the
    trials' shape ``lead``, between 1 and ``most``; flat (B,)."""
    c = np.asarray(x)
    if not np.issubdtype(c.dtype, np.integer) or c.shape != lead:
        raise ValueError(f"{name} must be integers of shape {lead} ({what}), got {c!r}")
    c = c.reshape(-1).astype(int)
    if (c < 1).any() or (c > most).any():
        raise ValueError(f"{name} must be between 1 and {most}, got {c.min()}..{c.max()}")
    return c


def _per_trial(x, name: str, unit: str, lead):
    """A positive quantity per trial (body mass, height): () or lead-shaped, or None."""
    if x is None:
        return None
    v = _as_float(x, name)
    try:
        v = np.broadcast_to(v, lead).copy()
    except ValueError:
        raise ValueError(f"{name} has shape {v.shape}, which does not fit the trials {lead}") from None
    if not np.isfinite(v).all() or (v <= 0).any():
        raise ValueError(f"{name} must be > 0 {unit}, got {v}")
    return v if lead else float(v)


def _resample_index(n_out: int, rate_out: float, n_in: int, rate_in: float, name: str):
    t = np.arange(n_out) / rate_out * rate_in  # fractional input sample of each output
    if t[-1] > n_in - 1 + 1e-6:
        raise ValueError(f"{name} covers {(n_in - 1) / rate_in:.6g} s at {rate_in:g} Hz, shorter than the "
                         f"kinematics' {(n_out - 1) / rate_out:.6g} s")  # fmt: skip
    i0 = np.minimum(np.floor(t).astype(int), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = np.clip(t - i0, 0.0, 1.0)
    return i0, i1, w


# ------------------------------------------------------------ analyze's stages


class _Trials(NamedTuple):
    """analyze's inputs as flat batches: B trials, T samples, Tf force samples."""

    points: tuple  # (hip, knee, ankle, toe) joint centres, (B, T, 2) each, m
    force: np.ndarray  # (B, Tf, 2) N
    cop: np.ndarray  # (B, Tf) or (B, Tf, 2) m
    free_moment: np.ndarray | None  # (B, Tf) N m
    pelvis: np.ndarray | None  # (B, T) rad
    lead: tuple  # the trials' batch shape
    frames: np.ndarray  # (B,) valid samples per trial
    force_frames: np.ndarray  # (B,) valid force samples per trial
    mask: np.ndarray  # (B, T) bool, the valid samples

    @property
    def shape(self) -> tuple:
        """(B, T, Tf)."""
        return self.points[0].shape[:2] + (self.force.shape[1],)


def _check_options(convention, dtype, rate, force_rate, gravity) -> tuple:
    """analyze's scalar options, checked: (rate, force_rate, gravity) as floats."""
    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    rate = _positive(rate, "rate", "Hz")
    force_rate = rate if force_rate is None else _positive(force_rate, "force_rate", "Hz")
    gravity = float(gravity)
    if not math.isfinite(gravity):
        raise ValueError(f"gravity must be finite (m/s^2), got {gravity}")
    return rate, force_rate, gravity


def _from_lists(hip, knee, ankle, toe, force, cop, free_moment, pelvis) -> tuple:
    """Lists of per-trial arrays, padded: (points, force, cop, free moment, pelvis,
    lead, frames, force frames)."""
    pts, fr = {}, []
    for name, x in (("hip", hip), ("knee", knee), ("ankle", ankle), ("toe", toe)):
        if not _is_ragged(x) or len(x) != len(hip):
            raise ValueError(f"{name} must be a list of {len(hip)} trials like hip")
        pts[name], f = _pad_list(x, name, (2,))
        fr.append(f)
    if any((f != fr[0]).any() for f in fr):
        raise ValueError("the joint centres of each trial must have the same number of samples")
    kin_frames = fr[0]
    force_b, ffr = _pad_list(force, "force", (2,)) if _is_ragged(force) else (None, None)
    if force_b is None or len(force_b) != len(hip):
        raise ValueError(f"force must be a list of {len(hip)} trials like hip")
    cop_core = (2,) if np.ndim(cop[0]) == 2 else ()
    cop_b, cfr = _pad_list(cop, "cop", cop_core)
    if len(cop_b) != len(hip) or (cfr != ffr).any():
        raise ValueError("cop must be a list of trials with the force's number of samples")
    mz_b = None
    if free_moment is not None:
        mz_b, mfr = _pad_list(free_moment, "free_moment", ())
        if len(mz_b) != len(hip) or (mfr != ffr).any():
            raise ValueError("free_moment must be a list of trials with the force's number of samples")
    pelvis_a = None
    if pelvis is not None:
        pelvis_a, pfr = _pad_list(pelvis, "pelvis", ())
        if (pfr != kin_frames).any():
            raise ValueError("pelvis must be a list of trials with the kinematics' number of samples")
    PT = tuple(pts[k] for k in ("hip", "knee", "ankle", "toe"))  # (B, T, 2) each
    return PT, force_b, cop_b, mz_b, pelvis_a, (len(hip),), kin_frames, ffr


def _from_arrays(hip, knee, ankle, toe, force, cop, free_moment, pelvis, frames, force_frames) -> tuple:
    """(..., T, ...) arrays, flattened to B trials: (points, force, cop, free moment,
    pelvis, lead, frames, force frames or None)."""
    arrays = {k: _as_float(v, k) for k, v in (("hip", hip), ("knee", knee), ("ankle", ankle), ("toe", toe))}
    shape = _check_points(arrays)
    lead, T = shape[:-2], shape[-2]
    force_a = _as_float(force, "force")
    if force_a.ndim < 2 or force_a.shape[-1] != 2 or force_a.shape[:-2] != lead:
        want = "(" + ", ".join([str(d) for d in lead] + ["Tf", "2"]) + ")"
        raise ValueError(f"force must have shape {want} (Fx, Fy, N; Tf force samples), got {force_a.shape}")
    Tf = force_a.shape[-2]
    cop_a = _as_float(cop, "cop")
    if cop_a.shape != lead + (Tf,) and cop_a.shape != lead + (Tf, 2):
        raise ValueError(f"cop must have shape {lead + (Tf,)} (x on the ground) or {lead + (Tf, 2)}, "
                         f"got {cop_a.shape}")  # fmt: skip
    mz_a = None
    if free_moment is not None:
        mz_a = _as_float(free_moment, "free_moment")
        if mz_a.shape != lead + (Tf,):
            raise ValueError(f"free_moment must have shape {lead + (Tf,)} (N m), got {mz_a.shape}")
    pelvis_a = None
    if pelvis is not None:
        pelvis_a = _as_float(pelvis, "pelvis")
        if pelvis_a.shape != lead + (T,):
            raise ValueError(f"pelvis must have shape {lead + (T,)} (rad), got {pelvis_a.shape}")
    B = int(np.prod(lead, dtype=int))
    PT = tuple(arrays[k].reshape(B, T, 2) for k in ("hip", "knee", "ankle", "toe"))
    force_a = force_a.reshape(B, Tf, 2)
    cop_a = cop_a.reshape((B, Tf) + cop_a.shape[len(lead) + 1 :])
    mz_a = None if mz_a is None else mz_a.reshape(B, Tf)
    pelvis_a = None if pelvis_a is None else pelvis_a.reshape(B, T)
    kin_frames = np.full(B, T) if frames is None else _counts(frames, "frames", "valid samples per trial", lead, T)
    if force_frames is not None:
        force_frames = _counts(force_frames, "force_frames", "valid force samples per trial", lead, Tf)
    return PT, force_a, cop_a, mz_a, pelvis_a, lead, kin_frames, force_frames


def _trials(hip, knee, ankle, toe, force, cop, free_moment, pelvis, frames, force_frames, rate, force_rate) -> _Trials:
    """analyze's inputs (lists of trials or arrays) as :class:`_Trials`, checked: shapes,
    valid samples, finite values where valid, units."""
    if _is_ragged(hip):
        if frames is not None or force_frames is not None:
            raise ValueError("give either lists of trials (padded here) or padded arrays with frames= "
                             "(and force_frames=), not both")
        PT, force_a, cop_a, mz_a, pelvis_a, lead, kin_frames, force_frames = _from_lists(
            hip, knee, ankle, toe, force, cop, free_moment, pelvis)
    else:
        PT, force_a, cop_a, mz_a, pelvis_a, lead, kin_frames, force_frames = _from_arrays(
            hip, knee, ankle, toe, force, cop, free_moment, pelvis, frames, force_frames)
    force_frames = _force_frames(force_frames, kin_frames, PT[0].shape[1], force_a.shape[1], rate, force_rate,
                                 padded=frames is not None)  # fmt: skip
    T, Tf = PT[0].shape[1], force_a.shape[1]
    kmask = np.arange(T)[None] < kin_frames[:, None]
    fmask = np.arange(Tf)[None] < force_frames[:, None]
    for name, a in zip(("hip", "knee", "ankle", "toe"), PT):
        _check_finite_valid(a, name, kmask)
    _check_finite_valid(force_a, "force", fmask)
    _check_finite_valid(cop_a, "cop", fmask)
    if mz_a is not None:
        _check_finite_valid(mz_a, "free_moment", fmask)
    if pelvis_a is not None:
        _check_finite_valid(pelvis_a, "pelvis", kmask)
    if (kin_frames < 4).any():
        raise ValueError("every trial needs at least 4 samples")
    trials = _Trials(PT, force_a, cop_a, mz_a, pelvis_a, lead, kin_frames, force_frames, kmask)
    _check_units(trials)
    return trials


def _force_frames(force_frames, kin_frames, T: int, Tf: int, rate: float, force_rate: float, padded: bool):
    """The valid force samples of each trial (B,): as given (checked against the
    kinematics' at one rate), else every sample, the kinematics' or those within
    each trial's valid kinematics (padded arrays at another rate)."""
    if force_frames is not None and force_rate == rate and (force_frames != kin_frames).any():
        # per trial, as for one trial (lists of trials and force_frames= came here
        # unchecked: a 10 kHz force read at the markers' 1 kHz, silently)
        b = int(np.argmax(force_frames != kin_frames))
        raise ValueError(f"force has {int(force_frames[b])} samples but the kinematics {int(kin_frames[b])} (trial "
                         f"{b}): give force_rate= if it differs")  # fmt: skip
    if force_frames is not None:
        return force_frames
    if force_rate == rate and Tf != T:
        raise ValueError(f"force has {Tf} samples but the kinematics {T}: give force_rate= if it differs")
    if T == Tf:
        return kin_frames.copy()
    if not padded:  # no padding: every force sample
        return np.full(len(kin_frames), Tf)
    # padded arrays at another rate: the force samples within the valid kinematics'
    # time span, from the first frame to the last (a trial with more force samples
    # than that gives force_frames=)
    return np.minimum(np.floor((kin_frames - 1) * force_rate / rate + 1e-9).astype(int) + 1, Tf)


def _check_units(trials: _Trials) -> None:
    """Joint centres in millimetres, a force that pushes down, a centre of pressure in
    millimetres or far from the foot: ValueErrors (each gave moments 1e3 to 1e6 times
    too large, silently). Whole-batch NumPy passes (a loop over the trials, and norms
    of every sample, took 0.75 s of a 3 s analysis of 1,000 running trials)."""
    PT = trials.points
    B, T = PT[0].shape[:2]
    Tf = trials.force.shape[1]
    nk, nf = np.asarray(trials.frames), np.asarray(trials.force_frames)
    # a human thigh, shank or foot is 0.05 to 0.6 m long: each trial's median over at
    # least 16 of its samples spread evenly (about 10,000 samples in all)
    k = max(16, -(-10_000 // B))
    rows = np.arange(B)[:, None]
    cols = np.arange(k)[None] * nk[:, None] // k
    for (a, b), seg in zip(((0, 1), (1, 2), (2, 3)), ("thigh (hip-knee)", "shank (knee-ankle)", "foot (ankle-toe)")):
        med = np.median(np.linalg.norm(PT[a][rows, cols] - PT[b][rows, cols], axis=-1), axis=1)
        if (med > 2.0).any():
            i = int(np.argmax(med > 2.0))
            where = f" (trial {i})" if B > 1 else ""
            raise ValueError(f"the {seg} is {med[i]:.4g} m long (median over the samples){where}: the joint centres "
                             "must be in metres (divide millimetres by 1000)")  # fmt: skip
    # the ground reaction force and its centre of pressure, where the foot is loaded (|Fy| > 20 N)
    fy = trials.force[..., 1]
    fmask = None if (nf == Tf).all() else np.arange(Tf)[None] < nf[:, None]
    kmask = None if (nk == T).all() else trials.mask

    def valid(x, mask, fill):  # x where valid, else fill (x itself when every sample is)
        return x if mask is None else np.where(mask, x, fill)

    checked = np.count_nonzero(valid(np.abs(fy) > 20.0, fmask, False), axis=1) >= 3
    lo_f, hi_f = valid(fy, fmask, np.inf).min(1), valid(fy, fmask, -np.inf).max(1)
    # the load is where |Fy| is largest: a plate's offset of a few tens of newtons
    # outside stance, either sign, is not it
    negative = checked & (-lo_f > hi_f)
    loaded = valid(fy > 20.0, fmask, False)
    cop_x = trials.cop if trials.cop.ndim == 2 else trials.cop[..., 0]
    ax, tx = PT[2][..., 0], PT[3][..., 0]
    lo = np.minimum(valid(ax, kmask, np.inf).min(1), valid(tx, kmask, np.inf).min(1)) - 1.0
    hi = np.maximum(valid(ax, kmask, -np.inf).max(1), valid(tx, kmask, -np.inf).max(1)) + 1.0
    # the median of the loaded centre of pressure is outside [lo, hi] where more than
    # half of it is below lo or above hi (counts: a median per trial is a loop)
    n = np.count_nonzero(loaded, axis=1)
    below = np.count_nonzero(loaded & (cop_x < lo[:, None]), axis=1)
    above = np.count_nonzero(loaded & (cop_x > hi[:, None]), axis=1)
    far = checked & ~negative & ((2 * below > n) | (2 * above > n))
    if not (negative | far).any():
        return
    b = int(np.argmax(negative | far))
    where = f" (trial {b})" if B > 1 else ""
    if negative[b]:
        raise ValueError(f"the vertical ground reaction force is negative where the foot is loaded (down to "
                         f"{lo_f[b]:.4g} N, up to {hi_f[b]:.4g} N){where}: give the force that the ground "
                         "exerts on the foot, y up (negate a plate's reading of the foot's push)")  # fmt: skip
    med_cop = float(np.median(cop_x[b][loaded[b]]))
    raise ValueError(f"the centre of pressure is at x = {med_cop:.4g} (median where the foot is loaded)"
                     f"{where}, more than 1 m from the foot (ankle and toe from {lo[b] + 1:.4g} to {hi[b] - 1:.4g} "
                     "m): it must be in metres, in the joint centres' frame (divide millimetres by 1000)")  # fmt: skip
