"""`benchy selftest`: this machine's client ceiling, measured in seconds against a loopback stub.

The stub (a process of its own, so that its work is not benchy's) answers every POST at once: a
tiny JSON body, or, when the body asks to stream, a burst of SSE events each carrying the
stub's perf_counter when it wrote it (CLOCK_MONOTONIC: one clock for both processes). benchy's
own transport (Http1Pool) and SSE parser drive it from one event loop at a fixed number of
streams, as a run's worker does, for a fixed time per phase:

- requests/s: non-streamed answers completed;
- SSE events/s: streamed events received;
- stamp lag: each event's receive stamp − the stub's write time (p50, p99, ms), what a busy
  client adds to every time it takes.

The result is cached per host (the user's cache folder, one file per host name) and saved in
every run's setup; a case that drives more than half of it is flagged client-bound."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import multiprocessing
import platform
import time
from multiprocessing.connection import Connection
from typing import Any, cast

import numpy as np

from benchy.client import loop as event_loop
from benchy.client.http1 import Http1Pool, Request, Response
from benchy.client.sse import SSEParser
from benchy.measure import stats
from benchy.measure.selftest import PHASE_S, STREAMS, ClientCeiling

EVENTS = 50  # events per streamed answer


# ------------------------------------------------------------------ the stub (its own process)

_SMALL = b'{"id":"s","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}'


class _Stub(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport, self.buf = cast(asyncio.Transport, transport), b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            head_end = self.buf.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buf[:head_end].lower()
            at = head.find(b"content-length:")
            length = int(head[at + 15 :].split(b"\r\n", 1)[0]) if at >= 0 else 0
            if len(self.buf) < head_end + 4 + length:
                return
            body = self.buf[head_end + 4 : head_end + 4 + length]
            self.buf = self.buf[head_end + 4 + length :]
            self._answer(b'"stream":true' in body.replace(b" ", b""))

    def _answer(self, stream: bool) -> None:
        write = self.transport.write
        if not stream:
            write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(_SMALL))
            write(_SMALL)
            return
        write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        for _ in range(EVENTS):
            event = b'data: {"t":%.9f}\n\n' % time.perf_counter()
            write(b"%x\r\n%s\r\n" % (len(event), event))
        write(b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n")


def _serve(port_out: Connection) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Stub, "127.0.0.1", 0)
        port_out.send(server.sockets[0].getsockname()[1])
        await server.serve_forever()

    asyncio.run(main())


# ------------------------------------------------------------------ the client side


async def _drive(url: str, stream: bool, streams: int, phase_s: float) -> tuple[int, int, list[float]]:
    """(answers completed, events received, each event's stamp lag in s) over phase_s seconds."""
    pool = Http1Pool()
    await pool.warm(url, streams, 10.0)
    body = json.dumps({"model": "stub", "stream": stream, "messages": [{"role": "user", "content": "hi"}]}).encode()
    done = events = 0
    lags: list[float] = []
    stop_at = time.perf_counter() + phase_s

    async def one_stream() -> None:
        nonlocal done, events
        while time.perf_counter() < stop_at:
            parser = SSEParser()

            def sink(data: bytes, now: float, parser: SSEParser = parser) -> None:
                nonlocal events
                for payload in parser.feed(data):
                    if payload != b"[DONE]":
                        events += 1
                        lags.append(now - json.loads(payload)["t"])

            req = Request("POST", url, body, {"Content-Type": "application/json"}, lambda r: stream, sink, 30.0, 30.0)
            await pool.request(req, Response())
            done += 1

    await asyncio.gather(*(one_stream() for _ in range(streams)))
    return done, events, lags


async def _measure(url: str, streams: int, phase_s: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    answers, _, _ = await _drive(url, False, streams, phase_s)
    t1 = time.perf_counter()
    _, events, lags = await _drive(url, True, streams, phase_s)
    t2 = time.perf_counter()
    lag_ms = np.asarray(lags) * 1000
    return {
        "requests_per_s": answers / (t1 - t0),
        "events_per_s": events / (t2 - t1),
        "stamp_lag_ms_p50": stats.percentile(lag_ms, 50) if lags else None,
        "stamp_lag_ms_p99": stats.percentile(lag_ms, 99) if lags else None,
    }


def measure(streams: int = STREAMS, phase_s: float = PHASE_S) -> ClientCeiling:
    """Starts the stub, drives it, stops it: this machine's ClientCeiling now."""
    from benchy import __version__

    receive, send = multiprocessing.Pipe(duplex=False)
    stub = multiprocessing.get_context("spawn").Process(target=_serve, args=(send,), daemon=True)
    stub.start()
    try:
        if not receive.poll(30):
            raise RuntimeError("the selftest's loopback stub did not start")
        url = f"http://127.0.0.1:{receive.recv()}/v1/chat/completions"
        found = event_loop.run(_measure(url, streams, phase_s))
    finally:
        stub.terminate()
        stub.join(5)
    return ClientCeiling(
        host=platform.node(),
        measured_utc=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        benchy_version=__version__,
        event_loop=event_loop.name(),
        streams=streams,
        phase_s=phase_s,
        **found,
    )
