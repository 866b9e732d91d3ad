"""Where a case's shares run besides the run's own process: the pool (worker processes or Ray
actors), started once for the run, and a case split over it.

Why apart from run.py: choosing and driving a pool is the load's (load/workers.py,
load/cluster.py); the run only asks for one and hands it each case.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterator
from typing import Protocol

from benchy.client.errors import ServerError
from benchy.client.settings import ClientSettings
from benchy.load.plan import CasePlan, LoadSettings, OnSent
from benchy.load.prompts import Calibration, PromptError
from benchy.load.workers import ProcessPool, WorkerError, case_workers
from benchy.measure.health import ClientHealth
from benchy.records import RequestRecord
from benchy.workloads.case import Case


class CasePool(Protocol):
    """Where a case's shares run besides this process: worker processes (load/workers.py's
    ProcessPool) or Ray actors (load/cluster.py's RayPool); each returns the case's client figures."""

    def workers_for(self, case: Case, load: LoadSettings) -> int: ...

    async def run_case(
        self,
        plan: CasePlan,
        k: int,
        client_settings: ClientSettings,
        calibration: Calibration,
        nonce: bool,
        on_record: Callable[[RequestRecord], None],
        stop: asyncio.Event,
        on_start: Callable[[], Awaitable[float]] | None = None,
        on_sent: OnSent | None = None,
    ) -> ClientHealth: ...

    def close(self) -> None: ...


def start_pool(load: LoadSettings, cases: list[Case]) -> CasePool | None:
    """Ray actors (--ray), or the local processes the busiest case needs; None when every case
    runs in this process."""
    if load.ray is not None:
        from benchy.load import cluster

        return cluster.RayPool.connect(load.ray, load.ray_workers_per_node)
    n = max((case_workers(c, load.workers, load.max_inflight) for c in cases if not c.workload), default=1)
    return ProcessPool(n).start() if n > 1 else None


@contextlib.contextmanager
def worker_failures() -> Iterator[None]:
    """Around a case split over a pool: a worker's failure as the run reports it (a prompt the
    worker could not build is the user's PromptError; anything else, a ServerError)."""
    try:
        yield
    except WorkerError as exc:
        if exc.kind == "PromptError":
            raise PromptError(str(exc)) from None
        raise ServerError(f"a worker failed: {exc.kind}: {exc}") from None
