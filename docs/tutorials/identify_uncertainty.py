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
# # Segment parameters fitted to measured forces, with uncertainty bands
#
# Planar dynamics is linear in each segment's barycentric parameters
# π = (m, m·c_along, m·c_across, J), so every joint load is
# y = Y(q, q̇, q̈) π + y₀. `jaxmb.identify` builds Y by forward-mode
# autodiff of the engine, says which combinations the data identify, fits a
# physically consistent model, and propagates parameter uncertainty into bands of
# joint moments. The data: van den Bogert's running leg, whose true segment table and
# loads are known.

# %%
import matplotlib.pyplot as plt
import numpy as np

from jaxmb import identify

trial = identify.running_trial()
true = trial["model"]
off = identify.to_physical(true) * [1.3, 0.7, 1.0, 1.3]   # masses, com, inertias 30 % off
start = identify.from_physical(true, off)
every = slice(None, None, 5)                 # 1,201 of the 6,001 frames
fit = identify.fit(start, trial["q"][every], trial["qd"][every], trial["qdd"][every],
                   moments=trial["moments"][every], moment_weights=trial["moment_weights"][every],
                   reactions=trial["force_magnitudes"][every], loads=trial["ground"].select(every))
print(fit.report(true=true))

# %% [markdown]
# Joint moments alone identify 9 of the 12 parameters' combinations (no mass: the
# report lists the combinations); the joint force magnitudes make every mass
# identifiable. From a 30 % error, the fit recovers the true table.

# %%
names = [f"{p}[{s}]" for s in true.names for p in ("mass", "com along", "com across", "inertia")]
fitted = np.asarray(fit.physical).ravel()
com = np.asarray(true.com).reshape(len(true.names), -1)
truth = np.stack([np.asarray(true.mass), com[:, 0], com[:, 1] if com.shape[1] > 1 else 0 * com[:, 0],
                  np.asarray(true.inertia)], 1).ravel()
stderr = np.asarray(fit.stderr_physical).ravel()
fig, ax = plt.subplots(figsize=(10, 3.5))
x = np.arange(len(names))
ax.errorbar(x, fitted - truth, yerr=2 * stderr, fmt="o", capsize=3)
ax.axhline(0, color="k", lw=0.8)
ax.set_xticks(x, names, rotation=60, ha="right")
ax.set(ylabel="fit - true (kg, m, kg m^2)", title="fitted parameters, ±2 standard errors")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Bands of joint moments
#
# How much do the hip, knee and ankle moments depend on the segment table? The spread
# between Dempster's and de Leva's tables stands in for the tables' own uncertainty
# (`table_prior`); a thousand draws of the parameters times every frame are one
# matrix product Y π_d + y₀.

# %%
spread = identify.table_prior(true, center=true)
bands = identify.monte_carlo(true, trial["q"], trial["qd"], trial["qdd"], trial["loads"], spread=spread,
                             draws=1000, seed=0)
stance = trial["moment_weights"] > 0
width = (bands.quantiles[-1] - bands.quantiles[0])[stance]
for j, joint in enumerate(("hip", "knee", "ankle")):
    print(f"{joint:6s} 95 % band in stance: median width {np.median(width[:, j]):.2f} N m")
time = trial["data"].time
fig, axs = plt.subplots(3, 1, figsize=(8, 7), sharex=True)
for j, (ax, joint) in enumerate(zip(axs, ("hip", "knee", "ankle"))):
    ax.fill_between(time, bands.quantiles[0][:, j], bands.quantiles[-1][:, j], alpha=0.3, lw=0, label="95 % band")
    ax.plot(time, bands.nominal[:, j], lw=1, label="true parameters")
    ax.plot(time, np.where(stance, trial["moments"][:, j], np.nan), "r--", lw=0.8, label="true moment")
    ax.set_ylabel(f"{joint} moment (N m)")
axs[0].legend(frameon=False, fontsize=8)
axs[-1].set_xlabel("time (s)")
plt.show()

# %% [markdown]
# The fit's own standard errors give far narrower bands (`spread=fit`), but they are
# optimistic on these data: the residuals are correlated spikes from differentiating
# twice, not white noise (see the [guide](../guides/identify.md)).
