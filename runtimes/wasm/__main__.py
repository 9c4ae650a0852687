"""``python -m runtimes.wasm fetch [--package NAME ...]``: get the pyodide runtime ready on
this machine while the network is there: find Deno, fetch and verify Pyodide, make the
memory snapshot, resolve the named packages into the wheel cache, and start one process
from the snapshot to prove it all works. Everything lands under the cache
(``CODEMODE_PYODIDE_DIR``, else ``<codemode data dir>/cache/pyodide``); runs are offline
after it. Idempotent: a second run finds everything and takes a second or two."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time


async def fetch(packages: list[str]) -> None:
    from ..pyodide import PyodideRuntime
    from ..types import ExecutionLimits, ExecutionResult
    from .distribution import cache_root

    started = time.monotonic()
    runtime = PyodideRuntime(pool_size=0)
    try:
        setup = await runtime._setup()
        print(f"deno: {setup.deno}")
        print(f"pyodide: {setup.dist.path}")
        print(f"snapshot: {setup.snapshot}")
        if packages:
            resolved = await setup.resolver.resolve(packages)
            for item in resolved.load:
                print(f"package: {item}")

        class Options:
            pass

        options = Options()
        options.packages = packages  # type: ignore[attr-defined]
        execution = await runtime.execute(
            "import sys\nsys.version", functions={}, limits=ExecutionLimits(), options=options
        )
        async with execution:
            result = await execution.next_batch()
        assert isinstance(result, ExecutionResult)
        print(f"python: {result.output.split()[0]} ({time.monotonic() - started:.1f} s; cache {cache_root()})")
    finally:
        await runtime.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runtimes.wasm", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("fetch", help="fetch Deno's Pyodide, make the snapshot, cache packages")
    cmd.add_argument("--package", action="append", default=[], help="a package to cache (repeatable)")
    args = parser.parse_args(argv)
    from ..errors import CodeExecutionError

    try:
        asyncio.run(fetch(args.package))
    except CodeExecutionError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
