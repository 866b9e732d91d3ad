"""A worker's side of a split case (workers.py says how a case is split and merged): its share
of the case run on its own event loop and Client, its clock readings, and the local worker
process's loop that serves the parent's messages. cluster.py's Ray actors run the same Share.

Why apart from workers.py: this is what runs in the worker (a forked or spawned process, or
a Ray actor), the rest is the parent's; each side reads on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import platform
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchy.client import loop as event_loop
from benchy.load.handoff import Batch, Sender, frozen_heap, pieces
from benchy.measure.health import LoopHealth
from benchy.records.plan import Sent

if TYPE_CHECKING:
    from benchy.client.client import Client
    from benchy.client.settings import ClientSettings
    from benchy.load.plan import CasePlan
    from benchy.load.prompts import Calibration
    from benchy.records import RequestRecord


@dataclass(frozen=True)
class ReadClock:
    """The parent's order: answer ("clock", clock_reading())."""


@dataclass(frozen=True)
class RunShare:
    """The parent's order: run this share of a case (its batches follow as ("batch", Batch))."""

    plan: CasePlan
    settings: ClientSettings
    calibration: Calibration
    nonce: bool


@dataclass(frozen=True)
class Go:
    """The parent's order: start the measured part at start_s (this worker's clock)."""

    start_s: float


@dataclass(frozen=True)
class StopShare:
    """The parent's order: stop the share (a stop, Ctrl-C, an error limit)."""


@dataclass(frozen=True)
class Quit:
    """The parent's order, or its pipe's end: the worker exits."""


Order = ReadClock | RunShare | Go | StopShare | Quit
OnRecord = Callable[["RequestRecord"], None]
OnStart = Callable[[], Awaitable[object]]  # its value is not used
BATCH_S = 0.05  # a worker's finished records reach the parent at most this late


def clock_reading() -> dict[str, Any]:
    """What a worker answers to a clock handshake: its perf_counter, kernel and node."""
    return {"t": time.perf_counter(), "boot_id": boot_id(), "node": platform.node()}


@functools.cache  # read once: every clock handshake sample carries it
def boot_id() -> str | None:
    """This kernel's boot id: processes that share it share CLOCK_MONOTONIC (perf_counter)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:  # pragma: no cover (not Linux)
        return None


# ---------------------------------------------------------------- a worker's share


class Share:
    """One worker's share of a case, run on benchy's own client, its results in batches
    (handoff.Batch), the last with the share's loop figures or the error that ended it."""

    def __init__(self, client: Client, plan: CasePlan, calibration: Calibration, nonce: bool) -> None:
        self.client, self.plan, self.calibration, self.nonce = client, plan, calibration, nonce
        self.stop = asyncio.Event()
        self._go: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self._wake = asyncio.Event()
        self._sent: list[Sent] = []
        self._done: list[RequestRecord] = []
        self._ready = False
        self._heap = contextlib.ExitStack()  # frozen from the start until the last batch is out

    def go(self, start_s: float) -> None:
        """The shared start, on this worker's clock."""
        if not self._go.done():
            self._go.set_result(start_s)

    async def batches(self) -> AsyncIterator[Batch]:
        with self._heap:
            async for batch in self._batches():
                yield batch

    async def _batches(self) -> AsyncIterator[Batch]:
        task = asyncio.ensure_future(self._run())
        try:
            while not task.done():
                woken = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({task, woken}, timeout=BATCH_S, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                self._wake.clear()
                if not task.done() and (batch := self._take()):
                    yield batch
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        last = self._take() or Batch()
        if task.cancelled():
            yield replace(last, error=("Cancelled", "the share was cancelled"))
        elif (exc := task.exception()) is not None:
            yield replace(last, error=(type(exc).__name__, str(exc)))
        else:
            yield replace(last, figures=task.result())

    def _take(self) -> Batch | None:
        """What came since the last batch; None: nothing did."""
        if not (self._sent or self._done or self._ready):
            return None
        batch = Batch(self._sent, self._done, self._ready)
        self._sent, self._done, self._ready = [], [], False
        return batch

    async def _run(self) -> LoopHealth:
        from benchy.load.generator import run_case
        from benchy.load.monitor import LoopMonitor
        from benchy.load.prompts import PromptFactory

        plan = self.plan
        factory = PromptFactory(self.calibration, nonce=self.nonce, salt=f"{plan.salt}c{plan.index}w{plan.worker}")
        spans: list[tuple[float, float]] = []

        def on_sent(sent: Sent) -> None:  # told before it streams: the parent knows it in flight
            self._sent.append(Sent(replace(sent.record, sent_mono_s=time.perf_counter()), sent.tags))

        def on_record(rec: RequestRecord) -> None:
            spans.append((rec.sent_mono_s, rec.sent_mono_s + (rec.end_s or 0.0)))
            self._done.append(rec)  # final once handed on: pickled as it is

        async def start() -> float:
            self._heap.enter_context(frozen_heap())  # the warmups are done: the measured part begins
            self._ready = True
            self._wake.set()
            return await self._go

        async with LoopMonitor() as monitor:
            await run_case(self.client, plan, factory, on_record, start, self.stop, on_sent)
        return monitor.figures(spans)


# ---------------------------------------------------------------- a local worker process


def worker_main(conn: Connection) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a run stops
    try:
        event_loop.run(_serve(conn))
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the parent went away or stopped us: nothing left to report to
    finally:
        conn.close()
    os._exit(0)  # everything is sent: skip tearing down the interpreter, which the parent waits for


async def _serve(conn: Connection) -> None:
    from benchy.client.client import Client

    # No tokenizer: the prompts a worker builds are filler words, counted without it
    # (tokenizer.count); the parent counts the streamed text.
    inbox: asyncio.Queue[Order] = asyncio.Queue()
    event_loop.watch(conn, _read_into, conn, inbox)
    sender = Sender(conn)
    clients = _Clients(Client)
    share: Share | None = None
    running: set[asyncio.Task[Any]] = set()
    try:
        while True:
            order = await inbox.get()
            if isinstance(order, ReadClock):
                sender.send(("clock", clock_reading()))
            elif isinstance(order, RunShare):
                share = Share(await clients.get(order.settings), order.plan, order.calibration, order.nonce)
                task = asyncio.ensure_future(_send_batches(sender, share))
                running.add(task)
                task.add_done_callback(running.discard)
            elif isinstance(order, Go) and share is not None:
                share.go(order.start_s)
            elif isinstance(order, StopShare) and share is not None:
                share.stop.set()
            elif isinstance(order, Quit):
                break
    finally:
        for task in running:
            task.cancel()
        await clients.close()
        sender.close()


class _Clients:
    """A worker's Client, made at its first case and again only if the settings change
    (the parent learns the model after its workers have started)."""

    def __init__(self, factory: Callable[[ClientSettings], Client]) -> None:
        self.factory = factory
        self.settings: ClientSettings | None = None
        self.client: Client | None = None

    async def get(self, settings: ClientSettings) -> Client:
        if settings != self.settings:
            await self.close()
            self.client = await self.factory(settings).__aenter__()
            self.settings = settings
        assert self.client is not None  # made above when the settings changed (they start as None)
        return self.client

    async def close(self) -> None:
        if self.client is not None:
            await self.client.__aexit__(None, None, None)
            self.client = None


async def _send_batches(sender: Sender, share: Share) -> None:
    """Hands each batch to the sender thread a piece at a time, a turn of the loop apart
    (handoff.py), timing what each costs the loop (worker_trace.py)."""
    from benchy.load.worker_trace import WorkerTrace

    trace = WorkerTrace()
    trace.install()
    try:
        async for batch in share.batches():
            if batch.ready:  # what follows is the measured part
                trace.since = time.perf_counter()
            if batch.last:  # the share's end: nothing is measured after
                trace.uninstall()
            for i, piece in enumerate(pieces(batch)):
                if i:
                    await asyncio.sleep(0)
                t0, cpu0 = time.perf_counter(), time.thread_time()
                sender.send(("batch", piece))
                trace.handed_off(time.perf_counter() - t0, time.thread_time() - cpu0, len(piece.records))
    finally:
        trace.uninstall()
        trace.write(share.plan.worker)


def _read_into(conn: Connection, inbox: asyncio.Queue[Order]) -> None:
    try:
        while conn.poll():
            inbox.put_nowait(conn.recv())
    except (EOFError, OSError):
        asyncio.get_running_loop().remove_reader(conn.fileno())
        inbox.put_nowait(Quit())  # the parent is gone
