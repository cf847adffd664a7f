"""Reproduce the reaching simulation of the multibody notes (Duarte).

The two-link arm (Dempster's parameters for 1.70 m, 70 kg) reaches with a
minimum-jerk hand path from below the shoulder to the upper arm forward and the
elbow at 90 degrees, slowly (4 s), fast (0.5 s) and fast in the horizontal plane
(g = 0). The notes find: slow, "the joint torques essentially compensate the
gravitational torque"; fast, "the interaction torques are larger than the
gravitational torques for most part of the movement".

Run: python experiments/arm_reaching.py   (figures and summary in experiments/out/)
"""

import json
import os

import jax
import numpy as np

from jaxmb.cli import _plot, _summary, reaching_torques

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def main():
    jax.config.update("jax_enable_x64", True)
    os.makedirs(OUT, exist_ok=True)
    results = {}
    for name, duration, g in (("slow", 4.0, 9.81), ("fast", 0.5, 9.81), ("fast_horizontal", 0.5, 0.0)):
        res = reaching_torques(duration, gravity=g)
        s = _summary(res)
        rms_dev = [float(np.sqrt(np.mean((res["total"][:, j] - res["gravity"][:, j]) ** 2))
                         / np.sqrt(np.mean(res["gravity"][:, j] ** 2))) if g > 0 else float("nan")
                   for j in range(2)]
        s["rms(total - gravity) / rms(gravity)"] = rms_dev
        results[name] = s
        _plot(res, os.path.join(OUT, f"arm_reaching_{name}.png"), f"{name.replace('_', ' ')}: {duration} s, g = {g}")
        print(f"{name:16s} shoulder: peak total {s['shoulder']['total']['peak']:6.2f} N m, "
              f"|M qdd + C| > |G| {100 * s['shoulder']['fraction_dynamic_gt_gravity']:3.0f}% of the time;  "
              f"elbow: peak total {s['elbow']['total']['peak']:6.2f} N m, "
              f"{100 * s['elbow']['fraction_dynamic_gt_gravity']:3.0f}%;  "
              f"rms(total-G)/rms(G) = {rms_dev[0]:.3f}, {rms_dev[1]:.3f}")
    with open(os.path.join(OUT, "arm_reaching.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"figures and summary in {OUT}")


if __name__ == "__main__":
    main()
