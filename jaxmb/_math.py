"""Elementary functions for the engine: the sine and cosine of an angle in one
expression (:func:`sincos`), with the limit (:data:`SINCOS_LIMIT`) up to which
it is accurate; the runs of a boolean mask (:func:`true_runs`); ``jax.jit`` with
matrix products in the full precision of their dtype (:func:`precise_jit`). A leaf:
it imports nothing from jaxmb."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["sincos", "SINCOS_LIMIT", "true_runs", "precise_jit"]


def precise_jit(fn=None, /, **jit_kwargs):
    """``jax.jit(fn, **jit_kwargs)`` with every matrix product traced inside it in the
    full precision of its dtype (``jax.default_matmul_precision("highest")``).

    On NVIDIA GPUs from Ampere on, JAX computes float32 products in TensorFloat-32 by
    default (10 bits of mantissa, relative errors near 5e-4), which would break the
    float32 error bounds that jaxmb states; float64 and the CPU are unaffected. Used
    like ``jax.jit``, also as ``functools.partial(precise_jit, static_argnames=...)``."""
    if fn is None:
        return functools.partial(precise_jit, **jit_kwargs)

    @functools.wraps(fn)
    def traced(*args, **kwargs):
        with jax.default_matmul_precision("highest"):
            return fn(*args, **kwargs)

    return jax.jit(traced, **jit_kwargs)

# ----------------------------------------------------------------- sin and cos
#
# x = k pi/2 + r with k = round(2x/pi) and |r| <= pi/4; pi/2 is split in three
# parts (Cody & Waite) whose first two have few enough significant bits that k * part
# is exact for |k| < 2^20 (float64) or 2^11 (float32); the parts were computed with
# mpmath at 300 bits: pi/2 = C1 + C2 + C3.
_PIO2_F64 = (
    float.fromhex("0x1.921fb54400000p+0"),  # 33 significant bits
    float.fromhex("0x1.0b4611a600000p-34"),  # 33 significant bits
    float.fromhex("0x1.3198a2e037073p-69"),
)
_PIO2_F32 = (
    float.fromhex("0x1.92p+0"),  # 8 significant bits
    float.fromhex("0x1.fb4p-12"),  # 11 significant bits
    float.fromhex("0x1.4442d18469899p-24"),
)


# |x| (rad) up to which :func:`sincos` is accurate to half the spacing of the floats
# near x (measured against NumPy's float64 sin and cos: tests/test_batch.py); beyond,
# its result is NaN. float32: k = round(2x/pi) stays an exact integer (< 2^24);
# float64: k fits the int32 of the quadrant (the reduction itself stays within half
# the spacing near x up to about 2^50 rad, but an int64 quadrant or one in floating
# point cost 5 % of the 3-chain's inverse dynamics: python -m benchmarks.design
# --only sincos_guard).
SINCOS_LIMIT = {64: 2.0**31, 32: 2.0**24}


def _taylor(odd: bool, degree: int):
    """Taylor coefficients of sin (odd) or cos (even) after the leading term(s)."""
    first = 3 if odd else 2
    return [(-1) ** (k // 2) / math.factorial(k) for k in range(first, degree + 1, 2)]


# On |r| <= pi/4 the first omitted Taylor term bounds the error: float64 keeps terms
# to r^17 (sin) and r^18 (cos), error < (pi/4)^19/19! ~ 1e-19; float32 to r^9 and
# r^10, error < (pi/4)^11/11! ~ 2e-9. Both are below half an ulp of the result.
_SIN = {64: _taylor(True, 17), 32: _taylor(True, 9)}
_COS = {64: _taylor(False, 18), 32: _taylor(False, 10)}


def _horner(coef, x):
    acc = coef[-1]
    for a in reversed(coef[:-1]):
        acc = acc * x + a
    return acc


@jax.custom_jvp
def sincos(x):
    """Cosine and sine of ``x`` together, vectorisable, about 1 ulp accurate.

    One range reduction ``x = k pi/2 + r`` (|r| <= pi/4) serves both results; sin r
    and cos r are Taylor polynomials, and the quadrant k mod 4 swaps and negates them.
    Float64 is accurate to about 1 ulp of the result for |x| < 1.6e6 rad, float32
    for |x| < 3e3 rad; beyond, the reduction's k pi/2 is rounded and the error grows
    to half the spacing of the floats near x (the input's own resolution: 0.06 rad
    at 1e6 rad in float32) up to :data:`SINCOS_LIMIT` (float64 2^31 rad, float32
    2^24 rad). Beyond that limit the result is NaN, not a number outside [-1, 1]
    (the public functions refuse such angles in concrete inputs). Other float
    dtypes use ``jnp.cos`` and ``jnp.sin``.

    Args:
      x: array of angles, rad (float32 or float64).

    Returns:
      (cos x, sin x), each shaped and typed like ``x``.
    """
    x = jnp.asarray(x)
    if x.dtype == jnp.float64:
        bits, parts = 64, _PIO2_F64
    elif x.dtype == jnp.float32:
        bits, parts = 32, _PIO2_F32
    else:
        return jnp.cos(x), jnp.sin(x)
    c1, c2, c3 = parts
    k = jnp.floor(x * (2.0 / math.pi) + 0.5)
    r = ((x - k * c1) - k * c2) - k * c3
    r2 = r * r
    sin_r = r + r * r2 * _horner(_SIN[bits], r2)
    cos_r = 1.0 + r2 * _horner(_COS[bits], r2)
    # quadrant: sin(r + k pi/2) = sin r, cos r, -sin r, -cos r for k = 0, 1, 2, 3 (mod 4)
    # (k fits an int32 within the limit)
    kq = k.astype(jnp.int32)
    odd = (kq & 1) == 1
    s = jnp.where(odd, cos_r, sin_r)
    c = jnp.where(odd, sin_r, cos_r)
    s = jnp.where((kq & 2) == 2, -s, s)
    c = jnp.where(((kq + 1) & 2) == 2, -c, c)
    # beyond the limit, float32's r leaves [-pi/4, pi/4] and the polynomials diverge
    # (sin(1e9) came out as 1.8e14), and float64's int32 k overflows (a sine of -2
    # from 3.4e9 rad)
    ok = jnp.abs(x) <= SINCOS_LIMIT[bits]
    return jnp.where(ok, c, jnp.nan), jnp.where(ok, s, jnp.nan)


@sincos.defjvp
def _sincos_jvp(primals, tangents):
    (x,), (dx,) = primals, tangents
    c, s = sincos(x)
    return (c, s), (-s * dx, c * dx)


def true_runs(mask: np.ndarray) -> tuple:
    """``((start, stop), ...)`` of the True runs of a 1-D boolean mask (NumPy)."""
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return tuple((int(a), int(b)) for a, b in zip(edges[::2], edges[1::2]))
