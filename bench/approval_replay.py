"""Approval runs under replay pressure (issue 43): hundreds of runs of every approval path, on a
worker that keeps its workflows cached and on one that keeps none (every workflow task, and every
query, replays the history), with people deciding and querying at varied moments, activities
slow on purpose and the machine loaded. Counts what must never happen and the time per run.

    python -m bench.approval_replay                       # 500 runs each, cached and uncached
    python -m bench.approval_replay --runs 60 --load 0    # a quick look

What it counts, and how it runs each plan: ``tests/workflows/replay_stress.py``. The setups: no
notify config and no approvers file; a notify config whose webhook receiver is up; one whose
receiver is down; an approvers file (decisions signed). The timings: a person who decides once
``status`` shows a call; one who also sends a blind decision 50 ms in (before the call waits);
status queries without pause alongside. The delays put a notification's start, a gate or a
step on the slow side of the orders that decide an interleaving.

Prints a line per (cache, setup), the totals, every history replayed at the end against the
code, and the uncached time per run against the cached one (the floor of the same machine).
Exit status 1 if any run was nondeterministic, lost a decision, stuck, or ended wrong.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.approvals.notify.config import NotifyConfig  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from tests.approvals.receivers import Receiver  # noqa: E402
from tests.approvers.helpers import Person, people_toml  # noqa: E402
from tests.workflows.replay_stress import (  # noqa: E402
    SCENARIOS,
    Plan,
    RunReport,
    Signer,
    SlowActivities,
    Timing,
    Totals,
    check_tools_once,
    cpu_load,
    replay_failures,
    stress_worker,
)

TIMINGS = {
    "sight": Timing(),
    "early": Timing(early_after=0.05),
    "hammer": Timing(hammer=True),
}
DELAYS = {
    "none": {},
    "slow-notice": {"codemode.notify.start": 0.4, "approval_gate": 0.2},
    "slow-gate": {"approval_gate": 0.5},
    "slow-steps": {"sandbox_start": 0.3, "sandbox_resume": 0.3},
}
SETUPS = ("plain", "notify", "notify-down", "approvers")


@dataclass
class Result:
    totals: Totals = field(default_factory=Totals)
    reports: list[RunReport] = field(default_factory=list)


@contextlib.asynccontextmanager
async def setup_worker(
    client, task_queue: str, setup: str, cached: bool, slow: SlowActivities, tmp: Path
) -> AsyncIterator[Signer | None]:
    """A worker with the setup's notify config or approvers file; the signer if decisions are signed."""
    notify = None
    approvers = None
    signer: Signer | None = None
    receiver: Receiver | None = None
    if setup.startswith("notify"):
        receiver = Receiver(secret="bench-secret", port=_free_port())
        if setup == "notify":
            await receiver.up()
        notify = NotifyConfig.model_validate(
            {"webhooks": [{"url": receiver.url, "secret": "bench-secret"}], "retry": {"give_up_after": "20s"}}
        )
    if setup == "approvers":
        ana = Person("ana")
        path = tmp / f"approvers-{uuid.uuid4().hex[:6]}.toml"
        text = people_toml((ana, ["finance"])) + '\n[defaults]\napprovers = ["group:finance"]\n'
        path.write_text(text)
        approvers, signer = path, Signer(ana)
    try:
        async with stress_worker(client, task_queue, cached=cached, slow=slow, notify=notify, approvers=approvers):
            yield signer
    finally:
        if receiver is not None:
            await receiver.down()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def run_mode(client, cached: bool, args: argparse.Namespace, events: Path, tmp: Path) -> dict[str, Result]:
    """Every setup on one worker mode: the runs spread over timings, delays and scenarios."""
    from tests.workflows.replay_stress import run_plan

    out: dict[str, Result] = {}
    plans = [(t, d) for t in TIMINGS for d in DELAYS]
    per_setup = max(args.runs // len(args.setups), 1)
    for setup in args.setups:
        result = out[setup] = Result()
        task_queue = f"replay-{setup}-{uuid.uuid4().hex[:6]}"
        slow = SlowActivities()
        async with setup_worker(client, task_queue, setup, cached, slow, tmp) as signer:
            for i, (timing, delay) in enumerate(plans):
                runs = per_setup // len(plans) + (1 if i < per_setup % len(plans) else 0)
                if runs == 0:
                    continue
                plan = Plan(
                    scenarios=args.scenarios,
                    delays=DELAYS[delay],
                    timing=TIMINGS[timing],
                    runs=runs,
                    concurrency=args.concurrency,
                    signer=signer,
                )
                result.reports += await run_plan(client, task_queue, plan, slow, result.totals, seed=i)
        check_tools_once(result.reports, events, result.totals)
        print(f"  {'cached' if cached else 'uncached':8} {setup:12} {result.totals.line()}", flush=True)
    return out


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=500, help="runs per worker mode (default 500)")
    parser.add_argument("--concurrency", type=int, default=4, help="runs under way at once")
    parser.add_argument("--load", type=int, default=2, help="busy-loop processes beside (default 2: both cores)")
    parser.add_argument("--modes", default="cached,uncached")
    parser.add_argument("--setups", default=",".join(SETUPS))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--keep", type=Path, help="write the histories of failed runs here")
    args = parser.parse_args()
    args.setups = args.setups.split(",")
    args.scenarios = args.scenarios.split(",")
    tmp = Path(tempfile.mkdtemp(prefix="approval-replay-"))
    events = tmp / "events.jsonl"
    events.touch()
    os.environ["CODEMODE_TEST_EVENTS"] = str(events)
    env = await start_local_environment()
    client = env.client
    print(f"approval runs under replay pressure: {args.runs} per mode, {args.concurrency} at once, load {args.load}")
    results: dict[bool, dict[str, Result]] = {}
    began = time.monotonic()
    try:
        with cpu_load(args.load):
            for mode in args.modes.split(","):
                cached = mode == "cached"
                results[cached] = await run_mode(client, cached, args, events, tmp)
        every = [r for by_setup in results.values() for res in by_setup.values() for r in res.reports]
        failed = await replay_failures(client, [r.history for r in every if r.history is not None])
    finally:
        await env.shutdown()
    total = Totals()
    for by_setup in results.values():
        for res in by_setup.values():
            for report in res.reports:
                total.add(report)
            total.twice += res.totals.twice
    total.replay = len(failed)
    print(f"all: {total.line()} (wall {time.monotonic() - began:.0f} s, load average {os.getloadavg()[0]:.1f})")
    means = {cached: _mean([r.seconds for res in by.values() for r in res.reports]) for cached, by in results.items()}
    if True in means and False in means and means[True]:
        print(
            f"time per run: uncached {means[False]:.2f} s, cached {means[True]:.2f} s: "
            f"{means[False] / means[True]:.2f}x the cached floor"
        )
    for line in [*total.examples, *(f"replay {k}: {v[:200]}" for k, v in list(failed.items())[:5])]:
        print("  ", line[:300])
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        bad = {r.execution_id for r in every if r.nondeterminism or r.lost or r.problems} | set(failed)
        for r in every:
            if r.execution_id in bad and r.history is not None:
                (args.keep / f"{r.scenario}-{r.execution_id}.json").write_text(r.history.to_json())
    print(json.dumps({"runs": total.runs, "nondeterministic": total.nondeterminism, "lost": total.lost}))
    return 0 if total.clean else 1


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


if __name__ == "__main__":
    code = asyncio.run(main())
    sys.stdout.flush()
    os._exit(code)
