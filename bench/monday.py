"""Monday morning: many runs wait for people over the weekend, then people decide at once.

Parks ``--count`` runs (each one tool call waiting for approval) on one dev server and one
worker process, reads that worker's memory (RSS, with its sandbox subprocesses) and CPU while
they wait against the same worker idle, then approves them all with one batch command
(``temporal workflow signal --query ... --name approve``: the server signals every waiting run;
a run with one pending call takes a signal without a call id) and measures the resumptions per
second until every run completed. The floor, measured in the same run: as many bare workflows
parked on a signal and released by the same batch command, each then running one activity.
Every tool run appends its run's id to a file, so the benchmark checks each call ran once.
Then the same with the worker restarted while the runs wait (a new process: nothing cached).

    python -m bench.monday                  # 10,000 runs, both variants
    python -m bench.monday --count 1000     # while developing
    python -m bench.monday --variants restart --wait 60

Our side is watched after the runs have waited ``--settle`` seconds (150): a worker lets a
parked run's live sandbox go after its keep-alive (60 s) and closes its idle Monty processes
after ``CODEMODE_MONTY_IDLE_SECONDS`` (60), so the weekend's steady state begins about two
minutes after the last run parked.

Prints numbers, asserts nothing; only ratios to the floor of the same run mean much on a
shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from temporalio.client import Client

from bench.cpu import _TICK
from codemode.client.executions import start_execution
from codemode.worker.binaries import temporal_cli_path
from codemode.worker.dev_server import start_local_environment
from codemode.workflows.models import CodeExecutionRequest

CODE = 'r = await send_report(to="ops@example.com", body="weekly numbers")\nr'
#: The batcher's own rate limit (50 requests/s per batch by default) would be the figure
#: otherwise, on both sides: raised on the dev server and asked for by the command.
BATCH_RPS = 10000
SERVER_SETTINGS = {"worker.batcherRPS": BATCH_RPS, "worker.batcherConcurrency": 50}


# -- a process and its children, from /proc ----------------------------------------------------


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                text = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(text[text.rindex(")") + 2 :].split()[1])
                tree.setdefault(ppid, []).append(int(entry))
    return tree


def family(pid: int) -> list[int]:
    tree, out, todo = _children(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += tree.get(p, [])
    return out


def _rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def rss_mb(pid: int) -> tuple[float, float]:
    """(the process's RSS, its children's: the sandbox processes), MB."""
    own = _rss_kb(pid)
    return own / 1024, (sum(_rss_kb(p) for p in family(pid)) - own) / 1024


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for p in family(pid):
        with contextlib.suppress(OSError, ValueError):
            text = Path(f"/proc/{p}/stat").read_text()
            f = text[text.rindex(")") + 2 :].split()
            total += (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / _TICK
    return total


def server_pid() -> int | None:
    for p in family(os.getpid()):
        with contextlib.suppress(OSError):
            if b"server start-dev" in Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" "):
                return p
    return None


@dataclass
class Watch:
    """A process's memory and CPU over a stretch of time."""

    seconds: float
    rss: list[float] = field(default_factory=list)  # the worker process and its sandboxes, MB
    own: list[float] = field(default_factory=list)  # the worker process alone
    cpu: float = 0.0  # seconds of CPU over the stretch

    @property
    def cpu_share(self) -> float:
        return self.cpu / self.seconds

    @property
    def mean(self) -> float:
        return statistics.mean(self.rss)

    @property
    def mean_own(self) -> float:
        return statistics.mean(self.own)

    def line(self) -> str:
        return (
            f"RSS {self.mean:.0f} MB (process {self.mean_own:.0f} + sandboxes {self.mean - self.mean_own:.0f}; "
            f"min {min(self.rss):.0f}, max {max(self.rss):.0f}), CPU {self.cpu_share * 100:.1f}% of a core "
            f"over {self.seconds:.0f} s"
        )


async def watch(pid: int, seconds: float, every: float = 0.5) -> Watch:
    w = Watch(seconds)
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        own, children = rss_mb(pid)
        w.own.append(own)
        w.rss.append(own + children)
        await asyncio.sleep(every)
    w.seconds = time.perf_counter() - t0
    w.cpu = cpu_seconds(pid) - c0
    return w


# -- the worker process ------------------------------------------------------------------------


class WorkerProcess:
    def __init__(self, address: str, task_queue: str, kind: str, log: Path) -> None:
        self.args = [sys.executable, "-m", "bench.monday_worker", address, task_queue, kind]
        self.env = {**os.environ, "BENCH_MONDAY_LOG": str(log)}
        self.proc: subprocess.Popen[str] | None = None

    async def start(self) -> None:
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=self.env, stdout=subprocess.PIPE, text=True)  # noqa: ASYNC220
        line = await asyncio.to_thread(self.proc.stdout.readline)  # type: ignore[union-attr]
        if line.strip() != "ready":
            raise RuntimeError(f"the worker did not start: {line!r}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.to_thread(self.proc.wait, 60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        self.proc = None


# -- one variant of one side -------------------------------------------------------------------


@dataclass
class Result:
    kind: str
    variant: str
    count: int
    park_s: float = float("nan")
    waiting: Watch | None = None
    after: Watch | None = None  # the same worker once they all completed
    resume_s: float = float("nan")
    resume_worker_cpu: float = float("nan")
    resume_server_cpu: float = float("nan")
    completed: int = 0
    succeeded: int = 0
    tool_runs: int = 0
    unique_runs: int = 0
    batch_note: str = ""

    @property
    def park_rate(self) -> float:
        return self.count / self.park_s

    @property
    def resume_rate(self) -> float:
        return self.count / self.resume_s


async def count(client: Client, query: str) -> int:
    return (await client.count_workflows(query)).count


async def wait_for_count(client: Client, query: str, target: int, timeout: float, every: float = 0.25) -> float:
    """Seconds until ``query`` counts ``target`` runs (raises after ``timeout``)."""
    t0 = time.perf_counter()
    while (n := await count(client, query)) < target:
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{n}/{target} after {timeout:.0f} s: {query}")
        await asyncio.sleep(every)
    return time.perf_counter() - t0


async def start_all(client: Client, kind: str, task_queue: str, n: int, prefix: str, concurrency: int = 64) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            wid = f"{prefix}-{i}"
            if kind == "ours":
                await start_execution(client, CodeExecutionRequest(code=CODE), task_queue=task_queue, execution_id=wid)
            else:
                await client.start_workflow("BenchParkedWorkflow", i, id=wid, task_queue=task_queue)

    await asyncio.gather(*(one(i) for i in range(n)))


async def approve_all(address: str, query: str) -> str:
    """The batch command: one server-side batch job that signals every run the query finds."""
    cmd = [
        str(temporal_cli_path()),
        "workflow",
        "signal",
        "--address",
        address,
        "--query",
        query,
        "--name",
        "approve",
        "--input",
        json.dumps({"by": "monday morning"}),
        "--yes",
        "--rps",
        str(BATCH_RPS),
        "--reason",
        "monday",
    ]
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"the batch command failed: {out.decode()[-500:]}")
    return out.decode().strip().splitlines()[-1][:120] if out else ""


async def one_side(
    client: Client, address: str, kind: str, variant: str, n: int, wait_s: float, log_dir: Path, settle_s: float = 0.0
) -> Result:
    tag = uuid.uuid4().hex[:6]
    tq = f"monday-{kind}-{variant}-{tag}"
    log = log_dir / f"{tq}.log"
    log.touch()
    worker = WorkerProcess(address, tq, kind, log)
    res = Result(kind, variant, n)
    base = f"TaskQueue = '{tq}'"
    await worker.start()
    try:
        t0 = time.perf_counter()
        await start_all(client, kind, tq, n, f"{tq}")
        started = time.perf_counter() - t0
        res.park_s = started + await wait_for_count(
            client, f"{base} AND CodeModeStatus = 'awaiting_approval' AND ExecutionStatus = 'Running'", n, timeout=3600
        )
        print(
            f"  {kind} {variant}: {n} parked in {res.park_s:.1f} s ({n / res.park_s:.0f}/s; starts took {started:.1f} s)",
            flush=True,
        )
        if variant == "restart":
            await worker.stop()
            await worker.start()
        if kind == "ours" and settle_s:
            await asyncio.sleep(settle_s)  # (the floor's worker holds nothing to let go)
        res.waiting = await watch(worker.pid, wait_s)
        print(f"  {kind} {variant}: while {n} wait: {res.waiting.line()}", flush=True)
        srv = server_pid()
        s0, w0 = (cpu_seconds(srv) if srv else 0.0), cpu_seconds(worker.pid)
        t0 = time.perf_counter()
        res.batch_note = await approve_all(address, f"{base} AND ExecutionStatus = 'Running'")
        await wait_for_count(client, f"{base} AND ExecutionStatus = 'Completed'", n, timeout=3600)
        res.resume_s = time.perf_counter() - t0
        res.resume_worker_cpu = (cpu_seconds(worker.pid) - w0) / n * 1000
        res.resume_server_cpu = ((cpu_seconds(srv) - s0) if srv else float("nan")) / n * 1000
        print(
            f"  {kind} {variant}: {n} resumed and completed in {res.resume_s:.1f} s ({res.resume_rate:.0f}/s)",
            flush=True,
        )
        res.completed = await count(client, f"{base} AND ExecutionStatus = 'Completed'")
        res.succeeded = await count(client, f"{base} AND CodeModeStatus = 'completed'")
        await asyncio.sleep(1.0)  # the last log lines
        ids = log.read_text().split()
        res.tool_runs, res.unique_runs = len(ids), len(set(ids))
        res.after = await watch(worker.pid, wait_s)
        print(f"  {kind} {variant}: idle once they completed: {res.after.line()}", flush=True)
    finally:
        await worker.stop()
    return res


async def idle(address: str, wait_s: float, log_dir: Path, client: Client, runs: int = 20) -> tuple[Watch, Watch]:
    """Our worker idle: fresh (nothing ever ran), then after ``runs`` runs parked, approved and done
    (Monty's pool and the type checker started)."""
    tq = f"monday-idle-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(address, tq, "ours", log_dir / f"{tq}.log")
    await worker.start()
    try:
        await asyncio.sleep(2.0)
        fresh = await watch(worker.pid, wait_s)
        await start_all(client, "ours", tq, runs, tq)
        await wait_for_count(client, f"TaskQueue = '{tq}' AND CodeModeStatus = 'awaiting_approval'", runs, timeout=300)
        await approve_all(address, f"TaskQueue = '{tq}' AND ExecutionStatus = 'Running'")
        await wait_for_count(client, f"TaskQueue = '{tq}' AND ExecutionStatus = 'Completed'", runs, timeout=300)
        await asyncio.sleep(2.0)
        warm = await watch(worker.pid, wait_s)
    finally:
        await worker.stop()
    return fresh, warm


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=10_000, help="runs to park (default 10,000)")
    ap.add_argument("--wait", type=float, default=30.0, help="seconds to watch the worker while they wait (default 30)")
    ap.add_argument(
        "--settle", type=float, default=150.0, help="seconds our runs wait before the worker is watched (default 150)"
    )
    ap.add_argument("--variants", default="plain,restart", help="plain, restart (the worker restarted while they wait)")
    ap.add_argument(
        "--idle-runs", type=int, default=20, help="runs the idle worker makes before its second reading (default 20)"
    )
    ap.add_argument(
        "--max-cached",
        type=int,
        help="both workers' workflow cache, in runs (CODEMODE_MAX_CACHED_WORKFLOWS; default the SDK's 1,000)",
    )
    ap.add_argument("--json", metavar="FILE", help="also write every figure to FILE")
    args = ap.parse_args()
    n = args.count
    if args.max_cached is not None:  # the worker processes inherit it (the floor's reads it too)
        os.environ["CODEMODE_MAX_CACHED_WORKFLOWS"] = str(args.max_cached)
        print(f"workflow cache of both workers: {args.max_cached} runs", flush=True)
    print(f"load average before: {os.getloadavg()}", flush=True)
    env = await start_local_environment(dynamic_config=SERVER_SETTINGS)
    client: Client = env.client
    address = client.service_client.config.target_host
    results: list[Result] = []
    loads: list[tuple[str, tuple[float, float, float]]] = [("before", os.getloadavg())]
    with tempfile.TemporaryDirectory(prefix="monday-") as tmp:
        log_dir = Path(tmp)
        try:
            fresh, warm = await idle(address, args.wait, log_dir, client, args.idle_runs)
            print(
                f"  idle worker, fresh: {fresh.line()}\n  idle worker, after {args.idle_runs} runs: {warm.line()}",
                flush=True,
            )
            for variant in args.variants.split(","):
                order = ["floor", "ours"] if variant == "plain" else ["ours", "floor"]
                for kind in order:
                    results.append(await one_side(client, address, kind, variant, n, args.wait, log_dir, args.settle))
                    loads.append((f"{kind} {variant}", os.getloadavg()))
        finally:
            await env.shutdown()

    print(f"\nload average: {', '.join(f'{k} {v[0]:.1f}' for k, v in loads)}")
    print(f"\nIdle worker (ours): fresh {fresh.line()}; after {args.idle_runs} runs {warm.line()}\n")
    print(
        "| variant | side | runs | park s (runs/s) | worker RSS while they wait, MB (process + sandboxes) "
        "| the same worker idle after, MB | waiting/a fresh idle worker | worker CPU while they wait | resume s | resumptions/s "
        "| vs floor | worker+server CPU/resumption ms | completed | succeeded | tool runs (distinct) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        floor = next((f for f in results if f.kind == "floor" and f.variant == r.variant), None)
        assert r.waiting is not None and r.after is not None
        vs_floor = r.resume_rate / floor.resume_rate if floor else float("nan")
        print(
            f"| {r.variant} | {r.kind} | {r.count} | {r.park_s:.1f} ({r.park_rate:.0f}) | {r.waiting.mean:.0f} "
            f"({r.waiting.mean_own:.0f} + {r.waiting.mean - r.waiting.mean_own:.0f}) | {r.after.mean:.0f} "
            f"| {r.waiting.mean / fresh.mean:.2f}x | {r.waiting.cpu_share * 100:.1f}% | {r.resume_s:.1f} "
            f"| {r.resume_rate:.0f} | {vs_floor:.2f}x | {r.resume_worker_cpu:.1f}+{r.resume_server_cpu:.1f} "
            f"| {r.completed} | {r.succeeded} | {r.tool_runs} ({r.unique_runs}) |"
        )
    print(
        "Goals (issue 49): resumptions >= 0.7x the floor's rate; worker memory while they wait within 10% of an idle "
        f"worker's (ours watched after {args.settle:.0f} s of waiting); every run completed, each call once."
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "loads": loads,
                    "idle": {"fresh": fresh.__dict__, "warm": warm.__dict__},
                    "results": [
                        {
                            **{k: v for k, v in r.__dict__.items() if k not in ("waiting", "after")},
                            "waiting": r.waiting.__dict__ if r.waiting else None,
                            "after": r.after.__dict__ if r.after else None,
                            "resume_rate": r.resume_rate,
                        }
                        for r in results
                    ],
                },
                indent=1,
                default=str,
            )
        )


if __name__ == "__main__":
    asyncio.run(main())
    sys.stdout.flush()
    os._exit(0)
