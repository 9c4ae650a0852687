"""``CliTools``: the configured command-line tools of one worker, and what one call means.

```python
cli = CliTools(load_cli_config("cli.json")).start()   # every binary there? (runs nothing)
registry = ToolRegistry.from_module("tools").include(cli.tool_specs())
worker = CodeModeWorker(client, registry)
```

Each call is a tool activity like any other (summary, call id, retry policy, timeout,
approval); this module decides what its outcomes mean:

- exit status 0: ``{"returncode", "stdout", "stderr"}`` (and ``"truncated": True`` when the
  output passed the cap and the command was stopped; the text says so at its end), or the
  JSON it printed when the configuration says ``json``;
- a nonzero exit: ``CalledProcessError`` in the code with the command's stderr, not retried
  (a sandbox raises only built-in exception types, so the code sees a ``RuntimeError`` whose
  message starts with ``CalledProcessError:``);
- the timeout: the command and its children are killed, ``TimeoutError`` in the code, not
  retried;
- the process could not be started (``OSError``): nothing ran, so the call is retried, and
  the attempt leaves a note saying so;
- a later attempt of a command that is not idempotent (its worker died mid-call, or the
  attempt timed out) runs only when the attempt before it left that note: ``git commit``
  never runs twice for one call.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codemode.runtimes.paths import data_dir
from codemode.runtimes.signatures import render_stubs

from .. import call_attempts
from ..models import clip, human_bytes
from ..tools import ToolFailure
from ..undo_templates import configured_compensation
from .arguments import ArgumentError
from .config import CliConfig, load_cli_config
from .policy import CliSetupError, commands_of
from .process import CommandTimedOut, Finished, run_process
from .specs import CliToolSpec, build_spec

#: Heartbeat detail an attempt leaves when its process could not be started.
UNSENT = "cli_unsent"
#: Characters of stderr quoted in a ``CalledProcessError``.
STDERR_TAIL = 4000


class CliStartError(RuntimeError):
    """The configured commands cannot be offered: a binary is missing, a directory does not
    exist, two names collide. The message names each."""


class CliTools:
    """The commands of a CLI configuration."""

    def __init__(
        self, config: CliConfig | str | os.PathLike[str] | Mapping[str, Any], *, cache_dir: Path | None = None
    ) -> None:
        self.config = config if isinstance(config, CliConfig) else load_cli_config(config)
        self.cache_dir = cache_dir if cache_dir is not None else data_dir() / "cli-help"
        self._specs: list[CliToolSpec] = []
        self.started = False

    def start(self) -> CliTools:
        """Find every binary (on PATH, or at its path) and check every working directory;
        ``CliStartError`` names each that is not there. Runs no command: help texts are read
        when a signature is first needed."""
        if self.started:
            return self
        try:
            commands = commands_of(self.config)
        except CliSetupError as err:
            raise CliStartError(str(err)) from None
        self._specs = [build_spec(c, self._caller, self.cache_dir) for c in commands]
        try:
            self._compensations()
        except ValueError as err:
            raise CliStartError(str(err)) from None
        self.started = True
        return self

    def _compensations(self) -> None:
        """Each command's ``compensate`` (another subcommand of the same binary)."""
        by_word = {(s.settings.key, s.settings.subcommand): s for s in self._specs if s.settings is not None}
        for spec in self._specs:
            s = spec.settings
            assert s is not None
            cfg = self.config.tools[s.key].compensate.get(s.subcommand or "*")
            if cfg is None:
                continue
            other = by_word.get((s.key, " ".join(cfg.tool.split())))
            if other is None:
                raise ValueError(f"{s.key}: compensate.{s.subcommand} names {cfg.tool!r}, which is not a command here")
            asks = other.options.requires_approval is True or other.approval_rules is not None
            spec.configured_compensation = configured_compensation(cfg, other, asks)
            spec.policy_notes = [*spec.policy_notes, f"can be undone: {other.code_name}(...) (configured)"]

    def tool_specs(self) -> list[CliToolSpec]:
        if not self.started:
            raise RuntimeError("CliTools.start() finds the binaries: call it first")
        return list(self._specs)

    def stubs(self, names: list[str] | None = None) -> str:
        """The full stubs (help read) of these commands (code names, canonical ids or
        namespaces; default: all)."""
        chosen = [s for s in self.tool_specs() if names is None or {s.name, s.code_name, s.namespace} & set(names)]
        return render_stubs([s.signature for s in chosen])

    # -- one call -------------------------------------------------------------------------

    def _caller(self, spec: CliToolSpec) -> Any:
        async def call_cli_tool(**kwargs: Any) -> Any:
            return await self.call(spec, kwargs)

        assert spec.settings is not None
        call_cli_tool.__name__ = spec.settings.attr
        return call_cli_tool

    async def call(self, spec: CliToolSpec, kwargs: Mapping[str, Any]) -> Any:
        """Run the command (arguments by parameter name); its result, or ``ToolFailure``
        saying what the code gets and whether the call may be retried."""
        s = spec.settings
        assert s is not None
        if s.idempotent:
            attempt = call_attempts.attempt()
        else:
            attempt = call_attempts.refuse_a_repeat(
                spec.name, UNSENT, what="the command", not_again="it is not run again"
            )
        try:
            argv, stdin = spec.argv(kwargs)
        except ArgumentError as err:
            raise ToolFailure("ValueError", str(err), retryable=False) from None
        shown = _shown(s.key, argv)
        try:
            done = await run_process(
                argv, cwd=s.cwd, env=s.env, stdin=stdin, timeout=s.timeout, max_output=s.max_output
            )
        except CommandTimedOut as err:
            # It ran, and was stopped: whatever it did so far stays (a rollback reconciles it).
            raise ToolFailure(
                "TimeoutError", f"{spec.name}: `{shown}` {err}", retryable=False, indeterminate=True
            ) from None
        except OSError as err:
            call_attempts.note_unsent(UNSENT, attempt)
            raise ToolFailure(
                "OSError", f"{spec.name}: `{shown}` could not be started: {err}; it did not run", retryable=True
            ) from None
        return _outcome(spec, shown, done)


def _outcome(spec: CliToolSpec, shown: str, done: Finished) -> Any:
    s = spec.settings
    assert s is not None
    stdout = done.stdout.decode(errors="replace")
    stderr = done.stderr.decode(errors="replace")
    if done.cut:
        note = f"\n[output cut at {human_bytes(s.max_output)}: the command printed more and was stopped]"
        return {"returncode": done.returncode, "stdout": stdout + note, "stderr": stderr, "truncated": True}
    if done.returncode != 0:
        tail = stderr.strip()[-STDERR_TAIL:] or (
            f"(stderr empty; stdout: {stdout.strip()[-STDERR_TAIL:]})" if stdout.strip() else "(no output)"
        )
        raise ToolFailure(
            "CalledProcessError",
            f"{spec.name}: `{shown}` exited with status {done.returncode}: {tail}",
            retryable=False,
        )
    if not s.json:
        return {"returncode": 0, "stdout": stdout, "stderr": stderr}
    try:
        return _json(stdout, stream=s.json == "stream")
    except ValueError as err:
        raise ToolFailure(
            "ValueError",
            f"{spec.name}: `{shown}` printed what is not JSON ({err}): {clip(stdout, 300)}",
            retryable=False,
        ) from None


def _json(text: str, *, stream: bool) -> Any:
    """One JSON document (None for no output), or with ``stream`` every JSON value printed."""
    if not stream:
        return json.loads(text) if text.strip() else None
    decoder, values, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return values
        value, i = decoder.raw_decode(text, i)
        values.append(value)


def _shown(key: str, argv: list[str]) -> str:
    """The command line as messages show it (the binary by its key, long values cut)."""
    return clip(shlex.join([key, *argv[1:]]), 300)
