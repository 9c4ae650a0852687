"""Pyodide's memory snapshot: made once, every process starts from it.

A cold Pyodide start (compile the interpreter, unpack the standard library, import our
runner) takes seconds; a process that loads a snapshot of the initialised WebAssembly
memory starts in a fraction of that. The snapshot is an experimental Pyodide API
(``loadPyodide({_makeSnapshot: true})`` then ``makeMemorySnapshot()``; later
``loadPyodide({_loadSnapshot: bytes})``), so it is keyed by everything that shapes it:
the Pyodide build, the Deno binary, our runner's sources and the preloaded packages. It
is made by a Deno process like the others (no write permission: the bytes come back on
stdout) and written atomically under ``<cache>/snapshots/``.

What survives it: the interpreter and every module imported before it. Not the in-memory
files (the runner extracts preloaded wheels again at start), and not compiled extension
modules: a snapshot taken after importing one fails to restore, so only pure-Python
packages can be preloaded; the others load after it, per process.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

from ..errors import CapabilityError, SandboxError
from ..runner.package import runner_files
from .deno import RUNNER_MJS, DenoProcess
from .distribution import Distribution, file_lock
from .packages import ResolvedPackages

GUEST_PATH = Path(__file__).with_name("guest.py")
BUILD_TIMEOUT_SECONDS = 300.0


def guest_modules() -> dict[str, str]:
    """The Python files the runner writes under ``/codemode`` in Pyodide (by path): the
    runner's package, from the zip every other runtime receives (not its ``__main__``: the
    guest drives it), and the guest."""
    files = {name: data.decode() for name, data in runner_files().items() if name != "__main__.py"}
    return {**files, "codemode_guest.py": GUEST_PATH.read_text()}


def snapshot_key(deno: str, dist: Distribution, preload: ResolvedPackages) -> str:
    digest = hashlib.sha256()
    stat = os.stat(deno)
    digest.update(f"{os.path.realpath(deno)}:{stat.st_size}:{int(stat.st_mtime)}".encode())
    digest.update(dist.key.encode())
    digest.update(RUNNER_MJS.read_bytes())
    for name, source in guest_modules().items():
        digest.update(name.encode() + b"\0" + source.encode())
    for item in (*preload.load, "|", *preload.imports):
        digest.update(item.encode() + b"\0")
    return digest.hexdigest()[:24]


async def ensure_snapshot(deno: str, deno_dir: Path, dist: Distribution, preload: ResolvedPackages, cache: Path) -> Path:
    """The snapshot file for this Deno, distribution and preload set, made if missing."""
    target = cache / "snapshots" / f"{snapshot_key(deno, dist, preload)}.snap"
    if target.is_file():
        return target
    lock = file_lock(cache / "snapshots" / ".lock")
    await asyncio.to_thread(lock.__enter__)
    try:
        if not target.is_file():
            data = await _build(deno, deno_dir, dist, preload)
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            tmp.replace(target)
    finally:
        lock.__exit__(None, None, None)
    return target


async def _build(deno: str, deno_dir: Path, dist: Distribution, preload: ResolvedPackages) -> bytes:
    proc = await DenoProcess.spawn(deno, deno_dir, read_paths=(str(dist.path), *preload.read_paths), pages=None)
    try:
        await proc.send_json(
            {
                "mode": "build",
                "token": proc.token,
                "index_url": dist.index_url,
                "module_url": dist.module_url,
                "wheels": list(preload.load),
                "preload": list(preload.imports),
                "modules": guest_modules(),
            }
        )
        header = await asyncio.wait_for(proc.read_message(), BUILD_TIMEOUT_SECONDS)
        if header is None or header.get("type") != "snapshot":
            err = await proc.failure("could not make the memory snapshot")
            if preload.load:
                raise CapabilityError(
                    f"cannot preload {', '.join(preload.imports) or 'these packages'} into the Pyodide snapshot "
                    f"(only pure-Python packages can be): {err}",
                    error_type="CapabilityError",
                )
            raise err
        stdout = proc.process.proc.stdout
        assert stdout is not None
        return await asyncio.wait_for(stdout.readexactly(int(header["size"])), BUILD_TIMEOUT_SECONDS)
    except TimeoutError:
        raise SandboxError(f"making the Pyodide snapshot took more than {BUILD_TIMEOUT_SECONDS:g} s") from None
    finally:
        await proc.aclose(grace=5.0)
