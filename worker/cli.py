"""``codemode``: run code durably, decide approvals, read the audit, run a worker or a server.

Exit codes: 0 success, 1 code error (or a failed execution), 2 usage or input error,
3 awaiting approval. Every client command honours ``TEMPORAL_ADDRESS`` and ``--address``.
Progress (tool calls as they happen) goes to stderr; results go to stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
)
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from activities.tools import ToolRegistry
from runtimes import RUNTIMES
from worker import display
from worker.client import DEFAULT_ADDRESS, connect, start_execution
from worker.history import ExecutionAudit, fetch_audit
from worker.server import EmbeddedServer, ServerStartError, default_db_path, is_local, server_answers, split_address
from workflows.models import (
    TASK_QUEUE,
    ApprovalRecord,
    ApproveSignal,
    CodeExecutionRequest,
    DenySignal,
    ExecutionOutcome,
    ExecutionStatus,
    PendingApproval,
    ToolCallRecord,
)

EXIT_OK, EXIT_CODE_ERROR, EXIT_USAGE, EXIT_AWAITING_APPROVAL = 0, 1, 2, 3
POLL_SECONDS = 0.3
QUERY_TIMEOUT = timedelta(seconds=5)


class Fail(click.ClickException):
    """A clean failure with a message and an exit code (2 unless said otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def note(message: str) -> None:
    click.echo(message, err=True)


def emit(model: BaseModel, lines: list[str], *, as_json: bool) -> None:
    """A model as one JSON object, or its human lines, on stdout."""
    click.echo(model.model_dump_json() if as_json else "\n".join(lines))


# -- options shared by commands ----------------------------------------------------------------

address_option = click.option(
    "--address",
    envvar="TEMPORAL_ADDRESS",
    default=DEFAULT_ADDRESS,
    show_default=True,
    show_envvar=True,
    help="Temporal frontend HOST:PORT.",
)
task_queue_option = click.option(
    "--task-queue",
    envvar="CODEMODE_TASK_QUEUE",
    default=TASK_QUEUE,
    show_default=True,
    show_envvar=True,
    help="Task queue the workers poll.",
)
tools_option = click.option("--tools", "tools_module", metavar="MODULE", help="Tools module (importable from here).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
port_option = click.option("--port", type=int, default=7233, show_default=True, help="gRPC port of the server.")
ui_port_option = click.option("--ui-port", type=int, default=None, help="Web UI port [default: port + 1000].")
db_option = click.option(
    "--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file [default: {default_db_path()}]."
)


def _address_flag(ctx: click.Context) -> str:
    """`` --address X`` when the address came from the flag, so printed commands are exact."""
    source = ctx.get_parameter_source("address")
    return f" --address {ctx.params['address']}" if source == click.core.ParameterSource.COMMANDLINE else ""


# -- helpers ------------------------------------------------------------------------------------


def load_tools(module: str) -> ToolRegistry:
    """Import a tools module from the current directory (a dotted name or a ``.py`` path)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    name = module[:-3].replace(os.sep, ".").strip(".") if module.endswith(".py") else module
    try:
        return ToolRegistry.from_module(name)
    except ModuleNotFoundError as err:
        raise Fail(f"cannot import tools module {module!r}: {err} (run from the folder that contains it)") from None
    except ValueError as err:
        raise Fail(f"tools module {module!r}: {err}") from None
    except Exception as err:
        raise Fail(f"importing tools module {module!r} failed: {type(err).__name__}: {err}") from None


def parse_inputs(pairs: tuple[str, ...]) -> dict[str, Any]:
    inputs: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name.isidentifier():
            raise Fail(f"bad --input {pair!r}: expected NAME=JSON, e.g. --input city='\"Paris\"' or --input n=3")
        try:
            inputs[name] = json.loads(raw)
        except json.JSONDecodeError as err:
            raise Fail(
                f"bad --input {pair!r}: the value is not JSON ({err.msg}); quote strings: {name}='\"...\"'"
            ) from None
    return inputs


def read_code(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.is_file():
        raise Fail(f"no such file: {file}")
    return path.read_text()


async def open_client(address: str) -> Client:
    if not server_answers(address):
        raise Fail(
            f"no Temporal server answers at {address}; start one with `codemode server` "
            "(or `codemode dev --tools MODULE`), or point TEMPORAL_ADDRESS / --address at yours"
        )
    try:
        return await connect(address)
    except Exception as err:
        raise Fail(f"cannot connect to Temporal at {address}: {err}") from None


async def has_workers(client: Client, task_queue: str) -> bool:
    """Whether any worker polls the task queue for workflow tasks."""
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    try:
        resp = await client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            )
        )
    except RPCError:
        return True  # cannot tell: assume yes rather than start a second worker
    return len(resp.pollers) > 0


async def existing_handle(client: Client, execution_id: str) -> tuple[WorkflowHandle[Any, Any], Any]:
    handle = client.get_workflow_handle(execution_id, result_type=ExecutionOutcome)
    try:
        return handle, await handle.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise Fail(f"no execution {execution_id!r} at {client.service_client.config.target_host}") from None
        raise


async def query_status(handle: WorkflowHandle[Any, Any]) -> ExecutionStatus | None:
    """The workflow's status query, or None when no worker answers in time."""
    try:
        return await handle.query("status", result_type=ExecutionStatus, rpc_timeout=QUERY_TIMEOUT)
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return None


def status_from_audit(audit: ExecutionAudit) -> ExecutionStatus:
    """The status as the history shows it, for when no worker can answer the query."""
    pending = audit.pending_approvals()
    if audit.status == "running":
        state = "awaiting_approval" if pending else "running"
    else:
        state = "completed" if audit.success else "failed"
    calls = [
        ToolCallRecord(
            **c.model_dump(include=set(ToolCallRecord.model_fields) - {"approval"}),
            approval=ApprovalRecord(decision=c.approval.decision, by=c.approval.by, comment=c.approval.comment)
            if c.approval
            else None,
        )
        for c in audit.calls
    ]
    return ExecutionStatus(
        state=state,  # type: ignore[arg-type]
        runtime=audit.runtime or "monty",
        pending_approvals=pending,
        tool_calls=calls,
        stdout=audit.stdout,
        error=audit.error,
    )


# -- following a run ------------------------------------------------------------------------------


class Follower:
    """Shows each tool call as it happens (polling the status query) and waits for the outcome."""

    def __init__(self, handle: WorkflowHandle[Any, ExecutionOutcome], *, as_json: bool, interactive: bool) -> None:
        self.handle = handle
        self.as_json = as_json
        self.interactive = interactive
        self.shown: dict[str, str] = {}
        self.stdout_seen = 0
        self.decided: set[str] = set()

    def show_calls(self, calls: list[ToolCallRecord]) -> None:
        for call in calls:
            showable = call.status in display.FINAL_CALL_STATES or call.status == "awaiting_approval"
            if showable and self.shown.get(call.call_id) != call.status:
                self.shown[call.call_id] = call.status
                note(display.call_line(call))

    def show_stdout(self, stdout: str) -> None:
        if len(stdout) > self.stdout_seen:
            if not self.as_json:
                click.echo(stdout[self.stdout_seen :], nl=False)
            self.stdout_seen = len(stdout)

    async def ask(self, pending: list[PendingApproval]) -> None:
        """Interactive terminal: decide each pending call here and now."""
        by = _os_user()
        for p in pending:
            if p.call_id in self.decided:
                continue
            ok = await asyncio.to_thread(click.confirm, f"Approve {p.summary or p.tool}?", default=False, err=True)
            self.decided.add(p.call_id)
            if ok:
                await self.handle.signal(
                    "approve", ApproveSignal(call_id=p.call_id, by=by, comment="approved at the terminal")
                )
            else:
                await self.handle.signal("deny", DenySignal(call_id=p.call_id, by=by, reason="denied at the terminal"))

    async def wait(self) -> ExecutionOutcome | list[PendingApproval]:
        """The outcome, or the pending approvals when the run parks and nobody here can decide."""
        result = asyncio.ensure_future(self.handle.result())
        try:
            while True:
                done, _ = await asyncio.wait({result}, timeout=POLL_SECONDS)
                if done:
                    break
                status = await query_status(self.handle)
                if status is None:
                    continue
                self.show_calls(status.tool_calls)
                self.show_stdout(status.stdout)
                pending = [p for p in status.pending_approvals if p.call_id not in self.decided]
                if pending and status.state == "awaiting_approval":
                    if not self.interactive:
                        return status.pending_approvals
                    await self.ask(pending)
            outcome = result.result()
        finally:
            if not result.done():
                result.cancel()
        self.show_calls(outcome.tool_calls)
        self.show_stdout(outcome.stdout)
        return outcome


def report_outcome(outcome: ExecutionOutcome, *, as_json: bool) -> int:
    if as_json:
        click.echo(outcome.model_dump_json())
    else:
        if outcome.stdout and not outcome.stdout.endswith("\n"):
            click.echo()
        note(display.outcome_summary(outcome))
        if outcome.success and outcome.output is not None:
            click.echo(json.dumps(outcome.output, indent=2, ensure_ascii=False, default=str))
    return EXIT_OK if outcome.success else EXIT_CODE_ERROR


def report_parked(
    execution_id: str, pending: list[PendingApproval], *, as_json: bool, address_flag: str, extra: list[str]
) -> int:
    lines = display.approval_help(execution_id, pending, address_flag)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "execution_id": execution_id,
                    "state": "awaiting_approval",
                    "pending_approvals": [p.model_dump(mode="json") for p in pending],
                    "approve": [f"codemode approve {execution_id} {p.call_id}{address_flag}" for p in pending],
                    "deny": [f"codemode deny {execution_id} {p.call_id}{address_flag}" for p in pending],
                }
            )
        )
    for line in [*lines, *extra]:
        note(line)
    return EXIT_AWAITING_APPROVAL


async def follow(
    handle: WorkflowHandle[Any, ExecutionOutcome],
    *,
    as_json: bool,
    interactive: bool,
    address_flag: str,
    parked_extra: list[str],
) -> int:
    try:
        got = await Follower(handle, as_json=as_json, interactive=interactive).wait()
    except WorkflowFailureError as err:
        cause = err.cause
        note(f"✗ execution {handle.id} failed: {cause or err}")
        return EXIT_CODE_ERROR
    if isinstance(got, ExecutionOutcome):
        return report_outcome(got, as_json=as_json)
    return report_parked(handle.id, got, as_json=as_json, address_flag=address_flag, extra=parked_extra)


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return "unknown"


def _interactive() -> bool:
    return sys.stdin.isatty() and os.environ.get("CI", "").lower() not in ("1", "true", "yes")


# -- running things until Ctrl-C -----------------------------------------------------------------------


async def until_stopped() -> None:
    """Wait for SIGINT or SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def start_server(port: int, ui_port: int | None, db: str | None) -> EmbeddedServer:
    server = EmbeddedServer(port=port, ui_port=ui_port, db=db)
    try:
        return await server.start()
    except (ServerStartError, FileNotFoundError) as err:
        raise Fail(f"cannot start the embedded Temporal server: {err}") from None


def server_banner(server: EmbeddedServer) -> list[str]:
    return [
        f"Temporal server: {server.address}",
        f"Web UI:          {server.ui_url}",
        f"Database:        {server.db}",
    ]


# -- the commands --------------------------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """Durable code mode: run LLM-written Python in a sandbox, every step durable on Temporal."""


@cli.command()
@click.argument("file", metavar="FILE|-")
@tools_option
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
@click.option("--input", "inputs", multiple=True, metavar="NAME=JSON", help="A variable for the code (repeatable).")
@click.option("--id", "execution_id", help="Execution id [default: exec-<random>].")
@json_option
@click.option("--no-wait", is_flag=True, help="Print the execution id and exit at once.")
@address_option
@task_queue_option
@click.pass_context
def run(
    ctx: click.Context,
    file: str,
    tools_module: str | None,
    runtime: str,
    inputs: tuple[str, ...],
    execution_id: str | None,
    as_json: bool,
    no_wait: bool,
    address: str,
    task_queue: str,
) -> int:
    """Run a code file (or - for stdin) and show each tool call as it happens.

    Starts the embedded server and a worker in this process when no server answers."""
    opts = RunOptions(
        request=CodeExecutionRequest(code=read_code(file), runtime=runtime, inputs=parse_inputs(inputs)),
        registry=load_tools(tools_module) if tools_module else None,
        tools_module=tools_module,
        execution_id=execution_id,
        as_json=as_json,
        no_wait=no_wait,
        address=address,
        task_queue=task_queue,
        interactive=file != "-" and not as_json and _interactive(),
        address_flag=_address_flag(ctx),
    )
    return asyncio.run(_run(opts))


@dataclass
class RunOptions:
    request: CodeExecutionRequest
    registry: ToolRegistry | None
    tools_module: str | None
    execution_id: str | None
    as_json: bool
    no_wait: bool
    address: str
    task_queue: str
    interactive: bool
    address_flag: str


async def _run(opts: RunOptions) -> int:
    async with contextlib.AsyncExitStack() as stack:
        client, own_worker, parked_extra = await _client_and_worker_for_run(opts, stack)
        try:
            handle = await start_execution(
                client,
                opts.request,
                execution_id=opts.execution_id,
                task_queue=opts.task_queue,
                # An execution id names one audit trail: never start a second run under it.
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            )
        except WorkflowAlreadyStartedError:
            raise Fail(
                f"an execution with id {opts.execution_id!r} already exists; see `codemode result {opts.execution_id}`"
            ) from None
        if opts.no_wait:
            click.echo(handle.id)
            if own_worker:
                note("note: no worker stays up after this command; the execution continues when one runs.")
            return EXIT_OK
        if not opts.as_json:
            note(f"Execution {handle.id} started.")
        return await follow(
            handle,
            as_json=opts.as_json,
            interactive=opts.interactive,
            address_flag=opts.address_flag,
            parked_extra=parked_extra,
        )


async def _client_and_worker_for_run(
    opts: RunOptions, stack: contextlib.AsyncExitStack
) -> tuple[Client, bool, list[str]]:
    """A client, plus whatever this process must run itself: the embedded server when nothing
    answers at a local address, a worker when none polls the task queue. Returns the client,
    whether a worker runs here, and what to add to the approval message."""
    from worker.worker import CodeModeWorker

    address, registry, parked_extra = opts.address, opts.registry, []
    if server_answers(address):
        client = await open_client(address)
        own_worker = not await has_workers(client, opts.task_queue)
        if own_worker and registry is None:
            note(
                f"warning: no worker polls task queue {opts.task_queue!r}; start one with `codemode worker --tools MODULE`"
            )
            return client, False, parked_extra
        if own_worker:
            note(f"No worker polls task queue {opts.task_queue!r}: running one in this process.")
    else:
        if not is_local(address):
            raise Fail(f"no Temporal server answers at {address}")
        if registry is None:
            raise Fail(f"no Temporal server answers at {address}; pass --tools MODULE to start one here with a worker")
        server = await start_server(split_address(address)[1], None, None)
        stack.push_async_callback(server.stop)
        note(f"No Temporal server at {address}: started the embedded one (UI {server.ui_url}, db {server.db}).")
        client = await connect(server.address)
        own_worker = True
        parked_extra = [
            "The embedded server stops with this command; the execution is saved in its database.",
            f"Run `codemode dev --tools {opts.tools_module}` first, so a server and a worker are up to act on the decision.",
        ]
    if own_worker:
        assert registry is not None
        # Tool failures are shown as call lines; the worker's tracebacks would only be noise here.
        for name in ("temporalio.activity", "temporalio.workflow"):
            logging.getLogger(name).setLevel(logging.ERROR)
        await stack.enter_async_context(CodeModeWorker(client, registry, task_queue=opts.task_queue).running())
    return client, own_worker, parked_extra


@cli.command()
@click.argument("execution_id", metavar="ID")
@json_option
@address_option
@click.pass_context
def result(ctx: click.Context, execution_id: str, as_json: bool, address: str) -> int:
    """Wait for an execution's outcome (same output and exit codes as run)."""
    return asyncio.run(_result(execution_id, as_json, address, _address_flag(ctx)))


async def _result(execution_id: str, as_json: bool, address: str, address_flag: str) -> int:
    client = await open_client(address)
    handle, _ = await existing_handle(client, execution_id)
    interactive = not as_json and _interactive()
    return await follow(handle, as_json=as_json, interactive=interactive, address_flag=address_flag, parked_extra=[])


def _decision_command(approve: bool) -> Callable[..., int]:
    verb = "approve" if approve else "deny"
    text_flag = "--comment" if approve else "--reason"

    @click.argument("execution_id", metavar="ID")
    @click.argument("call_id")
    @click.option("--by", default=None, help="Who decides [default: the OS user].")
    @click.option(text_flag, "text", default=None, help="A comment." if approve else "Why it is denied.")
    @address_option
    def command(execution_id: str, call_id: str, by: str | None, text: str | None, address: str) -> int:
        return asyncio.run(_decide(approve, execution_id, call_id, by or _os_user(), text, address))

    command.__doc__ = f"{verb.capitalize()} a tool call waiting for approval (CALL_ID as printed by run/status)."
    return cli.command(name=verb)(command)


async def _decide(approve: bool, execution_id: str, call_id: str, by: str, text: str | None, address: str) -> int:
    client = await open_client(address)
    handle, desc = await existing_handle(client, execution_id)
    if desc.status != WorkflowExecutionStatus.RUNNING:
        raise Fail(f"execution {execution_id} is already closed ({desc.status.name.lower()}); nothing to decide")
    status = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    from_history = status is None
    pending = status.pending_approvals if status else (await fetch_audit(client, execution_id)).pending_approvals()
    by_id = {p.call_id: p for p in pending}
    if call_id not in by_id:
        ids = ", ".join(by_id) or "none"
        raise Fail(f"call {call_id!r} of {execution_id} is not waiting for approval; pending call ids: {ids}")
    if approve:
        await handle.signal("approve", ApproveSignal(call_id=call_id, by=by, comment=text))
    else:
        await handle.signal("deny", DenySignal(call_id=call_id, by=by, reason=text))
    verb = "approved" if approve else "denied"
    click.echo(f"✓ {verb} call {call_id} ({by_id[call_id].summary}) of {execution_id} as {by}")
    if from_history:
        note("note: no worker is running; the decision is recorded and takes effect when one starts.")
    note(f"See the outcome with: codemode result {execution_id}")
    return EXIT_OK


approve = _decision_command(approve=True)
deny = _decision_command(approve=False)


@cli.command()
@click.argument("execution_id", metavar="ID")
@json_option
@address_option
def status(execution_id: str, as_json: bool, address: str) -> int:
    """An execution's state, pending approvals, tool calls so far and stdout (the status query)."""
    return asyncio.run(_status(execution_id, as_json, address))


async def _status(execution_id: str, as_json: bool, address: str) -> int:
    client = await open_client(address)
    handle, desc = await existing_handle(client, execution_id)
    current = await query_status(handle) if await has_workers(client, desc.task_queue) else None
    if current is None:
        current = status_from_audit(await fetch_audit(client, execution_id))
        if not as_json:
            note("(no worker answered the status query: read from the history)")
    emit(current, display.status_lines(execution_id, current), as_json=as_json)
    return EXIT_OK


@cli.command()
@click.argument("execution_id", metavar="ID")
@json_option
@address_option
def history(execution_id: str, as_json: bool, address: str) -> int:
    """The audit timeline from the Temporal history: calls, attempts, approvals, timings."""
    return asyncio.run(_history(execution_id, as_json, address))


async def _history(execution_id: str, as_json: bool, address: str) -> int:
    client = await open_client(address)
    await existing_handle(client, execution_id)
    audit = await fetch_audit(client, execution_id)
    emit(audit, display.audit_lines(audit), as_json=as_json)
    return EXIT_OK


@cli.command()
@tools_option
@address_option
@task_queue_option
def worker(tools_module: str | None, address: str, task_queue: str) -> int:
    """Run a worker for the workflow, the sandbox steps and the tools, until Ctrl-C."""
    registry = load_tools(_require_tools(tools_module))
    return asyncio.run(_worker(registry, address, task_queue))


def _require_tools(tools_module: str | None) -> str:
    if not tools_module:
        raise Fail("missing --tools MODULE (the module whose public functions are the tools)")
    return tools_module


async def _serve_worker(client: Client, registry: ToolRegistry, task_queue: str, address: str) -> None:
    from worker.worker import CodeModeWorker

    w = CodeModeWorker(client, registry, task_queue=task_queue)
    async with w.running():
        note(f"Worker ready on task queue {task_queue!r} at {address}; tools: {', '.join(registry.names)}")
        await until_stopped()
        note("Stopping the worker...")


async def _worker(registry: ToolRegistry, address: str, task_queue: str) -> int:
    client = await open_client(address)
    await _serve_worker(client, registry, task_queue, address)
    return EXIT_OK


@cli.command()
@port_option
@ui_port_option
@db_option
def server(port: int, ui_port: int | None, db: str | None) -> int:
    """Run the embedded Temporal dev server (SQLite, web UI) until Ctrl-C."""
    return asyncio.run(_server(port, ui_port, db))


async def _server(port: int, ui_port: int | None, db: str | None) -> int:
    srv = await start_server(port, ui_port, db)
    try:
        for line in server_banner(srv):
            note(line)
        note("Ready. Ctrl-C to stop.")
        await until_stopped()
    finally:
        await srv.stop()
    return EXIT_OK


@cli.command()
@tools_option
@port_option
@ui_port_option
@db_option
@task_queue_option
def dev(tools_module: str | None, port: int, ui_port: int | None, db: str | None, task_queue: str) -> int:
    """The embedded server and a worker in one process, until Ctrl-C."""
    registry = load_tools(_require_tools(tools_module))
    return asyncio.run(_dev(registry, port, ui_port, db, task_queue))


async def _dev(registry: ToolRegistry, port: int, ui_port: int | None, db: str | None, task_queue: str) -> int:
    srv = await start_server(port, ui_port, db)
    try:
        for line in server_banner(srv):
            note(line)
        client = await connect(srv.address)
        await _serve_worker(client, registry, task_queue, srv.address)
    finally:
        await srv.stop()
    return EXIT_OK


@cli.command()
@tools_option
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
def tools(tools_module: str | None, runtime: str) -> int:
    """The tools, their policies, and the prompt (with stubs) as an LLM would see it."""
    from runtimes import get_runtime

    registry = load_tools(_require_tools(tools_module))
    try:
        rt = get_runtime(runtime)
    except Exception as err:
        raise Fail(f"runtime {runtime!r} is not available here: {type(err).__name__}: {err}") from None
    click.echo(f"# {len(registry)} tools from {tools_module} (runtime: {runtime})")
    for spec in registry:
        opts = spec.options
        policy = [f"max_attempts={opts.max_attempts}", f"timeout={opts.timeout.total_seconds():g}s"]
        if opts.requires_approval:
            policy.insert(0, "requires approval")
        click.echo(f"#   {spec.name:<24} {', '.join(policy)}")
    click.echo()
    click.echo(rt.prompt(registry.signatures()))
    return EXIT_OK


# -- entry point ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Run the CLI and leave with ``os._exit``: temporalio can crash at interpreter exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.reconfigure(errors="replace")  # type: ignore[union-attr]
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        code = cli.main(args=argv, prog_name="codemode", standalone_mode=False)
    except click.exceptions.Exit as err:
        code = err.exit_code
    except click.ClickException as err:
        err.show()
        code = err.exit_code
    except (click.Abort, KeyboardInterrupt):
        note("Interrupted.")
        code = 130
    except Exception as err:  # an unexpected fault: say what it was, not a traceback wall
        if os.environ.get("CODEMODE_DEBUG"):
            import traceback

            traceback.print_exc()
        note(f"error: {type(err).__name__}: {err}")
        code = 1
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
