"""The index behind the ``search`` tool: BM25 (PyPI ``rank-bm25``) over each tool's name,
description and parameter names, so a model finds the few tools it needs among thousands
without being shown them all."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from codemode.runtimes.signatures import ToolSignature

#: How much each part of a tool counts: a word of its name says more than one of its docstring.
NAME_WEIGHT, PARAMETER_WEIGHT, DESCRIPTION_WEIGHT = 3, 2, 1
#: ``getWeather``, ``get_weather``, ``get-weather 2`` -> get, weather, 2
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def tokens(text: str) -> list[str]:
    """Lower-case words of ``text``, split at case changes, underscores and punctuation, with
    plurals made singular so "forecasts" finds ``get_forecast`` and "cities" ``city``."""
    out = []
    for word in _WORD.findall(text):
        word = word.lower()
        if len(word) > 4 and word.endswith("ies"):
            word = word[:-3] + "y"
        elif len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.append(word)
    return out


def one_line(description: str, limit: int = 160) -> str:
    """The first sentence (or line) of a description, cut to ``limit`` characters."""
    text = description.strip().split("\n\n", 1)[0].replace("\n", " ")
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1] + "…"


@dataclass(frozen=True)
class SearchHit:
    name: str
    description: str
    #: ``get_weather(city: str) -> dict``
    signature: str


def call_signature(sig: ToolSignature) -> str:
    """The stub's head without ``def`` and docstring, by the name the code calls:
    ``get_weather(city: str) -> dict``, ``memory.read_graph() -> dict[str, Any]``."""
    head = sig.stub(with_docstring=False).removeprefix("async ").removeprefix("def ")
    head = sig.code_name + head[len(sig.attr) :]
    prefix = "async " if sig.is_async else ""
    return prefix + head.removesuffix(": ...").removesuffix(":")


class ToolIndex:
    """Ranks tools for a free-text query."""

    def __init__(self, signatures: Iterable[ToolSignature]) -> None:
        from rank_bm25 import BM25Okapi

        self._tools = list(signatures)
        self._docs = [self._document(s) for s in self._tools]
        self._words = [set(d) for d in self._docs]
        self._bm25 = BM25Okapi(self._docs) if any(self._docs) else None

    @staticmethod
    def _document(sig: ToolSignature) -> list[str]:
        params = " ".join(p.name for p in sig.parameters)
        return (
            tokens(sig.code_name) * NAME_WEIGHT
            + tokens(params) * PARAMETER_WEIGHT
            + tokens(sig.description) * DESCRIPTION_WEIGHT
        )

    def __len__(self) -> int:
        return len(self._tools)

    def search(self, query: str, limit: int = 10) -> list[SearchHit]:
        """The tools sharing a word with the query, best first (ties by name)."""
        words = tokens(query)
        if not words or self._bm25 is None:
            return []
        scores = self._bm25.get_scores(words)
        wanted = set(words)
        ranked = sorted(
            (i for i, present in enumerate(self._words) if present & wanted),
            key=lambda i: (-scores[i], self._tools[i].code_name),
        )
        return [
            SearchHit(self._tools[i].code_name, one_line(self._tools[i].description), call_signature(self._tools[i]))
            for i in ranked[:limit]
        ]
