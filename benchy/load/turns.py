"""Short turns of the event loop when many streams turn over at once.

Why: a server that decodes a batch ends its streams together, and each ending costs benchy a
finished record and the next request (~0.1 ms of CPU). Run in one turn of the loop, the 500
streams of one worker hold it for 50 ms, and no socket is read meanwhile: on the H200 host at
4,000 streams the loop's lag reached 72 ms, longer than the 50 ms between two events of a stream,
so two events came in one read under one stamp (the kernel's, of the newer), and the older
event's time was lost. Here a stream about to do such work first asks for a share of the turn:
once TURN_S of work has been done in this turn, it waits in line for a later one, after the loop
has read what came meanwhile. The work is the same; reads no longer queue behind all of it.

The line is served in batches, one a turn, each as large as the turns before showed fits in
TURN_S: a stream that waits is woken once, when its share comes. (Woken every turn to ask
again, as at first, a client that was the bottleneck spent a tenth of its CPU on streams asking.)
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

TURN_S = 0.002  # the work a turn of the loop may hold before it reads its sockets again


class Turns:
    """One per send loop (load/send.py); `share` is awaited before each record's finish and
    each next request."""

    def __init__(self, turn_s: float = TURN_S) -> None:
        self.turn_s = turn_s
        self._began: float | None = None  # when this turn's work began; None: no work yet
        self._granted = 0  # shares this turn has given
        self._fits = 1  # shares a turn holds, as the turns before showed: the line's next batch
        self._line: deque[asyncio.Future[None]] = deque()

    async def share(self) -> None:
        """Returns at once while this turn has time left and nobody waits, else in a later turn."""
        now = time.perf_counter()
        if self._began is None:
            self._begin(now)
        elif self._line or now - self._began >= self.turn_s:
            if not self._line:  # the first to find this turn full: it held this many
                self._fits = max(1, self._granted)
            waiter = asyncio.get_running_loop().create_future()
            self._line.append(waiter)
            await waiter  # its share was given by _next_turn
            return
        self._granted += 1

    def _begin(self, now: float) -> None:
        self._began, self._granted = now, 0
        # Runs at the start of the next turn (after its poll), before the streams it wakes.
        asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A turn ends: the next batch of the line gets its shares, sized by how long the
        turn just ended took against TURN_S."""
        began, self._began = self._began, None
        if not self._line:
            return
        now = time.perf_counter()
        spent = now - began if began is not None else self.turn_s
        self._fits = max(1, int(self._fits * min(2.0, self.turn_s / max(spent, 1e-6))))
        self._begin(now)
        while self._line and self._granted < self._fits:
            waiter = self._line.popleft()
            if not waiter.done():  # not a cancelled stream's
                waiter.set_result(None)
                self._granted += 1
