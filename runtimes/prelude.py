"""A prelude: code a runtime runs before the user's code, in the same sandbox and namespace.

Saved snippets (issue 48) reach the code this way: their functions are defined by the prelude
(``snippets.weekly_report(...)``), so a call of one runs inside the calling execution, and every
tool call it makes is a call of that execution, journaled and approved like any other. The
runtime layer knows nothing of snippets: a prelude is source, the stubs the code is checked
against for what it defines, and its parts (byte ranges of the source, each with an ``origin``
the host gives the calls made from there).

Monty runs the prelude as a feed of its own before the code's (its positions are then in
another file than the code's, and the code's lines stay the code's); the CPython runner
executes it under its own file name. A call's ``origin`` is trusted only where the host, not
the sandbox, reads where the call was made: Monty's VM reports the position of each call.
``sole``: the whole code is one call of one part, checked by the host before it ran, so every
call of the execution is that part's on any runtime.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pydantic import Field

from .signatures import ToolSignature
from .types import CompactModel


class PreludePart(CompactModel):
    """One function the prelude defines."""

    #: How the code calls it (``snippets.weekly_report``).
    path: str
    #: What the host calls the calls made from its body (``snippet:weekly_report@1a2b...``).
    origin: str
    #: Its byte range in the prelude's source (UTF-8 offsets, end excluded).
    start: int
    end: int
    #: The JSON schema its arguments must fit (checked by the host when the function is entered).
    parameters_schema: dict[str, Any] = Field(default_factory=dict)


class Prelude(CompactModel):
    source: str
    #: What the code sees of what the source defines: checked against, shown in prompts.
    stubs: list[ToolSignature] = Field(default_factory=list)
    parts: list[PreludePart] = Field(default_factory=list)
    #: The code is exactly one call of the part with this origin (checked by the host).
    sole: str | None = None

    def part_at(self, offset: int) -> PreludePart | None:
        """The part whose body holds byte ``offset`` of the source."""
        return next((p for p in self.parts if p.start <= offset < p.end), None)

    def part_of(self, origin: str) -> PreludePart | None:
        return next((p for p in self.parts if p.origin == origin), None)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()
