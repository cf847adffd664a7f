"""3-D markers and force plates to the sagittal-plane inputs of
:func:`jaxmb.gait.analyze`: :func:`sagittal` and :class:`SagittalTrial`."""

from __future__ import annotations

import dataclasses
import warnings
from typing import NamedTuple

import numpy as np

from .._math import true_runs
from ..io import C3DTrial
from ._contacts import _STANCE_GAP, _check_contacts, _covered, _foot_contacts, _foot_force, _held, _partial
from ._markers import DEFAULT_MAPPING, _joint_centre, _spec_labels, _src, _unit, check_mapping_entry



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
      force cannot be split between two feet; the margins on a measured walk:
      docs/verification.md). A stance phase is a run of samples in which this foot's
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
    markers, plates, S, spec = _check_inputs(markers, plates, side, mapping)
    loaded, up = _vertical(plates, min_force)
    centres, (a, b), proj, axes = _joint_centres(markers, spec, S, up)
    rate, time = float(markers.rate), markers.time[a:b]
    if plates is None:
        z = np.zeros((b - a, 2))
        return SagittalTrial(proj["hip"], proj["knee"], proj["ankle"], proj["toe"], z, z.copy(), rate, rate,
                             time, None, (), axes, side, None)  # fmt: skip
    span = _frames_analysed(markers, plates, (a, b), time, proj)
    proj, time = span.proj, span.time
    mine, unsure = _foot_contacts(markers, plates, loaded, centres, spec, S, side, up)
    labels = [lab for key in ("hip", "knee", "ankle", "toe", "heel") for lab in _spec_labels(spec[key], S)]
    _check_contacts(markers, plates, mine, unsure, labels, side, (a, b), span, up, min_force)
    force, cop, has = _foot_signal(plates, loaded, mine, span, axes)
    stances = _stances(has, rate, float(plates.rate), len(time))
    partial = _partial(stances, mine, plates.time, time, rate, plates.force.shape[0])
    contacts = tuple((k, float(plates.time[r0]), float(plates.time[r1 - 1])) for k, r0, r1 in sorted(mine))
    return SagittalTrial(proj["hip"], proj["knee"], proj["ankle"], proj["toe"], force, cop, rate, float(plates.rate),
                         time, stances[0] if stances else None, tuple(sorted({k for k, _, _ in mine})), axes, side,
                         _body_weight(plates, loaded, up, rate), contacts, stances, partial)  # fmt: skip


def _check_inputs(markers, plates, side: str, mapping) -> tuple:
    """(markers, plates or None, "R" or "L", the mapping over the defaults), checked."""
    if isinstance(markers, C3DTrial):
        plates = markers.forces if plates is None else plates
        markers = markers.markers
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    spec = dict(DEFAULT_MAPPING)
    if mapping is not None:
        unknown = set(mapping) - set(spec)
        if unknown:
            raise ValueError(f"mapping has unknown keys {sorted(unknown)}; known: {sorted(spec)}")
        for key, entry in mapping.items():
            check_mapping_entry(key, entry)
        spec.update(mapping)
    if plates is not None and plates.force.shape[1] == 0:
        plates = None  # a file without any plate
    if plates is not None and plates.force.shape[0] == 0:
        raise ValueError(f"sagittal: the force plates{_src(plates)} hold no samples")
    return markers, plates, side[0].upper(), spec


def _vertical(plates, min_force: float) -> tuple:
    """(loaded (Tf, plates) bool or None, up (3,)): the vertical is the direction of
    the mean ground reaction force where plates are loaded (the lab's +z without)."""
    if plates is None:
        return None, np.array([0.0, 0.0, 1.0])
    fz_any = np.linalg.norm(plates.force, axis=-1)
    # False where the force is NaN or infinite (an inf summed into the vertical gave
    # "cannot find the vertical"; such a force under the foot is named later)
    loaded = np.isfinite(fz_any) & (fz_any > min_force)
    total = np.where(loaded[..., None], plates.force, 0.0).sum(axis=(0, 1))
    up = _unit(total, "vertical (no loaded force plate)") if loaded.any() else np.array([0.0, 0.0, 1.0])
    return loaded, up


def _joint_centres(markers, spec, S: str, up) -> tuple:
    """(centres {joint: (T, 3)} over every frame, (a, b) the longest run of complete
    frames, proj {joint: (b - a, 2)} (forward, up) over it, axes (3, 3))."""
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
    axes = np.stack([forward, up, np.cross(forward, up)])
    proj = {k: np.stack([v @ forward, v @ up], -1) for k, v in c.items()}
    return centres, (a, b), proj, axes


class _Span(NamedTuple):
    """The frames analysed and the force's grid over them."""

    proj: dict  # {joint: (T, 2)} over the frames analysed
    time: np.ndarray  # (T,) s, their times
    edges: tuple  # (start, end): True where a recording (not a marker gap) sets that end
    grid: np.ndarray  # (n,) s, time[0] + j / force rate
    i0: int  # the plates' sample at time[0]
    aligned: bool  # the grid falls on the plates' own samples


def _frames_analysed(markers, plates, run, time, proj) -> _Span:
    """The frames of the complete run that the forces cover (frames without force data
    are unmeasured, not "no contact"), with a warning where that drops frames; the
    ends that a recording sets (a contact past one is a partial stance, unlike one
    past a marker gap); the force's grid time[0] + j / force rate to the last frame."""
    a, b = run
    T, rate, frate, ft = b - a, float(markers.rate), float(plates.rate), plates.time
    a2, b2 = _covered(time, ft, frate, markers, plates)
    edges = (a == 0 or a2 > 0, b == len(markers.time) or b2 < T)
    if (a2, b2) != (0, T):
        warnings.warn(f"sagittal: the force plates{_src(plates)} cover {ft[0]:.3f}-{ft[-1]:.3f} s, the markers' "
                      f"complete frames{_src(markers)} {time[0]:.3f}-{time[-1]:.3f} s: the frames analysed are the "
                      f"{b2 - a2} that both cover, {time[a2]:.3f}-{time[b2 - 1]:.3f} s (frames {a + a2 + 1}-{a + b2} "
                      "of the markers' file)", stacklevel=3)  # fmt: skip
        proj = {k: v[a2:b2] for k, v in proj.items()}
        time, T = time[a2:b2], b2 - a2
    # the grid's last sample at or past the last frame (held there)
    n = int(np.ceil((T - 1) * frate / rate - 1e-6)) + 1
    i0 = int(np.round((time[0] - ft[0]) * frate))
    aligned = 0 <= i0 and i0 + n <= len(ft) and abs((ft[i0] - time[0]) * frate) < 1e-6
    return _Span(proj, time, edges, time[0] + np.arange(n) / frate, i0, aligned)


def _foot_signal(plates, loaded, mine, span: _Span, axes) -> tuple:
    """This foot's force (n, 2) and centre of pressure (n, 2) on the grid, in (forward,
    up), and where it is loaded (n,): the sum over its contacts, the centre of
    pressure weighted by the vertical force (samples without one carry no weight)."""
    forward, up = axes[0], axes[1]
    Tf, P = plates.force.shape[:2]
    cop_ok = np.isfinite(plates.cop).all(-1)  # (Tf, plates)
    use = np.zeros((Tf, P), bool)
    for k, r0, r1 in mine:
        use[r0:r1, k] = loaded[r0:r1, k]
    if span.aligned:  # the plates' own samples
        sl = slice(span.i0, span.i0 + len(span.grid))
        force3, fcop, wsum = _foot_force(plates.force[sl], plates.cop[sl], use[sl], cop_ok[sl], up)
        has = wsum > 0
        cop3 = _held(fcop, wsum, has)
    else:  # linear interpolation onto the grid
        ft, grid = plates.time, span.grid
        force3, fcop, wsum = _foot_force(plates.force, plates.cop, use, cop_ok, up)
        cop_raw = _held(fcop, wsum, wsum > 0)
        force3 = np.stack([np.interp(grid, ft, force3[:, i]) for i in range(3)], -1)
        cop3 = np.stack([np.interp(grid, ft, cop_raw[:, i]) for i in range(3)], -1)
        has = np.interp(grid, ft, (wsum > 0).astype(float)) > 0
    force = np.stack([force3 @ forward, force3 @ up], -1)
    cop = np.stack([cop3 @ forward, cop3 @ up], -1)
    return force, cop, has


def _stances(has, rate: float, frate: float, T: int) -> tuple:
    """((start, stop) frames, ...): runs of this foot's force on the grid (contacts on
    two plates at once are one stance; runs less than _STANCE_GAP apart, a force
    flickering about min_force at a contact's edge, too)."""
    stances = []
    for g0, g1 in true_runs(has):
        if stances and (g0 - stances[-1][1]) / frate < _STANCE_GAP:
            stances[-1][1] = g1
        else:
            stances.append([g0, g1])
    return tuple((int(np.ceil(g0 * rate / frate - 1e-9)), min(int(np.floor((g1 - 1) * rate / frate + 1e-9)) + 1, T))
                 for g0, g1 in stances)  # fmt: skip


def _body_weight(plates, loaded, up, rate: float):
    """N: the mean total vertical force over the middle 70 % of each contact that the
    force recording holds whole (loaded at its first or last sample, the middle of
    what it holds is not the middle of the contact), or None."""
    frate, (Tf, P) = float(plates.rate), plates.force.shape[:2]
    vert_all = np.where(loaded, plates.force @ up, 0.0).sum(-1)
    mids = []
    for k in range(P):
        for r0, r1 in true_runs(loaded[:, k]):
            m_ = r1 - r0
            if m_ * rate / frate >= 10 and r0 > 0 and r1 < Tf:  # a whole contact of at least 10 frames
                mids.append(vert_all[r0 + int(0.15 * m_) : r1 - int(0.15 * m_)])
    return float(np.mean(np.concatenate(mids))) if mids else None
