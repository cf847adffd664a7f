"""The recursion of a cascade of second-order sections in JAX, four ways (a scan per
sample, blocks as matrix products, blocks run side by side from a zero state, the
same cut in place along the time axis), and the matrices of the block and pad
states that they take from the state-space form of the cascade."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from ._design import _scipy_signal


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

    H, O, _, _ = _block_matrices(sos_bytes, n_sections, n)
    K, An = _pad_matrices(sos_bytes, n_sections, n)
    P = K[:, ::-1].copy()
    P[:, -1] += An @ _scipy_signal().sosfilt_zi(sos).reshape(-1)
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

