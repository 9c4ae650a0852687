"""The ``temporal`` CLI's connection flags, as one decorator for every command that talks to a
server: ``--address``, ``--namespace``, ``--api-key``, ``--tls``, ``--tls-cert-path``,
``--tls-key-path``, ``--tls-ca-path``, ``--tls-server-name``, ``--profile``, ``--config-file``.
What a flag leaves unset comes from the ``TEMPORAL_*`` variables, then from the profile
(``worker/connection.py``): flag > environment > file, as in the ``temporal`` CLI. Shared by
the applications' commands (``codemode ...`` and ``codemode mcp``).

Adopting them is one line, ``@connection_options``, on a command with a ``target: Target``
parameter: the flags are resolved when the command runs and the command receives the resolved
settings as that value, which it hands on (``open_client(target)``, ``open_backend(target)``);
``target.flags()`` prints them back for a command shown to a person. Imports click and the
standard library only (``--help`` must not load Temporal)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from codemode.worker.connection import Target

F = TypeVar("F", bound=Callable[..., Any])

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
    """Add the connection flags to ``command``, which takes the resolved ``target: Target``."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        given = {name: kwargs.pop(name, None) for name in PARAMS}
        kwargs["target"] = resolve_flags(given)
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
