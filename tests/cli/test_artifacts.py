"""`codemode artifacts ID [NAME -o FILE]` against a real dev server and a `codemode worker`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.runner import codemode

pytestmark = pytest.mark.usefixtures("cli_worker")

CODE = """
import os
open(os.path.join(OUTPUTS_DIR, "table.csv"), "w").write("a,b\\n1,2\\n")
save_artifact("bytes/all.bin", bytes(range(256)))
"done"
"""


async def test_run_then_list_and_fetch(cli_env: dict[str, str], tmp_path: Path) -> None:
    code = tmp_path / "make_files.py"
    code.write_text(CODE)
    run = await codemode("run", str(code), "--runtime", "python", env=cli_env)
    assert run.rc == 0, run
    assert "artifacts: bytes/all.bin (256 B), table.csv (8 B)" in run.err
    execution_id = run.err.split("fetch: codemode artifacts ", 1)[1].split()[0]

    listed = await codemode("artifacts", execution_id, env=cli_env)
    assert listed.rc == 0, listed
    lines = listed.out.splitlines()
    assert [ln.split()[0] for ln in lines] == ["bytes/all.bin", "table.csv"]
    assert "text/csv" in lines[1]
    as_json = json.loads((await codemode("artifacts", execution_id, "--json", env=cli_env)).out)
    assert [a["name"] for a in as_json["artifacts"]] == ["bytes/all.bin", "table.csv"]

    target = tmp_path / "out.bin"
    fetched = await codemode("artifacts", execution_id, "bytes/all.bin", "-o", str(target), env=cli_env)
    assert fetched.rc == 0, fetched
    assert target.read_bytes() == bytes(range(256))
    to_stdout = await codemode("artifacts", execution_id, "table.csv", "-o", "-", env=cli_env)
    assert to_stdout.out == "a,b\n1,2\n"

    missing = await codemode("artifacts", execution_id, "nope.txt", env=cli_env)
    assert missing.rc == 2 and "has no artifact 'nope.txt' (it has: bytes/all.bin, table.csv)" in missing.err


async def test_the_forecast_chart_example(cli_env: dict[str, str], tmp_path: Path) -> None:
    """examples/forecast_chart.py: pandas and matplotlib on the python runtime, the chart fetched."""
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    run = await codemode(
        "run", "examples/forecast_chart.py", "--runtime", "python", "--tools", "examples.tools", "--json", env=cli_env
    )
    assert run.rc == 0, run
    outcome = json.loads(run.out)
    assert outcome["output"] == {"London": 16.0, "Paris": 20.0, "Tokyo": 26.0}
    assert [(a["name"], a["mime_type"]) for a in outcome["artifacts"]] == [
        ("forecast.csv", "text/csv"),
        ("forecast.png", "image/png"),
    ]
    target = tmp_path / "forecast.png"
    fetched = await codemode("artifacts", outcome["execution_id"], "forecast.png", "-o", str(target), env=cli_env)
    assert fetched.rc == 0, fetched
    assert target.read_bytes().startswith(b"\x89PNG") and target.stat().st_size == outcome["artifacts"][1]["size"]
