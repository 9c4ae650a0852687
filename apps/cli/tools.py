"""``codemode tools``: the tools, their policies, and the prompt (with stubs) an LLM is shown."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import click

from codemode.activities.tools import ToolRegistry, ToolSpec
from codemode.apps.command_line import (
    EXIT_OK,
    Fail,
    load_tool_sources,
    tool_source_options,
    usage_errors,
)
from codemode.runtimes import RUNTIMES
from codemode.runtimes.signatures import render_stubs

if TYPE_CHECKING:
    from codemode.worker.tool_sources import Tools


@click.command()
@tool_source_options
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
def tools(tools_module: str | None, mcp_config: str | None, cli_config: str | None, runtime: str) -> int:
    """The tools, their policies, and the prompt (with stubs) as an LLM would see it.

    With --mcp-config, the MCP servers are started to list their tools (and closed again):
    each is shown by the name the code calls it (its namespace, an alias for a name that is
    not a Python name), its canonical id and the approval and retry policy its annotations
    and the configuration give it. With --cli-config, each allowed command likewise
    (git.log, cli:git/log); the prompt lists them briefly, and their full stubs (each
    subcommand's help read, what get_schema shows) follow it."""
    from codemode.runtimes import get_runtime

    loaded = load_tool_sources(tools_module, mcp_config, cli_config)
    config, cli = loaded.mcp_config, loaded.cli_config
    try:
        rt = get_runtime(runtime)
    except Exception as err:
        raise Fail(f"runtime {runtime!r} is not available here: {type(err).__name__}: {err}") from None
    registry = asyncio.run(_with_mcp(loaded)) if config is not None else loaded.registry
    assert registry is not None
    sources = [
        s
        for s in (
            tools_module,
            config and f"MCP servers {', '.join(config.servers)}",
            cli and f"CLI tools {', '.join(cli.tools)}",
        )
        if s
    ]
    click.echo(f"# {len(registry)} tools from {' and '.join(sources)} (runtime: {runtime})")
    width = max((len(s.code_name) for s in registry), default=0)
    for spec in registry:
        click.echo(f"#   {spec.code_name:<{max(width, 24)}} {_policy(spec)}")
    click.echo()
    click.echo(rt.prompt(registry.signatures(listed=True)))
    full = [s.signature for s in registry if s.listed_signature is not s.signature]
    if full:
        click.echo("# The full stubs of the commands (what get_schema shows, and the code is type-checked against):")
        click.echo("```python\n" + render_stubs(full).strip() + "\n```")
    return EXIT_OK


async def _with_mcp(tools: Tools) -> ToolRegistry:
    """The registry with the MCP servers' tools (started to list them, and closed again)."""
    try:
        with usage_errors():
            return await tools.start_mcp()
    finally:
        await tools.aclose()


def _policy(spec: ToolSpec) -> str:
    opts = spec.options
    notes = getattr(spec, "policy_notes", None)
    limits = f"max_attempts={opts.max_attempts}, timeout={opts.timeout.total_seconds():g}s"
    if notes is not None:  # an MCP tool or a CLI command: its canonical id, then why its policy is what it is
        settings = getattr(spec, "settings", None)  # a command's own timeout (the activity's has a margin)
        seconds = settings.timeout if settings is not None else opts.timeout.total_seconds()
        return f"{spec.name}  {'; '.join(notes)}; timeout={seconds:g}s"
    policy = [limits]
    if opts.requires_approval is True:
        policy.insert(0, "requires approval")
    elif callable(opts.requires_approval):
        policy.insert(0, "requires approval when its predicate says so")
    if opts.private_data:
        policy.append("private data")
    return ", ".join(policy)
