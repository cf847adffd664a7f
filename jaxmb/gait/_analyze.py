"""The entry point :func:`analyze`: check inputs -> choose cut-offs -> group trials ->
run the compiled pipeline -> package the result."""

from __future__ import annotations

import math

import jax
import numpy as np

from ..datasets import SEGMENTS
from ..signal import lowpass_design, warn_unsettled
from . import _pipeline, _steps
from ._cutoffs import _cutoffs, _filter_settings
from ._inputs import _check_options, _per_trial, _resample_index, _segment_spec, _trials
from ._result import OUTPUTS, GaitResult, _clinical_in_place


def analyze(
    hip,
    knee,
    ankle,
    toe,
    force,
    cop,
    rate,
    *,
    segments=None,
    body_mass=None,
    height=None,
    table: str = "dempster",
    force_rate=None,
    free_moment=None,
    cutoff=None,
    force_cutoff="same",
    order: int = 2,
    padlen="auto",
    filter=None,
    gravity: float = 9.81,
    pelvis=None,
    frames=None,
    force_frames=None,
    convention: str = "jaxmb",
    terms: bool = False,
    outputs=None,
    dtype: str = "float64",
    out=None,
) -> GaitResult:
    """Joint angles, moments, powers and reaction forces of the leg in the sagittal plane.

    The main arguments, used day to day, are the joint centres, the force and centre
    of pressure, the rates, ``body_mass`` (or ``segments``), ``cutoff``, ``convention``
    and ``outputs`` (Args); the others (Other Args) tune the filter, the model and the
    computation.

    The leg is a floating-base chain thigh (hip -> knee), shank (knee -> ankle), foot
    (ankle -> toe), with absolute segment angles from the joint centres and segment
    lengths their mean distances. The ground reaction force acts on the foot at the
    centre of pressure. Newton-Euler inverse dynamics (:func:`jaxmb.joint_loads`, or
    :func:`jaxmb.joint_moments` or :func:`jaxmb.joint_reactions` when ``outputs``
    needs only one of them) then gives, from the ground up, the ankle, knee and hip
    loads: the notebook's segment-by-segment ``invdyn2d``, on jaxmb's core.

    **Filtering.** ``cutoff=None`` (default) filters nothing: right for noise-free
    data (the bundled simulated running data: the notebook, too, filters nothing and
    takes plain second differences) and for data that are already filtered. A number
    filters the joint centres *and*, by default (``force_cutoff="same"``), the force
    and its moment with the same zero-phase Butterworth filter
    (:func:`jaxmb.signal.lowpass`, ``order``, no cut-off correction), its start-up
    transient settled by an odd extension of each trial as long as the filter's
    memory (``padlen="auto"``, about two periods of the cut-off: scipy's default of
    9 samples is too short at kHz rates, see ``padlen``). The force's
    moment about a point of the trial, (p - r) x F + free moment, is filtered, not
    the centre of pressure p: it is linear in the data and zero where the force is,
    where p is undefined, and a few newtons at the edges of a contact with p
    decimetres off (as plates measure it) weigh as little as they should. A filtered
    centre of pressure would carry the force that the filter spreads around the
    contact to wherever p was held before it (the first loaded sample of a heel
    strike can put p 0.3 m behind the heel); filtering the moment, the early-stance
    peaks are the same whether the plates count as loaded from 20 or from 30 N
    (docs/verification.md). The ``cop`` output is the
    point of the filtered force's line of action at the filtered height of the
    centre of pressure (the input itself where nothing is filtered), held where the
    vertical force is 20 N or less.
    Filtering the kinematics but not the force (or at different cut-offs) makes the
    inertial terms, computed from smoothed accelerations, miss the impact peak that
    the unfiltered force still holds, and the moments at heel strike get large
    spurious peaks (van den Bogert & de Koning 1996; Kristianslund, Krosshaug & van den
    Bogert 2012): the same cut-off keeps the two consistent. ``cutoff="auto"`` runs
    Winter's residual analysis (:func:`jaxmb.signal.residual_analysis`) on the eight
    joint-centre coordinates of each trial and takes the highest of their cut-offs
    (no coordinate is over-smoothed), for kinematics and force alike.

    **Sign conventions.** ``convention="jaxmb"`` (default): every angle, velocity and
    moment is counter-clockwise positive seen with x forward and y up (from the
    subject's right when walking toward +x): angles are those of the distal segment
    relative to the proximal one (the hip's from the pelvis's downward axis, or the
    downward vertical without ``pelvis``; the ankle is pi/2 with the foot axis at right
    angles to the shank), moments are those the proximal segment exerts on the distal
    one, as :func:`jaxmb.joint_moments` defines them (and as the running data's true
    moments are given). ``convention="clinical"``: hip flexion, knee flexion, ankle
    dorsiflexion positive (zero when the foot axis is at right angles to the shank),
    and hip extensor, knee extensor, ankle plantarflexor moments positive (Winter's
    convention): clinical = (+1, -1, +1) * jaxmb angles (minus pi/2 at the ankle) and
    (-1, +1, -1) * jaxmb moments. Powers (W) are the same in both: the jaxmb moment
    times the jaxmb angular velocity, which is minus the clinical moment times the
    clinical angular velocity (the clinical signs make moments positive toward
    extension and angles toward flexion, opposite senses at every joint). Both legs
    are seen from the subject's right: a left leg needs no mirroring (:func:`sagittal`
    gives either side as is); only a subject walking toward -x must be mirrored
    first (x -> -x).

    **Batches.** Every input may have leading batch axes (``(..., T, 2)``; ``rate``,
    ``gravity`` shared; ``segments`` arrays ``(3,)`` or ``(..., 3)``; ``body_mass``
    ``()`` or ``(...)``): trials of equal length run in one jitted computation. Trials
    of unequal length: give lists of per-trial arrays (padded here), or padded arrays
    with ``frames`` ``(...,)`` valid samples per trial (and ``force_frames``, valid
    force samples, for a force at another rate); the padding is ignored, and samples
    past ``frames`` are NaN in the result and False in ``result.mask``. Trials of
    several lengths or cut-offs (``cutoff="auto"`` gives each trial its own) run in
    one compiled computation, each trial filtered (its own odd extension, at its own
    end) and differentiated (its own end stencils) within its own frames: the same
    values as the trial alone, to float64 rounding (unfiltered, 1e-15 of a peak;
    filtered, the block filter's own order of operations, amplified by second
    differences: about 1e-11 of a peak at 1 kHz and up to 6e-8 at 10 kHz). That computation compiles once for a batch's shapes, each
    rounded up (the trials above 16, the longest trial's samples and force samples
    to a size within 12.5 %, the longest odd extension to a power of 2), so that
    the next batch of similar trials reuses it; compiling it per length, as a loop
    over the trials does, costs seconds a length on a CPU. Its run time is up to about 1.5x that of as
    many trials of one length (each trial's extension filtered in full, gathers
    at its ends). Inside, a loop takes a few trials at a
    time on the CPU (4: their intermediates stay in the cache) and up to 2^22 samples
    worth of trials a step on a GPU or TPU (chosen without a GPU to measure it). On
    the CPU, trials of one length run through the compiled computation about 2^16
    samples at a time (8 trials of 6,001 frames), each step's outputs copied into
    result arrays allocated once: the time per trial does not grow with the batch,
    and the memory is the inputs and results plus a few MB; ``out=`` writes the
    results to memory-mapped files instead, for batches whose results do not fit
    in memory. The memory of a result that is no longer referenced (no array or
    view of it left) is kept for the next call's result of the same shapes: fresh
    memory costs a page fault per page, as long as the computation for a large batch.
    At most one result's worth is kept; :func:`jaxmb.gait.release_memory` frees it.

    Args:
      hip, knee, ankle, toe: (..., T, 2) joint centres (x forward, y up), m; ``toe``
        is the distal end of the foot's axis (the foot's length runs ankle -> toe).
      force: (..., Tf, 2) ground reaction force (Fx, Fy) on the foot, N.
      cop: (..., Tf) centre-of-pressure x on the ground (y = 0) or (..., Tf, 2) (x, y), m.
      rate: kinematics sampling rate, Hz.
      body_mass: kg, () or (...): for ``segments=None`` and for the per-kilogram views.
      segments: {"mass": kg, "inertia": kg m^2 about the centre of mass, "com":
        fraction of the segment length from the proximal joint}, each (3,) or
        (..., 3) for thigh, shank, foot. Default: from ``body_mass`` and ``table``
        (mass fraction, centre-of-mass fraction and radius of gyration of Dempster's
        thigh, leg and foot rows as Winter tabulates them) with the measured lengths.
      cutoff: None (no filtering), a cut-off in Hz, or "auto" (see above).
      force_rate: force sampling rate, Hz (default ``rate``); the force is filtered
        at its own rate, then linearly interpolated to the kinematics' samples.
      convention: "jaxmb" or "clinical".
      outputs: None (default: every per-sample result) or a name or names from
        :data:`OUTPUTS`: only those are computed and returned, the other
        per-sample fields of the result are None (``time``, ``mask``, ``frames``
        and ``segments`` are always there). For large batches: the whole result
        is 34 float64 values a frame (1.6 GB for 1,000 trials of 6,001 frames),
        ``outputs=("moments", "reactions")`` 9; the inverse dynamics returns
        only the moments or only the reactions when no output needs the other.

    Other Args:
      height: m, () or (...): recorded in the result (for normalisations).
      table: anthropometric table for ``segments=None`` ("dempster", "deleva_male",
        "deleva_female").
      free_moment: optional (..., Tf) moment about the axis normal to the plane
        (Mz, counter-clockwise) applied to the foot with the force, N m. At a
        centre of pressure on the ground it is zero in the sagittal plane (a plate's
        "free moment" acts about the vertical and has no sagittal component); give
        it when the force is reported at another point.
      force_cutoff: "same" (default: ``cutoff``), None (unfiltered) or Hz.
      order: Butterworth order of one pass (2: a 4th-order zero-phase filter).
      padlen: the filter's odd extension at each end of a trial, samples: "auto"
        (default: :func:`jaxmb.signal.settling_samples`, in which the filter's
        slowest mode decays by 1e-4, about 2 periods of the cut-off for ``order=2``,
        at most the trial's length less one; a UserWarning where a cut-off is so
        low that the transient outlasts the trial), None (scipy's ``3 * (order + 1)``) or
        an int; see :func:`jaxmb.signal.lowpass`. Scipy's 9 samples are short at
      filter: a :class:`Filter` (``cutoff``, ``force_cutoff``, ``order``, ``padlen`` as
        one value), instead of those keywords.
        high rates: the bundled 10 kHz running data filtered at 30 Hz have a hip
        moment RMS error of 96 N m with them (edge transients in the last and first
        20 ms) and 2.2 N m with "auto".
      gravity: m/s^2 (9.80665 for the running data).
      pelvis: optional (..., T) pelvis angle, rad, CCW: the hip angle and hip power
        are taken relative to it (default: a pelvis that does not rotate); filtered
        with the joint centres (``cutoff``).
      frames: optional (...) int, valid samples per trial of padded inputs.
      force_frames: optional (...) int, valid force samples per trial of padded
        inputs (the samples past them are ignored: NaN or anything). Default:
        without ``frames`` every sample; with ``frames`` and as many force samples
        as kinematics ones, ``frames``; with ``frames`` and a force at another rate,
        the force samples within each trial's valid kinematics, ``floor((frames -
        1) * force_rate / rate) + 1``. A trial whose force runs past its last frame
        (a 0.45 s trial at 100 Hz with 450 samples at 1 kHz: 441 by default) gives
        them here, so that the filter sees the same samples as for the trial alone.
      terms: also return the contribution of each term (:data:`TERMS`) in
        ``result.terms`` (for :func:`term_effects`; four more inverse dynamics passes;
        implies ``"moments"``, ``"reactions"`` and ``"force"`` in ``outputs``).
      dtype: "float64" (default: computed in float64 whatever JAX's 64-bit
        setting, in a scoped ``jax.enable_x64``) or "float32" (JAX's 32-bit mode:
        half the memory traffic, for accelerators). Float32 suits lab rates: at
        200 Hz every output of the running data (121 frames) stays within 1e-3 of
        its peak of float64's; short trials with small peaks
        lose more (a 17-frame swing, unfiltered: 3 % of its 1 N m peak moment, as
        the trial alone or in a batch). It does not suit kHz rates: second
        differences of positions cancel (at 10 kHz, RMS moment errors of 23, 6.8
        and 0.19 N m against the truth, instead of float64's 0.13, 0.07 and 0.011).
      out: None (default: the results in memory) or a folder (created if missing):
        each per-sample output is written there as ``<name>.npy`` (``moments.npy``,
        ``reactions.npy``, ..., ``terms_<term>_moments.npy`` with ``terms``), step by
        step as it is computed, and the result's arrays are those files,
        memory-mapped (``np.load(path, mmap_mode="r")`` reads them later). For
        batches whose results do not fit in memory (the whole result is 34 float64
        values a frame). Files of the same names are replaced; each is written as
        ``<name>.npy.partial`` and renamed when the result is complete (an error
        leaves no file). Trials of one length and cut-off only.


    Returns:
      :class:`GaitResult`: its per-sample arrays (:data:`OUTPUTS`, ``terms``) and
      ``segments`` in ``dtype``, ``time`` in float64.

    Raises:
      ValueError: inconsistent shapes, NaN in the valid samples, a cut-off at or
        above a Nyquist frequency, non-positive masses, rates or lengths, missing
        segment parameters, an unknown convention, ``out`` not a folder or given
        for trials of several lengths or cut-offs.
    """
    rate, force_rate, gravity = _check_options(convention, dtype, rate, force_rate, gravity)
    outputs = _pipeline._outputs(outputs, terms)
    out_dir = _steps._out_folder(out)
    trials = _trials(hip, knee, ankle, toe, force, cop, free_moment, pelvis, frames, force_frames, rate, force_rate)
    cuts = _cutoffs(trials, *_filter_settings(filter, cutoff, force_cutoff, order, padlen), rate, force_rate)
    seg = _segment_spec(segments, body_mass, table, trials.lead)
    groups, resamples = _groups(trials, cuts, rate, force_rate)
    if len(groups) > 1 and out_dir is not None:
        raise ValueError(f"out= takes trials of one length and cut-off; these come in {len(groups)} groups "
                         "(lengths, cut-offs): analyze each group with its own out=")  # fmt: skip
    static = dict(rate=rate, force_rate=force_rate, order=cuts.order, from_table=seg[3], terms=bool(terms),
                  outputs=outputs)  # fmt: skip
    files = {}  # out=: each output's .npy.partial -> its .npy, renamed when the result is complete
    try:
        with jax.enable_x64(dtype == "float64"):  # float64 whatever JAX's global setting, unless float32 is asked
            if len(groups) > 1:
                got = _run_groups(trials, cuts, groups, resamples, seg[:3], gravity, static)
            else:
                got = _run_group(trials, cuts, groups, resamples, seg[:3], gravity, static, out_dir, files)
        result = _package(got, trials, cuts, rate, body_mass, height, convention, bool(terms))
    except BaseException:  # an interrupted run or a bad result leaves no partly written file
        _steps._remove(files)
        raise
    _steps._publish(files)
    return result


def _groups(trials, cuts, rate: float, force_rate: float) -> tuple:
    """The trials grouped by (frames, force frames, cut-off or None): ({key: [trials]},
    {key: the force's resampling (i0, i1, w) or None}); each group checked long
    enough to filter, with a UserWarning where its cut-off is too low to settle."""
    B = len(trials.frames)
    keys = {}
    for b in range(B):
        # None, not NaN, for "no filter": NaN != NaN would give every trial its own group
        c = None if math.isnan(cuts.trial[b]) else float(cuts.trial[b])
        keys.setdefault((int(trials.frames[b]), int(trials.force_frames[b]), c), []).append(b)
    resamples = {}
    for (nk, nf, c), idx in keys.items():
        fc = c if cuts.same else cuts.force_cutoff
        resample = None
        if force_rate != rate or nf != nk:
            try:
                resample = _resample_index(nk, rate, nf, force_rate, "the force")
            except ValueError as e:
                raise ValueError(f"{e} (trials of {nk} samples)") from None
        resamples[nk, nf, c] = resample
        for cut, n in ((c, nk), (fc, nf)):
            if cut is not None and n <= cuts.least:
                raise ValueError(f"trials of {n} samples are too short to filter (more than {cuts.least} needed)")
        for cut, r, n in ((c, rate, nk), (fc, force_rate, nf)):
            # a cut-off too low for the trial: its padding cannot hold the transient
            if cuts.padlen == "auto" and cut is not None:
                sos = lowpass_design(r, cut, cuts.order, False, None, n)[0]
                what = "trial"
                if B > 1:  # which ones, as "(trial b)" in the errors
                    s = "s" * (len(idx) > 1)
                    what = f"trial{s} (trial{s} {', '.join(map(str, idx))})"
                if warn_unsettled(sos, n, r, cut, stacklevel=4, what=what):
                    break
    return keys, resamples


def _run_group(trials, cuts, groups, resamples, seg, gravity, static, out_dir, files) -> dict:
    """Trials of one length and cut-off: the compiled pipeline run step by step over
    the batch (:func:`jaxmb.gait._steps._run_steps`); {output path: (B, ...) array}."""
    (((nk, nf, c), _),) = groups.items()
    fc = c if cuts.same else cuts.force_cutoff
    B, T, _ = trials.shape
    platform = _pipeline._platform()
    chunk = _pipeline._pipeline_chunk(platform, nk, static["terms"])
    fn = _pipeline._jitted(**static, cutoff=c, force_cutoff=fc, padlen=cuts.padlen, chunk=chunk)
    step = _steps._step_trials(platform, nk, chunk, B)
    resample, mz, PT = resamples[nk, nf, c], trials.free_moment, trials.points

    def args(s, e):  # trials s:e (views where no padding), cut to the group's samples
        def pick(x, n=None):
            return _steps._rows(x, s, e, step, n)

        return (tuple(pick(a, nk) for a in PT), pick(trials.force, nf), pick(trials.cop, nf), pick(mz, nf), resample,
                tuple(pick(x) for x in seg), np.float64(gravity), pick(trials.pelvis, nk))  # fmt: skip

    return _steps._run_steps(fn, args, B, step, T, nk, out_dir, files)


def _run_groups(trials, cuts, groups, resamples, seg, gravity, static) -> dict:
    """Trials of several lengths or cut-offs: one compiled computation for all, each
    trial filtered and differentiated within its own frames, on arrays as wide as the
    longest trial; each shape rounded up (trials and samples to within 12.5 %,
    ``_bucket``; the longest odd extensions to a power of 2), so that the next batch
    of similar trials can reuse it. {output path: (B, ...) array}."""
    B, T, _ = trials.shape
    Tu, Tfu = int(trials.frames.max()), int(trials.force_frames.max())
    Bb, Tb, Tfb = _pipeline._bucket(B), _pipeline._bucket(Tu), _pipeline._bucket(Tfu)
    ragged_in, pads = _pipeline._ragged_inputs(groups, resamples, B, Tu, Tb, Tfu, rate=static["rate"],
                                               force_rate=static["force_rate"], same=cuts.same,
                                               force_cutoff=cuts.force_cutoff, order=cuts.order,
                                               padlen=cuts.padlen)  # fmt: skip
    pads = tuple(0 if p == 0 else 1 << (p - 1).bit_length() for p in pads)

    def grow(x, n_time=None):  # more trials (copies of the last); samples cut or added (ignored)
        if x is None:
            return None
        x = np.asarray(x)
        width = [(0, Bb - B)] + [(0, 0)] * (x.ndim - 1)
        if n_time is not None:
            x = x[:, :n_time]
            width[1] = (0, n_time - x.shape[1])
        return np.pad(x, width, mode="edge") if any(w[1] for w in width) else x

    nk_, nf_, kfilt, ffilt, res = ragged_in
    kfilt, ffilt = (None if f is None else ((f[0] if f[0][0].ndim == 2 else tuple(map(grow, f[0]))), grow(f[1]))
                    for f in (kfilt, ffilt))  # fmt: skip
    ragged_in = (grow(nk_), grow(nf_), kfilt, ffilt, None if res is None else tuple(map(grow, res)))
    chunk = _pipeline._pipeline_chunk(_pipeline._platform(), Tb + 2 * max(pads), static["terms"])
    fn = _pipeline._jitted(**static, cutoff=None, force_cutoff=None, padlen=None, chunk=chunk, pads=pads)
    got = fn(tuple(grow(a, Tb) for a in trials.points), grow(trials.force, Tfb), grow(trials.cop, Tfb),
             grow(trials.free_moment, Tfb), None, tuple(grow(x) for x in seg), np.float64(gravity),
             grow(trials.pelvis, Tb), ragged_in)  # fmt: skip
    out = {}
    for path, v in jax.tree_util.tree_flatten_with_path(got)[0]:
        v = np.asarray(v)[:B]
        if v.ndim >= 2 and v.shape[1] == Tb:  # per sample: back to the inputs' width
            v = v[:, :Tu]
            if Tu < T:
                v = np.concatenate([v, np.full((B, T - Tu) + v.shape[2:], np.nan, v.dtype)], 1)
        out[path] = v
    return out


def _package(out, trials, cuts, rate: float, body_mass, height, convention: str, terms: bool) -> GaitResult:
    """analyze's GaitResult from the pipeline's outputs ``out`` {path: (B, ...) array}:
    checks the segment lengths, masks the samples past each trial's frames (NaN, in
    place where the arrays are analyze's own) and applies the ``convention``."""
    kmask, lead, kin_frames = trials.mask, trials.lead, trials.frames
    B, T, _ = trials.shape
    res = {jax.tree_util.keystr(k[:1]).strip("[]'"): v for k, v in out.items() if len(k) == 1}
    lengths = res["lengths"]
    if (lengths <= 0).any() or not np.isfinite(lengths).all():
        b, j = (int(i) for i in np.argwhere(~(lengths > 0))[0])
        raise ValueError(f"the {SEGMENTS[j]} has zero length (trial {b}): check the joint centres")
    mass, inertia, com = res["mass"], res["inertia"], res["com"]
    term_out = None
    if terms:
        tpaths = {}
        for k, v in out.items():
            if len(k) == 3:  # ("terms", name, 0/1)
                tpaths.setdefault(k[1].key, [None, None])[k[2].idx] = v

    full = bool(kmask.all())

    def shaped(x):
        if x is None:
            return None
        if not full and x.flags.writeable:  # analyze's own array: no copy (a memory-mapped file too)
            x[~kmask] = np.nan
        elif not full:
            x = np.where(kmask.reshape((B, T) + (1,) * (x.ndim - 2)), x, np.nan)
        return x.reshape(lead + x.shape[1:])

    if terms:
        term_out = {k: (shaped(m_), shaped(r_)) for k, (m_, r_) in tpaths.items()}
    got = {k: shaped(res.get(k)) for k in OUTPUTS}
    kin_cut = (cuts.trial.reshape(lead) if lead else float(cuts.trial[0])) if cuts.auto else cuts.cutoff
    result = GaitResult(
        time=np.arange(T) / rate,
        **got,
        mask=kmask.reshape(lead + (T,)),
        frames=kin_frames.reshape(lead) if lead else int(kin_frames[0]),
        rate=rate,
        cutoff=kin_cut,
        force_cutoff=kin_cut if cuts.same else cuts.force_cutoff,  # Hz (was the string "same")
        convention="jaxmb",
        body_mass=_per_trial(body_mass, "body_mass", "kg", lead),
        height=_per_trial(height, "height", "m", lead),
        segments={"length": lengths.reshape(lead + (3,)), "mass": mass.reshape(lead + (3,)),
                  "inertia": inertia.reshape(lead + (3,)), "com": com.reshape(lead + (3,))},  # fmt: skip
        terms=term_out,
    )
    return result.to_convention(convention) if convention == "jaxmb" else _clinical_in_place(result)
