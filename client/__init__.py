"""The client library: what a program (and each application in ``apps/``) uses to reach code
mode through Temporal.

* ``backend.py``: open a backend: a client, plus the embedded server and a worker when needed.
* ``executions.py``, ``sessions.py``: start an execution, or send a session its next cell.
* ``following.py``, ``call_progress.py``: follow a run, its status and its tool calls; decide.
* ``signing.py``: signed decisions at the doors (``--by``/``--key``, ``CODEMODE_APPROVER``).
* ``requests.py``: checks before starting (a request's size, the search attributes).
* ``artifacts.py``: read what a run saved.
* ``display.py``: the words a person reads for calls, outcomes and the audit.
* ``histories/``: read and verify an execution's history (the audit, signed decisions,
  ``--verify``, a session as a notebook).

Connecting is the worker layer's (``codemode.worker.connection``: workers and clients reach
Temporal the same way); ``connect`` is served from here too."""
