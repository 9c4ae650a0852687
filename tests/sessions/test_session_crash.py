"""SIGKILL the worker between two cells and during a cell: the next cell sees exactly the
state an uninterrupted session would have (variables, the seeded random generator), and no
tool call that finished ran again. Monty keeps the session's dump in the store; python's
live process dies with its worker and the session is rebuilt by replaying its cells."""

from __future__ import annotations

import asyncio
import collections
import signal
import time
import uuid

from codemode.client.histories.audit import fetch_audit
from codemode.client.sessions import close_session, run_cell, submit_cell

from ..workflows.conftest import read_events
from ..workflows.test_crash import spawn_worker

RUNTIMES = ("monty", "python")
FIRST = {
    # CPython: keep the generator's state to prove later that it continued exactly.
    "python": "import random\nstate0 = random.getstate()\nacc = [slow_step(1, 0)]\nr = random.random()\nr",
    "monty": "import random\nacc = [slow_step(1, 0)]\nr = random.random()\nr",
}
SECOND = "acc.append(slow_step(2, 1.5))\nacc.append(slow_step(3, 0))\nlen(acc)"
THIRD = {
    "python": "nxt = random.random()\nchk = random.Random()\nchk.setstate(state0)\n[acc, r, [chk.random(), chk.random()] == [r, nxt]]",
    "monty": "[acc, r]",
}


def _kill(proc) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


async def test_sigkill_between_and_during_cells(client, temporal_address, task_queue, events_file) -> None:
    """Both runtimes at once (one monty session, one python session, the same kills), so
    the waits for the lost worker's tasks to time out overlap."""
    names = {rt: f"crash-{rt}-{uuid.uuid4().hex[:8]}" for rt in RUNTIMES}
    procs = [spawn_worker(temporal_address, task_queue, events_file)]
    try:
        firsts = await asyncio.gather(
            *(run_cell(client, names[rt], FIRST[rt], runtime=rt, task_queue=task_queue) for rt in RUNTIMES)
        )
        assert all(o.success for o in firsts), [o.error for o in firsts]
        r = {rt: o.output for rt, o in zip(RUNTIMES, firsts)}
        _kill(procs[-1])  # between two cells
        procs.append(spawn_worker(temporal_address, task_queue, events_file))
        seconds = await asyncio.gather(
            *(submit_cell(client, names[rt], SECOND, runtime=rt, task_queue=task_queue) for rt in RUNTIMES)
        )
        deadline = time.monotonic() + 90
        cells = {c.execution_id for c in seconds}
        while {e["execution_id"] for e in read_events(events_file) if e["event"] == "start" and e["arg"] == 2} != cells:
            assert time.monotonic() < deadline, "the second cells never reached their tool"
            await asyncio.sleep(0.02)
        _kill(procs[-1])  # during a cell, inside its tool call
        procs.append(spawn_worker(temporal_address, task_queue, events_file))
        outcomes = await asyncio.wait_for(asyncio.gather(*(c.result() for c in seconds)), 120)
        assert all(o.success and o.output == 3 for o in outcomes), [o.error for o in outcomes]
        thirds = await asyncio.wait_for(
            asyncio.gather(
                *(run_cell(client, names[rt], THIRD[rt], runtime=rt, task_queue=task_queue) for rt in RUNTIMES)
            ),
            120,
        )
        assert all(o.success for o in thirds), [o.error for o in thirds]
        for rt, third in zip(RUNTIMES, thirds):
            if rt == "python":
                assert third.output == [[10, 20, 30], r[rt], True]  # the generator went on from where it was
            else:
                assert third.output == [[10, 20, 30], r[rt]]
        for rt in RUNTIMES:
            await close_session(client, names[rt])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    events = read_events(events_file)
    for rt in RUNTIMES:
        mine = [e for e in events if e["execution_id"].startswith(f"session:{names[rt]}:")]
        # One logical call ran under one call id, and finished once: the session's rebuilds
        # answered the earlier calls from their journals.
        ids = collections.defaultdict(set)
        for e in mine:
            ids[(e["execution_id"], e["arg"])].add(e["call_id"])
        assert all(len(v) == 1 for v in ids.values()), (rt, ids)
        ends = collections.Counter(e["arg"] for e in mine if e["event"] == "end")
        assert ends == {1: 1, 2: 1, 3: 1}, (rt, ends)
        starts = collections.Counter(e["arg"] for e in mine if e["event"] == "start")
        assert starts[1] == 1 and starts[3] == 1, (rt, starts)  # only the call cut off by the kill started twice
    python_cell = next(c for c in seconds if names["python"] in c.execution_id)
    ways = [s.via for s in (await fetch_audit(client, python_cell.execution_id)).steps]
    assert "replayed" in ways, ways  # its live process died with the worker: rebuilt by replay
