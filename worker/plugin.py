"""``CodeModePlugin``: everything code mode adds to a Temporal client and worker, in one place.

A Temporal plugin (``temporalio.plugin.SimplePlugin``), the way Temporal ships its own AI
integrations. On a **client** it sets the one data converter (pydantic JSON, large payloads
claim-checked into the object store, encryption when keys are set) and the tracing
interceptor. On a **worker** it adds the code-execution, session and sweep workflows, the sandbox-step
activities, one activity per tool of the registry, the retention sweep activity and our
workflow runner, tunes the pollers for gathered calls, and runs a second worker on this
worker's own task queue for the steps of sandboxes it keeps live. ``CodeModeWorker``, the
CLI's workers and clients are built on it, so a worker is assembled here and nowhere else.

Add code mode to a worker that runs your own workflows (they can start executions as child
workflows on the same task queue); ``codemode.connect`` reads Temporal's profile and
``TEMPORAL_*`` variables (``Client.connect(address, plugins=[...])`` works too)::

    client = await codemode.connect(plugins=[CodeModePlugin(tools="my.tools")])
    worker = Worker(client, task_queue="agents", workflows=[MyAgentWorkflow])

Put the plugin on the client (as above) so that the client you start and read workflows with
uses the same data converter as the worker; on the worker alone it works too (the worker then
uses a copy of the client with our converter).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any, Literal

from temporalio.client import Client, ClientConfig
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.converter import DataConverter, DefaultPayloadConverter
from temporalio.plugin import SimplePlugin
from temporalio.worker import (
    PollerBehaviorSimpleMaximum,
    Worker,
    WorkerConfig,
    WorkerDeploymentConfig,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from codemode.activities import approvers_peers
from codemode.activities.approval_gate import ApproverActivities, resolve_path
from codemode.activities.checkpoints import CheckpointStore
from codemode.activities.notify import NotifyActivities
from codemode.activities.retention import RetentionActivities
from codemode.activities.sandbox_steps import SandboxActivities
from codemode.activities.sandbox_sweep import SandboxSweepActivities, report_lines
from codemode.activities.compensation_activity import undo_activities
from codemode.activities.tool_activity import tool_activities
from codemode.activities.undo_log_reader import read_undo_log
from codemode.activities.tools import ToolRegistry
from codemode.approvals.notify.config import NotifyConfig, load_notify_config
from codemode.runtimes import CodeRuntime
from codemode.runtimes.env_numbers import number_from_env
from codemode.runtimes.exit_settle import settle_at_exit
from codemode.storage import BlobStore, StorageSettings, blob_store_for
from codemode.storage.encryption import Keyring
from codemode.worker import telemetry
from codemode.worker.converter import CannotCompose, composed_data_converter, data_converter, keyring_of, store_of
from codemode.worker.reachability import watch_reachability
from codemode.worker.search_attributes import ensure_search_attributes
from codemode.worker.workflow_runner import CodeModeWorkflowRunner
from codemode.workflows.execution_workflow import CodeExecutionWorkflow
from codemode.workflows.notify_workflow import CodeModeNotifyWorkflow
from codemode.workflows.session_workflow import CodeSessionWorkflow
from codemode.workflows.sweep_workflow import SandboxSweepWorkflow, StorageSweepWorkflow

if TYPE_CHECKING:
    from codemode.activities.mcp_tools import McpServers

log = logging.getLogger(__name__)

PLUGIN_NAME = "codemode.CodeModePlugin"

#: Stamped on every workflow task and activity attempt in the history. The SDK's default is
#: a 32-character hash of every loaded module (computed at start-up, and written three times
#: per tool call); the package version says which code ran just as well.
BUILD_ID = f"codemode-{_version('durable-codemode')}"

#: How our workflows move between builds under Worker Deployment Versioning (a worker with a
#: deployment name): a run parked for days continues on the current build's workers when it
#: wakes, never waiting for an old build to be kept up. The committed replay histories
#: (tests/workflows, tests/runtimes) are the guard: a new build must replay the old runs.
#: (Set on the worker, not on the workflow definitions: a server refuses a behavior from an
#: unversioned worker.)
VERSIONING_BEHAVIOR = VersioningBehavior.AUTO_UPGRADE

#: Tools heartbeat so a cancelled execution's running tool hears of it within a second or so
#: (the SDK otherwise sends a heartbeat at most every 30 s).
HEARTBEAT_THROTTLE = timedelta(seconds=1)
#: Calls gathered by the code are scheduled together: poll for (and, on a server with eager
#: activity execution, receive with the workflow task) several at once.
ACTIVITY_POLLERS = 16
EAGER_RESERVATIONS = 16
MAX_CONCURRENT_ACTIVITIES = 200
#: The SDK's own default size of a worker's workflow cache (``Worker(max_cached_workflows=)``).
SDK_CACHE_SIZE = 1000


def session_queue_name(task_queue: str) -> str:
    """This worker's own task queue: steps of the sandboxes it keeps live go there."""
    return f"{task_queue}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass
class WorkerParts:
    """What the plugin built for one worker: its sandbox steps (with their live runs), its own
    task queue, and the object store its checkpoints go to."""

    sandbox: SandboxActivities
    session_queue: str
    store: BlobStore
    task_queue: str


class CodeModePlugin(SimplePlugin):
    """Code mode for a Temporal client and its workers.

    :param tools: a tools module (``"my.tools"``, or a path) or a ``ToolRegistry``; None for a
        client that only starts and reads executions.
    :param runtimes: runtime instances by name (``{"docker": DockerRuntime(image=...)}``);
        the others are built with their defaults on first use.
    :param store: the object store for large payloads and checkpoints (default: the one the
        environment configures, ``storage/__init__.py``; on a worker whose client already
        carries our converter, that converter's store).
    :param encryption_keys: a ``Keyring``, ``"env"`` (``CODEMODE_ENCRYPTION_KEYS``, the
        default) or None (no encryption).
    :param tracing: install temporalio's OpenTelemetry interceptor (default: on unless
        ``CODEMODE_TRACING=0``); a tracer object uses that tracer.
    :param keep_alive_seconds: how long a worker keeps a live sandbox of a runtime that cannot
        checkpoint (python) for its run's next step.
    :param session_keep_alive_seconds: how long a worker keeps a session's live process (python)
        after its last cell, for the session's next cell (later, the session is rebuilt).
    :param tune_worker: raise the worker's activity pollers, eager activity reservations and
        heartbeat rate where they are at the SDK's defaults (what gathered calls and prompt
        cancellation need); settings you passed yourself are kept.
    :param deployment_name: with ``build_id``, the worker joins Temporal's Worker Deployment
        Versioning as version ``deployment_name.build_id``; our workflows auto-upgrade
        (``VERSIONING_BEHAVIOR``). Make a new build current with ``temporal worker deployment
        set-current-version``.
    :param build_id: this build's id (alone: recorded on every task, without versioning).
    :param notify: a ``NotifyConfig`` (webhooks, email, reminders: who is told that a call
        waits), ``"env"`` (the file ``CODEMODE_NOTIFY_CONFIG`` names, the default) or None.
    :param mcp: started MCP servers (``codemode.activities.mcp_tools.McpServers``): their tools join
        the registry (a namespace per server), image and blob results go to the object store
        (sealed under the keys), and the servers are closed when the worker stops.
    :param approvers: the approvers file (``approvals/approvers_file.py``): who may decide
        which call, with signed decisions only; ``"env"`` (the default) reads
        ``CODEMODE_APPROVERS``; None: no file (any decision counts, as any name).
    """

    def __init__(
        self,
        tools: str | ToolRegistry | None = None,
        *,
        runtimes: Mapping[str, CodeRuntime] | None = None,
        store: BlobStore | StorageSettings | None = None,
        encryption_keys: Keyring | Literal["env"] | None = "env",
        tracing: bool | Any = None,
        keep_alive_seconds: float = 60.0,
        tune_worker: bool = True,
        mcp: McpServers | None = None,
        session_keep_alive_seconds: float = 900.0,
        deployment_name: str | None = None,
        build_id: str | None = None,
        notify: NotifyConfig | Literal["env"] | None = "env",
        approvers: str | os.PathLike[str] | None = "env",
    ) -> None:
        self.approvers = resolve_path(approvers)  # a broken file stops the worker here
        if deployment_name and not build_id:
            raise ValueError("deployment_name needs a build_id: the version is deployment_name.build_id")
        if deployment_name and "." in deployment_name:
            raise ValueError(f"deployment_name {deployment_name!r} must not contain '.'")
        self.deployment = WorkerDeploymentVersion(deployment_name, build_id) if deployment_name and build_id else None
        self.build_id = build_id
        #: Where workers tell people a call waits (``CODEMODE_NOTIFY_CONFIG`` by default).
        self.notify = load_notify_config() if notify == "env" else notify
        if isinstance(tools, ToolRegistry) or tools is None:
            self.registry = tools if tools is not None else ToolRegistry()
        else:
            self.registry = ToolRegistry.from_module(tools)
        self.mcp = mcp
        if mcp is not None:
            self.registry.include(s for s in mcp.tool_specs() if s.name not in self.registry)
        self.runtimes = dict(runtimes or {})
        self._store = store if isinstance(store, BlobStore) else None
        self._settings = store if isinstance(store, StorageSettings) else None
        self.keyring = Keyring.from_env() if encryption_keys == "env" else encryption_keys
        self.keep_alive_seconds = keep_alive_seconds
        self.session_keep_alive_seconds = session_keep_alive_seconds
        self.tune_worker = tune_worker
        self._parts: list[WorkerParts] = []
        #: A plugin after this one on the client installs its own payload converter over the SDK's
        #: default class (``_later_plugin_converts``); remembered for a Replayer.
        self._yield_payload_converter = False
        self._session_queues: set[str] = set()
        super().__init__(
            PLUGIN_NAME,
            data_converter=self._data_converter,
            interceptors=self._interceptors(tracing),
            workflows=[
                CodeExecutionWorkflow,
                CodeSessionWorkflow,
                StorageSweepWorkflow,
                SandboxSweepWorkflow,
                CodeModeNotifyWorkflow,
            ],
            workflow_runner=_workflow_runner,
        )

    # -- the client side -----------------------------------------------------------------

    def configure_client(self, config: ClientConfig) -> ClientConfig:
        # A short-lived process (a starter, a CLI command) can abort at exit after its work is
        # done when the SDK's threads still talk to Python (``runtimes/exit_settle.py``).
        settle_at_exit()
        self._yield_payload_converter = _later_plugin_converts(
            self, config.get("plugins", ()), self.make_data_converter()
        )
        return super().configure_client(config)

    @property
    def store(self) -> BlobStore:
        """The object store this plugin's converter writes to (opened on first use for S3)."""
        if self._store is None:
            self._store = blob_store_for(self._settings)
        return self._store

    def make_data_converter(self) -> DataConverter:
        """The converter every client and worker of code mode must share."""
        return data_converter(self.store, keys=self.keyring)

    def _data_converter(self, existing: DataConverter | None) -> DataConverter:
        if existing is not None and store_of(existing) is not None:
            return existing  # ours already (a client made by codemode.connect, or this plugin twice)
        # Another plugin's payload converter (OpenAI Agents', ADK's...) stays; our store and codec wrap it.
        return composed_data_converter(
            existing, self.store, keys=self.keyring, yield_payload_converter=self._yield_payload_converter
        )

    @staticmethod
    def _interceptors(tracing: bool | Any) -> list[Any]:
        return telemetry.interceptors_for(tracing)  # on unless CODEMODE_TRACING=0

    # -- the worker side -----------------------------------------------------------------

    def configure_worker(self, config: WorkerConfig) -> WorkerConfig:
        task_queue = config.get("task_queue", "")
        if task_queue in self._session_queues:
            return config  # our own second worker, built in run_worker
        config = super().configure_worker(config)
        client = config["client"]
        store = store_of(client.data_converter)
        keys = keyring_of(client.data_converter)
        if store is None:
            # A client without our converter: the worker talks through a copy that has it, so
            # what its workflows and activities write is stored and encrypted like everywhere.
            client_config = client.config(active_config=True)
            converter = self._data_converter(client_config["data_converter"])
            client = Client(**{**client_config, "data_converter": converter, "plugins": []})
            config["client"] = client
            store, keys = self.store, self.keyring
        assert store is not None
        session_queue = session_queue_name(task_queue)
        self._session_queues.add(session_queue)
        sandbox = SandboxActivities(
            self.registry,
            # Checkpoints are sealed under the same keys as the client's payloads.
            CheckpointStore(store, keys=keys),
            runtimes=self.runtimes,
            session_queue=session_queue,
            keep_alive_seconds=self.keep_alive_seconds,
            session_keep_alive_seconds=self.session_keep_alive_seconds,
            approvers=self.approvers,
        )
        self._parts.append(WorkerParts(sandbox, session_queue, store, task_queue))
        _configured.append(self.registry)
        if self.mcp is not None:  # image, audio and blob results go to the object store, sealed
            self.mcp.use_store(sandbox.checkpoints)
        config["activities"] = [
            *config.get("activities", []),
            *sandbox.activities(),
            RetentionActivities(store).sweep,
            ApproverActivities(
                self.approvers,
                self.registry,
                notify=bool(self.notify and self.notify.channels()),
                inbox_url=self.notify.inbox_url if self.notify else None,
            ).gate,
            SandboxSweepActivities(sandbox.sweep_sandboxes).sweep,
            *NotifyActivities(self.notify).activities(),
            *tool_activities(self.registry, sandbox),
            *undo_activities(self.registry),
            read_undo_log,
        ]
        # Which approvers file this worker reads, in its identity: workers of one queue with
        # different files are named, and one without a file leaves calls to those with one.
        identity = config.get("identity") or client.identity
        config["identity"] = approvers_peers.with_tag(identity, approvers_peers.tag_of_file(self.approvers))
        _version(config, self.deployment, self.build_id)
        if self.tune_worker:
            _tune(config)
        _cache_size_from_env(config)
        _one_task_at_a_time_without_a_cache(config)
        return config

    def parts_of(self, worker: Worker) -> WorkerParts:
        """What this plugin built for ``worker`` (its sandbox steps, its own task queue)."""
        activities = worker.config(active_config=True).get("activities", [])
        for parts in self._parts:
            if parts.sandbox.start in activities:
                return parts
        raise LookupError("this worker was not configured by this CodeModePlugin")

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        try:
            parts = self.parts_of(worker)
        except LookupError:
            await next(worker)
            return
        # Steps of live sandboxes come to this worker's own queue; a plain worker, with no
        # plugins, because it only runs the step activities of the worker it belongs to.
        client = worker.client
        # Our search attributes: created where this client may, else said how (never fatal).
        await ensure_search_attributes(client)
        own = Worker(
            Client(**{**client.config(active_config=True), "plugins": []}),
            task_queue=parts.session_queue,
            activities=parts.sandbox.activities(),
            build_id=self.build_id or worker.config(active_config=True).get("build_id") or BUILD_ID,
        )
        own_task = asyncio.create_task(own.run())
        sweeper = asyncio.create_task(_sweep_orphans(client, parts.sandbox))
        watcher = asyncio.create_task(watch_reachability(client))  # logs a lost credential
        peers = asyncio.create_task(_report_approvers_peers(client, parts.task_queue, self.approvers))
        try:
            main_task = asyncio.ensure_future(next(worker))
            done, _ = await asyncio.wait({main_task, own_task}, return_when=asyncio.FIRST_COMPLETED)
            if own_task in done and not main_task.done():
                # The session queue's worker failed: stop the main worker too, and say why.
                await worker.shutdown()
                await main_task
                own_task.result()
            await main_task
        finally:
            sweeper.cancel()
            watcher.cancel()
            peers.cancel()
            if own.is_running:
                await own.shutdown()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await own_task
            await _tell_sessions_their_process_is_gone(client, parts.sandbox)
            await parts.sandbox.aclose()
            if self.mcp is not None:
                await self.mcp.aclose()
            self._parts.remove(parts)
            self._session_queues.discard(parts.session_queue)


async def _report_approvers_peers(client: Client, task_queue: str, path: Any) -> None:
    """Name the workers of this queue that read another approvers file (once they poll)."""
    with contextlib.suppress(Exception):
        await asyncio.sleep(APPROVERS_PEERS_AFTER)
        await approvers_peers.report(client, task_queue, approvers_peers.tag_of_file(path))


#: How long after it starts a worker looks at the other workers of its queue.
APPROVERS_PEERS_AFTER = 5.0


#: The tool registries of the plugins that configured a worker in this process (the agent
#: frameworks' ``run_code_tool()`` without tools uses the last one).
_configured: list[ToolRegistry] = []


def configured_registry() -> ToolRegistry | None:
    """The tools of the last ``CodeModePlugin`` that configured a worker in this process."""
    return _configured[-1] if _configured else None


def _later_plugin_converts(plugin: CodeModePlugin, plugins: Sequence[object], ours: DataConverter) -> bool:
    """Whether a plugin after ``plugin`` installs a payload converter of its own over the SDK's
    default class (OpenAI Agents', Deep Agents', ADK's, Strands', pydantic-ai's): then ours
    leaves that class to it (two of them accept nothing else). Asked by calling each later
    plugin's converter hook, which only builds a converter. While we encrypt, a plugin that
    would also replace the failure converter (Strands') keeps ours if it accepts it, and cannot
    compose if it does not."""
    after = list(plugins)
    index = next((i for i, p in enumerate(after) if p is plugin), None)
    if index is None:
        return False
    probe = dataclasses.replace(ours, payload_converter_class=DefaultPayloadConverter)
    converts = False
    for other in after[index + 1 :]:
        hook = getattr(other, "data_converter", None) if isinstance(other, SimplePlugin) else None
        if not callable(hook):
            continue
        result = hook(probe)
        if not isinstance(result, DataConverter) or result.payload_converter_class is DefaultPayloadConverter:
            continue
        if plugin.keyring is not None and result.failure_converter_class is not ours.failure_converter_class:
            try:
                hook(ours)
            except ValueError:
                raise CannotCompose(
                    f"CodeModePlugin cannot compose with {other.name()}: it accepts only its own payload converter "
                    f"and replaces the failure converter that encryption needs "
                    f"({result.failure_converter_class.__name__}); run without CODEMODE_ENCRYPTION_KEYS"
                ) from None
            continue  # it keeps ours, encryption's failure converter with it
        converts = True
    return converts


async def _tell_sessions_their_process_is_gone(client: Client, sandbox: SandboxActivities) -> None:
    """Sessions whose live process this worker held (python) learn it is gone now, so their
    next cell rebuilds at once instead of first waiting for this worker's queue. (A worker
    that is killed cannot say it: its sessions' next cells wait that long once.)"""
    for owner, key in sandbox.kept_session_owners():
        with contextlib.suppress(Exception):
            await client.get_workflow_handle(owner).signal("live_lost", key)


#: How often a worker looks for sandboxes no open execution names (and once at start).
ORPHAN_SWEEP_SECONDS = 3600.0


async def _sweep_orphans(client: Client, sandbox: SandboxActivities) -> None:
    """Destroy the sandboxes no open execution names, on every provider this worker serves
    (``activities/sandbox_sweep.py``), at start and then hourly; the report goes to the log
    (the ``codemode-sandbox-sweep`` Schedule shows the same sweep in the web UI)."""
    while True:
        try:
            report = await sandbox.sweep_sandboxes(client)
            if report.removed or report.errors:
                for line in report_lines(report):
                    log.info("%s", line)
        except Exception as err:  # Temporal or a provider down: the next sweep tries again
            log.warning("the sandbox sweep failed: %s", err)
        await asyncio.sleep(ORPHAN_SWEEP_SECONDS)


#: Our modules that workflow code may import but that hold no workflow state: imported once
#: from the host, not again inside every workflow run's sandbox (the workflows/ modules are).
PASSTHROUGH_MODULES = (
    "codemode.runtimes",
    "codemode.storage",
    "codemode.approvals",
    "codemode.activities",
    "codemode.integrations",
)


def _workflow_runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    """Our sandboxed runner, keeping the restrictions other plugins set on the sandbox (e.g.
    pydantic-ai's passthrough modules); an unsandboxed runner chosen by the application stays."""
    if isinstance(existing, CodeModeWorkflowRunner):
        return existing
    if existing is None or type(existing) is SandboxedWorkflowRunner:
        base = existing or SandboxedWorkflowRunner()
        restrictions = base.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        return CodeModeWorkflowRunner(restrictions=restrictions, runner_class=base.runner_class)
    return existing


def _version(config: WorkerConfig, deployment: WorkerDeploymentVersion | None, build_id: str | None) -> None:
    """The worker's deployment version (ours, unless the application set one) and build id."""
    if deployment is not None and config.get("deployment_config") is None:
        config["deployment_config"] = WorkerDeploymentConfig(
            version=deployment, use_worker_versioning=True, default_versioning_behavior=VERSIONING_BEHAVIOR
        )
        config.pop("build_id", None)
        config.pop("use_worker_versioning", None)
    elif build_id and config.get("deployment_config") is None and not config.get("build_id"):
        config["build_id"] = build_id
    chosen = config.get("deployment_config")
    if (
        chosen is not None
        and chosen.use_worker_versioning
        and chosen.default_versioning_behavior == VersioningBehavior.UNSPECIFIED
    ):
        raise ValueError(
            "this worker's WorkerDeploymentConfig has no default_versioning_behavior, and code mode's "
            "workflows need one: set default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE (what "
            "CodeModePlugin(deployment_name=..., build_id=...) sets; see the secured-clusters guide)"
        )


def _cache_size_from_env(config: WorkerConfig) -> None:
    """``CODEMODE_MAX_CACHED_WORKFLOWS``: how many runs the SDK's workflow cache keeps (its
    default, 1,000, unless set). A cached run that waits for a person costs the worker about
    140 KB (``bench/monday.py``); one not cached costs nothing while it waits and replays its
    history when it wakes. A size the worker was given in code is kept."""
    size = number_from_env(
        "CODEMODE_MAX_CACHED_WORKFLOWS", -1, cast=int, minimum=0, expected="a whole number of runs (0 or more)"
    )
    if size >= 0 and config.get("max_cached_workflows", SDK_CACHE_SIZE) == SDK_CACHE_SIZE:
        config["max_cached_workflows"] = int(size)


def _one_task_at_a_time_without_a_cache(config: WorkerConfig) -> None:
    """A worker that caches no workflow (``max_cached_workflows=0``) takes one workflow task at a
    time. Sandbox steps are local activities, and Core cancels a run's local activities in flight
    when another run's task needs the (empty) cache, then leaves the run's next task to time out
    (10 s each; "Eviction requested while local activities are still in flight", then "leftover
    buffered tasks"). Measured by ``bench/approval_replay.py``: 12 approval runs four at a time,
    6.7 s mean and 20 s p95 per run; one task at a time, 1.5 s and 2.1 s. A limit the user set is
    kept, with a warning."""
    if config.get("max_cached_workflows") != 0:
        return
    slots = config.get("max_concurrent_workflow_tasks")
    if slots is None:
        config["max_concurrent_workflow_tasks"] = 1
    elif slots > 1:
        log.warning(
            "max_cached_workflows=0 with max_concurrent_workflow_tasks=%s: Core cancels a run's local "
            "activities (code mode's sandbox steps) when another run's task evicts it, and its next task "
            "then times out; one workflow task at a time avoids it",
            slots,
        )


def _tune(config: WorkerConfig) -> None:
    """Raise what is still at the SDK's default (see the constants above)."""
    pollers = PollerBehaviorSimpleMaximum(ACTIVITY_POLLERS)
    defaults: Sequence[tuple[str, Any, Any]] = (
        ("activity_task_poller_behavior", PollerBehaviorSimpleMaximum(5), pollers),
        ("max_eager_activity_reservations_per_workflow_task", 3, EAGER_RESERVATIONS),
        ("default_heartbeat_throttle_interval", timedelta(seconds=30), HEARTBEAT_THROTTLE),
        ("max_concurrent_activities", None, MAX_CONCURRENT_ACTIVITIES),
        ("max_concurrent_local_activities", None, MAX_CONCURRENT_ACTIVITIES),
        ("build_id", None, BUILD_ID),
    )
    for key, sdk_default, ours in defaults:
        if key == "build_id" and config.get("deployment_config") is not None:
            continue  # the deployment's version carries the build id (the SDK refuses both)
        if config.get(key, sdk_default) == sdk_default:
            config[key] = ours  # type: ignore[literal-required]
