"""Tool signatures: Python hints and JSON schemas to stubs, argument binding, call summaries."""

from __future__ import annotations

import ast
import datetime
import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Optional

import pytest
from pydantic import BaseModel, Field

from codemode.runtimes import (
    ToolSignature,
    normalize_functions,
    render_stubs,
    signature_from_callable,
    signature_from_json_schema,
)


class Address(BaseModel):
    street: str
    zip_code: str


def book_hotel(
    city: str,
    nights: int = 1,
    *,
    room: Literal["single", "double"] = "single",
    note: Optional[str] = None,
    tags: list[str] | None = None,
    prices: dict[str, float] = {},
    address: Address | None = None,
    arrival: datetime.date | None = None,
    guests: Annotated[int, Field(ge=1)] = 1,
) -> dict[str, Any]:
    """Book a hotel room.

    Returns the booking."""
    raise NotImplementedError


async def fetch_page(url: str, retries: int = 2) -> str:
    raise NotImplementedError


def untyped(a, b=3):  # type: ignore[no-untyped-def]
    raise NotImplementedError


SENTINEL = object()


def odd_defaults(day: datetime.date = datetime.date(2024, 1, 1), marker: object = SENTINEL) -> None:
    raise NotImplementedError


def params(sig: ToolSignature) -> dict[str, tuple[str, str, bool, str | None]]:
    return {p.name: (p.annotation, p.kind, p.required, p.default_repr) for p in sig.parameters}


# -- from Python hints ---------------------------------------------------------------------


def test_hints_become_stub_annotations() -> None:
    sig = signature_from_callable(book_hotel)
    assert params(sig) == {
        "city": ("str", "positional_or_keyword", True, None),
        "nights": ("int", "positional_or_keyword", False, "1"),
        "room": ("Literal['single', 'double']", "keyword_only", False, "'single'"),
        "note": ("str | None", "keyword_only", False, "None"),
        "tags": ("list[str] | None", "keyword_only", False, "None"),
        "prices": ("dict[str, float]", "keyword_only", False, "{}"),
        "address": ("dict[str, Any] | None", "keyword_only", False, "None"),  # a model crosses as JSON
        "arrival": ("str | None", "keyword_only", False, "None"),  # dates cross as ISO strings
        "guests": ("int", "keyword_only", False, "1"),  # Annotated metadata dropped
    }
    assert sig.return_annotation == "dict[str, Any]"
    assert not sig.is_async


def test_stub_text() -> None:
    stub = signature_from_callable(book_hotel).stub()
    assert stub.startswith(
        "def book_hotel(city: str, nights: int = 1, *, room: Literal['single', 'double'] = 'single', "
    )
    assert stub.endswith('-> dict[str, Any]:\n    """Book a hotel room.\n\n    Returns the booking."""\n    ...')
    assert signature_from_callable(book_hotel).stub(with_docstring=False).endswith("-> dict[str, Any]: ...")


def test_async_tools_are_async_stubs() -> None:
    sig = signature_from_callable(fetch_page)
    assert sig.is_async
    assert sig.stub() == "async def fetch_page(url: str, retries: int = 2) -> str: ..."


def test_missing_hints_are_any() -> None:
    sig = signature_from_callable(untyped)
    assert sig.stub() == "def untyped(a: Any, b: Any = 3) -> Any: ..."


@pytest.mark.parametrize(
    ("hint", "expected"),
    [
        (typing.List[int], "list[int]"),
        (typing.Dict[str, list[int]], "dict[str, list[int]]"),
        (Sequence[str], "list[str]"),
        (Mapping[str, int], "dict[str, int]"),
        (tuple[int, ...], "tuple[int, ...]"),
        (set[str], "set[str]"),
        (typing.Union[int, str, None], "int | str | None"),
        (Callable[[int], int], "Any"),
        (None, "None"),
        (bytes, "bytes"),
    ],
)
def test_annotation_rendering(hint: Any, expected: str) -> None:
    def tool(x):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    tool.__annotations__ = {"x": hint, "return": hint}
    sig = signature_from_callable(tool)
    assert sig.parameters[0].annotation == expected
    assert sig.return_annotation == expected


def test_defaults_that_are_not_literals_render_as_ellipsis() -> None:
    stub = signature_from_callable(odd_defaults).stub()
    assert stub == "def odd_defaults(day: str = ..., marker: object = ...) -> None: ..."


def test_parameters_schema_comes_from_pydantic() -> None:
    schema = signature_from_callable(book_hotel).parameters_schema
    assert schema["required"] == ["city"]
    assert schema["properties"]["room"]["enum"] == ["single", "double"]
    assert schema["properties"]["guests"]["minimum"] == 1


def test_every_stub_module_parses() -> None:
    tools = [book_hotel, fetch_page, untyped, odd_defaults]
    module = render_stubs({f.__name__: signature_from_callable(f) for f in tools})
    tree = ast.parse(module)
    assert [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))] == [
        f.__name__ for f in tools
    ]


# -- from JSON schema ------------------------------------------------------------------------

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "units": {"type": "string", "enum": ["C", "F"]},
        "city": {"type": "string"},
        "days": {"type": "integer", "default": 3},
        "when": {"anyOf": [{"type": "string"}, {"type": "null"}, {"type": "string", "format": "date"}]},
        "ids": {"type": "array", "items": {"type": "integer"}},
        "raw": {"type": "array"},
        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
        "address": {"$ref": "#/$defs/Address"},
        "maybe": {"type": ["string", "null"]},
        "mode": {"const": "fast"},
    },
    "required": ["city", "address"],
    "$defs": {"Address": {"type": "object", "properties": {"street": {"type": "string"}}}},
}


def test_json_schema_to_parameters() -> None:
    sig = signature_from_json_schema("weather", WEATHER_SCHEMA, description="The weather.")
    assert list(params(sig).items()) == [
        # required first (so the stub parses), each group in declared order
        ("city", ("str", "positional_or_keyword", True, None)),
        ("address", ("dict[str, Any]", "positional_or_keyword", True, None)),
        ("units", ("Literal['C', 'F']", "positional_or_keyword", False, None)),
        ("days", ("int", "positional_or_keyword", False, "3")),
        ("when", ("str | None", "positional_or_keyword", False, None)),  # duplicates merged
        ("ids", ("list[int]", "positional_or_keyword", False, None)),
        ("raw", ("list[Any]", "positional_or_keyword", False, None)),
        ("scores", ("dict[str, float]", "positional_or_keyword", False, None)),
        ("maybe", ("str | None", "positional_or_keyword", False, None)),
        ("mode", ("Literal['fast']", "positional_or_keyword", False, None)),
    ]
    assert sig.parameters_schema == WEATHER_SCHEMA
    # Optional without a default: "= ...", never a claim that None is accepted.
    assert "units: Literal['C', 'F'] = ..., days: int = 3," in sig.stub()
    ast.parse(sig.stub())


def test_json_schema_return_and_async() -> None:
    sig = signature_from_json_schema(
        "search",
        {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        returns_schema={"type": "array", "items": {"type": "object"}},
        is_async=True,
    )
    assert sig.stub() == "async def search(q: str) -> list[dict[str, Any]]: ..."


def test_json_schema_rejects_names_python_cannot_use() -> None:
    with pytest.raises(ValueError, match="not a valid Python parameter name"):
        signature_from_json_schema("t", {"type": "object", "properties": {"from": {"type": "string"}}})
    with pytest.raises(ValueError, match="not a valid Python parameter name"):
        signature_from_json_schema("t", {"type": "object", "properties": {"first-name": {"type": "string"}}})


# -- normalising what callers pass -------------------------------------------------------------


def test_normalize_functions_accepts_every_spelling() -> None:
    sigs = normalize_functions(
        {
            "hotel": book_hotel,
            "weather": {"description": "The weather.", "parameters": WEATHER_SCHEMA},
            "raw": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
            "renamed": signature_from_callable(fetch_page),
        }
    )
    assert sigs["hotel"].name == "hotel" and sigs["hotel"].parameters[0].name == "city"
    assert sigs["weather"].description == "The weather."
    assert sigs["raw"].stub() == "def raw(n: int) -> Any: ..."
    assert sigs["renamed"].stub().startswith("async def renamed(url: str")
    untyped_sigs = normalize_functions(["lookup"])
    assert untyped_sigs["lookup"].stub() == "def lookup(*args: Any, **kwargs: Any) -> Any: ..."
    assert normalize_functions(None) == {}


def test_normalize_functions_rejects_bad_names_and_specs() -> None:
    with pytest.raises(ValueError):
        normalize_functions(["not valid"])
    with pytest.raises(ValueError):
        normalize_functions(["class"])
    with pytest.raises(TypeError):
        normalize_functions({"x": 42})  # type: ignore[dict-item]


# -- binding -----------------------------------------------------------------------------------


def test_positional_args_bind_in_declared_order() -> None:
    sig = signature_from_json_schema("weather", WEATHER_SCHEMA)
    assert sig.bind(["Paris", {"street": "x"}, "F"], {"days": 2}) == {
        "city": "Paris",
        "address": {"street": "x"},
        "units": "F",
        "days": 2,
    }
    # keywords come back in declared order too, whatever order the code wrote them in
    assert list(sig.bind([], {"days": 1, "address": {}, "city": "Oslo"})) == ["city", "address", "days"]


def tool_a(a, b=1, *, k, m=2):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def tool_one(a):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def tool_none():  # type: ignore[no-untyped-def]
    raise NotImplementedError


def tool_three(a, b, c):  # type: ignore[no-untyped-def]
    raise NotImplementedError


def tool_var(a, *rest, **options):  # type: ignore[no-untyped-def]
    raise NotImplementedError


CALLS: list[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = [
    (tool_a, (1, 2, 3), {"k": 1}),
    (tool_a, (1, 2, 3), {}),
    (tool_a, (1, 2, 3), {"z": 1}),
    (tool_a, (1,), {}),
    (tool_a, (), {}),
    (tool_a, (1,), {"a": 2, "k": 1}),
    (tool_a, (1,), {"k": 1, "z": 3}),
    (tool_a, (), {"k": 1, "b": 3, "a": 2}),
    (tool_one, (1, 2), {}),
    (tool_none, (1,), {}),
    (tool_three, (), {}),
    (tool_three, (1,), {}),
    (tool_var, (1, 2, 3), {"x": 1}),
    (tool_var, (), {"a": 1}),
    (tool_var, (), {}),
]


@pytest.mark.parametrize(("fn", "args", "kwargs"), CALLS)
def test_bind_agrees_with_cpython(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The same call against the real function: the same error text, or the same binding."""
    sig = signature_from_callable(fn)
    try:
        fn(*args, **kwargs)
    except NotImplementedError:
        expected = dict(inspect.signature(fn).bind(*args, **kwargs).arguments)
        expected = {k: list(v) if isinstance(v, tuple) else v for k, v in expected.items() if v not in ((), {})}
        assert sig.bind(args, kwargs) == expected
    except TypeError as err:
        with pytest.raises(TypeError) as ours:
            sig.bind(args, kwargs)
        assert str(ours.value) == str(err)
    else:
        pytest.fail("the real function should raise")


# -- call summaries ----------------------------------------------------------------------------


def test_format_call() -> None:
    sig = signature_from_callable(book_hotel)
    assert sig.format_call(["Paris", 2], {"room": "double"}) == "book_hotel(city='Paris', nights=2, room='double')"
    # a call that does not bind is still shown, as written
    assert sig.format_call([], {"town": "Oslo"}) == "book_hotel(town='Oslo')"
    long = sig.format_call(["x" * 500], {})  # a large value is shortened, not copied whole
    assert len(long) <= 120 and "..." in long and long.startswith("book_hotel(city='xxx")
    assert sig.format_call(["x" * 500], {}, max_len=40) == "book_hotel(city='" + "x" * 19 + "...)"
