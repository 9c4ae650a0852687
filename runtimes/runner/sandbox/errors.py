"""Errors in-band: the user's line and a traceback without the runner's frames."""

from __future__ import annotations

import os
import sys

CODE_FILE = "<code>"
TOOLS_FILE = "<tools>"
#: Saved snippets' functions, defined before the code runs (``runtimes/prelude.py``).
PRELUDE_FILE = "<snippets>"
#: The runner's frames are hidden from tracebacks: those of any file of this package. Its
#: directory as its code objects name it (``<zip>/codemode_runner`` when imported from the
#: zip, another name in a precompiled copy or in Pyodide's filesystem), so not ``__file__``.
RUNNER_DIR = os.path.dirname(sys._getframe().f_code.co_filename) + os.sep

_SOURCE: list = []  # the user's code, for tracebacks (linecache is loaded lazily)
_PRELUDE: list = []  # the prelude's source, likewise


def _user_traceback(exc: BaseException) -> tuple:
    """(text, line): the traceback without runner or stub frames, and the innermost line of
    the user's code."""
    import traceback

    def trim(te) -> None:
        frames = list(te.stack)
        start = next((i for i, f in enumerate(frames) if f.filename == CODE_FILE), len(frames))
        kept = [f for f in frames[start:] if f.filename != TOOLS_FILE and not f.filename.startswith(RUNNER_DIR)]
        te.stack = traceback.StackSummary.from_list(kept)
        for nested in (te.__cause__, te.__context__):
            if nested is not None:
                trim(nested)

    if _SOURCE:
        import linecache  # only now: it imports tokenize and re, costly at start-up

        linecache.cache[CODE_FILE] = (len(_SOURCE[0]), None, _SOURCE[0].splitlines(True), CODE_FILE)
        if _PRELUDE:
            linecache.cache[PRELUDE_FILE] = (len(_PRELUDE[0]), None, _PRELUDE[0].splitlines(True), PRELUDE_FILE)
    try:
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__, compact=True)
    except TypeError:  # Python < 3.10
        te = traceback.TracebackException(type(exc), exc, exc.__traceback__)
    trim(te)
    line = None
    for frame in te.stack:
        if frame.filename == CODE_FILE:
            line = frame.lineno
    return "".join(te.format()), line


def _code_line(exc: BaseException):
    """The innermost line of the user's code in ``exc``'s traceback (allocation-free)."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == CODE_FILE:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _error_message(kind: str, exc: BaseException, error_type: str | None = None, message: str | None = None):
    line = _code_line(exc)
    try:
        text, line = _user_traceback(exc)
    except BaseException:  # formatting must never hide the error itself
        text = None
    return {
        "type": "error",
        "kind": kind,
        "error_type": error_type or type(exc).__name__,
        "message": str(exc) if message is None else message,
        "line": line,
        "traceback": text,
    }


def _syntax_error(exc: SyntaxError):
    import traceback

    return {
        "type": "error",
        "kind": "syntax",
        "error_type": type(exc).__name__,
        "message": str(exc.msg),
        "line": exc.lineno,
        "traceback": "".join(traceback.format_exception_only(type(exc), exc)),
    }
