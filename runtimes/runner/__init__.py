"""Our CPython runner: the program that runs the code inside a sandbox, and its host side.
Every runtime that runs real CPython (python, docker, e2b, pyodide) runs this same runner:

* ``sandbox/`` (``codemode_runner`` in the sandbox) and its entry point ``in_sandbox.py``:
  the standard-library-only program that runs inside the sandbox, shipped as one zip
  (``package.py``: built deterministically; its hash names the runner in checkpoints);
* ``bootstrap.py``: what the host sends it first (code, tool stubs, inputs, limits);
* ``driver.py``: the host side of the runner's protocol, shared by those runtimes;
* ``runtime.py``: ``RunnerRuntime``, the lifecycle every such runtime shares (execute,
  sessions, a syntax check for type checking, closing what is live);
* ``provider.py``: the provider interface, the session operations a sandbox that outlives
  the worker implements (docker, e2b, blaxel, modal); ``sandbox_runtime.py`` and
  ``sandbox_run.py``: the lifecycle written once for them (attach, park, re-attach from the
  checkpoint's handle, refuse a sandbox that is gone, destroy, sweep);
* ``process.py``: spawning, output capping, killing and reaping a sandbox process;
* ``mounts.py``: the read-only mounts a request asks for, checked before a sandbox starts.

How the local python runtime jails it is in ``runtimes/jail/``.
"""

from .bootstrap import RUNNER_PATH, Bootstrap, ToolSource, build_bootstrap, tool_source

__all__ = ["RUNNER_PATH", "Bootstrap", "ToolSource", "build_bootstrap", "tool_source"]
