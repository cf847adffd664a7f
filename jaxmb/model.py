"""Planar multibody models: a kinematic tree of rigid segments joined by hinges.

A :class:`Model` is an immutable pytree. Physical parameters (lengths, centres of
mass, masses, inertias, attachment distances, base origin, gravity) are array
leaves, so they are traced under ``jit`` and differentiable under ``grad``; the
topology (parents, names, kind of base and of coordinates) is static metadata, so
changing a mass never recompiles a jitted function.

Conventions (SI units; the documentation's Conventions page): x forward, y up, gravity along -y. Segment
``i`` has its proximal joint point ``P_i``, an axis at absolute angle ``theta_i``
(counter-clockwise from +x), length ``L_i``, and its centre of mass at the local
point ``com_i = (along, across)`` from ``P_i`` (``across`` is along the axis rotated
by +90 degrees). A child is attached at ``attach_i`` along its parent's axis.
"""

from __future__ import annotations

import dataclasses
import warnings
import functools
from typing import Sequence, Union

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["Model", "chain", "tree"]

BASES = ("fixed", "floating")
COORDINATES = ("relative", "absolute")

Segment = Union[int, str]


@dataclasses.dataclass(frozen=True)
class Model:
    """A planar kinematic tree of rigid segments.

    Attributes:
      length: (segments,) segment lengths, m.
      com: (segments, 2) centre of mass in segment coordinates (along the axis,
        across it) from the proximal joint, m.
      mass: (segments,) masses, kg.
      inertia: (segments,) moments of inertia about the centre of mass, kg m^2.
      attach: (segments,) distance along the parent's axis of the joint point, m
        (unused for the root). Joints built at the parent's distal end (the default)
        follow the parent's length: see ``attach_end`` and :attr:`joint_attach`.
      origin: (2,) world position of the root's proximal joint for a fixed base, m
        (unused for a floating base, whose position is in q).
      gravity: () gravitational acceleration, m/s^2, acting along -y.
      parent: static tuple, parent index of each segment, -1 for the root.
      names: static tuple of segment names.
      base: static, "fixed" or "floating".
      coordinates: static, "relative" (joint angles) or "absolute" (segment angles).
      attach_end: static tuple of bools: True where the joint sits at the parent's
        distal end (``attach=None`` at construction). For those segments the joint
        distance *is* the parent's length, so changing or differentiating a length
        moves the joints (what identification and scaling need).
    """

    length: jax.Array
    com: jax.Array
    mass: jax.Array
    inertia: jax.Array
    attach: jax.Array
    origin: jax.Array
    gravity: jax.Array
    parent: tuple = ()
    names: tuple = ()
    base: str = "fixed"
    coordinates: str = "relative"
    attach_end: tuple = ()

    def __post_init__(self):
        # Every Model made by its constructor is checked here, chain and tree's
        # included (they only convert): the structure (a cycle in parent made
        # ancestor_matrix loop forever), then every concrete parameter (shape, finite,
        # signs, in the dtype JAX computes it in), converted to a JAX array. JAX's own
        # unflattening (jit, vmap, grad, tree_map: Models of tracers, placeholders,
        # gradients whose "masses" may be any number) bypasses the constructor
        # (_unflatten), so it is not checked; traced fields of a Model made under a
        # transformation are skipped (their values are unknown)
        if not isinstance(self.parent, tuple) or not isinstance(self.names, tuple):
            raise ValueError(f"parent and names must be tuples, got {type(self.parent).__name__} and "
                             f"{type(self.names).__name__}: build models with jaxmb.chain or jaxmb.tree")  # fmt: skip
        _check_structure(self.parent, self.names, self.base, self.coordinates,
                         self.attach_end if isinstance(self.attach_end, tuple) else None)  # fmt: skip
        for name, value in _check_parameters({f: getattr(self, f) for f in DATA_FIELDS}, self.names).items():
            object.__setattr__(self, name, value)

    # ------------------------------------------------------------------ sizes
    @property
    def segments(self) -> int:
        """Number of segments."""
        return len(self.parent)

    @property
    def dof(self) -> int:
        """Number of generalized coordinates (segments, plus 2 for a floating base)."""
        return len(self.parent) + self.nbase

    @property
    def nbase(self) -> int:
        """Number of base translation coordinates at the start of q (0 or 2)."""
        return 2 if self.base == "floating" else 0

    @property
    def children(self) -> tuple:
        """Tuple of tuples: the children of each segment, in index order."""
        return _children(self.parent)

    @property
    def joint_attach(self) -> jax.Array:
        """(segments,) distance of each joint along its parent's axis, m, as used by
        the dynamics: the parent's length where ``attach_end``, else ``attach``."""
        if not any(self.attach_end):
            return self.attach
        par = np.maximum(np.asarray(self.parent), 0)
        return jnp.where(np.asarray(self.attach_end), jnp.asarray(self.length)[par], self.attach)

    def index(self, segment: Segment) -> int:
        """The index of a segment given by index or by name.

        An index is any integer scalar: a Python or NumPy int, or a 0-d integer
        array (NumPy or JAX, concrete); negative indices count from the end. Floats,
        bools and traced values are refused.

        Raises:
          ValueError: for an unknown name, an index out of range, a traced index or
            anything else.
        """
        if isinstance(segment, str):
            if segment not in self.names:
                raise ValueError(
                    f"unknown segment name {segment!r}; the model's segments are {list(self.names)}"
                )
            return self.names.index(segment)
        if isinstance(segment, jax.core.Tracer):
            raise ValueError(
                "a segment index must be concrete (it selects the model's structure), got a traced value; "
                "pass a Python int or a name"
            )
        dtype = getattr(segment, "dtype", None)
        integer_array = (isinstance(segment, (np.ndarray, jax.Array)) and segment.ndim == 0
                         and jnp.issubdtype(dtype, jnp.integer))  # fmt: skip
        if (isinstance(segment, (int, np.integer)) and not isinstance(segment, bool)) or integer_array:
            i = int(segment)
            if -self.segments <= i < self.segments:
                return i % self.segments
            raise ValueError(
                f"segment index {i} out of range for a model with {self.segments} segments"
            )
        raise ValueError(f"a segment is given by an int index or a str name, got {segment!r}")

    def replace(self, **changes) -> "Model":
        """A copy with some fields changed, validated like a new model.

        Parameters are converted like in :func:`tree`; changing ``coordinates`` only
        changes how q is read (use :func:`jaxmb.coordinates_to` to convert q).
        ``attach=`` gives every joint as in :func:`tree`: a number puts the joint at
        that distance for good (it no longer follows its parent's length, even if
        the number equals that length), None keeps it at the parent's distal end.
        ``length=`` alone moves the joints at the parents' distal ends.
        """
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        unknown = set(changes) - set(fields)
        if unknown:
            raise ValueError(f"Model has no field(s) {sorted(unknown)}; fields are {sorted(fields)}")
        fields.update(changes)
        if "attach" in changes and "attach_end" not in changes:
            # explicit distances: every joint stays where it is put
            fields["attach_end"] = tuple(False for _ in self.parent)
        elif "length" in changes and any(self.attach_end) and "attach" not in changes:
            # joints at the parent's distal end follow the new lengths
            par = np.maximum(np.asarray(self.parent), 0)
            length = changes["length"]
            if _is_traced(length):
                lp = jnp.broadcast_to(length, (self.segments,))[par]
                # in the traced length's dtype (float32 without a float64 warning)
                new = jnp.where(np.asarray(self.attach_end), lp, jnp.asarray(self.attach, lp.dtype))
            else:
                lp = np.broadcast_to(np.asarray(length, float), (self.segments,))[par]
                new = np.where(self.attach_end, lp, np.asarray(self.attach))
            fields["attach"] = new
        # inside a transformation (e.g. grad with respect to a parameter) the traced
        # fields' values are not checked (unknown), their shapes are, and broadcast
        return _build(**fields)

    def astype(self, dtype) -> "Model":
        """The same model with every parameter cast to ``dtype``.

        Raises ValueError (naming the field and the segment) for a concrete parameter
        that ``dtype`` cannot hold: beyond its range (1e39 in float32), or a mass or
        inertia below its smallest normal number (1e-46 becomes 0 in float32).

        Casting float32 parameters to float64 keeps float32's rounding (about 1e-7
        relative) and warns: the usual cause is a model made before
        ``jax.config.update("jax_enable_x64", True)`` (without x64 its arrays are
        float32) and then used with float64 inputs."""
        if jnp.dtype(dtype) == jnp.float64 and any(
                getattr(x, "dtype", None) == jnp.float32 for x in jax.tree_util.tree_leaves(self)):  # fmt: skip
            warnings.warn(
                "the model's parameters are float32 and are used at float64: they keep float32's rounding (about "
                "1e-7 relative). A model made before jax.config.update('jax_enable_x64', True) is float32; make it "
                "after that call, or cast it on purpose with model.astype(numpy.float32) only for float32 inputs",
                stacklevel=2,
            )
        leaves = jax.tree_util.tree_leaves(self)
        if jnp.issubdtype(dtype, jnp.floating) and any(
                not _is_traced(x) and np.dtype(getattr(x, "dtype", np.float64)).itemsize > jnp.dtype(dtype).itemsize
                for x in leaves):  # fmt: skip
            # a narrower dtype (float64 -> float32): a value it cannot hold (1e39 kg)
            # became inf, an inertia of 1e-46 became 0 (concrete parameters only)
            _check_parameters({f: getattr(self, f) for f in DATA_FIELDS}, self.names, dtype, convert=False)
        return jax.tree_util.tree_map(lambda x: jnp.asarray(x, dtype), self)

    def __repr__(self) -> str:  # compact: topology, not arrays
        return (
            f"Model(segments={self.segments}, dof={self.dof}, base={self.base!r}, "
            f"coordinates={self.coordinates!r}, names={list(self.names)}, parent={list(self.parent)})"
        )


DATA_FIELDS = ("length", "com", "mass", "inertia", "attach", "origin", "gravity")
META_FIELDS = ("parent", "names", "base", "coordinates", "attach_end")


def _flatten(model: Model):
    return [getattr(model, f) for f in DATA_FIELDS], tuple(getattr(model, f) for f in META_FIELDS)


def _flatten_with_keys(model: Model):
    return [(jax.tree_util.GetAttrKey(f), getattr(model, f)) for f in DATA_FIELDS], _flatten(model)[1]


def _unflatten(meta, leaves) -> Model:
    """A Model of any leaves (tracers, placeholders, gradients), without the
    constructor's checks: JAX's unflattening under jit, vmap, grad and tree_map."""
    model = object.__new__(Model)
    for f, v in zip(META_FIELDS + DATA_FIELDS, tuple(meta) + tuple(leaves)):
        object.__setattr__(model, f, v)
    return model


jax.tree_util.register_pytree_with_keys(Model, _flatten_with_keys, _unflatten, _flatten)


def replace_unchecked(model: Model, **changes) -> Model:
    """A copy with some parameters changed and not checked (e.g. the massless model
    of a regressor, gravity switched off): for the library's own derived models."""
    leaves, meta = _flatten(model)
    return _unflatten(meta, [changes.get(f, v) for f, v in zip(DATA_FIELDS, leaves)])


# the trailing shape of each parameter (leading axes: a stack of models)
_CORE = {"length": 1, "com": 2, "mass": 1, "inertia": 1, "attach": 1, "origin": 1, "gravity": 0}
_UNITS = {"length": "m", "com": "m", "mass": "kg", "inertia": "kg m^2", "attach": "m", "origin": "m",
          "gravity": "m/s^2"}  # fmt: skip


def _core_shape(field: str, n: int) -> tuple:
    return {"com": (n, 2), "origin": (2,), "gravity": ()}.get(field, (n,))


def _shape_message(field: str, n: int, shape) -> str:
    if field == "com":
        return f"com must have shape ({n}, 2) (along, across for each segment), got shape {tuple(shape)}"
    if field == "origin":
        return f"origin must have shape (2,) (x, y of the fixed base), got {tuple(shape)}"
    if field == "gravity":
        return f"gravity must be a scalar (m/s^2, acting along -y), got shape {tuple(shape)}"
    return f"{field} must have shape ({n},) (one value per segment), got shape {tuple(shape)}"


def _where(field: str, idx: tuple, names: tuple) -> str:
    """'mass of segment 1 ('shank')' for the entry at ``idx`` of a parameter array."""
    if field in ("origin", "gravity"):
        return field
    i = idx[-2] if field == "com" else idx[-1]
    stack = f" (model {idx[:-2] if field == 'com' else idx[:-1]} of the stack)" if len(idx) > _CORE[field] else ""
    return f"{field} of segment {i} ({names[i]!r}){stack}"


def _target_dtype(a: np.ndarray, dtype):
    """The floating dtype a parameter is computed in: ``dtype``, else the one JAX
    makes of it (float32 for float64 where 64-bit mode is off; float64 or float32
    for a dtype JAX does not have, such as long double, and for integers)."""
    if dtype is not None:
        return np.dtype(dtype)
    if a.dtype.kind == "f" and a.dtype.itemsize <= 8:
        return np.dtype(jax.dtypes.canonicalize_dtype(a.dtype))
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64))


def _check_parameter(field: str, value, names: tuple, dtype=None):
    """``value`` as a NumPy array after checking it (ValueError naming the field and
    the segment): real, of the field's shape (leading axes allowed: a stack), finite,
    held by the dtype it is computed in (``dtype``, else JAX's for it), and of the
    right sign in that dtype: length and gravity >= 0, mass and inertia > 0 and at
    least the dtype's smallest normal number (XLA flushes smaller ones to 0)."""
    n = len(names)
    a = _floats(field, value, dtype=None) if isinstance(value, (list, tuple)) else np.asarray(value)
    if a.dtype.kind not in "fiu":
        raise ValueError(f"{field} must be real numbers ({_UNITS[field]}), got dtype {a.dtype}")
    core = _core_shape(field, n)
    if a.ndim < len(core) or a.shape[a.ndim - len(core):] != core:
        raise ValueError(_shape_message(field, n, a.shape))
    target = _target_dtype(a, dtype)
    first = lambda bad: tuple(int(i) for i in np.argwhere(bad)[0])  # noqa: E731
    bad = ~np.isfinite(a)
    if bad.any():
        idx = first(bad)
        value = a if field in ("origin", "gravity") else a[idx]
        raise ValueError(f"{_where(field, idx, names)} is not finite: {value}")
    with np.errstate(all="ignore"):
        c = a.astype(target)
    info = np.finfo(target)
    hint = (" (JAX computes in float32 while its 64-bit mode is off: jax.config.update('jax_enable_x64', True) "
            "first, or other units)" if dtype is None and target.itemsize < a.dtype.itemsize else
            " (change the units, or compute in float64)")  # fmt: skip
    bad = ~np.isfinite(c)
    if bad.any():
        idx = first(bad)
        raise ValueError(f"{_where(field, idx, names)} is {float(a[idx]):.6g} {_UNITS[field]}, beyond the range of "
                         f"{target} (+-{float(info.max):.3g}), where it becomes inf{hint}")  # fmt: skip
    if field in ("mass", "inertia"):
        tiny = (a > 0) & (np.abs(c) < info.tiny)
        if tiny.any():
            idx = first(tiny)
            raise ValueError(f"{_where(field, idx, names)} is {float(a[idx]):.6g} {_UNITS[field]}, below the smallest "
                             f"normal {target} ({float(info.tiny):.3g}), which is computed as 0{hint}")  # fmt: skip
        bad = c <= 0
        if bad.any():
            idx = first(bad)
            raise ValueError(f"{_where(field, idx, names)} must be > 0, got {a[idx]}")
    elif field == "length" and (c < 0).any():
        idx = first(c < 0)
        raise ValueError(f"{_where(field, idx, names)} must be >= 0, got {a[idx]}")
    elif field == "gravity" and (c < 0).any():
        got = float(a) if a.ndim == 0 else f"{a.tolist()} (an array: one g per model of a stack)"
        raise ValueError(f"gravity is the magnitude g >= 0, a scalar (m/s^2; it acts along -y), got {got}")
    return a


def _check_parameters(fields: dict, names: tuple, dtype=None, *, convert: bool = True) -> dict:
    """Check every concrete parameter of ``fields`` (see :func:`_check_parameter`);
    traced ones (values unknown) and anything that is not numbers are skipped.
    Returns the fields to replace: NumPy arrays and lists as JAX arrays (``convert``)."""
    out = {}
    for f in DATA_FIELDS:
        v = fields[f]
        if _is_traced(v) or not isinstance(v, (jax.Array, np.ndarray, np.generic, int, float, list, tuple)):
            continue
        a = _check_parameter(f, v, names, dtype)
        if convert and not isinstance(v, jax.Array):
            with np.errstate(all="ignore"):  # checked: the cast keeps every value
                out[f] = jnp.asarray(a.astype(_target_dtype(a, None)))
    return out


@functools.lru_cache(maxsize=None)
def _children(parent: tuple) -> tuple:
    kids = [[] for _ in parent]
    for i, p in enumerate(parent):
        if p >= 0:
            kids[p].append(i)
    return tuple(tuple(k) for k in kids)


@functools.lru_cache(maxsize=None)
def ancestor_matrix(parent: tuple) -> np.ndarray:
    """A[i, k] = 1 where segment k is segment i or one of its ancestors.

    For relative coordinates the absolute angles are ``theta = A @ q_angles``; the
    generalized forces convert as ``Q_relative = A.T @ Q_absolute``. The transpose
    is the subtree matrix: ``A.T[k, i] = 1`` where i is in the subtree of k.
    """
    n = len(parent)
    A = np.zeros((n, n))
    for i in range(n):
        k = i
        while k >= 0:
            A[i, k] = 1.0
            k = parent[k]
    A.flags.writeable = False
    return A


# --------------------------------------------------------------------- building


def _floats(name, value, dtype=float, must="be numbers"):
    """``np.asarray(value, dtype)``; a ragged nested list, a non-numeric entry or a
    boolean (an array of them or one entry of a list: True as 1 kg is a mistake, not a
    number) raises ValueError naming the field (NumPy's own message names nothing):
    "``name`` must ``must``, got booleans"."""
    try:
        out = np.asarray(value, dtype=dtype)
    except (ValueError, TypeError) as e:
        got = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(
            f"{name} must be a rectangular array of numbers (rows of equal length), got {got}: "
            f"{str(e).splitlines()[0]}"
        ) from None
    entries = np.asarray(value, dtype=object).reshape(-1) if isinstance(value, (list, tuple)) else ()
    if np.asarray(value).dtype == bool or any(isinstance(v, (bool, np.bool_)) for v in entries):
        raise ValueError(f"{name} must {must}, got booleans: {value!r}")
    return out


def _with_tracers(value):
    """A list or tuple holding traced numbers (e.g. ``[L, 0.27]`` with L traced) as one
    traced array; anything else as it is."""
    if isinstance(value, (list, tuple)) and any(_is_traced(v) for v in jax.tree_util.tree_leaves(value)):
        return jnp.asarray(value)
    return value


def _vector(name, value, n, names, *, allow_scalar=True):
    value = _with_tracers(value)
    if _is_traced(value):
        # values unknown under jit, grad or vmap; the shape is known: checked and
        # broadcast as for numbers (a (2,) mass of a 3-segment model was read past its
        # end, silently clamped, under jit)
        if value.ndim == 0 and allow_scalar:
            return jnp.broadcast_to(value, (n,))
        if value.shape[-1:] != (n,):  # leading axes: a stack of models
            raise ValueError(f"{name} must have shape ({n},) (one value per segment), got shape {value.shape}")
        return value
    arr = _floats(name, value)
    if arr.ndim == 0 and allow_scalar:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) (one value per segment), got shape {arr.shape}")
    return arr  # its values are checked by Model


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


@functools.lru_cache(maxsize=1024)
def _check_structure(parent: tuple, names: tuple, base, coordinates, attach_end=None) -> None:
    """ValueError unless the static fields describe a valid tree: parent a tuple of
    ints with one root, segment 0, and every parent before its child (so no cycle);
    names distinct non-empty strs, one per segment; known base and coordinates;
    attach_end one bool per segment (empty: none at the distal end; None: not
    checked). Cached: it runs whenever a Model is made, JAX's own unflattening
    included (parent and names are tuples by then)."""
    if base not in BASES:
        raise ValueError(f"base must be one of {BASES}, got {base!r}")
    if coordinates not in COORDINATES:
        raise ValueError(f"coordinates must be one of {COORDINATES}, got {coordinates!r}")
    if not all(isinstance(p, (int, np.integer)) and not isinstance(p, bool) for p in parent):
        raise ValueError(f"parent must hold ints (the parent index of each segment, -1 for the root), got {parent!r}")
    n = len(parent)
    if n == 0:
        raise ValueError("a model needs at least one segment (parent is empty)")
    for i, p in enumerate(parent):
        if p < -1:
            raise ValueError(f"parent of segment {i} is {p}; use -1 for the root")
    roots = [i for i, p in enumerate(parent) if p < 0]
    if len(roots) != 1:
        raise ValueError(f"parent must contain exactly one root (-1), found {len(roots)} at {roots}")
    if roots[0] != 0:
        raise ValueError(f"the root must be segment 0 (parents come before children), found at {roots[0]}")
    for i, p in enumerate(parent):
        if i > 0 and p >= i:
            raise ValueError(
                f"parent of segment {i} is {p}: parents must come before their children (parent < index)"
            )
    if len(names) != n:
        raise ValueError(f"names must have {n} entries (one per segment), got {len(names)}")
    for i, nm in enumerate(names):
        if not isinstance(nm, str) or not nm:
            raise ValueError(f"name of segment {i} must be a non-empty str, got {nm!r}")
    seen = {}
    for i, nm in enumerate(names):
        if nm in seen:
            raise ValueError(f"duplicate segment name {nm!r} (segments {seen[nm]} and {i})")
        seen[nm] = i
    if attach_end not in (None, ()) and len(attach_end) != n:
        raise ValueError(f"attach_end must have {n} entries (one per segment), got {len(attach_end)}")


def _build(length, com, mass, inertia, attach, origin, gravity, parent, names, base, coordinates, attach_end=None):
    """Convert the arguments (lists, scalars for every segment, com along the axes,
    attach None) and assemble a Model, which checks the values (every message names
    the field and the segment)."""
    pf = _floats("parent", parent, must="hold integer indices (-1 for the root)").reshape(-1)
    if not np.all(np.isfinite(pf) & (pf == np.round(pf))):
        raise ValueError(f"parent must hold integer indices (-1 for the root), got {np.asarray(parent).tolist()}")
    parent = tuple(int(p) for p in pf)
    n = len(parent)
    if names is None:
        names = tuple(f"segment{i}" for i in range(n))
    if isinstance(names, str):
        raise ValueError(f"names must be a sequence of {n} segment names, got the str {names!r}")
    names = tuple(names)
    _check_structure(parent, names, base, coordinates)

    length = _vector("length", length, n, names)
    mass = _vector("mass", mass, n, names)
    inertia = _vector("inertia", inertia, n, names)

    # centre of mass: scalar (on the axis), (n,) distances along the axis, or (n, 2)
    com = _with_tracers(com)
    if _is_traced(com):  # shapes as below; the values unknown
        if com.ndim == 0:
            com = jnp.broadcast_to(com, (n,))
        if com.shape == (n,):
            com = jnp.stack([com, jnp.zeros_like(com)], axis=1)
        if com.shape[-2:] != (n, 2):  # leading axes: a stack of models
            raise ValueError(f"com must have shape ({n},) (distances along each axis) or ({n}, 2) "
                             f"(along, across), got shape {com.shape}")  # fmt: skip
    else:
        c = _floats("com", com)
        if c.ndim == 0:
            c = np.full(n, float(c))
        if c.shape == (n,):
            c = np.stack([c, np.zeros(n)], axis=1)
        if c.shape != (n, 2):
            raise ValueError(
                f"com must have shape ({n},) (distances along each axis) or ({n}, 2) "
                f"(along, across), got shape {c.shape}"
            )
        com = c

    if attach is None:
        # default: the distal end of the parent, which follows the parent's length
        attach = [None] * n
    if attach_end is None or attach_end == ():  # () is Model's default: no joint at a parent's end
        attach_end = tuple(False for _ in parent)
    attach_end = tuple(bool(b) for b in attach_end)
    if len(attach_end) != n:
        raise ValueError(f"attach_end must have {n} entries (one per segment), got {len(attach_end)}")
    if isinstance(attach, (list, tuple)) and any(a is None for a in attach):
        # None entries: at the parent's distal end, following its length
        if len(attach) != n:
            raise ValueError(f"attach must have {n} entries (one per segment), got {len(attach)}")
        attach_end = tuple(e or (a is None and p >= 0) for e, a, p in zip(attach_end, attach, parent))
        if _is_traced(length):
            lp = jnp.broadcast_to(length, (n,))
            attach = jnp.stack([lp[max(p, 0)] if a is None else jnp.asarray(a, lp.dtype) for a, p in zip(attach, parent)])
        else:
            lp = np.asarray(length)
            attach = [(lp[p] if p >= 0 else 0.0) if a is None else a for a, p in zip(attach, parent)]
    if not _is_traced(attach):
        attach = _floats("attach", attach)
        if attach.shape == (n,):  # the root's entry is ignored (a NaN there was refused)
            attach = np.where(np.asarray(parent) < 0, 0.0, attach)
    attach = _vector("attach", attach, n, names)

    origin, gravity = _with_tracers(origin), _with_tracers(gravity)
    if _is_traced(origin) and origin.shape[-1:] != (2,):
        raise ValueError(f"origin must have shape (2,) (x, y of the fixed base), got {origin.shape}")
    if not _is_traced(origin):
        origin = _floats("origin", origin)
        if origin.shape != (2,):
            raise ValueError(f"origin must have shape (2,) (x, y of the fixed base), got {origin.shape}")
    if not _is_traced(gravity):
        gravity = _floats("gravity", gravity)
        if gravity.shape != ():
            raise ValueError(f"gravity must be a scalar (m/s^2, acting along -y), got shape {gravity.shape}")

    # the values (finite, signs, held by the dtype JAX computes in) are checked, and
    # the arrays converted, by Model itself
    return Model(
        length=length,
        com=com,
        mass=mass,
        inertia=inertia,
        attach=attach,
        origin=origin,
        gravity=gravity,
        parent=parent,
        names=names,
        base=base,
        coordinates=coordinates,
        attach_end=attach_end,
    )


def tree(
    parent: Sequence[int],
    length,
    com,
    mass,
    inertia,
    *,
    attach=None,
    origin=(0.0, 0.0),
    gravity: float = 9.81,
    base: str = "fixed",
    coordinates: str = "relative",
    names: Sequence[str] | None = None,
) -> Model:
    """A planar kinematic tree.

    Args:
      parent: (segments,) parent index of each segment; -1 for the root, which must
        be segment 0; every parent comes before its children.
      length: (segments,) segment lengths, m (>= 0).
      com: centre of mass from the proximal joint, m: (segments,) distances along
        each axis, or (segments, 2) local (along, across) vectors.
      mass: (segments,) masses, kg (> 0).
      inertia: (segments,) moments of inertia about the centres of mass, kg m^2 (> 0).
      attach: (segments,) distance of each joint along its parent's axis, m; an
        entry None (or ``attach=None``, the default, for every joint): at the
        parent's distal end, following its length (``replace(length=...)`` and
        ``grad`` with respect to the length move the joint); a number stays where
        it is put. Ignored for the root.
      origin: (2,) position of the root's proximal joint for a fixed base, m.
      gravity: gravitational acceleration, m/s^2, acting along -y.
      base: "fixed" (root hinged to the ground at ``origin``) or "floating" (q starts
        with the x, y of the root's proximal joint).
      coordinates: "relative" (joint angles, theta_i = theta_parent + q_i) or
        "absolute" (segment angles, theta_i = q_i), radians.
      names: optional unique segment names.

    Returns:
      A validated :class:`Model`.

    Raises:
      ValueError: naming the field and the segment of any invalid input.
    """
    return _build(length, com, mass, inertia, attach, origin, gravity, parent, names, base, coordinates)


def chain(
    length,
    com,
    mass,
    inertia,
    *,
    gravity: float = 9.81,
    base: str = "fixed",
    coordinates: str = "relative",
    names: Sequence[str] | None = None,
    origin=(0.0, 0.0),
) -> Model:
    """A serial chain: each segment attached to the distal end of the previous one.

    Arguments as for :func:`tree`; the number of segments is ``len(length)``.
    """
    length = _with_tracers(length)  # [L, 0.27] with L traced
    if _is_traced(length):
        n = int(np.prod(np.shape(length))) if np.ndim(length) else 1
    else:
        length = _floats("length", length)
        n = length.reshape(-1).shape[0] if length.ndim else 1
        # the count comes from length: a mismatch names every list's length, not the
        # first one that differs from length's (which may be the only right one)
        counts = {"length": n}
        for nm, v in (("com", com), ("mass", mass), ("inertia", inertia)):
            if isinstance(v, (list, tuple, np.ndarray)) and len(v) and np.isscalar(v[0]) or (
                    isinstance(v, np.ndarray) and v.ndim == 1):  # fmt: skip
                counts[nm] = len(v)  # a flat list: one value per segment (a ragged one: tree names it)
        if len(set(counts.values())) > 1:
            raise ValueError("length, com, mass and inertia must each have one value per segment, got "
                             + ", ".join(f"{k} {c}" for k, c in counts.items()))
    parent = tuple(range(-1, n - 1))
    return tree(
        parent, length, com, mass, inertia,
        gravity=gravity, base=base, coordinates=coordinates, names=names, origin=origin,
    )
