"""A gradient against a central difference of the loss along one random direction in
every argument at once, reusing the caller's compiled loss and gradient (where
``jax.test_util.check_grads`` compiles its own reverse mode again)."""

import jax
import numpy as np


def directional(loss, grads, args, seed: int, *, h: float = 1e-4, scale: float = 1e-2, rtol: float = 1e-7,
                atol: float = 1e-8, msg: str = ""):  # fmt: skip
    """Assert that sum_i <grads_i, d_i> equals d/dt loss(args + t d) at t = 0 by a
    fourth-order central difference (truncation error ~ h^4), d random normal times
    ``scale`` in every leaf of every argument. ``grads``: the gradient with respect
    to each of ``args`` (a tuple of the same structure)."""
    rng = np.random.default_rng(seed)
    d = jax.tree_util.tree_map(lambda a: scale * rng.standard_normal(np.shape(a)), args)

    def along(t):
        return float(loss(*jax.tree_util.tree_map(lambda a, v: a + t * v, args, d)))

    fd = (8 * (along(h) - along(-h)) - (along(2 * h) - along(-2 * h))) / (12 * h)
    ad = sum(float(np.vdot(np.asarray(g), v)) for g, v in zip(jax.tree_util.tree_leaves(grads), jax.tree_util.tree_leaves(d)))
    np.testing.assert_allclose(ad, fd, rtol=rtol, atol=atol, err_msg=msg)
