"""Type-checking Monty code against the tool stubs before it runs, with the checker kept warm.

Monty type-checks with ty inside its worker process. ty builds its environment (builtins,
typeshed, the stubs) once per session: on a fresh session a check costs about 15 ms of the
worker's CPU, in a session that has checked before about 1 ms (measured with 40 programs of
``bench/agent_workload.py``, issue 28). Every execution of new code pays a check, so checks
run in a few sessions of their own small pool, kept between checks (``CHECKERS``), keyed by
their stubs. The execution then runs in an unchecked session of the runtime's pool: ty's memory
is not charged to the code's heap limit.

A session checks a snippet by feeding it with a zero time budget, so at most a few
instructions run: ty first, then the VM stops with TimeoutError. A snippet that raised adds
nothing to the session's checking context (only a snippet that runs to its end does), so each
check sees the stubs and its own code only. A session whose snippet ended any other way (it
completed, suspended on a call, or its worker failed) is closed, never reused; after
``CHECKS_PER_SESSION`` checks it is replaced, which bounds what ty keeps in memory.

A verdict that passed is kept per (code, stubs) (``TYPE_CHECK_VERDICTS``): a replay, a retried
start or an agent re-running a script skips the check.

The names the code finds bound before it runs (its inputs; in a session, what earlier cells
bound) are not in the stubs, which would then differ from one execution to the next and start
a fresh session for almost every cell: a first line binds them all to ``SESSION_VALUE``
(declared ``Any`` in the stubs), and a diagnostic's line numbers are shifted back past it
(``bound_first``), so the stubs depend on the tools alone and one warm session serves them.
"""

from __future__ import annotations

import asyncio
import hashlib
import keyword
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic_monty as pm

from .errors import CodeExecutionError, CodeSyntaxError
from .monty_errors import LOCATION_RE
from .signatures import ToolSignature, render_stubs

log = logging.getLogger(__name__)

#: Type-check verdicts a runtime keeps (32 bytes each).
TYPE_CHECK_VERDICTS = 4096
#: The heap of a type-check session (the checker's own memory counts against it).
TYPE_CHECK_MEMORY = 256 * 1024 * 1024
#: Sessions kept for checking, each in a Monty worker process of the checker's own pool.
CHECKERS = 2
#: Checks one session serves before it is replaced.
CHECKS_PER_SESSION = 500


@dataclass
class _Slot:
    session: Any = None
    stubs: str = ""
    uses: int = 0


class TypeChecker:
    """The type checks of one ``MontyRuntime``: ``open_pool`` starts the checker's pool of
    ``sessions`` workers, ``map_error`` turns Monty's errors into ours."""

    def __init__(
        self,
        open_pool: Callable[[int], Awaitable[Any]],
        map_error: Callable[[BaseException], Exception],
        os_policy: Mapping[str, Any] | None,
        *,
        sessions: int = CHECKERS,
    ) -> None:
        self._open_pool = open_pool
        self._map_error = map_error
        # Sleeps return at once: a check never waits on the code's clock.
        self._os_policy = {**{k: v for k, v in (os_policy or {}).items() if k != "sleep_system_max"}, "sleep": "zero"}
        self._sessions = sessions
        self._passed: OrderedDict[bytes, None] = OrderedDict()
        self._pool: Any = None
        self._slots: asyncio.Queue[_Slot] | None = None
        self._lock = asyncio.Lock()

    async def check_once(self, code: str, stubs: str, bound: Iterable[str] = ()) -> None:
        """``check``, unless this code passed against these stubs (and names bound) before."""
        first = bound_first(code, bound)
        verdict = hashlib.sha256(f"{len(stubs)}:{stubs}\0{first}{code}".encode()).digest()
        if verdict in self._passed:
            return
        await self.check(code, stubs, bound)
        self._passed[verdict] = None
        while len(self._passed) > TYPE_CHECK_VERDICTS:
            self._passed.popitem(last=False)

    async def check(self, code: str, stubs: str, bound: Iterable[str] = ()) -> None:
        """Raise ``CodeTypeError`` (or ``CodeSyntaxError``) when ty refuses ``code``, in which
        the names ``bound`` are bound before it runs (to a value ty knows as ``Any``)."""
        first = bound_first(code, bound)
        if not first:
            await self._check(code, stubs)
            return
        if "__future__" in code:  # it must begin the file: the names go into the stubs
            await self._check(code, stubs + "".join(f"{name}: Any\n" for name in bound))
            return
        try:
            await self._check(first + code, stubs)
        except CodeExecutionError as err:
            raise _shifted(err) from None

    async def _check(self, code: str, stubs: str) -> None:
        slots = await self._ready()
        slot = await slots.get()
        clean = False
        try:
            if slot.session is not None and (slot.stubs != stubs or slot.uses >= CHECKS_PER_SESSION):
                await _close(slot)
            if slot.session is None:
                slot.session = await self._open(stubs)
                slot.stubs, slot.uses = stubs, 0
            slot.uses += 1
            try:
                await slot.session.feed_start(code, print_callback=_drop)
            except (pm.MontyTypingError, pm.MontySyntaxError) as err:
                clean = True
                raise self._map_error(err) from None
            except pm.MontyRuntimeError as err:
                clean = True  # it raised (the zero budget, or before it): nothing was added
                mapped = self._map_error(err)
                if isinstance(mapped, CodeSyntaxError):  # syntax Monty does not support (class inheritance, ...)
                    raise mapped from None
            except pm.MontyError:
                pass  # the worker failed: not the code's verdict (the run will say)
        finally:
            if not clean:
                await _close(slot)
            slots.put_nowait(slot)

    async def _ready(self) -> asyncio.Queue[_Slot]:
        async with self._lock:
            if self._slots is None:
                self._pool = await self._open_pool(self._sessions)
                self._slots = asyncio.Queue()
                for _ in range(self._sessions):
                    self._slots.put_nowait(_Slot())
            return self._slots

    async def _open(self, stubs: str) -> Any:
        session = self._pool.checkout(
            limits={"max_feed_duration_secs": 0.0, "max_memory": TYPE_CHECK_MEMORY},
            type_check=True,
            type_check_stubs=stubs,
            os_policy=self._os_policy,
        )
        try:
            await session.__aenter__()
        except pm.MontyError as err:
            raise self._map_error(err) from None
        return session

    async def close_if_idle(self) -> None:
        """Close the checker's pool unless a check is under way (it reopens on the next)."""
        if self._slots is None or self._slots.qsize() == self._sessions:
            await self.aclose()

    async def aclose(self) -> None:
        async with self._lock:
            slots, self._slots = self._slots, None
            pool, self._pool = self._pool, None
        if slots is not None:
            while not slots.empty():
                await _close(slots.get_nowait())
        if pool is not None:
            await pool.__aexit__(None, None, None)


async def _close(slot: _Slot) -> None:
    session, slot.session = slot.session, None
    if session is not None:
        try:
            await session.__aexit__(None, None, None)
        except Exception:  # noqa: BLE001 - a checker that will not close is dropped all the same
            log.debug("closing a type-check session failed", exc_info=True)


def _drop(stream: str, text: str) -> None:
    """A check prints nothing anyone reads."""


#: Exception classes Monty 1.4 raises and catches at run time but its bundled ty does not
#: know as builtins (measured): declared for type checking only, so
#: ``except PermissionError:`` type-checks (a denied approval raises exactly that).
_TYPE_CHECK_PRELUDE = """
class PermissionError(OSError): ...
class FileNotFoundError(OSError): ...
class FileExistsError(OSError): ...
class UnicodeDecodeError(ValueError): ...
class ImportError(Exception): ...
class ModuleNotFoundError(ImportError): ...
"""


#: What the names bound before the code runs are bound to, for the check (declared ``Any``;
#: no leading underscore: the code sees the stubs as a star import, which skips those).
SESSION_VALUE = "codemode_bound_value"


def type_check_stubs(signatures: Mapping[str, ToolSignature]) -> str:
    """The tool stubs (and ``SESSION_VALUE``) the code is checked against."""
    # The prelude first: ty quotes the lines around a tool's stub in its diagnostics.
    return _TYPE_CHECK_PRELUDE.lstrip() + render_stubs(signatures, with_docstrings=False) + f"{SESSION_VALUE}: Any\n"


def bound_before(signatures: Mapping[str, ToolSignature], *groups: Iterable[str]) -> list[str]:
    """The names of ``groups`` (inputs; a session's earlier bindings) the code finds bound,
    less the tools' own names."""
    declared = {s.namespace or s.name for s in signatures.values()}
    names = dict.fromkeys(n for group in groups for n in group)
    return [n for n in names if n.isidentifier() and not keyword.iskeyword(n) and n not in declared]


def bound_first(code: str, bound: Iterable[str]) -> str:
    """The line checked before ``code`` that binds ``bound`` (empty when there is none)."""
    names = list(bound)
    return " = ".join([*names, SESSION_VALUE]) + "\n" if names else ""


_GUTTER_RE = re.compile(r"^( *)(\d+)( \|.*)$")


def _shifted(err: CodeExecutionError) -> CodeExecutionError:
    """A diagnostic of the code checked after ``bound_first``'s line, as of the code alone:
    line numbers one less, the bound line's quote dropped."""

    def arrow(m: re.Match[str]) -> str:
        return f"{m.group(1)}{max(int(m.group(2)) - 1, 1)}:{m.group(3)}"

    lines: list[str] = []
    dropping = False
    for text in (err.traceback or "").splitlines():
        gutter = _GUTTER_RE.match(text)
        if gutter:
            number = int(gutter.group(2)) - 1
            dropping = number < 1  # the bound line, and the marks under it
            width = len(gutter.group(1)) + len(gutter.group(2))
            text = str(number).rjust(width) + gutter.group(3)
        elif not _MARKS_RE.match(text):
            dropping = False
        if not dropping:
            lines.append(LOCATION_RE.sub(arrow, text))
    line = max(err.line - 1, 1) if err.line is not None else None
    return type(err)(err.message, error_type=err.error_type, line=line, traceback="\n".join(lines) or None)


_MARKS_RE = re.compile(r"^ *\|(?! *$)")
