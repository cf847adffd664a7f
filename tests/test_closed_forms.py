"""jaxmb against the closed forms of the notes, each re-derived here with sympy.

Every reference is derived in this file from the positions of the centres of mass
alone (Lagrange's equations, d/dt dL/dqd - dL/dq = Q, with the external forces by
virtual work, Q_ext = J^T F, so E = -J^T F), lambdified, and compared with jaxmb
in float64 at random states with fixed seeds. The equations printed in the
references are transcribed by hand below and checked against the same derivation:
the correct ones must agree with it (and so with jaxmb), the misprinted ones are
pinned by a test asserting the exact difference, with the corrected form agreeing.

References (``/work/shared/references``):

- ``multibody_dynamics_notes.txt`` (M. Duarte): one-link inverted pendulum and
  two-link arm, tau = M qdd + C + G + E.
- ``forward_dynamics_matrix_form.txt`` (R. N. Watanabe, M. Duarte): double
  pendulum of uniform bars, angles from the downward vertical, M qdd = C + G + Q.
- ``three_link_chain_inverse_dynamics.txt`` (Cesari, Shiratori, Olivato, Duarte
  2001, appendix; also Zatsiorsky 2002): three-link arm with a spring force on the
  hand, T = M alphadd + v + G + T_ext (eqs 24-44).

Misprints found (each documented by a test below):

Multibody dynamics notes (Duarte):

1. One-link vector form of Newton's law, F_r + F_g + F_e = m rdd: the gravity
   force is printed F_g = [0, -g, 0]; it is [0, -m g, 0] (the scalar form just
   above and the code cell, F_ry = m ydd + m g - F_ey, are right).
2. Two-link Newton-Euler moment equation of link 2: printed
   "... - (L2-d2) F_e,y cos(alpha1+alpha2) = I2 (alpha1dd+alpha2dd)"; the moment
   of the external force about the centre of mass is
   (L2-d2)(F_e,y cos - F_e,x sin), so the term is "+ (L2-d2) F_e,y cos(alpha1+alpha2)"
   (as in the one-link equation; the notes' code cell In [12] has it right, so
   the printed M, C, G, E that follow are correct).

Forward dynamics in matrix form (Watanabe & Duarte):

3. Code listing, gravity term of the first row:
   ``-m1*g*l1/2*sin(theta1) - m2*g*l2*sin(theta1)``; the equations (and the
   derivation) have ``m2*g*l1*sin(theta1)``. The listing is right only when
   l1 == l2, and its own example uses l1 = 1, l2 = 0.5 (the text above it also
   says both bars are 1 m long).

Three-link chain (Cesari et al. 2001):

4. Eq. 10 (ydd_2): two signs. Printed
   "- [l1 sin a1 - d2 sin(a1+a2)] a1d^2 + d2 sin(a1+a2)(2 a1d a2d + a2d^2)";
   right: "- [l1 sin a1 + d2 sin(a1+a2)] a1d^2 - d2 sin(a1+a2)(2 a1d a2d + a2d^2)".
   Printed minus right = 2 d2 sin(a1+a2)(a1d + a2d)^2.
5. Eq. 14 (ydd_3): the Coriolis term "- [l2 sin(a1+a2) + d3 cos(a1+a2+a3)] 2 a1d a2d"
   should have d3 sin(a1+a2+a3).
6. Eq. 23 (moment equation of the upper arm): "+ F_y1 d1 sin a1" should be
   "+ F_x1 d1 sin a1".
7. Eq. 31: M_22 = m2 d2^2 + I2 + m3 (l2^2 + d3^2 + l2 d3 cos a3) + I3 should have
   2 l2 d3 cos a3 (the symmetric entries 28/30 and 32/34 are consistent with the
   factor 2).
8. Notation only (not testable): eqs 18, 19 and 22 write F_r2, F_r3, F_v1, F_v2,
   F_v3 for F_x2, F_x3, F_y1, F_y2, F_y3, and eq. 24 writes T_evt for T_ext
   (possibly artefacts of the text conversion).

Checked and correct: the notes' one-link T, its direct-dynamics form, the moment
equation about the centre of mass, xdd, ydd, F_rx and F_ry; the two-link M, C, G, E
and the moment equation of link 1; the double pendulum's M, C, G and Q (the
equations); Cesari eqs 4, 6, 8, 12, 15-22 (reading F_r, F_v as F_x, F_y), 27-30 and
32-44, including v (36-38) and T_ext (42-44, spring force along -x at d3 + dS from
the wrist).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
import pytest

import jaxmb

sp = pytest.importorskip("sympy")

# float64 round-off through sympy-lambdified expressions and jaxmb's autodiff of the
# pose map: agreement to ~1e-14 relative is typical; 1e-10 leaves room for the
# Cholesky solve of forward dynamics (cond(M) < 1e4 here) without hiding any
# modelling error (a wrong term changes the result at order 1e-2 or more).
RTOL = 1e-10
# Printed equations against the derivation: both are sympy expressions evaluated
# in float64 at random points, so only round-off separates equal forms.
RTOL_SYM = 1e-12
# A misprint must change the value by far more than round-off.
MISPRINT_MIN = 1e-6

N_STATES = 5  # random states per comparison
PI = np.pi

# jaxmb under jit (the model is a pytree argument: new parameter values reuse the
# compiled function; compiling once is faster here than eager dispatch per state)
_J = {name: jax.jit(getattr(jaxmb, name)) for name in (
    "mass_matrix", "bias_forces", "gravity_forces", "external_forces", "forward_dynamics", "joint_moments",
    "pose_acceleration")}
_J["inverse_dynamics"] = jax.jit(jaxmb.inverse_dynamics, static_argnames=("method",))
_J["joint_reactions"] = jax.jit(jaxmb.joint_reactions, static_argnames=("method",))
_J["point_load"] = jax.jit(jaxmb.point_load, static_argnames=("segment", "frame"))


# --------------------------------------------------------------------- helpers


def _close(actual, expected, rtol=RTOL, scale=None):
    """assert_allclose with the absolute tolerance scaled by the largest entry.

    ``scale`` (default: the largest |expected|) sets atol = rtol * scale, so that an
    entry that happens to be near zero is judged against its vector's magnitude.
    """
    actual, expected = np.asarray(actual, float), np.asarray(expected, float)
    scale = max(np.abs(expected).max() if scale is None else scale, 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=rtol * scale)


def _ddt(f, q, qd, qdd):
    """Total time derivative of f(q, qd) along the motion (chain rule)."""
    return sum(sp.diff(f, a) * b for a, b in zip(q, qd)) + sum(sp.diff(f, a) * b for a, b in zip(qd, qdd))


def _lagrange(q, qd, qdd, bodies, g, point=None, force=None):
    """Equations of motion tau = M qdd + C + G + E of a planar system, by Lagrange.

    Args:
      q, qd, qdd: lists of sympy symbols (coordinates, velocities, accelerations).
      bodies: list of (x_com, y_com, theta, m, I): centre-of-mass position and
        absolute angle of each body as expressions in q, mass, inertia about the
        centre of mass.
      g: gravity symbol (acting along -y).
      point, force: optional (x, y) expressions of the point where an external force
        acts and the (Fx, Fy) force.

    Returns:
      dict of sympy Matrices M (n, n), C, G, E (n, 1), and the list of centre-of-mass
      accelerations (xdd, ydd) of each body.
    """
    T = 0
    V = 0
    acc = []
    for x, y, th, m, I in bodies:
        vx, vy, w = (_ddt(f, q, qd, qdd) for f in (x, y, th))
        T += m * (vx**2 + vy**2) / 2 + I * w**2 / 2
        V += m * g * y
        acc.append((_ddt(vx, q, qd, qdd), _ddt(vy, q, qd, qdd)))
    L = T - V
    # Lagrange: d/dt dL/dqd_i - dL/dq_i = Q_i
    eom = [_ddt(sp.diff(L, b), q, qd, qdd) - sp.diff(L, a) for a, b in zip(q, qd)]
    M = sp.Matrix([[sp.diff(e, b) for b in qdd] for e in eom])
    rest = {b: 0 for b in qdd}
    still = {**rest, **{b: 0 for b in qd}}
    G = sp.Matrix([e.subs(still) for e in eom])
    C = sp.Matrix([sp.expand(e.subs(rest) - Gi) for e, Gi in zip(eom, G)])
    n = len(q)
    if point is None:
        E = sp.zeros(n, 1)
    else:
        # virtual work of F at the point: Q_ext = J^T F; E = -Q_ext
        E = sp.Matrix([-(force[0] * sp.diff(point[0], a) + force[1] * sp.diff(point[1], a)) for a in q])
    return {"M": M, "C": C, "G": G, "E": E, "acc": acc}


def _fn(args, expr):
    """numpy function of the flat argument list (Matrices come back as arrays)."""
    return sp.lambdify(list(args), expr, modules="numpy", cse=True)


def _rel_diff(a, b, seed=0, n=8, lo=-2.0, hi=2.0):
    """max |a - b| / max |b| over n random points of all free symbols.

    Trigonometric polynomials that differ, differ at almost every point, so random
    evaluation (fixed seed) decides the identity; values in [-2, 2] are fine since
    the identities hold for all real arguments.
    """
    syms = sorted((sp.sympify(a).free_symbols | sp.sympify(b).free_symbols), key=str)
    fa, fb = _fn(syms, a), _fn(syms, b)
    rng = np.random.default_rng(seed)
    num = den = 0.0
    for _ in range(n):
        vals = rng.uniform(lo, hi, len(syms))
        va, vb = float(fa(*vals)), float(fb(*vals))
        num = max(num, abs(va - vb))
        den = max(den, abs(vb))
    return num / max(den, 1e-300)


def _same(a, b, **kw):
    return _rel_diff(a, b, **kw) < RTOL_SYM


# =========================================================== 1. one-link pendulum


@functools.lru_cache(maxsize=None)
def _one_link():
    al, ald, aldd = sp.symbols("alpha alphad alphadd")
    L, d, m, I, g, Fex, Fey = sp.symbols("L d m I g F_ex F_ey")
    s = dict(al=al, ald=ald, aldd=aldd, L=L, d=d, m=m, I=I, g=g, Fex=Fex, Fey=Fey)
    body = (d * sp.cos(al), d * sp.sin(al), al, m, I)
    tip = (L * sp.cos(al), L * sp.sin(al))
    ref = _lagrange([al], [ald], [aldd], [body], g, point=tip, force=(Fex, Fey))
    tau = (ref["M"] * sp.Matrix([aldd]) + ref["C"] + ref["G"] + ref["E"])[0]
    xdd, ydd = ref["acc"][0]
    # Newton's law of the segment, F_r + F_e - m g j = m a  (reaction on the segment)
    Frx, Fry = m * xdd - Fex, m * ydd + m * g - Fey
    return s, tau, xdd, ydd, Frx, Fry


def _one_link_printed(s):
    """Notes: T = I_o alphadd + m g d cos(alpha) + L F_ex sin(alpha) - L F_ey cos(alpha)."""
    al, aldd, L, d, m, I, g, Fex, Fey = (s[k] for k in ("al", "aldd", "L", "d", "m", "I", "g", "Fex", "Fey"))
    Io = I + m * d**2  # parallel axes
    return Io * aldd + m * g * d * sp.cos(al) + L * Fex * sp.sin(al) - L * Fey * sp.cos(al)


def _one_link_states(seed):
    rng = np.random.default_rng(seed)
    for _ in range(N_STATES):
        L = rng.uniform(0.3, 1.0)
        p = dict(L=L, d=rng.uniform(0.3, 0.7) * L, m=rng.uniform(1, 10), I=rng.uniform(0.02, 0.5), g=9.81,
                 Fex=rng.uniform(-50, 50), Fey=rng.uniform(-50, 50))
        x = dict(al=rng.uniform(-PI, PI), ald=rng.uniform(-6, 6), aldd=rng.uniform(-30, 30))
        model = jaxmb.chain([p["L"]], [p["d"]], [p["m"]], [p["I"]], gravity=p["g"])
        yield p, x, model


def _one_link_loads(model, p, q):
    # the external force at the distal end, local point (L, 0) of the segment
    return _J["point_load"](model, q, 0, (p["L"], 0.0), (p["Fex"], p["Fey"]), frame="segment")


def test_one_link_printed_equations_agree_with_derivation():
    s, tau, xdd, ydd, Frx, Fry = _one_link()
    al, ald, aldd, L, d, m, I, g, Fex, Fey = (s[k] for k in ("al", "ald", "aldd", "L", "d", "m", "I", "g",
                                                             "Fex", "Fey"))
    # inverse dynamics about the joint
    assert _same(_one_link_printed(s), tau)
    # Newton-Euler about the centre of mass, with F_r from Newton's law:
    # T + d F_rx sin a - d F_ry cos a - (L-d) F_ex sin a + (L-d) F_ey cos a = I alphadd
    T_ne = I * aldd - d * Frx * sp.sin(al) + d * Fry * sp.cos(al) + (L - d) * Fex * sp.sin(al) - (
        L - d) * Fey * sp.cos(al)
    assert _same(T_ne, tau)
    # printed kinematics: xdd = -d sin(a) add - d cos(a) ad^2, ydd = -d sin(a) ad^2 + d cos(a) add
    assert _same(-d * sp.sin(al) * aldd - d * sp.cos(al) * ald**2, xdd)
    assert _same(-d * sp.sin(al) * ald**2 + d * sp.cos(al) * aldd, ydd)
    # direct dynamics: alphadd = I_o^-1 [T - m g d cos a - L F_ex sin a + L F_ey cos a]
    Tsym = sp.Symbol("T")
    add_printed = (Tsym - m * g * d * sp.cos(al) - L * Fex * sp.sin(al) + L * Fey * sp.cos(al)) / (I + m * d**2)
    add_derived = sp.solve(sp.Eq(tau, Tsym), aldd)[0]
    assert _same(add_printed, add_derived)


def test_one_link_misprint_gravity_vector():
    """Notes, vector form: F_g printed as [0, -g, 0]; it is [0, -m g, 0]."""
    s, _, _, ydd, _, Fry = _one_link()
    m, g, Fey = s["m"], s["g"], s["Fey"]
    Fry_printed = m * ydd - (-g) - Fey  # F_r = m rdd - F_g - F_e with F_g,y = -g
    Fry_corrected = m * ydd - (-m * g) - Fey
    assert _rel_diff(Fry_printed, Fry) > MISPRINT_MIN
    assert _same(Fry_printed - Fry, (1 - m) * g)  # right only for m = 1 kg
    assert _same(Fry_corrected, Fry)


@pytest.mark.parametrize("method", ["recursive", "projection"])
def test_one_link_inverse_dynamics(method):
    s, tau, *_ = _one_link()
    args = [s[k] for k in ("al", "ald", "aldd", "L", "d", "m", "I", "g", "Fex", "Fey")]
    f_derived = _fn(args, tau)
    f_printed = _fn(args, _one_link_printed(s))
    for p, x, model in _one_link_states(1):
        vals = [x["al"], x["ald"], x["aldd"], p["L"], p["d"], p["m"], p["I"], p["g"], p["Fex"], p["Fey"]]
        q = np.array([x["al"]])
        loads = _one_link_loads(model, p, q)
        got = _J["inverse_dynamics"](model, q, np.array([x["ald"]]), np.array([x["aldd"]]), loads, method=method)
        _close(got, [f_derived(*vals)])
        _close(got, [f_printed(*vals)])


def test_one_link_forward_dynamics():
    s, tau, *_ = _one_link()
    T = sp.Symbol("T")
    add = sp.solve(sp.Eq(tau, T), s["aldd"])[0]
    f = _fn([s[k] for k in ("al", "ald", "L", "d", "m", "I", "g", "Fex", "Fey")] + [T], add)
    rng = np.random.default_rng(2)
    for p, x, model in _one_link_states(2):
        Tn = rng.uniform(-100, 100)
        q = np.array([x["al"]])
        got = _J["forward_dynamics"](model, q, np.array([x["ald"]]), np.array([Tn]), _one_link_loads(model, p, q))
        _close(got, [f(x["al"], x["ald"], p["L"], p["d"], p["m"], p["I"], p["g"], p["Fex"], p["Fey"], Tn)])


@pytest.mark.parametrize("method", ["projection", "recursive"])
def test_one_link_joint_reactions(method):
    """Notes: F_rx = m xdd - F_ex, F_ry = m ydd + m g - F_ey (force of the ground on the segment)."""
    s, _, _, _, Frx, Fry = _one_link()
    args = [s[k] for k in ("al", "ald", "aldd", "L", "d", "m", "I", "g", "Fex", "Fey")]
    f = _fn(args, sp.Matrix([Frx, Fry]))
    for p, x, model in _one_link_states(3):
        vals = [x["al"], x["ald"], x["aldd"], p["L"], p["d"], p["m"], p["I"], p["g"], p["Fex"], p["Fey"]]
        q = np.array([x["al"]])
        got = _J["joint_reactions"](model, q, np.array([x["ald"]]), np.array([x["aldd"]]),
                                    _one_link_loads(model, p, q), method=method)
        _close(np.asarray(got)[0], np.ravel(f(*vals)))


# ============================================================== 2. two-link arm


@functools.lru_cache(maxsize=None)
def _two_link():
    q1, q2, q1d, q2d, q1dd, q2dd = sp.symbols("q1 q2 q1d q2d q1dd q2dd")
    L1, L2, d1, d2, m1, m2, I1, I2, g, Fex, Fey = sp.symbols("L1 L2 d1 d2 m1 m2 I1 I2 g F_ex F_ey")
    s = dict(q1=q1, q2=q2, q1d=q1d, q2d=q2d, q1dd=q1dd, q2dd=q2dd, L1=L1, L2=L2, d1=d1, d2=d2, m1=m1, m2=m2,
             I1=I1, I2=I2, g=g, Fex=Fex, Fey=Fey)
    c, si = sp.cos, sp.sin
    bodies = [
        (d1 * c(q1), d1 * si(q1), q1, m1, I1),
        (L1 * c(q1) + d2 * c(q1 + q2), L1 * si(q1) + d2 * si(q1 + q2), q1 + q2, m2, I2),
    ]
    tip = (L1 * c(q1) + L2 * c(q1 + q2), L1 * si(q1) + L2 * si(q1 + q2))
    ref = _lagrange([q1, q2], [q1d, q2d], [q1dd, q2dd], bodies, g, point=tip, force=(Fex, Fey))
    return s, ref


def _two_link_printed(s):
    """M, C, G, E as printed in the notes (output of In [15])."""
    q1, q2, q1d, q2d = s["q1"], s["q2"], s["q1d"], s["q2d"]
    L1, L2, d1, d2, m1, m2, I1, I2, g, Fex, Fey = (s[k] for k in ("L1", "L2", "d1", "d2", "m1", "m2", "I1",
                                                                  "I2", "g", "Fex", "Fey"))
    c, si = sp.cos, sp.sin
    M12 = I2 + L1 * d2 * m2 * c(q2) + d2**2 * m2
    M = sp.Matrix([[I1 + I2 + L1**2 * m2 + 2 * L1 * d2 * m2 * c(q2) + d1**2 * m1 + d2**2 * m2, M12],
                   [M12, I2 + d2**2 * m2]])
    C = sp.Matrix([-L1 * d2 * m2 * (2 * q1d + q2d) * si(q2) * q2d, L1 * d2 * m2 * si(q2) * q1d**2])
    G = sp.Matrix([g * (L1 * m2 * c(q1) + d1 * m1 * c(q1) + d2 * m2 * c(q1 + q2)), d2 * g * m2 * c(q1 + q2)])
    E = sp.Matrix([Fex * (L1 * si(q1) + L2 * si(q1 + q2)) - Fey * (L1 * c(q1) + L2 * c(q1 + q2)),
                   L2 * (Fex * si(q1 + q2) - Fey * c(q1 + q2))])
    return {"M": M, "C": C, "G": G, "E": E}


_TWO_ARGS = ("q1", "q2", "q1d", "q2d", "L1", "L2", "d1", "d2", "m1", "m2", "I1", "I2", "g", "Fex", "Fey")


def test_two_link_printed_matrices_agree_with_derivation():
    s, ref = _two_link()
    printed = _two_link_printed(s)
    for key in ("M", "C", "G", "E"):
        for a, b in zip(printed[key], ref[key]):
            assert _same(a, b), key


def test_two_link_misprint_newton_euler_link2():
    """Notes, Newton-Euler of link 2: '- (L2-d2) F_e,y cos(a1+a2)' should be '+'.

    Printed: T2 + d2 F_r2x sin(a12) - d2 F_r2y cos(a12) - (L2-d2) F_ex sin(a12)
    - (L2-d2) F_ey cos(a12) = I2 (a1dd + a2dd), with F_r2 from Newton's law
    (F_r2x = m2 x2dd - F_ex, F_r2y = m2 y2dd + m2 g - F_ey, both printed correctly).
    """
    s, ref = _two_link()
    d2, L2, m2, I2, g, Fex, Fey = (s[k] for k in ("d2", "L2", "m2", "I2", "g", "Fex", "Fey"))
    a12 = s["q1"] + s["q2"]
    x2dd, y2dd = ref["acc"][1]
    Fr2x, Fr2y = m2 * x2dd - Fex, m2 * y2dd + m2 * g - Fey
    qdd = sp.Matrix([s["q1dd"], s["q2dd"]])
    tau2 = (ref["M"] * qdd + ref["C"] + ref["G"] + ref["E"])[1]

    def T2(sign_fey):
        return (I2 * (s["q1dd"] + s["q2dd"]) - d2 * Fr2x * sp.sin(a12) + d2 * Fr2y * sp.cos(a12)
                + (L2 - d2) * Fex * sp.sin(a12) - sign_fey * (L2 - d2) * Fey * sp.cos(a12))

    printed = T2(-1)  # the printed '- (L2-d2) F_ey cos', moved to the right-hand side
    corrected = T2(+1)
    assert _rel_diff(printed, tau2) > MISPRINT_MIN
    assert _same(printed - tau2, 2 * (L2 - d2) * Fey * sp.cos(a12))
    assert _same(corrected, tau2)

    # link 1 (printed correctly): T1 - T2 + d1 F_r1x sin a1 - d1 F_r1y cos a1
    # + (L1-d1) F_r2x sin a1 - (L1-d1) F_r2y cos a1 = I1 a1dd
    d1, L1, m1, I1 = (s[k] for k in ("d1", "L1", "m1", "I1"))
    x1dd, y1dd = ref["acc"][0]
    Fr1x, Fr1y = m1 * x1dd + Fr2x, m1 * y1dd + Fr2y + m1 * g
    a1 = s["q1"]
    T1 = (I1 * s["q1dd"] + corrected - d1 * Fr1x * sp.sin(a1) + d1 * Fr1y * sp.cos(a1)
          - (L1 - d1) * Fr2x * sp.sin(a1) + (L1 - d1) * Fr2y * sp.cos(a1))
    tau1 = (ref["M"] * qdd + ref["C"] + ref["G"] + ref["E"])[0]
    assert _same(T1, tau1)


def test_two_link_matrices():
    s, ref = _two_link()
    printed = _two_link_printed(s)
    args = [s[k] for k in _TWO_ARGS]
    f_ref = {k: _fn(args, ref[k]) for k in ("M", "C", "G", "E")}
    f_pr = {k: _fn(args, printed[k]) for k in ("M", "C", "G", "E")}
    rng = np.random.default_rng(4)
    for _ in range(N_STATES):
        L1, L2 = rng.uniform(0.25, 0.45, 2)
        p = dict(L1=L1, L2=L2, d1=rng.uniform(0.4, 0.6) * L1, d2=rng.uniform(0.4, 0.7) * L2,
                 m1=rng.uniform(1, 3), m2=rng.uniform(0.8, 2), I1=rng.uniform(0.01, 0.03),
                 I2=rng.uniform(0.005, 0.02), g=9.81, Fex=rng.uniform(-20, 20), Fey=rng.uniform(-20, 20))
        x = dict(q1=rng.uniform(-PI, PI), q2=rng.uniform(0, PI), q1d=rng.uniform(-8, 8), q2d=rng.uniform(-8, 8))
        vals = [{**p, **x}[k] for k in _TWO_ARGS]
        # q1: upper arm from horizontal (absolute = relative for the root), q2: elbow = jaxmb relative
        model = jaxmb.chain([p["L1"], p["L2"]], [p["d1"], p["d2"]], [p["m1"], p["m2"]], [p["I1"], p["I2"]],
                            gravity=p["g"], coordinates="relative")
        q, qd = np.array([x["q1"], x["q2"]]), np.array([x["q1d"], x["q2d"]])
        loads = _J["point_load"](model, q, 1, (p["L2"], 0.0), (p["Fex"], p["Fey"]), frame="segment")
        got = {
            "M": _J["mass_matrix"](model, q),
            "C": _J["bias_forces"](model, q, qd),
            "G": _J["gravity_forces"](model, q),
            "E": _J["external_forces"](model, q, loads),
        }
        for k in got:
            _close(np.asarray(got[k]).reshape(np.shape(f_ref[k](*vals))), f_ref[k](*vals))
            _close(np.asarray(got[k]).reshape(np.shape(f_pr[k](*vals))), f_pr[k](*vals))


# ======================================================= 3. double pendulum


@functools.lru_cache(maxsize=None)
def _double_pendulum():
    """Uniform bars (d = l/2, I = m l^2/12), angles th from the downward vertical.

    Their sign convention, M thdd = C + G + Q: C and G are minus ours.
    """
    th1, th2, w1, w2, a1, a2 = sp.symbols("th1 th2 w1 w2 a1 a2")
    l1, l2, m1, m2, g, Mo1, Mo12 = sp.symbols("l1 l2 m1 m2 g M1 M12")
    s = dict(th1=th1, th2=th2, w1=w1, w2=w2, a1=a1, a2=a2, l1=l1, l2=l2, m1=m1, m2=m2, g=g, M1=Mo1, M12=Mo12)
    c, si = sp.cos, sp.sin
    bodies = [
        (l1 / 2 * si(th1), -l1 / 2 * c(th1), th1, m1, m1 * l1**2 / 12),
        (l1 * si(th1) + l2 / 2 * si(th2), -l1 * c(th1) - l2 / 2 * c(th2), th2, m2, m2 * l2**2 / 12),
    ]
    ref = _lagrange([th1, th2], [w1, w2], [a1, a2], bodies, g)
    # virtual work of the joint moments: M1 on bar 1, M12 on bar 2 and -M12 on bar 1
    dW = Mo1 * sp.Symbol("dth1") + Mo12 * (sp.Symbol("dth2") - sp.Symbol("dth1"))
    Q = sp.Matrix([sp.diff(dW, sp.Symbol("dth1")), sp.diff(dW, sp.Symbol("dth2"))])
    return s, ref, Q


def _dp_printed(s):
    """Watanabe & Duarte's matrix form M, C, G, Q (the equations)."""
    th1, th2, w1, w2, l1, l2, m1, m2, g, M1, M12 = (s[k] for k in ("th1", "th2", "w1", "w2", "l1", "l2", "m1",
                                                                   "m2", "g", "M1", "M12"))
    c, si = sp.cos, sp.sin
    off = m2 * l1 * l2 / 2 * c(th1 - th2)
    M = sp.Matrix([[m1 * l1**2 / 3 + m2 * l1**2, off], [off, m2 * l2**2 / 3]])
    C = sp.Matrix([-m2 * l1 * l2 / 2 * w2**2 * si(th1 - th2), m2 * l1 * l2 / 2 * w1**2 * si(th1 - th2)])
    G = sp.Matrix([-m1 * g * l1 / 2 * si(th1) - m2 * l1 * g * si(th1), -m2 * g * l2 / 2 * si(th2)])
    Q = sp.Matrix([M1 - M12, M12])
    return {"M": M, "C": C, "G": G, "Q": Q}


def _dp_code_G1(s):
    """The code listing's G[0]: -m1*g*l1/2*sin(theta1) - m2*g*l2*sin(theta1)."""
    return -s["m1"] * s["g"] * s["l1"] / 2 * sp.sin(s["th1"]) - s["m2"] * s["g"] * s["l2"] * sp.sin(s["th1"])


def test_double_pendulum_printed_agrees_with_derivation():
    s, ref, Q = _double_pendulum()
    pr = _dp_printed(s)
    for a, b in zip(pr["M"], ref["M"]):
        assert _same(a, b)
    for a, b in zip(pr["C"], -ref["C"]):  # their C is on the right-hand side
        assert _same(a, b)
    for a, b in zip(pr["G"], -ref["G"]):
        assert _same(a, b)
    assert all(sp.simplify(a - b) == 0 for a, b in zip(pr["Q"], Q))


def test_double_pendulum_misprint_code_gravity():
    """Code listing: G[0] uses m2*g*l2*sin(theta1) where the equation has m2*g*l1."""
    s, ref, _ = _double_pendulum()
    G1 = -ref["G"][0]  # their sign convention
    code = _dp_code_G1(s)
    assert _rel_diff(code, G1) > MISPRINT_MIN
    assert _same(code - G1, -s["m2"] * s["g"] * (s["l2"] - s["l1"]) * sp.sin(s["th1"]))
    # equal only when l1 == l2 ...
    assert _same(code.subs(s["l2"], s["l1"]), G1)
    # ... and the listing itself runs with l1 = 1, l2 = 0.5
    assert _rel_diff(code.subs({s["l1"]: 1, s["l2"]: 0.5}), G1.subs({s["l1"]: 1, s["l2"]: 0.5})) > MISPRINT_MIN


def test_double_pendulum_jaxmb_absolute():
    s, ref, Q = _double_pendulum()
    pr = _dp_printed(s)
    args = [s[k] for k in ("th1", "th2", "w1", "w2", "l1", "l2", "m1", "m2", "g", "M1", "M12")]
    fM = _fn(args, pr["M"])
    # forward dynamics of their matrix form: thdd = M^-1 (C + G + Q)
    f_acc = _fn(args, pr["M"].LUsolve(pr["C"] + pr["G"] + pr["Q"]))
    fQ = _fn(args, Q)
    rng = np.random.default_rng(5)
    for _ in range(N_STATES):
        p = dict(l1=rng.uniform(0.3, 1.0), l2=rng.uniform(0.3, 1.0), m1=rng.uniform(0.5, 3),
                 m2=rng.uniform(0.5, 3), g=9.81, M1=rng.uniform(-10, 10), M12=rng.uniform(-10, 10))
        th = rng.uniform(-PI, PI, 2)
        w = rng.uniform(-6, 6, 2)
        vals = [th[0], th[1], w[0], w[1], p["l1"], p["l2"], p["m1"], p["m2"], p["g"], p["M1"], p["M12"]]
        lens = np.array([p["l1"], p["l2"]])
        ms = np.array([p["m1"], p["m2"]])
        model = jaxmb.chain(lens, lens / 2, ms, ms * lens**2 / 12, gravity=p["g"], coordinates="absolute")
        q = th - PI / 2  # jaxmb angle from +x = angle from the downward vertical - pi/2
        _close(_J["mass_matrix"](model, q), fM(*vals))
        tau = np.ravel(fQ(*vals))  # generalized forces of the joint moments: [M1 - M12, M12]
        acc = np.ravel(f_acc(*vals))
        _close(_J["forward_dynamics"](model, q, w, tau), acc)
        # and back: the generalized forces, and the joint moments [M1, M12] themselves
        _close(_J["inverse_dynamics"](model, q, w, acc), tau)
        _close(_J["joint_moments"](model, q, w, acc), [p["M1"], p["M12"]])


# ==================================================== 4. three-link arm (Cesari)


@functools.lru_cache(maxsize=None)
def _three_link():
    a = sp.symbols("a1:4")
    ad = sp.symbols("ad1:4")
    add = sp.symbols("add1:4")
    l1, l2, d1, d2, d3, dS, m1, m2, m3, I1, I2, I3, g, FS = sp.symbols(
        "l1 l2 d1 d2 d3 dS m1 m2 m3 I1 I2 I3 g F_S")
    s = dict(a=a, ad=ad, add=add, l1=l1, l2=l2, d1=d1, d2=d2, d3=d3, dS=dS, m1=m1, m2=m2, m3=m3, I1=I1, I2=I2,
             I3=I3, g=g, FS=FS)
    c, si = sp.cos, sp.sin
    t1, t2, t3 = a[0], a[0] + a[1], a[0] + a[1] + a[2]  # segment angles (eq. 1)
    bodies = [
        (d1 * c(t1), d1 * si(t1), t1, m1, I1),
        (l1 * c(t1) + d2 * c(t2), l1 * si(t1) + d2 * si(t2), t2, m2, I2),
        (l1 * c(t1) + l2 * c(t2) + d3 * c(t3), l1 * si(t1) + l2 * si(t2) + d3 * si(t3), t3, m3, I3),
    ]
    # spring force F_S along -x on the hand, d3 + dS from the wrist
    spring = (l1 * c(t1) + l2 * c(t2) + (d3 + dS) * c(t3), l1 * si(t1) + l2 * si(t2) + (d3 + dS) * si(t3))
    ref = _lagrange(list(a), list(ad), list(add), bodies, g, point=spring, force=(-FS, 0))
    return s, ref


def _cesari_printed(s):
    """Eqs 4-14 (accelerations) and 27-44 (M, v, G, T_ext) as printed."""
    (a1, a2, a3), (w1, w2, w3), (b1, b2, b3) = s["a"], s["ad"], s["add"]
    l1, l2, d1, d2, d3, dS, m1, m2, m3, I1, I2, I3, g, FS = (s[k] for k in (
        "l1", "l2", "d1", "d2", "d3", "dS", "m1", "m2", "m3", "I1", "I2", "I3", "g", "FS"))
    c, si = sp.cos, sp.sin
    s1, c1, s12, c12, s123, c123 = si(a1), c(a1), si(a1 + a2), c(a1 + a2), si(a1 + a2 + a3), c(a1 + a2 + a3)
    c2, c3, c23, s2, s3, s23 = c(a2), c(a3), c(a2 + a3), si(a2), si(a3), si(a2 + a3)
    acc = {
        4: -d1 * (b1 * s1 + w1**2 * c1),
        6: d1 * (b1 * c1 - w1**2 * s1),
        8: (-(l1 * s1 + d2 * s12) * b1 - d2 * s12 * b2 - (l1 * c1 + d2 * c12) * w1**2
            - d2 * c12 * (2 * w1 * w2 + w2**2)),
        10: ((l1 * c1 + d2 * c12) * b1 + d2 * c12 * b2 - (l1 * s1 - d2 * s12) * w1**2
             + d2 * s12 * (2 * w1 * w2 + w2**2)),
        12: (-(l1 * s1 + l2 * s12 + d3 * s123) * b1 - (l2 * s12 + d3 * s123) * b2 - d3 * s123 * b3
             - (l1 * c1 + l2 * c12 + d3 * c123) * w1**2 - (l2 * c12 + d3 * c123) * w2**2 - d3 * c123 * w3**2
             - (l2 * c12 + d3 * c123) * 2 * w1 * w2 - d3 * c123 * (2 * w1 * w3 + 2 * w2 * w3)),
        14: ((l1 * c1 + l2 * c12 + d3 * c123) * b1 + (l2 * c12 + d3 * c123) * b2 + d3 * c123 * b3
             - (l1 * s1 + l2 * s12 + d3 * s123) * w1**2 - (l2 * s12 + d3 * s123) * w2**2 - d3 * s123 * w3**2
             - (l2 * s12 + d3 * c123) * 2 * w1 * w2 - d3 * s123 * (2 * w1 * w3 + 2 * w2 * w3)),
    }
    eq = {
        27: (m1 * d1**2 + I1 + m2 * (l1**2 + d2**2 + 2 * l1 * d2 * c2) + I2
             + m3 * (l1**2 + l2**2 + d3**2 + 2 * l1 * l2 * c2 + 2 * l1 * d3 * c23 + 2 * l2 * d3 * c3) + I3),
        28: (m2 * (d2**2 + l1 * d2 * c2) + I2
             + m3 * (l2**2 + d3**2 + l1 * l2 * c2 + l1 * d3 * c23 + 2 * l2 * d3 * c3) + I3),
        29: m3 * (d3**2 + l1 * d3 * c23 + l2 * d3 * c3) + I3,
        30: (m2 * (d2**2 + l1 * d2 * c2) + I2
             + m3 * (l2**2 + d3**2 + l1 * l2 * c2 + 2 * l2 * d3 * c3 + l1 * d3 * c23) + I3),
        31: m2 * d2**2 + I2 + m3 * (l2**2 + d3**2 + l2 * d3 * c3) + I3,
        32: m3 * (d3**2 + l2 * d3 * c3) + I3,
        33: m3 * (d3**2 + l1 * d3 * c23 + l2 * d3 * c3) + I3,
        34: m3 * (d3**2 + l2 * d3 * c3) + I3,
        35: m3 * d3**2 + I3,
        36: (-((m2 * l1 * d2 + m3 * l1 * l2) * s2 + m3 * l1 * d3 * s23) * (2 * w1 * w2 + w2**2)
             - (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * (2 * w1 * w3 + 2 * w2 * w3 + w3**2)),
        37: (((m3 * l1 * l2 + m2 * d2 * l1) * s2 + m3 * d3 * l1 * s23) * w1**2
             - m3 * d3 * l2 * s3 * (2 * w1 * w3 + 2 * w2 * w3 + w3**2)),
        38: (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * w1**2 + m3 * l2 * d3 * s3 * (2 * w1 * w2 + w2**2),
        39: m1 * g * d1 * c1 + m2 * g * (l1 * c1 + d2 * c12) + m3 * g * (l1 * c1 + l2 * c12 + d3 * c123),
        40: m2 * g * d2 * c12 + m3 * g * (l2 * c12 + d3 * c123),
        41: m3 * g * d3 * c123,
        42: -FS * l1 * s1 - FS * l2 * s12 - FS * (d3 + dS) * s123,
        43: -FS * l2 * s12 - FS * (d3 + dS) * s123,
        44: -FS * (d3 + dS) * s123,
    }
    return acc, eq


# where each printed equation sits in the derived M, v, G, T_ext
_CESARI_SLOTS = {
    27: ("M", 0, 0), 28: ("M", 0, 1), 29: ("M", 0, 2), 30: ("M", 1, 0), 31: ("M", 1, 1), 32: ("M", 1, 2),
    33: ("M", 2, 0), 34: ("M", 2, 1), 35: ("M", 2, 2),
    36: ("C", 0, 0), 37: ("C", 1, 0), 38: ("C", 2, 0),
    39: ("G", 0, 0), 40: ("G", 1, 0), 41: ("G", 2, 0),
    42: ("E", 0, 0), 43: ("E", 1, 0), 44: ("E", 2, 0),
}
_CESARI_MISPRINTED = {31}


def test_cesari_printed_matrix_terms():
    """Eqs 27-44 against the derivation; eq. 31 is the only misprint among them."""
    s, ref = _three_link()
    _, eq = _cesari_printed(s)
    for k, (key, i, j) in _CESARI_SLOTS.items():
        derived = ref[key][i, j]
        if k in _CESARI_MISPRINTED:
            assert _rel_diff(eq[k], derived) > MISPRINT_MIN, k
        else:
            assert _same(eq[k], derived), k


def test_cesari_misprint_eq31():
    """Eq. 31: M_22 has 'l2 d3 cos a3' where the derivation gives 2 l2 d3 cos a3."""
    s, ref = _three_link()
    _, eq = _cesari_printed(s)
    a3 = s["a"][2]
    assert _same(eq[31] - ref["M"][1, 1], -s["m3"] * s["l2"] * s["d3"] * sp.cos(a3))
    corrected = eq[31] + s["m3"] * s["l2"] * s["d3"] * sp.cos(a3)
    assert _same(corrected, ref["M"][1, 1])


def test_cesari_printed_accelerations():
    """Eqs 4-14; eq. 10 has two wrong signs and eq. 14 a cos for a sin."""
    s, ref = _three_link()
    acc, _ = _cesari_printed(s)
    (a1, a2, a3), (w1, w2, _) = s["a"], s["ad"]
    d2, d3 = s["d2"], s["d3"]
    derived = {4: ref["acc"][0][0], 6: ref["acc"][0][1], 8: ref["acc"][1][0], 10: ref["acc"][1][1],
               12: ref["acc"][2][0], 14: ref["acc"][2][1]}
    for k in (4, 6, 8, 12):
        assert _same(acc[k], derived[k]), k
    # eq. 10: printed '- [l1 sin a1 - d2 sin a12] a1d^2 + d2 sin a12 (2 a1d a2d + a2d^2)'
    # right:        '- [l1 sin a1 + d2 sin a12] a1d^2 - d2 sin a12 (2 a1d a2d + a2d^2)'
    assert _rel_diff(acc[10], derived[10]) > MISPRINT_MIN
    assert _same(acc[10] - derived[10], 2 * d2 * sp.sin(a1 + a2) * (w1 + w2) ** 2)
    # eq. 14: '- [l2 sin a12 + d3 cos a123] 2 a1d a2d' should read d3 sin a123
    assert _rel_diff(acc[14], derived[14]) > MISPRINT_MIN
    a123 = a1 + a2 + a3
    assert _same(acc[14] - derived[14], -2 * d3 * (sp.cos(a123) - sp.sin(a123)) * w1 * w2)


def test_cesari_newton_euler_and_misprint_eq23():
    """Eqs 15-23 solved top-down reproduce the derived T, once eq. 23's F_y1 is F_x1.

    Eq. 23 prints '+ F_y1 d1 sin a1 - F_y1 d1 cos a1'; the reaction at the shoulder
    (F_x1, F_y1) at -d1 (cos a1, sin a1) from the centre of mass has the moment
    d1 (F_x1 sin a1 - F_y1 cos a1).
    """
    s, ref = _three_link()
    (a1, a2, a3), (b1, b2, b3) = s["a"], s["add"]
    l1, l2, d1, d2, d3, dS, m1, m2, m3, I1, I2, I3, g, FS = (s[k] for k in (
        "l1", "l2", "d1", "d2", "d3", "dS", "m1", "m2", "m3", "I1", "I2", "I3", "g", "FS"))
    (x1, y1), (x2, y2), (x3, y3) = ref["acc"]
    s1, c1 = sp.sin(a1), sp.cos(a1)
    s12, c12 = sp.sin(a1 + a2), sp.cos(a1 + a2)
    s123, c123 = sp.sin(a1 + a2 + a3), sp.cos(a1 + a2 + a3)
    # hand, eqs 15-17
    Fx3, Fy3 = m3 * x3 + FS, m3 * y3 + m3 * g
    T3 = I3 * b3 - Fx3 * d3 * s123 + Fy3 * d3 * c123 - FS * dS * s123 + I3 * b1 + I3 * b2
    # forearm, eqs 18-20 (F_r, F_v read as F_x, F_y)
    Fx2, Fy2 = m2 * x2 + Fx3, m2 * y2 + Fy3 + m2 * g
    T2 = (I2 * b2 + T3 - Fx3 * (l2 - d2) * s12 + Fy3 * (l2 - d2) * c12 - Fx2 * d2 * s12 + Fy2 * d2 * c12
          + I2 * b1)
    # upper arm, eqs 21-23
    Fx1, Fy1 = m1 * x1 + Fx2, m1 * y1 + Fy2 + m1 * g

    def T1(first):  # eq. 23 solved for T1, 'first' is the force in '+ F_?1 d1 sin a1'
        return I1 * b1 + T2 - Fx2 * (l1 - d1) * s1 + Fy2 * (l1 - d1) * c1 - first * d1 * s1 + Fy1 * d1 * c1

    qdd = sp.Matrix(s["add"])
    tau = ref["M"] * qdd + ref["C"] + ref["G"] + ref["E"]
    assert _same(T3, tau[2])  # eq. 17 right
    assert _same(T2, tau[1])  # eq. 20 right
    assert _rel_diff(T1(Fy1), tau[0]) > MISPRINT_MIN  # eq. 23 as printed
    assert _same(T1(Fy1) - tau[0], d1 * s1 * (Fx1 - Fy1))
    assert _same(T1(Fx1), tau[0])  # eq. 23 corrected


def _cesari_states(seed):
    rng = np.random.default_rng(seed)
    for _ in range(N_STATES):
        l1, l2 = rng.uniform(0.25, 0.35), rng.uniform(0.22, 0.3)
        p = dict(l1=l1, l2=l2, d1=0.436 * l1 * rng.uniform(0.8, 1.2), d2=0.43 * l2 * rng.uniform(0.8, 1.2),
                 d3=rng.uniform(0.05, 0.09), dS=rng.uniform(0.02, 0.06), m1=rng.uniform(1.5, 2.5),
                 m2=rng.uniform(1.0, 1.8), m3=rng.uniform(0.3, 0.6), I1=rng.uniform(0.01, 0.03),
                 I2=rng.uniform(0.005, 0.015), I3=rng.uniform(5e-4, 2e-3), g=9.81, FS=rng.uniform(-40, 40))
        x = dict(a=rng.uniform(-PI, PI, 3), ad=rng.uniform(-6, 6, 3), add=rng.uniform(-40, 40, 3))
        model = jaxmb.chain([p["l1"], p["l2"], p["d3"] + p["dS"]], [p["d1"], p["d2"], p["d3"]],
                            [p["m1"], p["m2"], p["m3"]], [p["I1"], p["I2"], p["I3"]], gravity=p["g"],
                            coordinates="relative")
        loads = _J["point_load"](model, x["a"], 2, (p["d3"] + p["dS"], 0.0), (-p["FS"], 0.0), frame="segment")
        yield p, x, model, loads


_CES_PARAMS = ("l1", "l2", "d1", "d2", "d3", "dS", "m1", "m2", "m3", "I1", "I2", "I3", "g", "FS")


def test_cesari_jaxmb_matrices():
    s, ref = _three_link()
    _, eq = _cesari_printed(s)
    args = list(s["a"]) + list(s["ad"]) + [s[k] for k in _CES_PARAMS]
    f_ref = {k: _fn(args, ref[k]) for k in ("M", "C", "G", "E")}
    f_eq = {k: _fn(args, v) for k, v in eq.items() if k not in _CESARI_MISPRINTED}
    for p, x, model, loads in _cesari_states(6):
        vals = list(x["a"]) + list(x["ad"]) + [p[k] for k in _CES_PARAMS]
        got = {
            "M": np.asarray(_J["mass_matrix"](model, x["a"])),
            "C": np.asarray(_J["bias_forces"](model, x["a"], x["ad"]))[:, None],
            "G": np.asarray(_J["gravity_forces"](model, x["a"]))[:, None],
            "E": np.asarray(_J["external_forces"](model, x["a"], loads))[:, None],
        }
        for k in got:
            _close(got[k], f_ref[k](*vals))
        for k, f in f_eq.items():  # each correctly printed entry, at its matrix's scale
            key, i, j = _CESARI_SLOTS[k]
            _close(got[key][i, j], f(*vals), scale=np.abs(got[key]).max())


@pytest.mark.parametrize("method", ["recursive", "projection"])
def test_cesari_jaxmb_inverse_and_forward(method):
    s, ref = _three_link()
    qdd = sp.Matrix(s["add"])
    tau = ref["M"] * qdd + ref["C"] + ref["G"] + ref["E"]
    args = list(s["a"]) + list(s["ad"]) + list(s["add"]) + [s[k] for k in _CES_PARAMS]
    f_tau = _fn(args, tau)
    f_acc = _fn(args, sp.Matrix([c for xy in ref["acc"] for c in xy]))
    for p, x, model, loads in _cesari_states(7):
        vals = list(x["a"]) + list(x["ad"]) + list(x["add"]) + [p[k] for k in _CES_PARAMS]
        want = np.ravel(f_tau(*vals))
        got = _J["inverse_dynamics"](model, x["a"], x["ad"], x["add"], loads, method=method)
        _close(got, want)
        _close(_J["forward_dynamics"](model, x["a"], x["ad"], want, loads), x["add"])
        # centre-of-mass accelerations of eqs 4-14 (derived)
        pa = np.asarray(_J["pose_acceleration"](model, x["a"], x["ad"], x["add"]))[:, :2]
        _close(pa.ravel(), np.ravel(f_acc(*vals)))
