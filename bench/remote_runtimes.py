"""The blaxel and modal runtimes against their local servers, beside E2B on its local server
in the same run (the machine is noisy: only ratios mean something). Prints numbers, asserts
nothing.

The local servers run each sandbox as bubblewrap-jailed processes on this machine, so the
figures are each runtime's own overhead (the SDK, its wire, the runner's protocol over the
provider's API) without the cloud's network and VM boot.

1. First call: ``execute`` of a program to its first tool call (create the sandbox, upload
   or load the runner, start it, bootstrap), per runtime, as a ratio to E2B's.
2. Pause/resume: at that call, ``dump()``, ``suspend()`` (E2B pauses; Blaxel's worker
   detaches and the sandbox goes to standby on its own; Modal's detaches and the sandbox
   keeps running), then ``restore()`` in a fresh runtime (another worker: reconnect,
   re-attach, sync) and answer to the next call, per runtime, as a ratio to E2B's.

    python bench/remote_runtimes.py [--runs 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codemode.runtimes import CodeRuntime, FunctionCall  # noqa: E402
from tests.blaxel_local import LocalBlaxelServer  # noqa: E402
from tests.e2b_local import LocalE2BServer  # noqa: E402
from tests.modal_local import IMAGE_ID, LocalModalServer  # noqa: E402

CODE = "a = get(1)\nb = get(2)\na + b\n"


def get(i: int) -> int:
    """A tool the benchmark answers at once."""
    raise NotImplementedError


def factories(e2b: LocalE2BServer, blaxel: LocalE2BServer, modal: LocalE2BServer) -> dict[str, Callable[[], Any]]:
    from codemode.runtimes.blaxel import BlaxelRuntime
    from codemode.runtimes.e2b import E2BRuntime
    from codemode.runtimes.modal import ModalRuntime

    os.environ.update({k: modal.env[k] for k in ("MODAL_SERVER_URL", "MODAL_CONFIG_PATH")})
    return {
        "e2b": lambda: E2BRuntime(api_key="bench", api_url=e2b.url, sandbox_url=e2b.url),
        "blaxel": lambda: BlaxelRuntime(api_key="bench", workspace="bench", api_url=blaxel.url, region="local"),
        "modal": lambda: ModalRuntime(token_id="ak-bench", token_secret="as-bench", image=IMAGE_ID),
    }


async def one(make: Callable[[], CodeRuntime]) -> tuple[float, float]:
    """(first call ms, pause/resume ms) of one run."""
    rt = make()
    t0 = time.perf_counter()
    execution = await rt.execute(CODE, functions={"get": get})
    call = await execution.next()
    first = (time.perf_counter() - t0) * 1000
    assert isinstance(call, FunctionCall)
    t1 = time.perf_counter()
    blob = execution.dump()
    assert blob is not None
    await execution.close()
    await rt.suspend(blob)
    other = make()
    restored = await other.restore(blob)
    assert restored is not None
    await restored.provide_result(1, call_id=call.call_id)
    nxt = await restored.next()
    resumed = (time.perf_counter() - t1) * 1000
    assert isinstance(nxt, FunctionCall)
    await restored.provide_result(2, call_id=nxt.call_id)
    await restored.next()
    await restored.close()
    await other.aclose()
    await rt.aclose()
    return first, resumed


async def main(runs: int) -> None:
    with LocalE2BServer() as e2b, LocalBlaxelServer() as blaxel, LocalModalServer() as modal:
        made = factories(e2b, blaxel, modal)
        figures: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in made}
        for name, make in made.items():
            await one(make)  # warm-up: imports, the first client, the app
        for _ in range(runs):  # interleaved, so load on the machine falls on all alike
            for name, make in made.items():
                first, resumed = await one(make)
                figures[name][0].append(first)
                figures[name][1].append(resumed)
    base_first = statistics.median(figures["e2b"][0])
    base_resume = statistics.median(figures["e2b"][1])
    print(f"{runs} runs each, medians; ratios against E2B on its local server in the same run")
    print(f"{'runtime':8} {'first call':>12} {'x e2b':>7} {'pause/resume':>14} {'x e2b':>7}")
    for name, (firsts, resumes) in figures.items():
        f, r = statistics.median(firsts), statistics.median(resumes)
        print(f"{name:8} {f:10.1f}ms {f / base_first:7.2f} {r:12.1f}ms {r / base_resume:7.2f}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=7)
    asyncio.run(main(ap.parse_args().runs))
