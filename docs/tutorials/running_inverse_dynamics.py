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
# # Inverse dynamics of running and walking
#
# Two trials through jaxmb's gait pipeline:
#
# 1. van den Bogert's simulated running (ISB test data, 10 kHz, bundled with jaxmb),
#    whose true hip, knee and ankle moments are known: the errors of the pipeline
#    against them;
# 2. a measured walking trial in a C3D file (`tests/data/Gait.c3d`), whose moments
#    are not known: the pipeline against the gait notebook's segment-by-segment
#    Newton–Euler recursion, written here in NumPy, on the same filtered joint centres.

# %%
import pathlib
import warnings

import matplotlib.pyplot as plt
import numpy as np

from jaxmb import gait, io, signal

# %% [markdown]
# ## Running: errors against the true moments

# %%
data = gait.running_data()                    # joint centres, force, centre of pressure, truth
res = gait.analyze(**data.inputs())           # one compiled computation, float64
err = gait.rms_errors(res, data.moments, data.force_magnitudes)
for j, name in enumerate(gait.JOINTS):
    print(f"{name:6s} RMS error: moment {err['moments'][j]:.3f} N m, force magnitude {err['forces'][j]:.3f} N")

# %% [markdown]
# The truth is given from heel strike on, where `rms_errors` measures. The moments,
# jaxmb's against the truth (counter-clockwise positive, the [conventions](../conventions.md)):

# %%
t = data.time
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharex=True)
for j, (ax, name) in enumerate(zip(axes, gait.JOINTS)):
    ax.plot(t, data.moments[:, j], "k", lw=3, alpha=0.35, label="true")
    ax.plot(t, np.asarray(res.moments)[:, j], "C3", lw=1, label="jaxmb")
    ax.set(title=name, xlabel="time (s)", ylabel="moment (N m)")
axes[0].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# ## Walking: a C3D trial against the notebook's recursion
#
# `io.read_c3d` reads the markers and ezc3d's force-platform extraction;
# `gait.sagittal` puts the right leg in the plane of progression, finds its stance on
# the plates and the joint centres (the hip by Harrington's regression, knee and ankle
# as midpoints of the lateral and medial markers).

# %%
here = pathlib.Path.cwd()                     # the repository's test trial, wherever this runs from
path = next(d / "tests" / "data" / "Gait.c3d" for d in (here, *here.parents) if (d / "tests" / "data" / "Gait.c3d").is_file())
with warnings.catch_warnings():
    warnings.simplefilter("ignore")           # the file's renamed duplicate labels, its gaps outside stance
    trial = io.read_c3d(path)
leg = gait.sagittal(trial, side="right")
mass = leg.body_weight / 9.81
walk = gait.analyze(**leg.inputs(), cutoff=6.0, body_mass=mass)
start, stop = leg.stance
print(f"body mass {mass:.1f} kg (from the plates); stance {leg.time[start]:.2f} to {leg.time[stop - 1]:.2f} s")

# %% [markdown]
# The notebook's recursion, foot first: F_p = m (a_c − g) − F_d and
# M_p = I α − M_d − (p_d − c) × F_d − (p_p − c) × F_p, on rigid segments
# built from the pipeline's lengths and angles and the same filtered force.

# %%
def invdyn2d(prox, dist, com_frac, m, inertia, rate, f_dist, m_dist, p_force):
    c = prox + com_frac * (dist - prox)
    a_c = signal.derivative(c, rate, 2)
    v = dist - prox
    alpha = signal.derivative(np.unwrap(np.arctan2(v[:, 1], v[:, 0])), rate, 2)
    F_p = m * (a_c - np.array([0.0, -9.81])) - f_dist
    cross = lambda r, f: r[:, 0] * f[:, 1] - r[:, 1] * f[:, 0]  # noqa: E731
    return F_p, inertia * alpha - m_dist - cross(p_force - c, f_dist) - cross(prox - c, F_p)


rate = leg.rate
every = np.arange(len(leg.hip)) * int(round(leg.force_rate / rate))
force = signal.lowpass(leg.force, leg.force_rate, 6.0, padlen="auto")[every]
m0 = leg.cop[:, 0] * leg.force[:, 1] - leg.cop[:, 1] * leg.force[:, 0]   # moment about the origin
couple = signal.lowpass(m0, leg.force_rate, 6.0, padlen="auto")[every]
seg = walk.segments
L, theta = np.asarray(seg["length"]), np.asarray(walk.segment_angles)
points = {"hip": signal.lowpass(leg.hip, rate, 6.0, padlen="auto")}
for j, (p, d) in enumerate((("hip", "knee"), ("knee", "ankle"), ("ankle", "toe"))):
    points[d] = points[p] + L[j] * np.stack([np.cos(theta[:, j]), np.sin(theta[:, j])], -1)
F_d, M_d, p_d = force, couple, np.zeros_like(force)
ref = [None] * 3
for j, (p, d) in reversed(list(enumerate((("hip", "knee"), ("knee", "ankle"), ("ankle", "toe"))))):
    F_p, M_p = invdyn2d(points[p], points[d], seg["com"][j] / L[j], seg["mass"][j], seg["inertia"][j],
                        rate, F_d, M_d, p_d)
    ref[j] = M_p
    F_d, M_d, p_d = -F_p, -M_p, points[p]
ref = np.stack(ref, 1)

s = slice(start, stop)
moments = np.asarray(walk.moments)
for j, name in enumerate(gait.JOINTS):
    peak = np.abs(ref[s, j]).max()
    print(f"{name:6s} largest difference in stance {np.abs(moments[s, j] - ref[s, j]).max() / peak:.2%} of its peak")

# %%
pct = np.linspace(0, 100, stop - start)
fig, axes = plt.subplots(1, 3, figsize=(12, 3.5), sharex=True)
for j, (ax, name) in enumerate(zip(axes, gait.JOINTS)):
    ax.plot(pct, moments[s, j] / mass, "C0", lw=3, alpha=0.5, label="jaxmb")
    ax.plot(pct, ref[s, j] / mass, "k--", lw=1, label="NumPy recursion")
    ax.set(title=name, xlabel="% of stance", ylabel="moment (N m/kg, counter-clockwise +)")
axes[0].legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# `walk.to_convention("clinical")` gives the same moments with extensor and
# plantarflexor moments positive, as gait reports plot them; `jaxmb gait --c3d
# tests/data/Gait.c3d --convention clinical` writes them with the figures.
