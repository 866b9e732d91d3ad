"""benchy's default HTTP transport: HTTP/1.1 over asyncio's buffered protocol, parsed by httptools.

Why not aiohttp here: at one token per SSE event, aiohttp spends 12-15 µs of CPU per event on
its own bookkeeping (a stream-reader buffer, chunk-boundary lists, a read timer rescheduled per
socket read, a task wake-up per read). Here the socket's bytes go from asyncio's buffer_updated
straight into httptools (llhttp, the C parser Node.js uses; it decodes the framing: chunked,
Content-Length, read-until-close, interim 1xx responses, keep-alive) and on into the caller's
sink, stamped with time.perf_counter() before anything else is done, with no task wake-up
until the response ends. The stall timeout is lazy: a read only stores its time (the stamp it
took anyway), and a timer re-arms itself from the last read when it fires.

What it does besides: keep-alive connections per origin (reused only once their previous
response was read to its end; `warm` opens them ahead of need), TLS (verified unless
insecure), an HTTP proxy from the environment (`env_proxy`: HTTP_PROXY / HTTPS_PROXY /
NO_PROXY as curl and urllib read them; https goes through a CONNECT tunnel), no compression
(Accept-Encoding: identity). Redirects are the caller's (client.py follows them for both
transports alike). Failures raise HttpFailure with the error kind client.py records: connect,
proxy, tls, reset, disconnect, stall, timeout, client_error.
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import httptools

from benchy.client import kernel_stamps
from benchy.client.connect import HttpFailure, _no_plain_http, _Route, _route, ssl_context

PEEK_BYTES = 300  # of a body that is not streamed (an HTTP error, not an event stream)
MAX_HEAD_BYTES = 64 * 1024
READ_BUFFER = 64 * 1024


@dataclass
class Response:
    """Filled as the exchange goes: `reused` as soon as a connection is chosen (so that it is
    known when the exchange fails), the head when it is in, `end_s` when the body ended."""

    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    streamed: bool = False  # the body went to the sink (else: its first bytes are in `peek`)
    peek: bytes = b""
    head_s: float = 0.0  # perf_counter when the head was complete
    end_s: float = 0.0  # perf_counter of the read that ended the body
    reused: bool = False  # sent over a kept-alive connection

    def clear(self) -> None:
        """Empty again, for the next hop of a redirect."""
        self.__dict__.update(Response().__dict__)


# on_head(response) → stream the body to the sink? ; sink(bytes, perf_counter of the read) →
# None to read on, or seconds to wait at most for the body's end (the answer is whole: a body
# still open then is left, and its connection closed)
OnHead = Callable[[Response], bool]
Sink = Callable[[bytes, float], float | None]


@dataclass(slots=True)  # not frozen: a frozen dataclass's __init__ costs a setattr call a field
class Request:
    """One request as either transport takes it (Http1Pool, aiohttp_pool.AiohttpPool)."""

    method: str
    url: str
    body: bytes | None
    headers: dict[str, str]
    on_head: OnHead
    sink: Sink
    timeout_s: float
    stall_s: float
    fresh: bool = False  # on a new connection, not a kept-alive one


class Http1Pool:
    """Keep-alive connections per origin; no limit (the load generator bounds what is in flight).

    headers: sent with every request (credentials are the caller's, per request: a redirect's
    origin may not be the one they are for). proxy_for(url) → a proxy URL or None (env_proxy, or nothing when asked to go direct)."""

    def __init__(
        self,
        insecure: bool = False,
        headers: dict[str, str] | None = None,
        proxy_for: Callable[[str], str | None] = lambda url: None,
        streamed: bool = True,
    ) -> None:
        self.headers = {"Accept-Encoding": "identity", **(headers or {})}
        self.proxy_for = proxy_for
        self._insecure = insecure
        self._routes: dict[str, _Route] = {}
        self._idle: dict[str, list[_Connection]] = {}
        self._speaks_tls: set[tuple[str, int]] = set()  # a handshake done: no plain-HTTP check again
        # Plain TCP reads stamped on arrival (kernel_stamps.py) where streams are read: a whole
        # answer needs no token's time, and its reads cost less through asyncio's transport.
        self.kernel_stamps = streamed and kernel_stamps.wanted()
        # (method, url) → the request's lines before the caller's headers and after them: the
        # same for every request to that URL, so they are made and checked once.
        self._heads: dict[tuple[str, str], tuple[str, list[str]]] = {}

    async def request(self, req: Request, response: Response) -> None:
        """Sends the request and returns once its response has ended (filled into `response`).
        Raises HttpFailure."""
        deadline = time.perf_counter() + req.timeout_s
        route = self.route(req.url)
        request = self._request(req.method, req.url, route, req.body, req.headers)
        conn = None if req.fresh else self._take_idle(route.origin)
        response.reused = conn is not None
        if conn is None:
            conn = await self._connect(route, deadline, req.timeout_s)
        exchange = conn.spare
        if exchange is None:
            exchange = conn.spare = _Exchange(conn, response, req.on_head, req.sink, req.stall_s)
        else:  # the connection's own, its parser and timer kept from the response before
            exchange.restart(response, req.on_head, req.sink, req.stall_s)
        conn.begin(exchange, request)
        try:
            await exchange.wait(deadline, req.timeout_s)
        except BaseException:
            conn.close()
            raise
        if exchange.reusable:
            self._idle.setdefault(route.origin, []).append(conn)
        else:
            conn.close()

    async def warm(self, url: str, n: int, timeout_s: float, headers: dict[str, str] | None = None) -> None:
        """Opens connections to the origin of `url` until n are idle, all at once, so that
        no measured request pays for a connection set-up (no request is sent: `headers` are
        for the aiohttp transport's warm, which needs one). Raises HttpFailure."""
        route = self.route(url)
        idle = self._idle.setdefault(route.origin, [])
        idle[:] = [c for c in idle if c.open]
        deadline = time.perf_counter() + timeout_s
        opened = await asyncio.gather(
            *(self._connect(route, deadline, timeout_s) for _ in range(n - len(idle))), return_exceptions=True
        )
        idle += [c for c in opened if isinstance(c, _Connection)]
        failed = [c for c in opened if isinstance(c, BaseException)]
        if failed:
            raise failed[0]

    def route(self, url: str) -> _Route:
        origin = url.split("/", 3)[:3]
        key = "/".join(origin)
        route = self._routes.get(key)
        if route is None:
            route = self._routes[key] = _route(url, self.proxy_for(url))
        return route

    def close(self) -> None:
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()

    def _take_idle(self, origin: str) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            conn = idle.pop()
            if conn.open:
                return conn
        return None

    async def _connect(self, route: _Route, deadline: float, timeout_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        host, port = (route.proxy_host, route.proxy_port) if route.proxy_host else (route.host, route.port)
        direct_tls = ssl_context(self._insecure) if route.tls and not route.proxy_host else None
        try:
            if self.kernel_stamps and not route.tls and not route.proxy_host:
                conn = _Connection()
                opening = kernel_stamps.open_connection(conn, host, port)
                await asyncio.wait_for(opening, max(0.0, deadline - time.perf_counter()))
                return conn
            connecting = asyncio.ensure_future(
                loop.create_connection(
                    _Connection, host, port, ssl=direct_tls, server_hostname=route.host if direct_tls else None
                )
            )
            try:
                if direct_tls is not None and (host, port) not in self._speaks_tls:
                    await _no_plain_http(connecting, host, port, deadline)
                _, conn = await asyncio.wait_for(connecting, max(0.0, deadline - time.perf_counter()))
                if direct_tls is not None:
                    self._speaks_tls.add((host, port))
            finally:
                connecting.cancel()  # a no-op once it is done
            if route.tunnel:
                await self._tunnel(conn, route, deadline, timeout_s)
        except asyncio.TimeoutError:
            raise HttpFailure("connect", f"no connection within {timeout_s:g} s") from None
        except ssl.SSLCertVerificationError as exc:
            raise HttpFailure("tls", f"certificate not trusted: {exc.verify_message or exc}") from None
        except OSError as exc:  # refused, unreachable, DNS (socket.gaierror), other TLS errors
            kind, where = ("proxy", f"proxy {host}:{port}: ") if route.proxy_host else ("connect", "")
            raise HttpFailure(kind, where + str(exc.strerror or exc)) from None
        return conn

    async def _tunnel(self, conn: _Connection, route: _Route, deadline: float, timeout_s: float) -> None:
        """CONNECT through the proxy, then TLS to the origin over that tunnel."""
        lines = [f"CONNECT {route.authority} HTTP/1.1", f"Host: {route.authority}"]
        if route.proxy_auth:
            lines.append(f"Proxy-Authorization: {route.proxy_auth}")
        reply = Response()
        exchange = _Exchange(conn, reply, lambda r: False, _ignore, timeout_s, head_only=True)
        conn.begin(exchange, "\r\n".join([*lines, "", ""]).encode())
        try:
            await exchange.wait(deadline, timeout_s)
        except HttpFailure as exc:
            conn.close()
            raise HttpFailure("proxy", f"proxy {route.proxy_host}:{route.proxy_port}: {exc.message}") from None
        if not 200 <= reply.status < 300:
            conn.close()
            raise HttpFailure(
                "proxy", f"proxy {route.proxy_host}:{route.proxy_port} refused the tunnel: HTTP {reply.status}"
            )
        loop = asyncio.get_running_loop()
        assert conn.transport is not None  # connected
        try:
            conn.transport = await loop.start_tls(
                conn.transport,
                conn,
                ssl_context(self._insecure),
                server_hostname=route.host,
                ssl_handshake_timeout=max(0.001, deadline - time.perf_counter()),
            )
        except BaseException:
            conn.close()
            raise

    def _request(self, method: str, url: str, route: _Route, body: bytes | None, headers: dict[str, str]) -> bytes:
        cached = self._heads.get((method, url))
        if cached is None:
            if len(self._heads) >= MAX_HEADS:
                self._heads.clear()
            cached = self._heads[method, url] = self._head(method, url, route, self.headers)
        head, after = cached
        if headers.keys().isdisjoint(self.headers):
            own = [f"{k}: {v}" for k, v in headers.items()]
            _check_lines(own)
        else:  # a caller's header replaces the pool's, in its place
            head, after = self._head(method, url, route, {**self.headers, **headers})
            own = []
        lines = [head, *own, *after]
        if body:
            lines.append("Content-Type: application/json")
        if body is not None:  # an empty POST too: a server may wait for a body it is not told is empty
            lines.append(f"Content-Length: {len(body)}")
        lines += ["", ""]
        return "\r\n".join(lines).encode("utf-8") + (body or b"")

    def _head(self, method: str, url: str, route: _Route, headers: dict[str, str]) -> tuple[str, list[str]]:
        """(the request line, Host and `headers`, joined; the lines that follow the caller's
        headers), each checked."""
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        if route.absolute_form:
            target = route.origin + target
        lines = [f"{method} {target} HTTP/1.1", f"Host: {route.authority}"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        after = [f"Proxy-Authorization: {route.proxy_auth}"] if route.absolute_form and route.proxy_auth else []
        _check_lines(lines + after)
        return "\r\n".join(lines), after


MAX_HEADS = 64  # request heads kept per pool (one per URL asked; a redirect adds one)


def _check_lines(lines: list[str]) -> None:
    if any("\r" in line or "\n" in line for line in lines):  # never let a value add a header
        raise HttpFailure("client_error", "a request header value holds a line break")


def _ignore(data: bytes, now: float) -> None:
    pass


_buffers = threading.local()


def _read_buffer() -> memoryview:
    """The read buffer of this thread's connections, one for all: a read is parsed before the
    loop makes its next (buffer_updated, kernel_stamps), so no two reads share it at once, and
    an idle pooled connection holds no 64 KiB of its own (issue 53: many agent sessions)."""
    view = getattr(_buffers, "view", None)
    if view is None:
        view = _buffers.view = memoryview(bytearray(READ_BUFFER))
    return view


class _Connection(asyncio.BufferedProtocol):
    """One TCP/TLS connection; bytes go to the exchange in progress, if any. A buffered
    protocol: asyncio's plain one allocates a fresh 256 KiB bytes object for every read,
    which costs more than everything benchy then does with a one-token event."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.exchange: _Exchange | None = None
        self.spare: _Exchange | None = None  # the pool's exchange of this connection, each response's in turn
        self._view = _read_buffer()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        now = time.perf_counter()  # first: parsing never shifts a timestamp
        self._deliver(self._view[:nbytes], now)  # parsed before the next read reuses the buffer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # a stream connection's, plain or TLS
        self.open = True

    def begin(self, exchange: _Exchange, request: bytes) -> None:
        self.exchange = exchange
        assert self.transport is not None  # begun only on an open connection
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:  # transports that do not buffer for us
        self._deliver(data, time.perf_counter())

    def received_at(self, data: memoryview, now: float) -> None:  # kernel_stamps: stamped on arrival
        self._deliver(data, now)

    def _deliver(self, data: bytes | memoryview, now: float) -> None:
        exchange = self.exchange
        if exchange is None:  # bytes nobody asked for: the connection is not clean any more
            self.close()
            return
        exchange.received(data, now)

    def eof_received(self) -> bool:
        return False  # close the transport: connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        if self.exchange is not None:
            self.exchange.lost(exc)
        elif self.spare is not None:  # closed while idle: its timer is not wanted
            self.spare.stop_timer()

    def close(self) -> None:
        self.open = False
        self.exchange = None
        if self.spare is not None:
            self.spare.stop_timer()
        if self.transport is not None:
            self.transport.close()


class _Exchange:
    """One request/response on a connection: httptools parses the head and the body framing
    and calls back here (on_header, on_headers_complete, on_body, on_message_complete); body
    bytes go to the sink, and `done` resolves when the response has ended.

    A kept-alive connection's next response takes the same exchange (`restart`): its parser
    (llhttp reads one response after another) and its timer carry over, so a request costs
    neither a parser nor a timer of its own."""

    def __init__(
        self,
        conn: _Connection,
        response: Response,
        on_head: OnHead,
        sink: Sink,
        stall_s: float,
        head_only: bool = False,
    ) -> None:
        self.conn = conn
        self.head_only = head_only  # a CONNECT reply: the tunnel's bytes follow the head
        self.loop = asyncio.get_running_loop()
        self.parser = httptools.HttpResponseParser(self)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0  # perf_counter when the timer fires
        self._grace: asyncio.TimerHandle | None = None  # the sink's answer is whole: the body's last chance
        self.restart(response, on_head, sink, stall_s)

    def restart(self, response: Response, on_head: OnHead, sink: Sink, stall_s: float) -> None:
        """Ready for the next response on the connection (the one before it ended whole)."""
        self.response = response
        self.on_head = on_head
        self.sink = sink
        self.stall_s = stall_s
        self.done: asyncio.Future[Any] = self.loop.create_future()
        self.headers: dict[str, str] = {}
        self.head_bytes = 0
        self.in_body = False
        self.until_close = False  # no Content-Length, not chunked: the body ends with the connection
        self.streaming = False  # body bytes go to the sink (on_body's one test, per event)
        self.pending: list[bytes] = []  # this read's body pieces, for the sink in one call
        self.now = self.last_read = time.perf_counter()
        self.reusable = False

    async def wait(self, deadline: float, timeout_s: float) -> None:
        # One timer for both bounds (a timer costs the loop more than the checks it runs), at
        # the nearer of the stall's and the whole request's; it moves on while bytes come. A
        # timer left from the connection's response before is kept where it fires no later:
        # _check then re-arms it from this response's bounds.
        self._deadline, self._timeout_s = deadline, timeout_s
        due = min(self.last_read + self.stall_s, deadline)
        if self._timer is None or self._timer_at > due:
            self.stop_timer()
            self._arm(due)
        try:
            await self.done
        finally:
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
            if not self.reusable:  # the connection is closed: its timer goes with it
                self.stop_timer()
            self.conn.exchange = None

    def _arm(self, perf_time: float) -> None:
        self._timer_at = perf_time
        self._timer = self.loop.call_at(self.loop.time() + (perf_time - time.perf_counter()), self._check)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _loop_time(self, perf_time: float) -> float:
        return self.loop.time() + (perf_time - time.perf_counter())

    def _check(self) -> None:
        self._timer = None
        if self.done.done():  # between responses: the next one arms its own
            return
        now = time.perf_counter()
        quiet_until = self.last_read + self.stall_s
        if now >= self._deadline:
            self._fail("timeout", f"request exceeded {self._timeout_s:g} s (--timeout)")
        elif now >= quiet_until:
            self._fail("stall", f"no data for {self.stall_s:g} s (--stall-timeout)")
        else:
            self._arm(min(quiet_until, self._deadline))

    # ---- bytes in ----
    def received(self, data: bytes | memoryview, now: float) -> None:
        self.last_read = self.now = now
        if self.done.done():
            return
        try:
            self.parser.feed_data(data)
            pending = self.pending
            if pending:  # _to_sink, inline: it runs once a read
                wait = self.sink(b"".join(pending) if len(pending) > 1 else pending[0], now)
                pending.clear()
                if wait is not None:
                    self._answered(wait)
        except httptools.HttpParserCallbackError as exc:  # a bug in a sink fails its request, not the loop
            self._sink_failed(exc.__context__ or exc)
        except httptools.HttpParserError as exc:
            if self.in_body:
                self._fail("disconnect", f"malformed response body: {exc}")
            else:
                self._fail("client_error", f"not an HTTP/1.1 response: {exc}")
        except Exception as exc:  # the sink's own, called after the parser
            self._sink_failed(exc)

    def _to_sink(self) -> None:
        """The body pieces of this read, to the sink in one call: they share one timestamp (the
        read's), and a chunked SSE stream brings one piece per event, so one call a read
        instead of one an event saves a sink's whole per-call overhead on every event."""
        pending = self.pending
        if not pending:
            return
        body = b"".join(pending) if len(pending) > 1 else pending[0]
        pending.clear()
        wait = self.sink(body, self.now)
        if wait is not None:
            self._answered(wait)

    def _sink_failed(self, cause: BaseException) -> None:
        self.pending.clear()
        if isinstance(cause, HttpFailure):
            self._fail(cause.kind, cause.message)
        else:
            self._fail("internal", f"{type(cause).__name__}: {cause}")

    # ---- httptools callbacks ----
    def on_message_begin(self) -> None:
        if self.done.done():  # bytes after the response: the connection is not clean any more
            self.reusable = False

    def on_header(self, name: bytes, value: bytes) -> None:
        self.head_bytes += len(name) + len(value)
        if self.head_bytes > MAX_HEAD_BYTES:
            raise HttpFailure("client_error", "response head larger than 64 KiB")
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        headers = self.headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an interim response (100 Continue): the real one follows
            self.headers = {}
            return
        resp = self.response
        resp.status, resp.headers, resp.head_s = status, self.headers, self.now
        if self.head_only:
            self._finish(self.now)
            return
        h = self.headers
        self.until_close = "content-length" not in h and "chunked" not in h.get("transfer-encoding", "").lower()
        self.until_close = self.until_close and status not in (204, 304)
        self.in_body = True
        resp.streamed = self.streaming = self.on_head(resp)

    def on_body(self, body: bytes) -> None:
        if self.streaming:
            self.pending.append(body)  # to the sink once the read is parsed (_to_sink)
            return
        resp = self.response
        if not self.done.done() and len(resp.peek) < PEEK_BYTES:
            resp.peek += body[: PEEK_BYTES - len(resp.peek)]
            if len(resp.peek) >= PEEK_BYTES:  # enough to say what went wrong; the rest is dropped
                self._finish(self.now, reusable=False)

    def on_message_complete(self) -> None:
        if self.in_body and not self.done.done():
            self._to_sink()  # the body's last pieces, before the response ends
            self._finish(self.now, reusable=self.parser.should_keep_alive())

    def _answered(self, wait_s: float) -> None:
        """The sink has the whole answer: the body may end within wait_s, or it is left."""
        if self._grace is not None:
            self._grace.cancel()
        self._grace = self.loop.call_at(self._loop_time(self.now + wait_s), self._leave)

    def _leave(self) -> None:
        if not self.done.done():
            self._finish(self.last_read, reusable=False)  # mid-body: the connection cannot be reused

    # ---- endings ----
    def _finish(self, now: float, reusable: bool = False) -> None:
        self.streaming = False
        self.response.end_s = now
        self.reusable = reusable
        if not self.done.done():
            self.done.set_result(None)

    def lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if self.until_close and exc is None:
            self._finish(time.perf_counter())  # a body that ends with the connection
        elif not self.in_body:
            self._fail("reset", f"connection closed before the response began ({_why(exc)})")
        else:
            self._fail("disconnect", f"connection closed mid-response ({_why(exc)})")

    def _fail(self, kind: str, message: str) -> None:
        self.reusable = self.streaming = False
        if not self.done.done():
            self.done.set_exception(HttpFailure(kind, message))


def _why(exc: Exception | None) -> str:
    return f"{type(exc).__name__}: {exc}" if exc is not None else "the server closed it"
