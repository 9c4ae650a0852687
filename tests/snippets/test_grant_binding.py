"""A grant is bound to a snippet's hash and parameter schema, never to its name (issue 48): the
worker's check (``activities/snippets/calls.py``) against a real object store and approvers file
with real Ed25519 keys, one way a grant could be stretched at a time."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from codemode.activities.models import CallRequest
from codemode.activities.snippets.calls import SnippetCalls
from codemode.activities.snippets.models import Provenance, SavedSnippet, Snippet
from codemode.approvals.snippet_signing import sign_grant
from codemode.runtimes.prelude import Prelude, PreludePart
from codemode.storage.blobs import FileBlobStore
from tests.approvers.helpers import Person, people_toml, write_file

ANA = Person("ana")
PARAMETERS = {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}


def saved(code: str, parameters: dict = PARAMETERS) -> SavedSnippet:
    snippet = Snippet(name="send", code=code, parameters=parameters, tools={"send_report": "0" * 16})
    at = datetime.now(UTC)
    return SavedSnippet(
        version=snippet.version(),
        snippet=snippet,
        provenance=Provenance(source_execution="x", promoted_by="ana", promoted_at=at),
    )


def prelude_for(one: SavedSnippet) -> Prelude:
    part = PreludePart(
        path="snippets.send", origin=one.origin, start=0, end=1, parameters_schema=one.snippet.parameters
    )
    return Prelude(source="#", parts=[part])


def call(one: SavedSnippet) -> CallRequest:
    return CallRequest(
        call_id="c1", tool="send_report", requires_approval=True, origin=one.origin, arguments={"to": "x"}
    )


@pytest.fixture
async def setup(tmp_path):
    calls = SnippetCalls(
        FileBlobStore(tmp_path / "blobs"), approvers=write_file(tmp_path / "a.toml", people_toml((ANA, [])))
    )
    library = calls.library("default")
    first, edited = saved("send_report(to, 1)"), saved("send_report(to, 2)")
    for one in (first, edited):
        await library.save(one)
    return calls, library, first, edited


def grant_of(one: SavedSnippet, **over):
    fields = {
        "signer": "ana",
        "name": "send",
        "version": one.version,
        "parameters_schema": one.snippet.parameters,
        "tools": ["send_report"],
    }
    return sign_grant(ANA.key, **(fields | over))


async def test_a_grant_over_the_version_and_schema_pre_approves(setup) -> None:
    calls, library, first, _ = setup
    signed = await library.add_grant(grant_of(first))
    request = call(first)
    await calls.grant(request, prelude_for(first), "default")
    assert not request.requires_approval and request.granted.grant_id == signed.grant_id


async def test_a_grant_of_one_version_never_covers_another_of_the_same_name(setup) -> None:
    calls, library, first, edited = setup
    await library.add_grant(grant_of(first))
    request = call(edited)
    await calls.grant(request, prelude_for(edited), "default")
    assert request.requires_approval and request.granted is None


async def test_a_grant_moved_to_another_version_has_no_signature(setup) -> None:
    calls, library, first, edited = setup
    moved = grant_of(first).model_copy(update={"version": edited.version})
    await library.add_grant(moved)
    request = call(edited)
    await calls.grant(request, prelude_for(edited), "default")
    assert request.requires_approval and "signature does not hold" in request.approval_reason


async def test_a_grant_signed_over_another_parameter_schema_does_not_count(setup) -> None:
    calls, library, first, _ = setup
    wider = {"type": "object", "properties": {"to": {}}, "required": ["to"]}
    await library.add_grant(grant_of(first, parameters_schema=wider))
    request = call(first)
    await calls.grant(request, prelude_for(first), "default")
    assert request.requires_approval and "another parameter schema" in request.approval_reason


async def test_a_grant_covers_only_the_tools_it_names_and_calls_the_snippet_made(setup) -> None:
    calls, library, first, _ = setup
    await library.add_grant(grant_of(first))
    other_tool = call(first).model_copy(update={"tool": "delete_everything"})
    await calls.grant(other_tool, prelude_for(first), "default")
    assert other_tool.requires_approval and "does not name delete_everything" in other_tool.approval_reason
    not_the_snippets = call(first).model_copy(update={"origin": None})  # the code's own call
    await calls.grant(not_the_snippets, prelude_for(first), "default")
    assert not_the_snippets.requires_approval and not_the_snippets.granted is None
