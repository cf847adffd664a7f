"""Figures with matplotlib's object API (no pyplot, no backend is chosen or changed)."""

from __future__ import annotations

import numpy as np

__all__ = ["torque_components_figure", "stick_figure"]

_TERMS = (("inertial", "M q̈ (inertial)"), ("coriolis", "C (Coriolis/centripetal)"),
          ("gravity", "G (gravity)"), ("external", "E (external)"), ("total", "total"))


def torque_components_figure(t, parts, *, joint_names=None, title=None):
    """One panel per joint with the terms of tau = M qdd + C + G + E over time.

    Args:
      t: (T,) time, s.
      parts: dict of (T, dof) arrays as returned by ``jax.vmap(torque_components)``.
      joint_names: optional names of the dof.
      title: optional figure title.

    Returns:
      a ``matplotlib.figure.Figure`` (save it with ``fig.savefig``).
    """
    from matplotlib.figure import Figure

    total = np.asarray(parts["total"])
    dof = total.shape[1]
    names = joint_names or [f"q{j}" for j in range(dof)]
    fig = Figure(figsize=(4.2 * dof, 3.6), layout="constrained")
    axes = fig.subplots(1, dof, sharex=True, squeeze=False)[0]
    for j, ax in enumerate(axes):
        for key, label in _TERMS:
            if key in parts:
                style = dict(color="k", ls="--", lw=2.5) if key == "total" else dict(lw=1.8)
                ax.plot(t, np.asarray(parts[key])[:, j], label=label, **style)
        ax.set_title(names[j])
        ax.set_xlabel("time (s)")
        ax.axhline(0, color="0.7", lw=0.8)
    axes[0].set_ylabel("torque (N m)")
    axes[-1].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    return fig


def stick_figure(model, qs, *, every=1, ax=None, color="C0"):
    """Draw a model's segments (proximal to distal point) for a sequence of poses.

    Args:
      model: a jaxmb Model.
      qs: (T, dof) coordinates.
      every: draw one pose in ``every``.
      ax: an existing matplotlib Axes; a new Figure is made when None.

    Returns:
      the Figure (or the Axes' figure).
    """
    from matplotlib.figure import Figure

    from .kinematics import distal_positions, joint_positions

    if ax is None:
        fig = Figure(figsize=(5, 5), layout="constrained")
        ax = fig.subplots()
    qs = np.asarray(qs)
    for k in range(0, qs.shape[0], every):
        P = np.asarray(joint_positions(model, qs[k]))
        Dd = np.asarray(distal_positions(model, qs[k]))
        for i in range(model.segments):
            ax.plot([P[i, 0], Dd[i, 0]], [P[i, 1], Dd[i, 1]], color=color, lw=1.5, alpha=0.6)
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    return ax.figure
