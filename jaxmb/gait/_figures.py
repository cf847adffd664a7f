"""Figures of a gait result: moments and reactions against the truth, and the effect
of each term of the inverse dynamics. matplotlib is imported by the figure functions
only (``import jaxmb.gait`` selects no backend)."""

from __future__ import annotations

import numpy as np

from ._result import _MOMENT_SIGN, JOINTS, TERMS, GaitResult
from ._terms import _rms, term_effects



#: What a positive moment is at the hip, knee and ankle in each convention (the figures'
#: axis labels): jaxmb's moments are counter-clockwise positive for a subject facing +x
#: seen from the right, so a flexor moment at the hip, an extensor one at the knee and a
#: dorsiflexor one at the ankle (a plantarflexor moment is negative).
MOMENT_POSITIVE = {"jaxmb": ("flexor", "extensor", "dorsiflexor"),
                    "clinical": ("extensor", "extensor", "plantarflexor")}  # fmt: skip


#: The sign convention of the moments, as the figures state it.
CONVENTION_TEXT = {
    "jaxmb": "jaxmb convention: moments counter-clockwise positive, seen from the subject's right (x forward, y up):\n"
             "hip flexor, knee extensor, ankle dorsiflexor moments positive; plantarflexor moment negative",
    "clinical": "clinical convention: hip and knee extensor, ankle plantarflexor moments positive",
}


def _stance_runs(where) -> list:
    """The (start, stop) runs of True in a (T,) bool mask (stop exclusive): the
    stances of a figure, each drawn against its own % of stance."""
    w = np.concatenate([[False], np.asarray(where, bool), [False]])
    edges = np.flatnonzero(np.diff(w.astype(np.int8)))
    return list(zip(edges[::2], edges[1::2]))


def _percent(n: int) -> np.ndarray:
    """(n,) % of a stance of n samples: 0 at its first, 100 at its last."""
    return 100.0 * np.arange(n) / max(n - 1, 1)


def _moment_scale(eff, values, j) -> float:
    """N m: the size of the moments at joint ``j`` in :func:`term_effects`' ``eff``:
    the largest of the RMS changes ``values``, the full moment's RMS over stance and
    each term's (0 without any)."""
    w = eff["where"]
    full = _rms(eff["full"]["moments"][w, j]) if np.any(w) else np.nan
    terms = [eff["terms"][k]["moment_rms"][j] for k in TERMS] if "terms" in eff else []
    return float(np.nanmax(np.r_[np.abs(values), full, terms, 0.0]))


def _roundoff(result, scale) -> float:
    """N m: an RMS change below this is round-off (100 ulps of the moments' scale,
    in the result's precision), drawn as zero."""
    dt = np.asarray(result.moments).dtype
    eps = np.finfo(dt if np.issubdtype(dt, np.floating) else np.float64).eps
    return 100.0 * eps * scale


def term_effects_figure(result: GaitResult, true_moments=None, effects: dict | None = None):
    """Figure of the notebook's comparison: full and quasi-static estimates (and the
    truth) over the stance phase, and the RMS change when each term is dropped.

    Top row: the moments (N m, in the result's convention, stated in the title and the
    axis labels) against % of stance (each run of ``effects["where"]`` one stance,
    0 % at its first sample, 100 % at its last: the same axis as the command line's
    stance figure). Bottom row: the RMS change of each joint's moment over stance (N m,
    a linear axis, each bar labelled with its value); a change below round-off (100
    ulps of the largest term or moment at that joint, in the result's precision, e.g.
    the foot's weight at the ankle when its centre of mass is at the ankle) is drawn
    as no bar and labelled "0 (below round-off)".

    matplotlib's object API (no backend is selected): ``fig.savefig(path)``.
    """
    from matplotlib.figure import Figure

    eff = term_effects(result, true_moments) if effects is None else effects
    runs = _stance_runs(eff["where"])
    fig = Figure(figsize=(11, 6.5), layout="constrained")
    axs = fig.subplots(2, 3)
    sign = _MOMENT_SIGN if result.convention == "clinical" else np.ones(3)
    positive = MOMENT_POSITIVE[result.convention]
    curves = [(eff["full"]["moments"], "C0", "-", "inverse dynamics"),
              (eff["quasi_static"]["moments"], "C1", "-", "quasi-static (no inertia)")]  # fmt: skip
    if true_moments is not None:
        curves.append((np.asarray(true_moments) * sign, "k", "--", "true"))
    for j, joint in enumerate(JOINTS):
        ax = axs[0, j]
        for m_, color, ls, label in curves:
            for i, (a, b) in enumerate(runs):
                ax.plot(_percent(b - a), m_[a:b, j], color=color, ls=ls, lw=1 if ls == "--" else 1.5,
                        label=label if i == 0 else None)  # fmt: skip
        ax.axhline(0, color="0.6", lw=0.5)
        ax.set_title(f"{joint} moment")
        ax.set_xlabel("stance (%)")
        ax.set_ylabel(f"N m (+ {positive[j]})")
    if runs:
        axs[0, 0].legend(frameon=False, fontsize=8, title="one line per stance" if len(runs) > 1 else None,
                         title_fontsize=8)  # fmt: skip
    names = ["quasi_static"] + [f"without_{k}" for k in TERMS]
    labels = ["quasi-static", "no gravity", "no GRF", "no m a", "no I alpha"]
    x = np.arange(len(names))
    for j, joint in enumerate(JOINTS):
        ax = axs[1, j]
        values = np.array([eff[n]["moment_change_rms"][j] for n in names], float)
        _change_bars(ax, x, values, _roundoff(result, _moment_scale(eff, values, j)))
        ax.set_xticks(x, labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{joint}: RMS change of the moment")
        ax.set_ylabel("N m (RMS over stance)")
    fig.suptitle(f"Effect of each term of the inverse dynamics over stance, when it is dropped\n"
                 f"{CONVENTION_TEXT[result.convention]}", fontsize="medium")  # fmt: skip
    return fig


def _change_bars(ax, x, values, zero):
    """Bars of the RMS changes ``values`` (N m) at ``x``, each labelled with its value;
    a value below ``zero`` (round-off) is no bar and the label "0 (below round-off)",
    a NaN (no stance sample) no bar and "no data"."""
    small = np.isfinite(values) & (np.abs(values) < zero)
    drawn = np.isfinite(values) & ~small
    top = float(values[drawn].max()) if drawn.any() else 1.0
    bars = ax.bar(x[drawn], values[drawn], color="C1")
    ax.bar_label(bars, labels=[f"{v:.3g}" for v in values[drawn]], fontsize=7, padding=2)
    for xi, v in zip(x, values):
        if not np.isfinite(v) or abs(v) < zero:
            ax.text(xi, 0.02 * top, "0 (below round-off)" if np.isfinite(v) else "no data",
                    rotation=90, ha="center", va="bottom", fontsize=7, color="0.35")  # fmt: skip
    ax.set_ylim(0, 1.15 * top)
    ax.set_xlim(x[0] - 0.6, x[-1] + 0.6)


def moments_figure(result: GaitResult, true_moments=None, true_force_magnitudes=None, *, title=None):
    """Figure: moments and reaction-force magnitudes at hip, knee, ankle (one trial),
    against the truth when given (jaxmb convention truth; converted if needed).

    Against the time of the trial, s (the whole trial, swing included). The moments,
    N m, in the result's convention, stated under the title and on each axis (what a
    positive moment is at that joint); the reaction forces, N, are magnitudes (no sign).

    matplotlib's object API (no backend is selected): ``fig.savefig(path)``.
    """
    from matplotlib.figure import Figure

    if result.need("moments").ndim != 2:
        raise ValueError("moments_figure takes the result of one trial")
    fig = Figure(figsize=(10, 7), layout="constrained")
    axs = fig.subplots(3, 2, sharex=True)
    sign = _MOMENT_SIGN if result.convention == "clinical" else np.ones(3)
    positive = MOMENT_POSITIVE[result.convention]
    mag = result.reaction_magnitudes
    for j, joint in enumerate(JOINTS):
        axs[j, 0].plot(result.time, mag[:, j], label="jaxmb")
        axs[j, 1].plot(result.time, result.moments[:, j], label="jaxmb")
        axs[j, 1].axhline(0, color="0.6", lw=0.5)
        if true_force_magnitudes is not None:
            axs[j, 0].plot(result.time, true_force_magnitudes[:, j], "r--", lw=1, label="true")
        if true_moments is not None:
            tm = np.where(np.any(true_moments != 0, axis=1, keepdims=True), true_moments, np.nan) * sign
            axs[j, 1].plot(result.time, tm[:, j], "r--", lw=1, label="true")
        axs[j, 0].set_ylabel(f"{joint} reaction (N)\nmagnitude")
        axs[j, 1].set_ylabel(f"{joint} moment (N m)\n+ {positive[j]}")
    axs[0, 0].legend(frameon=False)
    axs[-1, 0].set_xlabel("time (s)")
    axs[-1, 1].set_xlabel("time (s)")
    fig.suptitle(f"{title or 'Joint reaction magnitudes and moments'}\n{CONVENTION_TEXT[result.convention]}",
                 fontsize="medium")  # fmt: skip
    return fig
