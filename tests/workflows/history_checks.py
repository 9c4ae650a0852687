"""Checks on what an execution left in Temporal: every run of its chain, read from the server."""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.client import Client

from codemode.client.histories.audit import fetch_audit

#: Events that would mean a limit was hit: a workflow task that could not complete (an
#: oversized payload retries forever) or a run the server ended itself.
BAD_EVENTS = ("workflow_task_failed_event_attributes", "workflow_execution_terminated_event_attributes")
#: A workflow task times out when its worker is killed in the middle of it (crash tests).
TIMED_OUT = "workflow_task_timed_out_event_attributes"


@dataclass
class ChainStats:
    runs: int
    events: int
    history_bytes: int
    largest_run_bytes: int
    largest_run_events: int
    external_payloads: int


async def chain_stats(client: Client, execution_id: str, *, worker_killed: bool = False) -> ChainStats:
    """Sizes of every run of the execution; asserts none of them hit a limit (nor timed out
    a workflow task, unless a test killed a worker on purpose)."""
    audit = await fetch_audit(client, execution_id)
    stats = ChainStats(len(audit.runs), 0, 0, 0, 0, 0)
    for run_id in audit.runs:
        handle = client.get_workflow_handle(execution_id, run_id=run_id)
        history = await handle.fetch_history()
        bad_kinds = BAD_EVENTS if worker_killed else (*BAD_EVENTS, TIMED_OUT)
        bad = [e for e in history.events if e.WhichOneof("attributes") in bad_kinds]
        assert not bad, f"run {run_id} of {execution_id} hit a limit: {bad[0]}"
        info = (await handle.describe()).raw_description.workflow_execution_info
        stats.events += len(history.events)
        stats.history_bytes += info.history_size_bytes
        stats.largest_run_bytes = max(stats.largest_run_bytes, info.history_size_bytes)
        stats.largest_run_events = max(stats.largest_run_events, len(history.events))
        stats.external_payloads += info.external_payload_count
    return stats
