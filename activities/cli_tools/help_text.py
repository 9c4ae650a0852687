"""A subcommand's help, read the first time a worker needs its signature, and cached.

``git log -h`` is run (then ``--help`` when ``-h`` says nothing useful) through cli-to-py's
``run_for_help_sync`` (no shell, a timeout, the environment given and nothing else) with
the command's own working directory and clean environment (``git diff -h`` says something
else inside a repository), and its ``select_help_output`` picks stdout or stderr. The parsed
result is kept in memory and in ``<data dir>/cli-help/``, keyed by the binary (its path, size
and modification time, so an upgrade reads the help again), the subcommand, the help
arguments, the directory and our parser's version.

It runs synchronously (a signature is a property read in plain code); a help text comes
back in milliseconds, and once per binary version per machine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from cli_to_py import CommandTimeout, run_for_help_sync
from cli_to_py.best_help import select_help_output

from .help_parse import PARSER_VERSION, CommandHelp, parse_help

log = logging.getLogger(__name__)

#: Seconds a help command may take.
HELP_TIMEOUT = 5.0
#: The help arguments tried in turn when the configuration names none.
DEFAULT_HELP = (("-h",), ("--help",))

_memory: dict[str, CommandHelp] = {}


def read_help(
    binary: str,
    words: Sequence[str],
    *,
    help_args: Sequence[str] | None,
    cwd: str | None,
    env: Mapping[str, str],
    cache_dir: Path | None,
) -> CommandHelp:
    """The parsed help of ``binary words...``; an empty one (``understood`` False) when no
    help could be read, never an exception: the command stays callable with the flags the
    host declared."""
    tries = [tuple(help_args)] if help_args else list(DEFAULT_HELP)
    key = _key(binary, words, tries, cwd)
    if key in _memory:
        return _memory[key]
    cached = _load(cache_dir, key)
    if cached is None:
        cached = _read(binary, words, tries, cwd, env)
        _save(cache_dir, key, cached)
    _memory[key] = cached
    return cached


def _read(
    binary: str, words: Sequence[str], tries: list[tuple[str, ...]], cwd: str | None, env: Mapping[str, str]
) -> CommandHelp:
    program = os.path.basename(binary)
    best = CommandHelp()
    for args in tries:
        try:
            got = run_for_help_sync(binary, [*words, *args], timeout=HELP_TIMEOUT, cwd=cwd, env=dict(env))
        except (OSError, CommandTimeout) as err:
            log.warning("%s %s %s: no help: %s", program, " ".join(words), " ".join(args), err)
            continue
        text = select_help_output(got.stdout, got.stderr)
        parsed = parse_help(text, program)
        if parsed.understood:
            return parsed
        best = best if best.text else parsed
    return best


def _key(binary: str, words: Sequence[str], tries: list[tuple[str, ...]], cwd: str | None) -> str:
    try:
        st = os.stat(binary)
        stamp = [os.path.realpath(binary), st.st_size, st.st_mtime_ns]
    except OSError:
        stamp = [binary]
    raw = json.dumps([PARSER_VERSION, stamp, list(words), tries, cwd])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def _load(cache_dir: Path | None, key: str) -> CommandHelp | None:
    if cache_dir is None:
        return None
    try:
        return CommandHelp.model_validate_json((cache_dir / f"{key}.json").read_bytes())
    except (OSError, ValueError):
        return None


def _save(cache_dir: Path | None, key: str, parsed: CommandHelp) -> None:
    if cache_dir is None or not parsed.understood:
        return
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = cache_dir / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(parsed.model_dump_json())
        tmp.replace(cache_dir / f"{key}.json")
    except OSError as err:  # a read-only data dir: the memory cache still serves this process
        log.info("cannot cache a help text in %s: %s", cache_dir, err)
