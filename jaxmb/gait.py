"""Sagittal-plane gait analysis: joint angles, moments, powers and reactions of the leg.

The pipeline of the gait notebook (Duarte, "Gait analysis 2D") on jaxmb's core, for
one trial or a batch of trials in one call:

1. data preparation, NumPy/SciPy (:mod:`jaxmb.signal`): the joint centres and the
   ground reaction force are low-pass filtered at the *same* cut-off (see
   :func:`analyze`), the force is resampled to the kinematics, the segment angles
   are computed from the joint centres and differentiated (:func:`jaxmb.signal.derivative`);
2. one jitted JAX computation: the leg is a floating-base chain (thigh, shank, foot;
   base at the hip, absolute segment angles, :func:`jaxmb.tree`), the ground reaction
   force acts at the centre of pressure on the foot (:func:`jaxmb.point_load`), and
   :func:`jaxmb.joint_moments` and :func:`jaxmb.joint_reactions` give the hip, knee
   and ankle loads (``jax.vmap`` over time and over trials).

Entry points: :func:`analyze` (2-D arrays: joint centres, force, centre of pressure),
:func:`running_data` (the bundled van den Bogert running trial, with its true joint
loads), :func:`rms_errors`, :func:`term_effects` and :func:`term_effects_figure` (the
notebook's quasi-static comparison), :func:`moments_figure`. 3-D marker and
force-plate data (C3D, TRC) reach :func:`analyze` through a sagittal-plane front end,
:func:`sagittal`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Mapping

import numpy as np

from . import signal as _signal
from ._math import true_runs
from .datasets import SEGMENTS, RunningData, running_data

__all__ = [
    "analyze",
    "GaitResult",
    "running_data",
    "RunningData",
    "rms_errors",
    "term_effects",
    "term_effects_figure",
    "moments_figure",
    "sagittal",
    "SagittalTrial",
    "DEFAULT_MAPPING",
    "JOINTS",
    "SEGMENTS",
    "TERMS",
    "OUTPUTS",
]

#: Joint names, in the order of every (..., 3) result: the proximal joint of each segment.
JOINTS = ("hip", "knee", "ankle")
#: The terms of the inverse dynamics that :func:`term_effects` separates.
TERMS = ("gravity", "ground_reaction", "linear_inertia", "rotational_inertia")
#: The per-sample results that :func:`analyze` can return (its ``outputs=``).
OUTPUTS = ("angles", "velocities", "moments", "powers", "reactions", "reactions_segment", "base_residual",
           "segment_angles", "force", "cop")  # fmt: skip

_CONVENTIONS = ("jaxmb", "clinical")
# clinical = sign * jaxmb (+ offset for angles): hip flexion (+), knee flexion (-),
# ankle dorsiflexion (+) are counter-clockwise, counter-clockwise and counter-clockwise
# rotations of the distal segment for a subject facing +x seen from the right side.
_ANGLE_SIGN = np.array([1.0, -1.0, 1.0])
_ANGLE_OFFSET = np.array([0.0, 0.0, -np.pi / 2])
_MOMENT_SIGN = np.array([-1.0, 1.0, -1.0])  # extensor, extensor, plantarflexor positive

# Dempster (Winter's table) rows for thigh, shank, foot.
_TABLE_ROWS = {
    "dempster": ("thigh", "leg", "foot"),
    "deleva_male": ("thigh", "shank", "foot"),
    "deleva_female": ("thigh", "shank", "foot"),
}


# ------------------------------------------------------------------------- result


@dataclasses.dataclass(frozen=True)
class GaitResult:
    """Result of :func:`analyze`: NumPy arrays, leading batch shape ``...`` as the inputs.

    Joint order hip, knee, ankle (:data:`JOINTS`) in every (..., T, 3) array. Samples
    past a trial's ``frames`` (padding) are NaN. The per-sample fields named in
    :data:`OUTPUTS` are None when ``analyze(..., outputs=...)`` left them out.

    Attributes:
      time: (T,) s, from 0 at the kinematics' rate.
      angles: (..., T, 3) joint angles, rad, in ``convention``.
      velocities: (..., T, 3) joint angular velocities, rad/s, in ``convention``.
      moments: (..., T, 3) net joint moments, N m, in ``convention``.
      powers: (..., T, 3) joint powers, W (the jaxmb moment times the jaxmb relative
        angular velocity: positive when the muscles generate energy; the same in both
        conventions, so in the clinical signs minus moment times velocity).
      reactions: (..., T, 3, 2) joint reaction forces (Fx, Fy), world frame, N: the
        force of the proximal segment (the pelvis for the hip) on the distal one.
      reactions_segment: (..., T, 3, 2) the same as (axial, shear) in the distal
        segment's frame, N: axial positive in compression, shear along the segment
        axis turned +90 degrees.
      base_residual: (..., T, 3) the wrench (Fx, Fy N, Mz N m) that the floating base
        (the hip) must receive from the body above: for a leg model, the hip load
        (here ``reactions[..., 0, :]`` and the jaxmb hip moment); it would be the
        residual if the model included the whole body.
      segment_angles: (..., T, 3) absolute thigh, shank, foot angles, rad, CCW from +x.
      force: (..., T, 2) the ground reaction force used (filtered, resampled), N.
      cop: (..., T, 2) the centre of pressure used, m.
      mask: (..., T) bool, True on valid samples.
      frames: (...) int, valid samples per trial.
      rate: kinematics rate, Hz.
      cutoff: the cut-off used, Hz (None: no filtering; an array per trial for
        ``cutoff="auto"``).
      force_cutoff: the cut-off of the force, Hz (None: unfiltered).
      convention: "jaxmb" or "clinical" (see :func:`analyze`).
      body_mass: (...) kg, or None.
      height: (...) m, or None.
      segments: dict of (..., 3) arrays "length" m, "mass" kg, "inertia" kg m^2,
        "com" m from the proximal joint: the model used.
      terms: with ``terms=True``, a dict name -> (moments (..., T, 3) in
        ``convention``, reactions (..., T, 3, 2)): the contribution of each term of
        the inverse dynamics (:data:`TERMS`); they add up to the full result.
    """

    time: np.ndarray
    angles: np.ndarray | None
    velocities: np.ndarray | None
    moments: np.ndarray | None
    powers: np.ndarray | None
    reactions: np.ndarray | None
    reactions_segment: np.ndarray | None
    base_residual: np.ndarray | None
    segment_angles: np.ndarray | None
    force: np.ndarray | None
    cop: np.ndarray | None
    mask: np.ndarray
    frames: np.ndarray
    rate: float
    cutoff: object
    force_cutoff: object
    convention: str
    body_mass: object
    height: object
    segments: dict
    terms: dict | None = None

    @property
    def reaction_magnitudes(self) -> np.ndarray:
        """(..., T, 3) magnitude of the hip, knee, ankle reaction forces, N."""
        return np.linalg.norm(self.need("reactions"), axis=-1)

    def need(self, name: str) -> np.ndarray:
        """The field ``name``, or a ValueError saying how to get it if ``analyze``'s
        ``outputs=`` left it out."""
        v = getattr(self, name)
        if v is None:
            raise ValueError(f"this result has no {name}: include {name!r} in analyze(..., outputs=...)")
        return v

    def _need_mass(self):
        if self.body_mass is None:
            raise ValueError("this result has no body mass: pass body_mass= (kg) to analyze")
        return np.asarray(self.body_mass, dtype=float)[..., None, None]

    @property
    def moments_per_kg(self) -> np.ndarray:
        """(..., T, 3) joint moments divided by the body mass, N m/kg."""
        m = self.need("moments")
        return m / self._need_mass().astype(m.dtype)

    @property
    def powers_per_kg(self) -> np.ndarray:
        """(..., T, 3) joint powers divided by the body mass, W/kg."""
        p = self.need("powers")
        return p / self._need_mass().astype(p.dtype)

    def trial(self, index) -> "GaitResult":
        """The result of one trial of a batch, cut to its valid frames.

        Args:
          index: an int, or a tuple of ints for several leading batch axes (negative
            indices count from the end).

        Raises:
          ValueError: the result is of one trial already, or ``index`` does not fit
            the batch shape.
        """
        lead = self.mask.shape[:-1]
        if not lead:
            raise ValueError("this result is of one trial already")
        ix = index if isinstance(index, tuple) else (index,)
        if len(ix) != len(lead) or not all(isinstance(i, (int, np.integer)) and -n <= i < n for i, n in zip(ix, lead)):
            raise ValueError(f"index must be {len(lead)} int(s) within the batch shape {lead}, got {index!r}")
        n = int(np.asarray(self.frames)[ix])

        def cut(x):
            return None if x is None else x[ix][:n]

        def one(x):
            return x if x is None or np.ndim(x) == 0 else (np.asarray(x)[ix].item())

        return dataclasses.replace(
            self, time=self.time[:n], **{k: cut(getattr(self, k)) for k in OUTPUTS}, mask=cut(self.mask), frames=n,
            cutoff=one(self.cutoff), force_cutoff=one(self.force_cutoff), body_mass=one(self.body_mass),
            height=one(self.height),
            segments={k: v[ix] for k, v in self.segments.items()},
            terms=None if self.terms is None else {k: (cut(m), cut(r)) for k, (m, r) in self.terms.items()},
        )  # fmt: skip

    def to_convention(self, convention: str) -> "GaitResult":
        """The same result in another sign convention ("jaxmb" or "clinical")."""
        if convention not in _CONVENTIONS:
            raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
        if convention == self.convention:
            return self
        to_j = self.convention == "clinical"

        def flip(x, sign, offset=0.0):
            if x is None:
                return None
            sign, offset = np.asarray(sign, x.dtype), np.asarray(offset, x.dtype)  # float32 stays float32
            return (x - offset) * sign if to_j else x * sign + offset

        ang = flip(self.angles, _ANGLE_SIGN, _ANGLE_OFFSET)
        vel, mom = flip(self.velocities, _ANGLE_SIGN), flip(self.moments, _MOMENT_SIGN)
        terms = None
        if self.terms is not None:
            terms = {k: (flip(m, _MOMENT_SIGN), r) for k, (m, r) in self.terms.items()}
        return dataclasses.replace(self, angles=ang, velocities=vel, moments=mom, terms=terms,
                                   convention=convention)  # fmt: skip


# ----------------------------------------------------------------------- checking


def _as_float(x, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from None
    return a


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
    from .anthropometry import _row

    M = np.broadcast_to(_per_trial(body_mass, "body_mass", "kg", lead), lead).reshape(B)
    rows = [_row(table, s) for s in _TABLE_ROWS[table]]
    fm = np.array([r.mass for r in rows])
    fc = np.array([r.com for r in rows])
    fk = np.array([r.gyration for r in rows])
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


# ----------------------------------------------------------------- preparation


def _resample_index(n_out: int, rate_out: float, n_in: int, rate_in: float, name: str):
    t = np.arange(n_out) / rate_out * rate_in  # fractional input sample of each output
    if t[-1] > n_in - 1 + 1e-6:
        raise ValueError(f"{name} covers {(n_in - 1) / rate_in:.6g} s at {rate_in:g} Hz, shorter than the "
                         f"kinematics' {(n_out - 1) / rate_out:.6g} s")  # fmt: skip
    i0 = np.minimum(np.floor(t).astype(int), n_in - 1)
    i1 = np.minimum(i0 + 1, n_in - 1)
    w = np.clip(t - i0, 0.0, 1.0)
    return i0, i1, w


# ------------------------------------------------------------------ JAX part


@functools.lru_cache(maxsize=None)
def _template(x64: bool):
    """The leg's topology, with the parameters of the dtype of the calls that use it
    (one template per dtype: ``analyze(dtype=...)`` runs in a scoped
    ``jax.enable_x64``, so ``x64`` is the scope's; a template built in the other
    would be cast, with Model.astype's warning for float32 at float64)."""
    import jax

    from .model import tree

    # concrete arrays even when first called inside a trace (the result is cached)
    with jax.ensure_compile_time_eval():
        return tree([-1, 0, 1], [0.4, 0.4, 0.2], [0.2, 0.2, 0.0], [1.0, 1.0, 1.0], [0.1, 0.1, 0.1],
                    base="floating", coordinates="absolute", names=SEGMENTS)  # fmt: skip


# atan(u) = u + u^3 R(u^2) for |u| <= tan(pi/8): R a degree-10 polynomial, the
# least-squares Chebyshev fit of (atan(sqrt s) - sqrt s) / s^1.5 on [0, tan^2(pi/8)]
# at 200 nodes in 40-digit arithmetic (mpmath); max error 6e-17 (1 ulp) on a dense grid.
_ATAN_R = (-0.3333333333333333, 0.19999999999994503, -0.1428571428462948, 0.11111111017650721,
           -0.09090904780145262, 0.07692189199720122, -0.06664606843541106, 0.05859034395152528,
           -0.05090270018828818, 0.0393743836090828, -0.019354465993819753)  # fmt: skip
_TAN_PI8 = 0.41421356237309503


def _atan2(y, x):
    """``arctan2(y, x)`` as one vectorisable expression (XLA:CPU's own arctan2 took
    about as long as the rest of the angle step in the batch pipeline, by an ad-hoc
    profile).

    With a = min(|x|, |y|) / max(|x|, |y|) in [0, 1]: atan(a) = pi/4 + atan(u) with
    u = (a - 1) / (a + 1) when a > tan(pi/8), else u = a, and |u| <= tan(pi/8); then
    pi/2 - . when |y| > |x|, pi - . when x < 0, and the sign of y. Float64: within a
    few ulp of NumPy's (tests)."""
    import jax.numpy as jnp

    ax, ay = jnp.abs(x), jnp.abs(y)
    lo, hi = jnp.minimum(ax, ay), jnp.maximum(ax, ay)
    big = lo > _TAN_PI8 * hi
    num = jnp.where(big, lo - hi, lo)
    den = jnp.where(big, lo + hi, hi)
    u = num / jnp.where(den == 0, 1, den)
    v = u * u
    p = jnp.asarray(_ATAN_R[-1], u.dtype)
    for c in _ATAN_R[-2::-1]:
        p = p * v + c
    r = u + u * v * p + jnp.where(big, jnp.pi / 4, 0)
    r = jnp.where(ay > ax, jnp.pi / 2 - r, r)
    r = jnp.where(jnp.signbit(x), jnp.pi - r, r)
    return jnp.where(jnp.signbit(y), -r, r)


def _foot_loads(L, d, q, frc, mz):
    """:func:`jaxmb.point_load` of the ground reaction force on the foot, over any
    leading batch shape: (..., 3, 3) loads, the thigh and shank rows zero.

    The same wrench (F, Mz + (p - c) x F at the foot's centre of mass c), written over
    the batch with :func:`jaxmb.batch.sincos`: ``vmap`` of ``point_load`` evaluates
    the pose with XLA's sine and cosine and writes a scatter per sample, which cost
    more than the inverse dynamics here. L, d: (..., 3) lengths and centre-of-mass
    distances; q (..., 5) hip x, y and the absolute segment angles; frc (..., 4)
    Fx, Fy, COPx, COPy; mz (...,) or None."""
    import jax.numpy as jnp

    from .batch import sincos

    c, s = sincos(q[..., 2:])
    # c_foot = hip + L_thigh u_thigh + L_shank u_shank + d_foot u_foot
    cx = q[..., 0] + L[..., 0] * c[..., 0] + L[..., 1] * c[..., 1] + d[..., 2] * c[..., 2]
    cy = q[..., 1] + L[..., 0] * s[..., 0] + L[..., 1] * s[..., 1] + d[..., 2] * s[..., 2]
    fx, fy = frc[..., 0], frc[..., 1]
    m = (frc[..., 2] - cx) * fy - (frc[..., 3] - cy) * fx
    if mz is not None:
        m = m + mz
    zero = jnp.zeros_like(fx)
    return jnp.stack([zero, zero, zero, zero, zero, zero, fx, fy, m], -1).reshape(fx.shape + (3, 3))


def _dynamics(params, q, qd, qdd, frc, mz, pelvis, pelvis_rate, *, terms: bool, outputs: tuple = OUTPUTS):
    """One jitted computation over trials (B) and samples (T): moments, reactions,
    angles, powers, those of ``outputs`` (:data:`OUTPUTS`) only. params: (L, d, m, I)
    (B, 3) each and gravity (); mz, pelvis and pelvis_rate (B, T) or None."""
    import jax
    import jax.numpy as jnp

    from .batch import sincos
    from .dynamics import joint_moments, rnea_full
    from .reactions import joint_reactions

    L, d, m, I, g = params
    template = _template(L.dtype == jnp.float64)

    def model_of(L, d, m, I, g):
        com = jnp.stack([d, jnp.zeros_like(d)], -1)
        return template.replace(length=L, com=com, mass=m, inertia=I, gravity=g)

    loads = _foot_loads(L[:, None], d[:, None], q, frc, mz)  # (B, T, 3, 3)

    want = set(outputs)
    need_tau = terms or bool(want & {"moments", "powers", "base_residual"})
    need_lam = terms or bool(want & {"reactions", "reactions_segment", "base_residual"})

    def solve(model, q, qd, qdd, ld, use_loads=True):
        if not use_loads:
            ld = jnp.zeros_like(ld)
        # the moment T and the force F that each segment's parent exerts at its joint
        # (world frame), those that the outputs need: both from one pass of
        # rnea_full (the matrix kernel materialises its rows, see _KERNEL), or one
        # of joint_moments and joint_reactions
        call = lambda f: jax.vmap(lambda a, b, c, e: f(model, a, b, c, e, kernel=_KERNEL))(q, qd, qdd, ld)  # noqa: E731
        if need_tau and need_lam:
            _, F, T = call(rnea_full)
            return T, F
        return (call(joint_moments) if need_tau else None), (call(joint_reactions) if need_lam else None)

    def trial(L, d, m, I, q, qd, qdd, ld):
        model = model_of(L, d, m, I, g)
        tau, lam = solve(model, q, qd, qdd, ld)
        out = {"moments": tau, "reactions": lam}
        if terms:
            zero = jnp.zeros_like(q)
            still = model_of(L, d, m, I, jnp.zeros_like(g))
            grav = solve(model, q, zero, zero, ld, use_loads=False)
            grf = solve(still, q, zero, zero, ld)
            lin = solve(model_of(L, d, m, jnp.zeros_like(I), jnp.zeros_like(g)), q, qd, qdd, ld, use_loads=False)
            inertial = solve(still, q, qd, qdd, ld, use_loads=False)
            rot = (inertial[0] - lin[0], inertial[1] - lin[1])
            out["terms"] = {"gravity": grav, "ground_reaction": grf, "linear_inertia": lin, "rotational_inertia": rot}
        return out

    out = jax.vmap(trial)(L, d, m, I, q, qd, qdd, loads)
    tau, lam = out.pop("moments"), out.pop("reactions")
    if terms or "moments" in want:
        out["moments"] = tau
    if terms or "reactions" in want:
        out["reactions"] = lam
    if "base_residual" in want:
        out["base_residual"] = jnp.concatenate([lam[..., 0, :], tau[..., :1]], -1)
    if not want & {"angles", "velocities", "powers", "reactions_segment"}:
        return out
    theta, omega = q[..., 2:], qd[..., 2:]
    # relative angles: hip from the pelvis's downward axis (theta_thigh + pi/2), knee, ankle
    hip = theta[..., :1] + jnp.pi / 2
    hip_rate = omega[..., :1]
    if pelvis is not None:
        hip, hip_rate = hip - pelvis[..., None], hip_rate - pelvis_rate[..., None]
    rel = jnp.concatenate([hip, theta[..., 1:] - theta[..., :-1]], -1)
    rel = rel - 2 * jnp.pi * jnp.round(rel[:, :1] / (2 * jnp.pi))  # first sample in (-pi, pi]
    rel_rate = jnp.concatenate([hip_rate, omega[..., 1:] - omega[..., :-1]], -1)
    if "angles" in want:
        out["angles"] = rel
    if "velocities" in want:
        out["velocities"] = rel_rate
    if "powers" in want:
        out["powers"] = tau * rel_rate
    if "reactions_segment" in want:
        c, s = sincos(theta)
        axial = c * lam[..., 0] + s * lam[..., 1]
        shear = -s * lam[..., 0] + c * lam[..., 1]
        out["reactions_segment"] = jnp.stack([axial, shear], -1)
    return out


def _filter_group(kin, frc, mz, *, rate, force_rate, cutoff, force_cutoff, order, padlen):
    """Low-pass the kinematics (B, T, c) (the joint centres' 8 coordinates, and the
    pelvis angle where given), the force channels (B, Tf, k) (Fx, Fy, the force's
    moment, the centre of pressure's height) and the free moment (B, Tf) or None,
    along time; one pass over all channels when the rates and cut-offs are the same."""
    import jax.numpy as jnp

    from ._filters import lowpass_jax

    kw = dict(order=order, axis=1, padlen=padlen, method=_FILTER_METHOD, block=_FILTER_BLOCK)
    force_ch = [frc] + ([] if mz is None else [mz[..., None]])
    if cutoff is not None and cutoff == force_cutoff and rate == force_rate and kin.shape[1] == frc.shape[1]:
        y = lowpass_jax(jnp.concatenate([kin] + force_ch, -1), rate, cutoff, **kw)
        k, c = frc.shape[-1], kin.shape[-1]
        return y[..., :c], y[..., c : c + k], (None if mz is None else y[..., c + k])
    if cutoff is not None:
        kin = lowpass_jax(kin, rate, cutoff, **kw)
    if force_cutoff is not None:
        y = lowpass_jax(jnp.concatenate(force_ch, -1), force_rate, force_cutoff, **kw)
        k = frc.shape[-1]
        frc, mz = y[..., :k], (None if mz is None else y[..., k])
    return kin, frc, mz


#: how the pipeline filters (see :func:`jaxmb._filters.sosfiltfilt_jax`) and how many
#: trials one step of its loop over the batch takes: a few trials at a time keep
#: every intermediate array in the cache (a whole batch of 1,000 running trials makes
#: each one hundreds of MB, and XLA:CPU then runs several times slower per sample).
#: "blocked" with blocks of 32 samples and 4 trials a chunk: in three alternated A/B
#: timings of the whole pipeline on 1,000 running trials (5 rounds each, one
#: process, 2-core CPU) its median was 5, 9 and 18 % below "strided" with blocks of
#: 64 (which had beaten "split" with 8 trials a chunk); "blocked" with 8, 16, 24 or
#: 64 samples, or 2, 6, 8 or 16 trials a chunk, were no better (ad hoc, within the
#: noise of the 2-core VM); rerun the comparison
#: with ``python -m benchmarks.design --only gait_filter``. The pipeline's recorded
#: figure is ``python -m benchmarks.bench_gait``.
_FILTER_METHOD = "blocked"
_FILTER_BLOCK = 32
_CHUNK = 4
#: samples that one step of the loop over the batch takes on an accelerator (GPU,
#: TPU): there the chunks of 4 trials chosen for the CPU's cache would run a long
#: sequence of small steps (the filter alone is sequential over each trial's blocks
#: of samples), so a step takes as many trials as fit in 2^22 samples, an estimated
#: 4 GB of intermediates (about 1 kB a sample; a quarter of the samples with
#: terms=True), besides the whole batch's inputs and results (1.6 GB for 1,000
#: running trials). Not measured: no GPU was lent to the task that chose it.
_ACCELERATOR_SAMPLES = 2**22
#: the kernel of the pipeline's inverse dynamics: "matrix" materialises the
#: recursion's rows, where the unrolled one recomputes it for each of the 9 rows
#: (moments and reactions) and for each consumer of a row. Whole pipeline, 1,000
#: running trials, medians of 3 alternated rounds in fresh processes (2-core CPU,
#: 2026-11-24 UTC): moments and reactions 1.55-1.60 s with "matrix" and one rnea_full
#: pass against 1.72-1.80 s with two passes and 2.1-2.3 s unrolled; the moments
#: alone 1.35-1.45 s against 1.55-1.66 s unrolled, the reactions alone 1.30-1.32 s
#: against 1.95-2.01 s; the whole result about equal (2.1-2.7 s, bound by writing
#: its 1.6 GB). Ad hoc; the recorded figure is python -m benchmarks.bench_gait.
_KERNEL = "matrix"


def _platform() -> str:
    """The platform that ``analyze``'s NumPy inputs go to: that of
    ``jax.config.jax_default_device`` when set (``jax.default_device(...)``), else the
    default backend's."""
    import jax

    dev = jax.config.jax_default_device
    if dev is None:
        return jax.default_backend()
    return dev if isinstance(dev, str) else dev.platform


def _pipeline_chunk(platform: str, frames: int, terms: bool = False) -> int:
    """Trials per step of the pipeline's loop over a batch of trials of ``frames``
    samples on ``platform`` ("cpu", "gpu", "tpu", ...): :data:`_CHUNK` on the CPU,
    :data:`_ACCELERATOR_SAMPLES` worth elsewhere (a quarter of it with ``terms``:
    four more inverse dynamics passes)."""
    if platform == "cpu":
        return _CHUNK
    samples = _ACCELERATOR_SAMPLES // (4 if terms else 1)
    return max(1, samples // max(1, frames))


#: trials x samples that one call of analyze's compiled computation takes on the CPU
#: (its loop over chunks of :data:`_CHUNK` trials inside): analyze calls it step by
#: step over a larger batch and copies each step's outputs, a few MB that the cache
#: still holds, into the result arrays, allocated once. One call for the whole batch
#: made XLA allocate every output afresh (1.6 GB for 1,000 running trials of the
#: whole result), one page fault per 4 KiB each call, and its time per trial grew
#: with the batch (2.3 ms at 500 trials, 4.6 ms at 4,000) and its memory to about
#: 2.7 times the results (issue 39).
_STEP_SAMPLES = 2**16


#: steps dispatched ahead of the one being copied (JAX's asynchronous dispatch).
_AHEAD = 1


def _step_trials(platform: str, frames: int, chunk: int, B: int) -> int:
    """Trials per call of the compiled computation (see :data:`_STEP_SAMPLES`): on the
    CPU a multiple of ``chunk`` worth about ``_STEP_SAMPLES`` samples (at least one
    chunk); elsewhere (GPU, TPU: the batch's inputs and results on the device) the
    whole batch ``B`` in one call."""
    if platform != "cpu":
        return B
    step = max(chunk, (_STEP_SAMPLES // max(1, frames)) // chunk * chunk)
    return min(B, step)


def _rows(x, s: int, e: int, size: int, n=None):
    """Trials ``s:e`` of x (B, ...) (its first ``n`` samples: axis 1), padded to ``size``
    trials with copies of trial ``s`` (the compiled computation's shape); None stays None."""
    if x is None:
        return None
    y = x[s:e] if n is None else x[s:e, :n]
    if e - s < size:
        y = np.concatenate([y, np.repeat(y[:1], size - (e - s), 0)])
    return y


def _file_name(path) -> str:
    """The .npy file name of an output (a path of the pipeline's output tree):
    "moments", "terms_gravity_moments", ..."""
    keys = [getattr(k, "key", None) for k in path]
    if keys[0] == "terms":
        return f"terms_{keys[1]}_{('moments', 'reactions')[path[2].idx]}"
    return str(keys[0])


def _buffer(path, v: np.ndarray, B: int, T: int, nk: int, out_dir, files: dict) -> np.ndarray:
    """The result array of one output like ``v`` (one step's: (b, nk, ...) per sample,
    (b, ...) per trial) for B trials: (B, T, ...) per sample, its samples from ``nk``
    NaN; (B, ...) per trial. Per-sample outputs go to ``out_dir/<name>.npy.partial``
    (memory-mapped, recorded in ``files``) when ``out_dir`` is given."""
    per_sample = v.ndim >= 2 and v.shape[1] == nk
    shape = (B,) + ((T,) + v.shape[2:] if per_sample else v.shape[1:])
    if per_sample and out_dir is not None:
        import os

        final = os.path.join(out_dir, _file_name(path) + ".npy")
        files[final + ".partial"] = final
        a = np.lib.format.open_memmap(final + ".partial", mode="w+", dtype=v.dtype, shape=shape)
    else:
        a = np.empty(shape, v.dtype)
    if per_sample and nk < T:
        a[:, nk:] = np.nan
    return a


def _run_steps(fn, args, B: int, step: int, T: int, nk: int, out_dir=None, files=None) -> dict:
    """Run the compiled pipeline ``fn`` over B trials ``step`` at a time (``args(s, e)``:
    its arguments for trials s:e, padded to ``step``) and copy each step's outputs into
    result arrays allocated once (:func:`_buffer`; memory-mapped files in ``out_dir``).
    Each step is dispatched before the previous one is copied (JAX's asynchronous
    dispatch), so that the copy overlaps the computation. Returns {path: array}, the
    paths of ``fn``'s output tree; per-sample arrays (B, T, ...) (NaN from ``nk``),
    per-trial ones (B, ...)."""
    import jax

    starts = range(0, B, step)
    out, pending = {}, {}
    for k, s in enumerate(starts):
        e = min(s + step, B)
        for j in range(k, min(k + 1 + _AHEAD, len(starts))):
            if j not in pending:
                pending[j] = fn(*args(starts[j], min(starts[j] + step, B)))
        for path, v in jax.tree_util.tree_flatten_with_path(pending.pop(k))[0]:
            v = np.asarray(v)
            if path not in out:
                out[path] = _buffer(path, v, B, T, nk, out_dir, files)
            if v.ndim >= 2 and v.shape[1] == nk:
                out[path][s:e, :nk] = v[: e - s]
            else:
                out[path][s:e] = v[: e - s]
    for a in out.values():
        if isinstance(a, np.memmap):
            a.flush()
    return out


def _out_folder(out):
    """analyze's ``out=``: None, or the folder (created if missing) for the per-sample
    outputs' .npy files, as a str."""
    if out is None:
        return None
    import os

    if not isinstance(out, (str, os.PathLike)):
        raise ValueError(f"out must be None or a folder (str or path) for the results' .npy files, got {out!r}")
    folder = os.fspath(out)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"out={folder!r} is a file: give a folder for the results' .npy files")
    os.makedirs(folder, exist_ok=True)
    return folder


def _remove(files: dict):
    """Delete out='s partly written files (an error before the result was complete)."""
    import os

    for partial in files:
        if os.path.exists(partial):
            os.remove(partial)


def _publish(files: dict):
    """Rename out='s complete .npy.partial files to their .npy names (the arrays
    memory-mapped from them stay valid: the same files)."""
    import os

    for partial, final in files.items():
        os.replace(partial, final)


def _chunk_size(B: int, target: int) -> int:
    """A divisor of B near ``target`` (no padded trials), or else the size of
    ``ceil(B / target)`` balanced chunks (fewer padded trials than chunks)."""
    if B <= target:
        return B
    for b in range(target, max(1, target // 2) - 1, -1):
        if B % b == 0:
            return b
    n = -(-B // target)
    return -(-B // n)


def _group_pipeline(pts, force, cop, mz, resample, seg, gravity, pelvis, ragged=None, *, rate, force_rate, cutoff,
                    force_cutoff, order, padlen, from_table, terms, outputs=OUTPUTS, chunk=_CHUNK,
                    pads=None):  # fmt: skip
    """Equal-length trials, one jitted computation: filtering, resampling, angles,
    lengths, derivatives, segment parameters and the dynamics, a loop over chunks of
    ``chunk`` trials (see :func:`_chunk_pipeline`).

    pts: (hip, knee, ankle, toe) joint centres (B, T, 2) each; force (B, Tf, 2); cop
    (B, Tf) (x on the ground) or (B, Tf, 2); mz (B, Tf) or None; resample: None or
    (i0, i1, w) (T,) to interpolate the force at the kinematics' samples; seg: (a, b,
    c) (B, 3) (see :func:`_segment_spec`); pelvis (B, T) or None. The inputs stay
    separate (NumPy arrays are passed as they are): stacking them here, inside each
    chunk, costs nothing, where a stack on the host is a copy of the whole batch.

    ``ragged``: None, or trials of unequal lengths and filters padded to one shape
    (see :func:`_ragged_inputs`): (frames (B,), force frames (B,), the kinematics'
    filter matrices and padlens or None, the force's or None, per-trial resampling
    (i0, i1, w) (B, T) or None); ``pads`` the largest padlens (static); ``cutoff``,
    ``force_cutoff``, ``padlen`` and ``resample`` are then unused."""
    import jax
    import jax.numpy as jnp

    static = dict(rate=rate, force_rate=force_rate, cutoff=cutoff, force_cutoff=force_cutoff, order=order,
                  padlen=padlen, from_table=from_table, terms=terms, outputs=outputs, pads=pads)  # fmt: skip
    B = force.shape[0]
    b = _chunk_size(B, chunk)
    n = -(-B // b)
    if ragged is not None:  # a filter shared by every trial is not split into chunks
        nk, nf, kfilt, ffilt, res = ragged
        shared = tuple(None if f is None or f[0][0].ndim == 3 else f[0] for f in (kfilt, ffilt))
        kfilt, ffilt = (f if f is None or sh is None else (None, f[1]) for f, sh in zip((kfilt, ffilt), shared))
        ragged = (nk, nf, kfilt, ffilt, res)
        static["shared"] = shared
    args = (pts, force, cop, mz, seg, pelvis, ragged)
    if n * b != B:  # pad the batch with copies of the first trial
        args = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, jnp.repeat(x[:1], n * b - B, 0)]), args)
    if n == 1:
        return _chunk_pipeline(*args, resample, gravity, **static)
    args = jax.tree_util.tree_map(lambda x: x.reshape((n, b) + x.shape[1:]), args)
    out = jax.lax.map(lambda a: _chunk_pipeline(*a, resample, gravity, **static), args)
    out = jax.tree_util.tree_map(lambda x: x.reshape((n * b,) + x.shape[2:]), out)
    if n * b != B:
        out = jax.tree_util.tree_map(lambda x: x[:B], out)
    return out


def _chunk_pipeline(pts, force, cop, mz, seg, pelvis, ragged, resample, gravity, *, rate, force_rate, cutoff,
                    force_cutoff, order, padlen, from_table, terms, outputs=OUTPUTS, pads=None,
                    shared=(None, None)):  # fmt: skip
    """:func:`_group_pipeline` on one chunk of trials (the same arguments; ``shared``:
    the kinematics' and the force's filter matrices where every trial has the same,
    else None and the matrices are in ``ragged``)."""
    import jax
    import jax.numpy as jnp

    from ._filters import derivative_jax, ragged_derivative, ragged_sosfiltfilt

    valid = None
    if ragged is not None:
        nk, nf, kfilt, ffilt, resample = ragged
        valid = jnp.arange(pts[0].shape[1])[None] < nk[:, None]  # (B, T)
        fvalid = jnp.arange(force.shape[1])[None] < nf[:, None]  # (B, Tf)

        def zero_after(x, ok):  # NaN or anything after a trial's end -> 0 (a select: no NaN passes)
            return jnp.where(ok.reshape(ok.shape + (1,) * (x.ndim - 2)), x, 0)

        pts = tuple(zero_after(a, valid) for a in pts)
        force, cop = zero_after(force, fvalid), zero_after(cop, fvalid)
        mz = None if mz is None else zero_after(mz, fvalid)
        pelvis = None if pelvis is None else zero_after(pelvis, valid)

    kin = jnp.stack(pts, axis=-2)  # (B, T, 4, 2)
    # The force's moment about a point r of each trial is filtered, not the centre of
    # pressure p (why: analyze's docstring, "Filtering"). r: the mean centre of
    # pressure weighted by |Fy|, so that the moment stays small (float32).
    cx = cop if cop.ndim == 2 else cop[..., 0]
    cy = jnp.zeros_like(cx) if cop.ndim == 2 else cop[..., 1]
    fx, fy = force[..., 0], force[..., 1]
    wt = jnp.abs(fy)
    wsum = jnp.sum(wt, axis=1)
    wsafe = jnp.where(wsum > 0, wsum, 1.0)
    ref = jnp.stack([jnp.sum(wt * cx, 1) / wsafe, jnp.sum(wt * cy, 1) / wsafe], -1)  # (B, 2)
    m_ref = (cx - ref[:, :1]) * fy - (cy - ref[:, 1:]) * fx
    # (B, Tf, 3) Fx, Fy, moment about r, and COPy where it is given (for the "cop" output)
    chans = [fx, fy, m_ref] + ([] if cop.ndim == 2 else [cy])
    frc = jnp.stack(chans, -1)
    B, T = kin.shape[:2]
    kin = kin.reshape(B, T, 8)
    if pelvis is not None:  # kinematics too: filtered with the joint centres
        kin = jnp.concatenate([kin, pelvis[..., None].astype(kin.dtype)], -1)
    if ragged is None:
        kin, frc, mz = _filter_group(kin, frc, mz, rate=rate, force_rate=force_rate, cutoff=cutoff,
                                     force_cutoff=force_cutoff, order=order, padlen=padlen)  # fmt: skip
    else:  # each trial in its own length, with its own filter
        if kfilt is not None:
            kin = ragged_sosfiltfilt(kin, nk, kfilt[1], shared[0] or kfilt[0], pads[0])
        if ffilt is not None:
            k = frc.shape[-1]
            y = ragged_sosfiltfilt(jnp.concatenate([frc] + ([] if mz is None else [mz[..., None]]), -1), nf,
                                   ffilt[1], shared[1] or ffilt[0], pads[1])  # fmt: skip
            frc, mz = y[..., :k], (None if mz is None else y[..., k])
    if pelvis is not None:
        kin, pelvis = kin[..., :8], kin[..., 8]
    kin = kin.reshape(B, T, 4, 2)
    if resample is not None:
        i0, i1, w = resample
        if ragged is None:  # one (T,) resampling for the group
            frc = frc[:, i0] * (1 - w)[:, None] + frc[:, i1] * w[:, None]
            mz = None if mz is None else mz[:, i0] * (1 - w) + mz[:, i1] * w
        else:  # (B, T): each trial's own

            def at(x, i):
                return jnp.take_along_axis(x, i.reshape(i.shape + (1,) * (x.ndim - 2)), axis=1, mode="clip")

            frc = at(frc, i0) * (1 - w)[..., None] + at(frc, i1) * w[..., None]
            mz = None if mz is None else at(mz, i0) * (1 - w) + at(mz, i1) * w
    m_ref = frc[..., 2]
    height = frc[..., 3] if frc.shape[-1] == 4 else jnp.zeros_like(m_ref)
    cop_out = _line_of_action(frc[..., 0], frc[..., 1], m_ref, height, ref, valid) if "cop" in outputs else None
    # the force at r and its moment about r: the same wrench
    frc = jnp.stack([frc[..., 0], frc[..., 1]] + [jnp.broadcast_to(ref[:, None, i], m_ref.shape) for i in (0, 1)], -1)
    mz = m_ref if mz is None else mz + m_ref
    seg_v = kin[:, :, 1:] - kin[:, :, :-1]  # (B, T, 3, 2) thigh, shank, foot
    theta = _atan2(seg_v[..., 1], seg_v[..., 0])
    # unwrap only where a jump of more than pi needs it (rare; a cumulative sum over time)
    jump = jnp.any(jnp.abs(jnp.diff(theta, axis=1)) > jnp.pi)
    theta = jax.lax.cond(jump, lambda t: jnp.unwrap(t, axis=1), lambda t: t, theta)
    theta = theta - 2 * jnp.pi * jnp.round(theta[:, :1] / (2 * jnp.pi))
    seg_len = jnp.sqrt(jnp.sum(seg_v**2, -1))  # (B, T, 3)
    if ragged is None:
        lengths = jnp.mean(seg_len, axis=1)  # (B, 3)
    else:
        lengths = jnp.sum(jnp.where(valid[..., None], seg_len, 0), axis=1) / nk[:, None].astype(seg_len.dtype)
    q = jnp.concatenate([kin[:, :, 0], theta], axis=-1)  # floating base at the hip
    if ragged is None:
        deriv = functools.partial(derivative_jax, rate=rate, axis=1)
    else:
        deriv = lambda x, order: ragged_derivative(x, rate, order, nk)  # noqa: E731
    qd = deriv(q, order=1)
    qdd = deriv(q, order=2)
    a, b, c = seg
    mass = a
    inertia = a * (b * lengths) ** 2 if from_table else b
    com = c * lengths
    pel_rate = None if pelvis is None else deriv(pelvis, order=1)
    out = _dynamics((lengths, com, mass, inertia, gravity), q, qd, qdd, frc, mz, pelvis, pel_rate, terms=terms,
                    outputs=outputs)  # fmt: skip
    if "segment_angles" in outputs:
        out["segment_angles"] = theta
    if terms or "force" in outputs:
        out["force"] = frc[..., :2]
    if "cop" in outputs:
        out["cop"] = cop_out
    out.update(lengths=lengths, mass=mass, inertia=inertia, com=com)
    return out


#: N: below this vertical force the "cop" output of analyze is held (the centre of
#: pressure of a force that small is ill-defined; read_c3d's threshold, too).
_COP_FORCE = 20.0


def _line_of_action(fx, fy, m_ref, height, ref, valid=None):
    """The centre of pressure (B, T, 2) of the filtered force: the point at ``height``
    on its line of action, (p - ref) x F = m_ref; where Fy <= _COP_FORCE, held at the
    next such point (the last one at the end; ``ref`` in a trial without one).
    ``valid``: None, or (B, T) the samples of each trial (the rest never held)."""
    import jax
    import jax.numpy as jnp

    ok = fy > _COP_FORCE
    if valid is not None:
        ok = ok & valid
    x = ref[:, :1] + (m_ref + (height - ref[:, 1:]) * fx) / jnp.where(ok, fy, 1.0)
    T = fy.shape[1]
    i = jnp.arange(T)
    nxt = jax.lax.cummin(jnp.where(ok, i, T), axis=1, reverse=True)
    prev = jax.lax.cummax(jnp.where(ok, i, -1), axis=1)
    j = jnp.where(nxt < T, nxt, jnp.maximum(prev, 0))
    held = jnp.take_along_axis(jnp.stack([x, height], -1), jnp.broadcast_to(j[..., None], j.shape + (2,)), axis=1)
    any_ok = jnp.any(ok, axis=1)[:, None, None]
    return jnp.where(any_ok, held, jnp.broadcast_to(ref[:, None], held.shape))


def _bucket(n: int) -> int:
    """n rounded up to m 2^k with 8 <= m <= 16 (n itself up to 16): at most 12.5 %
    more, and few distinct sizes (the shapes of a compiled computation)."""
    n = int(n)
    if n <= 16:
        return n
    k = n.bit_length() - 4
    return -(-n >> k) << k


def _ragged_inputs(keys, resamples, B, T, Tb, Tf, *, rate, force_rate, same, force_cutoff, order, padlen):
    """The ``ragged`` argument of :func:`_group_pipeline` for trials in several groups
    ``keys`` {(frames, force frames, cut-off or None): [trials]} (and their
    ``resamples``, as analyze makes them), and the largest padlens (kinematics,
    force). T, Tf: the longest trial's samples and force samples; Tb: the
    kinematics' width in the computation. Each trial's filter and padlen are those
    of the trial alone."""
    from ._filters import _lowpass_design, ragged_design

    nk, nf = np.zeros(B, np.int32), np.zeros(B, np.int32)
    kcut, fcut = [None] * B, [None] * B
    res = None
    if force_rate != rate or Tf != T or any(r is not None for r in resamples.values()):
        res = (np.zeros((B, Tb), np.int32), np.zeros((B, Tb), np.int32), np.zeros((B, Tb)))
    for (k, f, c), idx in keys.items():
        idx = np.asarray(idx)
        nk[idx], nf[idx] = k, f
        for b in idx:
            kcut[b], fcut[b] = c, (c if same else force_cutoff)
        if res is not None:
            i0, i1, w = resamples[k, f, c] or (np.arange(k), np.arange(k), np.zeros(k))
            res[0][idx, :k], res[1][idx, :k], res[2][idx, :k] = i0, i1, w

    def filt(cuts, r, n):
        if cuts[0] is None:  # every trial's or none's
            return None, 0
        design = {}  # one per cut-off and length
        for c, m in zip(cuts, n):
            if (c, int(m)) not in design:
                design[c, int(m)] = _lowpass_design(r, c, order, False, padlen, int(m))
        designs = [design[c, int(m)] for c, m in zip(cuts, n)]
        mats, p = ragged_design([d[0] for d in designs], n, [d[1] for d in designs], _FILTER_BLOCK)
        return (mats, p), int(p.max())

    kfilt, kp = filt(kcut, rate, nk)
    ffilt, fp = filt(fcut, force_rate, nf)
    return (nk, nf, kfilt, ffilt, res), (kp, fp)


def _outputs(outputs, terms) -> tuple:
    """``analyze``'s ``outputs=`` as a sorted tuple of names of :data:`OUTPUTS`."""
    if outputs is None:
        return OUTPUTS
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    bad = [n for n in names if n not in OUTPUTS]
    if bad or not names:
        raise ValueError(f"outputs must be names from {OUTPUTS}, got {outputs!r}")
    if terms:
        names += ("moments", "reactions", "force")
    return tuple(sorted(set(names), key=OUTPUTS.index))


@functools.lru_cache(maxsize=None)
def _jitted(**static):
    import jax

    return jax.jit(functools.partial(_group_pipeline, **static))


# ---------------------------------------------------------------------- analyze


def analyze(
    hip,
    knee,
    ankle,
    toe,
    force,
    cop,
    rate,
    *,
    segments=None,
    body_mass=None,
    height=None,
    table: str = "dempster",
    force_rate=None,
    free_moment=None,
    cutoff=None,
    force_cutoff="same",
    order: int = 2,
    padlen="auto",
    gravity: float = 9.81,
    pelvis=None,
    frames=None,
    force_frames=None,
    convention: str = "jaxmb",
    terms: bool = False,
    outputs=None,
    dtype: str = "float64",
    out=None,
) -> GaitResult:
    """Joint angles, moments, powers and reaction forces of the leg in the sagittal plane.

    The leg is a floating-base chain thigh (hip -> knee), shank (knee -> ankle), foot
    (ankle -> toe), with absolute segment angles from the joint centres and segment
    lengths their mean distances. The ground reaction force acts on the foot at the
    centre of pressure. Newton-Euler inverse dynamics (:func:`jaxmb.rnea_full`, or
    :func:`jaxmb.joint_moments` or :func:`jaxmb.joint_reactions` when ``outputs``
    needs only one of them) then gives, from the ground up, the ankle, knee and hip
    loads: the notebook's segment-by-segment ``invdyn2d``, on jaxmb's core.

    **Filtering.** ``cutoff=None`` (default) filters nothing: right for noise-free
    data (the bundled simulated running data: the notebook, too, filters nothing and
    takes plain second differences) and for data that are already filtered. A number
    filters the joint centres *and*, by default (``force_cutoff="same"``), the force
    and its moment with the same zero-phase Butterworth filter
    (:func:`jaxmb.signal.lowpass`, ``order``, no cut-off correction), its start-up
    transient settled by an odd extension of each trial as long as the filter's
    memory (``padlen="auto"``, about two periods of the cut-off: scipy's default of
    9 samples is too short at kHz rates, see ``padlen``). The force's
    moment about a point of the trial, (p - r) x F + free moment, is filtered, not
    the centre of pressure p: it is linear in the data and zero where the force is,
    where p is undefined, and a few newtons at the edges of a contact with p
    decimetres off (as plates measure it) weigh as little as they should. A filtered
    centre of pressure would carry the force that the filter spreads around the
    contact to wherever p was held before it, and the first loaded sample of
    ``tests/data/Gait.c3d``'s heel strike puts p 0.3 m behind the heel: filtering
    the moment, the early-stance peaks are the same whether the plates count as
    loaded from 20 or from 30 N (tests/test_gait.py). The ``cop`` output is the
    point of the filtered force's line of action at the filtered height of the
    centre of pressure (the input itself where nothing is filtered), held where the
    vertical force is 20 N or less.
    Filtering the kinematics but not the force (or at different cut-offs) makes the
    inertial terms, computed from smoothed accelerations, miss the impact peak that
    the unfiltered force still holds, and the moments at heel strike get large
    spurious peaks (van den Bogert & de Koning 1996; Kristianslund, Krosshaug & van den
    Bogert 2012): the same cut-off keeps the two consistent. ``cutoff="auto"`` runs
    Winter's residual analysis (:func:`jaxmb.signal.residual_analysis`) on the eight
    joint-centre coordinates of each trial and takes the highest of their cut-offs
    (no coordinate is over-smoothed), for kinematics and force alike.

    **Sign conventions.** ``convention="jaxmb"`` (default): every angle, velocity and
    moment is counter-clockwise positive seen with x forward and y up (from the
    subject's right when walking toward +x): angles are those of the distal segment
    relative to the proximal one (the hip's from the pelvis's downward axis, or the
    downward vertical without ``pelvis``; the ankle is pi/2 with the foot axis at right
    angles to the shank), moments are those the proximal segment exerts on the distal
    one, as :func:`jaxmb.joint_moments` defines them (and as the running data's true
    moments are given). ``convention="clinical"``: hip flexion, knee flexion, ankle
    dorsiflexion positive (zero when the foot axis is at right angles to the shank),
    and hip extensor, knee extensor, ankle plantarflexor moments positive (Winter's
    convention): clinical = (+1, -1, +1) * jaxmb angles (minus pi/2 at the ankle) and
    (-1, +1, -1) * jaxmb moments. Powers (W) are the same in both: the jaxmb moment
    times the jaxmb angular velocity, which is minus the clinical moment times the
    clinical angular velocity (the clinical signs make moments positive toward
    extension and angles toward flexion, opposite senses at every joint). Both legs
    are seen from the subject's right: a left leg needs no mirroring (:func:`sagittal`
    gives either side as is); only a subject walking toward -x must be mirrored
    first (x -> -x).

    **Batches.** Every input may have leading batch axes (``(..., T, 2)``; ``rate``,
    ``gravity`` shared; ``segments`` arrays ``(3,)`` or ``(..., 3)``; ``body_mass``
    ``()`` or ``(...)``): trials of equal length run in one jitted computation. Trials
    of unequal length: give lists of per-trial arrays (padded here), or padded arrays
    with ``frames`` ``(...,)`` valid samples per trial (and ``force_frames``, valid
    force samples, for a force at another rate); the padding is ignored, and samples
    past ``frames`` are NaN in the result and False in ``result.mask``. Trials of
    several lengths or cut-offs (``cutoff="auto"`` gives each trial its own) run in
    one compiled computation, each trial filtered (its own odd extension, at its own
    end) and differentiated (its own end stencils) within its own frames: the same
    values as the trial alone, to float64 rounding (unfiltered, 1e-15 of a peak;
    filtered, the block filter's own order of operations, amplified by second
    differences: about 1e-11 of a peak at 1 kHz and up to 6e-8 at 10 kHz;
    tests/test_gait.py). That computation compiles once for a batch's shapes, each
    rounded up (the trials above 16, the longest trial's samples and force samples
    to a size within 12.5 %, the longest odd extension to a power of 2), so that
    the next batch of similar trials reuses it; compiling it per length, as a loop
    over the trials does, costs seconds a length on a CPU (``python -m
    benchmarks.bench_gait_ragged``). Its run time is up to about 1.5x that of as
    many trials of one length (each trial's extension filtered in full, gathers
    at its ends). Inside, a loop takes a few trials at a
    time on the CPU (4: their intermediates stay in the cache) and up to 2^22 samples
    worth of trials a step on a GPU or TPU (chosen without a GPU to measure it). On
    the CPU, trials of one length run through the compiled computation about 2^16
    samples at a time (8 trials of 6,001 frames), each step's outputs copied into
    result arrays allocated once: the time per trial does not grow with the batch,
    and the memory is the inputs and results plus a few MB; ``out=`` writes the
    results to memory-mapped files instead, for batches whose results do not fit
    in memory.

    Args:
      hip, knee, ankle, toe: (..., T, 2) joint centres (x forward, y up), m; ``toe``
        is the distal end of the foot's axis (the foot's length runs ankle -> toe).
      force: (..., Tf, 2) ground reaction force (Fx, Fy) on the foot, N.
      cop: (..., Tf) centre-of-pressure x on the ground (y = 0) or (..., Tf, 2) (x, y), m.
      rate: kinematics sampling rate, Hz.
      segments: {"mass": kg, "inertia": kg m^2 about the centre of mass, "com":
        fraction of the segment length from the proximal joint}, each (3,) or
        (..., 3) for thigh, shank, foot. Default: from ``body_mass`` and ``table``
        (mass fraction, centre-of-mass fraction and radius of gyration of Dempster's
        thigh, leg and foot rows as Winter tabulates them) with the measured lengths.
      body_mass: kg, () or (...): for ``segments=None`` and for the per-kilogram views.
      height: m, () or (...): recorded in the result (for normalisations).
      table: anthropometric table for ``segments=None`` ("dempster", "deleva_male",
        "deleva_female").
      force_rate: force sampling rate, Hz (default ``rate``); the force is filtered
        at its own rate, then linearly interpolated to the kinematics' samples.
      free_moment: optional (..., Tf) moment about the axis normal to the plane
        (Mz, counter-clockwise) applied to the foot with the force, N m. At a
        centre of pressure on the ground it is zero in the sagittal plane (a plate's
        "free moment" acts about the vertical and has no sagittal component); give
        it when the force is reported at another point.
      cutoff: None (no filtering), a cut-off in Hz, or "auto" (see above).
      force_cutoff: "same" (default: ``cutoff``), None (unfiltered) or Hz.
      order: Butterworth order of one pass (2: a 4th-order zero-phase filter).
      padlen: the filter's odd extension at each end of a trial, samples: "auto"
        (default: :func:`jaxmb.signal.settling_samples`, in which the filter's
        slowest mode decays by 1e-4, about 2 periods of the cut-off for ``order=2``,
        at most the trial's length less one; a UserWarning where a cut-off is so
        low that the transient outlasts the trial), None (scipy's ``3 * (order + 1)``) or
        an int; see :func:`jaxmb.signal.lowpass`. Scipy's 9 samples are short at
        high rates: the bundled 10 kHz running data filtered at 30 Hz have a hip
        moment RMS error of 96 N m with them (edge transients in the last and first
        20 ms) and 2.2 N m with "auto".
      gravity: m/s^2 (9.80665 for the running data).
      pelvis: optional (..., T) pelvis angle, rad, CCW: the hip angle and hip power
        are taken relative to it (default: a pelvis that does not rotate); filtered
        with the joint centres (``cutoff``).
      frames: optional (...) int, valid samples per trial of padded inputs.
      force_frames: optional (...) int, valid force samples per trial of padded
        inputs (the samples past them are ignored: NaN or anything). Default:
        without ``frames`` every sample; with ``frames`` and as many force samples
        as kinematics ones, ``frames``; with ``frames`` and a force at another rate,
        the force samples within each trial's valid kinematics, ``floor((frames -
        1) * force_rate / rate) + 1``. A trial whose force runs past its last frame
        (a 0.45 s trial at 100 Hz with 450 samples at 1 kHz: 441 by default) gives
        them here, so that the filter sees the same samples as for the trial alone.
      convention: "jaxmb" or "clinical".
      terms: also return the contribution of each term (:data:`TERMS`) in
        ``result.terms`` (for :func:`term_effects`; four more inverse dynamics passes;
        implies ``"moments"``, ``"reactions"`` and ``"force"`` in ``outputs``).
      outputs: None (default: every per-sample result) or a name or names from
        :data:`OUTPUTS`: only those are computed and returned, the other
        per-sample fields of the result are None (``time``, ``mask``, ``frames``
        and ``segments`` are always there). For large batches: the whole result
        is 34 float64 values a frame (1.6 GB for 1,000 trials of 6,001 frames),
        ``outputs=("moments", "reactions")`` 9; the inverse dynamics returns
        only the moments or only the reactions when no output needs the other.
      dtype: "float64" (default: computed in float64 whatever JAX's 64-bit
        setting, in a scoped ``jax.enable_x64``) or "float32" (JAX's 32-bit mode:
        half the memory traffic, for accelerators). Float32 suits lab rates: at
        200 Hz every output of the running data (121 frames) stays within 1e-3 of
        its peak of float64's (tests/test_gait.py); short trials with small peaks
        lose more (a 17-frame swing, unfiltered: 3 % of its 1 N m peak moment, as
        the trial alone or in a batch). It does not suit kHz rates: second
        differences of positions cancel (at 10 kHz, RMS moment errors of 23, 6.8
        and 0.19 N m against the truth, instead of float64's 0.13, 0.07 and 0.011).
      out: None (default: the results in memory) or a folder (created if missing):
        each per-sample output is written there as ``<name>.npy`` (``moments.npy``,
        ``reactions.npy``, ..., ``terms_<term>_moments.npy`` with ``terms``), step by
        step as it is computed, and the result's arrays are those files,
        memory-mapped (``np.load(path, mmap_mode="r")`` reads them later). For
        batches whose results do not fit in memory (the whole result is 34 float64
        values a frame). Files of the same names are replaced; each is written as
        ``<name>.npy.partial`` and renamed when the result is complete (an error
        leaves no file). Trials of one length and cut-off only.

    Returns:
      :class:`GaitResult`: its per-sample arrays (:data:`OUTPUTS`, ``terms``) and
      ``segments`` in ``dtype``, ``time`` in float64.

    Raises:
      ValueError: inconsistent shapes, NaN in the valid samples, a cut-off at or
        above a Nyquist frequency, non-positive masses, rates or lengths, missing
        segment parameters, an unknown convention, ``out`` not a folder or given
        for trials of several lengths or cut-offs.
    """
    import jax

    if convention not in _CONVENTIONS:
        raise ValueError(f"convention must be one of {_CONVENTIONS}, got {convention!r}")
    if dtype not in ("float64", "float32"):
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    outputs = _outputs(outputs, terms)
    out_dir = _out_folder(out)
    rate = _signal._positive(rate, "rate", "Hz")
    force_rate = rate if force_rate is None else _signal._positive(force_rate, "force_rate", "Hz")
    gravity = float(gravity)
    if not math.isfinite(gravity):
        raise ValueError(f"gravity must be finite (m/s^2), got {gravity}")

    # --- inputs to (B, T, ...) arrays and valid frame counts
    ragged = _is_ragged(hip)
    if ragged:
        if frames is not None or force_frames is not None:
            raise ValueError("give either lists of trials (padded here) or padded arrays with frames= "
                             "(and force_frames=), not both")
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
        lead = (len(hip),)
        PT = tuple(pts[k] for k in ("hip", "knee", "ankle", "toe"))  # (B, T, 2) each
        force_frames = ffr
        force_a, cop_a = force_b, cop_b
        mz_a = mz_b if mz_b is not None else np.zeros(force_b.shape[:2])
        pelvis_a = None
        if pelvis is not None:
            pelvis_a, pfr = _pad_list(pelvis, "pelvis", ())
            if (pfr != kin_frames).any():
                raise ValueError("pelvis must be a list of trials with the kinematics' number of samples")
    else:
        arrays = {k: _as_float(v, k) for k, v in (("hip", hip), ("knee", knee), ("ankle", ankle), ("toe", toe))}
        shape = _check_points(arrays)
        lead, T = shape[:-2], shape[-2]
        force_a = _as_float(force, "force")
        if force_a.ndim < 2 or force_a.shape[-1] != 2 or force_a.shape[:-2] != lead:
            want = "(" + ", ".join([str(d) for d in lead] + ["Tf", "2"]) + ")"
            raise ValueError(f"force must have shape {want} (Fx, Fy, N; Tf force samples), got {force_a.shape}")
        Tf = force_a.shape[-2]
        cop_a = _as_float(cop, "cop")
        if cop_a.shape == lead + (Tf,):
            pass
        elif cop_a.shape != lead + (Tf, 2):
            raise ValueError(f"cop must have shape {lead + (Tf,)} (x on the ground) or {lead + (Tf, 2)}, "
                             f"got {cop_a.shape}")  # fmt: skip
        mz_a = np.zeros(lead + (Tf,))
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
        mz_a = mz_a.reshape(B, Tf)
        if pelvis_a is not None:
            pelvis_a = pelvis_a.reshape(B, T)
        if frames is None:
            kin_frames = np.full(B, T)
        else:
            kin_frames = _counts(frames, "frames", "valid samples per trial", lead, T)
        if force_frames is not None:
            force_frames = _counts(force_frames, "force_frames", "valid force samples per trial", lead, Tf)
    B, T = PT[0].shape[:2]
    Tf = force_a.shape[1]
    if force_frames is not None and force_rate == rate and (force_frames != kin_frames).any():
        # per trial, as for one trial (lists of trials and force_frames= came here
        # unchecked: a 10 kHz force read at the markers' 1 kHz, silently)
        b = int(np.argmax(force_frames != kin_frames))
        raise ValueError(f"force has {int(force_frames[b])} samples but the kinematics {int(kin_frames[b])} (trial "
                         f"{b}): give force_rate= if it differs")  # fmt: skip
    if force_frames is None:
        if force_rate == rate and Tf != T:
            raise ValueError(f"force has {Tf} samples but the kinematics {T}: give force_rate= if it differs")
        if T == Tf:
            force_frames = kin_frames.copy()
        elif frames is None:  # no padding: every force sample
            force_frames = np.full(B, Tf)
        else:
            # padded arrays at another rate: the force samples within the valid
            # kinematics' time span, from the first frame to the last (a trial with more
            # force samples than that gives force_frames=)
            force_frames = np.minimum(np.floor((kin_frames - 1) * force_rate / rate + 1e-9).astype(int) + 1, Tf)
    kmask = np.arange(T)[None] < kin_frames[:, None]
    fmask = np.arange(Tf)[None] < force_frames[:, None]
    for name, a in zip(("hip", "knee", "ankle", "toe"), PT):
        _check_finite_valid(a, name, kmask)
    _check_finite_valid(force_a, "force", fmask)
    _check_finite_valid(cop_a, "cop", fmask)
    has_mz = free_moment is not None
    if has_mz:
        _check_finite_valid(mz_a, "free_moment", fmask)
    if pelvis_a is not None:
        _check_finite_valid(pelvis_a, "pelvis", kmask)
    if (kin_frames < 4).any():
        raise ValueError("every trial needs at least 4 samples")
    # a human thigh, shank or foot is 0.05 to 0.6 m long: joint centres in millimetres
    # give segments 1000 times that, and moments a million times too large, silently
    for (a, b), seg in zip(((0, 1), (1, 2), (2, 3)), ("thigh (hip-knee)", "shank (knee-ankle)", "foot (ankle-toe)")):
        d = np.linalg.norm(PT[a] - PT[b], axis=-1)[kmask]
        med = float(np.median(d[:: max(1, d.size // 10_000)]))
        if med > 2.0:
            raise ValueError(f"the {seg} is {med:.4g} m long (median over the samples): the joint centres must be "
                             "in metres (divide millimetres by 1000)")
    # the ground reaction force and its centre of pressure, where the foot is loaded
    # (|Fy| > 20 N): a force that pushes down (the foot's push on the plate, not the
    # ground's on the foot) or a centre of pressure in millimetres gave moments of
    # hundreds or 1e5 N m, silently
    cop_x = cop_a if cop_a.ndim == 2 else cop_a[..., 0]
    for b in range(B):
        nf_b, nk_b = int(force_frames[b]), int(kin_frames[b])
        fy = force_a[b, :nf_b, 1]
        loaded = np.abs(fy) > 20.0
        if loaded.sum() < 3:
            continue
        where = f" (trial {b})" if B > 1 else ""
        # the load is where |Fy| is largest: a plate's offset of a few tens of newtons
        # outside stance, either sign, is not it
        if -fy.min() > fy.max():
            raise ValueError(f"the vertical ground reaction force is negative where the foot is loaded (down to "
                             f"{fy.min():.4g} N, up to {fy.max():.4g} N){where}: give the force that the ground "
                             "exerts on the foot, y up (negate a plate's reading of the foot's push)")  # fmt: skip
        loaded = fy > 20.0
        foot_x = np.concatenate([PT[2][b, :nk_b, 0], PT[3][b, :nk_b, 0]])
        lo, hi = float(np.min(foot_x)) - 1.0, float(np.max(foot_x)) + 1.0
        med_cop = float(np.median(cop_x[b, :nf_b][loaded]))
        if not lo <= med_cop <= hi:
            raise ValueError(f"the centre of pressure is at x = {med_cop:.4g} (median where the foot is loaded)"
                             f"{where}, more than 1 m from the foot (ankle and toe from {lo + 1:.4g} to {hi - 1:.4g} "
                             "m): it must be in metres, in the joint centres' frame (divide millimetres by 1000)")  # fmt: skip

    # --- cut-offs
    order = _signal._order(order)
    if padlen is None or isinstance(padlen, str):
        if padlen not in (None, "auto"):
            raise ValueError(f"padlen must be 'auto', None or an int >= 0 (samples), got {padlen!r}")
        least = 3 * (order + 1)
    else:
        padlen = least = _signal._int_at_least(padlen, "padlen", 0, " (samples), 'auto' or None")
    auto = isinstance(cutoff, str)
    if auto and cutoff != "auto":
        raise ValueError(f"cutoff must be None, a number (Hz) or 'auto', got {cutoff!r}")
    if cutoff is not None and not auto:
        cutoff = _signal._positive(cutoff, "cutoff", "Hz")
        if cutoff >= rate / 2:
            raise ValueError(f"cutoff {cutoff} Hz must be below the kinematics' Nyquist frequency {rate / 2} Hz")
    same = isinstance(force_cutoff, str)
    if same and force_cutoff != "same":
        raise ValueError(f"force_cutoff must be 'same', None or a number (Hz), got {force_cutoff!r}")
    if force_cutoff is not None and not same:
        force_cutoff = _signal._positive(force_cutoff, "force_cutoff", "Hz")
        if force_cutoff >= force_rate / 2:
            raise ValueError(f"force_cutoff {force_cutoff} Hz must be below the force's Nyquist frequency "
                             f"{force_rate / 2} Hz")  # fmt: skip
    trial_cut = np.full(B, np.nan)
    if auto:
        for b in range(B):
            P = np.concatenate([a[b, : kin_frames[b]] for a in PT], -1)  # (T, 8)
            ra = _signal.residual_analysis(P, rate, axis=0, order=order)
            trial_cut[b] = float(np.max(ra.cutoff))
    elif cutoff is not None:
        trial_cut[:] = cutoff
    for c in trial_cut:
        if np.isfinite(c) and same and c >= force_rate / 2:
            raise ValueError(f"cutoff {c} Hz must be below the force's Nyquist frequency {force_rate / 2} Hz")

    seg_a, seg_b, seg_c, from_table = _segment_spec(segments, body_mass, table, lead)

    # --- one jitted computation: for the batch's one length and cut-off, or for
    # trials of several (padded, each within its own frames)
    out = {}
    keys = {}
    for b in range(B):
        # None, not NaN, for "no filter": NaN != NaN would give every trial its own group
        c = None if math.isnan(trial_cut[b]) else float(trial_cut[b])
        keys.setdefault((int(kin_frames[b]), int(force_frames[b]), c), []).append(b)
    resamples = {}
    for (nk, nf, c), idx in keys.items():
        kc = c  # the kinematics' cut-off (None: unfiltered)
        fc = kc if same else force_cutoff
        resample = None
        if force_rate != rate or nf != nk:
            try:
                resample = _resample_index(nk, rate, nf, force_rate, "the force")
            except ValueError as e:
                raise ValueError(f"{e} (trials of {nk} samples)") from None
        resamples[nk, nf, c] = resample
        for cut, r, n in ((kc, rate, nk), (fc, force_rate, nf)):
            if cut is not None and n <= least:
                raise ValueError(f"trials of {n} samples are too short to filter (more than {least} needed)")
        for cut, r, n in ((kc, rate, nk), (fc, force_rate, nf)):
            # a cut-off too low for the trial: its padding cannot hold the transient
            if padlen == "auto" and cut is not None:
                from ._filters import _lowpass_design

                sos = _lowpass_design(r, cut, order, False, None, n)[0]
                what = "trial"
                if B > 1:  # which ones, as "(trial b)" in the errors
                    what = f"trial{'s' * (len(idx) > 1)} (trial{'s' * (len(idx) > 1)} {', '.join(map(str, idx))})"
                if _signal._warn_unsettled(sos, n, r, cut, stacklevel=3, what=what):
                    break
    if len(keys) > 1 and out_dir is not None:
        raise ValueError(f"out= takes trials of one length and cut-off; these come in {len(keys)} groups "
                         "(lengths, cut-offs): analyze each group with its own out=")  # fmt: skip
    files = {}  # out=: each output's .npy.partial -> its .npy, renamed when the result is complete
    if len(keys) > 1:
        # trials of several lengths or cut-offs: one compiled computation for all,
        # each trial filtered and differentiated within its own frames, on arrays as
        # wide as the longest trial; each shape rounded up (trials and samples to
        # within 12.5 %, _bucket; the longest odd extensions to a power of 2), so
        # that the next batch of similar trials (another subject's) can reuse it
        Tu, Tfu = int(kin_frames.max()), int(force_frames.max())
        Bb, Tb, Tfb = _bucket(B), _bucket(Tu), _bucket(Tfu)
        ragged_in, pads = _ragged_inputs(keys, resamples, B, Tu, Tb, Tfu, rate=rate, force_rate=force_rate,
                                         same=same, force_cutoff=force_cutoff, order=order, padlen=padlen)  # fmt: skip
        pads = tuple(0 if p == 0 else 1 << (p - 1).bit_length() for p in pads)

        def grow(x, n_time=None):  # more trials (copies of the last); samples cut or added (ignored)
            if x is None:
                return None
            x = np.asarray(x)
            width = [(0, Bb - B)] + [(0, 0)] * (x.ndim - 1)
            if n_time is not None:
                x = x[:, :n_time]
                width[1] = (0, n_time - x.shape[1])
            return np.pad(x, width, mode="edge") if any(w[1] for w in width) else x

        nk_, nf_, kfilt, ffilt, res = ragged_in
        kfilt, ffilt = (None if f is None else ((f[0] if f[0][0].ndim == 2 else tuple(map(grow, f[0]))), grow(f[1]))
                        for f in (kfilt, ffilt))  # fmt: skip
        ragged_in = (grow(nk_), grow(nf_), kfilt, ffilt, None if res is None else tuple(map(grow, res)))
        fn = _jitted(rate=rate, force_rate=force_rate, cutoff=None, force_cutoff=None, order=order, padlen=None,
                     from_table=from_table, terms=bool(terms), outputs=outputs,
                     chunk=_pipeline_chunk(_platform(), Tb + 2 * max(pads), bool(terms)), pads=pads)  # fmt: skip
        with jax.enable_x64(dtype == "float64"):
            got = fn(tuple(grow(a, Tb) for a in PT), grow(force_a, Tfb), grow(cop_a, Tfb),
                     grow(mz_a, Tfb) if has_mz else None, None, tuple(grow(x) for x in (seg_a, seg_b, seg_c)),
                     np.float64(gravity), grow(pelvis_a, Tb), ragged_in)  # fmt: skip
        for path, v in jax.tree_util.tree_flatten_with_path(got)[0]:
            v = np.asarray(v)[:B]
            if v.ndim >= 2 and v.shape[1] == Tb:  # per sample: back to the inputs' width
                v = v[:, :Tu]
                if Tu < T:
                    v = np.concatenate([v, np.full((B, T - Tu) + v.shape[2:], np.nan, v.dtype)], 1)
            out[path] = v
    else:  # one length and cut-off
        (((nk, nf, c), idx),) = keys.items()  # every trial (one group)
        kc = c  # the kinematics' cut-off (None: unfiltered)
        fc = kc if same else force_cutoff
        resample = resamples[nk, nf, c]
        platform = _platform()
        chunk = _pipeline_chunk(platform, nk, bool(terms))
        fn = _jitted(rate=rate, force_rate=force_rate, cutoff=kc, force_cutoff=fc, order=order, padlen=padlen,
                     from_table=from_table, terms=bool(terms), outputs=outputs, chunk=chunk)  # fmt: skip
        seg = (seg_a, seg_b, seg_c)
        mz = mz_a if has_mz else None
        step = _step_trials(platform, nk, chunk, B)

        def args(s, e):  # trials s:e (views where no padding), cut to the group's samples
            def pick(x, n=None):
                return _rows(x, s, e, step, n)

            return (tuple(pick(a, nk) for a in PT), pick(force_a, nf), pick(cop_a, nf), pick(mz, nf), resample,
                    tuple(pick(x) for x in seg), np.float64(gravity), pick(pelvis_a, nk))  # fmt: skip

        # in float64 whatever JAX's global setting (a scoped jax.enable_x64), unless
        # dtype="float32" asks for JAX's 32-bit mode
        try:
            with jax.enable_x64(dtype == "float64"):
                out = _run_steps(fn, args, B, step, T, nk, out_dir, files)
        except BaseException:  # an interrupted run leaves no partly written file
            _remove(files)
            raise
    try:
        result = _result(out, terms, kmask, lead, B, T, rate, trial_cut, auto, cutoff, same, force_cutoff,
                         kin_frames, body_mass, height, convention)  # fmt: skip
    except BaseException:
        _remove(files)
        raise
    _publish(files)
    return result


def _result(out, terms, kmask, lead, B, T, rate, trial_cut, auto, cutoff, same, force_cutoff, kin_frames, body_mass,
            height, convention) -> GaitResult:  # fmt: skip
    """analyze's GaitResult from the pipeline's outputs ``out`` {path: (B, ...) array}:
    checks the segment lengths, masks the samples past each trial's frames (NaN, in
    place where the arrays are analyze's own) and applies the ``convention``."""
    import jax

    res = {jax.tree_util.keystr(k[:1]).strip("[]'"): v for k, v in out.items() if len(k) == 1}
    lengths = res["lengths"]
    if (lengths <= 0).any() or not np.isfinite(lengths).all():
        b, j = (int(i) for i in np.argwhere(~(lengths > 0))[0])
        raise ValueError(f"the {SEGMENTS[j]} has zero length (trial {b}): check the joint centres")
    mass, inertia, com = res["mass"], res["inertia"], res["com"]
    term_out = None
    if terms:
        tpaths = {}
        for k, v in out.items():
            if len(k) == 3:  # ("terms", name, 0/1)
                tpaths.setdefault(k[1].key, [None, None])[k[2].idx] = v

    full = bool(kmask.all())

    def shaped(x):
        if x is None:
            return None
        if not full and x.flags.writeable:  # analyze's own array: no copy (a memory-mapped file too)
            x[~kmask] = np.nan
        elif not full:
            x = np.where(kmask.reshape((B, T) + (1,) * (x.ndim - 2)), x, np.nan)
        return x.reshape(lead + x.shape[1:])

    if terms:
        term_out = {k: (shaped(m_), shaped(r_)) for k, (m_, r_) in tpaths.items()}
    got = {k: shaped(res.get(k)) for k in OUTPUTS}
    kin_cut = (trial_cut.reshape(lead) if lead else float(trial_cut[0])) if auto else cutoff
    result = GaitResult(
        time=np.arange(T) / rate,
        **got,
        mask=kmask.reshape(lead + (T,)),
        frames=kin_frames.reshape(lead) if lead else int(kin_frames[0]),
        rate=rate,
        cutoff=kin_cut,
        force_cutoff=kin_cut if same else force_cutoff,  # Hz (was the string "same")
        convention="jaxmb",
        body_mass=_per_trial(body_mass, "body_mass", "kg", lead),
        height=_per_trial(height, "height", "m", lead),
        segments={"length": lengths.reshape(lead + (3,)), "mass": mass.reshape(lead + (3,)),
                  "inertia": inertia.reshape(lead + (3,)), "com": com.reshape(lead + (3,))},  # fmt: skip
        terms=term_out,
    )
    return result.to_convention(convention) if convention == "jaxmb" else _clinical_in_place(result)


def _clinical_in_place(result: GaitResult) -> GaitResult:
    """``result.to_convention("clinical")`` without copies of its arrays where they
    are analyze's own (writeable; memory-mapped files too): the same arithmetic,
    in place."""
    arrays = [(result.angles, _ANGLE_SIGN, _ANGLE_OFFSET), (result.velocities, _ANGLE_SIGN, 0.0),
              (result.moments, _MOMENT_SIGN, 0.0)]  # fmt: skip
    arrays += [(m, _MOMENT_SIGN, 0.0) for m, _ in (result.terms or {}).values()]
    if any(x is not None and not x.flags.writeable for x, _, _ in arrays):
        return result.to_convention("clinical")
    for x, sign, offset in arrays:
        if x is not None:
            x *= np.asarray(sign, x.dtype)
            x += np.asarray(offset, x.dtype)
    return dataclasses.replace(result, convention="clinical")


#: Default markers of each joint centre (Plug-in-Gait labels; ``{S}`` is "R" or "L"):
#: the mean of the listed markers, or for the hip the regression of Harrington et al.
#: (2007) from the pelvis markers: ``("harrington", right ASIS, left ASIS, sacrum)``,
#: or for a marker set with two posterior superior iliac spines and no sacrum marker
#: ``("harrington", right ASIS, left ASIS, right PSIS, left PSIS)`` (the sacrum is
#: then the PSIS midpoint), e.g. ``("harrington", "R.ASIS", "L.ASIS", "R.PSIS", "L.PSIS")``.
DEFAULT_MAPPING = {
    "hip": ("harrington", "RASI", "LASI", "VSAC"),
    "knee": ("{S}KNE", "{S}KNE_2"),  # lateral and medial epicondyles (read_c3d's renaming)
    "ankle": ("{S}ANK", "{S}ANK_2"),  # lateral and medial malleoli
    "toe": ("{S}TOE",),
    "heel": ("{S}HEE",),
}


@dataclasses.dataclass(frozen=True)
class SagittalTrial:
    """One leg of a 3-D trial in the sagittal plane, ready for :func:`analyze`.

    Coordinates: x along the direction of progression, y up, origin at the lab origin
    (the floor at y = 0 when the lab's vertical coordinate is zero on the plates).

    Attributes:
      hip, knee, ankle, toe: (T, 2) joint centres, m, over the frames analysed: the
        longest run of frames in which every marker needed is present, within the
        force plates' recording.
      force: (Tf, 2) ground reaction force on the foot (Fx, Fy), N, at
        ``time[0] + j / force_rate``: the sum over this foot's contacts with the
        plates; zero elsewhere.
      cop: (Tf, 2) centre of pressure (x, y), m (held at the next loaded sample
        where the force is zero).
      rate, force_rate: Hz.
      time: (T,) s, the file's time of each frame.
      stance: (start, stop) frames of the (first) stance phase on the plates (stop
        exclusive), indices into the (T,) arrays (``time[start]`` is the file's time
        of its first frame); None when the foot touched no plate.
      stances: every stance phase on the plates, ((start, stop), ...), in time order
        (a foot that steps on two plates in turn has two; on two plates at once,
        one); ``stance`` is the first.
      partial: per stance, "" for a stance held whole; "start", "end" or "both"
        for one that the start or end of a recording cuts off (the foot already on
        the plate at the first frame analysed, or still on it at the last: its
        foot strike or toe-off is not in the data, and % of stance means nothing).
      plates: 0-based indices of the plates under this foot.
      axes: (3, 3) rows: the lab-frame unit vectors of forward (x), up (y) and the
        right-hand lateral axis (forward x up), in which the data were projected.
      side: "right" or "left".
      body_weight: N, the mean total vertical force over the middle 70 % of each
        loaded plate's contact that the force recording holds whole (single
        support, where the foot carries the body; an estimate within a few per
        cent), or None without such a contact.
      contacts: ((plate, first s, last s), ...) this foot's contacts with the plates
        (the file's times of the first and last loaded samples).
    """

    hip: np.ndarray
    knee: np.ndarray
    ankle: np.ndarray
    toe: np.ndarray
    force: np.ndarray
    cop: np.ndarray
    rate: float
    force_rate: float
    time: np.ndarray
    stance: tuple | None
    plates: tuple
    axes: np.ndarray
    side: str
    body_weight: float | None
    contacts: tuple = ()
    stances: tuple = ()
    partial: tuple = ()

    def inputs(self) -> dict:
        """Keyword arguments of :func:`analyze` for this trial."""
        return dict(hip=self.hip, knee=self.knee, ankle=self.ankle, toe=self.toe, force=self.force,
                    cop=self.cop, rate=self.rate, force_rate=self.force_rate)  # fmt: skip


def _unit(v, what):
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n < 1e-9:
        raise ValueError(f"cannot find the {what} from the data")
    return np.asarray(v, float) / n


#: the end of sagittal's error for a marker that the file lacks (the command line
#: puts its own option in its place)
_MAPPING_HINT = "(override with mapping=)"


def _marker(markers, label, side):
    lab = label.replace("{S}", side)
    try:
        return markers.get(lab)
    except KeyError as e:
        src = getattr(markers, "source", None)
        raise ValueError(f"sagittal: {f'{src}: ' if src else ''}{e.args[0]} {_MAPPING_HINT}") from None


def _harrington_labels(spec) -> tuple:
    """The marker labels of a ``("harrington", ...)`` hip entry of a mapping, checked:
    (right ASIS, left ASIS, sacrum) or (right ASIS, left ASIS, right PSIS, left PSIS).

    Raises:
      ValueError: another number of markers, or a marker named twice.
    """
    labels = tuple(spec[1:])
    if len(labels) not in (3, 4):
        got = f"{len(labels)}: {', '.join(labels)}" if labels else "none"
        raise ValueError("a 'harrington' hip needs three markers (right ASIS, left ASIS, sacrum) or four (right "
                         f"ASIS, left ASIS, right PSIS, left PSIS; the sacrum is their midpoint), got {got}")  # fmt: skip
    twice = sorted({lab for lab in labels if labels.count(lab) > 1})
    if twice:
        raise ValueError(f"a 'harrington' hip names {', '.join(twice)} twice: {', '.join(labels)}")
    return labels


def _check_mapping_entry(key, spec) -> None:
    """Refuse a malformed mapping entry before any data are read: a 'harrington'
    entry other than the hip's, or with the wrong markers (:func:`_harrington_labels`),
    or one without any label."""
    spec = (spec,) if isinstance(spec, str) else tuple(spec)
    if not spec:
        raise ValueError(f"mapping: the {key} names no marker")
    if spec[0] == "harrington":
        if key != "hip":
            raise ValueError(f"mapping: 'harrington' is the hip's regression, not the {key}'s: {', '.join(spec)}")
        _harrington_labels(spec)


def _joint_centre(markers, spec, side, up):
    """(T, 3) lab-frame joint centre, m, from a mapping entry: the mean of its markers,
    or Harrington et al.'s hip from ("harrington", RASIS, LASIS, sacrum) or
    ("harrington", RASIS, LASIS, RPSIS, LPSIS), the sacrum then the PSIS midpoint."""
    if isinstance(spec, str):
        spec = (spec,)
    spec = tuple(spec)
    if spec and spec[0] == "harrington":
        labels = _harrington_labels(spec)
        rasi, lasi = (_marker(markers, lab, side) for lab in labels[:2])
        back = [_marker(markers, lab, side) for lab in labels[2:]]
        sac = back[0] if len(back) == 1 else 0.5 * (back[0] + back[1])  # the PSIS midpoint
        # Harrington et al. (2007), J Biomech 40:595: the hip joint centre in a pelvis
        # frame (origin mid-ASIS; x anterior, y superior, z to the right), in mm from the
        # pelvis width PW (ASIS to ASIS) and depth PD (mid-ASIS to mid-PSIS):
        # x = -0.24 PD - 9.9, y = -0.30 PW - 10.9, z = +-(0.33 PW + 7.3).
        mid = 0.5 * (rasi + lasi)
        z = rasi - lasi
        pw = np.linalg.norm(z, axis=-1, keepdims=True)
        z = z / pw
        back = sac - mid
        x = -(back - np.sum(back * z, -1, keepdims=True) * z)
        pd = np.linalg.norm(x, axis=-1, keepdims=True)
        x = x / pd
        y = np.cross(z, x)
        s = 1.0 if side == "R" else -1.0
        pw_mm, pd_mm = pw * 1000, pd * 1000
        local = (-0.24 * pd_mm - 9.9, -0.30 * pw_mm - 10.9, s * (0.33 * pw_mm + 7.3))
        return mid + (local[0] * x + local[1] * y + local[2] * z) / 1000
    return np.mean([_marker(markers, lab, side) for lab in spec], axis=0)


# Plate assignment of :func:`sagittal` (see its docstring for the margins measured on
# the walking trial of tests/data/Gait.c3d).
_FOOT_TOLERANCE = 0.15  # m: a foot stands on a plate whose centre of pressure is this near its heel-to-toe line
_FOOT_EXCURSION = 0.25  # m: a centre of pressure this far from the foot, under load, is not the foot's alone
_FOOT_STILL = 1.5  # m/s: a foot that bears load is still (the slower of its heel and toe)
_SUBSTANTIAL = 0.2  # of a contact's peak vertical force: the samples on which the feet are judged
_INVOLVED = 0.1  # of those samples: a foot standing on the plate for fewer is not on it
_STANCE_GAP = 0.05  # s: contacts of a foot less far apart are one stance (a swing lasts 0.3 s or more)


def _src(x) -> str:
    """" (file name)" of a Markers or ForcePlates read from a file, else ""."""
    name = getattr(x, "source", None)
    return f" ({name})" if name else ""


def _spec_labels(spec, side) -> list:
    """The marker labels of a mapping entry, {S} replaced by ``side``."""
    spec = (spec,) if isinstance(spec, str) else tuple(spec)
    if spec and spec[0] == "harrington":
        spec = spec[1:]
    return [lab.replace("{S}", side) for lab in spec]


def _speed(x, rate):
    """(T,) speed of a (T, 3) trajectory, m/s: central differences over +-10 ms (at
    least a frame; one-sided at the ends), NaN next to gaps."""
    T = len(x)
    lag = max(1, int(round(0.01 * rate)))
    i = np.arange(T)
    lo, hi = np.clip(i - lag, 0, T - 1), np.clip(i + lag, 0, T - 1)
    return np.linalg.norm(x[hi] - x[lo], axis=-1) * rate / np.maximum(hi - lo, 1)


def _line_distance(p, a, b, up):
    """(n,) horizontal distances of the points p from the segments a-b ((n, 3) each)."""
    seg = b - a
    t = np.clip(np.sum((p - a) * seg, -1) / np.maximum(np.sum(seg * seg, -1), 1e-12), 0.0, 1.0)
    d = p - a - t[:, None] * seg
    d = d - (d @ up)[:, None] * up
    return np.linalg.norm(d, axis=-1)


def _foot_force(force, cop, use, cop_ok, up):
    """The force (n, 3) summed over the plates' samples ``use`` (n, plates), and the
    vertical-force-weighted sum of their centres of pressure (n, 3) with its weights
    (n,): samples without a centre of pressure (``cop_ok`` False) carry no weight."""
    n = force.shape[0]
    force3, fcop, wsum = np.zeros((n, 3)), np.zeros((n, 3)), np.zeros(n)
    for k in np.flatnonzero(use.any(0)):
        on = use[:, k]
        f = np.where(on[:, None], force[:, k], 0.0)
        force3 += f
        has = on & cop_ok[:, k]
        w = np.where(has, f @ up, 0.0)
        fcop += np.where(has[:, None], np.nan_to_num(cop[:, k]), 0.0) * w[:, None]
        wsum += w
    return force3, fcop, wsum


def _held(fcop, wsum, has):
    """The centre of pressure fcop / wsum where ``has``, held at the next loaded
    sample (the last one at the end) elsewhere, where the force (and so its moment)
    is zero; zeros without any loaded sample."""
    if not has.any():
        return np.zeros_like(fcop)
    cop = np.full(fcop.shape, np.nan)
    cop[has] = fcop[has] / wsum[has, None]
    idx = np.flatnonzero(has)
    return cop[idx[np.clip(np.searchsorted(idx, np.arange(len(has))), 0, len(idx) - 1)]]


def _gap_text(markers, labels, f0, f1) -> str:
    """"RANK missing at 2.400-2.420 s (frames 241-243)": the markers among ``labels``
    missing in frames f0..f1 (inclusive; 0-based indices, as ``Markers.gaps`` gives
    them), those with the same gaps together; the text counts frames from 1, as the
    files' Frame# column and motion-capture software do."""

    groups = {}
    for lab in dict.fromkeys(labels):
        miss = ~np.isfinite(markers.get(lab)[f0 : f1 + 1]).all(-1)
        gaps = tuple((f0 + r0, f0 + r1 - 1) for r0, r1 in true_runs(miss))
        if gaps:
            groups.setdefault(gaps, []).append(lab)
    t = markers.time
    parts = []
    for gaps, labs in list(groups.items())[:4]:
        # frames counted from 1, as TRC files (Frame#) and motion-capture software count them
        when = ", ".join(f"{t[g0]:.3f} s (frame {g0 + 1})" if g0 == g1 else
                         f"{t[g0]:.3f}-{t[g1]:.3f} s (frames {g0 + 1}-{g1 + 1})" for g0, g1 in gaps[:3])  # fmt: skip
        more = f" and {len(gaps) - 3} more gaps" if len(gaps) > 3 else ""
        parts.append(f"{', '.join(labs)} missing at {when}{more}")
    if len(groups) > 4:
        parts.append(f"and {len(groups) - 4} more")
    return "; ".join(parts)


def _covered(time, ft, frate, markers, plates) -> tuple:
    """(first, stop) indices into the frame times ``time`` (s) of the frames that the
    force samples at times ``ft`` (s, rate ``frate``, Hz) cover, to half a sample
    (a Time column rounded to a few decimals); ValueError naming both files and
    their spans when they share fewer than 8 frames."""
    half = 0.5 / frate
    on = (time >= ft[0] - half) & (time <= ft[-1] + half)
    first, stop = int(np.argmax(on)), len(on) - int(np.argmax(on[::-1]))
    if on.sum() < 8:
        end = (f"the forces start at {ft[0]:.3f} s" if ft[0] > time[0] + half else "") + (
            f"{' and ' if ft[0] > time[0] + half else 'the forces '}end at {ft[-1]:.3f} s"
            if ft[-1] < time[-1] - half else "")  # fmt: skip
        raise ValueError(f"sagittal: the force plates{_src(plates)} cover {ft[0]:.3f}-{ft[-1]:.3f} s, the markers' "
                         f"complete frames{_src(markers)} {time[0]:.3f}-{time[-1]:.3f} s: {end}; they share "
                         f"{int(on.sum())} frames, too few to analyse (8 at least)")  # fmt: skip
    return first, stop


def sagittal(markers, plates=None, *, side: str = "right", mapping=None, min_force: float = 20.0) -> SagittalTrial:
    """3-D markers and force plates to the sagittal-plane inputs of :func:`analyze`.

    - The vertical is the direction of the mean ground reaction force over the loaded
      plates (the lab's +z without plates); the direction of progression is the
      horizontal displacement of the mid-pelvis (or of the hip centre) from the first
      to the last valid frame, so that the subject walks toward +x whichever way the
      lab's axes point; every point is projected on (forward, up).
    - Joint centres (``mapping``, default :data:`DEFAULT_MAPPING`): the mean of the
      listed markers (midpoints of lateral and medial markers where both exist); the
      hip by Harrington et al.'s regression from the pelvis markers,
      ``("harrington", RASIS, LASIS, sacrum)`` or, with two PSIS markers and no
      sacrum, ``("harrington", RASIS, LASIS, RPSIS, LPSIS)`` (the sacrum at the PSIS
      midpoint). Give ``mapping={"hip": ("RGT",), ...}`` to use other markers ({S}
      stands for R or L).
    - The frames analysed: the longest run of frames in which every marker needed is
      present, cut to the force plates' recording (to half a force sample; frames
      without force data are unmeasured, not "no contact"). A warning says so when
      that cut drops frames (forces that start after the markers or end before them).
    - Plates are assigned per *contact* (a run of samples in which a plate is loaded,
      its force above ``min_force``), not per plate. Over the contact's substantial
      samples (vertical force above 20 % of the contact's peak), a foot stands on the
      plate where the centre of pressure lies within 0.15 m of the foot's heel-to-toe
      line (horizontally) while the foot is still (its heel or its toe moving slower
      than 1.5 m/s: a swinging foot passing the plate is not on it). A contact on
      which this foot stands for at least 10 % of those samples is this foot's; the
      force is the sum over this foot's contacts. It must be this foot's alone: when
      the other foot (its heel and toe markers, where the mapping names them with
      {S} and the file has them) stands on the plate too, or the centre of pressure
      moves more than 0.25 m away from this foot's heel-to-toe line while the load is
      substantial, the plate carries another foot and sagittal raises (one plate's
      force cannot be split between two feet). On the walking trial of
      ``tests/data/Gait.c3d`` the stance foot's centre of pressure stays within
      0.063 m of its line, the stance foot moves at 0.55 m/s at most, and the other
      foot comes within 0.15 m of the centre of pressure only while it swings past
      at 4.4 m/s or more. A stance phase is a run of samples in which this foot's
      force is on (runs less than 50 ms apart are one); a foot that steps on two
      plates in turn has two (``stances``). A contact that the recording cuts off
      (it goes on past the markers' first or last frame, or is loaded at the
      forces' first or last sample) gives a *partial* stance (``partial``); the
      other stances are analysed as usual.
    - The force and centre of pressure are given at ``time[0] + j / force_rate``: the
      plates' own samples when they fall on that grid, else linearly interpolated
      (a TRC Time column rounded to a few decimals, or plate and marker rates that
      are not multiples).
    - Body weight: from the contacts that the force recording holds whole (not
      those loaded at its first or last sample).
    - Errors number the plates from 1, as the files do (``FX1``, force platform 1);
      ``plates`` holds 0-based indices. They name the files when the data come from
      jaxmb's readers (``Markers.source``, ``ForcePlates.source``).

    Args:
      markers: :class:`jaxmb.io.Markers` (m), or a :class:`jaxmb.io.C3DTrial` (its
        markers and force plates).
      plates: :class:`jaxmb.io.ForcePlates` in the lab frame (N, m), or None (a
        ForcePlates without any plate counts as None).
      side: "right" or "left".
      mapping: overrides of :data:`DEFAULT_MAPPING` (keys hip, knee, ankle, toe, heel),
        e.g. ``{"hip": ("harrington", "R.ASIS", "L.ASIS", "R.PSIS", "L.PSIS")}``.
      min_force: force below which a plate is unloaded, N.

    Returns:
      :class:`SagittalTrial` (``.inputs()`` gives :func:`analyze`'s arguments).

    Raises:
      ValueError: a malformed mapping (unknown keys, a 'harrington' hip without three
        or four markers, 'harrington' for another joint); a marker named by the
        mapping is missing (the message lists the labels), no run of complete frames,
        an unknown side; plates without samples,
        plates that share fewer than 8 frames with the complete run (both time
        spans); a plate loaded by both feet (the plate and the times); a contact of
        this foot (or a contact whose foot cannot be told, this foot's heel and toe
        missing) past an end of the frames analysed that a marker gap sets, not a
        recording (the missing markers and the times and frames of their gaps: fill
        them first); a NaN or infinite force on a plate of this foot within
        the frames analysed, or a NaN centre of pressure where this foot's plate
        carries more than twice ``min_force`` vertically (the plate and the time;
        below that a missing centre of pressure is the reader's "unloaded", e.g.
        :func:`jaxmb.io.read_c3d` below 20 N, and carries no weight).
    """
    from .io import C3DTrial

    if isinstance(markers, C3DTrial):
        plates = markers.forces if plates is None else plates
        markers = markers.markers
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    S = side[0].upper()
    spec = dict(DEFAULT_MAPPING)
    if mapping is not None:
        unknown = set(mapping) - set(spec)
        if unknown:
            raise ValueError(f"mapping has unknown keys {sorted(unknown)}; known: {sorted(spec)}")
        for key, entry in mapping.items():
            _check_mapping_entry(key, entry)
        spec.update(mapping)
    if plates is not None and plates.force.shape[1] == 0:
        plates = None  # a file without any plate
    if plates is not None and plates.force.shape[0] == 0:
        raise ValueError(f"sagittal: the force plates{_src(plates)} hold no samples")

    # vertical: the mean ground reaction force where plates are loaded
    loaded = None
    if plates is not None:
        fz_any = np.linalg.norm(plates.force, axis=-1)
        # (Tf, plates); False where the force is NaN or infinite (an inf summed into
        # the vertical gave "cannot find the vertical"; such a force under the foot
        # is named below)
        loaded = np.isfinite(fz_any) & (fz_any > min_force)
        total = np.where(loaded[..., None], plates.force, 0.0).sum(axis=(0, 1))
        up = _unit(total, "vertical (no loaded force plate)") if loaded.any() else np.array([0.0, 0.0, 1.0])
    else:
        up = np.array([0.0, 0.0, 1.0])

    centres = {k: _joint_centre(markers, spec[k], S, up) for k in ("hip", "knee", "ankle", "toe", "heel")}
    ok = np.all([np.isfinite(c).all(-1) for c in centres.values()], axis=0)
    runs = true_runs(ok)
    if not runs:
        raise ValueError(f"sagittal: no frame in which every marker of the mapping is present{_src(markers)}")
    a, b = max(runs, key=lambda r: r[1] - r[0])
    if b - a < 8:
        raise ValueError(f"sagittal: the longest run of complete frames{_src(markers)} has {b - a} frames, too few")
    c = {k: v[a:b] for k, v in centres.items()}
    move = c["hip"][-1] - c["hip"][0]
    forward = _unit(move - np.dot(move, up) * up, "direction of progression (the pelvis does not move)")
    lateral = np.cross(forward, up)
    axes = np.stack([forward, up, lateral])
    proj = {k: np.stack([v @ forward, v @ up], -1) for k, v in c.items()}
    rate = float(markers.rate)
    time = markers.time[a:b]
    T = b - a

    if plates is None:
        z = np.zeros((T, 2))
        return SagittalTrial(proj["hip"], proj["knee"], proj["ankle"], proj["toe"], z, z.copy(), rate, rate,
                             time, None, (), axes, side, None)  # fmt: skip

    frate = float(plates.rate)
    ft = plates.time
    Tf, P = plates.force.shape[:2]
    # the frames analysed: those of the complete run that the forces cover (frames
    # without force data are unmeasured, not "no contact"); their ends that a
    # recording sets (the markers' first or last frame, the forces' first or last
    # sample), past which a contact is cut off (a partial stance), unlike an end
    # that a marker gap sets (a contact past it is an error: fill the gaps)
    a2, b2 = _covered(time, ft, frate, markers, plates)
    edge_start, edge_end = a == 0 or a2 > 0, b == len(markers.time) or b2 < T
    if (a2, b2) != (0, T):
        import warnings

        warnings.warn(f"sagittal: the force plates{_src(plates)} cover {ft[0]:.3f}-{ft[-1]:.3f} s, the markers' "
                      f"complete frames{_src(markers)} {time[0]:.3f}-{time[-1]:.3f} s: the frames analysed are the "
                      f"{b2 - a2} that both cover, {time[a2]:.3f}-{time[b2 - 1]:.3f} s (frames {a + a2 + 1}-{a + b2} "
                      "of the markers' file)", stacklevel=2)  # fmt: skip
        proj = {k: v[a2:b2] for k, v in proj.items()}
        time, T = time[a2:b2], b2 - a2
    # the force over the frames analysed, time[0] to time[0] + (T - 1) / rate: the
    # grid time[0] + j / frate, its last sample at or past the end (held there)
    n = int(np.ceil((T - 1) * frate / rate - 1e-6)) + 1
    grid = time[0] + np.arange(n) / frate
    i0 = int(np.round((time[0] - ft[0]) * frate))
    aligned = 0 <= i0 and i0 + n <= Tf and abs((ft[i0] - time[0]) * frate) < 1e-6

    # --- contacts: runs of loaded samples of each plate, and the feet standing on them
    vert = plates.force @ up  # (Tf, plates), NaN where the force is
    mt = markers.time
    inside = (ft >= mt[0] - 0.5 / rate) & (ft <= mt[-1] + 0.5 / rate)  # within the marker recording
    fidx = np.clip(np.round((ft - mt[0]) * rate), 0, len(mt) - 1).astype(int)  # the nearest frame

    def foot(heel, toe):
        return heel, toe, np.minimum(_speed(heel, rate), _speed(toe, rate))

    own = foot(centres["heel"], centres["toe"])
    other, O = None, "L" if S == "R" else "R"
    if all("{S}" in lab for k in ("heel", "toe") for lab in _spec_labels(spec[k], "{S}")):  # else no other foot
        try:
            other = foot(_joint_centre(markers, spec["heel"], O, up), _joint_centre(markers, spec["toe"], O, up))
        except ValueError:  # the file has no markers for the other foot
            other = None
    other_side = "left" if side == "right" else "right"

    mine, unsure = [], []
    for k in range(P):
        for r0, r1 in true_runs(loaded[:, k]):
            idx = np.arange(r0, r1)
            if not inside[idx].any():
                continue  # a contact outside the marker recording
            v = vert[idx, k]
            big = v > _SUBSTANTIAL * v.max()
            if not big.any():  # no vertical load (a plate pulled sideways, say)
                continue
            fr = fidx[idx]
            cop = plates.cop[idx, k]
            # a contact that the marker recording cuts off: judged on the samples it holds
            seen = big & inside[idx] if (big & inside[idx]).any() else inside[idx]

            def stands(f):
                heel, toe, spd = f
                d = np.where(inside[idx], _line_distance(cop, heel[fr], toe[fr], up), np.nan)
                on = seen & (d < _FOOT_TOLERANCE) & (spd[fr] < _FOOT_STILL)
                return d, on, on.sum() >= max(1.0, _INVOLVED * seen.sum())

            d_own, _, on_own = stands(own)
            on_other, j_other = False, None
            if other is not None:
                _, o, on_other = stands(other)
                j_other = int(np.argmax(o))
            t0, t1 = ft[r0], ft[r1 - 1]
            both = f"sagittal: plate {k + 1}{_src(plates)} is loaded by both feet between {t0:.3f} and {t1:.3f} s"
            split = "; jaxmb cannot split one plate's force between two feet"
            if on_own:
                if on_other:
                    t_other = ft[r0 + j_other]
                    raise ValueError(f"{both} (the {other_side} foot stands on it too, at {t_other:.3f} s){split}")
                far = big & (d_own > _FOOT_EXCURSION)
                if far.any():
                    j = int(np.argmax(far))
                    raise ValueError(f"{both} (its centre of pressure lies {d_own[j]:.2f} m from the {side} foot's "
                                     f"heel-to-toe line at {ft[r0 + j]:.3f} s){split}")  # fmt: skip
                mine.append((k, r0, r1))
            elif not on_other:
                known = np.isfinite(d_own[seen]) & np.isfinite(own[2][fr][seen])
                if known.mean() < 0.5:  # this foot's heel and toe are missing: whose contact is it?
                    unsure.append((k, r0, r1))

    # --- this foot's contacts must lie within the frames analysed, or go on past an
    # end that a recording sets (a partial stance)
    labels = [lab for key in ("hip", "knee", "ankle", "toe", "heel") for lab in _spec_labels(spec[key], S)]
    for k, r0, r1 in mine + unsure:
        t0, t1 = ft[r0], ft[r1 - 1]
        if (t0 >= time[0] - 0.5 / rate or edge_start) and (t1 <= time[-1] + 0.5 / rate or edge_end):
            continue
        why = [_gap_text(markers, labels, min(fidx[r0], a), max(fidx[r1 - 1], b - 1))]
        if t0 < mt[0] - 0.5 / rate:
            why.append(f"the markers{_src(markers)} start at {mt[0]:.3f} s")
        if t1 > mt[-1] + 0.5 / rate:
            why.append(f"the markers{_src(markers)} end at {mt[-1]:.3f} s")
        if (k, r0, r1) in unsure:
            head = (f"sagittal: plate {k + 1}{_src(plates)} is loaded between {t0:.3f} and {t1:.3f} s but the "
                    f"{side} foot's heel and toe markers are missing there (whose foot is it?)")  # fmt: skip
        else:
            head = (f"sagittal: the {side} foot stands on plate {k + 1}{_src(plates)} between {t0:.3f} and "
                    f"{t1:.3f} s, outside the frames in which every marker of the mapping is present "
                    f"({mt[a]:.3f}-{mt[b - 1]:.3f} s, the longest such run)")  # fmt: skip
        raise ValueError(f"{head}: {'; '.join(w for w in why if w)}; fill the gaps before the analysis (jaxmb has "
                         "no gap filling: the motion-capture software has)")  # fmt: skip

    # --- the force and centre of pressure of this foot's plates must be finite
    lo = max(0, int(np.floor((grid[0] - ft[0]) * frate)) - 1)
    hi = min(Tf, int(np.ceil((grid[-1] - ft[0]) * frate)) + 2)
    for k in sorted({k for k, _, _ in mine}):
        bad = ~np.isfinite(plates.force[lo:hi, k]).all(-1)
        if bad.any():
            j = lo + int(np.argmax(bad))
            raise ValueError(f"sagittal: plate {k + 1}{_src(plates)}, under the {side} foot, has a NaN or infinite "
                             f"force at {ft[j]:.3f} s ({int(bad.sum())} samples within the frames analysed, "
                             f"{time[0]:.3f}-{time[-1]:.3f} s): fill gaps before the analysis")  # fmt: skip
    cop_ok = np.isfinite(plates.cop).all(-1)  # (Tf, plates)
    for k, r0, r1 in mine:
        # readers leave the centre of pressure out (NaN) below a threshold of their own
        # (read_c3d: 20 N vertically): NaN above twice min_force is a gap in the data
        bad = ~cop_ok[r0:r1, k] & (vert[r0:r1, k] > 2 * min_force)
        if bad.any():
            j = r0 + int(np.argmax(bad))
            raise ValueError(f"sagittal: plate {k + 1}{_src(plates)}, under the {side} foot, has a NaN or infinite "
                             f"centre of pressure at {ft[j]:.3f} s, where it carries {vert[j, k]:.0f} N: fill gaps "
                             "before the analysis")  # fmt: skip

    # --- this foot's force: the sum over its contacts, the centre of pressure weighted
    # by the vertical force (samples without a centre of pressure, below min_force
    # vertically, carry no weight)
    use = np.zeros((Tf, P), bool)
    for k, r0, r1 in mine:
        use[r0:r1, k] = loaded[r0:r1, k]
    if aligned:  # the plates' own samples
        sl = slice(i0, i0 + n)
        force3, fcop, wsum = _foot_force(plates.force[sl], plates.cop[sl], use[sl], cop_ok[sl], up)
        has = wsum > 0
        cop3 = _held(fcop, wsum, has)
    else:  # linear interpolation onto the grid
        force3, fcop, wsum = _foot_force(plates.force, plates.cop, use, cop_ok, up)
        cop_raw = _held(fcop, wsum, wsum > 0)
        force3 = np.stack([np.interp(grid, ft, force3[:, i]) for i in range(3)], -1)
        cop3 = np.stack([np.interp(grid, ft, cop_raw[:, i]) for i in range(3)], -1)
        has = np.interp(grid, ft, (wsum > 0).astype(float)) > 0
    force = np.stack([force3 @ forward, force3 @ up], -1)
    cop = np.stack([cop3 @ forward, cop3 @ up], -1)
    # stances: runs of this foot's force on the grid (contacts on two plates at once
    # are one stance; runs less than _STANCE_GAP apart, a force flickering about
    # min_force at a contact's edge, too), in frames
    stances = []
    for g0, g1 in true_runs(has):
        if stances and (g0 - stances[-1][1]) / frate < _STANCE_GAP:
            stances[-1][1] = g1
        else:
            stances.append([g0, g1])
    stances = tuple((int(np.ceil(g0 * rate / frate - 1e-9)), min(int(np.floor((g1 - 1) * rate / frate + 1e-9)) + 1, T))
                    for g0, g1 in stances)  # fmt: skip
    stance = stances[0] if stances else None
    partial = _partial(stances, mine, ft, time, rate, Tf)
    # body weight: mean total vertical force over the middle 70 % of each contact
    # that the force recording holds whole (loaded at its first or last sample, the
    # middle of what it holds is not the middle of the contact)
    vert_all = np.where(loaded, vert, 0.0).sum(-1)
    mids = []
    for k in range(P):
        for r0, r1 in true_runs(loaded[:, k]):
            m_ = r1 - r0
            if m_ * rate / frate >= 10 and r0 > 0 and r1 < Tf:  # a whole contact of at least 10 frames
                mids.append(vert_all[r0 + int(0.15 * m_) : r1 - int(0.15 * m_)])
    weight = float(np.mean(np.concatenate(mids))) if mids else None
    contacts = tuple((k, float(ft[r0]), float(ft[r1 - 1])) for k, r0, r1 in sorted(mine))
    return SagittalTrial(proj["hip"], proj["knee"], proj["ankle"], proj["toe"], force, cop, rate, frate, time,
                         stance, tuple(sorted({k for k, _, _ in mine})), axes, side, weight, contacts,
                         stances, partial)  # fmt: skip


def _partial(stances, mine, ft, time, rate, Tf) -> tuple:
    """Per stance ((start, stop) frames of the (T,) frame times ``time``, s): "start"
    where one of this foot's contacts ``mine`` ((plate, first, stop) force samples at
    times ``ft``, s; ``Tf`` samples) is cut off by the start of the frames analysed
    (it begins more than half a frame, 1 / (2 ``rate``), before the first frame, or is
    loaded at the forces' first sample) and the stance starts at the first frame;
    "end" likewise at the end; "both"; "" for a stance held whole."""
    h = 0.5 / rate
    cut0 = any((ft[r0] < time[0] - h or r0 == 0) and ft[r1 - 1] >= time[0] - h for _, r0, r1 in mine)
    cut1 = any((ft[r1 - 1] > time[-1] + h or r1 == Tf) and ft[r0] <= time[-1] + h for _, r0, r1 in mine)
    out = []
    for s0, s1 in stances:
        start, end = cut0 and s0 == 0, cut1 and s1 == len(time)
        out.append("both" if start and end else "start" if start else "end" if end else "")
    return tuple(out)


# -------------------------------------------------------------- comparisons


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


#: What a positive moment is at the hip, knee and ankle in each convention (the figures'
#: axis labels): jaxmb's moments are counter-clockwise positive for a subject facing +x
#: seen from the right, so a flexor moment at the hip, an extensor one at the knee and a
#: dorsiflexor one at the ankle (a plantarflexor moment is negative).
_MOMENT_POSITIVE = {"jaxmb": ("flexor", "extensor", "dorsiflexor"),
                    "clinical": ("extensor", "extensor", "plantarflexor")}  # fmt: skip
#: The sign convention of the moments, as the figures state it.
_CONVENTION_TEXT = {
    "jaxmb": "jaxmb convention: moments counter-clockwise positive, seen from the subject's right (x forward, y up):\n"
             "hip flexor, knee extensor, ankle dorsiflexor moments positive; plantarflexor moment negative",
    "clinical": "clinical convention: hip and knee extensor, ankle plantarflexor moments positive",
}


def _stance_runs(where) -> list:
    """The (start, stop) runs of True in a (T,) bool mask (stop exclusive): the
    stances of a figure, each drawn against its own % of stance."""
    w = np.concatenate([[False], np.asarray(where, bool), [False]])
    edges = np.flatnonzero(np.diff(w.astype(np.int8)))
    return list(zip(edges[::2], edges[1::2]))


def _percent(n: int) -> np.ndarray:
    """(n,) % of a stance of n samples: 0 at its first, 100 at its last."""
    return 100.0 * np.arange(n) / max(n - 1, 1)


def _moment_scale(eff, values, j) -> float:
    """N m: the size of the moments at joint ``j`` in :func:`term_effects`' ``eff``:
    the largest of the RMS changes ``values``, the full moment's RMS over stance and
    each term's (0 without any)."""
    w = eff["where"]
    full = _rms(eff["full"]["moments"][w, j]) if np.any(w) else np.nan
    terms = [eff["terms"][k]["moment_rms"][j] for k in TERMS] if "terms" in eff else []
    return float(np.nanmax(np.r_[np.abs(values), full, terms, 0.0]))


def _roundoff(result, scale) -> float:
    """N m: an RMS change below this is round-off (100 ulps of the moments' scale,
    in the result's precision), drawn as zero."""
    dt = np.asarray(result.moments).dtype
    eps = np.finfo(dt if np.issubdtype(dt, np.floating) else np.float64).eps
    return 100.0 * eps * scale


def term_effects_figure(result: GaitResult, true_moments=None, effects: dict | None = None):
    """Figure of the notebook's comparison: full and quasi-static estimates (and the
    truth) over the stance phase, and the RMS change when each term is dropped.

    Top row: the moments (N m, in the result's convention, stated in the title and the
    axis labels) against % of stance (each run of ``effects["where"]`` one stance,
    0 % at its first sample, 100 % at its last: the same axis as the command line's
    stance figure). Bottom row: the RMS change of each joint's moment over stance (N m,
    a linear axis, each bar labelled with its value); a change below round-off (100
    ulps of the largest term or moment at that joint, in the result's precision, e.g.
    the foot's weight at the ankle when its centre of mass is at the ankle) is drawn
    as no bar and labelled "0 (below round-off)".

    matplotlib's object API (no backend is selected): ``fig.savefig(path)``.
    """
    from matplotlib.figure import Figure

    eff = term_effects(result, true_moments) if effects is None else effects
    runs = _stance_runs(eff["where"])
    fig = Figure(figsize=(11, 6.5), layout="constrained")
    axs = fig.subplots(2, 3)
    sign = _MOMENT_SIGN if result.convention == "clinical" else np.ones(3)
    positive = _MOMENT_POSITIVE[result.convention]
    curves = [(eff["full"]["moments"], "C0", "-", "inverse dynamics"),
              (eff["quasi_static"]["moments"], "C1", "-", "quasi-static (no inertia)")]  # fmt: skip
    if true_moments is not None:
        curves.append((np.asarray(true_moments) * sign, "k", "--", "true"))
    for j, joint in enumerate(JOINTS):
        ax = axs[0, j]
        for m_, color, ls, label in curves:
            for i, (a, b) in enumerate(runs):
                ax.plot(_percent(b - a), m_[a:b, j], color=color, ls=ls, lw=1 if ls == "--" else 1.5,
                        label=label if i == 0 else None)  # fmt: skip
        ax.axhline(0, color="0.6", lw=0.5)
        ax.set_title(f"{joint} moment")
        ax.set_xlabel("stance (%)")
        ax.set_ylabel(f"N m (+ {positive[j]})")
    if runs:
        axs[0, 0].legend(frameon=False, fontsize=8, title="one line per stance" if len(runs) > 1 else None,
                         title_fontsize=8)  # fmt: skip
    names = ["quasi_static"] + [f"without_{k}" for k in TERMS]
    labels = ["quasi-static", "no gravity", "no GRF", "no m a", "no I alpha"]
    x = np.arange(len(names))
    for j, joint in enumerate(JOINTS):
        ax = axs[1, j]
        values = np.array([eff[n]["moment_change_rms"][j] for n in names], float)
        _change_bars(ax, x, values, _roundoff(result, _moment_scale(eff, values, j)))
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{joint}: RMS change of the moment")
        ax.set_ylabel("N m (RMS over stance)")
    fig.suptitle(f"Effect of each term of the inverse dynamics over stance, when it is dropped\n"
                 f"{_CONVENTION_TEXT[result.convention]}", fontsize="medium")  # fmt: skip
    return fig


def _change_bars(ax, x, values, zero):
    """Bars of the RMS changes ``values`` (N m) at ``x``, each labelled with its value;
    a value below ``zero`` (round-off) is no bar and the label "0 (below round-off)",
    a NaN (no stance sample) no bar and "no data"."""
    small = np.isfinite(values) & (np.abs(values) < zero)
    drawn = np.isfinite(values) & ~small
    top = float(values[drawn].max()) if drawn.any() else 1.0
    bars = ax.bar(x[drawn], values[drawn], color="C1")
    ax.bar_label(bars, labels=[f"{v:.3g}" for v in values[drawn]], fontsize=7, padding=2)
    for xi, v in zip(x, values):
        if not np.isfinite(v) or abs(v) < zero:
            ax.text(xi, 0.02 * top, "0 (below round-off)" if np.isfinite(v) else "no data",
                    rotation=90, ha="center", va="bottom", fontsize=7, color="0.35")  # fmt: skip
    ax.set_ylim(0, 1.15 * top)
    ax.set_xlim(x[0] - 0.6, x[-1] + 0.6)


def moments_figure(result: GaitResult, true_moments=None, true_force_magnitudes=None, *, title=None):
    """Figure: moments and reaction-force magnitudes at hip, knee, ankle (one trial),
    against the truth when given (jaxmb convention truth; converted if needed).

    Against the time of the trial, s (the whole trial, swing included). The moments,
    N m, in the result's convention, stated under the title and on each axis (what a
    positive moment is at that joint); the reaction forces, N, are magnitudes (no sign).

    matplotlib's object API (no backend is selected): ``fig.savefig(path)``.
    """
    from matplotlib.figure import Figure

    if result.need("moments").ndim != 2:
        raise ValueError("moments_figure takes the result of one trial")
    fig = Figure(figsize=(10, 7), layout="constrained")
    axs = fig.subplots(3, 2, sharex=True)
    sign = _MOMENT_SIGN if result.convention == "clinical" else np.ones(3)
    positive = _MOMENT_POSITIVE[result.convention]
    mag = result.reaction_magnitudes
    for j, joint in enumerate(JOINTS):
        axs[j, 0].plot(result.time, mag[:, j], label="jaxmb")
        axs[j, 1].plot(result.time, result.moments[:, j], label="jaxmb")
        axs[j, 1].axhline(0, color="0.6", lw=0.5)
        if true_force_magnitudes is not None:
            axs[j, 0].plot(result.time, true_force_magnitudes[:, j], "r--", lw=1, label="true")
        if true_moments is not None:
            tm = np.where(np.any(true_moments != 0, axis=1, keepdims=True), true_moments, np.nan) * sign
            axs[j, 1].plot(result.time, tm[:, j], "r--", lw=1, label="true")
        axs[j, 0].set_ylabel(f"{joint} reaction (N)\nmagnitude")
        axs[j, 1].set_ylabel(f"{joint} moment (N m)\n+ {positive[j]}")
    axs[0, 0].legend(frameon=False)
    axs[-1, 0].set_xlabel("time (s)")
    axs[-1, 1].set_xlabel("time (s)")
    fig.suptitle(f"{title or 'Joint reaction magnitudes and moments'}\n{_CONVENTION_TEXT[result.convention]}",
                 fontsize="medium")  # fmt: skip
    return fig


# --- aliases for the command line (lead: drop at merge, the gait package provides them)
CONVENTION_TEXT, MOMENT_POSITIVE, check_mapping_entry = _CONVENTION_TEXT, _MOMENT_POSITIVE, _check_mapping_entry
