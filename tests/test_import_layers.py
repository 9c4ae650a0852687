"""Imports run one way (runtimes <- activities <- workflows <- worker <- integrations) and no
module imports itself back through others: every import of every module, at module level or
inside a function, read from the source with ``ast``."""

from __future__ import annotations

import ast
import functools
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Lowest first: a layer may import the layers before it, never those after it.
LAYERS = ["runtimes", "storage", "approvals", "activities", "workflows", "worker", "client", "integrations", "apps"]
#: The one import package the layers install under (runtimes/ is codemode.runtimes).
PACKAGE = "codemode"


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@functools.cache
def _graph() -> dict[str, set[str]]:
    """Built in a fresh interpreter: CPython 3.11 before 3.11.8 can raise ``SystemError: AST
    constructor recursion depth mismatch`` when another thread of this process (a worker a test
    left running) uses ``ast`` at the same moment (cpython gh-106905)."""
    out = subprocess.run(
        [sys.executable, __file__], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return {name: set(dsts) for name, dsts in json.loads(out).items()}


def _graph_here() -> dict[str, set[str]]:
    files = {_module(p): p for layer in LAYERS if (ROOT / layer).is_dir() for p in (ROOT / layer).rglob("*.py")}
    graph: dict[str, set[str]] = {}
    bare: list[str] = []
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            absolute = isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level)
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([p for p in up if p] + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names]
                if not all(t in files or t.removeprefix(PACKAGE + ".") in files for t in targets):
                    targets.append(base)  # names from the module itself, not submodules of a package
            else:
                continue
            for target in targets:
                if absolute and target.split(".")[0] in LAYERS:
                    # In the wheel there is no top-level `runtimes`: ours are `codemode.runtimes...`.
                    bare.append(f"{name} imports {target} (not codemode.{target})")
                if target.startswith(PACKAGE + "."):
                    target = target[len(PACKAGE) + 1 :]
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        graph[name] = found
    if bare:
        graph["<bare imports>"] = set(bare)
    return graph


def _layer(module: str) -> int:
    return LAYERS.index(module.split(".")[0])


def _modules() -> dict[str, set[str]]:
    return {name: dsts for name, dsts in _graph().items() if not name.startswith("<")}


def test_our_modules_are_imported_through_the_package() -> None:
    """Every import of our own code names ``codemode.<layer>`` (or is relative): a bare
    ``import runtimes`` works in a checkout but not from the wheel, and loads a second copy."""
    assert sorted(_graph().get("<bare imports>", ())) == []


def test_the_package_face_imports_no_layer() -> None:
    """``import codemode`` runs before any of our modules (it is their parent package), so it
    must stay lazy: a layer it imported would drag the worker into workflow code."""
    probe = "import sys, codemode; print(sorted(m for m in sys.modules if m.startswith('codemode')))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(out.stdout.replace("'", '"')) == ["codemode", "codemode._version"]


def test_imports_run_down_the_layers() -> None:
    upward = [
        f"{src} -> {dst}" for src, dsts in sorted(_modules().items()) for dst in sorted(dsts) if _layer(dst) > _layer(src)
    ]
    assert upward == [], "imports against the layer order:\n" + "\n".join(upward)


def test_no_import_circles() -> None:
    graph = _modules()
    circles: list[list[str]] = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in circles)


@pytest.mark.parametrize("layer", LAYERS[:-1])
def test_each_lower_layer_has_modules(layer: str) -> None:
    """The walk sees the real tree (a renamed folder would make the checks above vacuous)."""
    assert any(name.split(".")[0] == layer for name in _modules())


if __name__ == "__main__":
    print(json.dumps({name: sorted(dsts) for name, dsts in _graph_here().items()}))
