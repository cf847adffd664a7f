"""Base parameters: the identifiable combinations of the barycentric parameters,
written out as the classical grouping rules write them; and the check, before a
fit, that the data determine the free parameters."""

from __future__ import annotations

import dataclasses
from typing import Sequence

import jax.numpy as jnp
import numpy as np

from ..model import Model
from ._parameters import QUANTITIES, _physical_names, parameter_names
from ._regressor import _check_quantity, regressor
from ._solver import _data_jacobian


@dataclasses.dataclass(frozen=True)
class BaseParameters:
    """The identifiable combinations of the barycentric parameters (base parameters).

    With ``K`` the (rank, 4 n) matrix that has the identity in the columns
    ``independent`` and ``beta`` in the columns ``dependent``, the data only see
    ``pi_b = K pi``: ``Y pi = Y[:, independent] pi_b`` for every regressor row the
    analysis was made from. The columns of ``null_space`` (``K null_space = 0``) are
    the directions along which the data do not change.

    Attributes:
      names: (4 n,) names of the barycentric parameters.
      rank: number of identifiable combinations.
      independent: (rank,) indices of the parameter that leads each combination.
      dependent: (4 n - rank,) indices of the others.
      beta: (rank, 4 n - rank) the coefficients of the dependent parameters.
      combinations: (rank,) each combination written out, e.g.
        ``"J[thigh] + L[thigh]^2*m[shank]"``.
      null_space: (4 n, 4 n - rank) unidentifiable directions, one per column.
      unidentifiable: (4 n - rank,) each direction written out (moving along it
        leaves the data unchanged).
      singular_values: of the stacked regressor, columns scaled to unit norm.
    """

    names: tuple
    rank: int
    independent: tuple
    dependent: tuple
    beta: np.ndarray
    combinations: tuple
    null_space: np.ndarray
    unidentifiable: tuple
    singular_values: np.ndarray

    @property
    def K(self) -> np.ndarray:
        """(rank, 4 n): pi_b = K pi."""
        K = np.zeros((self.rank, len(self.names)))
        K[np.arange(self.rank), list(self.independent)] = 1.0
        if self.dependent:
            K[:, list(self.dependent)] = self.beta
        return K

    def values(self, pi) -> np.ndarray:
        """Base parameters of (..., 4 n) barycentric parameters, (..., rank)."""
        return np.asarray(pi) @ self.K.T

    def identifiable(self) -> np.ndarray:
        """(4 n,) bool: parameters identifiable on their own (no null direction moves them)."""
        if not self.dependent:
            return np.ones(len(self.names), bool)
        return np.all(np.abs(self.null_space) < 1e-9, axis=1)

    def report(self) -> str:
        p = len(self.names)
        lines = [f"{self.rank} of {p} parameter combinations identifiable"]
        lines += [f"  {c}" for c in self.combinations]
        if self.unidentifiable:
            lines.append("unidentifiable directions (the data do not change along them):")
            lines += [f"  {u}" for u in self.unidentifiable]
        return "\n".join(lines)

    __str__ = report


def _symbols(model: Model) -> list:
    """(value, word, bases) for the coefficients the grouping of parameters produces:
    the joint distances a_k (``L[parent]`` where the joint is at the parent's end,
    else ``a[child]``), their squares and products. ``bases`` indexes the distances a
    symbol is made of (() for 1) in the list of sets of joints (child segment
    indices) each distance stands for, the second item returned."""
    par = np.maximum(np.asarray(model.parent), 0)
    a = np.where(model.attach_end, np.asarray(model.length, dtype=float)[par], np.asarray(model.attach, dtype=float))
    base, joints = [], []
    for k, p in enumerate(model.parent):
        if p < 0:
            continue
        word = f"L[{model.names[p]}]" if model.attach_end[k] else f"a[{model.names[k]}]"
        for b, (_, w) in enumerate(base):
            if w == word:  # children at the same parent's end share L[parent]
                joints[b].add(k)
                break
        else:
            base.append((a[k], word))
            joints.append({k})
    out = [(1.0, "", ())]
    for b, (v, w) in enumerate(base):
        out += [(v, w, (b,)), (v * v, f"{w}^2", (b, b))]
    for i in range(len(base)):
        for j in range(i + 1, len(base)):
            out.append((base[i][0] * base[j][0], f"{base[i][1]}*{base[j][1]}", (i, j)))
    return out, joints


def _path(parent, i: int, j: int) -> set:
    """The joints (child segment indices) on the tree path between segments i and j."""
    up_i, k = [], i
    while k >= 0:
        up_i.append(k)
        k = parent[k]
    up_j, k = [], j
    while k >= 0:
        up_j.append(k)
        k = parent[k]
    common = set(up_i) & set(up_j)
    return {k for k in up_i + up_j if k not in common}


def _toward(parent, i: int, d: int):
    """The child of segment i on the path from i down to segment d (None when d is not
    distal to i)."""
    k = d
    while k >= 0 and parent[k] != i:
        k = parent[k]
    return None if k < 0 or k == i else k


def _rank(model: Model, joints, lead: int, k: int):
    """Preference (lower first) of a symbol's bases for the coefficient of parameter k
    in a combination with parameter ``lead`` (flat indices), from the kinematic
    structure: the grouping rule moves a mass m[d] into J[i] (times a^2) and mx[i]
    (times a) with a the distance of the joint on segment i that leads toward d, so
    that distance ranks first; then symbols of joints on the path between the two
    segments, or 1; then any other."""
    parent = tuple(int(p) for p in model.parent)
    (si, pi_), (sk, pk) = divmod(lead, 4), divmod(k, 4)
    expect = None
    if (pi_ == 0) != (pk == 0):  # a mass and a J, mx or my
        seg, mseg, par = (sk, si, pk) if pi_ == 0 else (si, sk, pi_)
        c = _toward(parent, seg, mseg)
        if c is not None and par in (1, 3):
            expect = (c, 1 if par == 1 else 2)
    path = _path(parent, si, sk)

    def rank(bases):
        if expect is not None and len(bases) == expect[1] and all(expect[0] in joints[b] for b in bases):
            return 0
        if not bases or all(joints[b] & path for b in bases):
            return 1
        return 2

    return rank


def _word(coef: float, name: str, symbols, rank=None) -> tuple:
    """(sign, text) of coef*name, with coef written as a symbol where it is one (of the
    symbols with its value, the first of the lowest ``rank``)."""
    sign = "-" if coef < 0 else "+"
    c = abs(coef)
    best = None
    for v, w, bases in symbols:
        if v != 0 and abs(c - v) <= 1e-6 * abs(v):
            r = 0 if rank is None else rank(bases)
            if best is None or r < best[0]:
                best = (r, w)
    if best is not None:
        w = best[1]
        return sign, (f"{w}*{name}" if w else name)
    return sign, f"{c:.4g}*{name}"


def _expression(model: Model, terms, symbols) -> str:
    """``terms``: (coefficient, flat parameter index), the leading one first."""
    sym, joints = symbols
    names = parameter_names(model)
    lead = terms[0][1]
    out = ""
    for coef, k in terms:
        sign, text = _word(coef, names[k], sym, _rank(model, joints, lead, k))
        out += (f"-{text}" if sign == "-" else text) if not out else f" {sign} {text}"
    return out


def _default_order(n: int) -> list:
    """Preferred leaders: J, mx, my of each segment (proximal first), then the masses
    from distal to proximal, so that masses are what gets grouped into the others."""
    order = []
    for i in range(n):
        order += [4 * i + 3, 4 * i + 1, 4 * i + 2]
    order += [4 * i for i in reversed(range(n))]
    return order


def _stack(Ys, p: int) -> np.ndarray:
    """Rows of one or several regressors, each block scaled to unit RMS."""
    if isinstance(Ys, (list, tuple)):
        blocks = list(Ys)
    else:
        blocks = [Ys]
    rows = []
    for Y in blocks:
        A = np.asarray(Y, dtype=float).reshape(-1, p)
        if not np.isfinite(A).all():
            raise ValueError("the regressor contains NaN or infinite values: check q, qd, qdd")
        s = np.sqrt(np.mean(A * A))
        rows.append(A / s if s > 0 else A)
    return np.concatenate(rows, 0)


def _check_rtol(rtol) -> float:
    """A rank threshold: a real number in (0, 1)."""
    if isinstance(rtol, (bool, np.bool_)) or not isinstance(rtol, (int, float, np.integer, np.floating)) or not (
            0.0 < float(rtol) < 1.0):  # fmt: skip
        raise ValueError(f"rtol must be a number in (0, 1) (the rank decision's relative threshold), got {rtol!r}")
    return float(rtol)


def base_parameters(model: Model, Y, *, rtol: float | None = None, order: Sequence[int] | None = None
                    ) -> BaseParameters:  # fmt: skip
    """Identifiable combinations of the barycentric parameters from stacked regressors.

    The columns of the stacked regressor (every sample and every output row; several
    regressors, e.g. of moments and reactions, are stacked after scaling each to unit
    RMS) are scaled to unit norm and taken in a preferred order (``order``; default:
    J, mx, my of each segment, then the masses distal first); a column that adds less
    than ``rtol`` of its norm to the span of the columns kept so far (Gram-Schmidt,
    twice) is dependent, and its coefficients on the kept columns come from least
    squares on the unscaled columns. This is the numerical rank of the regressor
    (Gautier 1991's base parameters by QR), with leaders chosen so that the
    combinations read like the classical grouping rules.

    Args:
      model: the model the regressor was built for (names and lengths for the words).
      Y: a regressor ``(..., 4 n)`` from :func:`regressor`, or a list of them.
      rtol: relative threshold of the rank decision (default 1e-7 for a float64
        regressor, 1e-3 for a float32 one). A column below 1e-13 (float64) or 500 eps
        (float32: 6e-5) of the largest column's norm counts as absent.
      order: optional preferred order of the 4 n parameters (indices).

    Returns:
      :class:`BaseParameters`.
    """
    p = 4 * model.segments
    blocks = Y if isinstance(Y, (list, tuple)) else [Y]
    for b in blocks:
        if np.shape(b)[-1:] != (p,):
            raise ValueError(f"a regressor of this model has {p} columns (4 per segment), got shape {np.shape(b)}")
    # the precision the regressor was computed in (its coarsest float block) sets the
    # thresholds: float32 rounding leaves ~1e-7 of the largest column in a column that
    # is exactly zero
    eps = max((float(np.finfo(np.asarray(b).dtype).eps) for b in blocks
               if np.issubdtype(np.asarray(b).dtype, np.floating)), default=float(np.finfo(float).eps))
    low = eps > 1e-10
    if rtol is None:
        rtol = 1e-3 if low else 1e-7
    rtol = _check_rtol(rtol)
    A = _stack(blocks, p)
    if A.shape[0] == 0:
        raise ValueError("the regressor has no rows (no samples)")
    order = _default_order(model.segments) if order is None else [int(k) for k in order]
    if sorted(order) != list(range(p)):
        raise ValueError(f"order must be a permutation of range({p})")
    norms = np.linalg.norm(A, axis=0)
    big = norms.max() if norms.max() > 0 else 1.0
    basis = []
    indep, dep = [], []
    absent = max(1e-13, 500 * eps)  # a column this small against the largest is rounding
    for k in order:
        v = A[:, k]
        if norms[k] <= absent * big:
            dep.append(k)
            continue
        r = v / norms[k]
        for _ in range(2):
            for b in basis:
                r = r - (b @ r) * b
        nr = np.linalg.norm(r)
        if nr > rtol:
            basis.append(r / nr)
            indep.append(k)
        else:
            dep.append(k)
    indep_s = sorted(indep)  # report in parameter order
    dep_s = sorted(dep)
    names = parameter_names(model)
    if dep_s and indep_s:
        beta, *_ = np.linalg.lstsq(A[:, indep_s], A[:, dep_s], rcond=None)
        beta[np.abs(beta) < max(1e-10, 100 * eps) * max(1.0, np.abs(beta).max())] = 0.0  # rounding
    else:
        beta = np.zeros((len(indep_s), len(dep_s)))
    sym = _symbols(model)
    combos = []
    for r_, k in enumerate(indep_s):
        terms = [(1.0, k)] + [(beta[r_, j], d) for j, d in enumerate(dep_s) if beta[r_, j] != 0]
        combos.append(_expression(model, terms, sym))
    null = np.zeros((p, len(dep_s)))
    words = []
    for j, d in enumerate(dep_s):
        null[d, j] = 1.0
        null[indep_s, j] = -beta[:, j]
        terms = [(1.0, d)] + [(-beta[r_, j], k) for r_, k in enumerate(indep_s) if beta[r_, j] != 0]
        w = _expression(model, terms, sym)
        words.append(w if len(terms) > 1 else f"{w} (absent from the data)")
    scaled = A / np.where(norms > 0, norms, 1.0)
    sv = np.linalg.svd(scaled, compute_uv=False)
    return BaseParameters(names, len(indep_s), tuple(indep_s), tuple(dep_s), beta, tuple(combos), null,
                          tuple(words), sv)  # fmt: skip


def identifiability(model: Model, q, qd, qdd, *, data: Sequence[str] = ("joint_moments",),
                    rtol: float | None = None) -> BaseParameters:  # fmt: skip
    """What a set of measurements can tell about the segment parameters.

    Args:
      model: the model.
      q, qd, qdd: (..., dof) the movement (every sample is stacked).
      data: the measured quantities, from :data:`QUANTITIES` ("joint_moments",
        "joint_reactions", "inverse_dynamics"); their regressors are stacked.
      rtol: as :func:`base_parameters`.

    Returns:
      :class:`BaseParameters` (print it for the combinations in words).
    """
    if rtol is not None:
        _check_rtol(rtol)
    if isinstance(data, str):
        data = (data,)
    if not data:
        raise ValueError(f"data must name at least one of {QUANTITIES}")
    Ys = []
    for d in data:
        _check_quantity(d)
        Ys.append(np.asarray(regressor(model, q, qd, qdd, quantity=d)[0]))
    return base_parameters(model, Ys, rtol=rtol)


# ------------------------------------------------------------------------ priors


def _undetermined(Jd: np.ndarray, names, free_idx, tol: float) -> tuple:
    """(count, words): the number of directions of the free z that the data Jacobian
    ``Jd`` (rows: data, columns: free z) leaves undetermined -- columns absent from
    the data, and right singular vectors of the column-scaled Jacobian below ``tol``
    of the largest singular value -- and each in words."""
    norms = np.linalg.norm(Jd, axis=0)
    absent = norms <= 1e-13 * max(norms.max(), 1e-300)
    words = [f"{names[free_idx[j]]} (absent from the data)" for j in np.flatnonzero(absent)]
    seen = np.flatnonzero(~absent)
    if seen.size:
        scaled = Jd[:, seen] / norms[seen]
        if scaled.shape[0] < scaled.shape[1]:
            scaled = np.concatenate([scaled, np.zeros((scaled.shape[1] - scaled.shape[0], scaled.shape[1]))])
        _, s, Vt = np.linalg.svd(scaled, full_matrices=False)
        for v in Vt[s < tol * s[0]]:  # combinations the data barely change
            big = np.flatnonzero(np.abs(v) > 0.2 * np.abs(v).max())
            words.append(" with ".join(names[free_idx[seen[j]]] for j in big))
    return len(words), list(dict.fromkeys(words))


def _identifiable_or_raise(model, zf0, jdata, cfg, free_idx, rtol, has_prior, kinds, other_motion=None):
    """Raise when the data cannot determine the free parameters at the start (no prior).

    ``other_motion(data)``, when given, is the data Jacobian (free z columns) of the
    data kinds ``data`` for a random movement: a deficit that it shows too does not
    depend on the movement (it is structural: of the model, the data kinds and the
    free parameters), and the message says that no movement helps, and whether
    reaction forces would, rather than asking for more varied movement."""
    if has_prior:
        return
    Jd = np.asarray(_data_jacobian(zf0, jdata, cfg), dtype=float)
    if not np.isfinite(Jd).all():
        raise ValueError("the data give a non-finite Jacobian at the starting model: check the inputs")
    names = _physical_names(model)
    tol = (1e-7 if jnp.finfo(jnp.result_type(float)).eps < 1e-10 else 1e-3) if rtol is None else rtol
    count, words = _undetermined(Jd, names, free_idx, tol)
    if not count:
        return
    what = " and ".join(kinds)
    head = f"the {what} cannot identify every free parameter; undetermined: {'; '.join(words)}."
    always = _undetermined(other_motion(tuple(kinds)), names, free_idx, tol)[0] if other_motion else 0
    with_r = "reactions" in kinds
    if not always:
        # reaction forces are named where they would determine more on this movement
        # (never for an inertia: it is absent from the reactions)
        helps = not with_r and other_motion is not None and _undetermined(
            other_motion(tuple(kinds) + ("reactions",), actual=True), names, free_idx, tol)[0] < count  # fmt: skip
        raise ValueError(f"too little excitation: {head} Fix these (free=...), add more varied movement"
                         f"{' or reaction forces' if helps else ''}, or give a prior")  # fmt: skip
    # structural: a random movement leaves them (or some of them) undetermined too
    part = always < count
    msg = (f"not identifiable: {head} {f'{always} of these {count} directions' if part else 'They'} do not depend "
           f"on the movement (a random movement leaves them undetermined too): no movement identifies them from "
           f"the {what}; fix these (free=...) or give a prior")  # fmt: skip
    if not with_r:
        left = _undetermined(other_motion(("moments", "reactions")), names, free_idx, tol)[0]
        if left < always:
            msg += ", or add reaction forces" + (f" (moments and reactions leave {left} undetermined)" if left else "")
    if part:
        msg += "; the others need more varied movement"
    raise ValueError(msg)


# ------------------------------------------------------------------ sensitivity
