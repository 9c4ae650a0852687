"""Tool signatures: from Python type hints or JSON schema to Python stubs.

A ``ToolSignature`` is what the code-writing model sees (a ``def`` stub in the prompt),
what the type checker checks calls against, and what binds positional arguments to
parameter names in declared order. It is plain data (pydantic), so it travels between
processes: the CPython sandbox runner builds its stub functions from it.

A tool may live in a namespace (seed 004: ``memory.read_graph()`` for an MCP server's
tool): its ``path`` is how the code calls it, while ``name`` stays its identity (the
canonical id ``mcp:memory/read_graph``), which the runtimes report in every call. Stubs
declare a namespace as a class of methods and one variable of that class, which is what
both the type checker and the model read best.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import reprlib
import types
import typing
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
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

    #: The function's identity: what a runtime reports as ``FunctionCall.function_name``.
    name: str
    #: How the code calls it when that is not ``name``: ``namespace.function`` (both Python
    #: identifiers), e.g. ``memory.read_graph`` for ``mcp:memory/read_graph``.
    path: str | None = None
    parameters: list[ToolParameter] = []
    return_annotation: str = "Any"
    description: str = ""
    #: Async tools are declared ``async def``: code can ``await asyncio.gather(...)`` them.
    is_async: bool = False
    #: JSON schema of the parameters object (for validation and for LLM tool schemas).
    parameters_schema: dict[str, Any] = {}

    # -- naming --------------------------------------------------------------------

    @property
    def code_name(self) -> str:
        """How the code writes a call: ``get_weather`` or ``memory.read_graph``."""
        return self.path or self.name

    @property
    def namespace(self) -> str | None:
        """The namespace the function lives in (``memory``), or None for a plain function."""
        return self.path.partition(".")[0] if self.path else None

    @property
    def attr(self) -> str:
        """The function's own name: the last part of ``code_name``."""
        return self.code_name.rpartition(".")[2]

    # -- rendering -----------------------------------------------------------------

    def stub(self, *, with_docstring: bool = True, method: bool = False) -> str:
        """``def name(a: str, b: int = 1) -> dict: ...`` with the description as docstring.
        The function is named by its last name (``read_graph`` for ``memory.read_graph``);
        ``method``: rendered as a method of its namespace's class (a ``self`` first)."""
        params: list[str] = ["self"] if method else []
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
        head = f"{prefix} {self.attr}({', '.join(params)}) -> {self.return_annotation}:"
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
                    raise TypeError(f"{self.code_name}() got an unexpected keyword argument '{key}'")
                extra[key] = value
            elif key in values:
                raise TypeError(f"{self.code_name}() got multiple values for argument '{key}'")
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
                    f"{self.code_name}() missing {len(missing)} required {label} argument{_plural(len(missing))}: "
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
        return f"{self.code_name}() takes {takes} positional argument{'s' if plural else ''} but {given}{kwonly} {verb} given"

    def format_call(self, args: Sequence[Any], kwargs: Mapping[str, Any], *, max_len: int = 120) -> str:
        """``get_weather(city='Paris')``: a readable one-line summary of a call."""
        try:
            bound = self.bind(args, kwargs)
            parts = [f"{k}={_short_repr(v)}" for k, v in bound.items()]
        except TypeError:
            parts = [_short_repr(a) for a in args] + [f"{k}={_short_repr(v)}" for k, v in kwargs.items()]
        text = f"{self.code_name}({', '.join(parts)})"
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
#: How deep ``$ref`` chains and nested shapes are followed (a recursive schema stops here).
_MAX_DEPTH = 6


def _definitions(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A schema's named sub-schemas (``$defs``, or draft-07's ``definitions``)."""
    defs: dict[str, Any] = {}
    for key in ("definitions", "$defs"):
        if isinstance(schema.get(key), Mapping):
            defs.update(schema[key])
    return defs


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any] | None:
    ref = schema["$ref"]
    target = defs.get(ref.rsplit("/", 1)[-1]) if isinstance(ref, str) else None
    return target if isinstance(target, Mapping) else None


def json_schema_to_annotation(
    schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None, _depth: int = 0
) -> str:
    """Render a JSON schema fragment as a Python annotation. Objects become
    ``dict[str, Any]`` (or ``dict[str, X]`` for a map), never a ``TypedDict``: Monty's
    type checker rejects a plain ``dict`` (a variable, an appended list, another tool's
    result) where a TypedDict is declared, which is how agents' code builds arguments;
    ``json_schema_shape`` documents the keys instead."""
    defs = defs or {}
    if _depth > _MAX_DEPTH or not isinstance(schema, Mapping):
        return "Any"
    if "$ref" in schema:
        target = _resolve(schema, defs)
        return json_schema_to_annotation(target, defs, _depth + 1) if target else "dict[str, Any]"
    if "enum" in schema and isinstance(schema["enum"], list) and schema["enum"]:
        return f"Literal[{', '.join(repr(v) for v in schema['enum'])}]"
    if "const" in schema:
        return f"Literal[{schema['const']!r}]"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(dict.fromkeys(json_schema_to_annotation(s, defs, _depth + 1) for s in schema[key]))
    t = schema.get("type")
    if isinstance(t, list):
        return " | ".join(dict.fromkeys(json_schema_to_annotation({**schema, "type": x}, defs, _depth) for x in t))
    if t == "array":
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return "list[Any]"
        return f"list[{json_schema_to_annotation(items, defs, _depth + 1)}]"
    if t == "object":
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping) and extra and not schema.get("properties"):
            return f"dict[str, {json_schema_to_annotation(extra, defs, _depth + 1)}]"
        return "dict[str, Any]"
    if isinstance(t, str) and t in _JSON_TYPES:
        return _JSON_TYPES[t]
    return "Any"


def json_schema_shape(schema: Mapping[str, Any], defs: Mapping[str, Any] | None = None, _depth: int = 0) -> str:
    """A compact description of what a schema holds, for docstrings: objects show their keys
    (``{name: str, tags?: list[str]}``, ``?`` for optional ones), arrays ``list of ...``."""
    defs = defs or {}
    if _depth > 4 or not isinstance(schema, Mapping):
        return "..."
    if "$ref" in schema:
        target = _resolve(schema, defs)
        return json_schema_shape(target, defs, _depth + 1) if target else "{...}"
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return " | ".join(dict.fromkeys(json_schema_shape(s, defs, _depth + 1) for s in schema[key]))
    t = schema.get("type")
    props = schema.get("properties")
    if (t == "object" or (t is None and isinstance(props, Mapping))) and isinstance(props, Mapping) and props:
        required = set(schema.get("required") or [])
        parts = [
            f"{k}{'' if k in required else '?'}: {json_schema_shape(v, defs, _depth + 1)}" for k, v in props.items()
        ]
        return "{" + ", ".join(parts) + "}"
    if t == "array" and isinstance(schema.get("items"), Mapping):
        inner = json_schema_shape(schema["items"], defs, _depth + 1)
        return f"list of {inner}" if inner.startswith("{") else f"list[{inner}]"
    return json_schema_to_annotation(schema, defs, _depth)


def _has_keys(schema: Any, defs: Mapping[str, Any]) -> bool:
    """Whether a schema (or the items of an array of them) is an object with named keys."""
    if not isinstance(schema, Mapping):
        return False
    if "$ref" in schema:
        target = _resolve(schema, defs)
        return target is not None and _has_keys(target, defs)
    if schema.get("type") == "array":
        return _has_keys(schema.get("items"), defs)
    return isinstance(schema.get("properties"), Mapping) and bool(schema["properties"])


def _schema_docstring(
    description: str,
    props: Mapping[str, Any],
    names: Mapping[str, str],
    defs: Mapping[str, Any],
    returns_schema: Mapping[str, Any] | None,
) -> str:
    """The description, then one line per parameter the annotation alone does not explain
    (its own description, the keys of a nested object), then the result's keys."""
    lines: list[str] = []
    for wire, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        what = str(sub.get("description") or "").strip()
        shape = json_schema_shape(sub, defs) if _has_keys(sub, defs) else ""
        if what or shape:
            text = " ".join(x for x in (shape, f"-- {what}" if what and shape else what) if x)
            lines.append(f"    {names.get(wire, wire)}: {text}")
    doc = description.strip()
    if lines:
        doc += ("\n\n" if doc else "") + "Args:\n" + "\n".join(lines)
    if returns_schema and _has_keys(returns_schema, defs):
        doc += ("\n\n" if doc else "") + "Returns: " + json_schema_shape(returns_schema, defs)
    return doc


def python_parameter_name(prop: str) -> str:
    """A valid Python parameter name for a schema property: ``first-name`` -> ``first_name``,
    ``from`` -> ``from_``, ``2d`` -> ``_2d``."""
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in prop) or "_"
    if not name.isidentifier():
        name = "_" + name
    if keyword.iskeyword(name) or name in ("self",):
        name += "_"
    return name


def signature_from_json_schema(
    name: str,
    parameters_schema: Mapping[str, Any],
    *,
    description: str = "",
    returns_schema: Mapping[str, Any] | None = None,
    is_async: bool = False,
    path: str | None = None,
    aliases: Mapping[str, str] | None = None,
    document: bool = False,
) -> ToolSignature:
    """Build a signature from an LLM-style tool schema (an ``object`` of properties).
    Properties keep their declared order; required ones come first so the stub parses.

    ``aliases``: property -> Python parameter name, for properties that are not valid
    names (``python_parameter_name``); any other such property raises ``ValueError``.
    ``document``: add the parameters' descriptions, the keys of nested objects and the
    keys of the result (``returns_schema``) to the docstring."""
    defs = _definitions(parameters_schema)
    aliases = dict(aliases or {})
    required = set(parameters_schema.get("required", []))
    props: Mapping[str, Any] = parameters_schema.get("properties", {}) or {}
    params: list[ToolParameter] = []
    for prop, sub in props.items():
        pname = aliases.get(prop, prop)
        if not pname.isidentifier() or keyword.iskeyword(pname):
            raise ValueError(f"tool {name!r}: property {prop!r} is not a valid Python parameter name")
        sub = sub if isinstance(sub, Mapping) else {}
        is_required = prop in required
        # An optional property without a default is simply omitted from the call: ``= ...``
        # says "has a default" without claiming None is an accepted value.
        default_repr = default_source(sub["default"]) if not is_required and "default" in sub else None
        params.append(
            ToolParameter(
                name=pname,
                annotation=json_schema_to_annotation(sub, defs),
                required=is_required,
                default_repr=default_repr,
            )
        )
    params.sort(key=lambda p: not p.required)  # stable: declared order within each group
    return_defs = {**defs, **_definitions(returns_schema or {})}
    if document:
        description = _schema_docstring(description, props, aliases, defs, returns_schema)
    return ToolSignature(
        name=name,
        path=path,
        parameters=params,
        return_annotation=json_schema_to_annotation(returns_schema, return_defs) if returns_schema else "Any",
        description=description,
        is_async=is_async,
        parameters_schema=dict(parameters_schema),
    )


# -- normalising what callers pass ----------------------------------------------------------

FunctionsSpec = Sequence[str] | Mapping[str, "ToolSignature | Callable[..., Any] | Mapping[str, Any]"]


def check_path(path: str) -> None:
    """``namespace.function``: two Python identifiers (not keywords); else ``ValueError``."""
    parts = path.split(".")
    if len(parts) != 2 or not all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
        raise ValueError(f"{path!r} is not a valid namespaced function name (expected namespace.function)")


def normalize_functions(functions: FunctionsSpec | None) -> dict[str, ToolSignature]:
    """Accept a list of names (untyped ``(*args, **kwargs) -> Any``) or a mapping of names to
    signatures, callables or JSON schemas; return name -> ToolSignature. A name that is not
    a Python identifier (a canonical id) is accepted for a signature with a ``path``."""
    if functions is None:
        return {}
    out: dict[str, ToolSignature] = {}
    if isinstance(functions, Mapping):
        items = list(functions.items())
    else:
        items = [(n, None) for n in functions]
    for fname, spec in items:
        if isinstance(spec, ToolSignature) and spec.path:
            check_path(spec.path)
        elif not str(fname).isidentifier() or keyword.iskeyword(fname):
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
    _check_names(out.values())
    return out


def _check_names(signatures: Iterable[ToolSignature]) -> None:
    """Two functions the code would reach by the same name, or a namespace named like a
    function: ``ValueError`` naming both (seed 004: collisions fail loudly)."""
    by_path: dict[str, str] = {}
    namespaces: dict[str, str] = {}
    for sig in signatures:
        owner = by_path.get(sig.code_name)
        if owner is not None and owner != sig.name:
            raise ValueError(f"{owner!r} and {sig.name!r} are both called {sig.code_name!r} in the code")
        by_path[sig.code_name] = sig.name
        if sig.namespace:
            namespaces.setdefault(sig.namespace, sig.name)
    for ns, member in namespaces.items():
        if ns in by_path:
            raise ValueError(
                f"function {by_path[ns]!r} and the namespace of {member!r} are both called {ns!r} in the code"
            )


def namespaces_of(signatures: Iterable[ToolSignature]) -> dict[str, dict[str, ToolSignature]]:
    """namespace -> function name -> signature, for the namespaced functions."""
    out: dict[str, dict[str, ToolSignature]] = {}
    for sig in signatures:
        if sig.namespace:
            out.setdefault(sig.namespace, {})[sig.attr] = sig
    return out


def namespace_class(namespace: str) -> str:
    """The stub class of a namespace: ``memory`` -> ``MemoryTools``."""
    return "".join(part[:1].upper() + part[1:] for part in namespace.split("_") if part) + "Tools"


def render_stubs(signatures: Mapping[str, ToolSignature] | Sequence[ToolSignature], *, with_docstrings: bool = True) -> str:
    """A stub module: the typing imports plus one ``def`` per tool; a namespace is a class
    whose methods are its functions, and a variable of that class (``memory: MemoryTools``),
    so ``memory.read_graph()`` reads (and type-checks) as a call of a declared function."""
    sigs = list(signatures.values()) if isinstance(signatures, Mapping) else list(signatures)
    header = "from typing import Any, Literal\n"
    blocks = [s.stub(with_docstring=with_docstrings) for s in sigs if not s.namespace]
    for ns, members in namespaces_of(sigs).items():
        cls = namespace_class(ns)
        methods = "\n\n".join(
            "\n".join(
                "    " + ln if ln.strip() else ""
                for ln in s.stub(with_docstring=with_docstrings, method=True).splitlines()
            )
            for s in members.values()
        )
        doc = f'    """The {ns} namespace: call its functions as {ns}.name(...)."""\n\n' if with_docstrings else ""
        blocks.append(f"class {cls}:\n{doc}{methods}\n\n\n{ns}: {cls}")
    return header + "\n\n" + "\n\n".join(blocks) + "\n"
