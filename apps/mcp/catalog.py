"""What the model is shown of the host tools: the ``execute`` description (the runtime's prompt
with every stub while the catalog is small, a short pointer to ``search``/``get_schema``
beyond it, so its size stays bounded), the stubs ``get_schema`` returns, and close matches
for a name that is not a tool."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from codemode.activities.tools import ToolRegistry
from codemode.apps.mcp.search import ToolIndex
from codemode.runtimes import code_mode_prompt, runtime_class
from codemode.runtimes.signatures import ToolSignature, render_stubs

#: Up to this many tools, ``execute``'s description carries every stub; beyond it, a pointer.
STUBS_IN_DESCRIPTION_MAX = 30
#: Code larger than this is refused before anything starts (a model's code is a few KB).
MAX_CODE_CHARS = 100_000

_APPROVALS = (
    "Runs are durable: tool calls are retried and audited. A call that needs approval is put to "
    "the person through this client; unanswered, execute returns awaiting_approval and "
    "result(execution_id) gets the outcome later. Only the person can approve."
)


class UnknownTools(LookupError):
    """``get_schema`` was asked for names that are not tools; carries close matches for each."""

    def __init__(self, suggestions: Mapping[str, list[str]]) -> None:
        self.suggestions = dict(suggestions)
        parts = []
        for name, close in self.suggestions.items():
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            parts.append(f"{name!r}{hint}")
        super().__init__(f"no such tool: {'; '.join(parts)}. Find tools with search(query).")


class ToolCatalog:
    """The tools one server offers, and how each tool of the server describes them."""

    def __init__(
        self,
        signatures: Mapping[str, ToolSignature],
        *,
        runtime: str = "monty",
        stubs_max: int = STUBS_IN_DESCRIPTION_MAX,
        full: Callable[[str], ToolSignature] | None = None,
    ) -> None:
        """``signatures``: what the description and ``search`` show; ``full`` (tool name ->
        signature): what ``get_schema`` shows when that is more (a CLI command's flags, its
        help read when first asked for)."""
        self.runtime = runtime
        self.stubs_max = stubs_max
        self._full = full
        #: By tool name (a canonical id such as ``mcp:memory/read_graph`` for an MCP tool).
        self.signatures: dict[str, ToolSignature] = dict(signatures)
        #: By the name the code calls (``get_weather``, ``memory.read_graph``): what search
        #: answers and get_schema takes.
        self.by_code_name: dict[str, ToolSignature] = {s.code_name: s for s in self.signatures.values()}
        self.index = ToolIndex(self.by_code_name.values())
        self._constraints = runtime_class(runtime).constraints

    @classmethod
    def of(cls, registry: ToolRegistry, **options: Any) -> ToolCatalog:
        """The catalog of a worker's tools (the MCP servers' tools of ``--mcp-config`` join
        the registry, and so this catalog, when they land)."""
        return cls(registry.signatures(listed=True), full=lambda name: registry[name].signature, **options)

    def __len__(self) -> int:
        return len(self.signatures)

    @property
    def lists_stubs(self) -> bool:
        """Whether ``execute``'s description carries every stub (a small catalog)."""
        return len(self) <= self.stubs_max

    def execute_description(self) -> str:
        if self.lists_stubs:
            return code_mode_prompt(self.runtime, self.signatures).rstrip() + "\n\n" + _APPROVALS
        return self._pointer() + "\n\n" + _APPROVALS

    def _pointer(self) -> str:
        """The runtime's prompt without its stubs, pointing at search and get_schema instead:
        a constant size whatever the number of tools."""
        head = code_mode_prompt(self.runtime, {}).split("\n\nAvailable functions:", 1)[0].rstrip()
        head = head.replace("Call the functions below directly", "Call the host tools directly, as functions")
        head = head.replace("through the functions below", "through the host tools")
        lines = [
            head,
            "",
            (
                f"There are {len(self)} host tools, too many to list here: find them with search(query) and "
                "read their exact stubs with get_schema([names]) before calling them."
            ),
        ]
        if any(s.is_async for s in self.signatures.values()) and self._constraints.supports_async:
            lines.append(
                "Stubs declared `async def` must be awaited; run independent calls concurrently with "
                "`await asyncio.gather(...)` (top-level await is allowed)."
            )
        return "\n".join(lines)

    def stubs(self, names: Iterable[str]) -> str:
        """The Python stubs of these tools (the definitions the code is type-checked against,
        with their docstrings). A name is how the code calls a tool (``memory.read_graph``),
        its canonical id, or a whole namespace (``memory``). Raises ``UnknownTools`` naming
        close matches."""
        chosen: dict[str, ToolSignature] = {}
        unknown = []
        for name in dict.fromkeys(names):
            found = self._resolve(name)
            if not found:
                unknown.append(name)
            chosen.update((s.code_name, s) for s in found)
        if unknown:
            raise UnknownTools({n: self.close_matches(n) for n in unknown})
        found = list(chosen.values())
        if self._full is not None:
            found = [self._full(s.name) for s in found]
        return render_stubs(found)

    def _resolve(self, name: str) -> list[ToolSignature]:
        if name in self.by_code_name:
            return [self.by_code_name[name]]
        if name in self.signatures:
            return [self.signatures[name]]
        return [s for s in self.by_code_name.values() if s.namespace == name]

    def close_matches(self, name: str, limit: int = 5) -> list[str]:
        """Tools named like ``name`` (spelling), then tools about it (its words, ranked)."""
        spelled = difflib.get_close_matches(name, list(self.by_code_name), n=limit, cutoff=0.6)
        about = [hit.name for hit in self.index.search(name, limit)]
        return list(dict.fromkeys(spelled + about))[:limit]
