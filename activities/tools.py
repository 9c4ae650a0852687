"""Host tools: the ``@tool`` decorator, the registry, argument validation, ``current_call()``.

A tool is a plain typed Python function (sync or async) that runs as its own Temporal
activity type (named after the tool, so the UI shows ``get_weather``), with its own retry
policy. A tools module passed as ``--tools MODULE`` registers every public function
defined in it, decorated or not.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import importlib
import inspect
import json
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, TypeVar

from pydantic import ConfigDict, ValidationError, create_model
from pydantic_core import to_jsonable_python

from codemode.runtimes import artifacts
from codemode.runtimes.signatures import ToolSignature, signature_from_callable

from . import names
from .models import UndoSpec
from .snippets import compose
from .snippets import models as snippet_models

F = TypeVar("F", bound=Callable[..., Any])

#: Exception types a tool raises for bad input, not for a transient fault: never retried
#: unless a tool says otherwise with ``non_retryable=``.
DEFAULT_NON_RETRYABLE = ("TypeError", "ValueError", "KeyError", "PermissionError", "NotImplementedError")

#: Activity names of the sandbox and session steps and the storage upkeep: a tool may not take them.
RESERVED_NAMES = names.RESERVED


#: ``requires_approval`` as a function of the call: the call's arguments by parameter name in,
#: whether a person must approve it out. It runs on the host, in the sandbox step's activity,
#: and what it said is recorded with the call, so a replay never asks it again.
ApprovalPredicate = Callable[[dict[str, Any]], bool]

#: The activity types of a tool's compensation and reconcile (no tool can take them: a tool's
#: name is a Python identifier, or an MCP or CLI canonical id, ``mcp:...``, ``cli:...``).
COMPENSATE_PREFIX = "compensate:"
RECONCILE_PREFIX = "reconcile:"


@dataclass(frozen=True)
class Compensation:
    """How a call of a tool is undone (``@tool(compensate=...)``): ``fn(args, result)`` gets the
    call's arguments by parameter name and its result, and undoes what the call did. It runs as
    an activity of its own (``compensate:<tool>``) with this retry policy, once per call: use
    ``current_call().idempotency_key`` (``<execution>/<call>/compensate``) where the other side
    takes one. Returning ``False`` says there was nothing to undo (reported as such).
    ``requires_approval``: a person (under the approvers file's rules) approves it first."""

    fn: Callable[[dict[str, Any], Any], Any]
    max_attempts: int = 5
    timeout: timedelta = timedelta(seconds=60)
    non_retryable: tuple[str, ...] = DEFAULT_NON_RETRYABLE
    requires_approval: bool = False
    #: How people read it (``refund``; an MCP tool's: ``fs.move_file``).
    label: str = ""

    async def run(self, args: dict[str, Any], result: Any) -> Any:
        if inspect.iscoroutinefunction(self.fn):
            return await self.fn(args, result)
        return await asyncio.to_thread(self.fn, args, result)


def compensation(
    fn: Callable[[dict[str, Any], Any], Any],
    *,
    max_attempts: int = 5,
    timeout: timedelta = timedelta(seconds=60),
    non_retryable: Iterable[str | type[BaseException]] = DEFAULT_NON_RETRYABLE,
    requires_approval: bool = False,
) -> Compensation:
    """A compensation with its own policy: ``@tool(compensate=compensation(refund, max_attempts=10))``."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    names = tuple(n if isinstance(n, str) else n.__name__ for n in non_retryable)
    return Compensation(fn, max_attempts, timeout, names, requires_approval, getattr(fn, "__name__", ""))


@dataclass(frozen=True)
class Reconciled:
    """What a tool's ``reconcile`` found out about a call whose outcome a crash hid: whether it
    was applied, and then its result (what the compensation gets)."""

    applied: bool
    result: Any = None


#: ``reconcile(args)``: whether a call whose attempt was cut off (its worker died, it timed out,
#: the run was cancelled while it ran) was applied after all; ``current_call().idempotency_key``
#: is the call's own key. A bool, or ``Reconciled(applied, result)``.
Reconcile = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class ToolOptions:
    requires_approval: bool | ApprovalPredicate = False
    max_attempts: int = 3
    timeout: timedelta = timedelta(seconds=60)
    #: Exception type names that are never retried.
    non_retryable: tuple[str, ...] = DEFAULT_NON_RETRYABLE
    name: str | None = None
    #: Its results are private data (seed 001's ratchet): an execution with
    #: ``network="ratchet"`` loses its network, for good, before the code sees one.
    private_data: bool = False
    #: How a call is undone, and how an interrupted call is found out (issue 47).
    compensate: Compensation | None = None
    reconcile: Reconcile | None = None


def tool(
    fn: F | None = None,
    *,
    requires_approval: bool | ApprovalPredicate = False,
    max_attempts: int = 3,
    timeout: timedelta = timedelta(seconds=60),
    non_retryable: Iterable[str | type[BaseException]] = DEFAULT_NON_RETRYABLE,
    name: str | None = None,
    private_data: bool = False,
    compensate: Compensation | Callable[[dict[str, Any], Any], Any] | None = None,
    reconcile: Reconcile | None = None,
) -> Any:
    """Mark a function as a tool with its policy. Usable bare (``@tool``) or with options.

    ``non_retryable`` lists exception types (or names) that end the call at once; the
    default treats bad-input errors (ValueError, TypeError, KeyError, ...) as final.
    ``requires_approval``: True, or a predicate of the call's arguments (parameter name ->
    value) that says whether this call needs a person (``lambda a: a["amount"] > 500``).
    ``private_data``: what the tool returns is private (patient records, a user's mail): in
    an execution with ``network="ratchet"`` the sandbox is cut off the network before the
    code sees the first such result, for the rest of the execution.
    ``compensate``: how a call is undone, ``fn(args, result)`` or a ``compensation(...)`` with
    its own policy; a rollback runs it (``docs/guides/undo.md``). ``reconcile``: ``fn(args)``,
    whether a call whose outcome a crash hid was applied (else such a call is reported, never
    compensated blindly)."""
    if max_attempts < 1:
        raise ValueError("max_attempts must be at least 1")
    if not isinstance(requires_approval, bool) and not callable(requires_approval):
        raise TypeError("requires_approval must be True, False or a function of the call's arguments")
    if compensate is not None and not isinstance(compensate, Compensation):
        if not callable(compensate):
            raise TypeError("compensate must be a function of (args, result) or compensation(...)")
        compensate = compensation(compensate)
    if reconcile is not None and not callable(reconcile):
        raise TypeError("reconcile must be a function of the call's arguments")
    if reconcile is not None and compensate is None:
        raise ValueError("reconcile= goes with compensate=: it says whether a call must be compensated")
    names = tuple(n if isinstance(n, str) else n.__name__ for n in non_retryable)
    options = ToolOptions(requires_approval, max_attempts, timeout, names, name, private_data, compensate, reconcile)

    def mark(f: F) -> F:
        f.__codemode_tool__ = options  # type: ignore[attr-defined]
        return f

    return mark(fn) if fn is not None else mark


@dataclass(frozen=True)
class CallContext:
    """What a running tool knows about its call: use ``call_id`` (stable across attempts and
    worker crashes) with ``execution_id`` as an idempotency key for side effects."""

    execution_id: str
    call_id: str
    tool: str
    attempt: int
    #: What runs: the call itself, its compensation, or its reconcile (which asks about the
    #: call, so it has the call's own key).
    phase: Literal["call", "compensate", "reconcile"] = "call"

    @property
    def idempotency_key(self) -> str:
        """``<execution>/<call>``; a compensation's: ``<execution>/<call>/compensate``."""
        key = f"{self.execution_id}/{self.call_id}"
        return f"{key}/compensate" if self.phase == "compensate" else key


_current: contextvars.ContextVar[CallContext] = contextvars.ContextVar("codemode_current_call")


def current_call() -> CallContext:
    """The call being served, inside a tool. Raises ``LookupError`` outside one."""
    try:
        return _current.get()
    except LookupError:
        raise LookupError("current_call() is only available inside a tool call") from None


class ToolFailure(Exception):
    """Raised by a tool that decides itself how its failure is seen: the exception type the
    code gets (``type_name``, a builtin's name for the code to catch) and whether the call
    is retried. An MCP tool raises it (``activities/mcp_tools``): it knows whether the
    request reached the server, which no exception type says."""

    def __init__(self, type_name: str, message: str, *, retryable: bool, indeterminate: bool = False) -> None:
        super().__init__(message)
        self.type_name = type_name
        self.message = message
        self.retryable = retryable
        #: The call may have been applied all the same (sent, then no answer): its outcome is
        #: unknown, and a rollback reconciles it before anything compensates it.
        self.indeterminate = indeterminate


@dataclass
class ToolSpec:
    #: The tool's identity: its activity type, the name in calls, records and policies
    #: (``get_weather``; an MCP server's tool: its canonical id ``mcp:memory/read_graph``).
    name: str
    fn: Callable[..., Any]
    options: ToolOptions
    signature: ToolSignature
    _validator: Any = field(default=None, repr=False)
    #: Validates bound arguments (parameter name -> value) for a tool described by a JSON
    #: schema rather than Python hints; raises ``ValueError``.
    check: Callable[[dict[str, Any]], None] | None = field(default=None, repr=False)
    #: Where the tool comes from, for listings (``tools.py``; ``mcp server 'memory'``).
    origin: str = ""
    #: JSON schema of what the tool returns (None: anything), against which a person's
    #: answer given instead of the tool is checked.
    returns_schema: dict[str, Any] | None = field(default=None, repr=False)
    #: Approval rules from a config (an MCP server's, a CLI command's): checked with the
    #: call's arguments when ``options.requires_approval`` is not already True.
    approval_rules: Any = field(default=None, repr=False)
    #: How a call is undone and found out when set by a config (an MCP server's tool, a CLI
    #: command: another tool of the same source, ``activities/undo_templates.py``); a Python
    #: tool's come from ``@tool(compensate=..., reconcile=...)``.
    configured_compensation: Compensation | None = field(default=None, repr=False)
    configured_reconcile: Reconcile | None = field(default=None, repr=False)

    @property
    def compensation(self) -> Compensation | None:
        return self.options.compensate or self.configured_compensation

    @property
    def reconciler(self) -> Reconcile | None:
        return self.options.reconcile or self.configured_reconcile

    def undo_spec(self) -> UndoSpec | None:
        """What the workflow needs to undo a call of this tool (None: it cannot be undone)."""
        comp = self.compensation
        if comp is None:
            return None
        return UndoSpec(
            activity=COMPENSATE_PREFIX + self.name,
            label=comp.label,
            max_attempts=comp.max_attempts,
            timeout_seconds=comp.timeout.total_seconds(),
            requires_approval=comp.requires_approval,
            reconcile=self.reconciler is not None,
        )

    @property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.fn)

    @property
    def code_name(self) -> str:
        """How the code calls it: ``get_weather``, ``memory.read_graph``."""
        return self.signature.code_name

    @property
    def namespace(self) -> str | None:
        """The namespace it lives in (``memory``), or None for a plain function."""
        return self.signature.namespace

    @property
    def listed_signature(self) -> ToolSignature:
        """What a prompt shows of the tool: its signature. A CLI command shows a short one
        (its flags are many; ``get_schema`` shows them), read without running its help."""
        return self.signature

    def summarize(self, args: list[Any], kwargs: Mapping[str, Any]) -> str:
        """A call as summaries, approvals and the audit name it: ``get_weather(city='Paris')``."""
        return self.signature.format_call(args, kwargs)

    def needs_approval(self, arguments: Mapping[str, Any]) -> tuple[bool, str | None]:
        """Whether this call waits for a person, and why when a rule or predicate said so
        (or failed: a predicate that raises asks a person, the safe side)."""
        asked = self.options.requires_approval
        if asked is True:
            return True, None
        if callable(asked):
            try:
                return bool(asked(dict(arguments))), None
            except Exception as err:  # noqa: BLE001 - a broken predicate must not skip a person
                return True, f"the approval predicate failed ({type(err).__name__}: {err}), so a person decides"
        if self.approval_rules is not None:
            return self.approval_rules.decide(arguments)
        return False, None

    def validate(self, args: list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """Bind and validate a call's arguments. Raises ``TypeError`` (wrong arity/names) or
        ``ValueError`` (a value of the wrong type), worded for the code's author."""
        bound = self.signature.bind(args, kwargs)
        if self.check is not None:
            self.check(bound)
            return bound
        if self._validator is None:
            return bound
        fixed = {k: v for k, v in bound.items() if k in self._validator.model_fields}
        try:
            model = self._validator.model_validate(fixed)
        except ValidationError as err:
            problems = "; ".join(
                f"argument {'.'.join(str(p) for p in e['loc'])!r}: {e['msg']}" for e in err.errors()
            )
            raise ValueError(f"{self.name}(): {problems}") from None
        out = dict(bound)
        out.update({k: getattr(model, k) for k in fixed})
        return out

    def received(self, args: list[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """What the tool receives, by parameter name, as rules judge it (issue 45): the call's
        arguments validated by the tool's own schema (a ``"20000"`` passed for ``amount: int``
        is the number 20000), the defaults of parameters the call left out included, and the
        names a ``**kwargs`` parameter takes as arguments of their own. Raises like
        ``validate``."""
        validated = self.validate(args, kwargs)
        if self._validator is not None and self.check is None:
            fields = self._validator.model_fields
            defaults = {
                k: f.get_default(call_default_factory=True) for k, f in fields.items() if k not in validated and not f.is_required()
            }
            validated = {**defaults, **validated}
        elif self.check is not None:
            props = (self.signature.parameters_schema or {}).get("properties") or {}
            for name, prop in props.items():
                if name not in validated and isinstance(prop, Mapping) and "default" in prop:
                    validated[name] = prop["default"]
        for p in self.signature.parameters:
            if p.kind == "var_keyword" and isinstance(validated.get(p.name), dict):
                extra = validated.pop(p.name)
                validated = {**extra, **validated}
        return validated

    def received_sha256(self, args: list[Any], kwargs: Mapping[str, Any]) -> str:
        """The SHA-256 of ``received`` as JSON: the tool's activity runs the call only when the
        values it validates to are the ones the rules judged (issue 45)."""
        return received_sha256(self.received(args, kwargs))

    def prepare(self, args: list[Any], kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Validated ``(positional, keyword)`` arguments for calling the function."""
        validated = self.validate(args, kwargs)
        positional: list[Any] = []
        keywords: dict[str, Any] = {}
        for p in self.signature.parameters:
            if p.name not in validated:
                continue
            if p.kind == "var_positional":
                positional.extend(validated[p.name])
            elif p.kind == "var_keyword":
                keywords.update(validated[p.name])
            else:
                keywords[p.name] = validated[p.name]
        if positional:  # *args present: everything before it must go positionally
            named = [p.name for p in self.signature.parameters if p.kind == "positional_or_keyword"]
            positional = [keywords.pop(n) for n in named if n in keywords] + positional
        return positional, keywords

    async def invoke(self, args: list[Any], kwargs: Mapping[str, Any]) -> Any:
        """Validate and call; a sync tool runs in a thread so the event loop stays free."""
        positional, keywords = self.prepare(args, kwargs)
        if self.is_async:
            return await self.fn(*positional, **keywords)
        return await asyncio.to_thread(self.fn, *positional, **keywords)


def received_sha256(received: Mapping[str, Any]) -> str:
    """SHA-256 of validated arguments as canonical JSON (objects as their JSON form)."""
    value = to_jsonable_python(dict(received), fallback=repr)
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def _undo_helpers(options: ToolOptions | None) -> list[Any]:
    if options is None:
        return []
    return [h for h in (options.compensate.fn if options.compensate else None, options.reconcile) if h is not None]


def _validator_for(fn: Callable[..., Any], name: str) -> Any:
    sig = inspect.signature(fn)
    try:
        hints = __import__("typing").get_type_hints(fn, include_extras=True)
    except Exception:
        hints = {}
    fields: dict[str, Any] = {}
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        hint = hints.get(p.name, Any)
        fields[p.name] = (hint, ... if p.default is p.empty else p.default)
    try:
        return create_model(f"{name}_args", __config__=ConfigDict(arbitrary_types_allowed=True), **fields)
    except Exception:
        return None


def _returns_schema(fn: Callable[..., Any]) -> dict[str, Any] | None:
    """JSON schema of a function's return annotation (None when it has none or says Any)."""
    try:
        hint = __import__("typing").get_type_hints(fn).get("return", inspect.Signature.empty)
    except Exception:
        return None
    if hint in (inspect.Signature.empty, Any):
        return None
    from pydantic import TypeAdapter

    try:
        return TypeAdapter(hint).json_schema()
    except Exception:
        return None


class ToolRegistry:
    """Name -> ToolSpec. Built from functions, from a module, and from MCP servers.

    Every tool keeps one name in the code: a plain function (``get_weather``) or a function
    of a namespace (``memory.read_graph``, an MCP server's tool). Two tools the code would
    reach by the same name, or a tool named like a namespace, fail the registration with a
    message naming both (seed 004: collisions fail loudly)."""

    def __init__(self, tools: Iterable[Callable[..., Any]] = ()) -> None:
        self._tools: dict[str, ToolSpec] = {}
        #: Code name (``get_weather``, ``memory.read_graph``, and each namespace) -> tool name.
        self._code_names: dict[str, str] = {}
        for fn in tools:
            self.register(fn)

    def register(self, fn: Callable[..., Any], options: ToolOptions | None = None) -> ToolSpec:
        options = options or getattr(fn, "__codemode_tool__", None) or ToolOptions()
        name = options.name or fn.__name__
        if not name.isidentifier():
            raise ValueError(f"tool name {name!r} is not a valid Python identifier")
        if name in self._tools and self._tools[name].fn is fn:
            return self._tools[name]
        spec = ToolSpec(name, fn, options, signature_from_callable(fn, name=name), _validator_for(fn, name))
        spec.origin = getattr(fn, "__module__", "") or ""
        spec.returns_schema = _returns_schema(fn)
        return self.add(spec)

    def add(self, spec: ToolSpec) -> ToolSpec:
        """Register a prepared tool (an MCP server's, for one)."""
        name = spec.name
        if name in RESERVED_NAMES:
            raise ValueError(f"tool name {name!r} is reserved")
        if name in BUILTINS or spec.code_name in BUILTINS:
            raise ValueError(f"tool name {spec.code_name!r} is reserved: every execution has it built in")
        if snippet_models.NAMESPACE in (spec.code_name, spec.namespace):
            raise ValueError(
                f"{self._describe(spec)}: {snippet_models.NAMESPACE!r} is reserved: the code reaches saved snippets by it"
            )
        if name in self._tools:
            first = self._describe(self._tools[name])
            raise ValueError(f"two tools are named {name!r}: {first} and {self._describe(spec)}")
        namespace = spec.namespace
        owner = self._code_names.get(spec.code_name)
        if owner is None and namespace is not None:
            owner = self._code_names.get(namespace)
            if owner is not None and self._tools[owner].namespace == namespace:
                owner = None  # another function of the same namespace
        if owner is not None:
            other = self._tools[owner]
            claim = spec.code_name if spec.code_name in (other.code_name, other.namespace) else namespace
            raise ValueError(
                f"{self._describe(spec)} collides with {self._describe(other)}: both are {claim!r} in the code"
            )
        self._tools[name] = spec
        self._code_names[spec.code_name] = name
        if namespace:
            self._code_names.setdefault(namespace, name)
        return spec

    def include(self, specs: Iterable[ToolSpec]) -> ToolRegistry:
        """Add several prepared tools (``McpServers.tool_specs()``, ``CliTools.tool_specs()``); returns self."""
        for spec in specs:
            self.add(spec)
        return self

    @staticmethod
    def _describe(spec: ToolSpec) -> str:
        where = f" from {spec.origin}" if spec.origin else ""
        if spec.code_name != spec.name:
            return f"tool {spec.name!r} ({spec.code_name}{where})"
        return f"tool {spec.name!r}{where}"

    @classmethod
    def from_module(cls, module: str | types.ModuleType, *, mcp: Any = None) -> ToolRegistry:
        """Every public function defined in the module (not imported into it), but the
        compensations and reconciles its tools name; with ``mcp`` (started
        ``codemode.activities.mcp_tools.McpServers``), their tools too."""
        mod = importlib.import_module(module) if isinstance(module, str) else module
        registry = cls()
        found = [
            obj
            for attr, obj in vars(mod).items()
            if not attr.startswith("_") and inspect.isfunction(obj) and obj.__module__ == mod.__name__
        ]
        # A tool's compensation or reconcile defined beside it is not a tool of its own.
        helpers = {id(h) for f in found for h in _undo_helpers(getattr(f, "__codemode_tool__", None))}
        for obj in found:
            if id(obj) not in helpers:
                registry.register(obj)
        if not registry._tools:
            raise ValueError(f"module {mod.__name__!r} defines no public functions to use as tools")
        if mcp is not None:
            registry.include(mcp.tool_specs())
        return registry

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __getitem__(self, name: str) -> ToolSpec:
        builtin = BUILTINS.get(name)
        return builtin if builtin is not None and name not in self._tools else self._tools[name]

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def resolve(self, name: str) -> list[str]:
        """The tools an allow-list entry names: a tool's name (its canonical id), its name in
        the code (``memory.read_graph``), or a whole namespace (``memory``). Empty: none."""
        if name in self._tools:
            return [name]
        owner = self._code_names.get(name)
        if owner is None:
            return []
        if self._tools[owner].code_name == name:
            return [owner]
        return [n for n, s in self._tools.items() if s.namespace == name]

    def select(self, allow: Iterable[str] | None) -> dict[str, ToolSpec]:
        """The tools an execution may call. Unknown names in the allow-list raise ``KeyError``."""
        if allow is None:
            return dict(self._tools)
        allow = [n for n in allow if n not in BUILTINS]
        unknown = [n for n in allow if not self.resolve(n)]
        if unknown:
            raise KeyError(f"unknown tool(s) in the allow-list: {', '.join(unknown)}; registered: {', '.join(self._tools)}")
        chosen = [t for n in allow for t in self.resolve(n)]
        return {n: self._tools[n] for n in dict.fromkeys(chosen)}

    def for_execution(self, allow: Iterable[str] | None) -> dict[str, ToolSpec]:
        """What an execution's code can call: the tools ``select`` chooses and the host
        functions built into every execution (``save_artifact``: never an activity, the step
        answers it)."""
        return {**self.select(allow), **BUILTINS}

    def signatures(self, allow: Iterable[str] | None = None, *, listed: bool = False) -> dict[str, ToolSignature]:
        """Tool name -> signature. ``listed``: what a prompt shows (``ToolSpec.listed_signature``),
        for a front that also answers ``get_schema``."""
        chosen = self.select(allow)
        if listed:
            return {n: undoable(s, s.listed_signature) for n, s in chosen.items()}
        return {n: undoable(s, s.signature) for n, s in chosen.items()}


def undoable(spec: ToolSpec, signature: ToolSignature) -> ToolSignature:
    """The signature a prompt shows: a tool whose calls can be undone says so (and by what)."""
    comp = spec.compensation
    if comp is None:
        return signature
    by = f" ({comp.label})" if comp.label else ""
    note = f"Can be undone: a rollback runs its compensation{by}."
    text = signature.description.rstrip()
    return signature.model_copy(update={"description": f"{text}\n\n{note}" if text else note})


def _save_artifact(name: str, data: bytes | str, mime_type: str | None = None) -> dict[str, Any]:
    raise RuntimeError("save_artifact is answered by the sandbox step, never run as a tool")


def codemode_snippet_call(name: str, version: str, arguments: dict[str, Any]) -> None:
    """A saved snippet's function begins: its arguments are checked and the call journaled."""
    raise RuntimeError("a snippet's entry is answered by the sandbox step, never run as a tool")


#: Host functions every execution has, served by the step itself (``activities/artifacts.py``;
#: a saved snippet's entry, ``activities/snippets/calls.py``).
BUILTINS: dict[str, ToolSpec] = {
    artifacts.SAVE_ARTIFACT: ToolSpec(
        artifacts.SAVE_ARTIFACT, _save_artifact, ToolOptions(), artifacts.SIGNATURE, origin="built in"
    ),
    compose.ENTRY: ToolSpec(
        compose.ENTRY,
        codemode_snippet_call,
        ToolOptions(),
        signature_from_callable(codemode_snippet_call, name=compose.ENTRY),
        origin="built in",
    ),
}
