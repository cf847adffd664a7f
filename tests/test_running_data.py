"""Real data with known answers: van den Bogert's simulated running (ISB test set).

The data come from a forward simulation, so the true hip, knee and ankle moments and
joint force magnitudes are known. jaxmb's floating-base thigh-shank-foot model, fed
with the marker positions (second differences, as in the gait notebook) and the ground
reaction force at the centre of pressure, must reproduce them as well as the
notebook's segment-by-segment Newton-Euler does: RMS errors of about 0.24 (hip),
0.13 (knee) and 0.02 (ankle) N m, the residue of differentiating 10-digit positions
twice at 10 kHz (data/README.md).
"""

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxmb

DATA = pathlib.Path(__file__).parent / "data" / "running_vandenbogert"
FS = 10000.0
MASS = [6.85, 2.86, 1.00]
INERTIA = [0.145361267, 0.042996389, 0.0200]
COM_FRACTION = [0.4323725, 0.4334975, 0.0]


@pytest.fixture(scope="module")
def running():
    kin = np.loadtxt(DATA / "all.kin")
    frc = np.loadtxt(DATA / "all.frc")
    mom = np.loadtxt(DATA / "all.mom")
    fmg = np.loadtxt(DATA / "all.fmg")
    pts = kin.reshape(-1, 4, 2)  # hip, knee, ankle, toe
    seg = pts[:, 1:] - pts[:, :-1]  # thigh, shank, foot vectors (proximal -> distal)
    lengths = np.linalg.norm(seg, axis=2).mean(0)
    theta = np.unwrap(np.arctan2(seg[..., 1], seg[..., 0]), axis=0)
    q = np.concatenate([pts[:, 0], theta], axis=1)  # floating base at the hip, absolute angles
    dt = 1 / FS
    # plain central differences, first and second (as the notebook); interior samples only
    qd = (q[2:] - q[:-2]) / (2 * dt)
    qdd = (q[2:] - 2 * q[1:-1] + q[:-2]) / dt**2
    model = jaxmb.tree(
        [-1, 0, 1], lengths, np.asarray(COM_FRACTION) * lengths, MASS, INERTIA,
        base="floating", coordinates="absolute", gravity=9.80665, names=["thigh", "shank", "foot"],
    )
    return dict(model=model, q=q[1:-1], qd=qd, qdd=qdd, frc=frc[1:-1], mom=mom[1:-1], fmg=fmg[1:-1])


def _loads(model, q, f):
    # ground reaction force (Fx, Fy) on the foot at the centre of pressure (x, 0)
    return jaxmb.point_load(model, q, "foot", jnp.stack([f[2], 0.0]), f[:2])


def test_true_joint_moments_reproduced(running):
    model = running["model"]

    @jax.jit
    def moments(q, qd, qdd, f):
        return jax.vmap(lambda a, b, c, d: jaxmb.joint_moments(model, a, b, c, _loads(model, a, d)))(q, qd, qdd, f)

    tau = np.asarray(moments(running["q"], running["qd"], running["qdd"], running["frc"]))
    mom = running["mom"]
    given = np.any(mom != 0, axis=1)  # true moments are given from heel strike on
    err = tau[given] - mom[given]
    rms_err = np.sqrt(np.mean(err**2, axis=0))
    rms_true = np.sqrt(np.mean(mom[given] ** 2, axis=0))
    print("RMS error hip, knee, ankle (N m):", rms_err, "against RMS moments", rms_true)
    # measured 0.13, 0.070, 0.011 N m, below the notebook's 0.24, 0.13, 0.02 (same
    # method; its figures include the differentiation of the COM positions); bound at
    # 1.5x what we measure: a 1 % error in the thigh's mass or a misplaced centre of
    # pressure exceeds it, a wrong sign gives errors of twice the RMS moment
    assert np.all(rms_err < [0.20, 0.10, 0.016])
    # and the moments are large: the test is not comparing zeros
    assert np.all(rms_true > [20, 50, 80])
    # both inverse dynamics paths give the same moments on real data
    k = np.flatnonzero(given)[500]
    q, qd, qdd, f = (running[x][k] for x in ("q", "qd", "qdd", "frc"))
    loads = _loads(model, q, f)
    tau_rec = jaxmb.inverse_dynamics(model, q, qd, qdd, loads)
    tau_proj = jaxmb.inverse_dynamics(model, q, qd, qdd, loads, method="projection")
    np.testing.assert_allclose(tau_rec, tau_proj, rtol=1e-10, atol=1e-9)


def test_true_joint_force_magnitudes_reproduced(running):
    model = running["model"]

    @jax.jit
    def forces(q, qd, qdd, f):
        return jax.vmap(lambda a, b, c, d: jaxmb.joint_reactions(model, a, b, c, _loads(model, a, d)))(q, qd, qdd, f)

    lam = np.asarray(forces(running["q"], running["qd"], running["qdd"], running["frc"]))
    mag = np.linalg.norm(lam, axis=2)
    err = mag - running["fmg"]
    rms_err = np.sqrt(np.mean(err**2, axis=0))
    rms_true = np.sqrt(np.mean(running["fmg"] ** 2, axis=0))
    print("RMS error of |F| hip, knee, ankle (N):", rms_err, "against RMS", rms_true)
    # within 1 % of the RMS force at every joint over the whole trial (swing and stance)
    assert np.all(rms_err < 0.01 * rms_true)
