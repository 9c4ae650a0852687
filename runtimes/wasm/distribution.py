"""Deno and Pyodide on this machine: where they are, and fetching Pyodide once.

* **Deno** is PyPI's ``deno`` package (the ``pyodide`` extra: ``pip install
  'durable-codemode[pyodide]'``), whose ``deno.find_deno_bin()`` gives the binary; else
  ``CODEMODE_DENO``, else ``deno`` on ``PATH``.
* **Pyodide** is the npm package ``pyodide`` at ``PYODIDE_VERSION``: its tarball, fetched
  once from the npm registry (``npm_config_registry`` or registry.npmjs.org), must match
  the integrity hash pinned here (the registry's own ``dist.integrity``), and is unpacked
  into ``<cache>/dist/<version>/``. Offline after that. ``python -m codemode.runtimes.wasm fetch``
  does it ahead of time (CI does).
* Or a **Pyodide distribution** already on disk (``PyodideRuntime(distribution=DIR)``):
  the ``full/`` directory of a Pyodide release has the core files plus its built packages
  (numpy, pandas...), which ``packages=["numpy"]`` then loads from there.

The cache root is ``CODEMODE_PYODIDE_DIR``, else ``<codemode data dir>/cache/pyodide``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import functools
import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CapabilityError

PYODIDE_VERSION = "314.0.7"
#: ``npm view pyodide@314.0.7 dist.integrity``: the tarball must hash to this.
PYODIDE_INTEGRITY = "sha512-0YvXxEhfEdpLfb/XkM2BFAeMROq0iMUX2bzzH9pOttyMcWkwq+HbE5uyuGD82LN7y2q+SNvi/6V5JEsOlD2R1A=="
NPM_REGISTRY = "https://registry.npmjs.org"
CACHE_ENV = "CODEMODE_PYODIDE_DIR"
DENO_ENV = "CODEMODE_DENO"
#: The files of a Pyodide distribution the runner loads.
CORE_FILES = ("pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json")


def cache_root() -> Path:
    """Where Pyodide, its snapshots, downloaded wheels and Deno's own cache live."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    from ..paths import cache_dir

    return cache_dir("pyodide")


def find_deno(explicit: str | None = None) -> str:
    """The Deno binary, or a ``CapabilityError`` that says how to get one."""
    candidates: list[str] = []
    if explicit:
        candidates.append(explicit)
    elif os.environ.get(DENO_ENV):
        candidates.append(os.environ[DENO_ENV])
    else:
        try:
            import deno  # PyPI `deno`

            candidates.append(str(deno.find_deno_bin()))
        except Exception:  # not installed, or no binary for this platform
            pass
        found = shutil.which("deno")
        if found:
            candidates.append(found)
    for candidate in candidates:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise CapabilityError(
        "the pyodide runtime needs Deno, which is not installed here: pip install 'durable-codemode[pyodide]' "
        f"(PyPI `deno`), or point {DENO_ENV} at a deno binary"
        + (f" ({candidates[0]} is not an executable file)" if candidates else ""),
        error_type="CapabilityError",
    )


@dataclass(frozen=True)
class Distribution:
    """A Pyodide distribution on disk: the core files, its lock file, maybe its packages."""

    path: Path
    info: dict[str, Any] = field(compare=False, repr=False)
    packages: dict[str, Any] = field(compare=False, repr=False)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Distribution:
        root = Path(path).resolve()
        missing = [name for name in CORE_FILES if not (root / name).is_file()]
        if missing:
            raise CapabilityError(
                f"{root} is not a Pyodide distribution: {', '.join(missing)} missing", error_type="CapabilityError"
            )
        lock = json.loads((root / "pyodide-lock.json").read_text())
        return cls(path=root, info=dict(lock.get("info", {})), packages=dict(lock.get("packages", {})))

    @property
    def index_url(self) -> str:
        """Pyodide's ``indexURL``: under Deno a directory path, not a ``file:`` URL."""
        return str(self.path) + "/"

    @property
    def module_url(self) -> str:
        return (self.path / "pyodide.mjs").as_uri()

    @property
    def python_version(self) -> str:
        """``3.14`` (from the lock file's ``3.14.2``)."""
        return ".".join(str(self.info.get("python", "3")).split(".")[:2])

    @property
    def python_tag(self) -> str:
        return "cp" + self.python_version.replace(".", "")

    @property
    def platform_tag(self) -> str:
        """The wheel platform tag of Pyodide's ABI (``pyemscripten_2026_0_wasm32``)."""
        return f"pyemscripten_{self.info.get('abi_version', '')}_{self.info.get('arch', 'wasm32')}"

    @functools.cached_property
    def key(self) -> str:
        """Names this build (for snapshots): its lock file and its WebAssembly binary."""
        digest = hashlib.sha256((self.path / "pyodide-lock.json").read_bytes())
        digest.update(str((self.path / "pyodide.asm.wasm").stat().st_size).encode())
        return digest.hexdigest()[:16]

    def has_package(self, name: str) -> bool:
        """The lock file lists ``name`` and its wheel is in this directory (a ``full/``
        distribution; the npm package lists every package but ships none)."""
        entry = self.packages.get(name)
        return bool(entry) and (self.path / str(entry.get("file_name", ""))).is_file()


def registry_url() -> str:
    return (os.environ.get("npm_config_registry") or os.environ.get("NPM_CONFIG_REGISTRY") or NPM_REGISTRY).rstrip("/")


def ensure_pyodide(root: Path | None = None, *, registry: str | None = None) -> Distribution:
    """The pinned Pyodide in the cache, fetched (and verified) on first use."""
    root = root or cache_root()
    target = root / "dist" / PYODIDE_VERSION
    if (target / ".complete").is_file():
        return Distribution.load(target)
    with file_lock(root / "dist" / ".lock"):
        if not (target / ".complete").is_file():
            _fetch(target, registry or registry_url())
    return Distribution.load(target)


def _fetch(target: Path, registry: str) -> None:
    url = f"{registry}/pyodide/-/pyodide-{PYODIDE_VERSION}.tgz"
    try:
        with urllib.request.urlopen(url, timeout=120) as resp:
            data = resp.read()
    except (urllib.error.URLError, OSError) as exc:
        raise CapabilityError(
            f"the pyodide runtime needs Pyodide {PYODIDE_VERSION}, which is not in {target} and could not be "
            f"fetched from {url} ({exc}): run `python -m codemode.runtimes.wasm fetch` where the npm registry is reachable, "
            f"or set {CACHE_ENV} to a directory that has it",
            error_type="CapabilityError",
        ) from None
    algorithm, _, expected = PYODIDE_INTEGRITY.partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise CapabilityError(
            f"the Pyodide tarball from {url} does not match its pinned integrity hash "
            f"({algorithm}-{actual[:16]}... != {PYODIDE_INTEGRITY[:24]}...): refused",
            error_type="CapabilityError",
        )
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("package/") and m.isfile()]
            for member in members:
                member.name = member.name[len("package/") :]
            tar.extractall(staging, members=members, filter="data")
        (staging / ".complete").write_text(PYODIDE_INTEGRITY + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock between processes (workers sharing a cache fetch or build once)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
