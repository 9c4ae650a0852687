"""A run's request, outcome and call records leave fields at their default out of the JSON
that goes into a history (issue 40: fewer bytes per call in every history; issue 44: only
there, through the payload converter); the full JSON, which is also what people and programs
read, decodes to the same records, and their JSON schemas still describe them."""

from __future__ import annotations

from codemode.worker.converter import SharedPydanticPayloadConverter
from codemode.workflows.models import CodeExecutionRequest, ErrorInfo, ExecutionOutcome, ToolCallRecord


def history_json(value: object) -> str:
    """The JSON the payload converter writes into a history."""
    return SharedPydanticPayloadConverter().to_payloads([value])[0].data.decode()


def test_defaults_are_left_out_and_old_full_json_decodes_the_same() -> None:
    record = ToolCallRecord(call_id="1", tool="noop", args=[45], status="ok", result=45, result_size=2, attempts=1)
    outcome = ExecutionOutcome(execution_id="e", success=True, output=0, tool_calls=[record])
    compact = history_json(outcome)
    assert compact == (
        '{"execution_id":"e","success":true,"output":0,"tool_calls":[{"call_id":"1","tool":"noop",'
        '"args":[45],"status":"ok","result":45,"result_size":2,"attempts":1}]}'
    )
    full = (
        '{"execution_id":"e","runs":1,"success":true,"output":0,"stdout":"","error":null,"tool_calls":[{"call_id":"1",'
        '"tool":"noop","args":[45],"kwargs":{},"status":"ok","result":45,"result_size":2,"result_preview":null,'
        '"error":null,"attempts":1,"approval":null,"summary":""}],"duration_ms":0.0,"runtime":"monty","cell":null,'
        '"artifacts":[]}'
    )
    assert ExecutionOutcome.model_validate_json(full) == ExecutionOutcome.model_validate_json(compact) == outcome
    assert outcome.model_dump_json().startswith(full[:-1])  # (and the usage, which the full JSON above predates)
    request = CodeExecutionRequest(code="1")
    assert history_json(request) == '{"code":"1","limits":{"timeout_seconds":30.0,"max_memory_bytes":268435456,' \
        '"max_tool_calls":500,"max_stdout_bytes":1048576},"approval_timeout":"P7D"}'
    assert CodeExecutionRequest.model_validate_json(history_json(request)) == request
    error = ErrorInfo(type="ValueError", message="m")
    assert ErrorInfo.model_validate_json(error.model_dump_json()) == error


def test_their_json_schemas_still_describe_them() -> None:
    for model in (ExecutionOutcome, CodeExecutionRequest, ToolCallRecord):
        schema = model.model_json_schema(mode="serialization")
        assert set(model.model_fields) <= set(schema["properties"]), model
