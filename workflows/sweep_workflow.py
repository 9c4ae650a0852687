"""``StorageSweepWorkflow``: one retention sweep of the object store, and
``SandboxSweepWorkflow``: one sweep of the sandboxes no open execution names, each started by
a Schedule.

The Schedules (``codemode-storage-sweep`` and ``codemode-sandbox-sweep``, hourly, created by
``codemode worker`` and ``dev``) keep them visible in the web UI with every past sweep and
what it deleted, and why.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.retention import SweepInput, SweepReport
    from codemode.activities.sandbox_sweep import SandboxSweepInput, SandboxSweepReport

SWEEP_WORKFLOW = "StorageSweepWorkflow"
SWEEP_SCHEDULE_ID = "codemode-storage-sweep"
SANDBOX_SWEEP_WORKFLOW = "SandboxSweepWorkflow"
SANDBOX_SWEEP_SCHEDULE_ID = "codemode-sandbox-sweep"


@workflow.defn(name=SWEEP_WORKFLOW)
class StorageSweepWorkflow:
    @workflow.run
    async def run(self, inp: SweepInput) -> SweepReport:
        return await workflow.execute_activity(
            names.STORAGE_SWEEP,
            inp,
            result_type=SweepReport,
            start_to_close_timeout=timedelta(minutes=30),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=10)),
            summary="delete what closed executions stored, past retention",
        )


@workflow.defn(name=SANDBOX_SWEEP_WORKFLOW)
class SandboxSweepWorkflow:
    @workflow.run
    async def run(self, inp: SandboxSweepInput) -> SandboxSweepReport:
        report: SandboxSweepReport = await workflow.execute_activity(
            names.SANDBOX_SWEEP,
            inp,
            result_type=SandboxSweepReport,
            start_to_close_timeout=timedelta(minutes=30),
            retry_policy=RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=10)),
            summary="destroy the sandboxes no open execution names",
        )
        removed = "; ".join(f"{e.runtime} {e.sandbox}: {e.reason}" for e in report.removed[:20])
        workflow.set_current_details(
            f"**{len(report.removed)} removed**, {len(report.kept)} kept ({', '.join(report.runtimes) or 'no runtime'})"
            + (f": {removed}" if removed else "")
        )
        return report
