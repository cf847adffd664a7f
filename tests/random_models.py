"""Random planar models and states for the tests (fixed seeds by the caller).

Usage::

    rng = np.random.default_rng(0)
    model = random_model(rng, 5, tree=True, base="floating", coordinates="absolute")
    q, qd, qdd, loads = random_state(rng, model)

The parameters are in human-like ranges (lengths 0.2-1 m, masses 0.5-10 kg), with
centres of mass off the axis and, for trees, joints attached part-way along the parent
so that no special case (com on the axis, joint at the distal end) hides an error.
"""

from __future__ import annotations

import numpy as np
import pytest

import jaxmb

__all__ = ["random_model", "random_state", "CONFIGS", "CONFIG_PARAMS", "PAIR_CONFIG_PARAMS", "config_fixture_params"]

# every (tree, base, coordinates) combination, for pytest.mark.parametrize
CONFIGS = [
    (tree, base, coordinates)
    for tree in (False, True)
    for base in ("fixed", "floating")
    for coordinates in ("relative", "absolute")
]


def random_model(rng: np.random.Generator, n: int, *, tree: bool = False, base: str = "fixed",
                 coordinates: str = "relative") -> jaxmb.Model:
    """A random chain or branched tree of ``n`` segments.

    Args:
      rng: numpy random generator (seeded by the caller).
      n: number of segments.
      tree: False for a serial chain (each segment at the distal end of the previous
        one); True for a random branched tree (parent of segment i drawn from 0..i-1,
        joint at 30-100 % of the parent's length).
      base: "fixed" (root hinged at a random origin) or "floating".
      coordinates: "relative" or "absolute".

    Returns:
      A validated :class:`jaxmb.Model` with gravity 9.81 m/s^2 and names "s0".."s{n-1}".
    """
    length = rng.uniform(0.2, 1.0, n)  # m
    # centre of mass: 20-80 % along the axis, up to +-10 % of the length across it
    com = np.stack([length * rng.uniform(0.2, 0.8, n), length * rng.uniform(-0.1, 0.1, n)], 1)
    mass = rng.uniform(0.5, 10.0, n)  # kg
    # inertia about the com: between a thin rod / 2 and a thin rod (m L^2 / 12)
    inertia = mass * length**2 * rng.uniform(0.04, 0.09, n)  # kg m^2
    names = [f"s{i}" for i in range(n)]
    origin = rng.uniform(-0.5, 0.5, 2)
    if not tree:
        return jaxmb.chain(length, com, mass, inertia, base=base, coordinates=coordinates,
                           names=names, origin=origin)
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    attach = np.array([0.0] + [length[p] * rng.uniform(0.3, 1.0) for p in parent[1:]])
    return jaxmb.tree(parent, length, com, mass, inertia, attach=attach, base=base,
                      coordinates=coordinates, names=names, origin=origin)


def random_state(rng: np.random.Generator, model: jaxmb.Model):
    """A random state and loads for ``model``.

    Returns:
      (q, qd, qdd, loads): numpy float64 arrays of shapes (dof,), (dof,), (dof,),
      (segments, 3). Angles in (-pi, pi) rad, base position in (-1, 1) m, rates
      ~N(0, 2^2) rad/s, accelerations ~N(0, 5^2) rad/s^2, loads ~N(0, 20^2) N and
      ~N(0, 5^2) N m.
    """
    dof, n = model.dof, model.segments
    q = rng.uniform(-np.pi, np.pi, dof)
    if model.base == "floating":
        q[:2] = rng.uniform(-1.0, 1.0, 2)
    qd = 2.0 * rng.standard_normal(dof)
    qdd = 5.0 * rng.standard_normal(dof)
    loads = np.concatenate([20.0 * rng.standard_normal((n, 2)), 5.0 * rng.standard_normal((n, 1))], 1)
    return q, qd, qdd, loads


CONFIG_IDS = [f"{'tree' if t else 'chain'}-{b}-{c}" for t, b, c in CONFIGS]

# The default run covers each value of each factor (chain and tree, fixed and floating,
# relative and absolute) with these three; the other five are marked slow (--slow).
CORE_CONFIGS = [(False, "fixed", "relative"), (True, "floating", "absolute"), (False, "floating", "relative")]


def _config_params(default):
    """pytest params over CONFIGS, those outside ``default`` marked slow."""
    return [pytest.param(*c, id=i, marks=() if c in default else pytest.mark.slow) for c, i in zip(CONFIGS, CONFIG_IDS)]


CONFIG_PARAMS = _config_params(CORE_CONFIGS)

# For the costliest tests (gradients of every input, each a few compiles): two
# configurations that still cover each value of each factor (a chain with a fixed
# base in relative angles, a tree with a floating base in absolute angles).
PAIR_CONFIGS = [(False, "fixed", "relative"), (True, "floating", "absolute")]
PAIR_CONFIG_PARAMS = _config_params(PAIR_CONFIGS)


def config_fixture_params(indexed: bool = False, default=CORE_CONFIGS):
    """Fixture params over CONFIGS (``(index, config)`` when ``indexed``), those outside
    ``default`` (CORE_CONFIGS, or PAIR_CONFIGS for a module whose every test compiles
    anew per configuration) marked slow."""
    return [
        pytest.param((k, c) if indexed else c, id=i, marks=() if c in default else pytest.mark.slow)
        for k, (c, i) in enumerate(zip(CONFIGS, CONFIG_IDS))
    ]


def random_case(seed, tree, base, coordinates, n=5):
    """(model, q, qd, qdd, loads) for one configuration, from a seed."""
    rng = np.random.default_rng(seed)
    model = random_model(rng, n, tree=tree, base=base, coordinates=coordinates)
    return (model, *random_state(rng, model))
