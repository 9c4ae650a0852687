"""``codemode mcp``: serve durable code mode to any MCP client, over stdio or streamable HTTP.

Registered as an entry point (``codemode.commands``), so the CLI in ``apps/cli`` finds it
without importing this application. Only click and the applications' shared command-line
helpers (``apps/command_line.py``) are imported here; the MCP SDK is imported when the command
runs, with an install hint when the extra is missing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import Coroutine
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import click

from codemode.apps.command_line import (
    EXIT_OK,
    Duration,
    Fail,
    connection_options,
    load_tool_sources,
    note,
    task_queue_option,
    tool_source_options,
    usage_errors,
)
from codemode.runtimes import RUNTIMES
from codemode.worker.connection import Target
from codemode.worker.tool_sources import ToolSources
from codemode.workflows.models import TASK_QUEUE

INSTALL_HINT = "codemode mcp needs the MCP SDK: pip install 'durable-codemode[mcp]'"
DEFAULT_PORT = 8765


@dataclass
class McpOptions:
    tools_module: str | None
    mcp_config: str | None
    cli_config: str | None
    runtime: str
    transport: str
    host: str
    port: int
    tokens: list[str]
    allow_origins: list[str]
    approval_wait: float
    max_wait: float
    name: str
    target: Target
    task_queue: str


@click.command(name="mcp")
@tool_source_options
@click.option(
    "--runtime",
    type=click.Choice(sorted(RUNTIMES)),
    default="monty",
    show_default=True,
    help="The sandbox execute uses when the call names none.",
)
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio", show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: the address to listen on.")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True, help="HTTP: the port.")
@click.option(
    "--token",
    "tokens",
    multiple=True,
    envvar="CODEMODE_MCP_TOKEN",
    show_envvar=True,
    metavar="[NAME:]TOKEN",
    help="HTTP: a bearer token clients must send (repeatable); NAME: names its holder in the audit. "
    "Required off loopback; on loopback one is made up and printed when none is given.",
)
@click.option(
    "--allow-origin",
    "allow_origins",
    multiple=True,
    metavar="URL",
    help="HTTP: a browser origin allowed besides the loopback ones (repeatable).",
)
@click.option(
    "--approval-wait",
    type=Duration(allow_zero=True),
    default="60s",
    show_default=True,
    help="How long a question to the person waits for an answer before execute says awaiting_approval.",
)
@click.option(
    "--max-wait",
    type=Duration(),
    default="5m",
    show_default=True,
    help="How long one execute or result call follows a run before it answers status running.",
)
@click.option("--name", default="codemode", show_default=True, help="The server's name (and its key in mcpServers).")
@click.option("--print-config", is_flag=True, help="Print the mcpServers JSON for a client's config, and exit.")
@connection_options
@task_queue_option
def mcp(
    tools_module: str | None,
    mcp_config: str | None,
    cli_config: str | None,
    runtime: str,
    transport: str,
    host: str,
    port: int,
    tokens: tuple[str, ...],
    allow_origins: tuple[str, ...],
    approval_wait: timedelta,
    max_wait: timedelta,
    name: str,
    print_config: bool,
    target: Target,
    task_queue: str,
) -> int:
    """Serve durable code mode to MCP clients: tools search, get_schema, execute and result.

    Over stdio (what desktop and IDE clients start) or streamable HTTP. Approvals reach the
    person through the client's elicitation. Starts the embedded Temporal server and a worker
    in this process when none is there, like `codemode run`."""
    with usage_errors():
        ToolSources(tools_module, mcp_config, cli_config).require()
    opts = McpOptions(
        tools_module=tools_module,
        mcp_config=mcp_config,
        cli_config=cli_config,
        runtime=runtime,
        transport=transport,
        host=host,
        port=port,
        tokens=list(tokens),
        allow_origins=list(allow_origins),
        approval_wait=approval_wait.total_seconds(),
        max_wait=max_wait.total_seconds(),
        name=name,
        target=target,
        task_queue=task_queue,
    )
    try:
        from codemode.apps.mcp import client_config, http
    except ImportError as err:
        raise Fail(f"{INSTALL_HINT} ({err})") from None
    if print_config:
        if opts.transport == "http" and not opts.tokens:
            raise Fail("--print-config for --transport http needs the server's token: --token or CODEMODE_MCP_TOKEN")
        click.echo(_config(opts, _tokens(opts, http), client_config, http))
        return EXIT_OK
    parsed = _tokens(opts, http)
    if opts.transport == "stdio" and opts.tokens:
        note("note: --token applies to --transport http; a stdio server is reached only by the client that starts it.")
    return asyncio.run(_serve(opts, parsed))


def _tokens(opts: McpOptions, http: Any) -> list[Any]:
    """The HTTP tokens; on loopback, a new one when none is given. Refuses to listen beyond
    this machine without one."""
    if opts.transport != "http":
        return []
    try:
        parsed = [http.BearerToken.parse(t) for t in opts.tokens]
    except ValueError as err:
        raise Fail(f"--token: {err}") from None
    if not parsed:
        if not http.is_loopback(opts.host):
            raise Fail(
                f"refusing to listen on {opts.host} without a token: anyone who reaches it could run code with "
                'your tools. Pass --token (or set CODEMODE_MCP_TOKEN), e.g. --token "$(openssl rand -hex 24)"'
            )
        parsed = [http.BearerToken(secrets.token_urlsafe(24))]
        note(f"No --token given: clients must send `Authorization: Bearer {parsed[0].secret}` (made up for this run).")
    return parsed


def _config(opts: McpOptions, tokens: list[Any], client_config: Any, http: Any) -> str:
    if opts.transport == "http":
        url = f"http://{http.url_host(opts.host)}:{opts.port}{http.MCP_PATH}"
        return client_config.snippet(opts.name, client_config.http_entry(url, tokens[0].secret))
    args = ["--tools", opts.tools_module] if opts.tools_module else []
    if opts.mcp_config:
        args += ["--mcp-config", os.path.abspath(opts.mcp_config)]
    if opts.cli_config:
        args += ["--cli-config", os.path.abspath(opts.cli_config)]
    if opts.runtime != "monty":
        args += ["--runtime", opts.runtime]
    if opts.name != "codemode":
        args += ["--name", opts.name]
    if opts.approval_wait != 60:
        args += ["--approval-wait", f"{opts.approval_wait:g}s"]
    if opts.max_wait != 300:
        args += ["--max-wait", f"{opts.max_wait:g}s"]
    # A client starts the server from a directory of its own: the tools module is found
    # through PYTHONPATH, the server and the queue through the same variables as here.
    env = {"PYTHONPATH": os.getcwd(), "TEMPORAL_ADDRESS": opts.target.address, **_temporal_settings(opts.target)}
    if opts.task_queue != TASK_QUEUE:
        env["CODEMODE_TASK_QUEUE"] = opts.task_queue
    if os.environ.get("CODEMODE_DATA_DIR"):
        env["CODEMODE_DATA_DIR"] = os.environ["CODEMODE_DATA_DIR"]
    return client_config.snippet(opts.name, client_config.stdio_entry(args, env))


def _temporal_settings(target: Target) -> dict[str, str]:
    """Temporal's configuration of this command (flags, else the environment's variables), as
    the variables the client's copy of it reads. Not the API key: the client's config file
    would hold it in plain text; set TEMPORAL_API_KEY there yourself, or use a profile."""
    given = target.given
    names = {
        "namespace": "TEMPORAL_NAMESPACE",
        "profile": "TEMPORAL_PROFILE",
        "config_file": "TEMPORAL_CONFIG_FILE",
        "tls_cert_path": "TEMPORAL_TLS_CLIENT_CERT_PATH",
        "tls_key_path": "TEMPORAL_TLS_CLIENT_KEY_PATH",
        "tls_ca_path": "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        "tls_server_name": "TEMPORAL_TLS_SERVER_NAME",
    }
    env = {}
    for param, var in names.items():
        value = getattr(given, param) or os.environ.get(var)
        if value:
            env[var] = os.path.abspath(value) if param.endswith(("_path", "_file")) else value
    tls = given.tls
    if tls is not None or os.environ.get("TEMPORAL_TLS"):
        env["TEMPORAL_TLS"] = ("true" if tls else "false") if tls is not None else os.environ["TEMPORAL_TLS"]
    return env


async def _serve(opts: McpOptions, tokens: list[Any]) -> int:
    try:
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        from codemode.apps.mcp import http
        from codemode.apps.mcp.backend import BackendSlot
        from codemode.apps.mcp.catalog import ToolCatalog
        from codemode.apps.mcp.execute import Executions
        from codemode.apps.mcp.server import build_server
    except ImportError as err:
        raise Fail(f"{INSTALL_HINT} ({err})") from None

    tools = load_tool_sources(opts.tools_module, opts.mcp_config, opts.cli_config)
    # The MCP servers of --mcp-config start first: their tools are part of what clients are shown.
    with usage_errors():
        registry = await tools.start_mcp()
    servers = tools.mcp_servers
    catalog = ToolCatalog.of(registry, runtime=opts.runtime)
    # The client is answered at once; Temporal (maybe the embedded server) comes up meanwhile.
    slot, stop = BackendSlot(), asyncio.Event()
    backend_task = asyncio.ensure_future(slot.run(opts.target, tools, task_queue=opts.task_queue, stop=stop))
    executions = Executions(slot, runtime=opts.runtime, approval_wait=opts.approval_wait, max_wait=opts.max_wait)
    sources = " and ".join(
        s
        for s in (
            opts.tools_module,
            servers and "the MCP servers of --mcp-config",
            opts.cli_config and "the CLI tools of --cli-config",
        )
        if s
    )
    what = f"{len(catalog)} tools from {sources}, runtime {opts.runtime}"
    try:
        if opts.transport == "stdio":
            server = build_server(catalog, executions, name=opts.name)
            note(f"codemode MCP server ready on stdio ({what}).")
            await _until_stopped(server.run_stdio_async())
            return EXIT_OK
        base = f"http://{http.url_host(opts.host)}:{opts.port}"
        server = build_server(
            catalog,
            executions,
            name=opts.name,
            token_verifier=http.StaticTokens(tokens),
            # The SDK's bearer middleware; no OAuth server here, so the issuer is this server.
            auth=AuthSettings(issuer_url=base, resource_server_url=None),
        )
        app = server.streamable_http_app(
            streamable_http_path=http.MCP_PATH,
            host=opts.host,
            # Origin and Host are checked by the guard around the app, before the token.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        guarded = http.OriginGuard(app, host=opts.host, allow_origins=opts.allow_origins)
        ready = asyncio.Event()

        async def announce() -> None:
            await ready.wait()
            note(f"codemode MCP server ready on {base}{http.MCP_PATH} ({what}).")

        announcer = asyncio.ensure_future(announce())
        try:
            await _until_stopped(http.serve(guarded, opts.host, opts.port, ready=ready))
        except OSError as err:
            raise Fail(f"cannot listen on {opts.host}:{opts.port}: {err.strerror or err}") from None
        finally:
            announcer.cancel()
        return EXIT_OK
    finally:
        stop.set()
        await backend_task


async def _until_stopped(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` until it ends or SIGINT/SIGTERM arrives; either way the caller cleans up."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        stopper.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if task.done() and not task.cancelled() and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]
