"""Which movement does the arm choose? Minimum jerk vs minimum torque change vs minimum torque.

Flash & Hogan (1985) predict straight hand paths with bell-shaped speed profiles
(minimum hand jerk, a kinematic criterion); Uno, Kawato & Suzuki (1989) predict
gently curved paths for some movements (minimum torque change, through the arm's
dynamics); minimum torque (int |tau|^2 dt) is a further dynamic criterion. This
script optimises the same reaches under the three criteria with
:func:`jaxmb.optimize` (one batched call per criterion), and prints a table of path
curvature (maximal lateral deviation from the start-target chord over the chord
length, signed: + to the left of the direction of motion), peak hand speed, the
three costs of every optimal path, and the optimisation time. It then maps the
curvature of the minimum-torque-change path over a grid of targets in one batched
call. Last, the convergence in the basis size K: the hand paths and costs of the
four movements for K = 6, 10, 16, 28 against K = 40, per criterion, and the minimum
torque with the end conditions its Euler-Lagrange equation admits (position and
velocity, ``end_conditions=2``, what ``optimize`` chooses) against zero end
accelerations forced (``end_conditions=3``, which every optimisation used before):
the forced one has a boundary layer and a cost that keeps falling with K.

The arm. Uno et al.'s two-link arm in the horizontal plane, with the parameters
quoted from their Table 1: L1 = 0.25 m, L2 = 0.35 m, m1 = 0.9 kg, m2 = 1.1 kg, centres
of mass 0.11 m and 0.15 m from the proximal joints, moments of inertia 0.065 and
0.100 kg m^2. Provenance and uncertainty: these values were taken from the task
brief and from memory of the paper; the paper itself (Biol. Cybern. 61, 89-101)
could not be consulted here, so they are unverified. Their equations of motion
(as usually reproduced) use inertias about the joints, which is how they are read
here (about the centres of mass: I - m d^2 = 0.054 and 0.075 kg m^2); read about the
centres of mass they would make the arm 20-30 % heavier to turn. Uno et al.'s model
also has joint viscosity, left out here (the torques are jaxmb's rigid-body inverse
dynamics). The movements are not Uno et al.'s targets (not available here) but
movements of the kinds they describe: across the front of the body (where they
report curved minimum-torque-change paths), oblique, and radial (towards and away
from the body). Coordinates: shoulder at the origin, x to the right, y forward
(the model's x and y, with gravity 0).

Run: python experiments/optimal_reaching.py   (figures in docs/, summary printed and in
experiments/out/optimal_reaching.json)
"""

import json
import os
import time

import jax
import numpy as np

import jaxmb
from jaxmb.optimal import COSTS, LBFGS, movement, optimize

HERE = os.path.dirname(os.path.abspath(__file__))
DOCS = os.path.join(HERE, os.pardir, "docs")
OUT = os.path.join(HERE, "out")

#: Uno, Kawato & Suzuki (1989), Table 1 as quoted (see the module docstring).
UNO = dict(L1=0.25, L2=0.35, m1=0.9, m2=1.1, d1=0.11, d2=0.15, I1_joint=0.065, I2_joint=0.100)

#: Movements (start, target), m; shoulder at the origin, x right, y forward.
MOVEMENTS = {
    "lateral": ((-0.20, 0.35), (0.20, 0.35)),
    "lateral far": ((-0.15, 0.45), (0.25, 0.45)),
    "oblique": ((-0.10, 0.25), (0.20, 0.50)),
    "radial": ((0.00, 0.25), (0.00, 0.50)),
}
DURATION = 0.5  # s
CRITERIA = ("hand_jerk", "torque_change", "torque")
NODES, BASIS = 100, 10


def uno_arm(gravity=0.0):
    """Uno et al.'s two-link arm (inertias read about the joints; see the docstring)."""
    p = UNO
    inertia = [p["I1_joint"] - p["m1"] * p["d1"] ** 2, p["I2_joint"] - p["m2"] * p["d2"] ** 2]
    return jaxmb.chain([p["L1"], p["L2"]], [p["d1"], p["d2"]], [p["m1"], p["m2"]], inertia, gravity=gravity,
                       names=("upper_arm", "forearm_hand"))


def curvature(hand):
    """Signed maximal lateral deviation from the start-end chord over its length, (...);
    NaN for a chord under 1e-9 m."""
    h = np.asarray(hand)
    d = h[..., -1, :] - h[..., 0, :]
    length = np.linalg.norm(d, axis=-1)
    ok = length >= 1e-9
    n = np.stack([-d[..., 1], d[..., 0]], -1) / np.where(ok, length, 1.0)[..., None]
    lateral = np.einsum("...ti,...i->...t", h - h[..., :1, :], n)
    k = np.argmax(np.abs(lateral), axis=-1)
    return np.take_along_axis(lateral, k[..., None], -1)[..., 0] / np.where(ok, length, np.nan)


def _flat(res):
    lead = res.q_start.shape[:-1]
    return [np.asarray(x).reshape((-1,) + x.shape[len(lead):]) for x in (res.q_start, res.q_end, res.coef)] + [
        np.asarray(res.end_conditions).reshape(-1)]


def all_costs(model, res):
    """The three criteria evaluated on each optimal path (Gauss quadrature), (..., 3)."""
    lead = res.q_start.shape[:-1]
    qs, qe, a, ends = _flat(res)
    out = []
    for k in range(qs.shape[0]):
        m = movement(model, qs[k], qe[k], DURATION, a[k], nodes=NODES, quadrature="gauss", end_conditions=ends[k])
        out.append([float(COSTS[c](m)) for c in CRITERIA])
    return np.asarray(out).reshape(lead + (len(CRITERIA),))


def fine_hand(model, res, nodes=400):
    """Hand paths (n, nodes, 2) of a batch of results on a common fine time grid."""
    qs, qe, a, ends = _flat(res)
    return np.stack([np.asarray(movement(model, qs[k], qe[k], DURATION, a[k], nodes=nodes,
                                         end_conditions=ends[k]).hand) for k in range(qs.shape[0])])


BASES, BASIS_REF = (6, 10, 16, 28), 40


#: the notes' arm (jaxmb.two_link_arm, 1.70 m, 70 kg) in the horizontal plane and its
#: lateral reach (the README's example and the command line's default), m
NOTES_REACH = ((-0.25, 0.40), (0.25, 0.40))


def basis_convergence(model):
    """Hand-path and cost errors against basis=40, per criterion and basis size, of the
    four movements of Uno's arm and the lateral reach of the notes' arm; and the minimum
    torque's cost against K with free and forced (zero) end accelerations."""
    notes = jaxmb.two_link_arm(gravity=0.0)
    sets = {"Uno et al.": (model, np.array([s for s, _ in MOVEMENTS.values()]),
                           np.array([e for _, e in MOVEMENTS.values()])),
            "notes": (notes, np.array(NOTES_REACH[:1]), np.array(NOTES_REACH[1:]))}
    solve = lambda m, a, b, c, K, **kw: optimize(m, a, b, DURATION, target="hand", cost=c, basis=K,  # noqa: E731
                                                 nodes=max(NODES, 2 * (K + 3)), solver=LBFGS(max_iter=3000), **kw)
    table = []
    for arm_name, (m, starts, ends) in sets.items():
        amp = np.linalg.norm(ends - starts, axis=-1)
        for c in CRITERIA:
            ref = solve(m, starts, ends, c, BASIS_REF)
            h_ref = fine_hand(m, ref)
            for K in BASES:
                r = solve(m, starts, ends, c, K)
                err = np.max(np.linalg.norm(fine_hand(m, r) - h_ref, axis=-1), axis=-1) / amp
                table.append(dict(arm=arm_name, criterion=c, basis=K,
                                  end_conditions=int(np.asarray(r.end_conditions).ravel()[0]),
                                  hand_error=float(np.max(err)),
                                  cost_error=float(np.max(np.abs(np.asarray(r.cost) / np.asarray(ref.cost) - 1))),
                                  converged=bool(np.all(r.converged))))
    torque = []
    for arm_name, m, a, b in (("Uno et al.", model, *MOVEMENTS["lateral"]), ("notes", notes, *NOTES_REACH)):
        for ends_ in (2, 3):
            for K in (10, 16, 24, 40):
                r = solve(m, np.asarray(a), np.asarray(b), "torque", K, end_conditions=ends_)
                tau = np.asarray(r.tau)
                torque.append(dict(arm=arm_name, end_conditions=ends_, basis=K, cost=float(r.cost),
                                   converged=bool(r.converged), iterations=int(r.iterations),
                                   tau_start=tau[0].tolist(), tau_after_5ms=np.asarray(
                                       movement(m, r.q_start, r.q_end, DURATION, r.coef, nodes=101,
                                                end_conditions=ends_).tau)[1].tolist()))
    return table, torque


def timed(f):
    t = time.perf_counter()
    r = f()
    jax.block_until_ready(r)
    return r, time.perf_counter() - t


def compare(model):
    starts = np.array([s for s, _ in MOVEMENTS.values()])
    ends = np.array([e for _, e in MOVEMENTS.values()])
    results, rows = {}, []
    for c in CRITERIA:
        call = lambda: optimize(model, starts, ends, DURATION, target="hand", cost=c, nodes=NODES, basis=BASIS)  # noqa: E731
        first, t_first = timed(call)  # compiles on the first criterion (built-in costs share the solver)
        res, t_run = timed(call)
        results[c] = res
        costs = all_costs(model, res)
        speed = np.linalg.norm(np.asarray(res.hand_vel), axis=-1)
        for k, name in enumerate(MOVEMENTS):
            rows.append(dict(movement=name, criterion=c, curvature=float(curvature(res.hand[k])),
                             peak_speed=float(speed[k].max()), converged=bool(res.converged[k]),
                             iterations=int(res.iterations[k]),
                             **{f"cost_{cc}": float(costs[k, j]) for j, cc in enumerate(CRITERIA)},
                             time_per_movement_s=t_run / len(MOVEMENTS), first_call_s=t_first))
    return results, rows


def figure(results, path):
    from matplotlib.figure import Figure

    colors = dict(hand_jerk="C0", torque_change="C3", torque="C2")
    labels = dict(hand_jerk="minimum hand jerk", torque_change="minimum torque change", torque="minimum torque")
    fig = Figure(figsize=(10, 4.2), layout="constrained")
    ax_path, ax_speed = fig.subplots(1, 2, width_ratios=(1.1, 1))
    for c, res in results.items():
        t = np.asarray(res.t) / DURATION
        for k, name in enumerate(MOVEMENTS):
            h = np.asarray(res.hand[k])
            ax_path.plot(h[:, 0], h[:, 1], color=colors[c], lw=1.8, label=labels[c] if k == 0 else None)
            ax_speed.plot(t, np.linalg.norm(np.asarray(res.hand_vel[k]), axis=-1), color=colors[c], lw=1.4,
                          ls=("-", "--", ":", "-.")[k], label=f"{name}" if c == "hand_jerk" else None)
    for name, (s, e) in MOVEMENTS.items():
        ax_path.plot(*zip(s, e), "ko", ms=4)
    ax_path.plot(0, 0, "ks", ms=6)
    ax_path.annotate("shoulder", (0, 0), (0.01, -0.03), fontsize=8)
    ax_path.set_aspect("equal")
    ax_path.set_xlabel("x, to the right (m)")
    ax_path.set_ylabel("y, forward (m)")
    ax_path.set_title("hand paths (Uno et al.'s arm, horizontal plane)", fontsize=10)
    ax_path.legend(fontsize=8, loc="lower right")
    ax_speed.set_xlabel("t / T")
    ax_speed.set_ylabel("hand speed (m/s)")
    ax_speed.set_title(f"speed profiles, T = {DURATION} s (line style: movement)", fontsize=10)
    ax_speed.legend(fontsize=8, loc="upper right")
    fig.savefig(path, dpi=100)


def workspace_map(model, start=(0.0, 0.3), n=13):
    """Curvature of the minimum-torque-change path from ``start`` to a grid of targets."""
    xs = np.linspace(-0.4, 0.4, n)
    ys = np.linspace(0.05, 0.55, n)
    X, Y = np.meshgrid(xs, ys)
    targets = np.stack([X.ravel(), Y.ravel()], -1)
    r = np.linalg.norm(targets, axis=-1)
    L1, L2 = UNO["L1"], UNO["L2"]
    ok = (r > abs(L1 - L2) + 0.03) & (r < L1 + L2 - 0.03) & (np.linalg.norm(targets - start, axis=-1) > 0.08)
    targets = targets[ok]
    call = lambda: optimize(model, np.asarray(start), targets, DURATION, target="hand", cost="torque_change",  # noqa: E731
                            nodes=NODES, basis=BASIS, chunk=-(-len(targets) // 3), progress=True)
    _, t_first = timed(call)
    res, t_run = timed(call)
    return targets, res, t_first, t_run


def workspace_figure(start, targets, res, path):
    from matplotlib.figure import Figure

    k = curvature(res.hand)
    fig = Figure(figsize=(6.2, 4.6), layout="constrained")
    ax = fig.subplots()
    lim = np.abs(k).max()
    sc = ax.scatter(targets[:, 0], targets[:, 1], c=k, cmap="coolwarm", vmin=-lim, vmax=lim, s=40)
    for j in range(0, len(targets), 7):
        h = np.asarray(res.hand[j])
        ax.plot(h[:, 0], h[:, 1], color="0.5", lw=0.7)
    ax.plot(*start, "k*", ms=10)
    ax.plot(0, 0, "ks", ms=6)
    ax.set_aspect("equal")
    ax.set_xlabel("x, to the right (m)")
    ax.set_ylabel("y, forward (m)")
    ax.set_title(f"minimum torque change from * : curvature of the path ({len(targets)} targets)", fontsize=9)
    fig.colorbar(sc, ax=ax, label="max lateral deviation / path length (+ left)")
    fig.savefig(path, dpi=100)


def main():
    jax.config.update("jax_enable_x64", True)
    os.makedirs(OUT, exist_ok=True)
    model = uno_arm()
    results, rows = compare(model)
    figure(results, os.path.join(DOCS, "optimal_reaching.png"))
    print(f"Uno et al.'s arm, horizontal plane, T = {DURATION} s, {NODES} nodes, {BASIS} basis functions per joint")
    head = (f"{'movement':12s}{'criterion':>15s}{'curv.':>8s}{'v_max':>7s}{'J_jerk':>10s}{'J_dtau':>10s}"
            f"{'J_tau':>8s}{'iter':>6s}{'ms/mvt':>8s}")
    print(head + "\n" + "-" * len(head))
    for r in rows:
        print(f"{r['movement']:12s}{r['criterion']:>15s}{100 * r['curvature']:7.2f}%{r['peak_speed']:7.3f}"
              f"{r['cost_hand_jerk']:10.4g}{r['cost_torque_change']:10.4g}{r['cost_torque']:8.4g}"
              f"{r['iterations']:6d}{1e3 * r['time_per_movement_s']:8.1f}" + ("" if r["converged"] else "  (not converged)"))
    print("curv.: max lateral deviation / path length (+: to the left of the motion); v_max: peak hand speed, m/s;\n"
          "J_jerk: int |x'''|^2 dt (m^2/s^5), J_dtau: int |tau'|^2 dt (N^2 m^2/s), J_tau: int |tau|^2 dt (N^2 m^2 s)")
    start = (0.0, 0.3)
    targets, res, t_first, t_run = workspace_map(model, start)
    k = curvature(res.hand)
    workspace_figure(np.asarray(start), targets, res, os.path.join(DOCS, "optimal_reaching_workspace.png"))
    print(f"workspace map: {len(targets)} minimum-torque-change reaches from {start} in one call: "
          f"{t_first:.1f} s with compilation, {t_run:.2f} s compiled ({1e3 * t_run / len(targets):.1f} ms per reach); "
          f"{int(np.sum(res.converged))}/{len(targets)} converged; |curvature| median {100 * np.median(np.abs(k)):.1f} %, "
          f"max {100 * np.abs(k).max():.1f} %")
    table, torque = basis_convergence(model)
    print(f"\nbasis convergence against basis={BASIS_REF}: Uno et al.'s arm (max over the four movements) and the "
          "notes' arm (lateral reach); hand: largest distance between the hand paths / reach amplitude")
    print(f"{'arm':>11s}{'criterion':>15s}{'K':>4s}{'ends':>5s}{'hand error':>12s}{'cost error':>12s}")
    for r in table:
        print(f"{r['arm']:>11s}{r['criterion']:>15s}{r['basis']:4d}{r['end_conditions']:5d}{r['hand_error']:12.2e}"
              f"{r['cost_error']:12.2e}" + ("" if r["converged"] else "  (not all converged)"))
    print("\nminimum torque, lateral reach, against K: end accelerations free (end_conditions=2, the default) "
          "or forced to zero (3)")
    print(f"{'arm':>11s}{'ends':>5s}{'K':>4s}{'cost':>12s}{'iter':>6s}{'tau(0)':>18s}{'tau(5 ms)':>18s}")
    for r in torque:
        print(f"{r['arm']:>11s}{r['end_conditions']:5d}{r['basis']:4d}{r['cost']:12.6f}{r['iterations']:6d}"
              f"{r['tau_start'][0]:9.3f}{r['tau_start'][1]:9.3f}"
              f"{r['tau_after_5ms'][0]:9.3f}{r['tau_after_5ms'][1]:9.3f}"
              + ("" if r["converged"] else "  (not converged)"))
    summary = dict(arm=UNO, duration=DURATION, nodes=NODES, basis=BASIS, movements=MOVEMENTS, rows=rows,
                   workspace=dict(start=start, targets=targets.tolist(), curvature=k.tolist(),
                                  converged=np.asarray(res.converged).tolist(), first_call_s=t_first, run_s=t_run),
                   basis_convergence=table, minimum_torque_basis=torque)
    with open(os.path.join(OUT, "optimal_reaching.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("figures: docs/optimal_reaching.png, docs/optimal_reaching_workspace.png")


if __name__ == "__main__":
    main()
