"""Command-line tools as durable functions in code (``--cli-config FILE``).

``git.log(max_count=5, oneline=True)`` in the code is the tool call ``cli:git/log``: an
activity that runs ``git log --max-count=5 --oneline`` with an argv (never a shell), a clean
environment, a timeout and an output cap, approved by a person when the policy says so.

- ``config.py``: the ``{"cliTools": {...}}`` file (JSON or TOML), ``${VAR}`` expansion, keys;
- ``profiles.py``: what we know of git, jq and sqlite3 (read-only subcommands, the flags
  their help leaves out, the flags the code may never pass);
- ``policy.py``: what applies to one command (binary found at start, names, approval,
  retries, timeout, cap, environment);
- ``help_text.py`` / ``help_parse.py``: a subcommand's help, read on first need and cached,
  parsed into flags and positional arguments;
- ``arguments.py``: typed parameters, and the strict check that makes one call's argv;
- ``specs.py``: each command as a ``ToolSpec`` (canonical id, listed and full signatures);
- ``process.py``: running the command;
- ``commands.py``: ``CliTools`` (start, the specs, what each outcome means in the code).

cli-to-py (PyPI ``cli-to-py``) reads the help texts and renders flags; the policy, the
validation, the signatures and the activity are ours, and no cli-to-py object reaches the
sandbox: the code sees stubs, each call crosses as JSON arguments.
"""

from __future__ import annotations

from .commands import CliStartError, CliTools
from .config import CliConfig, CliConfigError, CliToolConfig, load_cli_config
from .specs import CliToolSpec

__all__ = [
    "CliConfig",
    "CliConfigError",
    "CliStartError",
    "CliToolConfig",
    "CliToolSpec",
    "CliTools",
    "load_cli_config",
]
