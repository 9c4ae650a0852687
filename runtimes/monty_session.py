"""A Monty REPL session kept across cells (``_MontySession``): one pool worker whose VM keeps
the globals between feeds (``runtimes/session.py`` is the protocol)."""

from __future__ import annotations

import keyword
import logging
from collections.abc import Mapping
from typing import Any

import pydantic_monty as pm

from .checkpoint import encode_checkpoint
from .execution import CodeExecution
from .monty_checker import bound_before, type_check_stubs
from .monty_run import MONTY_VERSION, _MontyRun, _StdoutSink
from .session import CodeSession, bound_names, declared_globals
from .signatures import FunctionsSpec, normalize_functions
from .types import Determinism, ExecutionLimits

log = logging.getLogger(__name__)


class _MontySession:
    """A Monty REPL session kept across cells: one pool worker whose VM keeps the globals
    between feeds. Its state between cells is the session's own dump (``load_session``
    restores it on any worker with the same Monty version); mid-cell it is the snapshot
    of the suspended feed, which carries the whole session too."""

    def __init__(
        self,
        runtime: Any,  # the MontyRuntime that runs it
        session: Any,
        limits: ExecutionLimits,
        determinism: Determinism | None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.runtime = runtime
        self.pm = session
        self.limits = limits
        self.determinism = determinism
        meta = meta or {}
        #: Every global a cell may have bound (Monty cannot list its globals): what the
        #: type checker is told exists.
        self.names: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("names", ()))
        #: What the probe found so far (name -> type), the names bound since it last ran, and
        #: the names functions declare ``global`` (a call may rebind them: probed every time).
        self.known: dict[str, str] = {str(k): str(v) for k, v in dict(meta.get("known") or {}).items()}
        self.fresh: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("fresh", ()))
        self.globals: dict[str, None] = dict.fromkeys(str(n) for n in meta.get("globals", ()))
        self.current: _MontyRun | None = None
        self.closed = False

    def meta(self) -> dict[str, Any]:
        names, fresh, kept = list(self.names), list(self.fresh), list(self.globals)
        return {"names": names, "known": self.known, "fresh": fresh, "globals": kept}

    def alive(self) -> bool:
        return not self.closed and self.pm is not None

    def busy(self) -> bool:
        return self.current is not None and not self.current.closed

    async def run_cell(
        self, code: str, functions: FunctionsSpec, inputs: Mapping[str, Any] | None
    ) -> CodeExecution:
        rt = self.runtime
        signatures = normalize_functions(functions)
        if rt.type_check_enabled:
            bound = bound_before(signatures, inputs or {}, self.names)
            await rt._checker.check_once(code, type_check_stubs(signatures), bound)
        for name in [*(inputs or {}), *bound_names(code)]:
            self.names[name] = None
            self.fresh[name] = None
        for name in declared_globals(code):
            self.globals[name] = None
        sink = _StdoutSink(self.limits.max_stdout_bytes)
        run = _MontyRun(rt, self.pm, signatures, self.limits, sink, code=code, determinism=self.determinism, cell=self)
        self.current = run
        return await rt._feed(run, code, inputs)

    async def dump(self) -> bytes:
        meta = {
            **self.meta(),
            "limits": self.limits.model_dump(mode="json"),
            "determinism": self.determinism.model_dump(mode="json") if self.determinism else None,
        }
        return encode_checkpoint(SESSION_FORMAT, MONTY_VERSION, meta, await self.pm.dump())

    async def variables(self) -> dict[str, str]:
        """The globals' types. Monty keeps the source of every feed in the session, so the
        probe is one expression (``[type(a).__name__, ...]``, no function, nothing bound)
        about the names bound since it last ran (and ``global`` ones): what it adds to the
        state is proportional to the cells' own code. A name that is not there (bound in a
        branch that did not run) raises NameError; the probe runs again without it."""
        names = [n for n in {**self.fresh, **self.globals} if n.isidentifier() and not keyword.iskeyword(n)]
        if not names:
            return dict(self.known)
        missing: set[str] = set()
        while True:
            asked = [n for n in names if n not in missing]
            if not asked:
                snap = None
                break
            try:
                snap = await self.pm.feed_start(
                    "[" + ", ".join(f"type({n}).__name__" for n in asked) + "]",
                    print_callback=lambda stream, text: None,
                )
                if isinstance(snap, pm.AsyncNameLookupSnapshot):
                    # Not there. (Answering the lookup with a value would bind the name: let
                    # it raise NameError, and ask again without it.)
                    missing.add(str(snap.variable_name))
                    await snap.resume()
                    continue
                break
            except pm.MontyRuntimeError:
                continue  # the NameError of the missing name
            except pm.MontyError as err:
                log.info("could not list the session's variables: %s", err)
                return dict(self.known)
        names = [n for n in names if n not in missing]
        for name in missing:
            self.known.pop(name, None)
        if snap is None:
            self.fresh.clear()
            return dict(self.known)
        if not isinstance(snap, pm.MontyComplete) or not isinstance(snap.output, list):
            await self.close()  # (type() shadowed by something that calls a tool): not usable as is
            return dict(self.known)
        for name, kind in zip(names, snap.output):
            self.known[name] = str(kind)
        self.fresh.clear()
        return dict(self.known)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        session, self.pm = self.pm, None
        try:
            await session.__aexit__(None, None, None)
        except Exception:
            log.debug("closing a Monty session failed", exc_info=True)

    def handle(self) -> CodeSession:
        return CodeSession(
            runtime="monty",
            run_cell=self.run_cell,
            dump=self.dump,
            variables=self.variables,
            close=self.close,
            alive=self.alive,
            busy=self.busy,
        )


#: The envelope runtime name of a session's state between cells (``load_session``), as
#: opposed to a suspended feed's snapshot ("monty", ``load_snapshot``).
SESSION_FORMAT = "monty-session"
