"""Recovery of segment parameters from synthetic trials with noise, against its level.

A three-segment leg (Dempster's table, 1.75 m, 70 kg; fixed base at the hip,
relative joint angles) performs three simulated movements (``jaxmb.simulate``, RK4 at
500 Hz for 2 s: PD tracking of random sinusoids, so the joint torques are known).
Noise at realistic levels, times a factor k, is added to:

- the joint angles: 0.2 deg (about 1 mm of marker noise over 0.3 m), then the
  angles are low-pass filtered (2nd-order Butterworth, 10 Hz, both directions) and
  differentiated (jaxmb.signal), as measured kinematics are; the first and last
  0.2 s of each trial (the filter's edge transients) are left out;
- the joint moments: 1 N m; the joint reaction forces: 5 N (force plate level).

For each k (5 noise draws): (a) the base parameters from moments alone (linear
least squares; errors of the 6 non-zero combinations of the 9, relative), (b) all
12 physical parameters from moments and reaction forces (the consistent fit, Huber
loss, from a start 30 % off; centre of mass relative to the length). k = 0 uses the
simulation's exact velocities and accelerations: recovery to round-off; "k = 0,
filtered" the filtered exact angles: the floor that the filter's bias sets.

Writes docs/identify_noise.png; prints the table. Run: python experiments/identify_synthetic.py
"""

import pathlib

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxmb  # noqa: E402
from jaxmb import identify, signal  # noqa: E402
from jaxmb.cli.identify_running import perturbed  # noqa: E402  (the demo of `jaxmb identify`)

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
RATE = 500.0
LEVELS = (0.0, "filtered", 0.25, 0.5, 1.0, 2.0, 4.0)
CUTOFF = 10.0
EDGE = 100  # samples (0.2 s) left out at each end of a trial
SIGMA = dict(angle=np.deg2rad(0.2), moment=1.0, force=5.0)


def simulate(model, trials=3, seconds=2.0, seed=0):
    rng = np.random.default_rng(seed)
    n = model.dof
    amp = rng.uniform(0.3, 0.8, (trials, n))
    freq = rng.uniform(0.5, 2.0, (trials, n))
    phase = rng.uniform(0, 2 * np.pi, (trials, n))
    M0 = np.diag(np.asarray(jaxmb.mass_matrix(model, np.zeros(n))))
    kp, kd = (2 * np.pi * 3.0) ** 2 * M0, 2 * 0.7 * (2 * np.pi * 3.0) * M0  # 3 Hz, damping 0.7
    q_hang = np.array([-np.pi / 2, 0.0, np.pi / 2])  # leg down, foot forward

    def ref(t):
        return q_hang + amp * jnp.sin(2 * jnp.pi * freq * t + phase)

    def tau(t, q, qd):
        return kp * (ref(t) - q) - kd * qd + jaxmb.gravity_forces(model, q)

    steps = int(seconds * RATE)
    traj = jaxmb.simulate(model, ref(0.0), np.zeros((trials, n)), tau, 1 / RATE, steps=steps)
    q, qd = np.asarray(traj.q), np.asarray(traj.qd)
    tq = np.asarray(jax.vmap(tau)(traj.t, traj.q, traj.qd))
    qdd = np.asarray(jaxmb.forward_dynamics(model, q, qd, tq))
    return [np.swapaxes(x, 0, 1) for x in (q, qd, qdd)]  # (trials, T, dof)


def main():
    true = jaxmb.three_segment_leg(1.75, 70.0)
    q, qd, qdd = simulate(true)
    mom = np.asarray(jaxmb.joint_moments(true, q, qd, qdd))
    rea = np.asarray(jaxmb.joint_reactions(true, q, qd, qdd))
    start = perturbed(true, 0.3, seed=1)
    pi_true = np.asarray(identify.to_parameters(true))
    phys_true = np.asarray(identify.to_physical(true))
    L = np.asarray(true.length)
    scale = np.where(np.isin(np.arange(4), [1, 2])[None, :], L[:, None], np.abs(phys_true))
    print(f"{q.shape[0]} trials x {q.shape[1]} frames at {RATE:g} Hz; RMS moments {np.sqrt(np.mean(mom**2, (0, 1)))} N m")
    print(f"{'k':>8s}{'base, median':>14s}{'base, max':>11s}{'physical, median':>18s}{'physical, max':>15s}  (relative errors)")
    table = []
    for level in LEVELS:
        k = 0.0 if level == "filtered" else level
        eb, ep = [], []
        for rep in range(5 if k > 0 else 1):
            rng = np.random.default_rng(100 * rep + int(10 * k))
            if level == 0.0:
                qn, qdn, qddn = q, qd, qdd
            else:
                qf = signal.lowpass(q + rng.normal(0, k * SIGMA["angle"], q.shape), RATE, CUTOFF, axis=1)
                qn, qdn, qddn = qf, signal.derivative(qf, RATE, 1, axis=1), signal.derivative(qf, RATE, 2, axis=1)
            mn = mom + rng.normal(0, k * SIGMA["moment"], mom.shape)
            rn = rea + rng.normal(0, k * SIGMA["force"], rea.shape)
            cut = slice(EDGE, -EDGE)
            qn, qdn, qddn, mn, rn = (x[:, cut] for x in (qn, qdn, qddn, mn, rn))
            # (a) moments alone: the base parameters
            ra = identify.fit(start, qn, qdn, qddn, moments=mn, free="inertia")
            bp = ra.base.parameters
            want = bp.values(pi_true)
            nz = np.abs(want) > 1e-9 * np.abs(want).max()
            eb.append(np.abs(ra.base.values - want)[nz] / np.abs(want)[nz])
            # (b) moments and reaction forces: every physical parameter
            rb = identify.fit(start, qn, qdn, qddn, moments=mn, reactions=rn, loss="huber")
            ep.append(np.abs(rb.physical - phys_true) / scale)
        eb, ep = np.array(eb), np.array(ep)
        row = (k, np.median(eb), eb.max(), np.median(ep), ep.max())
        table.append(row)
        print(f"{str(level):>8s}{row[1]:14.2e}{row[2]:11.2e}{row[3]:18.2e}{row[4]:15.2e}")
    table = np.array(table)

    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    x = table[2:, 0]
    for col, style, color, label in ((1, "o-", "C0", "base parameters, moments alone (median)"),
                                     (2, "o--", "C0", "base parameters (max)"),
                                     (3, "s-", "C1", "all 12 parameters, moments + forces (median)"),
                                     (4, "s--", "C1", "all 12 parameters (max)")):
        ax.loglog(x, 100 * table[2:, col], style, color=color, alpha=1 if "median" in label else 0.6, label=label)
        ax.axhline(100 * table[1, col], color=color, lw=0.6, ls=":", alpha=0.8)
    ax.text(x[0], 100 * table[1, 3], " filter bias alone (k = 0, filtered)", fontsize=7, va="bottom")
    ax.set_xlabel("noise factor k (1: 0.2 deg, 1 N m, 5 N)")
    ax.set_ylabel("relative error (%; com: % of length)")
    ax.set_title("Recovery error against noise (3 simulated trials, 1.6 s at 500 Hz)", fontsize=10)
    ax.legend(frameon=False, fontsize=8)
    fig.savefig(DOCS / "identify_noise.png", dpi=100)
    print(f"noiseless (k = 0, exact derivatives): base {table[0, 2]:.1e}, physical {table[0, 4]:.1e} (max relative error)")
    print(f"figure: {DOCS / 'identify_noise.png'}")


if __name__ == "__main__":
    main()
