"""benchy's own health while requests were in flight (results.json case.client): its event
loop's lag and CPU time, and each worker process's, with the clock that set its stamps. One
model: the load stage makes them (load/monitor.py, load/workers.py) and results.json saves them
as they are, so they live below both; apart from results/types.py so that a warning's figures
(results/verdicts/details.py) can carry them."""

from __future__ import annotations

from dataclasses import dataclass

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt


@dataclass(frozen=True, slots=True)
class WorkerClock(Saved):
    """A worker's perf_counter against the parent's (workers.Clock)."""

    offset_s: float = 0.0
    uncertainty_s: float = _opt("± around offset_s: half the best round trip; 0 on one kernel", 0.0)
    measured_offset_s: float | None = None
    rtt_s: float | None = None
    same_clock: bool = True
    samples: int | None = None


@dataclass(frozen=True, slots=True)
class LoopHealth(Saved):
    """benchy's event loop while requests were in flight (monitor.LoopMonitor.figures): lag in
    ms, the share of time stalled, CPU time against wall time (cpu_share 1.0: one core busy)."""

    loop_lag_ms_max: float | None = None
    loop_lag_ms_p99: float | None = None
    loop_lag_ms_p95: float | None = None
    stalled_share: float | None = None
    loop_lag_ms_median: float | None = None
    lag_samples: int | None = None
    cpu_s: float | None = None
    wall_s: float | None = None
    cpu_share: float | None = None


@dataclass(frozen=True, slots=True)
class WorkerHealth(LoopHealth):
    """One worker process's line in case.client.per_worker (workers.worker_entry)."""

    worker: int = 0
    node: str = ""
    clock: WorkerClock | None = None
    requests: int = 0
    tokens: int = 0
    lost: str | None = _opt("why the worker was lost (it died mid-case); null when it finished")


@dataclass(frozen=True, slots=True)
class ClientHealth(LoopHealth):
    """benchy's own health during a case (monitor.py; over several workers, workers.py merges
    them: CPU time and samples summed, every other figure the worst worker's)."""

    workers: int | None = _opt("(1.4) worker processes", omit=True)
    busiest: str | None = _opt("(1.4) the busiest worker and its node", omit=True)
    clock_uncertainty_s: float | None = _opt("(1.4) the largest worker clock uncertainty", omit=True)
    lost_workers: int | None = _opt("(1.4) workers lost mid-case", omit=True)
    per_worker: list[WorkerHealth] = _opt("(1.4) each worker's own figures", factory=list, omit=True)
