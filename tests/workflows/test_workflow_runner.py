"""The worker's workflow runner: the SDK's sandbox, with context lookups that skip its exec.

It must answer exactly what the SDK's path answers, and it must still be a sandbox (fresh
workflow module per run, restricted calls refused) for every workflow but code mode's own,
which it runs outside the sandbox (issue 40; their guards: tests/workflows/test_determinism.py)."""

from __future__ import annotations

import asyncio
import inspect
import sys
import uuid
from datetime import datetime, timedelta

import pytest
from temporalio import workflow
from temporalio.api.common.v1 import Payloads
from temporalio.api.enums.v1 import CommandType, EventType
from temporalio.api.failure.v1 import Failure
from temporalio.client import Client
from temporalio.converter import DataConverter
from temporalio.worker import Worker
from temporalio.worker._command_aware_visitor import CommandInfo
from temporalio.worker._workflow_instance import WorkflowInstanceDetails, _WorkflowInstanceImpl
from temporalio.worker.workflow_sandbox._runner import _fake_info
from temporalio.worker.workflow_sandbox._runner import _Instance as SDKInstance

from codemode.worker import workflow_runner
from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.session_workflow import CodeSessionWorkflow
from codemode.workflows.sweep_workflow import StorageSweepWorkflow
from tests.workflows.user_workflows import UserAgentWorkflow


def _details(cls: type) -> WorkflowInstanceDetails:
    return WorkflowInstanceDetails(
        payload_converter_factory=DataConverter.default._new_payload_converter,
        failure_converter_class=DataConverter.default.failure_converter_class,
        interceptor_classes=[],
        defn=workflow._Definition.must_from_class(cls),
        info=_fake_info,
        randomness_seed=-1,
        extern_functions={},
        disable_eager_activity_execution=False,
        worker_level_failure_exception_types=[],
        patch_activation_callback=None,
        last_completion_result=Payloads(),
        last_failure=Failure(),
    )


async def test_contexts_are_the_sdks_own_and_the_module_is_sandboxed() -> None:
    instance = CodeModeWorkflowRunner().create_instance(_details(UserAgentWorkflow))
    # The fast path is in use with the installed SDK (if this fails, the SDK moved its
    # internals: the runner still works, through the SDK's slower path).
    assert isinstance(instance, workflow_runner._Instance)
    assert instance._in_sandbox() is not None
    infos = [
        None,
        CommandInfo(command_type=CommandType.COMMAND_TYPE_SCHEDULE_ACTIVITY_TASK, command_seq=7),
        CommandInfo(command_type=CommandType.COMMAND_TYPE_START_CHILD_WORKFLOW_EXECUTION, command_seq=1),
    ]
    for info in infos:
        assert instance.get_serialization_context(info) == SDKInstance.get_serialization_context(instance, info)
        assert instance.get_external_store_context(info) == SDKInstance.get_external_store_context(instance, info)
    # Still a sandbox: the workflow class was imported afresh for this instance.
    assert instance.globals_and_locals["__temporal_workflow_class"] is not UserAgentWorkflow


async def test_our_workflows_run_outside_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    for cls in (CodeExecutionWorkflow, CodeSessionWorkflow, StorageSweepWorkflow):
        instance = CodeModeWorkflowRunner().create_instance(_details(cls))
        assert type(instance) is _WorkflowInstanceImpl  # the SDK's instance, with no sandbox around it
    monkeypatch.setenv(workflow_runner.SANDBOX_ENV, "1")  # back in the sandbox, on request
    assert isinstance(CodeModeWorkflowRunner().create_instance(_details(CodeExecutionWorkflow)), SDKInstance)
    monkeypatch.setenv(workflow_runner.SANDBOX_ENV, "maybe")
    with pytest.raises(ValueError, match="CODEMODE_WORKFLOW_SANDBOX='maybe'"):
        CodeModeWorkflowRunner()


@workflow.defn(name="ReadsTheClock")
class ReadsTheClock:
    @workflow.run
    async def run(self) -> str:
        return datetime.now().isoformat()  # not allowed in a workflow


async def test_restricted_calls_are_still_refused(client: Client) -> None:
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    async with Worker(
        client, task_queue=task_queue, workflows=[ReadsTheClock], workflow_runner=CodeModeWorkflowRunner()
    ):
        handle = await client.start_workflow(
            ReadsTheClock.run,
            id=f"clock-{uuid.uuid4().hex[:8]}",
            task_queue=task_queue,
            execution_timeout=timedelta(seconds=30),
        )
        try:
            for _ in range(100):
                failed = [
                    e
                    async for e in handle.fetch_history_events()
                    if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
                ]
                if failed:
                    break
                await asyncio.sleep(0.1)
            else:
                pytest.fail("the workflow task did not fail")
            assert "RestrictedWorkflowAccessError" in str(failed[0].workflow_task_failed_event_attributes.failure)
        finally:
            await handle.terminate()


async def test_the_workflow_module_is_compiled_once_and_still_run_per_instance() -> None:
    from codemode.worker.workflow_runner import _codes

    runner = CodeModeWorkflowRunner()
    runner.prepare_workflow(workflow._Definition.must_from_class(UserAgentWorkflow))
    first = runner.create_instance(_details(UserAgentWorkflow))
    second = runner.create_instance(_details(UserAgentWorkflow))
    path = inspect.getsourcefile(sys.modules[UserAgentWorkflow.__module__])
    assert path in _codes
    # so are the packages the sandbox imports afresh with it
    assert inspect.getsourcefile(sys.modules["tests.workflows"]) in _codes
    one, two = (i.globals_and_locals["__temporal_workflow_class"] for i in (first, second))
    assert one is not two  # each run still gets its own module
    assert one.run.__code__ is two.run.__code__  # compiled once


async def test_the_sdks_sandbox_code_strings_are_compiled_once(client: Client) -> None:
    """Activations exec the SDK's code strings as code objects compiled once: a real
    workflow run through the runner leaves only a handful of them, whatever its length."""
    from codemode.worker.workflow_runner import _sandbox_code

    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    before = set(_sandbox_code)
    counts = []
    async with Worker(client, task_queue=task_queue, workflows=[Sleeps], workflow_runner=CodeModeWorkflowRunner()):
        for steps in (2, 6):
            assert (
                await client.execute_workflow(
                    Sleeps.run, steps, id=f"sleeps-{uuid.uuid4().hex[:8]}", task_queue=task_queue
                )
                == steps
            )
            counts.append(len(_sandbox_code))
    assert any("activate(__temporal_activation)" in code for code in _sandbox_code)
    # This class's create strings, the activation and the context lookups (the process's
    # other workflow classes, run by earlier tests, have theirs already) ...
    assert len(set(_sandbox_code) - before) <= 6
    # ... and none more for a second, longer run: compiled once, whatever the length.
    assert counts[1] == counts[0]
    for code, compiled in _sandbox_code.items():
        assert compiled.co_filename == "<string>"  # tracebacks read as the SDK's own


@workflow.defn(name="SleepsInSteps")
class Sleeps:
    @workflow.run
    async def run(self, steps: int) -> int:
        for _ in range(steps):  # one activation per timer
            await workflow.sleep(0.01)
        return steps
