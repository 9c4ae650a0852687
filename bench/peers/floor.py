"""The floor's activity: the workflows of ``bench/floor_workflow.py`` call ``bench_noop``; in
the peers benchmark it is this one, which waits the tools' delay and is counted like every
system's tools (``tool_hooks``)."""

from temporalio import activity

from bench.peers import tool_hooks


@activity.defn(name="bench_noop")
async def noop(i: int) -> int:
    await tool_hooks.called()
    return i
