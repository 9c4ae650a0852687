"""Worker Deployment Versioning: runs wait days for a person while workers are redeployed. A run
parked for approval under build A is approved after build B's worker replaced A's (A stopped,
B made the deployment's current version), and completes on B: our workflows auto-upgrade
(``worker/plugin.py``'s ``VERSIONING_BEHAVIOR``; the committed replay histories guard that a new
build replays old runs)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from temporalio.api.workflowservice.v1 import SetWorkerDeploymentCurrentVersionRequest
from temporalio.client import Client
from temporalio.common import VersioningBehavior
from temporalio.service import RPCError
from temporalio.worker import WorkerDeploymentConfig

from codemode.client.executions import start_execution
from codemode.client.following import wait_for_outcome
from codemode.worker.plugin import VERSIONING_BEHAVIOR, CodeModePlugin
from codemode.workflows.models import CodeExecutionRequest, ExecutionOutcome, ExecutionStatus
from tests.cli.runner import Background, base_env, codemode

EMAIL = "send_email(to='ana@example.com', subject='Weather', body='Paris: 18C')"


async def make_current(client: Client, deployment: str, build_id: str) -> None:
    """``temporal worker deployment set-current-version``, once the version's worker polled
    (the server learns of a version from its first poll: retried until it has)."""
    for _ in range(200):
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace, deployment_name=deployment, build_id=build_id, identity="pytest"
                )
            )
            return
        except RPCError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"version {deployment}.{build_id} never became current")


async def test_a_parked_run_is_approved_after_the_next_build_replaced_the_first(
    client: Client, temporal_address: str, data_dir: Path, tmp_path: Path
) -> None:
    queue, deployment = f"versioned-{uuid.uuid4().hex[:8]}", f"codemode-{uuid.uuid4().hex[:8]}"
    env = base_env(TEMPORAL_ADDRESS=temporal_address, CODEMODE_TASK_QUEUE=queue, CODEMODE_DATA_DIR=str(data_dir))

    def build(build_id: str) -> Background:
        args = ("worker", "--tools", "examples.tools", "--deployment-name", deployment, "--build-id", build_id)
        return Background(*args, env=env, log=tmp_path / f"worker-{build_id}.log")

    build_a = await build("A").start("Worker ready")
    assert f"version {deployment}.A (workflows auto-upgrade)" in build_a.output()
    await make_current(client, deployment, "A")
    handle = await start_execution(client, CodeExecutionRequest(code=EMAIL), task_queue=queue)
    parked = await wait_for_outcome(handle, until_parked=True)
    assert isinstance(parked, ExecutionStatus) and parked.state == "awaiting_approval"
    first = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    assert first.deployment_version.build_id == "A"
    assert first.behavior == VersioningBehavior.AUTO_UPGRADE.value
    assert await build_a.stop() == 0, build_a.output()

    build_b = await build("B").start("Worker ready")
    try:
        await make_current(client, deployment, "B")
        call_id = parked.pending_approvals[0].call_id
        approved = await codemode("approve", handle.id, call_id, "--by", "ana", env=env)
        assert approved.rc == 0, approved
        outcome = await handle.result()
        assert isinstance(outcome, ExecutionOutcome) and outcome.success, outcome
        assert outcome.output["to"] == "ana@example.com"
        last = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
        assert last.deployment_version.build_id == "B"
    finally:
        assert await build_b.stop() == 0, build_b.output()


def test_the_plugin_sets_the_deployment_and_refuses_a_versioned_worker_without_a_behavior() -> None:
    from temporalio.common import WorkerDeploymentVersion
    from temporalio.worker import WorkerConfig

    from codemode.worker.plugin import _version

    config: WorkerConfig = {"build_id": "x"}
    _version(config, WorkerDeploymentVersion("prod", "7"), "7")
    chosen = config["deployment_config"]
    assert chosen.version.build_id == "7" and chosen.use_worker_versioning
    assert chosen.default_versioning_behavior == VERSIONING_BEHAVIOR and "build_id" not in config
    theirs: WorkerConfig = {
        "deployment_config": WorkerDeploymentConfig(WorkerDeploymentVersion("app", "1"), use_worker_versioning=True)
    }
    with pytest.raises(ValueError, match="default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE"):
        _version(theirs, None, None)
    with pytest.raises(ValueError, match="needs a build_id"):
        CodeModePlugin(deployment_name="prod")
