"""Read-only mounts a request asks for (``SandboxOptions.mounts``), checked before a sandbox
starts: a missing host path would otherwise be created by the engine (as root) or fail deep
inside bubblewrap, and a mount over the sandbox's own directories would hide them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from ..errors import CapabilityError

#: Paths no mount may cover: the sandbox's own filesystems.
RESERVED = ("/", "/proc", "/dev", "/sys", "/tmp")


def check_mounts(mounts: Mapping[str, str], reserved: Iterable[str] = ()) -> None:
    """``CapabilityError`` for a mount whose host path does not exist or that would land on
    one of ``RESERVED`` or ``reserved``."""
    taken = {os.path.normpath(p) for p in (*RESERVED, *reserved)}
    for src, dst in mounts.items():
        if not os.path.exists(src):
            raise CapabilityError(f"mount {src}:{dst}: {src} does not exist on the host")
        if os.path.normpath(dst) in taken:
            raise CapabilityError(f"mount {src}:{dst}: cannot mount over the sandbox's own {dst}")
