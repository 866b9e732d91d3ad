"""Small servers on 127.0.0.1 (or ::1) for the transport tests: each runs its own event loop in
a thread, and records what it saw, so a test judges the client by what really went over the wire.

- Relay: forwards a connection to the simulator byte for byte, and logs every request head it
  carries (method, target, headers) with the connection it came on.
- LoggingProxy: an HTTP proxy (absolute-form requests, CONNECT tunnels) that logs each request
  and only ever connects to 127.0.0.1, whatever host a request names.
- Scripted: answers every request with bytes a test scripts (framing edge cases).
"""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class Seen:
    """One request as a server saw it."""

    method: str
    target: str
    headers: dict[str, str]  # lower-case names
    connection: int  # which accepted connection (0, 1, …) carried it
    at: float  # time.perf_counter() when its head was read
    body: bytes = b""


@dataclass
class _Log:
    requests: list[Seen] = field(default_factory=list)
    connections: list[float] = field(default_factory=list)  # perf_counter of each accept


class _Threaded:
    """An asyncio server in a thread of its own; `port` once started."""

    host = "127.0.0.1"

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.log = _Log()
        self.ssl_context = ssl_context
        self.port = 0

    @property
    def requests(self) -> list[Seen]:
        return list(self.log.requests)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, conn: int) -> None:
        raise NotImplementedError

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = len(self.log.connections)
        self.log.connections.append(time.perf_counter())
        try:
            await self.handle(reader, writer, conn)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._accept, self.host, 0, ssl=self.ssl_context)
        )
        self.port = self.server.sockets[0].getsockname()[1]
        self.ready.set()
        self.loop.run_forever()

    def __enter__(self):
        threading.Thread(target=self._serve, daemon=True).start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        async def stop() -> None:
            self.server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{'https' if self.ssl_context else 'http'}://{host}:{self.port}"


async def read_request(reader: asyncio.StreamReader, conn: int) -> Seen | None:
    """The next request on a connection (head and Content-Length body); None at its end."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, target, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    seen = Seen(method, target, headers, conn, time.perf_counter())
    seen.body = await reader.readexactly(int(headers.get("content-length", 0)))
    return seen


def request_bytes(seen: Seen, target: str, drop: tuple[str, ...] = ()) -> bytes:
    lines = [f"{seen.method} {target} HTTP/1.1"]
    lines += [f"{k}: {v}" for k, v in seen.headers.items() if k not in drop]
    return "\r\n".join([*lines, "", ""]).encode("latin-1") + seen.body


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, ssl.SSLError):
        pass
    finally:
        writer.close()


class Relay(_Threaded):
    """Forwards every connection to 127.0.0.1:upstream_port, logging the requests it carries.
    With `tls`, it is the TLS end, and starts each handshake only `handshake_delay_s` after the
    connection came (a far server, a slow proxy): `ready` has when each handshake was done."""

    def __init__(
        self,
        upstream_port: int,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
        handshake_delay_s: float = 0.0,
    ) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.host = host
        self.tls = tls
        self.handshake_delay_s = handshake_delay_s
        self.ready_at: dict[int, float] = {}

    @property
    def url(self) -> str:
        return super().url.replace("http:", "https:") if self.tls else super().url

    async def handle(self, reader, writer, conn) -> None:
        if self.tls is not None:
            writer.transport.pause_reading()  # the ClientHello must wait for the TLS layer
            await asyncio.sleep(self.handshake_delay_s)
            await writer.start_tls(self.tls)
        self.ready_at[conn] = time.perf_counter()
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        back = asyncio.ensure_future(pipe(up_reader, writer))
        try:
            while (seen := await read_request(reader, conn)) is not None:
                self.log.requests.append(seen)
                up_writer.write(request_bytes(seen, seen.target))
                await up_writer.drain()
        finally:
            up_writer.close()
            await back


class LoggingProxy(_Threaded):
    """An HTTP proxy: plain http requests arrive in absolute form and are forwarded in origin
    form; https arrives as CONNECT host:port and is tunnelled. Every upstream connection goes
    to 127.0.0.1 at the named port. `refuse` (a status) answers every request with it instead."""

    def __init__(self, refuse: int | None = None) -> None:
        super().__init__()
        self.refuse = refuse

    async def handle(self, reader, writer, conn) -> None:
        first = await read_request(reader, conn)
        if first is None:
            return
        self.log.requests.append(first)
        if self.refuse:
            writer.write(f"HTTP/1.1 {self.refuse} No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
            return
        if first.method == "CONNECT":
            port = int(first.target.rpartition(":")[2])
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
            return
        port = urlsplit(first.target).port or 80
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        back = asyncio.ensure_future(pipe(up_reader, writer))
        seen: Seen | None = first
        try:
            while seen is not None:
                if seen is not first:
                    self.log.requests.append(seen)
                parts = urlsplit(seen.target)
                origin_form = parts.path + (f"?{parts.query}" if parts.query else "")
                up_writer.write(request_bytes(seen, origin_form, drop=("proxy-authorization",)))
                await up_writer.drain()
                seen = await read_request(reader, conn)
        finally:
            up_writer.close()
            await back


Script = Callable[[Seen, asyncio.StreamWriter], Awaitable[bool]]  # → keep the connection open?


class Scripted(_Threaded):
    """Answers each request with what `script(request, writer)` writes; the script returns
    False to close the connection after its answer."""

    def __init__(self, script: Script, ssl_context: ssl.SSLContext | None = None) -> None:
        super().__init__(ssl_context)
        self.script = script

    async def handle(self, reader, writer, conn) -> None:
        while (seen := await read_request(reader, conn)) is not None:
            self.log.requests.append(seen)
            if not await self.script(seen, writer):
                await writer.drain()
                return
