"""The joint torques of a minimum-jerk reach with the two-link arm of the notes.

A worked example of the engine: the hand follows Flash and Hogan's minimum-jerk path
(:func:`jaxmb.optimal.minimum_jerk`), the joint angles come from the closed-form
inverse kinematics (:func:`jaxmb.optimal.two_link_ik`) and their time derivatives
from forward-mode autodiff, and the inverse dynamics split the torque into its terms,

    tau = M(q) qdd + C(q, qd) + G(q).

``jaxmb reach`` prints and writes them; ``experiments/reaching_torques.py`` reproduces
the notes' figures with them.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from .anthropometry import two_link_arm
from .dynamics import torque_components
from .optimal import minimum_jerk, time_derivatives, two_link_ik

__all__ = ["reaching_torques", "reach_endpoints", "torque_summary"]


def reaching_torques(duration: float = 0.5, *, gravity: float = 9.81, samples: int = 201,
                     height: float = 1.70, body_mass: float = 70.0, elbow0_deg: float = 10.0,
                     start=None, end=None):
    """Joint torques of a minimum-jerk reach with the two-link arm of the notes.

    The hand moves along a straight minimum-jerk path from ``start`` to ``end``
    (Flash & Hogan), the elbow flexed counter-clockwise (``two_link_ik``'s "up"),
    in the arm's plane: shoulder at the origin, x forward, y up, gravity along -y.
    By default, the notes' reach: from below the shoulder (upper arm vertical, elbow
    flexed ``elbow0_deg``; the notes start fully extended, a singular point of the
    inverse kinematics that they coerce) to the upper arm forward and horizontal with
    the elbow at 90 degrees. Angles come from the inverse kinematics and their time
    derivatives from forward-mode autodiff (exact); the torques are decomposed into
    M qdd, C and G with jit and vmap over time.

    Args:
      duration: movement time, s.
      start, end: hand positions (x, y), m, in the shoulder frame; None: the notes'
        points above. Both must lie strictly inside the arm's reach
        (|L1 - L2| < |p| < L1 + L2: on its edges the arm is straight or folded and the
        joint speeds infinite), and so must the straight path between them.

    Returns:
      dict of numpy arrays: t (T,), q, qd, qdd (T, 2) (q: shoulder angle from +x and
      elbow angle, rad, continuous in time) and the torque terms "inertial",
      "coriolis", "gravity", "total" (T, 2), N m; "start", "end" (2,) the hand's
      endpoints, m.

    Example:
      >>> res = reaching_torques(0.5, samples=101)  # doctest: +SKIP
      >>> res["total"].shape  # doctest: +SKIP
      (101, 2)

    Raises:
      ValueError: a start or end that is not two finite numbers, is out of reach,
        or equals the other; a straight path that passes inside the arm's inner
        reach.
    """
    model = two_link_arm(height=height, body_mass=body_mass, gravity=gravity)
    L1, L2 = (float(x) for x in model.length)
    x0, x1 = reach_endpoints(start, end, L1, L2, elbow0_deg=elbow0_deg)
    t = np.linspace(0.0, duration, samples)

    q_of_t = lambda s: two_link_ik(minimum_jerk(x0, x1, duration, s), L1, L2, elbow="up")  # noqa: E731
    q, qd, qdd = time_derivatives(q_of_t, jnp.asarray(t))
    parts = torque_components(model, q, qd, qdd)  # batched over time: one compiled call, cached across calls
    out = {k: np.asarray(v) for k, v in parts.items() if k != "external"}
    # the angles without arctan2's jumps of 2 pi (the torques depend on them through
    # sines and cosines only, and the rates come from autodiff)
    out.update(t=t, q=np.unwrap(np.asarray(q), axis=0), qd=np.asarray(qd), qdd=np.asarray(qdd), start=x0, end=x1)
    return out


def reach_endpoints(start, end, L1: float, L2: float, *, elbow0_deg: float = 10.0, names=("start", "end")):
    """The checked hand endpoints of :func:`reaching_torques`, two (2,) arrays, m.

    Args:
      start, end: hand positions (x, y), m, in the shoulder frame, or None.
      L1, L2: upper-arm and forearm lengths, m.
      elbow0_deg: the elbow's flexion at the default start, deg.
      names: what the errors call ``start`` and ``end``.

    ``start``/``end`` None: the notes' points (upper arm vertical with the elbow
    flexed ``elbow0_deg``; upper arm forward and horizontal, elbow at 90 degrees).
    ``names`` are the names the errors use (the command line's ``--start``, ``--end``).

    Raises:
      ValueError: naming the point: not two finite numbers, not strictly inside
        |L1 - L2| < |p| < L1 + L2 (m), both the same point, or a straight path
        between them that passes inside the inner reach |L1 - L2| (where the hand
        cannot go).

    Example:
      >>> x0, x1 = reach_endpoints(None, (0.3, 0.4), 0.32, 0.44)
    """
    e0 = np.deg2rad(elbow0_deg)
    default = (np.array([L2 * np.sin(e0), -L1 - L2 * np.cos(e0)]), np.array([L1, L2]))
    inner, outer = abs(L1 - L2), L1 + L2
    points = []
    for name, p, d in zip(names, (start, end), default):
        if p is None:
            points.append(d)
            continue
        a = np.asarray(p, dtype=float)
        if a.shape != (2,) or not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be two finite numbers, the hand's x and y in m, "
                             f"got {np.asarray(p).tolist()}")
        r = float(np.hypot(*a))
        if not inner < r < outer:
            bound = outer if r >= outer else inner
            digits = next((k for k in range(3, 16) if f"{r:.{k}f}" != f"{bound:.{k}f}"), 4)  # 4: on the edge
            raise ValueError(f"{name} {a[0]:g} {a[1]:g} is out of reach: |p| = {r:.{digits}f} m from the shoulder, "
                             f"the hand reaches {inner:.{digits}f} m < |p| < {outer:.{digits}f} m (on the edges the "
                             "arm is straight or folded and its joint speeds infinite)")
        points.append(a)
    x0, x1 = points
    chord = x1 - x0
    length = float(np.linalg.norm(chord))
    if length < 1e-9:
        raise ValueError(f"{names[0]} and {names[1]} are the same point ({x0[0]:g} {x0[1]:g}): a reach needs a "
                         "target 1e-9 m or more from the start")
    s = float(np.clip(-x0 @ chord / length**2, 0.0, 1.0))
    closest = float(np.linalg.norm(x0 + s * chord))
    if closest <= inner:
        raise ValueError(f"the straight hand path from {names[0]} {x0[0]:g} {x0[1]:g} to {names[1]} {x1[0]:g} "
                         f"{x1[1]:g} passes {closest:.4f} m from the shoulder, inside the arm's inner reach "
                         f"|L1 - L2| = {inner:.4f} m, where the hand cannot go")
    return x0, x1


def torque_summary(res, joints=("shoulder", "elbow")) -> dict:
    """Peak and RMS of each torque term of each joint, and the fraction of the time in
    which the dynamic terms exceed gravity, ``|M qdd + C| > |G|``.

    Args:
      res: :func:`reaching_torques`'s dict: "inertial", "coriolis", "gravity",
        "total", each (T, joints), N m.
      joints: the joints' names, in the order of the columns.

    Returns:
      {joint: {term: {"peak", "rms"} (N m), "fraction_dynamic_gt_gravity"}}.

    Example:
      >>> summary = torque_summary(reaching_torques(0.5))  # doctest: +SKIP
      >>> summary.keys()  # doctest: +SKIP
      dict_keys(['shoulder', 'elbow'])
    """
    dyn = res["inertial"] + res["coriolis"]
    rows = {}
    for j, joint in enumerate(joints):
        r = {k: {"peak": float(np.max(np.abs(res[k][:, j]))), "rms": float(np.sqrt(np.mean(res[k][:, j] ** 2)))}
             for k in ("inertial", "coriolis", "gravity", "total")}
        r["fraction_dynamic_gt_gravity"] = float(np.mean(np.abs(dyn[:, j]) > np.abs(res["gravity"][:, j])))
        rows[joint] = r
    return rows
