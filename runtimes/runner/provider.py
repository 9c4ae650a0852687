"""The provider interface: what a runtime implements to run our runner in a sandbox that
outlives the worker that started it (a container, a cloud sandbox).

The lifecycle is written once, in ``sandbox_runtime.py`` (``SandboxRuntime``) and
``sandbox_run.py``: start the sandbox and the runner in it, attach to the runner's stdio,
answer its calls, detach and pause while a run is parked, re-attach from the checkpoint's
handle on any worker and check the runner is where the checkpoint says (the protocol's
``sync``), refuse the checkpoint when the sandbox is gone (the caller replays the journal),
destroy the sandbox when the run ends, and sweep the ones crashed workers left.

A provider implements only its session operations (``SandboxProvider``):

* ``create``: a sandbox from the image or template, with the request's limits and network;
  its durable handle (the ids another worker reconnects by);
* ``start_runner``: our runner in it, with streaming stdio (``RunnerProcess``);
* ``reattach``: reconnect by the handle (resuming a paused sandbox) and attach to the runner
  again; None when the sandbox or the runner is gone;
* ``pause``: stop paying while a run waits for a person, keeping the process (if it can);
* ``destroy``; ``list_own`` for the sweep; ``keep_alive`` when the sandbox has a timeout;
* ``cut_network``: for the network ratchet, where the provider can.

The checkpoint is a small versioned blob: the handle and where the runner is (calls made,
calls waited on), never the heap.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..types import ExecutionLimits, SandboxOptions
from .driver import RunnerExit

log = logging.getLogger(__name__)

__all__ = ["OwnSandbox", "RunnerExit", "RunnerProcess", "SandboxProvider", "SandboxSpec", "Stdio"]


@dataclass(frozen=True)
class Stdio:
    """Where the runner's output goes: the provider calls these with text as it arrives."""

    on_stdout: Callable[[str], None]
    on_stderr: Callable[[str], None]


@dataclass(frozen=True)
class SandboxSpec:
    """What a sandbox is created for: one execution's limits and options."""

    limits: ExecutionLimits
    options: SandboxOptions
    #: The interpreter's ``PYTHONHASHSEED`` (the run's determinism).
    hash_seed: int
    #: A session: the runner serves one cell after another.
    session: bool = False
    #: Who the sandbox belongs to (``owner.py``): the provider puts these on it.
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OwnSandbox:
    """One of this provider's sandboxes, as the sweep sees it."""

    handle: dict[str, Any]
    #: When it was created (seconds since the epoch).
    created: float
    #: It could still hold a parked run (running, paused); else it can never run again.
    usable: bool
    #: The labels it carries (``owner.py``: its execution and step).
    labels: dict[str, str] = field(default_factory=dict)


class RunnerProcess(ABC):
    """The runner's process in a sandbox, as this worker is attached to it."""

    @abstractmethod
    async def write(self, data: bytes) -> None:
        """Write to the runner's stdin (raise when it cannot be delivered)."""

    @abstractmethod
    async def wait(self) -> RunnerExit:
        """Until the stream from the runner ends: how the process ended, or
        ``RunnerExit(lost=...)`` when the stream dropped with the process maybe alive."""

    @abstractmethod
    async def kill(self) -> None:
        """Kill the runner (it ignored its time limit)."""

    @abstractmethod
    async def close(self) -> None:
        """Detach: stop reading, and the runner keeps running (or waiting)."""


class SandboxProvider(ABC):
    """A provider's session operations, and what the lifecycle needs to know of it."""

    #: The runtime's name (``e2b``): in checkpoints and messages.
    name: str
    #: The handle's keys, the first naming the sandbox (``("sandbox_id", "pid")``).
    handle_keys: tuple[str, ...] = ("sandbox_id",)
    #: Destroy a finished run's sandbox off the step's critical path (``aclose`` waits for it).
    destroy_in_background = False
    #: Push the sandbox's own timeout back (``keep_alive``) when this many seconds went by.
    keep_alive_seconds: float | None = None
    startup_timeout: float = 60.0
    kill_grace: float = 1.0
    #: Seconds a re-attached runner has to say where it is.
    sync_timeout: float = 10.0
    #: What a parked run's sandbox does while the run waits (``pause``): ``"paused"`` (its
    #: compute stops, its processes are kept: Docker's freezer, E2B's pause), ``"standby"``
    #: (the provider stops it on its own when idle, processes kept: Blaxel), ``"running"``
    #: (no pause keeps processes: Modal; it is released after ``park_release_after``).
    parks_as: Literal["paused", "standby", "running"] = "running"
    #: Seconds a parked run's sandbox may keep running before it is released (the run then
    #: continues by journal replay); None: ``CODEMODE_PARK_RELEASE_AFTER[_<RUNTIME>]``.
    park_release_after: float | None = None
    #: The runner's output stream starts again from the beginning on every attach (Blaxel's
    #: log stream): a re-attaching worker skips what was handled before the checkpoint.
    replays_output = False
    #: Destroys under way (``free``); ``aclose`` waits for them.
    _destroying: set[asyncio.Task[None]]

    @abstractmethod
    async def create(self, spec: SandboxSpec) -> tuple[dict[str, Any], Any]:
        """A new sandbox, running, for ``spec``: its durable handle (JSON: it goes into the
        checkpoint), and the SDK's object for it, handed to ``start_runner``."""

    @abstractmethod
    async def start_runner(
        self, handle: dict[str, Any], sandbox: Any, spec: SandboxSpec, stdio: Stdio
    ) -> RunnerProcess:
        """Start our runner in the sandbox, attached (it then waits for its bootstrap on
        stdin). May add to ``handle`` what reattaching needs (the runner's pid)."""

    @abstractmethod
    async def reattach(self, handle: dict[str, Any], stdio: Stdio) -> RunnerProcess | None:
        """Reach the sandbox again (resuming it when paused) and attach to the runner; None
        when the sandbox or the runner is gone. ``SandboxError`` when it cannot be reached."""

    async def pause(self, handle: dict[str, Any]) -> None:
        """Stop the sandbox's compute, keeping its processes (no-op when it cannot: it keeps
        running up to its own timeout). No error when it is paused already, or gone."""
        return None

    @abstractmethod
    async def destroy(self, handle: dict[str, Any]) -> bool:
        """Delete the sandbox whatever its state; False when it was gone already."""

    async def list_own(self) -> list[OwnSandbox]:
        """This runtime's sandboxes on the provider, for the sweep."""
        return []

    async def keep_alive(self, handle: dict[str, Any]) -> None:
        """Push the sandbox's own timeout back (every ``keep_alive_seconds``)."""
        return None

    async def cut_network(self, handle: dict[str, Any]) -> None:
        """Take the sandbox off every network, for good, and check it is off."""
        raise NotImplementedError(f"the {self.name} runtime cannot cut a sandbox's network")

    def describe(self, handle: dict[str, Any]) -> str:
        """The sandbox in messages ("E2B sandbox abc...")."""
        return f"{self.name} sandbox {handle.get(self.handle_keys[0], '?')}"

    def memory_note(self, limits: ExecutionLimits) -> str:
        """What an out-of-memory message says of the limit (" (its limit is 320 MiB)")."""
        return ""

    def sandbox_of(self, handle: dict[str, Any]) -> str:
        return str(handle.get(self.handle_keys[0]) or "")

    def free(self, handle: dict[str, Any]) -> asyncio.Task[None] | None:
        """Destroy a sandbox no run will use again: now (awaited by the caller through the
        returned task) or off the critical path (``destroy_in_background``)."""
        task = asyncio.get_running_loop().create_task(self._destroy_quietly(handle))
        self._destroying.add(task)
        task.add_done_callback(self._destroying.discard)
        return None if self.destroy_in_background else task

    async def _destroy_quietly(self, handle: dict[str, Any]) -> None:
        try:
            await self.destroy(handle)
        except Exception as exc:  # close() runs in finally blocks: never mask the cause; the sweep gets it
            log.warning("%s", exc)
