"""Streamable HTTP for the MCP server: bearer tokens (the SDK's auth middleware with a
verifier of our static tokens), ``Origin`` and ``Host`` checks before anything else (the MCP
spec's defence against DNS rebinding: 403 for a foreign origin, token or not), and the rule
that a server reachable from other machines never runs without a token."""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import re
from dataclasses import dataclass

from mcp.server.auth.provider import AccessToken
from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

#: The path clients connect to.
MCP_PATH = "/mcp"
#: A shorter token is refused: it could be guessed.
MIN_TOKEN_CHARS = 16
#: ``NAME:SECRET``: a token that names the person (or machine) it was given to.
_NAMED = re.compile(r"([A-Za-z0-9][A-Za-z0-9._@-]{0,63}):(.+)")
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class BearerToken:
    secret: str
    #: Who holds it; the audit records decisions made with it as ``mcp:<subject>``.
    subject: str | None = None

    @classmethod
    def parse(cls, value: str) -> BearerToken:
        """``SECRET``, or ``NAME:SECRET`` to name its holder. Raises ``ValueError`` when short."""
        m = _NAMED.fullmatch(value)
        token = cls(m.group(2), m.group(1)) if m and len(m.group(2)) >= MIN_TOKEN_CHARS else cls(value)
        if len(token.secret) < MIN_TOKEN_CHARS:
            raise ValueError(f"a token must have at least {MIN_TOKEN_CHARS} characters (e.g. `openssl rand -hex 24`)")
        return token


class StaticTokens:
    """The SDK's ``TokenVerifier`` over a fixed set of tokens (compared in constant time)."""

    def __init__(self, tokens: list[BearerToken]) -> None:
        if not tokens:
            raise ValueError("at least one token")
        self.tokens = tokens

    async def verify_token(self, token: str) -> AccessToken | None:
        given = token.encode()
        found = None
        for candidate in self.tokens:  # no early exit: every token is compared
            if hmac.compare_digest(given, candidate.secret.encode()):
                found = candidate
        if found is None:
            return None
        return AccessToken(token=token, client_id=found.subject or "codemode-mcp", scopes=[], subject=found.subject)


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


class OriginGuard:
    """Refuses a request whose ``Origin`` is not an allowed one (403) and, when the server's
    names are known, one whose ``Host`` is not one of them (421). No ``Origin`` (a client
    that is not a browser) passes; the token is checked after this."""

    def __init__(self, app: ASGIApp, *, host: str, allow_origins: list[str]) -> None:
        self.app = app
        names = list(_LOOPBACK_HOSTS)
        wildcard = host in ("0.0.0.0", "::", "")
        if not is_loopback(host) and not wildcard:
            names.append(url_host(host))
        #: Host header values (without port) this server answers to; None: any (a wildcard bind).
        self.hosts = None if wildcard else set(names)
        self.origins = {f"http://{n}" for n in names} | {o.rstrip("/") for o in allow_origins}

    def origin_allowed(self, origin: str) -> bool:
        origin = origin.rstrip("/")
        if origin in self.origins:
            return True
        scheme_host, sep, port = origin.rpartition(":")
        return bool(sep) and port.isdigit() and scheme_host in self.origins

    def host_allowed(self, host: str | None) -> bool:
        if self.hosts is None:
            return True
        if not host:
            return False
        if host.startswith("["):  # [::1]:8765
            name = host.split("]", 1)[0] + "]"
        else:
            name = host.rsplit(":", 1)[0]
        return name.lower() in self.hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = Headers(scope=scope)
            origin = headers.get("origin")
            if origin is not None and not self.origin_allowed(origin):
                await PlainTextResponse("Invalid Origin header", status_code=403)(scope, receive, send)
                return
            if not self.host_allowed(headers.get("host")):
                await PlainTextResponse("Invalid Host header", status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def serve(app: ASGIApp, host: str, port: int, *, ready: asyncio.Event | None = None) -> None:
    """Serve ``app`` with uvicorn until cancelled (or a signal stops uvicorn)."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                await task  # raises what stopped it (the port is taken...)
                raise OSError(f"the HTTP server on {host}:{port} stopped before it started")
            await asyncio.sleep(0.05)
        if ready is not None:
            ready.set()
        await task
    except asyncio.CancelledError:
        server.should_exit = True
        await asyncio.shield(task)
        raise
