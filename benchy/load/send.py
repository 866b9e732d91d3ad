"""The one send loop: every request benchy sends goes out through `send`, whatever its workload.

Why one: a workload says *what* to send and *when* (load/plan.py's PlannedRequest); how it is
sent — a stream per request in flight, the schedule kept, a stop obeyed, a failure ending the
others, a record handed on the moment it is filled — is the same for all of them, and written
once here, so a sweep, a conversation, a trace, the alone baselines and probe-cache cannot
drift apart in how they measure.

Three paces, all of one loop:
  closed     `Closed(streams)`: that many requests in flight, each stream sending its next
             request the moment its last one ends (until `deadline`)
  open       `Open(start_s)`: each request at start_s + its `at_s`, whatever is in flight (with
             `inflight_cap`, a send waits for a free slot and is late: its record shows the
             queue delay, case_formulas.send_lag_s); requests come in time order
  dependent  a request whose `then` makes the next one from its record (a conversation's next
             turn, `pause_s` after the answer): the stream that sent it sends its successor,
             under either pace, until `then` says None

Once `stop` is set nothing more is sent; the requests in flight finish (run_case cancels them
when it stops a case). A failure of one send (never a failed request: the client records
those) ends the others, none of them recorded.

The drain (`--drain S`, load/drain.py): after a pace's `deadline` nothing more is sent and the
requests in flight get `drain_s` seconds to end; those still in flight then are cut and each
is recorded as such (error kind `drain_cut`), so a saturated server bounds neither the case's
time nor hides the requests it never answered.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from benchy.client.client import Client
from benchy.client.draft import Draft
from benchy.load import drain, reconnect
from benchy.load.plan import OnSent, PlannedRequest
from benchy.load.turns import Turns
from benchy.records import RequestRecord


@dataclass(frozen=True)
class Closed:
    """A closed loop of `streams` requests in flight; none is sent after `deadline` (perf_counter)."""

    streams: int
    deadline: float = math.inf
    drain_s: float = math.inf  # after the deadline, requests in flight end within this, or are cut


@dataclass(frozen=True)
class Open:
    """An open loop from `start_s` (perf_counter): each request at start_s + at_s; arrivals
    due at or after `deadline` are not sent; at most `inflight_cap` in flight (None: no cap)."""

    start_s: float
    inflight_cap: int | None = None
    deadline: float = math.inf
    drain_s: float = math.inf  # after the deadline, requests in flight end within this, or are cut


async def send(
    client: Client,
    requests: Iterable[PlannedRequest],
    on_record: Callable[[RequestRecord], None],
    pace: Closed | Open,
    stop: asyncio.Event | None = None,
    on_sent: OnSent | None = None,
) -> None:
    """Sends `requests` at `pace`, calling on_sent(its record and tags) as each one leaves
    (its plan line is written then) and on_record(record) as each one ends."""
    stop = stop or asyncio.Event()
    turns = Turns()
    in_flight = drain.InFlight(on_sent)
    if isinstance(pace, Open):
        loop = _open(client, requests, on_record, pace, stop, turns, in_flight)
    else:
        loop = _closed(client, requests, on_record, pace, stop, turns, in_flight)
    await drain.bounded(loop, pace.deadline + pace.drain_s, in_flight, on_record, pace.drain_s)


async def _chain(
    client: Client,
    request: PlannedRequest | None,
    on_record: Callable[[RequestRecord], None],
    deadline: float,
    stop: asyncio.Event,
    turns: Turns,
    in_flight: drain.InFlight,
) -> RequestRecord | None:
    """Sends `request`, then each successor its `then` makes from the record before it; the
    last record (None: nothing sent). Each is a new record the client made when its answer
    closed, not the plan's: held by no one once handed on and followed, so its streams go with it."""
    rec = None
    while request is not None:
        draft = Draft(request.record)
        await turns.share()
        in_flight.sent(request.sent())
        with in_flight.holding(draft):  # until handed on: the drain cuts what it still holds
            rec = await client.stream(
                draft, request.prompt, request.max_tokens, request.endpoint, request.body, request.harmony
            )
            await turns.share()
            on_record(rec)
        if request.then is None:
            return rec
        request = request.then(rec)
        if request is None:
            return rec
        if request.pause_s:
            await asyncio.sleep(request.pause_s)
        if stop.is_set() or time.perf_counter() >= deadline:
            return rec
    return rec


async def _closed(
    client: Client,
    requests: Iterable[PlannedRequest],
    on_record: Callable[[RequestRecord], None],
    pace: Closed,
    stop: asyncio.Event,
    turns: Turns,
    in_flight: drain.InFlight,
) -> None:
    queue = iter(requests)
    outage = reconnect.Outage(client.settings.reconnect_s)

    async def stream() -> None:
        for request in queue:
            if stop.is_set() or time.perf_counter() >= pace.deadline:
                return
            last = await _chain(client, request, on_record, pace.deadline, stop, turns, in_flight)
            outage.saw(last or request.record)
            await outage.wait(client)  # a server that went away: its window to come back

    n = max(1, pace.streams)
    if isinstance(requests, (list, tuple)):
        n = min(n, len(requests))
    streams: list[asyncio.Future[None]] = []
    try:
        for _ in range(n):
            streams.append(asyncio.ensure_future(stream()))
            # A turn of the loop after each first send: the answers of those already sent are
            # read (and stamped) while the rest go out, not once the whole first round has left.
            await asyncio.sleep(0)
        await asyncio.gather(*streams)
    finally:
        # A stream that raised ends the others: none may go on sending, nor record a request
        # that the failure cut short.
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)


async def _open(
    client: Client,
    requests: Iterable[PlannedRequest],
    on_record: Callable[[RequestRecord], None],
    pace: Open,
    stop: asyncio.Event,
    turns: Turns,
    in_flight: drain.InFlight,
) -> None:
    """Each request at its time without waiting for earlier ones to end; a request is taken
    from `requests` only when the one before it has left, so a lazily made plan builds each
    prompt ahead of its time, never all at once."""
    slots = asyncio.Semaphore(pace.inflight_cap) if pace.inflight_cap else None
    tasks: set[asyncio.Task[Any]] = set()
    failure: list[BaseException] = []

    async def one(request: PlannedRequest) -> None:
        try:
            if not stop.is_set():
                await _chain(client, request, on_record, pace.deadline, stop, turns, in_flight)
        finally:
            if slots is not None:
                slots.release()

    def done(task: asyncio.Task[Any]) -> None:
        tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            failure.append(exc)

    try:
        for request in requests:
            assert request.at_s is not None, "an open-loop request without a send time"
            due = pace.start_s + request.at_s
            if due >= pace.deadline:
                break  # in time order: every later one is past the deadline too
            while (delay := due - time.perf_counter()) > 0:  # a timer may fire early (client/loop.py)
                await asyncio.sleep(delay)
            if slots is not None:
                await slots.acquire()
            if failure:
                raise failure[0]  # a send that failed ends the schedule
            request.tags = replace(request.tags, scheduled_mono_s=due)
            task = asyncio.ensure_future(one(request))
            tasks.add(task)
            task.add_done_callback(done)
        while tasks:
            await asyncio.wait(set(tasks))
            if failure:
                raise failure[0]
    finally:
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
