"""One Deno process running ``runner.mjs``: its command line (the permissions are the
sandbox), its set-up line, its per-process token.

Deno runs with read permission on the Pyodide distribution, the snapshot and the wheel
directories only, and everything else denied explicitly (net, env, write, run, ffi, sys,
remote and npm imports, config and lock files); ``--no-prompt`` so nothing ever asks.
Guest memory is capped by ``--wasm-max-mem-pages`` (64 KiB pages): past it an allocation
fails and Python raises ``MemoryError``. Deno's own caches go to ``DENO_DIR`` under our
cache, never the home directory.

The token is random per process and travels on stdin (other users can read argv): every
line the runner writes starts with it, and the host drops lines that do not
(``StdioChannel(token=...)``).
"""

from __future__ import annotations

import json
import math
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SandboxError
from ..runner.process import OutputSink, SandboxProcess

RUNNER_MJS = Path(__file__).with_name("runner.mjs")
PAGE_BYTES = 64 * 1024
#: WebAssembly's 32-bit address space.
MAX_PAGES = 65536
#: Kept of what a warm process prints before its execution (errors while it started).
WARMUP_OUTPUT_BYTES = 64 * 1024


def memory_pages(max_memory_bytes: int) -> int:
    return max(1, min(MAX_PAGES, math.ceil(max_memory_bytes / PAGE_BYTES)))


def deno_argv(deno: str, *, read_paths: Sequence[str], pages: int | None) -> list[str]:
    argv = [
        deno, "run", "--quiet", "--no-prompt", "--no-config", "--no-lock", "--no-remote", "--no-npm",
        "--deny-net", "--deny-env", "--deny-write", "--deny-run", "--deny-ffi", "--deny-sys", "--deny-import",
        "--allow-read=" + ",".join(dict.fromkeys(read_paths)),
    ]  # fmt: skip
    if pages is not None:
        argv.append(f"--v8-flags=--wasm-max-mem-pages={pages}")
    argv.append(str(RUNNER_MJS))
    return argv


def deno_env(deno_dir: Path) -> dict[str, str]:
    return {
        "DENO_DIR": str(deno_dir),
        "DENO_NO_UPDATE_CHECK": "1",
        "DENO_NO_PROMPT": "1",
        "NO_COLOR": "1",
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
    }


@dataclass(frozen=True)
class ProcessSpec:
    """What a warm process is made of: processes of one spec are interchangeable."""

    snapshot: str
    index_url: str
    module_url: str
    #: What ``pyodide.loadPackage`` loads after the snapshot (lock names, wheel paths).
    load: tuple[str, ...] = ()
    #: Modules imported while the process waits (the execution's packages).
    imports: tuple[str, ...] = ()
    read_paths: tuple[str, ...] = ()
    pages: int | None = None
    #: ``(host path, sandbox path)``: copied in read-only while the process warms up.
    mounts: tuple[tuple[str, str], ...] = ()


class DenoProcess:
    """A started runner: the process, its token, and (while warm) nothing else."""

    def __init__(self, process: SandboxProcess, token: str) -> None:
        self.process = process
        self.token = token
        self.prefix = token.encode() + b" "

    @classmethod
    async def spawn(cls, deno: str, deno_dir: Path, *, read_paths: Sequence[str], pages: int | None) -> DenoProcess:
        process = await SandboxProcess.spawn(
            deno_argv(deno, read_paths=read_paths, pages=pages),
            env=deno_env(deno_dir),
            protocol_on_stdout=True,
            output_limit=WARMUP_OUTPUT_BYTES,
            die_with_parent=True,
        )
        return cls(process, secrets.token_hex(16))

    @property
    def alive(self) -> bool:
        return self.process.proc.returncode is None

    async def send_json(self, payload: dict[str, Any]) -> None:
        await self.process.send_line(json.dumps(payload, separators=(",", ":")).encode() + b"\n")

    async def read_message(self) -> dict[str, Any] | None:
        """The next line that carries the token, as JSON; None at the end of the stream."""
        stdout = self.process.proc.stdout
        assert stdout is not None
        while True:
            line = await stdout.readline()
            if not line:
                return None
            if line.startswith(self.prefix):
                try:
                    msg = json.loads(line[len(self.prefix) :])
                except ValueError:
                    raise SandboxError(f"malformed line from the pyodide runner: {line[:200]!r}") from None
                if isinstance(msg, dict):
                    return msg

    async def failure(self, what: str) -> SandboxError:
        """Why the process did not get where it should have."""
        code = await self.process.aclose()
        tail = self.process.output.tail()
        return SandboxError(f"the pyodide runner {what} (exit status {code}): {tail or 'no output'}")

    def take_output(self, limit: int) -> OutputSink:
        """A fresh output sink for the execution (what the warm-up printed stays out of it)."""
        self.process.drain_output()
        self.process.output = OutputSink(limit)
        return self.process.output

    async def aclose(self, grace: float = 0.0) -> None:
        await self.process.aclose(grace=grace)


async def start_warm(deno: str, deno_dir: Path, spec: ProcessSpec) -> DenoProcess:
    """A process loaded from the snapshot with the spec's packages, waiting for its code."""
    proc = await DenoProcess.spawn(deno, deno_dir, read_paths=spec.read_paths, pages=spec.pages)
    try:
        await proc.send_json(
            {
                "mode": "serve",
                "token": proc.token,
                "index_url": spec.index_url,
                "module_url": spec.module_url,
                "snapshot": spec.snapshot,
                "wheels": list(spec.load),
                "imports": list(spec.imports),
                "mounts": [list(m) for m in spec.mounts],
            }
        )
        msg = await proc.read_message()
        if msg is None or msg.get("type") != "warm":
            raise await proc.failure("exited while starting")
        return proc
    except BaseException:
        await proc.aclose()
        raise


def read_only_paths(*groups: Sequence[str]) -> tuple[str, ...]:
    """The paths a runner may read, without duplicates, each resolved."""
    return tuple(dict.fromkeys(os.path.realpath(p) for group in groups for p in group))
