"""`--workers N`: a case's requests spread over N processes, each with its own event loop.

One Python event loop timestamps every chunk of every stream it reads, so past some load its
own delay shows up in the numbers. Worker processes (`python -m benchy.workers`, started once
per run and reused by every case) each send a round-robin share of a case (arrivals.share):
their share of the concurrency or of the Poisson schedule, every worker drawing the same
schedule from the same seed. All start at one perf_counter time the parent hands out once
every worker has sent its warmups, and each finished record comes back to the parent as it
ends, so results.json, requests.jsonl, progress and --max-errors see exactly what one process
would (records carry CLOCK_MONOTONIC times, comparable across processes on Linux).

Protocol (pickled tuples over a socket pair): parent → worker ("case", CasePlan, Calibration,
nonce), ("go", start_s), ("stop",); worker → parent ("ready",), ("record", dict),
("done", monitor figures), ("error", kind, message).
"""

from __future__ import annotations

import asyncio
import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path

STREAMS_PER_WORKER = 64  # one event loop keeps this many streams well within its means
START_LEAD_S = 0.02  # the shared start lies this far ahead, so every worker gets "go" before it


class WorkerError(Exception):
    """A worker process failed; `kind` is the exception class it raised there."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def auto_workers(case, max_inflight: int | None) -> int:
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


def case_workers(case, requested: int | None, max_inflight: int | None) -> int:
    """Processes a case runs on: --workers (or the automatic choice), never more than it has
    streams to share out; a cached-depth case stays in one process (its shared context)."""
    if case.depth_mode == "cached" and case.depth:
        return 1
    wanted = requested if requested is not None else auto_workers(case, max_inflight)
    streams = case.concurrency if case.rate is None else (max_inflight or wanted)
    return max(1, min(wanted, streams))


SUMMED_FIGURES = ("lag_samples", "cpu_s")  # other figures: the worst (largest) worker's


def merge_figures(figures: list[dict]) -> dict:
    """LoopMonitor figures of several processes as one: CPU time and sample counts summed,
    every other figure the worst worker's (lags; the busiest process's CPU share, since each
    process has a core of its own)."""
    merged: dict = {}
    for key in dict.fromkeys(k for f in figures for k in f):
        values = [f[key] for f in figures if f.get(key) is not None]
        if key in SUMMED_FIGURES:
            merged[key] = round(sum(values), 4)
        else:
            merged[key] = max(values) if values else None
    merged["workers"] = len(figures)
    return merged


class WorkerPool:
    """N worker processes with their own Client; `await pool.run_case(...)` per case."""

    def __init__(self, n: int, client_settings) -> None:
        self.n = n
        self.client_settings = client_settings
        self._procs: list[subprocess.Popen] = []
        self._conns: list[Connection] = []
        self._stderr: list = []

    def start(self) -> WorkerPool:
        root = str(Path(__file__).resolve().parent.parent)
        env = dict(os.environ)
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        for _ in range(self.n):
            ours, theirs = socket.socketpair()
            err = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen(
                [sys.executable, "-m", "benchy.workers", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
                start_new_session=True,
            )  # Ctrl-C goes to the parent only
            theirs.close()
            conn = Connection(ours.detach())
            conn.send(("settings", self.client_settings))
            self._procs.append(proc)
            self._conns.append(conn)
            self._stderr.append(err)
        return self

    async def run_case(
        self,
        plan,
        k: int,
        calibration,
        nonce: bool,
        on_record: Callable,
        stop: asyncio.Event,
        on_start: Callable | None = None,
    ) -> dict:
        """Runs `plan` on the first k workers; calls on_record for each record as it comes;
        returns the merged LoopMonitor figures. Once `stop` is set (on_record passed an error
        limit) the records already sent are kept and every worker is killed; so they are if
        anything goes wrong. `on_start` (a coroutine function) is awaited once every worker is
        done with its warmups, just before they are told to go."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        conns = self._conns[:k]
        fds = [conn.fileno() for conn in conns]
        for w, (conn, fd) in enumerate(zip(conns, fds)):
            loop.add_reader(fd, _drain, conn, w, queue)
        try:
            for w, conn in enumerate(conns):
                conn.send(("case", replace(plan, worker=w, workers=k), calibration, nonce))
            figures = await self._collect(queue, conns, on_record, stop, on_start)
            if stop.is_set():
                _stop_reading(loop, fds)
                _keep_finished(queue, conns, on_record)
                self.kill()
            return figures
        except BaseException:
            _stop_reading(loop, fds)
            _keep_finished(queue, conns, on_record)
            self.kill()
            raise
        finally:
            _stop_reading(loop, fds)

    async def _collect(
        self,
        queue: asyncio.Queue,
        conns: list[Connection],
        on_record: Callable,
        stop: asyncio.Event,
        on_start: Callable | None = None,
    ) -> dict:
        from benchy.records import RequestRecord

        ready = 0
        figures: list[dict] = []
        while len(figures) < len(conns) and not stop.is_set():
            w, msg = await queue.get()
            kind = msg[0]
            if kind == "record":
                on_record(RequestRecord.from_dict(msg[1]))
            elif kind == "ready":
                ready += 1
                if ready == len(conns):
                    if on_start is not None:
                        await on_start()
                    start_s = time.perf_counter() + START_LEAD_S
                    for conn in conns:
                        conn.send(("go", start_s))
            elif kind == "done":
                figures.append(msg[1])
            elif kind == "error":
                raise WorkerError(msg[1], msg[2])
            else:  # "eof": the process is gone
                raise WorkerError("WorkerDied", f"worker process {w} ended unexpectedly{self._last_words(w)}")
        return merge_figures(figures)

    def _last_words(self, w: int) -> str:
        err = self._stderr[w]
        err.seek(0)
        lines = [line for line in err.read().splitlines() if line.strip()]
        return f": {lines[-1][:300]}" if lines else ""

    def kill(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.kill()
        self.close()

    def close(self) -> None:
        for conn in self._conns:
            if not conn.closed:
                try:
                    conn.send(("stop",))
                except OSError:
                    pass
                conn.close()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for err in self._stderr:
            err.close()
        self._procs, self._conns, self._stderr = [], [], []


def _stop_reading(loop: asyncio.AbstractEventLoop, fds: list[int]) -> None:
    """Before the connections close: a reader left on a closed descriptor would fire later."""
    for fd in fds:
        loop.remove_reader(fd)


def _keep_finished(queue: asyncio.Queue, conns: list[Connection], on_record: Callable) -> None:
    """On a stop: the records workers had already sent (read or still in the socket) are
    measured results and are kept."""
    from benchy.records import RequestRecord

    waiting = []
    while not queue.empty():
        waiting.append(queue.get_nowait()[1])
    for conn in conns:
        try:
            while conn.poll():
                waiting.append(conn.recv())
        except (EOFError, OSError):
            pass
    for msg in waiting:
        if msg[0] == "record":
            on_record(RequestRecord.from_dict(msg[1]))


def _drain(conn: Connection, w: int, queue: asyncio.Queue) -> None:
    """Reader callback: every whole message waiting on a worker's socket, into the queue."""
    try:
        while conn.poll():
            queue.put_nowait((w, conn.recv()))
    except (EOFError, OSError):
        asyncio.get_running_loop().remove_reader(conn.fileno())
        queue.put_nowait((w, ("eof",)))


# ---------------------------------------------------------------- the worker process


async def _serve(conn: Connection) -> None:
    from benchy import tokenizer
    from benchy.client import Client

    kind, settings = conn.recv()
    tokenizer.count("warm")  # load the vocabulary now, not while a case's lag is sampled
    async with Client(settings) as client:
        while True:
            msg = conn.recv()  # between cases nothing is in flight: blocking is harmless
            if msg[0] != "case":
                return
            await _run_case(conn, client, *msg[1:])


async def _run_case(conn: Connection, client, plan, calibration, nonce: bool) -> None:
    from benchy.loadgen import run_case
    from benchy.monitor import LoopMonitor
    from benchy.prompts import PromptFactory

    factory = PromptFactory(calibration, nonce=nonce, salt=f"{plan.salt}c{plan.index}w{plan.worker}")
    spans: list[tuple[float, float]] = []

    def on_record(rec) -> None:
        spans.append((rec.sent_mono_s, rec.sent_mono_s + (rec.end_s or 0.0)))
        conn.send(("record", rec.to_dict()))

    async def start() -> float:
        conn.send(("ready",))
        msg = await _receive(conn)
        if msg[0] != "go":
            raise SystemExit(0)
        return msg[1]

    try:
        async with LoopMonitor() as monitor:
            await run_case(client, plan, factory, on_record, start)
    except Exception as exc:  # reported to the parent, which prints one line
        conn.send(("error", type(exc).__name__, str(exc)))
        return
    conn.send(("done", monitor.figures(spans)))


async def _receive(conn: Connection):
    """The next message, awaited without blocking the loop (whose lag sampler is running)."""
    loop = asyncio.get_running_loop()
    while not conn.poll():
        readable = loop.create_future()
        loop.add_reader(conn.fileno(), _wake, readable)
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())
    return conn.recv()


def _wake(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when a run stops
    conn = Connection(int(argv[0]))
    try:
        asyncio.run(_serve(conn))
    except (EOFError, OSError, KeyboardInterrupt):
        pass  # the parent went away or stopped us: nothing left to report to
    finally:
        conn.close()


if __name__ == "__main__":
    main(sys.argv[1:])
