"""What the configuration files of tool sources share (``--mcp-config``, ``--cli-config``):
reading one (JSON, or TOML for a ``.toml`` name), ``${VAR}`` expansion, and checking one
entry with a pydantic model, with messages that name the key at fault.

``${VAR}`` (or ``${VAR:-default}``) is read from the worker's environment when the file is
loaded: secrets live in neither the file nor the workflow history (which never holds a
configuration)."""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class ConfigProblem(ValueError):
    """A file or an entry cannot be used; the message says where and why (the caller
    raises its own error type with it)."""


class MissingVariable(ConfigProblem):
    """A value names ``${VAR}`` that is not set (and has no default)."""


def config_section(
    source: str | os.PathLike[str] | Mapping[str, Any], key: str, *, kind: str, example: str
) -> tuple[str, dict[str, Mapping[str, Any]]]:
    """(where, name -> entry) of ``source``'s ``key`` object (``mcpServers``, ``cliTools``):
    ``source`` is a path or the parsed mapping; other top-level keys are left alone. A name
    may not be empty nor hold ``/`` or ``:`` (it goes into canonical ids); ``kind`` names
    the entries in messages (``server``, ``tool``)."""
    if isinstance(source, Mapping):
        data: Any = source
        where = "<config>"
    else:
        where = str(source)
        data = read_config_file(Path(source))
    if not isinstance(data, Mapping) or not isinstance(data.get(key), Mapping):
        raise ConfigProblem(f'{where}: expected an object with "{key}": {example}')
    entries: dict[str, Mapping[str, Any]] = {}
    for name, entry in data[key].items():
        name = str(name)
        if not name or "/" in name or ":" in name:
            raise ConfigProblem(f"{where}: {kind} name {name!r} may not be empty or contain '/' or ':'")
        if not isinstance(entry, Mapping):
            raise ConfigProblem(f"{where}: {kind} {name!r}: expected an object")
        entries[name] = entry
    return where, entries


def read_config_file(path: Path) -> Any:
    """The parsed file: TOML when its name ends in ``.toml``, else JSON."""
    where = str(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigProblem(f"{where}: no such file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigProblem(f"{where}: cannot read it: {err}") from None
    if path.suffix.lower() == ".toml":
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise ConfigProblem(f"{where}: not TOML: {err}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ConfigProblem(f"{where}: not JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None


def checked_entry(
    model: type[M],
    name: str,
    entry: Mapping[str, Any],
    *,
    environ: Mapping[str, str],
    expand: Collection[str],
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> M:
    """One entry of a file (``name``'s), its ``expand`` keys' ``${VAR}`` replaced (then
    ``prepare``d), checked by ``model``. Raises ``ConfigProblem`` naming the keys at fault."""
    try:
        expanded = {k: expand_vars(v, environ, f"{name}.{k}") if k in expand else v for k, v in entry.items()}
        return model.model_validate(prepare(expanded) if prepare else expanded)
    except ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'entry'}: {e['msg']}" for e in err.errors(include_url=False)
        )
        raise ConfigProblem(problems) from None


def expand_vars(value: Any, environ: Mapping[str, str], where: str) -> Any:
    """``value`` with every ``${VAR}`` in its strings (lists and mappings too) replaced;
    ``where`` names the value in the ``MissingVariable`` message."""
    if isinstance(value, str):

        def sub(m: re.Match[str]) -> str:
            name, default = m.group(1), m.group(2)
            if name in environ:
                return environ[name]
            if default is not None:
                return default
            raise MissingVariable(f"{where} names ${{{name}}}, which is not set in the environment")

        return _VAR.sub(sub, value)
    if isinstance(value, list):
        return [expand_vars(v, environ, where) for v in value]
    if isinstance(value, Mapping):
        return {k: expand_vars(v, environ, f"{where}.{k}") for k, v in value.items()}
    return value
