"""A server's process misbehaving (issue 52), so that benchy's guesses meet what real servers do:

  freeze     (--freeze-after N --freeze-s S) the N-th request's arrival stops the whole process
             for S seconds, as a GC pause or a synchronous step in an API server does: nothing
             is read or written, the kernel queues new connections and their requests unread,
             /metrics does not answer; then everything waiting is read at once.
  restart    (--restart-after N --restart-down-s S) the N-th request's arrival restarts the
             server: every connection is cut, nothing listens for S seconds (connections are
             refused), then it is back on the same port with empty caches and every /metrics
             counter from zero, as a pod restarted behind a stable address.
  processes  (--processes K) K server processes share one port (SO_REUSEPORT, the kernel
             picks one per connection), each with its own engine, cache and counters: a scrape
             of /metrics answers for one of them, as API servers scaled out without shared
             metrics, or pods behind a Kubernetes Service.

The truth log notes each freeze and restart (`event`, `from_s`, `to_s`, perf_counter seconds)
and each request's `process` and `life` (0 before a restart, 1 after).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import time
from collections.abc import Callable

from benchy.jsontypes import JsonObject
from benchy.sim.config import SimConfig


class Lifecycle:
    """Counts arrivals and sets off a freeze or a restart at its request."""

    def __init__(self, cfg: SimConfig, note: Callable[[JsonObject], None]) -> None:
        self.cfg = cfg
        self.note = note
        self.arrivals = 0
        self.restart = asyncio.Event()  # serve() cuts, waits and starts a fresh simulator

    def arrived(self) -> None:
        self.arrivals += 1
        if self.arrivals == self.cfg.freeze_after:
            self._freeze()
        if self.arrivals == self.cfg.restart_after:
            self.restart.set()

    def _freeze(self) -> None:
        """Blocks the event loop itself: nothing in this process runs, as in a stopped one."""
        start = time.perf_counter()
        time.sleep(self.cfg.freeze_s)  # on purpose: the loop must not read its sockets
        self.note({"event": "freeze", "from_s": start, "to_s": time.perf_counter()})


def reuse_port_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound with SO_REUSEPORT: several processes may listen on its port."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def fork_processes(cfg: SimConfig, serve: Callable[[socket.socket, int], None]) -> tuple[socket.socket, list[int]]:
    """Binds the first process' socket, then forks the others, each on its own socket of the
    same port; returns (the first one's socket, the children's pids) once all are bound. Each
    child runs serve(its socket, its index) and exits."""
    first = reuse_port_socket(cfg.host, cfg.port)
    port = first.getsockname()[1]
    children = []
    for index in range(1, cfg.processes):
        ready, told = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: its own socket on the same port, then serve until SIGTERM
            os.close(ready)
            first.close()
            sock = reuse_port_socket(cfg.host, port)
            sock.listen(2048)
            os.write(told, b"1")
            os.close(told)
            try:
                serve(sock, index)
            finally:
                os._exit(0)
        os.close(told)
        os.read(ready, 1)
        os.close(ready)
        children.append(pid)
    return first, children


def stop_children(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
