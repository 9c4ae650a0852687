"""The integrations are optional: without pydantic-ai the engine and its CLI import and run,
and importing the capability says what to install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import importlib.abc, json, sys

    class NoPydanticAI(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "pydantic_ai" or name.startswith("pydantic_ai."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoPydanticAI())
    import codemode.apps.cli, codemode.worker.plugin, codemode.worker.worker  # the engine and the CLI need none of it
    report = {"loaded": "pydantic_ai" in sys.modules}
    try:
        import codemode.pydantic_ai
    except ImportError as err:
        report["error"] = str(err)
    print(json.dumps(report))
    """
)


def test_the_capability_without_pydantic_ai_says_what_to_install() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["loaded"] is False
    assert "pip install 'durable-codemode[pydantic-ai]'" in report["error"]
