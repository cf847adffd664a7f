"""Gait.c3d's complete frames twice, the copy displaced by the distance walked: the
right foot steps on plate 2, then on its copy (plate 4), as on a walkway. Shared by
the gait command's tests (test_cli_gait.py, test_gait_coverage.py)."""

import warnings
from pathlib import Path

import numpy as np

DATA = Path(__file__).parent / "data"


def two_strides(*, sources: bool = False):
    """(markers at 100 Hz, plates at 1 kHz) of two strides, 3.88 s; the right foot's
    contacts are plate 2 at samples 754-1324 and plate 4 at 2694-3264. ``sources``:
    the files named walk.trc and walk.forces in messages."""
    from jaxmb import io

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = io.read_c3d(DATA / "Gait.c3d", warn_gaps=False)
    m, f = t.markers, t.forces
    a, b = 133, 327  # the complete frames, 1.33-3.26 s
    T = b - a
    sac = m.get("VSAC")[a:b]
    shift = (sac[-1] - sac[0]) * T / (T - 1)
    shift[2] = 0.0
    named = lambda name: {"source": name} if sources else {}  # noqa: E731
    mk = io.Markers(rate=100.0, time=np.arange(2 * T) / 100.0, labels=m.labels,
                    xyz=np.concatenate([m.xyz[a:b], m.xyz[a:b] + shift]), **named("walk.trc"))  # fmt: skip
    F, C, Mz = f.force[a * 10 : b * 10], f.cop[a * 10 : b * 10], f.free_moment[a * 10 : b * 10]
    zero, nan = np.zeros_like(F), np.full_like(C, np.nan)
    fp = io.ForcePlates(rate=1000.0, time=np.arange(2 * len(F)) / 1000.0,
                        force=np.concatenate([np.concatenate([F, zero], 1), np.concatenate([zero, F], 1)]),
                        cop=np.concatenate([np.concatenate([C, nan], 1), np.concatenate([nan, C + shift], 1)]),
                        free_moment=np.concatenate([np.concatenate([Mz, Mz * np.nan], 1),
                                                    np.concatenate([Mz * np.nan, Mz], 1)]),
                        **named("walk.forces"))  # fmt: skip
    return mk, fp
