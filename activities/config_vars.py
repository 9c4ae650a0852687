"""``${VAR}`` (or ``${VAR:-default}``) in configuration files, read from the worker's
environment when the file is loaded: secrets live in neither the file nor the workflow
history (which never holds a configuration). Shared by ``--mcp-config`` and ``--cli-config``."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class MissingVariable(Exception):
    """A value names ``${VAR}`` that is not set (and has no default)."""


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
