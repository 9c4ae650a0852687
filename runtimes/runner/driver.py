"""The host side of the runner protocol, shared by every runtime that runs our runner.

``RunnerDriver`` turns the runner's messages (``call``, ``blocked``, ``done``, ``error``)
into ``CodeExecution`` steps and answers into the channel, with the same limits and error
mapping whichever sandbox holds the process: a local bubblewrap jail (``runtimes/python.py``),
Deno (``runtimes/pyodide.py``) or a provider's sandbox (``runtimes/runner/sandbox_run.py``).
It also holds what every run does the same way: a session's cells, the handles it gives
out, and why a process that vanished died (``exit_error``). A subclass says how the runner
starts, where the code's output is, how the process ends and how it is freed.
"""

from __future__ import annotations

import asyncio
import signal
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import (
    CodeExecutionError,
    CodeResourceError,
    CodeRuntimeError,
    CodeSyntaxError,
    CodeTimeoutError,
    ExecutionProtocolError,
    SandboxError,
)
from ..execution import Blocked, CallOutcome, CodeExecution, Step
from ..session import CodeSession
from ..signatures import FunctionsSpec, ToolSignature, normalize_functions
from ..transports import CallbackChannel, MessageTooLarge
from ..transports.protocol import (
    MAX_MESSAGE_BYTES,
    BlockedMessage,
    CallMessage,
    DoneMessage,
    ErrorMessage,
    ReadyMessage,
    SandboxMessage,
)
from ..prelude import Prelude
from ..types import Determinism, ExecutionLimits, ExecutionResult, FunctionCall
from .bootstrap import cell_message
from .process import OutputSink

_ERRORS: dict[str, type[CodeExecutionError]] = {
    "syntax": CodeSyntaxError,
    "runtime": CodeRuntimeError,
    "timeout": CodeTimeoutError,
    "resource": CodeResourceError,
}


def code_error(msg: ErrorMessage) -> CodeExecutionError:
    """The runner's ``error`` message as our error hierarchy."""
    cls = _ERRORS.get(msg.kind, CodeRuntimeError)
    return cls(msg.message, error_type=msg.error_type, line=msg.line, traceback=msg.traceback)


@dataclass
class RunnerExit:
    """How the runner's process ended, as its sandbox reports it (a local process's status,
    a container's state, a provider's end event)."""

    #: Exit status, when it exited by itself.
    status: int | None = None
    #: The signal that killed it.
    signal: int | None = None
    #: The sandbox's own memory limit killed it (a container's OOM killer).
    oom: bool = False
    #: The sandbox was deleted under the code (not the code's doing).
    removed: bool = False
    #: The stream to it dropped without an end: the process may well live on.
    lost: str | None = None
    #: The provider's own words about the end (its error string).
    detail: str = ""


def exit_error(
    ended: RunnerExit,
    *,
    where: str,
    ready: bool,
    timed_out: bool,
    limits: ExecutionLimits,
    tail: str,
    memory: str = "",
    stopped: str = "killed",
) -> CodeExecutionError | SandboxError:
    """Why a runner vanished without a final message, in our error hierarchy. ``where``
    names the sandbox ("the sandbox", "container 1a2b..."); ``tail`` is the end of what the
    code printed; ``memory`` adds the limit to an out-of-memory message; ``stopped`` is how
    a timed-out process was ended."""
    if ended.lost is not None:
        return SandboxError(f"lost the connection to the runner in {where}: {ended.lost}")
    if ended.removed and not timed_out:
        # Not the code's doing: the step fails, and the next one replays in a fresh sandbox.
        return SandboxError(f"{where} was removed while the code ran")
    how = ended.detail or (f"signal {ended.signal}" if ended.signal else f"status {ended.status}")
    if not ready:
        return SandboxError(f"the runner in {where} exited ({how}) before the code started: {tail or 'no output'}")
    limit = limits.timeout_seconds
    if timed_out:
        return CodeTimeoutError(
            f"the code exceeded its time limit of {limit:g} s and was {stopped}", error_type="TimeoutError"
        )
    if ended.signal == signal.SIGXCPU:
        return CodeTimeoutError(f"the code exceeded its CPU time limit of {limit:g} s", error_type="TimeoutError")
    trace = tail or None
    if ended.oom:
        return CodeResourceError(
            f"{where} ran out of memory{memory} and the code was killed", error_type="MemoryError", traceback=trace
        )
    if ended.signal == signal.SIGKILL:
        return CodeResourceError(
            f"the code's process was killed (SIGKILL): it exceeded its CPU time or {where} ran out of memory",
            error_type="ResourceError",
            traceback=trace,
        )
    if ended.signal is not None:
        try:
            name = signal.Signals(ended.signal).name
        except ValueError:
            name = str(ended.signal)
        return CodeRuntimeError(f"the code's process died from signal {name}", error_type="Crash", traceback=trace)
    return CodeRuntimeError(
        f"the code ended the interpreter (exit status {ended.status}) before finishing",
        error_type="SystemExit",
        traceback=trace,
    )


class ComputeClock:
    """Compute time used by the code: runs while the sandbox runs, paused while it waits for
    the host (a sync call, or a ``blocked`` report)."""

    def __init__(self, limit: float, used: float = 0.0) -> None:
        self.limit = limit
        self.used = used
        self.since: float | None = None
        self.resumed = asyncio.Event()

    @property
    def running(self) -> bool:
        return self.since is not None

    def resume(self) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.resumed.set()

    def pause(self) -> None:
        if self.since is not None:
            self.used += time.monotonic() - self.since
            self.since = None
            self.resumed.clear()

    def elapsed(self) -> float:
        return self.used + (time.monotonic() - self.since if self.since is not None else 0.0)


class RunnerDriver(ABC):
    """One execution of the runner seen from the host: its channel, the calls it made,
    the compute clock and the limits.

    Subclasses set ``channel`` once the process runs and implement the hooks below;
    ``advance`` / ``answer`` / ``close`` are what ``execution()`` hands to ``CodeExecution``.
    """

    runtime_name = "runner"
    #: ``dump()`` gives a checkpoint another worker can ``restore`` (the sandbox outlives
    #: this handle); False: the journal is the checkpoint.
    checkpoints = False

    #: The hash seed this run's interpreter was started with when the runtime chose it (a
    #: warm interpreter, ``runtimes/warm_pool.py``); None when it is the determinism's.
    chosen_hash_seed: int | None = None

    def __init__(
        self,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        *,
        kill_grace: float,
        startup_timeout: float = 60.0,
        session: bool = False,
    ) -> None:
        #: Session mode (``runtimes/session.py``): the runner serves one cell after another in
        #: one namespace; a cell's end (``done`` or ``error``) leaves the process running.
        self.session_mode = session
        #: Session mode: cells begun in this runner (the runner's ``sync`` reports the same).
        self.cells = 0
        self.startup_timeout = startup_timeout
        #: The runtime's set of live runs, which ``close`` leaves (``RunnerRuntime.track``).
        self.live: set[RunnerDriver] | None = None
        #: A cell is running (session mode): between ``begin_cell`` and its end.
        self.cell_open = False
        #: The globals after the last cell (session mode): name -> type name.
        self.variables: dict[str, str] = {}
        self.signatures = signatures
        self.limits = limits
        #: Saved snippets defined before the code (``runtimes/prelude.py``), set before ``start``.
        self.prelude: Prelude | None = None
        self.kill_grace = kill_grace
        self.clock = ComputeClock(limits.timeout_seconds)
        self.channel: CallbackChannel | None = None
        self.outstanding: dict[str, FunctionCall] = {}
        self.seen: set[str] = set()
        self.tool_calls = 0
        #: Calls the runner reported itself blocked on (no message comes until one is answered).
        self.blocked_on: tuple[str, ...] = ()
        self.ready = False
        self.done = False  # the runner sent its final message and is exiting
        self.timed_out = False
        self.failed: BaseException | None = None
        self.closed = False
        self.tasks: list[asyncio.Task[Any]] = []
        self._watching = False

    # -- hooks --------------------------------------------------------------------------

    @abstractmethod
    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        """Start the runner with ``code`` (session mode: empty) and wait for its ``ready``."""

    async def before_step(self) -> None:
        """Called before the handle is used again (a step, an answer, a cell): a run whose
        sandbox outlives it checks it is still where its checkpoint says."""
        return None

    def dump(self) -> bytes:
        """The checkpoint of where the runner is (only when ``checkpoints``)."""
        raise NotImplementedError

    @property
    @abstractmethod
    def output(self) -> OutputSink:
        """What the code printed (since this handle was created), capped."""

    def drain_output(self) -> None:
        """Take the output written before the message just received (when the channel does
        not already order it)."""
        return None

    def reset_output(self) -> None:
        """A new cell begins (session mode): its output starts empty, with its own cap."""
        return None

    @abstractmethod
    async def wait_output(self, timeout: float) -> None:
        """Wait until every byte the code printed has arrived (the process ended)."""

    @abstractmethod
    async def death_error(self) -> CodeExecutionError | SandboxError:
        """Why the process vanished without a final message."""

    @abstractmethod
    async def kill_for_timeout(self) -> None:
        """Kill the code's process: it ignored its own time limit."""

    @abstractmethod
    async def release(self) -> None:
        """Free the sandbox (called once, by ``close``)."""

    # -- events -------------------------------------------------------------------------

    async def expect_ready(self, startup_timeout: float, what: str = "the sandbox") -> None:
        """Wait for the runner's first message: ``ready`` starts the compute clock; an error
        (syntax...) or a death is raised as what it is."""
        try:
            msg = await asyncio.wait_for(self.receive(), startup_timeout)
        except asyncio.TimeoutError:
            raise SandboxError(f"{what} did not start within {startup_timeout:g} s") from None
        if isinstance(msg, ReadyMessage):
            self.ready = True
            self.clock.resume()
            self.start_watchdog()
            return
        if isinstance(msg, ErrorMessage):
            if self.session_mode:  # a cell that cannot start: the session is as it was
                self.cell_open = False
                self.variables = msg.variables if msg.variables is not None else self.variables
            raise code_error(msg)
        if msg is None:
            raise await self.death_error()
        raise SandboxError(f"the sandbox sent {msg.type!r} before 'ready'")

    def start_watchdog(self) -> None:
        if not self._watching:  # one for the process (a session's cells share it)
            self._watching = True
            self.tasks.append(asyncio.create_task(self._watchdog()))

    async def _watchdog(self) -> None:
        """Backstop for code that ignores the runner's own timeout: kill the sandbox
        ``kill_grace`` seconds after the compute-time limit."""
        while True:
            if not self.clock.running:
                await self.clock.resumed.wait()
                continue
            deadline = self.limits.timeout_seconds + self.kill_grace  # a session's cell may set another
            left = deadline - self.clock.elapsed()
            if left <= 0:
                self.timed_out = True
                await self.kill_for_timeout()
                return
            await asyncio.sleep(left)

    async def receive(self) -> SandboxMessage | None:
        assert self.channel is not None
        try:
            return await self.channel.receive()
        except MessageTooLarge:
            raise CodeResourceError(
                f"the code sent a value over {MAX_MESSAGE_BYTES} bytes (a tool argument or the output)",
                error_type="ResourceError",
            ) from None

    async def fail(self, err: BaseException) -> BaseException:
        self.failed = err
        await self.close()
        return err

    async def advance(self) -> Step:
        if self.failed is not None:
            raise ExecutionProtocolError(f"the execution already failed: {self.failed}")
        waiting = tuple(cid for cid, c in self.outstanding.items() if not c.concurrent)
        if waiting:  # a sync call: the code cannot do anything until it is answered
            return Blocked(waiting)
        if self.blocked_on and all(i in self.outstanding for i in self.blocked_on):
            return Blocked(self.blocked_on)  # still blocked: nothing was answered since
        while True:
            try:
                msg = await self.receive()
            except (CodeExecutionError, SandboxError) as err:
                raise await self.fail(err) from None
            self.drain_output()
            if isinstance(msg, CallMessage):
                step = await self._on_call(msg)
                if step is not None:
                    return step
            elif isinstance(msg, BlockedMessage):
                ids = tuple(msg.waiting)
                # A report sent before the host answered one of these calls is stale:
                # the code has moved on and will report again if it blocks.
                if ids and all(i in self.outstanding for i in ids):
                    self.clock.pause()
                    self.blocked_on = ids
                    return Blocked(ids)
            elif isinstance(msg, DoneMessage):
                return await self._on_done(msg)
            elif isinstance(msg, ErrorMessage):
                if self.session_mode:  # the cell ended; the namespace (and what it did) stays
                    self.clock.pause()
                    self.cell_open = False
                    self.variables = msg.variables or {}
                    self.failed = code_error(msg)
                    raise self.failed
                self.done = True
                raise await self.fail(code_error(msg))
            elif msg is None:
                raise await self.fail(await self.death_error())
            else:
                raise await self.fail(SandboxError(f"unexpected {msg.type!r} message from the sandbox"))

    async def _on_call(self, msg: CallMessage) -> FunctionCall | None:
        self.clock.resume()
        if msg.call_id in self.seen:
            raise await self.fail(SandboxError(f"the sandbox reused call id {msg.call_id!r}"))
        self.seen.add(msg.call_id)
        self.tool_calls += 1
        if self.tool_calls > self.limits.max_tool_calls:
            raise await self.fail(
                CodeResourceError(
                    f"too many tool calls: the limit is {self.limits.max_tool_calls}",
                    error_type="ResourceError",
                    line=msg.line,
                )
            )
        call = msg.call()
        self.outstanding[call.call_id] = call
        if not call.concurrent:
            self.clock.pause()
        return call

    async def _on_done(self, msg: DoneMessage) -> ExecutionResult:
        self.clock.pause()
        if self.session_mode:  # the cell ended; the runner waits for the next one
            self.cell_open = False
            self.variables = msg.variables or {}
            output = self.output
            return ExecutionResult(
                output=msg.output,
                stdout=output.text(),
                stdout_truncated=output.truncated,
                duration_ms=self.clock.used * 1000,
                tool_calls=self.tool_calls,
            )
        self.done = True
        await self.wait_output(2.0)  # everything printed before the runner exited
        output = self.output
        result = ExecutionResult(
            output=msg.output,
            stdout=output.text(),
            stdout_truncated=output.truncated,
            duration_ms=self.clock.used * 1000,
            tool_calls=self.tool_calls,
        )
        await self.close()
        return result

    async def answer(self, call_id: str, outcome: CallOutcome) -> None:
        assert self.channel is not None
        if self.closed:
            raise ExecutionProtocolError("the execution is closed")
        self.outstanding.pop(call_id, None)
        self.blocked_on = ()
        self.clock.resume()
        await self.channel.send_answer(call_id, outcome)

    # -- session mode -------------------------------------------------------------------

    async def run_cell(self, code: str, functions: FunctionsSpec, inputs: Mapping[str, Any] | None) -> CodeExecution:
        """Send the session's next cell and wait until it runs."""
        await self.before_step()
        signatures = normalize_functions(functions)
        self.begin_cell(signatures, self.limits)
        self.cells += 1
        assert self.channel is not None
        try:
            await self.channel.send_message(cell_message(code, signatures, inputs=inputs, limits=self.limits))
            await self.expect_ready(self.startup_timeout, "the session's next cell")
        except CodeExecutionError:
            raise  # the cell cannot start (syntax): the session is as it was
        except BaseException:
            await self.close()
            raise
        return self.cell_execution()

    async def session_variables(self) -> dict[str, str]:
        return dict(self.variables)

    async def session_dump(self) -> bytes:
        return self.dump()

    def session(self) -> CodeSession:
        """The session handle of a runner started in session mode."""
        return CodeSession(
            runtime=self.runtime_name,
            run_cell=self.run_cell,
            dump=self.session_dump if self.checkpoints else None,
            variables=self.session_variables,
            close=self.close,
            alive=lambda: not self.closed,
            busy=lambda: self.cell_open,
        )

    def begin_cell(self, signatures: dict[str, ToolSignature], limits: ExecutionLimits) -> None:
        """Reset what belongs to one cell (calls, clock, limits, output) before sending it."""
        self.signatures = signatures
        self.limits = limits
        self.clock.limit, self.clock.used = limits.timeout_seconds, 0.0
        self.clock.pause()
        self.outstanding, self.seen, self.tool_calls, self.blocked_on = {}, set(), 0, ()
        self.failed, self.timed_out, self.ready = None, False, False
        self.cell_open = True
        self.reset_output()

    async def close_cell(self) -> None:
        """A cell's handle is closed: nothing to do after its end; a cell abandoned before its
        end leaves a namespace mid-statement, so the session goes with it."""
        if self.cell_open:
            await self.close()

    def cell_execution(self, *, pending: list[FunctionCall] | None = None) -> CodeExecution:
        """The handle of the cell just begun (session mode)."""
        return CodeExecution(
            advance=self.advance,
            answer=self.answer,
            dump=self.dump if self.checkpoints else None,
            close=self.close_cell,
            pending=pending or (),
            runtime=self.runtime_name,
            read_stdout=self.read_stdout,
        )

    # -- teardown -----------------------------------------------------------------------

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.clock.pause()
        current = asyncio.current_task()
        for task in self.tasks:
            if task is not current:
                task.cancel()
        try:
            await self.release()
        finally:
            if self.live is not None:
                self.live.discard(self)
            for task in self.tasks:
                if task is not current:
                    try:
                        await task
                    except (asyncio.CancelledError, Exception):
                        pass

    def read_stdout(self) -> str:
        return self.output.text()

    def execution(self, *, pending: list[FunctionCall] | None = None, cut_network: Any = None) -> CodeExecution:
        execution = CodeExecution(
            advance=self.advance,
            answer=self.answer,
            dump=self.dump if self.checkpoints else None,
            close=self.close,
            pending=pending or (),
            runtime=self.runtime_name,
            read_stdout=self.read_stdout,
            cut_network=cut_network,
            chosen_hash_seed=self.chosen_hash_seed,
        )
        execution.prelude = self.prelude
        return execution
