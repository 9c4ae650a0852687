"""What a person reads about the calls a run waits on, wherever they look in Temporal: the
memo's entries (the inbox lists them), the current details (the web UI's *User Metadata*),
and the summary of the timer the wait sets (the first thing the UI's *Timeline* shows). Each
leads with the call's page in the approvals inbox when the worker's gate named one.

Pure functions of the run's state: deterministic, so workflow code calls them. They change
text only (of a memo, of details, of a timer's summary), never which commands a run issues.
"""

from __future__ import annotations

from typing import Any

from codemode.approvals.notify.events import CodeExcerpt
from codemode.workflows.models import CODE_APPROVAL_ID, PendingApproval
from codemode.workflows.summary import wrap_line

#: Columns of code the UI's details show before a line is wrapped (its column is narrow,
#: and each line has its number in front).
CODE_WIDTH = 42
#: Lines of code shown either side of a call's line in the details.
CONTEXT = 1


def named(p: PendingApproval, limit: int = 100) -> str:
    """The call as summaries name it, cut to ``limit``."""
    text = p.summary or f"{p.tool}(...)"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def timer_summary(p: PendingApproval) -> str:
    """The wait's timer, as the UI's timeline shows it (a line that may be cut at its right
    edge): where to decide first, then the call."""
    if p.inbox_url:
        return f"waits for a person, decide at {p.inbox_url} : {named(p, 80)}"
    return f"waits for a person (codemode approve or deny, call {p.call_id}): {named(p, 80)}"


def memo_extras(p: PendingApproval, starter: str | None) -> dict[str, Any]:
    """What the memo's entry adds for the inbox: its page, who started the run, what the tool
    does, and why the call asks a person (only what is known)."""
    extras = {"inbox_url": p.inbox_url, "started_by": starter, "tool_doc": p.tool_doc, "reason": p.reason}
    return {k: v for k, v in extras.items() if v}


def wrap_code(code: str, line: int | None, width: int = CODE_WIDTH, context: int = CONTEXT) -> list[str]:
    """The code around ``line``, numbered, the call's line marked ``▶``, long lines wrapped
    (``↪``) so a narrow column shows all of it."""
    lines = code.splitlines()
    if line is None or not 1 <= line <= len(lines):
        shown = CodeExcerpt(first=1, lines=lines[: 2 * context + 1], line=None)
    else:
        first = max(1, line - context)
        shown = CodeExcerpt(first=first, lines=lines[first - 1 : line + context], line=line)
    out = []
    for i, text in enumerate(shown.lines):
        number = shown.first + i
        mark = "▶" if number == shown.line else " "
        head = f"{mark}{number:4d}  "
        first, *more = wrap_line(text, width)
        out.append(head + first)
        out += [" " * len(head) + piece for piece in more]
    return out


def details(execution_id: str, pending: list[PendingApproval], progress: dict[str, str | None], code: str) -> str:
    """The current details while calls wait: for each, where to decide it (the inbox's page
    first), its code, and the commands. ``progress``: per call under an approvers file, the
    approvals counted so far ("" when none yet); a call absent from it takes unsigned decisions."""
    count = f"{len(pending)} call{'s' if len(pending) != 1 else ''}"
    lines = [f"**Waiting for a person** ({count}):", ""]
    signed = False
    for p in pending:
        under_file = p.call_id in progress
        signed = signed or under_file
        by = " --by NAME" if under_file else ""
        counted = f" ({progress[p.call_id]})" if progress.get(p.call_id) else ""
        lines.append(f"**Call {p.call_id}**: `{named(p)}`{counted}")
        lines.append("")
        if p.inbox_url:
            lines += [f"Decide in the inbox: [{p.inbox_url}]({p.inbox_url})", ""]
        source = str(p.args[0]) if p.call_id == CODE_APPROVAL_ID and p.args else code
        if source.strip() and (p.line is not None or p.call_id == CODE_APPROVAL_ID):
            lines += ["```python", *wrap_code(source, p.line), "```", ""]
        lines.append(
            f"Or from a terminal: `codemode approve {execution_id} {p.call_id}{by}` "
            f"or `codemode deny {execution_id} {p.call_id}{by}`"
        )
        lines.append("")
    if signed:
        lines.append(
            "Decisions must be signed by a person the approvers file allows (`codemode keygen --approver NAME`)."
        )
    else:
        first = pending[0].call_id
        lines.append(
            f'Or use *Send a Signal*: name `approve` (or `deny`), input `{{"call_id": "{first}", "by": "your name"}}`.'
        )
    return "\n".join(lines)


def decided_details(verb: str, p: PendingApproval, by: str) -> str:
    """The current details once the last waiting call is decided: what, by whom, and its page."""
    page = f" ([the call]({p.inbox_url}))" if p.inbox_url else ""
    return f"{verb} `{named(p)}`{by}{page}; running on"
