"""``python -m codemode.runtimes.wasm fetch [--package NAME ...] [--preload NAME ...]``: get the
pyodide runtime ready on this machine while the network is there: find Deno, fetch and
verify Pyodide, make the memory snapshot (and the one of ``PyodideRuntime(packages=
PRELOAD)``), resolve the ``--package`` wheels into the cache, and run code in a process
started from the snapshot to prove it all works. Everything lands under the cache
(``CODEMODE_PYODIDE_DIR``, else ``<codemode data dir>/cache/pyodide``); runs are offline
after it. Idempotent: a second run finds everything and only starts the processes."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Sequence


async def fetch(packages: Sequence[str], preload: Sequence[str]) -> None:
    await _ready(packages, ())
    if preload:
        await _ready((), preload)


async def _ready(packages: Sequence[str], preload: Sequence[str]) -> None:
    from ..pyodide import PyodideRuntime
    from ..types import ExecutionResult, SandboxOptions
    from .distribution import cache_root

    started = time.monotonic()
    runtime = PyodideRuntime(packages=preload, pool_size=0)
    try:
        setup = await runtime._setup()
        print(f"deno: {setup.deno}")
        print(f"pyodide: {setup.dist.path}")
        print(f"snapshot: {setup.snapshot}" + (f" (preloaded: {', '.join(preload)})" if preload else ""))
        if packages:
            for item in (await setup.resolver.resolve(list(packages))).load:
                print(f"package: {item}")
        execution = await runtime.execute("import sys\nsys.version", functions={}, options=SandboxOptions(packages=list(packages)))
        async with execution:
            result = await execution.next_batch()
        assert isinstance(result, ExecutionResult)
        print(f"python: {result.output.split()[0]} ({time.monotonic() - started:.1f} s; cache {cache_root()})")
    finally:
        await runtime.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m codemode.runtimes.wasm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("fetch", help="fetch Pyodide, make the snapshot, cache packages")
    cmd.add_argument("--package", action="append", default=[], help="a package to cache (repeatable)")
    cmd.add_argument("--preload", action="append", default=[], help="make PyodideRuntime(packages=[...])'s snapshot too")
    args = parser.parse_args(argv)
    from ..errors import CodeExecutionError

    try:
        asyncio.run(fetch(args.package, args.preload))
    except CodeExecutionError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
