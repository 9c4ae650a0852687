"""``codemode worker``, ``codemode server`` and ``codemode dev``: the long-running processes,
each until Ctrl-C or SIGTERM. Workers can expose Prometheus metrics (temporalio's runtime
telemetry: workflow, activity, task-queue and request metrics) with ``--metrics-port``."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
from typing import TYPE_CHECKING, Any

import click
from temporalio.client import Client
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig

from codemode.apps.cli.common import codec_port_option, open_client, port_option, start_server, ui_port_option
from codemode.apps.command_line import (
    EXIT_OK,
    Fail,
    connection_options,
    load_tool_sources,
    note,
    task_queue_option,
    tool_source_options,
    usage_errors,
)
from codemode.worker.connection import connect, local_target
from codemode.worker.dev_server import EmbeddedServer, default_db_path

if TYPE_CHECKING:
    from codemode.worker.connection import Target
    from codemode.worker.tool_sources import Tools


class MetricsAddress(click.ParamType):
    """Where to serve /metrics: ``PORT`` (every interface, for a scraper in another container)
    or ``IP:PORT`` (e.g. ``127.0.0.1:9464``)."""

    name = "[IP:]PORT"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        host, _, port = str(value).strip().rpartition(":")
        host = {"": "0.0.0.0", "localhost": "127.0.0.1"}.get(host, host)
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            self.fail(f"{value!r}: expected PORT or IP:PORT, e.g. 9464 or 127.0.0.1:9464", param, ctx)
        if not port.isdigit() or not 0 < int(port) < 65536:
            self.fail(f"{value!r}: the port must be a number from 1 to 65535", param, ctx)
        return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


approvers_option = click.option(
    "--approvers",
    "approvers",
    envvar="CODEMODE_APPROVERS",
    show_envvar=True,
    default=None,
    metavar="FILE",
    help="The approvers file (TOML): who may decide which tool calls, with signed decisions only, and policy "
    "rules that decide before a person. Without it any decision counts, as whatever name it gives.",
)


def use_approvers(path: str | None) -> None:
    """Check the approvers file now (a broken one stops the command with where it is wrong),
    and hand it to the worker through ``CODEMODE_APPROVERS``."""
    os.environ.pop("CODEMODE_APPROVERS", None)
    if not path:
        return
    from codemode.approvals import approvers_file as config

    try:
        config.load(path)
    except config.ApproversFileError as err:
        raise Fail(str(err)) from None
    os.environ["CODEMODE_APPROVERS"] = os.path.abspath(path)


def approvers_banner() -> str:
    """Said once when a worker starts: whose decisions count."""
    from codemode.approvals import approvers_file as config

    path = config.configured_path()
    if not path:
        return (
            "No approvers file (--approvers FILE or CODEMODE_APPROVERS): anyone who can signal this namespace "
            "may approve any call, as any name."
        )
    file = config.load(path)
    return (
        f"Approvers: {path} ({len(file.people)} people, {len(file.tools)} tool rules, {len(file.policy)} policy "
        "rules): only decisions signed by the people a call's rule allows count."
    )


db_option = click.option(
    "--db", type=click.Path(dir_okay=False), default=None, help=f"SQLite file [default: {default_db_path()}]."
)
metrics_option = click.option(
    "--metrics-port",
    "metrics",
    type=MetricsAddress(),
    default=None,
    envvar="CODEMODE_METRICS_PORT",
    show_envvar=True,
    help="Serve Prometheus metrics at http://[IP:]PORT/metrics (a bare PORT listens on every interface).",
)


def metrics_runtime(bind: str | None) -> Runtime | None:
    """A temporalio Runtime that exports the SDK's metrics to Prometheus at ``bind`` (None: the default runtime)."""
    if bind is None:
        return None
    try:
        return Runtime(telemetry=TelemetryConfig(metrics=PrometheusConfig(bind_address=bind)))
    except ValueError as err:  # a busy port, mostly
        raise Fail(f"cannot serve metrics at {bind}: {err}") from None


def client_options(runtime: Runtime | None) -> dict[str, Any]:
    return {"runtime": runtime} if runtime is not None else {}


def metrics_banner(bind: str | None) -> list[str]:
    if bind is None:
        return []
    host, _, port = bind.rpartition(":")
    if host == "0.0.0.0":
        return [f"Metrics:         http://localhost:{port}/metrics (listening on every interface)"]
    return [f"Metrics:         http://{bind}/metrics"]


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


def server_banner(server: EmbeddedServer) -> list[str]:
    lines = [
        f"Temporal server: {server.address}",
        f"Web UI:          {server.ui_url}",
        f"Database:        {server.db}",
    ]
    if server.codec_endpoint:
        lines.append(
            f"Codec server:    {server.codec_endpoint} (payloads are encrypted; the web UI decrypts through it)"
        )
    return lines


async def _serve_worker(
    client: Client,
    tools: Tools,
    task_queue: str,
    address: str,
    versioning: dict[str, str | None] | None = None,
    inbox_port: int | None = None,
) -> None:
    from codemode.worker.worker import CodeModeWorker

    with usage_errors():
        registry = await tools.start_mcp()
    try:
        w = CodeModeWorker(client, registry, task_queue=task_queue, mcp=tools.mcp_servers, **(versioning or {}))
    except BaseException:
        await tools.aclose()
        raise
    async with w.running():  # closes the MCP servers when the worker stops
        if await w.ensure_sweep_schedule():
            note("Scheduled the hourly retention sweep of the object store (codemode-storage-sweep).")
        if await w.ensure_sandbox_sweep_schedule():
            note("Scheduled the hourly sweep of sandboxes no open execution names (codemode-sandbox-sweep).")
        names = [s.code_name for s in registry]
        note(approvers_banner())
        version = w.plugin.deployment
        if version is not None:
            note(f"Worker Deployment Versioning: version {version.to_canonical_string()} (workflows auto-upgrade).")
        inbox = await _start_inbox(client, inbox_port) if inbox_port is not None else None
        note(f"Worker ready on task queue {task_queue!r} at {address}; tools: {', '.join(names)}")
        try:
            await until_stopped()
        finally:
            if inbox is not None:
                await inbox.stop()
        note("Stopping the worker...")


def use_inbox_key(path: str | None) -> None:
    """Check the inbox's signing key now (a missing or bad file stops ``dev``), for the inbox."""
    from codemode.approvals.keys import ApproverKeyError
    from codemode.apps.inbox import SIGNING_KEY_ENV, inbox_signer

    if not path:
        return
    try:
        inbox_signer(path)
    except ApproverKeyError as err:
        raise Fail(f"--inbox-signing-key: {err}") from None
    os.environ[SIGNING_KEY_ENV] = path


def _inbox_port(asked: int | None) -> int | None:
    """The inbox's port: the one asked for (0: none), else 8244 when free, else any free one."""
    from codemode.worker.dev_server import free_port, port_is_free

    if asked is not None:
        return asked or None
    return 8244 if port_is_free(8244) else free_port()


async def _start_inbox(client: Client, port: int) -> Any:
    """``codemode dev``'s approvals inbox, on 127.0.0.1, signed in through the printed link."""
    from codemode.approvals.notify.config import load_notify_config
    from codemode.apps.inbox import SIGNING_KEY_ENV, InboxAuth, inbox_signer, start_inbox

    config = load_notify_config()
    secret = config.links.secret if config and config.links else None
    signer = inbox_signer(os.environ.get(SIGNING_KEY_ENV))  # checked by use_inbox_key
    try:
        running = await start_inbox(client, InboxAuth(), port=port, links_secret=secret, signer=signer)
    except OSError as err:
        why = err.strerror or err
        raise Fail(f"cannot serve the inbox on port {port}: {why} (choose another with --inbox-port)") from None
    note(f"Approvals inbox: {running.login_url or running.url}")
    return running


def notify_config_option(fn):  # type: ignore[no-untyped-def]
    return click.option(
        "--notify-config",
        "notify_config",
        envvar="CODEMODE_NOTIFY_CONFIG",
        show_envvar=True,
        metavar="FILE",
        help="Who is told when a call waits for approval: webhooks, email, reminders, the inbox's URL (JSON or TOML).",
    )(fn)


def use_notify_config(path: str | None) -> None:
    """Check the notify config now (a bad one fails the command, naming the key), and let the
    worker's plugin read it (``CODEMODE_NOTIFY_CONFIG``)."""
    if not path:
        return
    from codemode.approvals.notify.config import ENV_VAR, NotifyConfigError, load_notify_config

    try:
        load_notify_config(path)
    except NotifyConfigError as err:
        raise Fail(str(err)) from None
    os.environ[ENV_VAR] = path


@click.command()
@tool_source_options
@notify_config_option
@connection_options
@task_queue_option
@metrics_option
@approvers_option
@click.option(
    "--image",
    envvar="CODEMODE_DOCKER_IMAGE",
    show_envvar=True,
    help="The image the docker runtime runs code in (any image with python3 >= 3.9).",
)
@click.option(
    "--deployment-name",
    envvar="CODEMODE_DEPLOYMENT_NAME",
    show_envvar=True,
    help="Worker Deployment Versioning: the deployment this worker belongs to (with --build-id).",
)
@click.option(
    "--build-id",
    envvar="CODEMODE_BUILD_ID",
    show_envvar=True,
    help="This build's id (with --deployment-name: the version NAME.ID; make it current with "
    "`temporal worker deployment set-current-version`).",
)
def worker(
    tools_module: str | None,
    mcp_config: str | None,
    cli_config: str | None,
    notify_config: str | None,
    target: Target,
    task_queue: str,
    metrics: str | None,
    approvers: str | None,
    image: str | None,
    deployment_name: str | None,
    build_id: str | None,
) -> int:
    """Run a worker for the workflow, the sandbox steps and the tools, until Ctrl-C."""
    use_approvers(approvers)
    if image:
        os.environ["CODEMODE_DOCKER_IMAGE"] = image
    if deployment_name and not build_id:
        raise Fail("--deployment-name needs --build-id (the version is NAME.BUILD_ID)")
    if deployment_name and "." in deployment_name:
        raise Fail(f"--deployment-name {deployment_name!r}: a deployment name has no '.'")
    use_notify_config(notify_config)
    tools = load_tool_sources(tools_module, mcp_config, cli_config)
    versioning = {"deployment_name": deployment_name, "build_id": build_id}
    return asyncio.run(_worker(tools, target, task_queue, metrics, versioning))


async def _worker(
    tools: Tools, target: Target, task_queue: str, metrics: str | None, versioning: dict[str, str | None]
) -> int:
    runtime = metrics_runtime(metrics)
    client = await open_client(target, **client_options(runtime))
    for line in metrics_banner(metrics):
        note(line)
    await _serve_worker(client, tools, task_queue, target.address, versioning)
    return EXIT_OK


@click.command()
@port_option
@ui_port_option
@db_option
@codec_port_option
def server(port: int, ui_port: int | None, db: str | None, codec_port: int) -> int:
    """Run the embedded Temporal dev server (SQLite, web UI) until Ctrl-C; with
    CODEMODE_ENCRYPTION_KEYS set, also a codec server the web UI decrypts through."""
    return asyncio.run(_server(port, ui_port, db, codec_port))


async def _server(port: int, ui_port: int | None, db: str | None, codec_port: int) -> int:
    srv = await start_server(port, ui_port, db, codec_port)
    try:
        for line in server_banner(srv):
            note(line)
        note("Ready. Ctrl-C to stop.")
        await until_stopped()
    finally:
        await srv.stop()
    return EXIT_OK


@click.command()
@tool_source_options
@notify_config_option
@click.option(
    "--inbox-port",
    default=None,
    type=int,
    help="Port of the approvals inbox on 127.0.0.1 [default: 8244, or a free one when it is taken; 0: no inbox].",
)
@click.option(
    "--inbox-signing-key",
    "inbox_signing_key",
    envvar="CODEMODE_INBOX_SIGNING_KEY",
    show_envvar=True,
    default=None,
    metavar="FILE",
    help="The inbox's private key: it signs decisions on behalf of the signed-in person (see --approvers; "
    "the inbox's name there is CODEMODE_INBOX_SIGNER, default inbox).",
)
@port_option
@ui_port_option
@db_option
@task_queue_option
@metrics_option
@codec_port_option
@approvers_option
def dev(
    tools_module: str | None,
    mcp_config: str | None,
    cli_config: str | None,
    notify_config: str | None,
    inbox_port: int | None,
    inbox_signing_key: str | None,
    port: int,
    ui_port: int | None,
    db: str | None,
    task_queue: str,
    metrics: str | None,
    codec_port: int,
    approvers: str | None,
) -> int:
    """The embedded server and a worker in one process, until Ctrl-C (with
    CODEMODE_ENCRYPTION_KEYS set, also the codec server for the web UI)."""
    use_approvers(approvers)
    use_inbox_key(inbox_signing_key)
    use_notify_config(notify_config)
    tools = load_tool_sources(tools_module, mcp_config, cli_config)
    inbox = _inbox_port(inbox_port)
    return asyncio.run(_dev(tools, port, ui_port, db, task_queue, metrics, codec_port, inbox))


async def _dev(
    tools: Tools,
    port: int,
    ui_port: int | None,
    db: str | None,
    task_queue: str,
    metrics: str | None,
    codec_port: int,
    inbox_port: int | None = None,
) -> int:
    runtime = metrics_runtime(metrics)  # first: a busy metrics port fails before the server starts
    srv = await start_server(port, ui_port, db, codec_port)
    try:
        for line in [*server_banner(srv), *metrics_banner(metrics)]:
            note(line)
        client = await connect(target=local_target(srv.address), **client_options(runtime))
        await _serve_worker(client, tools, task_queue, srv.address, inbox_port=inbox_port)
    finally:
        await srv.stop()
    return EXIT_OK
