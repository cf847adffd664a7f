"""Zero-phase filtering and derivatives of a padded batch of trials of unequal
lengths in one compiled shape: each trial filtered with its own filter and odd
extension, and differentiated with its own end stencils, within its own samples."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._design import _scipy_signal
from ._jax import _derivative_stencils, _stencil, derivative_jax
from ._recursion import _block_matrices


def ragged_design(sos_list, n, padlen, block: int):
    """Per-trial matrices for :func:`ragged_sosfiltfilt`: trial b's filter
    ``sos_list[b]`` (second-order sections, all with as many sections) by blocks of
    ``block`` samples and its odd extension of ``padlen[b]`` samples (< ``n[b]``).

    Returns (mats, p): mats = (Tm (B, L, L), O (B, L, S), K (B, S, L), AL (B, S, S),
    zi (B, S)) as :func:`_block_matrices` and ``scipy.signal.sosfilt_zi`` give them
    for each trial, without the B axis where every trial has the same filter (the
    products are then a few matrix multiplications, not B small ones); p (B,) the
    padlens (int32)."""

    cache = {}
    per = []
    for sos in sos_list:
        sos = np.ascontiguousarray(sos, dtype=float)
        key = sos.tobytes()
        if key not in cache:
            Tm, O, K, AL = _block_matrices(key, len(sos), int(block))
            cache[key] = (Tm, O, K, AL, _scipy_signal().sosfilt_zi(sos).reshape(-1))
        per.append(cache[key])
    mats = per[0] if len(cache) == 1 else tuple(np.stack(m) for m in zip(*per))
    p = np.asarray(padlen, dtype=np.int32)
    if (p >= np.asarray(n)).any() or (p < 0).any():
        raise ValueError("every padlen must be between 0 and the trial's samples less one")
    return mats, p


def ragged_sosfiltfilt(x: jax.Array, n: jax.Array, p: jax.Array, mats, pmax: int) -> jax.Array:
    """``scipy.signal.sosfiltfilt`` of each trial of a padded batch, in one shape.

    x (B, N, C): trial b is ``x[b, :n[b]]`` (what follows is ignored), filtered along
    axis 1 with its own filter and odd extension ``p[b] <= pmax`` (``mats``, ``p``
    from :func:`ragged_design`; ``pmax`` static). Each trial's extended signal
    ``[odd extension, x, odd extension]`` is gathered to the start of a buffer of
    ``N + 2 pmax`` samples, filtered forward (causal: the samples after it do not
    reach it), reversed within its own length by a gather, filtered again and
    reversed back. Trials of any lengths and filters thus share one compiled
    computation, where :func:`sosfiltfilt_jax` compiles one per length and filter.
    The filter runs by blocks as the ``"blocked"`` method, with per-trial matrices.

    Returns (B, N, C), trial b's result in ``[:n[b]]`` (finite values after it)."""
    Tm, O, K, AL, zi = mats
    Bn, N, C = x.shape
    dt = x.dtype
    Tm, O, K, AL, zi = (jnp.asarray(m, dt) for m in (Tm, O, K, AL, zi))
    if Tm.ndim == 2:  # one filter for all: the batch axis of the products is the trials'
        Tm, O, K, AL, zi = (jnp.broadcast_to(m, (1,) + m.shape) for m in (Tm, O, K, AL, zi))
        eb = ""
    else:
        eb = "b"
    L = Tm.shape[1]
    Ne = N + 2 * int(pmax)
    nb = -(-Ne // L)
    n = n.astype(jnp.int32)[:, None]
    p = p.astype(jnp.int32)[:, None]
    hi = jax.lax.Precision.HIGHEST

    def take(a, idx):  # a (B, M, C), idx (B, K) -> (B, K, C)
        return jnp.take_along_axis(a, jnp.clip(idx, 0, a.shape[1] - 1)[..., None], axis=1, mode="clip")

    def one_pass(e):  # e (B, Ne, C): the signal from its first sample, zero after its end
        xb = jnp.pad(e, ((0, 0), (0, nb * L - Ne), (0, 0))).reshape(Bn, nb, L, C)
        U = jnp.einsum(f"{eb}tj,bkjc->bktc", Tm[0] if not eb else Tm, xb, precision=hi)
        G = jnp.einsum(f"{eb}sj,bkjc->bksc", K[0] if not eb else K, xb, precision=hi)

        def step(s, g):
            return jnp.einsum(f"{eb}sr,brc->bsc", AL[0] if not eb else AL, s, precision=hi) + g, s

        _, starts = jax.lax.scan(step, zi[:, :, None] * e[:, :1], jnp.moveaxis(G, 1, 0))  # (nb, B, S, C)
        y = U + jnp.einsum(f"{eb}ts,kbsc->bktc", O[0] if not eb else O, starts, precision=hi)
        return y.reshape(Bn, nb * L, C)[:, :Ne]

    i = jnp.arange(Ne)[None]
    j = i - p  # the sample of x at extended position i
    first, last = x[:, :1], take(x, n - 1)
    src = jnp.where(j < 0, -j, jnp.where(j < n, j, 2 * n - 2 - j))
    v = take(x, src)
    ext = jnp.where((j < 0)[..., None], 2 * first - v, jnp.where((j < n)[..., None], v, 2 * last - v))
    ext = jnp.where((j < n + p)[..., None], ext, 0)
    y = one_pass(ext)
    end = n + 2 * p  # the extended length
    r = jnp.where((i < end)[..., None], take(y, end - 1 - i), 0)
    w = one_pass(r)
    t = jnp.arange(N)[None]
    return take(w, n + p - 1 - t)


def ragged_derivative(x: jax.Array, rate, order: int, n: jax.Array) -> jax.Array:
    """:func:`derivative_jax` along axis 1 of x (B, N, ...) for trials of ``n[b]``
    samples (``n >= order + 2``): the central stencils as for the whole buffer, the
    last ``(order + 1) // 2`` samples of each trial from its own end stencils
    (gathered at ``n[b]``); what follows a trial's end is finite and meaningless."""
    d = derivative_jax(x, rate, order, axis=1)
    h, _, ends = _derivative_stencils(int(order))
    m = int(order) + 2
    scale = float(rate) ** order
    n = n.astype(jnp.int32)
    extra = (1,) * (x.ndim - 2)
    t = jnp.arange(x.shape[1]).reshape((1, -1) + extra)
    dt = x.dtype
    idx = jnp.clip(n[:, None] - m + jnp.arange(m)[None], 0, x.shape[1] - 1)  # (B, m): a trial's last m samples
    tail = jnp.take_along_axis(x, idx.reshape(idx.shape + extra), axis=1, mode="clip")
    for i in range(h):  # sample n - 1 - i
        v = _stencil(ends[i][1], [tail[:, j] for j in range(m)], dt) * scale  # (B, ...)
        d = jnp.where(t == (n - 1 - i).reshape((-1, 1) + extra), v[:, None], d)
    return d
