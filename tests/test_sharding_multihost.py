"""jaxmb.sharded across two processes (multi-host), as its module docstring describes.

Two CPU processes on this machine are joined with ``jax.distributed`` (gloo
collectives): each gives its own rows of the batch as one global array
(``jax.make_array_from_process_local_data``), calls the sharded inverse dynamics, and
reads its rows back from ``addressable_shards``. The rows must be what one process
computes for them, and a NaN in one process's rows must raise the same ValueError in
both processes (the check over a global array is a reduction over every device: a
process that checked only its own rows would go on to a collective that the other
never joins).
"""

import json
import os
import socket
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import jaxmb

WORKER = textwrap.dedent(
    """
    import json, sys
    import jax
    port, pid, bad = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "nan"
    try:  # the machine's part: gloo in this jaxlib, a local port
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=f"localhost:{port}", num_processes=2,
                                   process_id=pid, initialization_timeout=60)
    except Exception as e:
        print(f"NOSETUP {type(e).__name__}: {e}")
        sys.exit(3)
    jax.config.update("jax_enable_x64", True)
    import numpy as np
    from jax.sharding import NamedSharding, PartitionSpec as P
    import jaxmb
    assert jax.process_count() == 2 and len(jax.devices()) == 2 and len(jax.local_devices()) == 1
    model = jaxmb.three_segment_leg(1.75, 70.0)
    rows = np.random.default_rng(pid).normal(size=(3, 5, model.dof))  # this process's 5 samples
    if bad and pid == 1:
        rows[0, 2, 1] = np.nan
    mesh = jax.make_mesh((2,), ("batch",))
    glob = [jax.make_array_from_process_local_data(NamedSharding(mesh, P("batch")), r) for r in rows]
    try:
        out = jaxmb.sharded(jaxmb.inverse_dynamics, mesh)(model, *glob)
        mine = np.concatenate([np.asarray(s.data) for s in out.addressable_shards])
        print("RESULT" + json.dumps({"global_shape": list(out.shape), "rows": rows.tolist(),
                                     "tau": mine.tolist()}))
    except ValueError as e:
        print("RESULT" + json.dumps({"error": str(e)}))
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _two_processes(bad: str):
    port = _free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env.pop("XLA_FLAGS", None)  # one device per process
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(port), str(pid), bad], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for pid in (0, 1)]  # fmt: skip
    results = []
    for p in procs:
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the two processes did not finish in 120 s")
        if p.returncode == 3 and "NOSETUP" in out:  # not jaxmb's: no gloo or no local port here
            for q in procs:
                q.kill()
            pytest.skip("two local JAX processes cannot be joined on this machine: " + out.strip()[-300:])
        assert p.returncode == 0, err[-3000:]
        line = [ln for ln in out.splitlines() if ln.startswith("RESULT")][-1]
        results.append(json.loads(line[len("RESULT"):]))
    return results


def test_each_process_gets_its_rows_of_the_global_batch():
    model = jaxmb.three_segment_leg(1.75, 70.0)
    for pid, res in enumerate(_two_processes("none")):
        assert res["global_shape"] == [10, model.dof]
        q, qd, qdd = np.asarray(res["rows"])
        np.testing.assert_allclose(res["tau"], jaxmb.inverse_dynamics(model, q, qd, qdd), rtol=0, atol=1e-12,
                                   err_msg=f"process {pid}")  # fmt: skip


def test_a_nan_in_one_process_raises_in_both():
    results = _two_processes("nan")
    for res in results:
        assert res.get("error") == "q is not finite (a NaN or inf in the global batch)", res
