"""The Temporal codec server protocol over our data converter, so the web UI and the
``temporal`` CLI show the plaintext of encrypted payloads to whoever can reach this server.

``POST .../encode``, ``POST .../decode`` and ``POST .../download``: a proto3-JSON
``temporal.api.common.v1.Payloads`` in and out. Only the last path segment counts, so one
server can be mounted per namespace (``temporal --codec-endpoint 'http://host:8081/{namespace}'``).

- ``decode`` decrypts; an external-storage reference is fetched from the object store and
  decrypted too, unless ``?preserveStorageRefs=true`` (then it is returned as it is and the
  UI offers ``download`` for it).
- ``download`` takes only references: fetch, then decrypt.
- ``encode`` encrypts (what the UI sends when someone signals or starts a workflow from it).

Guarded, since one request decrypts anything: CORS for the web UI's origin only (a browser
on another site can neither preflight nor read an answer), an optional bearer token, an
optional namespace allow-list on ``X-Namespace``, and when it listens on loopback only
``Host: localhost`` style names (no DNS rebinding). Bind it to loopback or put it behind TLS.
"""

from __future__ import annotations

import dataclasses
import hmac
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.sdk.v1 import ExternalStorageReference
from temporalio.converter import DataConverter

if TYPE_CHECKING:
    from codemode.storage import BlobStore

log = logging.getLogger(__name__)

DEFAULT_PORT = 8081
#: The origins of the embedded server's web UI at its default port.
DEFAULT_UI_ORIGINS = ("http://localhost:8233", "http://127.0.0.1:8233")
LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
#: The web UI sends a workflow page's payloads in a few requests; a download may be large.
MAX_BODY = 256 * 1024 * 1024
_REFERENCE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()
_ALLOWED_HEADERS = "authorization, content-type, x-namespace"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class CodecError(Exception):
    """A payload the codec could not transform (a key we do not hold, altered ciphertext)."""


def is_storage_reference(payload: Payload) -> bool:
    return (
        payload.metadata.get("encoding") == b"json/protobuf" and payload.metadata.get("messageType") == _REFERENCE_TYPE
    )


class PayloadTransforms:
    """encode / decode / download on payloads, with the converter's codec and external storage."""

    def __init__(self, converter: DataConverter) -> None:
        if converter.payload_codec is None:
            raise ValueError(
                "the data converter has no payload codec: set CODEMODE_ENCRYPTION_KEYS (nothing to decode without keys)"
            )
        self.codec = converter.payload_codec
        self.storage = converter.external_storage

    async def encode(self, payloads: list[Payload]) -> list[Payload]:
        return await self.codec.encode(payloads)

    async def decode(self, payloads: list[Payload], *, fetch_references: bool = True) -> list[Payload]:
        if fetch_references:
            payloads = await self._retrieve(payloads)
        out = list(payloads)
        todo = [i for i, p in enumerate(payloads) if not is_storage_reference(p)]
        for i, p in zip(todo, await self.codec.decode([payloads[i] for i in todo]), strict=True):
            out[i] = p
        return out

    async def download(self, payloads: list[Payload]) -> list[Payload]:
        if not all(is_storage_reference(p) for p in payloads):
            raise ValueError("download takes external-storage references only")
        return await self.decode(payloads)

    async def _retrieve(self, payloads: list[Payload]) -> list[Payload]:
        if self.storage is None or not any(is_storage_reference(p) for p in payloads):
            return payloads
        # The SDK's own retrieval (what the converter runs on decode; its sample codec server
        # calls it the same way): references resolved by driver name, hashes verified.
        return list(await self.storage._retrieve_payload_sequence(payloads))


def codec_app(
    converter: DataConverter,
    *,
    ui_origins: Sequence[str] = DEFAULT_UI_ORIGINS,
    token: str | None = None,
    namespaces: Collection[str] = (),
    loopback_only: bool = False,
) -> web.Application:
    """The aiohttp application. ``ui_origins``: origins whose pages may call it (CORS);
    ``token``: require ``Authorization: Bearer <token>``; ``namespaces``: serve only these
    ``X-Namespace`` values (empty: any); ``loopback_only``: refuse Host names other than
    localhost, 127.0.0.1 and ::1."""
    transforms = PayloadTransforms(converter)
    origins = {o.rstrip("/") for o in ui_origins}

    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if loopback_only and (request.url.host or "").strip("[]").lower() not in LOOPBACK_HOSTS:
            return web.Response(status=421, text="this codec server answers only to localhost")
        origin = request.headers.get("Origin")
        if origin is not None and origin.rstrip("/") not in origins:
            return web.Response(status=403, text=f"origin {origin} is not allowed (codemode codec-server --ui-origin)")
        cors = _cors_headers(origin) if origin is not None else {}
        if request.method == "OPTIONS":  # the browser's preflight: no token, no body
            return web.Response(status=204, headers=cors)
        if token is not None and not _bearer_ok(request.headers.get("Authorization", ""), token):
            return web.Response(
                status=401, text="a bearer token is required", headers={**cors, "WWW-Authenticate": "Bearer"}
            )
        namespace = request.headers.get("X-Namespace", "")
        if namespaces and namespace not in namespaces:
            return web.Response(status=403, text=f"namespace {namespace!r} is not served here", headers=cors)
        response = await handler(request)
        response.headers.update(cors)
        return response

    def _cors_headers(origin: str) -> dict[str, str]:
        return {
            "Access-Control-Allow-Origin": origin,
            "Access-Control-Allow-Methods": "POST, OPTIONS",
            "Access-Control-Allow-Headers": _ALLOWED_HEADERS,
            "Access-Control-Allow-Credentials": "true",
            "Access-Control-Max-Age": "600",
            "Vary": "Origin",
        }

    async def dispatch(request: web.Request) -> web.StreamResponse:
        action = request.path.rstrip("/").rsplit("/", 1)[-1]
        if action not in ("encode", "decode", "download"):
            return web.Response(status=404, text="POST .../encode, .../decode or .../download")
        if request.method != "POST":
            return web.Response(status=405, headers={"Allow": "POST, OPTIONS"})
        if request.content_type != "application/json":
            return web.Response(
                status=415, text="send application/json (proto3 JSON of temporal.api.common.v1.Payloads)"
            )
        try:
            payloads = list(json_format.Parse(await request.read(), Payloads()).payloads)
        except (json_format.ParseError, DecodeError, UnicodeDecodeError) as err:
            return web.Response(status=400, text=f"not a Payloads message: {err}")
        try:
            if action == "encode":
                payloads = await transforms.encode(payloads)
            elif action == "decode":
                keep = request.query.get("preserveStorageRefs", "").lower() == "true"
                payloads = await transforms.decode(payloads, fetch_references=not keep)
            else:
                payloads = await transforms.download(payloads)
        except Exception as err:  # a key we do not hold, altered data, a blob gone from the store
            log.warning("codec server: %s failed: %s: %s", action, type(err).__name__, err)
            return web.Response(status=400, text=f"{action} failed: {type(err).__name__}: {err}")
        return web.Response(
            content_type="application/json",
            text=json_format.MessageToJson(Payloads(payloads=payloads), indent=None),
        )

    app = web.Application(middlewares=[guard], client_max_size=MAX_BODY)
    app.router.add_route("*", "/{path:.*}", dispatch)
    return app


def _bearer_ok(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())


@dataclass(frozen=True)
class CodecSettings:
    """Where the codec server listens and whom it serves: the one statement of its parameters
    (``codemode codec-server``'s flags, the embedded server's codec, ``CodecServer``)."""

    port: int = DEFAULT_PORT
    host: str = "127.0.0.1"
    #: The web UIs allowed to call it (CORS).
    ui_origins: Sequence[str] = DEFAULT_UI_ORIGINS
    #: A bearer token every request must carry (None: none, on loopback only).
    token: str | None = None
    #: Serve only these namespaces (empty: any).
    namespaces: Collection[str] = ()


class CodecServer:
    """The codec server on ``host:port`` in this process's event loop: ``await start()``,
    ``await stop()``, or ``async with``. ``settings``, with any of its fields given as keywords
    over it (``CodecServer(converter, port=0)``)."""

    def __init__(self, converter: DataConverter, settings: CodecSettings | None = None, /, **given: Any) -> None:
        self.settings = s = dataclasses.replace(settings or CodecSettings(), **given)
        self.host, self.port = s.host, s.port
        self.app = codec_app(
            converter,
            ui_origins=s.ui_origins,
            token=s.token,
            namespaces=s.namespaces,
            loopback_only=s.host.strip("[]").lower() in LOOPBACK_HOSTS,
        )
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = "localhost" if self.host.strip("[]").lower() in LOOPBACK_HOSTS | {"0.0.0.0", "::"} else self.host
        return f"http://{host}:{self.port}"

    async def start(self) -> CodecServer:
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        if self.port == 0:
            self.port = runner.addresses[0][1]
        self._runner = runner
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> CodecServer:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def serve_codec(
    store: BlobStore,
    settings: CodecSettings,
    *,
    fallback: bool = True,
    notify: Callable[[str], None] | None = None,
) -> CodecServer:
    """A running codec server over the data converter of ``store`` (and this process's keys).
    ``fallback``: when the port is taken, take a free one instead of raising ``OSError``."""
    from codemode.worker.converter import data_converter

    converter = data_converter(store)
    try:
        return await CodecServer(converter, settings).start()
    except OSError:
        if not fallback:
            raise
    if notify is not None:
        notify(f"Port {settings.port} is taken; the codec server takes a free port instead.")
    return await CodecServer(converter, settings, port=0).start()
