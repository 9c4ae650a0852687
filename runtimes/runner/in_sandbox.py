"""The runner's entry point: the ``__main__.py`` of the zip that every CPython sandbox runs.

``runtimes/runner/package.py`` builds the zip from this file and the runner's package
(``runtimes/runner/sandbox/``, imported in the sandbox as ``codemode_runner``; its
``__init__`` says what the runner does). The host runs ``python -I -S runner.zip
[--drop-to UID:GID] [--warm]`` (or the same through ``package.LAUNCHER``). Standard
library only, Python 3.9 or newer.

Before it reads anything the runner drops its privileges (``--drop-to``, as root in
bubblewrap), keeps private copies of its stdin and stdout for the protocol and closes every
other inherited descriptor. A warm interpreter (``--warm``, ``runtimes/warm_pool.py``) then
imports what every run needs and says so (``WARM_LINE``) before it waits for its bootstrap.
"""

from __future__ import annotations

import os
import sys

from codemode_runner.main import _close_other_fds, _drop_privileges, _redirect_stdio, serve

#: What a warm interpreter writes once it is ready for its bootstrap (``runtimes/warm_pool.py``).
WARM_LINE = b'{"type": "warm"}\n'


def start(argv) -> None:
    if "--drop-to" in argv:
        _drop_privileges(argv[argv.index("--drop-to") + 1])
    reader, write_fd = _redirect_stdio()
    _close_other_fds({reader.fileno(), write_fd})
    if "--warm" in argv:  # a warm interpreter (runtimes/warm_pool.py): what every run needs, now,
        import _ast  # noqa: F401
        import asyncio  # noqa: F401
        import io  # noqa: F401
        import resource  # noqa: F401
        import selectors  # noqa: F401
        import time  # noqa: F401
        import warnings  # noqa: F401

        os.write(write_fd, WARM_LINE)  # then tell the host it waits for its bootstrap
    serve(reader, write_fd)


if __name__ == "__main__":
    start(sys.argv[1:])
