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
import inspect
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ._math import precise_jit
from ._checks import check_finite
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
    if len(set(devices)) != len(devices):  # JAX's device_put failed later on a bare AssertionError
        raise ValueError(f"devices lists a device more than once: {devices}")
    return Mesh(np.asarray(devices), (AXIS,))


def _is_replicated(arg) -> bool:
    return arg is None or isinstance(arg, Model)


def _spec(ndim: int, batch_axis: int, name):
    if ndim == 0:
        return P()
    axis = batch_axis % ndim
    return P(*([None] * axis + [name] + [None] * (ndim - axis - 1)))


def _is_batch_option(value) -> bool:
    """A keyword argument that carries the batch: an array (JAX or NumPy, at least one
    dimension), or a pytree holding one, that is not a model."""
    if _is_replicated(value):
        return False
    return any(isinstance(x, (jax.Array, np.ndarray)) and np.ndim(x) > 0 for x in jax.tree_util.tree_leaves(value))


def _numbers(value) -> bool:
    """A (nested) list or tuple of Python numbers: an array written as a list."""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    leaves = jax.tree_util.tree_leaves(value)
    return bool(leaves) and all(isinstance(x, (int, float, complex, np.number)) and not isinstance(x, bool)
                                for x in leaves)  # fmt: skip


def _labels(fn, nargs: int) -> list:
    """Names of the first ``nargs`` positional parameters of ``fn`` (for messages)."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        params = []
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    names = []
    for p in params:
        if p.kind not in positional:
            break
        names.append(p.name)
    return [names[i] if i < len(names) else f"argument {i}" for i in range(nargs)]


@precise_jit
def _all_finite(x):
    return jnp.all(jnp.isfinite(x))


def _check_values(x, label: str, angles_from: int | None = None):
    """NaN and inf in a concrete batched input raise ValueError naming it, as in the
    core functions, and so do angles beyond their range in coordinates (``angles_from``:
    the first angle's index; a global array spread over processes is checked for
    finiteness on its devices)."""
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer) and not x.is_fully_addressable:
        if jnp.issubdtype(x.dtype, jnp.inexact) and not bool(_all_finite(x)):
            raise ValueError(f"{label} is not finite (a NaN or inf in the global batch)")
        return
    check_finite(x, label, angles_from)


def sharded(fn: Callable, mesh: Mesh | None = None, *, batch_axis: int = 0, validate: bool = True) -> Callable:
    """Wrap a batched function so that its batch is split across the devices of a mesh.

    The wrapped function takes the same arguments as ``fn``. Arguments that are a
    :class:`jaxmb.Model` (or None) are replicated on every device. Every other
    positional argument, and every keyword argument that is an array (JAX or NumPy,
    at least one dimension; or a pytree holding one), is a batch: each of its array
    leaves is split along ``batch_axis`` into one contiguous block per device, so
    ``loads=L`` with ``L`` of shape (B, segments, 3) pairs each sample with its own
    loads, as in the unsharded call. All batches must have the same batch size.
    Other keyword arguments (strings, numbers, lists, None, ...) are passed to ``fn``
    unchanged, as static options (e.g. ``frame="segment"``, ``joints=[0, 2]``); a
    keyword argument that is a nested list of numbers is refused (an array written
    as a list, or an option? give an array). A positional list of numbers is an
    array, as in the core functions.
    Arrays shared by all samples (one constant load, say) are not batches: put them
    in a closure or :func:`functools.partial`. ``fn`` must treat samples
    independently (inverse dynamics, reactions, forward dynamics, a per-sample
    pipeline): each device runs it on its own block; reduce over the batch
    afterwards (``jnp.mean`` of the sharded result runs where the data lie). Every
    output leaf must carry the batch on ``batch_axis`` too: one that does not (a
    reduced value, :func:`jaxmb.simulate`'s ``q`` of shape (steps + 1, B, dof)) raises
    a ValueError, not a wrong result, also where another of its axes equals the batch
    size (``fn`` is traced on one device's block of the batch too, where the batch
    axis shrinks and the others do not).

    Inputs are checked before anything is dispatched, so that errors are those of
    the unsharded call: ``fn`` is traced once (per set of shapes) on the whole
    batch's shapes, so a shape error quotes the shapes given, not a device's block
    (an array whose ``batch_axis`` is no batch axis but happens to equal the batch
    size, a single sample (dof,) with B = dof, fails on the block, and the
    ValueError says so); and with ``validate`` every floating array of the batch is
    checked for NaN and inf (a ``ValueError`` naming the argument, as jaxmb's core
    functions raise).

    Example::

        ids = jaxmb.sharded(jaxmb.inverse_dynamics)
        tau = ids(model, q, qd, qdd)          # q: (B, dof), split over jax.devices()
        tau = ids(model, q, qd, qdd, loads=L)  # L: (B, segments, 3), split too
        lam = jaxmb.sharded(jaxmb.joint_reactions)(model, q, qd, qdd, frame="segment")

    A batch that the number of devices does not divide is padded with copies of its
    last sample and split; the padding is cut from the result, which is then
    gathered on every device (JAX arrays split only into equal blocks): choose a
    batch size that the device count divides to keep the result split. The wrapped
    function is jitted, with one compilation per set of argument shapes and options.
    Multi-host use through ``jax.distributed`` is described in the docstring of
    :mod:`jaxmb.sharding`.

    Args:
      fn: ``fn(*args, **options)`` mapping batched arrays (and models) to a pytree of
        batched arrays.
      mesh: a one-dimensional :class:`jax.sharding.Mesh`; default
        :func:`batch_mesh` over all devices.
      batch_axis: the batch axis of the batched arrays and of the outputs: 0 (batch
        first, as the batched arrays of ``jaxmb.inverse_dynamics``) or -1 (batch last).
      validate: check the batched arrays for NaN and inf before dispatch (default);
        False for a function that handles non-finite samples itself.

    Returns:
      The wrapped function, returning global arrays partitioned along the batch axis.

    Raises:
      ValueError: (from the wrapped function) for batches of different sizes, a
        batch with a 0-d array, no batch at all, non-finite input (with
        ``validate``), an output without the batch on ``batch_axis``, a keyword
        argument that is a nested list, and whatever ``fn`` raises for the whole
        batch's shapes.
    """
    if mesh is not None and not isinstance(mesh, Mesh):
        raise ValueError(f"mesh must be a jax.sharding.Mesh (e.g. jaxmb.batch_mesh(devices)) or None, got {mesh!r}")
    if mesh is not None and len(mesh.axis_names) != 1:
        raise ValueError(f"mesh must be one-dimensional (one axis for the batch), got axes {mesh.axis_names}")
    if isinstance(batch_axis, bool) or not isinstance(batch_axis, (int, np.integer)) or batch_axis not in (0, -1):
        raise ValueError(f"batch_axis must be the int 0 or -1, got {batch_axis!r}")
    cache = {}

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        m = batch_mesh() if mesh is None else mesh
        name = m.axis_names[0]
        ndev = m.devices.size
        # a positional batch written as a list of numbers is an array, as for the
        # core functions (not a pytree of scalars, each its own "batch")
        args = tuple(np.asarray(a) if _numbers(a) else a for a in args)
        for k, v in kwargs.items():
            if _numbers(v) and np.ndim(v) > 1:
                raise ValueError(f"sharded: {k}= is a nested list: give an array to split it over the batch "
                                 "(a keyword list is otherwise a static option, passed whole to every device; "
                                 "values shared by all samples belong in a closure or functools.partial)")  # fmt: skip
        # array-valued keyword arguments join the positional ones (after them), and so
        # do models (replicated data: as static options they were unhashable, and
        # every call traced and compiled anew)
        kw_names = tuple(k for k, v in kwargs.items() if _is_batch_option(v) or isinstance(v, Model))
        options = {k: v for k, v in kwargs.items() if k not in kw_names}
        xs = args + tuple(kwargs[k] for k in kw_names)
        labels = _labels(fn, len(args)) + list(kw_names)
        batched = tuple(not _is_replicated(a) for a in xs)
        leaves = [(lab, x) for a, b, lab in zip(xs, batched, labels) if b for x in jax.tree_util.tree_leaves(a)]
        if not leaves:
            raise ValueError("sharded: no batched argument (every argument is a model, None or a static option)")
        sizes = {np.shape(x)[batch_axis] if np.ndim(x) else None for _, x in leaves}
        if len(sizes) != 1 or None in sizes:
            got = ", ".join(f"{lab} {tuple(np.shape(x))}" for lab, x in leaves)
            raise ValueError(
                f"sharded: every batched array needs the same batch size on axis {batch_axis}, got {got} "
                "(arrays shared by all samples belong in a closure or functools.partial)"
            )
        (B,) = sizes
        if validate:
            models = [a for a in xs if isinstance(a, Model)]
            nbase = models[0].nbase if len(models) == 1 else None
            for lab, x in leaves:
                # the coordinates of the one model, as the core functions check them
                angles = batch_axis == 0 and nbase is not None and lab in ("q", "q0") and np.ndim(x) and np.shape(x)[-1] == models[0].dof
                _check_values(x, lab, nbase if angles else None)
        key = (
            m,
            batched,
            kw_names,
            jax.tree_util.tree_structure(xs),
            tuple(jnp.shape(x) + (jnp.result_type(x),) for x in jax.tree_util.tree_leaves(xs)),
            tuple(sorted(options.items(), key=lambda kv: kv[0])),
        )
        try:
            run = cache.get(key)
        except TypeError:  # unhashable option: no caching
            key, run = None, None
        if run is None:
            nargs = len(args)

            def call(*ys):
                return fn(*ys[:nargs], **dict(zip(kw_names, ys[nargs:])), **options)

            run = _build(call, m, name, ndev, batched, B, batch_axis, xs)
            if key is not None:
                cache[key] = run
        return run(*xs)

    return wrapped


def _build(call, mesh, name, ndev, batched, B, batch_axis, args):
    pad = (-B) % ndev

    def spec_tree(a, is_batched):
        if not is_batched:
            return jax.tree_util.tree_map(lambda x: P(), a)
        return jax.tree_util.tree_map(lambda x: _spec(np.ndim(x), batch_axis, name), a)

    in_specs = tuple(spec_tree(a, b) for a, b in zip(args, batched))

    # traced on the whole batch first: the function's own shape checks then quote the
    # shapes the caller gave (a device's block has the same number of dimensions);
    # then on one device's block, so that an output axis that only happens to equal
    # the batch size (simulate's q, (steps + 1, B, dof), with steps + 1 == B) is told
    # from the batch axis, which shrinks with the block
    block = (B + pad) // ndev

    def on_block(x):
        shape = list(np.shape(x))
        shape[batch_axis] = block
        return jax.ShapeDtypeStruct(tuple(shape), jnp.result_type(x))

    out_shapes = jax.eval_shape(call, *args)
    try:
        block_shapes = out_shapes if block == B else jax.eval_shape(
            call, *(jax.tree_util.tree_map(on_block, a) if b else a for a, b in zip(args, batched)))
    except (ValueError, TypeError) as e:
        raise ValueError(f"sharded: the function takes the whole batch of {B} but not one device's block of "
                         f"{block} samples ({e}): is axis {batch_axis} of every batched array its batch axis? (a "
                         "single sample needs a batch axis of 1; an array shared by all samples belongs in a "
                         "closure or functools.partial)") from e  # fmt: skip
    block_leaves = jax.tree_util.tree_leaves(block_shapes)
    for (path, o), ob in zip(jax.tree_util.tree_flatten_with_path(out_shapes)[0], block_leaves):
        if o.ndim == 0 or o.shape[batch_axis] != B or ob.ndim != o.ndim or ob.shape[batch_axis] != block:
            where = jax.tree_util.keystr(path) or "the output"
            raise ValueError(f"sharded: {where} has shape {tuple(o.shape)} for a batch of {B}"
                             + (f" and {tuple(ob.shape)} for a block of {block}" if ob.ndim and block != B else "")
                             + f": every output must carry the batch on axis {batch_axis} (each device computes "
                             "its block of it). Reduce over the batch after the sharded call, and move another "
                             f"batch axis to {batch_axis} inside the function (simulate's q is (steps + 1, B, "
                             "dof): jnp.moveaxis(result.q, 1, 0))")  # fmt: skip
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

    @precise_jit
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
