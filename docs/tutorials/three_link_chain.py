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
# # The three-link chain of Cesari et al. (2001)
#
# The appendix of Cesari, Shiratori, Olivato and Duarte (2001) (also in Zatsiorsky
# 2002) writes the inverse dynamics of a planar arm, upper arm, forearm and hand, with a
# spring force F_S pulling the hand backwards, as
#
# **T = M(α) α̈ + v(α, α̇) + G(α) + T_ext(α)**
#
# and the joint reaction forces by Newton's law on each segment, hand first (its
# equations 15 to 23). Here jaxmb's `mass_matrix`, `bias_forces`, `gravity_forces`,
# `external_forces`, `inverse_dynamics` and `joint_reactions` are compared with those
# equations, typed in NumPy, over a movement of all three joints.

# %%
import jax
import matplotlib.pyplot as plt
import numpy as np

import jaxmb

jax.config.update("jax_enable_x64", True)

l1, l2, l3 = 0.30, 0.27, 0.19          # m
d1, d2, d3 = 0.13, 0.12, 0.07          # proximal joint to centre of mass, m
m1, m2, m3 = 2.0, 1.2, 0.4             # kg
I1, I2, I3 = 0.016, 0.008, 0.001       # kg m^2 about the centre of mass
g, FS, dS = 9.81, 15.0, 0.03           # m/s^2; spring force (N) at dS beyond the hand's centre of mass
arm = jaxmb.chain(length=[l1, l2, l3], com=[d1, d2, d3], mass=[m1, m2, m3], inertia=[I1, I2, I3],
                  names=["upper_arm", "forearm", "hand"], gravity=g)

t = np.linspace(0.0, 1.0, 101)
w = 2 * np.pi
a = np.stack([-0.8 + 0.5 * np.sin(w * t), 0.9 + 0.4 * np.sin(2 * w * t), 0.2 * np.cos(w * t)], 1)       # rad
ad = np.stack([0.5 * w * np.cos(w * t), 0.8 * w * np.cos(2 * w * t), -0.2 * w * np.sin(w * t)], 1)
add = np.stack([-0.5 * w**2 * np.sin(w * t), -1.6 * w**2 * np.sin(2 * w * t), -0.2 * w**2 * np.cos(w * t)], 1)

# %% [markdown]
# ## The appendix's matrices, as printed

# %%
a1, a2, a3 = a.T
s2, c2, s3, c3, s23, c23 = np.sin(a2), np.cos(a2), np.sin(a3), np.cos(a3), np.sin(a2 + a3), np.cos(a2 + a3)
M11 = m1 * d1**2 + I1 + m2 * (l1**2 + d2**2 + 2 * l1 * d2 * c2) + I2 + m3 * (
    l1**2 + l2**2 + d3**2 + 2 * l1 * l2 * c2 + 2 * l1 * d3 * c23 + 2 * l2 * d3 * c3) + I3
M12 = m2 * (d2**2 + l1 * d2 * c2) + I2 + m3 * (l2**2 + d3**2 + l1 * l2 * c2 + l1 * d3 * c23 + 2 * l2 * d3 * c3) + I3
M13 = m3 * (d3**2 + l1 * d3 * c23 + l2 * d3 * c3) + I3
M22_printed = m2 * d2**2 + I2 + m3 * (l2**2 + d3**2 + l2 * d3 * c3) + I3      # equation (32) as printed
M23 = m3 * (d3**2 + l2 * d3 * c3) + I3
M33 = np.full_like(t, m3 * d3**2 + I3)
M_printed = np.stack([np.stack([M11, M12, M13], -1), np.stack([M12, M22_printed, M23], -1),
                      np.stack([M13, M23, M33], -1)], -2)
M_jaxmb = np.asarray(jaxmb.mass_matrix(arm, a))
diff = M_jaxmb - M_printed
print("largest |jaxmb - printed| per entry of M (kg m^2):\n", np.abs(diff).max(0).round(12))

# %% [markdown]
# Every entry agrees but M₂₂. The forearm-and-hand inertia about the elbow has the
# hand's centre of mass at ℓ2 e(θ2) + d3 e(θ3) from the elbow, whose squared length is
# ℓ2² + d3² + 2 ℓ2 d3 cos α3: equation (32) as printed here lacks the factor 2, which
# M₁₂ and M₂₁ have. The difference is exactly m3 ℓ2 d3 cos α3:

# %%
np.testing.assert_allclose(diff[:, 1, 1], m3 * l2 * d3 * c3, atol=1e-12)
M22 = M22_printed + m3 * l2 * d3 * c3
np.testing.assert_allclose(M_jaxmb[:, 1, 1], M22, atol=1e-12)
M = M_printed.copy()
M[:, 1, 1] = M22

ad1, ad2, ad3 = ad.T
v = np.stack([
    -((m2 * l1 * d2 + m3 * l1 * l2) * s2 + m3 * l1 * d3 * s23) * (2 * ad1 * ad2 + ad2**2)
    - (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * (2 * ad1 * ad3 + 2 * ad2 * ad3 + ad3**2),
    ((m3 * l1 * l2 + m2 * d2 * l1) * s2 + m3 * d3 * l1 * s23) * ad1**2
    - m3 * d3 * l2 * s3 * (2 * ad1 * ad3 + 2 * ad2 * ad3 + ad3**2),
    (m3 * l1 * d3 * s23 + m3 * l2 * d3 * s3) * ad1**2 + m3 * l2 * d3 * s3 * (2 * ad1 * ad2 + ad2**2),
], -1)
th1, th2, th3 = a1, a1 + a2, a1 + a2 + a3
G = np.stack([m1 * g * d1 * np.cos(th1) + m2 * g * (l1 * np.cos(th1) + d2 * np.cos(th2))
              + m3 * g * (l1 * np.cos(th1) + l2 * np.cos(th2) + d3 * np.cos(th3)),
              m2 * g * d2 * np.cos(th2) + m3 * g * (l2 * np.cos(th2) + d3 * np.cos(th3)),
              m3 * g * d3 * np.cos(th3)], -1)
Text = np.stack([-FS * l1 * np.sin(th1) - FS * l2 * np.sin(th2) - FS * (d3 + dS) * np.sin(th3),
                 -FS * l2 * np.sin(th2) - FS * (d3 + dS) * np.sin(th3),
                 -FS * (d3 + dS) * np.sin(th3)], -1)
T = np.einsum("tij,tj->ti", M, add) + v + G + Text

# the spring: a force (-FS, 0) at d3 + dS along the hand, from the wrist
spring = jaxmb.point_load(arm, a, "hand", point=(d3 + dS, 0.0), force=(-FS, 0.0), frame="segment")
checks = {
    "v (Coriolis, centripetal)": (jaxmb.bias_forces(arm, a, ad), v),
    "G (gravity)": (jaxmb.gravity_forces(arm, a), G),
    "T_ext (spring)": (jaxmb.external_forces(arm, a, spring), Text),
    "T (joint moments)": (jaxmb.inverse_dynamics(arm, a, ad, add, loads=spring), T),
}
for name, (ours, theirs) in checks.items():
    err = np.abs(np.asarray(ours) - theirs).max()
    print(f"{name:26s} max |jaxmb - appendix| {err:.1e} N m (largest value {np.abs(theirs).max():.2f})")
    assert err < 1e-10

# %% [markdown]
# ## Joint reactions, hand first
#
# With the centre-of-mass accelerations of equations (4) to (14), equations (15)-(16),
# (18)-(19) and (21)-(22) give the force (F_xi, F_yi) that the proximal segment
# exerts on segment i at its proximal joint, jaxmb's convention for
# `joint_reactions`.

# %%
def e(th):
    return np.stack([np.cos(th), np.sin(th)], -1)


def acc(th, thd, thdd):
    """d^2/dt^2 of e(theta): thdd e_perp - thd^2 e."""
    return thdd[:, None] * np.stack([-np.sin(th), np.cos(th)], -1) - thd[:, None] ** 2 * e(th)


thd = np.cumsum(ad, 1).T
thdd = np.cumsum(add, 1).T
acc1 = d1 * acc(th1, thd[0], thdd[0])
acc2 = l1 * acc(th1, thd[0], thdd[0]) + d2 * acc(th2, thd[1], thdd[1])
acc3 = l1 * acc(th1, thd[0], thdd[0]) + l2 * acc(th2, thd[1], thdd[1]) + d3 * acc(th3, thd[2], thdd[2])
weight = np.array([0.0, g])
F3 = m3 * (acc3 + weight) + np.array([FS, 0.0])      # (15), (16)
F2 = m2 * (acc2 + weight) + F3                       # (18), (19)
F1 = m1 * (acc1 + weight) + F2                       # (21), (22)
ref = np.stack([F1, F2, F3], 1)
lam = np.asarray(jaxmb.joint_reactions(arm, a, ad, add, loads=spring))
print(f"max |jaxmb - appendix| of the reactions: {np.abs(lam - ref).max():.1e} N")
assert np.abs(lam - ref).max() < 1e-10

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
for j, name in enumerate(("shoulder", "elbow", "wrist")):
    axes[0].plot(t, T[:, j], lw=3, alpha=0.4, color=f"C{j}")
    axes[0].plot(t, np.asarray(checks["T (joint moments)"][0])[:, j], "k--", lw=1)
    axes[1].plot(t, np.hypot(*ref[:, j].T), lw=3, alpha=0.4, color=f"C{j}", label=name)
    axes[1].plot(t, np.hypot(*lam[:, j].T), "k--", lw=1)
axes[0].set(title="joint moments (appendix: colour; jaxmb: dashed)", xlabel="time (s)", ylabel="N m")
axes[1].set(title="reaction force magnitudes", xlabel="time (s)", ylabel="N")
axes[1].legend()
fig.tight_layout()
plt.show()
