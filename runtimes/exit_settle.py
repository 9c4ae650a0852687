"""A moment at interpreter exit for the threads of Rust extensions (Monty; temporalio's bridge)
to finish what they are sending to Python before it finalizes.

Both complete Python awaitables from their own tokio threads with
``loop.call_soon_threadsafe``, which sends a wake-up byte with the GIL released. When a
process's last await is followed at once by interpreter exit, such a thread can try to retake
the GIL while Python finalizes; CPython < 3.14 then ends the thread with ``pthread_exit``, which
cannot unwind Rust frames, and the process aborts (SIGABRT: "Fatal Python error:
PyGILState_Release: thread state ... must be current when releasing") after all its work is
done. Seen with Monty, about one exit in six (pyo3 issue 4874, rust-lang/rust issue 135929),
and with a temporalio client in a short-lived process that starts a workflow and prints its
result (temporalio/sdk-python issue 300; once in our CI, issue 28's stop).

An ``atexit`` hook runs before finalization starts; sleeping in it releases the GIL, so such a
thread finishes its send. Installed once per process, by the first Monty pool and by every
client or worker ``CodeModePlugin`` configures; it costs 0.1 s at exit. Processes that leave
with ``os._exit`` skip both the hook and the hazard.
"""

from __future__ import annotations

import atexit
import time

SETTLE_SECONDS = 0.1
_installed = False


def settle_at_exit() -> None:
    """Install the hook (once per process)."""
    global _installed
    if not _installed:
        _installed = True
        atexit.register(time.sleep, SETTLE_SECONDS)


def installed() -> bool:
    return _installed
