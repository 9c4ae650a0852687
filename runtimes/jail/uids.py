"""A host uid of its own for each running sandbox, when the worker is root.

The kernel counts ``RLIMIT_NPROC`` (``max_processes``) per real uid across the whole host.
Were every sandbox to run as uid 65534, all of them would share one budget: concurrent runs
on one host (several executions of a worker, several workers) failed to start threads
(``RuntimeError: can't start new thread``, seen with two test processes), and a fork bomb in
one run could starve every other. So each sandbox leases a uid from a range no account uses
(``UID_BASE`` + 0..``UID_SLOTS``-1), held by an ``flock`` on ``<LEASE_DIR>/<uid>``: every
worker process on the host sees the same leases, and the kernel drops a lock when its holder
dies, so a crashed worker leaks nothing. Without a writable lease directory the sandbox runs
as 65534, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import random

#: The leased range: above the uids distributions allocate (and below 2**31).
UID_BASE = 1_900_000
UID_SLOTS = 4096
#: Where the leases are: tmpfs, root's own (the leases are only taken by a root worker).
LEASE_DIR = os.environ.get("CODEMODE_UID_LEASE_DIR", "/run/codemode-uids")


class UidLease:
    """A uid held until ``release()`` (or until this process ends)."""

    def __init__(self, uid: int, fd: int | None) -> None:
        self.uid = uid
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the file drops its flock
            self._fd = None


def lease_uid(fallback: int) -> UidLease:
    """A free uid of the range, or ``fallback`` (unleased) if none can be had."""
    try:
        os.makedirs(LEASE_DIR, mode=0o700, exist_ok=True)
    except OSError:
        return UidLease(fallback, None)
    start = random.randrange(UID_SLOTS)  # (not sequential: fewer collisions between processes)
    for i in range(UID_SLOTS):
        uid = UID_BASE + (start + i) % UID_SLOTS
        try:
            fd = os.open(os.path.join(LEASE_DIR, str(uid)), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            return UidLease(fallback, None)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return UidLease(uid, fd)
    return UidLease(fallback, None)
