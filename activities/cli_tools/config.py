"""The ``--cli-config`` file: which command-line tools the code may run, and how.

```json
{"cliTools": {
  "git": {"allow": ["log", "status", "diff", "show", "commit"],
          "approval": {"commit": "always"},
          "cwd": "/path/to/repo",
          "env": ["HOME"],
          "flags": {"log": {"first_parent": "bool"}}},
  "sqlite3": {"args": ["-safe", "-readonly", "data.db"], "approval": "never", "json": true}
}}
```

The same shape in TOML (``[cliTools.git]``) when the file ends in ``.toml``; other top-level
keys are ignored, so one file may carry ``mcpServers`` too. Per binary (the key names it in
canonical ids, ``cli:git/log``, and is the default namespace and command):

- ``command``: the binary (a name looked up on PATH, or a path); default: the key;
- ``allow``: the subcommands the code may run (``"stash list"`` for a nested one, called
  ``git.stash_list``). Nothing else is callable. Without ``allow`` the binary is one command,
  called ``sqlite3.run(...)``;
- ``approval_when``: conditions on a call's arguments, any of which sends it to a person, the
  other calls run without one (``{"push": [{"argument": "force", "op": "==", "value": true}]}``;
  ``approvals/approval_when.py``);
- ``approval``, ``idempotent``, ``timeout`` (seconds), ``max_attempts``, ``max_output``
  (bytes, or ``"256K"``, ``"1M"``), ``json`` (``true``: stdout is one JSON document;
  ``"stream"``: a list of the JSON values it prints), ``stdin`` (the code may pass
  ``input=``), ``private``: one value for every subcommand, or an object by subcommand
  (``{"commit": "always", "*": "never"}``);
- ``read_only``: the subcommands that change nothing (no approval, retried freely unless the
  policy keys say otherwise); default: the built-in profile's list (``profiles.py``);
- ``cwd`` (default: the worker's directory), ``env`` (the environment the command gets
  besides ``PATH``: names passed through from the worker's, ``["HOME"]``, or values,
  ``{"GIT_AUTHOR_NAME": "bot", "HOME": "${HOME}"}``; never the worker's whole environment),
  ``args`` (host arguments put before the subcommand: ``["-C", "/repo"]``; the code can never
  put any there);
- ``flags``: by subcommand (``"*"`` for all), flags the help text leaves out
  (``"max_count": "int"`` or ``{"type": "int", "flag": "-n", "help": "..."}``) or that the
  code may not use (``"output": null``); ``positionals``: by subcommand, the positional
  arguments when the help's usage line is wrong;
- ``help`` (the arguments that print a subcommand's help, default ``["-h"]`` then
  ``["--help"]``), ``inline_values`` (``--flag=value`` rather than ``--flag value``),
  ``namespace``, ``profile`` (a built-in profile's name, or ``false`` for none).

Keys are checked: a misspelt key, or an object keyed by a subcommand that is not allowed,
fails the load rather than leaving ``git push`` without its approval.
"""

from __future__ import annotations

import keyword
import os
import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from codemode.approvals.approval_when import Condition

from ..config_files import ConfigProblem, checked_entry, config_section

Approval = Literal["always", "never"]
JsonMode = bool | Literal["stream"]
FlagType = Literal["bool", "str", "int", "float", "list[str]", "dict[str, str]", "bool | str"]
T = TypeVar("T")
#: A value for every subcommand, or one per subcommand (``"*"``: the others).
PerCommand = T | dict[str, T]

#: A subcommand as ``allow`` names it: words, never a flag (``"stash list"``, ``"rev-parse"``).
_SUBCOMMAND = re.compile(r"[A-Za-z0-9][\w.-]*( [A-Za-z0-9][\w.-]*)*")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)


class CliConfigError(ValueError):
    """The CLI tools' configuration cannot be used; the message says where and why."""


class FlagSpec(BaseModel):
    """A flag the host adds to a subcommand's (or changes): ``max_count`` -> ``--max-count``."""

    model_config = ConfigDict(extra="forbid")

    type: FlagType = "str"
    #: How it is spelled on the command line (default: ``--`` and the name with dashes;
    #: a one-letter name: ``-x``).
    flag: str | None = None
    help: str = ""
    #: ``--flag=value`` (default: the binary's ``inline_values``).
    inline: bool | None = None
    choices: list[str] | None = None

    @field_validator("flag")
    @classmethod
    def _a_flag(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"--?[A-Za-z0-9][\w.-]*", value):
            raise ValueError(f"{value!r} is not a flag (-x, --name, -name)")
        return value


class PositionalSpec(BaseModel):
    """A positional argument, in the order the command takes them."""

    model_config = ConfigDict(extra="forbid")

    name: str
    required: bool = False
    #: Takes several values (a list).
    variadic: bool = False
    #: Goes after ``--`` (git's paths): then it may start with ``-``.
    after_dashdash: bool = False

    @field_validator("name")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not value.isidentifier() or keyword.iskeyword(value):
            raise ValueError(f"{value!r} is not a Python parameter name")
        return value


class CliToolConfig(BaseModel):
    """One entry of ``cliTools``, with ``${VAR}`` already expanded."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    namespace: str | None = None
    allow: list[str] | None = None
    read_only: list[str] | None = None
    approval: PerCommand[Approval] | None = None
    #: Conditions on a call's arguments (flag names as in the code) that send it to a person.
    approval_when: PerCommand[list[Condition]] | None = None
    idempotent: PerCommand[bool] | None = None
    timeout: PerCommand[float] | None = None
    max_attempts: PerCommand[int] | None = None
    max_output: PerCommand[int] | None = None
    json_output: PerCommand[JsonMode] | None = Field(default=None, alias="json")
    stdin: PerCommand[bool] | None = None
    private: PerCommand[bool] | None = None
    cwd: str | None = None
    env: list[str] | dict[str, str] | None = None
    args: list[str] | None = None
    flags: dict[str, dict[str, FlagSpec | FlagType | None]] = Field(default_factory=dict)
    positionals: dict[str, list[PositionalSpec]] = Field(default_factory=dict)
    help: list[str] | None = None
    inline_values: bool | None = None
    profile: str | Literal[False] | None = None

    @field_validator("max_output", mode="before")
    @classmethod
    def _sizes(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: _size(v) for k, v in value.items()}
        return _size(value)

    @field_validator("allow")
    @classmethod
    def _subcommands(cls, value: list[str] | None) -> list[str] | None:
        if value is None:
            return None
        if not value:
            raise ValueError('lists no subcommand: leave "allow" out to call the binary itself as NAME.run(...)')
        for entry in value:
            if not _SUBCOMMAND.fullmatch(entry):
                raise ValueError(f"{entry!r} is not a subcommand (words such as 'log' or 'stash list', no flags)")
        return [" ".join(e.split()) for e in value]

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str | None) -> str | None:
        if value is not None and (not value.isidentifier() or keyword.iskeyword(value)):
            raise ValueError(f"{value!r} is not a Python identifier")
        return value

    @field_validator("timeout", "max_attempts", "max_output")
    @classmethod
    def _positive(cls, value: Any) -> Any:
        for v in value.values() if isinstance(value, Mapping) else [value]:
            if v is not None and not v > 0:
                raise ValueError("must be more than 0")
        return value

    @model_validator(mode="after")
    def _keys_name_allowed_subcommands(self) -> CliToolConfig:
        known = set(self.allow or ()) | {"*"}
        for key in (
            "approval",
            "approval_when",
            "idempotent",
            "timeout",
            "max_attempts",
            "max_output",
            "json_output",
            "stdin",
            "private",
        ):
            value = getattr(self, key)
            if isinstance(value, Mapping):
                self._check_keys(key, value, known)
        self._check_keys("flags", self.flags, known)
        self._check_keys("positionals", self.positionals, known)
        for entry in self.read_only or ():
            if entry not in known:
                raise ValueError(f"read_only names {entry!r}, which is not in allow")
        return self

    def _check_keys(self, what: str, value: Mapping[str, Any], known: set[str]) -> None:
        what = "json" if what == "json_output" else what
        for sub in value:
            if sub not in known:
                where = f"allow ({', '.join(self.allow)})" if self.allow else 'allow (there is none: use "*")'
                raise ValueError(f"{what} names {sub!r}, which is not in {where}")


class CliConfig(BaseModel):
    """The binaries the code may run, by key (the key is the binary's name in canonical ids)."""

    tools: dict[str, CliToolConfig] = Field(default_factory=dict)
    #: Where the configuration came from, for messages.
    source: str = "<config>"


def load_cli_config(
    source: str | os.PathLike[str] | Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> CliConfig:
    """Read and check a configuration: a path to the JSON (or ``.toml``) file, or the parsed
    mapping. ``environ`` (default: the process's) answers ``${VAR}``. Raises ``CliConfigError``."""
    environ = os.environ if environ is None else environ
    try:
        where, entries = config_section(source, "cliTools", kind="tool", example='{"git": {"allow": [...]}}')
    except ConfigProblem as err:
        raise CliConfigError(str(err)) from None
    tools: dict[str, CliToolConfig] = {}
    for name, entry in entries.items():
        try:
            tools[name] = checked_entry(
                CliToolConfig,
                name,
                entry,
                environ=environ,
                expand=_EXPANDED,
                prepare=lambda e: _pass_through(e, environ),
            )
        except ConfigProblem as err:
            raise CliConfigError(f"{where}: tool {name!r}: {err}") from None
    return CliConfig(tools=tools, source=where)


#: The entry keys whose values may name environment variables.
_EXPANDED = frozenset({"command", "cwd", "env", "args"})


def _pass_through(entry: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """``"env": ["HOME"]``: the names' values in the worker's environment (those that are set)."""
    if isinstance(entry.get("env"), list):
        entry["env"] = {k: environ[k] for k in entry["env"] if isinstance(k, str) and k in environ}
    return entry


def _size(value: Any) -> Any:
    """``1048576``, ``"256K"``, ``"1M"``, ``"1.5MiB"`` -> bytes; anything else unchanged."""
    if not isinstance(value, str):
        return value
    m = _SIZE.fullmatch(value.strip())
    if not m:
        raise ValueError(f"{value!r} is not a size (bytes, or a number with K, M or G)")
    return int(float(m.group(1)) * 1024 ** " kmg".index(m.group(2).lower() or " "))


def per_command(value: Any, subcommand: str) -> Any:
    """The value of a policy key for one subcommand (``"*"`` for the others), or None."""
    if isinstance(value, Mapping):
        return value.get(subcommand, value.get("*"))
    return value
