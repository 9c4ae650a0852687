"""What encryption costs per durable tool call, as a ratio against the same run without it
(measured in the same process, on the same dev server: only ratios mean something here).

Two workers on one server, one whose client encrypts (AES-256-GCM payload codec, encoded
failure attributes, sealed checkpoints) and one whose client does not; the same code runs on
each, in alternating pairs; the median of the per-pair ratios is reported, and the ratio of
the summed times as a check (this server's per-call latency jumps between levels from one
run to the next, so take many short pairs rather than a few long ones). On a shared machine
the wall clock follows other people's load; the CPU time this process (client, workers,
codec, checkpoint sealing) spends per call does not, so it is reported as well:

1. N sequential tool calls with small arguments (Monty: a sealed checkpoint per call).  Target <= 1.1x.
2. The same with a payload of --payload bytes each way per call (the codec's per-byte cost).
3. For scale: one AES-GCM encode + decode of such a payload, against the pydantic converter's own work.

    python bench/encryption.py [--calls 20] [--repeat 15] [--payload 16384]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from temporalio.client import Client  # noqa: E402

from codemode.activities import ToolRegistry  # noqa: E402
from codemode.client.executions import start_execution  # noqa: E402
from codemode.storage.encryption import EncryptionCodec, Keyring, new_key  # noqa: E402
from codemode.worker.converter import data_converter, default_store  # noqa: E402
from codemode.worker.dev_server import start_local_environment  # noqa: E402
from codemode.worker.worker import CodeModeWorker  # noqa: E402
from codemode.workflows.models import CodeExecutionRequest  # noqa: E402


def small_calls(n: int) -> str:
    return f"t = 0\nfor i in range({n}):\n    t += await noop(i)\nt"


def payload_calls(n: int, size: int) -> str:
    return f"s = 'x' * {size}\nt = 0\nfor i in range({n}):\n    t += len(await echo(s))\nt"


async def timed(coro) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process)."""
    t0, c0 = time.perf_counter(), time.process_time()
    await coro
    return time.perf_counter() - t0, time.process_time() - c0


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--payload", type=int, default=16 * 1024)
    args = ap.parse_args()
    store = await default_store()
    keys = Keyring.parse(f"bench:{new_key()}")
    env = await start_local_environment(data_converter=data_converter(store, keys=None))
    plain = env.client
    encrypted = await Client.connect(
        plain.service_client.config.target_host, data_converter=data_converter(store, keys=keys)
    )
    registry = ToolRegistry.from_module("bench.bench_tools")
    queues = {"plain": f"bench-plain-{uuid.uuid4().hex[:6]}", "encrypted": f"bench-enc-{uuid.uuid4().hex[:6]}"}
    clients = {"plain": plain, "encrypted": encrypted}
    n = args.calls

    async def run(which: str, code: str) -> None:
        handle = await start_execution(clients[which], CodeExecutionRequest(code=code), task_queue=queues[which])
        outcome = await handle.result()
        assert outcome.success, outcome.error

    async def paired(code: str) -> tuple[list[float], list[float], list[float], float, float]:
        """Per-call wall seconds without and with encryption, their per-pair ratios, and the
        CPU seconds per call of this process without and with."""
        off, on, ratio, cpu = [], [], [], {"plain": 0.0, "encrypted": 0.0}
        for r in range(args.repeat):
            order = ("plain", "encrypted") if r % 2 == 0 else ("encrypted", "plain")
            t = {which: await timed(run(which, code)) for which in order}
            off.append(t["plain"][0] / n)
            on.append(t["encrypted"][0] / n)
            ratio.append(t["encrypted"][0] / t["plain"][0])
            for which in order:
                cpu[which] += t[which][1]
        calls = n * args.repeat
        return off, on, ratio, cpu["plain"] / calls, cpu["encrypted"] / calls

    workers = [CodeModeWorker(clients[w], registry, task_queue=queues[w]) for w in ("plain", "encrypted")]
    async with workers[0].running(), workers[1].running():
        for which in ("plain", "encrypted"):  # warm up pools and caches
            await run(which, small_calls(2))
            await run(which, payload_calls(2, args.payload))
        ms = lambda xs: [round(x * 1000, 1) for x in xs]  # noqa: E731
        for label, code in (
            (f"{n} sequential calls, small arguments", small_calls(n)),
            (f"{n} sequential calls, {args.payload} bytes each way", payload_calls(n, args.payload)),
        ):
            off, on, ratio, cpu_off, cpu_on = await paired(code)
            print(f"samples ms/call ({label}): plain {ms(off)}, encrypted {ms(on)}")
            print(
                f"{label}: plain {statistics.median(off) * 1000:.1f} ms/call, encrypted "
                f"{statistics.median(on) * 1000:.1f} ms/call, ratio {statistics.median(ratio):.3f}x "
                f"(median of {len(ratio)} paired runs; summed times {sum(on) / sum(off):.3f}x; target <= 1.1x); "
                f"CPU of this process {cpu_off * 1000:.2f} vs {cpu_on * 1000:.2f} ms/call, {cpu_on / cpu_off:.3f}x"
            )

    # For scale: the codec's own work on one payload of that size, against the converter's
    # (the best of several batches: a batch the scheduler interrupts says nothing).
    converter = data_converter(store, keys=None)
    codec = EncryptionCodec(keys)
    value = "x" * args.payload
    payload = converter.payload_converter.to_payloads([value])

    async def convert_once() -> None:
        converter.payload_converter.from_payloads(converter.payload_converter.to_payloads([value]))

    async def crypt_once() -> None:
        await codec.decode(await codec.encode(payload))

    async def best(op) -> float:
        batches = []
        for _ in range(7):
            t0 = time.perf_counter()
            for _ in range(300):
                await op()
            batches.append((time.perf_counter() - t0) / 300)
        return min(batches)

    convert, crypt = await best(convert_once), await best(crypt_once)
    print(
        f"one {args.payload}-byte payload: pydantic to/from payload {convert * 1e6:.0f} us, "
        f"AES-GCM encode + decode {crypt * 1e6:.0f} us ({crypt / convert:.2f}x the conversion itself)"
    )
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
