"""Our search attributes on a namespace we may not administer.

``CodeModeStatus`` and ``CodeModeRuntime`` (Keyword) let ``codemode list --status`` ask the
visibility index. ``codemode server`` registers them; on a self-hosted cluster a worker with
operator rights creates them; on Temporal Cloud (and behind any front that keeps operator calls
for administrators) they are made in the UI or with ``tcld``. A worker checks at start: where it
cannot create them, it says exactly which to create and how, and runs without them (clients then
start executions that do not index them, ``client/requests.py``; listing by state falls
back to what the namespace has, ``apps/cli/listing.py``)."""

from __future__ import annotations

import logging

from temporalio.client import Client
from temporalio.service import RPCError

from codemode.workflows.models import SA_RUNTIME, SA_STATUS

log = logging.getLogger("codemode.worker")

OURS = (SA_STATUS, SA_RUNTIME)


def how_to_create(namespace: str, missing: list[str] | tuple[str, ...] = OURS) -> str:
    """The commands that create ``missing`` on ``namespace`` (self-hosted, and Temporal Cloud)."""
    names = " ".join(f"--name {name}" for name in missing)
    cloud = " ".join(f'--sa "{name}=Keyword"' for name in missing)
    return (
        f"`temporal operator search-attribute create --namespace {namespace} {names} --type Keyword` "
        f"(a self-hosted cluster), or on Temporal Cloud `tcld namespace search-attributes add -n "
        f"{namespace} {cloud}` or the Cloud UI (Namespaces > {namespace} > Search Attributes)"
    )


async def ensure_search_attributes(client: Client) -> bool:
    """Whether ``CodeModeStatus`` and ``CodeModeRuntime`` exist on the client's namespace,
    creating them where this client may; when it may not, one warning says which to create and
    how. Never raises: a worker runs either way."""
    from temporalio.api.enums.v1 import IndexedValueType
    from temporalio.api.operatorservice.v1 import AddSearchAttributesRequest, ListSearchAttributesRequest

    namespace = client.namespace
    try:
        listed = await client.operator_service.list_search_attributes(ListSearchAttributesRequest(namespace=namespace))
    except RPCError as err:
        log.warning(
            "cannot list the search attributes of namespace %s (%s: %s); if %s are missing, create them: %s. "
            "Executions run without them where they are missing.",
            namespace, err.status.name, err.message, " and ".join(OURS), how_to_create(namespace),
        )  # fmt: skip
        return False
    missing = [name for name in OURS if name not in listed.custom_attributes]
    if not missing:
        return True
    try:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(
                namespace=namespace,
                search_attributes={name: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD for name in missing},
            )
        )
    except RPCError as err:
        log.warning(
            "search attributes %s (Keyword) are missing on namespace %s and this worker may not create them "
            "(%s: %s). Create them once: %s. Until then executions run without them (those your own "
            "workflows start as children need index_search_attributes=False), and `codemode list "
            "--status` reads each execution's state instead of asking the index.",
            ", ".join(missing), namespace, err.status.name, err.message, how_to_create(namespace, missing),
        )  # fmt: skip
        return False
    log.warning("created search attributes %s (Keyword) on namespace %s", ", ".join(missing), namespace)
    return True
