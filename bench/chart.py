"""The benchmarks page's chart: each figure the benches reported, as a ratio to the floor
measured in the same run (a range where runs differed), beside its goal.

The figures are the ones docs/benchmarks.md states, written once here; the chart is a plain
SVG (no plotting library), committed as docs/assets/benchmarks.svg::

    python bench/chart.py            # write it
    python bench/chart.py --check    # exit 1 if the committed file is not what this draws

A test runs ``--check``, so a figure changed here and not in the chart (or the reverse) fails.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from html import escape
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "docs" / "assets" / "benchmarks.svg"


@dataclass(frozen=True)
class Figure:
    label: str
    low: float
    high: float
    goal: float | None
    #: ``max``: at most the goal is good (a cost); ``min``: at least the goal (a rate).
    kind: str = "max"


#: (what, low, high, goal): ratios to the floor of the same run. Sources: the bench named in
#: docs/benchmarks.md and the guides (bench/<name>.py).
FIGURES: tuple[Figure, ...] = (
    Figure("tool call vs bare activity (temporal_steps)", 1.01, 1.01, None),
    Figure("10 gathered calls vs 1 call (temporal_steps)", 1.00, 1.00, None),
    Figure("throughput, 50 concurrent runs (temporal_steps)", 0.82, 0.83, 0.80, "min"),
    Figure("run_code via pydantic-ai vs start_execution (agent_overhead)", 1.29, 1.33, 1.10),
    Figure("new code, calls/s vs bare, N=20-200: monty (agent_workload)", 0.53, 0.75, 0.85, "min"),
    Figure("new code, calls/s vs bare, N=20-200: python (agent_workload)", 0.44, 0.53, 0.85, "min"),
    Figure("MCP execute vs start_execution, CPU/call, N=20 (agent_workload)", 1.06, 1.14, None),
    Figure("MCP execute vs codemode run's path (mcp_front)", 0.97, 1.02, 1.10),
    Figure("MCP tool call vs activity + direct SDK call (mcp_tools)", 0.79, 0.91, 1.10),
    Figure("CLI tool call vs activity + bare subprocess (cli_tools)", 1.06, 1.21, 1.10),
    Figure("encrypted vs clear, per call (encryption)", 1.003, 1.003, None),
    Figure("session cell vs fresh run: monty (sessions)", 1.57, 1.62, 1.15),
    Figure("session cell vs fresh run: python (sessions)", 0.51, 0.57, 1.00),
    Figure("session cell vs fresh run: e2b (sessions)", 0.58, 0.58, 1.10),
    Figure("docker first call vs bare containers.run (docker_runtime)", 0.5, 1.0, 1.5),
    Figure("pyodide run of 1 vs python's (pyodide_runtime)", 0.30, 0.76, None),
    Figure("pyodide gathered call vs python's, N=200 (pyodide_gather)", 3.5, 3.9, 3.0),
)

LABEL_W, PLOT_W, ROW_H, TOP, MAX_X = 420, 360, 26, 40, 2.0


def x(value: float) -> float:
    return LABEL_W + PLOT_W * min(value, MAX_X) / MAX_X


def draw(figures: tuple[Figure, ...] = FIGURES) -> str:
    height = TOP + ROW_H * len(figures) + 48
    width = LABEL_W + PLOT_W + 80
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">'
        ),
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{LABEL_W}" y="16" font-weight="bold">ratio to the floor of the same run (1.0 = the floor)</text>',
    ]
    for tick in (0.0, 0.5, 1.0, 1.5, 2.0):
        tx = x(tick)
        dash = "" if tick == 1.0 else ' stroke-dasharray="2,3"'
        out.append(f'<line x1="{tx:.1f}" y1="{TOP - 8}" x2="{tx:.1f}" y2="{height - 38}" stroke="#999"{dash}/>')
        out.append(f'<text x="{tx:.1f}" y="{height - 22}" text-anchor="middle">{tick:.1f}x</text>')
    for i, f in enumerate(figures):
        y = TOP + ROW_H * i
        good = f.goal is None or (f.high <= f.goal if f.kind == "max" else f.low >= f.goal)
        colour = "#2e7d32" if good else "#c62828"
        out.append(f'<text x="{LABEL_W - 8}" y="{y + 14}" text-anchor="end">{escape(f.label)}</text>')
        x0, x1 = x(min(f.low, f.high)), x(max(f.low, f.high))
        out.append(f'<rect x="{x0:.1f}" y="{y + 4}" width="{max(x1 - x0, 3):.1f}" height="14" fill="{colour}" rx="2"/>')
        right = x1
        if f.goal is not None:
            gx = x(f.goal)
            right = max(right, gx)
            out.append(
                f'<line x1="{gx:.1f}" y1="{y + 1}" x2="{gx:.1f}" y2="{y + 21}" stroke="black" stroke-width="2"/>'
            )
        value = f"{f.low:g}x" if f.low == f.high else f"{f.low:g}-{f.high:g}x"
        out.append(f'<text x="{right + 6:.1f}" y="{y + 15}" fill="#333">{value}</text>')
    out.append(
        f'<text x="{LABEL_W}" y="{height - 4}" fill="#555">bar: measured (range over runs); '
        "black tick: the goal; green: goal met</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed chart is out of date")
    args = parser.parse_args()
    svg = draw()
    if args.check:
        if not OUT.is_file() or OUT.read_text() != svg:
            print(f"{OUT} is out of date: run python bench/chart.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(svg)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
