"""The Monday-morning floor's workflow (``bench/monday.py``): park until an ``approve`` signal,
saying so in the same search attribute ours keeps, then run one activity, as a run of ours runs
its approved call. Its own module: the workflow sandbox imports it, so it imports only
temporalio."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeKey

STATUS = SearchAttributeKey.for_keyword("CodeModeStatus")


@workflow.defn(name="BenchParkedWorkflow")
class ParkedWorkflow:
    def __init__(self) -> None:
        self._approved = False

    @workflow.signal
    def approve(self, payload: Any = None) -> None:
        self._approved = True

    @workflow.run
    async def run(self, i: int) -> int:
        workflow.upsert_search_attributes([STATUS.value_set("awaiting_approval")])
        await workflow.wait_condition(lambda: self._approved)
        out = await workflow.execute_activity(
            "bench_monday_release", i, result_type=int, start_to_close_timeout=timedelta(seconds=60)
        )
        workflow.upsert_search_attributes([STATUS.value_set("completed")])
        return out
