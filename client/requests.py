"""Checks a client makes before it starts anything: a request's size, and whether the
server has our search attributes (shared by ``client/executions.py`` and ``client/sessions.py``)."""

from __future__ import annotations

from pydantic_core import to_json
from temporalio.client import Client

from codemode.activities.models import MAX_VALUE_BYTES, human_bytes
from codemode.workflows.models import SA_RUNTIME, SA_STATUS, CodeExecutionRequest


class InputTooLarge(ValueError):
    """A request whose inputs are over the per-value cap: refused before anything starts."""


def check_request_size(request: CodeExecutionRequest) -> None:
    """Refuse inputs no execution should carry (each over ``MAX_VALUE_BYTES``), with the name."""
    for name, value in request.inputs.items():
        size = len(to_json(value, fallback=repr))
        if size > MAX_VALUE_BYTES:
            raise InputTooLarge(
                f"input {name!r} is {human_bytes(size)}, over the {human_bytes(MAX_VALUE_BYTES)} limit for one "
                "value; pass a reference (a path, a URL, an id) and let a tool fetch it"
            )
    size = len(request.code.encode())
    if size > MAX_VALUE_BYTES:
        raise InputTooLarge(f"the code is {human_bytes(size)}, over the {human_bytes(MAX_VALUE_BYTES)} limit")


_indexed: dict[int, bool] = {}


async def search_attributes_registered(client: Client) -> bool:
    """Whether CodeModeStatus/CodeModeRuntime exist on the client's namespace (cached)."""
    key = id(client)
    if key not in _indexed:
        from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest

        try:
            resp = await client.operator_service.list_search_attributes(
                ListSearchAttributesRequest(namespace=client.namespace)
            )
            names = set(resp.custom_attributes)
            _indexed[key] = SA_STATUS in names and SA_RUNTIME in names
        except Exception:
            _indexed[key] = False
    return _indexed[key]


def starter() -> str:
    """Who starts executions from this process: ``CODEMODE_USER``, else the OS user."""
    import getpass
    import os

    if name := os.environ.get("CODEMODE_USER"):
        return name
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"
