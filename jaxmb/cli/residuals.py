"""``jaxmb residuals``: whole-body residuals of lab trials, and segment parameters fitted to the plates.

Builds a floating-base planar model of each lab trial (C3D, or TRC with a
``.forces`` file) (both legs, the trunk with
head and, where the markers exist, the arms; Dempster's parameters at the measured
lengths; the body mass from the plates), computes the residual force and moment
(FX, FY, MZ about the whole-body centre of mass) over the frames in which every
foot on the floor stands on a plate, with the forces filtered at the markers'
cut-off and raw. With ``--fit`` it fits every segment's mass (and, with
``--fit-com``, centre of mass) to the plates over the first part of the measured
frames of all files jointly (one subject) and reports the held-out rest. Writes
``residuals.csv``, ``parameters.csv``, ``summary.json``, ``summary.txt`` and
``residuals.png`` to ``--out``, each under a temporary name, then renamed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys

import numpy as np

from .. import identify
from .. import io as io_files
from . import _output
from ..gait import MAPPING_HINT
from .gait import InputError, _mapping
from ..wholebody import about_com, fit_to_plates, prior_around, root_regressor, summarize, whole_body_trial

__all__ = ["add_parser", "add_command", "run"]

_UNITS = {"mass": "kg", "com_along": "m", "com_across": "m", "inertia": "kg m^2"}


def add_parser(subparsers) -> None:
    """Add the ``residuals`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser("residuals", help="whole-body residuals of C3D trials; --fit: segment parameters to the plates",
                              description=__doc__.split("\n\n")[1].replace("\n", " "))
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--c3d", nargs="+", metavar="FILE", help="C3D trial(s) of one subject (fitted jointly)")
    src.add_argument("--trc", nargs="+", metavar="FILE", help="markers in TRC files, each with its --forces file")
    p.add_argument("--forces", nargs="+", metavar="FILE", help="Motion Analysis .forces files, one for each --trc")
    p.add_argument("--marker", action="append", default=[], metavar="JOINT=LABEL[,LABEL...]",
                   help="markers of a leg's joint centre, as jaxmb gait takes them (e.g. --marker "
                        "hip=harrington,RASIS,LASIS,RPSIS,LPSIS; repeatable)")  # fmt: skip
    p.add_argument("--out", default="jaxmb-out/residuals", help="output folder (default jaxmb-out/residuals)")
    p.add_argument("--fit", action="store_true", help="fit the segment masses to the plates")
    p.add_argument("--fit-com", action="store_true", help="with --fit: fit the centres of mass too")
    p.add_argument("--train", type=float, default=0.5,
                   help="fraction of each trial's measured frames to fit on, the first ones (default 0.5); the rest is held out")  # fmt: skip
    p.add_argument("--folds", type=int, default=0, metavar="K",
                   help="cross-validation instead of --train: the measured frames in blocks of one period of the "
                        "cut-off, block b in fold b mod K; each fold is fitted on the others and held out (default 0: off)")
    p.add_argument("--cutoff", type=float, default=6.0, help="low-pass cut-off of markers and forces, Hz (default 6)")
    p.add_argument("--body-mass", type=float, default=None,
                   help="kg (default: from the plates' vertical impulse over the measured frames)")
    p.add_argument("--height", type=float, default=None, help="m (default: mid-shoulder height / 0.818)")
    p.add_argument("--no-arms", action="store_true", help="one rigid head-arms-trunk root")
    p.add_argument("--no-figure", action="store_true", help="skip residuals.png")
    p.set_defaults(func=run)


add_command = add_parser  # the name the cli's _COMMANDS loop calls


def _fail(msg: str) -> int:
    print(f"jaxmb residuals: error: {msg}", file=sys.stderr)
    return 2


def run(args) -> int:
    """Run ``jaxmb residuals``; returns the exit status."""
    if not 0.0 < args.train <= 1.0:
        return _fail(f"--train must be in (0, 1], got {args.train}")
    if args.folds == 1 or args.folds < 0:
        return _fail(f"--folds must be 0 (off) or at least 2, got {args.folds}")
    if args.trc and len(args.forces or ()) != len(args.trc):
        return _fail(f"--trc needs one --forces file for each TRC file: {len(args.trc)} TRC, "
                     f"{len(args.forces or ())} forces")  # fmt: skip
    if args.c3d and args.forces:
        return _fail("--forces goes with --trc (a C3D file holds its force plates)")
    try:
        mapping = _mapping(args.marker)
        trials = _load(args, mapping)
    except InputError as err:
        return _fail(str(err))
    except (ValueError, KeyError, OSError) as err:
        return _fail(str(err))
    data = _stack(trials, args.train, args.folds)
    report = _table_and_fit(trials[0], data, args)
    _write_all(args, trials, data, report)
    print(report["text"])
    return 0


def _sources(args):
    """(name, trial) of each file or TRC/forces pair, as whole_body_trial takes it."""
    if args.c3d:
        return [(path, path) for path in args.c3d]
    return [(f"{trc} + {frc}", (io_files.read_trc(trc, warn_gaps=False), io_files.read_forces(frc)))
            for trc, frc in zip(args.trc, args.forces)]


def _load(args, mapping):
    """Each file's whole-body trial (the first file's body mass for all)."""
    trials = []
    for name, source in _sources(args):
        try:
            wb = whole_body_trial(source, cutoff=args.cutoff, body_mass=args.body_mass, height=args.height,
                                  arms=False if args.no_arms else None, mapping=mapping)
        except (ValueError, KeyError) as err:
            msg = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
            msg = msg.replace(MAPPING_HINT, "(name the markers with --marker JOINT=LABEL[,LABEL...])")
            raise InputError(msg if os.path.basename(name.split(" + ")[0]) in msg else f"{name}: {msg}") from None
        trials.append(wb)
        if args.body_mass is None:
            args.body_mass = wb.body_mass
    return trials


def _folds(trial, folds):
    """(T,) fold of each measured frame (-1 elsewhere): blocks of one period of the cut-off, round robin.

    The block is the filtered signals' correlation time (a zero-lag low-pass at
    ``cutoff`` mixes frames about one period apart), so that a held-out block
    shares little of its filtered noise with the fitted ones next to it.
    """
    rate = 1.0 / float(np.median(np.diff(trial.time)))
    block = max(1, int(round(rate / trial.cutoff)))
    idx = np.where(trial.measured)[0]
    fold = np.full(len(trial.measured), -1)
    fold[idx] = (np.arange(len(idx)) // block) % folds
    return fold, block


def _stack(trials, train, folds=0):
    """Frames of every trial stacked, with the measured and training masks (and the folds)."""
    cat = lambda f: np.concatenate([np.asarray(f(t)) for t in trials])  # noqa: E731
    train_mask = []
    for t in trials:
        idx = np.where(t.measured)[0]
        cut = idx[min(len(idx) - 1, int(np.ceil(train * len(idx)))) - 1] if train < 1 and not folds else idx[-1]
        train_mask.append(t.measured & (np.arange(len(t.measured)) <= cut))
    fold = [_folds(t, folds) for t in trials] if folds else None
    return {
        "folds": folds, "fold": None if fold is None else np.concatenate([f[0] for f in fold]),
        "block": None if fold is None else fold[0][1],
        "q": cat(lambda t: t.q), "qd": cat(lambda t: t.qd), "qdd": cat(lambda t: t.qdd),
        "loads": {"filtered": cat(lambda t: t.loads), "raw": cat(lambda t: t.loads_raw)},
        "measured": cat(lambda t: t.measured), "train": np.concatenate(train_mask),
        "time": cat(lambda t: t.time), "trial": np.concatenate([np.full(len(t.time), i) for i, t in enumerate(trials)]),
        "fy": cat(lambda t: t.force[:, :, 1].sum(1)),
    }  # fmt: skip


def _stats(res, mask, wb):
    """RMS and peak over the mask, as plain lists."""
    s = summarize(res, body_mass=wb.body_mass, height=wb.height, mask=mask)
    return {"rms": np.asarray(s.rms).tolist(), "peak": np.asarray(s.peak).tolist(),
            "rms_percent": np.asarray(s.rms_percent).tolist(), "frames": int(s.frames)}


def _table_and_fit(wb, data, args):
    """Residuals of the table model and, with --fit, of the fitted one, for filtered and raw forces."""
    model = wb.model
    pi0 = np.asarray(identify.to_parameters(model))
    prior = prior_around(model)
    held = data["measured"] & ~data["train"] if not data["folds"] else data["measured"]
    out = {"series": {}, "summary": {}, "fits": {}}
    for kind, loads in data["loads"].items():
        Y, y0 = root_regressor(model, data["q"], data["qd"], data["qdd"], loads)
        models = {"table": pi0}
        if args.fit:
            free = ("mass", "com") if args.fit_com else ("mass",)
            fit = fit_to_plates(model, data["q"], data["qd"], data["qdd"], loads, prior=prior, sigma=wb.noise,
                                weights=data["train"], body_mass=wb.body_mass, mass_sd=0.01 * wb.body_mass, free=free)
            models["fit"] = fit.parameters
            out["fits"][kind] = fit
        out["summary"][kind] = {}
        for name, pi in models.items():
            res = np.asarray(about_com(model, data["q"], Y @ pi + y0, pi))
            out["series"][(kind, name)] = res
            entry = _stats(res, data["measured"], wb)
            oof = _out_of_fold(model, data, loads, (Y, y0), prior, free, wb) if name == "fit" and data["folds"] else res
            entry["rms_heldout"] = _stats(oof, held, wb)["rms"] if held.any() else None
            out["summary"][kind][name] = entry
    out["text"] = _text(wb, data, out)
    return out


def _out_of_fold(model, data, loads, regressor, prior, free, wb):
    """(T, 3) residuals of each fold's frames with the parameters fitted to the other folds."""
    Y, y0 = regressor
    res = np.zeros((len(data["time"]), 3))
    for k in range(data["folds"]):
        held = data["fold"] == k
        fit = fit_to_plates(model, data["q"], data["qd"], data["qdd"], loads, prior=prior, sigma=wb.noise,
                            weights=data["measured"] & ~held, body_mass=wb.body_mass, mass_sd=0.01 * wb.body_mass,
                            free=free, regressor=regressor)
        res[held] = np.asarray(about_com(model, data["q"], Y @ fit.parameters + y0, fit.parameters))[held]
    return res


def _heldout_words(data):
    """How the held-out frames were chosen, for summary.txt and summary.json."""
    if data["folds"]:
        return f"every one held out in {data['folds']} folds of {data['block']}-frame blocks"
    return f"{int((data['measured'] & ~data['train']).sum())} held out: the last ones"


def _text(wb, data, out):
    """The summary for people."""
    single = "" if wb.body_mass_single_support is None else f"; single support {wb.body_mass_single_support:.2f} kg"
    lines = [f"body mass {wb.body_mass:.2f} kg (plates' vertical impulse{single}), height {wb.height:.2f} m, {wb.model.segments} segments, "
             f"{int(data['measured'].sum())} measured frames ({_heldout_words(data)})",
             "residual RMS FX / FY (N) / MZ (N m about the centre of mass):"]
    for kind, models in out["summary"].items():
        for name, s in models.items():
            held = "" if s["rms_heldout"] is None else "   held out " + " / ".join(f"{v:.1f}" for v in s["rms_heldout"])
            lines.append(f"  {kind:8s} {name:5s} " + " / ".join(f"{v:.1f}" for v in s["rms"])
                         + f"  ({s['rms_percent'][0]:.1f} / {s['rms_percent'][1]:.1f} % BW){held}")
    for kind, fit in out["fits"].items():
        lines.append(f"fit ({kind}): {fit.status}; total mass {fit.total_mass:.2f} kg; {fit.base.rank} identifiable "
                     "combinations of the barycentric parameters")
    return "\n".join(lines)


def _csv(header, rows) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
    return buf.getvalue()


def _residuals_csv(data, report) -> str:
    """residuals.csv: one row per frame of every trial (filtered forces)."""
    table = report["series"][("filtered", "table")]
    fit = report["series"].get(("filtered", "fit"))
    header = ["trial", "time_s", "FX_N", "FY_N", "MZ_Nm"] + (["FX_fit_N", "FY_fit_N", "MZ_fit_Nm"] if fit is not None else [])
    header += ["measured", "heldout"]
    rows = []
    for k in range(len(data["time"])):
        row = [int(data["trial"][k]), f"{data['time'][k]:.4f}"] + [f"{v:.6g}" for v in table[k]]
        row += [] if fit is None else [f"{v:.6g}" for v in fit[k]]
        held = data["measured"][k] and (not data["train"][k] or bool(data["folds"]))
        rows.append(row + [int(data["measured"][k]), int(held)])
    return _csv(header, rows)


def _parameters_csv(wb, report) -> str:
    """parameters.csv: table and fitted physical parameters with standard errors."""
    table = np.asarray(identify.to_physical(wb.model))
    fit = report["fits"].get("filtered")
    rows = []
    for i, seg in enumerate(wb.model.names):
        for j, qty in enumerate(_UNITS):
            fitted = "" if fit is None else f"{fit.physical[i, j]:.6g}"
            se = "" if fit is None else f"{fit.stderr_physical[i, j]:.3g}"
            rows.append([seg, qty, f"{table[i, j]:.6g}", fitted, se, _UNITS[qty]])
    return _csv(["segment", "quantity", "table", "fitted", "stderr", "unit"], rows)


def _figure(data, report):
    """residuals.png: FX, FY, MZ over time, with the vertical ground force (a
    matplotlib Figure: no backend, no pyplot state)."""
    from matplotlib.figure import Figure  # optional dependency, imported on use

    fig = Figure(figsize=(7, 8))
    axes = fig.subplots(4, 1, sharex=True)
    t = data["time"] + 1000.0 * data["trial"]  # trials side by side
    for (kind, name), res in report["series"].items():
        if kind != "filtered":
            continue
        for j, label in enumerate(("FX (N)", "FY (N)", "MZ (N m)")):
            axes[j].plot(t, np.where(data["measured"], res[:, j], np.nan), label=name)
            axes[j].set_ylabel(label)
    axes[3].plot(t, data["fy"], color="k")
    axes[3].set_ylabel("vertical GRF (N)")
    axes[3].set_xlabel("time (s)")
    axes[0].legend()
    return fig


def _write_all(args, trials, data, report) -> None:
    """Every output file, written as one set (:func:`jaxmb.cli._output._write_outputs`)."""
    os.makedirs(args.out, exist_ok=True)
    wb = trials[0]
    names = list(args.c3d) if args.c3d else [f"{t} + {f}" for t, f in zip(args.trc, args.forces)]
    summary = {"body_mass_kg": wb.body_mass, "body_mass_single_support_kg": wb.body_mass_single_support,
               "height_m": wb.height, "files": names,
               "heldout": {"scheme": "folds" if data["folds"] else "last", "folds": data["folds"],
                           "block_frames": data["block"], "words": _heldout_words(data)},
               "noise": {"FX_N": float(wb.noise[0]), "FY_N": float(wb.noise[1]), "M_root_Nm": float(wb.noise[2])},
               "models": report["summary"]}
    files = {
        os.path.join(args.out, "residuals.csv"): _residuals_csv(data, report),
        os.path.join(args.out, "parameters.csv"): _parameters_csv(wb, report),
        os.path.join(args.out, "summary.json"): json.dumps(summary, indent=2) + "\n",
        os.path.join(args.out, "summary.txt"): report["text"] + "\n",
    }
    if not args.no_figure:
        files[os.path.join(args.out, "residuals.png")] = _output._png(_figure(data, report))
    _output._write_outputs(files, "residuals")
