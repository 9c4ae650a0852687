"""The sandbox sweep: destroy every sandbox that no open execution names, on every provider
this worker serves (docker, e2b, blaxel, modal).

Every sandbox carries the execution and the step attempt that created it
(``runtimes/runner/owner.py``). For each one the sweep asks Temporal:

* the execution is closed, or unknown: destroy it (a crashed worker's, a failed release);
* it is open and the step attempt that created the sandbox is still running: keep it;
* it is open and its latest checkpoint names the sandbox (the ``sandbox_held`` query, then the
  checkpoint itself, which names the sandbox: its session id and the runner's pid): keep it (a
  parked or running run's);
* it is open but its checkpoint names another sandbox: the sandbox was made by a step that
  never reported back (its worker died mid-step, and a retry went on elsewhere): destroy it,
  unless it is younger than ``young_seconds`` (its step's result may be on its way).

A cell of a session is judged by its session (the session keeps the sandbox between cells).
Sandboxes made before they carried labels keep the old rule (``SandboxRuntime.expired``);
sandboxes of another namespace are left to that namespace's workers. The python runtime has
nothing to sweep: its processes die with their worker (``PR_SET_PDEATHSIG``, bubblewrap's
``--die-with-parent``) and a parked run holds none.

The sweep runs at worker start and hourly in every worker (``worker/plugin.py``), and as the
``codemode-sandbox-sweep`` Schedule (``workflows/sweep_workflow.py``), whose runs show in the
web UI with the report: what was removed and why.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from temporalio import activity
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from codemode.runtimes import OUTLIVE_THE_WORKER, get_runtime
from codemode.runtimes.runner.owner import CLUSTER_LABEL, EXECUTION_LABEL, NAMESPACE_LABEL, SESSION_LABEL, STEP_LABEL
from codemode.runtimes.runner.provider import OwnSandbox
from codemode.runtimes.runner.sandbox_runtime import SandboxRuntime

from . import names
from .checkpoints import CheckpointScope, CheckpointStore, CheckpointUnusable
from .models import CheckpointRef

if TYPE_CHECKING:
    from .sandbox_host import SandboxHost

log = logging.getLogger(__name__)

#: The query every execution answers with what its latest checkpoint is.
SANDBOX_HELD_QUERY = "sandbox_held"


class HeldSandbox(BaseModel):
    """What an execution's latest checkpoint is (the ``sandbox_held`` query's answer)."""

    runtime: str
    first_run_id: str = ""
    checkpoint: CheckpointRef | None = None


class SandboxSweepInput(BaseModel):
    #: A sandbox younger than this whose open execution does not name it yet is kept (the
    #: step that made it may have just finished, its result not yet recorded).
    young_seconds: float = 120.0
    dry_run: bool = False


class SweptSandbox(BaseModel):
    runtime: str
    sandbox: str
    execution: str | None = None
    step: str | None = None
    reason: str


class SandboxSweepReport(BaseModel):
    #: The runtimes swept (those this worker serves).
    runtimes: list[str] = Field(default_factory=list)
    removed: list[SweptSandbox] = Field(default_factory=list)
    kept: list[SweptSandbox] = Field(default_factory=list)
    #: Providers that could not be listed, executions that could not be asked.
    errors: list[str] = Field(default_factory=list)
    dry_run: bool = False


@dataclass
class _Execution:
    """What Temporal says of one execution, asked once per sweep."""

    open: bool
    status: str
    #: ``<activity id>#<attempt>`` of its activities running now.
    running_steps: set[str]
    held: HeldSandbox | None = None
    held_error: str | None = None


async def sweep_sandboxes(
    client: Client,
    runtimes: Mapping[str, SandboxRuntime],
    checkpoints: CheckpointStore,
    inp: SandboxSweepInput | None = None,
    *,
    errors: list[str] | None = None,
) -> SandboxSweepReport:
    """One sweep of ``runtimes``' sandboxes (see the module's docstring)."""
    inp = inp or SandboxSweepInput()
    report = SandboxSweepReport(runtimes=sorted(runtimes), dry_run=inp.dry_run, errors=list(errors or []))
    judge = _Judge(client, checkpoints)
    cluster = await cluster_id(client)
    for name, runtime in sorted(runtimes.items()):
        try:
            found = await runtime.list_own()
        except Exception as err:  # a provider that is down is the steps' problem, not the sweep's
            report.errors.append(f"{name}: cannot list its sandboxes: {err}")
            continue
        held_here = runtime.held_here()
        now = time.time()
        for own in found:
            sandbox = runtime.sandbox_of(own.handle)
            entry = SweptSandbox(
                runtime=name,
                sandbox=sandbox,
                execution=own.labels.get(EXECUTION_LABEL),
                step=own.labels.get(STEP_LABEL),
                reason="",
            )
            if sandbox in held_here:
                entry.reason = "this worker is using it"
                report.kept.append(entry)
                continue
            namespace, made_by = own.labels.get(NAMESPACE_LABEL), own.labels.get(CLUSTER_LABEL)
            if (namespace and namespace != client.namespace) or (made_by and cluster and made_by != cluster):
                continue  # another namespace's (or Temporal cluster's) workers judge it
            reason, keep = await judge.verdict(runtime, own, sandbox, now, inp.young_seconds)
            entry.reason = reason
            if keep:
                report.kept.append(entry)
                continue
            if not inp.dry_run:
                try:
                    await runtime.destroy(own.handle)
                except Exception as err:
                    report.errors.append(f"{name}: cannot destroy {sandbox}: {err}")
                    continue
            report.removed.append(entry)
    report.errors.extend(judge.errors)
    for entry in report.removed:
        log.info("sandbox sweep: destroyed %s %s (%s)", entry.runtime, entry.sandbox, entry.reason)
    return report


async def cluster_id(client: Client) -> str:
    """The Temporal cluster's id ("" when the server does not say)."""
    from temporalio.api.workflowservice.v1 import GetClusterInfoRequest

    try:
        info = await client.workflow_service.get_cluster_info(GetClusterInfoRequest(), timeout=timedelta(seconds=10))
    except Exception:  # an older or restricted server: sandboxes go without the label
        return ""
    return info.cluster_id


class _Judge:
    def __init__(self, client: Client, checkpoints: CheckpointStore) -> None:
        self.client = client
        self.checkpoints = checkpoints
        self.executions: dict[str, _Execution | None] = {}
        self.errors: list[str] = []

    async def verdict(
        self, runtime: SandboxRuntime, own: OwnSandbox, sandbox: str, now: float, young: float
    ) -> tuple[str, bool]:
        """(why, keep) for one sandbox."""
        execution_id = own.labels.get(EXECUTION_LABEL)
        if not execution_id:
            why = runtime.expired(own, now)
            return (
                (why, False) if why else ("it carries no execution (made before labels): kept until it expires", True)
            )
        session_id = own.labels.get(SESSION_LABEL)
        if session_id:  # a session's cell: the session keeps the sandbox between cells
            try:
                session = await self.describe(session_id, query=False)
            except Exception as err:
                return f"cannot ask Temporal about session {session_id}: {err}", True
            if session is None:
                return f"its session {session_id} is unknown to Temporal", False
            if not session.open:
                return f"its session {session_id} is closed ({session.status})", False
            return f"its session {session_id} is open", True
        try:
            execution = await self.describe(execution_id, query=True)
        except Exception as err:  # Temporal unreachable: the next sweep asks again
            return f"cannot ask Temporal about execution {execution_id}: {err}", True
        if execution is None:
            return f"execution {execution_id} is unknown to Temporal", False
        if not execution.open:
            return f"execution {execution_id} is closed ({execution.status})", False
        step = own.labels.get(STEP_LABEL)
        if step and step in execution.running_steps:
            return f"its step {step} is still running", True
        if execution.held is None:
            return f"cannot ask execution {execution_id} which sandbox it holds: {execution.held_error}", True
        named = await self.named(runtime, execution_id, execution.held)
        if named == sandbox:
            return f"the checkpoint of execution {execution_id} names it", True
        if now - own.created < young:
            return f"{now - own.created:.0f}s old: its step's result may still be on its way", True
        other = f"names {named}" if named else "names no sandbox"
        return (
            f"execution {execution_id} is open but its checkpoint {other}: made by step {step or '?'}, "
            "which never reported back",
            False,
        )

    async def describe(self, workflow_id: str, *, query: bool) -> _Execution | None:
        if workflow_id in self.executions:
            return self.executions[workflow_id]
        handle = self.client.get_workflow_handle(workflow_id)
        try:
            desc = await handle.describe()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            self.executions[workflow_id] = None
            return None
        status = desc.status
        found = _Execution(
            open=status == WorkflowExecutionStatus.RUNNING,
            status=status.name.lower() if status is not None else "unknown",
            running_steps={f"{p.activity_id}#{p.attempt}" for p in desc.raw_description.pending_activities},
        )
        if found.open and query:
            try:
                found.held = await handle.query(
                    SANDBOX_HELD_QUERY, result_type=HeldSandbox, rpc_timeout=timedelta(seconds=15)
                )
            except Exception as err:  # a worker without the query (older code), or none polling
                found.held_error = str(err) or type(err).__name__
        self.executions[workflow_id] = found
        return found

    async def named(self, runtime: SandboxRuntime, execution_id: str, held: HeldSandbox) -> str | None:
        """The sandbox the execution's latest checkpoint names (None: none, or unreadable)."""
        if held.checkpoint is None or held.runtime != runtime.name:
            return None
        scope = CheckpointScope(
            namespace=self.client.namespace, execution_id=execution_id, first_run_id=held.first_run_id
        )
        try:
            blob = await self.checkpoints.load(scope, held.checkpoint)
        except CheckpointUnusable as err:
            self.errors.append(f"execution {execution_id}: its checkpoint is unreadable: {err}")
            return None
        return runtime.sandbox_named_by(blob)


#: The runtimes the sandbox sweep covers, and the variables that configure each: a worker
#: sweeps a runtime it holds, or whose variables are all set.
class SandboxSweeper:
    """The sweep over one worker's runtimes: those its sandbox steps hold already (the host's),
    and those the environment configures (``runtimes.OUTLIVE_THE_WORKER``)."""

    def __init__(self, host: SandboxHost) -> None:
        self.host = host
        self._cluster: str | None = None

    async def cluster_of(self, client: Client) -> str:
        """This worker's Temporal cluster id (asked once), for the labels of its sandboxes."""
        if self._cluster is None:
            self._cluster = await cluster_id(client)
        return self._cluster

    def swept_runtimes(self) -> tuple[dict[str, SandboxRuntime], list[str]]:
        """The runtimes of sandboxes that outlive a worker which this worker serves: those it
        holds already, and those the environment configures, built for the sweep alone (the
        steps build their own when they need one, and say what is missing). Also what could
        not be built, as errors."""
        found: dict[str, SandboxRuntime] = {}
        errors: list[str] = []
        for name, variables in OUTLIVE_THE_WORKER.items():
            runtime = self.host.runtimes.get(name)
            if runtime is None and all(os.environ.get(v) for v in variables):
                try:
                    runtime = get_runtime(name)
                except Exception as err:  # not installed, or misconfigured: the steps will say so
                    errors.append(f"{name}: {err}")
                    continue
            if isinstance(runtime, SandboxRuntime):
                found[name] = runtime
        return found, errors

    async def sweep(self, client: Client, inp: SandboxSweepInput | None = None) -> SandboxSweepReport:
        """One sweep (``sweep_sandboxes``) over ``swept_runtimes()``; the runtimes built for it
        alone are closed after."""
        runtimes, errors = self.swept_runtimes()
        try:
            return await sweep_sandboxes(client, runtimes, self.host.checkpoints, inp, errors=errors)
        finally:
            for name, runtime in runtimes.items():
                if self.host.runtimes.get(name) is not runtime:
                    await runtime.aclose()


class SandboxSweepActivities:
    """The sweep as an activity (run by the ``codemode-sandbox-sweep`` Schedule's workflow)
    over the runtimes of one worker's sandbox steps (``SandboxActivities.sweep_sandboxes``)."""

    def __init__(self, sweep: Callable[[Client, SandboxSweepInput], Awaitable[SandboxSweepReport]]) -> None:
        self._sweep = sweep

    @activity.defn(name=names.SANDBOX_SWEEP)
    async def sweep(self, inp: SandboxSweepInput) -> SandboxSweepReport:
        report = await self._sweep(activity.client(), inp)
        log.info("sandbox sweep: %d removed, %d kept", len(report.removed), len(report.kept))
        return report


def report_lines(report: SandboxSweepReport) -> list[str]:
    """The report as a person reads it (the CLI, the logs)."""
    lines = [
        f"swept {', '.join(report.runtimes) or 'no runtime'}: {len(report.removed)} removed, {len(report.kept)} kept"
    ]
    verb = "would remove" if report.dry_run else "removed"
    lines += [f"  {verb} {e.runtime} {e.sandbox}: {e.reason}" for e in report.removed]
    lines += [f"  error: {e}" for e in report.errors]
    return lines
