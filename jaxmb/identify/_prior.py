"""Priors on the physical parameters from the anthropometric tables."""

from __future__ import annotations

import functools
import math
from typing import NamedTuple, Sequence

import numpy as np

from ..anthropometry import SEVEN_SEGMENT_NAMES, row_key, seven_segment_parts, table_rows
from ..model import Model
from ._parameters import PHYSICAL, to_physical


class Prior(NamedTuple):
    """Independent priors on the physical parameters (also the spread of
    :func:`monte_carlo`).

    Attributes:
      mean: (segments, 4) mass kg, com along and across m, inertia kg m^2.
      sd: (segments, 4) standard deviations, same units (> 0).
    """

    mean: np.ndarray
    sd: np.ndarray


_ALIASES = {"shank": ("shank", "leg"), "leg": ("leg", "shank")}

#: The segments of :func:`jaxmb.seven_segment_human` that carry both sides: its
#: builder lumps the left and right legs and arms (``count=2`` in
#: ``anthropometry._seven_segment``), so a prior for it counts them twice.
_SEVEN_SEGMENT_SIDES = {"thigh": 2, "shank": 2, "foot": 2, "upper_arm": 2, "forearm_hand": 2}


def _is_seven_segment_human(model: Model) -> bool:
    """True for a model with the segment names and parents of :func:`jaxmb.seven_segment_human`."""
    parents = seven_segment_parts()[0]
    return tuple(model.names) == tuple(SEVEN_SEGMENT_NAMES) and tuple(model.parent) == tuple(parents)


@functools.lru_cache(maxsize=None)
def _seven_segment_fractions(table: str) -> tuple:
    """Per segment of :func:`jaxmb.seven_segment_human` built from ``table``, for ONE
    side: (mass / body mass, com from the proximal joint / L, radius of gyration / L),
    read from the builder itself (composite trunk and head, rows turned around where
    the table measures from the cranial end). Every length is a fraction of the
    height, so the fractions do not depend on it."""
    _, lengths, parts = seven_segment_parts(table, 1.0, 1.0)
    out = []
    for s, L, p in zip(SEVEN_SEGMENT_NAMES, lengths, parts):
        k = _SEVEN_SEGMENT_SIDES.get(s, 1)
        out.append((p.mass / k, p.com / L, math.sqrt(p.inertia / p.mass) / L))
    return tuple(out)


def _positive_number(v) -> bool:
    """True for a finite real number > 0 (a Python or NumPy scalar, or a 0-d array)."""
    try:
        return not isinstance(v, (bool, str)) and np.ndim(v) == 0 and math.isfinite(float(v)) and float(v) > 0
    except (TypeError, ValueError):
        return False


def _prior_options(model: Model, tables, rows, count, floor):
    """Checked (tables, rows, count, floor) of :func:`table_prior`."""
    if isinstance(tables, str):
        tables = (tables,)
    try:
        tables = tuple(tables)
    except TypeError:
        raise ValueError(f"tables must be a table name or a sequence of them, got {tables!r}") from None
    if not tables:
        raise ValueError("tables must name at least one anthropometric table")
    for t in tables:
        table_rows(t)  # "unknown anthropometric table ...; the tables are [...]"
    if len(set(tables)) != len(tables):
        raise ValueError(f"tables names a table twice: {list(tables)} (the spread is across distinct tables)")
    try:
        fl = np.asarray(floor, dtype=float)
    except (TypeError, ValueError):
        fl = None
    if fl is None or fl.shape != (4,) or not (np.isfinite(fl).all() and (fl > 0).all()):
        raise ValueError("floor must be 4 finite numbers > 0 (mass fraction, com along / L, com across / L, "
                         f"inertia fraction), got {floor!r}")  # fmt: skip
    names = tuple(model.names)
    rows = {} if rows is None else rows
    if not isinstance(rows, dict):
        raise ValueError(f"rows must be a dict {{segment: row}} or {{segment: {{table: row}}}}, got {rows!r}")
    for s, r in rows.items():
        if s not in names:
            raise ValueError(f"rows names {s!r}, which is not a segment of the model; its segments are {list(names)}")
        per = r if isinstance(r, dict) else {None: r}
        for t, row in per.items():
            if t is not None:
                table_rows(t)
            if not isinstance(row, str):
                raise ValueError(f"rows[{s!r}] must be a table row name or a dict {{table: row name}}, got {r!r}")
    count = {} if count is None else count
    if not isinstance(count, dict):
        raise ValueError(f"count must be a dict {{segment: number of identical segments}}, got {count!r}")
    for s, k in count.items():
        if s not in names:
            raise ValueError(f"count names {s!r}, which is not a segment of the model; its segments are {list(names)}")
        if not _positive_number(k):
            raise ValueError(f"count[{s!r}] must be a number > 0, got {k!r}")
    return tables, rows, count, fl


def table_prior(model: Model, body_mass: float | None = None, *,
                tables: str | Sequence[str] = ("dempster", "deleva_male", "deleva_female"),
                center: Model | None = None, rows: dict | None = None, count: dict | None = None,
                floor: Sequence[float] = (0.05, 0.02, 0.02, 0.10)) -> Prior:  # fmt: skip
    """A prior from the anthropometric tables: their mean, and their spread.

    For each segment and each table, with the model's segment lengths L and the body
    mass M: m = k f_m M, c_along = f_c L, I = m (f_k L)^2 (see
    :func:`jaxmb.segment_parameters`), k the segment's ``count``. The fractions come
    from the table row of the segment's name ("shank" and "leg" are the same row;
    ``rows`` names others), with f_c measured from the row's first endpoint: the
    proximal joint for the limbs, but the cranial end for de Leva's head and trunk
    rows and Dempster's thorax, abdomen and pelvis (see :mod:`jaxmb.anthropometry`).
    A model with the segment names and parents of :func:`jaxmb.seven_segment_human`
    takes, for every segment that ``rows`` does not name, the fractions of that
    builder for each table (its composite trunk and head, turned around where the
    table measures from the cranial end), and counts its legs and arms twice
    (k = 2: the builder lumps both sides), so that the mean of one table reproduces
    ``seven_segment_human(table=...)`` at the model's lengths.

    The spread is the standard deviation across the tables (the bundled tables give
    no within-population spread; the disagreement between Dempster's cadavers and
    Zatsiorsky-Seluyanov's scans, adjusted by de Leva, is the uncertainty a user
    faces when choosing one), never less than ``floor`` (fractions of the value for
    mass and inertia, of L for the centre of mass). The centre of mass across the
    axis has mean 0 and sd floor[2] L.

    Args:
      model: the model (segment names and lengths).
      body_mass: M, kg; needed unless ``center`` is given.
      tables: a table name or a sequence of them (at least one; see
        :func:`jaxmb.anthropometry.tables`).
      center: optional model whose parameters become the mean, the tables giving
        only the relative spread (mass and inertia: coefficient of variation; com:
        sd of the fraction times L). Use it for bands around a known model.
      rows: optional ``{segment name: row name}`` (the same row in every table) or
        ``{segment name: {table: row name}}`` (tables name rows differently; a
        table left out uses the default row).
      count: optional ``{segment name: k}``: the number of identical segments the
        model's segment stands for (2 for both legs lumped into one). Default 1,
        and 2 for the legs and arms of a seven-segment human (see above).
      floor: minimum sd: (mass fraction, com along / L, com across / L, inertia
        fraction), finite and > 0.

    Returns:
      :class:`Prior`.

    Raises:
      ValueError: an unknown table (listing the tables), a segment that is not a row
        of a table (pass ``rows``), a row without a value (Dempster gives no radius of
        gyration for the trunk, thorax, abdomen and pelvis: the message names the
        segment, the table and the value), or bad ``rows``, ``count``, ``floor`` or
        ``body_mass``.
    """
    tables, rows, count, fl = _prior_options(model, tables, rows, count, floor)
    if center is None and body_mass is None:
        raise ValueError("give body_mass (kg) to build a prior from the tables, or center= a model")
    M = 1.0 if body_mass is None else float(body_mass)
    if not (math.isfinite(M) and M > 0):
        raise ValueError(f"body_mass must be > 0 kg, got {body_mass}")
    L = np.asarray(model.length, dtype=float)
    seven = _is_seven_segment_human(model)
    vals = []
    for t in tables:
        rows_t = table_rows(t)
        per = []
        for i, s in enumerate(model.names):
            given = rows.get(s)
            if isinstance(given, dict):
                given = given.get(t)
            k = float(count.get(s, _SEVEN_SEGMENT_SIDES.get(s, 1) if seven else 1))
            if given is None and seven:
                fm, fc, fk = _seven_segment_fractions(t)[i]
                label = f"seven_segment_human(table={t!r})'s {s}"
            else:
                cands = (given,) if given is not None else _ALIASES.get(s, (s,))
                key = next((row_key(c) for c in cands if row_key(c) in rows_t), None)
                if key is None:
                    what = f"row {given!r} (from rows=)" if given is not None else f"segment {i} ({s!r})"
                    raise ValueError(f"{what} is not a row of table {t!r}: pass rows={{{s!r}: 'row name'}} or "
                                     f"{{{s!r}: {{{t!r}: 'row name'}}}}; its rows are {list(rows_t)}")  # fmt: skip
                row = rows_t[key]
                fm, fc, fk, label = row.mass, row.com, row.gyration, f"row {row.label!r}"
            for value, what in ((fm, "mass fraction"), (fc, "centre of mass fraction"),
                                (fk, "radius of gyration")):  # fmt: skip
                if not math.isfinite(value):
                    raise ValueError(f"segment {i} ({s!r}): table {t!r} ({label}) gives no {what} (it is {value}): "
                                     f"choose another row (rows={{{s!r}: {{{t!r}: 'row name'}}}}) or leave the "
                                     "table out (tables=)")  # fmt: skip
            m = k * fm * M
            per.append([m, fc, 0.0, m * (fk * L[i]) ** 2])  # com as a fraction for now
        vals.append(per)
    v = np.asarray(vals)  # (tables, n, 4)
    sd_ = v.std(0, ddof=1) if len(tables) > 1 else np.zeros(v.shape[1:])
    mean = v.mean(0)
    if center is None:
        mean = mean.copy()
        mean[:, 1] *= L
        sd = np.stack([np.maximum(sd_[:, 0], fl[0] * mean[:, 0]), np.maximum(sd_[:, 1] * L, fl[1] * L),
                       fl[2] * L, np.maximum(sd_[:, 3], fl[3] * mean[:, 3])], 1)  # fmt: skip
    else:
        mean = np.asarray(to_physical(center), dtype=float)
        cv = sd_ / np.where(v.mean(0) != 0, np.abs(v.mean(0)), 1.0)
        sd = np.stack([np.maximum(cv[:, 0], fl[0]) * mean[:, 0], np.maximum(sd_[:, 1], fl[1]) * L,
                       fl[2] * L, np.maximum(cv[:, 3], fl[3]) * mean[:, 3]], 1)  # fmt: skip
    for nm, a in (("mean", mean), ("sd", sd)):
        if not np.isfinite(a).all():  # e.g. a center model with a NaN, or a zero length
            i, j = np.argwhere(~np.isfinite(a))[0]
            raise ValueError(f"the prior {nm} of {PHYSICAL[j]}[{model.names[i]}] is {a[i, j]}")
    return Prior(mean, sd)


def _check_prior(model: Model, prior) -> Prior:
    n = model.segments
    if isinstance(prior, Model):
        raise ValueError("prior must be a Prior(mean, sd) (e.g. table_prior(model, body_mass)), not a Model")
    try:
        mean, sd = prior
    except (TypeError, ValueError):
        raise ValueError("prior must be a Prior(mean, sd) with two (segments, 4) arrays") from None
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    for nm, a in (("prior mean", mean), ("prior sd", sd)):
        if a.shape != (n, 4):
            raise ValueError(f"{nm} must have shape ({n}, 4) (mass, com_along, com_across, inertia), got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"{nm} is not finite")
    if (sd <= 0).any():
        i, j = np.argwhere(sd <= 0)[0]
        raise ValueError(f"prior sd of {PHYSICAL[j]}[{model.names[i]}] must be > 0, got {sd[i, j]}")
    if (mean[:, [0, 3]] <= 0).any():
        raise ValueError("prior mean mass and inertia must be > 0")
    return Prior(mean, sd)


# --------------------------------------------------------------------------- fit
