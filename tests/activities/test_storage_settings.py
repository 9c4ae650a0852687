"""Choosing the store from the environment: variables, their precedence, and the layering rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pydantic
import pytest

from codemode.storage import FileBlobStore, S3BlobStore, StorageSettings, open_blob_store
from tests.s3_local import S3Endpoint

OURS = (
    "CODEMODE_S3_BUCKET",
    "CODEMODE_S3_ENDPOINT_URL",
    "CODEMODE_S3_ADDRESSING_STYLE",
    "CODEMODE_S3_CREATE_BUCKET",
)
AWS = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_PROFILE",
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    """A clean slate: none of the variables set, the data dir in tmp, no ~/.aws."""
    for name in OURS + AWS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODEMODE_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    return monkeypatch


def test_default_is_files_under_the_data_dir(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = StorageSettings.from_env()
    assert settings.kind == "file"
    assert settings.file_root == tmp_path / "data" / "blobs"


def test_bucket_selects_s3(env: pytest.MonkeyPatch) -> None:
    env.setenv("CODEMODE_S3_BUCKET", "payloads")
    settings = StorageSettings.from_env()
    assert (settings.kind, settings.bucket, settings.endpoint_url, settings.region) == ("s3", "payloads", None, None)
    assert settings.file_root is None and settings.create_bucket is False


def test_endpoint_precedence(env: pytest.MonkeyPatch) -> None:
    env.setenv("CODEMODE_S3_BUCKET", "b")
    env.setenv("AWS_ENDPOINT_URL", "http://all-services:1")
    assert StorageSettings.from_env().endpoint_url == "http://all-services:1"
    env.setenv("AWS_ENDPOINT_URL_S3", "http://s3-only:2")
    assert StorageSettings.from_env().endpoint_url == "http://s3-only:2"
    env.setenv("CODEMODE_S3_ENDPOINT_URL", "http://ours:3")
    assert StorageSettings.from_env().endpoint_url == "http://ours:3"
    env.setenv("CODEMODE_S3_ENDPOINT_URL", "  ")  # empty counts as unset
    assert StorageSettings.from_env().endpoint_url == "http://s3-only:2"


def test_region_precedence(env: pytest.MonkeyPatch) -> None:
    env.setenv("CODEMODE_S3_BUCKET", "b")
    env.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert StorageSettings.from_env().region == "eu-west-1"
    env.setenv("AWS_REGION", "eu-central-1")
    assert StorageSettings.from_env().region == "eu-central-1"


def test_options_and_validation(env: pytest.MonkeyPatch) -> None:
    env.setenv("CODEMODE_S3_BUCKET", "b")
    env.setenv("CODEMODE_S3_ADDRESSING_STYLE", "virtual")
    env.setenv("CODEMODE_S3_CREATE_BUCKET", "true")
    settings = StorageSettings.from_env()
    assert (settings.addressing_style, settings.create_bucket) == ("virtual", True)
    env.setenv("CODEMODE_S3_ADDRESSING_STYLE", "sideways")
    with pytest.raises(pydantic.ValidationError, match="addressing_style"):
        StorageSettings.from_env()
    env.delenv("CODEMODE_S3_ADDRESSING_STYLE")
    env.setenv("CODEMODE_S3_ENDPOINT_URL", "127.0.0.1:8333")
    with pytest.raises(pydantic.ValidationError, match="not an http"):
        StorageSettings.from_env()


def test_no_credential_settings_of_our_own() -> None:
    assert not {f for f in StorageSettings.model_fields if "key" in f or "secret" in f or "token" in f}
    with pytest.raises(pydantic.ValidationError):
        StorageSettings(bucket="b", access_key="x")  # type: ignore[call-arg]


async def test_open_file_store_from_env(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    store = await open_blob_store()
    assert isinstance(store, FileBlobStore)
    await store.put_object(bucket=store.bucket, key="a/b", data=b"v")
    assert (tmp_path / "data" / "blobs" / store.bucket / "a" / "b").read_bytes() == b"v"


@pytest.mark.parametrize("endpoint_variable", ["CODEMODE_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"])
async def test_open_s3_store_from_env(env: pytest.MonkeyPatch, s3_server: S3Endpoint, endpoint_variable: str) -> None:
    env.setenv("CODEMODE_S3_BUCKET", s3_server.bucket)
    env.setenv(endpoint_variable, s3_server.endpoint_url)
    env.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    env.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    store = await open_blob_store()
    try:
        assert isinstance(store, S3BlobStore)
        assert store.endpoint_url == s3_server.endpoint_url
        assert store.region == "us-east-1"
        await store.put_object(bucket=store.bucket, key="from-env", data=b"v")
        assert await store.get_object(bucket=store.bucket, key="from-env") == b"v"
        await store.delete_objects(bucket=store.bucket, keys=["from-env"])
    finally:
        await store.aclose()


def test_importing_the_store_imports_neither_worker_nor_boto() -> None:
    """Layers import one way (worker -> activities), and the file store does not pay for boto."""
    code = (
        "import sys, codemode.storage\n"
        "bad = sorted(m for m in sys.modules if m.startswith('codemode.worker') or m.split('.')[0] in ('aioboto3', 'aiobotocore', 'botocore'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])
