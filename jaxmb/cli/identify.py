"""``jaxmb identify``: segment parameters of the running leg from its true moments and forces.

Starts from the van den Bogert leg with every parameter off by +-30 % (random signs),
fits the consistent model to the true joint moments and joint force magnitudes
(:func:`jaxmb.cli.identify_running.recover_running`), prints the report and what moments alone
can identify, and writes to ``--out``: ``identify_running.csv`` (recovered against
true parameters), ``identify_recovery.png`` and ``identify_bands.png`` (the joint
moments with the band that the anthropometric tables' spread induces). Files are
written under a temporary name and renamed, so a folder never holds half a file.
"""

from __future__ import annotations

import csv
import io
import os
import sys

import numpy as np
from tqdm import tqdm

from .. import identify
from . import _output, identify_running

__all__ = ["add_command"]


def add_command(subparsers) -> None:
    """Add the ``identify`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "identify",
        help="fit the running leg's segment parameters to its true joint moments and forces",
        description=__doc__.split("\n\n")[1].replace("\n", " "),
    )
    p.add_argument("--out", default="jaxmb-out/identify",
                   help="folder for the CSV and figures (default jaxmb-out/identify; '' for none)")
    p.add_argument("--perturb", type=float, default=0.3, help="start: every parameter off by this fraction (default 0.3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the perturbation's signs and of the draws (default 0)")
    p.add_argument("--loss", choices=("huber", "l2"), default="huber", help="loss of the consistent fit (default huber)")
    p.add_argument("--stride", type=int, default=1, help="use every k-th frame (default 1: all 6001)")
    p.add_argument("--draws", type=int, default=1000, help="parameter draws for the moment bands (default 1000; 0: none)")
    p.set_defaults(func=_run)


def _fail(msg: str) -> int:
    print(f"jaxmb identify: error: {msg}", file=sys.stderr)
    return 2


def _csv_text(rows) -> str:
    buf = io.StringIO()
    cols = ["parameter", "unit", "true", "start", "fitted", "stderr", "error", "relative_error", "relative_to",
            "identifiable_from_moments", "barycentric", "barycentric_identifiable_from_moments"]  # fmt: skip
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: (f"{v:.10g}" if isinstance(v, float) else v) for k, v in r.items()})
    return buf.getvalue()


_FRAMES = 6001  # of the bundled running trial
_MIN_FRAMES = 10  # that a --stride must leave: the fit needs more measured values than parameters
_BANDS = "identify_bands.png"


def _run(args) -> int:
    if not (0.0 <= args.perturb < 1.0):
        return _fail(f"--perturb must be in [0, 1) (a fraction of each parameter), got {args.perturb}")
    if args.stride < 1:
        return _fail(f"--stride must be >= 1, got {args.stride}")
    if len(range(0, _FRAMES, args.stride)) < _MIN_FRAMES:  # more measured values than parameters
        return _fail(f"--stride {args.stride} leaves {len(range(0, _FRAMES, args.stride))} of the {_FRAMES} frames: "
                     f"at most {(_FRAMES - 1) // (_MIN_FRAMES - 1)} ({_MIN_FRAMES} frames)")  # fmt: skip
    if args.seed < 0:
        return _fail(f"--seed must be >= 0, got {args.seed}")
    if args.draws != 0 and args.draws < 2:
        return _fail(f"--draws must be 0 (no bands) or >= 2, got {args.draws}")
    if args.out:
        try:
            os.makedirs(args.out, exist_ok=True)
        except OSError as e:
            return _fail(f"cannot create --out folder {args.out!r}: {e.strerror}")


    stages = ["fit", "bands", "files"]
    bar = tqdm(total=len(stages), desc="identify", unit="stage", file=sys.stderr, leave=False,
               disable=None)  # no bar where stderr is not a terminal (a pipe, a log)
    try:
        bar.set_postfix_str("consistent fit of 12 parameters")
        out = identify_running.recover_running(args.perturb, args.seed, loss=args.loss, frames=slice(None, None, args.stride))
    except ValueError as e:
        bar.close()
        return _fail(str(e).split("\n")[0])
    bar.update()
    res, true, trial = out["fit"], out["true"], out["trial"]
    bands = None
    if args.draws:
        bar.set_postfix_str(f"{args.draws} draws x {len(trial['q'][::args.stride])} frames")
        sel = slice(None, None, args.stride)
        spread = identify.table_prior(true, center=true)
        bands = identify.monte_carlo(true, trial["q"][sel], trial["qd"][sel], trial["qdd"][sel], trial["loads"][sel],
                                     spread=spread, draws=args.draws, seed=args.seed)  # fmt: skip
    bar.update()
    files, removed = {}, []
    if args.out:
        bar.set_postfix_str("writing")
        files[os.path.join(args.out, "identify_running.csv")] = _csv_text(out["rows"])
        files[os.path.join(args.out, "identify_recovery.png")] = _output._png(identify_running.recovery_figure(out["rows"]))
        if bands is not None:
            d = trial["data"]
            sel = slice(None, None, args.stride)
            mom = np.where(trial["moment_weights"][sel, None] > 0, trial["moments"][sel], np.nan)
            files[os.path.join(args.out, _BANDS)] = _output._png(identify_running.bands_figure(d.time[sel], bands, mom))
        try:  # every file or none
            removed = _output._write_outputs(files, "identify")
        except OSError as e:
            bar.close()
            return _fail(f"cannot write to {args.out!r}: {e}")
    bar.update()
    bar.close()

    print(f"van den Bogert running leg, start: every parameter off by {100 * args.perturb:g} % (seed {args.seed}); "
          f"fit to the true moments (from heel strike) and force magnitudes, {args.loss} loss")  # fmt: skip
    print(res.report(true))
    print("\nfrom the joint moments alone:")
    print(out["moments_only"].report())
    print("\nwith the joint force magnitudes as well (linearised at the true parameters):")
    print(out["with_forces"].report())
    if bands is not None:
        # over stance (where the moments are measured), as experiments/identify_running.py
        stance = trial["moment_weights"][::args.stride] > 0
        width = np.median((bands.quantiles[-1] - bands.quantiles[0])[stance], axis=0)
        print(f"\nanthropometric spread (Dempster vs de Leva tables), {args.draws} draws: median width of "
              f"the 95 % band over stance hip {width[0]:.2f}, knee {width[1]:.2f}, ankle {width[2]:.2f} N m")  # fmt: skip
    for f in files:
        print(f"wrote {f}")
    for f in removed:
        print(f"removed {f} of an earlier run (--draws 0 draws no bands)")
    return 0 if res.converged else 1
