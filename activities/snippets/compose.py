"""From saved snippets to the prelude a run starts with (``runtimes/prelude.py``), and what the
host reads off the code first: which snippets it calls, which tools it reaches, and whether it
is nothing but one call of one snippet.

A snippet's code was a whole execution: its inputs were variables, the value of its last
expression its result. In the prelude it becomes a method of the ``snippets`` object: the
inputs its parameters, the last expression returned, ``async def`` when it awaits at its top
level. Its first statement hands the arguments to the host (``ENTRY``, answered by the sandbox
step: checked against the parameter schema, journaled with the version), so every call of a
snippet is in the audit with the version that ran."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from typing import Any

from codemode.runtimes.prelude import Prelude, PreludePart
from codemode.runtimes.signatures import ToolSignature

from .models import NAMESPACE, SavedSnippet, SnippetError, is_async_code

#: The host function a snippet's method calls first (a built-in every execution has).
ENTRY = "codemode_snippet_call"
#: The class of the ``snippets`` object.
CLASS = "codemode_Snippets"
#: The method's own first parameter (not ``self``: a snippet's input may be called that).
SELF = "codemode_self"


def _params(sig: ToolSignature) -> ast.arguments:
    """The method's parameters, in the order of the snippet's stub (required ones first),
    without annotations (the stubs type-check the calls; the host checks the values)."""
    args = [ast.arg(arg=SELF)]
    defaults: list[ast.expr] = []
    for p in sig.parameters:
        args.append(ast.arg(arg=p.name))
        if not p.required:
            text = p.default_repr if p.default_repr is not None else "None"
            defaults.append(ast.parse(text, mode="eval").body)
    return ast.arguments(posonlyargs=[], args=args, kwonlyargs=[], kw_defaults=[], defaults=defaults)


def method_source(saved: SavedSnippet) -> str:
    """The snippet as a method of ``CLASS`` (indented by four spaces)."""
    snippet = saved.snippet
    try:
        tree = ast.parse(snippet.code)
    except SyntaxError as err:
        raise SnippetError(f"snippet {saved.ref} does not parse: {err.msg} (line {err.lineno})") from None
    body = list(tree.body)
    if body and isinstance(body[-1], ast.Expr):
        body[-1] = ast.Return(value=body[-1].value)
    sig = snippet.signature(saved.version)
    arguments = ast.Dict(
        keys=[ast.Constant(p.name) for p in sig.parameters], values=[ast.Name(p.name) for p in sig.parameters]
    )
    entry = ast.Expr(
        ast.Call(
            func=ast.Name(ENTRY),
            args=[ast.Constant(snippet.name), ast.Constant(saved.version), arguments],
            keywords=[],
        )
    )
    kind = ast.AsyncFunctionDef if is_async_code(snippet.code) else ast.FunctionDef
    fn = kind(name=snippet.name, args=_params(sig), body=[entry, *body], decorator_list=[], returns=None, type_params=[])
    text = ast.unparse(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])))
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in text.splitlines())


def compose(snippets: Iterable[SavedSnippet], sole: str | None = None) -> Prelude:
    """The prelude defining ``snippets`` (one version per name) as the ``snippets`` object."""
    head = f"class {CLASS}:\n"
    source = head
    parts: list[PreludePart] = []
    stubs: list[ToolSignature] = []
    for saved in snippets:
        method = method_source(saved)
        start = len(source.encode())
        source += method
        parts.append(
            PreludePart(
                path=f"{NAMESPACE}.{saved.name}",
                origin=saved.origin,
                start=start,
                end=len(source.encode()),
                parameters_schema=saved.snippet.parameters,
            )
        )
        stubs.append(saved.snippet.signature(saved.version))
    if not parts:
        source += "    pass\n"
    source += f"\n\n{NAMESPACE} = {CLASS}()\n"
    return Prelude(source=source, stubs=stubs, parts=parts, sole=sole)


# -- what the code reaches -----------------------------------------------------------------------


def _own_snippets_name(tree: ast.AST) -> bool:
    """Whether the code binds ``snippets`` itself (a variable of its own, not the namespace)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == NAMESPACE and not isinstance(node.ctx, ast.Load):
            return True
        if isinstance(node, ast.arg) and node.arg == NAMESPACE:
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name) == NAMESPACE:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == NAMESPACE:
            return True
    return False


def referenced(code: str) -> list[str]:
    """The snippets the code calls (``snippets.NAME``), in order of first use. Raises
    ``SnippetError`` for a use of the namespace not by name (``getattr(snippets, x)``)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []  # the runtime reports it, with its line
    if _own_snippets_name(tree):
        return []
    names: dict[str, None] = {}
    attributes = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == NAMESPACE
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == NAMESPACE:
            names[node.attr] = None
        elif isinstance(node, ast.Name) and node.id == NAMESPACE and id(node) not in attributes:
            raise SnippetError(
                f"line {node.lineno}: call saved snippets by name, as {NAMESPACE}.NAME(...): "
                f"the {NAMESPACE} namespace itself cannot be passed around"
            )
    return list(names)


def sole_call(code: str) -> tuple[str, list[Any], dict[str, Any]] | None:
    """(name, args, kwargs) when the code is exactly one call of one snippet with literal
    arguments (``await snippets.weekly_report(week=47)``): every call of such a run is the
    snippet's own, whatever the runtime."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Expr):
        return None
    call = tree.body[0].value
    if isinstance(call, ast.Await):
        call = call.value
    if not isinstance(call, ast.Call) or _own_snippets_name(tree):
        return None
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == NAMESPACE):
        return None
    try:
        args = [ast.literal_eval(a) for a in call.args if not isinstance(a, ast.Starred)]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg is not None}
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if len(args) != len(call.args) or len(kwargs) != len(call.keywords):
        return None
    return func.attr, args, kwargs


def tools_reached(code: str, signatures: Mapping[str, ToolSignature]) -> list[str]:
    """The tools (their names: canonical ids) the code names: ``get_weather`` or
    ``memory.read_graph``. What a snippet promoted from this run records."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    by_code_name = {s.code_name: name for name, s in signatures.items()}
    found: dict[str, None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in by_code_name:
            found[by_code_name[node.id]] = None
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            dotted = f"{node.value.id}.{node.attr}"
            if dotted in by_code_name:
                found[by_code_name[dotted]] = None
    return list(found)
