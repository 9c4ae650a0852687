"""The compute clock: ``ITIMER_REAL``, paused while the code waits for the host, raises
``CodeTimeout`` in the main thread at the limit with the line the code was on."""

from __future__ import annotations

# Start-up time matters (one process per execution): on the hot path the runner uses only
# C modules, because ``signal``, ``json``, ``ast`` and ``threading`` pull in ``enum``,
# ``re`` and ``functools``, which together cost more than the interpreter's own start.
try:
    import _signal as signal
    import _thread
except ImportError:  # pragma: no cover - not CPython
    import _thread  # type: ignore[no-redef]
    import signal  # type: ignore[no-redef]


class CodeTimeout(BaseException):
    """Raised in the main thread at the compute-time limit (BaseException: ``except
    Exception`` in the code does not swallow it)."""


class _Clock:
    """Compute time left, on ITIMER_REAL; paused while any thread waits for the host."""

    def __init__(self, seconds: float) -> None:
        self.limit = seconds
        self.remaining = seconds
        self.waiting = 0
        self.armed = False
        self.lock = _thread.allocate_lock()

    def start(self) -> None:
        signal.signal(signal.SIGALRM, self._expired)
        with self.lock:
            self.armed = True
            if self.waiting == 0:
                signal.setitimer(signal.ITIMER_REAL, max(self.remaining, 1e-6))

    def _expired(self, signum, frame) -> None:
        raise CodeTimeout(f"the code used more than {self.limit:g} s of compute time")

    def pause(self) -> None:
        with self.lock:
            self.waiting += 1
            if self.waiting == 1 and self.armed:
                left = signal.setitimer(signal.ITIMER_REAL, 0)[0]
                self.remaining = left if left > 0 else 0.0

    def resume(self) -> None:
        with self.lock:
            self.waiting -= 1
            if self.waiting == 0 and self.armed:
                signal.setitimer(signal.ITIMER_REAL, max(self.remaining, 1e-6))

    def stop(self) -> None:
        with self.lock:
            self.armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
