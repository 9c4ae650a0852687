"""CPU seconds spent by the benchmark's worker and by the dev server, read around a phase.

On a shared 2-core machine wall-clock rates depend on what else runs (and on the server's
share of the cores); CPU seconds per call do not, so the benchmarks print both. The worker
runs in the benchmark's own process (``time.process_time()``, all its threads, the SDK's Rust
core included) plus its sandbox subprocesses (Monty's pool); the dev server is a child
process whose CPU is read from ``/proc/<pid>/stat``.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CPU:
    """CPU seconds: the worker process, its sandbox subprocesses, the server."""

    worker: float = 0.0
    sandbox: float = 0.0
    server: float = 0.0

    def __sub__(self, other: CPU) -> CPU:
        return CPU(self.worker - other.worker, self.sandbox - other.sandbox, self.server - other.server)

    def per(self, n: int) -> CPU:
        return CPU(self.worker / n, self.sandbox / n, self.server / n)

    @property
    def worker_side(self) -> float:
        return self.worker + self.sandbox

    def ms(self) -> str:
        """``worker 1.9 ms (python 1.9 + sandbox 0.0), server 3.1 ms`` (per call after ``per``)."""
        return (
            f"worker {self.worker_side * 1000:.2f} ms (process {self.worker * 1000:.2f} + sandbox "
            f"{self.sandbox * 1000:.2f}), server {self.server * 1000:.2f} ms"
        )


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(parent pid, own CPU seconds, reaped children's CPU seconds) of a live process."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state): ppid is field 4, utime/stime 14/15, cutime/cstime 16/17.
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK, (int(fields[13]) + int(fields[14])) / _TICK


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class CPUMeter:
    """Reads the CPU of this process, its descendants and the dev server it started."""

    def __init__(self, server_marker: str = "server start-dev") -> None:
        self.me = os.getpid()
        self.server_marker = server_marker

    def _descendants(self) -> dict[int, tuple[int, float, float]]:
        stats: dict[int, tuple[int, float, float]] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None:
                    stats[int(entry)] = st
        found: dict[int, tuple[int, float, float]] = {}
        frontier = [self.me]
        while frontier:
            parent = frontier.pop()
            for pid, st in stats.items():
                if st[0] == parent and pid not in found:
                    found[pid] = st
                    frontier.append(pid)
        return found

    def read(self) -> CPU:
        sandbox = server = 0.0
        for pid, (_, own, reaped) in self._descendants().items():
            if self.server_marker in _cmdline(pid):
                server += own + reaped
            else:
                sandbox += own + reaped
        # Children this process has reaped (a sandbox subprocess that exited) count too.
        gone = resource.getrusage(resource.RUSAGE_CHILDREN)
        return CPU(worker=time.process_time(), sandbox=sandbox + gone.ru_utime + gone.ru_stime, server=server)

    @property
    def server_found(self) -> bool:
        return any(self.server_marker in _cmdline(pid) for pid in self._descendants())
