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
# # Joint reactions of the seven-segment human (Blajer & Czaplicki 2005)
#
# Blajer and Czaplicki model the human body in the sagittal plane with seven segments
# (trunk, thigh, shank, foot, head, upper arm, forearm with hand; both sides lumped),
# the trunk floating at the hip. Augmenting the pose map g(q, z) with the
# coordinates z of the translations each joint forbids, E = ∂g/∂z at z = 0 gives the
# reactions without inverting any matrix:
#
# **λ = Eᵀ (Mp (D q̈ + γ) − h)**
#
# (jaxmb's λ: the force of the parent on the child; the paper's is the force
# of the child on the parent, the same numbers negated). `joint_reactions(...,
# method="projection")` evaluates this formula; the default takes the same forces from
# the recursive Newton–Euler pass. Here both are checked against statics worked by
# hand and against Newton's law on each segment during a movement.

# %%
import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import jaxmb

jax.config.update("jax_enable_x64", True)
human = jaxmb.seven_segment_human(height=1.75, body_mass=70.0)   # Dempster's parameters
mass = {n: float(m) for n, m in zip(human.names, np.asarray(human.mass))}
print({n: round(m, 2) for n, m in mass.items()}, "kg")

# %% [markdown]
# ## Quiet standing, worked by hand
#
# Upright, still, the body weight under the ankle: the vertical reaction at each
# joint of the leg carries the weight of everything above it.

# %%
phi = jnp.zeros(7).at[3].set(jnp.pi / 2)          # segments vertical, the foot horizontal
q = jnp.concatenate([jnp.array([0.0, 0.9]), jaxmb.from_vertical(phi, jaxmb.SEVEN_SEGMENT_POINTING)])
zero = jnp.zeros(9)
ground = jaxmb.point_load(human, q, "foot", point=(0.0, 0.0), force=(0.0, 70.0 * 9.81), frame="segment")
lam = np.asarray(jaxmb.joint_reactions(human, q, zero, zero, loads=ground, joints=["thigh", "shank", "foot"]))
upper = mass["trunk"] + mass["head"] + mass["upper_arm"] + mass["forearm_hand"]
by_hand = -9.81 * np.array([upper, upper + mass["thigh"], upper + mass["thigh"] + mass["shank"]])
for name, ours, hand in zip(("hip", "knee", "ankle"), lam[:, 1], by_hand):
    print(f"{name:6s} vertical reaction {ours:8.2f} N, weight above it {hand:8.2f} N")
np.testing.assert_allclose(lam[:, 1], by_hand, rtol=1e-12)
np.testing.assert_allclose(lam[:, 0], 0.0, atol=1e-9)

# %% [markdown]
# Negative: the segment below pushes up on the one above with the weight above, so
# the parent's force on the child (the thigh's on the shank, say) points down.
# `frame="segment"` gives (axial, shear), axial positive in compression, as
# clinicians read joint loads:

# %%
print(np.asarray(jaxmb.joint_reactions(human, q, zero, zero, loads=ground, joints="shank", frame="segment")))

# %% [markdown]
# ## A movement: Newton's law on every segment
#
# A squat-like movement of every coordinate, with the ground force under the foot.
# The two methods agree; and for each segment, the reaction at its proximal joint
# minus those at its children's joints, plus gravity and loads, equals its mass times
# its centre of mass's acceleration.

# %%
t = np.linspace(0.0, 1.0, 201)
w = 2 * np.pi
amp = np.array([0.05, 0.1, 0.3, 0.4, 0.3, 0.1, 0.2, 0.4, 0.5])
Q = np.asarray(q) + amp * np.sin(w * t)[:, None]
QD = amp * w * np.cos(w * t)[:, None]
QDD = -amp * w**2 * np.sin(w * t)[:, None]
loads = jaxmb.point_load(human, Q, "foot", point=(0.05, 0.0), force=np.stack([20 * np.sin(w * t), 700 + 100 * np.cos(w * t)], 1),
                         frame="segment")
lam_rec = np.asarray(jaxmb.joint_reactions(human, Q, QD, QDD, loads=loads))
lam_proj = np.asarray(jaxmb.joint_reactions(human, Q, QD, QDD, loads=loads, method="projection"))
print(f"recursive vs projection: max difference {np.abs(lam_rec - lam_proj).max():.1e} N")

# %%
com = np.asarray(jaxmb.com_positions(human, Q))                    # (T, 7, 2), m
dt = t[1] - t[0]
acc = np.gradient(np.gradient(com, dt, axis=0), dt, axis=0)        # finite differences, independent
F = np.asarray(loads)[..., :2]                                     # (T, 7, 2) applied forces, N
m = np.asarray(human.mass)
gvec = np.array([0.0, -9.81])
worst = 0.0
for i in range(1, 7):                                              # every segment but the floating trunk
    net = lam_rec[:, i] + m[i] * gvec + F[:, i]
    for c in human.children[i]:
        net = net - lam_rec[:, c]                                  # the child pushes back on segment i
    resid = net - m[i] * acc[:, i]
    s = slice(5, -5)                                               # one-sided differences at the ends
    worst = max(worst, np.abs(resid[s]).max() / np.abs(lam_rec[s, i]).max())
print(f"Newton's law on each segment: largest residual {worst:.1e} of the joint's peak force "
      "(the finite differences' error)")
assert worst < 1e-3

fig, ax = plt.subplots(figsize=(8, 3.5))
for i, name in ((1, "hip"), (2, "knee"), (3, "ankle")):
    ax.plot(t, -lam_rec[:, i, 1], label=name)
ax.set(xlabel="time (s)", ylabel="vertical force on the segment above (N)",
       title="vertical joint reactions during the movement")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## The paper's somersault
#
# `python experiments/somersault_reactions.py` simulates a back somersault in the pike
# position on a trampoline with this model in maximal coordinates (Lagrange
# multipliers at the 12 joint constraints), then computes the hip, knee and ankle
# reactions from the kinematics and the bed force alone by the projection: they equal
# the simulation's multipliers to 3e-12 of the 4.1 kN peak, and the vertical reaction
# drops by 31 % from ankle to hip during support, the paper's observation:
#
# ![somersault reactions](../../somersault_reactions.png)
