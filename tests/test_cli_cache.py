"""The command line's persistent compilation cache (jaxmb.cli._compile_cache).

Each case runs ``python -m jaxmb`` (jaxmb/__main__.py) in a fresh process: the cache is a process-wide
JAX setting, which the test workers set for themselves (tests/conftest.py).
"""

import os
import subprocess
import sys

from jaxmb import cli


def _jaxmb(args, env_extra, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_") and k != "JAXMB_CACHE_DIR"}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-m", "jaxmb", *args, "reach", "--samples", "21", "--out", ""],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)  # fmt: skip


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv("JAXMB_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cli.default_cache_dir() == os.path.join(str(tmp_path), "jaxmb", "xla")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cli.default_cache_dir() == os.path.join(str(tmp_path / "home"), ".cache", "jaxmb", "xla")
    monkeypatch.setenv("JAXMB_CACHE_DIR", str(tmp_path / "mine"))
    assert cli.default_cache_dir() == str(tmp_path / "mine")


def test_cache_is_written_by_default_and_not_with_no_cache(tmp_path):
    # default: compiled programs land in $XDG_CACHE_HOME/jaxmb/xla
    r = _jaxmb([], {"XDG_CACHE_HOME": str(tmp_path / "xdg")}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path / "xdg" / "jaxmb" / "xla")
    # a folder that JAX's own variable names is kept (every program stored: min 0 s)
    jax_env = {"XDG_CACHE_HOME": str(tmp_path / "xdg2"), "JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax"),
               "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # fmt: skip
    r = _jaxmb([], jax_env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path / "jax") and not (tmp_path / "xdg2" / "jaxmb").exists()
    # --no-cache: nothing is written, even there
    jax_env["JAX_COMPILATION_CACHE_DIR"] = str(tmp_path / "jax3")
    r = _jaxmb(["--no-cache"], jax_env, tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "xdg2" / "jaxmb").exists()
    assert not (tmp_path / "jax3").exists() or not os.listdir(tmp_path / "jax3")
    # --cache-dir wins over JAX's variable
    r = _jaxmb(["--cache-dir", str(tmp_path / "mine")], {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "jax2")}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert os.listdir(tmp_path / "mine")
    assert not (tmp_path / "jax2").exists() or not os.listdir(tmp_path / "jax2")


def test_unusable_cache_folder_is_a_note_not_a_failure(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    r = _jaxmb(["--cache-dir", str(blocker / "xla")], {}, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "no compilation cache" in r.stderr and str(blocker / "xla") in r.stderr
