# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # The two-link arm's torque terms over a minimum-jerk reach
#
# The multibody notes (Duarte) write the joint torques of a planar two-link arm as
#
# **τ = M(q) q̈ + C(q, q̇) + G(q) + E(q)**
#
# with, for shoulder angle q1 (from the horizontal) and elbow angle q2 (relative),
# link lengths L1, L2, centre-of-mass distances d1, d2, masses m1, m2 and inertias
# I1, I2 about the centres of mass:
#
# ```
# M11 = I1 + I2 + m1 d1² + m2 (L1² + d2² + 2 L1 d2 cos q2)
# M12 = M21 = I2 + m2 (d2² + L1 d2 cos q2)
# M22 = I2 + m2 d2²
# C1  = −L1 d2 m2 sin q2 (2 q̇1 + q̇2) q̇2
# C2  =  L1 d2 m2 sin q2 q̇1²
# G1  = g [(m1 d1 + m2 L1) cos q1 + m2 d2 cos(q1 + q2)]
# G2  = g m2 d2 cos(q1 + q2)
# ```
#
# Here jaxmb's `torque_components` (which never sees these formulas: it differentiates
# the pose map) is compared with them over the notes' reach: the hand moves on a
# straight minimum-jerk path from below the shoulder to the upper arm forward and the
# elbow at 90°, in 0.5 s.

# %%
import jax
import matplotlib.pyplot as plt
import numpy as np

import jaxmb

jax.config.update("jax_enable_x64", True)   # float64, to compare to round-off

arm = jaxmb.two_link_arm()                  # the notes' arm: Dempster, 1.70 m, 70 kg
L1, L2 = np.asarray(arm.length)
d1, d2 = np.asarray(arm.com)[:, 0]          # com: (along, across) the segment axis
m1, m2 = np.asarray(arm.mass)
I1, I2 = np.asarray(arm.inertia)
g = 9.81
print(f"L = {L1:.4f}, {L2:.4f} m; d = {d1:.4f}, {d2:.4f} m; m = {m1:.3f}, {m2:.3f} kg; I = {I1:.5f}, {I2:.5f} kg m^2")

# %% [markdown]
# ## The reach, in closed form
#
# Minimum jerk (Flash & Hogan 1985): x(t) = x0 + (x1 − x0)(10 s³ − 15 s⁴ + 6 s⁵),
# s = t/T. The joint angles follow from the closed-form inverse kinematics, their
# velocities and accelerations from the hand's through the Jacobian,
# q̇ = J⁻¹ ẋ and q̈ = J⁻¹ (ẍ − J̇ q̇): all NumPy,
# independent of jaxmb.

# %%
T, n = 0.5, 201
t = np.linspace(0.0, T, n)
s = t / T
e0 = np.deg2rad(10.0)                                   # start with the elbow slightly flexed
x0 = np.array([L2 * np.sin(e0), -L1 - L2 * np.cos(e0)])  # hand below the shoulder
x1 = np.array([L1, L2])                                  # upper arm forward, elbow at 90 deg
D = x1 - x0
x = x0 + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, D)
xd = np.outer((30 * s**2 - 60 * s**3 + 30 * s**4) / T, D)
xdd = np.outer((60 * s - 180 * s**2 + 120 * s**3) / T**2, D)

c2 = (np.sum(x**2, 1) - L1**2 - L2**2) / (2 * L1 * L2)
q2 = np.arccos(np.clip(c2, -1, 1))                       # elbow "up": q2 > 0
q1 = np.arctan2(x[:, 1], x[:, 0]) - np.arctan2(L2 * np.sin(q2), L1 + L2 * np.cos(q2))
q = np.stack([q1, q2], 1)


def jac(q1, q2):
    a, b = q1, q1 + q2
    return np.array([[-L1 * np.sin(a) - L2 * np.sin(b), -L2 * np.sin(b)],
                     [L1 * np.cos(a) + L2 * np.cos(b), L2 * np.cos(b)]])


qd = np.stack([np.linalg.solve(jac(*q[i]), xd[i]) for i in range(n)])
qdd = np.empty_like(qd)
for i in range(n):
    a, b = q[i, 0], q[i, 0] + q[i, 1]
    ad, bd = qd[i, 0], qd[i, 0] + qd[i, 1]
    Jd = np.array([[-L1 * np.cos(a) * ad - L2 * np.cos(b) * bd, -L2 * np.cos(b) * bd],
                   [-L1 * np.sin(a) * ad - L2 * np.sin(b) * bd, -L2 * np.sin(b) * bd]])
    qdd[i] = np.linalg.solve(jac(*q[i]), xdd[i] - Jd @ qd[i])

# %% [markdown]
# ## The notes' closed form, and jaxmb

# %%
c, sn = np.cos(q[:, 1]), np.sin(q[:, 1])
M11 = I1 + I2 + m1 * d1**2 + m2 * (L1**2 + d2**2 + 2 * L1 * d2 * c)
M12 = I2 + m2 * (d2**2 + L1 * d2 * c)
M22 = np.full(n, I2 + m2 * d2**2)
closed = {
    "inertial": np.stack([M11 * qdd[:, 0] + M12 * qdd[:, 1], M12 * qdd[:, 0] + M22 * qdd[:, 1]], 1),
    "coriolis": np.stack([-L1 * d2 * m2 * sn * (2 * qd[:, 0] + qd[:, 1]) * qd[:, 1],
                          L1 * d2 * m2 * sn * qd[:, 0] ** 2], 1),
    "gravity": g * np.stack([(m1 * d1 + m2 * L1) * np.cos(q[:, 0]) + m2 * d2 * np.cos(q[:, 0] + q[:, 1]),
                             m2 * d2 * np.cos(q[:, 0] + q[:, 1])], 1),
}
closed["total"] = closed["inertial"] + closed["coriolis"] + closed["gravity"]

terms = {k: np.asarray(v) for k, v in jaxmb.torque_components(arm, q, qd, qdd).items()}
for k in ("inertial", "coriolis", "gravity", "total"):
    err = np.max(np.abs(terms[k] - closed[k]))
    print(f"{k:9s} peak |closed form| {np.max(np.abs(closed[k])):7.3f} N m, max |jaxmb - closed form| {err:.1e} N m")
    assert err < 1e-9 * max(1.0, np.max(np.abs(closed[k])))

# %% [markdown]
# The four terms agree with the notes' formulas to round-off. As the notes observe, in
# a fast reach the inertial and interaction (Coriolis) torques rival gravity:

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
for j, (ax, name) in enumerate(zip(axes, ("shoulder", "elbow"))):
    for k, style in (("inertial", "-"), ("coriolis", "-"), ("gravity", "-"), ("total", "k--")):
        ax.plot(t, terms[k][:, j], style, label=k)
    ax.set(title=name, xlabel="time (s)", ylabel="torque (N m)")
axes[0].legend()
fig.tight_layout()
plt.show()
