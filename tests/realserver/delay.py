"""A real fixed delay in front of a server, two ways (no pytest here).

netem_path: a network namespace of the test's own, joined to this one by a veth pair, whose
egress holds every packet `delay_s` (tc netem): a client inside it reaches the server as over a
long path. Needs root, iproute2 and the kernel's sch_netem; `netem_unavailable()` says why not.

DelayingProxy: a TCP forwarder on 127.0.0.1 that delivers each chunk a client sends `delay_s`
after it came (netem's behaviour, for one direction, in user space): a gateway that holds each
request before the engine sees it. The answer flows back undelayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator

_ids = itertools.count()


def _ip(*args: str, ns: str | None = None) -> subprocess.CompletedProcess:
    cmd = ["ip", *(("netns", "exec", ns, "ip") if ns else ()), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=10)


def netem_unavailable() -> str | None:
    """None where a namespace with netem can be made here; else why not, in one line."""
    if os.geteuid() != 0:
        return "netem needs root (network namespaces and tc)"
    if not shutil.which("ip") or not shutil.which("tc"):
        return "netem needs iproute2 (ip, tc)"
    try:
        with netem_path(0.001):
            return None
    except RuntimeError as e:
        return str(e)


@contextlib.contextmanager
def netem_path(delay_s: float) -> Iterator[tuple[str, str]]:
    """(namespace, the address of this side as seen from it): run the client in the namespace
    (`ip netns exec NS …`) against a server bound to that address."""
    n = f"{os.getpid() % 10000}{next(_ids)}"
    ns, near, far = f"bnchy{n}", f"bnv0{n}", f"bnv1{n}"
    octet = 100 + int(n) % 150
    here, there = f"10.231.{octet}.1", f"10.231.{octet}.2"
    steps = [
        (("netns", "add", ns), None),
        (("link", "add", near, "type", "veth", "peer", "name", far), None),
        (("link", "set", far, "netns", ns), None),
        (("addr", "add", f"{here}/24", "dev", near), None),
        (("link", "set", near, "up"), None),
        (("addr", "add", f"{there}/24", "dev", far), ns),
        (("link", "set", far, "up"), ns),
    ]
    try:
        for args, in_ns in steps:
            done = _ip(*args, ns=in_ns)
            if done.returncode:
                raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
        tc = [
            "ip",
            "netns",
            "exec",
            ns,
            "tc",
            "qdisc",
            "add",
            "dev",
            far,
            "root",
            "netem",
            "delay",
            f"{delay_s * 1000:.0f}ms",
        ]
        done = subprocess.run(tc, capture_output=True, text=True, timeout=10)
        if done.returncode:
            raise RuntimeError(f"tc netem: {done.stderr.strip()} (the kernel has no sch_netem)")
        yield ns, here
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=10)
        subprocess.run(["ip", "link", "del", near], capture_output=True, timeout=10)


class DelayingProxy:
    """127.0.0.1:port → target, each client chunk delivered `delay_s` after it arrived; `held`
    lists (arrived, delivered) monotonic times of every chunk, the proxy's own truth."""

    def __init__(self, target_host: str, target_port: int, delay_s: float) -> None:
        self.target = (target_host, target_port)
        self.delay_s = delay_s
        self.held: list[tuple[float, float]] = []
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def __enter__(self) -> DelayingProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(self, *exc: object) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*self.target)
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def read_client() -> None:
            while data := await client_r.read(65536):
                queue.put_nowait((time.monotonic(), data))
            queue.put_nowait((time.monotonic(), b""))

        async def deliver() -> None:
            while True:
                arrived, data = await queue.get()
                await asyncio.sleep(max(0.0, arrived + self.delay_s - time.monotonic()))
                if not data:
                    server_w.write_eof()
                    return
                server_w.write(data)
                await server_w.drain()
                self.held.append((arrived, time.monotonic()))

        async def answer() -> None:
            while data := await server_r.read(65536):
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        try:
            await asyncio.gather(read_client(), deliver(), answer())
        except (OSError, asyncio.CancelledError):  # a side closed: the other goes too
            pass
        finally:
            client_w.close()
            server_w.close()
