"""The documentation site: every public name has an API entry, every tutorial runs.

The fast tests read the sources (``mkdocs.yml``, ``docs/``) and run by default. The
build (``mkdocs build --strict``, which executes every tutorial notebook: several
minutes on 2 cores) runs with ``--slow`` (``python -m pytest -q --slow
tests/test_docs.py``, or ``JAXMB_SLOW=1``), as a CI step of its own, and is skipped
where the ``docs`` extra (``pip install -e ".[docs]"``) is not installed.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys

import pytest

import jaxmb

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.py"))


def _nav():
    return (ROOT / "mkdocs.yml").read_text()


def test_every_public_name_has_an_api_entry():
    entries = set()
    for page in (DOCS / "api").glob("*.md"):
        entries |= set(re.findall(r"^::: jaxmb\.(\w+)\s*$", page.read_text(), flags=re.M))
    missing = sorted(set(jaxmb.__all__) - entries)
    assert not missing, f"public names without an API entry in docs/api/: {missing}"
    for page in (DOCS / "api").glob("*.md"):
        assert f"api/{page.name}" in _nav(), f"docs/api/{page.name} is not in mkdocs.yml's nav"


def test_tutorials_are_jupytext_notebooks_in_the_nav():
    assert len(TUTORIALS) >= 6
    for path in TUTORIALS:
        text = path.read_text()
        assert "format_name: percent" in text and "# %% [markdown]" in text, path.name
        assert f"tutorials/{path.name}" in _nav(), f"{path.name} is not in mkdocs.yml's nav"


def _docs_extra_missing():
    need = ("mkdocs", "material", "mkdocstrings_handlers.python", "mkdocs_jupyter", "jupytext", "ipykernel")
    missing = []
    for m in need:
        try:
            found = importlib.util.find_spec(m) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            missing.append(m)
    return missing


@pytest.fixture(scope="module")
def site(request, tmp_path_factory):
    if not (request.config.getoption("--slow") or os.environ.get("JAXMB_SLOW") == "1"):
        pytest.skip("builds the site and executes every tutorial (minutes): run with --slow")
    missing = _docs_extra_missing()
    if missing:
        pytest.skip(f"the docs extra is not installed (pip install -e \".[docs]\"): missing {missing}")
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    env.pop("JAX_ENABLE_X64", None)
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT, env=env,
                         capture_output=True, text=True)  # fmt: skip
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout[-6000:]}\n{run.stderr[-6000:]}"
    return out


def test_site_has_every_public_name(site):
    html = "".join(p.read_text() for p in (site / "api").glob("*/index.html"))
    missing = [n for n in jaxmb.__all__ if f'id="jaxmb.{n}"' not in html]
    assert not missing, f"public names with no entry in the built API reference: {missing}"


def test_site_tutorials_executed(site):
    for path in TUTORIALS:
        page = site / "tutorials" / path.stem / "index.html"
        assert page.is_file(), f"{path.name}: no page built"
        html = page.read_text()
        # executed: its figures are in the page; no cell raised (allow_errors is off,
        # so an error fails the build; this also catches one rendered as output)
        assert "data:image/png;base64" in html, f"{path.name}: no figure rendered"
        assert 'data-mime-type="text/plain"' in html, f"{path.name}: no printed output"
        error = re.search(r'<div[^>]*data-mime-type="application/vnd\.jupyter\.stderr"[^>]*>.{0,3000}?(Error|Traceback)',
                          html, flags=re.S)  # fmt: skip
        assert error is None, f"{path.name}: a cell wrote an error"


def test_site_pages_and_figures(site):
    for page in ("index.html", "getting-started/index.html", "conventions/index.html", "guides/gait/index.html",
                 "guides/optimal/index.html", "guides/identify/index.html", "guides/batches/index.html",
                 "performance/index.html", "verification/index.html", "api/index.html"):  # fmt: skip
        assert (site / page).is_file(), page
    for png in DOCS.glob("*.png"):
        assert (site / png.name).is_file(), png.name
    assert (site / "speedup.png").is_file()  # benchmarks/README.md's plot, beside the Performance page's text


@pytest.mark.parametrize("page", sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")
                                        if "```python" in p.read_text()))  # fmt: skip
def test_docs_python_blocks_run(request, page, monkeypatch):
    # the guides' examples run as written (their blocks in order, one namespace a page)
    if not (request.config.getoption("--slow") or os.environ.get("JAXMB_SLOW") == "1"):
        pytest.skip("runs every example of the guides (a minute or two): run with --slow")
    monkeypatch.chdir(ROOT)
    text = (DOCS / page).read_text()
    ns = {}
    for code in re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M):
        exec(compile(code, str(DOCS / page), "exec"), ns)
