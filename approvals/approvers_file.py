"""The approvers file (TOML): people with their keys and groups, who may decide each tool and
how many must, defaults by tool source, and policy rules that decide a call without a person.

    [people.ana]
    keys = ["ed25519:BASE64"]          # keys that sign now
    retired_keys = ["ed25519:OLD"]     # verify older decisions only
    groups = ["finance"]

    [people.inbox]                     # a service: signs for the people it authenticated
    keys = ["ed25519:..."]
    signs_for = ["group:finance"]

    [tools.send_email]                 # a tool's canonical id; globs: [tools."mcp:fs/*"]
    approvers = ["group:finance", "bob"]
    required = 2                       # distinct approvers
    four_eyes = true                   # whoever started the run may not decide its calls

    [defaults]                         # tools without a rule; by source: [defaults.mcp],
    approvers = ["*"]                  # [defaults.cli], [defaults.python], [defaults.code]

    [[policy]]
    name = "own-domain-mail"
    tools = ["send_email"]
    decision = "allow"                 # allow | deny | ask
    when = { to = { endswith = "@ourco.com" } }
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from codemode.approvals import keys, policy
from codemode.approvals.gate import EVERYONE, ApprovalGate

#: The environment variable naming the approvers file (``--approvers`` sets it too).
ENV = "CODEMODE_APPROVERS"
SOURCES = ("mcp", "cli", "python", "code")
#: The pseudo tool of ``require_code_approval`` (the code itself waits for review).
CODE_TOOL = "<code>"


class ApproversFileError(ValueError):
    """An approvers file that cannot be read or means nothing clear: says where."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Person(_Strict):
    keys: list[str] = Field(default_factory=list)
    retired_keys: list[str] = Field(default_factory=list)
    groups: list[str] = Field(default_factory=list)
    #: A service key (the inbox) may sign decisions for these people (names, ``group:``, ``*``).
    signs_for: list[str] = Field(default_factory=list)


class ToolRule(_Strict):
    approvers: list[str] | None = None
    required: int | None = Field(default=None, ge=1)
    four_eyes: bool | None = None


class Defaults(ToolRule):
    mcp: ToolRule | None = None
    cli: ToolRule | None = None
    python: ToolRule | None = None
    code: ToolRule | None = None


class PolicyRule(_Strict):
    name: str
    tool: str | None = None
    tools: list[str] = Field(default_factory=list)
    decision: Literal["allow", "deny", "ask"]
    when: dict[str, Any] = Field(default_factory=dict)
    reason: str = ""

    @model_validator(mode="after")
    def _names_tools(self) -> PolicyRule:
        if self.tool:
            self.tools = [self.tool, *self.tools]
        if not self.tools:
            raise ValueError(f'policy rule {self.name!r} names no tool (tool = "..." or tools = [...])')
        return self

    def applies_to(self, tool: str) -> bool:
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.tools)


class ApproversFile(_Strict):
    people: dict[str, Person] = Field(default_factory=dict)
    tools: dict[str, ToolRule] = Field(default_factory=dict)
    defaults: Defaults = Field(default_factory=Defaults)
    policy: list[PolicyRule] = Field(default_factory=list)
    #: Filled in by ``load``: where the file is and its SHA-256.
    path: str = ""
    sha256: str = ""

    # -- reading -------------------------------------------------------------------------

    @classmethod
    def parse(cls, data: bytes, path: str = "<approvers>") -> ApproversFile:
        try:
            raw = tomllib.loads(data.decode())
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
            raise ApproversFileError(f"{path}: not valid TOML: {err}") from None
        try:
            file = cls.model_validate({**raw, "path": path, "sha256": hashlib.sha256(data).hexdigest()})
        except ValidationError as err:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}" for e in err.errors(include_url=False)
            )
            raise ApproversFileError(f"{path}: {problems}") from None
        file._check(path)
        return file

    def _check(self, path: str) -> None:
        seen: dict[str, str] = {}
        groups = {g for p in self.people.values() for g in p.groups}
        for name, person in self.people.items():
            try:
                keys.check_name(name)
                for key in [*person.keys, *person.retired_keys]:
                    keys.parse_public(key)
                    if key in seen and seen[key] != name:
                        raise ApproversFileError(f"the key {key[:20]}… is listed for both {seen[key]} and {name}")
                    seen[key] = name
                self._resolve(person.signs_for, groups, f"people.{name}.signs_for")
            except keys.ApproverKeyError as err:
                raise ApproversFileError(f"{path}: people.{name}: {err}") from None
            except ApproversFileError as err:
                raise ApproversFileError(f"{path}: {err}") from None
        rules: list[tuple[str, ToolRule | None]] = [(f"tools.{t}", r) for t, r in self.tools.items()]
        rules += [("defaults", self.defaults)] + [(f"defaults.{s}", getattr(self.defaults, s)) for s in SOURCES]
        for where, rule in rules:
            if rule is not None and rule.approvers is not None:
                try:
                    self._resolve(rule.approvers, groups, f"{where}.approvers")
                except ApproversFileError as err:
                    raise ApproversFileError(f"{path}: {err}") from None
        for rule in self.policy:
            for arg, cond in rule.when.items():
                try:
                    policy.check_condition(f"policy {rule.name!r}, argument {arg!r}", cond)
                except policy.ConditionError as err:
                    raise ApproversFileError(f"{path}: {err}") from None

    def _resolve(self, entries: list[str], groups: set[str] | None = None, where: str = "") -> list[str]:
        """Names, ``group:NAME`` and ``*`` to the people they mean (``["*"]`` for everyone)."""
        if groups is None:
            groups = {g for p in self.people.values() for g in p.groups}
        out: list[str] = []
        for entry in entries:
            if entry == EVERYONE:
                return [EVERYONE]
            if entry.startswith("group:"):
                group = entry.removeprefix("group:")
                if group not in groups:
                    raise ApproversFileError(f"{where}: no person is in group {group!r}")
                out += [n for n, p in self.people.items() if group in p.groups and n not in out]
            elif entry in self.people:
                if entry not in out:
                    out.append(entry)
            else:
                raise ApproversFileError(f"{where}: {entry!r} is not in [people]")
        return out

    # -- one call ------------------------------------------------------------------------

    def rule_for(self, tool: str) -> tuple[str, ToolRule]:
        """The rule that says who decides ``tool``, with its name: the tool's own, else the
        longest matching glob, else the defaults of its source, else the defaults."""
        base = ToolRule(approvers=[EVERYONE], required=1, four_eyes=False)
        name, found = "built-in default (anyone in the approvers file)", None
        if tool in self.tools:
            name, found = f"tools.{tool}", self.tools[tool]
        else:
            globs = [p for p in self.tools if any(c in p for c in "*?[") and fnmatch.fnmatchcase(tool, p)]
            if globs:
                pattern = max(globs, key=len)
                name, found = f"tools.{pattern}", self.tools[pattern]
        source = source_of(tool)
        by_source = getattr(self.defaults, source)
        layers = [self.defaults, by_source, found]
        if found is None:
            name = f"defaults.{source}" if by_source is not None else "defaults" if _set(self.defaults) else name
        merged = base.model_copy()
        for layer in layers:
            if layer is None:
                continue
            for field in ("approvers", "required", "four_eyes"):
                value = getattr(layer, field)
                if value is not None:
                    setattr(merged, field, value)
        return name, merged

    def gate(self, tool: str, arguments: dict[str, Any]) -> ApprovalGate:
        """The file as it applies to a call of ``tool`` with these named arguments."""
        rule_name, rule = self.rule_for(tool)
        assert rule.approvers is not None
        gate = ApprovalGate(
            configured=True,
            file_sha256=self.sha256,
            file=self.path,
            tool=tool,
            rule=rule_name,
            approvers=self._resolve(rule.approvers),
            approvers_listed=list(rule.approvers),
            required=rule.required or 1,
            four_eyes=bool(rule.four_eyes),
            keys={k: n for n, p in self.people.items() for k in p.keys},
            retired_keys={k: n for n, p in self.people.items() for k in p.retired_keys},
            signs_for={n: self._resolve(p.signs_for) for n, p in self.people.items() if p.signs_for},
        )
        for pol in self.policy:
            if pol.applies_to(tool) and policy.holds(pol.when, arguments):
                gate.verdict, gate.policy_rule = pol.decision, f"policy.{pol.name}"
                gate.policy_reason = pol.reason
                break
        return gate


def _set(rule: ToolRule) -> bool:
    return any(getattr(rule, f) is not None for f in ("approvers", "required", "four_eyes"))


def source_of(tool: str) -> str:
    """``mcp``, ``cli``, ``code`` (the code's own review) or ``python`` (a tools module's)."""
    if tool.startswith("mcp:"):
        return "mcp"
    if tool.startswith("cli:"):
        return "cli"
    return "code" if tool == CODE_TOOL else "python"


def load(path: str | os.PathLike[str]) -> ApproversFile:
    """Read and check an approvers file; ``ApproversFileError`` says what is wrong where."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as err:
        raise ApproversFileError(f"cannot read the approvers file {p}: {err.strerror or err}") from None
    return ApproversFile.parse(data, str(p))


def configured_path() -> str | None:
    """The approvers file the environment names (``CODEMODE_APPROVERS``), if any."""
    return os.environ.get(ENV) or None
