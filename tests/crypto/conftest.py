"""Encryption tests: clients and workers of the session's dev server with real keys (their own
data converters), the session's object store, and the `temporal` CLI reading raw history."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import re
import uuid
from collections.abc import Awaitable, Callable, Iterable

import pytest
from temporalio.client import Client

from codemode.storage import BlobStore
from codemode.storage.encryption import KEYS_ENV, Keyring, new_key
from codemode.worker import telemetry
from codemode.worker.binaries import temporal_cli_path
from codemode.worker.converter import data_converter

#: Three keys for the session, as CODEMODE_ENCRYPTION_KEYS entries.
K1, K2, K3 = (f"{name}:{new_key()}" for name in ("k1", "k2", "k3"))


@pytest.fixture
def task_queue() -> str:
    return f"tq-crypto-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def keyed_client(temporal_address: str, store: BlobStore) -> Callable[[str | None], Awaitable[Client]]:
    """``await keyed_client("k2:...,k1:...")``: a client of the session's server whose data
    converter encrypts with those keys (None: no encryption), on the session's store."""

    async def make(keys: str | None) -> Client:
        converter = data_converter(store, keys=Keyring.parse(keys) if keys else None)
        return await Client.connect(
            temporal_address, data_converter=converter, interceptors=telemetry.interceptors(None)
        )

    return make


async def temporal_cli(*args: str, address: str, env: dict[str, str] | None = None) -> str:
    """Run the `temporal` CLI (an asyncio subprocess: in-process workers keep running)."""
    proc = await asyncio.create_subprocess_exec(
        temporal_cli_path(),
        *args,
        "--address",
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, f"temporal {' '.join(args)}: exit {proc.returncode}\n{err.decode()}"
    return out.decode()


_B64 = re.compile(r"[A-Za-z0-9+/_-]{8,}={0,2}")


def readable_texts(value: object, depth: int = 0) -> Iterable[str]:
    """Every string in a JSON value, and what every base64-looking string (or run of base64
    characters inside one) decodes to, recursively: what someone without the key can read."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from readable_texts(v, depth)
    elif isinstance(value, list):
        for v in value:
            yield from readable_texts(v, depth)
    elif isinstance(value, str):
        yield value
        if depth >= 4:
            return
        for run in _B64.findall(value):
            for decode in (base64.b64decode, base64.urlsafe_b64decode):
                try:
                    raw = decode(run + "=" * (-len(run) % 4))
                except (binascii.Error, ValueError):
                    continue
                text = raw.decode("utf-8", errors="replace")
                yield text
                try:
                    yield from readable_texts(json.loads(text), depth + 1)
                except ValueError:
                    yield from readable_texts(text, depth + 1) if text != value else ()
    elif value is not None:
        yield str(value)


def markers_in(texts: Iterable[str], markers: Iterable[str]) -> set[str]:
    texts = list(texts)
    return {m for m in markers if any(m in t for t in texts)}


def keys_env(keys: str) -> dict[str, str]:
    return {KEYS_ENV: keys}
