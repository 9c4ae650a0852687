"""The sandbox side of runtimes that run real CPython (local bubblewrap and E2B run the same
runner; Docker would too):

* ``runner.py``: the standard-library-only program that runs inside the sandbox;
* ``bootstrap.py``: what the host sends it first (code, tool stubs, inputs, limits);
* ``driver.py``: the host side of the runner's protocol, shared by those runtimes;
* ``bwrap.py``: the bubblewrap command line that jails it;
* ``process.py``: spawning, output capping, killing and reaping the process.
"""

from .bootstrap import RUNNER_PATH, Bootstrap, ToolSource, build_bootstrap, tool_source
from .bwrap import bwrap_argv, find_bwrap, probe_interpreter

__all__ = [
    "RUNNER_PATH",
    "Bootstrap",
    "ToolSource",
    "bwrap_argv",
    "build_bootstrap",
    "find_bwrap",
    "probe_interpreter",
    "tool_source",
]
