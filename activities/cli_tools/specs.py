"""A configured command as a ``ToolSpec``: its names, its policy, and a signature read lazily.

Names (seed 004): a binary's commands live in a namespace named after its key (``git``),
each under a Python name (``git.log``, ``git.stash_list``, ``git.rev_parse``; a binary
without subcommands: ``sqlite3.run``). The identity is the canonical id ``cli:git/log``:
the activity type, the name in every call record, approval and audit line.

Lazy (seed 004: "parse and dispatch a binary only when code uses it"): registering a
command runs nothing. ``listed_signature`` (what a prompt shows: the namespace and its
subcommands) is built from the configuration alone; ``signature`` (the full stub, what the
code is type-checked against and ``get_schema`` shows) reads the subcommand's help the first
time something asks for it (``help_text.py``), and keeps it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from codemode.approvals.approval_when import ApprovalRules
from codemode.runtimes.signatures import ToolParameter, ToolSignature

from ..tools import DEFAULT_NON_RETRYABLE, ToolOptions, ToolSpec
from .arguments import ArgumentError, Arguments
from .help_text import read_help
from .policy import CommandSettings

#: Longest help text kept in a stub's docstring.
MAX_HELP_CHARS = 6000
#: Seconds the activity's own timeout adds to the command's, so the command's timeout (a
#: clear error) always comes first.
TIMEOUT_MARGIN = 10.0
#: Exception types a CLI call raises that are never retried (besides bad input): the
#: command ran and failed, ran out of time, or printed what could not be parsed.
FINAL = ("CalledProcessError", "TimeoutError")

_RESULT = 'a dict {"returncode": int, "stdout": str, "stderr": str}'


@dataclass
class CliToolSpec(ToolSpec):
    """A ``ToolSpec`` whose calls run a command line."""

    settings: CommandSettings | None = None
    #: Where parsed help texts are cached (None: memory only).
    cache_dir: Path | None = None
    #: Why it needs approval or not, and how it is retried: for ``codemode tools``.
    policy_notes: list[str] = field(default_factory=list)
    _listed: ToolSignature | None = field(default=None, init=False, repr=False)
    _arguments: Arguments | None = field(default=None, init=False, repr=False)
    _full: ToolSignature | None = field(default=None, init=False, repr=False)

    # ``signature`` is the full one, read on first use; the dataclass's own ``__init__``
    # sets it (through the setter) to the listed one, which needs no help text.
    @property  # type: ignore[override]
    def signature(self) -> ToolSignature:
        if self._full is None:
            self._full = self._load()
        return self._full

    @signature.setter
    def signature(self, value: ToolSignature) -> None:
        self._listed = value

    @property
    def code_name(self) -> str:
        assert self._listed is not None
        return self._listed.code_name

    @property
    def namespace(self) -> str | None:
        assert self._listed is not None
        return self._listed.namespace

    @property
    def listed_signature(self) -> ToolSignature:
        assert self._listed is not None
        return self._listed

    @property
    def arguments(self) -> Arguments:
        if self._arguments is None:
            self._full = self._load()
        assert self._arguments is not None
        return self._arguments

    @property
    def loaded(self) -> bool:
        """Whether the help was read (``signature`` asked for)."""
        return self._full is not None

    def argv(self, kwargs: Mapping[str, Any]) -> tuple[list[str], bytes | None]:
        """The whole argv of a call (bound arguments by parameter name), and its stdin."""
        s = self.settings
        assert s is not None
        rest, stdin = self.arguments.argv(kwargs)
        return [s.binary, *s.args, *s.words, *rest], stdin

    def summarize(self, args: list[Any], kwargs: Mapping[str, Any]) -> str:
        """The canonical id and the command line itself, as the approver and the audit see
        it: ``cli:git/commit: git commit --message='fix typo'``."""
        s = self.settings
        assert s is not None
        try:
            argv, _ = self.argv(self.signature.bind(args, kwargs))
            line = shlex.join([s.key, *argv[1:]])
        except (TypeError, ValueError):
            line = self.signature.format_call(args, kwargs)
        text = f"{self.name}: {line}"
        return text if len(text) <= 300 else text[:296] + " ..."

    def _load(self) -> ToolSignature:
        s = self.settings
        assert s is not None
        parsed = read_help(s.binary, s.words, help_args=s.help_args, cwd=s.cwd, env=s.env, cache_dir=self.cache_dir)
        self._arguments = Arguments.build(
            s.code_name,
            parsed,
            flags=s.flags,
            positionals=s.positionals,
            inline_values=s.inline_values,
            stdin=s.stdin,
        )
        head = (
            f"`{s.program}` (a command line, {s.tool}). Its flags and arguments are keyword parameters: "
            "--max-count 5 is max_count=5, a flag is True."
        )
        returns = "the JSON it prints, parsed" if s.json else _RESULT
        raises = (
            f"Returns {returns}; a nonzero exit raises CalledProcessError with its stderr "
            "(a RuntimeError whose message starts 'CalledProcessError:')."
        )
        lines = [head, raises]
        if s.stdin:
            lines.append("input: text the command reads on stdin.")
        added = [self._arguments.flags[n] for n in self._arguments.added if n in self._arguments.flags]
        if added:
            listed = ", ".join(f"{f.name} ({f.spelling}{': ' + f.help if f.help else ''})" for f in added)
            lines.append(f"Flags beyond its help text: {listed}.")
        if parsed.text:
            text = parsed.text if len(parsed.text) <= MAX_HELP_CHARS else parsed.text[:MAX_HELP_CHARS] + "\n[...]"
            lines += ["", text]
        else:
            lines.append("(Its help could not be read: only the flags above are known.)")
        return ToolSignature(
            name=self.name,
            path=s.code_name,
            parameters=self._arguments.parameters(),
            return_annotation="Any" if s.json else "dict[str, Any]",
            description="\n".join(lines).replace("\\", "\\\\"),
            parameters_schema=self._arguments.json_schema(),
        )


def listed_signature(s: CommandSettings) -> ToolSignature:
    """The short signature a prompt lists: ``def log(self, *args: str, **flags: Any)``."""
    what = f"`{s.program}`" + (" (reads input= on stdin)" if s.stdin else "")
    return ToolSignature(
        name=s.tool,
        path=s.code_name,
        parameters=[
            ToolParameter(name="args", annotation="str", kind="var_positional", required=False),
            ToolParameter(name="flags", annotation="Any", kind="var_keyword", required=False),
        ],
        return_annotation="Any" if s.json else "dict[str, Any]",
        description=(
            f"Runs {what}; its flags and arguments are keyword parameters (--max-count 5 is max_count=5). "
            f'get_schema("{s.code_name}") shows its exact parameters.'
        ),
    )


def build_spec(
    s: CommandSettings, call: Callable[[CliToolSpec], Callable[..., Any]], cache_dir: Path | None
) -> CliToolSpec:
    non_retryable = DEFAULT_NON_RETRYABLE + FINAL
    options = ToolOptions(
        requires_approval=s.requires_approval,
        max_attempts=s.max_attempts,
        timeout=timedelta(seconds=s.timeout + TIMEOUT_MARGIN),
        non_retryable=non_retryable,
        name=s.tool,
        private_data=s.private,
    )
    spec = CliToolSpec(
        name=s.tool,
        fn=_unset,
        options=options,
        signature=listed_signature(s),
        origin=f"CLI tool {s.key!r}",
        settings=s,
        cache_dir=cache_dir,
        policy_notes=list(s.notes),
    )
    if s.approval_when:
        spec.approval_rules = ApprovalRules(list(s.approval_when))
    spec.fn = call(spec)
    spec.check = _check(spec)
    return spec


def _check(spec: CliToolSpec) -> Callable[[dict[str, Any]], None]:
    """Arguments are checked when the call is made, before it is scheduled: building the
    argv is the check (a ``ValueError`` in the code, never sent, never retried)."""

    def check(bound: dict[str, Any]) -> None:
        try:
            spec.arguments.argv(bound)
        except ArgumentError as err:  # the code gets the builtin type every runtime knows
            raise ValueError(str(err)) from None

    return check


async def _unset(**kwargs: Any) -> Any:  # pragma: no cover - replaced before use
    raise RuntimeError("a CLI tool without its call")
