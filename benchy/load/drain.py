"""The drain: how long a case waits, once its `--duration` is up, for the requests still in flight.

Why: `--duration` stops the sending, but a server the load saturated still holds a queue of
requests it has not answered. Waiting for all of them made `--rate 1 2 4 8 --duration 60` take
7 min 44 s, and the queued requests ended as 120 s stalls counted as server failures. With a
drain (`--drain S`) a case ends at most S seconds after its duration; a request still in flight
then is cut, and recorded as cut (error kind `drain_cut`): it is neither dropped nor blamed on
the server, and the case's saturation note counts it.

The default drain is a quarter of `--duration`, at least DRAIN_FLOOR_S and at most the duration
itself. A drain as long as the duration doubled every saturated case: the README's `--rate 1 2 4
8 --duration 60` took 6.5 min where a reader expects about four. A quarter keeps a case within
1.25 × its duration; the floor gives an unsaturated server's last requests (seconds each) time
to end on their own, so that a short --duration does not cut them and call the server saturated.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

from benchy.client.draft import Draft
from benchy.measure.classify import DRAIN_CUT
from benchy.records import RequestRecord
from benchy.records.plan import Sent

DRAIN_SHARE = 0.25  # the default drain: this share of --duration…
DRAIN_FLOOR_S = 10.0  # …but at least this long (never longer than --duration)


def default_drain(duration_s: float | None, drain_s: float | None) -> float | None:
    """The drain a case gets: --drain, else a quarter of --duration (at least DRAIN_FLOOR_S, at
    most the duration); None without --duration (every request then ends on its own, or by
    --timeout)."""
    if duration_s is None:
        return None
    if drain_s is not None:
        return drain_s
    return min(duration_s, max(DRAIN_FLOOR_S, DRAIN_SHARE * duration_s))


class InFlight:
    """The drafts of the requests a send loop has sent and not yet handed on (the client's
    state of each: what arrived so far, to be made into a cut record should the drain stop it),
    and who is told of each as it leaves (`on_sent`: the sink writes its plan line)."""

    def __init__(self, on_sent: Callable[[Sent], None] | None = None) -> None:
        self._drafts: set[Draft] = set()
        self._on_sent = on_sent

    def sent(self, request: Sent) -> None:
        if self._on_sent is not None:
            self._on_sent(request)

    @contextlib.contextmanager
    def holding(self, draft: Draft) -> Iterator[None]:
        self._drafts.add(draft)
        try:
            yield
        finally:
            self._drafts.discard(draft)

    def drafts(self) -> list[Draft]:
        return list(self._drafts)


async def bounded(
    loop: Coroutine[Any, Any, None],
    limit: float,
    in_flight: InFlight,
    on_record: Callable[[RequestRecord], None],
    drain_s: float,
) -> None:
    """Runs a send loop until it ends or until `limit` (a perf_counter time: the deadline plus
    the drain); then cuts the requests still in flight, each handed on as cut."""
    if not math.isfinite(limit):
        await loop
        return
    task = asyncio.ensure_future(loop)
    try:
        await asyncio.wait({task}, timeout=max(0.0, limit - time.perf_counter()))
        if task.done():
            task.result()
            return
        left = in_flight.drafts()  # before the cancel: each sender lets its draft go as it ends
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for draft in left:
            if draft.sent_mono_s:  # sent: a request not yet out was never the server's
                on_record(cut(draft, drain_s))
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def cut(draft: Draft, drain_s: float) -> RequestRecord:
    """The request's record as the drain cut it: what arrived is kept; one that had ended (its
    hand-on was cancelled) is left as it was."""
    message = (
        f"still in flight {drain_s:g} s after the case's --duration ended (--drain): cut by benchy, "
        "the server had not finished it"
    )
    return draft.cut(DRAIN_CUT, message, max(0.0, time.perf_counter() - draft.sent_mono_s))
