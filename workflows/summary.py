"""What an execution is called where people look: the UI's summary and details of its
workflow, written by whoever starts it (a client, or a workflow starting it as a child).

Pure functions of the request: deterministic, so workflow code may call them.
"""

from __future__ import annotations

import re
from datetime import timedelta

from codemode.workflows.models import CodeExecutionRequest

_MARKDOWN = re.compile(r"([\\`*_\[\]<>~|])")


def plain(text: str) -> str:
    """Text the web UI shows as written: it renders summaries and details as markdown."""
    return _MARKDOWN.sub(r"\\\1", text)


def unplain(text: str) -> str:
    """Back from ``plain``: the text as written, for a terminal."""
    return re.sub(r"\\(.)", r"\1", text)


def summary_text(req: CodeExecutionRequest) -> str:
    """What the code is about, in a line: its leading comment when it starts with one, else
    its first statement that is not an import."""
    lines = [ln.strip() for ln in req.code.strip().splitlines() if ln.strip()]
    comment = []
    for ln in lines:
        if not ln.startswith("#"):
            break
        comment.append(ln.lstrip("#").strip())
    first = " ".join(c for c in comment if c)
    if not first:
        body = [ln for ln in lines if not ln.startswith(("#", "import ", "from "))]
        first = body[0] if body else (lines[0] if lines else "(empty)")
    if len(first) > 80:
        first = first[:77] + "..."
    return f"{first} ({req.runtime}, {len(req.code.splitlines())} lines)"


def execution_summary(req: CodeExecutionRequest) -> str:
    """The workflow's static summary: ``summary_text``, escaped for the UI's markdown."""
    return plain(summary_text(req))


#: Columns of code the web UI's details column shows whole (at 1280 px; it does not scroll).
DETAILS_WIDTH = 50
#: How a wrapped line goes on.
GOES_ON = "↪ "


def wrap_line(text: str, width: int, lead: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` columns, broken after a space or a comma when one
    is near the end; every line after the first is ``lead`` + ``GOES_ON`` + the rest."""
    pieces: list[str] = []
    rest, room = text, width
    while len(rest) > room:
        cut = max(rest.rfind(" ", 0, room), rest.rfind(",", 0, room) + 1)
        if cut < room * 2 // 3:
            cut = room
        pieces.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
        room = max(width - len(lead) - len(GOES_ON), 8)
    pieces.append(rest)
    return [pieces[0], *(lead + GOES_ON + p for p in pieces[1:])]


def readable_code(code: str, width: int = DETAILS_WIDTH) -> str:
    """The code with its long lines wrapped (``↪``), so a narrow column shows all of it."""
    out = []
    for line in code.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        out += wrap_line(line, width, lead=indent + "    ")
    return "\n".join(out)


def execution_details(req: CodeExecutionRequest) -> str:
    """The workflow's static details: the code, as a Python block, its long lines wrapped
    (the web UI cuts them at the column's edge)."""
    return f"```python\n{readable_code(req.code)}\n```"


def in_words(seconds: float) -> str:
    """A duration as people write it: ``10m``, ``1.5h``, ``45s``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def first_line(code: str) -> str:
    """A session cell's summary: its first line that is not blank, cut at 80 characters."""
    for line in code.splitlines():
        if line.strip():
            text = line.strip()
            return text if len(text) <= 80 else text[:77] + "..."
    return "(empty)"


def span_in_words(span: timedelta) -> str:
    """A whole span as people write it: ``24h``, ``30m``, ``7d``, ``45s``."""
    seconds = int(span.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
