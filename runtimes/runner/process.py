"""One sandbox process on the host: spawn, drain its output under a byte cap, kill, reap.

The process gets its own process group (``start_new_session``) so ``kill()`` reaches
whatever it started. Under bubblewrap (``--as-pid-1``) the runner is pid 1 of its own pid
namespace and the only child of ``bwrap``: ``kill()`` kills the runner, the kernel kills
everything else in the namespace, and ``bwrap`` reaps the runner and exits. Killing
``bwrap`` first would orphan the runner, and an orphan is only reaped if the host's init
reaps (a container's often does not). ``aclose()`` always waits for the exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping, Sequence

from ..errors import SandboxError
from ..transports.protocol import MAX_MESSAGE_BYTES

_CHUNK = 1 << 16


class OutputSink:
    """Everything the code printed, up to ``limit`` bytes; the rest is read and dropped
    (so the code never blocks on a full pipe) and a note marks the cut."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.truncated = False
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.data)
        if room > 0:
            self.data += chunk[:room]
        if len(chunk) > room:
            self.truncated = True

    def text(self) -> str:
        text = self.data.decode("utf-8", "replace")
        if self.truncated:
            text = text.rstrip("\ufffd") + f"\n[output truncated: more than {self.limit} bytes printed]\n"
        return text

    def tail(self, size: int = 2000) -> str:
        return self.data[-size:].decode("utf-8", "replace").strip()


class SandboxProcess:
    """A started sandbox: ``proc`` with stdin (bootstrap, maybe the protocol), stdout (the
    stdio protocol or nothing) and stderr (the code's output)."""

    def __init__(
        self, proc: asyncio.subprocess.Process, output: OutputSink, output_fd: int, *, supervised: bool = False
    ) -> None:
        self.proc = proc
        self.output = output
        #: ``proc`` is a supervisor (bwrap) whose only child is the sandbox.
        self.supervised = supervised
        self.output_closed = asyncio.Event()
        # The output pipe is read with plain non-blocking reads (not a StreamReader) so
        # drain_output() can take everything already written at any moment.
        self._output_fd = output_fd
        os.set_blocking(output_fd, False)
        asyncio.get_running_loop().add_reader(output_fd, self.drain_output)

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str | None = None,
        protocol_on_stdout: bool,
        output_limit: int,
        pass_fds: Sequence[int] = (),
        supervised: bool = False,
        die_with_parent: bool = False,
    ) -> SandboxProcess:
        """``die_with_parent``: the kernel kills the process when this one dies (Linux's
        ``PR_SET_PDEATHSIG``; bubblewrap has its own ``--die-with-parent``), so a sandbox
        busy in a loop does not outlive a worker that was SIGKILLed."""
        read_end, write_end = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE if protocol_on_stdout else asyncio.subprocess.DEVNULL,
                stderr=write_end,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,
                limit=MAX_MESSAGE_BYTES,
                pass_fds=tuple(pass_fds),
                preexec_fn=_die_with_parent if die_with_parent and _PRCTL is not None else None,
            )
        except OSError as exc:
            os.close(read_end)
            raise SandboxError(f"cannot start the sandbox ({argv[0]}): {exc}") from exc
        finally:
            os.close(write_end)
        return cls(proc, OutputSink(output_limit), read_end, supervised=supervised)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def drain_output(self) -> None:
        """Take everything the sandbox has written to its output so far. The runner flushes
        before each message, so after a message arrives this holds all it printed before."""
        if self._output_fd < 0:
            return
        try:
            # Bounded, so a sandbox printing without pause cannot hold the event loop;
            # what was written before a message fits in the pipe (64 KiB) anyway.
            for _ in range(16):
                chunk = os.read(self._output_fd, _CHUNK)
                if not chunk:
                    break
                self.output.feed(chunk)
            else:
                return
        except BlockingIOError:
            return
        except OSError:
            pass
        self._close_output()  # EOF: every process of the sandbox is gone

    def _close_output(self) -> None:
        if self._output_fd >= 0:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(self._output_fd)
            os.close(self._output_fd)
            self._output_fd = -1
        self.output_closed.set()

    async def send_line(self, data: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(data)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the process died: the caller sees it on the channel

    def close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.is_closing():
            self.proc.stdin.close()

    async def wait_output(self, timeout: float) -> None:
        """Wait until the output pipe closed (every process of the sandbox is gone)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.output_closed.wait(), timeout)

    def _children(self) -> list[int]:
        pids: list[int] = []
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{self.proc.pid}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{self.proc.pid}/task/{task}/children") as f:
                    pids += [int(p) for p in f.read().split()]
        return pids

    def kill(self) -> None:
        """SIGKILL the sandbox: the supervised child (bwrap reaps it and exits), or else
        the whole process group."""
        if self.proc.returncode is not None:
            return
        children = self._children() if self.supervised else []
        for pid in children:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not children:
            self._kill_group()

    def _kill_group(self) -> None:
        if self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    async def aclose(self, grace: float = 0.0) -> int:
        """Kill (after ``grace`` seconds for a process already finishing), reap, and release
        the pipes. Returns the exit status."""
        if self.proc.returncode is None and grace > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), grace)
        self.kill()
        self.close_stdin()
        try:
            code = await asyncio.wait_for(self.proc.wait(), 2.0)
        except asyncio.TimeoutError:  # the supervisor did not exit on its own
            self._kill_group()
            code = await self.proc.wait()
        await self.wait_output(1.0)
        self._close_output()  # a child the sandbox leaked may hold the pipe: stop reading
        return code


def _load_prctl():  # type: ignore[no-untyped-def]
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the parent dies."""
    _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGKILL))


def exit_signal(returncode: int, *, bwrap: bool) -> int | None:
    """The signal that ended the code: asyncio reports ``-N``; bwrap exits with ``128+N``."""
    if returncode < 0:
        return -returncode
    if bwrap and returncode > 128:
        return returncode - 128
    return None
