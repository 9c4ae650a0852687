"""Authenticated checkpoints on a real server: a sealed checkpoint altered in the store, or a
checkpoint written without the keys (a run parked before encryption was turned on), is never
loaded into a sandbox; the step replays the journal instead and the run completes."""

from __future__ import annotations

from codemode.activities import ToolRegistry
from codemode.activities.checkpoints import CheckpointScope
from codemode.client import display
from codemode.client.executions import start_execution
from codemode.client.histories.audit import fetch_audit
from codemode.worker.worker import CodeModeWorker
from codemode.workflows.models import ApproveSignal, CodeExecutionRequest, ExecutionOutcome
from tests.workflows.test_approval import wait_for_state

from .conftest import K1
from .test_rotation import PARK, TOOLS


async def park_then_resume(keyed_client, task_queue, store, *, park_keys, resume_keys, tamper: bool) -> list[str]:
    registry = ToolRegistry.from_module(TOOLS)
    first = await keyed_client(park_keys)
    async with CodeModeWorker(first, registry, task_queue=task_queue).running():
        handle = await start_execution(first, CodeExecutionRequest(code=PARK), task_queue=task_queue)
        status = await wait_for_state(handle, "awaiting_approval")
    desc = await handle.describe()
    scope = CheckpointScope("default", handle.id, desc.raw_description.workflow_execution_info.first_run_id)
    keys = await store.list_keys(bucket=store.bucket, prefix=scope.prefix)
    assert keys
    for key in keys:
        blob = await store.get_object(bucket=store.bucket, key=key)
        assert blob.startswith(b"CMCK1") == (park_keys is not None)
        if tamper:
            altered = bytearray(blob)
            altered[len(altered) // 2] ^= 0x01
            await store.put_object(bucket=store.bucket, key=key, data=bytes(altered))
    second = await keyed_client(resume_keys)
    async with CodeModeWorker(second, registry, task_queue=task_queue).running():
        resumed = second.get_workflow_handle(handle.id, result_type=ExecutionOutcome)
        await resumed.signal("approve", ApproveSignal(call_id=status.pending_approvals[0].call_id, by="ana"))
        outcome = await resumed.result()
    assert outcome.success, outcome.error
    assert outcome.output == [10, 20, "bob"]
    return display.audit_lines(await fetch_audit(second, handle.id))


async def test_a_tampered_sealed_checkpoint_is_refused_and_the_run_replays(keyed_client, task_queue, store) -> None:
    lines = await park_then_resume(keyed_client, task_queue, store, park_keys=K1, resume_keys=K1, tamper=True)
    assert any(
        "replayed the journal because checkpoint" in ln and "does not authenticate under key 'k1'" in ln for ln in lines
    ), lines


async def test_a_checkpoint_written_without_the_keys_is_refused(keyed_client, task_queue, store) -> None:
    """Encryption turned on while a run is parked: its plaintext checkpoint is not trusted."""
    lines = await park_then_resume(keyed_client, task_queue, store, park_keys=None, resume_keys=K1, tamper=False)
    assert any("replayed the journal because checkpoint" in ln and "is not sealed" in ln for ln in lines), lines
