"""The parametrisation of a movement: the minimum-jerk base path and the correction functions."""

from __future__ import annotations

import functools

import jax
import numpy as np
from numpy.polynomial import Legendre, Polynomial

from ._options import _check_int


def _grid(nodes: int, quadrature: str):
    """Points s (nodes,) in [0, 1] and quadrature weights w: int_0^1 f ds = sum w f(s)."""
    if quadrature == "gauss":
        x, w = np.polynomial.legendre.leggauss(nodes)
        return (x + 1) / 2, w / 2
    s = np.linspace(0.0, 1.0, nodes)
    w = np.full(nodes, 1.0 / (nodes - 1))
    w[[0, -1]] /= 2
    return s, w


@functools.lru_cache(maxsize=64)
def _basis_np(nodes: int, size: int, quadrature: str = "trapezoid", ends: int = 3):
    """Points s, weights w (nodes,), p^(d) (nodes, 4) and psi_k^(d) (4, nodes, size), d = 0..3;
    psi_k = s^e (1 - s)^e (Legendre series), orthonormal in the e-th derivative, e = ``ends``."""
    s, wq = _grid(nodes, quadrature)
    p = Polynomial([0, 0, 0, 10, -15, 6])
    # Legendre series on [0, 1]: stable products and derivatives (a power series of
    # degree 15 loses the Gram matrix to cancellation)
    w = Legendre.cast(Polynomial([0, 0, 0, 1, -3, 3, -1] if ends == 3 else [0, 0, 1, -2, 1]),
                      domain=[0, 1])  # s^3 (1 - s)^3 or s^2 (1 - s)^2
    raw = [w * Legendre.basis(j, domain=[0, 1]) for j in range(size)]  # w(s) P_j(2 s - 1)
    # Gram matrix of the e-th derivatives, exact: int_0^1 phi_i^(e) phi_j^(e) ds
    G = np.empty((size, size))
    for i in range(size):
        for j in range(i, size):
            F = (raw[i].deriv(ends) * raw[j].deriv(ends)).integ()
            G[i, j] = G[j, i] = F(1.0) - F(0.0)
    L = np.linalg.cholesky(G)
    R = np.linalg.inv(L).T  # psi = phi R: R^T G R = I
    base = np.stack([p.deriv(d)(s) if d else p(s) for d in range(4)], -1)
    phi = np.stack([np.stack([(r.deriv(d) if d else r)(s) for r in raw], -1) for d in range(4)])
    return s, wq, base, phi @ R


def min_nodes(basis: int, quadrature: str = "gauss") -> int:
    """The fewest nodes :func:`optimize` accepts for ``basis`` correction functions.

    The corrections are polynomials of degree K + 5 (K = ``basis``): their jerk has
    degree K + 2 and their acceleration K + 3, so the leading terms of the costs
    (|A q^(3)|^2, and |M q^(2)|^2 for the torque) are polynomials of degree up to
    2 K + 6 times smooth functions of q. Gauss-Legendre on n points integrates
    degree 2 n - 1 exactly: n >= K + 4 is the least that sees every direction of the
    coefficients; twice K + 3 leaves the margin the non-polynomial dynamics need
    (with fewer, the optimiser finds coefficients whose cost is mostly quadrature
    error, and report a cost far below the path's true cost). The trapezoidal rule
    is second-order accurate: its error, (h^2 / 12) times the difference of the
    integrand's slopes at the ends, is a bias the optimiser follows. At 4 (K + 3)
    nodes it reported costs 0.7 % below the minimum of the exact integral (the
    returned path 0.6 % above it); from 12 (K + 3) on, within 4e-4 of it and the path
    within 4e-4 (the hand jerk and the torque change of two reaches of the
    two-link arm, K = 5, 10 and 20). With ``end_conditions=2`` (the minimum torque)
    the corrections have degree K + 3, the same rule with more margin.

    Returns:
      2 (basis + 3) for "gauss", 12 (basis + 3) for "trapezoid".
    """
    basis = _check_int("basis", basis, 1)
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    return (2 if quadrature == "gauss" else 12) * (basis + 3)


def basis_matrices(nodes: int, size: int, quadrature: str = "trapezoid", end_conditions: int = 3):
    """The parametrisation's functions of s = t / T at the nodes (NumPy, float64).

    Args:
      nodes: number of nodes on [0, 1] (>= 2).
      size: number K of correction functions per coordinate (>= 1).
      quadrature: "trapezoid" (equally spaced nodes, ends included, trapezoidal
        weights) or "gauss" (Gauss-Legendre points and weights, as :func:`optimize`
        integrates its costs).
      end_conditions: 3 (default: psi = s^3 (1 - s)^3 x polynomials, jerk-orthonormal;
        position, zero velocity and zero acceleration at the ends) or 2 (s^2 (1 - s)^2,
        acceleration-orthonormal; position and zero velocity), see :mod:`jaxmb.optimal`.

    Returns:
      (s, w, base, psi): s (nodes,) the points; w (nodes,) the quadrature weights
      (int_0^1 f ds = sum w f(s)); base (nodes, 4) holds p and its first three
      derivatives in s, and psi (4, nodes, K) the correction functions and theirs.
      With T the duration, q^(d)(t) = T^-d (dq p^(d) + psi[d] @ a), plus q_start for
      d = 0; time integrals are T sum w f.
    """
    nodes, size = _check_int("nodes", nodes, 2), _check_int("basis", size, 1)
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    ends = _check_ends(end_conditions)
    return tuple(x.copy() for x in _basis_np(nodes, size, quadrature, ends))


def _check_ends(end_conditions) -> int:
    """2 or 3 (an int or a concrete 0-d integer array, e.g. ``OptimalMovement.end_conditions``)."""
    v = end_conditions
    if isinstance(v, jax.core.Tracer):
        raise ValueError("end_conditions must be concrete (2 or 3), not a traced value")
    if isinstance(v, (np.ndarray, jax.Array)) and v.ndim == 0 and v.dtype.kind in "iu":
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v not in (2, 3):
        raise ValueError(f"end_conditions must be 2 (position and velocity at the ends) or 3 (also the "
                         f"acceleration), got {end_conditions!r}")
    return int(v)
