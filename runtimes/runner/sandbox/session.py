"""Session mode: one namespace, many cells."""

from __future__ import annotations

import builtins

try:
    import _signal as signal  # ``signal`` imports ``enum``: start-up time (see channels.py)
except ImportError:  # pragma: no cover - not CPython
    import signal  # type: ignore[no-redef]

from .artifacts import OUTPUTS_GLOBAL
from .channels import _flush_output
from .clock import _Clock
from .determinism import _install_determinism
from .errors import _SOURCE, _error_message, _syntax_error
from .execute import _RESERVE, OUTPUT_NAME, _compile, _run
from .tools import Runner, ToolNamespace, _install_tools


def _serve_session(channel, runner: Runner, boot) -> None:
    """Session mode (bootstrap ``session``): one namespace, many cells. Each ``cell``
    message (``code``, ``functions``, ``inputs``, ``limits``) runs in the namespace the
    earlier cells left; its calls are numbered from 1; the reply is the usual ``done`` or
    ``error`` plus ``variables`` (name -> type name), and the runner waits for the next cell.
    What a cell did before an error stays. Stdio channels only (the reader thread receives
    the cells); the host closing the channel ends the process."""
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    namespace.update(boot.get("inputs") or {})
    runner.install_event_loop_policy()  # any later cell may use asyncio
    if boot.get("determinism"):
        _install_determinism(boot["determinism"], namespace)  # one seed and clock for the whole session
    _RESERVE.append(bytearray(4 << 20))
    slot = channel.expect_cell()
    channel.send({"type": "ready"})
    while True:
        cell = slot.wait()
        slot = channel.expect_cell()
        channel.begin_cell()
        try:
            reply = _run_cell(channel, runner, cell, namespace)
        except BaseException as exc:  # the runner itself failed: report it, stay usable
            reply = _error_message("runtime", exc)
        namespace.pop(OUTPUT_NAME, None)
        reply["variables"] = _variables(namespace)
        _flush_output()
        try:
            channel.send(reply)
        except (TypeError, ValueError):  # an output JSON cannot hold
            reply["output"] = repr(reply.get("output"))
            channel.send(reply)


def _run_cell(channel, runner: Runner, cell, namespace):
    code = cell.get("code") or ""
    limits = cell.get("limits") or {}
    clock = _Clock(float(limits.get("timeout_seconds", 30.0)))
    runner.clock = clock
    runner.reported = None  # call ids start again at 1: a "blocked" on "1" is news again
    signal.signal(signal.SIGXCPU, clock._expired)
    _cpu_budget(limits.get("cpu_seconds"))
    _SOURCE[:] = [code]
    _install_tools(namespace, runner, cell.get("functions", []))
    namespace.update(cell.get("inputs") or {})
    try:
        code_obj = _compile(code)
    except SyntaxError as exc:
        return _syntax_error(exc)
    except ValueError as exc:
        return {"type": "error", "kind": "syntax", "error_type": "SyntaxError", "message": str(exc)}
    channel.send({"type": "ready"})
    is_coroutine = bool(code_obj.co_flags & 0x80)
    return _run(code_obj, namespace, clock, is_coroutine)


def _cpu_budget(seconds) -> None:
    """``RLIMIT_CPU`` counts the whole process: give this cell ``seconds`` beyond what the
    earlier cells used (the soft limit; SIGXCPU is the cell's timeout)."""
    if seconds is None:
        return
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    want = int(usage.ru_utime + usage.ru_stime) + int(seconds)
    if hard != resource.RLIM_INFINITY:
        want = min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (want, hard))
    except (ValueError, OSError):
        pass


#: Variables a cell's reply lists at most.
_MAX_VARIABLES = 500


def _variables(namespace):
    """Name -> type name of what the cells left in the namespace (not our tool stubs)."""
    found = {}
    for name, value in list(namespace.items()):
        if name.startswith("__") or getattr(value, "__codemode_tool__", False) or isinstance(value, ToolNamespace):
            continue
        if name == OUTPUTS_GLOBAL:  # ours, like the tool stubs
            continue
        found[name] = type(value).__name__
        if len(found) >= _MAX_VARIABLES:
            break
    return found
