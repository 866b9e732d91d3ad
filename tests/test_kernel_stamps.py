"""Receive stamps that a busy event loop cannot shift (client/kernel_stamps.py): a real TCP
server on 127.0.0.1 (a thread of its own) writes an SSE event while benchy's loop is blocked, and
the stamp the lean transport hands the sink must be the time the bytes arrived, judged against
the server's own perf_counter stamp of its write (one process: one clock)."""

from __future__ import annotations

import asyncio
import socket
import sys
import threading
import time

import pytest

from benchy.client import kernel_stamps
from benchy.client.http1 import Http1Pool, Request, Response

BLOCK_S = 0.3  # how long the loop is held after the server has written

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SO_TIMESTAMPNS is Linux's")


class EventServer:
    """Answers one request with an SSE head, then, when told, one event (stamping its write),
    then the end of the body."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.go = threading.Event()
        self.written = threading.Event()
        self.write_s = 0.0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            self.go.wait(10)
            event = b'data: {"x": 1}\n\n'
            self.write_s = time.perf_counter()
            conn.sendall(b"%x\r\n%s\r\n" % (len(event), event))
            self.written.set()
            time.sleep(BLOCK_S * 2)  # after the loop is free again
            conn.sendall(b"0\r\n\r\n")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture(autouse=True)
def stamping_on():
    """Linux turns its receive stamps on for every socket once one asks, by deferred work: until
    that has run, a segment may come unstamped (the read's own stamp stands). A pair of sockets
    that asks, held for the test, and a byte sent until one comes back stamped (or 10 s pass)."""
    listener = socket.create_server(("127.0.0.1", 0))
    a = socket.create_connection(listener.getsockname())
    b, _ = listener.accept()
    listener.close()
    kernel_stamps.ask_stamps(b)
    b.settimeout(10)
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            a.send(b"x")
            _, ancillary, _, _ = b.recvmsg(1, kernel_stamps.ANCILLARY_BYTES)
            if ancillary:
                break
        else:
            pytest.fail("the kernel never stamped a received segment")
        yield
    finally:
        a.close()
        b.close()


def stamped_event(server: EventServer) -> tuple[float, float]:
    """(the sink's stamp of the event, the end of the loop's block), in perf_counter seconds."""
    stamps: list[float] = []
    block_end = [0.0]

    def on_head(response: Response) -> bool:
        server.go.set()
        assert server.written.wait(10), "the server never wrote the event"
        time.sleep(BLOCK_S)  # the loop is held: the event waits in the socket
        block_end[0] = time.perf_counter()
        return True

    def sink(data: bytes, now: float) -> float | None:
        if b"data:" in data:
            stamps.append(now)
        return None

    async def go() -> None:
        pool = Http1Pool()
        url = f"http://127.0.0.1:{server.port}/v1/chat/completions"
        await pool.request(Request("POST", url, b"{}", {}, on_head, sink, 30.0, 30.0), Response())
        pool.close()

    asyncio.run(go())
    assert len(stamps) == 1
    return stamps[0], block_end[0]


def test_a_read_is_stamped_when_its_bytes_arrived_not_when_a_busy_loop_read_them(monkeypatch):
    monkeypatch.delenv("BENCHY_RECEIVE_STAMPS", raising=False)
    server = EventServer()
    try:
        stamp, block_end = stamped_event(server)
    finally:
        server.close()
    held = block_end - server.write_s  # how long the bytes waited for the loop: ≥ BLOCK_S
    assert held >= BLOCK_S
    assert stamp >= server.write_s - 0.001  # never before the write (within the two clocks' reading)
    assert stamp - server.write_s < held / 3, (stamp - server.write_s, held)


PAUSE_S = 0.02  # the process preempted between reading one clock and the other


class PausingClock:
    """The time module as kernel_stamps reads it, pausing just after reading one clock: the
    other clock is then read PAUSE_S later, as a preempted process would read it."""

    def __init__(self, after: str) -> None:
        self.after = after

    def __getattr__(self, name: str) -> object:
        real = getattr(time, name)
        if name != self.after:
            return real

        def read() -> float:
            value: float = real()
            time.sleep(PAUSE_S)
            return value

        return read


@pytest.mark.parametrize("after", ["perf_counter", "time"])
def test_a_pause_between_the_two_clocks_never_stamps_bytes_before_they_came(monkeypatch, after):
    """The stamp is the read's perf_counter less the bytes' age by the wall clock: whichever
    clock read a pause follows, the stamp may come late by it, never before the server wrote."""
    monkeypatch.delenv("BENCHY_RECEIVE_STAMPS", raising=False)
    monkeypatch.setattr(kernel_stamps, "time", PausingClock(after))
    server = EventServer()
    try:
        stamp, block_end = stamped_event(server)
    finally:
        server.close()
    assert server.write_s <= stamp < block_end


def test_user_space_stamps_when_asked_carry_the_loops_wait(monkeypatch):
    """The A/B switch is real: with BENCHY_RECEIVE_STAMPS=user the same event is stamped when
    the loop read it, after its block."""
    monkeypatch.setenv("BENCHY_RECEIVE_STAMPS", "user")
    server = EventServer()
    try:
        stamp, block_end = stamped_event(server)
    finally:
        server.close()
    assert stamp >= block_end


def test_a_stamp_whose_age_makes_no_sense_is_the_reads_own():
    """A wall clock stepped between the arrival and the read: the age is negative or huge, and
    the read's own stamp stands rather than a made-up one."""
    now = time.perf_counter()

    def stamped(seconds_ago: float) -> list[tuple[int, int, bytes]]:
        t = time.time() - seconds_ago
        whole = int(t)
        return [
            (
                socket.SOL_SOCKET,
                kernel_stamps._SCM_TIMESTAMPNS,
                kernel_stamps._TIMESPEC.pack(whole, int((t - whole) * 1e9)),
            )
        ]

    assert kernel_stamps.stamp_of(stamped(-5.0), now, time.time()) == now
    assert kernel_stamps.stamp_of(stamped(3600.0), now, time.time()) == now
    assert kernel_stamps.stamp_of(stamped(0.25), now, time.time()) == pytest.approx(now - 0.25, abs=0.01)


def test_a_write_the_socket_cannot_take_at_once_arrives_whole_and_in_order():
    """A request body larger than the socket's send buffer, to a peer that reads only after a
    while: the transport keeps what the kernel did not take and sends it when it can, so the
    peer gets every byte once, in order, and the writer's own buffer may be reused at once."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    got = bytearray()
    size = 8 * 1024 * 1024  # far above a loopback socket's send and receive buffers

    def peer() -> None:
        conn, _ = listener.accept()
        time.sleep(0.2)  # the writer has met a full buffer by now
        while len(got) < size:
            data = conn.recv(1 << 20)
            if not data:
                break
            got.extend(data)
        conn.close()

    reader = threading.Thread(target=peer)
    reader.start()

    class Sink:
        def get_buffer(self, sizehint: int) -> memoryview:
            return memoryview(bytearray(65536))

        def received_at(self, data: memoryview, now: float) -> None:
            pass

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            pass

        def eof_received(self) -> bool | None:
            return None

        def connection_lost(self, exc: Exception | None) -> None:
            pass

    payload = bytearray(i % 251 for i in range(size))
    expected = bytes(payload)

    async def go() -> None:
        transport = await kernel_stamps.open_connection(Sink(), "127.0.0.1", port)
        transport.write(payload)
        payload[:] = b"\0" * size  # the caller's buffer, reused: what was sent must not change
        while len(got) < size and reader.is_alive():
            await asyncio.sleep(0.01)
        transport.close()

    try:
        asyncio.run(go())
    finally:
        reader.join(10)
        listener.close()
    assert bytes(got) == expected
