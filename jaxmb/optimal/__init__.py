"""Planned and optimal movements of a model's hand and joints.

One name per quantity here: a *movement* is a rest-to-rest time course q(t) of the
coordinates that is planned or optimised (:class:`Movement`, :func:`movement`,
:class:`OptimalMovement`); a *trajectory* is what :func:`jaxmb.simulate` integrates
(:class:`jaxmb.Trajectory`). The hand is a point fixed on a segment
(:func:`hand_position`, :func:`workspace`, :func:`inverse_kinematics`).

Planned movements in closed form: :func:`minimum_jerk` (Flash & Hogan 1985),
:func:`two_link_ik` and :func:`time_derivatives` (exact, forward mode), so that a joint
movement ``q(t) = ik(x(t))`` is differentiated in time without numerical noise.

Optimal movements, optimised through the dynamics.

Which movement does the arm choose between two postures? Flash & Hogan (1985): the one
of minimum hand jerk (straight hand path, bell-shaped speed); Uno, Kawato & Suzuki
(1989): the one of minimum torque change (gently curved paths for some reaches);
others: minimum torque, effort or energy. :func:`optimize` minimises any of these, or
any user function of the movement, with the joint torques from
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

Solver: Optax L-BFGS with its zoom line search (strong Wolfe conditions),
``solver=LBFGS(...)`` (the default), or Adam, ``solver=Adam(...)``, inside
``jax.lax.while_loop``, on the cost divided by its initial value (so that the
tolerances are relative). Only the built-in terms of nonzero weight are evaluated.
With built-in costs both iterate on preconditioned coefficients b = a S, S^2 = G the
joint-space metric of the cost's leading term (each built-in cost is
int |A(q) q^(d)|^2 dt plus lower orders: A = M, the mass matrix (mapped to the joint
moments for segment angles), for the torque costs,
the hand's Jacobian for the hand jerk; the Hessian is then about I_K (x) G, see
``_solve._metric``; G's eigenvalues are floored at 3e-3 of its largest, for the directions it
does not see, such as the self-motions of a redundant arm under the hand jerk), so
that the problem they see is conditioned near 1 whatever the arm's inertias. It stops
when the largest gradient entry is below ``gtol`` (status 0), when an accepted
iteration lowers the cost by less than ``ftol`` relative (status 1, L-BFGS only),
after ``max_iter`` iterations (status 2)
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

from ._basis import basis_matrices, min_nodes
from ._hand import hand_position, workspace
from ._ik import IKResult, inverse_kinematics
from ._movement import COSTS, Movement, movement
from ._optimize import optimize
from ._options import LBFGS, Adam
from ._plans import minimum_jerk, time_derivatives, two_link_ik
from ._result import OptimalMovement
from ._solve import STATUS

__all__ = [
    # optimal movements
    "optimize",
    "OptimalMovement",
    "LBFGS",
    "Adam",
    "Movement",
    "movement",
    "COSTS",
    "STATUS",
    "basis_matrices",
    "min_nodes",
    # planned movements and the hand
    "minimum_jerk",
    "two_link_ik",
    "time_derivatives",
    "hand_position",
    "workspace",
    "inverse_kinematics",
    "IKResult",
]
