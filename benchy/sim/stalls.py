"""The simulator's own stalls, for its truth log: how late its event loop ran while a request was in it.

Every time in the truth log is stamped when the simulator's loop gets round to it: a request's
arrival when its handler starts, an event just after its write returned. On a busy machine (a CI
runner, a shared box) the loop can be held back for a while, and a stamp is then that much later
than the bytes on the wire. A test that holds a client's figures to the truth log needs that
lateness as a witness of its own: a timer's (as benchy's monitor.py for its own loop), never a
figure fitted from the times it checks. Only stalls are kept (a bounded ring), so a long-lived
simulator's memory and its per-request look-up stay small.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

clock = time.perf_counter  # engine.clock, the truth log's (not imported: the tests' conftest reads INTERVAL_S)

# How often the watch asks to wake: about 1% of a core while idle (5 ms cost about as much, 50 ms
# a third). A stall is seen up to this much short (it may begin part-way through a wait).
INTERVAL_S = 0.01
FLOOR_S = 0.001  # a wake later than this is a stall; the rest is the machine's usual jitter
KEEP = 4096  # stalls remembered: minutes of a busy machine's


class StallWatch:
    """`await watch.run()` in a task; `watch.behind(start, end)` once a request has ended."""

    def __init__(self) -> None:
        self._stalls: deque[tuple[float, float, float]] = deque(maxlen=KEEP)  # (wait began, woke, lag)

    async def run(self) -> None:
        while True:
            began = clock()
            await asyncio.sleep(INTERVAL_S)
            woke = clock()
            lag = woke - began - INTERVAL_S
            if lag >= FLOOR_S:
                self._stalls.append((began, woke, lag))

    def behind(self, start: float, end: float) -> float:
        """How far the loop fell behind over [start, end], s: the sum of the stalls whose wait
        overlapped it, the window reaching back over stalls that ran on into it (no on-time wake
        between: a request that came in meanwhile waited through all of them, and more than the
        longest). A stall that held a stamp back ends just before it, in the same turn of the
        loop: pass a start one INTERVAL_S before the first stamp that matters."""
        total = 0.0
        for began, woke, lag in reversed(self._stalls):  # newest first: stop at the first before start
            if woke < start:
                break
            if began <= end:
                total += lag
                start = min(start, began - INTERVAL_S / 2)  # the next wait began as this one woke
        return total
