"""Optimal movements: rest-to-rest trajectories optimised through the dynamics.

Which movement does the arm choose between two postures? Flash & Hogan (1985): the one
of minimum hand jerk (straight hand path, bell-shaped speed); Uno, Kawato & Suzuki
(1989): the one of minimum torque change (gently curved paths for some reaches);
others: minimum torque, effort or energy. :func:`optimize` minimises any of these, or
any user function of the trajectory, with the joint torques from
:func:`jaxmb.inverse_dynamics` differentiated by JAX, for one movement or a whole batch
(a workspace of targets, a population of arms) in one compiled call. The joint torques
are the moments at the joints (:func:`jaxmb.joint_moments`): the generalized forces
of a model in joint angles with a fixed base, converted for segment angles
(``coordinates="absolute"``, where a generalized force is a joint moment minus its
children's) and without a floating base's forces (its root's entry is the moment the
base supplies).

Parametrisation (exact boundary conditions). With s = t / T in [0, 1] and
p(s) = 10 s^3 - 15 s^4 + 6 s^5 (the minimum-jerk profile),

    q(t) = q_start + (q_end - q_start) p(s) + sum_k a_k psi_k(s),
    psi_k(s) = s^e (1 - s)^e sum_j P_j(2 s - 1) R_jk,

P_j the Legendre polynomials (j < K) and R the triangular matrix that makes the psi_k
orthonormal in the inner product of the e-th derivatives,
int_0^1 psi_i^(e) psi_j^(e) ds = delta_ij (e = 3: the jerk, so that the joint-jerk
cost is a sum of squares of the coefficients; e = 2: the acceleration, the leading
order of the torque cost: well-conditioned problems). e = ``end_conditions``, the
number of conditions imposed at each end. s^e (1 - s)^e vanishes with its first
e - 1 derivatives at both ends, so every q in the family starts and ends at exactly
the given postures with zero velocity (e >= 2) and zero acceleration (e = 3),
whatever the coefficients a (K, dof): the optimisation is unconstrained. A cost has
to be given the boundary conditions its Euler-Lagrange equation admits: a cost of
third order in q (torque change, hand or joint jerk) fixes q, qd and qdd at the ends
(e = 3); the minimum torque, of second order, only q and qd (e = 2; its optimal end
accelerations are not zero: forced to zero, the optimum builds a boundary layer that
every larger basis makes thinner and the cost does not converge with K).
:func:`optimize` chooses e from the cost (``end_conditions="auto"``); the minimum-jerk
base path p has zero end accelerations either way.
Time derivatives are exact (polynomials); joint torques are
``joint_moments(model, q, qd, qdd)`` at the nodes (``inverse_dynamics`` for joint
angles with a fixed base: the same numbers) and their rates the forward-mode
derivative along the path, tau_dot = d tau / dq qd + d tau / dqd qdd + d tau / dqdd qddd.

Costs (integrals over the movement, SI units; evaluated by Gauss-Legendre quadrature
on ``nodes`` points, exact for the polynomial parts and spectrally accurate for the
rest, or by the trapezoidal rule on ``nodes`` equally spaced times with
``quadrature="trapezoid"``):

    "hand_jerk"      int |d^3 x_hand / dt^3|^2 dt     (m^2 s^-5; Flash & Hogan 1985)
    "joint_jerk"     int |d^3 q / dt^3|^2 dt          (rad^2 s^-5; of the coordinates q)
    "torque"         int |tau|^2 dt                   (N^2 m^2 s)
    "torque_change"  int |d tau / dt|^2 dt            (N^2 m^2 s^-1; Uno et al. 1989)

or a callable ``cost(movement) -> scalar`` of a :class:`Movement` (q, qd, qdd, qddd,
tau, tau_dot, the hand's position and derivatives, and ``movement.integral``).

Solver: Optax L-BFGS with its zoom line search (strong Wolfe conditions) or Adam,
inside ``jax.lax.while_loop``, on the cost divided by its initial value (so that the
tolerances are relative). Only the built-in terms of nonzero weight are evaluated.
With built-in costs both iterate on preconditioned coefficients b = a S, S^2 = G the
joint-space metric of the cost's leading term (each built-in cost is
int |A(q) q^(d)|^2 dt plus lower orders: A = M, the mass matrix (mapped to the joint
moments for segment angles), for the torque costs,
the hand's Jacobian for the hand jerk; the Hessian is then about I_K (x) G, see
``_metric``; G's eigenvalues are floored at 3e-3 of its largest, for the directions it
does not see, such as the self-motions of a redundant arm under the hand jerk), so
that the problem they see is conditioned near 1 whatever the arm's inertias. It stops
when the largest gradient entry is below ``gtol`` (status 0), when an accepted
iteration lowers the cost by less than ``ftol`` relative (status 1, L-BFGS only),
after ``maxiter`` iterations (status 2)
or at a non-finite cost or gradient (status 3: the result is the last finite iterate
and ``converged`` is False, never a silent NaN; a cost that is not finite at the
initial guess raises ValueError instead). A decrease below ``ftol`` counts as
convergence only if the line search's step was at least 1e-4 of the quasi-Newton step
(at a minimum it is about 1): a cost function that is not finite beyond some boundary
(a square root or a logarithm of a margin) whose minimum lies beyond it makes the line
search shrink its steps against that boundary until the decrease vanishes, a stop
reported as status 4 (not converged). Enough nodes for the basis are required
(:func:`min_nodes`), so that the optimiser cannot lower the cost by exploiting the
quadrature error.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from typing import Callable, NamedTuple, Union

import jax
import jax.numpy as jnp
import numpy as np

from .dynamics import inverse_dynamics, joint_moments
from .kinematics import _float_dtype, check_finite
from .model import Model, Segment
from .trajectory import _check_duration, _hand_derivatives, _hand_point, inverse_kinematics

__all__ = [
    "optimize",
    "OptimalMovement",
    "Movement",
    "COSTS",
    "STATUS",
    "basis_matrices",
    "min_nodes",
    "movement",
]

#: Meaning of :attr:`OptimalMovement.status`.
STATUS = (
    "converged: gradient below gtol",
    "converged: relative decrease below ftol",
    "not converged: maxiter reached",
    "not converged: non-finite cost or gradient (result is the last finite iterate)",
    "not converged: the line search stalled (steps below 1e-4 of the quasi-Newton step: "
    "the cost is not finite or not smooth beyond the result)",
)


class Movement(NamedTuple):
    """A trajectory sampled at the nodes: what a cost function sees.

    Attributes:
      t: (nodes,) times, s (Gauss-Legendre points in the optimisation by default;
        equally spaced, ends included, with ``quadrature="trapezoid"``).
      weights: (nodes,) quadrature weights, s: int f dt = sum(weights f).
      q, qd, qdd, qddd: (nodes, dof) coordinates and their first three time
        derivatives (rad, rad/s, rad/s^2, rad/s^3; m for base translations).
      tau: (nodes, segments) joint torques (:func:`jaxmb.joint_moments`; the
        generalized forces, (nodes, dof), for joint angles with a fixed base), N m.
      tau_dot: their time derivative, N m/s.
      hand, hand_vel, hand_acc, hand_jerk: (nodes, 2) the hand's position and first
        three time derivatives (m, m/s, m/s^2, m/s^3).
    """

    t: jax.Array
    weights: jax.Array
    q: jax.Array
    qd: jax.Array
    qdd: jax.Array
    qddd: jax.Array
    tau: jax.Array
    tau_dot: jax.Array
    hand: jax.Array
    hand_vel: jax.Array
    hand_acc: jax.Array
    hand_jerk: jax.Array

    def integral(self, f):
        """int sum(f) dt over the movement: f (nodes, ...) summed over its other axes."""
        f = jnp.asarray(f)
        return jnp.sum(self.weights * f.reshape(f.shape[0], -1).sum(-1))


def _sq(x):
    return x**2


#: The built-in costs, name -> function of a :class:`Movement` (compose your own from them).
COSTS: dict[str, Callable[[Movement], jax.Array]] = {
    "hand_jerk": lambda m: m.integral(_sq(m.hand_jerk)),
    "joint_jerk": lambda m: m.integral(_sq(m.qddd)),
    "torque": lambda m: m.integral(_sq(m.tau)),
    "torque_change": lambda m: m.integral(_sq(m.tau_dot)),
}


class OptimalMovement(NamedTuple):
    """Result of :func:`optimize`; with a batch, every field has its leading shape.

    Attributes:
      t: (..., nodes) times, s: the equally spaced times of each problem, with the
        leading shape of ``duration`` ((nodes,) for a scalar duration, shared by the
        batch; broadcasts against the other fields' batch shape).
      q, qd, qdd: (..., nodes, dof) the optimal trajectory (rad, rad/s, rad/s^2).
      tau: (..., nodes, segments) joint torques along it (:attr:`Movement.tau`: the
        generalized forces, (..., nodes, dof), for joint angles with a fixed base,
        and the input of :func:`jaxmb.simulate` only then), N m.
      hand: (..., nodes, 2) the hand path, m.
      hand_vel: (..., nodes, 2) the hand velocity, m/s.
      cost: (...) the final cost, in the units of the cost (see :mod:`jaxmb.optimal`).
      history: (..., maxiter + 1) the cost at the start and after every iteration;
        entries after ``iterations`` repeat the final cost.
      iterations: (...) iterations run.
      converged: (...) bool, True for status 0 or 1.
      status: (...) int, an index into :data:`STATUS`.
      grad_norm: (...) largest entry of the gradient of the normalised cost.
      coef: (..., K, dof) the correction coefficients a (see :mod:`jaxmb.optimal`), in
        the basis of ``end_conditions``.
      q_start, q_end: (..., dof) the end postures (from the inverse kinematics with
        ``target="hand"``).
      end_conditions: (...) int, the conditions imposed at each end: 3 (position, zero
        velocity and zero acceleration) or 2 (position and zero velocity; the minimum
        torque); ``jaxmb.optimal.movement(..., coef, end_conditions=...)`` needs it.
    """

    t: jax.Array
    q: jax.Array
    qd: jax.Array
    qdd: jax.Array
    tau: jax.Array
    hand: jax.Array
    hand_vel: jax.Array
    cost: jax.Array
    history: jax.Array
    iterations: jax.Array
    converged: jax.Array
    status: jax.Array
    grad_norm: jax.Array
    coef: jax.Array
    q_start: jax.Array
    q_end: jax.Array
    end_conditions: jax.Array


# ---------------------------------------------------------------------- the basis


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
    from numpy.polynomial import Legendre, Polynomial

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


# ------------------------------------------------------------ one movement's path


@dataclasses.dataclass(frozen=True)
class _Config:
    cost: Callable | None  # None: the weighted built-in costs
    nodes: int
    size: int
    method: str
    maxiter: int
    gtol: float
    ftol: float
    memory: int
    learning_rate: float
    linesearch_steps: int
    segment: int
    point: tuple | None
    quadrature: str = "gauss"
    terms: tuple | None = None  # built-in costs evaluated (those of nonzero weight); None: all
    precondition: bool = True
    ends: int = 3  # end conditions: 3 (q, qd, qdd) or 2 (q, qd), see _basis_np


def _derivs(q_start, q_end, duration, coef, base, psi):
    """q, qd, qdd, qddd (nodes, dof) at the nodes of the basis (base, psi) (see basis_matrices)."""
    dq = q_end - q_start
    out = [(base[:, d, None] * dq + psi[d] @ coef) / duration**d for d in range(4)]
    out[0] = out[0] + q_start
    return out


def _joint_torques(model: Model, q, qd, qdd):
    """The joint torques of the torque costs: the generalized forces in joint angles
    with a fixed base, the joint moments otherwise (see the module docstring)."""
    if model.coordinates == "relative" and model.nbase == 0:
        return inverse_dynamics(model, q, qd, qdd, gradient="autodiff")
    return joint_moments(model, q, qd, qdd, gradient="autodiff")


def _nodal(model: Model, cfg: _Config, terms, q, qd, qdd, qddd):
    """tau, tau_dot and the hand's four derivatives at the nodes; with ``terms`` (built-in
    cost names) only what they need is computed, the other fields are None."""
    idf = functools.partial(_joint_torques, model)
    need = set(_NAMES if terms is None else terms)
    tau = tau_dot = None
    if "torque_change" in need:
        tau, tau_dot = jax.jvp(idf, (q, qd, qdd), (qd, qdd, qddd))
    elif "torque" in need:
        tau = idf(q, qd, qdd)
    hand = (None,) * 4
    if "hand_jerk" in need:
        point = None if cfg.point is None else jnp.asarray(cfg.point, q.dtype)
        hand = _hand_derivatives(model, cfg.segment, point, q, qd, qdd, qddd)
    return (tau, tau_dot, *hand)


def _movement(model: Model, q_start, q_end, duration, coef, cfg: _Config, quadrature=None,
              terms: tuple | None = None) -> Movement:  # fmt: skip
    """The Movement of coefficients ``coef``; with ``terms`` (built-in cost names) only
    what they need is computed (the other fields are None)."""
    dtype = q_start.dtype
    s, w, base, psi = (jnp.asarray(x, dtype) for x in _basis_np(cfg.nodes, cfg.size, quadrature or cfg.quadrature,
                                                                        cfg.ends))
    q, qd, qdd, qddd = _derivs(q_start, q_end, duration, coef, base, psi)
    tau, tau_dot, *hand = _nodal(model, cfg, terms, q, qd, qdd, qddd)
    return Movement(s * duration, w * duration, q, qd, qdd, qddd, tau, tau_dot, *hand)


def movement(model: Model, q_start, q_end, duration, coef, *, nodes: int = 100, segment: Segment = -1,
             point=None, quadrature: str = "trapezoid", end_conditions: int = 3) -> Movement:  # fmt: skip
    """Evaluate the parametrised trajectory of one movement (see :mod:`jaxmb.optimal`).

    Args:
      model: the model.
      q_start, q_end: (dof,) end postures (real, finite).
      duration: movement time T, s (a finite number > 0).
      coef: (K, dof) correction coefficients (e.g. ``OptimalMovement.coef``; zeros
        give the joint-space minimum-jerk movement).
      nodes: number of times.
      segment, point: the hand, as in :func:`jaxmb.trajectory.hand_position`.
      quadrature: "trapezoid" (default: equally spaced times, ends included) or
        "gauss" (Gauss-Legendre points, as the optimisation uses them).
      end_conditions: the basis the coefficients belong to: 3 (default: zero end
        velocity and acceleration) or 2 (zero end velocity); give an optimisation's
        ``OptimalMovement.end_conditions`` with its ``coef`` (2 for the minimum torque).

    Returns:
      a :class:`Movement` (pure JAX: jit, vmap and grad apply; the values of traced
      arguments are not checked, their shapes are).

    Raises:
      ValueError: q_start, q_end not of shape (dof,), coef not (K, dof), duration not
        a scalar, any of them not real or (concrete) not finite, a (concrete) duration
        not > 0, an unknown quadrature or end_conditions, nodes < 2.
    """
    q_start, q_end, duration, coef = (np.asarray(x) if not isinstance(x, jax.Array) else x
                                      for x in (q_start, q_end, duration, coef))
    dof = model.dof
    for name, x, shape, what in (("q_start", q_start, (dof,), f"({dof},)"), ("q_end", q_end, (dof,), f"({dof},)"),
                                 ("coef", coef, None, f"(K, dof={dof})"), ("duration", duration, (), "() (a scalar)")):
        if (x.shape != shape) if shape is not None else (x.ndim != 2 or x.shape[1] != dof or x.shape[0] < 1):
            raise ValueError(f"{name} must have shape {what}, got {tuple(x.shape)}")
        if x.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be real (an array of numbers), got dtype {x.dtype}")
        if name == "duration":
            _check_duration(x)
        else:
            check_finite(x, name)
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    ends = _check_ends(end_conditions)
    i, point = _hand_point(model, segment, point)
    dtype = _float_dtype(q_start, q_end, coef)
    cfg = _Config(None, _check_int("nodes", nodes, 2), coef.shape[0], "lbfgs", 1, 0.0, 0.0, 1, 0.0, 1, i,
                  None if point is None else tuple(float(v) for v in np.asarray(point)), quadrature, ends=ends)
    return _movement_jit(model.astype(dtype), jnp.asarray(q_start, dtype), jnp.asarray(q_end, dtype),
                         jnp.asarray(duration, dtype), jnp.asarray(coef, dtype), cfg)


_movement_jit = jax.jit(_movement, static_argnames=("cfg", "quadrature"))


# ------------------------------------------------------------------ the solver


_NAMES = tuple(sorted(COSTS))


def _cost_fn(cfg: _Config, weights):
    """The cost of a Movement: the user's function, or the weighted built-in costs.

    Built-in costs: the weights are an argument, the names of those with a nonzero
    weight (``cfg.terms``) are static, and only their terms are evaluated (a solver is
    compiled per set of names, not per set of weights)."""
    if callable(cfg.cost):
        user = cfg.cost

        def f(m):
            out = jnp.asarray(user(m))
            if out.shape != ():
                raise ValueError(f"a cost function must return a scalar, got shape {out.shape}")
            return out

        return f
    terms = _NAMES if cfg.terms is None else cfg.terms
    return lambda m: sum(weights[_NAMES.index(name)] * COSTS[name](m) for name in terms)


#: the derivative order d of each built-in cost's leading term |A(q) q^(d)|^2 (A: see _metric)
_LEADING = {"hand_jerk": 3, "joint_jerk": 3, "torque": 2, "torque_change": 3}
_METRIC_POINTS = 3  # Gauss-Legendre points on the minimum-jerk path where A is evaluated


def _metric(model: Model, q_start, q_end, duration, weights, cfg: _Config, terms: tuple):
    """Joint-space metric G (dof, dof) of the leading terms of the built-in costs.

    Each built-in cost is int |A(q) q^(d)|^2 dt plus lower-order terms: A = M (the mass
    matrix) and d = 3 for the torque change (tau_dot = M qddd + ...), A = M and d = 2
    for the torque, A = J (the hand's Jacobian) and d = 3 for the hand jerk, A = I and
    d = 3 for the joint jerk. With q^(d) = T^-d psi^(d) a, its Hessian with respect to
    the coefficients a (K, dof) is about

        H = 2 T^(1 - 2 d) Psi_d (x) <A^T A>,   Psi_d = int psi^(d) psi^(d)^T ds,

    Psi_3 = I by construction of the basis (Psi_2 replaced by its mean eigenvalue), and
    <A^T A> the average over a few points of the minimum-jerk path. G = sum of the
    weighted <A^T A> factors, so that H ~ I_K (x) G.
    """
    dtype = q_start.dtype
    x, wx = np.polynomial.legendre.leggauss(_METRIC_POINTS)
    sx = (x + 1) / 2
    path = q_start + (q_end - q_start) * jnp.asarray(10 * sx**3 - 15 * sx**4 + 6 * sx**5, dtype)[:, None]
    wx = jnp.asarray(wx / 2, dtype)
    _, wq, _, psi = _basis_np(cfg.nodes, cfg.size, cfg.quadrature, cfg.ends)
    T = duration
    dof = q_start.shape[-1]
    G = jnp.zeros((dof, dof), dtype)
    MtM = None
    for name in terms:
        d = _LEADING[name]
        psi_d = float(np.sum(wq[:, None] * psi[d] ** 2) / cfg.size)  # mean eigenvalue of Psi_d
        if name in ("torque", "torque_change"):
            if MtM is None:
                # M e_j = ID(q, 0, e_j) - ID(q, 0, 0) (the inverse dynamics is linear in
                # qdd): one call of the kernel the cost compiles anyway, cheaper to
                # compile than the mass-matrix kernel
                n = path.shape[0]
                qq = jnp.broadcast_to(path, (dof + 1, n, dof))
                acc = jnp.broadcast_to(jnp.concatenate([jnp.eye(dof, dtype=dtype), jnp.zeros((1, dof), dtype)])
                                       [:, None, :], (dof + 1, n, dof))
                tau = _joint_torques(model, qq, jnp.zeros_like(qq), acc)
                M = tau[:dof] - tau[dof]  # (dof: column j, n, torques: row i)
                MtM = jnp.einsum("n,jni,jnk->ik", wx, M, M)
            A2 = MtM
        elif name == "hand_jerk":
            point = None if cfg.point is None else jnp.asarray(cfg.point, dtype)
            eye = jnp.eye(dof, dtype=dtype)
            # the hand velocity is linear in qd: its Jacobian, (n, dof, 2)
            J = jax.vmap(lambda e: _hand_derivatives(model, cfg.segment, point, path, e, e, e)[1])(eye)
            A2 = jnp.einsum("n,inc,jnc->ij", wx, J, J)
        else:
            A2 = jnp.eye(dof, dtype=dtype)
        G = G + weights[_NAMES.index(name)] * (2 * psi_d * T ** (1 - 2 * d)) * A2
    return G


#: eigenvalues of the metric G are floored at this fraction of the largest. G is rank
#: deficient for the hand jerk of an arm of more than two links (J^T J has rank 2, the
#: self-motions leave the hand's leading-order jerk unchanged); with the floor at 1e-8
#: S^-1 stretched those directions 1e4 times and L-BFGS did not converge on a 3-link
#: arm (tests/test_optimal.py: test_redundant_arm_converges_with_the_default_
#: preconditioning). 3e-3 came out best in a scan of floors while developing (not
#: recorded): lower ones converged slowly or not at all on the 3-link arm, higher ones
#: slowed the two-link problems, whose metrics it leaves alone (their smallest
#: eigenvalue is about 1e-2 of the largest or more).
_FLOOR = 3e-3

#: Below this step of the line search (a fraction of the quasi-Newton step), a decrease
#: below ftol is a stall, not convergence (status 4). Near a minimum the accepted step
#: is of order 1 (every ftol stop of tests/test_optimal.py, float32 included, still
#: converges); against a cost that is not finite beyond the optimum it shrinks by
#: many orders of magnitude (test_a_stall_at_the_edge_of_the_cost_domain_is_not_
#: convergence).
_STALL = 1e-4


def _preconditioner(G, dtype):
    """S, S^-1 (dof, dof), symmetric: S^2 = G with its eigenvalues floored at _FLOOR (3e-3)
    of the largest (identity if G is zero or not finite)."""
    lam, V = jnp.linalg.eigh(G)
    top = lam[-1]
    ok = jnp.isfinite(top) & (top > 0) & jnp.all(jnp.isfinite(V))
    lam = jnp.where(ok, jnp.maximum(lam, _FLOOR * top), 1.0)
    V = jnp.where(ok, V, jnp.eye(G.shape[0], dtype=dtype))
    r = jnp.sqrt(lam)
    return (V * r) @ V.T, (V / r) @ V.T


def _solve_one(model: Model, q_start, q_end, duration, coef0, weights, cfg: _Config):
    """Minimise the cost over the coefficients of one movement (see the module docstring)."""
    import optax
    import optax.tree_utils as otu

    cost = _cost_fn(cfg, weights)
    terms = None if callable(cfg.cost) else (cfg.terms or _NAMES)
    raw = lambda a: cost(_movement(model, q_start, q_end, duration, a, cfg, terms=terms))  # noqa: E731
    dtype = q_start.dtype
    tiny = jnp.finfo(dtype).tiny
    c0, g0 = jax.value_and_grad(raw)(coef0)
    # the initial cost sets the scale (tolerances are relative to it)
    scale = jnp.where(jnp.isfinite(c0) & (jnp.abs(c0) > tiny), jnp.abs(c0), 1.0)
    # L-BFGS and Adam iterate on b = a S (a = b S^-1), where S^2 approximates the Hessian
    # of the normalised cost per basis function (see _metric): the same minimiser, a
    # problem conditioned near 1 (tests/test_optimal.py: under 0.6 times the iterations
    # for L-BFGS), on which Adam's step size is in units of the problem's own scale
    if cfg.precondition and terms is not None:
        S, S_inv = _preconditioner(_metric(model, q_start, q_end, duration, weights, cfg, terms) / scale, dtype)
    else:
        S = S_inv = jnp.eye(q_start.shape[-1], dtype=dtype)
    # in the problem's dtype: optax's line search steps by float64 scalars when x64 is
    # on, which would evaluate a float32 problem (model and all) in float64
    f = lambda b: raw(b.astype(dtype) @ S_inv) / scale  # noqa: E731
    v0, g0 = c0 / scale, g0 / scale @ S_inv
    coef0 = coef0 @ S

    if cfg.method == "lbfgs":
        opt = optax.lbfgs(memory_size=cfg.memory,
                          linesearch=optax.scale_by_zoom_linesearch(max_linesearch_steps=cfg.linesearch_steps))
    else:
        opt = optax.adam(cfg.learning_rate)

    finite0 = jnp.isfinite(v0) & jnp.all(jnp.isfinite(g0))
    gn0 = jnp.max(jnp.abs(g0 @ S))
    status0 = jnp.where(~finite0, 3, jnp.where(gn0 <= cfg.gtol, 0, -1))
    hist0 = jnp.full((cfg.maxiter + 1,), c0, dtype)

    def cond(c):
        return c[3] < 0

    def body(c):
        # (the line search returns the value and gradient at the new point in its
        # state: optax.value_and_grad_from_state without its lax.cond, which vmap
        # would turn into a second evaluation)
        a, state, it, status, hist, v, g = c
        if cfg.method == "lbfgs":
            updates, state_new = opt.update(g, state, a, value=v, grad=g, value_fn=f)
            a_new = optax.apply_updates(a, updates)
            v_new, g_new = otu.tree_get(state_new, "value"), otu.tree_get(state_new, "grad")
        else:
            updates, state_new = opt.update(g, state, a)
            a_new = optax.apply_updates(a, updates)
            v_new, g_new = jax.value_and_grad(f)(a_new)
        finite = jnp.isfinite(v_new) & jnp.all(jnp.isfinite(g_new)) & jnp.all(jnp.isfinite(a_new))
        gn_new = jnp.max(jnp.abs(g_new @ S))  # the gradient with respect to the coefficients a
        dec = (v - v_new) / jnp.maximum(jnp.maximum(jnp.abs(v), jnp.abs(v_new)), tiny)
        small = (dec >= 0) & (dec <= cfg.ftol) if cfg.method == "lbfgs" else False
        # a decrease below ftol is convergence when the line search took a step of
        # useful length: at a minimum the quasi-Newton step of unit length is accepted
        # or shortened a little; a cost that is not finite (or not smooth) beyond some
        # point whose minimum lies beyond it makes the line search shrink its steps
        # against that point until the decrease vanishes (status 4; see _STALL)
        stalled = small & (otu.tree_get(state_new, "learning_rate") < _STALL) if cfg.method == "lbfgs" else False
        it = it + 1
        new_status = jnp.where(~finite, 3, jnp.where(gn_new <= cfg.gtol, 0, jnp.where(
            stalled, 4, jnp.where(small, 1, jnp.where(it >= cfg.maxiter, 2, -1)))))
        keep = finite  # a non-finite step is discarded: the last finite iterate stays
        a = jnp.where(keep, a_new, a)
        state = jax.tree_util.tree_map(lambda x, y: jnp.where(keep, x, y), state_new, state)
        v = jnp.where(keep, v_new, v)
        g = jnp.where(keep, g_new, g)
        hist = jnp.where(jnp.arange(cfg.maxiter + 1) >= it, v * scale, hist)
        return a, state, it, new_status, hist, v, g

    c = (coef0, opt.init(coef0), jnp.asarray(0), status0, hist0, v0, g0)
    b, _, it, status, hist, v, g = jax.lax.while_loop(cond, body, c)
    a = b @ S_inv
    gn = jnp.max(jnp.abs(g @ S))
    # the result at equally spaced times: tau and the hand path (no torque rate to compile)
    m = _movement(model, q_start, q_end, duration, a, cfg, "trapezoid", terms=("hand_jerk", "torque"))
    return OptimalMovement(
        t=m.t, q=m.q, qd=m.qd, qdd=m.qdd, tau=m.tau, hand=m.hand, hand_vel=m.hand_vel,
        cost=v * scale, history=hist, iterations=it, converged=status <= 1, status=status,
        grad_norm=gn, coef=a, q_start=q_start, q_end=q_end, end_conditions=jnp.asarray(cfg.ends),
    )


# one problem: no vmap (under vmap, the line search's lax.cond becomes a select that
# evaluates both branches, and batching the solver's jaxpr triples the tracing time)
_solve_single = jax.jit(_solve_one, static_argnames=("cfg",))


@functools.partial(jax.jit, static_argnames=("cfg", "model_batched", "batching"))
def _solve_batch(model, q_start, q_end, duration, coef0, weights, cfg: _Config, model_batched: bool,
                 batching: str = "map"):
    """Every problem of the (flat) batch in one compiled call.

    "map": ``lax.map``, one problem after the other inside the compiled loop, each with
    its own iterations and line searches. "vmap": all problems in lock step; a
    batched ``while_loop`` runs until its slowest member is done and ``lax.cond``
    becomes ``select`` (both branches of the line search evaluated), which on a CPU
    costs more than the vectorisation gains (2.5x to 8x slower per problem measured
    on 2 cores for 10 to 200 problems at once); on an accelerator the width pays.
    """
    if batching == "vmap":
        one = lambda m, a, b, d, c: _solve_one(m, a, b, d, c, weights, cfg)  # noqa: E731
        return jax.vmap(one, in_axes=(0 if model_batched else None, 0, 0, 0, 0))(
            model, q_start, q_end, duration, coef0)
    if model_batched:
        return jax.lax.map(lambda x: _solve_one(*x, weights, cfg), (model, q_start, q_end, duration, coef0))
    return jax.lax.map(lambda x: _solve_one(model, *x, weights, cfg), (q_start, q_end, duration, coef0))


# ------------------------------------------------------------------ public entry


#: with ``progress=True`` and no ``chunk``, a batch is solved in this many chunks at most
_PROGRESS_STEPS = 20


def _check_weight(name, v) -> float:
    """A cost weight: a finite real number >= 0 (a Python or NumPy number, or a concrete 0-d array)."""
    ok = False
    if isinstance(v, (np.ndarray, np.generic, jax.Array)) and not isinstance(v, jax.core.Tracer):
        ok = np.ndim(v) == 0 and np.asarray(v).dtype.kind in "fiu"
    elif isinstance(v, (int, float)):
        ok = True
    if ok:
        v = float(v)
        ok = math.isfinite(v) and v >= 0
    if not ok:
        raise ValueError(f"the weight of cost {name!r} must be a finite real number >= 0 (a number or a concrete "
                         f"0-d array), got {v!r}")
    return v


def _check_int(name, value, low):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def _model_batch_shape(model: Model) -> tuple:
    """Leading batch shape of a stacked model (leaves with extra leading axes)."""
    shapes = []
    for name, core in (("length", 1), ("com", 2), ("mass", 1), ("inertia", 1), ("attach", 1), ("origin", 1),
                       ("gravity", 0)):
        shape = np.shape(getattr(model, name))
        shapes.append(shape[: len(shape) - core])
    lead = shapes[0]
    if any(s != lead for s in shapes):
        raise ValueError(f"a batch of models must stack every parameter along the same leading axes, got "
                         f"leading shapes {dict(zip(('length', 'com', 'mass', 'inertia', 'attach', 'origin', 'gravity'), shapes))}")
    return tuple(lead)


@functools.partial(jax.jit, static_argnames=("i", "batched"))
def _hand_at(model, q, i, point, batched):
    f = lambda m, qq: _hand_derivatives(m, i, point, qq, qq, qq, qq)[0]  # noqa: E731
    return jax.vmap(f, in_axes=(0 if batched else None, 0))(model, q)


def _check_reached(model, batched, q, target, name, i, point, out_of_reach):
    """Hand targets the inverse kinematics did not meet were out of reach (projected)."""
    pos = _hand_at(model, q, i, point, batched)
    err = np.linalg.norm(np.asarray(pos) - np.asarray(target), axis=-1)
    size = float(np.max(np.sum(np.abs(np.asarray(model.length)), axis=-1)))
    # met to the inverse kinematics' tolerance (1e-12 of the size in float64, 1e-6 in
    # float32): 1e-8 of the size in float64, 300 eps (3.6e-5) of it in float32
    eps = float(jnp.finfo(q.dtype).eps)
    bad = err > max(1e-8, 300 * eps) * max(size, 1e-3)
    if np.any(bad):
        first = int(np.argmax(bad))
        msg = (f"{int(np.sum(bad))} {name} hand target(s) out of reach (first: batch index {first}, "
               f"{np.asarray(target)[first]} m, {err[first]:.3g} m from the nearest reachable point)")
        if out_of_reach == "raise":
            raise ValueError(msg)
        warnings.warn(msg + ": projected onto the workspace boundary", RuntimeWarning, stacklevel=3)


def _check_target(model: Model, target) -> tuple:
    """(target, given): "joint" or "hand". None is "joint" except for a model of two
    coordinates, whose start and end of two numbers read both as joint angles and as
    a hand position: ValueError there, asking for target."""
    if target is None:
        if getattr(model, "dof", None) == 2:
            raise ValueError("target is required for a model of two coordinates (dof=2): start and end of two "
                             "numbers are either joint angles (target='joint', rad) or hand positions "
                             "(target='hand', x, y in m), and one read as the other solves another movement")
        return "joint", False
    if not isinstance(target, str) or target not in ("joint", "hand"):
        raise ValueError(f"target must be 'joint' (start/end are coordinates) or 'hand' (hand positions), "
                         f"got {target!r}")
    return target, True


def optimize(model: Model, start, end, duration, *, cost: Union[str, dict, Callable] = "torque_change", nodes: int = 100,
             target: str | None = None, basis: int = 10, method: str = "lbfgs", maxiter: int = 1000,
             gtol: float = 1e-7, ftol: float = 1e-13, memory: int = 20, learning_rate: float = 0.1,
             linesearch_steps: int = 30, init=None, segment: Segment = -1, point=None, q_guess=None,
             out_of_reach: str = "project", quadrature: str = "gauss", batching: str = "map",
             chunk: int | None = None, progress: bool = False, precondition: bool = True,
             end_conditions: Union[str, int] = "auto") -> OptimalMovement:  # fmt: skip
    """Optimal rest-to-rest movement(s) between two postures or two hand positions.

    Minimises ``cost`` over the trajectories q(t) that start at ``start`` and end at
    ``end`` at rest (zero velocity at both ends, and zero acceleration for the costs
    of third order, exact by construction: see ``end_conditions`` and
    :mod:`jaxmb.optimal`), with L-BFGS (or Adam) inside one compiled call. Batches:
    ``start``, ``end``, ``duration`` and the model (a stacked model, e.g.
    ``jax.tree.map(lambda *x: jnp.stack(x), *models)``) may carry leading batch axes,
    broadcast against each other; every problem is solved independently in one
    compiled call (``lax.map`` or ``jax.vmap`` over the solver, see
    ``batching``), e.g. reaches to 1,000 targets or one reach of 1,000 arms.

    Args:
      model: the model (any chain or tree; fixed or floating base), or a stacked batch.
      start, end: with ``target="joint"``, (..., dof) coordinates (rad; m for base
        translations); with ``target="hand"``, (..., 2) hand positions (m), turned into
        postures by :func:`jaxmb.trajectory.inverse_kinematics` (the end from the
        start posture, so a two-link arm keeps its elbow branch). Those postures are
        kept: for an arm of more than two links, which reaches a hand position in
        many postures, the end posture is not optimised (another one can cost
        less); give postures with ``target="joint"`` to compare them.
      duration: movement time T, s (finite, > 0), a scalar or a (...) batch.
      cost: "torque_change" (default), "torque", "hand_jerk", "joint_jerk", a dict
        of them with weights (e.g. ``{"torque_change": 1, "hand_jerk": 1e-3}``; weights
        are finite real numbers >= 0, Python or NumPy numbers or concrete 0-d arrays,
        at least one of them > 0; the built-in costs of each set of nonzero weights
        share one compiled solver), or a function
        ``cost(movement) -> scalar`` of a :class:`Movement` (traced: use jnp; a new
        function object compiles anew, so reuse it).
      nodes: number of quadrature points the costs are integrated on, and of the
        equally spaced times (ends included) the result is given at; at least
        :func:`min_nodes` (2 (basis + 3) with Gauss-Legendre, 12 (basis + 3) with the
        trapezoidal rule, whose error biases the cost: 26 and 156 for basis=10).
      target: "joint" or "hand", what ``start`` and ``end`` are. Required for a
        model of two coordinates (``dof == 2``, e.g. a two-link arm), where two numbers
        read both ways: hand positions taken for joint angles solved another movement
        without an error. For any other model None (the default) means "joint": hand
        positions are 2 numbers, coordinates ``dof``, so the shape tells them apart
        and a mismatch is an error naming both.
      basis: number K of correction functions per coordinate (>= 1). Measured by
        ``experiments/optimal_reaching.py`` against basis=40 (Uno et al.'s arm, four
        reaches, and the notes' arm, a lateral reach; 0.5 s, 100 nodes): 10 functions
        resolve the hand path to 2e-4 of the reach's amplitude for the hand jerk (its
        straight path is far from the joint-space minimum-jerk base; the cost to 2e-4),
        1e-5 for the torque change (cost 3e-6), 3e-6 for the torque (cost 1e-7), and
        exactly for the joint jerk (the base path); 16 functions to 2e-6, 4e-8 and
        1e-7; 6 to 3e-3, 7e-4 and 2e-4. A reach whose straight hand path passes near
        the shoulder (the joint angles turning fast along it) needs many more for the
        hand jerk: from (-0.25, 0.40) to (-0.068, -0.613) m on the notes' arm, the
        cost was 46 % above the straight path's with 10, 2.5 % with 40 and 0.1 % with
        60 (``jaxmb optimal --cost hand_jerk --end -0.068 -0.613 --basis K``). With ``cost="hand_jerk"`` a
        RuntimeWarning names the movements whose cost exceeds the straight path's,
        720 |x1 - x0|^2 / T^5 (its lower bound), by more than 1 %.
      method: "lbfgs" (default) or "adam".
      maxiter: most iterations (>= 1; 1000, as 300 was too few for arms of more than
        two links in trials while developing: two-link reaches take tens of L-BFGS
        iterations, longer arms up to several hundred).
      gtol: stop when the largest entry of the gradient of the normalised cost (the
        cost divided by its initial value) with respect to the coefficients is below
        gtol.
      ftol: (L-BFGS) stop when an iteration lowers the normalised cost by less than
        ftol relative.
      memory: L-BFGS memory (pairs kept).
      learning_rate: Adam's step size, in the preconditioned coefficients of the
        normalised cost with the built-in costs (see ``precondition``), where the
        default 0.1 converges on the two-link reaches (``tests/test_optimal.py``:
        ``test_adam_converges_with_its_defaults``); with a cost function (plain
        coefficients) the step that works depends on the cost's scale.
      linesearch_steps: most steps of the zoom line search per L-BFGS iteration.
      init: optional (..., K, dof) initial coefficients (default zeros: the
        minimum-jerk path in joint coordinates).
      segment, point: the hand, as in :func:`jaxmb.trajectory.hand_position` (default:
        the distal end of the last segment).
      q_guess: (dof,) or (..., dof) initial guess of the inverse kinematics of the
        start (``target="hand"``; ignored with ``target="joint"``).
      out_of_reach: "project" (warn and move the target onto the workspace boundary)
        or "raise" (ValueError), for hand targets.
      quadrature: "gauss" (default: Gauss-Legendre points) or "trapezoid" (the
        trapezoidal rule on the equally spaced times).
      batching: how a batch is solved inside the compiled call: "map" (default: one
        problem after the other in a ``lax.map`` loop, each with its own iterations;
        fastest on a CPU) or "vmap" (``jax.vmap`` over the solver: all problems in lock
        step until the slowest converges; for accelerators).
      chunk: solve the batch in chunks of this many problems (one compilation; the
        last chunk is padded), e.g. to show progress; None: all at once (with
        ``progress=True``, a batch of B problems in chunks of ceil(B / 20)).
      progress: show a ``tqdm`` progress bar over the chunks (a batch without
        ``chunk`` is cut into at most 20; a single problem has no bar).
      precondition: (built-in costs, L-BFGS and Adam) iterate on coefficients rescaled
        by the leading-order Hessian of the cost (the mass matrix for the torque costs,
        the hand's Jacobian for the hand jerk, along the minimum-jerk path; its
        eigenvalues floored at 3e-3 of the largest, for the self-motions of a redundant
        arm): the same minimum in fewer iterations (L-BFGS: under 0.6 times as many in
        the tests; Adam: converges with its default step). False: the plain
        coefficients.
      end_conditions: "auto" (default), 2 or 3: the conditions imposed at each end.
        3: the posture, zero velocity and zero acceleration; 2: the posture and zero
        velocity, the end accelerations left to the optimum. "auto" gives each cost
        what its Euler-Lagrange equation admits: 3 when a term of third order (torque
        change, hand or joint jerk) has a weight > 0 or the cost is a function, 2 for
        the torque alone (forced to zero end accelerations, its optimum builds a
        boundary layer that every larger basis makes thinner: the cost fell from
        13.21 to 12.85 from basis 10 to 40 on the notes' arm's lateral reach, against
        12.8155 for every basis with 2: ``experiments/optimal_reaching.py``). The
        result's ``end_conditions`` says which was used.

    Returns:
      an :class:`OptimalMovement` (NumPy-compatible JAX arrays), with the batch's
      leading shape.

    Raises:
      ValueError: a duration that is not finite and > 0, mismatched shapes (also of
        ``q_guess``), no ``target`` for a model of two coordinates, an unknown or
        empty cost, weights that are not finite numbers >= 0 or all 0, an unknown target, method or end_conditions, nodes below
        :func:`min_nodes`, basis < 1, maxiter < 1, non-finite inputs, an
        out-of-reach hand target with ``out_of_reach="raise"``, a cost (or its
        gradient) that is not finite at the initial guess; any input traced by
        ``jax.jit``, ``jax.vmap`` or ``jax.grad`` (see below).

    ``optimize`` is a driver (input checks, inverse kinematics, warnings, batches in
    chunks) around its own compiled solver, and cannot itself be traced: batch with
    leading axes instead, and differentiate a result with
    :func:`jaxmb.optimal.movement` (``movement(model, r.q_start, r.q_end, duration,
    r.coef, end_conditions=int(r.end_conditions))`` is differentiable with respect
    to the model and the coefficients; the optimum's own sensitivity to the model is
    not provided).
    """
    traced = [name for name, x in (("model", model), ("start", start), ("end", end), ("duration", duration),
                                   ("init", init), ("q_guess", q_guess))
              if any(isinstance(v, jax.core.Tracer) for v in jax.tree_util.tree_leaves(x))]  # fmt: skip
    if traced:
        raise ValueError(f"optimize cannot run under jax.jit, jax.vmap or jax.grad ({', '.join(traced)} traced): it "
                         "compiles its own solver. Batch with leading axes of start, end, duration or a stacked "
                         "model, and differentiate a result with jaxmb.optimal.movement(model, r.q_start, r.q_end, "
                         "duration, r.coef, end_conditions=...)")  # fmt: skip
    # -------- arguments
    if isinstance(cost, str):
        cost = {cost: 1.0}
    if isinstance(cost, dict):
        if not cost:
            raise ValueError(f"cost is an empty dict: name at least one of {list(_NAMES)} with its weight")
        unknown = sorted(set(cost) - set(COSTS))
        if unknown:
            raise ValueError(f"unknown cost {unknown[0]!r}: use one of {list(_NAMES)}, a dict of them with "
                             f"weights, or a function of a Movement")
        cost = {k: _check_weight(k, v) for k, v in cost.items()}
        if not any(v > 0 for v in cost.values()):
            raise ValueError(f"every weight of cost {cost} is 0: nothing to minimise; give at least one "
                             "weight > 0")
        weights = np.array([cost.get(k, 0.0) for k in _NAMES])
        label = "+".join(k for k in _NAMES if k in cost)
        terms = tuple(k for k in _NAMES if cost.get(k, 0.0) > 0)  # the terms evaluated: nonzero weights
        cost = None
    elif callable(cost):
        weights, label, terms = np.zeros(len(_NAMES)), "cost", None
    else:
        raise ValueError(f"cost must be a name ({list(_NAMES)}), a dict of them with weights, or a function "
                         f"of a Movement, got {cost!r}")
    if isinstance(end_conditions, str) and end_conditions == "auto":
        # what the cost's Euler-Lagrange equation admits: q, qd, qdd at the ends for a
        # term of third order, q and qd for the torque alone (a user function: 3)
        ends = 3 if terms is None or any(_LEADING[k] == 3 for k in terms) else 2
    else:
        try:
            ends = _check_ends(end_conditions)
        except ValueError:
            raise ValueError(f"end_conditions must be 'auto', 2 or 3, got {end_conditions!r}") from None
    target, target_given = _check_target(model, target)
    if method not in ("lbfgs", "adam"):
        raise ValueError(f"method must be 'lbfgs' or 'adam', got {method!r}")
    if out_of_reach not in ("project", "raise"):
        raise ValueError(f"out_of_reach must be 'project' or 'raise', got {out_of_reach!r}")
    if quadrature not in ("gauss", "trapezoid"):
        raise ValueError(f"quadrature must be 'gauss' or 'trapezoid', got {quadrature!r}")
    if batching not in ("map", "vmap"):
        raise ValueError(f"batching must be 'map' or 'vmap', got {batching!r}")
    nodes = _check_int("nodes", nodes, 2)
    basis = _check_int("basis", basis, 1)
    if nodes < min_nodes(basis, quadrature):
        raise ValueError(f"nodes={nodes} is too few for basis={basis} with {quadrature!r} quadrature: give nodes >= "
                         f"{min_nodes(basis, quadrature)} ({min_nodes(1, quadrature) // 4} (basis + 3), see "
                         "jaxmb.optimal.min_nodes), or a smaller basis; with fewer the optimiser minimises the "
                         "quadrature error")
    maxiter = _check_int("maxiter", maxiter, 1)
    memory = _check_int("memory", memory, 1)
    linesearch_steps = _check_int("linesearch_steps", linesearch_steps, 1)
    if chunk is not None:
        chunk = _check_int("chunk", chunk, 1)
    if not isinstance(precondition, (bool, np.bool_)):
        raise ValueError(f"precondition must be True or False, got {precondition!r}")
    for name, v in (("gtol", gtol), ("ftol", ftol), ("learning_rate", learning_rate)):
        if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    i, pt = _hand_point(model, segment, point)
    pt_static = None if pt is None else tuple(float(v) for v in np.asarray(pt))

    mshape = _model_batch_shape(model)
    dof = model.dof
    width = dof if target == "joint" else 2
    what = f"coordinates (dof={dof})" if target == "joint" else "hand positions (x, y)"
    arrays = {}
    for name, x in (("start", start), ("end", end)):
        x = np.asarray(x) if not isinstance(x, jax.Array) else x
        if x.ndim < 1 or x.shape[-1] != width:
            other = "" if target_given else " (give target='hand' for (x, y) hand positions)"
            raise ValueError(f"{name} must have shape ({width},) or (..., {width}) with target={target!r}: "
                             f"{what}, got shape {tuple(x.shape)}{other}")
        if x.dtype.kind not in "fiu":
            raise ValueError(f"{name} must be an array of real numbers, got dtype {x.dtype}")
        check_finite(x, name)
        arrays[name] = x
    start, end = arrays["start"], arrays["end"]
    duration = np.asarray(duration) if not isinstance(duration, jax.Array) else duration
    _check_duration(duration)
    dtype = _float_dtype(start, end, duration, *jax.tree_util.tree_leaves(model))
    try:
        lead = np.broadcast_shapes(start.shape[:-1], end.shape[:-1], np.shape(duration), mshape)
    except ValueError:
        raise ValueError(f"batch shapes do not broadcast: start {start.shape[:-1]}, end {end.shape[:-1]}, "
                         f"duration {np.shape(duration)}, model {mshape}") from None
    if init is not None:
        init = np.asarray(init) if not isinstance(init, jax.Array) else init
        if init.ndim < 2 or init.shape[-2:] != (basis, dof) or init.dtype.kind not in "fiu":
            raise ValueError(f"init must have shape (..., basis={basis}, dof={dof}), got {tuple(init.shape)}")
        check_finite(init, "init")
        try:
            lead = np.broadcast_shapes(lead, init.shape[:-2])
        except ValueError:
            raise ValueError(f"init's batch {tuple(init.shape[:-2])} does not broadcast with the batch {tuple(lead)} "
                             "of start, end, duration and model") from None
    lead = tuple(lead)
    if target == "hand" and q_guess is not None:
        q_guess = np.asarray(q_guess) if not isinstance(q_guess, jax.Array) else q_guess
        if q_guess.ndim < 1 or q_guess.shape[-1] != dof or q_guess.dtype.kind not in "fiu":
            raise ValueError(f"q_guess must be real, of shape ({dof},) or (..., {dof}): coordinates (dof={dof}), "
                             f"got shape {tuple(q_guess.shape)}")
        check_finite(q_guess, "q_guess")
        try:
            fits = np.broadcast_shapes(q_guess.shape[:-1], lead) == tuple(lead)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"q_guess's batch {tuple(q_guess.shape[:-1])} does not broadcast to the batch "
                             f"{tuple(lead)} of start, end, duration and model")
    B = int(np.prod(lead)) if lead else 1
    if progress and chunk is None and B > 1:
        chunk = -(-B // _PROGRESS_STEPS)  # a bar of at most _PROGRESS_STEPS updates (one compilation)

    # -------- flatten the batch
    mdl = model.astype(dtype)
    batched_model = bool(mshape)
    if batched_model:
        mdl = jax.tree_util.tree_map(
            lambda x: jnp.broadcast_to(x, lead + x.shape[len(mshape):]).reshape((B,) + x.shape[len(mshape):]), mdl)
    flat = lambda x, core: jnp.broadcast_to(jnp.asarray(x, dtype), lead + core).reshape((B,) + core)  # noqa: E731
    start_f, end_f = flat(start, (width,)), flat(end, (width,))
    dur_f = flat(duration, ())
    coef0 = flat(np.zeros((basis, dof)) if init is None else init, (basis, dof))

    if target == "hand":
        guess = None if q_guess is None else flat(q_guess, (dof,))
        if batched_model:  # traced models: projected silently here, reported below
            ik = lambda m, tt, g: inverse_kinematics(m, tt, g, segment=i, point=pt)  # noqa: E731
            if guess is None:
                qs = jax.vmap(lambda m, tt: inverse_kinematics(m, tt, segment=i, point=pt))(mdl, start_f)
            else:
                qs = jax.vmap(ik)(mdl, start_f, guess)
            qe = jax.vmap(ik)(mdl, end_f, qs)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # reported below, once per set
                qs = inverse_kinematics(mdl, start_f, guess, segment=i, point=pt)
                qe = inverse_kinematics(mdl, end_f, qs, segment=i, point=pt)
        # the end posture continues the start's angles (no 2 pi jump between them)
        nb = model.nbase
        d = qe[:, nb:] - qs[:, nb:]
        qe = qe.at[:, nb:].set(qs[:, nb:] + jnp.mod(d + jnp.pi, 2 * jnp.pi) - jnp.pi)
        _check_reached(mdl, batched_model, qs, start_f, "start", i, pt, out_of_reach)
        _check_reached(mdl, batched_model, qe, end_f, "end", i, pt, out_of_reach)
        q_start_f, q_end_f = qs, qe
    else:
        q_start_f, q_end_f = start_f, end_f

    cfg = _Config(cost, nodes, basis, method, maxiter, float(gtol), float(ftol), memory, float(learning_rate),
                  linesearch_steps, i, pt_static, quadrature, terms, bool(precondition), ends)
    w = jnp.asarray(weights, dtype)

    # -------- solve (in chunks, with progress)
    if B == 1:
        m1 = jax.tree_util.tree_map(lambda x: x[0], mdl) if batched_model else mdl
        res = _solve_single(m1, q_start_f[0], q_end_f[0], dur_f[0], coef0[0], w, cfg)
        res = jax.tree_util.tree_map(lambda x: x[None], res)
    elif chunk is None or chunk >= B:
        res = _solve_batch(mdl, q_start_f, q_end_f, dur_f, coef0, w, cfg, batched_model, batching)
    else:
        n_chunks = -(-B // chunk)
        pad = n_chunks * chunk - B
        padder = lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, 0)]) if pad else x  # noqa: E731
        args = [padder(x) for x in (q_start_f, q_end_f, dur_f, coef0)]
        mdl_p = jax.tree_util.tree_map(padder, mdl) if batched_model else mdl
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=B, unit="movement", desc=f"optimize ({label})")
        parts = []
        for k in range(n_chunks):
            sl = slice(k * chunk, (k + 1) * chunk)
            m_k = jax.tree_util.tree_map(lambda x: x[sl], mdl_p) if batched_model else mdl
            r = _solve_batch(m_k, *(x[sl] for x in args), w, cfg, batched_model, batching)
            jax.block_until_ready(r)
            parts.append(r)
            if bar is not None:
                bar.update(min(chunk, B - k * chunk))
        if bar is not None:
            bar.close()
        res = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs)[:B], *parts)

    # -------- a cost that is not finite where the optimisation starts is an input error
    start_bad = np.asarray((res.status == 3) & (res.iterations == 0))
    if np.any(start_bad):
        k = int(np.argmax(start_bad))
        raise ValueError(f"the cost or its gradient is not finite at the initial guess"
                         f"{f' (problem {k} of the flattened batch of {B})' if B > 1 else ''}: "
                         f"{float(np.asarray(res.history)[k, 0])!r}; check the cost function, the inputs and init")

    # -------- unflatten; the times follow the durations (shared when duration is a scalar)
    s_t = jnp.linspace(0.0, 1.0, nodes, dtype=dtype)  # the equally spaced output times, s = t / T
    t = jnp.asarray(duration, dtype)[..., None] * s_t
    out = {f: getattr(res, f).reshape(lead + getattr(res, f).shape[1:]) for f in OptimalMovement._fields if f != "t"}
    if terms == ("hand_jerk",) and ends == 3:
        _warn_unresolved_hand_jerk(out["hand"], out["cost"], duration, lead,
                                   float(weights[_NAMES.index("hand_jerk")]), basis)  # fmt: skip
    return OptimalMovement(t=t, **out)


def _warn_unresolved_hand_jerk(hand, cost, duration, lead, weight: float, basis: int, tol: float = 0.01):
    """Warn where a minimum hand jerk costs more than ``tol`` above its lower bound,
    ``weight * 720 |x1 - x0|^2 / T^5``: the straight minimum-jerk hand path from rest
    to rest (Flash & Hogan), which no hand path with the same ends beats. The excess
    is the basis's error where the straight path lies in the workspace."""
    hand = np.asarray(hand, dtype=float)
    d2 = np.sum((hand[..., -1, :] - hand[..., 0, :]) ** 2, -1)
    T = np.broadcast_to(np.asarray(duration, dtype=float), lead)
    bound = weight * 720.0 * d2 / T**5
    c = np.broadcast_to(np.asarray(cost, dtype=float), lead)
    with np.errstate(divide="ignore", invalid="ignore"):
        excess = np.where(bound > 0, c / bound - 1.0, 0.0)
    bad = np.isfinite(excess) & (excess > tol)
    if not bad.any():
        return
    k = int(np.argmax(np.where(bad, excess, -np.inf).reshape(-1)))
    where = f", movement {k} of the flattened batch" if bad.size > 1 else ""
    warnings.warn(f"cost='hand_jerk': {int(bad.sum())} of {bad.size} movements cost more than {100 * tol:g} % above "
                  f"720 |x1 - x0|^2 / T^5, the cost of the straight minimum-jerk hand path (largest excess "
                  f"{100 * excess.reshape(-1)[k]:.3g} %{where}): basis={basis} does not resolve them (a reach that "
                  "passes near the shoulder needed basis=60 for 0.1 %), or the straight path leaves the workspace. "
                  "Raise basis= (nodes >= 2 (basis + 3)) and compare", RuntimeWarning, stacklevel=3)  # fmt: skip
