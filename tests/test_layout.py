"""The package's layout, read from its source (issue 40): the import graph and the sizes.

Every module under ``jaxmb/`` is parsed with :mod:`ast` (nothing is imported), its
imports resolved (relative ones too) to the jaxmb modules they load, and checked:

1. no import cycle among jaxmb modules through module-level imports (and, reported
   separately, none hidden behind a function-level import);
2. no upward import: dependencies point down the layers of ``LAYERS`` (leaves <- engine
   <- applications <- cli), and among the applications only along ``APPLICATION_USES``;
3. no private name across a part boundary: a part is a top-level module or subpackage of
   ``jaxmb``; another part is used only through its public names (no ``_name``, nothing
   from its private modules ``_x``), except the shared private leaves ``SHARED_PRIVATE``;
4. no module over ``MAX_MODULE_LINES`` lines, no function over ``MAX_FUNCTION_CODE_LINES``
   lines of code (blank, comment and docstring lines not counted), but for the commented
   entries of ``SIZE_EXCEPTIONS``;
5. no function-level import except of an optional dependency (``OPTIONAL``) or an entry
   of ``FUNCTION_IMPORT_EXCEPTIONS``.

Each failure lists every offender, one a line: ``python -m pytest -n 0 -q
tests/test_layout.py``.
"""

from __future__ import annotations

import ast
import io
import pathlib
import tokenize
from dataclasses import dataclass

import pytest


ROOT = pathlib.Path(__file__).resolve().parents[1] / "jaxmb"
PACKAGE = "jaxmb"

# The layers, bottom up: a part may import its own layer and the layers below it.
LEAVES, ENGINE, APPLICATIONS, COMMAND_LINE = 0, 1, 2, 3
LAYER_NAMES = {LEAVES: "leaves", ENGINE: "engine", APPLICATIONS: "applications", COMMAND_LINE: "cli"}
LAYERS = {
    # leaves: the shared private helpers and the model
    "_math": LEAVES, "_checks": LEAVES, "_files": LEAVES, "model": LEAVES,
    # the engine (batch and reactions are shims of old import paths)
    "_engine": ENGINE, "kinematics": ENGINE, "dynamics": ENGINE, "simulate": ENGINE,
    "sharding": ENGINE, "anthropometry": ENGINE, "maximal": ENGINE, "plot": ENGINE,
    "batch": ENGINE, "reactions": ENGINE,
    # the applications (their order among themselves: APPLICATION_USES)
    "io": APPLICATIONS, "signal": APPLICATIONS, "datasets": APPLICATIONS,
    "gait": APPLICATIONS, "identify": APPLICATIONS, "optimal": APPLICATIONS, "wholebody": APPLICATIONS,
    "reaching": APPLICATIONS, "trajectory": APPLICATIONS,  # trajectory: a shim of jaxmb.optimal's old path
    # the command line, on top
    "cli": COMMAND_LINE,
}  # fmt: skip
# Which other applications each application may import: io and signal < datasets < gait
# < identify < wholebody; optimal stands alone on io, signal and datasets, and reaching
# (the minimum-jerk reach) and the trajectory shim on optimal.
APPLICATION_USES = {
    "io": set(),
    "signal": set(),
    "datasets": {"io", "signal"},
    "gait": {"io", "signal", "datasets"},
    "identify": {"io", "signal", "datasets", "gait"},
    "optimal": {"io", "signal", "datasets"},
    "wholebody": {"io", "signal", "datasets", "gait", "identify"},
    "reaching": {"optimal"},
    "trajectory": {"optimal"},
}
# The package's face and entry point import everything; nothing in the layers is checked
# for them (and importing the face from inside the package is an upward import).
EXEMPT = {PACKAGE, f"{PACKAGE}.__main__"}
# Private parts whose names every part may use (the shared top-level leaves), and the
# private engine package, whose names the engine layer's public modules wrap.
SHARED_PRIVATE = {"_math": {LEAVES, ENGINE, APPLICATIONS, COMMAND_LINE},
                  "_checks": {LEAVES, ENGINE, APPLICATIONS, COMMAND_LINE},
                  "_files": {LEAVES, ENGINE, APPLICATIONS, COMMAND_LINE},
                  "_engine": {ENGINE}}  # fmt: skip

MAX_MODULE_LINES = 800
MAX_FUNCTION_CODE_LINES = 120
# Exceptions to the size limits, each with its reason: "jaxmb/path.py" for a module,
# "jaxmb/path.py::function" for a function (qualified name: "Class.method", "outer.inner").
SIZE_EXCEPTIONS: dict[str, str] = {
    # e.g. "jaxmb/_engine/adjoint.py::_vjp_rule": "one custom rule; its stages share 12 arrays",
}

# Optional dependencies: imported inside the function that needs them, so that
# `import jaxmb` neither requires nor loads them.
OPTIONAL = {"matplotlib", "ezc3d", "scipy", "mujoco", "tqdm"}
# Other function-level imports that are allowed, each with its reason, keyed by the
# importing part (so that a move inside a subpackage keeps its entry) and the module:
FUNCTION_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("simulate", "jax.extend"): "jax.extend is slow to import; only the compile-cache key uses it",
}


# --- reading the package ---------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name, e.g. "jaxmb.gait._stances"
    path: str  # its file, e.g. "jaxmb/gait/_stances.py"
    line: int
    target: str  # the module imported (a jaxmb module, or an external top-level name)
    names: tuple[str, ...]  # the names taken from it ("from target import names"), or ()
    function: str | None  # the enclosing function's qualified name; None at module level
    type_checking: bool  # inside `if TYPE_CHECKING:` (never runs)

    def where(self):
        scope = f" (in {self.function})" if self.function else ""
        return f"{self.path}:{self.line}{scope}"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


MODULES = _modules()


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT.parent).as_posix()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve_from(module: str, level: int, base: str | None) -> str:
    """The absolute module of ``from <.. base> import ...`` written in ``module``."""
    if level == 0:
        return base or ""
    package = module if _is_package(module) else module.rpartition(".")[0]
    parts = package.split(".")
    anchor = ".".join(parts[: len(parts) - (level - 1)])
    return f"{anchor}.{base}" if base else anchor


class _Collector(ast.NodeVisitor):
    """Every import of one module, with its scope."""

    def __init__(self, module: str, path: pathlib.Path):
        self.module, self.path, self.in_tc, self.found = module, _rel(path), 0, []
        self.scope, self._kinds = [], []  # enclosing names, and "function" or "class" each

    def _add(self, node, target, names=()):
        function = ".".join(self.scope) if self.scope and self._in_function else None
        self.found.append(
            Import(self.module, self.path, node.lineno, target, tuple(names), function, self.in_tc > 0)
        )

    @property
    def _in_function(self):
        return any(kind == "function" for kind in self._kinds)

    def visit_Import(self, node):
        for alias in node.names:
            self._add(node, alias.name)

    def visit_ImportFrom(self, node):
        base = _resolve_from(self.module, node.level, node.module)
        if base == PACKAGE or base.startswith(PACKAGE + "."):
            # `from pkg import sub` loads the submodule pkg.sub: split the targets
            plain = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    self._add(node, sub)
                else:
                    plain.append(alias.name)
            if plain:
                self._add(node, base, plain)
        else:
            self._add(node, base, [a.name for a in node.names])

    def _scoped(self, node, kind):
        self.scope.append(node.name)
        self._kinds.append(kind)
        self.generic_visit(node)
        self.scope.pop()
        self._kinds.pop()

    def visit_FunctionDef(self, node):
        self._scoped(node, "function")

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._scoped(node, "class")

    def visit_If(self, node):
        test = node.test
        tc = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        )
        self.in_tc += tc
        for child in node.body:
            self.visit(child)
        self.in_tc -= tc
        for child in node.orelse:
            self.visit(child)


def _imports() -> list[Import]:
    found = []
    for module, path in MODULES.items():
        collector = _Collector(module, path)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        found += collector.found
    return found


IMPORTS = _imports()
INTERNAL = [i for i in IMPORTS if i.target == PACKAGE or i.target.startswith(PACKAGE + ".")]


def _part(module: str) -> str:
    """The top-level part of jaxmb a module belongs to ("gait" for jaxmb.gait._stances)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def _checked(imp: Import) -> bool:
    return imp.importer not in EXEMPT and not imp.type_checking


def _check(title: str, lines: list[str]):
    """Fail with every offender on a line of its own (no assertion rewriting noise)."""
    if lines:
        pytest.fail(f"{title} ({len(lines)}):\n  " + "\n  ".join(lines), pytrace=False)


# --- 0. every module in a layer ----------------------------------------------------------


def test_every_part_has_a_layer():
    """Each top-level module or subpackage of jaxmb is placed in LAYERS."""
    missing = sorted(
        {f"{_rel(MODULES[m])}: part '{_part(m)}' is in no layer" for m in MODULES
         if m not in EXEMPT and _part(m) not in LAYERS}
    )  # fmt: skip
    _check("parts in no layer (move them, or add them to LAYERS)", missing)


# --- 1. no cycle ---------------------------------------------------------------------------


def _graph(imports):
    graph = {m: set() for m in MODULES}
    for imp in imports:
        if imp.target in MODULES and imp.target != imp.importer:
            graph[imp.importer].add(imp.target)
    return graph


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as one
    cycle through it, found by a walk."""
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return [_one_cycle(graph, set(c)) for c in comps]


def _one_cycle(graph, comp):
    start = min(comp)
    seen = {start: None}
    frontier = [start]
    while frontier:  # breadth first back to start, inside the component
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & comp):
                if w == start:
                    chain, u = [start], v
                    while u is not None:
                        chain.append(u)
                        u = seen[u]
                    return chain[::-1]
                if w not in seen:
                    seen[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("a strongly connected component always holds a cycle")


def _edges_text(cycle, imports):
    lines = []
    for a, b in zip(cycle, cycle[1:]):
        at = [i.where() for i in imports if i.importer == a and i.target == b]
        lines.append(f"{a} -> {b} ({', '.join(at)})")
    return " ; ".join(lines)


def test_no_import_cycle():
    """No circle among jaxmb modules through module-level imports."""
    imports = [i for i in INTERNAL if i.function is None and not i.type_checking]
    cycles = _cycles(_graph(imports))
    _check("import cycles", [_edges_text(c, imports) for c in cycles])


def test_no_cycle_hidden_by_function_imports():
    """No circle that only a function-level import keeps from failing at import time."""
    every = [i for i in INTERNAL if not i.type_checking]
    module_level = {tuple(c) for c in _cycles(_graph([i for i in every if i.function is None]))}
    hidden = [c for c in _cycles(_graph(every)) if tuple(c) not in module_level]
    _check("cycles through function-level imports", [_edges_text(c, every) for c in hidden])


# --- 2. no upward import -------------------------------------------------------------------


def _upward(imp: Import) -> str | None:
    a, b = _part(imp.importer), _part(imp.target)
    if b == PACKAGE:
        return "imports the package face jaxmb/__init__.py"
    if a == b or a not in LAYERS or b not in LAYERS:
        return None
    la, lb = LAYERS[a], LAYERS[b]
    if lb > la:
        return f"{LAYER_NAMES[la]} '{a}' imports {LAYER_NAMES[lb]} '{b}'"
    if la == lb == APPLICATIONS and b not in APPLICATION_USES[a]:
        return f"application '{a}' imports application '{b}' (allowed: {sorted(APPLICATION_USES[a])})"
    return None


def test_no_upward_import():
    """Dependencies point down the layers (function-level imports included)."""
    bad = []
    for imp in INTERNAL:
        why = _checked(imp) and _upward(imp)
        if why:
            bad.append(f"{imp.where()}: {why} ({imp.target})")
    _check("upward imports", bad)


# --- 3. no private name across a part boundary ---------------------------------------------


def _private_use(imp: Import) -> list[str]:
    a, b = _part(imp.importer), _part(imp.target)
    if a == b or b == PACKAGE:
        return []
    if b in SHARED_PRIVATE and LAYERS.get(a) in SHARED_PRIVATE[b]:
        return []
    private_module = [p for p in imp.target.split(".")[1:] if p.startswith("_")]
    if private_module:
        return [f"{imp.target}" + (f": {', '.join(imp.names)}" if imp.names else "")]
    return [f"{imp.target}.{n}" for n in imp.names if n.startswith("_")]


def test_no_private_import_across_parts():
    """Another part is used through its public face only (function-level imports included)."""
    bad = []
    for imp in INTERNAL:
        if imp.importer in EXEMPT:
            continue
        for what in _private_use(imp):
            bad.append(f"{imp.where()}: '{_part(imp.importer)}' uses private {what}")
    _check("private names imported across parts", bad)


# --- 4. sizes --------------------------------------------------------------------------------


def _code_lines(src: str, tree: ast.AST) -> set[int]:
    """The lines holding code: no blank, comment-only or docstring line."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):  # fmt: skip
                docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    skip = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
            tokenize.ENDMARKER)  # fmt: skip
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(src).readline):
        if tok.type not in skip:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return code - docs


def _functions(tree):
    """(qualified name, node) of every function, methods and nested functions included."""

    def walk(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    yield name, child
                yield from walk(child, name + ".")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def _oversized() -> dict[str, str]:
    found = {}
    for path in MODULES.values():
        src = path.read_text()
        rel = _rel(path)
        lines = len(src.splitlines())
        if lines > MAX_MODULE_LINES:
            found[rel] = f"{lines} lines"
        tree = ast.parse(src)
        code = _code_lines(src, tree)
        for name, node in _functions(tree):
            k = sum(node.lineno <= line <= node.end_lineno for line in code)
            if k > MAX_FUNCTION_CODE_LINES:
                found[f"{rel}::{name}"] = f"{k} code lines (line {node.lineno})"
    return found


def test_module_and_function_sizes():
    """No module over 800 lines, no function over 120 lines of code, but the listed ones."""
    found = _oversized()
    bad = [f"{k}: {v}" for k, v in sorted(found.items()) if k not in SIZE_EXCEPTIONS]
    stale = [f"{k}: within the limits now, remove it from SIZE_EXCEPTIONS"
             for k in sorted(SIZE_EXCEPTIONS) if k not in found]  # fmt: skip
    _check(
        f"modules over {MAX_MODULE_LINES} lines, functions over {MAX_FUNCTION_CODE_LINES} code lines",
        bad + stale,
    )


# --- 5. function-level imports -------------------------------------------------------------


def test_function_level_imports_only_for_optional_dependencies():
    """Imports sit at the top of the module, but for the optional dependencies (standard
    library ones too: a module's dependencies are read from its head)."""
    bad, used = [], set()
    for imp in IMPORTS:
        if imp.function is None or imp.importer in EXEMPT:
            continue
        top = imp.target.split(".")[0]
        key = (_part(imp.importer), imp.target)
        if top in OPTIONAL:
            continue
        if key in FUNCTION_IMPORT_EXCEPTIONS:
            used.add(key)
            continue
        what = imp.target + (f": {', '.join(imp.names)}" if imp.names else "")
        bad.append(f"{imp.where()}: {what}")
    stale = [f"{k}: no longer imported in a function, remove it from FUNCTION_IMPORT_EXCEPTIONS"
             for k in sorted(FUNCTION_IMPORT_EXCEPTIONS) if k not in used]  # fmt: skip
    _check("function-level imports of non-optional modules", bad + stale)


# --- the reader itself -----------------------------------------------------------------------


def test_reader_finds_planted_cycles_and_resolves_relative_imports():
    """The checker's own parts on made-up input (these pass whatever the package's state)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"f"}, "f": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    assert _resolve_from("jaxmb.dynamics", 1, "model") == "jaxmb.model"
    assert _resolve_from("jaxmb", 1, "model") == "jaxmb.model"  # from __init__.py
    assert _resolve_from("jaxmb.dynamics", 1, None) == "jaxmb"
    assert _part("jaxmb.gait._stances") == "gait" and _part("jaxmb") == PACKAGE
    up = Import("jaxmb.io", "jaxmb/io.py", 1, "jaxmb.gait", ("x",), None, False)
    assert "imports application 'gait'" in _upward(up)
    assert _private_use(Import("jaxmb.cli", "jaxmb/cli.py", 1, "jaxmb.io", ("_png",), "f", False))
    assert not _private_use(Import("jaxmb.gait", "jaxmb/gait.py", 1, "jaxmb._checks", ("_as_array",), None, False))
