"""Joint centres from 3-D markers for :func:`jaxmb.gait.sagittal`: the default marker
mapping (Plug-in-Gait labels), its checks, and the hip centre by Harrington et al.'s
regression from the pelvis markers."""

from __future__ import annotations

import numpy as np



#: Default markers of each joint centre (Plug-in-Gait labels; ``{S}`` is "R" or "L"):
#: the mean of the listed markers, or for the hip the regression of Harrington et al.
#: (2007) from the pelvis markers: ``("harrington", right ASIS, left ASIS, sacrum)``,
#: or for a marker set with two posterior superior iliac spines and no sacrum marker
#: ``("harrington", right ASIS, left ASIS, right PSIS, left PSIS)`` (the sacrum is
#: then the PSIS midpoint), e.g. ``("harrington", "R.ASIS", "L.ASIS", "R.PSIS", "L.PSIS")``.
DEFAULT_MAPPING = {
    "hip": ("harrington", "RASI", "LASI", "VSAC"),
    "knee": ("{S}KNE", "{S}KNE_2"),  # lateral and medial epicondyles (read_c3d's renaming)
    "ankle": ("{S}ANK", "{S}ANK_2"),  # lateral and medial malleoli
    "toe": ("{S}TOE",),
    "heel": ("{S}HEE",),
}


def _unit(v, what):
    n = float(np.linalg.norm(v))
    if not np.isfinite(n) or n < 1e-9:
        raise ValueError(f"cannot find the {what} from the data")
    return np.asarray(v, float) / n


#: the end of sagittal's error for a marker that the file lacks (the command line
#: puts its own option in its place)
MAPPING_HINT = "(override with mapping=)"


def _marker(markers, label, side):
    lab = label.replace("{S}", side)
    try:
        return markers.get(lab)
    except KeyError as e:
        src = getattr(markers, "source", None)
        raise ValueError(f"sagittal: {f'{src}: ' if src else ''}{e.args[0]} {MAPPING_HINT}") from None


def _harrington_labels(spec) -> tuple:
    """The marker labels of a ``("harrington", ...)`` hip entry of a mapping, checked:
    (right ASIS, left ASIS, sacrum) or (right ASIS, left ASIS, right PSIS, left PSIS).

    Raises:
      ValueError: another number of markers, or a marker named twice.
    """
    labels = tuple(spec[1:])
    if len(labels) not in (3, 4):
        got = f"{len(labels)}: {', '.join(labels)}" if labels else "none"
        raise ValueError("a 'harrington' hip needs three markers (right ASIS, left ASIS, sacrum) or four (right "
                         f"ASIS, left ASIS, right PSIS, left PSIS; the sacrum is their midpoint), got {got}")  # fmt: skip
    twice = sorted({lab for lab in labels if labels.count(lab) > 1})
    if twice:
        raise ValueError(f"a 'harrington' hip names {', '.join(twice)} twice: {', '.join(labels)}")
    return labels


def check_mapping_entry(key, spec) -> None:
    """Refuse a malformed mapping entry before any data are read: a 'harrington'
    entry other than the hip's, or with the wrong markers (:func:`_harrington_labels`),
    or one without any label."""
    spec = (spec,) if isinstance(spec, str) else tuple(spec)
    if not spec:
        raise ValueError(f"mapping: the {key} names no marker")
    if spec[0] == "harrington":
        if key != "hip":
            raise ValueError(f"mapping: 'harrington' is the hip's regression, not the {key}'s: {', '.join(spec)}")
        _harrington_labels(spec)


def _joint_centre(markers, spec, side, up):
    """(T, 3) lab-frame joint centre, m, from a mapping entry: the mean of its markers,
    or Harrington et al.'s hip from ("harrington", RASIS, LASIS, sacrum) or
    ("harrington", RASIS, LASIS, RPSIS, LPSIS), the sacrum then the PSIS midpoint."""
    if isinstance(spec, str):
        spec = (spec,)
    spec = tuple(spec)
    if spec and spec[0] == "harrington":
        labels = _harrington_labels(spec)
        rasi, lasi = (_marker(markers, lab, side) for lab in labels[:2])
        back = [_marker(markers, lab, side) for lab in labels[2:]]
        sac = back[0] if len(back) == 1 else 0.5 * (back[0] + back[1])  # the PSIS midpoint
        # Harrington et al. (2007), J Biomech 40:595: the hip joint centre in a pelvis
        # frame (origin mid-ASIS; x anterior, y superior, z to the right), in mm from the
        # pelvis width PW (ASIS to ASIS) and depth PD (mid-ASIS to mid-PSIS):
        # x = -0.24 PD - 9.9, y = -0.30 PW - 10.9, z = +-(0.33 PW + 7.3).
        mid = 0.5 * (rasi + lasi)
        z = rasi - lasi
        pw = np.linalg.norm(z, axis=-1, keepdims=True)
        z = z / pw
        back = sac - mid
        x = -(back - np.sum(back * z, -1, keepdims=True) * z)
        pd = np.linalg.norm(x, axis=-1, keepdims=True)
        x = x / pd
        y = np.cross(z, x)
        s = 1.0 if side == "R" else -1.0
        pw_mm, pd_mm = pw * 1000, pd * 1000
        local = (-0.24 * pd_mm - 9.9, -0.30 * pw_mm - 10.9, s * (0.33 * pw_mm + 7.3))
        return mid + (local[0] * x + local[1] * y + local[2] * z) / 1000
    return np.mean([_marker(markers, lab, side) for lab in spec], axis=0)


def _src(x) -> str:
    """" (file name)" of a Markers or ForcePlates read from a file, else ""."""
    name = getattr(x, "source", None)
    return f" ({name})" if name else ""


def _spec_labels(spec, side) -> list:
    """The marker labels of a mapping entry, {S} replaced by ``side``."""
    spec = (spec,) if isinstance(spec, str) else tuple(spec)
    if spec and spec[0] == "harrington":
        spec = spec[1:]
    return [lab.replace("{S}", side) for lab in spec]
