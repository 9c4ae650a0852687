"""Imports run one way (runtimes <- storage <- approvals <- activities <- workflows <- worker <-
client <- integrations <- apps <- the package face) and no module imports itself back through
others: every import of every module, at module level or inside a function, read from the source
with ``ast``. The applications stand apart: none imports another's modules (the CLI starts the
inbox through its face). docs/concepts/architecture.md draws the same map."""

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
#: The one import package the layers install under (runtimes/ is codemode.runtimes). Its own
#: modules (``codemode/__init__.py``, ``_version.py``, the ``codemode.pydantic_ai``... shims) are the
#: face, above every layer: nothing in a layer imports them.
PACKAGE = "codemode"
#: The applications (``apps/<name>``), and what of another each may import: its face alone.
APPS = ("cli", "inbox", "mcp")
MAY_USE = {("cli", "apps.inbox")}


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
    files |= {_module(p): p for p in (ROOT / PACKAGE).glob("*.py")}  # the face (the layers are links)
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
                if target.startswith(PACKAGE + ".") and target not in files:
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
    top = module.split(".")[0]
    return len(LAYERS) if top == PACKAGE else LAYERS.index(top)


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


def test_no_layer_imports_the_face() -> None:
    """The package face (``codemode``, ``codemode._version``, the shims) sits above every layer:
    a layer that read it (the CLI once read ``codemode._version``) would import upward."""
    assert _layer("codemode._version") > _layer("apps.cli")
    into_face = [f"{src} -> {dst}" for src, dsts in sorted(_modules().items()) for dst in sorted(dsts)
                 if dst.split(".")[0] == PACKAGE and src.split(".")[0] != PACKAGE]  # fmt: skip
    assert into_face == []


def test_the_applications_use_no_other_applications_modules() -> None:
    """``apps/cli``, ``apps/inbox`` and ``apps/mcp`` each stand on the client library (and the
    command-line ground they share, ``apps/command_line.py``); the MCP front imports nothing from
    the CLI, and the CLI reaches the inbox only through its face."""

    def app(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "apps" and len(parts) > 1 and parts[1] in APPS else None

    crossing = [
        f"{src} -> {dst}"
        for src, dsts in sorted(_modules().items())
        for dst in sorted(dsts)
        if app(src) and app(dst) and app(src) != app(dst) and (app(src), dst) not in MAY_USE
    ]
    assert crossing == []
    assert not any(dst.startswith("apps.cli") for src, dsts in _modules().items() if src.startswith("apps.mcp") for dst in dsts)


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
