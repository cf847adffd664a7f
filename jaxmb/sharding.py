"""Data parallelism: a batched evaluation split across devices with ``jax.sharding``.

Inverse dynamics, reactions and most pipelines built on them treat every sample
independently, so a batch can be cut along its batch axis and each piece evaluated on
its own device with no communication. :func:`sharded` wraps such a function: it lays
a one-dimensional :class:`jax.sharding.Mesh` over the devices, partitions the batch
axis of every batched argument across it, replicates the model, and runs the
function once per device on its local piece (``jax.shard_map``), so the batch really
is split rather than left to the compiler's sharding propagation. The result is a
global ``jax.Array`` whose batch axis stays partitioned over the mesh.

Several processes (multi-host, e.g. one per node of a cluster) work the same way:

1. call ``jax.distributed.initialize()`` (coordinator address, number of processes
   and process id, or the cluster's environment) in every process, before any other
   JAX call; ``jax.devices()`` then lists the devices of all processes;
2. build the mesh over ``jax.devices()`` (the default of :func:`sharded`);
3. give each process's share of the batch as a global array,
   ``jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), local)``
   (``P(None, "batch")`` for a batch-last layout), and call the wrapped function
   with these arrays in every process; host NumPy arrays are instead taken as the
   whole batch, identical in every process;
4. each process reads its own rows of the result from ``out.addressable_shards``
   (or gathers with ``jax.experimental.multihost_utils.process_allgather``).

On one CPU, several host devices can be simulated for testing with
``XLA_FLAGS=--xla_force_host_platform_device_count=4`` set before JAX starts.
"""

from __future__ import annotations

import functools
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .model import Model

try:  # jax >= 0.7
    from jax import shard_map as _shard_map

    _NO_CHECK = {"check_vma": False}
except ImportError:  # pragma: no cover - older jax
    from jax.experimental.shard_map import shard_map as _shard_map

    _NO_CHECK = {"check_rep": False}

__all__ = ["sharded", "batch_mesh"]

AXIS = "batch"


def batch_mesh(devices=None) -> Mesh:
    """A one-dimensional mesh named "batch" over ``devices`` (default: all devices,
    of every process when ``jax.distributed`` is initialised)."""
    devices = jax.devices() if devices is None else list(devices)
    if not devices:
        raise ValueError("devices is empty: a mesh needs at least one device")
    return Mesh(np.asarray(devices), (AXIS,))


def _is_replicated(arg) -> bool:
    return arg is None or isinstance(arg, Model)


def _spec(ndim: int, batch_axis: int, name):
    if ndim == 0:
        return P()
    axis = batch_axis % ndim
    return P(*([None] * axis + [name] + [None] * (ndim - axis - 1)))


def sharded(fn: Callable, mesh: Mesh | None = None, *, batch_axis: int = 0) -> Callable:
    """Wrap a batched function so that its batch is split across the devices of a mesh.

    The wrapped function takes the same arguments as ``fn``. Positional arguments
    that are a :class:`jaxmb.Model` (or None) are replicated on every device; every
    array leaf of the other positional arguments is a batch, split along
    ``batch_axis`` into one contiguous block per device. Keyword arguments are passed
    to ``fn`` unchanged, as static options (e.g. ``frame="segment"``); arrays shared
    by all samples (a constant load, say) belong in a closure or
    :func:`functools.partial`. ``fn`` must treat samples independently (inverse
    dynamics, reactions, forward dynamics, a per-sample pipeline): each device runs it
    on its own block; reduce over the batch afterwards (``jnp.mean`` of the sharded
    result runs where the data lie). Every output leaf must carry the batch on
    ``batch_axis`` too.

    Example::

        ids = jaxmb.sharded(jaxmb.inverse_dynamics)
        tau = ids(model, q, qd, qdd)          # q: (B, dof), split over jax.devices()
        lam = jaxmb.sharded(jaxmb.joint_reactions)(model, q, qd, qdd, frame="segment")

    A batch that the number of devices does not divide is padded with copies of its
    last sample and split; the padding is cut from the result, which is then
    gathered on every device (JAX arrays split only into equal blocks): choose a
    batch size that the device count divides to keep the result split. The wrapped
    function is jitted, with one compilation per set of argument shapes and options. Multi-host use through ``jax.distributed`` is
    described in the docstring of :mod:`jaxmb.sharding`.

    Args:
      fn: ``fn(*args, **options)`` mapping batched arrays (and models) to a pytree of
        batched arrays.
      mesh: a one-dimensional :class:`jax.sharding.Mesh`; default
        :func:`batch_mesh` over all devices.
      batch_axis: the batch axis of the batched arrays and of the outputs: 0 (batch
        first, as the batched arrays of ``jaxmb.inverse_dynamics``) or -1 (batch last).

    Returns:
      The wrapped function, returning global arrays partitioned along the batch axis.
    """
    if mesh is not None and len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be one-dimensional (one axis for the batch), got axes {mesh.axis_names}")
    if batch_axis not in (0, -1):
        raise ValueError(f"batch_axis must be 0 or -1, got {batch_axis!r}")
    cache = {}

    @functools.wraps(fn)
    def wrapped(*args, **options):
        m = batch_mesh() if mesh is None else mesh
        name = m.axis_names[0]
        ndev = m.devices.size
        batched = tuple(not _is_replicated(a) for a in args)
        leaves = [x for a, b in zip(args, batched) if b for x in jax.tree_util.tree_leaves(a)]
        if not leaves:
            raise ValueError("sharded: no batched argument (every positional argument is a model or None)")
        sizes = {np.shape(x)[batch_axis] if np.ndim(x) else None for x in leaves}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(
                f"sharded: every batched array needs the same batch size on axis {batch_axis}, got {sorted(map(str, sizes))}"
            )
        (B,) = sizes
        key = (
            m,
            batched,
            jax.tree_util.tree_structure(args),
            tuple(jnp.shape(x) + (jnp.result_type(x),) for x in jax.tree_util.tree_leaves(args)),
            tuple(sorted(options.items(), key=lambda kv: kv[0])),
        )
        try:
            run = cache.get(key)
        except TypeError:  # unhashable option: no caching
            key, run = None, None
        if run is None:
            run = _build(fn, m, name, ndev, batched, B, batch_axis, options, args)
            if key is not None:
                cache[key] = run
        return run(*args)

    return wrapped


def _build(fn, mesh, name, ndev, batched, B, batch_axis, options, args):
    pad = (-B) % ndev
    local = (B + pad) // ndev

    def spec_tree(a, is_batched):
        if not is_batched:
            return jax.tree_util.tree_map(lambda x: P(), a)
        return jax.tree_util.tree_map(lambda x: _spec(np.ndim(x), batch_axis, name), a)

    in_specs = tuple(spec_tree(a, b) for a, b in zip(args, batched))

    def local_shape(x, is_batched):
        shape = list(np.shape(x))
        if is_batched and shape:
            shape[batch_axis] = local
        return jax.ShapeDtypeStruct(tuple(shape), jnp.result_type(x))

    local_args = tuple(
        jax.tree_util.tree_map(lambda x, b=b: local_shape(x, b), a) for a, b in zip(args, batched)
    )
    call = functools.partial(fn, **options)
    out_shapes = jax.eval_shape(call, *local_args)
    out_specs = jax.tree_util.tree_map(lambda o: _spec(o.ndim, batch_axis, name), out_shapes)
    mapped = _shard_map(call, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **_NO_CHECK)

    def pad_leaf(x):
        x = jnp.asarray(x)
        if not pad or x.ndim == 0:
            return x
        widths = [(0, 0)] * x.ndim
        widths[batch_axis % x.ndim] = (0, pad)
        return jnp.pad(x, widths, mode="edge")

    def cut(o):
        return jax.lax.slice_in_dim(o, 0, B, axis=batch_axis % o.ndim) if pad and o.ndim else o

    placements = tuple(
        jax.tree_util.tree_map(lambda s: NamedSharding(mesh, s if b and not pad else P()), spec)
        for spec, b in zip(in_specs, batched)
    )

    @jax.jit
    def run(*xs):
        xs = tuple(jax.tree_util.tree_map(pad_leaf, a) if b else a for a, b in zip(xs, batched))
        return jax.tree_util.tree_map(cut, mapped(*xs))

    def place_and_run(*xs):
        # each device receives its own block of the batch (or the whole, when padding)
        xs = tuple(
            a if a is None else jax.tree_util.tree_map(lambda x, s: jax.device_put(x, s), a, pl)
            for a, pl in zip(xs, placements)
        )
        return run(*xs)

    return place_and_run
