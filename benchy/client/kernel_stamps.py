"""Receive stamps from the kernel: when a read's bytes reached the socket, not when benchy's
event loop got round to reading them.

Why: at thousands of streams a worker's loop is busy in bursts (a round of requests ends and the
next is sent, a collector pass, records handed to the parent). Bytes that arrive meanwhile wait
in the socket, and a stamp taken when the loop reads them carries that wait into TTFT and into
every inter-token gap: on a 16-core host the first-token stamps of 4,000 streams lagged the
server's writes by 45 ms at p99 although the median was 0.5 ms. Linux stamps each arriving
segment (SO_TIMESTAMPNS) and recvmsg hands the stamp over with the bytes, so the stamp no longer
depends on the loop at all.

The kernel's stamp of a TCP read is that of the newest segment the read took, never one before
its bytes came: a read that gathers several events carries the time of the last, as a
user-space stamp at the read would (later). The stamp is CLOCK_REALTIME; it becomes a
perf_counter stamp by the realtime age of the bytes (time.time() − kernel stamp) taken off
perf_counter at the read, so the two clocks need only agree on the length of that age. An age
that is negative or implausibly long (the wall clock was stepped) falls back to the read's own
stamp.

Linux turns its receive stamps on for all sockets once one asks, through deferred work: the
first segments after the first such socket may come unstamped, and take the read's own stamp
(a run's warm-up connections and requests come first).

Only streamed answers over plain TCP on Linux go this way (the lean transport, http1.py); TLS,
proxy tunnels and --no-stream keep asyncio's transports (cheaper per read) and stamp at the read. `BENCHY_RECEIVE_STAMPS=user` turns it off (A/B).
"""

from __future__ import annotations

import asyncio
import collections
import os
import socket
import struct
import sys
import time
from typing import Any, Protocol

_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux; Python names it from 3.12 on some builds
_SCM_TIMESTAMPNS = _SO_TIMESTAMPNS
ANCILLARY_BYTES = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0  # room for one stamp
_TIMESPEC = struct.Struct("qq")
MAX_AGE_S = 60.0  # an older stamp means the wall clock stepped: use the read's own


class Receiver(Protocol):
    """What the transport feeds: http1._Connection."""

    def get_buffer(self, sizehint: int) -> memoryview: ...
    def received_at(self, data: memoryview, now: float) -> None: ...
    def connection_made(self, transport: asyncio.BaseTransport) -> None: ...
    def eof_received(self) -> bool | None: ...
    def connection_lost(self, exc: Exception | None) -> None: ...


def wanted() -> bool:
    """Kernel receive stamps are used: Linux, and not turned off."""
    return (
        sys.platform == "linux" and ANCILLARY_BYTES > 0 and os.environ.get("BENCHY_RECEIVE_STAMPS", "kernel") != "user"
    )


def ask_stamps(sock: socket.socket) -> None:
    """Asks the kernel to stamp each segment that `sock` receives (read back by recvmsg)."""
    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)


def described(transport: str, stream: bool) -> str:
    """What the run's receive stamps are, for its setup."""
    if wanted() and transport == "lean" and stream:
        return "kernel (SO_TIMESTAMPNS) on plain HTTP; at the read on TLS and proxy tunnels"
    return "at the read (perf_counter)"


def stamp_of(ancillary: list[tuple[int, int, bytes]], now: float, wall_now: float) -> float:
    """The perf_counter time the read's bytes arrived: `now` less their age, which is `wall_now`
    (time.time() read just before `now`, so never after it) less the kernel's stamp."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SCM_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            seconds, nanoseconds = _TIMESPEC.unpack_from(data)
            age: float = wall_now - (seconds + nanoseconds * 1e-9)
            if 0.0 <= age < MAX_AGE_S:
                return now - age
    return now


async def open_connection(receiver: Receiver, host: str, port: int) -> StampedTransport:
    """A TCP connection to host:port whose reads are stamped by the kernel; OSError as
    loop.create_connection raises it."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    if not infos:
        raise OSError(f"cannot resolve {host}")
    error: OSError | None = None
    for family, kind, proto, _, address in infos:
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            ask_stamps(sock)
            await loop.sock_connect(sock, address)
        except OSError as exc:
            sock.close()
            error = exc
            continue
        except BaseException:
            sock.close()
            raise
        return StampedTransport(loop, sock, receiver)
    assert error is not None
    raise error


class StampedTransport(asyncio.Transport):
    """The part of asyncio's transport that http1 uses (write, close, is_closing,
    get_extra_info), over a socket read with recvmsg for its kernel stamps."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, receiver: Receiver) -> None:
        super().__init__()
        self._loop = loop
        self._sock = sock
        self._fd = sock.fileno()
        self._receiver = receiver
        self._unsent: collections.deque[bytes] = collections.deque()
        self._closing = False
        receiver.connection_made(self)
        loop.add_reader(self._fd, self._read_ready)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self._sock
        if name == "peername":
            return self._sock.getpeername()
        if name == "sockname":
            return self._sock.getsockname()
        return default

    def is_closing(self) -> bool:
        return self._closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        if not self._unsent:
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lose(exc)
                return
            if sent == len(data):
                return
            data = memoryview(data)[sent:]  # the rest, not yet copied
            self._loop.add_writer(self._fd, self._write_ready)
        self._unsent.append(bytes(data))  # one copy: the caller may reuse its buffer

    def _write_ready(self) -> None:
        while self._unsent:
            data = self._unsent[0]
            try:
                sent = self._sock.send(data)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lose(exc)
                return
            if sent < len(data):
                self._unsent[0] = data[sent:]
                return
            self._unsent.popleft()
        self._loop.remove_writer(self._fd)

    def _read_ready(self) -> None:
        view = self._receiver.get_buffer(-1)
        try:
            nbytes, ancillary, _, _ = self._sock.recvmsg_into((view,), ANCILLARY_BYTES)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lose(exc)
            return
        # Both clocks first (parsing never shifts a stamp), the wall clock before perf_counter:
        # a pause between the two reads (the process preempted) then makes the age shorter, the
        # stamp later, never earlier than the bytes came (read the other way round, it made the
        # stamp early by the pause: 27 µs before the server wrote, once on a busy CI machine).
        wall_now = time.time()
        now = time.perf_counter()
        if nbytes == 0:
            self._receiver.eof_received()
            self._lose(None)
            return
        if ancillary:
            now = stamp_of(ancillary, now, wall_now)
        self._receiver.received_at(view[:nbytes], now)

    def close(self) -> None:
        self._lose(None)

    def abort(self) -> None:
        self._lose(None)

    def _lose(self, exc: Exception | None) -> None:
        if self._closing:
            return
        self._closing = True
        self._loop.remove_reader(self._fd)
        self._loop.remove_writer(self._fd)
        self._unsent.clear()
        self._sock.close()
        self._loop.call_soon(self._receiver.connection_lost, exc)
