"""benchy's own health while it measures: event-loop lag and CPU time, sampled during a case.

Every chunk is timestamped when the event loop gets round to reading it, so a loop that is
busy elsewhere (parsing, another stream, the garbage collector) delays the timestamps. A
sampler task asks to wake every INTERVAL_S and records how late it woke: that lateness is the
delay any timestamp taken at that moment could have suffered. Only samples whose wait overlapped
a request in flight count (building prompts before the first send delays nothing); a stall
that ends a request is seen by a sampler that wakes just after the request's end was stamped,
in the same turn of the loop, so its wait, not its wake, must fall in the request. One
long stall is one late sample but much lost time, so `stalled_share` weighs stalls by time:
the share of the in-flight time the loop spent in stalls of 10 ms or more (measure/window_formulas.py).
checks.py's `client_overloaded` reads these figures from results.json.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np

from benchy.measure import registry
from benchy.measure.health import LoopHealth
from benchy.measure.unavailable import Unavailable
from benchy.measure.window_formulas import LoopSamples

INTERVAL_S = 0.005


class LoopMonitor:
    """`async with LoopMonitor() as mon:` … then `mon.figures(in_flight)`."""

    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        # Per sample: wake time (perf_counter), lag, and the CPU and wall time since the last one.
        self._woke: list[float] = []
        self._lag: list[float] = []
        self._cpu: list[float] = []
        self._wall: list[float] = []
        self._task: asyncio.Task[Any] | None = None

    async def __aenter__(self) -> LoopMonitor:
        self._task = asyncio.create_task(self._sample())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    async def _sample(self) -> None:
        cpu, wall = time.process_time(), time.perf_counter()
        while True:
            due = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            now, now_cpu = time.perf_counter(), time.process_time()
            self._woke.append(now)
            self._lag.append(max(0.0, now - due))
            self._cpu.append(now_cpu - cpu)
            self._wall.append(now - wall)
            cpu, wall = now_cpu, now

    def figures(self, in_flight: list[tuple[float, float]]) -> LoopHealth:
        """Lag (ms) and CPU share over the samples taken while some (start, end) interval of
        `in_flight` was open; cpu_share 1.0 = one core saturated."""
        woke = np.asarray(self._woke)
        mask = _overlapping(woke - np.asarray(self._lag) - self.interval_s, woke, in_flight)
        lags_ms = np.asarray(self._lag)[mask] * 1000.0
        cpu_s = float(np.asarray(self._cpu)[mask].sum()) if lags_ms.size else 0.0
        wall_s = float(np.asarray(self._wall)[mask].sum()) if lags_ms.size else 0.0
        values = registry.compute(registry.LOOP, LoopSamples(lags_ms, cpu_s, wall_s), {})

        def shown(name: str) -> float | None:
            value = values[name]
            return None if isinstance(value, Unavailable) else value

        return LoopHealth(
            loop_lag_ms_max=shown("loop_lag_ms_max"),
            loop_lag_ms_p99=shown("loop_lag_ms_p99"),
            loop_lag_ms_p95=shown("loop_lag_ms_p95"),
            stalled_share=shown("stalled_share"),
            loop_lag_ms_median=shown("loop_lag_ms_median"),
            lag_samples=int(lags_ms.size),
            cpu_s=round(cpu_s, 4),
            wall_s=round(wall_s, 4),
            cpu_share=shown("cpu_share"),
        )


def _overlapping(begins: np.ndarray, ends: np.ndarray, intervals: list[tuple[float, float]]) -> np.ndarray:
    """Which spans [begins, ends] overlap the union of the intervals."""
    mask = np.zeros(begins.shape, dtype=bool)
    for start, end in _merged(intervals):
        mask |= (ends >= start) & (begins <= end)
    return mask


def _merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out
