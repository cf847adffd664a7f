"""One set of validators for the whole package: arrays, dtypes, shapes, finiteness,
models, loads. Each raises ValueError naming the argument (and the index of a bad
value) before any tracing; under ``jax.jit`` values are unknown and only the
structure is checked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._math import SINCOS_LIMIT, precise_jit
from .model import Model


def _float_dtype(*xs):
    """The floating dtype of the inputs (float32 stays float32; ints become float)."""
    first = getattr(xs[0], "dtype", None) if xs else None
    if first is not None and first.kind == "f" and all(type(x) is np.ndarray and x.dtype == first for x in xs):
        # NumPy arrays of one float dtype (the everyday direct call): JAX's type lattice
        # (jnp.result_type) gives the same, at 70 us of a 0.45 ms call of 1,000 samples
        return np.dtype(jax.dtypes.canonicalize_dtype(first))
    dt = jnp.result_type(*xs)
    if not jnp.issubdtype(dt, jnp.floating):
        dt = jnp.result_type(float)
    return dt


_EXACT_FINITE = 1 << 16  # elements: exact check below, a sum (NaN and inf propagate) above


@precise_jit
def _sum_is_finite(x):
    return jnp.isfinite(jnp.sum(x))


@precise_jit
def _sum_of_squares(x):
    return jnp.vdot(x, x)


def angle_limit(dtype) -> float:
    """The largest |angle| (rad) the batched kernels take in ``dtype`` as JAX
    computes it (float32 where 64-bit mode is off): :data:`jaxmb._math.SINCOS_LIMIT`."""
    return SINCOS_LIMIT[64 if jax.dtypes.canonicalize_dtype(dtype) == np.float64 else 32]


def _largest_magnitude(a: np.ndarray) -> float:
    """max |a| of a non-empty real NumPy array from its minimum and maximum (NaN and inf
    propagate; a BLAS vdot of the squares took 8 ms for 1e5 x 3 samples beside JAX's
    threads, the two reductions 0.1 ms)."""
    return max(-float(a.min()), float(a.max()))


def check_finite(x, name: str, angles_from: int | None = None):
    """Raise ValueError for NaN or inf in a concrete input (skipped while tracing:
    under jit or vmap the values are not known); with ``angles_from``, also for an
    angle (the entries from that index on the last axis) beyond :func:`angle_limit`.

    Large arrays are first summed (one pass, on the array's device): NaN and inf
    propagate through a sum, so a finite sum clears the array, and only a non-finite
    one (or an overflow) pays for the element-wise search that locates the value.
    With angles, a JAX array's sum is of squares (at most the limit squared clears
    every entry's magnitude too), a NumPy array's its minimum and maximum."""
    if isinstance(x, jax.core.Tracer):
        return
    limit = None if angles_from is None else angle_limit(x.dtype)

    def cleared(total):
        return bool(np.isfinite(total)) and (limit is None or float(total) <= limit * limit)

    if isinstance(x, jax.Array):
        if not jnp.issubdtype(x.dtype, jnp.inexact):
            return
        if x.size > _EXACT_FINITE:
            # evaluated now even inside a caller's jit (a concrete array closed over
            # by a traced function): a jitted call there would be staged out
            with jax.ensure_compile_time_eval():
                if cleared(_sum_is_finite(x) if limit is None else _sum_of_squares(x)):
                    return
    a = np.asarray(x)
    if a.dtype.kind not in "fc":
        return
    if a.size > _EXACT_FINITE and a.dtype.kind == "f":
        # NaN and inf propagate through a sum, and through min and max
        if limit is None and np.isfinite(a.sum()):
            return
        if limit is not None:
            big = _largest_magnitude(a)
            if np.isfinite(big) and big <= limit:
                return
    if not np.isfinite(a).all():
        if a.ndim == 0:
            raise ValueError(f"{name} is not finite: {a}")
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(a))[0])
        raise ValueError(f"{name} is not finite at index {where if len(where) > 1 else where[0]}: {a[where]}")
    if limit is not None and a.ndim and a.shape[-1] > angles_from:
        big = np.abs(a[..., angles_from:]) > limit
        if big.any():
            where = tuple(int(i) for i in np.argwhere(big)[0])
            where = where[:-1] + (where[-1] + angles_from,)
            f32 = limit <= 2.0**24
            raise ValueError(
                f"{name} has an angle of {a[where]:.6g} rad at index {where if len(where) > 1 else where[0]}: "
                f"beyond +-{limit:.6g} rad ({'float32' if f32 else 'float64'}) the floats near it are too far "
                "apart to give its sine and cosine; wrap the angles (e.g. (q + pi) % (2 pi) - pi)"
                + (" or compute in float64 (JAX's 64-bit mode and float64 arrays)" if f32 else "")
            )


def _as_array(x, name: str = "the input"):
    """x as an array (JAX and NumPy arrays and tracers unchanged); a ragged nested
    list or a non-numeric value raises ValueError naming ``name``."""
    if isinstance(x, (jax.Array, np.ndarray, jax.core.Tracer)):
        return x
    # a list or tuple holding JAX values (tracers under jit or grad, say): jnp stacks
    # them; NumPy would ask a tracer for its value
    traced = any(isinstance(v, (jax.Array, jax.core.Tracer)) for v in jax.tree_util.tree_leaves(x))
    try:
        return jnp.asarray(x) if traced else np.asarray(x)
    except (ValueError, TypeError) as e:
        raise ValueError(
            f"{name} must be a rectangular array of real numbers (rows of equal length), got {type(x).__name__}: "
            f"{str(e).splitlines()[0]}"
        ) from None


def check_real(x, name: str):
    """Raise ValueError unless ``x`` has a real dtype (floating or integer; booleans,
    True as 1 rad, are a mistake)."""
    dt = x.dtype
    if type(dt) is np.dtype and dt.kind in "fiu":  # NumPy's own floats and integers (a quick test)
        return
    if not (jnp.issubdtype(dt, jnp.floating) or jnp.issubdtype(dt, jnp.integer)):
        raise ValueError(f"{name} must be a real array, got dtype {dt}")


def _jax_float(dtype):
    """The floating dtype JAX computes ``dtype`` in: float32 for float64 where its
    64-bit mode is off, float64 (or float32) for long double, which JAX lacks."""
    dtype = np.dtype(dtype)
    return np.dtype(jax.dtypes.canonicalize_dtype(np.float64 if dtype.itemsize > 8 else dtype))


def check_range(x, name: str):
    """``x`` in a floating dtype JAX has, with every concrete value held by it.

    NumPy floats are cast by JAX when called: float64 to float32 where its 64-bit
    mode is off (a velocity of 1e39 became inf, the result NaN), long double (which
    JAX refused with a bare TypeError) to float64 (float32 without 64-bit mode).
    ValueError, naming ``name`` and the index, for a finite value beyond the range of
    that dtype; a long double array is returned converted, anything else unchanged
    (JAX arrays and tracers are already in a JAX dtype; under ``jax.jit`` the values
    are unknown and not checked). NaN and inf are left to :func:`check_finite`."""
    if isinstance(x, (jax.Array, jax.core.Tracer)) or getattr(x, "dtype", None) is None or x.dtype.kind != "f":
        return x
    target = _jax_float(x.dtype)
    if target == x.dtype:
        return x
    a = np.asarray(x)
    big = float(np.finfo(target).max)
    if target.itemsize < a.dtype.itemsize:
        # the largest magnitude clears most float32 casts in one pass
        most = _largest_magnitude(a) if target.itemsize < 8 and a.size else np.inf
        if not (np.isfinite(most) and most <= big):
            over = np.isfinite(a) & (np.abs(a) > big)
            if over.any():
                where = tuple(int(i) for i in np.argwhere(over)[0])
                at = "" if a.ndim == 0 else f" at index {where if len(where) > 1 else where[0]}"
                why = ("JAX's 64-bit mode is off: jax.config.update('jax_enable_x64', True) first, or other units"
                       if target == np.float32 and a.dtype == np.float64 else "other units")
                value = np.format_float_scientific(a[where], precision=5, trim="-")  # a long double too
                raise ValueError(f"{name} is {value}{at}, beyond the range of {target} "
                                 f"(+-{big:.3g}) that JAX computes it in, where it becomes inf ({why})")  # fmt: skip
    return a.astype(target) if a.dtype.itemsize > 8 else x


def check_array(x, name: str):
    """``x`` as an array of a real dtype with finite values when concrete (JAX and
    NumPy arrays and tracers are returned unchanged, long double as float64; see
    :func:`check_range`); ValueError naming ``name`` otherwise."""
    x = _as_array(x, name)
    check_real(x, name)
    x = check_range(x, name)
    check_finite(x, name)
    return x


def check_steps(steps) -> int:
    """A number of steps as an int >= 0: a Python or NumPy int or a concrete 0-d
    integer array; ValueError for anything else (a float such as 2.7 is not rounded)."""
    if isinstance(steps, jax.core.Tracer):
        raise ValueError("steps must be a concrete int (it sets the shape of the result), got a traced value: "
                         "pass a Python int, static under jax.jit (static_argnums / static_argnames)")
    integer_array = (isinstance(steps, (np.ndarray, jax.Array)) and steps.ndim == 0
                     and jnp.issubdtype(steps.dtype, jnp.integer))  # fmt: skip
    if not ((isinstance(steps, (int, np.integer)) and not isinstance(steps, bool)) or integer_array):
        raise ValueError(f"steps must be an int >= 0 (the number of time steps), got {steps!r}")
    if int(steps) < 0:
        raise ValueError(f"steps must be an int >= 0 (the number of time steps), got {int(steps)}")
    return int(steps)


def check_dt(dt):
    """The time step as a real scalar, finite and nonzero when concrete (ValueError
    otherwise: dt = 0 gives a trajectory that never moves, most likely a typo)."""
    dt = _as_array(dt, "dt")
    if np.ndim(dt) != 0:
        raise ValueError(f"dt must be a scalar time step (s), got shape {tuple(np.shape(dt))}")
    dt = check_array(dt, "dt")
    if not isinstance(dt, jax.core.Tracer) and float(dt) == 0.0:
        raise ValueError("dt must be nonzero (s; a negative dt integrates backwards in time), got 0")
    return dt


def check_vector(model: Model, x, name: str, size: int | None = None):
    """Return ``x`` as an array of shape (size,), raising ValueError otherwise
    (and for NaN or inf in a concrete input)."""
    size = model.dof if size is None else size
    x = _as_array(x, name)
    check_real(x, name)
    x = jnp.asarray(check_range(x, name))
    if x.shape != (size,):
        extra = " (one sample)" if x.ndim > 1 else ""
        raise ValueError(
            f"{name} must have shape ({size},) for this model (dof={model.dof}), "
            f"got shape {x.shape}{extra}"
        )
    check_finite(x, name)
    return x


def check_model(model) -> None:
    """ValueError unless ``model`` is a :class:`Model` (e.g. the arguments swapped,
    which gave AttributeError: 'numpy.ndarray' object has no attribute 'dof')."""
    if not isinstance(model, Model):
        raise ValueError(f"the model must be a jaxmb.Model (jaxmb.chain, jaxmb.tree, ...), got "
                         f"{type(model).__name__}: the model comes first, f(model, q, ...)")  # fmt: skip


def check_batch(model: Model, x, name: str, size: int | None = None, *, angles: bool = False):
    """Return ``x`` as an array of shape (..., size) (one sample or a batch), raising
    ValueError otherwise (and for NaN or inf in a concrete input; with ``angles``,
    ``x`` is coordinates, and for an angle beyond :func:`angle_limit`; and for a value
    beyond the range of the dtype JAX computes it in: :func:`check_range`). NumPy
    inputs stay NumPy arrays (long double becomes float64): the compiled call
    converts them."""
    check_model(model)
    size = model.dof if size is None else size
    x = _as_array(x, name)
    check_real(x, name)  # before the shape: a string is no (3,) array of the wrong shape
    x = check_range(x, name)
    if x.ndim < 1 or x.shape[-1] != size:
        raise ValueError(
            f"{name} must have shape ({size},) for one sample or (..., {size}) for a batch "
            f"(this model has dof={model.dof}), got shape {tuple(x.shape)}"
        )
    check_finite(x, name, model.nbase if angles else None)
    return x


def check_loads(model: Model, loads, dtype, *, batched: bool = False):
    """Loads as a (segments, 3) array of dtype, or zeros when None.

    With ``batched``: None stays None, and (..., segments, 3) is accepted too (the
    array is returned uncast)."""
    n = model.segments
    if loads is None:
        return None if batched else jnp.zeros((n, 3), dtype)
    loads = _as_array(loads, "loads")
    check_real(loads, "loads")  # complex loads would lose their imaginary part silently
    loads = check_range(loads, "loads")
    loads = loads if batched else jnp.asarray(loads)
    ok = loads.shape[-2:] == (n, 3) if batched else loads.shape == (n, 3)
    if not ok:
        want = f"({n}, 3) or (..., {n}, 3)" if batched else f"({n}, 3)"
        raise ValueError(
            f"loads must have shape {want}: one world-frame wrench (Fx, Fy, Mz) per segment "
            f"at its centre of mass, got shape {tuple(loads.shape)}"
        )
    check_finite(loads, "loads")
    return loads if batched else loads.astype(dtype)


def prepare(model: Model, *xs):
    """Common dtype of the inputs; the model cast to it (ValueError for a parameter
    that dtype cannot hold: :meth:`Model.astype`)."""
    dtype = _float_dtype(*xs)
    return model.astype(dtype), dtype


# ------------------------------------------- NumPy arguments of the applications
# (eager checks of plain NumPy inputs: rates, cut-offs, counts, measured arrays)


def _as_float(x, name: str) -> np.ndarray:
    """x as a float64 NumPy array, or a ValueError naming ``name``."""
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}") from None


def _positive(x, name: str, unit: str) -> float:
    """A finite number > 0 (a rate, a cut-off), or a ValueError naming it."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number ({unit}), got {x!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be > 0 {unit}, got {v}")
    return v


def _int_at_least(x, name: str, minimum: int, what: str = "") -> int:
    """An int (not a bool, not a float) >= minimum, or a ValueError naming it."""
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}{what}, got {x!r}")
    return int(x)


def _finite_array(x, name: str = "x") -> np.ndarray:
    """x as a real NumPy array (integers as float64), finite, or a ValueError naming
    ``name`` and the index of the first NaN or infinite value."""
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.number) or np.iscomplexobj(x):
        raise ValueError(f"{name} must be a real numeric array, got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.integer):
        x = x.astype(np.float64)
    if not np.all(np.isfinite(x)):
        bad = np.argwhere(~np.isfinite(x))[0]
        raise ValueError(
            f"{name} contains NaN or infinite values (first at index {tuple(int(i) for i in bad)}): "
            "fill gaps before filtering"
        )
    return x

