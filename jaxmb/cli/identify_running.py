"""The running-leg recovery that ``jaxmb identify`` shows: demo code, not library.

:func:`perturbed` (a starting model every parameter off), :func:`recover_running`
(the fit of van den Bogert's running leg from its true moments and force
magnitudes), :func:`recovery_figure` and :func:`bands_figure` (its figures; they
need matplotlib). Used by the ``jaxmb identify`` command,
the experiments and the tests. For one release they are also reachable,
deprecated, as ``jaxmb.identify.<name>``.
"""

from __future__ import annotations

import numpy as np

from ..identify import (PARAMETERS, PHYSICAL, Bands, base_parameters, fit, from_physical, regressor, running_trial,
                       to_parameters, to_physical)  # fmt: skip
from ..model import Model

__all__ = ["perturbed", "recover_running", "recovery_figure", "bands_figure"]

_UNITS = {"mass": "kg", "com_along": "m", "com_across": "m", "inertia": "kg m^2"}


def perturbed(model: Model, fraction: float = 0.3, seed: int = 0) -> Model:
    """The model with every physical parameter scaled by 1 +- fraction (random signs).

    Parameters that are 0 (a centre of mass on the axis or at the joint) start at
    +- fraction / 3 of the segment length instead.
    """
    if isinstance(fraction, (bool, np.bool_)) or not isinstance(fraction, (int, float, np.integer, np.floating)) or not (
            0.0 <= float(fraction) < 1.0):  # fmt: skip
        raise ValueError(f"fraction must be a number in [0, 1) (a mass scaled by 1 - fraction stays > 0), "
                         f"got {fraction!r}")  # fmt: skip
    rng = np.random.default_rng(seed)
    phys = np.asarray(to_physical(model), dtype=float)
    sign = rng.choice([-1.0, 1.0], size=phys.shape)
    L = np.asarray(model.length, dtype=float)[:, None] * np.ones((1, 4))
    new = np.where(phys != 0, phys * (1 + fraction * sign), sign * fraction / 3 * L)
    return from_physical(model, new)


def recover_running(fraction: float = 0.3, seed: int = 0, *, loss: str = "huber", frames=None):
    """Fit the running leg from a perturbed start to the true moments and force magnitudes.

    Args:
      fraction: every parameter starts at 1 +- fraction times its true value.
      seed: of the random signs.
      loss: of the consistent fit.
      frames: optional index (slice or array) of the frames to use.

    Returns:
      dict: true (model), start (model), fit (:class:`FitResult`, moments and force
      magnitudes), moments_only (:class:`BaseParameters` of the moments alone),
      with_forces (:class:`BaseParameters` of the moments and the force magnitudes
      linearised at the true parameters), rows (list of dicts, one per physical
      parameter: parameter, unit, true, start, fitted, stderr, error,
      relative_error (of the true value, or of the length for the centre of mass),
      identifiable_from_moments (the physical parameter on its own), barycentric
      (m, mx, my or J of the same segment) and whether moments alone identify it).
    """
    trial = running_trial()
    sel = slice(None) if frames is None else frames
    q, qd, qdd = (trial[k][sel] for k in ("q", "qd", "qdd"))
    true = trial["model"]
    start = perturbed(true, fraction, seed)
    res = fit(start, q, qd, qdd, moments=trial["moments"][sel], reactions=trial["force_magnitudes"][sel],
              loads=trial["ground"].select(sel), moment_weights=trial["moment_weights"][sel], loss=loss)  # fmt: skip
    given = trial["moment_weights"][sel] > 0
    Ym = regressor(true, q[given], qd[given], qdd[given], quantity="joint_moments")[0]
    Yr, yr0 = regressor(true, q, qd, qdd, trial["loads"][sel], quantity="joint_reactions")
    # the magnitudes |lambda| linearised at the true parameters: rows u^T Y, u = lambda / |lambda|
    lam = np.asarray(Yr) @ np.asarray(to_parameters(true)) + np.asarray(yr0)
    u = lam / np.maximum(np.linalg.norm(lam, axis=-1, keepdims=True), 1e-300)
    Ymag = np.einsum("tjc,tjcp->tjp", u, np.asarray(Yr))
    only = base_parameters(true, np.asarray(Ym))
    both = base_parameters(true, [np.asarray(Ym), Ymag])
    ident = only.identifiable()
    tp, sp = np.asarray(to_physical(true)), np.asarray(to_physical(start))
    L = np.asarray(true.length)
    # a physical parameter is identifiable from moments alone when its barycentric
    # parameter is (mass) or when it follows from identifiable ones (com: m c / m)
    rows = []
    for i, s in enumerate(true.names):
        for j, p in enumerate(PHYSICAL):
            k = 4 * i + j
            if j == 0:
                idm = bool(ident[4 * i])
            elif j in (1, 2):
                idm = bool(ident[4 * i] and ident[k])
            else:
                idm = bool(ident[4 * i] and ident[4 * i + 1] and ident[4 * i + 2] and ident[4 * i + 3])
            err = res.physical[i, j] - tp[i, j]
            scale = L[i] if j in (1, 2) else tp[i, j]
            rows.append(dict(parameter=f"{p}[{s}]", unit=_UNITS[p], true=tp[i, j], start=sp[i, j],
                             barycentric=f"{PARAMETERS[j]}[{s}]", barycentric_identifiable_from_moments=bool(ident[k]),
                             fitted=res.physical[i, j], stderr=res.stderr_physical[i, j], error=err,
                             relative_error=err / scale, scale=scale,
                             relative_to="length" if j in (1, 2) else "true value",
                             identifiable_from_moments=idm))  # fmt: skip
    return dict(true=true, start=start, fit=res, moments_only=only, with_forces=both, rows=rows, trial=trial)


def recovery_figure(rows, title: str | None = None):
    """Absolute errors of every parameter at the start and after the fit, log scale
    (``rows`` of :func:`recover_running`). Returns a matplotlib Figure."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(rows))
    start = np.array([100 * abs(r["start"] - r["true"]) / r["scale"] for r in rows])
    fitted = np.array([100 * abs(r["relative_error"]) for r in rows])
    floor = 1e-5
    ax.bar(x - 0.2, np.maximum(start, floor), 0.4, label="start", color="0.7")
    ax.bar(x + 0.2, np.maximum(fitted, floor), 0.4, label="fitted", color="C0")
    ax.set_yscale("log")
    ax.set_ylim(floor, 100)
    ax.set_xticks(x, [r["parameter"] for r in rows], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("|error| (% of true value;\ncom: % of segment length)")
    ax.legend(frameon=False, loc="upper right", ncols=2)
    ax.set_title(title or "Running leg: segment parameters from the true moments and force magnitudes")
    return fig


def bands_figure(time, bands: Bands, true=None, *, joints=("hip", "knee", "ankle"), title: str | None = None):
    """Joint moments with their bands (first and last quantile levels). Returns a
    matplotlib Figure."""
    from matplotlib.figure import Figure

    k = bands.nominal.shape[-1]
    fig = Figure(figsize=(8, 2.4 * k), layout="constrained")
    axs = np.atleast_1d(fig.subplots(k, 1, sharex=True))
    for j in range(k):
        ax = axs[j]
        ax.fill_between(time, bands.quantiles[0][:, j], bands.quantiles[-1][:, j], color="C0", alpha=0.3,
                        lw=0, label=f"{100 * (bands.levels[-1] - bands.levels[0]):.0f}% band")  # fmt: skip
        ax.plot(time, bands.nominal[:, j], color="C0", lw=1, label="nominal parameters")
        if true is not None:
            ax.plot(time, true[:, j], "r--", lw=0.8, label="true")
        ax.set_ylabel(f"{joints[j] if j < len(joints) else j} moment (N m)")
    axs[0].legend(frameon=False, fontsize=8)
    axs[-1].set_xlabel("time (s)")
    fig.suptitle(title or "Joint moments and the band induced by the anthropometric uncertainty")
    return fig
