"""Draw docs/conventions.png: one segment and its child, with every convention.

Run: python docs/make_conventions_figure.py
"""

import os

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Arc, FancyArrowPatch

HERE = os.path.dirname(os.path.abspath(__file__))


def arrow(ax, p, q, color="k", lw=1.6, style="-|>", ms=12):
    ax.add_patch(FancyArrowPatch(p, q, arrowstyle=style, mutation_scale=ms, color=color, lw=lw))


def draw():
    """The conventions' figure (a matplotlib Figure): every label clear of the others
    and of the drawing (tests/test_cli_commands.py checks it)."""
    fig = Figure(figsize=(8.6, 5.6), layout="constrained")
    ax = fig.subplots()
    ax.set_aspect("equal")
    ax.axis("off")

    # parent segment (i-1) and segment i
    th_p, q_i = np.deg2rad(15), np.deg2rad(40)
    th_i = th_p + q_i
    P_p = np.array([0.0, 0.0])
    L_p, a_i = 2.4, 2.0  # parent length, attachment distance along the parent
    u_p = np.array([np.cos(th_p), np.sin(th_p)])
    P_i = P_p + a_i * u_p
    L_i, d_i = 2.6, 1.1
    u_i = np.array([np.cos(th_i), np.sin(th_i)])
    n_i = np.array([-u_i[1], u_i[0]])
    D_i = P_i + L_i * u_i
    C_i = P_i + d_i * u_i

    ax.plot(*np.c_[P_p, P_p + L_p * u_p], color="0.55", lw=9, solid_capstyle="round", alpha=0.6)
    ax.plot(*np.c_[P_i, D_i], color="C0", lw=9, solid_capstyle="round", alpha=0.7)
    ax.plot(*P_p, "ko", ms=7)
    ax.plot(*P_i, "ko", ms=9)
    ax.plot(*C_i, marker="o", ms=13, mfc="w", mec="k")
    ax.plot(*C_i, marker="+", ms=13, color="k")
    ax.text(*(P_p + [-0.35, 0.2]), "$P_{parent}$", fontsize=11)
    ax.text(*(P_p + 0.7 * u_p + [-0.1, 0.25]), "parent", color="0.4", fontsize=11, rotation=15)
    ax.text(*(P_i + [0.55, -0.3]), "$P_i$ (joint $i$)", fontsize=11)
    ax.text(*(D_i + [0.1, 0.05]), "distal end", fontsize=10)
    ax.text(*(C_i + [0.3, -0.05]), "$c_i$: $m_i$, $I_i$", fontsize=11)

    # dimension lines: attach along parent, d and L along segment i
    off_p = np.array([-u_p[1], u_p[0]]) * -0.9
    arrow(ax, P_p + off_p, P_i + off_p, style="<|-|>", color="0.3", lw=1.0, ms=8)
    for end in (P_p, P_i):  # extension lines from the joints down to the dimension line
        ax.plot(*np.c_[end + 0.15 * off_p, end + 1.1 * off_p], color="0.3", lw=0.6)
    ax.text(*(P_p + 0.5 * (P_i - P_p) + off_p * 1.3), "attach$_i$", ha="center", va="top", fontsize=10,
            color="0.3", rotation=np.rad2deg(th_p))
    off = 0.35 * n_i
    arrow(ax, P_i + off, C_i + off, style="<|-|>", color="C3", lw=1.0, ms=8)
    ax.text(*((P_i + C_i) / 2 + off * 1.8), "$d_i$", color="C3", fontsize=12, ha="center")
    off2 = 0.85 * n_i
    arrow(ax, P_i + off2, D_i + off2, style="<|-|>", color="C2", lw=1.0, ms=8)
    ax.text(*((P_i + D_i) / 2 + off2 * 1.35), "$L_i$", color="C2", fontsize=12, ha="center")

    # angles: theta_i from +x (absolute), q_i from the parent's axis (relative)
    ax.plot(*np.c_[P_i, P_i + [1.5, 0]], color="k", lw=0.8, ls=":")
    ax.plot(*np.c_[P_i, P_i + 1.3 * u_p], color="0.4", lw=0.8, ls="--")
    ax.add_patch(Arc(P_i, 2.2, 2.2, theta1=0, theta2=np.rad2deg(th_i), color="C1", lw=1.4))
    ax.text(*(P_i + [1.2, 0.12]), r"$\theta_i$ (absolute)", color="C1", fontsize=11)
    ax.add_patch(Arc(P_i, 1.3, 1.3, theta1=np.rad2deg(th_p), theta2=np.rad2deg(th_i), color="C4", lw=1.4))
    mid = (th_p + th_i) / 2
    ax.text(*(P_i + 0.95 * np.array([np.cos(mid), np.sin(mid)])), "$q_i$", color="C4", fontsize=12,
            ha="center", va="center")

    # joint moment and reaction on segment i (parent on child)
    ax.add_patch(Arc(P_i, 0.7, 0.7, theta1=150, theta2=330, color="C5", lw=2))
    arrow(ax, P_i + 0.35 * np.array([np.cos(np.deg2rad(325)), np.sin(np.deg2rad(325))]),
          P_i + 0.35 * np.array([np.cos(np.deg2rad(338)), np.sin(np.deg2rad(338))]), color="C5", ms=10)
    ax.text(*(P_i + [0.55, -0.62]), r"$\tau_i$ (CCW +, parent on $i$)", color="C5", fontsize=10)
    lam = np.array([0.5, 0.9])
    arrow(ax, P_i - 0.8 * lam, P_i - 0.08 * lam / np.linalg.norm(lam), color="C9", lw=2.2)
    ax.text(*(P_i - 0.8 * lam + [-0.1, -0.05]), "$\\lambda_i$: force of\nparent on $i$", color="C9", fontsize=10,
            ha="right", va="center")

    # local frame of the centre of mass offset, and world axes
    f0 = D_i + [1.3, -1.1]
    arrow(ax, f0, f0 + 0.6 * u_i, color="k", lw=1, ms=8)
    arrow(ax, f0, f0 + 0.6 * n_i, color="k", lw=1, ms=8)
    ax.text(*(f0 + 0.72 * u_i), "along", fontsize=9, ha="center")
    ax.text(*(f0 + 0.72 * n_i), "across", fontsize=9, ha="right")
    o = np.array([-1.2, 2.6])
    arrow(ax, o, o + [0.8, 0], lw=1.2, ms=9)
    arrow(ax, o, o + [0, 0.8], lw=1.2, ms=9)
    ax.text(*(o + [0.85, -0.08]), "x", fontsize=11)
    ax.text(*(o + [-0.08, 0.88]), "y", fontsize=11)
    arrow(ax, o + [0.3, -0.4], o + [0.3, -1.1], color="0.3", lw=1.2, ms=9)
    ax.text(*(o + [0.4, -0.85]), "g", fontsize=11, color="0.3")

    ax.set_xlim(-1.6, 5.2)
    ax.set_ylim(-1.9, 4.1)
    ax.text(-1.5, -1.8, r"relative: $\theta_i = \theta_{parent} + q_i$;   absolute: $\theta_i = q_i$;   "
            r"$\lambda$ (segment frame) = (axial, shear) along/across segment $i$", fontsize=9)
    return fig


def main(path=os.path.join(HERE, "conventions.png")):
    """Write the figure to ``path`` (docs/conventions.png), 110 dpi; returns the path."""
    draw().savefig(path, dpi=110)
    return path


if __name__ == "__main__":
    print(main())
