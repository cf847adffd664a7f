"""Figures with matplotlib's object API (no pyplot, no backend is chosen or changed)."""

from __future__ import annotations

import numpy as np

from .kinematics import distal_positions, joint_positions
from .model import Model

__all__ = ["torque_components_figure", "stick_figure"]

_TERMS = (("inertial", "M q̈ (inertial)"), ("coriolis", "C (Coriolis/centripetal)"),
          ("gravity", "G (gravity)"), ("external", "E (external)"), ("total", "total"))


def _check_model(model, name="model"):
    if not isinstance(model, Model):
        raise ValueError(f"{name} must be a jaxmb Model, got {type(model).__name__}")


def _force_label(model, j: int, nb: int) -> str:
    """The axis label of coordinate ``j``'s generalized force, named for what it is:
    with joint angles (relative coordinates) it is the joint torque (N m), a floating
    base's translation takes a force (N); with segment angles it is a generalized
    force, which is not the joint moment (``jaxmb.joint_moments`` converts)."""
    if model is None:
        return "generalized force (N m, or N for a translation)"
    if j < nb:
        return f"base force {'xy'[j]} (N)"
    return "joint torque (N m)" if model.coordinates == "relative" else "generalized force (N m)"


def torque_components_figure(t, parts, *, joint_names=None, title=None, model=None):
    """One panel per generalized coordinate with the terms of tau = M qdd + C + G + E
    over time.

    Args:
      t: (T,) time, s.
      parts: dict of (T, dof) arrays as returned by :func:`jaxmb.torque_components`
        on a (T, dof) time series: any of its terms "inertial", "coriolis",
        "gravity", "external" and "total" (the ones present are drawn).
      joint_names: optional sequence of the dof's names (default: from ``model``,
        else q0, q1, ...).
      title: optional figure title.
      model: optional; gives each panel its quantity and unit ("joint torque
        (N m)" for joint angles, "generalized force (N m)" for segment angles,
        "base force x (N)" for a floating base's translations) and default names.
        Without it every panel reads "generalized force (N m, or N for a
        translation)".

    Returns:
      a ``matplotlib.figure.Figure`` (save it with ``fig.savefig``): the panels in
      rows of at most 4.
    """
    from matplotlib.figure import Figure

    if not isinstance(parts, dict) or not any(k in parts for k, _ in _TERMS):
        got = sorted(map(str, parts)) if isinstance(parts, dict) else type(parts).__name__
        raise ValueError(f"parts must be a dict with some of the terms {', '.join(k for k, _ in _TERMS)} "
                         f"(jaxmb.torque_components' result), got {got}")  # fmt: skip
    if model is not None:
        _check_model(model)
    terms = {k: np.asarray(parts[k]) for k, _ in _TERMS if k in parts}
    t = np.asarray(t)
    first = next(iter(terms.values()))
    for k, v in terms.items():
        if v.ndim != 2 or t.ndim != 1 or t.shape != v.shape[:1] or v.shape != first.shape:
            raise ValueError(f"parts must hold (T, dof) arrays over the (T,) times, got t {t.shape} and "
                             f"{k} {v.shape}" + (f" ({next(iter(terms))} {first.shape})" if v is not first else ""))
    dof = first.shape[1]
    nb = 0 if model is None else model.nbase
    if model is not None and model.dof != dof:
        raise ValueError(f"parts have {dof} coordinates but the model has dof={model.dof}")
    if joint_names is None:
        joint_names = ([f"q{j}" for j in range(dof)] if model is None
                       else ["base x", "base y"][:nb] + list(model.names))  # fmt: skip
    if isinstance(joint_names, str):
        raise ValueError(f"joint_names must be a sequence of names, one per coordinate, not the string "
                         f"{joint_names!r}")  # fmt: skip
    names = list(joint_names)
    if len(names) != dof:
        raise ValueError(f"joint_names must have {dof} entries (one per coordinate), got {len(names)}")
    cols = min(dof, 4)
    rows = -(-dof // cols)
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows), layout="constrained")
    grid = fig.subplots(rows, cols, sharex=True, squeeze=False).ravel()
    for ax in grid[dof:]:
        ax.remove()
    axes = grid[:dof]
    for ax in axes[max(dof - cols, 0):]:  # the lowest panel of each column keeps its time ticks
        ax.xaxis.set_tick_params(labelbottom=True)
    for j, ax in enumerate(axes):
        for key, label in _TERMS:
            if key in terms:
                style = dict(color="k", ls="--", lw=2.5) if key == "total" else dict(lw=1.8)
                ax.plot(t, terms[key][:, j], label=label, **style)
        ax.set_title(names[j])
        ax.set_xlabel("time (s)")
        ax.set_ylabel(_force_label(model, j, nb))
        ax.axhline(0, color="0.7", lw=0.8)
    axes[-1].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return fig


def stick_figure(model, qs, *, every=1, ax=None, color="C0"):
    """Draw a model's segments (proximal to distal point) for a sequence of poses.

    Args:
      model: a jaxmb Model.
      qs: (T, dof) coordinates, or (dof,) for one pose.
      every: draw one pose in ``every``.
      ax: an existing matplotlib Axes; a new Figure is made when None.
      color: the segments' matplotlib colour (default "C0").

    Returns:
      the Figure (or the Axes' figure).
    """
    from matplotlib.figure import Figure

    _check_model(model)
    qs = np.asarray(qs)
    if qs.ndim == 1:
        qs = qs[None]  # one pose
    if qs.ndim != 2 or qs.shape[1] != model.dof:
        raise ValueError(f"qs must have shape (T, {model.dof}) or ({model.dof},) for one pose, got {qs.shape}")
    if isinstance(every, bool) or not isinstance(every, (int, np.integer)) or every < 1:
        raise ValueError(f"every must be an int >= 1 (draw one pose in every), got {every!r}")
    if ax is None:
        fig = Figure(figsize=(5, 5), layout="constrained")
        ax = fig.subplots()
    for k in range(0, qs.shape[0], every):
        P = np.asarray(joint_positions(model, qs[k]))
        Dd = np.asarray(distal_positions(model, qs[k]))
        for i in range(model.segments):
            ax.plot([P[i, 0], Dd[i, 0]], [P[i, 1], Dd[i, 1]], color=color, lw=1.5, alpha=0.6)
    # equal scales by widening the data limits, not by shrinking the axes box: a
    # pose along the vertical (or the horizontal) has no width (height) of its own,
    # and "equal" with the default adjustable="box" collapsed the box to nothing
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    return ax.figure
