"""Reproduce the reaching simulation of the multibody notes (Duarte), with the numbers.

The two-link arm (Dempster's parameters for 1.70 m, 70 kg) reaches with a
minimum-jerk hand path from below the shoulder to the upper arm forward and the
elbow at 90 degrees, slowly (4 s), fast (0.5 s) and fast in the horizontal plane
(g = 0). The torques are split as the notes split them, tau = M qdd + C + G, with
the interaction torque of a joint the part due to the other joint's motion
(the off-diagonal inertia times the other acceleration, plus C). The notes'
sentences and the fractions measured here behind them:

- slow: "the joint torques essentially compensate the gravitational torque" --
  rms(total - G) / rms(G), and the fraction of the movement with |total - G| < 10 % |G|;
- fast: "the interaction torques are larger than the gravitational torques for most
  part of the movement" -- the fraction of the movement with |interaction| > |G|
  (and with |M qdd + C| > |G|, the dynamic part as a whole);
- fast, horizontal plane: no gravity, so the torque is all dynamics -- the share of
  the interaction torque, rms(interaction) / rms(total).

Run: python experiments/reaching_torques.py   (figures in docs/reaching_torques_*.png,
summary printed and in experiments/out/reaching_torques.json)
"""

import json
import os

import jax
import numpy as np

import jaxmb
from jaxmb.reaching import reaching_torques, torque_summary
from jaxmb.plot import torque_components_figure

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, os.pardir, "docs")
OUT = os.path.join(HERE, "out")
REACHES = (("slow", 4.0, 9.81), ("fast", 0.5, 9.81), ("fast_horizontal", 0.5, 0.0))
JOINTS = ("shoulder", "elbow")


def interaction(res, gravity):
    """Interaction torque (T, 2): M_jk qdd_k for k != j, plus the Coriolis/centripetal C_j."""
    arm = jaxmb.two_link_arm(gravity=gravity)
    M = np.asarray(jaxmb.mass_matrix(arm, res["q"]))
    off = M - np.einsum("tii->ti", M)[..., None] * np.eye(2)
    return np.einsum("tjk,tk->tj", off, res["qdd"]) + res["coriolis"]


def fractions(res, gravity):
    """The measured numbers behind the notes' sentences, per joint."""
    G, total = res["gravity"], res["total"]
    inter = interaction(res, gravity)
    dyn = res["inertial"] + res["coriolis"]
    rms = lambda x: np.sqrt(np.mean(x**2, axis=0))  # noqa: E731
    out = {}
    for j, name in enumerate(JOINTS):
        r = {"rms_interaction_over_rms_total": float(rms(inter)[j] / rms(total)[j])}
        if gravity > 0:
            r.update(
                rms_total_minus_gravity_over_rms_gravity=float(rms(total - G)[j] / rms(G)[j]),
                fraction_total_within_10pct_of_gravity=float(np.mean(np.abs(total - G)[:, j] < 0.1 * np.abs(G[:, j]))),
                fraction_interaction_gt_gravity=float(np.mean(np.abs(inter[:, j]) > np.abs(G[:, j]))),
                fraction_dynamic_gt_gravity=float(np.mean(np.abs(dyn[:, j]) > np.abs(G[:, j]))),
            )
        out[name] = r
    return out


def main():
    jax.config.update("jax_enable_x64", True)
    os.makedirs(OUT, exist_ok=True)
    results = {}
    for name, duration, g in REACHES:
        res = reaching_torques(duration, gravity=g)
        s = torque_summary(res)
        s["fractions"] = fractions(res, g)
        results[name] = s
        fig = torque_components_figure(res["t"], res, joint_names=JOINTS, model=jaxmb.two_link_arm(),
                                       title=f"{name.replace('_', ' ')}: {duration} s, g = {g} m/s$^2$")
        fig.savefig(os.path.join(DOCS, f"reaching_torques_{name}.png"), dpi=100)
        f = s["fractions"]
        for joint in JOINTS:
            fj = f[joint]
            line = (f"{name:16s}{joint:9s} peak total {s[joint]['total']['peak']:6.2f} N m; "
                    f"rms(interaction)/rms(total) {fj['rms_interaction_over_rms_total']:.2f}")
            if g > 0:
                line += (f"; rms(total-G)/rms(G) {fj['rms_total_minus_gravity_over_rms_gravity']:.3f}; "
                         f"|total-G| < 10% |G| {100 * fj['fraction_total_within_10pct_of_gravity']:3.0f}%; "
                         f"|interaction| > |G| {100 * fj['fraction_interaction_gt_gravity']:3.0f}%; "
                         f"|M qdd + C| > |G| {100 * fj['fraction_dynamic_gt_gravity']:3.0f}% of the movement")
            print(line)
    with open(os.path.join(OUT, "reaching_torques.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("figures: docs/reaching_torques_{slow,fast,fast_horizontal}.png; summary: experiments/out/reaching_torques.json")


if __name__ == "__main__":
    main()
