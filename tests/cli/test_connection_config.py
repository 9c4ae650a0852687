"""How a connection is configured (``worker/connection.py``): Temporal's profile file, the
``TEMPORAL_*`` variables over it, explicit settings (the CLI's flags) over both; what counts as
configured (then no embedded server replaces it); the errors a bad configuration gives. Read
with the SDK's own loader (``temporalio.envconfig``); the connections themselves are tested
through the secured front (tests/secure_front)."""

from __future__ import annotations

from pathlib import Path

import pytest
from temporalio.service import TLSConfig

from codemode.worker.connection import ConnectionConfigError, ConnectionOptions, resolve
from codemode.worker.dev_server import free_port
from tests.cli.runner import base_env, codemode


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\nnot really\n-----END CERTIFICATE-----\n")
    (tmp_path / "client.pem").write_text("cert")
    (tmp_path / "client.key").write_text("key")
    path = tmp_path / "temporal.toml"
    path.write_text(
        '[profile.default]\naddress = "file-host:7233"\nnamespace = "from-file"\n'
        f'[profile.mtls]\naddress = "mtls-host:7233"\nnamespace = "prod"\n[profile.mtls.tls]\n'
        f'server_ca_cert_path = "{tmp_path / "ca.pem"}"\nclient_cert_path = "{tmp_path / "client.pem"}"\n'
        f'client_key_path = "{tmp_path / "client.key"}"\n'
    )
    return path


def test_nothing_configured_is_the_local_default() -> None:
    target = resolve(env={"TEMPORAL_CONFIG_FILE": "/nonexistent/temporal.toml"})
    assert (target.address, target.namespace, target.tls, target.configured) == (
        "localhost:7233",
        "default",
        False,
        False,
    )
    assert target.may_embed and target.credential == "no credential"


def test_flag_over_variable_over_file(config_file: Path) -> None:
    env = {"TEMPORAL_CONFIG_FILE": str(config_file)}
    assert resolve(env=env).address == "file-host:7233"
    env["TEMPORAL_NAMESPACE"] = "from-env"
    target = resolve(env=env)
    assert (target.address, target.namespace) == ("file-host:7233", "from-env")
    target = resolve(ConnectionOptions(namespace="from-flag", address="flag-host:1"), env=env)
    assert (target.address, target.namespace) == ("flag-host:1", "from-flag")
    # a profile in the file configures the target: no embedded server replaces it
    assert resolve(env=env).configured and not resolve(env=env).may_embed


def test_a_profile_with_a_client_certificate(config_file: Path) -> None:
    target = resolve(ConnectionOptions(profile="mtls", config_file=str(config_file)), env={})
    assert isinstance(target.tls, TLSConfig) and target.tls.client_cert == b"cert"
    assert target.credential == f"client cert {config_file.parent / 'client.pem'}"
    assert target.describe() == f"mtls-host:7233 (namespace prod, TLS, client cert {config_file.parent / 'client.pem'})"
    # --no-tls over the profile's TLS section
    plain = resolve(ConnectionOptions(profile="mtls", config_file=str(config_file), tls=False), env={})
    assert plain.tls is False and plain.credential == "no credential"


def test_flags_add_tls_to_a_profile(config_file: Path, tmp_path: Path) -> None:
    target = resolve(
        ConnectionOptions(
            config_file=str(config_file),
            tls_cert_path=str(tmp_path / "client.pem"),
            tls_key_path=str(tmp_path / "client.key"),
            tls_server_name="temporal.example",
        ),
        env={},
    )
    assert target.tls.client_private_key == b"key" and target.tls.domain == "temporal.example"
    assert target.address == "file-host:7233" and target.configured


def test_an_api_key_means_tls_and_is_never_described() -> None:
    target = resolve(env={"TEMPORAL_ADDRESS": "localhost:7233", "TEMPORAL_API_KEY": "sekret"})
    assert target.tls is True and target.credential == "api key" and "sekret" not in target.describe() + repr(target)
    assert target.configured and not target.may_embed


def test_empty_variables_count_as_unset() -> None:
    env = {"TEMPORAL_TLS": "", "TEMPORAL_API_KEY": "", "TEMPORAL_TLS_CLIENT_CERT_PATH": "", "TEMPORAL_NAMESPACE": ""}
    target = resolve(env=env)
    assert (target.tls, target.api_key, target.namespace, target.configured) == (False, None, "default", False)


def test_bad_configurations_say_what_is_wrong(config_file: Path, tmp_path: Path) -> None:
    with pytest.raises(ConnectionConfigError, match="Profile 'nope' not found"):
        resolve(ConnectionOptions(profile="nope", config_file=str(config_file)), env={})
    with pytest.raises(ConnectionConfigError, match="no Temporal config file at"):
        resolve(ConnectionOptions(config_file=str(tmp_path / "missing.toml")), env={})
    with pytest.raises(ConnectionConfigError, match="needs its key"):
        resolve(ConnectionOptions(tls_cert_path=str(tmp_path / "client.pem")), env={})
    with pytest.raises(ConnectionConfigError, match="cannot read .*nowhere.pem"):
        resolve(ConnectionOptions(tls_ca_path=str(tmp_path / "nowhere.pem")), env={})


async def test_a_bad_configuration_is_a_usage_error_of_every_command(tmp_path: Path) -> None:
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{free_port()}", CODEMODE_DATA_DIR=str(tmp_path))
    for args in (("list",), ("status", "x"), ("approve", "x", "1"), ("worker", "--tools", "examples.tools")):
        res = await codemode(*args, "--tls-ca-path", str(tmp_path / "nowhere.pem"), env=env, timeout=30)
        assert res.rc == 2 and res.err.strip().splitlines() == [
            f"Error: cannot read {tmp_path / 'nowhere.pem'}: No such file or directory"
        ], res


def test_an_api_key_comes_from_a_file_never_the_command_line(tmp_path: Path) -> None:
    """Issue 45: ``--api-key`` puts the key in ``ps`` and the shell's history. ``--api-key-file``
    (``TEMPORAL_API_KEY_FILE``) reads it instead; the key itself, when given, wins."""
    key = tmp_path / "temporal-api-key"
    key.write_text("sekret-from-file\n")
    target = resolve(ConnectionOptions(api_key_file=str(key), address="cloud.example:7233"), env={})
    assert target.api_key == "sekret-from-file" and target.tls is True and target.configured
    assert "sekret" not in target.describe() + repr(target) and f"--api-key-file {key}" in target.flags()
    from_env = resolve(env={"TEMPORAL_ADDRESS": "cloud.example:7233", "TEMPORAL_API_KEY_FILE": str(key)})
    assert from_env.api_key == "sekret-from-file"
    both = resolve(env={"TEMPORAL_API_KEY_FILE": str(key), "TEMPORAL_API_KEY": "direct"})
    assert both.api_key == "direct"
    with pytest.raises(ConnectionConfigError, match="cannot read the API key file"):
        resolve(ConnectionOptions(api_key_file=str(tmp_path / "missing")), env={})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConnectionConfigError, match="is empty"):
        resolve(ConnectionOptions(api_key_file=str(tmp_path / "empty")), env={})


def test_an_api_key_over_plaintext_to_another_machine_is_refused(tmp_path: Path) -> None:
    """Issue 45: an API key over ``--no-tls`` went out in clear without a word."""
    key = tmp_path / "key"
    key.write_text("sekret")
    remote = ConnectionOptions(api_key_file=str(key), address="temporal.example:7233", tls=False)
    with pytest.raises(ConnectionConfigError, match="would be sent in clear to temporal.example:7233"):
        resolve(remote, env={})
    with pytest.raises(ConnectionConfigError, match="in clear"):
        resolve(env={"TEMPORAL_ADDRESS": "10.0.0.5:7233", "TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"})
    assert resolve(ConnectionOptions(api_key_file=str(key), address="localhost:7233", tls=False), env={}).api_key
    allowed = resolve(
        ConnectionOptions(
            api_key_file=str(key), address="temporal.example:7233", tls=False, allow_plaintext_api_key=True
        ),
        env={},
    )
    assert allowed.api_key == "sekret" and allowed.tls is False
    assert resolve(remote, env={"CODEMODE_ALLOW_PLAINTEXT_API_KEY": "1"}).api_key == "sekret"


async def test_the_api_key_flag_warns_and_the_plaintext_refusal_is_a_usage_error(tmp_path: Path) -> None:
    env = base_env(TEMPORAL_ADDRESS=f"localhost:{free_port()}", CODEMODE_DATA_DIR=str(tmp_path))
    res = await codemode(
        "list", "--api-key", "sekret", "--address", "temporal.example:7233", "--no-tls", env=env, timeout=30
    )
    assert res.rc == 2 and "visible to every user of this machine" in res.err and "in clear" in res.err, res


async def test_a_port_that_accepts_but_never_answers_is_refused_in_one_line(tmp_path: Path) -> None:
    """Something takes the TCP connection and says nothing (a stalled front, a port of another
    program): each connection attempt is bounded, one fresh attempt is made, and the command
    says so in one line instead of waiting forever."""
    import asyncio

    held: list[asyncio.StreamWriter] = []

    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)  # read nothing, answer nothing, close nothing

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        env = base_env(
            TEMPORAL_ADDRESS=f"127.0.0.1:{port}", CODEMODE_DATA_DIR=str(tmp_path), CODEMODE_CONNECT_TIMEOUT="1"
        )
        res = await codemode("list", env=env, timeout=60)
        assert res.rc != 0 and "no Temporal answer came in two attempts of 1 s" in res.err, res
        assert len(res.err.strip().splitlines()) == 1, res
        assert len(held) == 3  # the TCP probe, then two attempts, each on a new connection
    finally:
        server.close()
        for writer in held:
            writer.close()
