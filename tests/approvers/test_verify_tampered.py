"""``codemode history --verify`` runs the workflow's own check again over every decision (issue 45,
finding 8: it re-checked neither four eyes, delegation nor time). A history whose outcome was
altered after the fact so that the run's starter, whose own approval the run refused under four
eyes, is recorded as the approver, with their genuine signature: every per-signature check
passes (it verifies, the key is listed, the person is allowed and counted once, enough signed),
and only the replayed check sees that this signature never counted."""

from __future__ import annotations

import json
from pathlib import Path

from temporalio.client import WorkflowHistory

from codemode.client.histories.verify import verify_runs
from codemode.workflows.models import Decision

HISTORY = Path(__file__).resolve().parents[1] / "workflows" / "histories" / "gen45-signed-start.json"


async def test_a_record_altered_to_name_the_starter_fails_verification(converter) -> None:
    history = WorkflowHistory.from_json("signed-start", HISTORY.read_text())
    events = list(history.events)
    execution_id = events[0].workflow_execution_started_event_attributes.workflow_id or "signed-start"
    assert (await verify_runs(execution_id, [events], converter)).ok  # as recorded: it holds
    refused = None  # the starter's (cy's) own decision, which the run refused under four eyes
    for e in events:
        if e.WhichOneof("attributes") == "workflow_execution_update_accepted_event_attributes":
            args = e.workflow_execution_update_accepted_event_attributes.accepted_request.input.args.payloads
            (raw,) = await converter.decode(list(args), [Decision])
            if raw.signature is not None and raw.signature.signer == "cy":
                refused = raw.signature
    assert refused is not None
    completed = next(e for e in events if e.WhichOneof("attributes") == "workflow_execution_completed_event_attributes")
    payload = completed.workflow_execution_completed_event_attributes.result.payloads[0]
    outcome = json.loads(payload.data)
    approval = outcome["tool_calls"][0]["approval"]
    approval["signatures"] = [refused.model_dump(mode="json")]
    approval["by"], approval["comment"], approval["door"] = "cy", None, "cli"
    payload.data = json.dumps(outcome).encode()
    checked = await verify_runs(execution_id, [events], converter)
    assert not checked.ok
    (decision,) = checked.decisions
    assert any("not the ones the history's own check counted" in p for p in decision.problems), decision.problems
