"""A subcommand's help text -> its flags and positional arguments.

Our own parser, because cli-to-py's ``parse_help_text`` (read and run here, see the CLI
tools notes) gets wrong what a strict, typed signature rests on: it makes optional
positionals required (``git log [<revision-range>]``), loses ``[--]`` (which arguments are
paths), reads single-dash long options as a letter and a value (sqlite3's ``-append`` ->
``-a`` with value ``ppend``), and keeps one value of two-value options (jq's
``--arg a v``). Its section walk is what the flag lines below do; the usage line is parsed
into a small bracket tree instead of with one regular expression.

What it understands:

- option lines: ``-q, --quiet``, ``--decorate[=...]`` (an optional value, given inline),
  ``-U, --unified[=<n>]``, ``--decorate-refs <pattern>`` (a value), ``--arg a v`` (two),
  ``-S[<keyid>]`` (an optional value attached), ``-json`` and ``-cmd COMMAND`` (single-dash
  long options), ``--[no-]status`` and ``-[no]header`` (two flags), description columns and
  continuation lines;
- the first usage block: ``[...]`` optional, ``(...)`` groups, ``<name>`` and ``NAME``
  placeholders, ``...`` repetition, ``--`` (what follows it goes after ``--``); a bracket
  group with an option in it holds that option's value, not a positional.
"""

from __future__ import annotations

import keyword
import re
from typing import Literal

from pydantic import BaseModel

#: Bumped when what this parser makes of a text changes (the help cache is keyed by it).
PARSER_VERSION = 1

_ANSI = re.compile(r"\x1B(?:\[[0-?]*[ -/]*[@-~]|\].*?(?:\x07|\x1B\\))")
_USAGE = re.compile(r"^\s*usage:\s*(.*)$", re.IGNORECASE)
_FLAG_LINE = re.compile(r"^(\s+)(-{1,2}(?:\[no-?\])?[A-Za-z0-9?].*)$")
_COLUMNS = re.compile(r"^(\S.*?)(?:\s{2,}|\t+)(\S.*)$")
_ALIAS = re.compile(r"(?P<dash>--?)(?P<no>\[no-?\])?(?P<name>[A-Za-z0-9?][\w.?-]*)(?P<rest>.*)$")
_NUMERIC = frozenset({"n", "num", "number", "count", "depth", "width", "lines", "limit", "size"})
#: Placeholders that stand for options or a subcommand, not for a positional argument.
_NOT_POSITIONAL = frozenset({"options", "option", "flags", "command", "cmd", "args", "arguments", "subcommand"})
_UNWANTED = frozenset({"help", "h"})
_REPEATABLE = re.compile(
    r"can be (?:given|used|specified|repeated)[^.]*(?:more than once|multiple times)"
    r"|may be (?:given|repeated|specified) (?:more than once|multiple times)|repeatable",
    re.IGNORECASE,
)
#: What an option's value looks like in a help text: ``<pattern>``, ``COMMAND``, ``ARGS...``,
#: or a single letter (jq's ``--arg a v``).
_VALUE_WORD = re.compile(r"<[^>]*>(?:\.\.\.)?|[A-Z][A-Z0-9_:-]*(?:\.\.\.)?|[a-z](?:\.\.\.)?")


class Flag(BaseModel):
    #: The Python parameter: ``max_count`` for ``--max-count``, ``json`` for ``-json``.
    name: str
    #: How it is written on the command line (the long form when there is one).
    spelling: str
    #: Values it takes: 0 (a switch), 1, or 2 (``--arg name value``).
    arity: int = 0
    #: ``--flag[=value]``: given alone or with a value, which must then be inline.
    optional_value: bool = False
    #: The value goes in the same argument: ``--flag=value``, ``-Svalue``.
    inline: bool = False
    value_name: str | None = None
    choices: list[str] | None = None
    #: May be given several times (a list).
    repeat: bool = False
    #: The type of its value.
    value_type: Literal["str", "int", "float"] = "str"
    help: str = ""


class Positional(BaseModel):
    name: str
    required: bool = False
    variadic: bool = False
    after_dashdash: bool = False


class CommandHelp(BaseModel):
    """What a help text says of one command."""

    #: The help text, without colour codes.
    text: str = ""
    usage: str = ""
    flags: list[Flag] = []
    positionals: list[Positional] = []

    @property
    def understood(self) -> bool:
        return bool(self.usage or self.flags)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def parse_help(text: str, program: str = "") -> CommandHelp:
    """Parse a help text; ``program`` (the binary's name) helps tell alternative usage lines
    from the continuation of the first."""
    text = strip_ansi(text).replace("\r\n", "\n").expandtabs(8)
    usage = _usage_block(text, program)
    return CommandHelp(text=text.strip(), usage=usage, flags=_flags(text), positionals=positionals_of(usage))


def python_name(flag: str) -> str:
    """``--max-count`` -> ``max_count``; ``-C`` -> ``C``; ``--not`` -> ``not_``; ``-1`` -> ``_1``."""
    name = re.sub(r"\W", "_", flag.lstrip("-")) or "_"
    if not name.isidentifier():
        name = "_" + name
    if keyword.iskeyword(name) or name == "self":
        name += "_"
    return name


# -- options ---------------------------------------------------------------------------------


def _flags(text: str) -> list[Flag]:
    flags: list[Flag] = []
    seen: set[str] = set()
    current: list[Flag] = []
    indent = 0
    in_usage = False
    for line in text.split("\n"):
        if _USAGE.match(line):
            in_usage = True
            continue
        if not line.strip():
            in_usage, current = False, []
            continue
        m = _FLAG_LINE.match(line)
        if in_usage and (m or not line[:1].isspace()):
            in_usage = False  # the usage block ended without a blank line (sqlite3)
        if m and not in_usage:
            indent = len(m.group(1))
            current = _flag_line(m.group(2).strip())
            for flag in current:
                if flag.name not in seen and flag.name.lstrip("_") not in _UNWANTED:
                    seen.add(flag.name)
                    flags.append(flag)
            continue
        if current and len(line) - len(line.lstrip()) > indent:  # the description, continued
            for flag in current:
                flag.help = f"{flag.help} {line.strip()}".strip()
                flag.repeat = flag.repeat or _says_repeatable(flag.help)
        elif not line.startswith((" ", "\t")):
            current = []
    return flags


def _flag_line(line: str) -> list[Flag]:
    columns = _COLUMNS.match(line)
    part, description = (columns.group(1), columns.group(2)) if columns else (line, "")
    aliases = [a.strip() for a in re.split(r",\s*(?=-)", part) if a.strip()]
    spellings: list[tuple[str, str]] = []  # (spelling, the 'no' form when [no-] was written)
    arity, optional, inline, value_name, repeat = 0, False, False, None, False
    for alias in aliases:
        m = _ALIAS.match(alias)
        if not m:
            continue
        dash, name, rest = m.group("dash"), m.group("name"), m.group("rest")
        spelling = dash + name
        negated = f"{dash}{m.group('no').strip('[]')}{name}" if m.group("no") else ""
        spellings.append((spelling, negated))
        got = _value(rest)
        if got is not None and arity == 0:
            arity, optional, inline, value_name, repeat = got
    if not spellings:
        return []
    spelling = max((s for s, _ in spellings), key=lambda s: (s.startswith("--"), len(s)))
    choices = _choices(part) or _choices(description)
    out = [
        Flag(
            name=python_name(spelling),
            spelling=spelling,
            arity=arity,
            optional_value=optional,
            inline=inline,
            value_name=value_name,
            choices=choices,
            repeat=repeat or _says_repeatable(description),
            value_type="int" if value_name and value_name.lower() in _NUMERIC else "str",
            help=description,
        )
    ]
    for _, negated in spellings:
        if negated:
            out.append(Flag(name=python_name(negated), spelling=negated, help=f"(negates {spelling})"))
    return out


def _value(rest: str) -> tuple[int, bool, bool, str | None, bool] | None:
    """What follows an option's name: (arity, optional, inline, value name, repeated)."""
    if not rest:
        return None
    repeat = rest.rstrip().endswith("...")
    if m := re.match(r"\[=?(<?[^\]]*?>?)\]", rest):  # --x[=<v>], -S[<v>]
        return 1, True, True, _placeholder(m.group(1)), repeat
    if m := re.match(r"=(\S+)", rest):  # --x=<v>
        return 1, False, True, _placeholder(m.group(1)), repeat
    if m := re.match(r"(<[^>]*>)", rest):  # -u<mode>
        return 1, False, True, _placeholder(m.group(1)), repeat
    words = []
    for word in re.findall(r"<[^>]*>(?:\.\.\.)?|\S+", rest.strip()):
        if not _VALUE_WORD.fullmatch(word):
            break  # the description, after a single space (``--name-status show names...``)
        words.append(word)
    if not words:
        return None
    return min(len(words), 2), False, False, _placeholder(words[0]), repeat


def _placeholder(text: str) -> str:
    return text.strip("<>[]=.").strip() or "value"


def _choices(text: str) -> list[str] | None:
    m = re.search(r"\{([^}]+)\}", text) or re.search(
        r"[(\[](?:choices|possible values|one of):\s*([^)\]]+)[)\]]", text, re.IGNORECASE
    )
    if not m:
        return None
    found = [c.strip() for c in re.split(r"[,|]", m.group(1)) if c.strip()]
    return found if len(found) > 1 and all(re.fullmatch(r"[\w.-]+", c) for c in found) else None


def _says_repeatable(text: str) -> bool:
    return bool(_REPEATABLE.search(text))


# -- usage -------------------------------------------------------------------------------------


def _usage_block(text: str, program: str) -> str:
    """The first usage line and its continuation lines (not the ``or:`` alternatives)."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _USAGE.match(line)
        if not m:
            continue
        parts = [m.group(1).strip()] if m.group(1).strip() else []
        for nxt in lines[i + 1 :]:
            stripped = nxt.strip()
            if not stripped or not nxt[:1].isspace() or stripped.lower().startswith("or:"):
                break
            if parts and program and stripped.split()[0] == program:  # another form of the command
                break
            parts.append(stripped)
        return " ".join(parts)
    return ""


_TOKEN = re.compile(r"<[^>]*>(?:\.\.\.)?|\.\.\.|[\[\]()|]|[^\s\[\]()|<]+(?:<[^>]*>)?(?:\.\.\.)?")


def positionals_of(usage: str) -> list[Positional]:
    """The positional arguments of a usage line, after the program's and subcommands' names."""
    tokens = _TOKEN.findall(usage)
    while tokens and re.fullmatch(r"[a-z0-9][\w.+-]*", tokens[0]):
        tokens.pop(0)  # git, log
    tree, _ = _group(tokens, 0)
    found: list[Positional] = []
    _walk(tree, optional=False, after=False, out=found)
    names: dict[str, int] = {}
    for p in found:  # <path> <path> -> path, path_2
        names[p.name] = names.get(p.name, 0) + 1
        if names[p.name] > 1:
            p.name = f"{p.name}_{names[p.name]}"
    return found


def _group(tokens: list[str], i: int) -> tuple[list[object], int]:
    """Tokens from ``i`` to the closing bracket -> nodes: a str, or (kind, children, repeated)."""
    nodes: list[object] = []
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if tok in ("[", "("):
            children, i = _group(tokens, i)
            nodes.append(["[" if tok == "[" else "(", children, False])
        elif tok in ("]", ")"):
            return nodes, i
        elif tok == "..." and nodes:
            last = nodes[-1]
            if isinstance(last, list):
                last[2] = True
            else:
                nodes[-1] = str(last) + "..."
        else:
            nodes.append(tok)
    return nodes, i


def _has_option(nodes: list[object]) -> bool:
    for node in nodes:
        if isinstance(node, list):
            if _has_option(node[1]):
                return True
        elif node.startswith("-") and node.rstrip(".") != "--":
            return True
    return False


def _walk(nodes: list[object], *, optional: bool, after: bool, out: list[Positional], repeated: bool = False) -> bool:
    """Collect positionals; returns whether a ``--`` was passed (what follows goes after it)."""
    for node in nodes:
        if isinstance(node, list):
            kind, children, rep = node
            if _has_option(children) or "|" in children:
                continue  # an option's value, or alternatives: not a positional
            after = _walk(children, optional=optional or kind == "[", after=after, out=out, repeated=repeated or rep)
            continue
        tok = str(node)
        if tok == "--":
            after = True
            continue
        variadic = repeated or tok.endswith("...")
        tok = tok.removesuffix("...")
        if tok.startswith("<") and tok.endswith(">"):
            name = tok[1:-1].removesuffix("...")
        elif re.fullmatch(r"[A-Z][A-Z0-9_-]*", tok) or (
            (optional or variadic) and re.fullmatch(r"[a-z][\w-]*", tok)  # jq's [file...]
        ):
            name = tok
        else:
            continue  # a literal word or an option
        if name.lower() in _NOT_POSITIONAL:
            continue
        out.append(
            Positional(name=python_name(name.lower()), required=not optional, variadic=variadic, after_dashdash=after)
        )
    return after
