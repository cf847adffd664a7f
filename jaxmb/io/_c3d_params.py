"""Byte-level checks of a C3D file's parameter section, run before ezc3d reads it: a
truncated file, rates, scales and force-platform channels that ezc3d would read
wrongly or silently."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from typing import Optional

import numpy as np

from ._text import _MOMENT_UNITS


def _parameter(parameters: dict, group: str, name: str, default=None):
    try:
        return parameters[group][name]["value"]
    except KeyError:
        return default


def _c3d_declared_frames(path: Path) -> tuple[Optional[int], str]:
    """The number of frames a C3D file declares, read from its raw bytes (ezc3d
    reports the frames it could read, its header and ``POINT:FRAMES`` adjusted to
    them), and where it comes from.

    ``POINT:FRAMES`` of the parameter section is the count that ezc3d reads and that
    the C3D standard makes authoritative (an integer, or a float beyond 65535 frames);
    without it (or 0: files without points), words 4 and 5 of the 512-byte header,
    the first and the last frame (1-based 16-bit words). See :func:`_c3d_raw`.
    Returns ``(None, "")`` when the bytes do not say.
    """
    raw = _c3d_raw(path)
    if raw is None:
        return None, ""
    frames = _c3d_parameter_frames(raw["parameters"])
    first, last = raw["first"], raw["last"]
    if frames:
        return frames, "parameter POINT:FRAMES"
    if last >= first >= 1:
        return last - first + 1, f"header frames {first} to {last}"
    return None, ""


def _c3d_raw(path: Path) -> Optional[dict]:
    """The header and the numeric parameters of a C3D file, read from its raw bytes
    (ezc3d adjusts its header to the parameters and to what it read, and some damaged
    parameters make it fail with ``std::bad_alloc``), or None when the bytes cannot
    be parsed.

    The 512-byte header's 16-bit words (1-based): word 1 holds the parameter
    section's first block (byte 0), word 2 the points per frame, word 3 the analog
    values per frame (all channels together), words 4 and 5 the first and the last
    frame (1-based), words 11-12 the frame rate (a float, Hz). Integers are
    little-endian unless the processor type (the parameter section's 4th byte) is 86
    (MIPS, big-endian); DEC floats (85) are converted.

    Returns:
        ``{"processor", "points", "analog_values", "first", "last", "rate",
        "parameters"}``, ``parameters`` as :func:`_c3d_raw_parameters` gives them.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(512)
            if len(head) < 512:
                return None
            f.seek((head[0] - 1) * 512)
            start = f.read(4)
            if len(start) < 4:
                return None
            params = start + f.read(max(start[2], 1) * 512 - 4)
        processor = start[3]
        order = ">" if processor == 86 else "<"
        points, analog_values, first, last = struct.unpack(order + "4H", head[2:10])
        rate = float(_c3d_floats(head[20:24], processor)[0])
        parameters = _c3d_raw_parameters(params, order, processor)
    except (OSError, struct.error, IndexError, ValueError):
        return None
    return {"processor": processor, "points": points, "analog_values": analog_values, "first": first,
            "last": last, "rate": rate, "parameters": parameters}  # fmt: skip


def _c3d_floats(raw: bytes, processor: int) -> np.ndarray:
    """The 32-bit floats of raw C3D bytes, as float64: IEEE little-endian (Intel,
    processor 84), big-endian (MIPS, 86), or DEC (85: the 16-bit words swapped, the
    exponent 2 more)."""
    b = np.frombuffer(raw[: len(raw) // 4 * 4], dtype=np.uint8).reshape(-1, 4)
    if processor == 85:
        b = b[:, [2, 3, 0, 1]].copy()
        b[:, 3] = np.where(b[:, 3] > 0, b[:, 3] - 1, 0)
    return np.ascontiguousarray(b).view(">f4" if processor == 86 else "<f4").ravel().astype(float)


def _c3d_raw_parameters(params: bytes, order: str, processor: int) -> dict:
    """The numeric parameters of a raw parameter section, ``{"GROUP:NAME": (type,
    dimensions, values)}``, values a flat float array in the file's (column-major)
    order. Records: name length (negative: locked) and group id (negative: a group),
    the name, a 16-bit offset to the next record; a parameter then has its type (-1
    char, 1 byte, 2 int16, 4 float), its dimensions and its data."""
    groups, found = {}, {}
    pos = 4
    while pos + 2 <= len(params):
        length, group = struct.unpack("bb", params[pos:pos + 2])
        if length == 0:
            break
        name = params[pos + 2:pos + 2 + abs(length)].decode("latin-1").strip().upper()
        at = pos + 2 + abs(length)
        (step,) = struct.unpack(order + "h", params[at:at + 2])
        if group < 0:
            groups[-group] = name
        else:
            found[(group, name)] = at + 2
        if step <= 0:
            break
        pos = at + step
    out = {}
    for (group, name), body in found.items():
        kind, ndim = struct.unpack("bB", params[body:body + 2])
        if kind not in (1, 2, 4) or group not in groups:
            continue
        dims = tuple(params[body + 2:body + 2 + ndim])
        data = params[body + 2 + ndim:body + 2 + ndim + math.prod(dims) * kind]
        if len(data) < math.prod(dims) * kind:
            continue  # beyond the section read
        if kind == 4:
            values = _c3d_floats(data, processor)
        elif kind == 2:
            values = np.frombuffer(data, dtype=order + "i2").astype(float)
        else:
            values = np.frombuffer(data, dtype=np.uint8).astype(float)
        out[f"{groups[group]}:{name}"] = (kind, dims, values)
    return out


def _c3d_count(entry) -> Optional[int]:
    """A count (frames, points, channels) from a raw parameter: its first value, a
    16-bit integer read unsigned (written so past 32767), a float rounded; None when
    absent, or a float not finite or negative."""
    if entry is None or not len(entry[2]):
        return None
    kind, value = entry[0], entry[2][0]
    if kind == 2:
        return int(value) + 65536 if value < 0 else int(value)
    if kind == 4:
        return int(round(value)) if math.isfinite(value) and value >= 0 else None
    return int(value)


def _c3d_parameter_frames(parameters: dict) -> Optional[int]:
    """``POINT:FRAMES`` from the raw parameters of :func:`_c3d_raw_parameters` (None
    when absent): an int16 (unsigned past 32767), or a float beyond 65535 frames."""
    return _c3d_count(parameters.get("POINT:FRAMES"))


_C3D_RATES = (1.0, 1e5)  # Hz: the point and analog rates that read_c3d accepts


def _check_c3d_rate(rate: float, where: str) -> None:
    """Refuse a sampling rate (Hz) that is not finite or outside :data:`_C3D_RATES`."""
    low, high = _C3D_RATES
    if not (math.isfinite(rate) and low <= rate <= high):
        raise ValueError(f"{where}: {rate:g} Hz, not a sampling rate (expected {low:g} Hz to {high:g} Hz): "
                         "a damaged file")  # fmt: skip


def _check_c3d_scales(values: np.ndarray, where: str, what: str = "") -> None:
    """Refuse a scale factor that is zero or not finite (``what`` names the entry)."""
    bad = np.flatnonzero(~np.isfinite(values) | (values == 0))
    if len(bad):
        i = bad[0]
        entry = f" ({what} {i + 1} of {len(values)})" if what else ""
        raise ValueError(f"{where}: a scale factor of {values[i]:g}{entry}, expected finite and non-zero: "
                         "every value it scales would be 0 or NaN")  # fmt: skip


def _check_c3d_points(raw: dict, source: str) -> float:
    """Check the point parameters of a raw C3D file (:func:`_c3d_raw`) against each
    other and the header; return the point (frame) rate (Hz)."""
    p = raw["parameters"]
    where = f"{source}, parameter POINT:RATE"
    if "POINT:RATE" in p and len(p["POINT:RATE"][2]):
        rate = float(p["POINT:RATE"][2][0])
        _check_c3d_rate(rate, where)
        head = raw["rate"]
        if math.isfinite(head) and head > 0 and not math.isclose(head, rate, rel_tol=1e-4):
            raise ValueError(f"{where}: {rate:g} Hz, but the header's frame rate is {head:g} Hz: a damaged file")
    else:
        rate = raw["rate"]
        _check_c3d_rate(rate, f"{source}, header frame rate (no parameter POINT:RATE)")
    used = _c3d_count(p.get("POINT:USED"))
    if used is not None and used != raw["points"]:
        raise ValueError(f"{source}, parameter POINT:USED: {used} points, but the header has {raw['points']} "
                         "per frame: a damaged file (the data would be read misaligned)")  # fmt: skip
    frames = _c3d_parameter_frames(p)
    first, last = raw["first"], raw["last"]
    # past 65535 frames the header cannot hold the last frame: POINT:FRAMES alone
    if frames and frames < 65535 and last < 65535 and last - first + 1 != frames:
        raise ValueError(f"{source}, parameter POINT:FRAMES: {frames} frames, but the header's first and last "
                         f"frame ({first} to {last}) make {last - first + 1}: a damaged header or parameter "
                         "section (the first frame sets every time)")  # fmt: skip
    if used and "POINT:SCALE" in p:
        _check_c3d_scales(p["POINT:SCALE"][2][:1], f"{source}, parameter POINT:SCALE")
    return rate


def _check_c3d_analog_rate(rate: float, point_rate: float, used: int, values: int, where: str) -> None:
    """Refuse an analog rate (Hz) outside the sampling rates, or whose samples per
    frame at ``point_rate`` (Hz), times the ``used`` channels, are not the header's
    analog ``values`` per frame (ezc3d reads the data with the rate)."""
    _check_c3d_rate(rate, where)
    ratio = rate / point_rate
    if abs(ratio - round(ratio)) > 1e-3 * ratio or round(ratio) * used != values:
        raise ValueError(f"{where}: {rate:g} Hz makes {ratio:g} samples per frame at POINT:RATE {point_rate:g} Hz, "
                         f"but the header has {values} analog values per frame for the {used} channels of "
                         f"ANALOG:USED ({values / used:g} each): a damaged file (the analog data would be read "
                         "misaligned)")  # fmt: skip


def _check_c3d_analogs(raw: dict, source: str, point_rate: float) -> None:
    """Check the analog parameters of a raw C3D file (:func:`_c3d_raw`): the rate,
    its samples per frame against the header's analog values per frame, the scales."""
    p = raw["parameters"]
    used = _c3d_count(p.get("ANALOG:USED")) or 0
    values = raw["analog_values"]
    if used == 0:
        if values:
            raise ValueError(f"{source}, parameter ANALOG:USED: no channels, but the header has {values} analog "
                             "values per frame: a damaged file")  # fmt: skip
        return
    rate = p.get("ANALOG:RATE")
    if rate is not None and len(rate[2]):  # without it, nothing to check the header's values against
        _check_c3d_analog_rate(float(rate[2][0]), point_rate, used, values, f"{source}, parameter ANALOG:RATE")
    if "ANALOG:GEN_SCALE" in p:
        _check_c3d_scales(p["ANALOG:GEN_SCALE"][2][:1], f"{source}, parameter ANALOG:GEN_SCALE")
    if "ANALOG:SCALE" in p:
        _check_c3d_scales(p["ANALOG:SCALE"][2][:used], f"{source}, parameter ANALOG:SCALE", "channel")


def _check_c3d_platforms(raw: dict, source: str) -> None:
    """Refuse non-finite entries in the geometry and calibration of the used force
    platforms (``FORCE_PLATFORM:CORNERS``, ``ORIGIN``, ``CAL_MATRIX``): the plate's
    force and centre of pressure would be NaN or infinite."""
    p = raw["parameters"]
    used = _c3d_count(p.get("FORCE_PLATFORM:USED")) or 0
    for name in ("CORNERS", "ORIGIN", "CAL_MATRIX"):
        if f"FORCE_PLATFORM:{name}" not in p:
            continue
        _, dims, values = p[f"FORCE_PLATFORM:{name}"]
        per_plate = math.prod(dims[:-1]) if len(dims) > 1 else len(values)
        bad = np.flatnonzero(~np.isfinite(values[: used * per_plate]))
        if len(bad):
            i = bad[0]
            raise ValueError(f"{source}, parameter FORCE_PLATFORM:{name}: force platform {i // per_plate + 1} has "
                             f"an entry of {values[i]:g}: its force and centre of pressure would not be finite")  # fmt: skip


def _check_c3d_parameters(path: Path, source: str) -> None:
    """Refuse a damaged C3D file before ezc3d reads its data: rates not finite or
    outside 1 Hz to 100 kHz, the header and the parameters disagreeing on the frames,
    the points or the analog values per frame, scales zero or not finite, force
    platforms with non-finite corners, origin or calibration. Each error names the
    file and the parameter. Files whose bytes do not parse as C3D are left to ezc3d."""
    raw = _c3d_raw(path)
    if raw is None or raw["processor"] not in (84, 85, 86):
        return
    point_rate = _check_c3d_points(raw, source)
    _check_c3d_analogs(raw, source, point_rate)
    _check_c3d_platforms(raw, source)


def _check_c3d_force(force: np.ndarray, max_force: Optional[float], where: str, t0: float, rate: float,
                     gains: str) -> None:  # fmt: skip
    """Refuse a plate's ``(T, 3)`` force (N) that is not finite, or whose magnitude
    exceeds ``max_force`` (N; None: no limit), naming the first such sample and the
    parameters that scale the force (``gains``)."""
    size = np.linalg.norm(force, axis=1)
    bad = ~np.isfinite(force).all(axis=1)
    if max_force is not None:
        bad |= size > max_force
    if bad.any():
        i = int(np.argmax(bad))
        what = f"a force of {size[i]:.3g} N" if np.isfinite(size[i]) else f"a force of {force[i].tolist()} N"
        limit = f", beyond max_force={max_force:g} N" if max_force is not None and np.isfinite(size[i]) else ""
        raise ValueError(f"{where}: {what} at sample {i + 1} (t = {t0 + i / rate:.4g} s){limit}: check {gains} "
                         "(pass a larger max_force, or max_force=None, if the force is real)")  # fmt: skip


def _plate_gains(parameters: dict, channels: np.ndarray, k: int, cal_matrix) -> str:
    """The parameters that scale force platform ``k``'s force, with their values, for
    an error message."""
    gen = _parameter(parameters, "ANALOG", "GEN_SCALE", [1.0])
    scale = np.asarray(_parameter(parameters, "ANALOG", "SCALE", []), dtype=float)
    text = f"ANALOG:GEN_SCALE ({float(gen[0]):g})" if len(gen) else "ANALOG:GEN_SCALE"
    if channels.ndim == 2 and k < channels.shape[1]:
        c = channels[:3, k].astype(int) - 1
        c = c[(c >= 0) & (c < len(scale))]
        if len(c):
            text += f", ANALOG:SCALE of its force channels ({', '.join(f'{s:g}' for s in scale[c])})"
    cal = np.abs(np.asarray(cal_matrix, dtype=float))
    if cal.size:
        text += f" and FORCE_PLATFORM:CAL_MATRIX (entries up to {np.nanmax(cal):g})"
    return text


def _plate_normals(corners: np.ndarray, force: np.ndarray) -> np.ndarray:
    """(plates, 3) unit normals of the plates' surfaces from their (plates, 4, 3)
    corners (the cross product of the diagonals), each pointing to the side the force
    on the subject points to over the trial (up); the lab's +z where the corners do
    not span a plane (a file without corners)."""
    d = np.cross(corners[:, 2] - corners[:, 0], corners[:, 3] - corners[:, 1])
    size = np.linalg.norm(d, axis=-1, keepdims=True)
    flat = size[:, 0] > 1e-9 * np.maximum(np.abs(corners).max(axis=(1, 2)), 1e-300) ** 2
    n = np.where(flat[:, None], d / np.where(size > 0, size, 1.0), np.array([0.0, 0.0, 1.0]))
    toward = np.nansum(np.einsum("tpk,pk->tp", force, n), axis=0)
    return np.where((toward < 0)[:, None], -n, n)


def _check_moment_channels(channels, k: int, labels, units, unit_moment: str, m_scale: float, where: str) -> None:
    """Refuse a plate whose moment channels (``FORCE_PLATFORM:CHANNEL`` rows 4-6,
    those of types 2 and 4) declare in ``ANALOG:UNITS`` a moment unit other than the
    one ezc3d computes with (``FORCE_PLATFORM:UNITS`` or N, times ``POINT:UNITS``):
    ezc3d never reads ``ANALOG:UNITS``, and a file with points in m and moments in
    N mm gave centres of pressure hundreds of metres off and free moments 1000x."""
    if channels.ndim != 2 or channels.shape[0] < 6 or k >= channels.shape[1]:
        return
    for row in range(3, 6):
        c = int(channels[row, k]) - 1  # 1-based analog channel
        if not 0 <= c < len(units):
            continue
        unit = units[c].strip().lower().replace(" ", "")
        if unit in _MOMENT_UNITS and not math.isclose(_MOMENT_UNITS[unit], m_scale):
            label = labels[c] if c < len(labels) else f"channel {c + 1}"
            raise ValueError(
                f"{where}: its moment channel {label} (analog channel {c + 1}) is in {units[c]!r} "
                f"(ANALOG:UNITS), but the force-plate extraction (ezc3d) computes its moments in "
                f"{unit_moment!r}, from FORCE_PLATFORM:UNITS and POINT:UNITS: the centre of pressure and "
                "the free moment would be off by that factor; export the file with POINT:UNITS in the "
                "moments' length unit"
            )
