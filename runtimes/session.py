"""``CodeSession``: a namespace that outlives one execution (a notebook kernel).

Cells run in it one at a time. Each cell is an ordinary ``CodeExecution`` (the same
protocol, limits, errors and checkpoints as a standalone run), and what a cell leaves in
the globals (variables, functions, imports) the next cell sees. What a cell did before an
uncaught error stays, as in a notebook.

``CodeRuntime.open_session(...)`` opens one: fresh, or from ``dump()`` bytes taken between
cells (Monty: the VM's session state; E2B: the paused sandbox it names). A runtime that
cannot dump (local CPython) keeps the process itself; when it is gone, the session is
rebuilt by ``replay_cells``: the earlier cells run again in a fresh session, each answered
from its recorded tool results (``runtimes/journal_replay.py``), under the session's seed and clock.

The same handle class for every runtime, behaviour injected as callables, like
``CodeExecution``.
"""

from __future__ import annotations

import ast
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import CodeExecutionError, ExecutionProtocolError, NonDeterminismError
from .execution import CodeExecution
from .journal_replay import JournalEntry, replay
from .signatures import FunctionsSpec
from .types import ExecutionResult

RunCellFn = Callable[[str, FunctionsSpec, Mapping[str, Any] | None], Awaitable[CodeExecution]]
DumpFn = Callable[[], Awaitable["bytes | None"]]
VariablesFn = Callable[[], Awaitable[dict[str, str]]]
CloseFn = Callable[[], Awaitable[None]]

#: Variables ``variables()`` reports at most (a session can hold thousands of names).
MAX_VARIABLES = 500
#: Names a session keeps for itself in the globals; never shown as the user's variables.
PRIVATE_PREFIX = "__codemode"


async def _no_dump() -> bytes | None:
    return None


async def _no_variables() -> dict[str, str]:
    return {}


class CodeSession:
    """A live namespace in a sandbox. ``run(code)`` starts a cell (a ``CodeExecution``);
    only one cell runs at a time, and the session is usable again once the cell finished
    (a result, or an error of the code). A cell abandoned half-way (closed before its end)
    takes the session with it: its namespace is mid-statement.

    :param run_cell: start ``code`` in the namespace with these tools and inputs.
    :param dump: the session's state between cells, as bytes ``open_session(state=)``
        restores on any worker; None when the runtime cannot dump (it keeps the process).
    :param variables: the globals the cells defined: name -> type name.
    :param close: release the sandbox (idempotent).
    :param alive: whether the sandbox still holds the namespace.
    """

    def __init__(
        self,
        *,
        runtime: str,
        run_cell: RunCellFn,
        close: CloseFn,
        alive: Callable[[], bool],
        busy: Callable[[], bool],
        dump: DumpFn | None = None,
        variables: VariablesFn | None = None,
    ) -> None:
        self.runtime = runtime
        self._run_cell = run_cell
        self._dump = dump or _no_dump
        self._variables = variables or _no_variables
        self._close = close
        self._alive = alive
        self._busy = busy
        self._closed = False
        #: Cells started in this session (including those replayed into it).
        self.cells = 0
        #: What the host opened it with (limits, options, seed), so a live session is only
        #: reused by a cell that asks for the same.
        self.tag: str | None = None

    @property
    def alive(self) -> bool:
        return not self._closed and self._alive()

    @property
    def busy(self) -> bool:
        """A cell is running (not finished, not abandoned)."""
        return self.alive and self._busy()

    async def run(
        self, code: str, *, functions: FunctionsSpec, inputs: Mapping[str, Any] | None = None
    ) -> CodeExecution:
        """Start a cell. Raises ``CodeSyntaxError`` / ``CodeTypeError`` when it cannot start
        (the session is unchanged); errors while it runs surface from ``next()``."""
        if not self.alive:
            raise ExecutionProtocolError("the session is closed")
        if self._busy():
            raise ExecutionProtocolError("a cell is still running in this session")
        self.cells += 1
        execution = await self._run_cell(code, functions, inputs)
        execution.session = self
        return execution

    async def dump(self) -> bytes | None:
        """The state between cells (None: this runtime keeps the live sandbox instead)."""
        if not self.alive or self._busy():
            return None
        return await self._dump()

    async def variables(self) -> dict[str, str]:
        """Name -> type name of the globals the cells left (at most ``MAX_VARIABLES``)."""
        if not self.alive or self._busy():
            return {}
        found = await self._variables()
        shown = {k: v for k, v in found.items() if not k.startswith(PRIVATE_PREFIX)}
        return dict(sorted(shown.items())[:MAX_VARIABLES])

    async def close(self) -> None:
        if not self._closed:
            self._closed = True
            await self._close()


# -- replay -----------------------------------------------------------------------------------


@dataclass
class CellReplay:
    """What replaying one earlier cell needs: its code, inputs and tools, its recorded tool
    results, and whether it ended with an error of its code (its effects before the error
    are part of the session too)."""

    code: str
    functions: FunctionsSpec
    inputs: Mapping[str, Any] = field(default_factory=dict)
    journal: Sequence[JournalEntry] = ()
    raised: bool = False


async def replay_cells(session: CodeSession, cells: Iterable[CellReplay]) -> None:
    """Bring a fresh session to where the recorded cells left it: run each again, answering
    its calls from its journal (no tool runs). A cell must end the way it ended (a result,
    or an error of its code) and make the recorded calls, else ``NonDeterminismError``."""
    for number, cell in enumerate(cells, 1):
        try:
            execution = await session.run(cell.code, functions=cell.functions, inputs=cell.inputs)
            event = await replay(execution, cell.journal)
        except NonDeterminismError as err:
            raise NonDeterminismError(
                f"rebuilding the session, earlier cell {number}: {err.message}",
                error_type="NonDeterminismError",
                line=err.line,
            ) from None
        except CodeExecutionError as err:
            if not cell.raised:
                raise NonDeterminismError(
                    f"rebuilding the session: an earlier cell ({number}) completed when it ran but now raises "
                    f"{err.error_type}: {err.message}",
                    error_type="NonDeterminismError",
                ) from None
            continue
        if not isinstance(event, ExecutionResult):
            await execution.close()
            raise NonDeterminismError(
                f"rebuilding the session: an earlier cell ({number}) makes calls its journal does not hold",
                error_type="NonDeterminismError",
            )
        if cell.raised:
            raise NonDeterminismError(
                f"rebuilding the session: an earlier cell ({number}) raised when it ran but now completes",
                error_type="NonDeterminismError",
            )


# -- names a cell binds -----------------------------------------------------------------------


def bound_names(code: str) -> list[str]:
    """The global names ``code`` may bind at module level (assignments, ``def``, ``class``,
    imports, loop and ``with`` targets, ``global`` declarations in its functions), in order
    of appearance. For runtimes that cannot list their globals (Monty): the candidates whose
    presence and type the session then asks the sandbox about."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    found: dict[str, None] = {}

    def target(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            found[node.id] = None
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                target(elt)
        elif isinstance(node, ast.Starred):
            target(node.value)

    def declared_global(body: Iterable[ast.AST]) -> None:
        for sub in body:
            for inner in ast.walk(sub):
                if isinstance(inner, ast.Global):
                    for name in inner.names:
                        found[name] = None

    def walrus(node: ast.AST) -> None:
        for inner in ast.walk(node):
            if isinstance(inner, ast.NamedExpr):
                target(inner.target)

    def statements(body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found[stmt.name] = None
                declared_global(stmt.body)
                continue
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    target(t)
            elif isinstance(stmt, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
                target(stmt.target)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        target(item.optional_vars)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    found[alias.asname or alias.name.split(".")[0]] = None
            elif isinstance(stmt, ast.ImportFrom):
                for alias in stmt.names:
                    if alias.name != "*":
                        found[alias.asname or alias.name] = None
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                for handler in getattr(stmt, "handlers", []):
                    if handler.name:
                        found[handler.name] = None
                    statements(handler.body)
            walrus(stmt)
            for attr in ("body", "orelse", "finalbody"):
                inner = getattr(stmt, attr, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    statements(inner)
            if isinstance(stmt, ast.Match):
                for case in stmt.cases:
                    for inner in ast.walk(case.pattern):
                        name = getattr(inner, "name", None) or getattr(inner, "rest", None)
                        if isinstance(name, str):
                            found[name] = None
                    statements(case.body)

    statements(tree.body)
    return list(found)


def declared_globals(code: str) -> list[str]:
    """Names the functions of ``code`` declare ``global`` (calling them later may rebind them)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []
    return list(dict.fromkeys(n for node in ast.walk(tree) if isinstance(node, ast.Global) for n in node.names))
