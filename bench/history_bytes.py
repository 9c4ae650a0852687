"""Bytes per tool call that runs leave in their workflow history, by event type: what the
server stores and sends for each call (``bench/agent_workload.py`` prints ours beside the
floor's). Two figures per event type: the encoded events, and the payloads inside them (the
part the data converter decides: activity inputs and results, workflow input and result,
signals, updates, markers, memo)."""

from __future__ import annotations

import asyncio
import collections
from dataclasses import dataclass, field

from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload
from temporalio.client import Client


def payload_bytes(msg: Message) -> int:
    """The encoded size of every ``Payload`` inside ``msg``."""
    if isinstance(msg, Payload):
        return msg.ByteSize()
    total = 0
    for fd, value in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            values = value.values() if fd.message_type.fields_by_name["value"].message_type else []
        elif isinstance(value, Message):
            values = [value]
        else:  # a repeated field
            values = value
        for v in values:
            if isinstance(v, Message):
                total += payload_bytes(v)
    return total


@dataclass
class HistoryBytes:
    """Bytes summed over some runs' histories, and the tool calls they made."""

    calls: int = 0
    events: int = 0
    event_bytes: collections.Counter[str] = field(default_factory=collections.Counter)
    payload_bytes: collections.Counter[str] = field(default_factory=collections.Counter)

    def per_call(self, counter: collections.Counter[str]) -> float:
        return sum(counter.values()) / self.calls if self.calls else float("nan")

    @property
    def history(self) -> float:
        """Encoded history bytes per call."""
        return self.per_call(self.event_bytes)

    @property
    def payloads(self) -> float:
        """Payload bytes per call."""
        return self.per_call(self.payload_bytes)

    def top(self, n: int = 6) -> str:
        """The event types that carry the most payload bytes, per call."""
        parts = [f"{k} {v / self.calls:.0f}" for k, v in self.payload_bytes.most_common(n) if v]
        return ", ".join(parts)


async def measure(client: Client, runs: list[tuple[str, int]]) -> HistoryBytes:
    """``runs``: (workflow id, tool calls) of finished runs."""
    out = HistoryBytes()

    async def one(wid: str, calls: int) -> None:
        history = await client.get_workflow_handle(wid).fetch_history()
        out.calls += calls
        for event in history.events:
            kind = event.WhichOneof("attributes") or "?"
            kind = kind.removesuffix("_event_attributes")
            out.events += 1
            out.event_bytes[kind] += event.ByteSize()
            out.payload_bytes[kind] += payload_bytes(event)

    sem = asyncio.Semaphore(8)

    async def bounded(wid: str, calls: int) -> None:
        async with sem:
            await one(wid, calls)

    await asyncio.gather(*(bounded(w, c) for w, c in runs))
    return out


async def first_call_ms(client: Client, runs: list[tuple[str, int]]) -> list[float]:
    """Per run, the time from its start to the scheduling of its first tool call (any activity
    that is not one of code mode's own steps), in ms, from the history's event times."""
    from codemode.activities.names import NOT_TOOLS as RESERVED

    out: list[float] = []
    for wid, _ in runs:
        history = await client.get_workflow_handle(wid).fetch_history()
        start = history.events[0].event_time.ToDatetime()
        for event in history.events:
            attrs = event.activity_task_scheduled_event_attributes
            if event.HasField("activity_task_scheduled_event_attributes") and attrs.activity_type.name not in RESERVED:
                out.append((event.event_time.ToDatetime() - start).total_seconds() * 1000)
                break
    return out
