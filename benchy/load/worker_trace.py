"""Where a worker's event loop went when it was not reading: its garbage-collector pauses
(gc.callbacks) and the hand-offs of finished records to the parent, timed in the worker.

The loop monitor (monitor.py) sees that the loop woke late; this says why. A worker writes one
JSON line of these figures per case to the file named by $BENCHY_WORKER_TRACE, when set
(benchmarks/bench_streams.py reads them); otherwise they are kept and nothing is written.
"""

from __future__ import annotations

import gc
import json
import os
import time
from typing import Any

ENV = "BENCHY_WORKER_TRACE"


class WorkerTrace:
    """GC pauses and hand-offs of one worker process, per case (`reset` between cases)."""

    def __init__(self) -> None:
        self._gc_started = self._gc_cpu = 0.0
        self.since = float("inf")  # pauses before this perf_counter (the measured part's start) are left out
        self.reset()

    def reset(self) -> None:
        self.gc_pauses = 0
        self.gc_pause_s = 0.0
        self.gc_pause_max_s = 0.0
        self.gc_pause_max_cpu_s = 0.0  # the CPU time of that longest pause (the rest: descheduled)
        self.gc_max_generation = -1
        self.handoffs = 0
        self.handoff_s = 0.0
        self.handoff_max_s = 0.0
        self.handoff_max_records = 0
        self.handoff_max_cpu_s = 0.0
        self.handoff_records_most = 0  # the most records any one hand-off carried

    def install(self) -> None:
        if self._on_gc not in gc.callbacks:
            gc.callbacks.append(self._on_gc)

    def uninstall(self) -> None:
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_started, self._gc_cpu = time.perf_counter(), time.thread_time()
            return
        if self._gc_started < self.since:
            return
        took = time.perf_counter() - self._gc_started
        self.gc_pauses += 1
        self.gc_pause_s += took
        if took > self.gc_pause_max_s:
            self.gc_pause_max_s, self.gc_max_generation = took, int(info.get("generation", -1))
            self.gc_pause_max_cpu_s = time.thread_time() - self._gc_cpu

    def handed_off(self, seconds: float, cpu_s: float, records: int) -> None:
        """A hand-off took `seconds` of the loop's time, `cpu_s` of it on the CPU (the rest it
        waited: on the pipe, or descheduled)."""
        if time.perf_counter() - seconds < self.since:
            return
        self.handoffs += 1
        self.handoff_s += seconds
        self.handoff_records_most = max(self.handoff_records_most, records)
        if seconds > self.handoff_max_s:
            self.handoff_max_s, self.handoff_max_records, self.handoff_max_cpu_s = seconds, records, cpu_s

    def figures(self) -> dict[str, float | int]:
        return {
            "gc_pauses": self.gc_pauses,
            "gc_pause_ms_total": round(1000 * self.gc_pause_s, 3),
            "gc_pause_ms_max": round(1000 * self.gc_pause_max_s, 3),
            "gc_pause_max_cpu_ms": round(1000 * self.gc_pause_max_cpu_s, 3),
            "gc_pause_max_generation": self.gc_max_generation,
            "handoffs": self.handoffs,
            "handoff_ms_total": round(1000 * self.handoff_s, 3),
            "handoff_ms_max": round(1000 * self.handoff_max_s, 3),
            "handoff_max_cpu_ms": round(1000 * self.handoff_max_cpu_s, 3),
            "handoff_max_records": self.handoff_max_records,
            "handoff_records_most": self.handoff_records_most,
        }

    def write(self, worker: int) -> None:
        """Appends this case's figures to $BENCHY_WORKER_TRACE, if set (one short line: an
        O_APPEND write of it is not interleaved with another worker's)."""
        path = os.environ.get(ENV)
        if not path:
            return
        line = json.dumps({"worker": worker, "pid": os.getpid(), **self.figures()}) + "\n"
        with open(path, "a", encoding="utf-8") as out:
            out.write(line)
