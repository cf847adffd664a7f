"""The result of :func:`jaxmb.gait.analyze` and its sign conventions: the names of
the joints, terms and per-sample outputs, and :class:`GaitResult` (views per
kilogram, one trial of a batch, the other convention)."""

from __future__ import annotations

import dataclasses

import numpy as np



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
