"""A command's arguments: the typed parameters the code sees, and the strict check that turns
one call's values into an argv.

The code never writes a command line. It passes Python values to named parameters, and this
module alone decides what reaches ``argv``:

- only the flags the command's help lists (or the host added) exist, each spelt as the help
  spells it; a key that is not a parameter (``**{"-c": ...}``, ``grep`` where there is none)
  is refused when the call is bound, before anything runs;
- values are checked against their types (a flag is ``True``/``False``, ``max_count`` an
  ``int``, a repeated option a list of strings);
- nothing goes before the subcommand (global options such as git's ``-c``, ``-C`` or
  ``--git-dir`` come only from the host's configuration);
- a positional argument that starts with ``-`` is refused, unless the command takes it
  after ``--`` (git's paths), where it is put;
- a value never becomes two arguments: ``--grep=x; rm -rf /`` is one argument, and there is
  no shell; a text value that goes in an argument of its own (``--flag value``, not
  ``--flag=value``) may not start with ``-``, so a flag misread as taking a value cannot
  carry an option in.

Rendering uses cli-to-py's ``options_to_args`` (``--flag``, ``--flag value``,
``--flag=value``, repeated flags) with keys we build from the help's own spellings; the forms
it has no rule for (``-Svalue``, ``--arg name value``) are written here.
"""

from __future__ import annotations

import keyword
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cli_to_py import options_to_args

from codemode.runtimes.signatures import ToolParameter

from .config import FlagSpec, PositionalSpec
from .help_parse import CommandHelp, Flag, Positional

#: The parameter that carries what the command reads on stdin (``stdin`` in the config).
INPUT = "input"
#: Longest value of one argument (Linux refuses a single argument over 128 KiB).
MAX_ARGUMENT = 128 * 1024


class ArgumentError(ValueError):
    """A call's values cannot become this command's argv; the message says which and why."""


@dataclass
class Arguments:
    """The parameters of one command, and how each becomes arguments."""

    #: ``git.log``: how messages name the command.
    code_name: str
    flags: dict[str, Flag] = field(default_factory=dict)
    positionals: list[Positional] = field(default_factory=list)
    stdin: bool = False
    #: The flags the host added (for the docstring).
    added: list[str] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        code_name: str,
        parsed: CommandHelp,
        *,
        flags: Mapping[str, FlagSpec | None],
        positionals: list[PositionalSpec] | None,
        inline_values: bool,
        stdin: bool,
    ) -> Arguments:
        """The parsed help with the host's changes: ``flags`` adds, replaces or (``None``)
        removes flags by parameter name; ``positionals`` replaces the usage line's."""
        own = {f.name: f for f in parsed.flags}
        added = []
        for name, spec in flags.items():
            if spec is None:
                own.pop(name, None)
            else:
                own[name] = _flag_from_spec(name, spec, inline_values)
                added.append(name)
        if inline_values:  # git: every long option with a value takes --flag=value
            for name, flag in own.items():
                if flag.arity == 1 and flag.spelling.startswith("--") and not flag.inline:
                    own[name] = flag.model_copy(update={"inline": True})
        chosen = (
            [Positional(**p.model_dump()) for p in positionals] if positionals is not None else list(parsed.positionals)
        )
        taken = set(own) | ({INPUT} if stdin else set())
        if stdin and INPUT in own:
            raise ArgumentError(f"{code_name}: a flag is named {INPUT!r}, the parameter that carries stdin")
        for p in chosen:  # a positional named like a flag: ``path`` -> ``path_arg``
            while p.name in taken or keyword.iskeyword(p.name):
                p.name += "_arg"
            taken.add(p.name)
        return cls(code_name, own, chosen, stdin, added)

    # -- what the code sees -----------------------------------------------------------------

    def parameters(self) -> list[ToolParameter]:
        """Positionals (required first, as Python needs), then keyword-only: stdin, the flags."""
        params = [
            ToolParameter(
                name=p.name,
                annotation=("str | list[str]" if p.variadic else "str") + ("" if p.required else " | None"),
                required=p.required,
                default_repr=None if p.required else "None",
            )
            for p in sorted(self.positionals, key=lambda p: not p.required)
        ]
        if self.stdin:
            params.append(
                ToolParameter(
                    name=INPUT, annotation="str | None", kind="keyword_only", required=False, default_repr="None"
                )
            )
        for flag in self.flags.values():
            annotation, default = _annotation(flag)
            params.append(
                ToolParameter(
                    name=flag.name, annotation=annotation, kind="keyword_only", required=False, default_repr=default
                )
            )
        return params

    def json_schema(self) -> dict[str, Any]:
        """The parameters as a JSON schema object (for LLM tool schemas)."""
        props: dict[str, Any] = {}
        for p in self.positionals:
            one = {"type": "string"}
            props[p.name] = {"anyOf": [one, {"type": "array", "items": one}]} if p.variadic else one
        if self.stdin:
            props[INPUT] = {"type": "string", "description": "what the command reads on stdin"}
        for flag in self.flags.values():
            props[flag.name] = {**_json_type(flag), "description": f"{flag.spelling}: {flag.help}".strip(": ")}
        required = [p.name for p in self.positionals if p.required]
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}

    # -- one call ---------------------------------------------------------------------------

    def argv(self, bound: Mapping[str, Any]) -> tuple[list[str], bytes | None]:
        """The arguments after the subcommand for a bound call, and the stdin bytes.
        Raises ``ArgumentError`` (a ``ValueError``) naming the parameter at fault."""
        flag_args: list[str] = []
        stdin: bytes | None = None
        positional = {p.name: p for p in self.positionals}
        for name, value in bound.items():
            if name == INPUT and self.stdin:
                if value is not None:
                    stdin = self._text(name, value, limit=None).encode()
                continue
            flag = self.flags.get(name)
            if flag is not None:
                flag_args.extend(self._render(flag, value))
            elif name not in positional:
                raise ArgumentError(f"{self.code_name}() got an unexpected keyword argument {name!r}")
        before: list[str] = []
        after: list[str] = []
        for p in self.positionals:
            value = bound.get(p.name)
            if value is None:
                continue
            values = value if p.variadic and isinstance(value, list) else [value]
            for v in values:
                text = self._text(p.name, v)
                if text.startswith("-") and not p.after_dashdash:
                    raise ArgumentError(
                        f"{self.code_name}(): {p.name}={text!r} starts with '-', so the command would read it as an "
                        f"option; it is refused (a file named so: './{text}')"
                    )
                (after if p.after_dashdash else before).append(text)
        return flag_args + before + (["--", *after] if after else []), stdin

    def _render(self, flag: Flag, value: Any) -> list[str]:
        name = flag.name
        if value is None or value is False:
            return []
        if flag.arity == 0:
            if value is not True:
                raise ArgumentError(f"{self.code_name}(): {name} is a flag: True or False, not {value!r}")
            return options_to_args({flag.spelling: True})
        if flag.optional_value and value is True:
            return [flag.spelling]
        if flag.arity == 2:
            if not isinstance(value, Mapping) or not value:
                raise ArgumentError(f"{self.code_name}(): {name} takes a dict of name -> value, not {value!r}")
            out: list[str] = []
            for k, v in value.items():
                out += [flag.spelling, self._text(name, k), self._text(name, v)]
            return out
        if isinstance(value, list) and not flag.repeat:
            raise ArgumentError(f"{self.code_name}(): {name} takes one value, not a list")
        values = value if isinstance(value, list) else [value]
        texts = [self._value(flag, v) for v in values]
        if flag.inline and not flag.spelling.startswith("--"):  # -Svalue
            return [f"{flag.spelling}{t}" for t in texts]
        if not flag.inline and flag.value_type == "str":
            for text in texts:
                if text.startswith("-"):
                    raise ArgumentError(
                        f"{self.code_name}(): {name}={text!r} would be an argument of its own after {flag.spelling} "
                        "and starts with '-'; it is refused (should the help text be misread, it would be an option)"
                    )
        equals = {flag.spelling} if flag.inline else set()
        return options_to_args({flag.spelling: texts}, equals)

    def _value(self, flag: Flag, value: Any) -> str:
        if flag.value_type == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise ArgumentError(f"{self.code_name}(): {flag.name} takes a whole number, not {value!r}")
            return str(value)
        if flag.value_type == "float":
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ArgumentError(f"{self.code_name}(): {flag.name} takes a number, not {value!r}")
            return repr(value)
        text = self._text(flag.name, value)
        if flag.choices and text not in flag.choices:
            raise ArgumentError(f"{self.code_name}(): {flag.name}={text!r} is not one of {', '.join(flag.choices)}")
        return text

    def _text(self, name: str, value: Any, limit: int | None = MAX_ARGUMENT) -> str:
        if not isinstance(value, str):
            raise ArgumentError(f"{self.code_name}(): {name} takes a string, not {type(value).__name__} {value!r}")
        if "\x00" in value:
            raise ArgumentError(f"{self.code_name}(): {name} contains a NUL character, which no argument can hold")
        if limit is not None and len(value.encode()) > limit:
            raise ArgumentError(f"{self.code_name}(): {name} is over {limit // 1024} KiB, the limit of one argument")
        return value


def _flag_from_spec(name: str, spec: FlagSpec, inline_values: bool) -> Flag:
    spelling = spec.flag or (f"-{name}" if len(name) == 1 else "--" + name.rstrip("_").replace("_", "-"))
    kind = spec.type
    arity = {"bool": 0, "dict[str, str]": 2}.get(kind, 1)
    inline = spec.inline if spec.inline is not None else (arity == 1 and inline_values and spelling.startswith("--"))
    return Flag(
        name=name,
        spelling=spelling,
        arity=arity,
        optional_value=kind == "bool | str",
        inline=inline or kind == "bool | str",
        value_type={"int": "int", "float": "float"}.get(kind, "str"),  # type: ignore[arg-type]
        choices=spec.choices,
        repeat=kind == "list[str]",
        help=spec.help,
    )


def _annotation(flag: Flag) -> tuple[str, str]:
    """(annotation, default) of a flag's parameter."""
    if flag.arity == 0:
        return "bool", "False"
    if flag.arity == 2:
        return "dict[str, str] | None", "None"
    base = flag.value_type
    if flag.choices and base == "str":
        base = f"Literal[{', '.join(repr(c) for c in flag.choices)}]"
    if flag.optional_value:
        return f"bool | {base} | None", "None"
    if flag.repeat:
        return f"{base} | list[{base}] | None", "None"
    return f"{base} | None", "None"


def _json_type(flag: Flag) -> dict[str, Any]:
    if flag.arity == 0:
        return {"type": "boolean"}
    if flag.arity == 2:
        return {"type": "object", "additionalProperties": {"type": "string"}}
    one: dict[str, Any] = {"type": {"int": "integer", "float": "number"}.get(flag.value_type, "string")}
    if flag.choices:
        one["enum"] = list(flag.choices)
    if flag.optional_value:
        return {"anyOf": [{"type": "boolean"}, one]}
    if flag.repeat:
        return {"anyOf": [one, {"type": "array", "items": one}]}
    return one
