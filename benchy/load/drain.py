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

from benchy.measure.classify import DRAIN_CUT
from benchy.records import RequestRecord

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
    """The records of the requests a send loop has sent and not yet handed on."""

    def __init__(self) -> None:
        self._records: dict[int, RequestRecord] = {}

    @contextlib.contextmanager
    def holding(self, rec: RequestRecord) -> Iterator[None]:
        self._records[id(rec)] = rec
        try:
            yield
        finally:
            self._records.pop(id(rec), None)

    def records(self) -> list[RequestRecord]:
        return list(self._records.values())


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
        left = in_flight.records()  # before the cancel: each sender lets its record go as it ends
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        for rec in left:
            if rec.sent_mono_s:  # sent: a request not yet out was never the server's
                on_record(cut(rec, drain_s))
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def cut(rec: RequestRecord, drain_s: float) -> RequestRecord:
    """`rec`, as the drain cut it: what arrived is kept; one that had ended is left as it was."""
    if rec.end_s is not None:  # it ended before the cut, its hand-on was cancelled
        return rec
    rec.end_s = max(0.0, time.perf_counter() - rec.sent_mono_s)
    rec.status, rec.error_kind = "error", DRAIN_CUT
    rec.error = (
        f"still in flight {drain_s:g} s after the case's --duration ended (--drain): cut by benchy, "
        "the server had not finished it"
    )
    return rec
