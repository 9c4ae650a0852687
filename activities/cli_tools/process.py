"""Run one command: an argv (never a shell), a clean environment, stdin, a timeout, a cap on
its output.

cli-to-py's ``run_command`` is not used for the calls themselves: it merges the environment
it is given onto the worker's whole ``os.environ`` (every secret of the worker would reach
the command), it cannot feed stdin (stdin is ``/dev/null``), and it buffers output without a
limit. What it does right is kept: ``create_subprocess_exec`` with no shell, and the
command in a session of its own so a timeout kills the whole process group, children too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass

#: How long a killed command's pipes may stay open (a child that left the group) before
#: we stop reading them.
_DRAIN_AFTER_KILL = 2.0


@dataclass
class Finished:
    returncode: int
    stdout: bytes
    stderr: bytes
    #: Stopped because its output passed the cap (the output kept ends there).
    cut: bool = False


class CommandTimedOut(Exception):
    """The command ran past its timeout and was killed (with every process of its group)."""

    def __init__(self, seconds: float, partial: Finished) -> None:
        super().__init__(f"ran past its {seconds:g}s timeout and was killed")
        self.seconds = seconds
        self.partial = partial


async def run_process(
    argv: list[str],
    *,
    cwd: str | None,
    env: Mapping[str, str],
    stdin: bytes | None,
    timeout: float,
    max_output: int,
) -> Finished:
    """Run ``argv`` to its end. Raises ``OSError`` when it cannot be started (nothing ran)
    and ``CommandTimedOut`` after ``timeout`` seconds. Output past ``max_output`` bytes (on
    stdout or stderr) stops the command: the result keeps the first ``max_output`` bytes and
    says ``cut``. Cancelled (the execution was), it kills the command first."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,
    )
    out, err = bytearray(), bytearray()
    over = asyncio.Event()

    async def read(stream: asyncio.StreamReader | None, into: bytearray) -> None:
        assert stream is not None
        while chunk := await stream.read(65536):
            room = max_output - len(into)
            into += chunk[:room]
            if len(chunk) > room:
                over.set()
                _kill_group(proc)
                break

    async def feed() -> None:
        if stdin is None or proc.stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.write(stdin)
            await proc.stdin.drain()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            proc.stdin.close()

    readers = asyncio.gather(read(proc.stdout, out), read(proc.stderr, err), feed())
    try:
        async with asyncio.timeout(timeout):
            await asyncio.shield(readers)
            await proc.wait()
    except TimeoutError:
        _kill_group(proc)
        await _settle(proc, readers)
        raise CommandTimedOut(timeout, Finished(proc.returncode or -9, bytes(out), bytes(err))) from None
    except BaseException:  # cancelled: the command goes with the call
        _kill_group(proc)
        await _settle(proc, readers)
        raise
    if over.is_set():
        await _settle(proc, readers)
    return Finished(proc.returncode if proc.returncode is not None else -9, bytes(out), bytes(err), over.is_set())


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the command's process group (its session: it and its children)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _settle(proc: asyncio.subprocess.Process, readers: asyncio.Future[object]) -> None:
    """Reap a killed command and stop reading its pipes (a bounded wait)."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(proc.wait(), _DRAIN_AFTER_KILL)
    if not readers.done():
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(readers), _DRAIN_AFTER_KILL)
    if not readers.done():
        readers.cancel()
    with contextlib.suppress(BaseException):
        await readers
