"""A CLI command called from code, durably, against its floor measured in the same run: a bare
Temporal activity plus a bare subprocess run of the same command (what any durable CLI call
must pay at least: one activity, one process). Target <= 1.10x.

Per pair (the order alternating; the dev server's latency drifts, so only paired samples
compare): a code execution making N sequential ``git.log(max_count=1, oneline=True)`` calls
on a small repository (each one the activity ``cli:git/log``: argv built and checked, a
clean environment, the output read under its cap), then N sequential no-op activities of a
bare workflow and N sequential ``asyncio.create_subprocess_exec("git", "log",
"--max-count=1", "--oneline")`` runs. The ratio is ours per call over (bare activity per
call + bare subprocess per call); the figure is the median of the pairs' ratios.

Also shown: a durable call of a Python tool doing nothing (``bench/bench_tools.py``), so the
CLI part of a call reads as the difference.

    python bench/cli_tools.py [--calls 40] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.worker import Worker  # noqa: E402

from bench.floor_workflow import BareWorkflow, noop  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.cli_tools import CliTools  # noqa: E402
from codemode.worker.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def cli_code(n: int) -> str:
    return f"out = []\nfor i in range({n}):\n    out.append(git.log(max_count=1, oneline=True)['returncode'])\nlen(out)"


def py_code(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


def make_repo(path: Path) -> None:
    run = lambda *a: subprocess.run(["git", *a], cwd=path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    run("config", "user.name", "Bench")
    run("config", "user.email", "bench@example.com")
    for i in range(20):
        (path / "f.txt").write_text(f"{i}\n")
        run("add", "f.txt")
        run("commit", "-q", "-m", f"commit {i}")


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    n = args.calls
    repo = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    make_repo(repo)
    env = await start_local_environment()
    client = env.client
    tq = f"bench-cli-{uuid.uuid4().hex[:6]}"
    cli = CliTools({"cliTools": {"git": {"allow": ["log"], "cwd": str(repo)}}}).start()
    registry = ToolRegistry.from_module("bench.bench_tools").include(cli.tool_specs())
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bare = Worker(client, task_queue=tq + "-bare", workflows=[BareWorkflow], activities=[noop])
    git_path = cli.tool_specs()[0].settings.binary

    async def codemode(code: str) -> None:
        h = await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
        out = await h.result()
        assert out.success, out.error

    async def floor_activities() -> None:
        await client.execute_workflow(BareWorkflow.run, args=[n], id=uuid.uuid4().hex, task_queue=tq + "-bare")

    async def bare_processes() -> None:
        for _ in range(n):
            proc = await asyncio.create_subprocess_exec(
                git_path, "log", "--max-count=1", "--oneline", cwd=repo,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
            await proc.communicate()
            assert proc.returncode == 0

    async def timed(work: Callable[[], Awaitable[object]]) -> float:
        t0 = time.perf_counter()
        await work()
        return (time.perf_counter() - t0) / n

    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(cli_code(2))  # warm up: pools, the type-check cache, the help text
            await codemode(py_code(2))
            await floor_activities()
            await bare_processes()
            ratios, ours, acts, procs, pys = [], [], [], [], []
            for r in range(args.repeat):
                if r % 2:
                    a, d = await timed(floor_activities), await timed(bare_processes)
                    o = await timed(lambda: codemode(cli_code(n)))
                else:
                    o = await timed(lambda: codemode(cli_code(n)))
                    a, d = await timed(floor_activities), await timed(bare_processes)
                p = await timed(lambda: codemode(py_code(n)))
                ours.append(o)
                acts.append(a)
                procs.append(d)
                pys.append(p)
                ratios.append(o / (a + d))
        finally:
            await bare.shutdown()
            await bare_task
    await env.shutdown()
    # The command alone, without Temporal: our call (checks, argv, clean environment, capped
    # reads) against the bare subprocess, paired in turn.
    spec = cli.tool_specs()[0]
    alone = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            await spec.invoke([], {"max_count": 1, "oneline": True})
        o = time.perf_counter() - t0
        alone.append(o / n / await timed(bare_processes))
    ms = lambda xs: [round(x * 1000, 2) for x in xs]  # noqa: E731
    med = lambda xs: statistics.median(xs) * 1000  # noqa: E731
    print(
        "samples ms/call: CLI command in code", ms(ours), "bare activity", ms(acts),
        "bare subprocess", ms(procs), "Python tool in code", ms(pys),
    )
    print(
        f"CLI command from code, durable: {med(ours):.1f} ms/call; floor: bare activity {med(acts):.1f} ms + "
        f"bare subprocess {med(procs):.2f} ms; ratio {statistics.median(ratios):.2f}x "
        f"(median of {len(ratios)} paired runs of {n} calls; target <= 1.10x)"
    )
    print(f"  the command alone (no Temporal) against a bare subprocess: {statistics.median(alone):.2f}x")
    print(
        f"  a durable Python tool call in the same run: {med(pys):.1f} ms/call "
        f"(the CLI part of a call: {med(ours) - med(pys):.2f} ms); over a bare activity it is "
        f"{statistics.median(p / a for p, a in zip(pys, acts)):.2f}x: the per-call cost of code mode, shared by every tool"
    )


if __name__ == "__main__":
    asyncio.run(main())
