"""The C3D reader, through the optional ``ezc3d`` package (``pip install "jaxmb[c3d]"``)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from ._c3d_params import (_c3d_declared_frames, _check_c3d_force, _check_c3d_parameters, _check_moment_channels,
                          _parameter, _plate_gains, _plate_normals)
from ._markers import C3DTrial, ForcePlates, Markers, _unique_labels, _warn_gaps
from ._text import _FORCE_UNITS, _LENGTH_UNITS, _MOMENT_UNITS, _scale


def read_c3d(
    path, *, min_force: float = 20.0, warn_gaps: bool = True, max_force: Optional[float] = 50e3
) -> C3DTrial:
    """Read a C3D file: markers, force platforms and analog channels, in SI units.

    Uses ``ezc3d`` (``pip install "jaxmb[c3d]"``), and its own force-platform
    extraction (``extract_forceplat_data=True``: the ``FORCE_PLATFORM`` parameters'
    calibration matrices, corners, origins and channel maps), which gives the force,
    the centre of pressure and the free moment in the lab frame at the analog rate.

    Marker positions are converted with ``POINT:UNITS``; invalid points (negative
    residual) are NaN (gaps, reported as :func:`read_trc` reports them). Markers whose
    label repeats an earlier one (e.g. a medial knee marker also labelled ``RKNE``) are
    renamed ``RKNE_2``, ``RKNE_3``, ... with a warning; ``Markers.descriptions`` keeps
    ``POINT:DESCRIPTIONS`` to tell them apart. Forces, positions and moments of the
    platforms are converted with the units ezc3d reports (``unit_force``,
    ``unit_position``, ``unit_moment``); ezc3d takes the moments' unit from
    ``POINT:UNITS`` alone, so a plate whose moment channels declare another in
    ``ANALOG:UNITS`` is refused rather than read off by a factor of 1000.

    The centre of pressure and the free moment are undefined on an unloaded plate
    (ezc3d divides by a vertical force near zero and returns values metres off the
    plate): where the vertical force is below ``min_force`` they are NaN. The
    vertical is each plate's normal (from its corners, pointing to the side the
    force on the subject points to), so labs with y (or any axis) up read alike;
    the free moment is the moment about that normal.

    A damaged file is refused, naming the file and the parameter, before ezc3d reads
    its data with the parameters: a point (``POINT:RATE``) or analog rate
    (``ANALOG:RATE``) not finite or outside 1 Hz to 100 kHz, or disagreeing with the
    header (its frame rate, its analog values per frame); ``POINT:FRAMES`` against the
    header's first and last frame (a damaged first frame shifts every time);
    ``POINT:USED`` against the header's points per frame; ``POINT:SCALE``,
    ``ANALOG:SCALE`` or ``ANALOG:GEN_SCALE`` zero or not finite; a used force
    platform's ``CORNERS``, ``ORIGIN`` or ``CAL_MATRIX`` not finite. A plate force
    that is not finite, or beyond ``max_force``, is refused too, naming the scales
    and the calibration that make it.

    Args:
        path: the ``.c3d`` file.
        min_force: force along the plate's normal (N) below which a plate counts as
            unloaded; None keeps ezc3d's values everywhere.
        warn_gaps: warn naming the markers with gaps.
        max_force: the largest plate force (N, its magnitude) taken as physical;
            beyond it the file is refused (a damaged scale or calibration). None: no
            limit.

    Returns:
        :class:`C3DTrial`: ``markers`` (m, at ``point_rate``), ``forces``
        (:class:`ForcePlates` at ``analog_rate``, lab frame, or None without
        platforms), ``point_rate``, ``analog_rate`` (Hz), ``analog`` channels.

    Raises:
        ImportError: ezc3d is not installed.
        ValueError: a file that ezc3d cannot read, unknown units, a plate whose
            moment channels' ``ANALOG:UNITS`` disagree with the moment unit ezc3d
            computes with (``POINT:UNITS`` in m, moments in N mm), data that
            disagrees with the parameters, or fewer frames than the file declares (a
            truncated file: the frames of ``POINT:FRAMES``, or of the header's first
            and last frame, against those ezc3d could read), naming the file; the
            damaged parameters above and forces beyond ``max_force``, naming the file
            and the parameter.
        FileNotFoundError: no such file.
    """
    c3d, source = _open(path, max_force)
    markers = _markers(c3d, source)
    if warn_gaps:
        _warn_gaps(markers, source)
    analog_rate, analog, analog_labels, analog_units = _analog(c3d)
    forces = _platforms(c3d, source, analog_rate, analog, analog_labels, analog_units, min_force, max_force)
    return C3DTrial(
        markers=markers,
        forces=forces,
        point_rate=markers.rate,
        analog_rate=analog_rate,
        analog=analog,
        analog_labels=analog_labels,
        analog_units=analog_units,
    )


def _open(path, max_force):
    """The file's parameters checked (:mod:`._c3d_params`), then read by ezc3d, and
    refused when it holds fewer frames than it declares; returns (ezc3d's c3d, the
    file's name)."""
    try:
        import ezc3d
    except ImportError as error:  # pragma: no cover - exercised without the extra
        raise ImportError(
            'read_c3d needs the ezc3d package: pip install "jaxmb[c3d]" '
            "(or pip install ezc3d)"
        ) from error
    path = Path(path)
    source = path.name
    if path.is_dir():
        raise IsADirectoryError(f"{path}: is a folder, not a C3D file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file")
    if max_force is not None and not (max_force > 0):
        raise ValueError(f"read_c3d: max_force must be > 0 N or None, got {max_force}")
    _check_c3d_parameters(path, source)  # before ezc3d reads the data with them
    try:
        c3d = ezc3d.c3d(str(path), extract_forceplat_data=True)
    except (OSError, RuntimeError, ValueError, IndexError) as error:
        if isinstance(error, OSError) and error.errno is not None:  # the system's: permissions, ...
            raise
        # ezc3d's own "File must be a valid c3d file: iostream error", ...
        raise ValueError(f"{source}: ezc3d cannot read it: {error}") from None
    declared, declared_by = _c3d_declared_frames(path)
    n_read = np.shape(c3d["data"]["points"])[2]
    if declared is not None and n_read < declared:
        # ezc3d stops at the end of the file and adjusts its header and POINT:FRAMES to
        # what it read: a truncated file would load silently with fewer frames
        raise ValueError(
            f"{source}: truncated: {declared} frames declared ({declared_by}), "
            f"only {n_read} in the file"
        )
    return c3d, source


def _markers(c3d, source: str) -> Markers:
    """The markers (m, at ``POINT:RATE``), invalid points NaN, repeated labels renamed."""
    parameters, header, data = c3d["parameters"], c3d["header"], c3d["data"]
    point_rate = float(_parameter(parameters, "POINT", "RATE", [header["points"]["frame_rate"]])[0])
    units = _parameter(parameters, "POINT", "UNITS", ["mm"])
    units = units[0] if len(units) else "mm"
    scale = _scale(units, _LENGTH_UNITS, "length", f"{source}, parameter POINT:UNITS")
    points = np.asarray(data["points"], dtype=float)  # (4, markers, T)
    n_markers, n_frames = points.shape[1], points.shape[2]
    labels = list(_parameter(parameters, "POINT", "LABELS", []))
    if len(labels) < n_markers:
        raise ValueError(f"{source}, parameter POINT:LABELS: {len(labels)} labels for {n_markers} points")
    labels = [label.strip() for label in labels[:n_markers]]
    descriptions = list(_parameter(parameters, "POINT", "DESCRIPTIONS", []))
    descriptions = (
        tuple(d.strip() for d in descriptions[:n_markers]) if len(descriptions) >= n_markers else None
    )
    first = int(header["points"]["first_frame"])
    return Markers(
        rate=point_rate,
        time=(first + np.arange(n_frames)) / point_rate,
        labels=_unique_labels(labels, descriptions, source),
        xyz=np.transpose(points[:3], (2, 1, 0)) * scale,
        descriptions=descriptions,
        source=source,
    )


def _analog(c3d):
    """The analog channels: rate (Hz), values (T_analog, channels), labels and units."""
    parameters, header, data = c3d["parameters"], c3d["header"], c3d["data"]
    analog_rate = float(_parameter(parameters, "ANALOG", "RATE", [header["analogs"]["frame_rate"]])[0])
    analogs = np.asarray(data["analogs"], dtype=float)  # (1, channels, T_analog)
    analog = analogs[0].T if analogs.size else np.zeros((0, 0))
    analog_labels = tuple(s.strip() for s in _parameter(parameters, "ANALOG", "LABELS", []))
    analog_units = tuple(s.strip() for s in _parameter(parameters, "ANALOG", "UNITS", []))
    if len(analog_units) != len(analog_labels):
        analog_units = ("",) * len(analog_labels)
    return analog_rate, analog, analog_labels, analog_units


def _platforms(c3d, source, analog_rate, analog, analog_labels, analog_units, min_force, max_force):
    """The force platforms through ezc3d's extraction, in SI units and the lab frame,
    the centre of pressure and free moment NaN on an unloaded plate; None without
    platforms."""
    parameters, header = c3d["parameters"], c3d["header"]
    platforms = c3d["data"].get("platform", [])
    if not len(platforms):
        return None
    n_analog = analog.shape[0]
    channels = np.asarray(_parameter(parameters, "FORCE_PLATFORM", "CHANNEL", np.zeros((0, 0))))
    t0 = int(header["analogs"]["first_frame"]) / analog_rate
    plates = [_plate(plate, k, f"{source}, force platform {k + 1}", parameters, channels, n_analog, analog_labels,
                     analog_units, max_force, t0, analog_rate) for k, plate in enumerate(platforms)]  # fmt: skip
    force, cop, free_moment, corners = (np.stack(x, axis=1) for x in zip(*plates))
    corners = np.swapaxes(corners, 0, 1)  # (plates, 4, 3)
    # the vertical of each plate: its surface's normal, towards the force on the
    # subject (not the lab's z: labs with y up exist)
    up = _plate_normals(corners, force)
    normal_force = np.einsum("tpk,pk->tp", force, up)
    free_moment = np.einsum("tpk,pk->tp", free_moment, up)
    if min_force is not None:
        unloaded = ~(normal_force >= min_force)
        cop = np.where(unloaded[:, :, None], np.nan, cop)
        free_moment = np.where(unloaded, np.nan, free_moment)
    first_analog = int(header["analogs"]["first_frame"])
    return ForcePlates(
        rate=analog_rate,
        time=(first_analog + np.arange(n_analog)) / analog_rate,
        force=force,
        cop=cop,
        free_moment=free_moment,
        corners=corners,
        source=source,
    )


def _plate(plate, k, where, parameters, channels, n_analog, analog_labels, analog_units, max_force, t0, analog_rate):
    """One plate's force, centre of pressure, free-moment vector (T_analog, 3) and
    corners (4, 3), in SI units, its channels and forces checked."""
    f_scale = _scale(plate["unit_force"], _FORCE_UNITS, "force", where)
    p_scale = _scale(plate["unit_position"], _LENGTH_UNITS, "position", where)
    m_scale = _scale(plate["unit_moment"], _MOMENT_UNITS, "moment", where)
    _check_moment_channels(channels, k, analog_labels, analog_units, plate["unit_moment"], m_scale, where)
    for key in ("force", "center_of_pressure", "Tz"):
        shape = np.shape(plate[key])
        if shape != (3, n_analog):
            raise ValueError(f"{where}: {key} has shape {shape}, expected (3, {n_analog})")
    force = np.asarray(plate["force"], dtype=float).T * f_scale
    _check_c3d_force(force, max_force, where, t0, analog_rate, _plate_gains(parameters, channels, k, plate["cal_matrix"]))
    return (force, np.asarray(plate["center_of_pressure"], dtype=float).T * p_scale,
            np.asarray(plate["Tz"], dtype=float).T * m_scale, np.asarray(plate["corners"], dtype=float).T * p_scale)
