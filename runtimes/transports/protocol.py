"""The wire protocol between a sandbox runner and the host, as pydantic models.

The sandbox side (``runtimes/runner/sandbox/``) is standard-library only and writes plain
JSON; the host validates every message here, so a broken or hostile sandbox produces a
clean error instead of a KeyError deep in the runtime.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_jsonable_python

from ..execution import CallOutcome
from ..types import FunctionCall


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class ReadyMessage(_Message):
    """The code compiled; it starts running now."""

    type: Literal["ready"]


class CallMessage(FunctionCall):
    """A ``FunctionCall`` on the wire (``concurrent``: an ``async def`` tool, the code does
    not need the value yet)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    type: Literal["call"]

    def call(self) -> FunctionCall:
        # Never ``origin``: where a call comes from is the host's to say, not the sandbox's.
        return FunctionCall.model_validate(self.model_dump(exclude={"type", "origin"}))


class BlockedMessage(_Message):
    """The code cannot continue until one of ``waiting`` is answered."""

    type: Literal["blocked"]
    waiting: list[str]


class DoneMessage(_Message):
    type: Literal["done"]
    output: Any = None
    #: Session mode: the globals after the cell, name -> type name.
    variables: dict[str, str] | None = None


class ErrorMessage(_Message):
    type: Literal["error"]
    kind: Literal["syntax", "runtime", "timeout", "resource"]
    error_type: str
    message: str
    line: int | None = None
    traceback: str | None = None
    variables: dict[str, str] | None = None


class SyncedMessage(_Message):
    """The runner's answer to a host's ``sync`` request: where it is. ``calls``: call ids
    it has issued ("1".."calls"); ``waiting``: those it has not received an answer for."""

    type: Literal["synced"]
    nonce: str | None = None
    calls: int
    waiting: list[str]
    #: Cells begun (session mode).
    cells: int = 0


SandboxMessage = Annotated[
    ReadyMessage | CallMessage | BlockedMessage | DoneMessage | ErrorMessage | SyncedMessage,
    Field(discriminator="type"),
]
SANDBOX_MESSAGE: TypeAdapter[SandboxMessage] = TypeAdapter(SandboxMessage)

#: Largest message a sandbox may send (tool arguments or the output), and the largest
#: line the stdio transport buffers.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class MessageTooLarge(Exception):
    """The sandbox sent a message over ``MAX_MESSAGE_BYTES``: the code passed a huge value
    to a tool or returned one."""


def jsonable(value: Any) -> Any:
    """Host values (tool results, inputs) as JSON-ready data: what the sandbox will see."""
    return to_jsonable_python(value, fallback=repr)


def answer_payload(call_id: str, outcome: CallOutcome) -> dict[str, Any]:
    """The answer to one call as the runner reads it."""
    if outcome.kind == "result":
        return {"type": "answer", "call_id": call_id, "ok": True, "value": jsonable(outcome.value)}
    return {"type": "answer", "call_id": call_id, "ok": False, "exc_type": outcome.exc_type, "message": outcome.message}


def parse_message(data: bytes | str) -> SandboxMessage:
    """Validate one message from the sandbox; a malformed one is a ``SandboxError``."""
    from pydantic import ValidationError

    from ..errors import SandboxError

    try:
        return SANDBOX_MESSAGE.validate_json(data)
    except ValidationError as exc:
        text = data[:200] if isinstance(data, str) else data[:200].decode("utf-8", "replace")
        raise SandboxError(f"malformed message from the sandbox ({exc.error_count()} errors): {text!r}") from None
