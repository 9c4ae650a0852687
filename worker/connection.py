"""Reaching Temporal: the one module every client and worker of code mode connects through.

Configured the way Temporal itself is, with the SDK's ``temporalio.envconfig``: a TOML profile
(the file ``TEMPORAL_CONFIG_FILE`` names, else ``~/.config/temporalio/temporal.toml``; the
profile ``TEMPORAL_PROFILE`` names, else ``default``), the ``TEMPORAL_*`` variables over it
(``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS*``...), and
what a person or a program says explicitly (the CLI's ``--address``, ``--namespace``,
``--api-key-file``, ``--tls-*``, ``--profile``, ``--config-file`` flags, or ``ConnectionOptions``)
over both: flag > environment > file, as in the ``temporal`` CLI. An API key is best read from a
file (``--api-key-file``, ``TEMPORAL_API_KEY_FILE``): a flag's value is visible in ``ps``. An
API key is never sent over plaintext to an address off this machine unless that is allowed
explicitly (``--allow-plaintext-api-key``). With nothing configured:
``localhost:7233``, namespace ``default``, plaintext, where ``codemode run`` may start the
embedded server (``Target.may_embed``).

A connection that fails says so in one line: the address, the namespace, the credential used
(never the secret) and what the server said (``ConnectionRefused``).

The CLI imports this module to start every command, so it imports the standard library only;
Temporal and our converter are imported when a target is resolved or a client connects."""

from __future__ import annotations

import dataclasses
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalio.client import Client

    from codemode.storage import BlobStore

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
#: Hosts an embedded server could serve (this machine).
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"})
#: How long the first namespaced call may take before a connection counts as refused.
NAMESPACE_CHECK_SECONDS = 10.0
#: How long one connection attempt (TCP, TLS, the server's first answer) may take. The SDK
#: bounds none of it but the TCP connect, so an attempt that stalls after the port accepted
#: (seen once in CI, against a TLS port spoken to in plaintext) would hold a command forever;
#: a stalled attempt is abandoned and one fresh attempt made, on a new connection.
#: ``CODEMODE_CONNECT_TIMEOUT`` sets it (seconds), for a slow link.
CONNECT_ATTEMPT_SECONDS = float(os.environ.get("CODEMODE_CONNECT_TIMEOUT") or 10.0)


class ConnectionConfigError(ValueError):
    """The configuration itself is wrong (a profile that is not there, a certificate file that
    cannot be read, a certificate without its key): nothing was sent anywhere."""


class ConnectionRefused(RuntimeError):
    """The server (or whatever answers at the address) refused the connection, the credential
    or the namespace. ``str()`` is the one line a person reads."""

    def __init__(self, target: Target, reason: str) -> None:
        self.target = target
        self.reason = reason
        super().__init__(f"cannot reach Temporal at {target.describe()}: {reason}")


@dataclass(frozen=True)
class ConnectionOptions:
    """What is said explicitly about where Temporal is; each field unset (None) comes from the
    profile and the ``TEMPORAL_*`` variables. ``tls``: True to use TLS (with the system's roots
    unless ``tls_ca_path``), False to refuse it even if the profile has it."""

    address: str | None = None
    namespace: str | None = None
    api_key: str | None = None
    #: A file holding the API key (``--api-key-file``; env ``TEMPORAL_API_KEY_FILE``): unlike a
    #: flag's value, never in ``ps`` or a shell's history.
    api_key_file: str | None = None
    #: Send an API key over plaintext to an address not on this machine anyway (env
    #: ``CODEMODE_ALLOW_PLAINTEXT_API_KEY=1``): refused otherwise.
    allow_plaintext_api_key: bool | None = None
    tls: bool | None = None
    tls_cert_path: str | None = None
    tls_key_path: str | None = None
    tls_ca_path: str | None = None
    tls_server_name: str | None = None
    profile: str | None = None
    config_file: str | None = None

    def secured(self) -> bool:
        """Whether these options alone ask for a profile, TLS or a credential."""
        return bool(
            self.api_key
            or self.api_key_file
            or self.tls
            or self.tls_cert_path
            or self.tls_key_path
            or self.tls_ca_path
            or self.tls_server_name
            or self.profile
            or self.config_file
        )


@dataclass(frozen=True)
class Target:
    """Where and how to connect, resolved (see ``resolve``)."""

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    api_key: str | None = field(default=None, repr=False)
    #: False (plaintext), True (TLS with the system's roots) or a ``temporalio.service.TLSConfig``.
    tls: Any = False
    rpc_metadata: Mapping[str, str] = field(default_factory=dict, repr=False)
    #: The client certificate's file, "(inline data)" when the profile holds the PEM, or None.
    client_cert: str | None = None
    #: Whether a profile, a config file, TLS or an API key configured this target: then it is
    #: never replaced by an embedded server.
    configured: bool = False
    #: The profile named (a flag or ``TEMPORAL_PROFILE``), for the commands printed to a person.
    profile: str | None = None
    #: What was said explicitly (the flags), over the environment and the profile.
    given: ConnectionOptions = field(default_factory=lambda: ConnectionOptions(), compare=False, repr=False)

    def flags(self) -> str:
        """The connection flags of a command printed for a person to copy into another shell,
        the one printer of them: `` --address X --namespace N --profile P`` where they differ
        from the defaults, then the TLS and config-file flags that were given explicitly. Never
        the API key (a profile or ``TEMPORAL_API_KEY`` carries it)."""
        parts = [f" --address {self.address}"] if self.address != DEFAULT_ADDRESS else []
        if self.namespace != DEFAULT_NAMESPACE:
            parts.append(f" --namespace {self.namespace}")
        if self.profile:
            parts.append(f" --profile {self.profile}")
        g = self.given
        for flag, value in (
            ("--config-file", g.config_file),
            ("--api-key-file", g.api_key_file),
            ("--tls-cert-path", g.tls_cert_path),
            ("--tls-key-path", g.tls_key_path),
            ("--tls-ca-path", g.tls_ca_path),
            ("--tls-server-name", g.tls_server_name),
        ):
            if value:
                parts.append(f" {flag} {value}")
        if g.tls is not None:
            parts.append(" --tls" if g.tls else " --no-tls")
        return "".join(parts)

    @property
    def uses_tls(self) -> bool:
        return self.tls is not False and self.tls is not None

    @property
    def credential(self) -> str:
        """Which credential is used, never the secret itself."""
        if self.api_key:
            return "api key"
        if self.client_cert:
            return f"client cert {self.client_cert}"
        return "no credential"

    def describe(self) -> str:
        """``ADDRESS (namespace NS, TLS, api key)``: for messages; holds no secret."""
        return f"{self.address} (namespace {self.namespace}, {'TLS' if self.uses_tls else 'plaintext'}, {self.credential})"

    @property
    def may_embed(self) -> bool:
        """Whether ``codemode run`` may start the embedded server when nothing answers here: a
        plaintext local address that no profile, TLS or API key configured."""
        return not self.configured and not self.uses_tls and is_local(self.address)

    def connect_kwargs(self) -> dict[str, Any]:
        """The arguments of ``Client.connect`` for this target."""
        kwargs: dict[str, Any] = {"target_host": self.address, "namespace": self.namespace, "tls": self.tls}
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.rpc_metadata:
            kwargs["rpc_metadata"] = dict(self.rpc_metadata)
        return kwargs


def local_target(address: str, namespace: str = DEFAULT_NAMESPACE) -> Target:
    """A plaintext target with no credential (the embedded server this process started)."""
    return Target(address=address, namespace=namespace)


def resolve(options: ConnectionOptions | None = None, *, env: Mapping[str, str] | None = None) -> Target:
    """The target that ``options`` over the ``TEMPORAL_*`` variables (``env``, default
    ``os.environ``) over the profile file give. Raises ``ConnectionConfigError``."""
    from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

    o = options or ConnectionOptions()
    environ = set_variables(os.environ if env is None else env)
    key_file = o.api_key_file or (None if environ.get("TEMPORAL_API_KEY") else environ.get(API_KEY_FILE_ENV))
    if key_file and not o.api_key:
        environ["TEMPORAL_API_KEY"] = read_api_key(key_file)  # flag > environment > file, as the key itself
    source = None
    if o.config_file:
        source = Path(o.config_file).expanduser()
        if not source.is_file():
            raise ConnectionConfigError(f"no Temporal config file at {o.config_file}")
    try:
        loaded = ClientConfigProfile.load(o.profile, config_source=source, override_env_vars=environ)
        from_env = ClientConfigProfile.load(o.profile, disable_file=True, override_env_vars=environ)
    except RuntimeError as err:  # the bridge's ConfigError
        where = f" in {source or environ.get('TEMPORAL_CONFIG_FILE') or 'the default config file'}"
        raise ConnectionConfigError(f"Temporal configuration{where}: {err}") from None
    tls = _tls_over(loaded.tls, o, ClientConfigTLS)
    profile = dataclasses.replace(
        loaded,
        address=o.address or loaded.address,
        namespace=o.namespace or loaded.namespace,
        api_key=o.api_key or loaded.api_key,
        tls=tls,
    )
    if tls is not None and bool(tls.client_cert) != bool(tls.client_private_key):
        raise ConnectionConfigError(
            "a client certificate needs its key and a key its certificate "
            "(--tls-cert-path with --tls-key-path, or client_cert_path with client_key_path)"
        )
    try:
        config = profile.to_client_connect_config()
    except OSError as err:
        raise ConnectionConfigError(f"cannot read {err.filename}: {err.strerror}") from None
    client_cert = None
    if tls is not None and tls.disabled is not True and tls.client_cert is not None:
        client_cert = str(tls.client_cert) if isinstance(tls.client_cert, Path) else "(inline data)"
    named = bool(o.profile or environ.get("TEMPORAL_PROFILE"))
    from_file = loaded != from_env
    tls_config = config.get("tls", False)
    address = config.get("target_host") or DEFAULT_ADDRESS
    allowed = o.allow_plaintext_api_key or environ.get(ALLOW_PLAINTEXT_ENV, "").lower() in ("1", "true", "yes")
    if config.get("api_key") and tls_config is False and not is_local(address) and not allowed:
        raise ConnectionConfigError(
            f"an API key would be sent in clear to {address} (TLS is off): turn TLS on, or, if the network "
            f"between is trusted, say so with --allow-plaintext-api-key ({ALLOW_PLAINTEXT_ENV}=1)"
        )
    return Target(
        address=address,
        namespace=config.get("namespace") or DEFAULT_NAMESPACE,
        api_key=config.get("api_key"),
        tls=tls_config,
        rpc_metadata=dict(config.get("rpc_metadata") or {}),
        client_cert=client_cert,
        configured=named or from_file or o.secured() or bool(profile.api_key) or tls_config is not False,
        profile=o.profile or environ.get("TEMPORAL_PROFILE"),
        given=o,
    )


#: The file the API key is read from (our variable; the ``temporal`` CLI has none).
API_KEY_FILE_ENV = "TEMPORAL_API_KEY_FILE"
ALLOW_PLAINTEXT_ENV = "CODEMODE_ALLOW_PLAINTEXT_API_KEY"


def read_api_key(path: str) -> str:
    """The API key a file holds (its first line, trimmed). Raises ``ConnectionConfigError``."""
    p = Path(path).expanduser()
    try:
        text = p.read_text()
    except OSError as err:
        raise ConnectionConfigError(f"cannot read the API key file {p}: {err.strerror or err}") from None
    key = text.strip().splitlines()[0].strip() if text.strip() else ""
    if not key:
        raise ConnectionConfigError(f"the API key file {p} is empty")
    return key


def set_variables(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without the empty ``TEMPORAL_*`` variables: an empty one counts as unset (a
    compose file's ``${TEMPORAL_TLS:-}`` must not turn TLS on, nor an empty API key mean one),
    except ``TEMPORAL_GRPC_META_*``, where empty removes a header."""
    return {k: v for k, v in env.items() if v or not k.startswith("TEMPORAL_") or k.startswith("TEMPORAL_GRPC_META_")}


def _tls_over(tls: Any, o: ConnectionOptions, tls_class: Any) -> Any:
    """The profile's TLS section with the flags' settings over it."""
    if o.tls is False:
        return tls_class(disabled=True)
    paths = {
        "client_cert": o.tls_cert_path,
        "client_private_key": o.tls_key_path,
        "server_root_ca_cert": o.tls_ca_path,
    }
    changes: dict[str, Any] = {k: Path(v).expanduser() for k, v in paths.items() if v}
    if o.tls_server_name:
        changes["server_name"] = o.tls_server_name
    if not changes and not o.tls:
        return tls
    return dataclasses.replace(tls or tls_class(), disabled=False, **changes)


def embedding_refused(target: Target) -> str:
    """Why no embedded server replaces ``target`` (for the end of a "no server answers" line)."""
    if target.configured or target.uses_tls:
        return (
            "; a profile, TLS or an API key is configured, so no embedded server is started in its place "
            "(unset them to use one)"
        )
    return "" if is_local(target.address) else "; an embedded server can serve only this machine's addresses"


def default_address() -> str:
    """The address Temporal's environment configuration gives (``localhost:7233`` without any)."""
    try:
        return resolve().address
    except ConnectionConfigError:
        return os.environ.get("TEMPORAL_ADDRESS") or DEFAULT_ADDRESS


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"bad address {address!r}: expected HOST:PORT, e.g. localhost:7233")
    return host, int(port)


def is_local(address: str) -> bool:
    """Whether an embedded server could serve this address (only on this machine)."""
    try:
        return split_address(address)[0].lower() in LOCAL_HOSTS
    except ValueError:
        return False


def server_answers(address: str, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections at the address (cheap; no gRPC)."""
    host, port = split_address(address)
    try:
        with socket.create_connection((host.strip("[]"), port), timeout=timeout):
            return True
    except OSError:
        return False


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    options: ConnectionOptions | None = None,
    target: Target | None = None,
    tracer: Any | None = None,
    store: BlobStore | None = None,
    check_namespace: bool = True,
    **kwargs: Any,
) -> Client:
    """A client with our data converter (pydantic JSON, large payloads in the object store;
    every client and worker must use it) and OpenTelemetry tracing (spans go to the
    application's tracer provider, or ``tracer``), both made by ``CodeModePlugin``.

    Where: ``target`` if given, else ``resolve(options)`` with ``address`` and ``namespace``
    over it: Temporal's profile and ``TEMPORAL_*`` variables fill in the rest (TLS, client
    certificate, API key). ``check_namespace``: ask the server for the namespace once, so a
    credential that is not valid for it is refused here, in one line, not at the first call.
    Raises ``ConnectionConfigError`` or ``ConnectionRefused``.

    ``store`` defaults to the one the environment configures (``storage/__init__.py``). The
    plugin itself is not installed on the client: workers built on it add their own (with
    their tools), as ``CodeModeWorker`` does; pass ``plugins=[CodeModePlugin(...)]`` to add it."""

    if target is None:
        o = options or ConnectionOptions()
        target = resolve(dataclasses.replace(o, address=address or o.address, namespace=namespace or o.namespace))
    # With a CodeModePlugin among the plugins, the plugin sets the converter and the tracing.
    plugged = any(getattr(p, "name", lambda: "")() == "codemode.CodeModePlugin" for p in kwargs.get("plugins") or ())
    if "data_converter" not in kwargs and not plugged:
        from codemode.worker.converter import data_converter, default_store

        kwargs["data_converter"] = data_converter(store or await default_store())
    if "interceptors" not in kwargs and not plugged:
        from codemode.worker import telemetry

        kwargs["interceptors"] = telemetry.interceptors_for(tracer)
    client = await _connect_within(target, {**target.connect_kwargs(), **kwargs})
    if check_namespace:
        await check_namespace_reachable(client, target)
    return client


async def _connect_within(target: Target, kwargs: dict[str, Any]) -> Client:
    """``Client.connect``, each attempt bounded by ``CONNECT_ATTEMPT_SECONDS``, two attempts."""
    import asyncio
    from datetime import timedelta

    from temporalio.client import Client

    kwargs.setdefault("connect_timeout", timedelta(seconds=CONNECT_ATTEMPT_SECONDS / 2))
    for attempt in (1, 2):
        try:
            return await asyncio.wait_for(Client.connect(**kwargs), CONNECT_ATTEMPT_SECONDS)
        except RuntimeError as err:
            raise ConnectionRefused(target, explain(err, target)) from err
        except TimeoutError:
            if attempt == 2:
                raise ConnectionRefused(
                    target,
                    f"the port accepts connections, but no Temporal answer came in two attempts of "
                    f"{CONNECT_ATTEMPT_SECONDS:.0f} s (is it a Temporal frontend? does it expect TLS?)",
                ) from None
    raise AssertionError("unreachable")


async def check_namespace_reachable(client: Client, target: Target) -> None:
    """One namespaced call (``DescribeNamespace``, which workers make at start too): a
    namespace that does not exist, or that the credential is not valid for, is refused now."""
    from datetime import timedelta

    from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
    from temporalio.service import RPCError

    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=target.namespace), timeout=timedelta(seconds=NAMESPACE_CHECK_SECONDS)
        )
    except RPCError as err:
        raise ConnectionRefused(target, explain(err, target)) from err


_STATUS = re.compile(r'Status \{ code: (\w+), message: "((?:[^"\\]|\\.)*)"')


def explain(err: BaseException, target: Target) -> str:
    """What the server (or the network) said, in one line, with a hint where one helps."""
    from temporalio.service import RPCError

    if isinstance(err, RPCError):
        code, message = err.status.name, err.message
    else:
        text = str(err)
        m = _STATUS.search(text)
        code, message = (m.group(1), m.group(2)) if m else ("", text)
        if "InvalidCertificate" in text or "certificate verify failed" in text or "UnknownIssuer" in text:
            why = re.search(r"InvalidCertificate\((\w+)\)", text)
            return (
                f"TLS handshake failed: the server's certificate is not trusted ({why.group(1) if why else 'invalid'}); "
                "give its CA with --tls-ca-path or TEMPORAL_TLS_SERVER_CA_CERT_PATH (tls.server_ca_cert_path)"
            )
        if "Connection refused" in text or "ConnectionRefused" in text:
            return "nothing accepts connections there (connection refused)"
        if not target.uses_tls and (
            "h2 protocol error" in text or "connection closed" in text or "operation was canceled" in text
        ):
            return (
                "the server closed the connection during the handshake: it expects TLS, probably "
                "(add --tls, a [tls] section to the profile, or TEMPORAL_TLS=true)"
            )
        if target.uses_tls and ("InvalidContentType" in text or "CorruptMessage" in text or "tls handshake" in text):
            return "TLS handshake failed: the server does not speak TLS here (drop --tls, or check the port)"
    message = " ".join(message.replace('\\"', '"').split())
    if len(message) > 300:
        message = message[:300] + "..."
    said = f"{_words(code)}: {message}" if code else message
    hints = {
        "unauthenticated": {
            "api key": " (check the API key)",
            "no credential": " (the server wants a credential: an API key or a client certificate)",
        }.get(target.credential, " (check the client certificate and its key)"),
        "permission denied": f" (is the credential valid for namespace {target.namespace}?)",
        "not found": f" (does namespace {target.namespace} exist? --namespace or TEMPORAL_NAMESPACE)",
    }
    return said + hints.get(_words(code), "")


def _words(code: str) -> str:
    """``PERMISSION_DENIED`` / ``PermissionDenied`` -> ``permission denied``."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", code).replace("_", " ").lower()
