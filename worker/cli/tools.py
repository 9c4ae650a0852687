"""``codemode tools``: the tools, their policies, and the prompt (with stubs) an LLM is shown."""

from __future__ import annotations

import click

from runtimes import RUNTIMES
from worker.cli.common import EXIT_OK, Fail, load_tools, require_tools, tools_option


@click.command()
@tools_option
@click.option("--runtime", type=click.Choice(sorted(RUNTIMES)), default="monty", show_default=True)
def tools(tools_module: str | None, runtime: str) -> int:
    """The tools, their policies, and the prompt (with stubs) as an LLM would see it."""
    from runtimes import get_runtime

    registry = load_tools(require_tools(tools_module))
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
