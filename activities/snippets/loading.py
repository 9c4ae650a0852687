"""Loading the snippets a run's code calls, in its first sandbox step, before anything runs.

Each one is found (the version the request pins, else the newest), then checked against
today's tools: every tool it calls must still be one this execution may call; a tool whose
signature changed since the snippet was saved is accepted only when the snippet's code still
passes the check code gets before it runs (Monty's type check against the current stubs,
its parameters bound); a runtime that cannot type-check (CPython) accepts no changed signature.
A refusal names the snippet, its version and the tool. With an approvers file, a snippet must
carry its promoter's signature, by a key of theirs the file lists (fail closed). What passes
becomes the run's prelude (``compose.py``); the step stores it under the execution and the
workflow's history holds its hash, so a replay rebuilds the run with exactly these versions."""

from __future__ import annotations

import builtins
import symtable
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema

from codemode.approvals import approvers_file as config
from codemode.approvals.snippet_signing import verify_promotion
from codemode.runtimes import CodeExecutionError, CodeRuntime
from codemode.runtimes.prelude import Prelude
from codemode.runtimes.signatures import ToolSignature

from ..records import SnippetUse
from ..tools import ToolSpec
from .compose import compose, referenced, sole_call
from .library import SnippetLibrary
from .models import NAMESPACE, SavedSnippet, SnippetError, is_async_code, signature_hash


@dataclass
class Loaded:
    prelude: Prelude
    uses: list[SnippetUse] = field(default_factory=list)


async def load_snippets(
    code: str,
    *,
    library: SnippetLibrary,
    runtime: CodeRuntime,
    specs: dict[str, ToolSpec],
    pins: dict[str, str] | None = None,
    inputs: dict[str, Any] | None = None,
    approvers: Path | None = None,
) -> Loaded | None:
    """The prelude of the snippets ``code`` calls (None when it calls none). Raises
    ``SnippetError`` saying which snippet is refused and why."""
    names = referenced(code)
    if not names:
        return None
    if NAMESPACE in (inputs or {}):
        raise SnippetError(f"an input is named {NAMESPACE!r}, which is how the code reaches saved snippets")
    file = config.load(approvers) if approvers is not None else None
    chosen: list[SavedSnippet] = []
    for name in names:
        saved = await library.find(name, (pins or {}).get(name))
        _check_runtime(saved, runtime)
        if file is not None:
            _check_promoter(saved, file)
        await _check_tools(saved, runtime, specs)
        _check_free_names(saved, specs)
        chosen.append(saved)
    sole = _sole_origin(code, chosen)
    uses = [
        SnippetUse(
            name=s.name,
            version=s.version,
            promoted_by=s.provenance.promoted_by,
            source_execution=s.provenance.source_execution,
        )
        for s in chosen
    ]
    return Loaded(prelude=compose(chosen, sole=sole), uses=uses)


def _check_runtime(saved: SavedSnippet, runtime: CodeRuntime) -> None:
    if saved.snippet.runtime != "monty" and runtime.name == "monty":
        raise SnippetError(
            f"snippet {saved.ref} was saved from a {saved.snippet.runtime} run: its code is full Python, "
            "which Monty cannot run (run it on a CPython runtime such as python)"
        )


def _check_promoter(saved: SavedSnippet, file: config.ApproversFile) -> None:
    """Under an approvers file, only a snippet its promoter signed with a key the file lists."""
    sig = saved.provenance.signature
    who = saved.provenance.promoted_by
    if sig is None:
        raise SnippetError(
            f"snippet {saved.ref} is not signed: this worker has an approvers file, so it runs only snippets "
            f"promoted with an approver's key (save it again with --by NAME and their key)"
        )
    holder = {k: n for n, p in file.people.items() for k in p.keys}.get(sig.key)
    if not verify_promotion(sig) or sig.version != saved.version or sig.name != saved.name:
        raise SnippetError(f"snippet {saved.ref}: its promotion signature does not hold")
    if holder is None or holder != sig.signer or sig.signer != who:
        raise SnippetError(
            f"snippet {saved.ref} was signed by {sig.signer!r} with a key the approvers file does not list for "
            f"{who!r}: refused"
        )


async def _check_tools(saved: SavedSnippet, runtime: CodeRuntime, specs: dict[str, ToolSpec]) -> None:
    """Every tool the snippet calls is one this run may call, as it was, or changed in a way its
    code still type-checks against."""
    changed: list[str] = []
    for tool, recorded in saved.snippet.tools.items():
        spec = specs.get(tool)
        if spec is None:
            raise SnippetError(
                f"snippet {saved.ref} calls the tool {tool}, which this execution cannot call (it was removed, "
                "or the execution's tools allow-list leaves it out): refused before running"
            )
        if signature_hash(spec.signature) != recorded:
            changed.append(tool)
    sigs: dict[str, ToolSignature] = {n: s.signature for n, s in specs.items()}
    params = list((saved.snippet.parameters.get("properties") or {}).keys())
    shown = "; ".join(f"{t} is now {_shape(specs[t].signature)}" for t in changed)
    if changed and not runtime.capabilities.type_checking:
        raise SnippetError(
            f"snippet {saved.ref} calls tools whose signatures changed since it was saved: {shown}; the "
            f"{runtime.name} runtime cannot type-check it against them, so it is refused before running "
            "(save it again from a run that works with them)"
        )
    try:
        await runtime.type_check(saved.snippet.code, sigs, bound=params)
    except CodeExecutionError as err:
        if changed:
            raise SnippetError(
                f"snippet {saved.ref} no longer fits the tool {', '.join(changed)}: its signature changed since "
                f"the snippet was saved ({shown}), and the snippet's code does not type-check against it: "
                f"{err.message}" + (f" (line {err.line} of the snippet)" if err.line else "")
            ) from None
        raise SnippetError(
            f"snippet {saved.ref} does not type-check against today's tools: {err.message}"
            + (f" (line {err.line} of the snippet)" if err.line else "")
        ) from None


def _check_free_names(saved: SavedSnippet, specs: dict[str, ToolSpec]) -> None:
    """A snippet saved from a CPython run (no type check there) may read a name its code never
    defines on a branch its source run did not take. In the prelude that name would be the
    calling code's variable: refuse it unless it is a parameter, a tool, a host function or a
    built-in. (Monty's type check refused such code before its source run ran.)"""
    if saved.snippet.runtime == "monty":
        return
    params = list((saved.snippet.parameters.get("properties") or {}).keys())
    head = "async def" if is_async_code(saved.snippet.code) else "def"
    source = f"{head} codemode_snippet({', '.join(params)}):\n{textwrap.indent(saved.snippet.code, '    ') or '    pass'}\n"
    try:
        table = symtable.symtable(source, "<snippet>", "exec")
    except SyntaxError:
        return  # the runtime reports it, with its line
    known = set(dir(builtins)) | {p for spec in specs.values() for p in (spec.code_name.split(".")[0], spec.namespace) if p}
    unknown: set[str] = set()
    stack = list(table.get_children())
    while stack:
        scope = stack.pop()
        stack.extend(scope.get_children())
        unknown |= {s.get_name() for s in scope.get_symbols() if s.is_global() and s.is_referenced()} - known
    if unknown:
        raise SnippetError(
            f"snippet {saved.ref} reads {', '.join(sorted(unknown))}, which its code never defines (not a parameter, "
            "a tool this execution may call, or a built-in): it would read the calling code's variables, so it is "
            "refused before running"
        )


def _shape(sig: ToolSignature) -> str:
    """``sales(start: str, end: str) -> list[dict]``: a signature as a person reads it."""
    stub = sig.stub(with_docstring=False).removesuffix(" ...").removesuffix(":")
    return stub.removeprefix("async ").removeprefix("def ")


def _sole_origin(code: str, chosen: list[SavedSnippet]) -> str | None:
    """The origin of the one snippet the code is nothing but a call of, its literal arguments
    fitting its schema (then every call of the run is that snippet's)."""
    found = sole_call(code)
    if found is None or len(chosen) != 1 or chosen[0].name != found[0]:
        return None
    saved = chosen[0]
    try:
        arguments = saved.snippet.signature(saved.version).bind(found[1], found[2])
        jsonschema.validate(arguments, saved.snippet.parameters)
    except (TypeError, jsonschema.ValidationError, jsonschema.SchemaError):
        return None
    return saved.origin
