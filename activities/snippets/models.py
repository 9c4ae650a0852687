"""A saved snippet (issue 48): code a person promoted from a run that worked, as typed parameters,
the tools it calls with the hashes of their signatures, and its provenance.

``Snippet`` is the content; its version is the SHA-256 of its canonical JSON, so the same
content is the same version wherever it is saved, and any change (code, parameters, the
description, a tool's signature it was saved against) is a new one. ``Provenance`` (who
promoted it, from which execution, when; signed with their approver key) is kept beside the
content, not in it: who vouched for a version does not change what it is."""

from __future__ import annotations

import hashlib
import keyword
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from codemode.approvals.signing import canonical_json
from codemode.approvals.snippet_signing import PromotionSignature, parameters_sha256
from codemode.runtimes.signatures import ToolSignature, signature_from_json_schema

#: How the code reaches saved snippets: ``snippets.weekly_report(week=47)``.
NAMESPACE = "snippets"
#: What a snippet may be called: a Python name (it is a function of the namespace).
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
#: The prefix of a snippet's identity in calls, records and grants (``snippet:weekly_report``).
PREFIX = "snippet:"


class SnippetError(ValueError):
    """A snippet that cannot be saved, found or used: says which and why."""


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise SnippetError(
            f"invalid snippet name {name!r}: use a Python name of 1 to 64 letters, digits and '_', "
            "starting with a letter (the code calls it as snippets.NAME(...))"
        )
    return name


def signature_hash(sig: ToolSignature) -> str:
    """What a snippet records of a tool it calls: the hash of how the code can call it (its name,
    path, parameters, result, async-ness and parameter schema; not its description)."""
    shape = sig.model_dump(mode="json", include={"name", "path", "parameters", "return_annotation", "is_async"})
    shape["parameters_schema"] = sig.parameters_schema
    return hashlib.sha256(canonical_json(shape)).hexdigest()[:16]


class Snippet(BaseModel):
    """What a version is the hash of."""

    name: str
    description: str = ""
    code: str
    #: A JSON schema object: one property per input of the run, which the code reads by name.
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    #: The tools its code calls (canonical ids) -> the hash of their signature when it was saved.
    tools: dict[str, str] = Field(default_factory=dict)
    #: The runtime the run that worked used: a Monty snippet runs anywhere, any other only on a
    #: CPython runtime.
    runtime: str = "monty"

    def version(self) -> str:
        return hashlib.sha256(canonical_json(self.model_dump(mode="json"))).hexdigest()

    @property
    def parameters_sha256(self) -> str:
        return parameters_sha256(self.parameters)

    def signature(self, version: str = "") -> ToolSignature:
        """How the code sees it: a function of the ``snippets`` namespace, typed from its schema."""
        doc = self.description.strip()
        if version:
            doc += ("\n\n" if doc else "") + f"Saved snippet, version {version[:12]}."
        return signature_from_json_schema(
            PREFIX + self.name,
            self.parameters,
            description=doc,
            is_async=is_async_code(self.code),
            path=f"{NAMESPACE}.{self.name}",
            document=True,
        )


class Provenance(BaseModel):
    source_execution: str
    source_run: str = ""
    promoted_by: str
    promoted_at: datetime
    #: With an approvers file in use, the promoter's signature (required by its workers).
    signature: PromotionSignature | None = None


class SavedSnippet(BaseModel):
    """One version of a snippet as the library keeps it."""

    version: str
    snippet: Snippet
    provenance: Provenance

    @property
    def name(self) -> str:
        return self.snippet.name

    @property
    def ref(self) -> str:
        return f"{self.snippet.name}@{self.version[:12]}"

    @property
    def origin(self) -> str:
        """What the calls its code makes are attributed to (``snippet:NAME@VERSION``)."""
        return f"{PREFIX}{self.snippet.name}@{self.version}"

    def intact(self) -> bool:
        """Whether the content still hashes to its version."""
        return self.snippet.version() == self.version


def is_async_code(code: str) -> bool:
    """Whether the code awaits at its top level (its function is then ``async def``)."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False

    def walk(node: ast.AST) -> bool:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            if isinstance(child, (ast.Await, ast.AsyncFor, ast.AsyncWith)):
                return True
            if isinstance(child, ast.comprehension) and child.is_async:
                return True
            if walk(child):
                return True
        return False

    return walk(tree)


def parse_origin(origin: str | None) -> tuple[str, str] | None:
    """``snippet:NAME@VERSION`` -> (NAME, VERSION)."""
    if not origin or not origin.startswith(PREFIX) or "@" not in origin:
        return None
    name, _, version = origin[len(PREFIX) :].partition("@")
    return name, version
