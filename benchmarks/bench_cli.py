"""Wall time of the command line's jobs with a cold and a warm compilation cache.

Run: ``python -m benchmarks.bench_cli [--rounds N]`` (about 2 minutes). Writes
``results_cli.json`` beside this file.

Each command is what a user types (``jaxmb gait``, ``jaxmb optimal``, ``jaxmb
identify`` with their defaults, outputs to a temporary folder), timed from process
start to exit in a fresh process, so the times include Python's and JAX's imports,
reading the bundled data and writing the figures. Per command and round: a run on
an empty cache folder (``--cache-dir``: cold, everything compiled and stored), then
a run on that folder (warm: the compiled programs loaded) and a run with
``--no-cache``; the order of the last two alternates between rounds. The cache
folders are deleted afterwards.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import common

RESULTS = Path(__file__).with_name("results_cli.json")
COMMANDS = {
    "gait": ["gait"],
    "optimal": ["optimal"],
    "identify": ["identify"],
}


def _run(args: list, out: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "JAXMB_CACHE_DIR"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "jaxmb.cli", *args, "--out", out], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    return time.perf_counter() - t0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    common.check_args(argv, __doc__, options=("--rounds",))
    rounds = int(argv[argv.index("--rounds") + 1]) if "--rounds" in argv else 2
    results = {"environment": common.environment(), "load_before": common.load(), "rounds": rounds, "commands": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cmd in COMMANDS.items():
            rows = {"cold": [], "warm": [], "no_cache": []}
            for r in range(rounds):
                cache = os.path.join(tmp, f"cache-{name}-{r}")
                out = os.path.join(tmp, f"out-{name}")
                rows["cold"].append(_run(["--cache-dir", cache, *cmd], out))
                order = ("warm", "no_cache") if r % 2 == 0 else ("no_cache", "warm")
                for kind in order:
                    pre = ["--cache-dir", cache] if kind == "warm" else ["--no-cache"]
                    rows[kind].append(_run(pre + cmd, out))
                shutil.rmtree(cache, ignore_errors=True)
                print(f"cli {name} round {r}: cold {rows['cold'][-1]:.2f} s, warm {rows['warm'][-1]:.2f} s, "
                      f"no cache {rows['no_cache'][-1]:.2f} s", flush=True)  # fmt: skip
            results["commands"][name] = {k: {"runs_s": v, "median_s": float(np.median(v))} for k, v in rows.items()}
    results["load_after"] = common.load()
    common.save(results, RESULTS)
    print(f"results in {RESULTS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
