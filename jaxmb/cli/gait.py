"""``jaxmb gait``: joint angles, moments, powers and reactions of the leg from lab files.

With no input option it analyses the bundled van den Bogert running data (true
moments and forces known) and reports the errors; ``--c3d FILE`` or ``--trc FILE
--forces FILE`` analyse a measured trial of one leg (``--side``) over its stance on the
force plates. ``--c3d`` with several files analyses them as one batch (one call of
:func:`jaxmb.gait.analyze` per pair of marker and force rates, trials of unequal
length padded), each
trial's outputs in a folder of its own and a table of every trial's peaks
(``trials.csv``); a file of the batch that cannot be read or analysed is named (on
stderr and in the summary) and left out, the others analysed, and the exit status is
then 1. Every output (CSV text, figures as PNG) is rendered first and
then written as one set (:func:`jaxmb.cli._output._write_outputs`: every file to a temporary
name, then the renames), so a failed run leaves no half-written file and no partial
set; a write that fails is one line on stderr and exit status 2. The time column of
the CSV files of a measured trial is the file's time.

A measured trial is analysed over the frames that the markers and the forces both
cover (the summary gives them; a note when forces that start late or end early
leave marker frames out). A stance that the start or end of a recording cuts off
(the foot already on the plate at the first frame analysed, or still on it at the
last) is marked partial in the summary, in trials.csv (column ``partial``) and
dashed in stance.png; its samples are analysed and written, its peaks (their % of
stance is not that of a whole stance) only with ``--partial-stances``.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import re
import sys
import textwrap
import warnings
from io import StringIO

import numpy as np
from tqdm.auto import tqdm

from .. import gait, io
from ..gait import CONVENTION_TEXT, DEFAULT_MAPPING, JOINTS, MAPPING_HINT, MOMENT_POSITIVE, check_mapping_entry
from . import _output

#: the hint that gait.sagittal's mapping errors end with, in command-line words here

__all__ = ["add_command", "run"]


class InputError(Exception):
    """Bad input: reported as one line, exit status 2."""


def add_command(sub) -> None:
    """Add the ``gait`` subcommand to an argparse subparsers object."""
    p = sub.add_parser(
        "gait",
        help="joint moments, powers and reactions of the leg (bundled running data, C3D or TRC + forces)",
        description=__doc__.split("\n\n")[0],
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--c3d", metavar="FILE", nargs="+",
                     help="C3D trials (markers and force plates; needs ezc3d); several files run as one batch, "
                          "each trial's outputs in OUT/<file name>/ and every trial's peaks in OUT/trials.csv; a file that "
                          "cannot be analysed is named and left out (exit status 1)")  # fmt: skip
    src.add_argument("--trc", metavar="FILE", help="markers in a TRC file (with --forces)")
    p.add_argument("--forces", metavar="FILE", help="Motion Analysis .forces file for --trc")
    p.add_argument("--side", choices=("right", "left"), default="right", help="the leg to analyse (default right)")
    p.add_argument("--marker", action="append", default=[], metavar="JOINT=LABEL[,LABEL...]",
                   help="markers of a joint centre (hip, knee, ankle, toe or heel; the mean of the labels; {S} "
                        "stands for R or L), for labels other than Plug-in-Gait's, e.g. --marker knee={S}LKNE,{S}MKNE; "
                        "the hip by Harrington et al.'s regression: hip=harrington,RASIS,LASIS,SACRUM or, with two "
                        "PSIS markers and no sacrum, hip=harrington,RASIS,LASIS,RPSIS,LPSIS (the sacrum at their "
                        "midpoint), e.g. --marker hip=harrington,R.ASIS,L.ASIS,R.PSIS,L.PSIS (repeatable; default: "
                        "jaxmb.gait.DEFAULT_MAPPING, hip=harrington,RASI,LASI,VSAC)")  # fmt: skip
    p.add_argument("--body-mass", type=float, default=None, metavar="KG",
                   help="body mass, kg, of every trial (default: the bundled data's segments; for lab files, "
                        "estimated from each trial's force plates)")  # fmt: skip
    p.add_argument("--cutoff", default=None, metavar="HZ|auto",
                   help="low-pass cut-off of markers and force, Hz, or 'auto' (Winter's residual analysis); "
                        "default: none for the bundled simulated data, 6 Hz for lab files")  # fmt: skip
    p.add_argument("--convention", choices=("jaxmb", "clinical"), default="jaxmb",
                   help="signs of angles and moments in the outputs (default jaxmb: counter-clockwise; "
                        "clinical: flexion, extensor and plantarflexor moments positive)")  # fmt: skip
    p.add_argument("--out", default="jaxmb-out/gait",
                   help="output folder (default jaxmb-out/gait; '' writes nothing)")
    p.add_argument("--no-figures", action="store_true", help="write the CSV files only")
    p.add_argument("--partial-stances", action="store_true",
                   help="also give the peaks (and their %% of stance) of a partial stance, one that the start or end "
                        "of a recording cuts off (marked partial in the summary, in trials.csv and dashed in "
                        "stance.png); by default its samples are analysed and written but its peaks left out, "
                        "since its %% of stance is not that of a whole stance")  # fmt: skip
    p.set_defaults(func=_main)


def _main(args) -> int:
    try:
        return run(args)
    except InputError as e:
        print(f"jaxmb gait: error: {e}", file=sys.stderr)
        return 2


def _cutoff(text, default):
    if text is None:
        return default
    if text == "auto":
        return "auto"
    try:
        v = float(text)
    except ValueError:
        raise InputError(f"--cutoff must be a number (Hz) or 'auto', got {text!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise InputError(f"--cutoff must be > 0 Hz, got {text}")
    return v


def _check_out(out: str) -> None:
    """Refuse, before any work, an output folder that cannot be made or written:
    ``out`` or its nearest existing ancestor a file, or not writable. (``""``:
    nothing is written.) The folders themselves are made when writing (and removed
    again if the writing fails)."""
    if not out:
        return
    f = os.path.abspath(out)
    while not os.path.exists(f) and f != os.path.dirname(f):
        f = os.path.dirname(f)
    if not os.path.isdir(f):
        what = "exists and is not a folder" if f == os.path.abspath(out) else f"is inside {f}, which is a file"
        raise InputError(f"--out {out} {what}")
    if not os.access(f, os.W_OK | os.X_OK):
        raise InputError(f"cannot create or write the output folder {out}: {f} is not writable")


def _skip(skipped, path, msg):
    """Name a file of a batch that cannot be analysed (one line on stderr) and list
    it in ``skipped`` as (path, reason)."""
    reason = msg[len(path) + 2 :] if msg.startswith(f"{path}: ") else msg
    base = os.path.basename(path)
    if base != path and reason.startswith(f"{base}: "):  # a reader names the file by its base name
        reason = reason[len(base) + 2 :]
    line = reason if path in reason else f"{path}: {reason}"
    print(f"jaxmb gait: error: {line} (skipped)", file=sys.stderr)
    skipped.append((path, reason))


def _load(args, progress, skipped):
    """A list of trials (inputs of analyze, truth or None, stance slices or None,
    description, name, the file's time of each frame or None, the C3D file or
    None): one for the bundled data or a TRC file, one per C3D file. Of several C3D
    files, one that cannot be read is named, appended to ``skipped`` and left out."""

    if args.forces and not args.trc:
        raise InputError("--forces goes with --trc")
    _check_out(args.out)
    mapping = _mapping(args.marker)  # parsed once: a malformed --marker is one error, not one per file
    if args.body_mass is not None and not (np.isfinite(args.body_mass) and args.body_mass > 0):
        raise InputError(f"--body-mass must be > 0 kg, got {args.body_mass}")
    if not (args.c3d or args.trc):
        if args.side != "right":
            raise InputError(f"--side {args.side}: the bundled running data have the right leg only "
                             "(give --c3d or --trc for another leg)")  # fmt: skip
        if args.marker:
            raise InputError("--marker names markers of a lab file: the bundled running data are joint centres "
                             "(give --c3d or --trc)")  # fmt: skip
        data = gait.running_data()
        kw = data.inputs()
        kw["cutoff"] = _cutoff(args.cutoff, None)
        if args.body_mass is not None:
            kw["body_mass"] = args.body_mass
        truth = (data.moments, data.force_magnitudes)
        return [(kw, truth, None, "van den Bogert's simulated running (bundled), right leg, 10 kHz", "running", None,
                 None)]
    if args.c3d:
        several = len(args.c3d) > 1
        out = []
        for path in args.c3d:
            progress.set_description(f"reading {os.path.basename(path)}" if several else "reading C3D")
            try:
                out.append(_load_one(args, mapping, path=path) + (path,))
            except InputError as e:
                if not several:
                    raise
                # one bad file of a batch: named now, skipped, the others analysed
                _skip(skipped, path, str(e))
            progress.update()
        if not out:
            raise InputError(f"none of the {len(args.c3d)} files could be analysed (each is named above)")
        return out
    if not args.forces:
        raise InputError("--trc needs --forces FILE (the ground reaction force)")
    progress.set_description("reading TRC and forces")
    return [_load_one(args, mapping) + (None,)]


def _mapping(items):
    """--marker JOINT=LABEL[,LABEL...] options as sagittal's mapping (None without),
    checked before any file is read (hip=harrington,... with three or four markers)."""

    if not items:
        return None
    out = {}
    for item in items:
        key, eq, labels = item.partition("=")
        key = key.strip()
        labs = tuple(lab.strip() for lab in labels.split(","))
        if not eq or not all(labs):
            raise InputError(f"--marker {item!r}: write JOINT=LABEL[,LABEL...], e.g. knee={{S}}KNE,{{S}}MKNE")
        if key not in DEFAULT_MAPPING:
            raise InputError(f"--marker {item!r}: unknown joint {key!r}; known: {', '.join(DEFAULT_MAPPING)}")
        if key in out:
            raise InputError(f"--marker {key}= is given twice")
        try:
            check_mapping_entry(key, labs)
        except ValueError as e:
            raise InputError(f"--marker {item!r}: {str(e).removeprefix('mapping: ')}") from None
        out[key] = labs
    return out


def _message(e: BaseException) -> str:
    """The text of a reader's or sagittal's error, for one line: an OSError as
    "file: reason", a KeyError without the quotes that str() adds."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename is not None else e.strerror
    if isinstance(e, KeyError) and e.args:
        return str(e.args[0])
    return str(e)


def _load_one(args, mapping, path=None):
    """One measured trial: from the C3D file ``path``, or from --trc and --forces
    (``mapping``: the parsed --marker options, None for Plug-in-Gait's labels)."""

    caught = []

    def notes():
        for w in caught:
            print(f"jaxmb gait: note: {w.message}", file=sys.stderr)

    try:
        # the readers' warnings (renamed duplicate labels, a Latin-1 file, zeros read
        # as gaps) as notes of the command, not Python's warning lines with a source
        # path; before an error too, which they may explain (a marker "missing" in
        # frames that a TRC file fills with zeros)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if path is not None:
                trial = io.read_c3d(path, warn_gaps=False)
                plates = trial.forces
                sg = gait.sagittal(trial, side=args.side, mapping=mapping)
                name = path
            else:
                markers = io.read_trc(args.trc, warn_gaps=False)  # the markers' errors first
                plates = io.read_forces(args.forces)
                sg = gait.sagittal(markers, plates, side=args.side, mapping=mapping)
                name = f"{args.trc} + {args.forces}"
    except ImportError as e:
        raise InputError(str(e)) from None
    except (OSError, ValueError, KeyError) as e:
        notes()
        msg = _message(e).replace(MAPPING_HINT, "(name the markers with --marker JOINT=LABEL[,LABEL...])")
        if path is not None and os.path.basename(path) not in msg:  # an error that names no file: name it
            msg = f"{path}: {msg}"
        raise InputError(msg) from None
    notes()
    if plates is None or plates.force.shape[1] == 0:
        raise InputError(f"{name} has no force plates: the moments need the ground reaction force")
    if sg.stance is None:
        raise InputError(f"the {args.side} foot touches no force plate in {name} within the frames analysed, "
                         f"{sg.time[0]:.3f}-{sg.time[-1]:.3f} s of the file")  # fmt: skip
    body_mass = args.body_mass
    if body_mass is not None and sg.body_weight is not None:
        est = sg.body_weight / 9.81
        if abs(body_mass / est - 1) > 0.25:
            print(f"jaxmb gait: note: --body-mass {body_mass:g} kg is {body_mass / est:.2g} times the plates' "
                  f"estimate, {est:.1f} kg, in {name}: the per-kg results use --body-mass", file=sys.stderr)  # fmt: skip
    if body_mass is None:
        if sg.body_weight is None:
            raise InputError(f"give --body-mass (kg): no contact with a force plate in {name} that the force "
                             "recording holds whole (10 frames or more) to estimate it from")  # fmt: skip
        body_mass = sg.body_weight / 9.81
    kw = sg.inputs()
    kw.update(body_mass=body_mass, cutoff=_cutoff(args.cutoff, 6.0))
    est = "" if args.body_mass is not None else " (estimated from the plates)"
    desc = f"{name}, {args.side} leg, body mass {body_mass:.1f} kg{est}"
    spans = sg.stances or (sg.stance,)
    stances = [_Stance(*st, partial=p) for st, p in zip(spans, sg.partial or ("",) * len(spans))]
    return kw, None, stances, desc, os.path.splitext(os.path.basename(path or args.trc))[0], sg.time


@dataclasses.dataclass(frozen=True)
class _Stance:
    """A stance's frames, start to stop (exclusive), and ``partial``: "" for a whole
    stance, "start", "end" or "both" for one that a recording cuts off
    (:attr:`jaxmb.gait.SagittalTrial.partial`). The functions that take stances
    take a plain slice too (a whole stance)."""

    start: int
    stop: int
    partial: str = ""


def _frames(st) -> slice:
    """The frames of a stance (a :class:`_Stance` or a slice)."""
    return slice(st.start, st.stop)


def _cut(st) -> str:
    """How a recording cuts a stance off: "", "start", "end" or "both"."""
    return getattr(st, "partial", "")


#: a partial stance's cut, in words
_CUT_TEXT = {
    "start": "the foot is on the plate at the first frame analysed (no foot strike in the data)",
    "end": "the foot is still on the plate at the last frame analysed (no toe-off in the data)",
    "both": "the foot is on the plate from the first frame analysed to the last (no foot strike, no toe-off)",
}


_PER_TRIAL = ("hip", "knee", "ankle", "toe", "force", "cop")


def _name_trials(message: str, names) -> str:
    """``message`` with a batch's "(trial b)" or "(trials b, c)" replaced by those
    trials' ``names`` (kept where a name is None)."""

    def named(m):
        got = [names[int(b)] for b in m.group(1).split(", ")]
        return m.group(0) if None in got else "(" + ", ".join(map(str, got)) + ")"

    return re.sub(r"\(trials? (\d+(?:, \d+)*)\)", named, message)


def _analyze(trials, skipped=None):
    """One :func:`jaxmb.gait.analyze` result per trial: one call for a single trial,
    and for several one batched call per (rate, force rate), trials of unequal length
    as lists (padded and masked inside).

    ``skipped``: None, or a list to which a trial that cannot be analysed is
    appended as (its file, the reason), its result None, the others analysed. A
    ValueError of the batch that names a trial ("(trial b, ...)") leaves that trial
    out and the batch is run again; one that names none (e.g. trials too short to
    filter) has the group's trials analysed one by one. Without ``skipped`` the
    first ValueError is raised, naming the trial's file where it names a trial."""


    paths = [t[6] if len(t) > 6 else None for t in trials]
    if len(trials) == 1:
        return [gait.analyze(**trials[0][0], terms=True)]
    groups = {}
    for i, (kw, *_) in enumerate(trials):
        groups.setdefault((kw["rate"], kw["force_rate"]), []).append(i)
    results = [None] * len(trials)
    for (rate, force_rate), idx in groups.items():
        while idx:
            kws = [trials[i][0] for i in idx]
            try:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    batch = gait.analyze(**{k: [kw[k] for kw in kws] for k in _PER_TRIAL}, rate=rate,
                                         force_rate=force_rate, body_mass=np.array([kw["body_mass"] for kw in kws]),
                                         cutoff=kws[0]["cutoff"], terms=True)  # fmt: skip
                for w in caught:  # the batch's "(trials b, c)": their files
                    warnings.warn(_name_trials(str(w.message), [paths[i] for i in idx]), w.category, stacklevel=2)
            except ValueError as e:
                msg = str(e)
                # "(trial b, sample t)" or "(trial b)", b within the group: the file instead
                hit = re.search(r" ?\(trial (\d+)(, |\))", msg)
                if hit and int(hit.group(1)) < len(idx) and paths[idx[int(hit.group(1))]] is not None:
                    b = int(hit.group(1))
                    msg = msg[: hit.start()] + (" (" if hit.group(2) == ", " else "") + msg[hit.end() :]
                    if skipped is None:
                        raise ValueError(f"{paths[idx[b]]}: {msg}") from None
                    _skip(skipped, paths[idx[b]], msg)
                    del idx[b]
                    continue
                if skipped is None:
                    if any(paths[i] is None for i in idx):
                        raise
                    named = ", ".join(str(paths[i]) for i in idx[:3]) + (", ..." if len(idx) > 3 else "")
                    raise ValueError(f"{named}: {msg}") from None
                for i in idx:  # the error names no trial: each alone
                    try:
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            results[i] = gait.analyze(**trials[i][0], terms=True)
                    except ValueError as e1:
                        _skip(skipped, paths[i], str(e1))
                        continue
                    for w in caught:  # its file, as the batch's warnings name theirs
                        warnings.warn(f"{paths[i]}: {w.message}" if paths[i] else str(w.message), w.category,
                                      stacklevel=2)  # fmt: skip
                break
            for b, i in enumerate(idx):
                results[i] = batch.trial(b)
            break
    return results


def _unique_names(names):
    """The names, with -2, -3, ... appended to repeats (skipping names taken;
    compared without case, for case-insensitive file systems)."""
    used, out = set(), []
    for n in names:
        name, k = n, 1
        while name.lower() in used:
            k += 1
            name = f"{n}-{k}"
        used.add(name.lower())
        out.append(name)
    return out


def _peaks(res, stance):
    """Clinical-sign peaks over stance, per kg: {joint: (max moment, its % of stance,
    min moment, its % of stance, max power)}."""

    r = res.to_convention("clinical")
    m, pw = r.moments_per_kg[_frames(stance)], r.powers_per_kg[_frames(stance)]
    pct = 100 / max(len(m) - 1, 1)
    return {j: (m[:, k].max(), pct * np.argmax(m[:, k]), m[:, k].min(), pct * np.argmin(m[:, k]), pw[:, k].max())
            for k, j in enumerate(JOINTS)}  # fmt: skip


def _trials_table(names, files, results, stances, partial_stances=False):
    """(CSV text, printed lines) of every trial's stance peaks, a row per stance.
    The column ``partial``: "no", or "start", "end" or "both" for a stance that a
    recording cuts off (its stance_s the part recorded); such a stance's peak cells
    are empty unless ``partial_stances``."""

    cols = ["trial", "path", "stance", "start_s", "trial_frames", "stance_s", "body_mass_kg", "cutoff_hz",
            "partial"] + [
        f"{j}_{q}" for j in JOINTS for q in ("moment_max_nm_per_kg", "moment_min_nm_per_kg", "power_max_w_per_kg")]
    text = StringIO()
    table = csv.writer(text, lineterminator="\n")  # quotes a file name with a comma
    table.writerow(cols)
    lines = []
    lines.append(f"{'trial':24s}{'stance':>7s}{'start s':>9s}{'stance s':>9s}{'mass kg':>8s}"
                 + "".join(f"{j + ' +/- N m/kg':>22s}" for j in JOINTS))  # fmt: skip
    for name, path, res, sts in zip(names, files, results, stances):
        cutoff = "" if res.cutoff is None else f"{float(res.cutoff):.6g}"
        for i, st in enumerate(sts):
            pk = _peaks(res, st)
            cut = _cut(st)
            shown = partial_stances or not cut
            # contact time: stance frames x the sample interval. Contact begins between the
            # frame before st.start and st.start and ends between st.stop - 1 and st.stop, so
            # this is unbiased; the last-minus-first frame time is one interval short on average
            dur = (st.stop - st.start) / res.rate
            t0 = float(res.time[st.start])
            vals = [f"{pk[j][k]:.6g}" if shown else "" for j in JOINTS for k in (0, 2, 4)]
            table.writerow([name, path, str(i + 1), f"{t0:.6g}", str(res.frames), f"{dur:.6g}", f"{res.body_mass:.6g}",
                            cutoff, cut or "no"] + vals)  # fmt: skip
            line = f"{name[:23]:24s}{i + 1:7d}{t0:9.3f}{dur:9.2f}{res.body_mass:8.1f}"
            if shown:
                line += "".join(f"{pk[j][0]:13.2f} {pk[j][2]:8.2f}" for j in JOINTS)
            if cut:
                line += f"  partial ({cut})" + ("" if shown else ": peaks left out (--partial-stances gives them)")
            lines.append(line)
    return text.getvalue(), lines


def _csv(names, time, *columns, header, unit=None):
    """CSV text: a time column (s) and the columns; ``unit`` appended to every
    column name (hip_Nm), as the optimal command's headers carry their units."""
    cols = [time] + [np.asarray(c) for c in columns]
    arr = np.column_stack(cols)
    header = tuple(header) if unit is None else tuple(f"{h}_{unit}" for h in header)
    lines = [",".join(("time_s",) + header)]
    lines += [",".join(f"{v:.9g}" for v in row) for row in arr]
    return "\n".join(lines) + "\n"


def _tables(res):
    """{file name: CSV text} for every result array."""

    t = res.time
    out = {}
    units = {"angles": "rad", "velocities": "rad_s", "moments": "Nm", "powers": "W"}
    for key, unit in units.items():
        out[f"{key}.csv"] = _csv(None, t, *res.__getattribute__(key).T, header=JOINTS, unit=unit)
    hdr = [f"{j}_{c}" for j in JOINTS for c in ("x", "y")]
    out["reactions.csv"] = _csv(None, t, *res.reactions.reshape(len(t), 6).T, header=hdr, unit="N")
    hdr = [f"{j}_{c}" for j in JOINTS for c in ("axial", "shear")]
    out["reactions_segment.csv"] = _csv(None, t, *res.reactions_segment.reshape(len(t), 6).T, header=hdr, unit="N")
    out["ground_reaction.csv"] = _csv(None, t, *res.force.T, *res.cop.T,
                                      header=("fx_N", "fy_N", "cop_x_m", "cop_y_m"))  # fmt: skip
    if res.body_mass is not None:
        out["moments_per_kg.csv"] = _csv(None, t, *res.moments_per_kg.T, header=JOINTS, unit="Nm_per_kg")
    return out


def _stance_figure(res, stances, title):
    """Angles, moments and powers over each stance (a line each), against % of stance.
    A partial stance (cut off by a recording) dashed, "(partial)" in the legend, on
    the scale of the trial's whole stances (their mean length is 100 %; a stance cut
    at its end starts at 0 %, one cut at its start ends at 100 %), or over its frames
    recorded (cut at both ends, or without a whole stance). The title wrapped to the figure's width."""

    from matplotlib.figure import Figure


    fig = Figure(figsize=(11, 7.4), layout="constrained")
    axs = fig.subplots(3, 3, sharex=True)
    per_kg = res.body_mass is not None
    mom = res.moments_per_kg if per_kg else res.moments
    pw = res.powers_per_kg if per_kg else res.powers
    whole = [st.stop - st.start for st in stances if not _cut(st)]
    scale = 100 / max(np.mean(whole) - 1, 1) if whole else None  # % of stance per frame
    rows = (("angle (deg)", np.degrees(res.angles)), ("moment (N m/kg)" if per_kg else "moment (N m)", mom),
            ("power (W/kg)" if per_kg else "power (W)", pw))  # fmt: skip
    for i, (label, arr) in enumerate(rows):
        for j, joint in enumerate(JOINTS):
            ax = axs[i, j]
            for st in stances:
                n, cut = st.stop - st.start, _cut(st)
                pct = 100 * np.arange(n) / max(n - 1, 1)
                scaled = cut in ("start", "end") and scale is not None
                if scaled:
                    pct = scale * np.arange(n) if cut == "end" else 100 - scale * np.arange(n)[::-1]
                # without a whole stance to measure it by, a partial stance spans its
                # own recorded frames: the legend says so (its % is not a stance's)
                of = "" if scaled else f"; x: % of its {n} recorded frames, not of a stance"
                ax.plot(pct, arr[_frames(st), j], ls="--" if cut else "-",
                        label=f"stance at {res.time[st.start]:.2f} s" + (f" (partial: cut at the {cut}{of})"
                                                                          if cut else ""))  # fmt: skip
            ax.axhline(0, color="0.6", lw=0.5)
            if i == 0:
                ax.set_title(joint)
            if i == 1:  # each moment axis says what a positive moment is at its joint
                ax.set_ylabel(f"{label if j == 0 else ''}\n+ {MOMENT_POSITIVE[res.convention][j]}")
            elif j == 0:
                ax.set_ylabel(label)
            if i == 2:
                ax.set_xlabel("stance (%)")
    if len(stances) > 1 or any(_cut(st) for st in stances):
        axs[0, 0].legend(fontsize="small")
    # wrapped (a long file path ran off both sides); a path breaks anywhere
    fig.suptitle(textwrap.fill(str(title), 100, break_on_hyphens=False) + "\n" + CONVENTION_TEXT[res.convention],
                 fontsize="medium")  # fmt: skip
    return fig


def _summary(res, truth, stances, desc, partial_stances=False):
    """(lines, RMS errors or None) of one trial: the errors against the truth, or
    the peaks over each stance; a partial stance's peaks only with
    ``partial_stances``."""

    span = "" if truth is not None else f" ({res.time[0]:.3f}-{res.time[-1]:.3f} s of the file)"
    lines = [f"jaxmb gait: {desc}", f"{len(res.time)} frames at {res.rate:g} Hz analysed{span}, cut-off: "
             f"{'none' if res.cutoff is None else (f'{float(np.max(res.cutoff)):.3g} Hz')}"]  # fmt: skip
    if truth is not None:
        err = gait.rms_errors(res, truth[0], truth[1])
        lines.append(f"{'joint':8s}{'moment RMS error':>18s}{'RMS moment':>12s}{'force RMS error':>17s}{'RMS force':>11s}")
        for j, joint in enumerate(gait.JOINTS):
            lines.append(f"{joint:8s}{err['moments'][j]:14.3f} N m{err['moments_rms'][j]:8.1f} N m"
                         f"{err['forces'][j]:15.3f} N{err['forces_rms'][j]:9.1f} N")  # fmt: skip
        given = np.flatnonzero(np.any(np.asarray(truth[0]) != 0, axis=1))
        lines.append(f"(moments over the {given.size} frames where the truth is given, {given[0]} to {given[-1]}; "
                     f"forces over all {len(res.time)})")  # fmt: skip
        return lines, err
    t = res.time  # the file's time of each frame
    for i, stance in enumerate(stances):
        n = stance.stop - stance.start
        which = f"stance {i + 1} of {len(stances)}" if len(stances) > 1 else "stance"
        cut = _cut(stance)
        head = (f"{which}: {t[stance.start]:.3f}-{t[stance.stop - 1]:.3f} s of the file ({n} frames, "
                f"{n / res.rate:.2f} s)")  # fmt: skip
        if cut:
            head += f", PARTIAL: {_CUT_TEXT[cut]}"
            if not partial_stances:
                lines.append(f"{head}; its peaks are left out, its % of stance is not that of a whole stance "
                             "(--partial-stances gives them)")  # fmt: skip
                continue
            head += "; its peaks over the frames recorded, % of those"
        lines.append(f"{head}; clinical signs (extensor, plantarflexor moments positive), per kg of body mass")
        lines.append(f"{'joint':8s}{'peak + N m/kg':>15s}{'at %':>6s}{'peak - N m/kg':>15s}{'at %':>6s}"
                     f"{'peak power W/kg':>17s}")  # fmt: skip
        for joint, (hi, at_hi, lo, at_lo, power) in _peaks(res, stance).items():
            lines.append(f"{joint:8s}{hi:15.2f}{at_hi:6.0f}{lo:15.2f}{at_lo:6.0f}{power:17.2f}")
    return lines, None


#: the signs of the CSV files, in each trial's summary (the files' headers give units only)
_SIGNS = {
    "jaxmb": "CSV signs (--convention jaxmb): counter-clockwise positive, x forward and y up (seen from the "
             "subject's right): angles of each distal segment from its proximal one (the hip's from the downward "
             "vertical), moments that the proximal segment exerts on the distal one",
    "clinical": "CSV signs (--convention clinical): hip and knee flexion, ankle dorsiflexion positive (ankle 0 at "
                "a right angle); hip and knee extensor, ankle plantarflexor moments positive",
}
_REACTION_SIGNS = ("reactions: the force of the proximal segment on the distal one at the joint, world x forward, "
                   "y up; in the segment frame axial (compression positive) and shear (axis turned +90 deg)")  # fmt: skip


def _trial_outputs(res, truth, stances, desc, args):
    """(summary lines, {file name: CSV text or PNG bytes}) of one trial: each figure
    is rendered when made, so that a batch of many trials holds PNG bytes, not
    figures."""

    lines, _ = _summary(res, truth, stances, desc, args.partial_stances)
    where = np.zeros(len(res.time), bool)
    for st in stances:
        where[_frames(st)] = True  # "over stance": the stances the caller knows
    effects = gait.term_effects(res, None if truth is None else truth[0],
                                None if truth is None else truth[1], where=where)  # fmt: skip
    lines.append("quasi-static estimate (inertial terms dropped), RMS change of the moments over stance: "
                 + ", ".join(f"{j} {v:.2f} N m" for j, v in zip(gait.JOINTS, effects["quasi_static"]["moment_change_rms"])))  # fmt: skip
    lines += [_SIGNS[args.convention], _REACTION_SIGNS]
    out_res = res.to_convention(args.convention)
    files = _tables(out_res)
    files["summary.txt"] = "\n".join(lines) + "\n"
    if not args.no_figures:
        if truth is not None:
            files["moments.png"] = _output._png(gait.moments_figure(out_res, truth[0], truth[1], title=desc))
        else:
            files["stance.png"] = _output._png(_stance_figure(out_res, stances, desc))
        shown = effects if args.convention == "jaxmb" else gait.term_effects(out_res, where=where)
        files["quasi_static.png"] = _output._png(gait.term_effects_figure(out_res, None if truth is None else truth[0], shown))
    return lines, files


def _write(outputs, out):
    """Write {folder: {file name: text or bytes}} as one set (the folders made first;
    those made here are removed again when the writing fails), then remove the files
    that an earlier run wrote into those folders and this one did not (listed in the
    folder's manifest and unchanged since: :func:`jaxmb.cli._output._write_outputs`). Returns
    (files written, paths removed)."""

    made = []
    try:
        for folder in outputs:
            parts = []
            f = os.path.abspath(folder)
            while not os.path.isdir(f) and f != os.path.dirname(f):
                parts.append(f)
                f = os.path.dirname(f)
            for d in reversed(parts):
                try:
                    os.mkdir(d)
                except OSError as e:
                    raise InputError(f"cannot create the output folder {folder}: {_message(e)}") from None
                made.append(d)
        try:
            removed = _output._write_outputs({os.path.join(folder, name): data for folder, files in outputs.items()
                                      for name, data in files.items()}, "gait")  # fmt: skip
        except OSError as e:  # the writer names the file it could not write
            where = e.filename if e.filename is not None and e.strerror else out
            raise InputError(f"cannot write the outputs (nothing was written): {where}: {e.strerror or e}") from None
    except BaseException:  # an error, or an interrupt (Ctrl-C): the folders made here go too
        for d in reversed(made):
            try:
                os.rmdir(d)
            except OSError:
                pass
        raise
    return sum(len(files) for files in outputs.values()), removed


def run(args) -> int:
    """``jaxmb gait``: read, analyse, summarise and write each trial, with a progress bar;
    returns the exit status (1 when a file of a batch was left out)."""
    if not args.out:  # nothing is written: no figures to draw
        args.no_figures = True

    n_files = len(args.c3d) if args.c3d else 1
    several = n_files > 1
    skipped = []  # (file, reason) of a batch's files that cannot be analysed
    # reading each file, the inverse dynamics, each trial's summary and figures, writing
    steps = n_files + 1 + n_files + 1
    with tqdm(total=steps, desc="reading", unit="step", file=sys.stderr, leave=False,
              disable=None) as progress:  # fmt: skip
        trials = _load(args, progress, skipped)
        if not args.c3d:
            progress.update()
        progress.set_description("inverse dynamics")
        try:
            with warnings.catch_warnings(record=True) as caught:  # e.g. a cut-off too low for the trial
                warnings.simplefilter("always")
                results = _analyze(trials, skipped if several else None)
        except ValueError as e:
            raise InputError(str(e)) from None
        for w in {str(w.message): w for w in caught}.values():  # as notes, each once
            print(f"jaxmb gait: note: {w.message}", file=sys.stderr)
        progress.update()
        kept = [i for i, r in enumerate(results) if r is not None]
        if not kept:
            raise InputError(f"none of the {n_files} files could be analysed (each is named above)")
        trials, results = [trials[i] for i in kept], [results[i] for i in kept]
        names = _unique_names([t[4] for t in trials])
        outputs, stances, lines = {}, [], []
        for i, ((kw, truth, stance, desc, _, time, _), name, res) in enumerate(zip(trials, names, results)):
            progress.set_description(f"summary of {name}" if several else "summary")
            if time is not None:  # a measured trial: the file's time of each frame
                res = results[i] = dataclasses.replace(res, time=np.asarray(time, float))
            if stance is None:  # the running data: stance where the vertical force is on
                on = np.flatnonzero(res.force[:, 1] != 0)
                stance = [slice(int(on[0]), int(on[-1]) + 1)]
            stances.append(stance)
            trial_lines, files = _trial_outputs(res, truth, stance, desc, args)
            folder = os.path.join(args.out, name) if several else args.out
            outputs[folder] = files
            lines += [] if several else trial_lines
            progress.update()
        if several:
            table, lines = _trials_table(names, [t[6] for t in trials], results, stances, args.partial_stances)
            lines = [f"jaxmb gait: {len(trials)} trial{'s' if len(trials) > 1 else ''}, {args.side} leg, clinical signs (extensor, plantarflexor "
                     "moments positive), peaks over each stance on the plates"] + lines  # fmt: skip
            if skipped:
                lines += [f"skipped {len(skipped)} of {n_files} files, which could not be analysed:"]
                lines += [f"  {path}: {reason}" for path, reason in skipped]
            outputs[args.out] = {"trials.csv": table, "summary.txt": "\n".join(lines) + "\n"}
        progress.set_description("writing")
        written, removed = _write(outputs, args.out) if args.out else (0, [])
        progress.update()
    print("\n".join(lines))
    if args.out:
        print(f"wrote {written} files to {args.out}")
    if removed:
        shown = ", ".join(os.path.relpath(p, args.out) for p in removed[:6]) + (", ..." if len(removed) > 6 else "")
        print(f"removed {len(removed)} files of an earlier run that this one does not write: {shown}")
    return 1 if skipped else 0


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="jaxmb")
    add_command(parser.add_subparsers(dest="command", required=True))
    a = parser.parse_args()
    sys.exit(a.func(a))
