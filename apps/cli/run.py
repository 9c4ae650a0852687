"""``codemode run`` and ``codemode result``: start an execution (with the embedded server and a
worker when nothing else is up), follow its tool calls as they happen, report the outcome."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from pydantic import ValidationError
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.common import WorkflowIDReusePolicy
from temporalio.exceptions import CancelledError, WorkflowAlreadyStartedError

from codemode.activities.tools import ToolRegistry
from codemode.apps.cli.common import existing_handle, interactive_terminal, json_option, open_client
from codemode.apps.cli.follower import Follower
from codemode.apps.command_line import (
    EXIT_AWAITING_APPROVAL,
    EXIT_CODE_ERROR,
    EXIT_OK,
    Count,
    Duration,
    Fail,
    Size,
    connection_options,
    load_tool_sources,
    note,
    task_queue_option,
    tool_source_options,
    usage_errors,
)
from codemode.client import display
from codemode.client.decision_hints import decide_command
from codemode.client.executions import InputTooLarge, check_request_size, start_execution
from codemode.client.following import cancel_reason
from codemode.runtimes import RUNTIMES
from codemode.runtimes.types import ExecutionLimits
from codemode.workflows.models import (
    CODE_APPROVAL_ID,
    CodeExecutionRequest,
    ExecutionOutcome,
    InvalidSessionName,
    PendingApproval,
    check_session_name,
)

if TYPE_CHECKING:
    from codemode.client.backend import Backend
    from codemode.worker.connection import Target
    from codemode.worker.tool_sources import Tools

#: The defaults the help text shows (the models hold them; the flags only override).
_LIMITS = ExecutionLimits()
_APPROVAL_TIMEOUT = CodeExecutionRequest.model_fields["approval_timeout"].default


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


def parse_mounts(specs: tuple[str, ...]) -> dict[str, str]:
    """``--mount SRC:DST`` flags as ``{absolute host path: sandbox path}``."""
    mounts: dict[str, str] = {}
    for spec in specs:
        src, sep, dst = spec.partition(":")
        if not sep or not src or not dst:
            raise Fail(f"bad --mount {spec!r}: expected SRC:DST, e.g. --mount ./skills:/skills")
        path = Path(src).expanduser().resolve()
        if not path.exists():
            raise Fail(f"bad --mount {spec!r}: {path} does not exist")
        mounts[str(path)] = dst
    return mounts


def read_code(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.is_file():
        raise Fail(f"no such file: {file}")
    return path.read_text()


# -- following a run ------------------------------------------------------------------------------


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
                    "approve": [decide_command("approve", execution_id, p.call_id, signed=p.signed, flags=address_flag) for p in pending],
                    "deny": [decide_command("deny", execution_id, p.call_id, signed=p.signed, flags=address_flag) for p in pending],
                }
            )
        )
    for line in [*lines, *extra]:
        note(line)
    return EXIT_AWAITING_APPROVAL


async def report_cancelled(handle: WorkflowHandle[Any, Any], *, as_json: bool) -> int:
    """A cancelled execution has no outcome: say so, with the reason, and exit 1."""
    reason = await cancel_reason(handle)
    if as_json:
        click.echo(json.dumps({"execution_id": handle.id, "state": "cancelled", "reason": reason}))
    note(f"✗ execution {handle.id} was cancelled" + (f": {reason}" if reason else ""))
    return EXIT_CODE_ERROR


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
        if isinstance(err.cause, CancelledError):
            return await report_cancelled(handle, as_json=as_json)
        note(f"✗ execution {handle.id} failed: {err.cause or err}")
        return EXIT_CODE_ERROR
    if isinstance(got, ExecutionOutcome):
        return report_outcome(got, as_json=as_json)
    return report_parked(handle.id, got, as_json=as_json, address_flag=address_flag, extra=parked_extra)


# -- run ------------------------------------------------------------------------------------------------


@click.command()
@click.argument("file", metavar="FILE|-")
@tool_source_options
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
@click.option("--input", "inputs", multiple=True, metavar="NAME=JSON", help="A variable for the code (repeatable).")
@click.option("--id", "execution_id", help="Execution id [default: exec-<random>].")
@json_option
@click.option("--no-wait", is_flag=True, help="Print the execution id and exit at once.")
@click.option(
    "--timeout",
    type=Duration(),
    default=None,
    help=f"Compute time of the code (seconds, or e.g. 90s, 2m) [default: {_LIMITS.timeout_seconds:g}s].",
)
@click.option(
    "--memory",
    type=Size(),
    default=None,
    help=f"Memory of the sandbox (bytes, or e.g. 256M, 1G) [default: {_LIMITS.max_memory_bytes // 2**20}M].",
)
@click.option(
    "--max-calls",
    type=Count(),
    default=None,
    metavar="N",
    help=f"Tool calls the code may make [default: {_LIMITS.max_tool_calls}].",
)
@click.option(
    "--max-stdout",
    type=Size(),
    default=None,
    help=f"Output of the code kept (bytes, or e.g. 64K) [default: {_LIMITS.max_stdout_bytes // 2**20}M].",
)
@click.option(
    "--allow-tool",
    "allowed_tools",
    multiple=True,
    metavar="NAME",
    help="Only these tools may be called (repeatable) [default: every tool of the worker].",
)
@click.option(
    "--approval-timeout",
    type=Duration(),
    default=None,
    help=f"How long a call waits for a decision (e.g. 90s, 30m, 2h, 7d) [default: {_APPROVAL_TIMEOUT.days}d].",
)
@click.option(
    "--image",
    envvar="CODEMODE_DOCKER_IMAGE",
    show_envvar=True,
    help="The image of --runtime docker (any image with python3 >= 3.9), for a worker this command starts.",
)
@click.option(
    "--mount",
    "mounts",
    multiple=True,
    metavar="SRC:DST",
    help="Mount host directory SRC read-only at DST in the sandbox (repeatable; docker and python runtimes).",
)
@click.option(
    "--network",
    type=click.Choice(["none", "full", "ratchet"]),
    default="none",
    show_default=True,
    help="The sandbox's network; ratchet: on until a private tool's first result, then off for good (docker).",
)
@click.option(
    "--package",
    "packages",
    multiple=True,
    metavar="NAME",
    help="A package the code needs (repeatable; pyodide: pure-Python or Pyodide wheels, refused up front if none).",
)
@click.option(
    "--require-code-approval",
    is_flag=True,
    help=f"Park before the code runs, until the code itself is approved (call id {CODE_APPROVAL_ID!r}).",
)
@click.option(
    "--session",
    "session_name",
    metavar="NAME",
    help="Run the file as the next cell of this session: it sees the variables, functions and imports "
    "the session's earlier cells left (the first cell creates it). See `codemode session --help`.",
)
@click.option("--restart", is_flag=True, help="With --session: clear the session's namespace before this cell.")
@click.option(
    "--idle-timeout",
    type=Duration(),
    default=None,
    help="With --session, when this cell creates it: close the session after this long without a cell "
    "(e.g. 30m, 24h, 7d) [default: 24h].",
)
@connection_options
@task_queue_option
def run(
    file: str,
    tools_module: str | None,
    mcp_config: str | None,
    cli_config: str | None,
    runtime: str,
    inputs: tuple[str, ...],
    execution_id: str | None,
    as_json: bool,
    no_wait: bool,
    timeout: timedelta | None,
    memory: int | None,
    max_calls: int | None,
    max_stdout: int | None,
    allowed_tools: tuple[str, ...],
    approval_timeout: timedelta | None,
    image: str | None,
    mounts: tuple[str, ...],
    network: str,
    packages: tuple[str, ...],
    require_code_approval: bool,
    session_name: str | None,
    restart: bool,
    idle_timeout: timedelta | None,
    target: Target,
    task_queue: str,
) -> int:
    """Run a code file (or - for stdin) and show each tool call as it happens.

    Starts the embedded server and a worker in this process when no server answers."""
    limits = {
        "timeout_seconds": timeout.total_seconds() if timeout else None,
        "max_memory_bytes": memory,
        "max_tool_calls": max_calls,
        "max_stdout_bytes": max_stdout,
    }
    given = {"approval_timeout": approval_timeout, "tools": list(allowed_tools) or None}
    if session_name is None and (restart or idle_timeout is not None):
        raise Fail("--restart and --idle-timeout go with --session NAME")
    if session_name is not None:
        if execution_id is not None:
            raise Fail("--id and --session do not go together: a cell's id is session:NAME:N")
        try:
            check_session_name(session_name)
        except InvalidSessionName as err:
            raise Fail(str(err)) from None
    if image:  # the docker runtime of a worker started by this command reads it
        os.environ["CODEMODE_DOCKER_IMAGE"] = image
    try:
        request = CodeExecutionRequest(
            code=read_code(file),
            runtime=runtime,
            inputs=parse_inputs(inputs),
            limits=ExecutionLimits(**{k: v for k, v in limits.items() if v is not None}),
            require_code_approval=require_code_approval,
            mounts=parse_mounts(mounts),
            network=network,
            packages=list(packages),
            **{k: v for k, v in given.items() if v is not None},
        )
    except ValidationError as err:
        raise Fail(f"bad request: {err.errors()[0]['msg']}") from None
    tools = load_tool_sources(tools_module, mcp_config, cli_config, required=False)
    if tools.registry is not None and allowed_tools and tools.mcp_config is None:
        sources = " or ".join(s for s in (tools_module, cli_config and "the CLI tools") if s)
        _check_allowed(tools.registry, allowed_tools, sources)
    opts = RunOptions(
        request=request,
        tools=tools,
        execution_id=execution_id,
        as_json=as_json,
        no_wait=no_wait,
        target=target,
        task_queue=task_queue,
        interactive=file != "-" and not as_json and interactive_terminal(),
        session=session_name,
        restart=restart,
        idle_timeout=idle_timeout,
    )
    return asyncio.run(_run(opts))


def _check_allowed(registry: ToolRegistry, allowed: list[str] | tuple[str, ...], where: str) -> None:
    unknown = [name for name in allowed if not registry.resolve(name)]
    if unknown:
        names = ", ".join(s.code_name for s in registry)
        raise Fail(f"--allow-tool: {', '.join(unknown)} not in {where} (its tools: {names})")


@dataclass
class RunOptions:
    request: CodeExecutionRequest
    #: The tools loaded (the MCP servers of ``--mcp-config`` start only if this process runs the worker).
    tools: Tools
    execution_id: str | None
    as_json: bool
    no_wait: bool
    target: Target
    task_queue: str
    interactive: bool
    session: str | None = None
    restart: bool = False
    idle_timeout: timedelta | None = None



async def _start_cell(client: Client, opts: RunOptions) -> WorkflowHandle[Any, ExecutionOutcome]:
    """Send the code to its session; the cell's execution once its turn came."""
    from codemode.client.sessions import DEFAULT_IDLE_TIMEOUT, SessionError, submit_cell

    assert opts.session is not None
    try:
        cell = await submit_cell(
            client,
            opts.session,
            opts.request,
            restart=opts.restart,
            idle_timeout=opts.idle_timeout or DEFAULT_IDLE_TIMEOUT,
            task_queue=opts.task_queue,
        )
    except SessionError as err:
        raise Fail(str(err)) from None
    if not opts.as_json:
        note(f"Cell {cell.index} of session {cell.session} ({cell.execution_id}).")
        if cell.ticket.ahead:
            note(f"It waits for {cell.ticket.ahead} cell(s) before it (`codemode session show {cell.session}`).")
    if opts.no_wait:
        return client.get_workflow_handle(cell.execution_id, result_type=ExecutionOutcome)
    try:
        return await cell.started()
    except SessionError as err:
        raise Fail(str(err)) from None


async def _run(opts: RunOptions) -> int:
    try:  # before any server or worker starts: an oversized input can never run
        check_request_size(opts.request)
    except InputTooLarge as err:
        raise Fail(str(err)) from None
    async with contextlib.AsyncExitStack() as stack:
        backend = await _open_backend(opts, stack)
        client, flags, parked_extra = backend.client, backend.flags(), _parked_extra(opts, backend)
        if opts.session is not None:
            handle = await _start_cell(client, opts)
            if opts.no_wait:
                click.echo(handle.id)
                return EXIT_OK
            return await follow(
                handle, as_json=opts.as_json, interactive=opts.interactive, address_flag=flags, parked_extra=parked_extra
            )
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
            if backend.own_worker:
                note("note: no worker stays up after this command; the execution continues when one runs.")
            return EXIT_OK
        if not opts.as_json:
            note(f"Execution {handle.id} started.")
        return await follow(
            handle, as_json=opts.as_json, interactive=opts.interactive, address_flag=flags, parked_extra=parked_extra
        )


async def _open_backend(opts: RunOptions, stack: contextlib.AsyncExitStack) -> Backend:
    """The client, plus whatever this process must run itself (``client.backend.open_backend``):
    the embedded server when nothing answers at a local address, a worker when none polls the
    task queue and there are tools to serve."""
    from codemode.client.backend import NothingToServe, open_backend

    with usage_errors():
        try:
            backend = await stack.enter_async_context(
                open_backend(opts.target, task_queue=opts.task_queue, tools=opts.tools, note=note)
            )
        except NothingToServe:
            raise Fail(
                f"no Temporal server answers at {opts.target.address}; pass --tools MODULE "
                "(or --mcp-config, --cli-config) to start one here with a worker"
            ) from None
    if not backend.own_worker and not backend.workers_elsewhere:
        note(f"warning: no worker polls task queue {opts.task_queue!r}; start one with `codemode worker --tools MODULE`")
    if backend.own_worker and opts.tools.mcp_servers is not None and opts.request.tools:
        assert opts.tools.registry is not None
        _check_allowed(opts.tools.registry, opts.request.tools, "the tools module, the CLI tools or the MCP servers")
    return backend


def _parked_extra(opts: RunOptions, backend: Backend) -> list[str]:
    """What a parked run's message adds when the embedded server stops with this command."""
    if backend.server is None:
        return []
    sources = opts.tools.sources
    flags = " ".join(
        f
        for f in (
            sources.tools_module and f"--tools {sources.tools_module}",
            sources.mcp_config and f"--mcp-config {sources.mcp_config}",
            sources.cli_config and f"--cli-config {sources.cli_config}",
        )
        if f
    )
    return [
        "The embedded server stops with this command; the execution is saved in its database.",
        f"Run `codemode dev {flags}` first, so a server and a worker are up to act on the decision.",
    ]


# -- result ---------------------------------------------------------------------------------------------


@click.command()
@click.argument("execution_id", metavar="ID")
@json_option
@connection_options
def result(execution_id: str, as_json: bool, target: Target) -> int:
    """Wait for an execution's outcome (same output and exit codes as run)."""
    return asyncio.run(_result(execution_id, as_json, target))


async def _result(execution_id: str, as_json: bool, target: Target) -> int:
    client = await open_client(target, quick=True)
    address_flag = target.flags()
    handle, _ = await existing_handle(client, execution_id)
    interactive = not as_json and interactive_terminal()
    return await follow(handle, as_json=as_json, interactive=interactive, address_flag=address_flag, parked_extra=[])
