"""A saved snippet's entry: the first thing its function does is hand its arguments to the
host (``compose.ENTRY``, a built-in every execution has). The sandbox step answers it: the
arguments checked against the snippet's parameter schema (a ``TypeError`` in the code when they
do not fit), the call journaled with the snippet's version, so the audit shows which version
every call ran."""

from __future__ import annotations

import logging

import jsonschema

from codemode.runtimes import FunctionCall
from codemode.runtimes.journal_replay import JournalEntry
from codemode.runtimes.prelude import Prelude

from ..records import ErrorInfo, ToolCallRecord
from .models import PREFIX

log = logging.getLogger(__name__)


def enter(call: FunctionCall, prelude: Prelude | None) -> JournalEntry:
    """Answer the entry call a snippet's function makes first (``compose.ENTRY``)."""
    args = list(call.args)
    if len(args) != 3 or not isinstance(args[0], str) or not isinstance(args[1], str):
        return JournalEntry.raised(call, "TypeError", "the snippet entry takes (name, version, arguments)")
    name, version, arguments = args
    part = prelude.part_of(f"{PREFIX}{name}@{version}") if prelude is not None else None
    if part is None:
        if prelude is None:  # (a step that lost the prelude: the arguments go unchecked)
            log.warning("snippet %s@%s entered without its prelude on this worker", name, version[:12])
            return JournalEntry.returned(call, None)
        return JournalEntry.raised(call, "NameError", f"no snippet {name}@{version[:12]} in this run")
    try:
        jsonschema.validate(arguments, part.parameters_schema)
    except jsonschema.ValidationError as err:
        where = ".".join(str(p) for p in err.absolute_path)
        what = f"argument {where!r}: " if where else ""
        return JournalEntry.raised(call, "TypeError", f"{part.path}(): {what}{err.message}")
    except jsonschema.SchemaError as err:
        return JournalEntry.raised(call, "TypeError", f"{part.path}(): its schema is invalid: {err.message}")
    return JournalEntry.returned(call, None)


def entry_record(entry: JournalEntry) -> ToolCallRecord:
    """The audit record of a snippet's entry: which snippet, which version, with what."""
    args = list(entry.args)
    name, version, arguments = (args + [None, None, None])[:3] if len(args) <= 3 else (None, None, None)
    shown = ", ".join(f"{k}={v!r}" for k, v in arguments.items()) if isinstance(arguments, dict) else "..."
    record = ToolCallRecord(
        call_id=entry.call_id,
        tool=f"{PREFIX}{name}",
        args=entry.args,
        kwargs=entry.kwargs,
        status="ok" if entry.error_type is None else "error",
        attempts=0,
        summary=f"snippets.{name}({shown}) [version {str(version)[:12]}]",
        origin=f"{PREFIX}{name}@{version}",
    )
    if entry.error_type is not None:
        record.error = ErrorInfo(type=entry.error_type, message=entry.error_message, kind="invalid_call")
    return record
