"""A local secured Temporal front, for tests: a dev server on free loopback ports, behind
Debian's nginx (``nginx.conf.in``) with a throwaway CA made by openssl: one port requiring a
client certificate (mTLS), one requiring an API key, both TLS, both valid for the rig's
namespaces only. It writes a Temporal config file with an ``mtls`` and an ``apikey``
profile, and the same connections as plain ``TEMPORAL_*`` variables.

``python -m tests.secure_front.rig DIR`` runs one until Ctrl-C (for a person trying the docs)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from codemode.worker.binaries import temporal_cli_path
from codemode.worker.connection import server_answers
from codemode.worker.dev_server import DYNAMIC_CONFIG, free_port
from codemode.workflows.models import SA_RUNTIME, SA_STATUS

HERE = Path(__file__).resolve().parent
#: The namespace the fronts serve, with our search attributes.
NAMESPACE = "codemode-prod"
#: A second namespace the fronts serve, without our search attributes (as on a Cloud
#: namespace nobody prepared): the worker must say what to create and run without them.
BARE_NAMESPACE = "codemode-bare"
#: Longer than the server holds a long poll (about a minute).
PROXY_TIMEOUT = "600s"


class RigError(RuntimeError):
    pass


def nginx_path() -> str | None:
    return shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)


def _openssl(*args: str, cwd: Path) -> None:
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RigError(f"openssl {' '.join(args)} failed: {done.stderr}")


def _key(cwd: Path, name: str) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", f"{name}.key", cwd=cwd)


def _ca(cwd: Path, name: str, cn: str) -> None:
    _key(cwd, name)
    (cwd / f"{name}.cnf").write_text(
        "[req]\ndistinguished_name=dn\nx509_extensions=v3_ca\nprompt=no\n[dn]\nCN=" + cn + "\n"
        "[v3_ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
        "subjectKeyIdentifier=hash\n"
    )
    _openssl("req", "-x509", "-new", "-key", f"{name}.key", "-config", f"{name}.cnf", "-days", "3", "-out", f"{name}.pem", cwd=cwd)


def _leaf(cwd: Path, name: str, ca: str, cn: str, extensions: str) -> None:
    _key(cwd, name)
    _openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={cn}", "-out", f"{name}.csr", cwd=cwd)
    (cwd / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
        "authorityKeyIdentifier=keyid\n" + extensions + "\n"
    )
    _openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
        "-days", "3", "-sha256", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=cwd,
    )  # fmt: skip


def make_certificates(certs: Path) -> None:
    """The rig's CA, the server's certificate (for 127.0.0.1 and localhost), a client
    certificate, and a rogue CA with a client certificate of its own."""
    certs.mkdir(parents=True, exist_ok=True)
    _ca(certs, "ca", "codemode secure-front test CA")
    _leaf(certs, "server", "ca", "secure-front.test",
          "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost,DNS:secure-front.test")  # fmt: skip
    _leaf(certs, "client", "ca", "codemode-worker", "extendedKeyUsage=clientAuth")
    _ca(certs, "rogue-ca", "someone else's CA")
    _leaf(certs, "rogue-client", "rogue-ca", "codemode-worker", "extendedKeyUsage=clientAuth")


@dataclass
class SecureFront:
    """A running rig (``start()``, ``stop()``); its addresses, credentials and files."""

    dir: Path
    api_key: str = field(default_factory=lambda: secrets.token_hex(24))
    #: The API keys the front accepts now (``rotate``); the rig's own key at start.
    accepted_keys: list[str] = field(default_factory=list)
    backend_port: int = 0
    mtls_port: int = 0
    apikey_port: int = 0
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list, repr=False)

    # -- what tests use ----------------------------------------------------------------------

    @property
    def namespace(self) -> str:
        return NAMESPACE

    @property
    def plain_address(self) -> str:
        """The backend itself, for administration only (tests must not point code mode here)."""
        return f"127.0.0.1:{self.backend_port}"

    @property
    def mtls_address(self) -> str:
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def apikey_address(self) -> str:
        return f"127.0.0.1:{self.apikey_port}"

    def cert(self, name: str) -> str:
        return str(self.dir / "certs" / name)

    @property
    def config_file(self) -> str:
        return str(self.dir / "temporal.toml")

    def env_mtls(self, namespace: str = NAMESPACE) -> dict[str, str]:
        """The mTLS front as plain ``TEMPORAL_*`` variables."""
        return {
            "TEMPORAL_ADDRESS": self.mtls_address,
            "TEMPORAL_NAMESPACE": namespace,
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": self.cert("ca.pem"),
            "TEMPORAL_TLS_CLIENT_CERT_PATH": self.cert("client.pem"),
            "TEMPORAL_TLS_CLIENT_KEY_PATH": self.cert("client.key"),
        }

    def env_apikey(self, namespace: str = NAMESPACE) -> dict[str, str]:
        """The API-key front as plain ``TEMPORAL_*`` variables."""
        return {
            "TEMPORAL_ADDRESS": self.apikey_address,
            "TEMPORAL_NAMESPACE": namespace,
            "TEMPORAL_API_KEY": self.api_key,
            "TEMPORAL_TLS_SERVER_CA_CERT_PATH": self.cert("ca.pem"),
        }

    def env_profile(self, profile: str) -> dict[str, str]:
        """A front through the config file's profile (``mtls``, ``apikey``, ``bare``)."""
        return {"TEMPORAL_CONFIG_FILE": self.config_file, "TEMPORAL_PROFILE": profile}

    def access_log(self) -> str:
        path = self.dir / "nginx-access.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- start and stop ------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> SecureFront:
        nginx = nginx_path()
        self.accepted_keys = self.accepted_keys or [self.api_key]
        if nginx is None:
            raise RigError("nginx is not installed (apt-get install nginx-light; .ci/run does)")
        self.dir.mkdir(parents=True, exist_ok=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.dir / "tmp" / sub).mkdir(parents=True, exist_ok=True)
        make_certificates(self.dir / "certs")
        self.backend_port, self.mtls_port, self.apikey_port = free_port(), free_port(), free_port()
        while len({self.backend_port, self.mtls_port, self.apikey_port}) < 3:
            self.apikey_port = free_port()
        try:
            self._start_backend(timeout)
            self._start_nginx(nginx, timeout)
        except BaseException:
            self.stop()
            raise
        self._write_profiles()
        return self

    def _start_backend(self, timeout: float) -> None:
        cmd = [
            temporal_cli_path(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
            "--port", str(self.backend_port), "--http-port", str(free_port()), "--metrics-port", str(free_port()),
            "--namespace", NAMESPACE, "--log-level", "error",
            "--search-attribute", f"{SA_STATUS}=Keyword", "--search-attribute", f"{SA_RUNTIME}=Keyword",
            *DYNAMIC_CONFIG,
        ]  # fmt: skip
        self._spawn(cmd, "temporal.log")
        self._wait(self.plain_address, timeout, "the dev server")
        # The bare namespace: created after start, so that it has none of our search attributes.
        self._admin("operator", "namespace", "create", "--namespace", BARE_NAMESPACE, "--retention", "24h")
        deadline = time.monotonic() + timeout
        while self._admin("operator", "namespace", "describe", "--namespace", BARE_NAMESPACE, check=False):
            if time.monotonic() > deadline:
                raise RigError(f"namespace {BARE_NAMESPACE} did not appear")
            time.sleep(0.2)

    def _admin(self, *args: str, check: bool = True) -> int:
        done = subprocess.run(
            [temporal_cli_path(), *args, "--address", self.plain_address],
            capture_output=True, text=True, timeout=60, env={**os.environ, "TEMPORAL_CONFIG_FILE": os.devnull},
        )  # fmt: skip
        if check and done.returncode != 0:
            raise RigError(f"temporal {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.returncode

    def rotate(self, *keys: str) -> None:
        """Accept these API keys from now on (none: refuse every key): the config rewritten and
        nginx reloaded, as a key rotation on a real front; waits until the reload took."""
        nginx = nginx_path()
        assert nginx is not None
        self.accepted_keys = list(keys)
        conf = self._write_conf()
        before = self._nginx_workers()
        os.kill(self._procs[-1].pid, signal.SIGHUP)
        deadline = time.monotonic() + 30
        while self._nginx_workers() & before or not self._nginx_workers():  # old workers gone, new ones up
            if time.monotonic() > deadline:
                raise RigError(f"nginx did not reload {conf}")
            time.sleep(0.05)

    def _nginx_workers(self) -> set[int]:
        master = self._procs[-1].pid
        children = Path(f"/proc/{master}/task/{master}/children")
        return {int(pid) for pid in children.read_text().split()} if children.exists() else set()

    def _write_conf(self) -> Path:
        template = (HERE / "nginx.conf.in").read_text()
        values = {
            "DIR": str(self.dir),
            "TIMEOUT": PROXY_TIMEOUT,
            "BACKEND_PORT": str(self.backend_port),
            "MTLS_PORT": str(self.mtls_port),
            "APIKEY_PORT": str(self.apikey_port),
            "API_KEY_CHECKS": "\n".join(
                f'        if ($http_authorization = "Bearer {key}") {{ set $key_ok 1; }}' for key in self.accepted_keys
            ),
            "NAMESPACE_LINES": "\n".join(f'        "{ns}" 0;' for ns in (NAMESPACE, BARE_NAMESPACE)),
        }
        for name, value in values.items():
            template = template.replace("{{" + name + "}}", value)
        conf = self.dir / "nginx.conf"
        conf.write_text(template)
        return conf

    def _start_nginx(self, nginx: str, timeout: float) -> None:
        conf = self._write_conf()
        check = subprocess.run([nginx, "-t", "-c", str(conf), "-p", str(self.dir)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RigError(f"nginx -t: {check.stderr}")
        self._spawn([nginx, "-c", str(conf), "-p", str(self.dir)], "nginx.log")
        self._wait(self.mtls_address, timeout, "nginx")
        self._wait(self.apikey_address, timeout, "nginx")

    def _spawn(self, cmd: list[str], log: str) -> None:
        with open(self.dir / log, "ab") as out:
            self._procs.append(
                subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            )

    def _wait(self, address: str, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not server_answers(address):
            for proc in self._procs:
                if proc.poll() is not None:
                    raise RigError(f"{what} exited with {proc.returncode}: see {self.dir}")
            if time.monotonic() > deadline:
                raise RigError(f"{what} did not listen at {address} within {timeout:g}s")
            time.sleep(0.05)

    def _write_profiles(self) -> None:
        ca = self.cert("ca.pem")
        mtls = (
            f'address = "{self.mtls_address}"\nnamespace = "{NAMESPACE}"\n'
            f'[profile.{{name}}.tls]\nserver_ca_cert_path = "{ca}"\n'
            f'client_cert_path = "{self.cert("client.pem")}"\nclient_key_path = "{self.cert("client.key")}"\n'
        )
        apikey = (
            f'address = "{self.apikey_address}"\nnamespace = "{{namespace}}"\napi_key = "{self.api_key}"\n'
            f'[profile.{{name}}.tls]\nserver_ca_cert_path = "{ca}"\n'
        )
        text = (
            "[profile.mtls]\n" + mtls.replace("{name}", "mtls")
            + "\n[profile.apikey]\n" + apikey.replace("{name}", "apikey").replace("{namespace}", NAMESPACE)
            + "\n[profile.bare]\n" + apikey.replace("{name}", "bare").replace("{namespace}", BARE_NAMESPACE)
        )  # fmt: skip
        Path(self.config_file).write_text(text)

    def stop(self) -> None:
        """TERM each process this rig started (by its own handle), KILL after 10 s."""
        procs, self._procs = self._procs, []
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


if __name__ == "__main__":  # pragma: no cover - a person's tool
    import sys

    front = SecureFront(Path(sys.argv[1]).resolve()).start()
    print(f"mtls   {front.mtls_address}\napikey {front.apikey_address}\nconfig {front.config_file}", flush=True)
    print(f"export TEMPORAL_CONFIG_FILE={front.config_file}  # then TEMPORAL_PROFILE=mtls or apikey", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        front.stop()
