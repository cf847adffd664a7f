"""A planar whole-body model and its movement from a lab trial (C3D).

Both legs come from :func:`jaxmb.gait.sagittal` (its joint centres, Harrington's
hip, its per-foot plate forces and its sagittal axes); the trunk and arms from
the shoulder, elbow and wrist markers projected on the same axes.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np

from .. import gait
from ..anthropometry import segment_parameters
from ..dynamics import point_load
from ..io import read_c3d
from ..model import Model, tree
from ..signal import derivative, lowpass
from ._residuals import residuals

__all__ = ["WholeBodyTrial", "whole_body_trial", "ARM_MARKERS"]

#: Markers of the upper body ({S} stands for R or L): shoulder, elbow, wrist.
ARM_MARKERS = {"shoulder": "{S}SHO", "elbow": "{S}ELB", "wrist": "{S}WRI"}

#: (name, parent, table row, proximal point, distal point) of the full model.
_FULL = (
    ("trunk", -1, "trunk_head_neck", "hip", "shoulder"),
    ("thigh_r", 0, "thigh", "hip_r", "knee_r"), ("shank_r", 1, "leg", "knee_r", "ankle_r"),
    ("foot_r", 2, "foot", "ankle_r", "toe_r"),
    ("thigh_l", 0, "thigh", "hip_l", "knee_l"), ("shank_l", 4, "leg", "knee_l", "ankle_l"),
    ("foot_l", 5, "foot", "ankle_l", "toe_l"),
    ("uarm_r", 0, "upper_arm", "shoulder_r", "elbow_r"), ("farm_r", 7, "forearm_hand", "elbow_r", "wrist_r"),
    ("uarm_l", 0, "upper_arm", "shoulder_l", "elbow_l"), ("farm_l", 9, "forearm_hand", "elbow_l", "wrist_l"),
)
_LOWER = (("hat", -1, "hat", "hip", "shoulder"),) + _FULL[1:7]
_CONTACT_SPEED = 1.5  # m/s: a foot whose heel or toe moves slower stands on the floor (gait.sagittal's "still")


@dataclasses.dataclass(frozen=True)
class WholeBodyTrial:
    """A lab trial as a floating-base planar model and its movement.

    Attributes:
      model: floating base, absolute coordinates; root "trunk" (trunk, head and
        neck, with the arms as their own segments) or "hat" (head, arms and
        trunk, lower-body markers only); legs attached at the mid-hip point,
        arms at the trunk's distal end (the mid-shoulder point).
      q, qd, qdd: (T, dof) the movement (markers filtered at ``cutoff``).
      loads: (T, segments, 3) both feet's plate forces, filtered at ``cutoff``.
      loads_raw: (T, segments, 3) the same unfiltered (sampled at the frames).
      force: (T, 2, 2) per foot (right, left) force (Fx, Fy), N, filtered.
      force_raw: (T, 2, 2) unfiltered.
      measured: (T,) True where every foot on the floor stands on a plate.
      time: (T,) s.
      body_mass: kg (given, or from the plates' vertical impulse over the
        measured frames, :func:`_impulse_mass`).
      body_mass_single_support: kg, the gait pipeline's estimate (the mean
        vertical force of single support / g; None without a whole single
        support), for comparison.
      height: m (given, or the mid-shoulder height / 0.818, Winter's proportion).
      noise: (3,) N, N, N m: RMS of the force's (and of its moment about the
        mid-hip point's) content above ``cutoff`` over the measured frames, floored
        at 1 % of body weight (and 1 % of body weight x 0.1 m).
      cutoff: Hz.
    """

    model: Model
    q: jnp.ndarray
    qd: jnp.ndarray
    qdd: jnp.ndarray
    loads: jnp.ndarray
    loads_raw: jnp.ndarray
    force: np.ndarray
    force_raw: np.ndarray
    measured: np.ndarray
    time: np.ndarray
    body_mass: float
    body_mass_single_support: float | None
    height: float
    noise: np.ndarray
    cutoff: float


def _project(markers, label, axes, frames, hint="give arms=False for one head-arms-trunk root"):
    """(T, 2) sagittal (forward, up) position of one marker at the given frames."""
    if label not in markers.labels:
        raise ValueError(f"marker {label} missing for the upper body (the file has {', '.join(markers.labels)}); {hint}")
    p = np.asarray(markers.xyz)[frames, markers.labels.index(label)]
    return np.stack([p @ axes[0], p @ axes[1]], -1)


def _points(markers, legs, arms):
    """Joint centres (T, 2) by name, from both legs' projections and the arm markers."""
    pts = {}
    for side, leg in zip("rl", legs):
        for j in ("hip", "knee", "ankle", "toe"):
            pts[f"{j}_{side}"] = np.asarray(getattr(leg, j))
    pts["hip"] = 0.5 * (pts["hip_r"] + pts["hip_l"])
    frames = np.rint((legs[0].time - markers.time[0]) * markers.rate).astype(int)
    if arms:
        for side in "rl":
            for j, lab in ARM_MARKERS.items():
                pts[f"{j}_{side}"] = _project(markers, lab.format(S=side.upper()), legs[0].axes, frames)
        pts["shoulder"] = 0.5 * (pts["shoulder_r"] + pts["shoulder_l"])
        for side in "rl":  # the model's arms hang from the mid-shoulder point
            pts[f"shoulder_{side}"] = pts["shoulder"]
    else:
        hint = "the head-arms-trunk root ends at the mid-shoulder point: label the shoulder markers RSHO and LSHO"
        shoulders = [_project(markers, f"{s}SHO", legs[0].axes, frames, hint) for s in "RL"]
        pts["shoulder"] = 0.5 * (shoulders[0] + shoulders[1])
    pts["hip_r"] = pts["hip_l"] = pts["hip"]  # both legs hang from the mid-hip point
    return pts, frames


def _has_arms(markers) -> bool:
    """Whether the file has every arm marker of both sides."""
    return all(lab.format(S=s) in markers.labels for s in "RL" for lab in ARM_MARKERS.values())


def _kinematics(pts, spec, rate, cutoff):
    """Filtered joint centres to absolute-angle coordinates q, qd, qdd and lengths."""
    bad = [k for k, v in pts.items() if not np.all(np.isfinite(v))]
    if bad:
        raise ValueError(f"markers missing for segment points {', '.join(sorted(bad))}: fill the gaps "
                         "or choose frames where they exist")
    f = {k: lowpass(v, rate, cutoff) for k, v in pts.items()}
    angles, lengths = [], []
    for _, _, _, a, b in spec:
        d = f[b] - f[a]
        angles.append(np.unwrap(np.arctan2(d[:, 1], d[:, 0])))
        lengths.append(float(np.mean(np.hypot(d[:, 0], d[:, 1]))))
    q = np.concatenate([f["hip"], np.stack(angles, -1)], -1)
    return q, derivative(q, rate, 1), derivative(q, rate, 2), np.array(lengths)


def _build_model(spec, lengths, body_mass, gravity):
    """The floating-base model with Dempster's parameters at the measured lengths."""
    rows = [segment_parameters(row, body_mass=body_mass, length=L) for (_, _, row, _, _), L in zip(spec, lengths)]
    attach = [None if parent != 0 or name.startswith("uarm") else 0.0 for name, parent, *_ in spec]
    return tree([s[1] for s in spec], lengths, [r.com for r in rows], [r.mass for r in rows],
                [r.inertia for r in rows], attach=attach, gravity=gravity, base="floating",
                coordinates="absolute", names=[s[0] for s in spec])


def _foot_wrench(leg, rate_ratio, cutoff, n_frames):
    """Per-frame force (T, 2) and moment about the lab origin (T,), filtered and raw."""
    F = np.asarray(leg.force)
    cop = np.nan_to_num(np.asarray(leg.cop))
    M = cop[:, 0] * F[:, 1] - cop[:, 1] * F[:, 0]
    raw = np.concatenate([F, M[:, None]], -1)
    filt = lowpass(raw, leg.force_rate, cutoff)
    idx = np.minimum(np.rint(np.arange(n_frames) * rate_ratio).astype(int), len(F) - 1)
    return filt[idx], raw[idx]


def _on_floor(markers, leg, side, frames):
    """(T,) True where the foot's heel or toe moves forward slower than 1.5 m/s."""
    speeds = []
    for lab in (f"{side}HEE", f"{side}TOE"):
        if lab in markers.labels:
            x = _project(markers, lab, leg.axes, frames)[:, 0]
            speeds.append(np.abs(np.gradient(x, 1.0 / markers.rate)))
    return np.min(speeds, 0) < _CONTACT_SPEED


def _loads(model, q, wrenches):
    """(T, segments, 3) of both feet's wrenches (force at the lab origin plus moment)."""
    out = 0.0
    for foot, w in zip(("foot_r", "foot_l"), wrenches):
        out = out + point_load(model, q, foot, jnp.zeros(2), w[:, :2], w[:, 2])
    return out


def _noise(filt, raw, measured, q, body_mass, gravity):
    """Noise of FX, FY, M about the mid-hip: the content above the cut-off, floored."""
    hf = (raw - filt).sum(0)  # both feet, (T, 3)
    arm = -q[:, :2]  # moment about the mid-hip of a force at the origin: (0 - P) x F
    hf_m = hf[:, 2] + arm[:, 0] * hf[:, 1] - arm[:, 1] * hf[:, 0]
    rms = np.sqrt(np.mean(np.stack([hf[:, 0], hf[:, 1], hf_m], -1)[measured] ** 2, 0))
    weight = body_mass * gravity
    return np.maximum(rms, [0.01 * weight, 0.01 * weight, 0.001 * weight])


def _markers_and_plates(trial):
    """(markers, plates) of a C3D path, a C3DTrial or a (markers, plates) pair."""
    if isinstance(trial, tuple) and len(trial) == 2:
        return trial
    c3d = read_c3d(trial, warn_gaps=False) if isinstance(trial, (str, bytes)) or hasattr(trial, "__fspath__") else trial
    if not hasattr(c3d, "markers") or not hasattr(c3d, "forces"):
        raise ValueError(f"trial must be a C3D path, a jaxmb.io.C3DTrial or a (markers, plates) pair, got "
                         f"{type(trial).__name__}")  # fmt: skip
    return c3d.markers, c3d.forces


def whole_body_trial(trial, *, cutoff: float = 6.0, body_mass: float | None = None, height: float | None = None,
                     arms: bool | None = None, gravity: float = 9.81, mapping=None, min_force: float = 20.0):
    """A floating-base whole-body model and its movement from a lab trial (C3D, or TRC and forces).

    Stages: both legs' sagittal projections (:func:`jaxmb.gait.sagittal`), the
    upper-body points on the same axes, filtered coordinates and derivatives,
    Dempster's parameters at the measured lengths (the body mass from the plates),
    both feet's forces at the frames, and the measured frames.

    Args:
      trial: a path to a ``.c3d`` file, a :class:`jaxmb.io.C3DTrial`, or a pair
        ``(markers, plates)`` (e.g. :func:`jaxmb.io.read_trc` and
        :func:`jaxmb.io.read_forces` of a TRC and a ``.forces`` file).
      cutoff: low-pass cut-off of markers and forces, Hz (one for both).
      body_mass: kg; default from the plates' vertical impulse over the measured
        frames (Newton's law summed over them, :func:`_impulse_mass`).
      height: m; default the mid-shoulder height / 0.818.
      arms: model the arms (default: when the file has shoulder, elbow and wrist
        markers on both sides); False gives one rigid head-arms-trunk root.
      gravity: m/s^2.
      mapping: joint-centre markers, as :func:`jaxmb.gait.sagittal` takes them.
      min_force: N, a plate counts as loaded above it.

    Returns:
      :class:`WholeBodyTrial`.

    Raises:
      ValueError: a foot never on a plate, no measured frame, markers missing
        for a segment or with gaps (naming them), no body mass from the plates and no
        ``body_mass``.

    Example:
      >>> wb = whole_body_trial("Gait.c3d")                     # doctest: +SKIP
      >>> r = residuals(wb.model, wb.q, wb.qd, wb.qdd, wb.loads) # doctest: +SKIP
    """
    markers, plates = _markers_and_plates(trial)
    legs = [gait.sagittal(markers, plates, side=s, mapping=mapping, min_force=min_force) for s in ("right", "left")]
    for leg in legs:
        if leg.stance is None:
            raise ValueError(f"the {leg.side} foot never stands on a force plate (over {min_force} N): residuals need "
                             "both feet's forces; choose a trial in which each foot strikes a plate, or check the "
                             "file's plate channels (c3d.forces)")
    arms = _has_arms(markers) if arms is None else arms
    spec = _FULL if arms else _LOWER
    pts, frames = _points(markers, legs, arms)
    rate = float(legs[0].rate)
    q, qd, qdd, lengths = _kinematics(pts, spec, rate, cutoff)
    height = float(np.mean(lowpass(pts["shoulder"], rate, cutoff)[:, 1]) / 0.818) if height is None else height
    T = len(frames)
    wrench = [_foot_wrench(leg, leg.force_rate / rate, cutoff, T) for leg in legs]
    filt = np.stack([w[0] for w in wrench]); raw = np.stack([w[1] for w in wrench])
    on_plate = np.abs(filt[:, :, 1]) > min_force  # (2, T) per foot, filtered vertical force
    floor = np.stack([_on_floor(markers, leg, s, frames) for leg, s in zip(legs, "RL")])
    measured = np.all(on_plate | ~floor, 0) & np.any(on_plate, 0)
    if not measured.any():
        raise ValueError("no measured frame: in every frame a foot stands on the floor outside the plates (or no "
                         f"plate carries {min_force} N); choose a trial with a stance on a plate while the other foot "
                         "swings or stands on another plate, or lower min_force")
    qj = jnp.asarray(q)
    single = None if legs[0].body_weight is None else float(legs[0].body_weight) / gravity
    if body_mass is None:
        body_mass = _impulse_mass(_build_model(spec, lengths, 1.0, gravity), qj, qd, qdd, filt, measured)
    model = _build_model(spec, lengths, body_mass, gravity)
    return WholeBodyTrial(model, qj, jnp.asarray(qd), jnp.asarray(qdd), _loads(model, qj, filt), _loads(model, qj, raw),
                          np.moveaxis(filt[:, :, :2], 0, 1), np.moveaxis(raw[:, :, :2], 0, 1), measured,
                          np.asarray(legs[0].time), body_mass, single, height,
                          _noise(filt, raw, measured, q, body_mass, gravity), cutoff)


def _impulse_mass(unit, qj, qd, qdd, filt, measured) -> float:
    """Body mass from the vertical impulse over the measured frames, kg.

    Newton's law of the whole body, vertically, summed over the measured frames:
    ``sum_t Fy_t = m sum_t (a_y,t + g)``, with ``a_y`` the centre of mass's
    vertical acceleration of the tables' mass fractions (``unit``: the model at
    1 kg, whose root force without loads is ``a + g`` per kg). Unlike the mean
    force of single support / g, it holds over any window: the change of
    vertical momentum is accounted for, not assumed zero (on Gait.c3d single
    support's 600 N / g = 61.2 kg; the stride's impulse 62.9 kg, the residual
    FY's mean -16 N with the former, 0 with the latter).
    """
    per_kg = np.asarray(residuals(unit, qj, jnp.asarray(qd), jnp.asarray(qdd), about="root"))[:, 1]
    fy = filt[:, :, 1].sum(0)
    denom = float(per_kg[measured].sum())
    if not denom > 0.0:
        raise ValueError("no body mass from the plates (the centre of mass's vertical acceleration cancels gravity over "
                         "the measured frames): give body_mass")
    return float(fy[measured].sum()) / denom
