"""Short turns of the event loop when many streams turn over at once.

Why: a server that decodes a batch ends its streams together, and each ending costs benchy a
finished record and the next request (~0.1 ms of CPU). Run in one turn of the loop, the 500
streams of one worker hold it for 50 ms, and no socket is read meanwhile: on the H200 host at
4,000 streams the loop's lag reached 72 ms, longer than the 50 ms between two events of a stream,
so two events came in one read under one stamp (the kernel's, of the newer), and the older
event's time was lost. Here a stream about to do such work first asks for a share of the turn:
once TURN_S of work has been done in this turn, it waits for the next one, after the loop has
read what came meanwhile. The work is the same; reads no longer queue behind all of it.
"""

from __future__ import annotations

import asyncio
import time

TURN_S = 0.002  # the work a turn of the loop may hold before it reads its sockets again


class Turns:
    """One per send loop (load/send.py); `share` is awaited before each record's finish and
    each next request."""

    def __init__(self, turn_s: float = TURN_S) -> None:
        self.turn_s = turn_s
        self._began: float | None = None  # when this turn's work began; None: no work yet

    async def share(self) -> None:
        """Returns at once while this turn has time left, else in a later turn that has."""
        while True:
            now = time.perf_counter()
            if self._began is None:
                self._began = now
                # Runs at the start of the next turn (after its poll), before the streams that wait.
                asyncio.get_running_loop().call_soon(self._next_turn)
                return
            if now - self._began < self.turn_s:
                return
            await asyncio.sleep(0)

    def _next_turn(self) -> None:
        self._began = None
