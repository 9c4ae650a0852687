"""Compile and run the code (a standalone execution or a session's cell) to its final message."""

from __future__ import annotations

from .artifacts import _prepare_outputs, _save_outputs
from .channels import _flush_output
from .clock import CodeTimeout, _Clock
from .errors import _PRELUDE, CODE_FILE, PRELUDE_FILE, _error_message

OUTPUT_NAME = "__codemode_output__"


def _compile(code: str):
    """Compile with top-level ``await`` allowed; the last expression statement becomes an
    assignment to ``OUTPUT_NAME`` (the value of the code, as in Monty)."""
    import _ast

    flags = _ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    tree = compile(code, CODE_FILE, "exec", flags | _ast.PyCF_ONLY_AST, dont_inherit=True)
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = tree.body[-1]
        where = {k: getattr(last, k) for k in ("lineno", "col_offset", "end_lineno", "end_col_offset")}
        target = _ast.Name(id=OUTPUT_NAME, ctx=_ast.Store(), **where)
        tree.body[-1] = _ast.Assign(targets=[target], value=last.value, **where)
    return compile(tree, CODE_FILE, "exec", flags, dont_inherit=True)


_RESERVE: list = []  # memory released on MemoryError to report it
_LOOP: list = []  # the event loop of async code


def _run_prelude(source, namespace) -> None:
    """Define what the prelude defines (saved snippets' functions) in the code's namespace,
    under a file name of its own: the code's lines stay the code's, a snippet's frames show as
    ``<snippets>``."""
    if source:
        _PRELUDE[:] = [source]
        exec(compile(source, PRELUDE_FILE, "exec", dont_inherit=True), namespace)


def _run_coroutine(coro) -> None:
    """Run the code's top-level coroutine (code with top-level ``await``) to its end on an
    event loop (the same for every cell of a session). The pyodide runtime's guest replaces
    this: there the event loop is the JavaScript one, already running, and
    ``pyodide.ffi.run_sync`` waits for it."""
    import asyncio

    if not _LOOP:  # one loop for every cell of a session (a task may outlive its cell)
        _LOOP.append(asyncio.new_event_loop())
        asyncio.set_event_loop(_LOOP[0])
    _LOOP[0].run_until_complete(coro)


def _run(code_obj, namespace, clock: _Clock, is_coroutine: bool):
    try:
        save = _prepare_outputs(namespace)
        clock.start()
        try:
            if is_coroutine:
                _run_coroutine(eval(code_obj, namespace))
            else:
                exec(code_obj, namespace)
        finally:
            clock.stop()
        if save is not None:
            _save_outputs(save)
        _flush_output()
        return {"type": "done", "output": namespace.get(OUTPUT_NAME)}
    except CodeTimeout as exc:
        return _error_message("timeout", exc, "TimeoutError")
    except MemoryError as exc:
        _RESERVE.clear()  # room to format the error while the code's data is still alive
        return _error_message("resource", exc, message=str(exc) or "out of memory (the memory limit was reached)")
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return {"type": "done", "output": None}
        return _error_message("runtime", exc, message=f"the code called exit({exc.code!r})")
    except BaseException as exc:
        return _error_message("runtime", exc)
