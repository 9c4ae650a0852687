"""The code the peers benchmark sends: the agent workload's programs (every tool call with
keyword arguments), a long run, gathered calls, a big heap, a pandas import, an approval."""

from __future__ import annotations

import re

from bench.agent_workload import Program, agent_code


def keyword_calls(code: str) -> str:
    """Every tool call with keyword arguments: pydantic-ai-harness's stubs make the tools'
    parameters keyword-only, so all systems get the same code written that way."""
    return re.sub(r"\bnoop\(", "noop(i=", re.sub(r"\becho\(", "echo(text=", code))


def program(seed: int) -> Program:
    p = agent_code(seed, approval=False)
    return Program(keyword_calls(p.code), p.groups)


def long_code(calls: int) -> str:
    return f"t = 0\nfor i in range({calls}):\n    t += await noop(i=i)\nt"


def gathered_code(calls: int, width: int = 100) -> str:
    return (
        f"import asyncio\nt = 0\nfor b in range({calls // width}):\n"
        f"    xs = await asyncio.gather(*[noop(i=b * {width} + i) for i in range({width})])\n    t += sum(xs)\nt"
    )


def heap_code(megabytes: int) -> str:
    return f'blob = "x" * {megabytes * 1024 * 1024}\nn = await noop(i=1)\nm = await noop(i=2)\nlen(blob) + n + m'


PANDAS_CODE = "import pandas as pd\nn = await noop(i=1)\nint(pd.DataFrame({'a': [n, 2]}).a.sum())"
APPROVAL_CODE = 'r = await send_report(to="ops@example.com", body="monday")\nr'
