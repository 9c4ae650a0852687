"""Run ``codemode`` as a real subprocess (``python -m codemode``) without blocking the event loop.

The session's event loop also drives in-process workers, so commands run through asyncio
subprocesses: a blocking ``subprocess.run`` would starve them.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Result:
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err}"


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "codemode", *args]


async def codemode(
    *args: str, env: dict[str, str], stdin: str | None = None, timeout: float = 90, cwd: Path = REPO
) -> Result:
    proc = await asyncio.create_subprocess_exec(
        *cli_command(*args),
        cwd=cwd,
        env={**env, "PYTHONFAULTHANDLER": "1"},  # a command that hangs is made to say where (below)
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    talk = asyncio.ensure_future(proc.communicate(stdin.encode() if stdin is not None else None))
    try:
        out, err = await asyncio.wait_for(asyncio.shield(talk), timeout)
    except TimeoutError:
        proc.send_signal(signal.SIGABRT)  # faulthandler prints every thread's stack, then it dies
        try:
            out, err = await asyncio.wait_for(talk, 10)
        except TimeoutError:
            proc.kill()
            out, err = await talk
        raise AssertionError(f"codemode {' '.join(args)} did not finish in {timeout}s:\n{out.decode()}\n{err.decode()}")
    return Result(proc.returncode or 0, out.decode(), err.decode())


def approve_command(text: str) -> tuple[str, str]:
    """(execution id, call id) from the printed `codemode approve ID CALL_ID` line."""
    m = re.search(r"codemode approve (\S+) (\S+)", text)
    assert m, f"no approve command printed:\n{text}"
    return m.group(1), m.group(2)


class Background:
    """A long-running ``codemode`` command (worker, server, dev); its output goes to a file,
    so a chatty worker can never block on a full pipe."""

    def __init__(self, *args: str, env: dict[str, str], log: Path) -> None:
        self.args, self.env, self.log = args, env, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, ready: str, timeout: float = 30) -> Background:
        with open(self.log, "ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                *cli_command(*self.args),
                cwd=REPO,
                env=self.env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
            )
        deadline = time.monotonic() + timeout
        while ready not in self.output():
            if self.proc.returncode is not None or time.monotonic() > deadline:
                raise AssertionError(f"codemode {' '.join(self.args)} did not get ready:\n{self.output()}")
            await asyncio.sleep(0.1)
        return self

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def stop(self, timeout: float = 20) -> int:
        """SIGTERM, as a service manager would; returns the exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
            raise AssertionError(f"codemode {' '.join(self.args)} ignored SIGTERM:\n{self.output()}")


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CODEMODE_"))}
    env.update(extra)
    return env
