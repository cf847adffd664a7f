"""Force-plate contacts of :func:`jaxmb.gait.sagittal`: which foot stands on a loaded
plate, the foot's force and centre of pressure summed over its contacts, its stances
(whole or cut off by a recording's end), and the frames that the plates cover."""

from __future__ import annotations

import numpy as np

from .._math import true_runs
from ._markers import _joint_centre, _spec_labels, _src



# Plate assignment of :func:`sagittal` (the margins measured on a walking trial:
# docs/verification.md, "Gait: which foot stands on a plate").
_FOOT_TOLERANCE = 0.15  # m: a foot stands on a plate whose centre of pressure is this near its heel-to-toe line


_FOOT_EXCURSION = 0.25  # m: a centre of pressure this far from the foot, under load, is not the foot's alone


_FOOT_STILL = 1.5  # m/s: a foot that bears load is still (the slower of its heel and toe)


_SUBSTANTIAL = 0.2  # of a contact's peak vertical force: the samples on which the feet are judged


_INVOLVED = 0.1  # of those samples: a foot standing on the plate for fewer is not on it


_STANCE_GAP = 0.05  # s: contacts of a foot less far apart are one stance (a swing lasts 0.3 s or more)


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


def _foot_contacts(markers, plates, loaded, centres, spec, S: str, side: str, up) -> tuple:
    """(mine, unsure): this foot's contacts (plate, first, stop) (runs of loaded
    samples on which it stands), and those whose foot cannot be told (this foot's
    heel and toe missing); a ValueError where both feet load one plate."""
    rate, ft = float(markers.rate), plates.time
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
    for k in range(plates.force.shape[1]):
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
    return mine, unsure


def _check_contacts(markers, plates, mine, unsure, labels, side: str, run, span, up, min_force: float) -> None:
    """This foot's contacts lie within the frames analysed, or go on past an end that
    a recording sets (a partial stance); the force of its plates is finite over the
    frames analysed, and their centre of pressure where it carries more than twice
    ``min_force``: else a ValueError naming the plate, the times and the gaps."""
    (a, b), time, (edge_start, edge_end) = run, span.time, span.edges
    rate, frate, ft, mt = float(markers.rate), float(plates.rate), plates.time, markers.time
    fidx = np.clip(np.round((ft - mt[0]) * rate), 0, len(mt) - 1).astype(int)  # the nearest frame
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
    Tf, grid = plates.force.shape[0], span.grid
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
    vert = plates.force @ up
    for k, r0, r1 in mine:
        # readers leave the centre of pressure out (NaN) below a threshold of their own
        # (read_c3d: 20 N vertically): NaN above twice min_force is a gap in the data
        bad = ~cop_ok[r0:r1, k] & (vert[r0:r1, k] > 2 * min_force)
        if bad.any():
            j = r0 + int(np.argmax(bad))
            raise ValueError(f"sagittal: plate {k + 1}{_src(plates)}, under the {side} foot, has a NaN or infinite "
                             f"centre of pressure at {ft[j]:.3f} s, where it carries {vert[j, k]:.0f} N: fill gaps "
                             "before the analysis")  # fmt: skip
