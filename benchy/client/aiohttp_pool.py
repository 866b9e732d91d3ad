"""The aiohttp transport (`--transport aiohttp`): the same requests as benchy.client.http1's
Http1Pool, behind its interface; the reference the lean transport is compared against
(docs/network.md). aiohttp is imported when used: the lean transport never needs it (a quarter
second a process)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from benchy.client.connect import ssl_context, unless_plain_http
from benchy.client.http1 import PEEK_BYTES, Request, Response, Sink
from benchy.client.settings import ClientSettings, split_credentials

if TYPE_CHECKING:
    import aiohttp


class AiohttpPool:
    """The same requests over aiohttp (`--transport aiohttp`), behind Http1Pool's interface."""

    def __init__(self, settings: ClientSettings, proxy_for: Callable[[str], str | None]) -> None:
        import aiohttp

        self.settings = settings
        self.proxy_for = proxy_for
        # Our own TLS context, as the lean transport's: aiohttp's is made once, at its import.
        self._ssl = ssl_context(settings.insecure)
        self._session = self._new_session(aiohttp.TCPConnector(limit=settings.connections + 4, ssl=self._ssl))
        self._fresh: aiohttp.ClientSession | None = None
        self._speaks_tls: set[tuple[str, int]] = set()  # origins that completed a handshake

    def _new_session(self, connector: aiohttp.TCPConnector) -> aiohttp.ClientSession:
        import aiohttp

        trace = aiohttp.TraceConfig()
        trace.on_connection_reuseconn.append(_note_reused_connection)
        # read_bufsize: SSE lines of a buffered server can be long; we parse them ourselves.
        return aiohttp.ClientSession(
            connector=connector,
            headers={"User-Agent": "benchy"},
            read_bufsize=2**20,
            trace_configs=[trace],
        )

    async def request(self, req: Request, response: Response) -> None:
        """As Http1Pool.request; an https origin that has not yet completed a handshake is asked
        in plain HTTP when no answer comes soon (connect.answers_plain_http), so that https:// to
        a plain-HTTP server fails at once rather than at --timeout."""
        parts = urlsplit(req.url)
        origin = (parts.hostname or "", parts.port or 443)
        if parts.scheme != "https" or origin in self._speaks_tls or self.proxy_for(req.url) is not None:
            await self._request(req, response)
            return
        sending = asyncio.ensure_future(self._request(req, response))
        deadline = time.perf_counter() + min(req.timeout_s, 5.0)
        await unless_plain_http(sending, *origin, deadline, lambda: bool(response.status))
        self._speaks_tls.add(origin)

    async def _request(self, req: Request, response: Response) -> None:
        import aiohttp

        session = self._session
        if req.fresh:  # a new connection for every request (for the one retry)
            if self._fresh is None:
                self._fresh = self._new_session(aiohttp.TCPConnector(force_close=True, ssl=self._ssl))
            session = self._fresh
        headers = {**req.headers, "Content-Type": "application/json"} if req.body is not None else req.headers
        async with session.request(
            req.method,
            req.url,
            data=req.body,
            allow_redirects=False,
            timeout=aiohttp.ClientTimeout(total=req.timeout_s, sock_read=req.stall_s),
            trace_request_ctx=response,
            **self._proxy(req.url, headers),
        ) as resp:
            response.status, response.head_s = resp.status, time.perf_counter()
            response.headers = {k.lower(): v for k, v in resp.headers.items()}
            response.streamed = req.on_head(response)
            if response.streamed:
                await _read_body(resp, req.sink)
            else:
                response.peek = await resp.content.read(PEEK_BYTES)
            response.end_s = time.perf_counter()

    def _proxy(self, url: str, headers: dict[str, str]) -> dict[str, Any]:
        """request() arguments for the proxy of `url`: the proxy, and its credentials as a
        header of the CONNECT (https), or of the request itself (plain http: aiohttp sends
        proxy_headers only with a CONNECT)."""
        proxy = self.proxy_for(url)
        if proxy is None:
            return {"headers": headers}
        bare, basic = split_credentials(proxy)
        if basic is None:
            return {"headers": headers, "proxy": bare}
        if url.startswith("https:"):
            return {"headers": headers, "proxy": bare, "proxy_headers": {"Proxy-Authorization": basic}}
        return {"headers": {**headers, "Proxy-Authorization": basic}, "proxy": bare}

    async def warm(self, url: str, n: int, timeout_s: float, headers: dict[str, str]) -> None:
        """n GETs of `url` held open at once: aiohttp opens a connection only for a request."""
        import aiohttp

        arrived, all_in = 0, asyncio.Event()

        async def hold() -> None:
            nonlocal arrived
            try:
                async with self._session.get(
                    url, timeout=aiohttp.ClientTimeout(total=timeout_s), **self._proxy(url, headers)
                ) as resp:
                    arrived += 1
                    if arrived == n:
                        all_in.set()
                    await asyncio.wait_for(all_in.wait(), timeout_s)
                    await resp.read()
            finally:
                all_in.set()  # one failed: the others need not wait for it

        await asyncio.gather(*(hold() for _ in range(n)), return_exceptions=True)

    async def close(self) -> None:
        for session in (self._session, self._fresh):
            if session is not None:
                await session.close()


async def _read_body(resp: aiohttp.ClientResponse, sink: Sink) -> None:
    """Every read to the sink until the body ends, or until the sink's grace runs out once it
    has the whole answer (the connection is then closed, not reused)."""
    wait: float | None = None
    while True:
        try:
            read = resp.content.readany()
            chunk = await (read if wait is None else asyncio.wait_for(read, wait))
        except asyncio.TimeoutError:
            resp.close()
            return
        if not chunk:
            return
        got = sink(chunk, time.perf_counter())
        wait = got if got is not None else wait


async def _note_reused_connection(
    session: aiohttp.ClientSession, trace_config_ctx: SimpleNamespace, params: aiohttp.TraceConnectionReuseconnParams
) -> None:
    if isinstance(trace_config_ctx.trace_request_ctx, Response):
        trace_config_ctx.trace_request_ctx.reused = True
