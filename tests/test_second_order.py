"""Second derivatives through the derivative rules of jaxmb.batch (_operator's
custom_vjp(custom_jvp(custom_vmap(kernel)))), each against central differences of
the compiled gradient (and, where both modes have it, the other gradient mode):

- gradient="autodiff" from 4 segments: reverse mode goes through _linear_map's
  custom_linear_solve, whose transposed solve a derivative with a constant Jacobian
  (tau is linear in the masses and loads) once fed a symbolic zero (TypeError);
- joint_reactions' parameter adjoint: its tau cotangent is a constant zero, so that
  some rows of the adjoint's variadic reduction had symbolic-zero tangents, which
  JAX's rule for lax.reduce does not take (TypeError; _reduce_rows' JVP rule);
- the adjoint inside a lax.scan (jaxmb.simulate, a user's scan): JAX hoists the
  loop-invariant part of the forward pass, dropping the custom_jvp layer above the
  custom_vmap one (AssertionError, "Linearization failed"; _operator's g_fwd).

Small models and one loss per case, so that few programs compile."""

import jax
import jax.numpy as jnp
import numpy as np

import jaxmb

ARM = jaxmb.chain([0.3, 0.27, 0.19], [0.13, 0.12, 0.07], [2.0, 1.2, 0.4], [0.016, 0.008, 0.001])
CHAIN4 = jaxmb.chain([0.3, 0.25, 0.2, 0.15], [0.15, 0.12, 0.1, 0.07], [1.0, 1.5, 0.8, 0.5], [0.01, 0.02, 0.008, 0.004])


def _fd_hessian(f, x, eps=1e-6):
    """Central differences of the compiled gradient of ``f`` at the flat ``x``:
    (x.size, x.size), column j the derivative along x_j."""
    grad = jax.jit(jax.grad(f))
    x = np.asarray(x, np.float64)
    cols = []
    for j in range(x.size):
        h = eps * max(1.0, abs(x[j]))
        e = np.zeros_like(x)
        e[j] = h
        cols.append((np.asarray(grad(jnp.asarray(x + e))) - np.asarray(grad(jnp.asarray(x - e)))) / (2 * h))
    return np.stack(cols, axis=1)


def _close(H, ref, rtol):
    H, ref = np.asarray(H), np.asarray(ref)
    scale = np.abs(ref).max()
    assert scale > 1e-3  # not trivially zero
    np.testing.assert_allclose(H, ref, rtol=0, atol=rtol * scale)


def test_autodiff_hessians_with_a_constant_jacobian():
    # gradient="autodiff", 4 segments (reverse mode by the matrix form's VJP through
    # _linear_map): tau, the joint moments and the reactions are linear in the masses
    # and loads, so the custom_linear_solve's matvec does not change with them.
    # Forward over reverse and reverse over reverse, in the masses and loads at once.
    rng = np.random.default_rng(0)
    q, qd, qdd = (jnp.asarray(rng.uniform(-1, 1, (3, 4))) for _ in range(3))
    n = CHAIN4.segments

    def f(x):
        m, loads = CHAIN4.replace(mass=x[:n]), x[n:].reshape(n, 3)
        kw = dict(gradient="autodiff")
        return (jnp.sum(jnp.sin(jaxmb.inverse_dynamics(m, q, qd, qdd, loads, **kw)))
                + jnp.sum(jnp.sin(jaxmb.joint_moments(m, q, qd, qdd, loads, **kw)))
                + jnp.sum(jnp.sin(jaxmb.joint_reactions(m, q, qd, qdd, loads, frame="segment", **kw))))  # fmt: skip

    x = jnp.concatenate([CHAIN4.mass, jnp.asarray(rng.normal(size=3 * n))])
    H_fd = _fd_hessian(f, x)
    _close(jax.jit(jax.hessian(f))(x), H_fd, 1e-7)
    _close(jax.jit(jax.jacrev(jax.jacrev(f)))(x), H_fd, 1e-7)


def test_reaction_adjoint_hessians():
    # gradient="adjoint" (the default) of joint_reactions with respect to the model,
    # in both frames, forward over reverse and reverse over reverse, against central
    # differences and the "autodiff" Hessian
    q, qd, qdd = jnp.array([-1.2, 0.6, 0.1]), jnp.array([0.3, -0.2, 0.5]), jnp.array([1.0, -0.5, 0.2])

    def loss(gradient):
        def f(x):
            m = ARM.replace(mass=x[:3], com=x[3:].reshape(3, 2))
            world = jaxmb.joint_reactions(m, q, qd, qdd, gradient=gradient)
            seg = jaxmb.joint_reactions(m, q, qd, qdd, joints=(1, 2), frame="segment", gradient=gradient)
            return jnp.sum(world**2) + jnp.sum(jnp.sin(seg))

        return f

    x = jnp.concatenate([ARM.mass, ARM.com.ravel()])
    f = loss("adjoint")
    H_fd = _fd_hessian(f, x)
    H = jax.jit(jax.hessian(f))(x)
    _close(H, H_fd, 1e-7)
    _close(jax.jit(jax.jacrev(jax.grad(f)))(x), H_fd, 1e-7)
    _close(H, jax.jit(jax.hessian(loss("autodiff")))(x), 1e-12)


def test_adjoint_hessians_through_a_scan():
    # gradient="adjoint" inside lax.scan: jaxmb.simulate (forward dynamics' custom_vjp;
    # one semi-implicit Euler step, the cheapest to compile) and inverse dynamics in
    # a scan of one's own, in q0 and the masses at once
    qd, qdd = jnp.array([0.3, -0.2, 0.5]), jnp.array([1.0, -0.5, 0.2])

    def f(x):
        q0, m = x[:3], ARM.replace(mass=x[3:])
        sim = jaxmb.simulate(m, q0, qd, 0.0, 0.01, steps=1, method="euler").q[-1]

        def body(c, _):
            return c + 0.01 * jaxmb.inverse_dynamics(m, c, qd, qdd), None

        return jnp.sum(sim**2) + jnp.sum(jnp.sin(jax.lax.scan(body, q0, None, length=2)[0]))

    x = jnp.concatenate([jnp.array([-1.2, 0.6, 0.1]), ARM.mass])
    H_fd = _fd_hessian(f, x)
    _close(jax.jit(jax.hessian(f))(x), H_fd, 1e-7)
    _close(jax.jit(jax.jacrev(jax.grad(f)))(x), H_fd, 1e-7)
