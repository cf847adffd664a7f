"""Body segment parameters from anthropometric tables, and ready-made human models.

Tables (bundled in ``jaxmb/data``; full references in ``jaxmb/data/SOURCES.txt``):

- ``"dempster"``: W. T. Dempster (1955) as tabulated by D. A. Winter, *Biomechanics
  and Motor Control of Human Movement*, Table 4.1 (``dempster_winter.tsv``). Radius
  of gyration: the column "about the centre of mass". Segment lengths from height:
  Winter's Figure 4.1 (after Drillis & Contini 1966), ``winter_segment_lengths.tsv``.
- ``"deleva_male"``, ``"deleva_female"``: P. de Leva (1996), J. Biomech. 29(9),
  Table 4 (``deleva_male.tsv``, ``deleva_female.tsv``). Radius of gyration: the
  column about the *transverse* axis (mediolateral), the axis of rotation in the
  sagittal plane, which is the plane of jaxmb's models. De Leva's "sagittal" radius
  is about the sagittal (anteroposterior) axis: rotation in the frontal plane. The
  tables themselves show which is which: the upper trunk, wider than it is deep,
  has r_sag 0.716 > r_trans 0.454 (male), the head, deeper than it is wide, has
  r_sag 0.362 < r_trans 0.376. Segment lengths from height: de Leva's mean
  segment lengths scaled by ``height / stature`` of his reference subjects (1.741 m
  male, 1.735 m female), ``deleva_lengths.tsv``.

For a segment of length ``L`` (m) of a body of mass ``M`` (kg), with the table's
mass fraction ``f_m``, CM fraction ``f_c`` and radius-of-gyration fraction ``f_k``:

    m = f_m M,     d = f_c L,     I = m (f_k L)^2   (about the centre of mass).

``d`` is measured from the table's first endpoint: the proximal joint for the limbs,
the hip (greater trochanter) for Dempster's trunk rows, but the cranial end for de
Leva's head and trunk rows (VERT, SUPR, CERV, MIDS) and for Dempster's thorax,
abdomen and pelvis rows. The model builders below turn these around where a
segment points the other way.

Everything here is eager (numpy and Python floats, outside ``jit``); the models it
returns are ordinary :class:`jaxmb.Model` pytrees.
"""

from __future__ import annotations

import functools
import math
import re
from importlib import resources
from typing import NamedTuple, Sequence

import jax
import numpy as np

from .model import Model, tree

__all__ = [
    "SegmentParameters",
    "segment_parameters",
    "segments",
    "tables",
    "two_link_arm",
    "three_segment_leg",
    "seven_segment_human",
    "from_vertical",
    "to_vertical",
    "SEVEN_SEGMENT_NAMES",
    "SEVEN_SEGMENT_POINTING",
]

# table name -> (file, column of the CM fraction, column of the radius of gyration)
_TABLES = {
    "dempster": ("dempster_winter.tsv", "CM prox", "Rg CM"),
    "deleva_male": ("deleva_male.tsv", "CM Long", "Rg Trans"),  # about the mediolateral axis
    "deleva_female": ("deleva_female.tsv", "CM Long", "Rg Trans"),
}

# The multibody notes (Duarte, section "Numerical simulation"): upper arm 0.188 H and
# forearm + hand 0.253 H (elbow to fingertip), i.e. Winter's Fig. 4.1 landmark heights
# shoulder 0.818 H - elbow 0.630 H and elbow 0.630 H - fingertip 0.377 H.
NOTES_ARM_LENGTHS = (0.188, 0.253)

#: Segment names of :func:`seven_segment_human`, in index order.
SEVEN_SEGMENT_NAMES = ("trunk", "thigh", "shank", "foot", "head", "upper_arm", "forearm_hand")
#: Parent indices of :func:`seven_segment_human`.
SEVEN_SEGMENT_PARENT = (-1, 0, 1, 2, 0, 0, 5)
#: The vertical each seven-segment angle of Blajer & Czaplicki is measured from
#: (for :func:`from_vertical` / :func:`to_vertical`): trunk and head point up from
#: their proximal joints, legs and arms down; the foot also uses the "down"
#: convention of their eq. (3.1) (horizontal foot: phi = pi/2).
SEVEN_SEGMENT_POINTING = ("up", "down", "down", "down", "up", "down", "down")


class SegmentParameters(NamedTuple):
    """Inertial parameters of one segment (SI units).

    Attributes:
      length: segment length L, m.
      mass: segment mass m, kg.
      com: distance of the centre of mass from the table's first endpoint, m.
      inertia: moment of inertia about the centre of mass, m (k L)^2, kg m^2
        (nan where the table gives no radius of gyration).
    """

    length: float
    mass: float
    com: float
    inertia: float


class _Row(NamedTuple):
    label: str  # as printed in the table
    endpoints: str
    mass: float  # fraction of body mass
    com: float  # fraction of the length, from the first endpoint
    gyration: float  # radius of gyration about the CM / length (nan: not given)
    length: float | None  # fraction of body height (None: no length from height)


# ------------------------------------------------------------------------ tables


def _key(name: str) -> str:
    """Normalised segment name: 'Upper arm' / 'upper-arm' / 'UPPER_ARM' -> 'upper_arm'."""
    return re.sub(r"[\s\-_]+", "_", name.strip().lower())


def _read_tsv(filename: str) -> list[dict]:
    text = (resources.files("jaxmb") / "data" / filename).read_text(encoding="utf-8")
    lines = [line.split("\t") for line in text.splitlines() if line.strip()]
    header = [h.strip() for h in lines[0]]
    return [dict(zip(header, (c.strip() for c in line))) for line in lines[1:]]


@functools.lru_cache(maxsize=None)
def _table(table: str) -> dict:
    """The rows of one table, keyed by normalised segment name (read once)."""
    filename, com_col, rg_col = _TABLES[table]
    rows = _read_tsv(filename)
    if table == "dempster":
        fractions = {_key(r["Segment"]): float(r["Fraction"]) for r in _read_tsv("winter_segment_lengths.tsv")}
    else:
        sex = "Male (mm)" if table == "deleva_male" else "Female (mm)"
        lengths = {_key(r["Segment"]): r for r in _read_tsv("deleva_lengths.tsv")}
        stature = float(lengths.pop("stature")[sex])
        fractions = {}
        for k, r in lengths.items():
            fractions[k] = (float(r[sex]), r["Endpoints"])
    out = {}
    for r in rows:
        k = _key(r["Segment"])
        endpoints = r.get("Definition", r.get("Endpoints"))
        frac = fractions.get(k)
        if table != "dempster" and frac is not None:
            mm, ends = frac
            if ends != endpoints:  # lengths are paired by endpoints, never by row name
                raise RuntimeError(f"deleva_lengths.tsv: {r['Segment']} is {ends}, the table says {endpoints}")
            frac = mm / stature
        out[k] = _Row(
            label=r["Segment"],
            endpoints=endpoints,
            mass=float(r["Mass"]),
            com=float(r[com_col]),
            gyration=float(r[rg_col]),
            length=frac,
        )
    return out


def tables() -> tuple:
    """Names of the available tables: ("dempster", "deleva_male", "deleva_female")."""
    return tuple(_TABLES)


def _check_table(table) -> str:
    if not isinstance(table, str) or table not in _TABLES:
        raise ValueError(f"unknown anthropometric table {table!r}; the tables are {list(_TABLES)}")
    return table


def segments(table: str = "dempster") -> tuple:
    """Segment names of a table, in the table's order (normalised: lower case, '_').

    Raises:
      ValueError: for an unknown table.
    """
    return tuple(_table(_check_table(table)))


def _row(table, segment) -> _Row:
    rows = _table(_check_table(table))
    if not isinstance(segment, str) or _key(segment) not in rows:
        raise ValueError(
            f"unknown segment {segment!r} in table {table!r}; its segments are {list(rows)}"
        )
    return rows[_key(segment)]


def _positive(name: str, value, unit: str) -> float:
    """A finite, positive Python float, or a ValueError naming the argument."""
    # np.asarray(..., dtype=float) would parse "70" and take True as 1: refuse both
    if isinstance(value, jax.core.Tracer):
        raise ValueError(f"{name} must be a concrete number in {unit}, got a traced value (under jax.jit, grad or "
                         "vmap): the anthropometric models are built from their tables eagerly. To differentiate "
                         "with respect to it, build the model once and scale its parameters in the traced "
                         "function (model.replace(mass=..., inertia=...), which jax.grad follows)")  # fmt: skip
    kind = getattr(np.asarray(value) if not isinstance(value, jax.core.Tracer) else value, "dtype", None)
    if isinstance(value, (str, bytes, bool, np.bool_)) or kind is None or kind.kind not in "iuf":
        raise ValueError(f"{name} must be a real number in {unit}, got {value!r}")
    try:
        arr = np.asarray(value, dtype=float)
    except Exception as err:  # tracers (this API is eager), ...
        raise ValueError(f"{name} must be a real number in {unit}, got {value!r}") from err
    if arr.ndim != 0:
        raise ValueError(f"{name} must be a scalar in {unit}, got shape {arr.shape}")
    x = float(arr)
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite, got {x} {unit}")
    if x <= 0.0:
        raise ValueError(f"{name} must be > 0, got {x} {unit}")
    # the tables are of adults' segments: a size far outside a person's is a unit slip
    # (a height of 175 gave a 42.9 m thigh with an inertia of 1342 kg m^2, silently)
    span = _HUMAN.get(name)
    if span is not None and not span[0] <= x <= span[1]:
        raise ValueError(f"{name} {x:g} {unit} is outside a person's {span[0]:g} to {span[1]:g} {unit}: give it in "
                         f"{_UNIT_WORDS[unit]}{span[2]}")  # fmt: skip
    return x


#: plausible sizes (low, high, hint) of the arguments the tables scale
_HUMAN = {
    "height": (0.3, 3.0, " (centimetres / 100)"),
    "body_mass": (1.0, 500.0, " (pounds x 0.4536, grams / 1000)"),
    "length": (0.01, 2.0, " (centimetres / 100)"),
}
_UNIT_WORDS = {"m": "metres", "kg": "kilograms"}


def segment_parameters(
    segment: str,
    *,
    body_mass,
    height=None,
    length=None,
    table: str = "dempster",
) -> SegmentParameters:
    """Length, mass, centre of mass and moment of inertia of one body segment.

    ``m = f_m M``, ``d = f_c L``, ``I = m (f_k L)^2`` with the table's fractions (see
    the module docstring for the tables and the radius of gyration used).

    Args:
      segment: a name from :func:`segments` (case, spaces and '-' are ignored).
      body_mass: total body mass M, kg (> 0).
      height: body height H, m (> 0): the length is then taken from the table's
        length fraction (Winter's Fig. 4.1 for "dempster", de Leva's mean length
        times H / stature for de Leva). Give ``height`` or ``length``, not both.
      length: measured segment length L between the table's endpoints, m (> 0).
      table: "dempster", "deleva_male" or "deleva_female".

    Returns:
      :class:`SegmentParameters` (length m, mass kg, com m from the table's first
      endpoint, inertia kg m^2 about the CM; inertia is nan where the table gives
      no radius of gyration: Dempster's thorax, abdomen, pelvis and trunk rows).

    Raises:
      ValueError: unknown table or segment (listing the known ones), a
        non-positive or non-finite mass, height or length, neither or both of
        height and length, or a height for a segment without a length fraction.
    """
    row = _row(table, segment)
    M = _positive("body_mass", body_mass, "kg")
    if height is not None and length is not None:
        raise ValueError("give either height= (m) or a measured length= (m), not both")
    if length is not None:
        L = _positive("length", length, "m")
    elif height is not None:
        H = _positive("height", height, "m")
        if row.length is None:
            raise ValueError(
                f"table {table!r} gives no segment length for {row.label!r} ({row.endpoints}) "
                "as a fraction of height; pass its measured length= in m"
            )
        L = row.length * H
    else:
        raise ValueError("give the body height= (m) or the segment's measured length= (m)")
    m = row.mass * M
    return SegmentParameters(length=L, mass=m, com=row.com * L, inertia=m * (row.gyration * L) ** 2)


# ----------------------------------------------------------------- composites


class _Part(NamedTuple):
    """A rigid body on a segment axis: mass (kg), CM along the axis from the
    segment's proximal joint (m), moment of inertia about its own CM (kg m^2)."""

    mass: float
    com: float
    inertia: float


def _part(p: SegmentParameters, *, flip: bool = False, offset: float = 0.0, count: int = 1) -> _Part:
    """A table segment placed on a model axis: ``flip`` measures the CM from the
    other endpoint (d -> L - d), ``offset`` shifts it along the axis, ``count``
    lumps identical bilateral segments (m and I times count)."""
    d = p.length - p.com if flip else p.com
    return _Part(count * p.mass, offset + d, count * p.inertia)


def _combine(*parts: _Part) -> _Part:
    """Rigid union on one axis: m = sum m_i, c = sum m_i c_i / m,
    I = sum (I_i + m_i (c_i - c)^2) (parallel-axis theorem)."""
    m = sum(p.mass for p in parts)
    c = sum(p.mass * p.com for p in parts) / m
    return _Part(m, c, sum(p.inertia + p.mass * (p.com - c) ** 2 for p in parts))


def _remove(whole: _Part, part: _Part) -> _Part:
    """The rest of ``whole`` once ``part`` is taken away (inverse of _combine)."""
    m = whole.mass - part.mass
    c = (whole.mass * whole.com - part.mass * part.com) / m
    inertia = whole.inertia + whole.mass * (whole.com - c) ** 2 - part.inertia - part.mass * (part.com - c) ** 2
    if m <= 0 or inertia <= 0:
        raise RuntimeError("inconsistent table: removing a part leaves no mass or inertia")
    return _Part(m, c, inertia)


def _build(parent, lengths, parts, attach, kw) -> Model:
    return tree(
        parent,
        np.array(lengths),
        np.array([p.com for p in parts]),
        np.array([p.mass for p in parts]),
        np.array([p.inertia for p in parts]),
        **{"attach": attach, **kw},
    )


# ---------------------------------------------------------------------- models


def two_link_arm(height=1.70, body_mass=70.0, **kw) -> Model:
    """The planar upper limb of the multibody notes: upper arm and forearm + hand.

    Reproduces the notes (Duarte, "Multibody dynamics of simple biomechanical
    models", section "Numerical simulation") exactly: with H the height and M the
    body mass,

        L1 = 0.188 H,  d1 = 0.436 L1,  m1 = 0.0280 M,  I1 = m1 (0.322 L1)^2
        L2 = 0.253 H,  d2 = 0.682 L2,  m2 = 0.0220 M,  I2 = m2 (0.468 L2)^2

    The fractions 0.436, 0.0280, 0.322 and 0.682, 0.0220, 0.468 are Dempster's
    upper-arm and forearm-and-hand rows (read from the "dempster" table); the
    lengths are the notes' (Winter's Fig. 4.1 gives 0.186 H for the upper arm, and
    Dempster's forearm-and-hand fractions refer to the elbow-to-ulnar-styloid
    length 0.146 H, while the notes apply them to elbow-to-fingertip 0.253 H).

    Args:
      height: body height H, m.
      body_mass: body mass M, kg.
      **kw: forwarded to :func:`jaxmb.tree` (gravity, base, coordinates, names,
        origin). Defaults: fixed base at the shoulder (origin (0, 0)), relative
        coordinates (shoulder and elbow angles), names ("upper_arm", "forearm_hand").

    Returns:
      A two-segment :class:`jaxmb.Model`.
    """
    if "table" in kw:  # the notes' arm is Dempster's by construction
        raise ValueError("two_link_arm reproduces the notes' arm, Dempster's fractions with the notes' lengths: it "
                         "takes no table=; for another table build the arm from segment_parameters('upper_arm', ..., "
                         "table=...) and jaxmb.chain")  # fmt: skip
    H = _positive("height", height, "m")
    M = _positive("body_mass", body_mass, "kg")
    upper = segment_parameters("upper_arm", body_mass=M, length=NOTES_ARM_LENGTHS[0] * H)
    lower = segment_parameters("forearm_hand", body_mass=M, length=NOTES_ARM_LENGTHS[1] * H)
    kw.setdefault("names", ("upper_arm", "forearm_hand"))
    return _build((-1, 0), [upper.length, lower.length], [_part(upper), _part(lower)], None, kw)


# the table rows used for the legs, arms, head and trunk of each table
_LEG_ROWS = {
    "dempster": ("thigh", "leg", "foot"),  # GTR-KJC, KJC-MMAL, LMAL-MT2
    "deleva_male": ("thigh", "shank", "foot"),  # HJC-KJC, KJC-AJC, HEEL-TTIP
    "deleva_female": ("thigh", "shank", "foot"),
}


def _leg(H: float, M: float, table: str, count: int):
    """Thigh, shank and foot (lengths and parts), CM measured from each proximal
    joint; the foot's axis starts at the ankle (see three_segment_leg)."""
    ps = [segment_parameters(name, body_mass=M, height=H, table=table) for name in _LEG_ROWS[table]]
    return [p.length for p in ps], [_part(p, count=count) for p in ps]


def three_segment_leg(height, body_mass, table: str = "dempster", **kw) -> Model:
    """One lower limb: thigh, shank and foot, a chain hinged at the hip.

    Segments (rows of ``table``; lengths from the height, see
    :func:`segment_parameters`):

    - "dempster": thigh (GTR-KJC, 0.245 H), leg (KJC-MMAL, 0.246 H), foot (LMAL-MT2;
      length: Winter's Fig. 4.1 foot length 0.152 H, heel to toe, an approximation).
    - de Leva: thigh (HJC-KJC), shank (KJC-AJC), foot (HEEL-TTIP).

    The foot is attached at the ankle (the shank's distal end) and its axis starts
    there: its CM lies at the table's CM fraction of the foot length from the ankle,
    i.e. the table's first endpoint (Dempster's lateral malleolus, de Leva's heel)
    is taken at the ankle. This places the foot's CM a few centimetres off; the
    foot is 1.3-1.5 % of body mass.

    Dempster's foot fractions (CM 0.5, radius of gyration 0.475) are defined on the
    malleolus-to-metatarsal length, which Winter's Fig. 4.1 does not give; applied
    to the heel-to-toe length 0.152 H they give a foot inertia that grows with the
    square of the longer length: 0.0162 kg m^2 at 1.75 m and 70 kg, 4.2 times de
    Leva's heel-to-toe foot (0.0039 kg m^2, male) and its CM 13.3 cm from the ankle
    (de Leva 11.5 cm). Prefer a de Leva table, or ``replace`` the foot's ``com``
    and ``inertia``, where the foot's rotation matters.

    Args:
      height: body height H, m.
      body_mass: body mass M, kg.
      table: "dempster", "deleva_male" or "deleva_female".
      **kw: forwarded to :func:`jaxmb.tree`. Defaults: fixed base at the hip,
        relative coordinates, names ("thigh", "shank", "foot").

    Returns:
      A three-segment :class:`jaxmb.Model`.
    """
    H = _positive("height", height, "m")
    M = _positive("body_mass", body_mass, "kg")
    lengths, parts = _leg(H, M, _check_table(table), 1)
    kw.setdefault("names", ("thigh", "shank", "foot"))
    return _build((-1, 0, 1), lengths, parts, None, kw)


def _seven_segment(H: float, M: float, table: str):
    """Lengths (7,) and parts (7,) of the seven-segment human, in SEVEN_SEGMENT_NAMES
    order, CM measured from each segment's proximal joint."""
    sp = functools.partial(segment_parameters, body_mass=M, height=H, table=table)
    leg_lengths, leg_parts = _leg(H, M, table, 2)  # both legs together
    if table == "dempster":
        # Trunk GTR-SJC (hip to shoulder), 0.288 H. Dempster gives no radius of
        # gyration for the trunk alone, so the trunk is his trunk-head-neck minus
        # his head-neck (mass 0.578 - 0.081 = 0.497 M, the table's trunk mass; CM
        # and inertia by the parallel-axis theorem): trunk + head reproduce the
        # trunk-head-neck row exactly. The head-neck (C7T1 to ear canal, CM at the
        # ear canal) stands on the trunk's axis above the shoulder.
        thn = sp("trunk_head_neck")
        head = sp("head_neck")
        Lt, Lh = thn.length, head.length
        head_part = _part(head)
        trunk_part = _remove(_part(thn), _part(head, offset=Lt))
        upper = sp("upper_arm")
        lower = sp("forearm_hand")  # EJC-STYL, 0.146 H: Dempster's own definition
        arm_lengths = [upper.length, lower.length]
        arm_parts = [_part(upper, count=2), _part(lower, count=2)]
    else:
        # Trunk 3, MIDS-MIDH (mid-shoulder to mid-hip joint centres): hip to
        # shoulder; its CM is given from MIDS, so it is measured back from the hip.
        t3 = sp("trunk_3")
        Lt = t3.length
        trunk_part = _part(t3, flip=True)
        # Head 2, VERT-CERV, on the trunk's axis: the cervicale lies
        # L(Trunk 2, CERV-MIDH) - L(Trunk 3, MIDS-MIDH) above the mid-shoulder (both
        # rows end at MIDH; the points taken collinear, as in upright standing).
        # The head segment runs from MIDS to the vertex; its CM is given from VERT.
        neck = sp("trunk_2").length - Lt
        h2 = sp("head_2")
        Lh = neck + h2.length
        head_part = _part(h2, flip=True, offset=neck)
        # forearm (EJC-WJC) and hand (WJC-MET3) lumped into one rigid segment of
        # forearm length, the hand's CM beyond the wrist on the same axis
        upper = sp("upper_arm")
        fore = sp("forearm")
        hand = sp("hand")
        arm_lengths = [upper.length, fore.length]
        arm_parts = [
            _part(upper, count=2),
            _combine(_part(fore, count=2), _part(hand, offset=fore.length, count=2)),
        ]
    lengths = [Lt, *leg_lengths, Lh, *arm_lengths]
    parts = [trunk_part, *leg_parts, head_part, *arm_parts]
    return lengths, parts


def seven_segment_human(height=1.75, body_mass=70.0, table: str = "dempster", **kw) -> Model:
    """The planar seven-segment human of Blajer & Czaplicki (2005, Fig. 1a).

    Segments (``SEVEN_SEGMENT_NAMES``) and parents (``SEVEN_SEGMENT_PARENT``):

        0 trunk (root)        hip -> shoulder
        1 thigh (parent 0)    attached at the hip, the trunk's proximal point
        2 shank (parent 1)    at the knee
        3 foot (parent 2)     at the ankle; its axis starts at the ankle
        4 head (parent 0)     at the trunk's distal end (shoulder level), pointing up
        5 upper_arm (parent 0) at the shoulder, the trunk's distal end
        6 forearm_hand (parent 5) at the elbow

    Legs and arms move "both together": each of these segments carries the mass
    and moment of inertia of the left and right segments summed (2x). With the
    defaults (floating base at the hip, absolute coordinates) q = [x_H, y_H, theta_1
    ... theta_7] (9 coordinates; 6 joint moments), like the paper's q = [x_H, y_H,
    phi_1 ... phi_7]; convert the paper's angles, measured from the vertical, with
    ``from_vertical(phi, SEVEN_SEGMENT_POINTING)``.

    Parameters from ``table`` (lengths from the height as in
    :func:`segment_parameters`; the paper prints none):

    - "dempster": trunk GTR-SJC (0.288 H) = Dempster's trunk-head-neck minus his
      head-neck (mass 0.497 M; the CM, at 0.538 of the trunk from the hip, and the
      moment of inertia follow from the parallel-axis theorem, since Winter's table
      gives no radius of gyration for the trunk alone); head-neck C7T1 to ear canal
      (0.118 H, CM at the ear canal); thigh, leg and foot as in
      :func:`three_segment_leg`; upper arm (0.186 H); forearm-and-hand row over the
      forearm length EJC-STYL (0.146 H), as Dempster defines it.
    - de Leva: trunk = "Trunk 3" (MIDS-MIDH: mid-shoulder to mid-hip); head = "Head
      2" (VERT-CERV) placed on the trunk axis with the cervicale
      L(Trunk 2) - L(Trunk 3) above the mid-shoulder, the head segment running
      from the mid-shoulder to the vertex; thigh, shank (KJC-AJC), foot; upper arm;
      forearm (EJC-WJC) and hand (WJC-MET3) lumped rigidly (parallel-axis theorem)
      over the forearm length.

    Args:
      height: body height H, m.
      body_mass: body mass M, kg.
      table: "dempster", "deleva_male" or "deleva_female".
      **kw: forwarded to :func:`jaxmb.tree`. Defaults: base="floating",
        coordinates="absolute", names=SEVEN_SEGMENT_NAMES, attach as above
        (``[None, 0.0, None, None, None, None, None]``: see :func:`jaxmb.tree`).

    Returns:
      A seven-segment :class:`jaxmb.Model` (dof 9 with the floating base).
    """
    H = _positive("height", height, "m")
    M = _positive("body_mass", body_mass, "kg")
    lengths, parts = _seven_segment(H, M, _check_table(table))
    # the thighs at the trunk's proximal point (the hip); every other joint at its
    # parent's distal end, following its length (replace(length=...), grad)
    attach = [None, 0.0, None, None, None, None, None]
    kw.setdefault("base", "floating")
    kw.setdefault("coordinates", "absolute")
    kw.setdefault("names", SEVEN_SEGMENT_NAMES)
    kw.setdefault("attach", attach)
    attach = kw.pop("attach")
    return _build(SEVEN_SEGMENT_PARENT, lengths, parts, attach, kw)


# ------------------------------------------------------- angles from the vertical

_OFFSET = {"down": -0.5 * math.pi, "up": 0.5 * math.pi}


def _offsets(pointing):
    if isinstance(pointing, str):
        pointing = (pointing,)
        scalar = True
    else:
        pointing = tuple(pointing)
        scalar = False
    for p in pointing:
        if p not in _OFFSET:
            raise ValueError(f"pointing must be 'down' or 'up' (or a sequence of them), got {p!r}")
    off = np.array([_OFFSET[p] for p in pointing])
    return off[0] if scalar else off


def _angles(x):
    """JAX arrays as they are; anything else as a NumPy array of its own float dtype
    (integers and Python numbers as float64)."""
    if isinstance(x, jax.Array):
        return x
    x = np.asarray(x)
    return x if x.dtype.kind == "f" else x.astype(float)


def _shift(x, pointing, sign: float):
    """x + sign * offsets, with a sequence of pointings matched to x's last axis."""
    x, off = _angles(x), _offsets(pointing)
    if np.ndim(off) and (np.ndim(x) == 0 or np.shape(x)[-1] != len(off)):
        raise ValueError(f"pointing has {len(off)} entries but the angles' last axis has "
                         f"{np.shape(x)[-1] if np.ndim(x) else 'none (a scalar)'}: give one pointing per angle, "
                         "or one str for all")  # fmt: skip
    # the offsets take the angles' float dtype: float32 stays float32 (NumPy offsets
    # are float64 and would promote it under x64)
    off = sign * off
    if getattr(x, "dtype", np.dtype(int)).kind == "f":
        off = off.astype(x.dtype)
    return x + off


def from_vertical(phi, pointing: str | Sequence[str] = "down"):
    """Segment angles from the vertical (Blajer & Czaplicki) to jaxmb absolute angles.

    Convention: ``phi`` is measured counter-clockwise from the vertical that the
    segment points along when ``phi = 0``: downward for "down" (their legs, eq. 3.1:
    ``x = x_H + c sin(phi)``, ``y = y_H - c cos(phi)``), upward for "up" (trunk,
    head: ``x = x_H - c sin(phi)``, ``y = y_H + c cos(phi)``, our choice; the paper
    prints no equation for them). jaxmb angles are counter-clockwise from +x, so

        theta = phi - pi/2  (down),     theta = phi + pi/2  (up).

    Both are counter-clockwise, so angular velocities, accelerations and the
    generalized forces of absolute coordinates are the same in phi and theta.

    Args:
      phi: angles from the vertical, rad; any shape (numpy or JAX array).
      pointing: "down", "up", or a sequence of them matching the last axis of
        ``phi`` (e.g. ``SEVEN_SEGMENT_POINTING`` for the seven angles).

    Returns:
      theta, same shape, rad (not wrapped).
    """
    return _shift(phi, pointing, 1.0)


def to_vertical(theta, pointing: str | Sequence[str] = "down"):
    """Inverse of :func:`from_vertical`: phi = theta + pi/2 (down), theta - pi/2 (up).

    Args:
      theta: jaxmb absolute angles, counter-clockwise from +x, rad; any shape.
      pointing: as in :func:`from_vertical`.

    Returns:
      phi, same shape, rad (not wrapped).
    """
    return _shift(theta, pointing, -1.0)


# ------------------------------------------- the tables for identification priors


def table_rows(table: str) -> dict:
    """The rows of an anthropometric table, keyed by normalised segment name
    (:func:`row_key`). Each row has ``label`` (as printed), ``mass`` (fraction of the
    body mass), ``com`` (fraction of the length from the row's first endpoint) and
    ``gyration`` (radius of gyration about the centre of mass / length; NaN where the
    table gives none).

    Raises:
      ValueError: for an unknown table (listing the tables).
    """
    return dict(_table(_check_table(table)))


def row_key(name: str) -> str:
    """A segment name as :func:`table_rows` keys it: 'Upper arm' -> 'upper_arm'."""
    return _key(name)


def seven_segment_parts(table: str = "dempster", height: float = 1.0, body_mass: float = 1.0) -> tuple:
    """The segments of :func:`seven_segment_human` before they become a model.

    Returns:
      (parents (7,), lengths (7,) m, parts (7,)), in the order of
      ``SEVEN_SEGMENT_NAMES``: each part has ``mass`` (kg), ``com`` (m from the
      segment's proximal joint) and ``inertia`` (kg m^2 about the centre of mass);
      the legs and arms hold both sides.
    """
    lengths, parts = _seven_segment(height, body_mass, _check_table(table))
    return SEVEN_SEGMENT_PARENT, lengths, parts


def table_row(table: str, segment: str) -> dict:
    """The fractions of one row of an anthropometric table.

    Args:
      table: a name from :func:`tables` ("dempster", "deleva_male", ...).
      segment: a segment of that table (:func:`segments`), e.g. "thigh".

    Returns:
      dict with "mass" (fraction of body mass), "com" (centre of mass, fraction of
      the length from the first endpoint), "gyration" (radius of gyration about the
      centre of mass, fraction of the length; NaN where not given) and "length"
      (fraction of body height, or None).

    Raises:
      ValueError: an unknown table or segment.

    Example:
      >>> table_row("dempster", "thigh")["mass"]
      0.1
    """
    r = _row(table, segment)
    return {"mass": r.mass, "com": r.com, "gyration": r.gyration, "length": r.length}


__all__ += ["table_rows", "table_row", "row_key", "seven_segment_parts"]
