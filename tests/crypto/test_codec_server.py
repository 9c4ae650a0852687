"""The codec server's HTTP contract: the protocol's bodies and paths, CORS for the web UI's
origin (preflight included), the bearer token, X-Namespace, and `codemode codec-server` itself."""

from __future__ import annotations

import json
from pathlib import Path

import aiohttp
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from codemode.storage.encryption import Keyring
from codemode.worker.codec_server import CodecServer
from codemode.worker.converter import data_converter
from codemode.worker.dev_server import free_port
from tests.cli.runner import Background, base_env

from .conftest import K1, K2, keys_env

UI = "http://localhost:8233"
JSON = {"Content-Type": "application/json", "X-Namespace": "default"}


def body(*values: object) -> str:
    """Proto3 JSON of plain json/plain payloads."""
    payloads = [{"metadata": {"encoding": "anNvbi9wbGFpbg=="}, "data": _b64(json.dumps(v))} for v in values]
    return json.dumps({"payloads": payloads})


def _b64(text: str) -> str:
    import base64

    return base64.b64encode(text.encode()).decode()


@pytest.fixture
async def codec(store):
    async with CodecServer(
        data_converter(store, keys=Keyring.parse(f"{K2},{K1}")), port=0, ui_origins=[UI], namespaces=["default"]
    ) as server:
        yield server


async def test_encode_decode_round_trip_under_any_path_prefix(codec: CodecServer, store) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{codec.url}/encode", data=body({"secret": "x1"}), headers=JSON) as resp:
            assert resp.status == 200
            encoded = await resp.text()
        (p,) = json_format.Parse(encoded, Payloads()).payloads
        assert p.metadata["encryption-key-id"] == b"k2" and b"x1" not in p.data
        # Only the last path segment counts: the CLI's --codec-endpoint 'http://host/{namespace}'.
        async with http.post(f"{codec.url}/default/decode", data=encoded, headers=JSON) as resp:
            assert resp.status == 200
            (plain,) = json_format.Parse(await resp.text(), Payloads()).payloads
        assert json.loads(plain.data) == {"secret": "x1"}
        # Data under a key the server does not hold: a 400 that names the key id.
        other = data_converter(store, keys=Keyring.parse("k9:" + "A" * 43 + "="))
        (foreign,) = await other.payload_codec.encode(list(json_format.Parse(body(1), Payloads()).payloads))
        async with http.post(
            f"{codec.url}/decode", data=json_format.MessageToJson(Payloads(payloads=[foreign])), headers=JSON
        ) as resp:
            assert resp.status == 400 and "'k9'" in await resp.text()
        for path, data, headers, status in [
            ("/decode", "{not json", JSON, 400),
            ("/decode", body(1), {"Content-Type": "text/plain", "X-Namespace": "default"}, 415),
            ("/nothing", body(1), JSON, 404),
            ("/download", body(1), JSON, 400),  # only external-storage references
            ("/decode", body(1), {"Content-Type": "application/json", "X-Namespace": "other"}, 403),
        ]:
            async with http.post(codec.url + path, data=data, headers=headers) as resp:
                assert resp.status == status, (path, headers, resp.status, await resp.text())


async def test_cors_for_the_web_ui_only(codec: CodecServer) -> None:
    preflight = {
        "Origin": UI,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-namespace",
    }
    async with aiohttp.ClientSession() as http:
        async with http.options(f"{codec.url}/decode", headers=preflight) as resp:
            assert resp.status == 204
            assert resp.headers["Access-Control-Allow-Origin"] == UI
            assert "POST" in resp.headers["Access-Control-Allow-Methods"]
            assert {"content-type", "x-namespace"} <= set(resp.headers["Access-Control-Allow-Headers"].split(", "))
        async with http.post(f"{codec.url}/encode", data=body(1), headers={**JSON, "Origin": UI}) as resp:
            assert resp.status == 200 and resp.headers["Access-Control-Allow-Origin"] == UI
        evil = "http://evil.example"
        async with http.options(f"{codec.url}/decode", headers={**preflight, "Origin": evil}) as resp:
            assert resp.status == 403 and "Access-Control-Allow-Origin" not in resp.headers
        async with http.post(f"{codec.url}/decode", data=body(1), headers={**JSON, "Origin": evil}) as resp:
            assert resp.status == 403
        # On loopback it answers to loopback names only (a rebound DNS name is refused).
        async with http.post(f"{codec.url}/encode", data=body(1), headers={**JSON, "Host": "evil.example"}) as resp:
            assert resp.status == 421


async def test_bearer_token(store) -> None:
    converter = data_converter(store, keys=Keyring.parse(K1))
    async with CodecServer(converter, port=0, token="s3cret") as codec, aiohttp.ClientSession() as http:
        async with http.post(f"{codec.url}/encode", data=body(1), headers=JSON) as resp:
            assert resp.status == 401
        async with http.post(
            f"{codec.url}/encode", data=body(1), headers={**JSON, "Authorization": "Bearer nope"}
        ) as resp:
            assert resp.status == 401
        async with http.post(
            f"{codec.url}/encode", data=body(1), headers={**JSON, "Authorization": "Bearer s3cret"}
        ) as resp:
            assert resp.status == 200
        async with http.options(f"{codec.url}/encode", headers={"Origin": "http://localhost:8233"}) as resp:
            assert resp.status == 204  # a preflight carries no token


async def test_codemode_codec_server_command(data_dir: Path, tmp_path: Path) -> None:
    port = free_port()
    env = base_env(CODEMODE_DATA_DIR=str(data_dir), CODEMODE_CODEC_TOKEN="t0k", **keys_env(K1))
    server = await Background(
        "codec-server", "--port", str(port), "--ui-origin", "http://localhost:9999", env=env, log=tmp_path / "codec.log"
    ).start("Ready.")
    try:
        assert f"http://localhost:{port}" in server.output() and "keys: k1" in server.output()
        headers = {**JSON, "Authorization": "Bearer t0k", "Origin": "http://localhost:9999"}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"http://localhost:{port}/encode", data=body("hi"), headers=headers) as resp:
                assert resp.status == 200 and resp.headers["Access-Control-Allow-Origin"] == "http://localhost:9999"
                encoded = await resp.text()
            async with http.post(f"http://localhost:{port}/decode", data=encoded, headers=headers) as resp:
                (plain,) = json_format.Parse(await resp.text(), Payloads()).payloads
        assert json.loads(plain.data) == "hi"
    finally:
        assert await server.stop() == 0, server.output()
    # Without keys there is nothing to serve: a usage error that says how to make one.
    no_keys = Background("codec-server", "--port", str(port), env=base_env(), log=tmp_path / "nokeys.log")
    with pytest.raises(AssertionError, match="CODEMODE_ENCRYPTION_KEYS is not set"):
        await no_keys.start("Ready.", timeout=20)


async def test_codemode_server_starts_a_codec_server_for_its_web_ui(tmp_path: Path) -> None:
    """With keys, `codemode server` serves the codec protocol to its own UI's origin and
    starts the UI with it as the codec endpoint."""
    port, ui_port, codec_port = free_port(), free_port(), free_port()
    env = base_env(CODEMODE_DATA_DIR=str(tmp_path / "data"), **keys_env(K1))
    args = ("server", "--port", str(port), "--ui-port", str(ui_port), "--codec-port", str(codec_port))
    server = await Background(*args, env=env, log=tmp_path / "server.log").start("Ready.")
    try:
        assert f"Codec server:    http://localhost:{codec_port}" in server.output()
        ui = f"http://localhost:{ui_port}"
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"http://localhost:{codec_port}/encode", data=body(1), headers={**JSON, "Origin": ui}
            ) as resp:
                assert resp.status == 200 and resp.headers["Access-Control-Allow-Origin"] == ui
            # The UI's own settings name the endpoint it was started with.
            async with http.get(f"{ui}/api/v1/settings") as resp:
                settings = await resp.json(content_type=None)
        assert settings["Codec"]["Endpoint"] == f"http://localhost:{codec_port}", settings
    finally:
        assert await server.stop() == 0, server.output()
