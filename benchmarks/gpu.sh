#!/usr/bin/env bash
# The GPU check in one command, each part under its own time limit (a lent GPU
# machine has minutes, not hours): the machine and its JAX devices, the test suite on
# the GPU (one line per test, so that a run cut short still names its failures), the
# benchmarks' GPU-relevant sections, the gait pipeline at 1,000 trials, the whole-body
# fit, and the inverse-dynamics sweep with what time is left.
#
#   bash benchmarks/gpu.sh OUTDIR [TOTAL_SECONDS [TEST_SECONDS]]   (default 540, 330)
#
# (the first run, on an H200 with 12 workers, got through about 85 % of the suite in 244 s)
#
# Writes into OUTDIR: env.txt (nvidia-smi, jax.devices(), versions), bench.log (every
# benchmark's output), results.json (python -m benchmarks --only ..., its JSON, with
# the device name), results_gait.json, results_wholebody.json, tests.log (pytest -n 12 -v
# with --durations) and junit.xml (when the suite finishes). Pinocchio is not needed (its rows are skipped);
# MuJoCo and MJX are used where installed. Every part runs even if an earlier one
# failed or ran out of time; a run cut short keeps the sections it finished.
set -u
out=${1:?usage: bash benchmarks/gpu.sh OUTDIR [TOTAL_SECONDS [TEST_SECONDS]]}
total=${2:-540}
tests=${3:-330}
py=${PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
start=$(date +%s)
left() { echo $((total - ($(date +%s) - start))); }
part() {  # part SECONDS LABEL COMMAND...: run COMMAND for at most SECONDS (or what is left)
    local s=$1 label=$2
    shift 2
    local l
    l=$(left)
    ((s > l)) && s=$l
    if ((s < 10)); then
        echo "== $label: skipped, out of time" | tee -a "$out/bench.log"
        return
    fi
    echo "== $label (at most $s s, $(date -u +%T))" | tee -a "$out/bench.log"
    timeout "$s" "$@" 2>&1 | tee -a "$out/bench.log" | tail -3
    echo "== $label: exit ${PIPESTATUS[0]} after $(($(date +%s) - start)) s" | tee -a "$out/bench.log"
}

{
    date -u
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1
    nproc
    "$py" -c "import jax, jaxlib, numpy, sys; print(sys.version); print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, 'numpy', numpy.__version__); print(jax.devices(), jax.default_backend())"
    "$py" -c "import mujoco; print('mujoco', mujoco.__version__); from mujoco import mjx; print('mjx ok')" 2>&1 | grep -v warp
    git log -1 --format='commit %H %s' 2>/dev/null
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

echo "== tests (at most $tests s, $(date -u +%T))" | tee -a "$out/bench.log"
timeout "$tests" "$py" -m pytest -v -n 12 -p no:cacheprovider --timeout 90 --durations 25 \
    --junitxml="$out/junit.xml" >"$out/tests.log" 2>&1
echo "== tests: exit $? after $(($(date +%s) - start)) s" | tee -a "$out/bench.log"
grep -E "FAILED|ERROR|passed|failed" "$out/tests.log" | grep -v "^E " | tail -30 | tee -a "$out/bench.log"

part 45 "roofline" "$py" -m benchmarks --no-wait --only roofline
cp benchmarks/results.json "$out/results.json" 2>/dev/null
part 45 "simulation" "$py" -m benchmarks --no-wait --merge --only simulation
cp benchmarks/results.json "$out/results.json" 2>/dev/null
part 70 "gait, 1000 trials" "$py" -m benchmarks.bench_gait --trials 1000 --baseline-trials 40 --json "$out/results_gait.json"
part 45 "whole body" "$py" -m benchmarks.bench_wholebody --rounds 3
cp benchmarks/results_wholebody.json "$out/results_wholebody.json" 2>/dev/null
part 600 "inverse dynamics" "$py" -m benchmarks --no-wait --merge --only inverse_dynamics
cp benchmarks/results.json "$out/results.json" 2>/dev/null
