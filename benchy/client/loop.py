"""The event loop benchy's requests run on: uvloop where it is installed (a dependency on Linux
and macOS), else asyncio's own; `BENCHY_EVENT_LOOP=asyncio` picks asyncio's (to compare them).

Why: a server that writes each token as it makes it gives the client one read per token, and
at one SSE event a read most of what the client spends per token is the loop's own turn in
Python (the selector, a handle, the transport's callbacks), not benchy's parsing (2-3 µs).
uvloop runs that turn in C (libuv) and hands the same reads to the same protocol
(`http1._Connection`, a buffered protocol): timestamps are still taken first thing in
`buffer_updated`, so every figure is read the same way, for less CPU (docs/scale.md).

What a caller must know of uvloop:
- its timers run on a millisecond clock, so a sleep can end up to a millisecond early: a send
  due at an instant sleeps again until perf_counter says it is due (load/send.py);
- it makes a descriptor it watches with add_reader non-blocking. A multiprocessing Connection
  must stay blocking (its send writes a whole message, its recv reads one: non-blocking, a big
  batch is cut mid-message and the pipe is lost), so `watch` sets it back.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


@functools.cache
def _uvloop() -> Any:
    if os.environ.get("BENCHY_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:  # Windows, or a build without it
        return None
    return uvloop


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main) on benchy's event loop."""
    uvloop = _uvloop()
    return uvloop.run(main) if uvloop is not None else asyncio.run(main)


def name() -> str:
    """The event loop `run` uses: 'uvloop 0.23.0' or 'asyncio'."""
    uvloop = _uvloop()
    return f"uvloop {uvloop.__version__}" if uvloop is not None else "asyncio"


def watch(conn: Any, callback: Callable[..., object], *args: object) -> None:
    """loop.add_reader for a multiprocessing Connection, which stays blocking."""
    asyncio.get_running_loop().add_reader(conn.fileno(), callback, *args)
    os.set_blocking(conn.fileno(), True)
