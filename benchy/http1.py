"""A lean HTTP/1.1 client for the one request benchy sends by the thousand: a streamed POST.

Why not aiohttp here: at one token per SSE event, aiohttp spends 12-15 µs of CPU per event on
its own bookkeeping (a stream-reader buffer, chunk-boundary lists, a read timer rescheduled per
socket read, a task wake-up per read). Here the socket's bytes go from asyncio's data_received
straight through the chunked-encoding decoder into the caller's sink, stamped with
time.perf_counter() before anything else is done, with no task wake-up until the response
ends. The stall timeout is lazy: a read only stores its time (the stamp it took anyway), and
a timer re-arms itself from the last read when it fires.

Scope, on purpose: HTTP/1.1 over TCP or TLS, keep-alive connections (reused only once their
previous response was read to its end), Content-Length, chunked or read-until-close bodies,
no compression (Accept-Encoding: identity), no redirects, no proxies (the aiohttp session
benchy uses for everything else has none either). Failures raise HttpFailure with the error
kind client.py records: connect, tls, reset, disconnect, stall, timeout, client_error.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

PEEK_BYTES = 300  # of a body that is not streamed (an HTTP error, not an event stream)
MAX_HEAD_BYTES = 64 * 1024


class HttpFailure(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.reused = False  # whether it happened on a kept-alive connection


@dataclass
class Response:
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    streamed: bool = False  # the body went to the sink (else: its first bytes are in `peek`)
    peek: bytes = b""
    head_s: float = 0.0  # perf_counter when the head was complete
    end_s: float = 0.0  # perf_counter of the read that ended the body
    reused: bool = False  # sent over a kept-alive connection


# on_head(response) → stream the body to the sink? ; sink(bytes, perf_counter of the read)
OnHead = Callable[[Response], bool]
Sink = Callable[[bytes, float], None]


class Http1Pool:
    """Keep-alive connections to one origin; no limit (the load generator bounds what is in flight)."""

    def __init__(self, base_url: str, insecure: bool = False, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        self.host = parts.hostname or ""
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 80)
        self.authority = parts.netloc.rpartition("@")[2]
        self.headers = {"Host": self.authority, "Accept-Encoding": "identity", **(headers or {})}
        self._ssl = _ssl_context(insecure) if self.tls else None
        self._idle: list[_Connection] = []

    async def post(
        self,
        path: str,
        body: bytes,
        headers: dict[str, str],
        on_head: OnHead,
        sink: Sink,
        timeout_s: float,
        stall_s: float,
        fresh: bool = False,
    ) -> Response:
        """Sends the request and returns once its response has ended. Raises HttpFailure."""
        deadline = time.perf_counter() + timeout_s
        request = self._request(path, body, headers)
        conn = None if fresh else self._take_idle()
        response = Response(reused=conn is not None)
        if conn is None:
            conn = await self._connect(deadline, timeout_s)
        exchange = _Exchange(conn, response, on_head, sink, stall_s)
        conn.begin(exchange, request)
        try:
            await exchange.wait(deadline, timeout_s)
        except HttpFailure as exc:
            conn.close()
            exc.reused = response.reused
            raise
        except BaseException:
            conn.close()
            raise
        if exchange.reusable:
            self._idle.append(conn)
        else:
            conn.close()
        return response

    def close(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()

    def _take_idle(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.open:
                return conn
        return None

    async def _connect(self, deadline: float, timeout_s: float) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(
                    _Connection, self.host, self.port, ssl=self._ssl, server_hostname=self.host if self.tls else None
                ),
                max(0.0, deadline - time.perf_counter()),
            )
        except asyncio.TimeoutError:
            raise HttpFailure("connect", f"no connection within {timeout_s:g} s") from None
        except ssl.SSLCertVerificationError as exc:
            raise HttpFailure("tls", f"certificate not trusted: {exc}") from None
        except OSError as exc:  # refused, unreachable, DNS (socket.gaierror), other TLS errors
            raise HttpFailure("connect", str(exc.strerror or exc)) from None
        return conn

    def _request(self, path: str, body: bytes, headers: dict[str, str]) -> bytes:
        lines = [f"POST {path} HTTP/1.1"]
        lines += [f"{k}: {v}" for k, v in {**self.headers, **headers}.items()]
        if any("\r" in line or "\n" in line for line in lines):  # never let a value add a header
            raise HttpFailure("client_error", "a request header value holds a line break")
        lines += ["Content-Type: application/json", f"Content-Length: {len(body)}", "", ""]
        return "\r\n".join(lines).encode("utf-8") + body


def _ssl_context(insecure: bool) -> ssl.SSLContext:
    ctx = ssl.create_default_context()  # the system store, or $SSL_CERT_FILE
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


READ_BUFFER = 64 * 1024


class _Connection(asyncio.BufferedProtocol):
    """One TCP/TLS connection; bytes go to the exchange in progress, if any. A buffered
    protocol: asyncio's plain one allocates a fresh 256 KiB bytes object for every read,
    which costs more than everything benchy then does with a one-token event."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.open = False
        self.exchange: _Exchange | None = None
        self._view = memoryview(bytearray(READ_BUFFER))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._view

    def buffer_updated(self, nbytes: int) -> None:
        now = time.perf_counter()  # first: parsing never shifts a timestamp
        self._deliver(bytes(self._view[:nbytes]), now)

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.open = True

    def begin(self, exchange: _Exchange, request: bytes) -> None:
        self.exchange = exchange
        assert self.transport is not None  # begun only on an open connection
        self.transport.write(request)

    def data_received(self, data: bytes) -> None:  # transports that do not buffer for us
        self._deliver(data, time.perf_counter())

    def _deliver(self, data: bytes, now: float) -> None:
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

    def close(self) -> None:
        self.open = False
        self.exchange = None
        if self.transport is not None:
            self.transport.close()


# Body framing states
_HEAD, _SIZE, _DATA, _DATA_END, _TRAILER, _LENGTH, _UNTIL_CLOSE, _DONE = range(8)


class _Exchange:
    """One request/response on a connection: parses the head, decodes the body framing,
    hands body bytes to the sink, and resolves `done` when the response has ended."""

    def __init__(self, conn: _Connection, response: Response, on_head: OnHead, sink: Sink, stall_s: float) -> None:
        self.conn = conn
        self.response = response
        self.on_head = on_head
        self.sink = sink
        self.stall_s = stall_s
        self.loop = asyncio.get_running_loop()
        self.done: asyncio.Future = self.loop.create_future()
        self.state = _HEAD
        self.buf = b""
        self.remaining = 0  # bytes left in the current chunk (or Content-Length body)
        self.last_read = time.perf_counter()
        self.reusable = False
        self.keep_alive = True

    async def wait(self, deadline: float, timeout_s: float) -> None:
        self._stall_handle = self.loop.call_at(self._loop_time(self.last_read + self.stall_s), self._check_stall)
        total = self.loop.call_at(
            self._loop_time(deadline), self._fail, "timeout", f"request exceeded {timeout_s:g} s (--timeout)"
        )
        try:
            await self.done
        finally:
            self._stall_handle.cancel()
            total.cancel()
            self.conn.exchange = None

    def _loop_time(self, perf_time: float) -> float:
        return self.loop.time() + (perf_time - time.perf_counter())

    def _check_stall(self) -> None:
        quiet_until = self.last_read + self.stall_s
        if time.perf_counter() >= quiet_until:
            self._fail("stall", f"no data for {self.stall_s:g} s (--stall-timeout)")
        else:
            self._stall_handle = self.loop.call_at(self._loop_time(quiet_until), self._check_stall)

    # ---- bytes in ----
    def received(self, data: bytes, now: float) -> None:
        self.last_read = now
        if self.done.done():
            return
        try:
            state = self.state
            if _SIZE <= state <= _TRAILER:  # the usual read: chunks of an event stream
                self._chunked(data, now)
                return
            if state == _HEAD:
                rest = self._head(data, now)
                if rest is None:
                    return
                data = rest
            self._body(data, now)
        except HttpFailure as exc:
            self._fail(exc.kind, exc.message)
        except Exception as exc:  # a bug in a sink must fail its request, not the event loop
            self._fail("internal", f"{type(exc).__name__}: {exc}")

    def _head(self, data: bytes, now: float) -> bytes | None:
        """Parses the head once it is whole; returns the body bytes that came with it."""
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEAD_BYTES:
                raise HttpFailure("client_error", "response head larger than 64 KiB")
            return None
        head, rest = self.buf[:end], self.buf[end + 4 :]
        self.buf = b""
        resp = self.response
        resp.status, resp.headers = _parse_head(head)
        resp.head_s = now
        if 100 <= resp.status < 200:  # an interim response (100 Continue): the real one follows
            return self._head(rest, now) if rest else None
        self._framing(resp.headers)
        resp.streamed = self.on_head(resp)
        return rest

    def _framing(self, headers: dict[str, str]) -> None:
        self.keep_alive = "close" not in headers.get("connection", "").lower()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            self.state = _SIZE
        elif "content-length" in headers:
            try:
                self.remaining = int(headers["content-length"])
            except ValueError:
                raise HttpFailure("client_error", f"bad Content-Length {headers['content-length']!r}") from None
            self.state = _LENGTH if self.remaining else _DONE
        else:
            self.state = _UNTIL_CLOSE
            self.keep_alive = False
        if self.state == _DONE:
            self._finish(self.response.head_s)

    def _body(self, data: bytes, now: float) -> None:
        state = self.state
        if state == _UNTIL_CLOSE:
            self._deliver(data, now)
        elif state == _LENGTH:
            piece = data[: self.remaining]
            self.remaining -= len(piece)
            self._deliver(piece, now)
            if not self.remaining:
                self._finish(now)
        elif state != _DONE:
            self._chunked(data, now)

    def _chunked(self, data: bytes, now: float) -> None:
        if self.state == _SIZE and not self.buf and self.response.streamed:
            # The commonest read of all: exactly one whole chunk, one SSE event.
            eol = data.find(b"\r\n")
            if 0 < eol < 9 and data.endswith(b"\r\n"):
                try:
                    size = int(data[:eol], 16)
                except ValueError:
                    size = -1
                if size > 0 and eol + size + 4 == len(data):
                    self.sink(data[eol + 2 : -2], now)
                    return
        buf = self.buf + data if self.buf else data
        pieces: list[bytes] = []
        pos, n = 0, len(buf)
        state, remaining = self.state, self.remaining
        while pos < n:
            if state == _SIZE:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = _chunk_size(buf[pos:eol])
                pos = eol + 2
                end = pos + size
                if not size:
                    state = _TRAILER
                elif end + 2 <= n:  # the usual case: the whole chunk came in this read
                    if buf[end : end + 2] != b"\r\n":
                        raise HttpFailure("disconnect", "malformed chunked body")
                    pieces.append(buf[pos:end])
                    pos = end + 2
                else:
                    state, remaining = _DATA, size
            elif state == _DATA:
                take = min(remaining, n - pos)
                pieces.append(buf[pos : pos + take])
                pos += take
                remaining -= take
                if not remaining:
                    state = _DATA_END
            elif state == _DATA_END:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise HttpFailure("disconnect", "malformed chunked body")
                pos += 2
                state = _SIZE
            else:  # _TRAILER: header lines, then the blank line that ends the body
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                line = buf[pos:eol]
                pos = eol + 2
                if not line:
                    state = _DONE
                    break
        self.state, self.remaining = state, remaining
        self.buf = buf[pos:] if state != _DONE else b""
        if pieces:
            data = pieces[0] if len(pieces) == 1 else b"".join(pieces)
            if self.response.streamed:
                self.sink(data, now)
            else:
                self._deliver(data, now)
        if state == _DONE:
            self._finish(now)

    def _deliver(self, data: bytes, now: float) -> None:
        resp = self.response
        if resp.streamed:
            if data:
                self.sink(data, now)
        elif len(resp.peek) < PEEK_BYTES:
            resp.peek += data[: PEEK_BYTES - len(resp.peek)]
            if len(resp.peek) >= PEEK_BYTES:  # enough to say what went wrong; the rest is dropped
                self.keep_alive = False
                self._finish(now)

    # ---- endings ----
    def _finish(self, now: float) -> None:
        self.state = _DONE
        self.response.end_s = now
        self.reusable = self.keep_alive and not self.buf
        if not self.done.done():
            self.done.set_result(None)

    def lost(self, exc: Exception | None) -> None:
        if self.done.done():
            return
        if self.state == _UNTIL_CLOSE and exc is None:
            self._finish(time.perf_counter())  # a body that ends with the connection
        elif self.state == _HEAD:
            self._fail("reset", f"connection closed before the response began ({_why(exc)})")
        else:
            self._fail("disconnect", f"connection closed mid-response ({_why(exc)})")

    def _fail(self, kind: str, message: str) -> None:
        self.reusable = False
        if not self.done.done():
            self.done.set_exception(HttpFailure(kind, message))


def _why(exc: Exception | None) -> str:
    return f"{type(exc).__name__}: {exc}" if exc is not None else "the server closed it"


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line, 16)
    except ValueError:  # chunk extensions (`1a;name=value`), or garbage
        try:
            size = int(line.split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise HttpFailure("disconnect", f"malformed chunk size {line[:20]!r}") from None
    if size < 0:
        raise HttpFailure("disconnect", f"malformed chunk size {line[:20]!r}")
    return size


def _parse_head(head: bytes) -> tuple[int, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise HttpFailure("client_error", f"not an HTTP response: {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            key = name.strip().lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return int(parts[1]), headers
