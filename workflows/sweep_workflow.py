"""``StorageSweepWorkflow``: one retention sweep of the object store, started by a Schedule.

A Schedule (``codemode-storage-sweep``, hourly, created by ``codemode worker`` and ``dev``)
keeps it visible in the web UI with every past sweep and what it deleted.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from codemode.activities import names
    from codemode.activities.retention import SweepInput, SweepReport

SWEEP_WORKFLOW = "StorageSweepWorkflow"
SWEEP_SCHEDULE_ID = "codemode-storage-sweep"


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
