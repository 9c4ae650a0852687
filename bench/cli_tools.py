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

Also shown: against a bare activity that runs the subprocess itself (the floor as one piece:
a process spawned inside a busy worker costs more than one spawned alone); the command alone
(our call without Temporal) against the bare subprocess; a
durable call of a hand-written Python tool that runs the same subprocess (what the CLI
machinery replaces); and a durable call of a Python tool doing nothing
(``bench/bench_tools.py``), the per-call cost of code mode that every tool pays.

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio import activity  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench.floor_workflow import BareCommandWorkflow, BareWorkflow, noop  # noqa: E402
from bench.paired import median_ms, ms, run_pairs, timed  # noqa: E402
from codemode.activities import ToolRegistry  # noqa: E402
from codemode.activities.cli_tools import CliTools  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def cli_code(n: int) -> str:
    return f"out = []\nfor i in range({n}):\n    out.append(git.log(max_count=1, oneline=True)['returncode'])\nlen(out)"


def hand_code(n: int) -> str:
    return f"for i in range({n}):\n    await hand_written(i)"


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
    git_path = cli.tool_specs()[0].settings.binary

    async def hand_written(i: int) -> dict:
        """The same command as a Python tool would run it (no checks, the worker's environment)."""
        proc = await asyncio.create_subprocess_exec(
            git_path,
            "log",
            "--max-count=1",
            "--oneline",
            cwd=repo,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        return {"returncode": proc.returncode, "stdout": out.decode(), "stderr": err.decode()}

    registry.register(hand_written)
    cm = CodeModeWorker(client, registry, task_queue=tq)
    bench_command = activity.defn(name="bench_command")(hand_written)
    bare = Worker(
        client, task_queue=tq + "-bare", workflows=[BareWorkflow, BareCommandWorkflow], activities=[noop, bench_command]
    )

    async def codemode(code: str) -> None:
        h = await start_execution(client, CodeExecutionRequest(code=code), task_queue=tq)
        out = await h.result()
        assert out.success, out.error

    async def floor_activities() -> None:
        await client.execute_workflow(BareWorkflow.run, args=[n], id=uuid.uuid4().hex, task_queue=tq + "-bare")

    async def floor_command_activities() -> None:
        await client.execute_workflow(BareCommandWorkflow.run, args=[n], id=uuid.uuid4().hex, task_queue=tq + "-bare")

    async def bare_processes() -> None:
        for i in range(n):
            assert (await hand_written(i))["returncode"] == 0

    async with cm.running():
        bare_task = asyncio.create_task(bare.run())
        try:
            await codemode(cli_code(2))  # warm up: pools, the type-check cache, the help text
            await codemode(py_code(2))
            await floor_activities()
            await bare_processes()
            pairs = await run_pairs(
                n,
                args.repeat,
                lambda: codemode(cli_code(n)),
                [floor_activities, bare_processes],
                [lambda: codemode(hand_code(n)), lambda: codemode(py_code(n)), floor_command_activities],
            )
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
        alone.append((time.perf_counter() - t0) / n / await timed(bare_processes, n))
    acts, procs = pairs.floors
    hand, pys, command_acts = pairs.beside
    print(
        "samples ms/call: CLI command in code",
        ms(pairs.ours),
        "bare activity",
        ms(acts),
        "bare subprocess",
        ms(procs),
        "Python tool in code",
        ms(pys),
    )
    print(
        f"CLI command from code, durable: {median_ms(pairs.ours):.1f} ms/call; floor: bare activity "
        f"{median_ms(acts):.1f} ms + bare subprocess {median_ms(procs):.2f} ms; ratio {pairs.ratio:.2f}x "
        f"(median of {len(pairs.ratios)} paired runs of {n} calls; target <= 1.10x)"
    )
    print(f"  the command alone (no Temporal) against a bare subprocess: {statistics.median(alone):.2f}x")
    print(
        f"  against a bare activity that itself runs the subprocess ({median_ms(command_acts):.1f} ms/call): "
        f"{statistics.median(o / c for o, c in zip(pairs.ours, command_acts)):.2f}x"
    )
    print(
        f"  a Python tool running the same subprocess, from code: {median_ms(hand):.1f} ms/call; "
        f"the CLI call against it: {statistics.median(o / h for o, h in zip(pairs.ours, hand)):.2f}x"
    )
    over = statistics.median(p / a for p, a in zip(pys, acts))
    print(
        f"  a durable Python tool call in the same run: {median_ms(pys):.1f} ms/call (the CLI part of a "
        f"call: {median_ms(pairs.ours) - median_ms(pys):.2f} ms); over a bare activity it is {over:.2f}x: "
        "the per-call cost of code mode, shared by every tool"
    )


if __name__ == "__main__":
    asyncio.run(main())
