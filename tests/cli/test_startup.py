"""What a command imports before it answers. ``codemode --help``, and the ``--help`` of the
commands a person types while a run waits for them, load click and the CLI's table of
commands, not Temporal, pydantic or a layer below; ``codemode status`` loads the client side,
not a worker's. Asserted on the modules a real ``codemode`` process has loaded when it exits,
never on a time (``bench/cli_startup.py`` measures that)."""

from __future__ import annotations

import asyncio
import importlib
import json
import pkgutil
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path

import click
import pytest

from codemode.apps import cli as cli_package
from codemode.apps.cli import COMMANDS, COMMANDS_GROUP, cli
from tests.cli.runner import REPO, Result, approve_command, base_env, codemode

#: Runs ``codemode`` as its entry point does, and writes the modules loaded when it leaves
#: (``main`` ends with ``os._exit``, which skips atexit handlers).
PROBE = """
import json, os, sys
_exit = os._exit
def _report(code):
    with open(os.environ["PROBE_OUT"], "w") as out:
        json.dump(sorted(sys.modules), out)
    _exit(code)
os._exit = _report
from codemode.apps.cli import main
main(sys.argv[1:])
"""

#: Not for reading help: the SDK, the models, the sandboxes, the layers under the CLI.
NOT_FOR_HELP = (
    "temporalio",
    "pydantic",
    "pydantic_core",
    "pydantic_monty",
    "google.protobuf",
    "aiohttp",
    "cryptography",
    "opentelemetry",
    "asyncio",
    "codemode.runtimes",
    "codemode.activities",
    "codemode.workflows",
    "codemode.integrations",
    "codemode.worker.plugin",
    "codemode.client.sessions",
)

#: Not for asking an execution its status: a worker, sandboxes, servers of our own.
NOT_FOR_STATUS = (
    "temporalio.worker",
    "temporalio.testing",
    "temporalio.contrib.opentelemetry",  # no tracer provider is set: its spans would go nowhere
    "pydantic_monty",
    "aiohttp",
    "codemode.runtimes.monty",
    "codemode.runtimes.python",
    "codemode.worker.plugin",
    "codemode.worker.worker",
    "codemode.worker.dev_server",
    "codemode.worker.codec_server",
    "codemode.client.histories.audit",  # (the history is read only when no worker answers)
    "codemode.integrations",
)


async def loaded_by(*args: str, env: dict[str, str], tmp_path: Path) -> tuple[Result, set[str]]:
    out = tmp_path / f"modules-{len(list(tmp_path.iterdir()))}.json"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        PROBE,
        *args,
        cwd=REPO,
        env={**env, "PROBE_OUT": str(out)},
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    stdout, stderr = await asyncio.wait_for(proc.communicate(), 90)
    result = Result(proc.returncode or 0, stdout.decode(), stderr.decode())
    assert out.exists(), result
    return result, set(json.loads(out.read_text()))


def heavy(modules: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes))


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["-V"],
        ["approve", "--help"],
        ["deny", "--help"],
        ["cancel", "--help"],
        ["status", "--help"],
        ["history", "--help"],
        ["session", "--help"],
        ["session", "show", "--help"],
    ],
    ids=" ".join,
)
async def test_help_loads_no_temporal(args: list[str], tmp_path: Path) -> None:
    result, modules = await loaded_by(*args, env=base_env(), tmp_path=tmp_path)
    assert result.rc == 0, result
    assert heavy(modules, NOT_FOR_HELP) == []


async def test_help_lists_every_command_with_its_own_short_help(tmp_path: Path) -> None:
    """The table's text is each command's own: ``--help`` reads the same as it would with
    every command imported."""
    result, modules = await loaded_by("--help", env=base_env(COLUMNS="80"), tmp_path=tmp_path)
    assert result.rc == 0, result
    for name, entry in COMMANDS.items():
        assert re.search(rf"^  {re.escape(name)} ", result.out, re.MULTILINE), (name, result.out)
        if entry.module is not None:
            assert f"codemode.apps.cli.{entry.module}" not in modules  # listed from the table
    with click.Context(cli) as ctx:
        for name, entry in COMMANDS.items():
            command = cli.get_command(ctx, name)
            assert command is not None, name
            assert command.get_short_help_str(sys.maxsize) == entry.short_help, f"update COMMANDS[{name!r}]"
    # Every command loaded now: click shortens each one's own help.
    with click.Context(cli, info_name="codemode", terminal_width=78, **cli.context_settings) as ctx:
        assert cli.get_help(ctx) + "\n" == result.out


def test_every_command_is_in_the_table() -> None:
    """A command added to a module of worker/cli but not to COMMANDS would be unreachable."""
    tabled = {(e.module, e.attribute) for e in COMMANDS.values()}
    grouped = {
        id(sub)
        for e in COMMANDS.values()
        if e.module is not None
        for group in [getattr(importlib.import_module(f"codemode.apps.cli.{e.module}"), e.attribute)]
        if isinstance(group, click.Group)
        for sub in group.commands.values()
    }
    for info in pkgutil.iter_modules(cli_package.__path__):
        if info.name == "__main__":  # (it runs the CLI)
            continue
        module = importlib.import_module(f"codemode.apps.cli.{info.name}")
        for attribute, value in vars(module).items():
            if isinstance(value, click.Command) and value.__module__ == module.__name__ and id(value) not in grouped:
                assert (info.name, attribute) in tabled, f"{info.name}.{attribute} is not in COMMANDS"
    registered = {ep.name for ep in entry_points(group=COMMANDS_GROUP)}
    assert {name for name, e in COMMANDS.items() if e.module is None} <= registered


def test_the_help_constants_are_the_real_ones() -> None:
    """``common`` names them without importing their modules (so --help need not)."""
    from codemode.apps import command_line
    from codemode.apps.cli import common
    from codemode.worker.codec_server import DEFAULT_PORT
    from codemode.workflows.models import TASK_QUEUE

    assert (command_line.TASK_QUEUE, common.DEFAULT_CODEC_PORT) == (TASK_QUEUE, DEFAULT_PORT)


@pytest.mark.usefixtures("cli_worker")
async def test_status_loads_the_client_side_only(cli_env: dict[str, str], tmp_path: Path) -> None:
    parked = await codemode("run", "examples/email.py", "--tools", "examples.tools", env=cli_env)
    assert parked.rc == 3, parked
    execution_id, call_id = approve_command(parked.err)
    result, modules = await loaded_by("status", execution_id, "--json", env=cli_env, tmp_path=tmp_path)
    assert result.rc == 0, result
    status = json.loads(result.out)
    assert status["state"] == "awaiting_approval" and [p["call_id"] for p in status["pending_approvals"]] == [call_id]
    assert heavy(modules, NOT_FOR_STATUS) == []
    result, modules = await loaded_by("approve", execution_id, "--all", env=cli_env, tmp_path=tmp_path)
    assert result.rc == 0 and f"approved call {call_id}" in result.out, result
    assert heavy(modules, NOT_FOR_STATUS) == []


async def test_a_quick_command_traces_when_spans_have_somewhere_to_go() -> None:
    """``open_client(quick=True)`` leaves the tracing interceptor out only while no tracer
    provider is set: one set in code (or by ``opentelemetry-instrument``), or named by
    ``OTEL_PYTHON_TRACER_PROVIDER``, gets its spans."""
    code = (
        "from codemode.worker import telemetry\n"
        "print(telemetry.tracer_provider_configured())\n"
        "from opentelemetry import trace\n"
        "print(telemetry.tracer_provider_configured())\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
        "print(telemetry.tracer_provider_configured())\n"
    )
    for env, expected in (
        (base_env(), "False False True"),
        (base_env(OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider"), "True True True"),
    ):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            cwd=REPO,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err.decode()
        assert " ".join(out.decode().split()) == expected
