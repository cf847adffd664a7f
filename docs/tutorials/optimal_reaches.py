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
# # Optimal reaches, one and a thousand
#
# Which path does the hand take? Flash and Hogan (1985): the one of minimum hand jerk,
# straight with a bell-shaped speed. Uno, Kawato and Suzuki (1989): the one of minimum
# torque change, gently curved for some reaches. `jaxmb.optimize` minimises either
# (or the torque, or any function of the movement) through the inverse dynamics of a
# model, for one movement or a batch of them in one compiled call.

# %%
import jax
import matplotlib.pyplot as plt
import numpy as np

import jaxmb

jax.config.update("jax_enable_x64", True)
arm = jaxmb.two_link_arm(gravity=0.0)        # the notes' arm, moving in the horizontal plane
x0, x1, T = np.array([-0.25, 0.40]), np.array([0.25, 0.40]), 0.5

jerk = jaxmb.optimize(arm, x0, x1, T, target="hand", cost="hand_jerk")
change = jaxmb.optimize(arm, x0, x1, T, target="hand", cost="torque_change")
print("converged:", bool(jerk.converged), bool(change.converged))

# %% [markdown]
# ## One reach against the closed form
#
# The minimum-jerk hand path is x(t) = x0 + (x1 − x0)(10 s³ − 15 s⁴ + 6 s⁵),
# s = t/T, whose peak speed is 1.875 |x1 − x0| / T. The optimiser, which
# parametrises joint angles and knows nothing of this formula, finds it:

# %%
t = np.asarray(jerk.t)
s = t / T
closed = x0 + np.outer(10 * s**3 - 15 * s**4 + 6 * s**5, x1 - x0)
print(f"largest distance from the closed-form path: {np.abs(np.asarray(jerk.hand) - closed).max() * 1e3:.3f} mm")
speed = np.linalg.norm(np.asarray(jerk.hand_vel), axis=-1)
print(f"peak speed {speed.max() / (np.linalg.norm(x1 - x0) / T):.3f} D/T (closed form 1.875)")


def curvature(r):
    """Largest distance of the hand from the straight line, over the path's length."""
    h = np.asarray(r.hand)
    d = h[..., -1:, :] - h[..., :1, :]
    u = d / np.linalg.norm(d, axis=-1, keepdims=True)
    rel = h - h[..., :1, :]
    off = np.abs(rel[..., 0] * u[..., 1] - rel[..., 1] * u[..., 0])
    return off.max(-1) / np.linalg.norm(d[..., 0, :], axis=-1)


print(f"lateral deviation: minimum hand jerk {curvature(jerk):.2%}, minimum torque change {curvature(change):.2%}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for r, name in ((jerk, "minimum hand jerk"), (change, "minimum torque change")):
    h = np.asarray(r.hand)
    axes[0].plot(h[:, 0], h[:, 1], label=name)
    axes[1].plot(t, np.linalg.norm(np.asarray(r.hand_vel), axis=-1), label=name)
axes[0].plot(0, 0, "ko")
axes[0].annotate("shoulder", (0, 0), textcoords="offset points", xytext=(5, 5))
axes[0].set(aspect="equal", xlabel="x (m)", ylabel="y (m)", title="hand paths")
axes[1].set(xlabel="time (s)", ylabel="hand speed (m/s)", title="speed profiles")
axes[1].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## A thousand reaches in one call
#
# `start`, `end` and `duration` broadcast: an `end` of shape `(1000, 2)` is a thousand
# reaches from the same start, solved inside one compiled call. Here, minimum torque
# change to targets on a grid in front of the body, and how curved each path is:

# %%
gx, gy = np.meshgrid(np.linspace(-0.35, 0.35, 40), np.linspace(0.25, 0.55, 25))
ends = np.stack([gx.ravel(), gy.ravel()], -1)                         # (1000, 2), m
start = np.array([0.0, 0.30])
many = jaxmb.optimize(arm, start, ends, T, target="hand", cost="torque_change")
print(f"{int(np.sum(many.converged))} of {len(ends)} converged")
curv = curvature(many).reshape(gx.shape)

fig, ax = plt.subplots(figsize=(7, 4.2))
im = ax.pcolormesh(gx, gy, 100 * curv, shading="auto")
ax.plot(*start, "w*", ms=12)
fig.colorbar(im, ax=ax, label="lateral deviation (% of path length)")
ax.set(aspect="equal", xlabel="target x (m)", ylabel="target y (m)",
       title="minimum torque change: curvature of the path to each target")
fig.tight_layout()
plt.show()
