"""The sandbox side of the pyodide runtime (``runtimes/pyodide.py``): CPython compiled to
WebAssembly, run by Deno.

* ``distribution.py``: finding Deno; fetching the pinned Pyodide from npm once, verified;
* ``packages.py``: which wheels ``packages=[...]`` needs, or a ``CapabilityError`` up front;
* ``snapshot.py``: the memory snapshot every process starts from, made once;
* ``deno.py``: one Deno process (its permissions are the sandbox) and its token;
* ``pool.py``: warm processes waiting for an execution;
* ``runner.mjs``: the Deno program; ``guest.py``: its Python side inside Pyodide.

``python -m codemode.runtimes.wasm fetch [--package NAME ...]`` fetches and builds everything
ahead of time (CI does, so tests run offline).
"""
