"""``codemode tools``: the tools, their policies, and the prompt (with stubs) an LLM is shown."""

from __future__ import annotations

import asyncio

import click

from codemode.activities.tools import ToolRegistry, ToolSpec
from codemode.runtimes import RUNTIMES
from codemode.worker.cli.common import (
    EXIT_OK,
    Fail,
    load_mcp_config_file,
    load_tools,
    mcp_config_option,
    open_mcp,
    require_tools,
    tools_option,
)


@click.command()
@tools_option
@mcp_config_option
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
def tools(tools_module: str | None, mcp_config: str | None, runtime: str) -> int:
    """The tools, their policies, and the prompt (with stubs) as an LLM would see it.

    With --mcp-config, the MCP servers are started to list their tools (and closed again):
    each is shown by the name the code calls it (its namespace, an alias for a name that is
    not a Python name), its canonical id and the approval and retry policy its annotations
    and the configuration give it."""
    from codemode.runtimes import get_runtime

    registry = load_tools(tools_module) if require_tools(tools_module, mcp_config) else None
    config = load_mcp_config_file(mcp_config)
    try:
        rt = get_runtime(runtime)
    except Exception as err:
        raise Fail(f"runtime {runtime!r} is not available here: {type(err).__name__}: {err}") from None
    if config is not None:
        registry = asyncio.run(_with_mcp(registry, config))
    assert registry is not None
    sources = [s for s in (tools_module, config and f"MCP servers {', '.join(config.servers)}") if s]
    click.echo(f"# {len(registry)} tools from {' and '.join(sources)} (runtime: {runtime})")
    width = max((len(s.code_name) for s in registry), default=0)
    for spec in registry:
        click.echo(f"#   {spec.code_name:<{max(width, 24)}} {_policy(spec)}")
    click.echo()
    click.echo(rt.prompt(registry.signatures()))
    return EXIT_OK


async def _with_mcp(registry: ToolRegistry | None, config: object) -> ToolRegistry:
    registry, servers = await open_mcp(registry, config)  # type: ignore[arg-type]
    if servers is not None:
        await servers.aclose()
    return registry


def _policy(spec: ToolSpec) -> str:
    opts = spec.options
    notes = getattr(spec, "policy_notes", None)
    limits = f"max_attempts={opts.max_attempts}, timeout={opts.timeout.total_seconds():g}s"
    if notes is not None:  # an MCP server's tool: its canonical id, then why its policy is what it is
        return f"{spec.name}  {'; '.join(notes)}; timeout={opts.timeout.total_seconds():g}s"
    policy = [limits]
    if opts.requires_approval:
        policy.insert(0, "requires approval")
    if opts.private_data:
        policy.append("private data")
    return ", ".join(policy)
