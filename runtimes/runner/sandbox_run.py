"""One execution in a provider's sandbox, seen from this worker (``sandbox_runtime.py``).

The runner's protocol travels over its stdio through the provider's own API
(``runtimes/transports/command.py``): nothing listens in the sandbox and no credential or
host address enters it. The run attaches to the runner, detaches while parked, and when a
handle is used again after its checkpoint it checks the runner is still where the
checkpoint says (the protocol's ``sync``): output emitted while nobody was attached may be
lost, so a runner that moved on is not trusted.

* ``close()`` of a handle whose checkpoint is still current (dumped or restored and not
  advanced since) only detaches: another worker may restore that checkpoint. ``close()``
  after the result, an error, or an advance beyond the last checkpoint destroys the sandbox.
* A handle kept after ``dump()`` (a worker's cache) stays attached and is used as is when
  nothing arrived since; if its stream dropped (a pause) or something else drove the
  runner, its next use re-attaches and syncs like a restore, and fails with
  ``SandboxError`` when the runner moved on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Mapping
from typing import Any

from ..checkpoint import encode_checkpoint
from ..errors import CodeExecutionError, SandboxError
from ..execution import CallOutcome, CodeExecution, Step
from ..signatures import ToolSignature
from ..transports.command import CommandChannel
from ..transports.protocol import SyncedMessage
from ..types import Determinism, ExecutionLimits, FunctionCall, SandboxOptions
from .bootstrap import build_bootstrap, runner_limits
from .driver import RunnerDriver, RunnerExit, exit_error
from .owner import owner_labels
from .package import runner_digest, runner_zip
from .process import OutputSink
from .provider import RunnerProcess, SandboxProvider, SandboxSpec, Stdio

log = logging.getLogger(__name__)

#: The runner's zip (``package.py``), as the providers upload it.
RUNNER_ZIP = runner_zip()
#: Checkpoints name the blob format and the runner they talk to: a checkpoint taken with
#: another runner is refused (replay), never resumed with a host that speaks differently.
CHECKPOINT_VERSION = "1-" + runner_digest()[:12]


class SandboxRun(RunnerDriver):
    """One execution (or session) in one sandbox of a provider (a ``SandboxRuntime``)."""

    checkpoints = True

    def __init__(
        self,
        runtime: SandboxProvider,
        signatures: dict[str, ToolSignature],
        limits: ExecutionLimits,
        options: SandboxOptions,
        *,
        stdout_before: int = 0,
        session: bool = False,
    ) -> None:
        super().__init__(
            signatures, limits, kill_grace=runtime.kill_grace, startup_timeout=runtime.startup_timeout, session=session
        )
        self.runtime_name = runtime.name
        self.runtime = runtime
        self.options = options
        self.sink = OutputSink(max(0, limits.max_stdout_bytes - stdout_before))
        self.stdout_before = stdout_before
        #: The provider's durable handle (the sandbox's id, the runner's pid...).
        self.handle: dict[str, Any] = {}
        self.process: RunnerProcess | None = None
        self.channel: CommandChannel = CommandChannel(on_output=self._on_output)
        self.ended = asyncio.Event()  # the stream from the runner ended (and we learnt why)
        self.exit: RunnerExit | None = None
        self.attached = False
        #: The last checkpoint taken (or restored) is still where the runner is.
        self.parked = False
        self.discarded = False
        #: False once another handle drove the runner past this one's checkpoint: closing
        #: it must not destroy a sandbox someone else is using.
        self.owned = True
        #: Why a restore could not use the sandbox ("gone", "silent", "moved_on").
        self.refused: str | None = None
        #: Why the network was cut (the ratchet), once it is.
        self.network_cut: str | None = None
        self._kept_alive = time.monotonic()
        self._watcher: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        """The sandbox's name (its id at the provider)."""
        return self.runtime.sandbox_of(self.handle)

    @property
    def where(self) -> str:
        return self.runtime.describe(self.handle)

    def _on_output(self, text: str) -> None:
        self.sink.feed(text.encode("utf-8", "replace"))

    def _stdio(self) -> Stdio:
        return Stdio(self.channel.feed_stdout, self.channel.feed_stderr)

    # -- start ----------------------------------------------------------------------------

    async def start(self, code: str, inputs: Mapping[str, Any] | None, determinism: Determinism) -> None:
        rt = self.runtime
        spec = SandboxSpec(self.limits, self.options, determinism.hash_seed, self.session_mode, owner_labels())
        self.handle, sandbox = await rt.create(spec)
        self._kept_alive = time.monotonic()
        self._attach(await rt.start_runner(self.handle, sandbox, spec, self._stdio()))
        # The sandbox is the isolation: no process or file-size caps (its pids limit, not
        # RLIMIT_NPROC, which counts every process of the uid); memory and CPU as everywhere.
        limits = runner_limits(self.limits, processes=None, file_bytes=None)
        if self.session_mode:
            limits.cpu_seconds = None  # counted per cell (RLIMIT_CPU is cumulative)
        boot = build_bootstrap(
            code,
            self.signatures,
            inputs=inputs,
            limits=limits,
            transport=self.channel.params,
            sys_path=[],
            determinism=determinism,
            prelude=self.prelude.source if self.prelude is not None else None,
            output_marks=True,
            session=self.session_mode,
        )
        await self.channel.send(boot.model_dump(mode="json"), fresh_line=False)
        await self.expect_ready(self.startup_timeout, f"the runner in {self.where}")
        if self.session_mode:
            self.clock.pause()  # idle until the first cell

    def reset_output(self) -> None:
        self.sink = OutputSink(self.limits.max_stdout_bytes)
        self.stdout_before = 0

    # -- attachment -------------------------------------------------------------------------

    def _attach(self, process: RunnerProcess) -> None:
        self.process = process
        self.attached = True
        self.ended.clear()
        self.exit = None
        self.channel.bind(process.write)
        self._watcher = asyncio.create_task(self._watch(process))

    async def _watch(self, process: RunnerProcess) -> None:
        """Learn how the stream from the runner ended: the process exited, or it dropped."""
        try:
            ended = await process.wait()
        except asyncio.CancelledError:
            if self.attached and self.process is process:  # cancelled by someone other than detach()
                raise
            return
        except Exception as exc:  # the provider could not say: the process may well be alive
            ended = RunnerExit(lost=str(exc) or type(exc).__name__)
        if not self.attached or self.process is not process:  # detach() closed it
            return
        self.exit = ended
        self.attached = False
        self.ended.set()
        self.channel.sandbox_exited()

    async def detach(self) -> None:
        """Stop receiving the runner's events; the runner keeps running (or waiting)."""
        process, self.process = self.process, None
        self.attached = False
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watcher
            self._watcher = None
        if process is not None:
            with contextlib.suppress(Exception):
                await process.close()

    # -- restore ------------------------------------------------------------------------------

    async def reattach(self) -> str:
        """Attach to the runner again and check it is where the checkpoint says (``calls``
        issued, waiting on exactly the pending ones, ``cells`` begun). Returns ``"in_step"``,
        ``"gone"`` (the sandbox or the runner), ``"silent"`` (no answer to the sync) or
        ``"moved_on"`` (another handle drove it further: what it emitted meanwhile is lost)."""
        rt = self.runtime
        self.channel.reset()
        if rt.replays_output:  # what the stream shows again was handled before this checkpoint
            self.channel.skip_through(self.channel.last_mark)
        process = await rt.reattach(self.handle, self._stdio())
        if process is None:
            return "gone"
        self._kept_alive = time.monotonic()
        self._attach(process)
        nonce = secrets.token_hex(8)
        try:
            await self.channel.send({"type": "sync", "nonce": nonce})
            reply = await asyncio.wait_for(self._sync_reply(nonce), rt.sync_timeout)
        except (SandboxError, CodeExecutionError, asyncio.TimeoutError) as exc:
            log.info("%s: no answer to sync (%s)", self.where, exc)
            return "silent"
        if reply is None:
            return "gone"  # the process ended (its end event was still retained)
        if not isinstance(reply, SyncedMessage) or reply.nonce != nonce:
            log.info("%s: runner sent %r instead of its position", self.where, reply)
            return "moved_on"
        expected = set(self.outstanding)
        if reply.calls != self.tool_calls or set(reply.waiting) != expected or reply.cells != self.cells:
            log.info(
                "%s: runner is at %d calls waiting on %s, the checkpoint at %d waiting on %s",
                self.where, reply.calls, reply.waiting, self.tool_calls, sorted(expected),
            )  # fmt: skip
            return "moved_on"
        return "in_step"

    async def _sync_reply(self, nonce: str) -> Any:
        """The first message that is not an earlier worker's sync answer (a stream that
        replays shows those again)."""
        while True:
            reply = await self.receive()
            if not isinstance(reply, SyncedMessage) or reply.nonce == nonce:
                return reply

    async def _unpark(self) -> None:
        """First use of a handle after its checkpoint: go on as is when it watched the whole
        time and nothing came; otherwise verify like a restore."""
        self.parked = False
        if self.attached and self.channel.idle:
            return
        await self.detach()
        state = await self.reattach()
        if state != "in_step":
            if state == "moved_on":
                self.owned = False  # someone else drives it: closing this handle must not destroy it
            await self.detach()
            raise SandboxError(
                f"{self.where} is {'ahead of' if state == 'moved_on' else 'lost to'} this checkpoint: "
                "restore the current checkpoint (or replay the journal) instead"
            )

    async def before_step(self) -> None:
        if self.parked:
            await self._unpark()
        await self._keep_alive()

    async def _keep_alive(self) -> None:
        """Push the sandbox's own timeout back when half of it has gone by, so a run whose
        steps keep coming never reaches it (a run that stops coming is paused or ends at it)."""
        every = self.runtime.keep_alive_seconds
        if every is None or not self.handle or time.monotonic() - self._kept_alive < every:
            return
        self._kept_alive = time.monotonic()
        try:
            await self.runtime.keep_alive(self.handle)
        except SandboxError as exc:  # the step itself will tell if the sandbox is gone
            log.info("%s: could not extend its timeout: %s", self.where, exc)

    # -- the network ratchet ----------------------------------------------------------------

    async def cut_network(self, reason: str) -> bool:
        """Take the sandbox off every network, for good, and check it is off. False when
        there was nothing to cut (no network, or already cut)."""
        if self.options.network != "ratchet" or self.network_cut is not None:
            return False
        if self.parked and not self.closed:
            await self._unpark()
        await self.runtime.cut_network(self.handle)
        self.network_cut = reason
        log.info("%s: network cut (%s)", self.where, reason)
        return True

    # -- driver hooks -----------------------------------------------------------------------

    @property
    def output(self) -> OutputSink:
        return self.sink

    async def wait_output(self, timeout: float) -> None:
        if self.done and self.channel.marks_arrive:
            return  # the final message waited for its output mark: everything printed is here
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ended.wait(), timeout)

    async def death_error(self) -> CodeExecutionError | SandboxError:
        await self.wait_output(2.0)
        return exit_error(
            self.exit or RunnerExit(lost="the stream from the runner ended"),
            where=self.where,
            ready=self.ready,
            timed_out=self.timed_out,
            limits=self.limits,
            tail=self.sink.tail(),
            memory=self.runtime.memory_note(self.limits),
        )

    async def kill_for_timeout(self) -> None:
        if self.process is not None:
            with contextlib.suppress(Exception):
                await self.process.kill()

    async def advance(self) -> Step:
        await self.before_step()
        return await super().advance()

    async def answer(self, call_id: str, outcome: CallOutcome) -> None:
        if self.parked and not self.closed:
            await self._unpark()
        await super().answer(call_id, outcome)

    async def release(self) -> None:
        # A session between cells has ended its last cell (maybe with an error of its code):
        # its sandbox is kept like a parked run's.
        ended_cell = self.session_mode and not self.cell_open
        keep = self.parked and (self.failed is None or ended_cell) and not self.done and not self.discarded
        await self.detach()
        if not keep and self.owned and self.name:
            destroying = self.runtime.free(self.handle)
            if destroying is not None:
                await destroying

    # -- checkpoint -------------------------------------------------------------------------

    def dump(self) -> bytes:
        self.parked = True
        meta = {
            **self.handle,
            "calls": self.tool_calls,
            "pending": [c.model_dump(mode="json") for c in self.outstanding.values()],
            "blocked_on": list(self.blocked_on),
            "limits": self.limits.model_dump(mode="json"),
            "options": self.options.model_dump(mode="json"),
            "network_cut": self.network_cut,
            "compute_seconds": self.clock.elapsed(),
            "stdout_bytes": self.stdout_before + len(self.sink.data),
            "mark": self.channel.last_mark,
        }
        if self.session_mode:
            meta["session"] = {"cells": self.cells, "open": self.cell_open, "variables": self.variables}
        return encode_checkpoint(self.runtime.name, CHECKPOINT_VERSION, meta, b"")

    @classmethod
    def from_checkpoint(cls, runtime: SandboxProvider, meta: Mapping[str, Any]) -> SandboxRun:
        limits = ExecutionLimits.model_validate(meta["limits"])
        options = SandboxOptions.model_validate(meta.get("options") or {})
        session = meta.get("session")
        run = cls(
            runtime,
            {},
            limits,
            options,
            stdout_before=int(meta.get("stdout_bytes", 0)),
            session=isinstance(session, dict),
        )
        if isinstance(session, dict):
            run.cells = int(session.get("cells", 0))
            run.cell_open = bool(session.get("open"))
            run.variables = {str(k): str(v) for k, v in dict(session.get("variables") or {}).items()}
        run.handle = {key: meta[key] for key in runtime.handle_keys if key in meta}
        run.tool_calls = int(meta["calls"])
        run.seen = {str(i) for i in range(1, run.tool_calls + 1)}  # the runner numbers calls 1, 2, ...
        pending = [FunctionCall.model_validate(c) for c in meta["pending"]]
        run.outstanding = {c.call_id: c for c in pending}
        run.blocked_on = tuple(str(i) for i in meta.get("blocked_on", ()))
        run.network_cut = meta.get("network_cut")
        run.channel.last_mark = int(meta.get("mark") or 0)
        run.clock.used = float(meta.get("compute_seconds", 0.0))
        run.ready = True
        return run

    def execution(self, *, pending: list[FunctionCall] | None = None, cut_network: Any = None) -> CodeExecution:
        return super().execution(pending=pending, cut_network=cut_network or self.cut_network)
