"""The compiled computation of :func:`jaxmb.gait.analyze`: filtering, resampling,
segment angles and lengths, derivatives, segment parameters and the dynamics, over
chunks of a few trials (equal-length trials, or trials of several lengths padded to
one shape, each filtered and differentiated within its own samples)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._math import precise_jit
from ..signal import derivative_jax, lowpass_design, lowpass_jax, ragged_derivative, ragged_design, ragged_sosfiltfilt
from ._dynamics import _atan2, _dynamics
from ._result import OUTPUTS



#: the defaults of the pipeline's filter (:func:`jaxmb.signal.sosfiltfilt_jax`'s
#: ``method`` and ``block``, the static arguments ``filter_method`` and
#: ``filter_block`` of :func:`_group_pipeline`) and the trials of one step of its loop
#: over the batch: a few trials at a time keep every intermediate array in the cache
#: (the comparison: docs/performance.md, "The gait pipeline's filter and chunks").
_FILTER_METHOD = "blocked"
_FILTER_BLOCK = 32
_CHUNK = 4


#: samples that one step of the loop over the batch takes on an accelerator (GPU,
#: TPU): there the chunks of 4 trials chosen for the CPU's cache would run a long
#: sequence of small steps (the filter alone is sequential over each trial's blocks
#: of samples), so a step takes as many trials as fit in 2^22 samples, an estimated
#: 4 GB of intermediates (about 1 kB a sample; a quarter of the samples with
#: terms=True), besides the whole batch's inputs and results (1.6 GB for 1,000
#: running trials). Not measured: no GPU was lent to the task that chose it.
_ACCELERATOR_SAMPLES = 2**22


def _filter_group(kin, frc, mz, *, rate, force_rate, cutoff, force_cutoff, order, padlen, method=_FILTER_METHOD,
                  block=_FILTER_BLOCK):
    """Low-pass the kinematics (B, T, c) (the joint centres' 8 coordinates, and the
    pelvis angle where given), the force channels (B, Tf, k) (Fx, Fy, the force's
    moment, the centre of pressure's height) and the free moment (B, Tf) or None,
    along time; one pass over all channels when the rates and cut-offs are the same."""
    kw = dict(order=order, axis=1, padlen=padlen, method=method, block=block)
    force_ch = [frc] + ([] if mz is None else [mz[..., None]])
    if cutoff is not None and cutoff == force_cutoff and rate == force_rate and kin.shape[1] == frc.shape[1]:
        y = lowpass_jax(jnp.concatenate([kin] + force_ch, -1), rate, cutoff, **kw)
        k, c = frc.shape[-1], kin.shape[-1]
        return y[..., :c], y[..., c : c + k], (None if mz is None else y[..., c + k])
    if cutoff is not None:
        kin = lowpass_jax(kin, rate, cutoff, **kw)
    if force_cutoff is not None:
        y = lowpass_jax(jnp.concatenate(force_ch, -1), force_rate, force_cutoff, **kw)
        k = frc.shape[-1]
        frc, mz = y[..., :k], (None if mz is None else y[..., k])
    return kin, frc, mz


def _platform() -> str:
    """The platform that ``analyze``'s NumPy inputs go to: that of
    ``jax.config.jax_default_device`` when set (``jax.default_device(...)``), else the
    default backend's."""
    dev = jax.config.jax_default_device
    if dev is None:
        return jax.default_backend()
    return dev if isinstance(dev, str) else dev.platform


def _pipeline_chunk(platform: str, frames: int, terms: bool = False) -> int:
    """Trials per step of the pipeline's loop over a batch of trials of ``frames``
    samples on ``platform`` ("cpu", "gpu", "tpu", ...): :data:`_CHUNK` on the CPU,
    :data:`_ACCELERATOR_SAMPLES` worth elsewhere (a quarter of it with ``terms``:
    four more inverse dynamics passes)."""
    if platform == "cpu":
        return _CHUNK
    samples = _ACCELERATOR_SAMPLES // (4 if terms else 1)
    return max(1, samples // max(1, frames))


def _chunk_size(B: int, target: int) -> int:
    """A divisor of B near ``target`` (no padded trials), or else the size of
    ``ceil(B / target)`` balanced chunks (fewer padded trials than chunks)."""
    if B <= target:
        return B
    for b in range(target, max(1, target // 2) - 1, -1):
        if B % b == 0:
            return b
    n = -(-B // target)
    return -(-B // n)


def _group_pipeline(pts, force, cop, mz, resample, seg, gravity, pelvis, ragged=None, *, rate, force_rate, cutoff,
                    force_cutoff, order, padlen, from_table, terms, outputs=OUTPUTS, chunk=_CHUNK,
                    pads=None, filter_method=_FILTER_METHOD, filter_block=_FILTER_BLOCK):  # fmt: skip
    """Equal-length trials, one jitted computation: filtering, resampling, angles,
    lengths, derivatives, segment parameters and the dynamics; the filter in a loop
    over chunks of ``chunk`` trials (:func:`_chunk_filtered`), the rest after it
    (:func:`_kinematics`, :func:`jaxmb.gait._dynamics._dynamics`).

    pts: (hip, knee, ankle, toe) joint centres (B, T, 2) each; force (B, Tf, 2); cop
    (B, Tf) (x on the ground) or (B, Tf, 2); mz (B, Tf) or None; resample: None or
    (i0, i1, w) (T,) to interpolate the force at the kinematics' samples; seg: (a, b,
    c) (B, 3) (see :func:`_segment_spec`); pelvis (B, T) or None. The inputs stay
    separate (NumPy arrays are passed as they are): stacking them here, inside each
    chunk, costs nothing, where a stack on the host is a copy of the whole batch.

    ``ragged``: None, or trials of unequal lengths and filters padded to one shape
    (see :func:`_ragged_inputs`): (frames (B,), force frames (B,), the kinematics'
    filter matrices and padlens or None, the force's or None, per-trial resampling
    (i0, i1, w) (B, T) or None); ``pads`` the largest padlens (static); ``cutoff``,
    ``force_cutoff``, ``padlen`` and ``resample`` are then unused. ``filter_method``,
    ``filter_block``: the filter's ``method`` and ``block`` (:func:`jaxmb.signal.sosfiltfilt_jax`)."""
    B = force.shape[0]
    b = _chunk_size(B, chunk)
    n = -(-B // b)
    shared = (None, None)
    if ragged is not None:  # a filter shared by every trial is not split into chunks
        nk, nf, kfilt, ffilt, res = ragged
        shared = tuple(None if f is None or f[0][0].ndim == 3 else f[0] for f in (kfilt, ffilt))
        kfilt, ffilt = (f if f is None or sh is None else (None, f[1]) for f, sh in zip((kfilt, ffilt), shared))
        ragged = (nk, nf, kfilt, ffilt, res)
    args = (pts, force, cop, mz, pelvis, ragged)
    # The loop over chunks of a few trials filters (its intermediates stay in the
    # cache); the angles, derivatives, segment parameters and dynamics run after it on
    # the whole step's trials: inside the loop, fusions that read sliced inputs and
    # write stacked outputs fell back from XLA:CPU's fast emitters (the dynamics alone
    # took twice as long there: docs/performance.md, "The gait pipeline's kernel").
    filt = dict(rate=rate, force_rate=force_rate, cutoff=cutoff, force_cutoff=force_cutoff, order=order,
                padlen=padlen, pads=pads, shared=shared, filter_method=filter_method,
                filter_block=filter_block)  # fmt: skip
    if n * b != B:  # pad the batch with copies of the first trial
        args = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, jnp.repeat(x[:1], n * b - B, 0)]), args)
    if n == 1:
        filtered = _chunk_filtered(*args, **filt)
    else:
        args = jax.tree_util.tree_map(lambda x: x.reshape((n, b) + x.shape[1:]), args)
        filtered = jax.lax.map(lambda a: _chunk_filtered(*a, **filt), args)
        filtered = jax.tree_util.tree_map(lambda x: x.reshape((n * b,) + x.shape[2:]), filtered)
    if n * b != B:
        filtered = jax.tree_util.tree_map(lambda x: x[:B], filtered)
    dyn, out = _kinematics(*filtered, seg, ragged, resample, rate=rate, from_table=from_table, terms=terms,
                           outputs=outputs)  # fmt: skip
    params = (dyn.pop("lengths"), dyn.pop("com"), dyn.pop("mass"), dyn.pop("inertia"), gravity)
    out.update(_dynamics(params, **dyn, terms=terms, outputs=outputs))
    return out


def _chunk_filtered(pts, force, cop, mz, pelvis, ragged, *, rate, force_rate, cutoff, force_cutoff, order, padlen,
                    pads=None, shared=(None, None), filter_method=_FILTER_METHOD, filter_block=_FILTER_BLOCK):  # fmt: skip
    """The filtering stage of :func:`_group_pipeline` on one chunk of trials (the same
    arguments; ``shared``: the kinematics' and the force's filter matrices where every
    trial has the same, else None and the matrices are in ``ragged``): (joint centres
    (B, T, 4, 2), force channels (B, Tf, 3 or 4): Fx, Fy, the moment about ``ref``
    and the centre of pressure's height where given, free moment (B, Tf) or None,
    pelvis (B, T) or None, ref (B, 2)), filtered, the samples past a ragged trial's
    end zero before filtering."""
    if ragged is not None:
        nk, nf, kfilt, ffilt, _ = ragged
        valid = jnp.arange(pts[0].shape[1])[None] < nk[:, None]  # (B, T)
        fvalid = jnp.arange(force.shape[1])[None] < nf[:, None]  # (B, Tf)

        def zero_after(x, ok):  # NaN or anything after a trial's end -> 0 (a select: no NaN passes)
            return jnp.where(ok.reshape(ok.shape + (1,) * (x.ndim - 2)), x, 0)

        pts = tuple(zero_after(a, valid) for a in pts)
        force, cop = zero_after(force, fvalid), zero_after(cop, fvalid)
        mz = None if mz is None else zero_after(mz, fvalid)
        pelvis = None if pelvis is None else zero_after(pelvis, valid)

    kin = jnp.stack(pts, axis=-2)  # (B, T, 4, 2)
    # The force's moment about a point r of each trial is filtered, not the centre of
    # pressure p (why: analyze's docstring, "Filtering"). r: the mean centre of
    # pressure weighted by |Fy|, so that the moment stays small (float32).
    cx = cop if cop.ndim == 2 else cop[..., 0]
    cy = jnp.zeros_like(cx) if cop.ndim == 2 else cop[..., 1]
    fx, fy = force[..., 0], force[..., 1]
    wt = jnp.abs(fy)
    wsum = jnp.sum(wt, axis=1)
    wsafe = jnp.where(wsum > 0, wsum, 1.0)
    ref = jnp.stack([jnp.sum(wt * cx, 1) / wsafe, jnp.sum(wt * cy, 1) / wsafe], -1)  # (B, 2)
    m_ref = (cx - ref[:, :1]) * fy - (cy - ref[:, 1:]) * fx
    # (B, Tf, 3) Fx, Fy, moment about r, and COPy where it is given (for the "cop" output)
    chans = [fx, fy, m_ref] + ([] if cop.ndim == 2 else [cy])
    frc = jnp.stack(chans, -1)
    B, T = kin.shape[:2]
    kin = kin.reshape(B, T, 8)
    if pelvis is not None:  # kinematics too: filtered with the joint centres
        kin = jnp.concatenate([kin, pelvis[..., None].astype(kin.dtype)], -1)
    if ragged is None:
        kin, frc, mz = _filter_group(kin, frc, mz, rate=rate, force_rate=force_rate, cutoff=cutoff,
                                     force_cutoff=force_cutoff, order=order, padlen=padlen, method=filter_method,
                                     block=filter_block)  # fmt: skip
    else:  # each trial in its own length, with its own filter
        if kfilt is not None:
            kin = ragged_sosfiltfilt(kin, nk, kfilt[1], shared[0] or kfilt[0], pads[0])
        if ffilt is not None:
            k = frc.shape[-1]
            y = ragged_sosfiltfilt(jnp.concatenate([frc] + ([] if mz is None else [mz[..., None]]), -1), nf,
                                   ffilt[1], shared[1] or ffilt[0], pads[1])  # fmt: skip
            frc, mz = y[..., :k], (None if mz is None else y[..., k])
    if pelvis is not None:
        kin, pelvis = kin[..., :8], kin[..., 8]
    kin = kin.reshape(B, T, 4, 2)
    return kin, frc, mz, pelvis, ref


def _kinematics(kin, frc, mz, pelvis, ref, seg, ragged, resample, *, rate, from_table, terms, outputs):
    """The stage of :func:`_group_pipeline` after the filter, on the step's trials:
    the force resampled to the kinematics, the centre of pressure, segment angles and
    lengths, derivatives and segment parameters (the arguments: :func:`_chunk_filtered`'s
    results, then :func:`_group_pipeline`'s). Returns (the keyword arguments of
    :func:`_dynamics` but ``params``, with the segment parameters ``lengths``,
    ``com``, ``mass``, ``inertia`` instead; the outputs that are not the dynamics')."""
    valid = None
    if ragged is not None:
        nk, _, _, _, resample = ragged
        valid = jnp.arange(kin.shape[1])[None] < nk[:, None]  # (B, T)
    if resample is not None:
        i0, i1, w = resample
        if ragged is None:  # one (T,) resampling for the group
            frc = frc[:, i0] * (1 - w)[:, None] + frc[:, i1] * w[:, None]
            mz = None if mz is None else mz[:, i0] * (1 - w) + mz[:, i1] * w
        else:  # (B, T): each trial's own

            def at(x, i):
                return jnp.take_along_axis(x, i.reshape(i.shape + (1,) * (x.ndim - 2)), axis=1, mode="clip")

            frc = at(frc, i0) * (1 - w)[..., None] + at(frc, i1) * w[..., None]
            mz = None if mz is None else at(mz, i0) * (1 - w) + at(mz, i1) * w
    m_ref = frc[..., 2]
    height = frc[..., 3] if frc.shape[-1] == 4 else jnp.zeros_like(m_ref)
    cop_out = _line_of_action(frc[..., 0], frc[..., 1], m_ref, height, ref, valid) if "cop" in outputs else None
    # the force at r and its moment about r: the same wrench
    frc = jnp.stack([frc[..., 0], frc[..., 1]] + [jnp.broadcast_to(ref[:, None, i], m_ref.shape) for i in (0, 1)], -1)
    mz = m_ref if mz is None else mz + m_ref
    seg_v = kin[:, :, 1:] - kin[:, :, :-1]  # (B, T, 3, 2) thigh, shank, foot
    theta = _atan2(seg_v[..., 1], seg_v[..., 0])
    # unwrap only where a jump of more than pi needs it (rare; a cumulative sum over time)
    jump = jnp.any(jnp.abs(jnp.diff(theta, axis=1)) > jnp.pi)
    theta = jax.lax.cond(jump, lambda t: jnp.unwrap(t, axis=1), lambda t: t, theta)
    theta = theta - 2 * jnp.pi * jnp.round(theta[:, :1] / (2 * jnp.pi))
    seg_len = jnp.sqrt(jnp.sum(seg_v**2, -1))  # (B, T, 3)
    if ragged is None:
        lengths = jnp.mean(seg_len, axis=1)  # (B, 3)
    else:
        lengths = jnp.sum(jnp.where(valid[..., None], seg_len, 0), axis=1) / nk[:, None].astype(seg_len.dtype)
    q = jnp.concatenate([kin[:, :, 0], theta], axis=-1)  # floating base at the hip
    if ragged is None:
        deriv = functools.partial(derivative_jax, rate=rate, axis=1)
    else:
        deriv = lambda x, order: ragged_derivative(x, rate, order, nk)  # noqa: E731
    qd = deriv(q, order=1)
    qdd = deriv(q, order=2)
    a, b, c = seg
    mass = a
    inertia = a * (b * lengths) ** 2 if from_table else b
    com = c * lengths
    pel_rate = None if pelvis is None else deriv(pelvis, order=1)
    dyn = dict(lengths=lengths, com=com, mass=mass, inertia=inertia, q=q, qd=qd, qdd=qdd, frc=frc, mz=mz,
               pelvis=pelvis, pelvis_rate=pel_rate)  # fmt: skip
    out = {}
    if "segment_angles" in outputs:
        out["segment_angles"] = theta
    if terms or "force" in outputs:
        out["force"] = frc[..., :2]
    if "cop" in outputs:
        out["cop"] = cop_out
    out.update(lengths=lengths, mass=mass, inertia=inertia, com=com)
    return dyn, out


#: N: below this vertical force the "cop" output of analyze is held (the centre of
#: pressure of a force that small is ill-defined; read_c3d's threshold, too).
_COP_FORCE = 20.0


def _line_of_action(fx, fy, m_ref, height, ref, valid=None):
    """The centre of pressure (B, T, 2) of the filtered force: the point at ``height``
    on its line of action, (p - ref) x F = m_ref; where Fy <= _COP_FORCE, held at the
    next such point (the last one at the end; ``ref`` in a trial without one).
    ``valid``: None, or (B, T) the samples of each trial (the rest never held)."""
    ok = fy > _COP_FORCE
    if valid is not None:
        ok = ok & valid
    x = ref[:, :1] + (m_ref + (height - ref[:, 1:]) * fx) / jnp.where(ok, fy, 1.0)
    T = fy.shape[1]
    i = jnp.arange(T)
    nxt = jax.lax.cummin(jnp.where(ok, i, T), axis=1, reverse=True)
    prev = jax.lax.cummax(jnp.where(ok, i, -1), axis=1)
    j = jnp.where(nxt < T, nxt, jnp.maximum(prev, 0))
    held = jnp.take_along_axis(jnp.stack([x, height], -1), jnp.broadcast_to(j[..., None], j.shape + (2,)), axis=1)
    any_ok = jnp.any(ok, axis=1)[:, None, None]
    return jnp.where(any_ok, held, jnp.broadcast_to(ref[:, None], held.shape))


def _bucket(n: int) -> int:
    """n rounded up to m 2^k with 8 <= m <= 16 (n itself up to 16): at most 12.5 %
    more, and few distinct sizes (the shapes of a compiled computation)."""
    n = int(n)
    if n <= 16:
        return n
    k = n.bit_length() - 4
    return -(-n >> k) << k


def _ragged_inputs(keys, resamples, B, T, Tb, Tf, *, rate, force_rate, same, force_cutoff, order, padlen,
                   block=_FILTER_BLOCK):
    """The ``ragged`` argument of :func:`_group_pipeline` for trials in several groups
    ``keys`` {(frames, force frames, cut-off or None): [trials]} (and their
    ``resamples``, as analyze makes them), and the largest padlens (kinematics,
    force). T, Tf: the longest trial's samples and force samples; Tb: the
    kinematics' width in the computation. Each trial's filter and padlen are those
    of the trial alone."""
    nk, nf = np.zeros(B, np.int32), np.zeros(B, np.int32)
    kcut, fcut = [None] * B, [None] * B
    res = None
    if force_rate != rate or Tf != T or any(r is not None for r in resamples.values()):
        res = (np.zeros((B, Tb), np.int32), np.zeros((B, Tb), np.int32), np.zeros((B, Tb)))
    for (k, f, c), idx in keys.items():
        idx = np.asarray(idx)
        nk[idx], nf[idx] = k, f
        for b in idx:
            kcut[b], fcut[b] = c, (c if same else force_cutoff)
        if res is not None:
            i0, i1, w = resamples[k, f, c] or (np.arange(k), np.arange(k), np.zeros(k))
            res[0][idx, :k], res[1][idx, :k], res[2][idx, :k] = i0, i1, w

    def filt(cuts, r, n):
        if cuts[0] is None:  # every trial's or none's
            return None, 0
        design = {}  # one per cut-off and length
        for c, m in zip(cuts, n):
            if (c, int(m)) not in design:
                design[c, int(m)] = lowpass_design(r, c, order, False, padlen, int(m))
        designs = [design[c, int(m)] for c, m in zip(cuts, n)]
        mats, p = ragged_design([d[0] for d in designs], n, [d[1] for d in designs], block)
        return (mats, p), int(p.max())

    kfilt, kp = filt(kcut, rate, nk)
    ffilt, fp = filt(fcut, force_rate, nf)
    return (nk, nf, kfilt, ffilt, res), (kp, fp)


def _outputs(outputs, terms) -> tuple:
    """``analyze``'s ``outputs=`` as a sorted tuple of names of :data:`OUTPUTS`."""
    if outputs is None:
        return OUTPUTS
    names = (outputs,) if isinstance(outputs, str) else tuple(outputs)
    bad = [n for n in names if n not in OUTPUTS]
    if bad or not names:
        raise ValueError(f"outputs must be names from {OUTPUTS}, got {outputs!r}")
    if terms:
        names += ("moments", "reactions", "force")
    return tuple(sorted(set(names), key=OUTPUTS.index))


@functools.lru_cache(maxsize=None)
def _jitted(**static):
    return precise_jit(functools.partial(_group_pipeline, **static))
