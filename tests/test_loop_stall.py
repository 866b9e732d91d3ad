"""The loop monitor (load/monitor.py) counts a stall that ends a request: the request's end is
stamped in the same turn of the loop that the stall delayed, before the sampler wakes, so a
sample must count by its wait overlapping the request, not by its wake falling inside it."""

from __future__ import annotations

import asyncio
import time

from benchy.load.monitor import INTERVAL_S, LoopMonitor


def test_a_stall_that_ends_a_request_is_counted_for_it():
    async def stall_at_the_end() -> tuple[LoopMonitor, float, float, float]:
        async with LoopMonitor() as monitor:
            await asyncio.sleep(0.03)
            start = time.perf_counter()
            await asyncio.sleep(0.03)
            blocked = time.perf_counter()
            time.sleep(0.06)  # the body arrived meanwhile; it is read and stamped when the loop runs
            end = time.perf_counter()  # stamped before the sampler gets its turn
            await asyncio.sleep(0.1)
        return monitor, start, end, end - blocked

    monitor, start, end, stalled = asyncio.run(stall_at_the_end())
    figures = monitor.figures([(start, end)])
    assert (figures.loop_lag_ms_max or 0.0) / 1000 >= stalled - INTERVAL_S
