"""Packages for Pyodide: which wheels an execution's ``packages=[...]`` needs, found before
anything starts, or a ``CapabilityError`` saying why not (seed 004: reject what cannot run
up front).

Where a package comes from, first match wins:

1. The Pyodide distribution, when its lock file lists the package and the wheel is in the
   directory (a release's ``full/`` directory: numpy, pandas... built for Pyodide). The
   npm package lists them all but ships none, so this only happens with
   ``PyodideRuntime(distribution=...)``.
2. pip, run by the host: ``pip download --only-binary=:all:`` for Pyodide's interpreter
   and platform (``--platform pyemscripten_2026_0_wasm32 --python-version 3.14
   --implementation cp --abi cp314``), so only pure-Python wheels and wheels built for
   Pyodide's ABI qualify, with their dependencies. It looks in the local wheel directories
   (``wheel_dirs``), in the cache of wheels already downloaded, then (unless downloads are
   off) on the package index pip is configured with. What it picked is recorded per
   request, so the next execution asking for the same packages needs no pip and no network.

A package with no usable wheel (numpy has no Pyodide wheel on PyPI; pandas only for an
older ABI) is refused with pip's reason and what would provide it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import CapabilityError
from .distribution import Distribution, file_lock

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
#: pip's reason for a requirement it cannot satisfy.
_NOT_FOUND = re.compile(r"(?:No matching distribution found for|satisfies the requirement) ([^\s(]+)")
PIP_TIMEOUT_SECONDS = 600.0


def canonical_name(requirement: str) -> str:
    """PEP 503's normalized project name of a requirement (``Typing_Extensions>=4`` ->
    ``typing-extensions``)."""
    match = _NAME.match(requirement)
    if not match:
        raise CapabilityError(f"{requirement!r} is not a package name", error_type="CapabilityError")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


@dataclass(frozen=True)
class ResolvedPackages:
    """What a process loads (``pyodide.loadPackage``): names from the distribution's lock
    file and wheel paths; ``imports``: the top-level modules of the requested packages."""

    load: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    #: Directories the process must be allowed to read.
    read_paths: tuple[str, ...] = ()

    @property
    def wheels(self) -> tuple[Path, ...]:
        return tuple(Path(item) for item in self.load if item.endswith(".whl"))

    def __add__(self, other: ResolvedPackages) -> ResolvedPackages:
        def merge(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(dict.fromkeys((*a, *b)))

        return ResolvedPackages(
            load=merge(self.load, other.load),
            imports=merge(self.imports, other.imports),
            read_paths=merge(self.read_paths, other.read_paths),
        )


class PackageResolver:
    """Resolves ``packages=[...]`` for one distribution, with a cache of wheels and of
    resolutions under ``cache`` (``<cache>/wheels``, ``<cache>/resolutions``)."""

    def __init__(
        self,
        dist: Distribution,
        cache: Path,
        *,
        wheel_dirs: Sequence[str | os.PathLike[str]] = (),
        download: bool = True,
        python: str = sys.executable,
    ) -> None:
        self.dist = dist
        self.wheel_cache = cache / "wheels"
        self.resolutions = cache / "resolutions"
        self.wheel_dirs = tuple(str(Path(d).resolve()) for d in wheel_dirs)
        self.download = download
        self.python = python
        self._locks: dict[str, asyncio.Lock] = {}
        #: Refusals of this process (pip is not asked again for a package it has no wheel of).
        self._refusals: dict[str, CapabilityError] = {}

    async def resolve(self, requirements: Sequence[str]) -> ResolvedPackages:
        if not requirements:
            return ResolvedPackages()
        from_dist = [r for r in requirements if self.dist.has_package(canonical_name(r))]
        from_pip = [r for r in requirements if r not in from_dist]
        names = [canonical_name(r) for r in from_dist]
        resolved = ResolvedPackages(
            load=tuple(names),
            imports=tuple(str(i) for n in names for i in (self.dist.packages[n].get("imports") or [])[:1]),
            read_paths=(str(self.dist.path),) if names else (),
        )
        if from_pip:
            resolved = resolved + await self._resolve_with_pip(from_pip)
        return resolved

    # -- pip ------------------------------------------------------------------------------

    def _key(self, requirements: Sequence[str]) -> str:
        text = json.dumps(
            [sorted(requirements), self.dist.platform_tag, self.dist.python_tag, self.wheel_dirs, self.download]
        )
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    async def _resolve_with_pip(self, requirements: Sequence[str]) -> ResolvedPackages:
        key = self._key(requirements)
        async with self._locks.setdefault(key, asyncio.Lock()):
            if key in self._refusals:
                raise self._refusals[key]
            recorded = self._recorded(key)
            if recorded is None:
                try:
                    recorded = await asyncio.to_thread(self._pip_locked, key, requirements)
                except CapabilityError as err:
                    if _NOT_FOUND.search(err.message):  # not a network failure: it will not change
                        self._refusals[key] = err
                    raise
        files, imports = recorded
        return ResolvedPackages(
            load=tuple(str(self.wheel_cache / f) for f in files),
            imports=tuple(imports),
            read_paths=(str(self.wheel_cache),),
        )

    def _recorded(self, key: str) -> tuple[list[str], list[str]] | None:
        try:
            data = json.loads((self.resolutions / f"{key}.json").read_text())
        except (OSError, ValueError):
            return None
        files = [str(f) for f in data.get("wheels", [])]
        if not all((self.wheel_cache / f).is_file() for f in files):
            return None
        return files, [str(i) for i in data.get("imports", [])]

    def _pip_locked(self, key: str, requirements: Sequence[str]) -> tuple[list[str], list[str]]:
        with file_lock(self.resolutions / ".lock"):
            recorded = self._recorded(key)
            if recorded is not None:
                return recorded
            return self._pip(key, requirements)

    def _pip(self, key: str, requirements: Sequence[str]) -> tuple[list[str], list[str]]:
        import subprocess

        self.wheel_cache.mkdir(parents=True, exist_ok=True)
        self.resolutions.mkdir(parents=True, exist_ok=True)
        dest = Path(tempfile.mkdtemp(prefix=".pip-", dir=self.wheel_cache.parent))
        try:
            argv = [
                self.python, "-m", "pip", "download", "--disable-pip-version-check", "--no-input",
                "--only-binary=:all:", "--platform", self.dist.platform_tag,
                "--python-version", self.dist.python_version, "--implementation", "cp",
                "--abi", self.dist.python_tag, "--abi", "abi3", "--abi", "none",
                "--dest", str(dest), "--find-links", str(self.wheel_cache),
            ]  # fmt: skip
            for directory in self.wheel_dirs:
                argv += ["--find-links", directory]
            if not self.download:
                argv.append("--no-index")
            try:
                proc = subprocess.run(
                    [*argv, *requirements], capture_output=True, text=True, timeout=PIP_TIMEOUT_SECONDS
                )
            except subprocess.TimeoutExpired:
                raise self._refused(requirements, f"pip took more than {PIP_TIMEOUT_SECONDS:g} s") from None
            if proc.returncode != 0:
                raise self._refused(requirements, proc.stderr or proc.stdout)
            files = sorted(p.name for p in dest.iterdir() if p.name.endswith(".whl"))
            for name in files:
                if not (self.wheel_cache / name).exists():
                    shutil.move(str(dest / name), self.wheel_cache / name)
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        wanted = {canonical_name(r) for r in requirements}
        imports: list[str] = []
        for name in files:
            if canonical_name(name.split("-")[0]) in wanted:
                imports += top_level_modules(self.wheel_cache / name)
        record = {"requirements": list(requirements), "wheels": files, "imports": imports}
        tmp = self.resolutions / f".{key}.tmp"
        tmp.write_text(json.dumps(record, indent=1))
        tmp.replace(self.resolutions / f"{key}.json")
        return files, imports

    def _refused(self, requirements: Sequence[str], pip_output: str) -> CapabilityError:
        missing = _NOT_FOUND.findall(pip_output)
        what = missing[-1] if missing else ", ".join(requirements)
        reason = next(
            (line.strip() for line in reversed(pip_output.splitlines()) if line.strip().startswith("ERROR")),
            pip_output.strip().splitlines()[-1] if pip_output.strip() else "pip failed",
        )
        where = "the package index" if self.download else "the local wheel directories (downloads are off)"
        if self.wheel_dirs and self.download:
            where += " or " + ", ".join(self.wheel_dirs)
        return CapabilityError(
            f"package {what!r} cannot run in the pyodide runtime: no pure-Python wheel and no wheel built for "
            f"Pyodide ({self.dist.python_tag}, {self.dist.platform_tag}) in {where} ({reason}). Packages with "
            "compiled code need Pyodide's own build: give PyodideRuntime(distribution=...) a Pyodide "
            "distribution that has it (a release's full/ directory), or use a runtime with real CPython "
            "(python, e2b)",
            error_type="CapabilityError",
        )


def top_level_modules(wheel: Path) -> list[str]:
    """The importable top-level names of a wheel (``top_level.txt``, else its files)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = zf.namelist()
            listed = [n for n in names if n.endswith(".dist-info/top_level.txt")]
            if listed:
                found = zf.read(listed[0]).decode().split()
            else:
                found = []
                for name in names:
                    head = name.split("/")[0]
                    if head.endswith((".dist-info", ".data")):
                        continue
                    if "/" in name or head.endswith(".py"):
                        found.append(head.removesuffix(".py"))
    except (OSError, zipfile.BadZipFile):
        return []
    return [n for n in dict.fromkeys(found) if n.isidentifier() and not n.startswith("_")]

