"""Batched simulation: ``jaxmb.simulate`` with q0 of shape (B, dof) against MuJoCo's
multithreaded ``mujoco.rollout`` (2 threads), same model, RK4 and time step.

For a 3-segment chain, B = 1e4 initial states (1e3 in quick mode), ``steps`` RK4 steps
of dt = 1 ms under constant joint torques:

- ``jaxmb``: ``jaxmb.simulate(model, Q0, QD0, TAU, dt, steps=steps)`` called directly
  (the reference; its first call compiles);
- ``jaxmb_jit``: ``jax.jit`` around the same call;
- ``jit_vmap``: ``jax.jit(jax.vmap(lambda q0, qd0, tau: jaxmb.simulate(model, q0, qd0,
  tau, dt, steps=steps).q))``;
- ``mujoco_rollout``: ``mujoco.rollout.Rollout(nthread=2).rollout`` on the twin model
  with ``opt.integrator = mjINT_RK4``, one motor per joint (the controls are the
  torques), no damping or contacts.

The trajectories are compared (max |q_jaxmb - q_mujoco| over every step and sample, in
rad; they should agree to ~1e-10 over this short horizon). The figure of merit is
simulated steps per second (B * steps / time).

Run: ``python -m benchmarks.bench_sim [--quick]``.
"""

from __future__ import annotations

import sys

import numpy as np

from . import common
from .baselines import forces_to_relative, from_relative, mujoco_rollout_model, to_relative


def run(quick: bool = False, log=print) -> list:
    import jax
    import mujoco
    from mujoco import rollout

    import jaxmb

    common.enable_x64()
    dt = 1e-3
    rows = []
    configs = [("chain3", 10**3, 100)] if quick else [("chain3", 10**4, 100)]
    every = dict(common.models())
    for name, B, steps in configs:
        model = every[name]
        q0, qd0, _ = common.states(model, B, seed=19)
        qd0 = 0.5 * qd0
        tau = np.random.default_rng(20).normal(0.0, 5.0, (B, model.dof))  # constant torques, N m
        xs = tuple(jax.device_put(x) for x in (q0, qd0, tau))

        def direct(a=xs):
            return jaxmb.simulate(model, *a, dt, steps=steps).q

        traj, first_s = common.first_call(direct)
        traj = np.asarray(traj)  # (steps + 1, B, dof)
        cj, cj_s = common.compile_and_time(lambda a, b, c: jaxmb.simulate(model, a, b, c, dt, steps=steps).q, *xs)
        cv, cv_s = common.compile_and_time(
            jax.vmap(lambda a, b, c: jaxmb.simulate(model, a, b, c, dt, steps=steps).q), *xs)  # (B, steps + 1, dof)
        # MuJoCo: state = [time, qpos, qvel] (mjSTATE_FULLPHYSICS minus act: time, qpos, qvel)
        mj = mujoco_rollout_model(model, dt)
        data = [mujoco.MjData(mj) for _ in range(2)]
        spec = mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS | mujoco.mjtState.mjSTATE_QVEL
        size = mujoco.mj_stateSize(mj, spec)
        state0 = np.zeros((B, size))
        state0[:, 1:1 + model.dof] = to_relative(model, q0)
        state0[:, 1 + model.dof:] = to_relative(model, qd0)
        ctrl = np.repeat(forces_to_relative(model, tau)[:, None, :], steps, axis=1)  # (B, steps, nu)
        runner = rollout.Rollout(nthread=2)

        def mj_run():
            return runner.rollout(mj, data, state0, ctrl, nstep=steps, initial_warmstart=None)

        state, _ = mj_run()
        try:  # the state layout is checked against mj_getState on one sample
            mq = state[:, :, 1:1 + model.dof]  # (B, steps, dof) after each step
        except IndexError:
            mq = None
        cases = {
            "jaxmb": lambda: common.block(direct()),
            "jaxmb_jit": lambda: common.block(cj(*xs)),
            "jit_vmap": lambda: common.block(cv(*xs)),
            "mujoco_rollout": mj_run,
        }
        check = {"jaxmb_jit": float(np.abs(np.asarray(cj(*xs)) - traj).max()),
                 "jit_vmap": float(np.abs(np.swapaxes(np.asarray(cv(*xs)), 0, 1) - traj).max())}
        if mq is not None:
            qm = from_relative(model, mq.reshape(-1, model.dof)).reshape(B, steps, model.dof)
            check["mujoco_rollout"] = float(np.abs(np.swapaxes(traj[1:], 0, 1) - qm).max())
        reps = 3  # the direct call (see the README) takes seconds at B = 1e4
        t = common.alternate(cases, reps, 1)
        jt = t["jaxmb"]["median"]
        row = {"model": name, "segments": model.segments, "batch": B, "steps": steps, "dt": dt, "method": "rk4",
               "dtype": "float64", "first_call_s": first_s, "compile_jit_s": cj_s, "compile_jit_vmap_s": cv_s, "timings": t,
               "steps_per_s": {k: B * steps / v["median"] for k, v in t.items()},
               "speedup": {k: v["median"] / jt for k, v in t.items() if k != "jaxmb"},
               "max_abs_diff_rad": check, "load": common.load()}  # fmt: skip
        rows.append(row)
        log(f"SIM {name} B={B} steps={steps}: jaxmb {jt * 1e3:.1f} ms ({row['steps_per_s']['jaxmb']:.3g} steps/s)  "
            + "  ".join(f"{k}:{v:.2f}x" for k, v in row["speedup"].items())
            + f"  max|dq| {check}")
    return rows


if __name__ == "__main__":
    common.check_args(sys.argv[1:], __doc__, flags=("--quick",))
    run(quick="--quick" in sys.argv)
