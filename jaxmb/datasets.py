"""The bundled data: A. J. van den Bogert's simulated running trial and its leg model.

One place for what the gait pipeline (:func:`jaxmb.gait.analyze` checks against the
trial's true joint loads), identification (:func:`jaxmb.identify.running_trial`), the
tutorials, tests and benchmarks read: :func:`running_data` (the arrays, as published)
and :func:`running_leg` (the floating-base leg model of the simulation with its
coordinates and their derivatives).
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
from importlib import resources

import numpy as np

from .model import tree
from .signal import derivative

__all__ = ["RunningData", "running_data", "running_leg", "SEGMENTS"]

#: Segment names of the leg model, in index order.
SEGMENTS = ("thigh", "shank", "foot")



@dataclasses.dataclass(frozen=True)
class RunningData:
    """van den Bogert's simulated running trial (right leg), with its true joint loads.

    Attributes:
      rate: sampling rate, Hz (10000).
      time: (T,) s, T = 6001.
      hip, knee, ankle, toe: (T, 2) joint centres (x forward, y up), m.
      force: (T, 2) ground reaction force (Fx, Fy) on the foot, N.
      cop: (T,) centre-of-pressure x on the ground (y = 0), m.
      moments: (T, 3) true net moments at hip, knee, ankle, N m: the moment of the
        proximal segment on the distal one, counter-clockwise positive (jaxmb's
        :func:`jaxmb.joint_moments` convention). Zero before heel strike (given from
        ``heel_strike`` on).
      force_magnitudes: (T, 3) magnitude of the true hip, knee, ankle reaction, N.
      segments: dict of (3,) arrays for thigh, shank, foot: "mass" kg, "inertia"
        kg m^2 about the centre of mass, "com" fraction of the segment length from the
        proximal joint (as :func:`jaxmb.gait.analyze` takes them).
      gravity: 9.80665 m/s^2, the simulation's.
      heel_strike, toe_off: sample indices of the first and last non-zero vertical
        force (3000, 5194).
    """

    rate: float
    time: np.ndarray
    hip: np.ndarray
    knee: np.ndarray
    ankle: np.ndarray
    toe: np.ndarray
    force: np.ndarray
    cop: np.ndarray
    moments: np.ndarray
    force_magnitudes: np.ndarray
    segments: dict
    gravity: float
    heel_strike: int
    toe_off: int

    def inputs(self) -> dict:
        """Keyword arguments of :func:`jaxmb.gait.analyze` for this trial (no filtering)."""
        return dict(hip=self.hip, knee=self.knee, ankle=self.ankle, toe=self.toe, force=self.force,
                    cop=self.cop, rate=self.rate, segments=self.segments, gravity=self.gravity)  # fmt: skip


def _load_text(name: str) -> np.ndarray:
    with resources.files("jaxmb").joinpath("data", "running", name).open("rb") as raw:
        with gzip.open(raw, "rt") as f:
            return np.loadtxt(f, dtype=np.float64)


@functools.lru_cache(maxsize=1)
def _running_arrays():
    return tuple(_load_text(f"all.{ext}.gz") for ext in ("kin", "frc", "mom", "fmg"))


def running_data() -> RunningData:
    """The bundled running data (``jaxmb/data/running``, see its README.txt).

    A. J. van den Bogert's simulated running, published for the ISB as a test set
    for inverse dynamics, as used in the BMC gait notebook. Arrays are fresh copies.

    Returns:
      :class:`RunningData`.
    """
    kin, frc, mom, fmg = (a.copy() for a in _running_arrays())
    pts = kin.reshape(-1, 4, 2)
    T = kin.shape[0]
    rate = 10000.0
    fy = np.flatnonzero(frc[:, 1] != 0)
    return RunningData(
        rate=rate,
        time=np.arange(T) / rate,
        hip=pts[:, 0].copy(),
        knee=pts[:, 1].copy(),
        ankle=pts[:, 2].copy(),
        toe=pts[:, 3].copy(),
        force=frc[:, :2].copy(),
        cop=frc[:, 2].copy(),
        moments=mom,
        force_magnitudes=fmg,
        segments={
            "mass": np.array([6.85, 2.86, 1.00]),
            "inertia": np.array([0.145361267, 0.042996389, 0.0200]),
            "com": np.array([0.4323725, 0.4334975, 0.0]),
        },
        gravity=9.80665,
        heel_strike=int(fy[0]),
        toe_off=int(fy[-1]),
    )


def running_leg() -> dict:
    """The running trial's leg as a model with its motion.

    The leg is a floating-base chain (thigh, shank, foot; base at the hip, absolute
    segment angles) with the simulation's parameters and gravity 9.80665; the segment
    lengths are the mean joint-centre distances; angles and hip position are
    differentiated with :func:`jaxmb.signal.derivative` (central second differences,
    all 6001 frames).

    Returns:
      dict: model (the true model), q, qd, qdd (T, 5) (hip x, y m; thigh, shank, foot
      angles rad), cop (T, 2) the centre of pressure on the ground (x, 0) m, force
      (T, 2) N, data (the :class:`RunningData`).
    """
    d = running_data()
    pts = np.stack([d.hip, d.knee, d.ankle, d.toe], 1)
    seg = pts[:, 1:] - pts[:, :-1]
    lengths = np.linalg.norm(seg, axis=2).mean(0)
    theta = np.unwrap(np.arctan2(seg[..., 1], seg[..., 0]), axis=0)
    q = np.concatenate([d.hip, theta], 1)
    qd = derivative(q, d.rate, 1)
    qdd = derivative(q, d.rate, 2)
    s = d.segments
    model = tree([-1, 0, 1], lengths, s["com"] * lengths, s["mass"], s["inertia"], base="floating",
                 coordinates="absolute", gravity=d.gravity, names=list(SEGMENTS))  # fmt: skip
    cop = np.stack([d.cop, np.zeros_like(d.cop)], 1)
    return dict(model=model, q=q, qd=qd, qdd=qdd, cop=cop, force=d.force, data=d)
