"""Tables, target checks and the plot, from ``results.json``.

Run: ``python -m benchmarks.report`` (``python -m benchmarks`` runs it at the end).
"""

from __future__ import annotations

import json
import re

import numpy as np

from . import common

README = common.HERE / "README.md"
PLOT = common.HERE / "speedup.png"
START, END = "<!-- results:start -->", "<!-- results:end -->"

BASELINES = ("pinocchio_parallel", "numpy", "sympy", "mujoco_loop", "pinocchio_loop", "mjx", "jaxmb_jit", "jit_vmap")


def _ms(s):
    return f"{s * 1e3:.3g}"


def _x(v):
    return "" if v is None else f"{v:.2f}"


def _find(rows, **kw):
    for r in rows:
        if all(r.get(k) == v for k, v in kw.items()):
            return r
    return None


def targets(res: dict) -> list:
    """Every target of issue 8 (and the remaining ones of issue 4) with the measured figure and whether it is met."""
    out = []
    inv = res.get("inverse_dynamics", [])

    def add(what, value, limit, met, note=""):
        out.append({"target": what, "measured": value, "limit": limit, "met": bool(met), "note": note})

    for key, label in (("jaxmb", "direct call"), ("jit_vmap", "jit(vmap(single-sample))")):
        for model, B, limit in (("chain3", 10**6, 10.0), ("chain20", 10**5, 3.0)):
            r = _find(inv, model=model, batch=B, dtype="float64")
            if r and "pinocchio_parallel" in r["timings"] and key in r["timings"]:
                x = r["timings"]["pinocchio_parallel"]["median"] / r["timings"][key]["median"]
                add(f"ID {model}, B={B:.0e}, float64, {label}: >= {limit:g}x pin.rneaInParallel (2 threads)", x, limit,
                    x >= limit)
    for r in res.get("forward_dynamics", []):
        if "pinocchio_parallel" in r.get("speedup", {}):
            x = r["speedup"]["pinocchio_parallel"]
            add(f"FD {r['model']}, B={r['batch']:.0e}: >= 1.5x pin.abaInParallel (2 threads)", x, 1.5, x >= 1.5)
    for g in res.get("gradient", []):
        add(f"gradient/loss time, {g['model']}, B={g['batch']:.0e}: <= 1.5", g["grad_over_loss"], 1.5,
            g["grad_over_loss"] <= 1.5)
    for g in res.get("gradient_compile", []):
        if g["gradient"] != "autodiff":
            at = f", B={g['batch']:.0e}" if "batch" in g else ""
            wrt = g.get("wrt", "model")
            add(f"compile of jax.grad ({wrt}) of the seven-segment human's {g.get('function', 'inverse_dynamics')}{at}: < 2 s",
                g["compile_s"], 2.0, g["compile_s"] < 2.0)
    for r in res.get("simulation", []):
        x = r["speedup"].get("mujoco_rollout")
        if x is not None:
            add(f"batched RK4 simulation {r['model']}, B={r['batch']:.0e}: >= 5x mujoco.rollout (2 threads)", x, 5.0,
                x >= 5.0)
    for c in res.get("compile", []):
        if c["model"] == "human7" and c["function"] in ("inverse_dynamics", "joint_reactions"):
            add(f"compile {c['function']}, seven-segment human: < 2 s", c["total_s"], 2.0, c["total_s"] < 2.0)
    mem = res.get("memory", {})
    if "jaxmb" in mem:
        m = mem["jaxmb"]
        add(f"peak memory ID n=3, B={mem['batch']:.0e}: <= 3x inputs + outputs", m["peak_over_inputs_outputs"], 3.0,
            m["peak_over_inputs_outputs"] <= 3.0)
        add("no per-sample dense matrix in batched ID (temporaries, MiB)", m["temporaries_mib"], 0.0,
            m["temporaries_mib"] < 1.0)
    env = res.get("environment", {}).get("machine", {})
    if env:
        add("runs unchanged without a GPU (backend)", env.get("jax_backend"), "cpu", True)
    roof = res.get("roofline", {})
    if roof.get("backend") not in (None, "cpu"):
        for r in roof["inverse_dynamics"]:
            add(f"GPU ({roof['device']}) ID {r['model']}, B={r['batch']:.0e}, {r['dtype']}: fraction of the measured "
                "bandwidth, recorded", r["fraction"], None, True)
    return out  # fmt: skip


def tables(res: dict) -> str:
    env = res["environment"]
    m = env["machine"]
    v = env["versions"]
    lines = [
        f"Recorded {env['date']} on {m['cpu']} ({m['cores']} cores, {m['memory_gib']} GiB), "
        f"{m['platform']}, JAX backend `{m['jax_backend']}`; jax {v['jax']}, jaxlib {v['jaxlib']}, numpy {v['numpy']}, "
        f"mujoco {v['mujoco']}, pinocchio {v['pinocchio']}, sympy {v['sympy']}; jaxmb {v['jaxmb']} "
        f"(commit `{env['git_commit'][:10]}`).",
        f"Load average (1, 5, 15 min) before the run {res.get('quiet', {}).get('load_at_start')}, after "
        f"{res.get('load_end')}; waited {res.get('quiet', {}).get('waited_s')} s for a quiet machine. "
        f"Total run time {res.get('run_seconds', 0):.0f} s.",
    ]
    reruns = res.get("reruns", [])
    for r in [reruns] if isinstance(reruns, dict) else reruns:
        e = r["environment"]
        why = f" ({r['why']})" if r.get("why") else ""
        lines.append(f"Sections {', '.join(r['sections'])} rerun and merged into these results on {e['date']}, "
                     f"commit `{e['git_commit'][:10]}`, load average {r.get('load_at_start')}{why}.")  # fmt: skip
    lines += [
        "",
        "### Targets",
        "",
        "| target | measured | limit | met |",
        "|---|---|---|---|",
    ]
    for t in res.get("targets", []):
        val = t["measured"]
        val = f"{val:.3g}" if isinstance(val, float) else str(val)
        lines.append(f"| {t['target']} | {val} | {t['limit']} | {'yes' if t['met'] else '**no**'} |")
    lines += [
        "",
        "### Batched inverse dynamics",
        "",
        "Median time of one direct call (no `jax.jit` around it) of `jaxmb.inverse_dynamics(model, Q, QD, QDD)` "
        "on (B, dof) arrays in ms, and the "
        "speedup over each baseline (baseline time / jaxmb time, both medians of alternated rounds; the "
        "baselines run in float64, so the float32 rows compare jaxmb float32 against float64 baselines, "
        "except `jaxmb_jit`, `jit_vmap`, which run in the row's dtype; `mjx` up to 7 segments, scaled from 1e5). Loops (`mujoco_loop`, `pinocchio_loop`) are "
        "timed on at most 20000 samples and scaled to the batch.",
        "",
        "| model | batch | dtype | jaxmb ms | compile s | " + " | ".join(BASELINES) + " |",
        "|---|---|---|---|---|" + "---|" * len(BASELINES),
    ]
    inv = res.get("inverse_dynamics", [])
    for r in inv:
        sp = dict(r["speedup"])
        if r["dtype"] == "float32":
            ref = _find(inv, model=r["model"], batch=r["batch"], dtype="float64")
            if ref:
                for k in BASELINES:
                    if k != "jit_vmap" and k in ref["timings"]:
                        sp[k] = ref["timings"][k]["median"] / r["timings"]["jaxmb"]["median"]
        lines.append(
            f"| {r['model']} | {r['batch']:.0e} | {r['dtype']} | {_ms(r['timings']['jaxmb']['median'])} | "
            f"{r['compile_s']:.2f} | " + " | ".join(_x(sp.get(k)) for k in BASELINES) + " |"
        )
    for key, title, cols in (
        ("forward_dynamics", "Batched forward dynamics (float64)",
         ("pinocchio_parallel", "pinocchio_loop", "mujoco_loop", "jit_vmap")),
        ("reactions", "Batched joint reactions (float64, every joint, world frame)",
         ("numpy", "jit_vmap_projection", "jit_vmap_recursive")),
    ):  # fmt: skip
        rows = res.get(key, [])
        if not rows:
            continue
        lines += ["", f"### {title}", "", "Median ms of jaxmb and speedups over each baseline.", "",
                  "| model | batch | jaxmb ms | " + " | ".join(cols) + " |", "|---|---|---|" + "---|" * len(cols)]  # fmt: skip
        for r in rows:
            lines.append(f"| {r['model']} | {r['batch']:.0e} | {_ms(r['timings']['jaxmb']['median'])} | "
                         + " | ".join(_x(r["speedup"].get(k)) for k in cols) + " |")  # fmt: skip
    if res.get("gradient"):
        lines += ["", "### Gradient of a batched squared-torque loss", "",
                  "`jax.grad` of `sum(jaxmb.inverse_dynamics(model, Q, QD, QDD)**2)` with respect to every model "
                  "parameter, against the loss alone: with the hand-derived adjoint (the default, "
                  "`gradient=\"adjoint\"`), with JAX's reverse mode of the same batched pass "
                  "(`gradient=\"autodiff\"`), and through `jit(vmap(inverse_dynamics))`.",
                  "", "| model | batch | parameters | loss ms | grad ms | grad/loss | autodiff grad/loss "
                  "| vmap grad ms | grad compile s | max diff vs autodiff |",
                  "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for g in res["gradient"]:
            t = g["timings"]
            auto = g.get("grad_autodiff_over_loss")
            diff = g.get("max_rel_diff_vs_autodiff")
            lines.append(f"| {g['model']} | {g['batch']:.0e} | {g['parameters']} | {_ms(t['loss']['median'])} | "
                         f"{_ms(t['grad']['median'])} | {g['grad_over_loss']:.2f} | "
                         f"{'-' if auto is None else f'{auto:.2f}'} | {_ms(t['grad_jit_vmap']['median'])} | "
                         f"{g['grad_compile_s']:.2f} | {'-' if diff is None else f'{diff:.0e}'} |")  # fmt: skip
    if res.get("gradient_compile"):
        lines += ["", "### Compile time of the gradient, seven-segment human", "",
                  "| function | gradient | with respect to | batch | jit compile s (cleared caches) | "
                  "first un-jitted `jax.grad` call s |", "|---|---|---|---|---|---|"]
        for g in res["gradient_compile"]:
            first = g.get("first_call_unjitted_s")
            lines.append(f"| {g.get('function', 'inverse_dynamics')} | {g['gradient']} | {g.get('wrt', 'model')} | "
                         f"{g.get('batch', 1000):.0e} | {g['compile_s']:.2f} | {'-' if first is None else f'{first:.2f}'} |")
    if res.get("simulation"):
        lines += ["", "### Batched RK4 simulation against mujoco.rollout (2 threads)", "",
                  "| model | batch | steps | jaxmb (direct) steps/s | jaxmb_jit steps/s | jit_vmap steps/s | "
                  "mujoco_rollout steps/s | max abs diff vs MuJoCo (rad) |", "|---|---|---|---|---|---|---|---|"]
        for r in res["simulation"]:
            sp = r["steps_per_s"]
            lines.append(f"| {r['model']} | {r['batch']:.0e} | {r['steps']} | {sp['jaxmb']:.3g} | "
                         f"{sp.get('jaxmb_jit', float('nan')):.3g} | {sp['jit_vmap']:.3g} | "
                         f"{sp['mujoco_rollout']:.3g} | {r['max_abs_diff_rad'].get('mujoco_rollout', float('nan')):.1e} |")
    roof = res.get("roofline")
    if roof:
        bw = ", ".join(f"{b['dtype']} {b['best_GB_s']:.1f} GB/s" for b in roof["bandwidth"])
        lines += ["", f"### Memory-bandwidth roofline ({roof['device']}, backend {roof['backend']})", "",
                  f"Bandwidth measured in the same run (best of a STREAM-like scale and triad over 256 MiB): {bw}. "
                  "Inverse dynamics must read q, qd, qdd and write tau (4 dof B values); the floor is that traffic "
                  "at the measured bandwidth, and the fraction is floor / time.",
                  "", "| model | batch | dtype | ms | GB/s | floor ms | fraction of roofline |",
                  "|---|---|---|---|---|---|---|"]  # fmt: skip
        for r in roof["inverse_dynamics"]:
            lines.append(f"| {r['model']} | {r['batch']:.0e} | {r['dtype']} | {_ms(r['ms'] / 1e3)} | {r['GB_s']:.1f} | "
                         f"{_ms(r['floor_ms'] / 1e3)} | {r['fraction'] * 100:.0f}% |")  # fmt: skip
    if res.get("compile"):
        lines += ["", "### Compile time (batch 1e5, float64)", "",
                  "| model | function | trace + lower s | compile s | total s |", "|---|---|---|---|---|"]  # fmt: skip
        for c in res["compile"]:
            lines.append(f"| {c['model']} | {c['function']} | {c['trace_lower_s']:.3f} | {c['compile_s']:.3f} | "
                         f"{c['total_s']:.3f} |")  # fmt: skip
    if res.get("latency"):
        lines += ["", "### Single-call latency (one sample, float64)", "", "| model | call | median us |",
                  "|---|---|---|"]  # fmt: skip
        for r in res["latency"]:
            lines.append(f"| {r['model']} | {r['what']} | {r['median_us']:.2f} |")
    mem = res.get("memory")
    if mem:
        lines += ["", f"### Peak memory (inverse dynamics, {mem['model']}, batch {mem['batch']:.0e}, float64)", "",
                  "| path | inputs MiB | outputs MiB | temporaries MiB | peak / (inputs + outputs) | source |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for k, r in mem.items():
            if isinstance(r, dict) and "inputs_mib" in r:
                lines.append(f"| {k} | {r['inputs_mib']:.1f} | {r['outputs_mib']:.1f} | {r['temporaries_mib']:.1f} | "
                             f"{r['peak_over_inputs_outputs']:.2f} | {r['source']} |")  # fmt: skip
    lines += ["", f"![speedup over pin.rneaInParallel]({PLOT.name})", ""]
    return "\n".join(lines)


def plot(res: dict):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    inv = [r for r in res.get("inverse_dynamics", []) if r["dtype"] == "float64"]
    if not inv:
        return
    models = list(dict.fromkeys(r["model"] for r in inv))
    batches = sorted({r["batch"] for r in inv})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    width = 0.8 / len(batches)
    for k, B in enumerate(batches):
        vals = [(_find(inv, model=m, batch=B) or {}).get("speedup", {}).get("pinocchio_parallel", np.nan) for m in models]
        ax1.bar(np.arange(len(models)) + (k - (len(batches) - 1) / 2) * width, vals, width, label=f"B = {B:.0e}")
    ax1.axhline(1.0, color="k", lw=0.8)
    ax1.set_xticks(np.arange(len(models)), models)
    ax1.set_ylabel("speedup over pin.rneaInParallel (2 threads)")
    ax1.set_title("Batched inverse dynamics, float64")
    ax1.legend()
    for name, style in (("chain3", "-"), ("chain20", "--"), ("human7", ":")):
        rows = [r for r in inv if r["model"] == name]
        if not rows:
            continue
        bs = [r["batch"] for r in rows]
        for key, color in (("jaxmb", "C0"), ("pinocchio_parallel", "C1"), ("numpy", "C2"), ("jit_vmap", "C3")):
            ys = [r["per_sample_ns"][key] for r in rows]
            ax2.loglog(bs, ys, style, color=color, marker="o", ms=3, label=f"{key} {name}")
    ax2.set_xlabel("batch size")
    ax2.set_ylabel("time per sample, ns")
    ax2.set_title("Per-sample time (chain3 solid, chain20 dashed, human7 dotted)")
    ax2.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)
    plt.close(fig)


def write_readme(res: dict):
    text = README.read_text()
    block = f"{START}\n{tables(res)}\n{END}"
    if START in text:
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    README.write_text(text)


def main():
    res = json.loads(common.RESULTS.read_text())
    res["targets"] = targets(res)
    common.save(res)
    plot(res)
    write_readme(res)
    for t in res["targets"]:
        print(("MET  " if t["met"] else "MISS ") + t["target"], t["measured"])


if __name__ == "__main__":
    main()
