"""Tool signatures: from Python type hints or JSON schema to Python stubs.

A ``ToolSignature`` is what the code-writing model sees (a ``def`` stub in the prompt),
what the type checker checks calls against, and what binds positional arguments to
parameter names in declared order. It is plain data (pydantic), so it travels between
processes: the CPython sandbox runner builds its stub functions from it.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import reprlib
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, create_model
from pydantic.json_schema import PydanticJsonSchemaWarning

ParameterKind = Literal["positional_or_keyword", "keyword_only", "var_positional", "var_keyword"]


class ToolParameter(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    annotation: str = "Any"
    kind: ParameterKind = "positional_or_keyword"
    required: bool = True
    #: ``repr`` of the default value when not required (rendered into the stub).
    default_repr: str | None = None


class ToolSignature(BaseModel):
    """One host function as the sandboxed code sees it."""

    model_config = ConfigDict(frozen=True)

    name: str
    parameters: list[ToolParameter] = []
    return_annotation: str = "Any"
    description: str = ""
    #: Async tools are declared ``async def``: code can ``await asyncio.gather(...)`` them.
    is_async: bool = False
    #: JSON schema of the parameters object (for validation and for LLM tool schemas).
    parameters_schema: dict[str, Any] = {}

    # -- rendering -----------------------------------------------------------------

    def stub(self, *, with_docstring: bool = True) -> str:
        """``def name(a: str, b: int = 1) -> dict: ...`` with the description as docstring."""
        params: list[str] = []
        seen_kw_only = False
        for p in self.parameters:
            if p.kind == "var_positional":
                params.append(f"*{p.name}: {p.annotation}")
                seen_kw_only = True
                continue
            if p.kind == "var_keyword":
                params.append(f"**{p.name}: {p.annotation}")
                continue
            if p.kind == "keyword_only" and not seen_kw_only:
                params.append("*")
                seen_kw_only = True
            text = f"{p.name}: {p.annotation}"
            if not p.required:
                text += f" = {p.default_repr if p.default_repr is not None else '...'}"
            params.append(text)
        prefix = "async def" if self.is_async else "def"
        head = f"{prefix} {self.name}({', '.join(params)}) -> {self.return_annotation}:"
        if with_docstring and self.description.strip():
            doc = self.description.strip().replace('"""', "'''")
            indented = "\n".join(f"    {ln}" if ln.strip() else "" for ln in doc.splitlines()).lstrip()
            return f'{head}\n    """{indented}"""\n    ...'
        return f"{head} ..."

    # -- binding -------------------------------------------------------------------

    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Map a call's positional and keyword arguments to parameter names, returned in
        declared order. Raises ``TypeError`` worded as CPython words it, checked in
        CPython's order, so the code's author reads the error it knows."""
        positional = [p for p in self.parameters if p.kind == "positional_or_keyword"]
        keyword_only = [p for p in self.parameters if p.kind == "keyword_only"]
        var_pos = next((p for p in self.parameters if p.kind == "var_positional"), None)
        var_kw = next((p for p in self.parameters if p.kind == "var_keyword"), None)
        args = list(args)
        values: dict[str, Any] = {p.name: v for p, v in zip(positional, args)}
        if var_pos is not None:
            values[var_pos.name] = args[len(positional) :]
        names = {p.name for p in positional + keyword_only}
        extra: dict[str, Any] = {}
        for key, value in kwargs.items():
            if key not in names:
                if var_kw is None:
                    raise TypeError(f"{self.name}() got an unexpected keyword argument '{key}'")
                extra[key] = value
            elif key in values:
                raise TypeError(f"{self.name}() got multiple values for argument '{key}'")
            else:
                values[key] = value
        if var_kw is not None:
            values[var_kw.name] = extra
        if len(args) > len(positional) and var_pos is None:
            raise TypeError(self._too_many_positional(len(args), positional, keyword_only, kwargs))
        for group, label in ((positional, "positional"), (keyword_only, "keyword-only")):
            missing = [p.name for p in group if p.required and p.name not in values]
            if missing:
                raise TypeError(
                    f"{self.name}() missing {len(missing)} required {label} argument{_plural(len(missing))}: "
                    + _quoted_list(missing)
                )
        bound = {p.name: values[p.name] for p in self.parameters if p.name in values}
        if var_pos is not None and not bound[var_pos.name]:
            del bound[var_pos.name]
        if var_kw is not None and not bound[var_kw.name]:
            del bound[var_kw.name]
        return bound

    def _too_many_positional(
        self, given: int, positional: list[ToolParameter], keyword_only: list[ToolParameter], kwargs: Mapping[str, Any]
    ) -> str:
        optional = sum(1 for p in positional if not p.required)
        if optional:
            takes, plural = f"from {len(positional) - optional} to {len(positional)}", True
        else:
            takes, plural = str(len(positional)), len(positional) != 1
        kwonly_given = sum(1 for p in keyword_only if p.name in kwargs)
        kwonly = (
            f" positional argument{_plural(given)} (and {kwonly_given} keyword-only argument{_plural(kwonly_given)})"
            if kwonly_given
            else ""
        )
        verb = "was" if given == 1 and not kwonly_given else "were"
        return f"{self.name}() takes {takes} positional argument{'s' if plural else ''} but {given}{kwonly} {verb} given"

    def format_call(self, args: Sequence[Any], kwargs: Mapping[str, Any], *, max_len: int = 120) -> str:
        """``get_weather(city='Paris')``: a readable one-line summary of a call."""
        try:
            bound = self.bind(args, kwargs)
            parts = [f"{k}={_short_repr(v)}" for k, v in bound.items()]
        except TypeError:
            parts = [_short_repr(a) for a in args] + [f"{k}={_short_repr(v)}" for k, v in kwargs.items()]
        text = f"{self.name}({', '.join(parts)})"
        return text if len(text) <= max_len else text[: max_len - 4] + "...)"


_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 8


def _short_repr(value: Any) -> str:
    """A repr that stays short however large the value (a 40,000-row argument included)."""
    return _REPR.repr(value)


def _plural(n: int) -> str:
    return "" if n == 1 else "s"


def _quoted_list(names: Sequence[str]) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b', and 'c'``: CPython's list of missing arguments."""
    quoted = [f"'{n}'" for n in names]
    if len(quoted) <= 2:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


# -- from Python callables --------------------------------------------------------------


def annotation_to_str(annotation: Any) -> str:
    """Render a type hint as the source a stub needs (``list[str]``, ``dict[str, Any]``,
    ``str | None``, ``Literal['a', 'b']``). Classes a sandbox cannot know (pydantic
    models, dataclasses, TypedDicts) become ``dict[str, Any]``: values cross as JSON."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return "Any"
    if annotation is None or annotation is type(None):
        return "None"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return annotation_to_str(args[0])
    if origin is Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin in (typing.Union, types.UnionType):
        return " | ".join(annotation_to_str(a) for a in args)
    if origin is not None:
        name = {list: "list", dict: "dict", set: "set", frozenset: "frozenset", tuple: "tuple"}.get(origin)
        if name is None:
            name = getattr(origin, "__name__", "Any")
            if name in ("Sequence", "Iterable", "Collection"):
                name = "list"
            elif name in ("Mapping", "MutableMapping"):
                name = "dict"
            else:
                return "Any"
        if not args:
            return name
        rendered = ", ".join("..." if a is Ellipsis else annotation_to_str(a) for a in args)
        return f"{name}[{rendered}]"
    if isinstance(annotation, type):
        if annotation.__module__ == "builtins":
            return annotation.__name__
        if annotation.__name__ in ("datetime", "date", "time", "timedelta") and annotation.__module__ == "datetime":
            return "str"
        return "dict[str, Any]"
    if isinstance(annotation, str):
        return annotation
    return "Any"


def default_source(value: Any) -> str | None:
    """A default value as stub source, when its repr is a Python literal; None (rendered
    ``= ...``) for anything else (``datetime.date(...)``, ``<object at 0x...>``), whose repr
    would break the stub module every type check and every CPython sandbox parses."""
    text = repr(value)
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return text


def signature_from_callable(fn: Callable[..., Any], *, name: str | None = None) -> ToolSignature:
    """Build a signature from a typed Python function (sync or async)."""
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # unresolvable forward references: fall back to raw annotations
        hints = {k: v.annotation for k, v in sig.parameters.items()}
    params: list[ToolParameter] = []
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        hint = hints.get(p.name, p.annotation)
        kind: ParameterKind = {
            inspect.Parameter.POSITIONAL_ONLY: "positional_or_keyword",
            inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional_or_keyword",
            inspect.Parameter.KEYWORD_ONLY: "keyword_only",
            inspect.Parameter.VAR_POSITIONAL: "var_positional",
            inspect.Parameter.VAR_KEYWORD: "var_keyword",
        }[p.kind]
        required = p.default is inspect.Parameter.empty and kind not in ("var_positional", "var_keyword")
        params.append(
            ToolParameter(
                name=p.name,
                annotation=annotation_to_str(hint),
                kind=kind,
                required=required,
                default_repr=None if p.default is inspect.Parameter.empty else default_source(p.default),
            )
        )
        if kind in ("positional_or_keyword", "keyword_only"):
            py_type = Any if hint is inspect.Parameter.empty else hint
            fields[p.name] = (py_type, ... if required else p.default)
    try:
        with warnings.catch_warnings():  # a default JSON cannot hold is left out of the schema
            warnings.simplefilter("ignore", PydanticJsonSchemaWarning)
            schema = create_model(f"{fn.__name__}_params", **fields).model_json_schema()
    except Exception:
        schema = {"type": "object"}
    ret = hints.get("return", sig.return_annotation)
    return ToolSignature(
        name=name or fn.__name__,
        parameters=params,
        return_annotation=annotation_to_str(ret),
        description=inspect.getdoc(fn) or "",
        is_async=inspect.iscoroutinefunction(fn),
        parameters_schema=schema,
    )


# -- from JSON schema ---------------------------------------------------------------------

_JSON_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


def json_schema_to_annotation(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None) -> str:
    """Render a JSON schema fragment as a Python annotation."""
    defs = defs or {}
    if "$ref" in schema:
        ref = schema["$ref"].rsplit("/", 1)[-1]
        target = defs.get(ref)
        return json_schema_to_annotation(target, defs) if target else "dict[str, Any]"
    if "enum" in schema:
        return f"Literal[{', '.join(repr(v) for v in schema['enum'])}]"
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(dict.fromkeys(json_schema_to_annotation(s, defs) for s in schema[key]))
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(json_schema_to_annotation({**schema, "type": x}, defs) for x in t)
    if t == "array":
        items = schema.get("items")
        return f"list[{json_schema_to_annotation(items, defs)}]" if isinstance(items, Mapping) else "list[Any]"
    if t == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra:
            return f"dict[str, {json_schema_to_annotation(extra, defs)}]"
        return "dict[str, Any]"
    if isinstance(t, str) and t in _JSON_TYPES:
        return _JSON_TYPES[t]
    return "Any"


def signature_from_json_schema(
    name: str,
    parameters_schema: Mapping[str, Any],
    *,
    description: str = "",
    returns_schema: Mapping[str, Any] | None = None,
    is_async: bool = False,
) -> ToolSignature:
    """Build a signature from an LLM-style tool schema (an ``object`` of properties).
    Properties keep their declared order; required ones come first so the stub parses."""
    defs = parameters_schema.get("$defs", {})
    required = set(parameters_schema.get("required", []))
    props: Mapping[str, Any] = parameters_schema.get("properties", {})
    params: list[ToolParameter] = []
    for prop, sub in props.items():
        if not prop.isidentifier() or keyword.iskeyword(prop):
            raise ValueError(f"tool {name!r}: property {prop!r} is not a valid Python parameter name")
        is_required = prop in required
        # An optional property without a default is simply omitted from the call: ``= ...``
        # says "has a default" without claiming None is an accepted value.
        default_repr = default_source(sub["default"]) if not is_required and "default" in sub else None
        params.append(
            ToolParameter(
                name=prop,
                annotation=json_schema_to_annotation(sub, defs),
                required=is_required,
                default_repr=default_repr,
            )
        )
    params.sort(key=lambda p: not p.required)  # stable: declared order within each group
    return ToolSignature(
        name=name,
        parameters=params,
        return_annotation=json_schema_to_annotation(returns_schema, defs) if returns_schema else "Any",
        description=description,
        is_async=is_async,
        parameters_schema=dict(parameters_schema),
    )


# -- normalising what callers pass ----------------------------------------------------------

FunctionsSpec = Sequence[str] | Mapping[str, "ToolSignature | Callable[..., Any] | Mapping[str, Any]"]


def normalize_functions(functions: FunctionsSpec | None) -> dict[str, ToolSignature]:
    """Accept a list of names (untyped ``(*args, **kwargs) -> Any``) or a mapping of names to
    signatures, callables or JSON schemas; return name -> ToolSignature."""
    if functions is None:
        return {}
    out: dict[str, ToolSignature] = {}
    if isinstance(functions, Mapping):
        items = list(functions.items())
    else:
        items = [(n, None) for n in functions]
    for fname, spec in items:
        if not str(fname).isidentifier() or keyword.iskeyword(fname):
            raise ValueError(f"{fname!r} is not a valid Python function name")
        if spec is None:
            out[fname] = ToolSignature(
                name=fname,
                parameters=[
                    ToolParameter(name="args", annotation="Any", kind="var_positional", required=False),
                    ToolParameter(name="kwargs", annotation="Any", kind="var_keyword", required=False),
                ],
            )
        elif isinstance(spec, ToolSignature):
            out[fname] = spec if spec.name == fname else spec.model_copy(update={"name": fname})
        elif callable(spec):
            out[fname] = signature_from_callable(spec, name=fname)
        elif isinstance(spec, Mapping):
            if "parameters" in spec or "description" in spec:
                out[fname] = signature_from_json_schema(
                    fname,
                    spec.get("parameters", {"type": "object", "properties": {}}),
                    description=spec.get("description", ""),
                    returns_schema=spec.get("returns"),
                    is_async=bool(spec.get("is_async", False)),
                )
            else:
                out[fname] = signature_from_json_schema(fname, spec)
        else:
            raise TypeError(f"cannot build a signature for {fname!r} from {type(spec).__name__}")
    return out


def render_stubs(signatures: Mapping[str, ToolSignature] | Sequence[ToolSignature], *, with_docstrings: bool = True) -> str:
    """A stub module: the typing imports plus one ``def`` per tool."""
    sigs = list(signatures.values()) if isinstance(signatures, Mapping) else list(signatures)
    header = "from typing import Any, Literal\n"
    return header + "\n\n" + "\n\n".join(s.stub(with_docstring=with_docstrings) for s in sigs) + "\n"

