"""What the peers benchmark measured, and how it prints it: a phase's figures per system
(``Measured``), a worker configuration (``Config``), the markdown tables and the JSON file."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.cpu import CPU
from bench.history_bytes import HistoryBytes


@dataclass
class Measured:
    system: str
    phase: str
    calls: int = 0
    wall: float = float("nan")
    cpu: CPU = field(default_factory=CPU)
    latencies: list[float] = field(default_factory=list)
    bytes: HistoryBytes | None = None
    errors: list[str] = field(default_factory=list)
    n_errors: int = 0
    counted: int = 0  # tool executions counted where the tools ran
    evictions: int = 0
    note: str = ""

    @property
    def rate(self) -> float:
        return self.calls / self.wall if self.wall else float("nan")

    @property
    def cpu_ms(self) -> float:
        return (self.cpu.worker + self.cpu.sandbox + self.cpu.server) * 1000

    @property
    def worker_ms(self) -> float:
        return (self.cpu.worker + self.cpu.sandbox) * 1000

    @property
    def server_ms(self) -> float:
        return self.cpu.server * 1000

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")

    @property
    def history(self) -> float:
        return self.bytes.history if self.bytes is not None else float("nan")


@dataclass
class Config:
    """A worker configuration: its workflow cache (None: the SDK's default, 1,000) and an
    eviction of each run after every ``evict_every`` calls (0: none)."""

    name: str
    max_cached: int | None = None
    evict_every: int = 0


def gist(output: str) -> str:
    """One line of what a break test printed: its error line when it has one."""
    lines = [ln.strip() for ln in output.replace("\\n", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"(Error|error|limit|terminated|refused|changed|stayed)", ln)]
    text = errors[-1] if errors else (lines[-1] if lines else "")
    return text.replace("|", "/")[:240]


def percent(x: float) -> str:
    return f"{x:.2f}x"


def print_phase_table(title: str, rows: list[Measured]) -> None:
    floor = next((r for r in rows if r.system == "floor"), None)
    print(f"\n### {title}\n")
    print(
        "| system | calls/s | vs floor | CPU/call ms worker+server | vs floor | p95 ms | vs floor | history B/call | vs floor | checks |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f = floor or r
        check = (
            "ok"
            if r.n_errors == 0 and r.counted == r.calls
            else f"{r.n_errors} errors, {r.counted}/{r.calls} calls ran"
        )
        if r.evictions:
            check += f", {r.evictions} evictions"
        print(
            f"| {r.system} | {r.rate:.0f} | {percent(r.rate / f.rate)} | {r.cpu_ms:.1f} = {r.worker_ms:.1f}+{r.server_ms:.1f} "
            f"| {percent(r.cpu_ms / f.cpu_ms)} | {r.pct(0.95):.0f} | {percent(r.pct(0.95) / f.pct(0.95))} "
            f"| {r.history:.0f} | {percent(r.history / f.history)} | {check} |"
        )
    for r in rows:
        for e in r.errors:
            print(f"  {r.system}: {e}")
    by = {r.system: r for r in rows}
    for ours in ("monty", "python"):
        for peer in ("tah", "pah"):
            if ours in by and peer in by:
                o, p = by[ours], by[peer]
                print(
                    f"  {ours} vs {peer}: calls/s {o.rate / p.rate:.2f}x, CPU per call {o.cpu_ms / p.cpu_ms:.2f}x "
                    f"({o.cpu_ms:.1f} vs {p.cpu_ms:.1f} ms), p95 {o.pct(0.95) / p.pct(0.95):.2f}x, "
                    f"history per call {o.history / p.history:.2f}x"
                )
    if "ours-agent" in by and "pah" in by:
        o, p = by["ours-agent"], by["pah"]
        print(
            f"  ours-agent vs pah (the same agent): calls/s {o.rate / p.rate:.2f}x, CPU per call {o.cpu_ms / p.cpu_ms:.2f}x"
        )
    for r in rows:
        if r.bytes is not None:
            print(f"  {r.system} history per call by event type (payload bytes): {r.bytes.top()}")


def print_long_table(calls: int, longs: list[dict[str, Any]]) -> None:
    print(f"\n### One execution of {calls} sequential calls\n")
    print("| run | system | total s | first 100 calls s | last 100 calls s | last/first | CPU/call ms | calls ran |")
    print("|---|---|---|---|---|---|---|---|")
    for r in longs:
        print(
            f"| {r['config']} | {r['system']} | {r['seconds']:.1f}{'' if r['ok'] else ' (failed)'} | {r['first100']:.2f} "
            f"| {r['last100']:.2f} | {r['last100'] / r['first100']:.2f}x | {r['cpu_ms']:.1f} | {r['calls']} |"
        )


def print_breaks_table(breaks: list[dict[str, Any]]) -> None:
    print("\n### Where each breaks\n")
    print("| test | system | ok | seconds | calls ran | what happened |")
    print("|---|---|---|---|---|---|")
    for b in breaks:
        what = gist(b["output"])
        print(
            f"| {b['test']} | {b['system']} | {'yes' if b['ok'] else 'no'} | {b['seconds']:.1f} | {b['calls']} | {what} |"
        )


def write_json(
    path: str, results: dict[str, list[Measured]], longs: list[dict[str, Any]], breaks: list[dict[str, Any]]
) -> None:
    """Every figure of the run, for the benchmarks page (``--json FILE``)."""
    fields = ("system", "phase", "calls", "wall", "n_errors", "counted", "evictions")
    phases = {
        k: [
            {
                **{f: getattr(r, f) for f in fields},
                "rate": r.rate,
                "cpu_ms": r.cpu_ms,
                "worker_ms": r.worker_ms,
                "server_ms": r.server_ms,
                "p95_ms": r.pct(0.95),
                "history": r.history,
            }
            for r in rows
        ]
        for k, rows in results.items()
    }
    doc = {"load": os.getloadavg(), "phases": phases, "long": longs, "breaks": breaks}
    Path(path).write_text(json.dumps(doc, indent=1, default=str))
