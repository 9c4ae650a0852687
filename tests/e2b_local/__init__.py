"""A local E2B-compatible server, the one fake we allow: E2B's cloud cannot be reached from here.

``python -m tests.e2b_local --port PORT`` serves, on one aiohttp port, the control-plane
REST API and envd's API (files, health, and the process service over Connect RPC with the
JSON codec), routed by the ``E2b-Sandbox-Id`` header as E2B's edge proxy does. The
unmodified ``e2b`` SDK talks to it through ``E2B_API_URL`` and ``E2B_SANDBOX_URL`` (both the
printed URL) and any non-empty ``E2B_API_KEY``. Sandboxes are real local processes in
bubblewrap (``sandboxes.py``); the wire format follows ``../shared/research/e2b-wire.md``.

``LocalE2BServer`` starts it as a subprocess for tests and benchmarks: the server never
shares an event loop with the code under test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class LocalE2BServer:
    """``python -m tests.e2b_local`` in a subprocess on an ephemeral port (the other local
    servers, ``tests.blaxel_local`` and ``tests.modal_local``, start the same way)."""

    #: The server's module, run with ``python -m``; it prints "... listening on URL".
    module = "tests.e2b_local"

    def __init__(self, *, startup_timeout: float = 30.0) -> None:
        self.startup_timeout = startup_timeout
        self.proc: subprocess.Popen[str] | None = None
        self.url = ""

    def start(self) -> LocalE2BServer:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "--port", "0"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until it listens (or dies)
        if "listening on " not in line:
            self.stop()
            raise RuntimeError(f"the local server {self.module} did not start: {line!r}")
        self.url = line.strip().rsplit(" ", 1)[-1]
        return self

    @property
    def env(self) -> dict[str, str]:
        """The SDK's usual variables, pointing at this server."""
        return {"E2B_API_URL": self.url, "E2B_SANDBOX_URL": self.url, "E2B_API_KEY": "local-test-key"}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> LocalE2BServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
