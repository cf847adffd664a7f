"""The figure helpers: units per panel, and their input checks (headless: the object
API, no backend)."""

import numpy as np
import pytest

import jaxmb
from jaxmb import plot


def _parts(model, T=6):
    q = np.tile(np.r_[np.zeros(model.nbase), np.linspace(0.1, 0.4, model.segments)], (T, 1))
    qd = np.full_like(q, 0.3)
    return jaxmb.torque_components(model, q, qd, np.zeros_like(q)), q


def test_torque_components_figure_gives_each_panel_its_unit():
    human = jaxmb.seven_segment_human()
    parts, _ = _parts(human)
    t = np.arange(6) / 100
    fig = plot.torque_components_figure(t, parts, model=human)
    labels = [ax.get_ylabel() for ax in fig.axes]
    # a floating base: its two translations are forces (N); segment angles take
    # generalized forces (N m), which are not the joint moments
    assert human.coordinates == "absolute"
    assert labels[:2] == ["base force x (N)", "base force y (N)"] and set(labels[2:]) == {"generalized force (N m)"}
    # joint angles of a fixed base: the generalized forces are the joint torques
    arm = jaxmb.chain([0.3, 0.33], [0.15, 0.16], [2.0, 1.5], [0.02, 0.015])
    arm_parts, _ = _parts(arm)
    assert {ax.get_ylabel() for ax in plot.torque_components_figure(t, arm_parts, model=arm).axes} == {
        "joint torque (N m)"}
    assert [ax.get_title() for ax in fig.axes][:3] == ["base x", "base y", human.names[0]]
    # without the model every panel says both units
    assert {ax.get_ylabel() for ax in plot.torque_components_figure(t, parts).axes} == {
        "generalized force (N m, or N for a translation)"}
    # nine panels in rows of four (they were one row 37.8 inches wide), each with its
    # time axis: the lowest panel of each column shows its tick labels
    assert len(fig.axes) == 9 and tuple(fig.get_size_inches()) == pytest.approx((16.8, 10.2))
    assert [ax.xaxis.get_tick_params()["labelbottom"] for ax in fig.axes] == [False] * 5 + [True] * 4
    with pytest.raises(ValueError, match="joint_names must have 9 entries"):
        plot.torque_components_figure(t, parts, joint_names=["a"])
    with pytest.raises(ValueError, match="parts have 9 coordinates but the model has dof=2"):
        plot.torque_components_figure(t, parts, model=jaxmb.two_link_arm())
    # before: a string split into one-letter names, a KeyError, AttributeErrors
    with pytest.raises(ValueError, match="joint_names must be a sequence of names, one per coordinate, not the "
                                         "string 'abcdefghi'"):
        plot.torque_components_figure(t, parts, joint_names="abcdefghi")
    with pytest.raises(ValueError, match=r"parts must be a dict with some of the terms .*got tuple"):
        plot.torque_components_figure(t, tuple(parts.values()))
    with pytest.raises(ValueError, match="model must be a jaxmb Model, got str"):
        plot.torque_components_figure(t, parts, model="human")
    with pytest.raises(ValueError, match=r"got t \(6,\) and gravity \(3, 9\)"):
        plot.torque_components_figure(t, {"total": parts["total"], "gravity": parts["gravity"][:3]})
    # any of the terms: those present are drawn
    fig = plot.torque_components_figure(t, {"gravity": parts["gravity"]}, model=human)
    assert [line.get_label() for line in fig.axes[0].lines[:1]] == ["G (gravity)"]


def test_stick_figure_takes_one_pose_and_checks_every():
    arm = jaxmb.two_link_arm()
    _, q = _parts(arm)
    assert len(plot.stick_figure(arm, q[0]).axes[0].lines) == arm.segments  # one pose
    assert len(plot.stick_figure(arm, q, every=2).axes[0].lines) == 3 * arm.segments
    with pytest.raises(ValueError, match="every must be an int >= 1"):
        plot.stick_figure(arm, q, every=0)
    with pytest.raises(ValueError, match=r"qs must have shape \(T, 2\)"):
        plot.stick_figure(arm, q[:, :1])


@pytest.mark.parametrize("q", [(-np.pi / 2, 0.0), (0.0, 0.0)], ids=["hanging", "horizontal"])
def test_stick_figure_of_a_straight_pose_keeps_its_axes(q):
    """A pose along one axis has no extent along the other: equal scales must widen the
    data limits, not collapse the axes box (it had zero width for a hanging arm)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = plot.stick_figure(jaxmb.two_link_arm(), np.array(q))
    FigureCanvasAgg(fig).draw()  # aspect is applied at draw time
    ax = fig.axes[0]
    _, _, width, height = ax.get_position().bounds
    assert width > 0.5 and height > 0.5  # the box fills most of the square figure
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    assert x1 - x0 == pytest.approx(y1 - y0, rel=0.05)  # equal scales on a square box
    arm_length = float(np.sum(jaxmb.two_link_arm().length))
    assert max(x1 - x0, y1 - y0) >= arm_length  # the whole arm is in view
