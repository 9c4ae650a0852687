"""The local python runtime's jail for the runner (``runtimes/runner/``) on the worker's host:

* ``bwrap.py``: the bubblewrap command line (namespaces, read-only mounts, limits);
* ``seccomp.py``: the filter that refuses new user namespaces;
* ``uids.py``: a host uid of its own for each sandbox when the worker is root.
"""

from .bwrap import bwrap_argv, find_bwrap, probe_interpreter

__all__ = ["bwrap_argv", "find_bwrap", "probe_interpreter"]
