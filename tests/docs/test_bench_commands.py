"""The benchmarks the page quotes run from one command each (issue 49): each imports, and a
tiny configuration of it runs to its table on a real dev server. Nothing here is timed: the
figures are the benchmark's business, on a machine chosen for it; this only keeps the commands
working as the code under them moves."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str) -> str:
    proc = subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.parametrize(
    "module",
    [
        "bench.peers.__main__",
        "bench.peers.systems",
        "bench.peers.breaks",
        "bench.peers.pai_agent",
        "bench.monday",
        "bench.monday_worker",
        "bench.first_call",
    ],
)
def test_the_bench_modules_import(module: str) -> None:
    importlib.import_module(module)


def test_peers_runs_a_tiny_workload() -> None:
    out = run(
        "-m", "bench.peers", "--agents", "2", "--runs", "1", "--systems", "floor,monty,python", "--phases", "default"
    )
    rows = [line for line in out.splitlines() if line.startswith(("| floor |", "| monty |", "| python |"))]
    assert len(rows) == 3, out
    assert all(row.endswith("| ok |") for row in rows), rows  # no errors, every call ran once


@pytest.mark.slow  # three worker processes and a dev server: 15-30 s on two shared cores
def test_monday_parks_and_approves_a_few_runs() -> None:
    out = run(
        "-m", "bench.monday", "--count", "3", "--wait", "0.5", "--settle", "0", "--variants", "plain", "--idle-runs", "2",
        "--max-cached", "2",  # fewer than wait: the runs evicted while they wait wake by replaying
    )  # fmt: skip
    rows = [line for line in out.splitlines() if line.startswith("| plain |")]
    assert [r.split("|")[2].strip() for r in rows] == ["floor", "ours"], out
    # completed, succeeded, tool runs (distinct): each of the 3 runs once
    assert all(r.rstrip().endswith("| 3 | 3 | 3 (3) |") for r in rows), rows
    assert "workflow cache of both workers: 2 runs" in out


def test_first_call_splits_both_runtimes() -> None:
    out = run("bench/first_call.py", "--agents", "1", "--runs", "1")
    assert "| monty | start -> first tool scheduled |" in out, out
    assert "| python | start -> first tool scheduled |" in out, out
    assert "python / monty first call (p50):" in out
