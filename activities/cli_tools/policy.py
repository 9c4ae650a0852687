"""What applies to one command: its names, where and how it runs, and its policy.

The built-in profile (``profiles.py``) first, the configuration over it. Defaults, stated in
the docs: a subcommand on the read-only list runs without approval and may be run again
after a lost answer; any other needs a person's approval and never runs twice for one call
(a second attempt runs only when the first could not start the process). A command times
out after 60 s, and its output is cut at 1 MiB.
"""

from __future__ import annotations

import builtins
import keyword
import os
import shutil
from dataclasses import dataclass, field

from codemode.approvals.approval_when import Condition
from codemode.runtimes.signatures import python_parameter_name

from .config import CliConfig, CliToolConfig, FlagSpec, JsonMode, PositionalSpec, per_command
from .profiles import NONE, PROFILES, Profile

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_OUTPUT = 1024 * 1024
DEFAULT_ATTEMPTS = 3
#: The search path a command gets when the configuration gives none (the binary's own
#: directory goes first).
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
#: The function a binary without subcommands is called by: ``sqlite3.run(...)``.
ROOT_FUNCTION = "run"


class CliSetupError(ValueError):
    """A configured command cannot be offered (a missing binary, a name collision)."""


@dataclass(frozen=True)
class CommandSettings:
    #: The configuration's key for the binary (``git``), in canonical ids.
    key: str
    #: The binary, resolved to a path when the worker started.
    binary: str
    namespace: str
    #: As ``allow`` names it (``"stash list"``); ``""`` for a binary without subcommands.
    subcommand: str
    #: ``cli:git/log``, ``cli:git/stash_list``, ``cli:sqlite3``.
    tool: str
    #: ``log``, ``stash_list``, ``run``.
    attr: str
    args: tuple[str, ...] = ()
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    help_args: tuple[str, ...] | None = None
    inline_values: bool = False
    flags: dict[str, FlagSpec | None] = field(default_factory=dict)
    positionals: list[PositionalSpec] | None = None
    stdin: bool = False
    json: JsonMode = False
    requires_approval: bool = True
    #: Conditions that send a call to a person (then ``requires_approval`` is False).
    approval_when: tuple[Condition, ...] = ()
    idempotent: bool = False
    max_attempts: int = DEFAULT_ATTEMPTS
    timeout: float = DEFAULT_TIMEOUT
    max_output: int = DEFAULT_MAX_OUTPUT
    private: bool = False
    #: Why its policy is what it is, for ``codemode tools``.
    notes: tuple[str, ...] = ()

    @property
    def words(self) -> tuple[str, ...]:
        return tuple(self.subcommand.split())

    @property
    def code_name(self) -> str:
        return f"{self.namespace}.{self.attr}"

    @property
    def program(self) -> str:
        """``git log``: the command as a person writes it."""
        return " ".join([self.key, *self.words])


def commands_of(config: CliConfig) -> list[CommandSettings]:
    """Every allowed command of every configured binary. ``CliSetupError`` names every
    binary that is not there and every directory that does not exist."""
    problems: list[str] = []
    commands: list[CommandSettings] = []
    namespaces: dict[str, str] = {}
    for key, entry in config.tools.items():
        try:
            binary = _resolve(key, entry)
            cwd = os.path.abspath(entry.cwd) if entry.cwd else os.getcwd()
            if not os.path.isdir(cwd):
                raise CliSetupError(f"{key}: its cwd {cwd!r} is not a directory")
            ns = entry.namespace or python_parameter_name(key)
            if keyword.iskeyword(ns) or ns in vars(builtins):
                raise CliSetupError(
                    f'{key}: its namespace {ns!r} would hide Python\'s own; give another with "namespace"'
                )
            if ns in namespaces:
                raise CliSetupError(f'{namespaces[ns]} and {key} both use the namespace {ns!r}; give one a "namespace"')
            namespaces[ns] = key
            profile = _profile(entry, binary)
        except CliSetupError as err:
            problems.append(str(err))
            continue
        attrs: dict[str, str] = {}
        for sub in entry.allow if entry.allow is not None else [""]:
            attr = python_parameter_name(sub.replace(" ", "_")) if sub else ROOT_FUNCTION
            if attr in attrs:
                problems.append(f"{key}: {attrs[attr]!r} and {sub!r} would both be {ns}.{attr} in the code")
                continue
            attrs[attr] = sub
            commands.append(_settings(key, entry, profile, binary, cwd, ns, sub, attr))
    if problems:
        raise CliSetupError(f"{config.source}: " + "; ".join(problems))
    return commands


def _resolve(key: str, entry: CliToolConfig) -> str:
    command = entry.command or key
    if os.sep in command:
        found = command if os.path.isfile(command) and os.access(command, os.X_OK) else None
    else:
        found = shutil.which(command)
    if found is None:
        where = "" if os.sep in command else f" (PATH={os.environ.get('PATH', '')})"
        raise CliSetupError(f"{key}: the binary {command!r} is not there or not executable{where}")
    return os.path.abspath(found)


def _profile(entry: CliToolConfig, binary: str) -> Profile:
    if entry.profile is False:
        return NONE
    name = entry.profile or os.path.basename(binary)
    if entry.profile and name not in PROFILES:
        raise CliSetupError(f"no built-in profile {name!r} (there are: {', '.join(PROFILES)}, or false)")
    return PROFILES.get(name, NONE)


def _settings(
    key: str, entry: CliToolConfig, profile: Profile, binary: str, cwd: str, ns: str, sub: str, attr: str
) -> CommandSettings:
    read_only_list = set(entry.read_only) if entry.read_only is not None else set(profile.read_only)
    read_only = sub in read_only_list or "*" in read_only_list
    notes: list[str] = []
    approval = per_command(entry.approval, sub)
    when = tuple(per_command(entry.approval_when, sub) or ())
    if when:
        requires = False
        notes.append(f"approval when {' or '.join(map(str, when))} (configured)")
    elif approval is not None:
        requires = approval == "always"
        notes.append(f"approval: {approval} (configured)")
    else:
        requires = not read_only
        notes.append("no approval: read-only" if read_only else "approval: not read-only (the default)")
    idempotent = per_command(entry.idempotent, sub)
    if idempotent is None:
        idempotent = read_only
    elif idempotent != read_only:
        notes.append(f"{'' if idempotent else 'not '}idempotent (configured)")
    attempts = per_command(entry.max_attempts, sub) or DEFAULT_ATTEMPTS
    if attempts == 1:
        notes.append("never retried")
    elif idempotent:
        notes.append(f"retried up to {attempts} attempts")
    else:
        notes.append("never run twice: retried only when it could not start")
    timeout = per_command(entry.timeout, sub) or DEFAULT_TIMEOUT
    max_output = per_command(entry.max_output, sub) or DEFAULT_MAX_OUTPUT
    json_mode = per_command(entry.json_output, sub) or False
    private = bool(per_command(entry.private, sub))
    if json_mode:
        notes.append("JSON output" if json_mode is True else "JSON values")
    if private:
        notes.append("private data")
    flags: dict[str, FlagSpec | None] = {}
    for table in (profile.flags, entry.flags):
        for scope in ("*", sub):
            for name, spec in (table.get(scope) or {}).items():
                flags[name] = FlagSpec(type=spec) if isinstance(spec, str) else spec
    positionals = entry.positionals.get(sub, entry.positionals.get("*"))
    if positionals is None:
        positionals = profile.positionals.get(sub)
    env = {"PATH": f"{os.path.dirname(binary)}:{DEFAULT_PATH}", **profile.env, **(entry.env or {})}
    stdin = per_command(entry.stdin, sub)
    return CommandSettings(
        key=key,
        binary=binary,
        namespace=ns,
        subcommand=sub,
        tool=f"cli:{key}/{'_'.join(sub.split())}" if sub else f"cli:{key}",
        attr=attr,
        args=tuple(entry.args if entry.args is not None else profile.args),
        cwd=cwd,
        env=env,
        help_args=tuple(entry.help) if entry.help else profile.help,
        inline_values=entry.inline_values if entry.inline_values is not None else profile.inline_values,
        flags=flags,
        positionals=positionals,
        stdin=profile.stdin if stdin is None else stdin,
        json=json_mode,
        requires_approval=requires,
        approval_when=when,
        idempotent=idempotent,
        max_attempts=attempts,
        timeout=timeout,
        max_output=max_output,
        private=private,
        notes=tuple(notes),
    )
