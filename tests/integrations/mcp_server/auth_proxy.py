"""A reverse proxy that adds ``Authorization: Bearer`` to every request and passes the rest
(``Host``, ``Origin``, bodies, streamed responses) through unchanged. The MCP conformance
suite cannot send headers; behind this it tests our server, token check included."""

from __future__ import annotations

from aiohttp import ClientSession, ClientTimeout, web

_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding"}


class AuthProxy:
    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.token = token
        self.runner: web.AppRunner | None = None
        self.session: ClientSession | None = None
        self.url = ""

    async def start(self) -> AuthProxy:
        self.session = ClientSession(timeout=ClientTimeout(total=None), auto_decompress=False)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.forward)
        # Streams held open (the GET notification stream) are dropped at once on stop.
        self.runner = web.AppRunner(app, shutdown_timeout=0.5)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self

    async def forward(self, request: web.Request) -> web.StreamResponse:
        assert self.session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["Authorization"] = f"Bearer {self.token}"
        async with self.session.request(
            request.method, self.upstream + request.rel_url.path_qs, headers=headers, data=await request.read()
        ) as upstream:
            response = web.StreamResponse(status=upstream.status)
            for key, value in upstream.headers.items():
                if key.lower() not in _HOP:
                    response.headers[key] = value
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
            return response

    async def stop(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.runner is not None:
            await self.runner.cleanup()
