"""The ``temporal`` CLI's connection flags, as one decorator for every command that talks to a
server: ``--address``, ``--namespace``, ``--api-key``, ``--tls``, ``--tls-cert-path``,
``--tls-key-path``, ``--tls-ca-path``, ``--tls-server-name``, ``--profile``, ``--config-file``.
What a flag leaves unset comes from the ``TEMPORAL_*`` variables, then from the profile
(``worker/connection.py``): flag > environment > file, as in the ``temporal`` CLI.

Adopting them is one line, ``@connection_options``, on a command with an ``address: str``
parameter: the flags are resolved when the command runs, the resolved target is kept on the
click context, the command receives its address, and ``open_client(address)`` connects to the
target with every setting (TLS, certificate, API key, namespace). Imports click and the
standard library only (``--help`` must not load Temporal)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from codemode.worker.connection import Target

F = TypeVar("F", bound=Callable[..., Any])

#: Where a command's resolved target is kept (``click.Context.meta``).
TARGET_KEY = "codemode.connection.target"

#: (parameter, flag, help) of the flags that take a value, in the order ``--help`` lists them.
_VALUE_FLAGS = (
    ("address", "--address", "Temporal frontend HOST:PORT [env TEMPORAL_ADDRESS; default: the profile's, else localhost:7233]."),
    ("namespace", "--namespace", "Temporal namespace [env TEMPORAL_NAMESPACE; default: the profile's, else default]."),
    ("api_key", "--api-key", "API key, sent as a bearer token over TLS [env TEMPORAL_API_KEY]."),
    ("tls_cert_path", "--tls-cert-path", "Client certificate (PEM) for mTLS [env TEMPORAL_TLS_CLIENT_CERT_PATH]."),
    ("tls_key_path", "--tls-key-path", "The client certificate's private key [env TEMPORAL_TLS_CLIENT_KEY_PATH]."),
    ("tls_ca_path", "--tls-ca-path", "CA certificate the server's is checked against [env TEMPORAL_TLS_SERVER_CA_CERT_PATH]."),
    ("tls_server_name", "--tls-server-name", "Server name the certificate must carry (SNI) [env TEMPORAL_TLS_SERVER_NAME]."),
    ("profile", "--profile", "Profile of Temporal's config file [env TEMPORAL_PROFILE; default: default]."),
    ("config_file", "--config-file", "Temporal's TOML config file [env TEMPORAL_CONFIG_FILE; default: ~/.config/temporalio/temporal.toml]."),
)
PARAMS = (*(name for name, _, _ in _VALUE_FLAGS), "tls")
_METAVARS = {"address": "HOST:PORT", "namespace": "NAME", "api_key": "KEY", "profile": "NAME", "tls_server_name": "NAME"}


def connection_options(command: F) -> F:
    """Add the connection flags to ``command``, which keeps one ``address: str`` parameter."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in PARAMS}
        target = resolve_flags(given)
        click.get_current_context().meta[TARGET_KEY] = target
        kwargs["address"] = target.address
        return command(*args, **kwargs)

    decorated: Any = wrapper
    decorated = click.option(
        "--tls/--no-tls",
        "tls",
        default=None,
        help="Use TLS (with the system's CA certificates unless --tls-ca-path) [env TEMPORAL_TLS].",
    )(decorated)
    for name, flag, text in reversed(_VALUE_FLAGS):
        short = ("-n",) if name == "namespace" else ()
        decorated = click.option(flag, *short, name, default=None, metavar=_METAVARS.get(name, "FILE"), help=text)(
            decorated
        )
    return decorated  # type: ignore[no-any-return]


def resolve_flags(given: dict[str, Any]) -> Target:
    """The target the flags (over the environment and the profile) give; a usage error names
    what is wrong with the configuration."""
    from codemode.worker.connection import ConnectionConfigError, ConnectionOptions, resolve

    try:
        return resolve(ConnectionOptions(**given))
    except ConnectionConfigError as err:
        failure = click.ClickException(str(err))
        failure.exit_code = 2  # a usage error, as ``common.Fail`` makes them
        raise failure from None


def command_target(address: str | None = None) -> Target:
    """The target of the running command (its flags resolved), or the configuration's for
    ``address`` when the command has none (or it asks for another address)."""
    from codemode.worker.connection import ConnectionOptions

    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        target = ctx.meta.get(TARGET_KEY)
        if target is not None and (address is None or target.address == address):
            return target  # type: ignore[no-any-return]
        ctx = ctx.parent
    return resolve_flags(vars(ConnectionOptions(address=address)))


def printed_flags(ctx: click.Context) -> str:
    """The connection flags typed on this command line, to print in commands a person copies
    (`` --address X --namespace N``). The API key is never printed: a profile or
    ``TEMPORAL_API_KEY`` carries it."""
    parts = []
    for name, flag, _ in _VALUE_FLAGS:
        if name != "api_key" and ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
            parts.append(f" {flag} {ctx.params[name]}")
    if ctx.get_parameter_source("tls") == click.core.ParameterSource.COMMANDLINE:
        parts.append(" --tls" if ctx.params["tls"] else " --no-tls")
    return "".join(parts)

