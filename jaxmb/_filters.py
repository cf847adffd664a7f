"""Pure-JAX zero-phase low-pass filtering and finite-difference derivatives.

jit- and vmap-able counterparts of :func:`jaxmb.signal.lowpass` and
:func:`jaxmb.signal.derivative`, so that filtering and differentiation of a batch of
trials can run inside one jitted computation. The filter design (``scipy.signal.butter``
in second-order sections, ``sosfilt_zi``) and the finite-difference weights are
computed eagerly in NumPy from the static arguments (``rate``, ``cutoff``, ``order``,
``axis`` are Python numbers); only the data pass through JAX.

- :func:`lowpass_jax`: the ``scipy.signal.sosfiltfilt`` result (odd extension of
  ``padlen`` samples, forward and backward passes of the cascade of second-order
  sections in direct form II transposed, initial states ``zi`` times the first sample).
- :func:`sosfiltfilt_jax`: the same for given ``sos`` coefficients.
- :func:`derivative_jax`: the stencils of :func:`jaxmb.signal.derivative`.

Float32 input stays float32 (the coefficients are cast to the data's dtype); integer
input is computed in the default float dtype.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxmb import signal as _signal

__all__ = ["lowpass_jax", "sosfiltfilt_jax", "derivative_jax"]


def _float_input(x) -> jax.Array:
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return x


def _to_time_channels(x: jax.Array, axis: int):
    """(..., T, ...) -> (T, C) with the channels flat and contiguous; and the inverse."""
    xt = jnp.moveaxis(x, axis, 0)
    rest = xt.shape[1:]
    x2 = xt.reshape(xt.shape[0], -1)

    def back(y2):
        return jnp.moveaxis(y2.reshape((y2.shape[0],) + rest), 0, axis)

    return x2, back


def _coefficients(sos: np.ndarray, dtype):
    """(b0, b1, b2, a1, a2) of each section, in the data's dtype (a0 = 1)."""
    return [tuple(jnp.asarray(c, dtype=dtype) for c in (s[0], s[1], s[2], s[4], s[5])) for s in sos]


def _df2t_step(coef, z, x):
    """One sample of the cascade in direct form II transposed, as scipy's sosfilt:
    states z ((z0, z1) per section) and input x -> (new states, output)."""
    new = []
    y = x
    for k, (b0, b1, b2, a1, a2) in enumerate(coef):
        z0, z1 = z[k]
        xin = y
        y = b0 * xin + z0
        new.append((b1 * xin - a1 * y + z1, b2 * xin - a2 * y))
    return tuple(new), y


def _sosfilt_tc(sos: np.ndarray, x: jax.Array, zi, unroll: int, reverse: bool = False):
    """Cascade of second-order sections along axis 0 of x (T, C), direct form II
    transposed as scipy's sosfilt; zi (n_sections, 2, C) the initial states (or the
    tuple of final states of a previous call). With ``reverse``, runs from the last
    sample to the first, the outputs in the order of x. Returns (y, final states)."""
    coef = _coefficients(sos, x.dtype)
    step = functools.partial(_df2t_step, coef)
    z_init = zi if isinstance(zi, tuple) else tuple((zi[k, 0], zi[k, 1]) for k in range(len(coef)))
    zf, y = jax.lax.scan(step, z_init, x, unroll=unroll, reverse=reverse)
    return y, zf


def _state_space(sos: np.ndarray):
    """The cascade of DF2T sections as one state-space system s' = A s + B x,
    y = C s + D x, whose state is scipy's sosfilt state (z0, z1 of each section,
    flattened in that order), so that ``sosfilt_zi`` applies unchanged."""
    n = len(sos)
    S = 2 * n
    A = np.zeros((S, S))
    B = np.zeros(S)
    Cu, Du = np.zeros(S), 1.0  # input of the current section as C s + D x
    for k, (b0, b1, b2, _a0, a1, a2) in enumerate(sos):
        i = 2 * k
        Cy, Dy = b0 * Cu, b0 * Du  # y = b0 u + z0
        Cy[i] += 1.0
        A[i] = b1 * Cu - a1 * Cy  # z0' = b1 u - a1 y + z1
        A[i, i + 1] += 1.0
        B[i] = b1 * Du - a1 * Dy
        A[i + 1] = b2 * Cu - a2 * Cy  # z1' = b2 u - a2 y
        B[i + 1] = b2 * Du - a2 * Dy
        Cu, Du = Cy, Dy
    return A, B, Cu, Du


@functools.lru_cache(maxsize=64)
def _block_matrices(sos_bytes: bytes, n_sections: int, L: int):
    """Matrices of L steps of the cascade: y_blk = Tm x_blk + O s, s_next = AL s + K x_blk."""
    sos = np.frombuffer(sos_bytes, dtype=float).reshape(n_sections, 6)
    A, B, C, D = _state_space(sos)
    S = len(B)
    O = np.zeros((L, S))  # C A^t
    AB = np.zeros((L, S))  # A^t B
    P = np.eye(S)
    v = B.copy()
    for t in range(L):
        O[t] = C @ P
        AB[t] = v
        P = A @ P
        v = A @ v
    h = np.concatenate([[D], O[: L - 1] @ B])  # impulse response h_0 = D, h_m = C A^(m-1) B
    idx = np.arange(L)[:, None] - np.arange(L)[None, :]
    Tm = np.where(idx >= 0, h[np.clip(idx, 0, L - 1)], 0.0)
    K = AB[::-1].T  # (S, L): A^(L-1-j) B
    return Tm, O, K, P


def _sosfilt_blocked_tc(sos: np.ndarray, x: jax.Array, zi: jax.Array, block: int, final: bool = False):
    """The same as :func:`_sosfilt_tc` by blocks of ``block`` samples: the response
    of each block to its own samples (a Toeplitz matrix of the impulse response) and
    to the state at its start are matrix products over all blocks and channels at
    once; only the state from block to block is a (short) scan. ``final``: also
    return the state after the last sample (S, C)."""
    Tm, O, K, AL = _block_matrices(np.ascontiguousarray(sos, dtype=float).tobytes(), len(sos), block)
    N, C = x.shape
    nb = -(-N // block)
    dt = x.dtype
    xb = jnp.pad(x, ((0, nb * block - N), (0, 0))).reshape(nb, block, C)
    hi = jax.lax.Precision.HIGHEST
    U = jnp.einsum("tj,bjc->btc", jnp.asarray(Tm, dt), xb, precision=hi)
    G = jnp.einsum("sj,bjc->bsc", jnp.asarray(K, dt), xb, precision=hi)
    ALj = jnp.asarray(AL, dt)

    def step(s, g):
        return jnp.dot(ALj, s, precision=hi) + g, s

    _, starts = jax.lax.scan(step, zi.reshape(-1, C), G)  # (nb, S, C): state at each block start
    y = U + jnp.einsum("ts,bsc->btc", jnp.asarray(O, dt), starts, precision=hi)
    y = y.reshape(nb * block, C)[:N]
    if not final:
        return y
    r = N - (nb - 1) * block  # samples of the last block: its start state r steps on
    Kr, Ar = (jnp.asarray(m, dt) for m in _pad_matrices(np.ascontiguousarray(sos, dtype=float).tobytes(), len(sos), r))
    return y, jnp.dot(Ar, starts[-1], precision=hi) + jnp.dot(Kr, x[N - r :], precision=hi)


@functools.lru_cache(maxsize=64)
def _split_matrices(sos_bytes: bytes, n_sections: int, L: int):
    """(O, AL): O[t] = C A^t (L, S), the output t steps into a block per unit of the
    state at its start; AL = A^L, the state carried across a block."""
    sos = np.frombuffer(sos_bytes, dtype=float).reshape(n_sections, 6)
    A, _, C, _ = _state_space(sos)
    O = np.zeros((L, len(C)))
    P = np.eye(len(C))
    for t in range(L):
        O[t] = C @ P
        P = A @ P
    return O, P


def _sosfilt_split_tc(sos: np.ndarray, x: jax.Array, zi: jax.Array, block: int, unroll: int) -> jax.Array:
    """The same as :func:`_sosfilt_tc`, with the signal cut into K blocks of L =
    ``block`` samples that the recursion runs side by side as extra channels.

    By linearity, block k's output is its response from a zero state, y0_k, plus the
    free response to its start state s_k:

        y_k[t] = y0_k[t] + C A^t s_k,    s_0 = zi,    s_(k+1) = A^L s_k + z_k

    (z_k the zero-state final state of block k; A, C the state-space form of the
    cascade, :func:`_state_space`). The recursion is then one scan of L steps over
    blocks x channels lanes (few steps of wide vector work instead of N steps of
    narrow work: the loop overhead of a sample-by-sample scan dominates on a CPU),
    and only the chain of start states is sequential (K steps)."""
    N, C = x.shape
    L = max(1, min(int(block), N))
    K = -(-N // L)
    O, AL = _split_matrices(np.ascontiguousarray(sos, dtype=float).tobytes(), len(sos), L)
    dt = x.dtype
    xb = jnp.pad(x, ((0, K * L - N), (0, 0))).reshape(K, L, C).swapaxes(0, 1).reshape(L, K * C)
    zero = tuple((jnp.zeros(K * C, dt), jnp.zeros(K * C, dt)) for _ in range(len(sos)))
    y0, zf = _sosfilt_tc(sos, xb, zero, unroll)
    zf = jnp.stack([z for pair in zf for z in pair]).reshape(-1, K, C)  # (S, K, C)
    ALj = jnp.asarray(AL, dt)
    hi = jax.lax.Precision.HIGHEST

    def step(s, z):
        return jnp.dot(ALj, s, precision=hi) + z, s

    _, starts = jax.lax.scan(step, zi.reshape(-1, C), zf.swapaxes(0, 1))  # (K, S, C)
    y = y0.reshape(L, K, C)
    Oj = jnp.asarray(O, dt)
    for j in range(O.shape[1]):  # y0 + C A^t s_k, summed over the (few) states
        y = y + Oj[:, j, None, None] * starts[None, :, j]
    return y.swapaxes(0, 1).reshape(K * L, C)[:N]


def _block_responses(coef, xb: jax.Array, unroll: int):
    """Zero-state responses of the cascade in every block of xb (B, K, L, C), along
    axis 2 (a loop of L steps over the B x K x C lanes, each step reading and
    writing one strided slice: no transposed copy of the signal), and the final
    states (B, K, S, C), in the order of :func:`_state_space`."""
    Bn, K, L, C = xb.shape

    def body(t, carry):
        z, y = carry
        z, v = _df2t_step(coef, z, jax.lax.dynamic_index_in_dim(xb, t, axis=2, keepdims=False))
        return z, jax.lax.dynamic_update_index_in_dim(y, v, t, axis=2)

    zero = jnp.zeros((Bn, K, C), xb.dtype)
    init = (tuple((zero, zero) for _ in coef), jnp.zeros_like(xb))
    z, y0 = jax.lax.fori_loop(0, L, body, init, unroll=unroll)
    return y0, jnp.stack([s for pair in z for s in pair], axis=2)


def _block_starts(AL: np.ndarray, zf: jax.Array, s0: jax.Array) -> jax.Array:
    """The state at the start of each block (B, K, S, C): s_0 = s0 (B, S, C),
    s_(k+1) = A^L s_k + zf_k (a scan over the K blocks of small arrays)."""
    S = AL.shape[0]
    ALj = jnp.asarray(AL, zf.dtype)

    def step(s, z):
        nxt = jnp.stack([sum(ALj[i, j] * s[:, j] for j in range(S)) for i in range(S)], 1) + z
        return nxt, s

    _, st = jax.lax.scan(step, s0, jnp.moveaxis(zf, 1, 0))
    return jnp.moveaxis(st, 0, 1)


def _sosfiltfilt_bt(sos: np.ndarray, zi: np.ndarray, x: jax.Array, padlen: int, block: int, unroll: int) -> jax.Array:
    """:func:`_sosfiltfilt_tc` for x (B, N, C) with time along axis 1, without moving
    time to the front: the "split" method's blocks are taken in place, (B, K, L, C)
    from (B, K * L, C) by a free reshape, and the recursion within the blocks steps
    along axis 2 (:func:`_block_responses`). The odd extension, a zero tail to whole
    blocks, the free responses to the block start states and the reversal between
    the passes are elementwise expressions that XLA fuses into a few passes over
    the signal."""
    Bn, N, C = x.shape
    dt = x.dtype
    coef = _coefficients(sos, dt)
    zi = jnp.asarray(np.asarray(zi, dtype=float).reshape(-1), dt)  # (S,)
    Ne = N + 2 * padlen  # the extended signal
    L = max(1, min(int(block), Ne))
    K = -(-Ne // L)
    O, AL = _split_matrices(np.ascontiguousarray(sos, dtype=float).tobytes(), len(sos), L)
    O = jnp.asarray(O, dt)
    tail = jnp.zeros((Bn, K * L - Ne, C), dt)

    def one_pass(e):  # e (B, K, L, C), the signal from its first sample, zero after Ne
        s0 = zi[None, :, None] * e[:, 0, 0][:, None, :]
        y0, zf = _block_responses(coef, e, unroll)
        starts = _block_starts(AL, zf, s0)
        y = y0
        for j in range(O.shape[1]):  # + C A^t s_k
            y = y + O[None, None, :, j, None] * starts[:, :, None, j]
        return y.reshape(Bn, K * L, C)[:, :Ne]

    y = one_pass(jnp.concatenate([_odd_ext(x, padlen, 1), tail], axis=1).reshape(Bn, K, L, C))
    w = one_pass(jnp.concatenate([y[:, ::-1], tail], axis=1).reshape(Bn, K, L, C))
    return w[:, ::-1][:, padlen : padlen + N]


def _odd_ext(x: jax.Array, n: int, axis: int) -> jax.Array:
    """scipy.signal._arraytools.odd_ext along ``axis``."""
    if n < 1:
        return x

    def sl(start, stop, step=None):
        return x[(slice(None),) * axis + (slice(start, stop, step),)]

    left = 2 * sl(0, 1) - sl(n, 0, -1)
    right = 2 * sl(-1, None) - sl(-2, -(n + 2), -1)
    return jnp.concatenate([left, x, right], axis=axis)


def _sosfiltfilt_tc(sos: np.ndarray, zi: np.ndarray, x: jax.Array, padlen: int, method: str, unroll: int, block: int) -> jax.Array:
    zi = jnp.asarray(zi, dtype=x.dtype)[:, :, None]  # (n_sections, 2, 1)
    if method == "scan":
        # the odd extensions filtered on their own (no copies of the long signal):
        # forward over left pad, x, right pad; backward over the right pad, then x
        # (scan in reverse, outputs in place); the backward left pad is discarded.
        n = padlen
        ext0 = 2 * x[0] - x[n] if n > 0 else x[0]
        z = zi * ext0
        if n > 0:
            _, z = _sosfilt_tc(sos, 2 * x[:1] - x[n:0:-1], z, unroll)
        y, z = _sosfilt_tc(sos, x, z, unroll)
        if n > 0:
            y_right, _ = _sosfilt_tc(sos, 2 * x[-1:] - x[-2 : -(n + 2) : -1], z, unroll)
            _, z = _sosfilt_tc(sos, y_right, zi * y_right[-1], unroll, reverse=True)
        else:
            z = zi * y[-1]
        y, _ = _sosfilt_tc(sos, y, z, unroll, reverse=True)
        return y
    if method == "blocked":
        filt = functools.partial(_sosfilt_blocked_tc, sos, block=block)
    elif method == "split":
        filt = functools.partial(_sosfilt_split_tc, sos, block=block, unroll=unroll)
    else:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    n = padlen
    if n == 0:
        y = filt(x, zi * x[0])[::-1]
        return filt(y, zi * y[0])[::-1]
    # Only the states that the pads leave matter where their outputs are discarded:
    # forward, the left pad's final state (a product with the pad, not a pass), then
    # x and the right pad; backward, the right pad's final state, then x (the left
    # pad, whose outputs scipy discards, is not filtered at all). A long padlen
    # ("auto": thousands of samples at kHz rates) costs little.
    sos_bytes = np.ascontiguousarray(sos, dtype=float).tobytes()
    K, An = (jnp.asarray(m, x.dtype) for m in _pad_matrices(sos_bytes, len(sos), n))
    zi = zi.reshape(-1, 1)  # (S, 1)
    hi = jax.lax.Precision.HIGHEST

    def after(pad):  # the state after filtering pad (n, C) from zi * pad[0]
        return jnp.dot(An, zi * pad[0], precision=hi) + jnp.dot(K, pad, precision=hi)

    left = 2 * x[:1] - x[n:0:-1]
    right = 2 * x[-1:] - x[-2 : -(n + 2) : -1]
    if method == "blocked":
        # the right pad's forward outputs are not kept either: only the state that
        # the backward pass has after them, linear in the pad and in the state after
        # x (one product each, :func:`_right_pad_matrices`), not a pass over the pad
        # and a copy of the signal with it (at 10 kHz and 15 Hz, 1,383 samples of
        # each trial's 6,001)
        y, s_n = filt(x, after(left), final=True)
        Mr, Ms = (jnp.asarray(m, x.dtype) for m in _right_pad_matrices(sos_bytes, len(sos), n))
        z = jnp.dot(Mr, right, precision=hi) + jnp.dot(Ms, s_n, precision=hi)
        return filt(y[::-1], z)[::-1]
    y = filt(jnp.concatenate([x, right]), after(left))[::-1]  # (n + N, C), right pad first
    return filt(y[n:], after(y[:n]))[::-1]


@functools.lru_cache(maxsize=16)
def _right_pad_matrices(sos_bytes: bytes, n_sections: int, n: int):
    """(Mr (S, n), Ms (S, S)): filtfilt's backward state after its right pad of n
    samples, ``Mr @ pad + Ms @ s``, where s is the forward state after the signal
    and pad its odd extension (forward from s: outputs H pad + O s, H the impulse
    response's Toeplitz matrix, O the rows C A^t; backward over them reversed, from
    zi times the first: the state A^n zi y[n-1] + K J y, K of :func:`_pad_matrices`
    and J the reversal)."""
    sos = np.frombuffer(sos_bytes, dtype=float).reshape(n_sections, 6)
    import scipy.signal as ss

    H, O, _, _ = _block_matrices(sos_bytes, n_sections, n)
    K, An = _pad_matrices(sos_bytes, n_sections, n)
    P = K[:, ::-1].copy()
    P[:, -1] += An @ ss.sosfilt_zi(sos).reshape(-1)
    return P @ H, P @ O


@functools.lru_cache(maxsize=64)
def _pad_matrices(sos_bytes: bytes, n_sections: int, n: int):
    """(K, A^n) with K[:, j] = A^(n-1-j) B (S, n): the state after n samples x from
    s0 is A^n s0 + K x (the state-space form of :func:`_state_space`)."""
    sos = np.frombuffer(sos_bytes, dtype=float).reshape(n_sections, 6)
    A, B, _, _ = _state_space(sos)
    K = np.zeros((len(B), n))
    v = B.copy()
    for j in range(n - 1, -1, -1):
        K[:, j] = v
        v = A @ v
    return K, np.linalg.matrix_power(A, n)


_METHODS = ("scan", "blocked", "split", "strided")


def sosfiltfilt_jax(
    x, sos, axis: int = 0, padlen: int | None = None, *, method: str = "scan", block: int = 64, unroll: int = 4
) -> jax.Array:
    """``scipy.signal.sosfiltfilt(sos, x, axis, padtype="odd", padlen)`` in JAX.

    Args:
      x: array, any shape, filtered along ``axis`` (a traced value is fine).
      sos: (n_sections, 6) NumPy array of second-order sections (static: designed
        eagerly, e.g. ``scipy.signal.butter(..., output="sos")``).
      axis: the time axis (static).
      padlen: samples of odd extension at each end (static); default
        ``3 * (2 * n_sections + 1 - min(#trailing zeros of b, a))`` as scipy.
      method: ``"scan"`` (default): one ``lax.scan`` step per sample, all sections
        and channels updated together in direct form II transposed, as scipy's
        ``sosfilt`` (the same arithmetic); ``"blocked"``: the recursion by blocks of
        ``block`` samples as matrix products (algebraically the same; float64
        agrees with scipy to ~1e-12 relative; with blocks of 32 samples the fastest
        on a 2-core CPU inside :func:`jaxmb.gait.analyze`'s loop over chunks of
        4 trials);
        ``"split"``: the signal cut into blocks of ``block`` samples that the
        recursion runs side by side as extra channels from a zero state, plus the
        free response to each block's start state (a short chain over blocks):
        ``block`` sequential steps instead of the signal's length, for few
        channels per call (float64 agrees with scipy to ~2e-12 relative);
        ``"strided"``: the same as ``"split"`` with the blocks cut in place along
        ``axis`` (no transposed copies of the signal, no reversed copies between
        the passes), for batches of signals with time in the middle, e.g.
        (trials, T, channels).
      block: samples per block of the ``"blocked"``, ``"split"`` and ``"strided"``
        methods. ``"scan"``, ``"blocked"`` and ``"split"`` filter only the samples
        whose outputs are kept; where a pad's outputs are discarded, only its final
        state is computed (by a product with the pad for the last two; for
        ``"blocked"`` the right pad's forward pass too, a product with the pad and
        the state after the signal), so a long ``padlen`` costs little.
      unroll: time steps per loop iteration of the ``"scan"``, ``"split"`` and
        ``"strided"`` methods.

    Returns:
      The filtered array, the shape and (float) dtype of ``x``.
    """
    sos = np.asarray(sos, dtype=float)
    if sos.ndim != 2 or sos.shape[1] != 6:
        raise ValueError(f"sos must have shape (n_sections, 6), got {sos.shape}")
    if not np.allclose(sos[:, 3], 1.0):
        sos = sos / sos[:, 3:4]  # normalise a0 (scipy's sosfilt does the same)
    x = _float_input(x)
    axis = _signal._axis(axis, x.ndim)
    if padlen is None:
        # scipy: ntaps = 2 * n_sections + 1 - min(trailing zeros of b2, a2)
        ntaps = 2 * len(sos) + 1 - min(int((sos[:, 2] == 0).sum()), int((sos[:, 5] == 0).sum()))
        padlen = 3 * ntaps
    padlen = _signal._int_at_least(padlen, "padlen", 0, " (samples of odd extension at each end)")
    unroll = _signal._int_at_least(unroll, "unroll", 1, " (time steps per loop iteration)")
    block = _signal._int_at_least(block, "block", 1, " (samples per block)")
    if x.shape[axis] <= padlen:
        raise ValueError(f"x has {x.shape[axis]} samples along axis {axis}: needs more than padlen={padlen}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
    sos_key = (np.ascontiguousarray(sos).tobytes(), len(sos))
    return _sosfiltfilt_jit(x, sos_key, axis, padlen, method, int(unroll), int(block))


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _sosfiltfilt_jit(x, sos_key, axis, padlen, method, unroll, block):
    # one compiled computation per design and shape (eager calls compile once)
    import scipy.signal as ss

    sos = np.frombuffer(sos_key[0], dtype=float).reshape(sos_key[1], 6)
    zi = ss.sosfilt_zi(sos)
    if method == "strided":  # time stays where it is: (before, T, after), a free reshape
        shape = x.shape
        x3 = x.reshape(int(np.prod(shape[:axis], dtype=int)), shape[axis], -1)
        return _sosfiltfilt_bt(sos, zi, x3, padlen, block, unroll).reshape(shape)
    x2, back = _to_time_channels(x, axis)
    return back(_sosfiltfilt_tc(sos, zi, x2, padlen, method, unroll, block))


def lowpass_jax(
    x,
    rate,
    cutoff,
    order: int = 2,
    axis: int = 0,
    *,
    correct: bool = False,
    padlen=None,
    method: str = "scan",
    block: int = 64,
    unroll: int = 4,
):
    """Zero-phase low-pass Butterworth filter: :func:`jaxmb.signal.lowpass` in JAX.

    The same result (float64: to rounding) as ``jaxmb.signal.lowpass(x, rate, cutoff,
    order, axis, correct=correct, padlen=padlen)``, i.e. ``scipy.signal.sosfiltfilt``
    of ``butter(order, cutoff / (rate / 2), output="sos")`` with odd padding of
    ``3 * (order + 1)`` samples. ``rate``, ``cutoff``, ``order``, ``axis``,
    ``correct``, ``padlen`` are static Python values (the design is done eagerly);
    ``x`` may be traced, so the function works under ``jax.jit`` and ``jax.vmap``.
    Unlike the NumPy version, ``x`` is not checked for NaN (it may be traced).

    Args:
      x: array, any shape; filtered along ``axis``.
      rate: sampling rate, Hz.
      cutoff: cut-off frequency, Hz; 0 < cutoff < rate / 2.
      order: Butterworth order of one pass (default 2).
      axis: the time axis.
      correct: Winter's correction of the cut-off (see :func:`jaxmb.signal.lowpass`).
      padlen: odd-extension length at each end: an int, None (default ``3 * (order +
        1)``) or ``"auto"`` (see :func:`jaxmb.signal.lowpass`).
      method, block, unroll: how the recursion is computed (see :func:`sosfiltfilt_jax`).

    Returns:
      The filtered array, the shape of ``x``; float32 input stays float32.
    """
    x = _float_input(x)
    sos, padlen = _lowpass_design(rate, cutoff, order, correct, padlen, x.shape[_signal._axis(axis, x.ndim)])
    return sosfiltfilt_jax(x, sos, axis=axis, padlen=padlen, method=method, block=block, unroll=unroll)


def _lowpass_design(rate, cutoff, order, correct, padlen, n):
    rate = _signal._positive_rate(rate)
    order = _signal._order(order)
    fc = _signal._check_cutoff(cutoff, rate, order, correct)
    sos = _signal._butter(order, fc / (rate / 2.0))
    return sos, _signal._padlen(padlen, sos, order, n)


@functools.lru_cache(maxsize=64)
def _derivative_stencils(order: int):
    """(h, central weights, [(w_start_i, w_end_i) for i < h]) as in jaxmb.signal.derivative."""
    n = order + 2
    h = (order + 1) // 2
    central = _signal._weights(np.arange(-h, h + 1, dtype=float), order)
    base = np.arange(n, dtype=float)
    ends = tuple((_signal._weights(base - i, order), _signal._weights(i - base[::-1], order)) for i in range(h))
    return h, central, ends


def _stencil(w, xs, dt):
    """sum_j w[j] xs[j], added left to right: the end stencils of
    :func:`derivative_jax` and :func:`ragged_derivative` in one order of operations,
    so that a trial within a padded batch gets its alone value to the last bit (as a
    tensordot, the two contractions were summed in other orders: 3e-10 m/s^2 apart
    at 1 kHz, 1e-8 of a swing trial's peak reaction)."""
    acc = None
    for wj, xj in zip(np.asarray(w).tolist(), xs):
        term = jnp.asarray(wj, dt) * xj
        acc = term if acc is None else acc + term
    return acc


def derivative_jax(x, rate, order: int = 1, axis: int = 0) -> jax.Array:
    """Finite-difference derivative: :func:`jaxmb.signal.derivative` in JAX.

    Central stencils of ``2 * ((order + 1) // 2) + 1`` samples inside, one-sided
    stencils of ``order + 2`` samples at the ends; weights from the same Vandermonde
    solve (NumPy, eager), applied by slicing. ``rate``, ``order``, ``axis`` are static;
    ``x`` may be traced (jit, vmap).

    Args:
      x: samples, any shape, along ``axis``.
      rate: sampling rate, Hz.
      order: derivative order, 1 to 4.
      axis: the time axis.

    Returns:
      The ``order``-th derivative, the shape of ``x``; float32 stays float32.
    """
    rate = _signal._positive_rate(rate)
    if isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= 4:
        raise ValueError(f"order must be 1, 2, 3 or 4, got {order!r}")
    order = int(order)
    x = _float_input(x)
    axis = _signal._axis(axis, x.ndim)
    T = x.shape[axis]
    n = order + 2
    if T < n:
        raise ValueError(f"derivative of order {order} needs at least {n} samples, got {T}")
    h, central, ends = _derivative_stencils(order)
    scale = rate**order
    xt = jnp.moveaxis(x, axis, 0)
    dt = xt.dtype
    parts_start, parts_end = [], []
    for i in range(min(h, T)):
        w, w_end = ends[i]
        parts_start.append(_stencil(w, [xt[j] for j in range(n)], dt) * scale)
        parts_end.append(_stencil(w_end, [xt[T - n + j] for j in range(n)], dt) * scale)
    pieces = [p[None] for p in parts_start]
    if T > 2 * h:
        acc = None
        for j, wj in enumerate(central):
            if wj != 0.0:
                term = jnp.asarray(wj, dt) * xt[j : T - 2 * h + j]
                acc = term if acc is None else acc + term
        pieces.append(acc * scale)
    pieces += [p[None] for p in reversed(parts_end)]
    out = jnp.concatenate(pieces, axis=0)
    return jnp.moveaxis(out, 0, axis)


# ------------------------------------------------- trials of unequal length, one shape


def ragged_design(sos_list, n, padlen, block: int):
    """Per-trial matrices for :func:`ragged_sosfiltfilt`: trial b's filter
    ``sos_list[b]`` (second-order sections, all with as many sections) by blocks of
    ``block`` samples and its odd extension of ``padlen[b]`` samples (< ``n[b]``).

    Returns (mats, p): mats = (Tm (B, L, L), O (B, L, S), K (B, S, L), AL (B, S, S),
    zi (B, S)) as :func:`_block_matrices` and ``scipy.signal.sosfilt_zi`` give them
    for each trial, without the B axis where every trial has the same filter (the
    products are then a few matrix multiplications, not B small ones); p (B,) the
    padlens (int32)."""
    import scipy.signal as ss

    cache = {}
    per = []
    for sos in sos_list:
        sos = np.ascontiguousarray(sos, dtype=float)
        key = sos.tobytes()
        if key not in cache:
            Tm, O, K, AL = _block_matrices(key, len(sos), int(block))
            cache[key] = (Tm, O, K, AL, ss.sosfilt_zi(sos).reshape(-1))
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
