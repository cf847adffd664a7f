"""Segment parameters from measured forces (jaxmb.identify).

References nobody here wrote, or that come from another code path:

- the regressor against the engine's projection path (Blajer & Czaplicki's pose-map
  formulas, ``method="projection"``), not the batched kernels it differentiates;
- the ranks against a hand derivation, checked with SymPy (below);
- the sensitivity Jacobian against central finite differences of the public
  functions, with the ground reaction force re-applied by ``point_load``;
- the true parameters of van den Bogert's running simulation.

Ranks of the base parameters, derived by hand. A planar chain of n segments, fixed
base, revolute joints, gravity g in the plane; segment i has barycentric parameters
(m_i, h_i = m_i c_i (two components), J_i about its proximal joint P_i), and the
joint of segment i+1 sits at distance L_i along segment i. The moment about P_i of
everything distal to joint i is the joint moment tau_i. A distal segment k > i acts
on the segments proximal to it only through the force and moment at its joint, and
the mass m_k enters the moments about every P_i (i < k) as a point mass at P_k,
whose acceleration is that of the point at distance L_{k-1} on segment k-1. A point
mass m at distance L on the axis of segment j contributes to the moment about P_j
exactly what the parameter changes (J_j += m L^2, h_j,along += m L) would: so m_k
can be moved into segment k-1's J and h_along without changing any joint moment,
recursively down to segment 1 (the classical grouping rule). And m_1 multiplies the
acceleration of P_1 (zero: fixed base) and gravity at P_1, whose moment about P_1 is
zero: m_1 does not appear at all. Hence with M_i = m_{i+1} + ... + m_n:

    identifiable: J_i + L_i^2 M_i,  h_i,along + L_i M_i,  h_i,across  (i = 1..n) -> 3 n
    unidentifiable: m_1;  m_k - sum_{i<k} (L_i^2 e_{J_i} + L_i e_{h_i,along})  -> n

The remaining 3 n are independent when the movement is general enough: for the root,
h_1 appears only through gravity, (h_1 x g) = g (h_x cos th_1 - h_y sin th_1), two
independent functions, and J_1 through theta_1''; without gravity h_1 vanishes from
the moments and the rank is 3 n - 2. Two links: 6 (4 without gravity); three links:
9 (7). Joint reaction forces are sums of m_k a_k - m_k g over the distal segments:
at the base joint the total mass appears alone (m g), and subtracting the joints in
turn every m_k does, so moments and reactions together identify all 4 n -- with
gravity. Without it m_1 multiplies only the acceleration of the fixed P_1 (zero):
4 n - 1. A floating base (the running leg) shows m_1 through the base's acceleration.

The SymPy test builds the Lagrangian in the barycentric parameters, forms the
generalized forces symbolically, writes each parameter's column as a polynomial in
cos and sin of the angles (reduced modulo s^2 + c^2 = 1, a canonical form), the
velocities and the accelerations, and takes the exact rank of the coefficient
matrix: the rank of the regressor over every possible movement.
"""


import functools
import warnings

import jax
import numpy as np
import pytest

import jaxmb
from jaxmb import identify
from jaxmb.cli.identify_running import perturbed  # demo code of the `jaxmb identify` command
from jaxmb.identify import _data, _fit, _parameters, _result, _solver, _uncertainty

RNG = np.random.default_rng(11)


def _chain(n, *, gravity=9.81, base="fixed", coordinates="relative", off_axis=True, seed=0):
    rng = np.random.default_rng(seed)
    L = rng.uniform(0.25, 0.5, n)
    m = rng.uniform(1.0, 8.0, n)
    com = np.stack([rng.uniform(0.3, 0.6, n) * L, (rng.uniform(-0.03, 0.03, n) if off_axis else np.zeros(n))], 1)
    inertia = m * L**2 * rng.uniform(0.04, 0.09, n)
    return jaxmb.chain(L, com, m, inertia, gravity=gravity, base=base, coordinates=coordinates,
                       names=[f"s{i}" for i in range(n)])  # fmt: skip


def _states(model, batch, seed=0):
    rng = np.random.default_rng(seed)
    shape = batch + (model.dof,)
    q = rng.uniform(-np.pi, np.pi, shape)
    if model.base == "floating":
        q[..., :2] = rng.uniform(-1, 1, batch + (2,))
    return q, 2.0 * rng.standard_normal(shape), 5.0 * rng.standard_normal(shape)


def _random_loads(model, q, seed=1):
    rng = np.random.default_rng(seed)
    lead = q.shape[:-1]
    qf = q.reshape(-1, model.dof)
    pts = rng.uniform(-0.1, 0.1, (qf.shape[0], 2))
    f = rng.normal(0, 50, (qf.shape[0], 2))
    last = model.segments - 1
    ld = jax.vmap(lambda a, p, ff: jaxmb.point_load(model, a, last, p, ff, 3.0, frame="segment"))(qf, pts, f)
    return np.asarray(ld).reshape(lead + (model.segments, 3)), (pts, f)


# --------------------------------------------------------------------- regressor


def _tree():
    """A floating-base tree in absolute angles, centres of mass off the axes, joints not
    at the parents' ends: the general case."""
    return jaxmb.tree([-1, 0, 0, 2], [0.5, 0.4, 0.3, 0.2], np.array([[0.2, 0.02], [0.15, -0.01], [0.1, 0.0],
                      [0.08, 0.01]]), [10.0, 3.0, 2.0, 1.0], [0.2, 0.05, 0.02, 0.01], base="floating",
                      coordinates="absolute", attach=[0.0, 0.3, 0.5, 0.3], names=["a", "b", "c", "d"])  # fmt: skip


def test_regressor_times_pi_reproduces_the_projection_path():
    model = _tree()
    q, qd, qdd = _states(model, (2, 3), seed=3)
    loads, _ = _random_loads(model, q)
    pi = np.asarray(identify.to_parameters(model))
    # the projection references jitted (op by op they dispatch thousands of small ops)
    for quantity, ref in [
        ("inverse_dynamics", jax.jit(lambda *a: jaxmb.inverse_dynamics(model, *a, method="projection"))(q, qd, qdd, loads)),
        ("joint_reactions", jax.jit(lambda *a: jaxmb.joint_reactions(model, *a, method="projection"))(q, qd, qdd, loads)),
        ("joint_moments", jaxmb.joint_moments(model, q, qd, qdd, loads)),
    ]:  # fmt: skip
        Y, y0 = identify.regressor(model, q, qd, qdd, loads, quantity=quantity)
        assert Y.shape == ref.shape + (4 * model.segments,) and y0.shape == ref.shape
        ref = np.asarray(ref)
        # round-off: the two paths differ by a few ulps of the largest term
        np.testing.assert_allclose(np.asarray(Y) @ pi + y0, ref, rtol=0, atol=1e-11 * np.abs(ref).max())
        assert np.abs(ref).max() > 10  # not comparing zeros
    # one sample gives the same rows
    Y1, y01 = identify.regressor(model, q[0, 0], qd[0, 0], qdd[0, 0], loads[0, 0], quantity="joint_moments")
    Yb, y0b = identify.regressor(model, q, qd, qdd, loads, quantity="joint_moments")
    np.testing.assert_allclose(Y1, Yb[0, 0], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y01, y0b[0, 0], rtol=1e-12, atol=1e-12)


def test_regressor_does_not_depend_on_pi_and_load_term_is_physical():
    """Y and y0 are the same for any parameters, when the loads are rebuilt for each model
    (a force at a fixed point does not care where the centre of mass is)."""
    model = _tree()
    other = identify.from_physical(model, np.asarray(identify.to_physical(model)) * [1.3, 0.7, -1.0, 2.0])
    q, qd, qdd = _states(model, (2, 3), seed=4)
    la, (pts, f) = _random_loads(model, q)
    lb = np.asarray(jax.vmap(lambda a, p, ff: jaxmb.point_load(other, a, 3, p, ff, 3.0, frame="segment"))(
        q.reshape(6, -1), pts, f)).reshape(la.shape)  # fmt: skip
    Ya, ya = identify.regressor(model, q, qd, qdd, la, quantity="joint_reactions")
    Yb, yb = identify.regressor(other, q, qd, qdd, lb, quantity="joint_reactions")
    np.testing.assert_allclose(Ya, Yb, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ya, yb, rtol=1e-10, atol=1e-10)
    ref = np.asarray(jaxmb.joint_reactions(other, q, qd, qdd, lb, method="projection"))
    np.testing.assert_allclose(np.asarray(Ya) @ np.asarray(identify.to_parameters(other)) + ya, ref,
                               atol=1e-11 * np.abs(ref).max())  # fmt: skip


def test_parameters_round_trip_and_consistency_report():
    model = _chain(3, seed=5)
    pi = identify.to_parameters(model)
    back = identify.from_parameters(model, pi)
    for f in ("mass", "com", "inertia"):
        np.testing.assert_allclose(getattr(back, f), getattr(model, f), rtol=1e-12)
    bad = np.asarray(pi).copy()
    bad[4 * 1 + 3] = 0.5 * (bad[4 * 1 + 1] ** 2 + bad[4 * 1 + 2] ** 2) / bad[4 * 1]  # J below m |c|^2
    c = identify.consistency(model, bad)
    assert not c.ok and len(c.problems) == 1 and "'s1'" in c.problems[0] and "inertia" in c.problems[0]
    with pytest.raises(ValueError, match=r"segment 1 \('s1'\).*inertia about the centre of mass"):
        identify.from_parameters(model, bad)
    bad2 = np.asarray(pi).copy()
    bad2[8] = -1.0
    with pytest.raises(ValueError, match=r"segment 2 \('s2'\): mass -1 kg"):
        identify.from_parameters(model, bad2)
    with pytest.raises(ValueError, match=r"pi must have shape \(12,\)"):
        identify.from_parameters(model, np.ones(5))


# ------------------------------------------------------------- identifiability


def _sympy_rank(n, gravity, with_null=None):
    """Exact rank of the symbolic regressor of an n-link fixed-base chain (absolute
    angles; the same rank as relative ones, an invertible change of coordinates).

    Lagrangian in the barycentric parameters, with P_i the proximal joint, e_k the
    axis of segment k, R_i the rotation of segment i and h_i = (hx_i, hy_i) local:
      T_i = m_i |v_P|^2 / 2 + v_P . (w_i z x R_i h_i) + J_i w_i^2 / 2,
      V_i = g (m_i y_P + (R_i h_i)_y),  v_P = sum_{k<i} L_k thd_k e_k^perp,
    written with e_k . e_l = cos(th_k - th_l) and e_k^perp . R_i (-hy, hx) =
    hx cos(th_i - th_k) - hy sin(th_i - th_k), so that after expand_trig no sin^2
    appears and the monomials in (sin, cos, thd, thdd) are a canonical basis.
    """
    import sympy as sp

    L = [sp.Rational(3, 10) + sp.Rational(k, 10) for k in range(n)]  # 0.3, 0.4, 0.5 m
    g = sp.Rational(981, 100) if gravity else 0
    th = sp.symbols(f"th0:{n}")
    thd = sp.symbols(f"thd0:{n}")
    thdd = sp.symbols(f"thdd0:{n}")
    m = sp.symbols(f"m0:{n}")
    hx = sp.symbols(f"hx0:{n}")
    hy = sp.symbols(f"hy0:{n}")
    J = sp.symbols(f"J0:{n}")
    params = [x for i in range(n) for x in (m[i], hx[i], hy[i], J[i])]
    Lag = 0
    for i in range(n):
        vv = sum(L[k] * L[l] * thd[k] * thd[l] * sp.cos(th[k] - th[l]) for k in range(i) for l in range(i))
        cross = sum(L[k] * thd[k] * thd[i] * (hx[i] * sp.cos(th[i] - th[k]) - hy[i] * sp.sin(th[i] - th[k]))
                    for k in range(i))  # fmt: skip
        T = m[i] * vv / 2 + cross + J[i] * thd[i] ** 2 / 2
        V = g * (m[i] * sum(L[k] * sp.sin(th[k]) for k in range(i)) + hx[i] * sp.sin(th[i]) + hy[i] * sp.cos(th[i]))
        Lag += T - V
    c = sp.symbols(f"c0:{n}")
    s = sp.symbols(f"s0:{n}")
    sub = {sp.cos(th[i]): c[i] for i in range(n)} | {sp.sin(th[i]): s[i] for i in range(n)}
    gens = list(s) + list(c) + list(thd) + list(thdd)
    rows = {}
    for j in range(n):
        dLdqd = sp.diff(Lag, thd[j])
        ddt = sum(sp.diff(dLdqd, th[k]) * thd[k] + sp.diff(dLdqd, thd[k]) * thdd[k] for k in range(n))
        tau = sp.expand(sp.expand_trig(ddt - sp.diff(Lag, th[j])).subs(sub))
        for k, p in enumerate(params):
            col = sp.diff(tau, p)
            if col == 0:
                continue
            poly = sp.Poly(col, *gens)
            assert all(e <= 1 for mon, _ in poly.terms() for e in mon[:n])  # canonical: no sin^2
            for mon, coef in poly.terms():
                rows.setdefault((j, mon), [0] * len(params))[k] = coef
    A = sp.Matrix(list(rows.values()))
    out = [A.rank()]
    if with_null is not None:
        out.append(A * sp.Matrix(with_null(L)))
    return out


def _hand_null(n):
    """The unidentifiable directions derived by hand (module docstring), as columns."""

    def make(L):
        cols = []
        for k in range(n):
            v = [0] * (4 * n)
            v[4 * k] = 1
            for i in range(k):
                v[4 * i + 3] = -L[i] ** 2
                v[4 * i + 1] = -L[i]
            cols.append(v)
        return list(map(list, zip(*cols)))

    return make


@pytest.mark.parametrize("n, gravity, rank", [(2, True, 6), (3, True, 9), (2, False, 4), (3, False, 7)])
def test_base_parameter_rank_matches_hand_derivation_and_sympy(n, gravity, rank):
    sym_rank, AN = _sympy_rank(n, gravity, _hand_null(n))
    assert sym_rank == rank  # the exact rank over every movement: 3 n with gravity, 3 n - 2 without
    assert all(x == 0 for x in AN)  # the hand-derived null directions are exact
    # numerical rank of the stacked regressor of a random movement, same lengths
    L = [0.3 + 0.1 * k for k in range(n)]
    model = jaxmb.chain(L, np.array(L) * 0.45, np.linspace(3, 1, n), np.linspace(0.1, 0.02, n),
                        gravity=9.81 if gravity else 0.0, names=[f"s{i}" for i in range(n)])  # fmt: skip
    q, qd, qdd = _states(model, (60,), seed=n)
    bp = identify.identifiability(model, q, qd, qdd)
    assert bp.rank == rank
    # the numerical null space spans the hand-derived directions (those of m_1 ... m_n,
    # minus the two h_1 components without gravity)
    N = np.asarray(_hand_null(n)(L), dtype=float)
    Y = np.asarray(identify.regressor(model, q, qd, qdd, quantity="joint_moments")[0]).reshape(-1, 4 * n)
    assert np.abs(Y @ N).max() < 1e-10 * np.abs(Y).max()
    assert np.abs(Y @ bp.null_space).max() < 1e-10 * np.abs(Y).max()
    assert np.abs(bp.K @ N).max() < 1e-9  # K annihilates them: they are outside what the data see
    if gravity:
        # the combinations, in words (the grouping rule; "m2 d2 + m3 L2" of the issue)
        assert "J[s0] + L[s0]^2*m[s1]" in bp.combinations[[i for i, c in enumerate(bp.combinations)
                                                            if c.startswith("J[s0]")][0]]  # fmt: skip
        assert bp.unidentifiable[0] == "m[s0] (absent from the data)"
        if n == 3:
            assert "mx[s1] + L[s1]*m[s2]" in bp.combinations
    # with the joint reactions every mass is identifiable (4 n), except the root's in a
    # horizontal plane: with a fixed base it is seen only through gravity (4 n - 1)
    full = identify.identifiability(model, q, qd, qdd, data=("joint_moments", "joint_reactions"))
    assert full.rank == (4 * n if gravity else 4 * n - 1)
    assert full.unidentifiable == (() if gravity else ("m[s0] (absent from the data)",))


def test_floating_leg_moments_alone_and_with_forces():
    """The running leg (floating base at the hip): moments see 9 combinations, with the
    same grouping as a fixed base (the hip's acceleration multiplies the same
    combinations as gravity); force magnitudes make all 12 identifiable."""
    trial = _running()
    k = slice(3000, 3600, 6)
    bp = identify.identifiability(trial["model"], trial["q"][k], trial["qd"][k], trial["qdd"][k])
    assert bp.rank == 9
    assert bp.unidentifiable[0] == "m[thigh] (absent from the data)"
    assert "J[shank] + L[shank]^2*m[foot]" in bp.combinations


def test_equal_distances_are_written_with_the_right_segment():
    """Two joint distances of the same value: each coefficient is the distance of the
    joint on the grouped parameter's segment toward the mass (it matched the first
    symbol of that value: ``mx[s1] + L[s0]*m[s2]``, the length of the wrong segment)."""
    chain = jaxmb.chain([0.4, 0.4, 0.2], [0.2, 0.2, 0.1], [7.0, 3.0, 1.0], [0.1, 0.04, 0.01],
                        names=["s0", "s1", "s2"])  # fmt: skip
    q, qd, qdd = _states(chain, (60,), seed=3)
    bp = identify.identifiability(chain, q, qd, qdd)
    assert "mx[s1] + L[s1]*m[s2]" in bp.combinations and "J[s1] + L[s1]^2*m[s2]" in bp.combinations
    assert "J[s0] + L[s0]^2*m[s1] + L[s0]^2*m[s2]" in bp.combinations
    assert ("m[s2] - L[s0]*mx[s0] - L[s0]^2*J[s0] - L[s1]*mx[s1] - L[s1]^2*J[s1]") in bp.unidentifiable
    # two children at the same point of their parent (the seven-segment human's head
    # and upper arm on the trunk): a[child] of the joint that leads to each mass
    tree = jaxmb.tree([-1, 0, 0, 2], [0.5, 0.2, 0.3, 0.25], [0.25, 0.1, 0.15, 0.1], [30.0, 4.0, 2.0, 1.5],
                      [1.0, 0.02, 0.02, 0.01], attach=[0.0, 0.45, 0.45, 0.3], names=["t", "h", "u", "f"])  # fmt: skip
    q, qd, qdd = _states(tree, (60,), seed=4)
    bp = identify.identifiability(tree, q, qd, qdd)
    assert "J[t] + a[h]^2*m[h] + a[u]^2*m[u] + a[u]^2*m[f]" in bp.combinations, bp.report()
    assert "m[f] - a[u]*mx[t] - a[u]^2*J[t] - a[f]*mx[u] - a[f]^2*J[u]" in bp.unidentifiable, bp.report()


# -------------------------------------------------------------------- recovery


def test_noiseless_synthetic_data_recover_the_true_parameters():
    true = _chain(3, seed=7)
    q, qd, qdd = _states(true, (60,), seed=7)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd))
    start = perturbed(true, 0.3, seed=1)
    # moments only: the base parameters, from the linear step, to 1e-8 relative
    res = identify.fit(start, q, qd, qdd, moments=mom, free="inertia")
    bp = res.base.parameters
    assert bp.rank == 9
    want = bp.values(np.asarray(identify.to_parameters(true)))
    np.testing.assert_allclose(res.base.values, want, rtol=1e-8)
    # moments and reaction vectors: the consistent fit recovers every parameter from a
    # start 30 % off
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=rea)
    assert res.converged, res.status
    np.testing.assert_allclose(res.parameters, identify.to_parameters(true), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.base.values, res.base.parameters.values(res.parameters), rtol=1e-8)
    assert res.rms["moments"] < 1e-8 and res.rms["reactions"] < 1e-8
    # force magnitudes instead of vectors (nonlinear data) work as well
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=np.linalg.norm(rea, axis=-1))
    assert res.converged
    np.testing.assert_allclose(res.parameters, identify.to_parameters(true), rtol=1e-7, atol=1e-9)


def test_linear_fit_weighs_each_data_kind_by_its_own_noise():
    """Moments (N m) and reaction vectors (N) with sigma not given: the linear step
    estimates each kind's noise from its own residuals, so its standard errors are
    those that the true noise, given as sigma, gives (within the scatter of a variance
    estimated from 180 and 360 values). Before, one residual variance pooled over both
    kinds, after scaling each by the RMS of its data, stated one error 34x
    too large here."""
    true = _chain(3, seed=7)
    q, qd, qdd = _states(true, (60,), seed=7)
    rng = np.random.default_rng(11)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd)) + rng.normal(0, 0.1, (60, 3))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd)) + rng.normal(0, 10.0, (60, 3, 2))
    known = identify.fit(true, q, qd, qdd, moments=mom, reactions=rea, sigma={"moments": 0.1, "reactions": 10.0})
    guessed = identify.fit(true, q, qd, qdd, moments=mom, reactions=rea)
    np.testing.assert_allclose(guessed.base.stderr / known.base.stderr, 1.0, atol=0.2)
    assert (np.abs(guessed.base.values - known.base.values) <= 0.5 * known.base.stderr).all()


def test_consistent_fit_never_returns_negative_mass_or_inertia():
    """Noisy data that make the unconstrained least squares physically impossible:
    the consistent fit stays physical (positive masses and inertias about the centre
    of mass) and converges."""
    true = jaxmb.chain([0.4, 0.3], [0.18, 0.02], [3.0, 0.05], [0.04, 1e-5], names=["s0", "s1"])
    q, qd, qdd = _states(true, (60,), seed=8)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd))
    Ym, _ = identify.regressor(true, q, qd, qdd, quantity="joint_moments")
    Yr, _ = identify.regressor(true, q, qd, qdd, quantity="joint_reactions")
    A = np.concatenate([np.asarray(Ym).reshape(-1, 8), np.asarray(Yr).reshape(-1, 8)])
    inconsistent = bound = 0
    for seed in range(4):
        rng = np.random.default_rng(seed)
        mn = mom + rng.normal(0, 1.5, mom.shape)
        rn = rea + rng.normal(0, 4.0, rea.shape)
        ols = np.linalg.lstsq(A, np.concatenate([mn.reshape(-1), rn.reshape(-1)]), rcond=None)[0]
        inconsistent += not identify.consistency(true, ols).ok
        res = identify.fit(true, q, qd, qdd, moments=mn, reactions=rn, loss="huber" if seed % 2 else "l2")
        assert np.isfinite(res.physical).all() and isinstance(res.converged, bool)
        assert (res.physical[:, 0] > 0).all() and (res.physical[:, 3] > 0).all()
        assert identify.consistency(res.model).ok
        assert res.converged, res.status
        bound += "at the bound" in res.status
    assert inconsistent >= 2  # the data do push the unconstrained answer outside physics
    assert bound >= 1  # and the fit says where it stopped at the boundary


def test_prior_makes_moments_only_fit_possible_and_is_reported():
    trial = _running()
    k = slice(3000, 5200, 10)
    true = trial["model"]
    start = perturbed(true, 0.3, seed=2)
    loads = trial["ground"].select(k)  # the force at its point: wrenches for the model fitted
    args = (start, trial["q"][k], trial["qd"][k], trial["qdd"][k])
    # no movement shows the thigh's mass in the moments: the message says so (and that
    # reaction forces would), rather than asking for more varied movement
    with pytest.raises(ValueError, match=r"not identifiable.*mass\[thigh\].*do not depend on the movement.*"
                                         r"add reaction forces"):  # fmt: skip
        identify.fit(*args, moments=trial["moments"][k], loads=loads)
    prior = identify.table_prior(true, body_mass=68.5)
    res = identify.fit(*args, moments=trial["moments"][k], loads=loads, prior=prior)
    assert res.converged
    # the moments do not see the thigh's mass: its uncertainty is the prior's own order
    # (with com and inertia free, their priors share the undetermined directions)
    assert res.stderr_physical[0, 0] > 0.3 * prior.sd[0, 0]
    assert np.isfinite(res.stderr).all()
    # the identifiable combinations still match the truth closely (data noise only)
    bp = res.base.parameters
    np.testing.assert_allclose(bp.values(res.parameters), bp.values(np.asarray(identify.to_parameters(true))),
                               rtol=2e-3, atol=2e-3)  # fmt: skip
    assert "fit" in res.report(true) and "+-" in res.report()


# ------------------------------------------------------------------------ priors


def test_table_prior_table_names_are_checked_and_one_name_is_one_table():
    leg = jaxmb.three_segment_leg(1.75, 70.0)
    # a misspelt table: the library's own message, not "segment 0 is not a row"
    with pytest.raises(ValueError, match=r"unknown anthropometric table 'dempstr'; the tables are \['dempster'"):
        identify.table_prior(leg, 70.0, tables=("dempstr",))
    # one name is one table (it iterated the characters)
    one = identify.table_prior(leg, 70.0, tables="dempster")
    np.testing.assert_array_equal(one.mean, identify.table_prior(leg, 70.0, tables=("dempster",)).mean)
    np.testing.assert_allclose(one.mean, identify.to_physical(leg), rtol=1e-12)
    for floor in [(0.05, 0.02, 0.0, 0.1), (0.05, 0.02, np.nan, 0.1), (0.05, 0.02)]:
        with pytest.raises(ValueError, match="floor must be 4 finite numbers > 0"):
            identify.table_prior(leg, 70.0, floor=floor)


def test_table_prior_mean_and_spread_of_three_published_tables():
    # The thigh of a 1.75 m, 70 kg leg from the three tables' fractions, typed in from
    # the papers: mass 0.100 / 0.1416 / 0.1478 of the body, CM 0.433 / 0.4095 / 0.3612
    # of the length from the hip, radius of gyration 0.323 / 0.329 / 0.364 of the
    # length (Dempster via Winter, Table 4.1; de Leva 1996, Table 4, males / females,
    # about the transverse axis). The prior's mean is their mean, its sd their sample
    # standard deviation (ddof 1), the com across the axis 0 +- 0.02 L (the floor).
    # Only one table, which has no spread, was compared before.
    leg = jaxmb.three_segment_leg(1.75, 70.0)
    L, M = float(leg.length[0]), 70.0
    f_m, f_c, f_k = np.array([0.100, 0.1416, 0.1478]), np.array([0.433, 0.4095, 0.3612]), np.array([0.323, 0.329, 0.364])
    mass, com, inertia = f_m * M, f_c * L, f_m * M * (f_k * L) ** 2
    prior = identify.table_prior(leg, M)
    want_mean = [mass.mean(), com.mean(), 0.0, inertia.mean()]
    want_sd = [mass.std(ddof=1), com.std(ddof=1), 0.02 * L, inertia.std(ddof=1)]
    np.testing.assert_allclose(prior.mean[0], want_mean, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(prior.sd[0], want_sd, rtol=1e-12)
    # around a given model: its values are the mean, the tables give the coefficient of
    # variation (mass, inertia; never below the floors 0.05 and 0.10) and the com's sd
    around = identify.table_prior(leg, center=leg)
    np.testing.assert_allclose(around.mean, identify.to_physical(leg), rtol=1e-12)
    cv_m, cv_i = mass.std(ddof=1) / mass.mean(), inertia.std(ddof=1) / inertia.mean()
    assert cv_m > 0.05 and cv_i > 0.10  # the tables' spread, not the floors
    thigh = identify.to_physical(leg)[0]
    np.testing.assert_allclose(around.sd[0], [cv_m * thigh[0], com.std(ddof=1), 0.02 * L, cv_i * thigh[3]], rtol=1e-12)


def test_table_prior_of_the_seven_segment_human_counts_both_sides():
    """The seven-segment human lumps both legs and both arms, and its trunk and head are
    composites (Dempster gives no radius of gyration for the trunk; de Leva measures
    head and trunk from the cranial end). Before: 'head is not a row of table
    dempster' with the defaults, a NaN trunk inertia with rows={'head': 'head_neck'},
    and one side's masses for the limbs."""
    human = jaxmb.seven_segment_human(1.75, 70.0)
    prior = identify.table_prior(human, 70.0)
    assert np.isfinite(prior.mean).all() and (prior.sd > 0).all()
    np.testing.assert_allclose(prior.mean[:, 0].sum(), 70.0, rtol=0.05)  # the whole body, both sides
    for t in ("dempster", "deleva_male", "deleva_female"):
        model = jaxmb.seven_segment_human(1.75, 70.0, table=t)
        np.testing.assert_allclose(identify.table_prior(model, 70.0, tables=t).mean, identify.to_physical(model),
                                   rtol=1e-12, atol=1e-15)  # fmt: skip
    # count= and per-table rows= override; a row with no value is refused by name
    one_side = identify.table_prior(human, 70.0, tables="dempster", count={"thigh": 1})
    np.testing.assert_allclose(one_side.mean[1, 0], 0.1 * 70.0, rtol=1e-12)
    demp = identify.table_prior(human, 70.0, tables=("dempster",), rows={"head": "head_neck"})  # the review's case
    np.testing.assert_allclose(demp.mean, identify.to_physical(human), rtol=1e-12, atol=1e-15)
    rows = {"head": {"dempster": "head_neck", "deleva_male": "head_2", "deleva_female": "head_2"}}
    assert np.isfinite(identify.table_prior(human, 70.0, rows=rows).mean).all()
    with pytest.raises(ValueError, match=r"segment 0 \('trunk'\): table 'dempster' \(row 'Trunk'\) gives no radius "
                                         r"of gyration \(it is nan\)"):  # fmt: skip
        identify.table_prior(human, 70.0, rows={"trunk": {"dempster": "trunk"}})
    with pytest.raises(ValueError, match=r"rows names 'hed', which is not a segment"):
        identify.table_prior(human, 70.0, rows={"hed": "head_neck"})


# ----------------------------------------------------------- standard errors


def test_fit_with_sigma_reaches_the_minimum_when_an_inertia_goes_to_its_floor():
    """The README's arm, moments and reaction vectors with noise (2 N m, 10 N) given
    as sigma=: the hand's inertia goes to its floor. Before, the trust region scaled
    the whole step by that inertia's log-step, every other parameter's step shrank,
    and the fit stopped "converged" at a cost of 1620.9 against the minimum's 1368.06
    (masses 20 % off with standard errors of 3 %). Now: the bound-constrained
    minimum, below the cost of any other consistent model (the fit without sigma=,
    and SciPy's L-BFGS-B on the physical parameters with the inertias >= 0)."""
    from scipy.optimize import minimize

    arm = jaxmb.chain(length=[0.30, 0.27, 0.19], com=[0.13, 0.12, 0.07], mass=[2.0, 1.2, 0.4],
                      inertia=[0.016, 0.008, 0.001], names=["upper_arm", "forearm", "hand"])  # fmt: skip
    rng = np.random.default_rng(0)
    t = np.linspace(0, 3, 300)[:, None]
    f, ph, A = rng.uniform(0.5, 2, (1, 3)), rng.uniform(0, 6, (1, 3)), rng.uniform(0.5, 1.2, (1, 3))
    w = 2 * np.pi * f
    q, qd, qdd = A * np.sin(w * t + ph), A * w * np.cos(w * t + ph), -A * w**2 * np.sin(w * t + ph)
    noise = np.random.default_rng(106)
    tau = np.asarray(jaxmb.joint_moments(arm, q, qd, qdd)) + 2.0 * noise.standard_normal((300, 3))
    lam = np.asarray(jaxmb.joint_reactions(arm, q, qd, qdd)) + 10.0 * noise.standard_normal((300, 3, 2))
    start = arm.replace(mass=jax.numpy.array([2.6, 0.9, 0.55]), inertia=jax.numpy.array([0.02, 0.005, 0.0016]),
                        com=jax.numpy.array([[0.16, 0.02], [0.09, -0.01], [0.09, 0.0]]))  # fmt: skip
    res = identify.fit(start, q, qd, qdd, moments=tau, reactions=lam, sigma={"moments": 2.0, "reactions": 10.0})
    Ym = np.asarray(identify.regressor(arm, q, qd, qdd, quantity="joint_moments")[0]).reshape(-1, 12)
    Yr = np.asarray(identify.regressor(arm, q, qd, qdd, quantity="joint_reactions")[0]).reshape(-1, 12)
    Y, b = np.concatenate([Ym / 2.0, Yr / 10.0]), np.concatenate([tau.reshape(-1) / 2.0, lam.reshape(-1) / 10.0])

    def cost(pi):
        return 0.5 * np.sum((Y @ pi - b) ** 2)

    assert res.converged and "inertia[hand]" in res.status
    assert cost(res.parameters) == pytest.approx(res.cost, rel=1e-9)
    other = identify.fit(start, q, qd, qdd, moments=tau, reactions=lam)
    ref = minimize(lambda p: cost(np.asarray(_parameters._pi_from_physical(p.reshape(3, 4)))),
                   np.asarray(other.physical).reshape(-1), method="L-BFGS-B",
                   bounds=[(1e-6, None), (None, None), (None, None), (0.0, None)] * 3,
                   options=dict(ftol=1e-15, gtol=1e-10, maxiter=10_000))  # fmt: skip
    assert res.cost <= min(cost(other.parameters), ref.fun) + 1e-6 * ref.fun, (res.cost, ref.fun)
    # the noise levels the standard errors assume: the sigma given, or estimated from
    # the residuals (the data's 2 N m and 10 N, from 900 moments and 1800 forces)
    assert res.noise == {"moments": 2.0, "reactions": 10.0}
    np.testing.assert_allclose([other.noise["moments"], other.noise["reactions"]], [2.0, 10.0], rtol=0.06)


def test_standard_errors_stay_finite_where_determined_and_are_never_nan():
    """Masses 30 % off and fixed, noisy moments: the data push inertias to their floor,
    where the log coordinate no longer changes the data (undetermined). Before: the
    physical stderr of such an inertia was 0 * inf = NaN, and that one undetermined
    coordinate made every barycentric stderr inf."""
    true = _chain(3, seed=7)
    q, qd, qdd = _states(true, (60,), seed=7)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd)) + np.random.default_rng(0).normal(0, 1.0, (60, 3))
    start = perturbed(true, 0.3, seed=2)
    res = identify.fit(start, q, qd, qdd, moments=mom, free=["com", "inertia"])
    floor = _parameters._floor(start)[:, 3]
    # within 1e-3 of the floor (at it exactly, d phys / d z = 0 met an infinite
    # variance: 0 * inf; the projected step now stops there before exp(z) underflows)
    at_floor = res.physical[:, 3] - floor < 1e-3 * floor
    assert at_floor[:2].all()
    assert not np.isnan(res.stderr_physical).any() and not np.isnan(res.stderr).any()
    assert np.isinf(res.stderr_physical[at_floor, 3]).all()
    # the centres of mass are determined (finite, > 0), and so are m c (mass fixed);
    # J = I + m |c|^2 depends on the undetermined inertia
    assert np.isfinite(res.stderr_physical[:, 1:3]).all() and (res.stderr_physical[:, 1:3] > 0).all()
    st = res.stderr.reshape(3, 4)
    assert (st[:, 0] == 0).all() and np.isfinite(st[:, 1:3]).all() and (st[:, 1:3] > 0).all()
    assert np.isinf(st[at_floor, 3]).all()
    assert np.isinf(res.covariance[4 * np.flatnonzero(at_floor) + 3]).all()
    assert np.isfinite(res.covariance[np.ix_([1, 2, 5, 6, 9, 10], [1, 2, 5, 6, 9, 10])]).all()


def test_covariance_of_one_undetermined_coordinate_and_of_a_prior_under_exact_data():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(50, 4))
    # one coordinate the data do not see: only its row and column are inf
    Jw = A.copy()
    Jw[:, 3] = 0.0
    cov, und = _uncertainty._covariance_z(Jw, np.zeros((0, 4)))
    assert und.tolist() == [False, False, False, True]
    np.testing.assert_allclose(cov[:3, :3], np.linalg.inv(Jw[:, :3].T @ Jw[:, :3]), rtol=1e-12)
    assert np.isinf(cov[3]).all() and np.isinf(cov[:, 3]).all()
    # data 1e16 times more precise than a prior along two directions, blind along two:
    # the limit is the prior's covariance restricted to the blind directions N,
    # N (N^T P N)^-1 N^T (a relative eigenvalue cut on the summed Hessian lost them)
    B = np.linalg.qr(rng.normal(size=(4, 4)))[0]
    Jw = 1e16 * rng.normal(size=(50, 2)) @ B[:, :2].T
    Jp = np.diag([2.0, 1.0, 0.5, 3.0])
    N = B[:, 2:]
    want = N @ np.linalg.inv(N.T @ Jp.T @ Jp @ N) @ N.T
    cov, und = _uncertainty._covariance_z(Jw, Jp)
    assert not und.any()
    np.testing.assert_allclose(cov, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())


def test_prior_determines_what_near_exact_data_cannot_see():
    """Exact moments (the residual variance is rounding) and a prior: along the
    directions the moments cannot see (the masses) the errors are of the size of the
    prior's sd; the combinations the data see have the data's (tiny) errors. Before:
    every standard error was inf (the data's Hessian, 1e20 times the prior's, hid it)."""
    true = _chain(3, seed=7)
    q, qd, qdd = _states(true, (60,), seed=7)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    start = perturbed(true, 0.3, seed=1)
    tp, L = np.asarray(identify.to_physical(true)), np.asarray(true.length)
    prior = identify.Prior(tp, np.stack([0.1 * tp[:, 0], 0.05 * L, 0.05 * L, 0.2 * tp[:, 3]], 1))
    res = identify.fit(start, q, qd, qdd, moments=mom, prior=prior)
    assert res.converged, res.status
    assert np.isfinite(res.stderr).all() and np.isfinite(res.stderr_physical).all()
    ratio = res.stderr_physical[:, 0] / prior.sd[:, 0]
    assert (ratio > 0.1).all() and (ratio <= 1 + 1e-9).all()  # the posterior of a mass: prior-sized
    bp = res.base.parameters
    var = np.diag(bp.K @ res.covariance @ bp.K.T)  # rounding may leave -1e-20
    assert (np.sqrt(np.maximum(var, 0)) <= 1e-8 * np.abs(bp.values(res.parameters))).all()
    # such a covariance (variances 1e16 apart) still gives parameter draws
    bands = identify.monte_carlo(true, q, qd, qdd, spread=res, draws=50)
    assert np.isfinite(bands.sd).all() and (bands.parameters[..., [0, 3]] > 0).all()
    assert bands.parameters[:, 0, 0].std() > 0.05 * prior.sd[0, 0]  # the masses do spread
    # noisy moments, same prior: the seen combinations have the errors of the data
    # alone (the linear fit's), the masses still the prior's size
    noisy = identify.fit(start, q, qd, qdd, moments=mom + np.random.default_rng(3).normal(0, 0.05, mom.shape),
                         prior=prior)  # fmt: skip
    sd = np.sqrt(np.diag(bp.K @ noisy.covariance @ bp.K.T))
    np.testing.assert_allclose(sd / noisy.base.stderr, 1.0, atol=0.05)
    ratio = noisy.stderr_physical[:, 0] / prior.sd[:, 0]
    assert (ratio > 0.1).all() and (ratio <= 1 + 1e-9).all()


# ---------------------------------------------------------------- sensitivity


def test_sensitivity_matches_finite_differences_with_point_loads():
    trial = _running()
    k = slice(3300, 3340, 4)
    model = trial["model"]
    q, qd, qdd = trial["q"][k], trial["qd"][k], trial["qdd"][k]
    d = trial["data"]
    cop = np.stack([d.cop[k], np.zeros_like(d.cop[k])], 1)
    force = d.force[k]

    @functools.partial(jax.jit, static_argnums=1)
    def engine(m, quantity):  # one compiled program per quantity for the 48 evaluations
        loads = jax.vmap(lambda a, p, f: jaxmb.point_load(m, a, "foot", p, f))(q, cop, force)
        f = jaxmb.joint_moments if quantity == "joint_moments" else jaxmb.joint_reactions
        return f(m, q, qd, qdd, loads)

    def moments(phys, quantity):
        return np.asarray(engine(identify.from_physical(model, phys), quantity))

    phys0 = np.asarray(identify.to_physical(model))
    for quantity in ("joint_moments", "joint_reactions"):
        S = np.asarray(identify.sensitivity(model, q, qd, qdd, quantity=quantity))
        fd = np.zeros_like(S)
        for i in range(3):
            for j in range(4):
                h = 1e-6 * (1.0 if j in (1, 2) else phys0[i, j])
                up, dn = phys0.copy(), phys0.copy()
                up[i, j] += h
                dn[i, j] -= h
                fd[..., i, j] = (moments(up, quantity) - moments(dn, quantity)) / (2 * h)
        # central differences: truncation O(h^2) is zero (linear in m, I; quadratic in c
        # only through m c), round-off ~ eps * |y| / h
        np.testing.assert_allclose(S, fd, rtol=1e-6, atol=1e-6 * np.abs(fd).max())
        assert np.abs(fd).max() > 1.0


# ---------------------------------------------------------------- Monte Carlo


def test_monte_carlo_draws_from_a_prior_have_its_mean_and_spread():
    # A Prior's draws: mass and inertia log-normal, the centre of mass normal, each with
    # the prior's mean and sd (their sample moments within 5 standard errors of the
    # estimate at 40,000 draws), every mass and inertia positive. Only the draws'
    # propagation through the engine was checked before: a log-normal without the
    # -s^2/2 shift (mean off by exp(s^2/2)) or with s^2 for s passed.
    leg = jaxmb.three_segment_leg(1.75, 70.0)
    prior = identify.table_prior(leg, 70.0)
    q = np.zeros((2, leg.dof))
    D = 40_000
    b = identify.monte_carlo(leg, q, q, q, spread=prior, draws=D, seed=11)
    p = b.parameters
    assert p.shape == (D, 3, 4) and (p[..., 0] > 0).all() and (p[..., 3] > 0).all()
    cv = prior.sd[:, [0, 3]] / prior.mean[:, [0, 3]]  # mass and inertia
    assert (cv > 0.05).all()  # spreads wide enough to tell the forms apart
    se_mean = prior.sd / np.sqrt(D)
    np.testing.assert_array_less(np.abs(p.mean(0) - prior.mean), 5 * se_mean)
    # the sd's standard error, for a log-normal: sd * sqrt((kurtosis - 1) / (4 D)),
    # kurtosis exp(4 s2) + 2 exp(3 s2) + 3 exp(2 s2) - 3 with s2 = log(1 + cv^2)
    s2 = np.log1p(cv**2)
    kurt = np.full(prior.sd.shape, 3.0)  # normal: the centre of mass
    kurt[:, [0, 3]] = np.exp(4 * s2) + 2 * np.exp(3 * s2) + 3 * np.exp(2 * s2) - 3
    se_sd = prior.sd * np.sqrt((kurt - 1) / (4 * D))
    np.testing.assert_array_less(np.abs(p.std(0, ddof=1) - prior.sd), 5 * se_sd)


def test_monte_carlo_matches_the_engine_draw_by_draw():
    trial = _running()
    k = slice(3000, 3400, 20)
    model = trial["model"]
    q, qd, qdd, loads = trial["q"][k], trial["qd"][k], trial["qdd"][k], trial["loads"][k]
    spread = identify.table_prior(model, center=model)
    b = identify.monte_carlo(model, q, qd, qdd, loads, spread=spread, draws=50, seed=3, samples=True)
    assert b.samples.shape == (50, q.shape[0], 3) and b.quantiles.shape == (3, q.shape[0], 3)
    assert (b.parameters[..., 0] > 0).all() and (b.parameters[..., 3] > 0).all()
    # the quantity of a few draws, from the public engine with the loads rebuilt for each
    d = trial["data"]
    cop = np.stack([d.cop[k], np.zeros(q.shape[0])], 1)
    for i in (0, 17, 49):
        m = identify.from_physical(model, b.parameters[i])
        ld = jax.vmap(lambda a, p, f: jaxmb.point_load(m, a, "foot", p, f))(q, cop, d.force[k])
        ref = np.asarray(jaxmb.joint_moments(m, q, qd, qdd, ld))
        np.testing.assert_allclose(b.samples[i], ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
    np.testing.assert_allclose(b.nominal, jaxmb.joint_moments(model, q, qd, qdd, loads), atol=1e-9)
    assert (b.quantiles[0] <= b.quantiles[1] + 1e-12).all() and (b.quantiles[1] <= b.quantiles[2] + 1e-12).all()
    assert (b.quantiles[2] - b.quantiles[0]).max() > 1.0  # the spread does reach the moments
    again = identify.monte_carlo(model, q, qd, qdd, loads, spread=spread, draws=50, seed=3)
    np.testing.assert_array_equal(again.quantiles, b.quantiles)


def test_monte_carlo_from_a_fit_stays_physical():
    true = _chain(2, seed=9)
    q, qd, qdd = _states(true, (60,), seed=9)
    rng = np.random.default_rng(0)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd)) + rng.normal(0, 0.5, (60, 2))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd)) + rng.normal(0, 2.0, (60, 2, 2))
    res = identify.fit(true, q, qd, qdd, moments=mom, reactions=rea)
    assert np.isfinite(res.stderr).all() and (res.stderr > 0).all()
    b = identify.monte_carlo(true, q, qd, qdd, spread=res, draws=400, seed=1)
    assert (b.parameters[..., 0] > 0).all() and (b.parameters[..., 3] > 0).all()
    # the draws' spread of the moments matches the fit's covariance propagated linearly
    Y = np.asarray(identify.regressor(true, q, qd, qdd, quantity="joint_moments")[0])
    lin_sd = np.sqrt(np.einsum("tjp,pq,tjq->tj", Y, res.covariance, Y))
    # 400 draws: the sd of a sample sd is ~4 %; the log transforms add a little curvature
    ratio = b.sd / lin_sd
    assert abs(np.median(ratio) - 1) < 0.1 and np.all(np.abs(ratio - 1) < 0.4)
    # the model must be the fit's, up to the parameters drawn (before: another length
    # was accepted and gave other moments; another number of segments a broadcast error)
    with pytest.raises(ValueError, match=r"the model's length \[0.5, 0.5\] is not the fit's"):
        identify.monte_carlo(true.replace(length=[0.5, 0.5]), q, qd, qdd, spread=res, draws=10)
    with pytest.raises(ValueError, match="the model has 3 segments, the fit's 2"):
        identify.monte_carlo(_chain(3, seed=9), np.zeros((5, 3)), np.zeros((5, 3)), np.zeros((5, 3)), spread=res)
    # the report's error column stays apart from the true value whatever its size
    assert [len(_result._percent(v)) for v in (0.01, -99.99, 86711.65, 133018.14, -2e7)] == [9] * 5
    assert _result._percent(133018.14) == " 1.33e+05"


def _arm_and_movement(T, seed):
    """A 3-link arm with a light hand (inertia 1e-3 kg m^2) and a random movement."""
    m = jaxmb.chain(length=[0.3, 0.27, 0.19], com=[0.13, 0.12, 0.07], mass=[2.0, 1.2, 0.4],
                    inertia=[0.016, 0.008, 0.001])  # fmt: skip
    rng = np.random.default_rng(seed)
    q = rng.uniform(-3, 3, (T, 3))
    return m, rng, (q, 2 * rng.normal(size=q.shape), 5 * rng.normal(size=q.shape))


def test_monte_carlo_of_a_poorly_determined_parameter_matches_the_delta_method():
    # a fit in which the hand's inertia has a standard error 14x its value (log sd 14):
    # draws normal in log(inertia) with that sd reached 1e19 kg m^2 and bands of 3.6e9
    # N m. Drawn with the fit's estimate as mean and its standard error as sd
    # (log-normal), the bands agree with the delta method (Y cov Y^T; the moments are
    # linear in the barycentric parameters)
    m, rng, (q, qd, qdd) = _arm_and_movement(300, 1)
    tau = np.asarray(jaxmb.joint_moments(m, q, qd, qdd)) + 0.5 * rng.normal(size=(300, 3))
    lam = np.asarray(jaxmb.joint_reactions(m, q, qd, qdd)) + 3 * rng.normal(size=(300, 3, 2))
    res = identify.fit(perturbed(m, 0.3, 2), q, qd, qdd, moments=tau, reactions=lam)
    assert res.converged and res.stderr_physical[1, 3] > 5 * res.physical[1, 3]  # measured 14x
    b = identify.monte_carlo(m, q, qd, qdd, spread=res, draws=2000)
    Y = np.asarray(identify.regressor(m, q, qd, qdd, quantity="joint_moments")[0])
    width = np.median(b.quantiles[-1] - b.quantiles[0], axis=0)
    delta = np.median(3.92 * np.sqrt(np.einsum("tjp,pq,tjq->tj", Y, res.covariance, Y)), axis=0)
    np.testing.assert_allclose(width, delta, rtol=0.15)  # measured within 8 %
    assert b.parameters[..., 3].max() < 1.0 and np.abs(b.mean).max() < 100  # kg m^2, N m
    # the draws' mean is the estimate (log-normal: exp(mu + s^2 / 2)); 2000 draws
    np.testing.assert_allclose(b.parameters[:, 0, 0].mean(), res.physical[0, 0], rtol=0.01)


def _central_jacobian(fn, p):
    """(outputs, len(p)) central differences of fn (a flat array of a flat p), steps
    1e-6 of each value (of 1e-2 at least)."""
    cols = []
    for k in range(len(p)):
        e = np.zeros(len(p))
        e[k] = 1e-6 * max(abs(p[k]), 1e-2)
        cols.append((fn(p + e) - fn(p - e)) / (2 * e[k]))
    return np.array(cols).T


def test_standard_errors_when_one_data_kind_is_far_more_precise():
    # reactions to 1e-4 N against moments to 0.05 N m: every inertia, which only the
    # moments see, had an infinite standard error (a relative rank cut of 1e-6 on
    # singular values 1e6 apart in size, not in information). Against the covariance
    # from central differences of the public functions, (J^T W J)^-1
    m, rng, (q, qd, qdd) = _arm_and_movement(100, 0)
    sm, sr = 0.05, 1e-4
    tau = np.asarray(jaxmb.joint_moments(m, q, qd, qdd)) + sm * rng.normal(size=(100, 3))
    lam = np.asarray(jaxmb.joint_reactions(m, q, qd, qdd)) + sr * rng.normal(size=(100, 3, 2))
    res = identify.fit(perturbed(m), q, qd, qdd, moments=tau, reactions=lam,
                       sigma={"moments": sm, "reactions": sr})  # fmt: skip
    assert res.converged
    p = res.physical.reshape(-1)

    def data(pv):
        pv = pv.reshape(3, 4)
        mm = m.replace(mass=pv[:, 0], com=pv[:, 1:3], inertia=pv[:, 3])
        return np.concatenate([np.asarray(jaxmb.joint_moments(mm, q, qd, qdd)).reshape(-1) / sm,
                               np.asarray(jaxmb.joint_reactions(mm, q, qd, qdd)).reshape(-1) / sr])  # fmt: skip

    J = _central_jacobian(data, p)
    se = np.sqrt(np.diag(np.linalg.inv(J.T @ J)))
    np.testing.assert_allclose(res.stderr_physical.reshape(-1), se, rtol=1e-3)


def test_standard_errors_of_a_short_record_use_n_minus_p():
    # sigma not given: the noise variance is the residual sum of squares over N - p
    # (N values, p free parameters), the textbook estimate, and the covariance
    # s^2 (J^T J)^-1 with J from central differences of the public joint_moments at
    # the fit. With 4 frames (N = 12) and p = 6 the correction is sqrt(12 / 6) = 1.41,
    # which the longer records of the other tests (N from 180, bias under 4 %) do not
    # resolve: dividing by N instead of N - p passed them all
    m, rng, (q, qd, qdd) = _arm_and_movement(4, 5)
    tau = np.asarray(jaxmb.joint_moments(m, q, qd, qdd)) + 0.005 * rng.normal(size=(4, 3))
    # the centres of mass stay the start model's: m's, with the masses and inertias
    # started 20 % off
    start = m.replace(mass=1.2 * m.mass, inertia=0.8 * m.inertia)
    res = identify.fit(start, q, qd, qdd, moments=tau, free=["mass", "inertia"])
    assert res.converged and np.isfinite(res.stderr_physical).all()
    fitted = res.physical  # (3, 4): mass, com along, com across, inertia

    def moments(pv):
        mm = m.replace(mass=pv[:3], inertia=pv[3:])
        return np.asarray(jaxmb.joint_moments(mm, q, qd, qdd)).reshape(-1)

    p = np.concatenate([fitted[:, 0], fitted[:, 3]])
    r = moments(p) - tau.reshape(-1)
    N, k = r.size, p.size
    J = _central_jacobian(moments, p)
    assert np.abs(J.T @ r).max() < 1e-8 * np.abs(J).max() * np.abs(r).max() * N  # at the minimum
    se = np.sqrt(np.diag(r @ r / (N - k) * np.linalg.inv(J.T @ J)))
    np.testing.assert_allclose(np.concatenate([res.stderr_physical[:, 0], res.stderr_physical[:, 3]]), se, rtol=1e-3)


def test_huber_weighs_each_kind_by_its_robust_spread():
    # 5 % of the moments off by 40 N m (noise 0.5 N m; reactions 3 N): the Huber stage
    # scaled the moments by the least-squares stage's RMS residual (1.9 N m, inflated
    # by the outliers), so it weighed them 14x too little against the reactions and its
    # errors were 3x those of Huber at the true scale. Now each kind is scaled by its
    # robust spread (1.4826 MAD) and the fit equals scipy's Huber at the true noise
    # (a different program: least_squares on the linear model in the barycentric
    # parameters), to a small part of the standard error
    import scipy.optimize as so

    m, rng, (q, qd, qdd) = _arm_and_movement(300, 2)
    tau = np.asarray(jaxmb.joint_moments(m, q, qd, qdd)) + 0.5 * rng.normal(size=(300, 3))
    lam = np.asarray(jaxmb.joint_reactions(m, q, qd, qdd)) + 3 * rng.normal(size=(300, 3, 2))
    tau[rng.choice(300, 15, replace=False)] += 40.0
    res = identify.fit(perturbed(m, 0.3, 2), q, qd, qdd, moments=tau, reactions=lam, loss="huber")
    assert res.converged and "at the bound" not in res.status
    # the noise the standard errors assume: Huber's sum psi^2 / (N - p) / mean(psi')^2
    assert 0.5 < res.noise["moments"] < 0.65 and 2.8 < res.noise["reactions"] < 3.3, res.noise  # 0.57, 3.10
    Ym = np.asarray(identify.regressor(m, q, qd, qdd, quantity="joint_moments")[0]).reshape(-1, 12)
    Yr = np.asarray(identify.regressor(m, q, qd, qdd, quantity="joint_reactions")[0]).reshape(-1, 12)
    A = np.concatenate([Ym / 0.5, Yr / 3.0])
    y = np.concatenate([tau.reshape(-1) / 0.5, lam.reshape(-1) / 3.0])
    ref = so.least_squares(lambda p: A @ p - y, identify.to_parameters(m), loss="huber", f_scale=1.345)
    diff = np.abs(res.physical - _parameters._physical_from_pi(ref.x)) / res.stderr_physical
    assert diff.max() < 0.2, diff  # measured 0.065 (1.5 before)


# ------------------------------------------------------------------- bad data


def test_bad_data_get_clear_errors():
    model = _chain(2, seed=10)
    q, qd, qdd = _states(model, (60,), seed=10)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd))
    fit = identify.fit
    with pytest.raises(ValueError, match="needs measured data"):
        fit(model, q, qd, qdd)
    with pytest.raises(ValueError, match=r"moments must have shape \(60, 2\)"):
        fit(model, q, qd, qdd, moments=mom[:, :1])
    with pytest.raises(ValueError, match=r"reactions must have shape \(60, 2, 2\).*or \(60, 2\)"):
        fit(model, q, qd, qdd, reactions=rea[..., :1])
    with pytest.raises(ValueError, match=r"qd must have shape \(\.\.\., 2\)"):
        fit(model, q, qd[:, :1], qdd, moments=mom)
    bad = mom.copy()
    bad[7, 1] = np.nan
    with pytest.raises(ValueError, match=r"moments is not finite at index \(7, 1\)"):
        fit(model, q, qd, qdd, moments=bad)
    badq = q.copy()
    badq[3, 0] = np.inf
    with pytest.raises(ValueError, match=r"q is not finite at index \(3, 0\)"):
        fit(model, badq, qd, qdd, moments=mom)
    with pytest.raises(ValueError, match=r"too few samples: 2 measured values.*8 free parameters"):
        fit(model, q[:1], qd[:1], qdd[:1], moments=mom[:1], free=None, reactions=None)
    with pytest.raises(ValueError, match=r"not identifiable.*mass\[s0\].*add reaction forces"):
        fit(model, q, qd, qdd, moments=mom)
    # a static pose excites no inertia: asked for, it is refused by name (a deficit of
    # this movement, not of every movement)
    still = np.zeros_like(qd)
    with pytest.raises(ValueError, match=r"too little excitation.*inertia\[s.*more varied movement"):
        fit(model, q, still, still, moments=np.asarray(jaxmb.joint_moments(model, q, still, still)), free="inertia")
    with pytest.raises(ValueError, match="unknown parameter 'masses'"):
        fit(model, q, qd, qdd, moments=mom, free="masses")
    with pytest.raises(ValueError, match="unknown segment name 'thigh'"):
        fit(model, q, qd, qdd, moments=mom, free="thigh.mass")
    with pytest.raises(ValueError, match=r"prior mean must have shape \(2, 4\)"):
        fit(model, q, qd, qdd, moments=mom, prior=identify.Prior(np.ones((3, 4)), np.ones((3, 4))))
    with pytest.raises(ValueError, match="loss must be"):
        fit(model, q, qd, qdd, moments=mom, loss="cauchy")
    with pytest.raises(ValueError, match="moment_weights has shape"):
        fit(model, q, qd, qdd, moments=mom, moment_weights=np.ones(7))
    # before: NumPy's "Mean of empty slice" warning, then a message about the moments
    lam = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd))
    with pytest.raises(ValueError, match="moment_weights are 0 everywhere: no moment would be fitted"):
        fit(model, q, qd, qdd, moments=mom, reactions=lam, moment_weights=np.zeros(q.shape[0]))
    with pytest.raises(ValueError, match="reaction_weights are 0 everywhere"):
        fit(model, q, qd, qdd, moments=mom, reactions=lam, reaction_weights=0.0)
    with pytest.raises(ValueError, match="quantity must be one of"):
        identify.regressor(model, q, qd, qdd, quantity="moments")
    with pytest.raises(ValueError, match="spread|prior"):
        identify.monte_carlo(model, q, qd, qdd, spread=(np.ones((2, 4)), -np.ones((2, 4))))
    with pytest.raises(ValueError, match=r"segment 0 \('s0'\) is not a row of table"):
        identify.table_prior(model, body_mass=70)


def test_rtol_joints_fraction_and_complex_data_are_checked():
    # before: rtol=-1 reported rank 11 and rtol=2 rank 0 (3-link moments: 9), rtol="a"
    # a NumPy UFuncTypeError; joints= with joint moments was ignored; perturbed(m, 2)
    # failed on "mass of segment 1 must be > 0"; complex moments lost their imaginary
    # part with a ComplexWarning only
    model = _chain(3, seed=13)
    q, qd, qdd = _states(model, (30,), seed=13)
    for bad in (-1.0, 2.0, 0.0, "a", True):
        with pytest.raises(ValueError, match=r"rtol must be a number in \(0, 1\)"):
            identify.identifiability(model, q, qd, qdd, rtol=bad)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    with pytest.raises(ValueError, match=r"rtol must be a number in \(0, 1\)"):
        identify.fit(model, q, qd, qdd, moments=mom, solver=identify.Solver(rtol="a"))
    with pytest.raises(ValueError, match="joints= selects joints of quantity='joint_reactions'"):
        identify.regressor(model, q, qd, qdd, quantity="joint_moments", joints=[1])
    with pytest.raises(ValueError, match="joints= selects joints"):
        identify.sensitivity(model, q, qd, qdd, joints=[1])
    with pytest.raises(ValueError, match=r"fraction must be a number in \[0, 1\)"):
        perturbed(model, 2.0)
    with pytest.raises(ValueError, match="moments must be real numbers, got complex"):
        identify.fit(model, q, qd, qdd, moments=mom + 1j)


def test_a_structural_deficit_is_not_blamed_on_the_movement():
    """Fixed base, no gravity, moments and reactions: the root's mass is seen by no
    movement (it multiplies the acceleration of a fixed point). The message said 'add
    more varied movement'; a random second movement shows the deficit too."""
    model = _chain(2, seed=10, gravity=0.0)
    q, qd, qdd = _states(model, (60,), seed=10)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd))
    want = r"not identifiable.*mass\[s0\].*do not depend on the movement.*no movement identifies them.*give a prior"
    with pytest.raises(ValueError, match=want) as e:
        identify.fit(model, q, qd, qdd, moments=mom, reactions=rea)
    assert "more varied movement" not in str(e.value) and "add reaction forces" not in str(e.value)


def test_too_little_excitation_names_reaction_forces_only_where_they_help():
    # static poses (no velocity or acceleration): the inertias are absent from the
    # moments, and from reaction forces too; the message suggested reaction forces
    # anyway. One pose held, masses and centres of mass free: the reactions' weight
    # terms would determine the masses, and the message says so
    model = _chain(3, seed=12)
    q, _, _ = _states(model, (40,), seed=12)
    zero = np.zeros_like(q)
    mom = np.asarray(jaxmb.joint_moments(model, q, zero, zero))
    with pytest.raises(ValueError, match="too little excitation.*inertia") as e:
        identify.fit(model, q, zero, zero, moments=mom, free="inertia")
    assert "reaction forces" not in str(e.value) and "more varied movement" in str(e.value)
    one = np.broadcast_to(q[:1], q.shape)
    mom1 = np.asarray(jaxmb.joint_moments(model, one, zero, zero))
    with pytest.raises(ValueError, match="too little excitation.*more varied movement or reaction forces"):
        identify.fit(model, one, zero, zero, moments=mom1, free=["mass", "com"])
    with pytest.raises(ValueError, match="too little excitation") as e:
        identify.fit(model, one, zero, zero, moments=mom1, free="com")  # the reactions of a pose hold no com
    assert "reaction forces" not in str(e.value)
    # exact data of one pose determine the masses: the standard errors' whitened rows
    # (1e150 and more) are normed without overflow
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = identify.fit(model, one, zero, zero, moments=mom1, free="mass")
    assert res.converged and np.all(res.stderr_physical[:, 0] < 1e-10)


def test_weights_multiply_residuals_in_the_fit_and_in_rms():
    true = _chain(2, seed=9)
    q, qd, qdd = _states(true, (60,), seed=9)
    rng = np.random.default_rng(0)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd)) + rng.normal(0, 0.5, (60, 2))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd)) + rng.normal(0, 2.0, (60, 2, 2))
    w = np.where(np.arange(60) < 20, 3.0, 1.0)
    res = identify.fit(true, q, qd, qdd, moments=mom, reactions=rea, moment_weights=w)
    r = res.residuals["moments"]
    w2 = np.broadcast_to(w[:, None] ** 2, r.shape)
    assert res.rms["moments"] == pytest.approx(np.sqrt(np.sum(w2 * r * r) / np.sum(w2)), rel=1e-12)
    # (it weighed w, not w^2: with 0/1 weights the two agree, the plain RMS of the values used)
    assert res.rms["moments"] != pytest.approx(np.sqrt(np.sum(np.sqrt(w2) * r * r) / np.sum(np.sqrt(w2))), rel=1e-6)


def test_per_trial_weights_are_not_read_as_per_joint():
    # samples (2 trials, 30) of a 2-segment chain: weights (2,) meant one per trial
    # and NumPy read them as one per joint, silently; refused, naming both spellings.
    # With 3 trials, (3,) broadcasts nowhere: the message names the per-trial spelling
    true = _chain(2, seed=9)
    q, qd, qdd = _states(true, (3, 30), seed=9)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    with pytest.raises(ValueError, match=r"moment_weights of shape \(2,\) is ambiguous.*give shape \(2, 1, 1\), "
                                         r"or \(1, 1, 2\) for the last axes"):
        identify.fit(true, q[:2], qd[:2], qdd[:2], moments=mom[:2], moment_weights=np.array([1.0, 3.0]))
    with pytest.raises(ValueError, match=r"moment_weights has shape \(3,\), which broadcasts neither.*give shape "
                                         r"\(3, 1, 1\)"):
        identify.fit(true, q, qd, qdd, moments=mom, moment_weights=np.array([1.0, 3.0, 2.0]))
    w = _data._weights(np.array([1.0, 3.0]).reshape(2, 1, 1), (2, 30), (2,), "moment_weights")
    np.testing.assert_array_equal(w[:, 0, :], [[1.0, 1.0], [3.0, 3.0]])
    np.testing.assert_array_equal(_data._weights(np.array([1.0, 3.0]), (30,), (2,), "w")[0], [1.0, 3.0])
    # (trials, 1) broadcasts to the samples (trials, T): one weight per trial (before:
    # "broadcasts neither to the samples (3, 30) nor to the data"), as (trials, 1, 1)
    w31 = np.array([1.0, 0.0, 2.0])[:, None]
    np.testing.assert_array_equal(_data._weights(w31, (3, 30), (2,), "w"),
                                  _data._weights(w31[..., None], (3, 30), (2,), "w"))  # fmt: skip
    a = identify.fit(true, q, qd, qdd, moments=mom, moment_weights=w31, free="inertia")
    b = identify.fit(true, q, qd, qdd, moments=mom, moment_weights=w31[..., None], free="inertia")
    np.testing.assert_array_equal(a.physical, b.physical)
    # where it also reads as the data's last axes (samples (2, 2), 2 joints): refused
    with pytest.raises(ValueError, match=r"w of shape \(2, 1\) is ambiguous: one weight per sample"):
        _data._weights(np.ones((2, 1)), (2, 2), (2,), "w")


def test_sigma_free_and_mask_arguments_are_checked():
    model = _chain(2, seed=10)
    q, qd, qdd = _states(model, (60,), seed=10)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    with pytest.raises(ValueError, match=r"sigma\['reactions'\] is given but no reactions are"):
        identify.fit(model, q, qd, qdd, moments=mom, sigma={"reactions": 5.0})
    with pytest.raises(ValueError, match=r"sigma\['moments'\] must be a positive number"):
        identify.fit(model, q, qd, qdd, moments=mom, sigma={"moments": "1"})
    # an integer 0/1 mask is a mask (it was refused as 'names'): here it selects 8
    # parameters, which 2 values cannot fit
    with pytest.raises(ValueError, match=r"too few samples: 2 measured values.*8 free parameters"):
        identify.fit(model, q[:1], qd[:1], qdd[:1], moments=mom[:1], free=np.ones((2, 4), dtype=int))
    with pytest.raises(ValueError, match=r"too few samples: 2 measured values.*3 free parameters"):
        identify.fit(model, q[:1], qd[:1], qdd[:1], moments=mom[:1], free=np.array([1, 0, 0, 1, 0, 0, 0, 1]))
    with pytest.raises(ValueError, match=r"free as a mask must be bool \(or integer 0/1\).*got dtype float64"):
        identify.fit(model, q, qd, qdd, moments=mom, free=np.ones((2, 4)))
    with pytest.raises(ValueError, match=r"got dtype int64 with values other than 0 and 1"):
        identify.fit(model, q, qd, qdd, moments=mom, free=np.full((2, 4), 2))


def test_not_converged_is_reported_not_nan():
    model = _chain(2, seed=12)
    q, qd, qdd = _states(model, (60,), seed=12)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd))
    start = perturbed(model, 0.5, seed=3)
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=rea, solver=identify.Solver(max_iter=1))
    assert res.converged is False and res.status == "maximum number of iterations"
    assert np.isfinite(res.physical).all() and np.isfinite(res.cost)
    assert "NOT converged" in res.report()


# The review's case: a three-link chain, sinusoidal movement, moments and reaction
# magnitudes, default (estimated) noise levels. Unbounded, the first Levenberg-Marquardt
# step threw log(inertia[0]) from -4.5 to -464, where its gradient underflows: a wrong
# inertia reported as converged.
_ARM3 = jaxmb.chain([0.30, 0.27, 0.19], [0.13, 0.12, 0.07], [2.0, 1.2, 0.4], [0.016, 0.008, 0.001])


def _sines(frames=400):
    t = np.linspace(0, 4, frames)[:, None]
    w, ph, a = np.array([1.3, 2.1, 2.9]), np.array([0.2, 1.0, -0.5]), np.array([1.0, 1.2, 0.8])
    q = np.sin(t * w + ph) * a
    qd, qdd = np.cos(t * w + ph) * a * w, -q * w**2
    mom = np.asarray(jaxmb.joint_moments(_ARM3, q, qd, qdd))
    mag = np.linalg.norm(np.asarray(jaxmb.joint_reactions(_ARM3, q, qd, qdd)), axis=-1)
    return q, qd, qdd, mom, mag


@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow)])
def test_reaction_magnitudes_recover_a_chain_from_30_percent_off(seed):  # other starts with --slow
    q, qd, qdd, mom, mag = _sines()
    res = identify.fit(perturbed(_ARM3, 0.3, seed), q, qd, qdd, moments=mom, reactions=mag)
    assert res.converged, res.status
    true = np.asarray(identify.to_physical(_ARM3))
    # noise-free data: to round-off (1e-13 measured), mass and inertia relative, com in m
    np.testing.assert_allclose(res.physical[:, [0, 3]], true[:, [0, 3]], rtol=1e-10)
    np.testing.assert_allclose(res.physical[:, 1:3], true[:, 1:3], atol=1e-10)


def test_lm_steps_are_bounded_in_the_log_coordinates():
    # one iteration from 30 % off moves no log(mass) or log(inertia) by more than 1
    q, qd, qdd, mom, mag = _sines()
    start = perturbed(_ARM3, 0.3, 0)
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=mag, solver=identify.Solver(max_iter=1))
    step = np.log(res.physical[:, [0, 3]]) - np.log(np.asarray(identify.to_physical(start))[:, [0, 3]])
    assert np.abs(step).max() <= _solver._MAX_LOG_STEP * (1 + 1e-12)


def test_a_parameter_stuck_at_its_floor_restarts_or_is_not_converged(monkeypatch):
    """Where d cost / d z = d cost / d p exp(z) has underflowed, the iterations stop for
    numerical reasons: simulate the old unbounded step (log(inertia[0]) thrown to -460)
    on the first solve only (the fit restarts that parameter and recovers), then on
    every solve (the fit must not say converged)."""
    q, qd, qdd, mom, mag = _sines(200)
    start = perturbed(_ARM3, 0.3, 0)
    lm, calls = _fit._lm_jit, []

    def thrown(every):
        def f(z, data, cfg, *a):
            out = lm(z, data, cfg, *a)
            calls.append(1)
            return (out[0].at[3].set(-460.0), *out[1:]) if every or len(calls) == 1 else out
        return f

    monkeypatch.setattr(_fit, "_lm_jit", thrown(every=False))
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=mag)
    assert res.converged, res.status
    np.testing.assert_allclose(res.physical[0, 3], 0.016, rtol=1e-10)
    monkeypatch.setattr(_fit, "_lm_jit", thrown(every=True))
    res = identify.fit(start, q, qd, qdd, moments=mom, reactions=mag)
    assert not res.converged
    assert "stuck at the floor" in res.status and "inertia[segment0]" in res.status
    assert "NOT converged" in res.report()


def test_float32_rank_decisions_use_float32_tolerances():
    # without x64 (the README's identify example as run by default) the regressor is
    # float32: its rounding (1e-7 of the largest column) is not information. Before:
    # identifiability() gave rank 10 and fit()'s base step 12 of 12, with m[thigh] =
    # 5411 kg, because the weights (float64) promoted the regressor to float64's tolerance.
    t = _running()
    k = slice(0, None, 10)
    with jax.enable_x64(False):
        model = t["model"].astype(np.float32)  # (built with x64 on: float64 leaves)
        start = perturbed(model, 0.3).astype(np.float32)
        bp = identify.identifiability(model, t["q"][k], t["qd"][k], t["qdd"][k])
        assert bp.rank == 9, bp.report()
        res = identify.fit(start, t["q"][k], t["qd"][k], t["qdd"][k], moments=t["moments"][k],
                           moment_weights=t["moment_weights"][k], reactions=t["force_magnitudes"][k],
                           loads=t["ground"].select(k))  # fmt: skip
    base = res.base.parameters
    assert base.rank == 9 and base.combinations == bp.combinations, base.report()
    # the same combinations, values and rank as in float64
    ref = identify.identifiability(t["model"], t["q"][k], t["qd"][k], t["qdd"][k])
    assert ref.rank == 9 and ref.combinations == bp.combinations
    want = ref.values(np.asarray(identify.to_parameters(t["model"])))
    np.testing.assert_allclose(res.base.values, want, rtol=2e-2, atol=2e-3)


def test_float32_noiseless_fits_run_to_rounding():
    """float32 (JAX's default), exact moments and reaction vectors from a start 30 %
    off: every parameter to 2e-5 of its size, with a converged status for the robust
    loss too. Before: the step test (3.5 % of |z|, which holds log-inertias of -7)
    stopped after 4 iterations at 2e-4 errors here ("converged"); a tighter one left
    the Huber stage, refitting residuals of rounding size, at "damping overflow"."""
    true = _chain(3, seed=7)
    q, qd, qdd = _states(true, (60,), seed=7)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd))
    tp = np.asarray(identify.to_physical(true))
    size = np.where(np.isin(np.arange(4), [1, 2]), np.asarray(true.length)[:, None], tp)
    with jax.enable_x64(False):
        start = perturbed(true, 0.3, seed=1).astype(np.float32)
        for loss in ("l2", "huber"):
            res = identify.fit(start, q, qd, qdd, moments=mom, reactions=rea, loss=loss)
            assert res.converged, (loss, res.status)
            assert np.abs((res.physical - tp) / size).max() < 2e-5, (loss, res.status, res.iterations)


def test_trials_fitted_jointly_equal_the_flattened_fit():
    true = _chain(2, seed=13)
    q, qd, qdd = _states(true, (3, 20), seed=13)
    rng = np.random.default_rng(1)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd)) + rng.normal(0, 0.2, (3, 20, 2))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd)) + rng.normal(0, 1.0, (3, 20, 2, 2))
    a = identify.fit(true, q, qd, qdd, moments=mom, reactions=rea)
    b = identify.fit(true, q.reshape(60, 2), qd.reshape(60, 2), qdd.reshape(60, 2), moments=mom.reshape(60, 2),
                     reactions=rea.reshape(60, 2, 2))  # fmt: skip
    np.testing.assert_allclose(a.parameters, b.parameters, rtol=1e-9)
    assert a.residuals["moments"].shape == (3, 20, 2)


# ------------------------------------------------------------------- command line


def test_running_data_recovered_by_the_command_line(tmp_path, capsys):
    """Real data with known answers: all 12 parameters of the simulation from the true
    moments and force magnitudes, starting 10-30 % off (every 10th frame, to keep the
    test short), through ``jaxmb identify``'s own code."""
    import argparse
    import csv

    from jaxmb.cli import identify as _cmd_identify

    parser = argparse.ArgumentParser(prog="jaxmb")
    _cmd_identify.add_command(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["identify", "--out", str(tmp_path), "--stride", "10", "--draws", "50"])
    rc = args.func(args)
    out = capsys.readouterr().out
    assert rc == 0 and "consistent fit: converged" in out and "9 of 12" in out and "12 of 12" in out
    rows = list(csv.DictReader((tmp_path / "identify_running.csv").open()))
    assert len(rows) == 12
    for r in rows:
        # measured: <= 0.05 % of the value (centre of mass: of the length)
        assert abs(float(r["relative_error"])) < 2e-3, r
        scale = abs(float(r["error"]) / float(r["relative_error"])) if float(r["relative_error"]) else None
        if scale:
            assert abs(float(r["start"]) - float(r["true"])) / scale >= 0.09  # the start was off
        assert r["identifiable_from_moments"] == "False"  # no physical parameter alone
    # the true column is van den Bogert's simulation (the ISB data's segment table, typed
    # in: masses, inertias about the CM, CM fractions of the marker-to-marker length),
    # and the fitted and stderr columns are the fit's: fitted - true is the error
    from jaxmb import gait

    d = gait.running_data()
    pts = [d.hip, d.knee, d.ankle, d.toe]
    L = [float(np.mean(np.linalg.norm(b - a, axis=1))) for a, b in zip(pts, pts[1:])]
    true = {f"{p}[{s}]": v for k, s in enumerate(("thigh", "shank", "foot")) for p, v in (
        ("mass", [6.85, 2.86, 1.00][k]), ("inertia", [0.145361267, 0.042996389, 0.0200][k]),
        ("com_along", [0.4323725, 0.4334975, 0.0][k] * L[k]), ("com_across", 0.0))}  # fmt: skip
    assert sorted(true) == sorted(r["parameter"] for r in rows)
    for r in rows:
        assert float(r["true"]) == pytest.approx(true[r["parameter"]], rel=1e-8, abs=1e-12), r
        # (the columns are written to 10 significant digits)
        assert float(r["fitted"]) - float(r["true"]) == pytest.approx(float(r["error"]), abs=1e-9 * abs(float(r["true"])) + 1e-12), r
        assert np.isfinite(float(r["stderr"])) and float(r["stderr"]) > 0, r
    ident = {r["barycentric"]: r["barycentric_identifiable_from_moments"] == "True" for r in rows}
    assert sorted(k for k, v in ident.items() if v) == ["J[foot]", "mx[foot]", "my[foot]", "my[shank]", "my[thigh]"]
    assert (tmp_path / "identify_bands.png").stat().st_size > 1000
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")]
    # a rerun without bands removes the earlier run's bands figure, and says so
    args = parser.parse_args(["identify", "--out", str(tmp_path), "--stride", "10", "--draws", "0"])
    assert args.func(args) == 0
    assert "removed" in capsys.readouterr().out and not (tmp_path / "identify_bands.png").exists()
    args = parser.parse_args(["identify", "--perturb", "1.5", "--out", ""])
    assert args.func(args) == 2
    assert "jaxmb identify: error: --perturb must be in [0, 1)" in capsys.readouterr().err
    # a stride that leaves too few frames: the command's own message, not the fit's free=...
    args = parser.parse_args(["identify", "--stride", "7000", "--out", ""])
    assert args.func(args) == 2
    assert "--stride 7000 leaves 1 of the 6001 frames: at most 666 (10 frames)" in capsys.readouterr().err
    # before: NumPy's "expected non-negative integer", after the fit had started
    args = parser.parse_args(["identify", "--seed", "-1", "--out", ""])
    assert args.func(args) == 2
    assert "jaxmb identify: error: --seed must be >= 0, got -1" in capsys.readouterr().err


def test_old_solver_keywords_and_moved_demo_names_still_work_with_a_warning():
    # fit's max_iter=, ftol=, xtol=, gtol=, rtol= became solver=Solver(...), and the demo
    # code moved to the command's module: both work for one release, with a
    # DeprecationWarning naming the new spelling
    model = _chain(2, seed=12)
    q, qd, qdd = _states(model, (60,), seed=12)
    mom = np.asarray(jaxmb.joint_moments(model, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(model, q, qd, qdd))
    start = perturbed(model, 0.5, seed=3)
    with pytest.warns(DeprecationWarning, match=r"solver=jaxmb.identify.Solver\(max_iter=...\)"):
        old = identify.fit(start, q, qd, qdd, moments=mom, reactions=rea, max_iter=1)
    new = identify.fit(start, q, qd, qdd, moments=mom, reactions=rea, solver=identify.Solver(max_iter=1))
    np.testing.assert_array_equal(old.physical, new.physical)
    with pytest.raises(TypeError, match="unexpected keyword argument 'max_iters'"):
        identify.fit(start, q, qd, qdd, moments=mom, max_iters=1)
    with pytest.raises(ValueError, match="max_iter must be an int >= 1"):
        identify.fit(start, q, qd, qdd, moments=mom, solver=identify.Solver(max_iter=0))
    for name in ("perturbed", "recover_running", "recovery_figure", "bands_figure"):
        with pytest.warns(DeprecationWarning, match=f"jaxmb.cli.identify_running.{name}"):
            assert callable(getattr(identify, name))
        assert name not in identify.__all__
    with pytest.raises(AttributeError):
        identify.no_such_name


# ---------------------------------------------------------------------- fixtures

_TRIAL = {}


def _running():
    if not _TRIAL:
        _TRIAL.update(identify.running_trial())
    return _TRIAL
