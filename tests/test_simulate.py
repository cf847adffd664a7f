"""Forward simulation (issue 3): conservation laws, order of accuracy, input kinds.

The integrators are checked against physics that holds whatever the implementation:
energy conservation without torques, the work-energy theorem with torques and with
a spring load, the free fall of the whole-body centre of mass of a floating body,
and the 4th-order convergence of RK4 against a fine-step reference.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb

G = 9.81


def double_pendulum(coordinates="absolute"):
    """Two uniform rods of 1 m and 1 kg hanging from the origin (the notes' double pendulum)."""
    return jaxmb.chain([1.0, 1.0], [0.5, 0.5], [1.0, 1.0], [1 / 12, 1 / 12], gravity=G,
                       coordinates=coordinates)


# One jitted program per model and trajectory shape (the eager jax.vmap compiled each
# of its operations anew for every new shape: about 250 small compiles in this file).
@jax.jit
def _energies(model, q, qd):
    return jax.vmap(lambda q, qd: jaxmb.total_energy(model, q, qd))(q, qd)


def energies(model, traj):
    return np.asarray(_energies(model, traj.q, traj.qd))


def energy_scale(model):
    """Mechanical energy scale: the potential energy of the chain held horizontally above
    its hanging rest position, sum_i m_i g (y_com_i(up) - y_com_i(down)) / 2."""
    absolute = model.coordinates == "absolute"
    down = np.full(model.dof, -np.pi / 2) if absolute else np.array([-np.pi / 2] + [0.0] * (model.dof - 1))
    flat = np.zeros(model.dof)
    up_down = np.asarray(_energies(model, np.stack([flat, down]), np.zeros((2, model.dof))))  # kinetic energy 0
    return float(up_down[0] - up_down[1])


def test_rk4_conserves_energy_of_a_chaotic_double_pendulum():
    # released from rest well above horizontal: chaotic, fast motion
    model = double_pendulum()
    q0 = np.array([-np.pi / 2 + 2.0, -np.pi / 2 + 2.6])
    traj = jaxmb.simulate(model, q0, np.zeros(2), np.zeros(2), 1e-3, steps=10_000)
    assert traj.q.shape == (10_001, 2) and traj.t.shape == (10_001,)
    np.testing.assert_allclose(traj.t[-1], 10.0, rtol=1e-12)
    E = energies(model, traj)
    drift = np.abs(E - E[0]).max() / energy_scale(model)
    print(f"RK4 dt=1e-3, 10 s: max |E - E0| / (m g L scale) = {drift:.2e}")
    # RK4's local energy error ~ dt^5 |d5 x/dt5| ~ 1e-12 per step at ~10 rad/s rates;
    # over 1e4 steps that is ~1e-8, far below 1e-6
    assert drift < 1e-6
    assert np.abs(traj.qd).max() > 3.0  # the motion is not trivial


def test_semi_implicit_euler_energy_bounded_for_a_pendulum():
    # for a single pendulum (constant M, qdd = f(q)) "qd += dt qdd; q += dt qd" is the
    # symplectic Euler method: it conserves a modified energy within O(dt), so the
    # energy error oscillates without growing, even at large amplitude
    model = jaxmb.chain([1.0], [0.5], [1.0], [1 / 12], gravity=G)
    dt, steps = 1e-3, 40_000
    traj = jaxmb.simulate(model, np.array([-np.pi / 2 + 2.5]), np.zeros(1), np.zeros(1), dt, steps=steps,
                          method="euler")
    E = energies(model, traj)
    err = (E - E[0]) / energy_scale(model)
    means = np.array([w.mean() for w in np.array_split(err, 8)])
    amplitude = np.abs(err).max()
    print(f"semi-implicit Euler, pendulum, dt=1e-3, 40 s: max |dE|/scale = {amplitude:.2e}, "
          f"window means {np.array2string(means, precision=1)}")
    # loose: the excursion is a few dt (measured 2.7 dt); the means of eight 5-s windows
    # stay an order of magnitude below it (a secular drift would make them grow steadily
    # up to the excursion)
    assert amplitude < 10 * dt
    assert np.abs(means).max() < 0.2 * amplitude


def test_semi_implicit_euler_first_order_energy_error_for_a_double_pendulum():
    # with a configuration-dependent M and Coriolis terms, the velocity-form update is
    # not symplectic: the energy drifts, but only at O(dt) (a first-order method)
    model = double_pendulum()
    q0 = np.array([-np.pi / 2 + 0.8, -np.pi / 2 + 0.4])

    def error(dt, T=10.0):
        # both step sizes over the same number of steps (one compilation; steps is static),
        # the first T seconds kept
        traj = jaxmb.simulate(model, q0, np.zeros(2), np.zeros(2), dt, steps=20_000, method="euler")
        E = energies(model, traj)[: int(round(T / dt)) + 1]
        return np.abs(E - E[0]).max() / energy_scale(model)

    e1, e2 = error(1e-3), error(5e-4)
    print(f"semi-implicit Euler, double pendulum, 10 s: max |dE|/scale = {e1:.2e} (dt=1e-3), "
          f"{e2:.2e} (dt=5e-4), ratio {e1 / e2:.2f}")
    assert e1 < 10 * 1e-3
    assert 1.7 < e1 / e2 < 2.3


def test_rk4_fourth_order_convergence():
    model = double_pendulum("relative")
    q0, qd0 = np.array([-1.0, 0.5]), np.array([0.5, 0.0])
    T, samples = 1.0, 25

    def states(steps):
        # the state at t = 0, 0.04, ..., 1 s (the coarsest grid); every step size runs
        # 800 steps (one compilation: steps is static), the first `steps` kept
        traj = jaxmb.simulate(model, q0, qd0, np.zeros(2), T / steps, steps=800)
        return np.concatenate([traj.q, traj.qd], 1)[: steps + 1 : steps // samples]

    ref = states(800)
    steps = [25, 50, 100]
    errs = [np.abs(states(n) - ref).max() for n in steps]
    ratios = [a / b for a, b in zip(errs, errs[1:])]
    print("RK4 max error over 1 s:", ", ".join(f"dt=1/{n}: {e:.2e}" for n, e in zip(steps, errs)))
    print("ratios per halving:", ", ".join(f"{r:.1f}" for r in ratios))
    # 4th order: halving dt divides the global error by 2^4 = 16 (measured 16.1, 16.0);
    # the reference (dt/8 of the finest) adds ~1/4096 of the finest error
    for r in ratios:
        assert 14 < r < 18


def test_tau_as_array_constant_and_callable():
    model = double_pendulum("relative")
    q0, qd0 = np.array([-1.0, 0.5]), np.array([0.3, -0.2])
    dt, half = 2e-3, 100
    c = np.array([1.5, -0.7])
    # an array over steps is held over each step: zero for the first half and c for the
    # second is the same as two simulations with constant tau joined at the middle
    switched = jaxmb.simulate(model, q0, qd0, np.concatenate([np.zeros((half, 2)), np.tile(c, (half, 1))]), dt)
    assert switched.q.shape == (2 * half + 1, 2) and switched.t.shape == (2 * half + 1,)
    first = jaxmb.simulate(model, q0, qd0, np.zeros(2), dt, steps=half)
    second = jaxmb.simulate(model, first.q[-1], first.qd[-1], c, dt, steps=half)
    # same arithmetic in a different order of calls: equal to round-off
    np.testing.assert_allclose(switched.q, np.concatenate([first.q, second.q[1:]]), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(switched.qd, np.concatenate([first.qd, second.qd[1:]]), rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(switched.t[-1], 2 * half * dt, rtol=1e-13)
    # a function returning the constant
    fn = jaxmb.simulate(model, first.q[-1], first.qd[-1], lambda t, q, qd: jnp.asarray(c), dt, steps=half)
    np.testing.assert_allclose(fn.q, second.q, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(fn.qd, second.qd, rtol=1e-13, atol=1e-13)


def test_callable_tau_work_energy_theorem():
    # a controller tau(t, q, qd) = A sin(3 t) - b qd: E(t) - E(0) = integral of qd . tau dt
    model = double_pendulum("relative")
    A, b = np.array([2.0, -1.0]), 0.4
    tau = lambda t, q, qd: A * jnp.sin(3.0 * t) - b * qd  # noqa: E731
    dt, steps = 1e-3, 3000
    traj = jaxmb.simulate(model, np.array([-1.2, 0.4]), np.array([0.5, 0.0]), tau, dt, steps=steps)
    E = energies(model, traj)
    t, qd = np.asarray(traj.t), np.asarray(traj.qd)  # the power qd . tau in NumPy
    power = np.sum(qd * (A * np.sin(3.0 * t)[:, None] - b * qd), 1)
    work = np.concatenate([[0.0], np.cumsum(0.5 * dt * (power[1:] + power[:-1]))])
    # trapezoid rule: error ~ T dt^2 |P''| / 12 ~ 1e-6 J on energies of ~10 J
    np.testing.assert_allclose(E - E[0], work, atol=1e-5)
    assert np.abs(work).max() > 0.5  # the controller does real work
    assert np.ptp(E) > 0.5


def test_callable_loads_spring():
    # a spring of stiffness k from the tip of the second rod to an anchor point: the
    # total energy, including the spring's 1/2 k |tip - anchor|^2, is conserved
    model = double_pendulum("relative")
    k, anchor = 40.0, jnp.array([0.6, -1.5])

    def tip(q):
        return jaxmb.point_position(model, q, 1, (1.0, 0.0))

    def spring(t, q, qd):
        return jaxmb.point_load(model, q, 1, (1.0, 0.0), -k * (tip(q) - anchor), frame="segment")

    dt, steps = 1e-3, 3000
    traj = jaxmb.simulate(model, np.array([-0.5, 0.8]), np.array([1.0, -2.0]), np.zeros(2), dt,
                          loads=spring, steps=steps)
    stretch = jax.jit(jax.vmap(tip))(traj.q) - anchor
    E = energies(model, traj) + 0.5 * k * np.sum(np.asarray(stretch) ** 2, 1)
    drift = np.abs(E - E[0]).max() / E[0]
    # RK4 error (measured 5.6e-8, 16x smaller at dt/2): rates reach ~40 rad/s here
    assert drift < 1e-6
    assert np.ptp(np.linalg.norm(stretch, axis=1)) > 0.2  # the spring works
    # constant loads as a (segments, 3) constant and as an array over steps agree
    W = np.array([[3.0, -1.0, 0.5], [-2.0, 4.0, 0.0]])
    a = jaxmb.simulate(model, np.array([-0.5, 0.8]), np.zeros(2), np.zeros(2), dt, loads=W, steps=100)
    b = jaxmb.simulate(model, np.array([-0.5, 0.8]), np.zeros(2), np.zeros(2), dt, loads=np.tile(W, (100, 1, 1)))
    np.testing.assert_allclose(b.q, a.q, rtol=1e-13, atol=1e-13)
    assert np.abs(a.q[-1] - a.q[0]).max() > 1e-3


def test_floating_body_com_follows_a_parabola():
    # a floating three-segment body with internal joint moments only: the whole-body
    # centre of mass moves as c0 + v0 t - g t^2 / 2 (y), whatever the segments do
    model = jaxmb.chain([0.5, 0.4, 0.3], [[0.25, 0.0], [0.2, 0.02], [0.1, 0.05]], [5.0, 3.0, 2.0],
                        [0.1, 0.05, 0.02], gravity=G, base="floating")
    q0 = np.array([0.2, 1.0, 0.3, 0.8, -0.5])
    qd0 = np.array([1.5, 4.0, 3.0, -2.0, 1.0])
    tau = np.array([0.0, 0.0, 0.0, 0.5, -0.3])  # no base force or moment
    dt, steps = 1e-3, 1500
    traj = jaxmb.simulate(model, q0, qd0, tau, dt, steps=steps)
    com = np.asarray(jax.jit(jax.vmap(lambda q: jaxmb.whole_body_com(model, q)))(traj.q))
    v0 = np.asarray(jax.jit(lambda q, v: jax.jvp(lambda q: jaxmb.whole_body_com(model, q), (q,), (v,))[1])(q0, qd0))
    t = np.asarray(traj.t)[:, None]
    parabola = com[0] + v0 * t + 0.5 * np.array([0.0, -G]) * t**2
    # RK4 at dt = 1e-3 for 1.5 s: global error ~5e-12 m (16x less at dt/2)
    np.testing.assert_allclose(com, parabola, rtol=0, atol=1e-9)
    assert np.abs(np.diff(traj.qd[:, 3])).max() > 0  # the joints do move relative to each other


def test_bad_inputs_raise():
    model = double_pendulum()
    q0, qd0 = np.zeros(2), np.zeros(2)
    dt = 1e-3
    W = np.zeros((2, 3))
    # each with its own message (a bare raises(ValueError) would also accept one of
    # JAX's own errors, with the check gone)
    bad = [
        (dict(q0=np.zeros(3)), r"q0 must have shape \(2,\) .*got shape \(3,\)"),  # wrong shape of q0
        # wrong shape of qd0 ((1, 2) would be a batch of one)
        (dict(qd0=np.zeros((1, 3))), r"qd0 must have shape \(2,\) .*got shape \(1, 3\)"),
        (dict(q0=np.zeros((2, 2)), qd0=np.zeros((3, 2))), r"q0 \(2, 2\) and qd0 \(3, 2\) do not broadcast"),
        # tau neither (dof,) nor (steps, dof)
        (dict(tau=np.zeros(3), steps=5), r"tau must be a function, a constant .*got shape \(3,\)"),
        (dict(tau=np.zeros((5, 3))), r"tau must be a function, a constant .*got shape \(5, 3\)"),
        (dict(tau=np.zeros((5, 2)), loads=np.zeros((6, 2, 3))),  # mismatched numbers of steps
         r"tau and loads have different numbers of steps: \[5, 6\]"),
        (dict(tau=np.zeros((5, 2)), steps=6), "steps=6 but the arrays over steps have 5"),  # steps disagrees
        (dict(tau=np.zeros(2)), "steps is required"),  # constant tau, no steps
        (dict(tau=lambda t, q, qd: jnp.zeros(2)), "steps is required"),  # callable tau, no steps
        (dict(tau=lambda t, q, qd: jnp.zeros(3), steps=5),  # callable returning the wrong shape
         r"tau\(t, q, qd\) must return an array ending in \(2,\) .*got shape \(3,\)"),
        (dict(loads=np.zeros((2, 2)), steps=5), "loads must be a function, a constant"),  # loads of the wrong shape
        (dict(loads=lambda t, q, qd: jnp.zeros(3), steps=5),
         r"loads\(t, q, qd\) must return an array ending in \(2, 3\) .*got shape \(3,\)"),
        (dict(loads=W, steps=5, method="midpoint"), "method must be 'rk4' or 'euler', got 'midpoint'"),
    ]
    for kw, match in bad:
        args = dict(q0=q0, qd0=qd0, tau=np.zeros(2))
        args.update(kw)
        q0_, qd0_, tau_ = args.pop("q0"), args.pop("qd0"), args.pop("tau")
        with pytest.raises(ValueError, match=match):
            jaxmb.simulate(model, q0_, qd0_, tau_, dt, **args)


def test_non_finite_inputs_and_bad_steps_raise_before_tracing():
    # NaN or inf in an array tau or loads, or in dt, would give a NaN trajectory;
    # steps must be an int >= 0 (-5 once failed in a reshape, 2.7 ran 2 steps)
    model = double_pendulum()
    z = np.zeros(2)
    nan_tau, inf_loads = np.array([np.nan, 0.0]), np.zeros((2, 3))
    inf_loads[1, 2] = np.inf
    cases = [
        (dict(tau=nan_tau, steps=3), r"tau is not finite at index 0: nan"),
        (dict(tau=np.full((3, 2), np.nan)), r"tau is not finite at index \(0, 0\)"),
        (dict(loads=inf_loads, steps=3), r"loads is not finite at index \(1, 2\): inf"),
        (dict(dt=np.nan, steps=3), r"dt is not finite: nan"),
        (dict(dt=np.inf, steps=3), r"dt is not finite: inf"),
        (dict(dt=np.array([1e-3, 1e-3]), steps=3), r"dt must be a scalar"),
        (dict(dt=0.0, steps=3), r"dt must be nonzero"),  # before: a trajectory that never moved
        (dict(tau=np.array([1.0 + 1j, 0.0]), steps=3), r"tau must be a real array"),
        (dict(steps=-5), r"steps must be an int >= 0 .* got -5"),
        (dict(steps=2.7), r"steps must be an int >= 0 .* got 2.7"),
        (dict(steps=True), r"steps must be an int >= 0 .* got True"),
    ]
    for kw, message in cases:
        args = {"tau": z, "dt": 1e-3, **kw}
        with pytest.raises(ValueError, match=message):
            jaxmb.simulate(model, z, z, args.pop("tau"), args.pop("dt"), **args)


def test_scalar_constant_tau_and_zero_steps():
    # tau=0.0 broadcasts to (..., dof) as the docstring says; steps may be a NumPy int
    # or a 0-d integer array; steps=0 is the initial state alone
    model = double_pendulum()
    q0, qd0 = np.array([[0.3, -0.2], [0.1, 0.4]]), np.zeros(2)
    a = jaxmb.simulate(model, q0, qd0, 0.0, 1e-3, steps=4)
    b = jaxmb.simulate(model, q0, qd0, np.zeros(2), 1e-3, steps=np.int64(4))
    np.testing.assert_array_equal(a.q, b.q)
    assert a.q.shape == (5, 2, 2)
    c = jaxmb.simulate(model, q0, qd0, 1.5, 1e-3, steps=jnp.asarray(4))
    np.testing.assert_array_equal(c.q, jaxmb.simulate(model, q0, qd0, np.full(2, 1.5), 1e-3, steps=4).q)
    zero = jaxmb.simulate(model, q0, qd0, 0.0, 1e-3, steps=0)
    assert zero.t.shape == (1,) and zero.q.shape == (1, 2, 2)
    np.testing.assert_array_equal(zero.q[0], q0)
    # an empty profile over the steps is steps=0 too (before: JAX's IndexError
    # "index is out of bounds for axis 0 with size 0", from tracing the scan's body)
    for kw in (dict(tau=np.zeros((0, 2))), dict(tau=0.0, loads=np.zeros((0, 2, 3))),
               dict(tau=np.zeros((0, 2)), steps=0)):  # fmt: skip
        empty = jaxmb.simulate(model, q0[0], qd0, dt=1e-3, **kw)
        assert empty.t.shape == (1,) and empty.q.shape == (1, 2), kw
        np.testing.assert_array_equal(empty.q[0], q0[0])
    # the human (its stages as a scan, the state in the caller's layout) alike (the
    # shape alone: jax.eval_shape traces the scan's body, where the IndexError was, and
    # compiles nothing)
    h = jaxmb.seven_segment_human()
    empty = jax.eval_shape(lambda: jaxmb.simulate(h, np.zeros(h.dof), np.zeros(h.dof), np.zeros((0, h.dof)), 1e-3))
    assert empty.q.shape == (1, h.dof)


def test_dtype_follows_forward_dynamics_and_time_starts_at_zero():
    # float32 states with float64 torques: float64, as forward_dynamics gives (before:
    # float32, from q0 and qd0 alone); a function's output is cast to the state's dtype
    # (the dtypes alone: jax.eval_shape traces the same program, the input checks
    # included, without compiling it)
    model = double_pendulum()
    q32 = np.array([0.3, -0.2], np.float32)
    for tau in (np.array([0.5, 0.1]), np.array([[0.5, 0.1]] * 3)):
        out = jax.eval_shape(lambda: jaxmb.simulate(model, q32, q32, tau, 1e-3, steps=3))  # noqa: B023
        assert out.q.dtype == jnp.float64
    assert jax.eval_shape(lambda: jaxmb.forward_dynamics(model, q32, q32, np.array([0.5, 0.1]))).dtype == jnp.float64
    out = jax.eval_shape(lambda: jaxmb.simulate(model, q32, q32, lambda t, q, qd: 0.0 * q, 1e-3, steps=3))
    assert out.q.dtype == jnp.float32
    back = jaxmb.simulate(model, q32, q32, 0.0, -1e-3, steps=2).t  # before: t[0] = -0.0
    assert not np.signbit(back[0]) and back[1] == np.float32(-1e-3)


def test_direct_calls_reuse_one_compilation_and_accept_unhashable_controllers():
    # simulate is one cached jax.jit: the same shapes and options do not compile
    # again; an unhashable callable (a dataclass controller) is cached on its program
    # like any function (it was once traced anew at every call)
    import dataclasses
    import importlib

    sim = importlib.import_module("jaxmb.simulate")  # the module (jaxmb.simulate is the function)

    model = jaxmb.three_segment_leg(1.75, 70.0)
    q0 = np.full((4, model.dof), 0.1)
    tau = np.zeros(model.dof)
    jaxmb.simulate(model, q0, 0 * q0, tau, 1e-3, steps=5)
    size = sim._integrate._cache_size()
    jaxmb.simulate(model, q0 + 0.1, 0 * q0, tau, 1e-3, steps=5)
    assert sim._integrate._cache_size() == size

    @dataclasses.dataclass
    class PD:  # eq=True makes it unhashable
        k: float

        def __call__(self, t, q, qd):
            return -self.k * q - 0.1 * qd

    a = jaxmb.simulate(model, q0, 0 * q0, PD(5.0), 1e-3, steps=20).q
    size = sim._integrate._cache_size()
    b = jaxmb.simulate(model, q0, 0 * q0, lambda t, q, qd: -5.0 * q - 0.1 * qd, 1e-3, steps=20).q
    np.testing.assert_array_equal(a, b)
    assert sim._integrate._cache_size() == size  # the same program: one compilation


def test_a_changed_controller_is_read_at_every_call():
    # a function tau or loads is traced at every call and the compilation is cached
    # on its program: a Python number it reads (a closure's variable, an attribute)
    # is part of the program, and an array it closes over is passed as data. The
    # callable itself was once the cache key: with K changed from 1 to 100 below,
    # the second call returned the first call's result
    import gc
    import importlib
    import weakref

    sim = importlib.import_module("jaxmb.simulate")
    model = double_pendulum("relative")
    q0, qd0 = np.array([-1.0, 0.5]), np.zeros(2)

    def run(tau, loads=None):
        # semi-implicit Euler: the cheapest integration to compile (each new program here
        # compiles; the caching does not depend on the method)
        return np.asarray(jaxmb.simulate(model, q0, qd0, tau, 1e-2, loads=loads, steps=20, method="euler").q[-1])

    K = 1.0
    ctrl = lambda t, q, qd: -K * q  # noqa: E731
    soft = run(ctrl)
    size = sim._integrate._cache_size()
    K = 100.0
    stiff = run(ctrl)
    assert np.abs(stiff - soft).max() > 0.1
    np.testing.assert_array_equal(stiff, run(lambda t, q, qd: -100.0 * q))
    K = 1.0
    np.testing.assert_array_equal(run(ctrl), soft)  # unchanged programs: no new compilation
    np.testing.assert_array_equal(run(lambda t, q, qd: -1.0 * q), soft)  # a new closure, the same program
    assert sim._integrate._cache_size() == size + 1

    class Spring:  # a controller object whose gain is an attribute
        def __init__(self, k):
            self.k = k

        def __call__(self, t, q, qd):
            return -self.k * q

    spring = Spring(1.0)
    np.testing.assert_array_equal(run(spring), soft)
    spring.k = 100.0
    np.testing.assert_array_equal(run(spring), stiff)
    size = sim._integrate._cache_size()

    # a gain matrix changed in place: data, read at every call without compiling again
    G = np.eye(2)
    mat = lambda t, q, qd: -G @ q  # noqa: E731
    np.testing.assert_allclose(run(mat), soft, rtol=1e-13, atol=1e-13)
    G *= 100.0
    np.testing.assert_allclose(run(mat), stiff, rtol=1e-13, atol=1e-13)
    assert sim._integrate._cache_size() == size + 1
    # ... and not kept alive by the cache once the caller lets it go
    def closing_over_a_gain():
        Gj = jnp.eye(2)
        return weakref.ref(Gj), run(lambda t, q, qd: -Gj @ q)

    alive, out = closing_over_a_gain()
    np.testing.assert_allclose(out, soft, rtol=1e-13, atol=1e-13)
    gc.collect()
    assert alive() is None

    # a gain read by a pure_callback's Python function (a new function at every
    # trace; the printed jaxpr shows it without its address): compiled anew
    def host(t, q, qd):
        return jax.pure_callback(lambda x: -K * np.asarray(x), jax.ShapeDtypeStruct((2,), q.dtype), q)

    K = 1.0
    np.testing.assert_allclose(run(host), soft, rtol=1e-13, atol=1e-13)
    K = 100.0
    np.testing.assert_allclose(run(host), stiff, rtol=1e-13, atol=1e-13)

    # tau and loads both functions: a changed number in loads is read too
    W = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0]])
    F = 1.0
    push = lambda t, q, qd: F * jnp.sin(t) * W  # noqa: E731
    a = run(ctrl, push)
    np.testing.assert_array_equal(run(ctrl, push), a)
    F = 10.0
    assert np.abs(run(ctrl, push) - a).max() > 1e-4


def test_a_changed_custom_derivative_rule_is_read_at_every_call():
    # a custom_jvp rule is keyed on its traced program: a rule reading a changed
    # Python number compiles anew (it was keyed by its name, and the gradient below
    # stayed that of S = 1), while jax.nn.relu's rule, remade at every trace, still
    # reuses one compilation
    import importlib

    sim = importlib.import_module("jaxmb.simulate")
    model = double_pendulum("relative")
    q0 = jnp.array([0.3, -0.2])

    @jax.custom_jvp
    def sat(x):
        return jnp.tanh(x)

    @sat.defjvp
    def sat_jvp(p, t):  # a rule of its own, with its own gain S
        return sat(p[0]), S * t[0]

    def grad_of(ctrl):
        # semi-implicit Euler: the cheapest gradient to compile (five compile here)
        loss = lambda q0: jaxmb.simulate(model, q0, jnp.zeros(2), ctrl, 1e-2, steps=10,  # noqa: E731
                                         method="euler").q[-1].sum()
        return np.asarray(jax.grad(loss)(q0))

    S = 1.0
    g1 = grad_of(lambda t, q, qd: -sat(q))
    S = 5.0
    g5 = grad_of(lambda t, q, qd: -sat(q))
    assert np.abs(g5 - g1).max() > 1e-3
    # the rule's S = 5 against the same derivative written without a rule
    tanh5 = lambda x: jax.lax.stop_gradient(jnp.tanh(x)) + 5.0 * (x - jax.lax.stop_gradient(x))  # noqa: E731
    np.testing.assert_allclose(g5, grad_of(lambda t, q, qd: -tanh5(q)), rtol=1e-12, atol=1e-12)

    relu = lambda t, q, qd: -jax.nn.relu(q)  # noqa: E731
    grad_of(relu)
    size = sim._integrate._cache_size()
    grad_of(lambda t, q, qd: -jax.nn.relu(q))
    assert sim._integrate._cache_size() == size


def test_function_output_must_be_one_real_array():
    # before: a bool output was read as 0/1 N m, a complex one lost its imaginary part
    # (a FutureWarning only), a (tau, aux) tuple or None failed inside JAX's tracing
    # with a message that named neither tau nor the function
    model = double_pendulum()
    z = np.zeros(2)
    for fn, match in ((lambda t, q, qd: q > 0, "must return a real array, got dtype bool"),
                      (lambda t, q, qd: 1j * jnp.ones(2), "must return a real array, got dtype complex"),
                      (lambda t, q, qd: (jnp.zeros(2), 1.0), "must return one real array.*a tuple"),
                      (lambda t, q, qd: None, "must return one real array, got None"),
                      (lambda t, q, qd: {"tau": q}, "must return one real array, got dict"),
                      (lambda t, q, qd: "q", "must return one real array, got a str")):  # fmt: skip
        with pytest.raises(ValueError, match=r"tau\(t, q, qd\) " + match):
            jaxmb.simulate(model, z, z, fn, 1e-3, steps=2)
    with pytest.raises(ValueError, match=r"loads\(t, q, qd\) must return a real array, got dtype bool"):
        jaxmb.simulate(model, z, z, 0.0, 1e-3, steps=2, loads=lambda t, q, qd: jnp.zeros((2, 3), bool))
    # integers are real: cast, as an integer array tau is
    got = jaxmb.simulate(model, z, z, lambda t, q, qd: jnp.ones(2, int), 1e-3, steps=2)
    np.testing.assert_array_equal(got.q, jaxmb.simulate(model, z, z, np.ones(2), 1e-3, steps=2).q)


def test_function_output_must_broadcast_to_the_state():
    # an output that broadcasts *with* the state but not *to* it, (4, 2) for (2,),
    # got JAX's bare "Cannot broadcast to shape with fewer dimensions"
    model = double_pendulum()
    z = np.zeros(2)
    cases = [
        (z, dict(tau=lambda t, q, qd: jnp.zeros((4, 2))), r"tau\(t, q, qd\) must return an array ending in "
         r"\(2,\) that broadcasts to \(2,\), got shape \(4, 2\)"),
        (np.zeros((3, 2)), dict(tau=lambda t, q, qd: jnp.zeros((4, 1, 2))), r"broadcasts to \(3, 2\), "
         r"got shape \(4, 1, 2\)"),
        (z, dict(tau=0.0, loads=lambda t, q, qd: jnp.zeros((4, 2, 3))), r"loads\(t, q, qd\) must return an "
         r"array ending in \(2, 3\) that broadcasts to \(2, 3\), got shape \(4, 2, 3\)"),
        (z, dict(tau=lambda t, q, qd: 0.0), r"tau\(t, q, qd\) must return .* got shape \(\)"),  # no silent core
    ]
    for q0, kw, message in cases:
        with pytest.raises(ValueError, match=message):
            jaxmb.simulate(model, q0, z, kw.pop("tau"), 1e-3, steps=2, **kw)
    # one profile over steps for a batch of states: the error names the shape that works
    with pytest.raises(ValueError, match=r"got shape \(7, 2\); one profile over 7 steps for every state of the "
                                         r"batch is tau\[:, None\] of shape \(7, 1, 2\)"):  # fmt: skip
        jaxmb.simulate(model, np.zeros((3, 2)), z, np.zeros((7, 2)), 1e-3)


@pytest.mark.parametrize("segments", [3, 5])  # written-out RK4 stages (<= 4 segments) and the stages' scan
def test_gradients_through_simulate(segments):
    # reverse mode of a loss of a batched RK4 simulation with respect to the model,
    # q0, qd0 and a torque profile over steps: the default (forward dynamics'
    # custom_vjp, jaxmb._engine.rules._forward_vjp) against "autodiff" (its custom_jvp, transposed
    # by JAX) and a central difference along a random direction; forward mode
    # (jax.jvp) with "autodiff" against the same difference (both for the scan
    # branch; the written-out branch against the difference only)
    from random_models import random_model

    rng = np.random.default_rng(64 + segments)
    model = random_model(rng, segments, tree=True, base="floating", coordinates="relative")
    dof, steps = model.dof, 6
    q0 = jnp.asarray(0.3 * rng.standard_normal((2, dof)))
    qd0 = jnp.asarray(rng.standard_normal((2, dof)))
    tau = jnp.asarray(2.0 * rng.standard_normal((steps, 1, dof)))

    def loss(gradient):
        def f(mass, q0, qd0, tau):
            traj = jaxmb.simulate(model.replace(mass=mass), q0, qd0, tau, 1e-2, gradient=gradient)
            return jnp.sum(jnp.sin(traj.q[-1])) + 0.1 * jnp.sum(traj.qd**2)
        return jax.jit(f)

    args = (model.mass, q0, qd0, tau)
    # the loss's values for the central difference come from the same compiled program
    # as its gradient (no compilation of the loss alone)
    value_and_grad = jax.jit(jax.value_and_grad(loss("adjoint"), argnums=(0, 1, 2, 3)))
    ga = value_and_grad(*args)[1]
    if segments > 4:  # "autodiff" on one branch only: its written-out stages compile slowly
        gd = jax.jit(jax.grad(loss("autodiff"), argnums=(0, 1, 2, 3)))(*args)
        for a, d in zip(ga, gd):
            np.testing.assert_allclose(a, d, rtol=1e-9, atol=1e-10 * (1 + np.abs(d).max()))
    dirs = [jnp.asarray(rng.standard_normal(np.shape(a))) * (0.1 * a if k == 0 else 1.0)
            for k, a in enumerate(args)]  # fmt: skip
    eps = 1e-6
    f = lambda *a: value_and_grad(*a)[0]  # noqa: E731
    cd = (f(*[a + eps * d for a, d in zip(args, dirs)]) - f(*[a - eps * d for a, d in zip(args, dirs)])) / (2 * eps)
    rev = sum(float(jnp.sum(g * d)) for g, d in zip(ga, dirs))
    np.testing.assert_allclose(rev, cd, rtol=1e-6)
    if segments > 4:
        t = jax.jit(lambda *d: jax.jvp(loss("autodiff"), args, d)[1])(*dirs)
        np.testing.assert_allclose(t, cd, rtol=1e-6)
    with pytest.raises(ValueError, match="gradient"):
        jaxmb.simulate(model, q0, qd0, tau, 1e-2, gradient="reverse")


def test_t0_lets_a_time_dependent_controller_run_backwards():
    # Forwards for 1 s under tau(t), then backwards from the end state with the same
    # function: the controller must see t from 1 down to 0 (t0 = 1), not 0 to -1 (the
    # only choice before t0: 5.9 rad away from the start). RK4 is not reversible, so
    # the return is to its truncation error (dt^4: 1.5e-7 rad measured).
    model = double_pendulum()
    q0, qd0 = np.array([0.3, 0.5]), np.zeros(2)

    def tau(t, q, qd):
        return jnp.sin(4.4 * t) * jnp.array([1.0, -1.0])

    fwd = jaxmb.simulate(model, q0, qd0, tau, 1e-3, steps=1000)
    back = jaxmb.simulate(model, fwd.q[-1], fwd.qd[-1], tau, -1e-3, steps=1000, t0=fwd.t[-1])
    np.testing.assert_allclose(back.t, fwd.t[::-1], atol=1e-12)
    np.testing.assert_allclose(back.q[-1], q0, atol=1e-8)
    np.testing.assert_allclose(back.qd[-1], qd0, atol=1e-8)
    no_t0 = jaxmb.simulate(model, fwd.q[-1], fwd.qd[-1], tau, -1e-3, steps=1000)
    assert np.abs(no_t0.q[-1] - q0).max() > 0.1
    # a run continued from another's state at step 500 is the same run (the controller
    # sees the same times); and t0 is differentiable (central differences). Every run
    # here has 1000 steps: one compilation of the forward run (steps is static)
    rest = jaxmb.simulate(model, fwd.q[500], fwd.qd[500], tau, 1e-3, steps=1000, t0=fwd.t[500])
    np.testing.assert_allclose(rest.q[500], fwd.q[-1], atol=1e-12)

    def end(t0):
        return jaxmb.simulate(model, q0, qd0, tau, 1e-3, steps=1000, t0=t0).q[50].sum()

    eps = 1e-6
    np.testing.assert_allclose(jax.grad(end)(0.2), (end(0.2 + eps) - end(0.2 - eps)) / (2 * eps), rtol=1e-6)
    for t0, match in ((np.nan, "t0 is not finite"), ([0.0, 1.0], "t0 must be a scalar")):
        with pytest.raises(ValueError, match=match):
            jaxmb.simulate(model, q0, qd0, tau, 1e-3, steps=2, t0=t0)


def test_steps_under_jit_and_a_model_that_is_not_one_are_named():
    # before: "steps must be an int >= 0 ..., got JitTracer(~int64[])" and an
    # AttributeError ('str' object has no attribute 'dof')
    model = double_pendulum()
    z = np.zeros(2)
    with pytest.raises(ValueError, match="steps must be a concrete int .* static under jax.jit"):
        jax.jit(lambda s: jaxmb.simulate(model, z, z, 0.0, 1e-3, steps=s))(5)
    with pytest.raises(ValueError, match="model must be a jaxmb.Model .* got str"):
        jaxmb.simulate("arm", z, z, 0.0, 1e-3, steps=2)


def test_a_constant_per_state_that_reads_as_a_profile_warns():
    # a batch of 3 states, tau of shape (3, 2) and steps=3: a constant for each state
    # (the documented reading), or a profile over the 3 steps; it was taken as the
    # first silently, 0.04 rad from the profile the user may have meant
    model = double_pendulum()
    q0 = np.array([[0.3, 1.2], [0.4, 1.0], [0.1, 0.2]])
    tau = np.array([[5.0, 0.0], [0.0, 5.0], [-5.0, 0.0]])
    with pytest.warns(UserWarning, match=r"tau of shape \(3, 2\) .* read as a constant for each state.*tau\[:, None\]"):
        got = jaxmb.simulate(model, q0, np.zeros(2), tau, 1e-2, steps=3)
    per_state = jaxmb.simulate(model, q0, np.zeros(2), lambda t, q, qd: jnp.asarray(tau), 1e-2, steps=3)
    np.testing.assert_array_equal(got.q, per_state.q)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no coincidence: no warning (traced alone: the check is in Python)
        jax.eval_shape(lambda: jaxmb.simulate(model, q0, np.zeros(2), tau, 1e-2, steps=4))
        jax.eval_shape(lambda: jaxmb.simulate(model, q0, np.zeros(2), tau[:, None], 1e-2))


def test_loads_take_the_states_dtype_as_in_forward_dynamics():
    # float32 states with float64 loads (NumPy's default): forward_dynamics computes in
    # float32; simulate, which documents forward_dynamics' dtype, gave float64
    model = double_pendulum()
    q0, qd0 = np.array([0.3, -0.2], np.float32), np.zeros(2, np.float32)
    loads = np.array([[0.0, -1.0, 0.1], [0.5, 0.0, 0.0]])  # float64
    # (the dtypes alone: jax.eval_shape traces the same programs without compiling them)
    acc = jax.eval_shape(lambda: jaxmb.forward_dynamics(model, q0, qd0, np.zeros(2, np.float32), loads))
    sim = jax.eval_shape(lambda: jaxmb.simulate(model, q0, qd0, np.zeros(2, np.float32), 1e-3, steps=3, loads=loads))
    assert acc.dtype == sim.q.dtype == jnp.float32
    # a float64 tau promotes both
    sim = jax.eval_shape(lambda: jaxmb.simulate(model, q0, qd0, np.zeros(2), 1e-3, steps=3, loads=loads))
    assert sim.q.dtype == jnp.float64
    assert jax.eval_shape(lambda: jaxmb.forward_dynamics(model, q0, qd0, np.zeros(2), loads)).dtype == jnp.float64
