"""The runner's set-up (privileges, limits, stdio) and its run of one bootstrap."""

from __future__ import annotations

import builtins
import os
import sys

try:
    import _signal as signal  # ``signal`` imports ``enum``: start-up time (see channels.py)
except ImportError:  # pragma: no cover - not CPython
    import signal  # type: ignore[no-redef]

from .channels import HttpChannel, StdioChannel, _flush_output
from .clock import _Clock
from .determinism import _install_determinism
from .errors import _SOURCE, _error_message, _syntax_error
from .execute import _RESERVE, _compile, _run, _run_prelude
from .tools import Runner, _install_tools
from .wire import _loads


def _drop_privileges(spec: str) -> None:
    uid, _, gid = spec.partition(":")
    os.setgroups([])
    os.setresgid(int(gid), int(gid), int(gid))
    os.setresuid(int(uid), int(uid), int(uid))
    if os.getuid() == 0 or os.geteuid() == 0:
        raise SystemExit("codemode runner: could not drop root privileges")


def _apply_limits(limits) -> None:
    import resource

    def cap(which, value, hard=None) -> None:
        if value is None:
            return
        value = int(value)
        hard = value if hard is None else int(hard)
        _, old_hard = resource.getrlimit(which)
        if old_hard != resource.RLIM_INFINITY:
            value, hard = min(value, old_hard), min(hard, old_hard)
        resource.setrlimit(which, (value, hard))

    cpu = limits.get("cpu_seconds")
    cap(resource.RLIMIT_CPU, cpu, None if cpu is None else int(cpu) + 2)
    # The data segment (heap and private writable mappings), not the address space: the
    # shared libraries of pandas and matplotlib take 400 MB of address space for 135 MB
    # resident, so an address-space cap of 256 MB refused `import pandas`.
    cap(resource.RLIMIT_DATA, limits.get("memory_bytes"))
    cap(resource.RLIMIT_NPROC, limits.get("processes"))
    cap(resource.RLIMIT_FSIZE, limits.get("file_bytes"))
    cap(resource.RLIMIT_CORE, 0)


def _redirect_stdio():
    """Keep private copies of fds 0 and 1 for the protocol; point the code's stdin at
    /dev/null and its stdout at fd 2 (the output the host drains)."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    import io

    raw = io.BufferedWriter(io.FileIO(1, "w", closefd=False), buffer_size=1 << 16)
    out = io.TextIOWrapper(raw, encoding="utf-8", errors="backslashreplace")
    sys.stdout = sys.stderr = out
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    return os.fdopen(proto_in, "rb"), proto_out


def _close_other_fds(keep) -> None:
    try:
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 256))
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def serve(reader, write_fd: int) -> None:
    """Read the bootstrap from ``reader`` (the protocol's input), run its code (or serve a
    session's cells) and end the process: ``os._exit`` with the final message sent."""
    boot = _loads(reader.readline())
    limits = boot.get("limits", {})
    _apply_limits(limits)
    transport = boot.get("transport", {})
    if transport.get("kind") == "http":
        reader.close()
        os.close(write_fd)
        channel = HttpChannel(transport["url"], transport["token"], transport.get("unix_socket"))
    else:
        channel = StdioChannel(reader, write_fd, marks=bool(boot.get("output_marks")))
    sys.path.extend(p for p in boot.get("sys_path", []) if p not in sys.path)

    clock = _Clock(float(limits.get("timeout_seconds", 30.0)))
    signal.signal(signal.SIGXCPU, clock._expired)
    runner = Runner(channel, clock)
    if boot.get("session"):
        from .session import _serve_session  # (only now: a standalone run never needs it)

        _serve_session(channel, runner, boot)  # never returns
    exit_code = 0
    try:
        code = boot["code"]
        _SOURCE.append(code)
        try:
            code_obj = _compile(code)
        except SyntaxError as exc:
            channel.send(_syntax_error(exc))
            os._exit(0)
        except ValueError as exc:  # e.g. a NUL byte in the source
            channel.send({"type": "error", "kind": "syntax", "error_type": "SyntaxError", "message": str(exc)})
            os._exit(0)
        namespace = {"__name__": "__main__", "__builtins__": builtins}
        namespace.update(boot.get("inputs") or {})
        functions = boot.get("functions", [])
        _install_tools(namespace, runner, functions)
        is_coroutine = bool(code_obj.co_flags & 0x80)  # inspect.CO_COROUTINE
        if is_coroutine or "asyncio" in code or any(f.get("is_async") for f in functions):
            runner.install_event_loop_policy()
        if boot.get("determinism"):
            _install_determinism(boot["determinism"], namespace)
        _run_prelude(boot.get("prelude"), namespace)
        _RESERVE.append(bytearray(4 << 20))
        channel.send({"type": "ready"})
        msg = _run(code_obj, namespace, clock, is_coroutine)
    except BaseException as exc:  # the runner itself failed: report what we can
        msg = _error_message("runtime", exc)
        exit_code = 1
    clock.stop()
    _flush_output()
    try:
        channel.send(msg)
    except (TypeError, ValueError):  # an output JSON cannot hold (e.g. a circular list)
        channel.send({"type": "done", "output": repr(msg.get("output"))})
    os._exit(exit_code)
