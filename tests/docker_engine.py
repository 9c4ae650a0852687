"""A real container engine for the docker runtime's tests: podman serving the Docker API on a
unix socket, and one local test image built from a Debian rootfs (no registry is reachable).

* ``PodmanService``: ``podman system service --time=0 unix://<tmp>/podman.sock`` with the
  ``containers.conf`` these machines need (``CONTAINERS_CONF``: runc, and ulimits root may
  set here), stopped at the end of the session.
* ``ensure_image()``: the image ``localhost/codemode-test-python:<recipe hash>`` with
  ``python3`` and the packages of ``PACKAGES`` (numpy, pandas, matplotlib ...): found in podman's storage, else
  imported from the cached rootfs tarball, else built with ``debootstrap`` (about a minute)
  and cached under ``CODEMODE_CI_CACHE`` (default ``/var/cache/codemode-ci``).

``python -m tests.docker_engine build`` builds the image ahead of the tests (``.ci/run``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

#: Two settings podman needs on these machines (root lacks CAP_SYS_RESOURCE, cgroups are
#: hybrid): see shared/research/sandboxes-docker-pyodide.md. And one it does not: each exec
#: (the runtime's relay) otherwise leaves its conmon waiting 300 s for an API client.
CONTAINERS_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
exit_command_delay = 5
"""

SUITE = "bookworm"
PACKAGES = ("python3", "python3-numpy", "python3-pandas", "python3-matplotlib", "python3-pydantic", "tzdata")
#: The recipe names the image: change it and a new image is built (the old one stays cached).
RECIPE = f"debootstrap --variant=minbase --include={','.join(PACKAGES)} {SUITE}"
IMAGE = f"localhost/codemode-test-python:{hashlib.sha256(RECIPE.encode()).hexdigest()[:12]}"


def cache_dir() -> Path:
    return Path(os.environ.get("CODEMODE_CI_CACHE") or "/var/cache/codemode-ci")


def podman_path() -> str | None:
    return shutil.which("podman")


def containers_conf() -> Path:
    """The containers.conf file (written once per machine, next to the image cache)."""
    path = Path(tempfile.gettempdir()) / "codemode-containers.conf"
    if not path.exists() or path.read_text() != CONTAINERS_CONF:
        tmp = path.with_suffix(f".{os.getpid()}")
        tmp.write_text(CONTAINERS_CONF)
        tmp.replace(path)
    return path


def podman_env() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(containers_conf())}


def _podman(*args: str, check: bool = True, **kw: object) -> subprocess.CompletedProcess[bytes]:
    podman = podman_path()
    assert podman is not None, "podman is not installed"
    return subprocess.run([podman, *args], env=podman_env(), check=check, capture_output=True, **kw)  # type: ignore[call-overload]


def image_exists(image: str = IMAGE) -> bool:
    return _podman("image", "exists", image, check=False).returncode == 0


def ensure_image(image: str = IMAGE, *, log: bool = False) -> str:
    """The test image, built or imported when podman's storage lacks it."""
    if image_exists(image):
        return image
    tarball = cache_dir() / f"rootfs-{image.rsplit(':', 1)[1]}.tar"
    if not tarball.exists():
        _build_rootfs(tarball, log=log)
    began = time.monotonic()
    _podman("import", "--change", "CMD=/usr/bin/python3", str(tarball), image)
    if log:
        print(f"imported {image} in {time.monotonic() - began:.1f} s", file=sys.stderr)
    return image


def _build_rootfs(tarball: Path, *, log: bool) -> None:
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not os.path.exists(debootstrap):
        raise RuntimeError("debootstrap is not installed (apt-get install debootstrap): cannot build the test image")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="codemode-rootfs-", dir=tarball.parent) as work:
        rootfs = Path(work) / "rootfs"
        args = RECIPE.split()[1:]
        subprocess.run([debootstrap, *args, str(rootfs)], check=True, capture_output=not log)
        # What an image needs and debootstrap leaves: nothing; what it leaves and an image
        # does not need: apt's caches.
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        partial = tarball.with_suffix(".partial")
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], check=True)
        partial.replace(tarball)
    if log:
        print(f"built the rootfs in {time.monotonic() - began:.0f} s: {tarball}", file=sys.stderr)


def client(url: str, timeout: int = 60) -> Any:
    """A Docker SDK client of the engine at ``url``, speaking API 1.41 (what podman serves):
    negotiating the version asks podman for /version, which takes 0.6-1.6 s here."""
    import docker

    return docker.DockerClient(base_url=url, timeout=timeout, version="1.41")


class PodmanService:
    """``podman system service`` on a private unix socket (the Docker API, v1.41)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="codemode-podman-"))
        self.socket = self.dir / "podman.sock"
        self.url = f"unix://{self.socket}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.storage_conf = self.dir / "storage.conf"

    def _write_storage_conf(self) -> None:
        """Containers of this service live in storage of its own, with the machine's image
        store read-only beside it: two test sessions on one machine (two checkouts) never
        see, sweep or remove each other's containers, and share the image."""
        info = _podman("info", "--format", "{{.Store.GraphRoot}} {{.Store.GraphDriverName}}").stdout.decode()
        shared, driver = info.split()
        self.storage_conf.write_text(
            "[storage]\n"
            f'driver = "{driver}"\n'
            f'graphroot = "{self.dir / "root"}"\n'
            f'runroot = "{self.dir / "run"}"\n'
            "[storage.options]\n"
            f'additionalimagestores = ["{shared}"]\n'
        )

    def start(self, timeout: float = 30.0) -> PodmanService:
        podman = podman_path()
        assert podman is not None
        self._write_storage_conf()
        log = open(self.dir / "service.log", "wb")  # noqa: SIM115 - the service writes it until stopped
        self.proc = subprocess.Popen(
            [podman, "system", "service", "--time=0", self.url],
            env={**podman_env(), "CONTAINERS_STORAGE_CONF": str(self.storage_conf)},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"podman system service exited: {(self.dir / 'service.log').read_text()[-2000:]}")
            if self.socket.exists():
                try:
                    client(self.url, timeout=5).ping()
                    return self
                except Exception:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("podman system service did not answer in time")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.storage_conf.exists():  # unmount what containers left, then drop the storage
            env = {**podman_env(), "CONTAINERS_STORAGE_CONF": str(self.storage_conf)}
            subprocess.run(
                [podman_path() or "podman", "rm", "--all", "--force", "--time", "0"], env=env, capture_output=True
            )
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> PodmanService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


_SERVICE: PodmanService | None = None
_SAVED_ENV: dict[str, str | None] = {}


def engine() -> PodmanService:
    """The session's engine, started on first use (``stop_engine`` ends it), with
    ``DOCKER_HOST`` and ``CODEMODE_DOCKER_IMAGE`` set for this process and the workers it
    spawns. Skips the test on a machine without podman; in CI (``CI`` set) that is a failure:
    ``.ci/run`` installs it."""
    global _SERVICE
    if _SERVICE is None:
        import pytest

        if podman_path() is None:
            reason = "podman is not installed (apt-get install podman runc debootstrap): no container engine"
            if os.environ.get("CI"):
                pytest.fail(reason + "; .ci/run installs it")
            pytest.skip(reason)
        ensure_image()
        service = PodmanService().start()
        for key, value in (("DOCKER_HOST", service.url), ("CODEMODE_DOCKER_IMAGE", IMAGE)):
            _SAVED_ENV[key] = os.environ.get(key)
            os.environ[key] = value
        _SERVICE = service
    return _SERVICE


def engine_started() -> bool:
    return _SERVICE is not None


def stop_engine() -> None:
    global _SERVICE
    if _SERVICE is None:
        return
    _SERVICE.stop()
    _SERVICE = None
    for key, value in _SAVED_ENV.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _SAVED_ENV.clear()


def codemode_containers() -> list[dict[str, object]]:
    """Every container the docker runtime made on the session's engine (any state)."""
    assert _SERVICE is not None
    engine_client = client(_SERVICE.url)
    try:
        return engine_client.api.containers(all=True, filters={"label": "codemode=1"})
    finally:
        engine_client.close()


def remove_containers(ids: list[str]) -> None:
    import docker

    assert _SERVICE is not None
    engine_client = client(_SERVICE.url)
    try:
        for cid in ids:
            try:
                engine_client.api.remove_container(cid, force=True)
            except docker.errors.NotFound:
                pass
    finally:
        engine_client.close()


if __name__ == "__main__":
    if sys.argv[1:] != ["build"]:
        sys.exit("usage: python -m tests.docker_engine build")
    print(ensure_image(log=True))
