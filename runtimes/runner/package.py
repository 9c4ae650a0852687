"""The runner as one zip archive: what every runtime ships into its sandbox.

The runner is a package of small files (``runtimes/runner/sandbox/``, ``codemode_runner``
in the sandbox) and an entry point (``in_sandbox.py``, the zip's ``__main__.py``); Python
runs a zip with a ``__main__.py`` as a program (``python -I -S runner.zip``). The zip is
built in memory, deterministically (entries sorted, fixed timestamps and attributes, stored
uncompressed: a deflate's bytes depend on the zlib build), so its bytes and its hash are
the same on every machine; the hash names the runner in checkpoints
(``sandbox_run.CHECKPOINT_VERSION``), as the single file's did.

* Remote sandboxes (docker, E2B, Blaxel, Modal) receive ``runner_zip()``'s bytes.
* Bubblewrap mounts a file and runs it with ``launch_args()``: ``compiled_runner()`` (the
  same modules as bytecode for the worker's own interpreter: CPython never caches the
  bytecode of a program it runs, and compiling the runner costs about as much as starting
  the interpreter) or, for another interpreter, ``runner_zip_path()`` (the zip itself,
  written once to a private cache).
* Pyodide unpacks ``runner_files()`` into its filesystem (``runtimes/wasm/snapshot.py``).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import importlib.util
import io
import marshal
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

#: The runner's entry point on the host (the zip's ``__main__.py``).
RUNNER_PATH = Path(__file__).with_name("in_sandbox.py")
#: The runner's package on the host; in the sandbox it is ``PACKAGE``.
PACKAGE_DIR = Path(__file__).with_name("sandbox")
PACKAGE = "codemode_runner"
#: How a local interpreter runs the zip: ``python -c LAUNCHER runner.zip [args]`` does what
#: ``python runner.zip [args]`` does (the zip first on ``sys.path``, its ``__main__`` run with
#: ``__name__ == "__main__"``, ``sys.argv`` from the zip on) without ``runpy``, which CPython
#: uses to run a zip and which imports ``importlib.util``, ``contextlib`` and ``collections``:
#: about a third of the runner's start. ``zipimport`` is loaded at every interpreter's start.
LAUNCHER = (
    "import sys, zipimport\n"
    "del sys.argv[0]\n"
    "sys.path[:1 if sys.path[:1] == [''] else 0] = [sys.argv[0]]\n"
    "main = zipimport.zipimporter(sys.argv[0]).get_code('__main__')\n"
    "exec(main, {'__name__': '__main__', '__builtins__': __builtins__})"
)
#: Every entry's timestamp (the earliest a zip can hold) and its mode (a regular file, 0644).
_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_FILE_ATTR = 0o100644 << 16


def launch_args(zip_path: str | os.PathLike[str]) -> list[str]:
    """The interpreter's arguments (after its flags) that run the runner's zip at ``zip_path``."""
    return ["-c", LAUNCHER, os.fspath(zip_path)]


def runner_files() -> dict[str, bytes]:
    """The zip's entries, by name, sorted: ``__main__.py`` and ``codemode_runner/*.py``."""
    files = {"__main__.py": RUNNER_PATH.read_bytes()}
    for path in PACKAGE_DIR.glob("*.py"):
        files[f"{PACKAGE}/{path.name}"] = path.read_bytes()
    return dict(sorted(files.items()))


def build_zip(files: dict[str, bytes]) -> bytes:
    """A zip of ``files`` whose bytes depend on nothing else (not the clock, the file
    system's order or modes, the zlib build)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, _DATE_TIME)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # unix, whatever the host
            info.create_version = info.extract_version = 20
            info.external_attr = _FILE_ATTR
            archive.writestr(info, files[name])
    return buffer.getvalue()


@functools.cache
def runner_zip() -> bytes:
    """The runner, as remote sandboxes receive it."""
    return build_zip(runner_files())


@functools.cache
def runner_digest() -> str:
    """sha256 of ``runner_zip()``: what a checkpoint's version names."""
    return hashlib.sha256(runner_zip()).hexdigest()


@functools.cache
def runner_zip_path() -> Path:
    """``runner_zip()`` as a file (for an interpreter other than the worker's)."""
    return _cached_file(f"runner-{runner_digest()[:16]}.zip", runner_zip)


@functools.cache
def compiled_runner() -> Path:
    """The runner compiled for this interpreter: a zip of the same entries as bytecode only
    (zipimport runs a ``.pyc`` without its source), named by the runner's hash and the
    interpreter. The code objects name ``codemode_runner/<file>.py`` (the runner hides the
    frames of its package's directory from tracebacks, whatever it is called)."""
    key = runner_digest().encode() + sys.version.encode() + sys.implementation.cache_tag.encode()
    return _cached_file(f"runner-{hashlib.sha256(key).hexdigest()[:16]}.pyc.zip", _compiled_zip)


def _compiled_zip() -> bytes:
    compiled = {}
    for name, source in runner_files().items():
        code = compile(source, name, "exec", dont_inherit=True)
        # A timestamp .pyc with no source beside it: zipimport has nothing to check it against.
        header = importlib.util.MAGIC_NUMBER + bytes(8) + (len(source) & 0xFFFFFFFF).to_bytes(4, "little")
        compiled[name + "c"] = header + marshal.dumps(code)
    return build_zip(compiled)


def _cached_file(name: str, content) -> Path:
    target = _private_cache_dir() / name
    if not target.exists():  # written to a temporary name and renamed: atomic
        tmp = target.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_bytes(content())
        tmp.replace(target)
    return target


@functools.cache
def _private_cache_dir() -> Path:
    """``~/.cache/codemode`` when it is ours and nobody else can write it (the runner
    runs with the execution's secrets), else a temporary directory removed at exit."""
    try:
        from platformdirs import user_cache_dir

        directory = Path(user_cache_dir("codemode"))
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = directory.stat()
        if st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            return directory
    except Exception:  # no home, read-only home: fall through
        pass
    directory = Path(tempfile.mkdtemp(prefix="codemode-runner-"))
    atexit.register(shutil.rmtree, directory, True)
    return directory
