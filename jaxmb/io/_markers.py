"""The values the readers return: :class:`Markers` (with its gaps), :class:`ForcePlates`,
:class:`Table` and :class:`C3DTrial`."""

from __future__ import annotations

import dataclasses
import math
import warnings
from typing import Optional

import numpy as np

from .._math import true_runs


_MAX_LISTED = 10  # markers named in one gap warning before "and N more"


def _label_error(kind: str, label: str, labels: tuple[str, ...]) -> KeyError:
    return KeyError(f"no {kind} {label!r}; the labels are: {', '.join(labels)}")


@dataclasses.dataclass(frozen=True, eq=False)
class Markers:
    """Marker trajectories.

    Attributes:
        rate: sampling rate (Hz).
        time: ``(T,)`` sample times (s).
        labels: marker names, ``markers`` of them, unique.
        xyz: ``(T, markers, 3)`` positions in the file's lab frame (m); NaN in gaps.
        descriptions: marker descriptions (C3D ``POINT:DESCRIPTIONS``) or None.
        source: the name of the file read (set by the readers; named in the errors of
            :func:`jaxmb.gait.sagittal`), or None.
    """

    rate: float
    time: np.ndarray
    labels: tuple
    xyz: np.ndarray
    descriptions: Optional[tuple] = None
    source: Optional[str] = None

    def __post_init__(self):
        xyz = np.asarray(self.xyz, dtype=float)
        time = np.asarray(self.time, dtype=float)
        labels = tuple(str(label) for label in self.labels)
        if xyz.ndim != 3 or xyz.shape[2] != 3:
            raise ValueError(f"Markers: xyz must have shape (T, markers, 3), got {xyz.shape}")
        if time.shape != (xyz.shape[0],):
            raise ValueError(
                f"Markers: time must have shape ({xyz.shape[0]},) to match xyz, got {time.shape}"
            )
        if len(labels) != xyz.shape[1]:
            raise ValueError(
                f"Markers: {len(labels)} labels for {xyz.shape[1]} markers in xyz"
            )
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"Markers: duplicate labels {', '.join(duplicates)}")
        if not (math.isfinite(float(self.rate)) and float(self.rate) > 0):
            raise ValueError(f"Markers{f' of {self.source}' if self.source else ''}: rate must be positive, got {self.rate}")
        if self.descriptions is not None and len(self.descriptions) != len(labels):
            raise ValueError(
                f"Markers: {len(self.descriptions)} descriptions for {len(labels)} markers"
            )
        object.__setattr__(self, "xyz", xyz)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "rate", float(self.rate))
        if self.descriptions is not None:
            object.__setattr__(self, "descriptions", tuple(str(d) for d in self.descriptions))

    def get(self, label: str) -> np.ndarray:
        """Trajectory of one marker.

        Args:
            label: marker name.

        Returns:
            ``(T, 3)`` positions (m), NaN in gaps.

        Raises:
            KeyError: no marker of that name (the message lists the labels).
        """
        try:
            return self.xyz[:, self.labels.index(label)]
        except ValueError:
            raise _label_error("marker", label, self.labels) from None

    def gaps(self) -> dict:
        """The gaps of each marker that has any.

        A frame is a gap for a marker when any of its coordinates is NaN.

        Returns:
            ``{label: ((start, stop), ...)}``: zero-based frame index ranges, ``stop``
            exclusive, in order, for every marker with at least one gap.
        """
        missing = np.isnan(self.xyz).any(axis=2)  # (T, markers)
        out = {}
        for j, label in enumerate(self.labels):
            if missing[:, j].any():
                out[label] = true_runs(missing[:, j])
        return out

    def replace(self, **changes) -> "Markers":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class ForcePlates:
    """Force-plate data in the lab frame.

    Attributes:
        rate: sampling rate (Hz).
        time: ``(T,)`` sample times (s).
        force: ``(T, plates, 3)`` force that the plate exerts on the subject (N).
        cop: ``(T, plates, 3)`` centre of pressure in the lab frame (m). NaN where the
            file has none (e.g. an unloaded plate in C3D, see :func:`read_c3d`).
        free_moment: ``(T, plates)`` free moment about the vertical at the centre of
            pressure (N m).
        corners: ``(plates, 4, 3)`` plate corners in the lab frame (m), or None when the
            file does not give them.
        source: the name of the file read (set by the readers), or None.
    """

    rate: float
    time: np.ndarray
    force: np.ndarray
    cop: np.ndarray
    free_moment: np.ndarray
    corners: Optional[np.ndarray] = None
    source: Optional[str] = None

    def __post_init__(self):
        force = np.asarray(self.force, dtype=float)
        cop = np.asarray(self.cop, dtype=float)
        free_moment = np.asarray(self.free_moment, dtype=float)
        time = np.asarray(self.time, dtype=float)
        if force.ndim != 3 or force.shape[2] != 3:
            raise ValueError(f"ForcePlates: force must have shape (T, plates, 3), got {force.shape}")
        if cop.shape != force.shape:
            raise ValueError(f"ForcePlates: cop has shape {cop.shape}, force {force.shape}")
        if free_moment.shape != force.shape[:2]:
            raise ValueError(
                f"ForcePlates: free_moment must have shape {force.shape[:2]}, got {free_moment.shape}"
            )
        if time.shape != (force.shape[0],):
            raise ValueError(f"ForcePlates: time must have shape ({force.shape[0]},), got {time.shape}")
        if not (math.isfinite(float(self.rate)) and float(self.rate) > 0):
            raise ValueError(
                f"ForcePlates{f' of {self.source}' if self.source else ''}: rate must be positive, got {self.rate}"
            )
        if self.corners is not None:
            corners = np.asarray(self.corners, dtype=float)
            if corners.shape != (force.shape[1], 4, 3):
                raise ValueError(
                    f"ForcePlates: corners must have shape ({force.shape[1]}, 4, 3), got {corners.shape}"
                )
            object.__setattr__(self, "corners", corners)
        object.__setattr__(self, "force", force)
        object.__setattr__(self, "cop", cop)
        object.__setattr__(self, "free_moment", free_moment)
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "rate", float(self.rate))

    @property
    def n_plates(self) -> int:
        """Number of plates."""
        return self.force.shape[1]

    def replace(self, **changes) -> "ForcePlates":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class Table:
    """An OpenSim table (``.mot`` / ``.sto``): time and labelled columns.

    Attributes:
        time: ``(T,)`` times (s).
        labels: column names, not including ``time``.
        values: ``(T, columns)`` values, in the file's units (angles in degrees when
            ``in_degrees`` is True: OpenSim's convention, kept as the file has it).
        in_degrees: the header's ``inDegrees`` (True/False), or None when absent.
        name: the name line that some files start with, or None.
        header: the other ``key=value`` header lines, as strings.
        description: the header's other free-text lines (OpenSim's "Units are S.I.
            units ..."), joined by newlines, or None.
    """

    time: np.ndarray
    labels: tuple
    values: np.ndarray
    in_degrees: Optional[bool] = None
    name: Optional[str] = None
    header: dict = dataclasses.field(default_factory=dict)
    description: Optional[str] = None

    def __post_init__(self):
        time = np.asarray(self.time, dtype=float)
        values = np.asarray(self.values, dtype=float)
        labels = tuple(str(label) for label in self.labels)
        if values.ndim != 2 or values.shape[1] != len(labels):
            raise ValueError(
                f"Table: values must have shape (T, {len(labels)}) for {len(labels)} labels, "
                f"got {values.shape}"
            )
        if time.shape != (values.shape[0],):
            raise ValueError(f"Table: time must have shape ({values.shape[0]},), got {time.shape}")
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "values", values)
        object.__setattr__(self, "labels", labels)
        object.__setattr__(self, "header", dict(self.header))

    def get(self, label: str) -> np.ndarray:
        """One column.

        Args:
            label: column name (the first column of that name).

        Returns:
            ``(T,)`` values.

        Raises:
            KeyError: no column of that name (the message lists the labels).
        """
        if label == "time":
            return self.time
        try:
            return self.values[:, self.labels.index(label)]
        except ValueError:
            raise _label_error("column", label, self.labels) from None

    def replace(self, **changes) -> "Table":
        """A copy with the given fields replaced."""
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True, eq=False)
class C3DTrial:
    """The contents of a C3D file, in SI units.

    Attributes:
        markers: marker trajectories at ``point_rate`` (m).
        forces: force platforms at ``analog_rate`` in the lab frame, or None when the
            file has no force platform.
        point_rate: marker sampling rate (Hz).
        analog_rate: analog sampling rate (Hz).
        analog: ``(T_analog, channels)`` analog channels as ezc3d scales them, in the
            units of ``ANALOG:UNITS`` (e.g. V for EMG).
        analog_labels: analog channel names.
        analog_units: analog channel units (empty strings when the file has none).
    """

    markers: Markers
    forces: Optional[ForcePlates]
    point_rate: float
    analog_rate: float
    analog: np.ndarray
    analog_labels: tuple
    analog_units: tuple


def _unique_labels(labels: list, descriptions, source: str, stacklevel: int = 4) -> tuple:
    """``labels`` with each repeat of an earlier one renamed ``RKNE_2``, ``RKNE_3``, ...,
    with a warning naming them (and their descriptions, where given); ``stacklevel``
    points the warning at the reader's caller (read_c3d's and read_trc's)."""
    labels = list(labels)
    seen = {}
    renamed = []
    for j, label in enumerate(labels):
        if label in seen:
            seen[label] += 1
            new = f"{label}_{seen[label]}"
            while new in labels:
                seen[label] += 1
                new = f"{label}_{seen[label]}"
            what = f" ({descriptions[j]})" if descriptions else ""
            renamed.append(f"{label}{what} -> {new}")
            labels[j] = new
        else:
            seen[label] = 1
    if renamed:
        warnings.warn(f"{source}: duplicate marker labels renamed: {', '.join(renamed)}", stacklevel=stacklevel)
    return tuple(labels)


def _warn_gaps(markers: Markers, source: str, stacklevel: int = 3) -> None:
    gaps = markers.gaps()
    if not gaps:
        return
    items = [
        f"{label} {sum(b - a for a, b in runs)} frames" for label, runs in gaps.items()
    ]
    listed = ", ".join(items[:_MAX_LISTED])
    if len(items) > _MAX_LISTED:
        listed += f", and {len(items) - _MAX_LISTED} more"
    warnings.warn(
        f"{source}: gaps (NaN) in {len(gaps)} of {len(markers.labels)} markers "
        f"({markers.xyz.shape[0]} frames): {listed}; see Markers.gaps()",
        stacklevel=stacklevel,
    )
