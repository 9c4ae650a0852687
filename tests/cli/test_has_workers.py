"""A stopped worker's poller stays listed by the server for a while: a command started right
after it (a client restarting ``codemode mcp``) must not count on a process that is gone."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from codemode.client.backend import gone_local_process as _gone_local_process


def test_a_local_process_that_exited_is_gone() -> None:
    proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    host = socket.gethostname()
    assert _gone_local_process(f"{proc.stdout.strip()}@{host}")
    assert not _gone_local_process(f"{os.getpid()}@{host}")
    # A worker says which approvers file it reads after its pid@host (issue 45): still its process.
    assert _gone_local_process(f"{proc.stdout.strip()}@{host} codemode-approvers=none")
    assert not _gone_local_process(f"{os.getpid()}@{host} codemode-approvers=3d8b4fa96347cd44")
    # Another machine's worker, or an identity of another shape: trusted as listed.
    assert not _gone_local_process(f"{proc.stdout.strip()}@another-host")
    assert not _gone_local_process("my-worker")
