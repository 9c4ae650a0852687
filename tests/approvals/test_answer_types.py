"""An answer given instead of the tool is converted by the tool's returns schema (pydantic's
``TypeAdapter(return hint).json_schema()``) to what the tool would have returned: the same
JSON pydantic itself makes of the value (missing defaults aside)."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter

from codemode.approvals.decision_checks import check_answer, conform_answer


class Receipt(BaseModel):
    to: str
    amount: float
    count: int
    tags: list[float]
    note: float | None


CASES: list[tuple[Any, Any]] = [
    (float, 0),
    (int, 3.0),
    (bool, True),
    (int | float, 3),
    (float | str, 3),
    (float | None, None),
    (tuple[int, float], [1.0, 2]),
    (dict[str, float], {"a": 1, "b": 2.5}),
    (Receipt, {"to": "bo", "amount": 1, "count": 2.0, "tags": [1, 2.5], "note": 4}),
    (list[Receipt], [{"to": "bo", "amount": 0, "count": 1, "tags": [], "note": None}]),
]


@pytest.mark.parametrize(("hint", "value"), CASES)
def test_answer_becomes_what_pydantic_makes_of_it(hint: Any, value: Any) -> None:
    adapter = TypeAdapter(hint)
    schema = adapter.json_schema()
    check_answer(schema, value)
    expected = adapter.dump_python(adapter.validate_python(value), mode="json")
    got = conform_answer(schema, value)
    assert got == expected and repr(got) == repr(expected)


def test_without_a_schema_the_answer_is_kept() -> None:
    assert repr(conform_answer(None, {"n": 0})) == "{'n': 0}"
