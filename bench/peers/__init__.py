"""The peers benchmark (``python -m bench.peers``): the same agent workload through our
engine and the other ways to run code mode on Temporal, on one dev server, in one run.

Modules that run in the peer's own environment (``tah_*``, ``tool_hooks``) import nothing of
``codemode``; this package's ``__init__`` imports nothing at all."""
