"""Segment parameters from measured forces: regressor, identifiability, fit, uncertainty.

Planar dynamics is linear in the *barycentric* parameters of each segment i,

    pi_i = (m_i, m_i c_i,along, m_i c_i,across, J_i),    J_i = I_i + m_i |c_i|^2,

where c_i is the centre of mass in the segment frame from the proximal joint and J_i
the moment of inertia about the proximal joint (I_i about the centre of mass). For
every quantity the engine computes (generalized forces, joint moments, joint
reactions), with pi = (pi_1, ..., pi_n) flattened to ``(4 n,)``:

    y = Y(q, qd, qdd) pi + y0(q, loads).

Y is exact: it is the forward-mode Jacobian (``jax.jacfwd``) of the engine's own
batched kernels with respect to pi, with the loads left out (the engine is linear
and homogeneous in pi without them; the Jacobian of a linear map is the map). y0 is
the part of the known external loads: the engine run on the model with zero masses
and inertias. Loads are given as :func:`jaxmb.point_load` builds them (wrenches at
the centres of mass of the model passed in); they stand for forces at points fixed
on the segments, so y0 does not change with pi.

Identifiability (:func:`base_parameters`, :func:`identifiability`): only the
combinations of pi spanned by the columns of the stacked regressor can be estimated.
For a planar chain of n segments with a fixed base, revolute joints and gravity in
the plane, moments identify 3 n combinations (3 n - 2 without gravity): for each
segment the grouped parameters

    J_i + a_i^2 M_i,   m_i c_i,along + a_i M_i,   m_i c_i,across,

with M_i the total mass distal to segment i and a_i the distance of the next joint
(the segment length in a chain); no mass is identifiable. Joint reaction forces
make every mass identifiable, and so all 4 n parameters, as long as the root's mass
is seen: through gravity or the acceleration of a moving base (a fixed base in a
horizontal plane leaves m_1 out: 4 n - 1). The module docstring of
the tests derives these ranks by hand and checks them with SymPy.

Fitting (:func:`fit`): (1) linear least squares on the base parameters; (2) a
physically consistent fit of the physical parameters (mass and inertia through
logarithms, so they stay positive; centre of mass free) by Levenberg-Marquardt,
jit-compiled, with optional priors (:func:`table_prior`) and a Huber loss; standard
errors from the Gauss-Newton Hessian. Uncertainty: :func:`sensitivity` (the
Jacobian of the joint loads with respect to every segment parameter, ``jax.jacfwd``
through the batched engine) and :func:`monte_carlo` (parameter draws into bands of
joint moments or reactions, all draws and frames in one call).

Parameter names: ``m[seg]`` (kg), ``mx[seg]`` and ``my[seg]`` (m c along and across
the axis, kg m), ``J[seg]`` (kg m^2 about the proximal joint); physical parameters
``mass``, ``com_along``, ``com_across`` (m) and ``inertia`` (kg m^2 about the centre
of mass), in that order per segment.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple, Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

from .dynamics import inverse_dynamics, joint_moments, point_load
from .model import Model, _replace_unchecked
from .reactions import joint_reactions

__all__ = [
    "PARAMETERS",
    "PHYSICAL",
    "QUANTITIES",
    "parameter_names",
    "to_parameters",
    "from_parameters",
    "to_physical",
    "from_physical",
    "consistency",
    "Consistency",
    "regressor",
    "base_parameters",
    "identifiability",
    "BaseParameters",
    "fit",
    "PointForce",
    "FitResult",
    "BaseFit",
    "Prior",
    "table_prior",
    "sensitivity",
    "monte_carlo",
    "Bands",
    "running_trial",
    "perturbed",
    "recover_running",
    "recovery_figure",
    "bands_figure",
]

#: Barycentric parameters of one segment, in the order of every (4 n,) vector.
PARAMETERS = ("m", "mx", "my", "J")
#: Physical parameters of one segment, in the order of every (n, 4) array.
PHYSICAL = ("mass", "com_along", "com_across", "inertia")
#: What a regressor can be built for.
QUANTITIES = ("inverse_dynamics", "joint_moments", "joint_reactions")

_UNITS = {"m": "kg", "mx": "kg m", "my": "kg m", "J": "kg m^2",
          "mass": "kg", "com_along": "m", "com_across": "m", "inertia": "kg m^2"}  # fmt: skip


# ------------------------------------------------------------------ parameters


def parameter_names(model: Model) -> tuple:
    """Names of the (4 n,) barycentric parameters: ``m[seg], mx[seg], my[seg], J[seg]``."""
    return tuple(f"{p}[{s}]" for s in model.names for p in PARAMETERS)


def _physical_names(model: Model) -> tuple:
    return tuple(f"{p}[{s}]" for s in model.names for p in PHYSICAL)


def _xp(x):
    return np if isinstance(x, np.ndarray) else jnp


def _pi_from_physical(phys):
    """(..., n, 4) physical (m, cx, cy, I) -> (..., 4 n) barycentric (m, m cx, m cy, I + m |c|^2).
    NumPy in, NumPy out (no compilation); JAX arrays and tracers stay JAX."""
    xp = _xp(phys)
    m, cx, cy, inertia = phys[..., 0], phys[..., 1], phys[..., 2], phys[..., 3]
    pi = xp.stack([m, m * cx, m * cy, inertia + m * (cx * cx + cy * cy)], -1)
    return pi.reshape(pi.shape[:-2] + (-1,))


def _physical_from_pi(pi):
    """(..., 4 n) barycentric -> (..., n, 4) physical; no check (mass may be <= 0)."""
    xp = _xp(pi)
    p = pi.reshape(pi.shape[:-1] + (-1, 4))
    m = p[..., 0]
    cx, cy = p[..., 1] / m, p[..., 2] / m
    return xp.stack([m, cx, cy, p[..., 3] - m * (cx * cx + cy * cy)], -1)


def to_physical(model: Model):
    """(segments, 4) physical parameters: mass kg, com along and across m, inertia kg m^2
    about the centre of mass (a NumPy array for a concrete model, JAX under tracing)."""
    leaves = (model.mass, model.com, model.inertia)
    xp = jnp if any(isinstance(x, jax.core.Tracer) for x in leaves) else np
    com = xp.asarray(model.com)
    return xp.stack([xp.asarray(model.mass), com[:, 0], com[:, 1], xp.asarray(model.inertia)], -1)


def to_parameters(model: Model):
    """Barycentric parameters pi, (4 * segments,) (NumPy for a concrete model).

    For each segment in order: m (kg), m c_along, m c_across (kg m; c from the
    proximal joint) and J = I + m |c|^2 (kg m^2, the moment of inertia about the
    proximal joint). Traceable (the model's parameters may be traced).
    """
    return _pi_from_physical(to_physical(model))


def _with_physical(model: Model, phys) -> Model:
    """The model with (n, 4) physical parameters, unchecked (traceable)."""
    return _replace_unchecked(model, mass=phys[:, 0], com=phys[:, 1:3], inertia=phys[:, 3])


def from_physical(model: Model, phys) -> Model:
    """The model with new (segments, 4) physical parameters (mass, com_along, com_across,
    inertia); checked like a new model when the values are concrete."""
    n = model.segments
    if isinstance(phys, jax.core.Tracer):
        return _with_physical(model, phys)
    phys = np.asarray(phys, dtype=float)
    if phys.shape != (n, 4):
        raise ValueError(f"physical parameters must have shape ({n}, 4) (mass, com_along, com_across, "
                         f"inertia per segment), got {phys.shape}")  # fmt: skip
    return model.replace(mass=phys[:, 0], com=phys[:, 1:3], inertia=phys[:, 3])


class Consistency(NamedTuple):
    """Physical consistency of barycentric parameters.

    Attributes:
      ok: True when every mass and every inertia about the centre of mass is > 0.
      mass: (segments,) kg.
      inertia: (segments,) inertia about the centre of mass, J - |m c|^2 / m, kg m^2.
      problems: one readable line per violated condition (empty when ok).
    """

    ok: bool
    mass: np.ndarray
    inertia: np.ndarray
    problems: tuple


def consistency(model: Model, pi=None) -> Consistency:
    """Check mass > 0 and inertia about the centre of mass > 0 for every segment.

    Args:
      model: the model (names; its own parameters when ``pi`` is None).
      pi: optional (4 * segments,) barycentric parameters to check instead.

    Returns:
      :class:`Consistency`.
    """
    pi = to_parameters(model) if pi is None else pi
    pi = _check_pi(model, pi)
    p = pi.reshape(-1, 4)
    m = p[:, 0]
    problems = []
    with np.errstate(divide="ignore", invalid="ignore"):
        inertia = p[:, 3] - (p[:, 1] ** 2 + p[:, 2] ** 2) / m
    for i, s in enumerate(model.names):
        if not m[i] > 0:
            problems.append(f"segment {i} ({s!r}): mass {m[i]:.6g} kg is not > 0")
        elif not inertia[i] > 0:
            problems.append(f"segment {i} ({s!r}): inertia about the centre of mass J - |m c|^2/m = "
                            f"{inertia[i]:.6g} kg m^2 is not > 0")  # fmt: skip
    return Consistency(not problems, m, inertia, tuple(problems))


def _check_pi(model: Model, pi) -> np.ndarray:
    p = np.asarray(pi, dtype=float)
    if p.shape != (4 * model.segments,):
        raise ValueError(f"pi must have shape ({4 * model.segments},) (m, mx, my, J per segment), got {p.shape}")
    if not np.isfinite(p).all():
        k = int(np.flatnonzero(~np.isfinite(p))[0])
        raise ValueError(f"pi is not finite at {parameter_names(model)[k]}: {p[k]}")
    return p


def from_parameters(model: Model, pi) -> Model:
    """The model with barycentric parameters ``pi`` (4 * segments,).

    Concrete values are checked (:func:`consistency`): a ValueError names each
    segment whose mass or inertia about the centre of mass is not positive. Traced
    values (inside jit or grad) are used as they are.
    """
    if isinstance(pi, jax.core.Tracer):
        return _with_physical(model, _physical_from_pi(pi))
    c = consistency(model, pi)
    if not c.ok:
        raise ValueError("physically inconsistent parameters: " + "; ".join(c.problems))
    return from_physical(model, _physical_from_pi(_check_pi(model, pi)))


# -------------------------------------------------------------------- regressor


def _check_quantity(quantity):
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {QUANTITIES}, got {quantity!r}")


def _engine(quantity, q, qd, qdd, joints, frame):
    """The engine's quantity as a function of (model, loads); forward-mode friendly."""

    def f(model, loads):
        if quantity == "inverse_dynamics":
            return inverse_dynamics(model, q, qd, qdd, loads, gradient="autodiff")
        if quantity == "joint_moments":
            return joint_moments(model, q, qd, qdd, loads, gradient="autodiff")
        return joint_reactions(model, q, qd, qdd, loads, joints=joints, frame=frame, gradient="autodiff")

    return f


def _massless(model: Model) -> Model:
    return _replace_unchecked(model, mass=jnp.zeros_like(model.mass), inertia=jnp.zeros_like(model.inertia))


@functools.partial(jax.jit, static_argnames=("quantity", "joints", "frame"))
def _regressor_jit(model, q, qd, qdd, loads, quantity, joints, frame):
    # one compiled program for the Jacobian and the load term (about half the compile
    # time of the same derivatives taken eagerly through the engine)
    f = _engine(quantity, q, qd, qdd, joints, frame)
    Y = jax.jacfwd(lambda p: f(_with_physical(model, _physical_from_pi(p)), None))(to_parameters(model))
    if loads is None:
        return Y, jnp.zeros(Y.shape[:-1], Y.dtype)
    return Y, jnp.broadcast_to(f(_massless(model), loads), Y.shape[:-1])


@functools.partial(jax.jit, static_argnames=("quantity", "joints", "frame"))
def _sensitivity_jit(model, q, qd, qdd, quantity, joints, frame):
    f = _engine(quantity, q, qd, qdd, joints, frame)
    return jax.jacfwd(lambda ph: f(_with_physical(model, ph), None))(to_physical(model))


def _prepare(model: Model, quantity, q, qd, qdd, loads, joints, frame):
    """Eager checks (the traced engine cannot see NaN): arrays, finite, joints as a tuple."""
    _check_quantity(quantity)
    if frame not in ("world", "segment"):
        raise ValueError(f"frame must be 'world' or 'segment', got {frame!r}")
    out = []
    for x, nm in ((q, "q"), (qd, "qd"), (qdd, "qdd"), (loads, "loads")):
        if x is None:
            out.append(None)
            continue
        a = x if isinstance(x, jax.Array) else np.asarray(x)
        if a.dtype.kind not in "fiub":
            raise ValueError(f"{nm} must be a numeric array, got dtype {a.dtype}")
        if not isinstance(a, jax.core.Tracer):
            _check_finite(np.asarray(a), nm)
        out.append(a)
    if joints is not None:
        if quantity != "joint_reactions":
            raise ValueError(f"joints= selects joints of quantity='joint_reactions'; {quantity!r} gives every "
                             "joint (index the result instead)")  # fmt: skip
        if isinstance(joints, (str, int, np.integer)):
            joints = (joints,)
        joints = tuple(model.index(j) for j in joints)
        if not joints:
            raise ValueError("joints is empty: give None for all joints, or a list of indices or names")
    return out, joints


def regressor(model: Model, q, qd, qdd, loads=None, *, quantity: str = "inverse_dynamics", joints=None,
              frame: str = "world"):  # fmt: skip
    """The regressor Y and the load term y0 of a quantity: y = Y pi + y0, exactly.

    ``Y`` is ``jax.jacfwd`` of the engine (the same batched kernels as
    :func:`jaxmb.inverse_dynamics`, :func:`jaxmb.joint_moments`,
    :func:`jaxmb.joint_reactions`) with respect to the barycentric parameters pi
    (:func:`to_parameters`), without the loads; ``y0`` is the engine with the loads
    and zero masses and inertias (zero without loads). Both do not depend on pi.

    Args:
      model: the model (topology, lengths, gravity; pi only sets where the exact
        Jacobian of the linear map is taken).
      q, qd, qdd: (..., dof) coordinates, velocities, accelerations (one sample or
        any leading batch shape).
      loads: optional known external loads, (segments, 3) or (..., segments, 3)
        world-frame wrenches at the centres of mass of ``model`` (as
        :func:`jaxmb.point_load` builds them, e.g. a ground reaction force).
      quantity: "inverse_dynamics" (generalized forces), "joint_moments" or
        "joint_reactions".
      joints, frame: for "joint_reactions", as :func:`jaxmb.joint_reactions`.

    Returns:
      (Y, y0): "inverse_dynamics" ``(..., dof, 4 n)`` and ``(..., dof)``;
      "joint_moments" ``(..., n, 4 n)`` and ``(..., n)``; "joint_reactions"
      ``(..., joints, 2, 4 n)`` and ``(..., joints, 2)``. Units: the quantity's
      (N m or N) per unit of each parameter.

    Raises:
      ValueError: an unknown quantity, or inputs that the engine rejects (shapes,
        NaN), with the engine's message.
    """
    (q, qd, qdd, loads), joints = _prepare(model, quantity, q, qd, qdd, loads, joints, frame)
    return _regressor_jit(model, q, qd, qdd, loads, quantity, joints, frame)


# ------------------------------------------------------------- identifiability


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
    from .anthropometry import SEVEN_SEGMENT_NAMES, SEVEN_SEGMENT_PARENT

    return tuple(model.names) == tuple(SEVEN_SEGMENT_NAMES) and tuple(model.parent) == tuple(SEVEN_SEGMENT_PARENT)


@functools.lru_cache(maxsize=None)
def _seven_segment_fractions(table: str) -> tuple:
    """Per segment of :func:`jaxmb.seven_segment_human` built from ``table``, for ONE
    side: (mass / body mass, com from the proximal joint / L, radius of gyration / L),
    read from the builder itself (composite trunk and head, rows turned around where
    the table measures from the cranial end). Every length is a fraction of the
    height, so the fractions do not depend on it."""
    from .anthropometry import SEVEN_SEGMENT_NAMES, _seven_segment

    lengths, parts = _seven_segment(1.0, 1.0, table)
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
    from .anthropometry import _check_table

    if isinstance(tables, str):
        tables = (tables,)
    try:
        tables = tuple(tables)
    except TypeError:
        raise ValueError(f"tables must be a table name or a sequence of them, got {tables!r}") from None
    if not tables:
        raise ValueError("tables must name at least one anthropometric table")
    for t in tables:
        _check_table(t)  # "unknown anthropometric table ...; the tables are [...]"
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
                _check_table(t)
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
    from .anthropometry import _key, _table

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
        table_rows = _table(t)
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
                key = next((_key(c) for c in cands if _key(c) in table_rows), None)
                if key is None:
                    what = f"row {given!r} (from rows=)" if given is not None else f"segment {i} ({s!r})"
                    raise ValueError(f"{what} is not a row of table {t!r}: pass rows={{{s!r}: 'row name'}} or "
                                     f"{{{s!r}: {{{t!r}: 'row name'}}}}; its rows are {list(table_rows)}")  # fmt: skip
                row = table_rows[key]
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


@dataclasses.dataclass(frozen=True)
class BaseFit:
    """Linear least squares on the base parameters.

    Attributes:
      parameters: the :class:`BaseParameters` of the data.
      values: (rank,) estimates of the combinations.
      stderr: (rank,) their standard errors: (A^T W A)^-1 with each data kind's rows
        weighed by its noise, ``sigma`` where given, else its own residual variance.
    """

    parameters: BaseParameters
    values: np.ndarray
    stderr: np.ndarray


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Result of :func:`fit`.

    Attributes:
      model: the fitted model (physically consistent).
      initial: the starting model.
      parameters: (4 n,) fitted barycentric parameters.
      stderr: (4 n,) their standard errors (0 for fixed parameters; inf for those
        that depend on a fitted coordinate the data and the prior leave
        undetermined, the others finite).
      physical: (n, 4) fitted mass, com along, com across, inertia.
      stderr_physical: (n, 4) standard errors of those (never NaN: inf for an
        undetermined one, e.g. a mass or an inertia pushed to its floor, where its
        log coordinate no longer changes the data).
      covariance: (4 n, 4 n) covariance of ``parameters`` (inf in the rows and
        columns of the undetermined ones).
      residuals: dict "moments" (..., n) N m and/or "reactions" (..., n) N (of the
        magnitudes) or (..., n, 2) (of the vectors): model minus measurement, at the
        fitted parameters.
      rms: dict of the weighted RMS residual of each data kind, sqrt(sum w^2 r^2 /
        sum w^2) with the weights w of :func:`fit` (which multiply the residuals), so
        a value of weight 0 does not count and 0/1 weights give the plain RMS of the
        values used.
      converged: True when the Levenberg-Marquardt iterations met a tolerance and no
        free mass or inertia is stuck at its floor with the cost still falling as it
        grows (where the gradient in the log coordinates has underflowed: ``status``
        names them; such a parameter is first restarted from its starting value).
      status: how the iterations ended, in words.
      iterations: Levenberg-Marquardt iterations (both stages of a robust fit).
      cost: final value of the objective (half the sum of squared scaled residuals,
        prior included).
      free: (n, 4) bool, the fitted physical parameters.
      base: :class:`BaseFit` of the linear step (None when no linear data).
      names: (4 n,) parameter names.
      noise: dict of each data kind's noise level that the standard errors assume
        (N m for "moments", N for "reactions"): the ``sigma`` given, or the
        estimate from the residuals, sqrt(sum w^2 r^2 / (values - fitted
        parameters)) with the weights of :func:`fit` (values of weight 0 excluded;
        with ``loss="huber"``, of Huber's pseudo-residuals sign(r) sqrt(2 rho(r)),
        which shrink the outliers: below ``rms`` on data with spikes).
    """

    model: Model
    initial: Model
    parameters: np.ndarray
    stderr: np.ndarray
    physical: np.ndarray
    stderr_physical: np.ndarray
    covariance: np.ndarray
    residuals: dict
    rms: dict
    converged: bool
    status: str
    iterations: int
    cost: float
    free: np.ndarray
    base: BaseFit | None
    names: tuple
    noise: dict = dataclasses.field(default_factory=dict)
    _z: np.ndarray = dataclasses.field(repr=False, default=None)
    _cov_z: np.ndarray = dataclasses.field(repr=False, default=None)

    def report(self, true: Model | None = None) -> str:
        """A table of the fit: every physical parameter (start, fit +- stderr, and the
        error against ``true`` when given), the residuals and the base parameters."""
        m0 = np.asarray(to_physical(self.initial))
        tr = None if true is None else np.asarray(to_physical(true))
        head = f"{'parameter':22s}{'start':>12s}{'fit':>12s}{'stderr':>11s}"
        if tr is not None:
            head += f"{'true':>12s}{'error':>11s}"
        lines = [f"consistent fit: {'converged' if self.converged else 'NOT converged'} ({self.status}), "
                 f"{self.iterations} iterations", head]  # fmt: skip
        L = np.asarray(self.model.length)
        for i, s in enumerate(self.model.names):
            for j, p in enumerate(PHYSICAL):
                nm = f"{p}[{s}]"
                fixed = "" if self.free[i, j] else " (fixed)"
                row = f"{nm + fixed:22s}{m0[i, j]:12.5g}{self.physical[i, j]:12.5g}{self.stderr_physical[i, j]:11.2g}"
                if tr is not None:
                    err = self.physical[i, j] - tr[i, j]
                    # a column of its own whatever the size (133018.14 % ran into the true value)
                    if j in (1, 2):  # centre of mass: error as a fraction of the length
                        row += f"{tr[i, j]:12.5g} {_percent(100 * err / L[i])}%L"
                    else:
                        row += f"{tr[i, j]:12.5g} {_percent(100 * err / tr[i, j])}%"
                lines.append(row)
        if tr is not None:
            lines.append("error: fit - true, in % of the true value; for the centre of mass in % of the segment's "
                         "length (%L)")
        lines.append("RMS residuals: " + ", ".join(f"{k} {v:.4g} {'N m' if k == 'moments' else 'N'}"
                                                   for k, v in self.rms.items()))  # fmt: skip
        if self.base is not None:
            lines.append("linear least squares on the base parameters (" + self.base.parameters.report().split("\n")[0]
                         + "):")  # fmt: skip
            for c, v, e in zip(self.base.parameters.combinations, self.base.values, self.base.stderr):
                lines.append(f"  {c} = {v:.6g} +- {e:.2g}")
            if self.base.parameters.unidentifiable:
                lines.append("  not identifiable from these linear data: " + "; ".join(self.base.parameters.unidentifiable))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()


def _percent(v: float) -> str:
    """A percentage in 9 characters: fixed point, or exponent notation from 1e5."""
    return f"{v:9.2f}" if abs(v) < 1e5 else f"{v:9.2e}"


class _Config(NamedTuple):
    """Static structure of a fit (hashable: jit recompiles only when it changes)."""

    n: int
    free: tuple  # flat indices into the (n, 4) z-vector
    moments: bool
    reactions: str  # "none", "vector", "magnitude"
    huber: bool
    prior: bool


# Mass and inertia are floor + exp(z): positive by construction, and never rounded to
# zero when the data push one to the boundary of physical consistency (the floor is
# _FLOOR times the segment's scale: the starting mass, and that mass times L^2).
_FLOOR = 1e-9


def _floor(model: Model) -> np.ndarray:
    """(n, 4) lower bounds of the fit's mass and inertia (0 for the centre of mass)."""
    m = np.asarray(model.mass, dtype=float)
    L = np.maximum(np.asarray(model.length, dtype=float), 1e-3)
    out = np.zeros((model.segments, 4))
    out[:, 0], out[:, 3] = _FLOOR * m, _FLOOR * m * L * L
    return out


def _z_from_physical(phys, floor=0.0):
    xp = _xp(phys)
    f = xp.broadcast_to(xp.asarray(floor), phys.shape)
    return xp.stack([xp.log(phys[..., 0] - f[..., 0]), phys[..., 1], phys[..., 2], xp.log(phys[..., 3] - f[..., 3])], -1)


def _physical_from_z(z, floor=0.0):
    xp = _xp(z)
    f = xp.broadcast_to(xp.asarray(floor), z.shape)
    return xp.stack([f[..., 0] + xp.exp(z[..., 0]), z[..., 1], z[..., 2], f[..., 3] + xp.exp(z[..., 3])], -1)


def _dpi_dz(phys: np.ndarray, floor: np.ndarray) -> np.ndarray:
    """(4 n, 4 n) Jacobian of pi with respect to z = (log(m - floor), cx, cy, log(I - floor))."""
    n = phys.shape[0]
    out = np.zeros((4 * n, 4 * n))
    for i, (m, cx, cy, inertia) in enumerate(phys):
        b = 4 * i
        em, ei = m - floor[i, 0], inertia - floor[i, 3]  # d m / d z0, d I / d z3
        blk = np.array([[em, 0, 0, 0], [em * cx, m, 0, 0], [em * cy, 0, m, 0],
                        [em * (cx * cx + cy * cy), 2 * m * cx, 2 * m * cy, ei]])  # fmt: skip
        out[b:b + 4, b:b + 4] = blk
    return out


def _safe_norm(v):
    """|v| over the last axis with a finite gradient at v = 0 (double where)."""
    s = jnp.sum(v * v, -1)
    ok = s > 0
    return jnp.where(ok, jnp.sqrt(jnp.where(ok, s, 1.0)), 0.0)


def _huber_residual(r, delta):
    """sign(r) sqrt(2 rho(r)) for the Huber rho: r inside [-delta, delta], and
    sqrt(2 delta |r| - delta^2) outside (continuous first derivative)."""
    a = jnp.abs(r)
    out = a > delta
    safe = jnp.where(out, a, delta)
    return jnp.where(out, jnp.sign(r) * jnp.sqrt(2 * delta * safe - delta * delta), r)


def _residual_parts(zf, data, cfg: _Config):
    """(data residuals (N,), prior residuals (P,)) scaled, for free z values zf."""
    z = data["z0"].reshape(-1).at[jnp.asarray(cfg.free)].set(zf).reshape(cfg.n, 4)
    return _residual_parts_physical(_physical_from_z(z, data["floor"]), data, cfg)


def _residual_parts_physical(phys, data, cfg: _Config):
    """_residual_parts of the (n, 4) physical parameters."""
    pi = _pi_from_physical(phys)
    parts = []
    if cfg.moments:
        parts.append(data["m_w"] * (data["m_Y"] @ pi + data["m_y0"] - data["m_meas"]))
    if cfg.reactions == "vector":
        parts.append(data["r_w"] * (data["r_Y"] @ pi + data["r_y0"] - data["r_meas"]))
    elif cfg.reactions == "magnitude":
        lam = jnp.einsum("jcp,p->jc", data["r_Y"], pi) + data["r_y0"]
        parts.append(data["r_w"] * (_safe_norm(lam) - data["r_meas"]))
    if cfg.huber:
        parts = [_huber_residual(p_, d) for p_, d in zip(parts, data["delta"])]
    rd = jnp.concatenate(parts)
    if cfg.prior:
        rp = ((phys - data["p_mean"]) / data["p_sd"]).reshape(-1)[jnp.asarray(cfg.free)]
    else:
        rp = jnp.zeros((0,), rd.dtype)
    return rd, rp


def _residuals(zf, data, cfg):
    rd, rp = _residual_parts(zf, data, cfg)
    return jnp.concatenate([rd, rp])


_STATUS = {1: "relative cost decrease below ftol", 2: "step below xtol", 3: "gradient below gtol",
           -1: "maximum number of iterations", -2: "no step decreases the cost (damping overflow)",
           4: "data fitted to rounding (no step lowers the cost further)",
           -3: "the objective is not finite at the start"}  # fmt: skip


#: largest change of a log(mass) or log(inertia) in one Levenberg-Marquardt step
_MAX_LOG_STEP = 1.0
# passes of the projected step (each holds the log components beyond the limit);
# the few that remain beyond it after them are clipped
_HOLD_PASSES = 3


def _lm(zf0, data, cfg: _Config, max_iter: int, ftol, xtol, gtol):
    """Levenberg-Marquardt (Marquardt's diagonal scaling, Nielsen's damping update).

    Minimises 1/2 |r(z)|^2: solve (J^T J + lam diag(J^T J)) dz = -J^T r, hold each
    log(mass) or log(inertia) that would move by more than ``_MAX_LOG_STEP`` at that
    limit (a trust region: a factor e per iteration) and solve for the others given
    it, accept a step that lowers the cost and shrink
    lam by max(1/3, 1 - (2 rho - 1)^3) (rho: actual over predicted decrease), else
    multiply lam by nu and double nu. Non-finite trial costs count as increases, so
    the iterate stays finite.
    """
    fun = lambda z: _residuals(z, data, cfg)  # noqa: E731
    logs = jnp.asarray([k % 4 in (0, 3) for k in cfg.free])  # log(mass), log(inertia)

    def cost(z):
        r = fun(z)
        return 0.5 * r @ r

    def lin(z):
        r = fun(z)
        J = jax.jacfwd(fun)(z)
        return r, J

    def body(state):
        z, c, lam, nu, it, status = state
        r, J = lin(z)
        g = J.T @ r
        H = J.T @ J
        d = jnp.diag(H)
        d = jnp.maximum(d, 1e-12 * jnp.max(d) + jnp.finfo(d.dtype).tiny)
        A = H + lam * jnp.diag(d)
        step = -jnp.linalg.solve(A, g)
        # trust region in the log coordinates: at most a factor e per iteration on a
        # mass or an inertia (an unbounded step can throw one to exp(-400), where its
        # gradient underflows and it never comes back). A component beyond it is held
        # at the limit and the others solve the damped system given it, A_ff s_f =
        # -(g_f + A_fc s_c) (a projected step: scaling the whole step instead let a
        # mass or an inertia bound for its floor shrink every other parameter's step
        # until the ftol test stopped the fit short of the minimum)
        held = jnp.zeros_like(logs)
        for _ in range(_HOLD_PASSES):
            held = held | (logs & (jnp.abs(step) > _MAX_LOG_STEP))
            target = jnp.clip(step, -_MAX_LOG_STEP, _MAX_LOG_STEP)
            system = jnp.where(held[:, None], jnp.eye(A.shape[0], dtype=A.dtype), A)
            step = jnp.linalg.solve(system, jnp.where(held, target, -g))
        step = jnp.where(logs, jnp.clip(step, -_MAX_LOG_STEP, _MAX_LOG_STEP), step)
        zn = z + step
        cn = cost(zn)
        pred = -(g @ step + 0.5 * step @ (H @ step))
        ok = jnp.isfinite(cn) & (cn < c)
        rho = (c - cn) / jnp.where(pred > 0, pred, 1.0)
        lam_ok = lam * jnp.maximum(1 / 3, 1 - (2 * rho - 1) ** 3)
        # an accepted step that barely lowers the cost, or a model that predicts no
        # useful decrease (already at the minimum, to round-off)
        small_f = (ok & ((c - cn) <= ftol * c)) | ((pred >= 0) & (pred <= ftol * c) & (lam <= 1.0))
        small_x = ok & (jnp.linalg.norm(step) <= xtol * (jnp.linalg.norm(z) + xtol))
        small_g = jnp.max(jnp.abs(g)) <= gtol
        new_status = jnp.where(small_g, 3, jnp.where(small_f, 1, jnp.where(small_x, 2, 0)))
        z = jnp.where(ok, zn, z)
        c = jnp.where(ok, cn, c)
        lam = jnp.where(ok, lam_ok, lam * nu)
        nu = jnp.where(ok, 2.0, nu * 2.0)
        new_status = jnp.where((new_status == 0) & (lam > 1e16), -2, new_status)
        new_status = jnp.where((new_status == 0) & (it + 1 >= max_iter), -1, new_status)
        return z, c, lam, nu, it + 1, new_status

    c0 = cost(zf0)
    dt = zf0.dtype
    state = (zf0, c0, jnp.asarray(1e-3, dt), jnp.asarray(2.0, dt), jnp.asarray(0), jnp.where(jnp.isfinite(c0), 0, -3))
    z, c, _, _, it, status = jax.lax.while_loop(lambda s: s[5] == 0, body, state)
    r, J = lin(z)
    nd = r.shape[0] - (len(cfg.free) if cfg.prior else 0)  # data rows first, then the prior's
    return z, c, it, status, r[:nd], J[:nd], J[nd:]


_lm_jit = jax.jit(_lm, static_argnames=("cfg",))


@functools.partial(jax.jit, static_argnames=("cfg",))
def _physical_gradient(zf, data, cfg):
    """Gradient (free,) of the cost 1/2 |r|^2 with respect to the free physical
    parameters themselves (finite where d p / d z = exp(z) has underflowed)."""
    z = data["z0"].reshape(-1).at[jnp.asarray(cfg.free)].set(zf).reshape(cfg.n, 4)
    phys = _physical_from_z(z, data["floor"])

    def cost(p):
        rd, rp = _residual_parts_physical(p, data, cfg)
        return 0.5 * (rd @ rd + rp @ rp)

    return jax.grad(cost)(phys).reshape(-1)[jnp.asarray(cfg.free)]


def _stuck_at_floor(z, c, jdata, cfg, ref) -> np.ndarray:
    """(free,) bool: masses and inertias at their floor (within 1e3 times it) whose cost
    still falls as they grow: -dc/dp p_ref above 1e-4 c (first-order gain of moving p back
    to its starting size p_ref). Their gradient in z, dc/dp exp(z), has vanished with
    exp(z), so the iterations stopped there for numerical reasons, not at a minimum (at
    a true minimum on the bound of physical consistency dc/dp >= 0)."""
    free = np.asarray(cfg.free)
    logs = np.isin(free % 4, (0, 3))
    floor = np.asarray(jdata["floor"], dtype=float).reshape(-1)[free]
    phys = floor + np.exp(np.asarray(z, dtype=float))
    low = logs & (phys <= 1e3 * floor)
    if not low.any():
        return low
    g = np.asarray(_physical_gradient(z, jdata, cfg), dtype=float)
    return low & (-g * ref > 1e-4 * max(float(c), 0.0) + np.finfo(float).tiny)


@functools.partial(jax.jit, static_argnames=("cfg",))
def _data_residuals(zf, data, cfg):
    """The data residuals of :func:`_residual_parts`, compiled (op by op they cost
    a compilation each on a first call)."""
    return _residual_parts(zf, data, cfg)[0]


@functools.partial(jax.jit, static_argnames=("cfg",))
def _data_jacobian(zf, data, cfg):
    return jax.jacfwd(lambda zz: _residual_parts(zz, data, cfg)[0])(zf)


def _as_float_array(x, name):
    if np.iscomplexobj(x):  # NumPy would drop the imaginary part with a ComplexWarning
        raise ValueError(f"{name} must be real numbers, got complex values")
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from None
    return a


def _check_finite(a, name):
    if not np.isfinite(a).all():
        idx = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise ValueError(f"{name} contains NaN or infinite values (first at index {idx}): remove or fill those "
                         "samples (weights of 0 ignore a sample, but it must be finite)")  # fmt: skip


def _some_weight(w, kind: str, arg: str) -> None:
    if not (np.asarray(w) > 0).any():
        raise ValueError(f"{kind}_weights are 0 everywhere: no {kind} would be fitted; leave out {arg}= "
                         "or give some weights > 0")  # fmt: skip


def _free_mask(model: Model, free) -> np.ndarray:
    n = model.segments
    if free is None:
        return np.ones((n, 4), bool)
    if isinstance(free, str):
        free = [free]
    arr = None
    if not isinstance(free, (list, tuple)) or not all(isinstance(f, str) for f in free):
        try:
            arr = np.asarray(free)
        except ValueError:
            raise ValueError(f"free must be None, a (segments, 4) bool mask or names, got {free!r}") from None
    if arr is not None and arr.dtype.kind in "iu" and arr.size and np.isin(arr, (0, 1)).all():
        arr = arr.astype(bool)  # an integer 0/1 mask
    if arr is not None and arr.dtype.kind not in "bU":
        raise ValueError(f"free as a mask must be bool (or integer 0/1) of shape ({n}, 4), got dtype {arr.dtype}"
                         + (" with values other than 0 and 1" if arr.dtype.kind in "iu" else ""))
    if arr is not None and arr.dtype == bool:
        if arr.shape == (4 * n,):
            arr = arr.reshape(n, 4)
        if arr.shape != (n, 4):
            raise ValueError(f"free as a mask must have shape ({n}, 4) (mass, com_along, com_across, inertia), "
                             f"got {arr.shape}")  # fmt: skip
        mask = arr.copy()
    else:
        mask = np.zeros((n, 4), bool)
        groups = {"mass": [0], "com": [1, 2], "com_along": [1], "com_across": [2], "inertia": [3],
                  "all": [0, 1, 2, 3]}  # fmt: skip
        for f in free:
            if not isinstance(f, str):
                raise ValueError(f"free must be None, a (segments, 4) bool mask or names, got {f!r}")
            seg, _, what = f.rpartition(".")
            if what not in groups:
                raise ValueError(f"unknown parameter {what!r} in free={f!r}; use one of {sorted(groups)}, "
                                 "optionally as 'segment.parameter'")  # fmt: skip
            rows = range(n) if not seg else [model.index(seg)]
            for i in rows:
                mask[i, groups[what]] = True
    if not mask.any():
        raise ValueError("free selects no parameter to fit")
    return mask


def _leading(model, q, qd, qdd):
    dof = model.dof
    arrs = []
    for x, nm in ((q, "q"), (qd, "qd"), (qdd, "qdd")):
        a = _as_float_array(x, nm)
        if a.ndim < 1 or a.shape[-1] != dof:
            raise ValueError(f"{nm} must have shape (..., {dof}) for this model (dof={dof}), got {a.shape}")
        _check_finite(a, nm)
        arrs.append(a)
    try:
        lead = np.broadcast_shapes(*(a.shape[:-1] for a in arrs))
    except ValueError:
        raise ValueError(f"q {arrs[0].shape}, qd {arrs[1].shape} and qdd {arrs[2].shape} do not broadcast") from None
    return [np.broadcast_to(a, lead + (dof,)) for a in arrs], lead


def _weights(w, lead, core, name):
    """Weights (lead + core) from None, per-sample (lead) or per-value weights."""
    if w is None:
        return np.ones(lead + core)
    w = _as_float_array(w, name)
    _check_finite(w, name)
    if (w < 0).any():
        raise ValueError(f"{name} must be >= 0")
    full = lead + core
    # a shape that broadcasts to the samples, e.g. (trials, 1) for samples (trials, T):
    # one weight per sample (refused before as broadcasting to neither), unless it
    # also reads as the data's last axes
    as_samples = w.ndim == len(lead) and all(a in (1, b) for a, b in zip(w.shape, lead))
    if as_samples and w.shape != lead:
        try:
            as_data = np.broadcast_shapes(w.shape, full) == full
        except ValueError:
            as_data = False
        if as_data:
            raise ValueError(f"{name} of shape {w.shape} is ambiguous: one weight per sample of {lead} (give shape "
                             f"{w.shape + (1,) * len(core)}) or per value of the data {full} along its last axes "
                             f"(give shape {(1,) * len(core) + w.shape})")  # fmt: skip
    if as_samples:
        w = w.reshape(w.shape + (1,) * len(core))
    # weights over the leading axes only, e.g. one per trial (trials,) for samples
    # (trials, T): NumPy aligns them with the last axes instead, the joints when
    # trials == segments, silently. Refused, with the shape that says either
    lead_only = 0 < w.ndim < len(full) and w.shape == full[: w.ndim] and any(d > 1 for d in w.shape)
    fix = (f"; for one weight per entry of the leading axes give shape "
           f"{w.shape + (1,) * (len(full) - w.ndim)}" if lead_only else "")  # fmt: skip
    try:
        out = np.broadcast_to(w, full).astype(float)
    except ValueError:
        raise ValueError(f"{name} has shape {w.shape}, which broadcasts neither to the samples {lead} "
                         f"nor to the data {full}{fix}") from None
    if lead_only:
        raise ValueError(f"{name} of shape {w.shape} is ambiguous: it broadcasts to the data {full} along "
                         f"its last axes{fix}, or {(1,) * (len(full) - w.ndim) + w.shape} for the last axes")
    return out


class PointForce(NamedTuple):
    """A measured force at a point on a segment, for :func:`fit`: e.g. the ground
    reaction force at the centre of pressure, as a force plate gives it.

    :func:`fit` builds its wrenches at the centres of mass of the model it fits
    (:meth:`loads`), so that the force stays where it was measured whatever model
    starts the fit. An array of wrenches at the centres of mass belongs to the model
    it was built for: given with another starting model it moved the force (by the
    difference of the centres of mass), and the fit "converged" to a thigh inertia
    of -100 % and a shank inertia of +325 %.

    Attributes:
      segment: index or name of the segment the force acts on.
      point: (2,) or (..., 2) world position of the point of application, m, per
        sample of the movement (e.g. the centre of pressure).
      force: (2,) or (..., 2) world-frame force (Fx, Fy), N.
      moment: free moment Mz, N m: a number or (...) per sample (default 0).
    """

    segment: Union[int, str]
    point: Any
    force: Any
    moment: Any = 0.0

    def loads(self, model: Model, q) -> np.ndarray:
        """(..., segments, 3) world-frame wrenches (N, N m) at the centres of mass of
        ``model`` in the poses ``q`` (..., dof): :func:`jaxmb.point_load`."""
        return np.asarray(point_load(model, q, self.segment, self.point, self.force, self.moment))

    def select(self, index) -> "PointForce":
        """The samples ``index`` (an int, slice or index array over the leading axis)."""
        take = lambda x: x if np.ndim(x) == 0 else np.asarray(x)[index]  # noqa: E731
        return PointForce(self.segment, take(self.point), take(self.force), take(self.moment))


def _fit_loads(model: Model, q, loads, lead: tuple):
    """``fit``'s known loads as (..., segments, 3) wrenches at the centres of mass of
    ``model`` (the starting model), from a :class:`PointForce` (or a list of them), a
    function of the model, or an array of pure moments; None stays None.

    Built once: the joint moments and reactions of a force at a given point depend on
    the pose and the lengths, which the fit keeps, not on the masses, centres of mass
    and inertias it changes, so the same regressor term serves every model it visits.
    A wrench array with forces is refused: it holds the centres of mass of the model
    it was made for, which fit cannot check."""
    if loads is None:
        return None
    n = model.segments
    name = "loads"
    if isinstance(loads, PointForce) or (isinstance(loads, (list, tuple)) and loads
                                         and all(isinstance(f, PointForce) for f in loads)):  # fmt: skip
        forces = [loads] if isinstance(loads, PointForce) else list(loads)
        built = sum(f.loads(model, q) for f in forces)
    elif callable(loads):
        name = "loads(model)"
        built = loads(model)
    else:
        built = _as_float_array(loads, "loads")
        if built.shape[-2:] == (n, 3) and np.any(built[..., :2] != 0):
            raise ValueError(
                "loads as an array of wrenches at the centres of mass belong to the model they were made for (a "
                "force at another model's centre of mass is a force at another point, and the fit converges to "
                "wrong parameters without an error); give fit the force and its point: "
                "loads=jaxmb.identify.PointForce(segment, point, force) (e.g. the ground reaction at the centre of "
                "pressure), or a function of the model, loads=lambda m: ..., which fit calls with the model it fits "
                "(an array of pure moments, Fx = Fy = 0, is accepted)")  # fmt: skip
    built = _as_float_array(built, name)
    if built.shape[-2:] != (n, 3):
        raise ValueError(f"{name} must have shape ({n}, 3) or (..., {n}, 3), got {built.shape}")
    try:
        np.broadcast_shapes(built.shape[:-2], lead)
    except ValueError:
        raise ValueError(f"{name}'s samples {built.shape[:-2]} do not broadcast with those of q {lead}") from None
    _check_finite(built, name)
    return built


def fit(model: Model, q, qd, qdd, *, moments=None, reactions=None, loads=None, free=None, prior=None,
        sigma: dict | None = None, loss: str = "l2", moment_weights=None, reaction_weights=None,
        max_iter: int = 200, ftol: float | None = None, xtol: float | None = None, gtol: float | None = None,
        rtol: float | None = None) -> FitResult:  # fmt: skip
    """Fit segment parameters to measured joint moments and/or joint reaction forces.

    Two estimates:

    1. linear least squares on the base parameters (:func:`base_parameters`) of the
       linear data (moments, reaction vectors): the classical answer, which may be
       physically inconsistent; reported in ``result.base``;
    2. a physically consistent fit of the physical parameters, mass and inertia about
       the centre of mass through logarithms (positive by construction), the centre
       of mass free, by Levenberg-Marquardt (jit-compiled; each step changes a mass
       or an inertia by at most a factor e) on

           1/2 sum (rho(w (y_model - y_measured) / sigma))  +  1/2 sum ((p - mean) / sd)^2,

       where y_model = Y pi(p) + y0 uses the exact regressors (so every iteration is
       a few matrix products, whatever the number of frames), reaction magnitudes
       |Y pi + y0| enter as they are measured, rho is the square (``loss="l2"``) or
       Huber's (``loss="huber"``: a least-squares stage, then Huber with the
       threshold at 1.345 robust standard deviations (1.4826 MAD) of each kind's
       residuals; a kind whose ``sigma`` is not given is scaled by that robust
       standard deviation, not by its RMS residual, which outliers inflate,
       re-estimated from the Huber fit's residuals up to 3 passes), and the prior
       term is present when ``prior`` is given. Standard errors come from the
       Gauss-Newton Hessian, scaled by the residual variance of each data kind when
       ``sigma`` is not given (Huber: the M-estimator's sum psi^2 / (N - p) /
       mean(psi')^2, Huber 1981), and inverted in the basis of the data's singular
       vectors with the columns scaled to unit norm (:func:`_covariance_z`), so
       that a prior still determines what the data cannot see when the data are
       near exact, and one data kind far more precise than another does not hide
       what only the other sees.

    Why Levenberg-Marquardt rather than a first-order or quasi-Newton method: the
    objective is a sum of squares in at most 4 n unknowns, the Jacobian is cheap
    (``jax.jacfwd`` of matrix products), Gauss-Newton steps converge in a few
    iterations where L-BFGS needs hundreds on these badly scaled parameters (kg
    against kg m^2), and its Hessian is the one the standard errors need.

    Args:
      model: the starting model (lengths, gravity and topology are kept).
      q, qd, qdd: (..., dof) the movement; any leading batch shape (e.g. trials x
        frames: several trials are fitted jointly).
      moments: measured joint moments (..., segments), N m, as
        :func:`jaxmb.joint_moments` returns them.
      reactions: measured joint reaction forces, (..., segments, 2) world-frame
        vectors (N, as :func:`jaxmb.joint_reactions`) or (..., segments) magnitudes.
      loads: known external loads: a :class:`PointForce` (the force and its point,
        e.g. the ground reaction at the centre of pressure) or a list of them; or a
        function ``loads(model) -> (..., segments, 3)`` (wrenches at the centres of
        mass, :func:`jaxmb.point_load`), called with ``model``. fit builds the
        wrenches for the model it fits, once: the moments and reactions of a force at
        a point do not depend on the parameters it changes. An array of wrenches with
        forces is refused (it belongs to the model it was built for: one made for
        another model moved the force, and the fit converged to thigh inertia -100 %);
        an array of pure moments (Fx = Fy = 0) is accepted.
      free: which physical parameters to fit: None (all), a (segments, 4) bool (or
        integer 0/1) mask (mass, com_along, com_across, inertia), or names such as
        ``"mass"``, ``"com"``, ``"inertia"``, ``"shank.mass"``; the others keep the
        model's values.
      prior: optional :class:`Prior` (e.g. :func:`table_prior`): a weighted
        deviation penalty on the free physical parameters.
      sigma: optional {"moments": N m, "reactions": N}: the measurement noise of each
        kind (a key for data not given is an error). Default: estimated from the
        residuals (start from the RMS of the measurements, fit, set sigma to the RMS
        residual of each kind, refit; up to 4 passes, until it changes by less than
        10 %), and the standard errors use the residual variance.
      loss: "l2" or "huber".
      moment_weights, reaction_weights: optional weights >= 0 broadcasting to the
        samples (...) or to the data ((..., segments)). A weight multiplies the
        residual, w (y_model - y_measured) / sigma, so the cost weighs its square:
        a value of weight w counts as if its noise were sigma / w (2 as four copies
        of the value). 0 ignores a value (e.g. a moment not measured, padding of
        trials of unequal length). ``result.rms`` weighs the same way. Weights over
        some leading axes take trailing ones of size 1 (one per trial of samples
        (trials, T): shape (trials, 1, 1)); a shape that reads both ways, such as
        (trials,) when trials == segments, raises ValueError.
      max_iter: Levenberg-Marquardt iterations (per stage).
      ftol, xtol, gtol: tolerances on the relative cost decrease, the relative step
        and the gradient (defaults: 1e-12, 1e-10, 1e-10 in float64; 1.2e-3, 1e-5,
        1e-6 in float32).
      rtol: rank threshold of the identifiability checks (:func:`base_parameters`).

    Returns:
      :class:`FitResult` (print it for the report).

    Warns:
      UserWarning: a data kind whose residual RMS is more than half the data's own
        RMS (the same weights): the fitted parameters explain little of it, converged
        or not (forces acting on the body left out of ``loads``, or data of
        different trials).

    Raises:
      ValueError: naming the argument, for wrong shapes, NaN or infinite values, no
        data, loads given as an array of wrenches with forces (see ``loads``), a
        ``sigma`` for data not given, fewer data values than free
        parameters, or data that cannot identify the free parameters (naming the
        directions), unless a prior is given. That message says whether the deficit
        depends on the movement ("too little excitation": more varied movement
        helps) or not ("not identifiable": a random movement shows it too, so only
        fixing the parameters, a prior or, where they help, reaction forces can).
    """
    if loss not in ("l2", "huber"):
        raise ValueError(f"loss must be 'l2' or 'huber', got {loss!r}")
    if moments is None and reactions is None:
        raise ValueError("fit needs measured data: moments= (..., segments) and/or reactions= "
                         "(..., segments, 2) or (..., segments)")  # fmt: skip
    if isinstance(max_iter, bool) or not isinstance(max_iter, (int, np.integer)) or max_iter < 1:
        raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
    if rtol is not None:
        rtol = _check_rtol(rtol)
    n = model.segments
    (q, qd, qdd), lead = _leading(model, q, qd, qdd)
    loads = _fit_loads(model, q, loads, lead)
    mask = _free_mask(model, free)
    prior = None if prior is None else _check_prior(model, prior)
    sigma = dict(sigma or {})
    unknown = set(sigma) - {"moments", "reactions"}
    if unknown:
        raise ValueError(f"sigma keys are 'moments' and 'reactions', got {sorted(unknown)}")
    for k, v in sigma.items():
        if (moments, reactions)[k == "reactions"] is None:
            raise ValueError(f"sigma[{k!r}] is given but no {k} are: give {k}= or leave the key out")
        if not _positive_number(v):
            raise ValueError(f"sigma[{k!r}] must be a positive number, got {v!r}")

    data, kinds, linear = {}, [], []
    nobs, scale, data_rms = {}, {}, {}
    Yq = {}
    if moments is not None:
        mom = _as_float_array(moments, "moments")
        if mom.shape != lead + (n,):
            raise ValueError(f"moments must have shape {lead + (n,)} (the samples, then one moment per segment, "
                             f"N m), got {mom.shape}")  # fmt: skip
        _check_finite(mom, "moments")
        w = _weights(moment_weights, lead, (n,), "moment_weights")
        _some_weight(w, "moment", "moments")
        Y, y0 = regressor(model, q, qd, qdd, loads, quantity="joint_moments")
        keep = w.reshape(-1) > 0
        Ym = np.asarray(Y).reshape(-1, 4 * n)[keep]
        meas = mom.reshape(-1)[keep]
        data_rms["moments"] = float(np.sqrt(np.mean(meas**2))) if meas.size else 1.0
        s = float(sigma.get("moments", data_rms["moments"])) or 1.0
        scale["moments"] = s
        data.update(m_Y=Ym, m_y0=np.asarray(y0).reshape(-1)[keep], m_meas=meas, m_w=w.reshape(-1)[keep] / s)
        kinds.append("moments")
        nobs["moments"] = int(keep.sum())
        linear.append((Ym * data["m_w"][:, None], (meas - data["m_y0"]) * data["m_w"]))
        Yq["moments"] = (Y, y0, w, mom)
    rkind = "none"
    if reactions is not None:
        rea = _as_float_array(reactions, "reactions")
        if rea.shape == lead + (n, 2):
            rkind = "vector"
        elif rea.shape == lead + (n,):
            rkind = "magnitude"
        else:
            raise ValueError(f"reactions must have shape {lead + (n, 2)} (vectors, N) or {lead + (n,)} "
                             f"(magnitudes, N), got {rea.shape}")  # fmt: skip
        _check_finite(rea, "reactions")
        if rkind == "magnitude" and (rea < 0).any():
            raise ValueError("reaction magnitudes must be >= 0")
        w = _weights(reaction_weights, lead, (n,), "reaction_weights")
        _some_weight(w, "reaction", "reactions")
        Y, y0 = regressor(model, q, qd, qdd, loads, quantity="joint_reactions")
        keep = w.reshape(-1) > 0
        Yr = np.asarray(Y).reshape(-1, 2, 4 * n)[keep]
        y0r = np.asarray(y0).reshape(-1, 2)[keep]
        meas = rea.reshape((-1, 2) if rkind == "vector" else (-1,))[keep]
        data_rms["reactions"] = float(np.sqrt(np.mean(meas**2))) if meas.size else 1.0
        s = float(sigma.get("reactions", data_rms["reactions"])) or 1.0
        scale["reactions"] = s
        wr = w.reshape(-1)[keep] / s
        if rkind == "vector":
            data.update(r_Y=Yr.reshape(-1, 4 * n), r_y0=y0r.reshape(-1), r_meas=meas.reshape(-1),
                        r_w=np.repeat(wr, 2))  # fmt: skip
            linear.append((data["r_Y"] * data["r_w"][:, None], (data["r_meas"] - data["r_y0"]) * data["r_w"]))
        else:
            data.update(r_Y=Yr, r_y0=y0r, r_meas=meas, r_w=wr)
        kinds.append("reactions")
        nobs["reactions"] = int(keep.sum()) * (2 if rkind == "vector" else 1)
        Yq["reactions"] = (Y, y0, w, rea)

    free_idx = tuple(int(k) for k in np.flatnonzero(mask.reshape(-1)))
    p_free = len(free_idx)
    N = sum(nobs.values())
    if N < p_free:
        raise ValueError(f"too few samples: {N} measured values (with weight > 0) for {p_free} free parameters; "
                         "give more samples or fix parameters (free=...)")  # fmt: skip

    # (1) linear least squares on the base parameters
    base = None
    if linear:
        # the rank decision at the precision the regressors were computed in (weights
        # are float64 NumPy: A would otherwise pass float32 rounding as information)
        ydt = np.result_type(*(np.asarray(v[0]).dtype for v in Yq.values()))
        in_linear = [k for k in kinds if k == "moments" or rkind == "vector"]  # magnitudes are not linear
        base = _base_fit(model, linear, in_linear, sigma, ydt, rtol)

    # (2) the consistent fit
    phys0 = np.asarray(to_physical(model), dtype=float)
    floor = _floor(model)
    z0 = _z_from_physical(phys0, floor)
    dtype = jnp.result_type(float)
    data["z0"] = z0
    data["floor"] = floor
    if prior is not None:
        data["p_mean"], data["p_sd"] = prior.mean, prior.sd
    cfg = _Config(n, free_idx, moments is not None, rkind, False, prior is not None)
    jdata = {k: jnp.asarray(v, dtype) for k, v in data.items()}
    zf0 = jnp.asarray(z0.reshape(-1)[list(free_idx)], dtype)
    eps = float(jnp.finfo(dtype).eps)
    ftol = (1e4 * eps if eps > 1e-10 else 1e-12) if ftol is None else float(ftol)
    # float32: 1e-5 (a looser step test, relative to |z| with log-inertias of -7,
    # stopped noiseless fits after 3 iterations at 0.3 % errors)
    xtol = (1e-5 if eps > 1e-10 else 1e-10) if xtol is None else float(xtol)
    gtol = (1e-6 if eps > 1e-10 else 1e-10) if gtol is None else float(gtol)
    outputs = {k: np.asarray(Yq[k][2] > 0).reshape(-1, n).any(0) for k in kinds}  # the joints measured

    def other_motion(data, actual=False):
        # the data Jacobian of a random movement (same shape as q, so that the
        # regressors compiled for the data serve; 64 samples at least), every measured
        # joint weighed alike, reaction vectors for either kind of reaction data;
        # ``actual``: of the data's own movement instead (would other data kinds help it?)
        rows, shape = [], lead if actual or math.prod(lead) >= 64 else (64,)
        if actual:
            qr, qdr, qddr = q, qd, qdd
        else:
            rng_ = np.random.default_rng(0)
            qr = rng_.uniform(-np.pi, np.pi, shape + (model.dof,))
            qdr, qddr = 2.0 * rng_.standard_normal(qr.shape), 5.0 * rng_.standard_normal(qr.shape)
        ld = loads if shape == lead else None
        for k in data:
            quantity = "joint_moments" if k == "moments" else "joint_reactions"
            Y = np.asarray(regressor(model, qr, qdr, qddr, ld, quantity=quantity)[0])
            Y = Y.reshape((-1, n) + Y.shape[len(shape) + 1:])[:, outputs.get(k, np.ones(n, bool))].reshape(-1, 4 * n)
            rows.append(Y / max(float(np.sqrt(np.mean(Y * Y))), 1e-300))
        return np.concatenate(rows) @ _dpi_dz(phys0, floor)[:, list(free_idx)]

    _identifiable_or_raise(model, zf0, jdata, cfg, free_idx, rtol, prior is not None, kinds, other_motion)

    # sigma not given: start from the RMS of each data kind, then re-estimate it from the
    # residuals and refit (variance components), so that the data kinds, and the data
    # against the prior, weigh by their noise rather than by their size
    wkey = {"moments": "m_w", "reactions": "r_w"}
    raw_w = {k: data[wkey[k]] * scale[k] for k in kinds}
    ref = np.abs(phys0.reshape(-1)[list(free_idx)])  # starting sizes (stuck-at-floor check)

    def noise(rd):
        """Each kind's residual scale (its noise estimate, in its units) from the
        whitened residuals rd."""
        rd_np, off, out = np.asarray(rd), 0, {}
        for k in kinds:
            r = rd_np[off:off + nobs[k]] * scale[k]
            off += nobs[k]
            out[k] = float(np.sqrt(np.sum(r * r) / max(np.sum(raw_w[k] ** 2), 1e-300)))
        return out

    def at_rounding(rd, kinds=kinds):
        # the residuals of ``kinds`` at rounding level (data fitted exactly): no step
        # can lower the cost (damping overflow is convergence), the variances have
        # nothing to weigh, and a robust loss nothing to down-weight
        s = noise(rd)
        return all(s[k] <= 1e3 * eps * data_rms[k] for k in kinds)

    def solve(z, cfg):
        """Levenberg-Marquardt from z; a mass or inertia left stuck at its floor (see
        _stuck_at_floor) restarts once from its starting value. Returns the result
        and the names of those still stuck."""
        out = _lm_jit(z, jdata, cfg, int(max_iter), ftol, xtol, gtol)
        it = int(out[2])
        stuck = _stuck_at_floor(out[0], out[1], jdata, cfg, ref)
        if stuck.any() and int(out[3]) > 0:
            out = _lm_jit(jnp.where(jnp.asarray(stuck), zf0, out[0]), jdata, cfg, int(max_iter), ftol, xtol, gtol)
            it += int(out[2])
            stuck = _stuck_at_floor(out[0], out[1], jdata, cfg, ref)
        status = out[3]
        if int(status) == -2 and at_rounding(out[4]):
            status = 4  # no step lowers a cost that is rounding: the data are fitted exactly
        return (*out[:2], it, status, *out[4:]), [_physical_names(model)[free_idx[j]] for j in np.flatnonzero(stuck)]

    z, iters = zf0, 0
    for _ in range(1 if all(k in sigma for k in kinds) else 4):
        used = dict(scale)  # each kind's scale in the objective of the last solve
        (z, c, it, status, rd, Jd, Jp), stuck = solve(z, cfg)
        iters += int(it)
        if int(status) <= 0 or all(k in sigma for k in kinds):
            break
        est = [k for k in kinds if k not in sigma]
        if at_rounding(rd, est):
            break  # residuals at round-off: the data are fitted exactly, nothing to weigh
        new_scale = noise(rd)
        change = max(abs(new_scale[k] / scale[k] - 1) for k in est)
        for k in est:
            scale[k] = max(new_scale[k], 1e3 * eps * data_rms[k])
            jdata[wkey[k]] = jnp.asarray(raw_w[k] / scale[k], dtype)
        if change < 0.1:
            break
    if loss == "huber" and int(status) > 0 and not at_rounding(rd):
        # Huber: each kind whose noise is estimated is scaled by its robust standard
        # deviation (1.4826 MAD of its residuals), not by the RMS, which the outliers
        # inflate (moments 5 % off by 40 N m weighed as if their noise were 9 N m, not
        # 0.5, against the reactions); the threshold is 1.345 of those. Re-estimated
        # from the Huber fit's residuals and refitted, up to 3 passes, until it changes
        # by less than 10 %
        cfg = cfg._replace(huber=True)
        rd_raw = np.asarray(rd)  # whitened by ``used``, the scales of the last solve
        for p_ in range(3):
            mads, off = {}, 0
            for k in kinds:
                r = rd_raw[off:off + nobs[k]] * used[k]  # weighted residuals, in the data's units
                off += nobs[k]
                mad = 1.4826 * float(np.median(np.abs(r - np.median(r))))
                mads[k] = mad if mad > 0 else (float(np.sqrt(np.mean(r * r))) or used[k])
            est = {k: max(mads[k], 1e3 * eps * data_rms[k]) for k in kinds if k not in sigma}
            if p_ and max((abs(v / scale[k] - 1) for k, v in est.items()), default=0.0) < 0.1:
                break  # the scales the last solve used hold
            scale.update(est)
            for k in est:
                jdata[wkey[k]] = jnp.asarray(raw_w[k] / scale[k], dtype)
            jdata["delta"] = tuple(jnp.asarray(1.345 * mads[k] / scale[k], dtype) for k in kinds)
            used = dict(scale)
            (z, c, it, status, rd, Jd, Jp), stuck = solve(z, cfg)
            iters += int(it)
            if int(status) <= 0 or not est:
                break
            rd_raw = np.asarray(_data_residuals(z, jdata, cfg._replace(huber=False)))
    status = int(status)
    converged = status > 0 and bool(np.isfinite(np.asarray(z)).all()) and not stuck

    # standard errors from the Gauss-Newton Hessian: data rows whitened by each kind's
    # residual variance (1 where sigma is given: the rows are already scaled by it).
    # Huber: the M-estimator's variance (Huber 1981, 7.6), sum psi(u)^2 / (N - p) /
    # mean(psi'(u))^2 per kind, of the residuals u and the Jacobian before the Huber
    # transform (psi(u) = clip(u, -delta, delta)); where sigma is given, its
    # expectation for normal noise, as the squares take 1
    z_np = np.asarray(z, dtype=float)
    Jd, Jp, rd_np = np.asarray(Jd, dtype=float), np.asarray(Jp, dtype=float), np.asarray(rd, dtype=float)
    if cfg.huber:
        plain = cfg._replace(huber=False)
        Jd = np.asarray(_data_jacobian(z, jdata, plain), dtype=float)
        rd_np = np.asarray(_data_residuals(z, jdata, plain), dtype=float)
    Jw, off, noise_level = [], 0, {}
    for i, k in enumerate(kinds):
        cnt = nobs[k]
        J_k, r_k = Jd[off:off + cnt], rd_np[off:off + cnt]
        off += cnt
        if cfg.huber:
            d = float(jdata["delta"][i])
            if k in sigma:
                a = math.erf(d / math.sqrt(2.0))
                b = a - 2.0 * d * math.exp(-0.5 * d * d) / math.sqrt(2.0 * math.pi) + d * d * (1.0 - a)
            else:
                a = float(np.mean(np.abs(r_k) <= d))
                b = float(np.sum(np.minimum(r_k * r_k, d * d))) / max(cnt - p_free, 1)
            s2 = b / max(a, 1.0 / cnt) ** 2
        else:
            s2 = 1.0 if k in sigma else float(r_k @ r_k) / max(cnt - p_free, 1)
        Jw.append(J_k / math.sqrt(max(s2, np.finfo(float).tiny)))
        # in the data's units: the rows were divided by the scale of the last solve
        noise_level[k] = float(sigma[k]) if k in sigma else math.sqrt(s2) * used[k]
    Jw = np.concatenate(Jw)
    # a mass or an inertia pinned at its floor: d p / d z = p - floor has vanished
    # (below 1e-6 of its starting size), so its log coordinate no longer changes the
    # data; its data column is zeroed (undetermined, unless a prior holds it) rather
    # than rescaled by _covariance_z's column scaling
    logs = np.isin(np.asarray(free_idx) % 4, (0, 3))
    pin = logs & (np.exp(z_np) <= 1e-6 * np.maximum(ref, np.finfo(float).tiny))
    Jw[:, pin] = 0.0
    cov_z, undetermined = _covariance_z(Jw, Jp)
    zfull = z0.reshape(-1).copy()
    zfull[list(free_idx)] = z_np
    zfull = zfull.reshape(n, 4)
    phys = _physical_from_z(zfull, floor)
    # delta method: d phys / d z = diag(m - floor, 1, 1, I - floor), d pi / d z by hand;
    # an undetermined z has an infinite variance whatever its derivative (0 * inf where
    # a mass or an inertia sits at its floor)
    dphys = np.ones((n, 4))
    dphys[:, 0], dphys[:, 3] = phys[:, 0] - floor[:, 0], phys[:, 3] - floor[:, 3]
    dphys = dphys.reshape(-1)[list(free_idx)]
    var_phys = np.zeros(4 * n)
    var_phys[list(free_idx)] = np.where(undetermined, np.inf, dphys**2 * np.where(undetermined, 0.0, np.diag(cov_z)))
    Jpi = _dpi_dz(phys, floor)[:, list(free_idx)]
    # only the barycentric parameters that depend on an undetermined z are undetermined:
    # by the structure of pi(z), not by the value of the derivative (which vanishes to
    # rounding for a mass or an inertia at its floor, or for J against c = 0)
    det = ~undetermined
    cov_pi = Jpi[:, det] @ cov_z[np.ix_(det, det)] @ Jpi[:, det].T
    depends = _dpi_dz(np.ones((n, 4)), np.zeros((n, 4)))[:, list(free_idx)] != 0
    touched = depends[:, undetermined].any(1)
    cov_pi[touched, :] = np.inf
    cov_pi[:, touched] = np.inf
    stderr = np.sqrt(np.maximum(np.diag(cov_pi), 0.0))
    stderr_phys = np.sqrt(np.maximum(var_phys, 0.0)).reshape(n, 4)

    at_bound = tuple(f"{PHYSICAL[j]}[{model.names[i]}]" for i, j in zip(*np.nonzero(
        mask & (phys <= 1e3 * np.where(floor > 0, floor, -np.inf)))))  # fmt: skip
    status_text = _STATUS.get(status, f"status {status}")
    if stuck:
        status_text += ("; NOT a minimum: stuck at the floor of physical consistency while the cost still "
                        "falls as they grow (start closer, or fix them): " + ", ".join(stuck))
        at_bound = tuple(b for b in at_bound if b not in stuck)
    if at_bound:
        status_text += "; at the bound of physical consistency (the data push them to 0): " + ", ".join(at_bound)
    fitted = from_physical(model, phys)
    pi = _pi_from_physical(phys)
    residuals, rms = {}, {}
    for k, (Y, y0, w, meas) in Yq.items():
        yk = np.asarray(Y) @ pi + np.asarray(y0)
        if k == "reactions" and rkind == "magnitude":
            yk = np.linalg.norm(yk, axis=-1)
        r = yk - meas
        residuals[k] = r
        # weighted as the fit weighs them: w multiplies the residual, so w^2 the square
        wk = w if r.ndim == w.ndim else w[..., None]
        wk = np.broadcast_to(wk, r.shape) ** 2
        rms[k] = float(np.sqrt(np.sum(wk * r * r) / max(np.sum(wk), 1e-300)))
    _warn_unexplained(rms, {k: (v[3], v[2]) for k, v in Yq.items()}, loads is None)
    return FitResult(model=fitted, initial=model, parameters=pi, stderr=stderr, physical=phys,
                     stderr_physical=stderr_phys, covariance=cov_pi, residuals=residuals, rms=rms,
                     converged=converged, status=status_text, iterations=iters,
                     cost=float(c), free=mask, base=base, names=parameter_names(model), noise=noise_level,
                     _z=z_np, _cov_z=cov_z)  # fmt: skip


#: a fit whose residual RMS is more than this fraction of the data's own RMS (the
#: same weights) explains little of the data, whether or not it converged
UNEXPLAINED = 0.5


def _warn_unexplained(rms: dict, data: dict, no_loads: bool) -> None:
    """UserWarning, per data kind, when the fitted model leaves more than
    :data:`UNEXPLAINED` of the measured data's RMS unexplained: a fit of the running
    leg without its ground reaction "converged" to a 42 kg thigh with its centre of
    mass outside the segment, and only ``rms`` hinted at it. ``data``: kind ->
    (measured, weights)."""
    for k, (meas, w) in data.items():
        meas = np.asarray(meas)
        wk = np.broadcast_to((w if meas.ndim == np.ndim(w) else np.asarray(w)[..., None]) ** 2, meas.shape)
        size = float(np.sqrt(np.sum(wk * meas * meas) / max(np.sum(wk), 1e-300)))
        if size > 0 and rms[k] > UNEXPLAINED * size:
            import warnings

            hint = ("no loads were given: if forces act on the body (a ground reaction), pass them as loads= "
                    "(identify.PointForce)" if no_loads else
                    "check that the loads, the motion and the measured data belong to the same trial")
            warnings.warn(f"fit: the fitted model leaves {rms[k]:.4g} RMS of the measured {k} unexplained, "
                          f"{100 * rms[k] / size:.0f} % of their own RMS ({size:.4g}): its parameters explain "
                          f"little of the data; {hint}", UserWarning, stacklevel=3)  # fmt: skip


def _base_fit(model, linear, kinds, sigma, ydt, rtol) -> "BaseFit":
    """Linear least squares on the base parameters from the rows ``linear`` (one
    (A_k, b_k) per data kind in ``kinds``, each divided by its sigma or, where none is
    given, by the RMS of its data). Where the noise of a kind is not given it is
    estimated from that kind's own residuals and the rows are refitted with it
    (variance components, as the consistent fit does): one variance pooled over
    moments (N m) and reactions (N) would misstate the errors of both. The covariance
    is (A^T W A)^-1 with each kind's rows whitened by its residual variance (1 where
    sigma is given)."""
    bp = base_parameters(model, np.concatenate([a for a, _ in linear]).astype(ydt), rtol=rtol)
    cols = list(bp.independent)
    rows = [(a[:, cols], b) for a, b in linear]
    N = sum(a.shape[0] for a, _ in rows)
    # rows are scaled to O(1) (by sigma or the data's RMS): a variance floor far below
    # rounding keeps exact data's weights and (A^T W A) finite
    tiny = (1e-3 * float(np.finfo(ydt).eps)) ** 2
    s2 = [1.0] * len(rows)
    for _ in range(1 if all(k in sigma for k in kinds) else 5):
        w = [1 / math.sqrt(v) for v in s2]
        xb, *_ = np.linalg.lstsq(np.concatenate([a * wk for (a, _), wk in zip(rows, w)]),
                                 np.concatenate([b * wk for (_, b), wk in zip(rows, w)]), rcond=None)  # fmt: skip
        new = []
        for (a, b), k in zip(rows, kinds):
            r = a @ xb - b
            # each kind's share of the degrees of freedom the fit took (N - rank in all)
            dof = max(a.shape[0] - bp.rank * a.shape[0] / N, 1.0)
            new.append(1.0 if k in sigma else max(float(r @ r) / dof, tiny))
        change = max(abs(n_ / o - 1) for n_, o in zip(new, s2))
        s2 = new
        if change < 1e-3 or len(rows) == 1:
            break
    H = sum(a.T @ a / v for (a, _), v in zip(rows, s2))
    cov = np.linalg.pinv(H)
    return BaseFit(bp, xb, np.sqrt(np.maximum(np.diag(cov), 0.0)))


def _covariance_z(Jw: np.ndarray, Jp: np.ndarray) -> tuple:
    """Covariance of the fit's free z from the whitened data Jacobian ``Jw`` (rows
    J_k / s_k, the data's noise taken out) and the prior's Jacobian ``Jp`` (rows of
    (p - mean) / sd; no rows without a prior): the inverse of the Gauss-Newton
    Hessian Jw^T Jw + Jp^T Jp, with inf in the rows and columns of the z indices
    left undetermined. Returns (cov (P, P), undetermined (P,) bool).

    Not formed as a sum: near-exact data make the data's part of the Hessian 1e20 or
    more times the prior's, which a relative eigenvalue cut, or rounding in the sum
    itself, would lose. Instead, in the basis of the data's right singular vectors
    V (Jw = U diag(s) V^T), the Hessian is diag(s^2) + V^T Jp^T Jp V, with data
    singular values at or below 1e-6 of the largest set to 0 (rounding, not
    information: the rank cut of the data alone), the columns of both Jacobians
    scaled to unit norm (of Jw; of Jp where Jw's is 0) first and the covariance
    unscaled after. It is equilibrated by the square
    root of its diagonal (a zero diagonal is a direction nothing determines),
    inverted (:func:`_inverse_psd`), unscaled and turned back to z. A z index is
    undetermined where it has weight (> 1e-6) on an undetermined direction. Without
    a prior this is Jw's pseudo-inverse squared, as the eigen-decomposition of
    Jw^T Jw gave, but from the singular values (more accurate)."""
    P = Jw.shape[1]
    if P == 0:
        return np.zeros((0, 0)), np.zeros(0, bool)
    if not (np.isfinite(Jw).all() and np.isfinite(Jp).all()):
        return np.full((P, P), np.inf), np.ones(P, bool)
    if Jw.shape[0] < P:
        Jw = np.concatenate([Jw, np.zeros((P - Jw.shape[0], P))])
    # columns scaled to unit norm first (the covariance unscaled at the end), so that
    # the rank cut sees directions the data do not determine, not units or one data
    # kind far more precise than another (reactions to 1e-4 N cut the inertias, which
    # only the moments see, 1e-6 below the masses' singular values)
    c = _column_norms(Jw)
    cp = _column_norms(Jp) if Jp.shape[0] else np.zeros(P)
    c = np.where(c > 0, c, np.where(cp > 0, cp, 1.0))
    Jw, Jp = Jw / c, Jp / c
    _, s, Vt = np.linalg.svd(Jw, full_matrices=False)
    V = Vt.T
    s = np.where(s > 1e-6 * s.max(), s, 0.0) if s.max() > 0 else np.zeros_like(s)
    B = Jp @ V
    Pb = B.T @ B  # the prior's Hessian in the basis V
    # d = sqrt(diag(diag(s^2) + Pb)) without forming s^2 (it may overflow), and the
    # equilibrated Hessian E = D^-1 H D^-1
    d = np.hypot(s, np.sqrt(np.maximum(np.diag(Pb), 0.0)))
    seen = d > 0
    ds = d[seen]
    E = (Pb[np.ix_(seen, seen)] / ds[:, None]) / ds[None, :] + np.diag((s[seen] / ds) ** 2)
    Einv = _inverse_psd(E)
    ok = np.isfinite(np.diag(Einv))
    keep = np.flatnonzero(seen)[ok]
    cov_b = (Einv[np.ix_(ok, ok)] / ds[ok][:, None]) / ds[ok][None, :]
    cov = (V[:, keep] @ cov_b @ V[:, keep].T) / c[:, None] / c[None, :]
    lost = np.setdiff1d(np.arange(P), keep)
    undetermined = np.abs(V[:, lost]).max(1) > 1e-6 if lost.size else np.zeros(P, bool)
    cov[undetermined, :] = np.inf
    cov[:, undetermined] = np.inf
    return cov, undetermined


def _column_norms(A: np.ndarray) -> np.ndarray:
    """Euclidean norms of the columns without overflow (rows whitened by a residual
    variance at rounding level reach 1e150 and more: their squares would overflow)."""
    m = np.max(np.abs(A), axis=0)
    safe = np.where(m > 0, m, 1.0)
    return m * np.linalg.norm(A / safe, axis=0)


def _inverse_psd(H: np.ndarray) -> np.ndarray:
    """Inverse of a symmetric positive semi-definite matrix; inf along (near-)null
    directions instead of huge or NaN numbers."""
    w, V = np.linalg.eigh(H)
    tol = max(w.max(), 0.0) * 1e-12 if w.size else 0.0
    good = w > tol
    inv = (V[:, good] / w[good]) @ V[:, good].T
    if not good.all():
        touched = np.abs(V[:, ~good]).max(1) > 1e-6
        inv[touched, :] = np.inf
        inv[:, touched] = np.inf
    return inv


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


def sensitivity(model: Model, q, qd, qdd, *, quantity: str = "joint_moments", joints=None,
                frame: str = "world") -> jax.Array:  # fmt: skip
    """Jacobian of the joint loads with respect to every physical segment parameter.

    ``jax.jacfwd`` through the batched engine (``gradient="autodiff"``) with respect
    to the (segments, 4) mass, com_along, com_across, inertia. Known external loads
    (forces at points fixed on the segments, e.g. a ground reaction force at the
    centre of pressure) do not depend on these parameters, so they do not enter.

    Args:
      model: the model.
      q, qd, qdd: (..., dof) the movement.
      quantity: "joint_moments" (default), "joint_reactions" or "inverse_dynamics".
      joints, frame: for reactions, as :func:`jaxmb.joint_reactions`.

    Returns:
      (..., out, segments, 4): e.g. ``(T, n, n, 4)`` for moments, N m per kg, per m
      and per kg m^2; ``(T, joints, 2, n, 4)`` for reactions, N per unit.
    """
    (q, qd, qdd, _), joints = _prepare(model, quantity, q, qd, qdd, None, joints, frame)
    return _sensitivity_jit(model, q, qd, qdd, quantity, joints, frame)


# -------------------------------------------------------------------- Monte Carlo


class Bands(NamedTuple):
    """Bands of a quantity over parameter draws.

    Attributes:
      nominal: (..., out) the quantity at the central parameters.
      mean, sd: (..., out) over the draws.
      quantiles: (k, ..., out) at ``levels``.
      levels: (k,) the quantile levels.
      samples: (draws, ..., out) when asked for, else None.
      parameters: (draws, segments, 4) the physical parameters drawn.
    """

    nominal: np.ndarray
    mean: np.ndarray
    sd: np.ndarray
    quantiles: np.ndarray
    levels: np.ndarray
    samples: np.ndarray | None
    parameters: np.ndarray


def _check_fit_model(model: Model, fitted: Model) -> None:
    """ValueError unless ``model`` is the fit's model up to its mass, centres of mass
    and inertias (the draws are the fit's; the rest must be what they were fitted on)."""
    if model.segments != fitted.segments:
        raise ValueError(f"monte_carlo(spread=fit): the model has {model.segments} segments, the fit's "
                         f"{fitted.segments}: pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip
    for f in ("parent", "base", "coordinates", "attach_end"):
        if getattr(model, f) != getattr(fitted, f):
            raise ValueError(f"monte_carlo(spread=fit): the model's {f} {getattr(model, f)!r} is not the fit's "
                             f"{getattr(fitted, f)!r}: pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip
    for f in ("length", "attach", "origin", "gravity"):
        a, b = np.asarray(getattr(model, f), float), np.asarray(getattr(fitted, f), float)
        if a.shape != b.shape or not np.allclose(a, b, rtol=1e-6, atol=1e-12, equal_nan=True):
            raise ValueError(f"monte_carlo(spread=fit): the model's {f} {a.tolist()} is not the fit's {b.tolist()}: "
                             "pass the model the fit was made with (fit.initial or fit.model)")  # fmt: skip


def _draw_physical(model: Model, spread, draws: int, seed: int) -> tuple:
    """(central (n, 4), draws (D, n, 4)) physical parameters."""
    n = model.segments
    rng = np.random.default_rng(seed)
    if isinstance(spread, FitResult):
        _check_fit_model(model, spread.model)
        if spread._cov_z is None or not np.isfinite(spread._cov_z).all():
            raise ValueError("this fit has undetermined parameters (infinite standard errors): "
                             "fix them or fit with a prior before propagating its uncertainty")  # fmt: skip
        free_idx = np.flatnonzero(spread.free.reshape(-1))
        floor = _floor(spread.initial)
        zc = _z_from_physical(spread.physical, floor).reshape(-1)
        # the fit's correlations in z, and each free parameter drawn with the fit's
        # estimate as its mean and its standard error as its sd: log-normal for a mass
        # or an inertia above its floor (log sd sqrt(log(1 + s^2)), s the sd of its
        # log; s itself where s is small), normal for a centre of mass. A normal in the
        # log with sd s (the fit's linearisation) would, where s is large (a standard
        # error above the value), put draws orders of magnitude beyond it: s = 14 drew
        # inertias of 1e19 kg m^2 and moments of 1e17 N m
        cov = spread._cov_z
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        pos = sd > 0
        R = np.eye(len(free_idx))
        R[np.ix_(pos, pos)] = cov[np.ix_(pos, pos)] / sd[pos][:, None] / sd[pos][None, :]
        try:
            L = np.linalg.cholesky(R + 1e-300 * np.eye(len(free_idx)))
        except np.linalg.LinAlgError:
            # variances 1e16 apart (near-exact data along some directions, a prior along
            # others): rounding leaves eigenvalues of -1e-18; a symmetric square root
            w, U = np.linalg.eigh(R)
            L = U * np.sqrt(np.maximum(w, 0.0))
        logs = np.isin(free_idx % 4, (0, 3))
        s_log = np.sqrt(np.log1p(sd**2))
        scale = np.where(logs, s_log, sd)
        shift = np.where(logs, -0.5 * s_log**2, 0.0)
        zs = np.broadcast_to(zc, (draws, 4 * n)).copy()
        zs[:, free_idx] += shift + (rng.standard_normal((draws, len(free_idx))) @ L.T) * scale
        return spread.physical, _physical_from_z(zs.reshape(draws, n, 4), floor)
    mean, sd = _check_prior(model, spread)
    out = np.empty((draws, n, 4))
    # mass and inertia log-normal with the given mean and sd (always positive),
    # the centre of mass normal
    for j in (0, 3):
        s2 = np.log1p((sd[:, j] / mean[:, j]) ** 2)
        out[:, :, j] = mean[:, j] * np.exp(np.sqrt(s2) * rng.standard_normal((draws, n)) - s2 / 2)
    for j in (1, 2):
        out[:, :, j] = mean[:, j] + sd[:, j] * rng.standard_normal((draws, n))
    return mean, out


@jax.jit
def _propagate(Y, y0, phys, center):
    # y_d = Y pi_d + y0 for every draw d: one matrix product (the dynamics are linear in
    # pi), draws on the last axis so that each output's draws are contiguous
    ys = jnp.einsum("...p,dp->...d", Y, _pi_from_physical(phys)) + y0[..., None]
    nominal = Y @ _pi_from_physical(center) + y0
    return ys, nominal, jnp.mean(ys, -1), jnp.std(ys, -1)


def monte_carlo(model: Model, q, qd, qdd, loads=None, *, spread, draws: int = 1000, seed: int = 0,
                quantity: str = "joint_moments", joints=None, frame: str = "world",
                levels: Sequence[float] = (0.025, 0.5, 0.975), samples: bool = False) -> Bands:  # fmt: skip
    """Propagate parameter uncertainty into bands of joint moments (or reactions).

    Draws physical parameters from ``spread`` -- a :class:`Prior` (e.g.
    :func:`table_prior`; mass and inertia log-normal with its mean and sd, so always
    positive, the centre of mass normal) or a :class:`FitResult` (its free parameters
    with the fit's estimates as means and its standard errors as sd, mass and
    inertia log-normal above their floor, the centre of mass normal, correlated as
    the fit's covariance in its coordinates, log mass and log inertia) -- and evaluates the quantity for every draw and every sample at
    once: the regressor is computed once (one engine pass), and the draws are one
    matrix product ``Y pi_d + y0``, exact because the dynamics are linear in pi.

    Args:
      model: the model (topology, lengths, gravity; its masses and inertias are not
        used: the centre is the Prior's mean or the fit's estimate).
      q, qd, qdd: (..., dof) the movement.
      loads: known external loads, as :func:`regressor`.
      spread: :class:`Prior` or :class:`FitResult`.
      draws: number of parameter draws.
      seed: of NumPy's generator.
      quantity: "joint_moments" (default), "joint_reactions" or "inverse_dynamics".
      joints, frame: for reactions.
      levels: quantile levels of the bands (0 to 1).
      samples: also return every draw's values (draws x samples x out floats).

    Returns:
      :class:`Bands`.
    """
    _check_quantity(quantity)
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 2:
        raise ValueError(f"draws must be an int >= 2, got {draws!r}")
    lv = np.asarray(levels, dtype=float).reshape(-1)
    if lv.size == 0 or not ((lv >= 0) & (lv <= 1)).all():
        raise ValueError(f"levels must be numbers in [0, 1], got {levels!r}")
    center, phys = _draw_physical(model, spread, int(draws), int(seed))
    Y, y0 = regressor(model, q, qd, qdd, loads, quantity=quantity, joints=joints, frame=frame)
    ys, nominal, mean, sd = _propagate(Y, y0, jnp.asarray(phys, Y.dtype), jnp.asarray(center, Y.dtype))
    ys = np.asarray(ys)
    # quantiles by selection (NumPy's introselect), not a full sort: 4x faster on CPU
    qs = np.quantile(ys, lv, axis=-1)
    return Bands(np.asarray(nominal), np.asarray(mean), np.asarray(sd), qs, lv,
                 np.moveaxis(ys, -1, 0) if samples else None, phys)  # fmt: skip


# --------------------------------------------------------- the running experiment


def running_trial():
    """The van den Bogert running trial as identification data (:func:`jaxmb.datasets.running_leg`).

    The leg is a floating-base chain (thigh, shank, foot; base at the hip, absolute
    segment angles) with the simulation's parameters and gravity 9.80665; angles and
    hip position are differentiated with :func:`jaxmb.signal.derivative` (central
    second differences, all 6001 frames); the ground reaction force acts at the
    centre of pressure on the foot.

    Returns:
      dict: model (the true model), q, qd, qdd (T, 5), ground (the
      :class:`PointForce` of the ground reaction on the foot at the centre of
      pressure: what :func:`fit` takes as ``loads``, for any starting model), loads
      (T, 3, 3) (the same as wrenches at the centres of mass of the true model only:
      for :func:`regressor` and :func:`monte_carlo` of ``model``; fit refuses them),
      loads_for (a function: the wrenches for another model), moments (T, 3) N m,
      moment_weights (T,) (1 from heel strike on, where the true moments are given;
      0 before), force_magnitudes (T, 3) N, data (the :class:`jaxmb.gait.RunningData`).
    """
    from .datasets import running_leg

    leg = running_leg()
    model, q, qd, qdd, cop, d = (leg[k] for k in ("model", "q", "qd", "qdd", "cop", "data"))

    def loads_for(m: Model) -> np.ndarray:
        # the ground reaction force at the centre of pressure, as wrenches at the
        # centres of mass of m (a load array belongs to the model it was built for)
        return np.asarray(jax.jit(jax.vmap(lambda a, p, f: point_load(m, a, "foot", p, f)))(q, cop, d.force))

    w = np.zeros(len(q))
    w[d.heel_strike:] = 1.0
    return dict(model=model, q=q, qd=qd, qdd=qdd, ground=PointForce("foot", cop, d.force), loads=loads_for(model),
                loads_for=loads_for, moments=d.moments, moment_weights=w, force_magnitudes=d.force_magnitudes,
                data=d)  # fmt: skip


def perturbed(model: Model, fraction: float = 0.3, seed: int = 0) -> Model:
    """The model with every physical parameter scaled by 1 +- fraction (random signs).

    Parameters that are 0 (a centre of mass on the axis or at the joint) start at
    +- fraction / 3 of the segment length instead.
    """
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, (int, float, np.integer, np.floating)) or not (
            0.0 <= float(fraction) < 1.0):  # fmt: skip
        raise ValueError(f"fraction must be a number in [0, 1) (a mass scaled by 1 - fraction stays > 0), "
                         f"got {fraction!r}")  # fmt: skip
    rng = np.random.default_rng(seed)
    phys = np.asarray(to_physical(model), dtype=float)
    sign = rng.choice([-1.0, 1.0], size=phys.shape)
    L = np.asarray(model.length, dtype=float)[:, None] * np.ones((1, 4))
    new = np.where(phys != 0, phys * (1 + fraction * sign), sign * fraction / 3 * L)
    return from_physical(model, new)


def recover_running(fraction: float = 0.3, seed: int = 0, *, loss: str = "huber", frames=None):
    """Fit the running leg from a perturbed start to the true moments and force magnitudes.

    Args:
      fraction: every parameter starts at 1 +- fraction times its true value.
      seed: of the random signs.
      loss: of the consistent fit.
      frames: optional index (slice or array) of the frames to use.

    Returns:
      dict: true (model), start (model), fit (:class:`FitResult`, moments and force
      magnitudes), moments_only (:class:`BaseParameters` of the moments alone),
      with_forces (:class:`BaseParameters` of the moments and the force magnitudes
      linearised at the true parameters), rows (list of dicts, one per physical
      parameter: parameter, unit, true, start, fitted, stderr, error,
      relative_error (of the true value, or of the length for the centre of mass),
      identifiable_from_moments (the physical parameter on its own), barycentric
      (m, mx, my or J of the same segment) and whether moments alone identify it).
    """
    trial = running_trial()
    sel = slice(None) if frames is None else frames
    q, qd, qdd = (trial[k][sel] for k in ("q", "qd", "qdd"))
    true = trial["model"]
    start = perturbed(true, fraction, seed)
    res = fit(start, q, qd, qdd, moments=trial["moments"][sel], reactions=trial["force_magnitudes"][sel],
              loads=trial["ground"].select(sel), moment_weights=trial["moment_weights"][sel], loss=loss)  # fmt: skip
    given = trial["moment_weights"][sel] > 0
    Ym = regressor(true, q[given], qd[given], qdd[given], quantity="joint_moments")[0]
    Yr, yr0 = regressor(true, q, qd, qdd, trial["loads"][sel], quantity="joint_reactions")
    # the magnitudes |lambda| linearised at the true parameters: rows u^T Y, u = lambda / |lambda|
    lam = np.asarray(Yr) @ np.asarray(to_parameters(true)) + np.asarray(yr0)
    u = lam / np.maximum(np.linalg.norm(lam, axis=-1, keepdims=True), 1e-300)
    Ymag = np.einsum("tjc,tjcp->tjp", u, np.asarray(Yr))
    only = base_parameters(true, np.asarray(Ym))
    both = base_parameters(true, [np.asarray(Ym), Ymag])
    ident = only.identifiable()
    tp, sp = np.asarray(to_physical(true)), np.asarray(to_physical(start))
    L = np.asarray(true.length)
    # a physical parameter is identifiable from moments alone when its barycentric
    # parameter is (mass) or when it follows from identifiable ones (com: m c / m)
    rows = []
    for i, s in enumerate(true.names):
        for j, p in enumerate(PHYSICAL):
            k = 4 * i + j
            if j == 0:
                idm = bool(ident[4 * i])
            elif j in (1, 2):
                idm = bool(ident[4 * i] and ident[k])
            else:
                idm = bool(ident[4 * i] and ident[4 * i + 1] and ident[4 * i + 2] and ident[4 * i + 3])
            err = res.physical[i, j] - tp[i, j]
            scale = L[i] if j in (1, 2) else tp[i, j]
            rows.append(dict(parameter=f"{p}[{s}]", unit=_UNITS[p], true=tp[i, j], start=sp[i, j],
                             barycentric=f"{PARAMETERS[j]}[{s}]", barycentric_identifiable_from_moments=bool(ident[k]),
                             fitted=res.physical[i, j], stderr=res.stderr_physical[i, j], error=err,
                             relative_error=err / scale, scale=scale,
                             relative_to="length" if j in (1, 2) else "true value",
                             identifiable_from_moments=idm))  # fmt: skip
    return dict(true=true, start=start, fit=res, moments_only=only, with_forces=both, rows=rows, trial=trial)


def recovery_figure(rows, title: str | None = None):
    """Absolute errors of every parameter at the start and after the fit, log scale
    (``rows`` of :func:`recover_running`). Returns a matplotlib Figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(rows))
    start = np.array([100 * abs(r["start"] - r["true"]) / r["scale"] for r in rows])
    fitted = np.array([100 * abs(r["relative_error"]) for r in rows])
    floor = 1e-5
    ax.bar(x - 0.2, np.maximum(start, floor), 0.4, label="start", color="0.7")
    ax.bar(x + 0.2, np.maximum(fitted, floor), 0.4, label="fitted", color="C0")
    ax.set_yscale("log")
    ax.set_ylim(floor, 100)
    ax.set_xticks(x, [r["parameter"] for r in rows], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("|error| (% of true value;\ncom: % of segment length)")
    ax.legend(frameon=False, loc="upper right", ncols=2)
    ax.set_title(title or "Running leg: segment parameters from the true moments and force magnitudes")
    return fig


def bands_figure(time, bands: Bands, true=None, *, joints=("hip", "knee", "ankle"), title: str | None = None):
    """Joint moments with their bands (first and last quantile levels). Returns a
    matplotlib Figure."""
    from matplotlib.figure import Figure

    k = bands.nominal.shape[-1]
    fig = Figure(figsize=(8, 2.4 * k), layout="constrained")
    axs = np.atleast_1d(fig.subplots(k, 1, sharex=True))
    for j in range(k):
        ax = axs[j]
        ax.fill_between(time, bands.quantiles[0][:, j], bands.quantiles[-1][:, j], color="C0", alpha=0.3,
                        lw=0, label=f"{100 * (bands.levels[-1] - bands.levels[0]):.0f}% band")  # fmt: skip
        ax.plot(time, bands.nominal[:, j], color="C0", lw=1, label="nominal parameters")
        if true is not None:
            ax.plot(time, true[:, j], "r--", lw=0.8, label="true")
        ax.set_ylabel(f"{joints[j] if j < len(joints) else j} moment (N m)")
    axs[0].legend(frameon=False, fontsize=8)
    axs[-1].set_xlabel("time (s)")
    fig.suptitle(title or "Joint moments and the band induced by the anthropometric uncertainty")
    return fig
