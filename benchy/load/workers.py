"""One case over several client processes: the split, the worker's side, the merge, and the
local pool (`--workers N`). cluster.py (`--ray`) runs the same worker side in Ray actors and
merges through the same code, so a local and a cluster run differ only in how bytes travel.

Why several processes: one Python event loop timestamps every chunk of every stream it reads,
so past some load its own delay shows up in the numbers (monitor.py measures it).

- **Split** (deterministic): worker w of k sends share w of the case (arrivals.share), its
  round-robin part of the concurrency or of the Poisson schedule that every worker draws from
  the same seed: together exactly what one process would send, on the same schedule.
- **One clock**: before each case the parent reads each worker's perf_counter a few times
  (CLOCK_SAMPLES round trips) and keeps the sample with the least round trip: offset =
  their time − the midpoint of ours, uncertain by half that round trip. A worker on the
  parent's kernel (the same boot id) shares its CLOCK_MONOTONIC, so its offset is exactly 0
  and none is applied (the handshake is still recorded, as a check); records from anywhere
  else are moved onto the parent's clock by the measured offset. Every worker starts its
  measured requests at one shared instant (the parent's clock, translated), picked once all
  have sent their warmups.
- **Batches**: a worker sends what finished, and a note of each request as it leaves, every
  BATCH_S, worker_side.py (never per token). A worker lost mid-case (its process or node gone) leaves its
  in-flight requests recorded as failed with kind `worker_lost`; what it had finished and sent
  is kept; the run goes on, or stops as --max-errors says. A stop (Ctrl-C, SIGTERM, an error
  limit) asks every worker to stop and waits up to STOP_GRACE_S for its last batch.

The local pool runs workers as `multiprocessing` processes talking over `multiprocessing.Pipe`:
(kind, payload) tuples. They come from a fork server (no fork of the parent, which holds an
event loop and threads): one fresh interpreter imports what a worker runs (WORKER_MODULES) once,
and each worker is a fork of it, so k workers cost one import, not k (a third of a CPU-second
each). Where there is no fork server (Windows), each worker is spawned.
Parent → worker: an Order (worker_side.py: ReadClock, RunShare, Go, StopShare, Quit). Spawned processes import the parent's main module
unless it runs as `python -m` or a console script: a script that calls run.execute must guard
its entry point with `if __name__ == "__main__":`, as for any multiprocessing program. Worker → parent: ("clock", reading), ("batch", handoff.Batch).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import multiprocessing
import os
import platform
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Protocol

from benchy.client import loop as event_loop
from benchy.load.handoff import Batch
from benchy.load.worker_side import (
    Go,
    OnRecord,
    OnStart,
    Order,
    Quit,
    ReadClock,
    RunShare,
    StopShare,
    boot_id,
    worker_main,
)
from benchy.measure.health import ClientHealth, LoopHealth, WorkerClock, WorkerHealth
from benchy.records.plan import Sent

if TYPE_CHECKING:
    from collections.abc import Iterator

    from benchy.client.settings import ClientSettings
    from benchy.load.plan import CasePlan, LoadSettings, OnSent
    from benchy.load.prompts import Calibration
    from benchy.records import RequestRecord
    from benchy.workloads.case import Case


STREAMS_PER_WORKER = 64  # one event loop keeps this many streams well within its means
CLOCK_SAMPLES = 8  # round trips per clock handshake; the fastest one is kept
STOP_GRACE_S = 3.0  # on a stop, how long the parent waits for the workers' last batches
LOST = "worker_lost"  # error kind of a request whose worker was lost while it was in flight
# What a worker runs, imported once by the fork server (every worker forked from it has them).
WORKER_MODULES = (
    "benchy.load.workers",
    "benchy.load.worker_side",
    "benchy.client.client",
    "benchy.load.generator",
    "benchy.load.monitor",
    "uvloop",
)


class WorkerError(Exception):
    """A worker failed; `kind` is the exception class it raised there."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# ---------------------------------------------------------------- the split


def auto_workers(case: Case, max_inflight: int | None) -> int:
    """What the load needs: one worker per 64 streams (closed loop: the concurrency; open loop:
    --max-inflight, else one per 64 requests/s), at most one per CPU core."""
    if case.rate is None:
        streams = case.concurrency
    else:
        streams = max_inflight or math.ceil(case.rate)
    return max(1, min(_usable_cores(), math.ceil(streams / STREAMS_PER_WORKER)))


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))  # what this process may run on (taskset, containers)
    except AttributeError:  # pragma: no cover (not Linux)
        return os.cpu_count() or 1


def case_workers(case: Case, requested: int | None, max_inflight: int | None) -> int:
    """Processes a case runs on: --workers (or the automatic choice), never more than it has
    streams to share out; a cached-depth case stays in one process (its shared context)."""
    if case.depth_mode == "cached" and case.depth:
        return 1
    wanted = requested if requested is not None else auto_workers(case, max_inflight)
    streams = case.concurrency if case.rate is None else (max_inflight or wanted)
    return max(1, min(wanted, streams))


def split(plan: CasePlan, k: int) -> list[CasePlan]:
    """The k shares of a case plan (loadgen sends share `worker` of `workers`)."""
    return [replace(plan, worker=w, workers=k) for w in range(k)]


# ---------------------------------------------------------------- one clock


@dataclass(frozen=True)
class Clock:
    """A worker's perf_counter against the parent's: worker time = parent time + offset_s."""

    offset_s: float  # the offset applied: 0 on the parent's own kernel
    uncertainty_s: float  # ± around offset_s (half the best round trip; 0 on one kernel)
    measured_offset_s: float  # what the handshake found (on one kernel: within ± rtt_s / 2 of 0)
    rtt_s: float  # the least round trip of the handshake
    same_clock: bool
    node: str

    def to_parent(self, t: float) -> float:
        return t - self.offset_s

    def to_worker(self, t: float) -> float:
        return t + self.offset_s

    def saved(self) -> WorkerClock:
        """As a case's `client.per_worker[].clock` keeps it: typed, no dict on the way."""
        return WorkerClock(
            offset_s=self.offset_s,
            uncertainty_s=round(self.uncertainty_s, 9),
            measured_offset_s=round(self.measured_offset_s, 9),
            rtt_s=round(self.rtt_s, 9),
            same_clock=self.same_clock,
            samples=CLOCK_SAMPLES,
        )


LOCAL_CLOCK = Clock(0.0, 0.0, 0.0, 0.0, True, platform.node())  # the parent's own process


async def measure_clock(read: Callable[[], Awaitable[dict[str, Any]]]) -> Clock:
    """The handshake: CLOCK_SAMPLES readings, the one with the least round trip kept."""
    best: tuple[float, float] | None = None
    reading: dict[str, Any] = {}
    for _ in range(CLOCK_SAMPLES):
        t0 = time.perf_counter()
        reading = await read()
        t1 = time.perf_counter()
        if best is None or t1 - t0 < best[0]:
            best = (t1 - t0, reading["t"] - (t0 + t1) / 2)
    assert best is not None
    rtt, measured = best
    same = reading["boot_id"] is not None and reading["boot_id"] == boot_id()
    return Clock(0.0 if same else measured, 0.0 if same else rtt / 2, measured, rtt, same, reading["node"])


# ---------------------------------------------------------------- the merge


@dataclass
class _Worker:
    clock: Clock
    in_flight: dict[str, Sent]  # request_id → the request as sent (parent's clock), not yet back
    requests: int = 0
    tokens: int = 0
    figures: LoopHealth | None = None
    lost: str | None = None


class Merge:
    """The parent's view of a split case: records onto the parent's clock and into on_record,
    each request sent into on_sent (its plan line) as the worker tells of it, what each worker
    has in flight, and its figures."""

    def __init__(self, clocks: list[Clock], on_record: Callable[..., Any], on_sent: OnSent | None = None) -> None:
        self.workers = [_Worker(clock, {}) for clock in clocks]
        self.on_record = on_record
        self.on_sent = on_sent

    def take(self, w: int, batch: Batch) -> None:
        from benchy.records.tokens import tokens_of

        worker = self.workers[w]
        for sent in batch.sent:
            shifted = worker.in_flight[sent.record.request_id] = self._on_parent_clock(worker, sent)
            if self.on_sent is not None:
                self.on_sent(shifted)
        for done in batch.records:
            worker.in_flight.pop(done.request_id, None)
            rec = self._record_on_parent_clock(worker, done)
            worker.requests += 1
            worker.tokens += tokens_of(rec)
            self.on_record(rec)
        if batch.figures is not None:
            worker.figures = batch.figures

    @staticmethod
    def _record_on_parent_clock(worker: _Worker, rec: RequestRecord) -> RequestRecord:
        """A worker's record with its times on the parent's clock: a new record, not a dict."""
        if worker.clock.offset_s == 0.0:
            return rec
        return replace(rec, sent_mono_s=worker.clock.to_parent(rec.sent_mono_s))

    @staticmethod
    def _on_parent_clock(worker: _Worker, sent: Sent) -> Sent:
        """A request as a worker sent it, its send time and its schedule's on the parent's clock."""
        if worker.clock.offset_s == 0.0:
            return sent
        scheduled = sent.tags.scheduled_mono_s
        return Sent(
            Merge._record_on_parent_clock(worker, sent.record),
            replace(sent.tags, scheduled_mono_s=worker.clock.to_parent(scheduled))
            if scheduled is not None
            else sent.tags,
        )

    def lose(self, w: int, reason: str) -> None:
        """Worker w is gone: each request it had in flight is recorded as failed (`worker_lost`)."""
        worker, now = self.workers[w], time.perf_counter()
        worker.lost = reason
        for sent in list(worker.in_flight.values()):
            rec = replace(
                sent.record,
                status="error",
                error_kind=LOST,
                error=f"the worker was lost while this request was in flight ({reason})",
                end_s=max(0.0, now - sent.record.sent_mono_s),
            )  # made failed, not written into after
            worker.requests += 1
            self.on_record(rec)
        worker.in_flight.clear()

    def client_figures(self) -> ClientHealth:
        return client_figures(
            [
                worker_entry(w, x.clock, x.figures or LoopHealth(), x.requests, x.tokens, x.lost)
                for w, x in enumerate(self.workers)
            ]
        )


def worker_entry(
    w: int, clock: Clock, figures: LoopHealth, requests: int, tokens: int, lost: str | None = None
) -> WorkerHealth:
    """One worker's line in a case's `client.per_worker`."""
    return WorkerHealth(
        **_loop_fields(figures),
        worker=w,
        node=clock.node,
        clock=clock.saved(),
        requests=requests,
        tokens=tokens,
        lost=lost,
    )


SUMMED_FIGURES = ("lag_samples", "cpu_s")  # other figures: the worst (largest) worker's
LOOP_FIGURES = tuple(f.name for f in fields(LoopHealth))


def _loop_fields(figures: LoopHealth) -> dict[str, Any]:
    return {name: getattr(figures, name) for name in LOOP_FIGURES}


def merge_figures(figures: list[LoopHealth]) -> LoopHealth:
    """LoopMonitor figures of several processes as one: CPU time and sample counts summed,
    every other figure the worst worker's (lags; the busiest process's CPU share, since each
    process has a core of its own); None where no worker has one (a lost worker has none)."""
    merged: dict[str, Any] = {}
    for key in LOOP_FIGURES:
        values = [getattr(f, key) for f in figures if getattr(f, key) is not None]
        if not values:
            merged[key] = None
        elif key in SUMMED_FIGURES:
            merged[key] = round(sum(values), 4)
        else:
            merged[key] = max(values)
    return LoopHealth(**merged)


def client_figures(per_worker: list[WorkerHealth]) -> ClientHealth:
    """A case's `client` entry: the workers' monitor figures merged, the busiest worker named
    (its node: where client_overloaded should look), the clock uncertainty, every worker's line."""
    busiest = max(per_worker, key=_load_of)
    return ClientHealth(
        **_loop_fields(merge_figures(list(per_worker))),
        workers=len(per_worker),
        busiest=f"worker {busiest.worker} on {busiest.node}",
        clock_uncertainty_s=max(e.clock.uncertainty_s if e.clock else 0.0 for e in per_worker),
        lost_workers=sum(e.lost is not None for e in per_worker),
        per_worker=per_worker,
    )


def _load_of(entry: WorkerHealth) -> tuple[float, float]:
    return (entry.loop_lag_ms_p95 or 0.0, entry.cpu_share or 0.0)


# ---------------------------------------------------------------- running a split case


class Workers(Protocol):
    """Where a split case runs: the local pool or Ray actors (cluster.py)."""

    start_lead_s: float  # the shared start lies this far ahead, so every worker hears of it in time

    async def read_clock(self, w: int) -> dict[str, Any]: ...

    def begin(self, plans: list[CasePlan], calibration: Calibration, nonce: bool, events: asyncio.Queue[Any]) -> None:
        """Starts share w on worker w; puts (w, "batch", batch) and (w, "lost", reason) events."""

    def go(self, w: int, start_s: float) -> None: ...

    def stop(self, w: int) -> None: ...


async def run_split(
    workers: Workers,
    plans: list[CasePlan],
    calibration: Calibration,
    nonce: bool,
    on_record: OnRecord,
    stop: asyncio.Event,
    on_start: OnStart | None = None,
    on_sent: OnSent | None = None,
) -> ClientHealth:
    """A case on len(plans) workers: clocks, start, batches merged into on_sent and on_record; returns the
    case's client figures. `on_start` (a coroutine function) is awaited once every worker is
    done with its warmups, just before the shared start. Once `stop` is set, or on Ctrl-C,
    every worker is asked to stop and what they send within STOP_GRACE_S is kept. Raises
    WorkerError when a worker failed."""
    clocks = [await measure_clock(functools.partial(workers.read_clock, w)) for w in range(len(plans))]
    merge = Merge(clocks, on_record, on_sent)
    events: asyncio.Queue[Any] = asyncio.Queue()
    running = set(range(len(plans)))
    waiting: set[int] | None = set(running)  # for their warmups to end (None: started)
    workers.begin(plans, calibration, nonce, events)
    try:
        while running and not stop.is_set():
            w, kind, payload = await events.get()
            failure = _handle(merge, w, kind, payload, running, waiting)
            if failure is not None:
                raise failure
            if waiting is not None and not waiting:  # every live worker is ready: one start
                if on_start is not None:
                    await on_start()
                start_s = time.perf_counter() + workers.start_lead_s
                for r in running:
                    workers.go(r, clocks[r].to_worker(start_s))
                waiting = None
    except BaseException:
        await _wind_down(workers, merge, events, running, waiting)
        raise
    if running:  # stopped
        await _wind_down(workers, merge, events, running, waiting)
    return merge.client_figures()


def _handle(
    merge: Merge, w: int, kind: str, payload: Any, running: set[int], waiting: set[int] | None
) -> WorkerError | None:
    if kind == "lost":
        merge.lose(w, payload)
        running.discard(w)
        if waiting is not None:
            waiting.discard(w)
        return None
    merge.take(w, payload)
    if payload.ready and waiting is not None:
        waiting.discard(w)
    if payload.last:
        running.discard(w)
        if waiting is not None:
            waiting.discard(w)
    if payload.error is not None and payload.error[0] != "Cancelled":
        return WorkerError(*payload.error)
    return None


async def _wind_down(
    workers: Workers, merge: Merge, events: asyncio.Queue[Any], running: set[int], waiting: set[int] | None
) -> None:
    """Asks every running worker to stop and keeps what they send within STOP_GRACE_S."""
    for w in running:
        workers.stop(w)
    deadline = time.perf_counter() + STOP_GRACE_S
    while running and (left := deadline - time.perf_counter()) > 0:
        try:
            w, kind, payload = await asyncio.wait_for(events.get(), left)
        except asyncio.TimeoutError:
            break
        _handle(merge, w, kind, payload, running, waiting)
    for w in list(running):  # never answered: whatever it had in flight is lost
        merge.lose(w, f"no answer within {STOP_GRACE_S:g} s of the stop")


# ---------------------------------------------------------------- the local pool


class ProcessPool:
    """N local worker processes, each with its own event loop and Client, reused by every
    case of a run (a lost one is started again before the next case that needs it)."""

    start_lead_s = 0.02  # a pipe message takes microseconds

    def __init__(self, n: int) -> None:
        self.n = n
        self._procs: list[Any] = [None] * n
        self._conns: list[Any] = [None] * n
        self._clock_replies: list[asyncio.Queue[dict[str, Any]]] = [asyncio.Queue() for _ in range(n)]
        self._events: asyncio.Queue[Any] | None = None
        self._settings: ClientSettings | None = None  # the case's

    def start(self) -> ProcessPool:
        with _sigint_ignored():  # a child inherits the ignored SIGINT: Ctrl-C reaches the parent only
            for w in range(self.n):
                self._spawn(w)
        return self

    def _spawn(self, w: int) -> None:
        ctx = _context()
        ours, theirs = ctx.Pipe()
        proc = ctx.Process(target=worker_main, args=(theirs,), name=f"benchy-worker-{w}", daemon=True)
        proc.start()
        theirs.close()
        self._procs[w], self._conns[w] = proc, ours
        event_loop.watch(ours, self._drain, w)

    def workers_for(self, case: Case, load: LoadSettings) -> int:
        return min(self.n, case_workers(case, load.workers, load.max_inflight))

    async def run_case(
        self,
        plan: CasePlan,
        k: int,
        client_settings: ClientSettings,
        calibration: Calibration,
        nonce: bool,
        on_record: OnRecord,
        stop: asyncio.Event,
        on_start: OnStart | None = None,
        on_sent: OnSent | None = None,
    ) -> ClientHealth:
        for w in range(k):
            if not self._procs[w].is_alive():
                self._forget(w)
                with _sigint_ignored():
                    self._spawn(w)
        self._settings = client_settings
        return await run_split(self, split(plan, k), calibration, nonce, on_record, stop, on_start, on_sent)

    async def read_clock(self, w: int) -> dict[str, Any]:
        self._send(w, ReadClock())
        return await self._clock_replies[w].get()

    def begin(self, plans: list[CasePlan], calibration: Calibration, nonce: bool, events: asyncio.Queue[Any]) -> None:
        self._events = events
        for w, plan in enumerate(plans):
            assert self._settings is not None  # run_case sets them before it begins
            self._send(w, RunShare(plan, self._settings, calibration, nonce))

    def go(self, w: int, start_s: float) -> None:
        self._send(w, Go(start_s))

    def stop(self, w: int) -> None:
        self._send(w, StopShare())

    def _send(self, w: int, msg: Order) -> None:
        with contextlib.suppress(OSError):  # a worker that is gone: its loss is reported by _drain
            self._conns[w].send(msg)

    def _drain(self, w: int) -> None:
        """Reader callback: every whole message waiting on worker w's pipe."""
        conn = self._conns[w]
        try:
            while conn.poll():
                kind, payload = conn.recv()
                if kind == "clock":
                    self._clock_replies[w].put_nowait(payload)
                elif self._events is not None:
                    self._events.put_nowait((w, kind, payload))
        except (EOFError, OSError):
            self._forget(w)
            self._procs[w].join(timeout=0.1)
            reason = f"worker process {w} ended unexpectedly (exit code {self._procs[w].exitcode})"
            if self._events is not None:
                self._events.put_nowait((w, "lost", reason))

    def _forget(self, w: int) -> None:
        """Stops listening to worker w (before its pipe closes: a reader left on a closed
        descriptor would fire later)."""
        conn = self._conns[w]
        if conn is not None and not conn.closed:
            asyncio.get_running_loop().remove_reader(conn.fileno())

    def close(self) -> None:
        for w in range(self.n):
            self._forget(w)
            self._send(w, Quit())
        for proc in filter(None, self._procs):
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        for conn in filter(None, self._conns):
            conn.close()
        _stop_fork_server()


@functools.cache
def _context() -> multiprocessing.context.ForkServerContext | multiprocessing.context.SpawnContext:
    """Where workers come from: the fork server with WORKER_MODULES loaded, else spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():  # pragma: no cover (Windows)
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(list(WORKER_MODULES))
    return ctx


def _stop_fork_server() -> None:
    """Ends the fork server and waits for it, as for any child: its workers' CPU is then the
    parent's too (os.wait4, `time`), and no process outlives the run. A later pool starts a new one."""
    if _context().get_start_method() != "forkserver":  # pragma: no cover (Windows)
        return
    from multiprocessing import forkserver

    stop = getattr(forkserver._forkserver, "_stop", None)  # CPython's own, since 3.8
    if stop is not None:
        stop()


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to change
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
