"""The data converter every client and worker uses: one set of pydantic encoders per process."""

from __future__ import annotations

import dataclasses

from temporalio.converter import DataConverter


def test_payload_converters_share_one_set_of_encoders(converter: DataConverter) -> None:
    from temporalio.converter import WorkflowSerializationContext

    from codemode.activities.models import StepResult

    derived = converter.with_context(WorkflowSerializationContext(namespace="default", workflow_id="x"))
    copies = [converter, dataclasses.replace(converter), derived]
    encoders = {id(c.payload_converter._inner_payload_converter.converters) for c in copies}  # type: ignore[attr-defined]
    assert len(encoders) == 1
    step = StepResult(kind="calls", stdout="hi")
    (payload,) = copies[1].payload_converter.to_payloads([step])
    assert copies[2].payload_converter.from_payloads([payload], [StepResult]) == [step]
