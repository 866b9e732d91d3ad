"""`--ray [ADDRESS]`: every case's shares on Ray actors, one or more per node, merged into one result.

One client host runs out before a large deployment does: past some load its cores (and its
event loops) delay the very timestamps benchy reports. Ray spreads the load over the hosts
of a cluster without a protocol of benchy's own: each actor runs the same worker side as a
local `--workers` process (worker_side.Share: its own event loop and Client), and this process
(the driver) merges their records through the same code (workers.run_split): one clock (a
round-trip handshake per actor and case, the fastest of several kept; an actor on another
kernel gets its records moved onto the driver's clock and the uncertainty recorded), one
shared start, records back in batches (one item of a Ray streaming generator per batch,
never per token), and `worker_lost` records for what an actor had in flight when it (or its
node) died.

Ray is an optional extra (`pip install 'benchy[ray]'`), imported here only when --ray is given.
ADDRESS: none or "auto" = the cluster this machine belongs to (RAY_ADDRESS, or one started
with `ray start`), else a new local instance; "local" = always a new local instance (small:
no dashboard, an 80 MB object store); anything else is handed to `ray.init(address=...)`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from benchy.load import worker_side, workers
from benchy.load.handoff import Batch
from benchy.measure.health import ClientHealth

if TYPE_CHECKING:
    from benchy.client.settings import ClientSettings
    from benchy.load.plan import CasePlan, LoadSettings, OnSent
    from benchy.load.prompts import Calibration
    from benchy.workloads.case import Case

RAY_MISSING = "--ray needs Ray, an optional extra: pip install 'benchy[ray]'"
START_LEAD_S = 0.25  # an actor call takes milliseconds: the shared start lies this far ahead
READY_TIMEOUT_S = 120.0  # actors must answer their first clock reading within this
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # a new local instance: batches are small (Ray's minimum is 75 MB)
NAMESPACE = "benchy"


class ClusterError(Exception):
    """Ray cannot be used as asked; one line."""


def ray_installed() -> bool:
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):  # a broken or blocked install counts as none
        return False


class ShareActor:
    """One benchy worker on a Ray node: an async actor, so every method runs on its one event
    loop, beside the share it is sending."""

    def __init__(self) -> None:
        from benchy.client.client import Client

        # No tokenizer: the prompts a worker builds are filler words, counted without it
        # (tokenizer.count); the parent counts the streamed text.
        self._clients = worker_side._Clients(Client)
        self._share: worker_side.Share | None = None

    async def clock(self) -> dict[str, Any]:
        import ray

        reading = worker_side.clock_reading()
        reading["node"] = f"{reading['node']} (Ray node {ray.get_runtime_context().get_node_id()[:8]})"
        return reading

    async def run(
        self, plan: CasePlan, settings: ClientSettings, calibration: Calibration, nonce: bool
    ) -> AsyncIterator[Batch]:
        """A streaming generator: the share's batches as they come."""
        self._share = worker_side.Share(await self._clients.get(settings), plan, calibration, nonce)
        async for batch in self._share.batches():
            yield batch

    async def go(self, start_s: float) -> None:
        if self._share is not None:
            self._share.go(start_s)

    async def stop(self) -> None:
        if self._share is not None:
            self._share.stop.set()

    async def pid(self) -> int:
        return os.getpid()


class RayPool:
    """The actors of a run, created once and reused by every case; an actor that died is
    left out of later cases."""

    start_lead_s = START_LEAD_S

    def __init__(self, ray: Any, actors: list[Any], nodes: int, address: str) -> None:
        self._ray = ray
        self._live = actors
        self.nodes = nodes
        self.address = address
        self._case: list[Any] = []
        self._settings: ClientSettings | None = None
        self._pumps: set[asyncio.Task[Any]] = set()

    @classmethod
    def connect(cls, address: str, per_node: int | None) -> RayPool:
        ray = _import_ray()
        _init(ray, address, per_node or 1)
        nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
        if not nodes:
            raise ClusterError("the Ray cluster has no live node with a CPU to run benchy on")
        actors = _place(ray, nodes, per_node or 1)
        return cls(ray, actors, len(nodes), address)

    @property
    def n(self) -> int:
        return len(self._live)

    def workers_for(self, case: Case, load: LoadSettings) -> int:
        return workers.case_workers(case, self.n, load.max_inflight)  # 1 … n

    async def run_case(
        self,
        plan: CasePlan,
        k: int,
        client_settings: ClientSettings,
        calibration: Calibration,
        nonce: bool,
        on_record: worker_side.OnRecord,
        stop: asyncio.Event,
        on_start: worker_side.OnStart | None = None,
        on_sent: OnSent | None = None,
    ) -> ClientHealth:
        if not self._live:
            raise workers.WorkerError("ClusterError", "every Ray actor of this run has been lost")
        self._case, self._settings = self._live[:k], client_settings
        try:  # the first case waits here for the actors to start
            await asyncio.wait_for(asyncio.gather(*(a.clock.remote() for a in self._case)), READY_TIMEOUT_S)
        except asyncio.TimeoutError:
            raise workers.WorkerError("ClusterError", f"no Ray actor answered within {READY_TIMEOUT_S:g} s") from None
        return await workers.run_split(
            self, workers.split(plan, k), calibration, nonce, on_record, stop, on_start, on_sent
        )

    async def read_clock(self, w: int) -> dict[str, Any]:
        reading: dict[str, Any] = await self._case[w].clock.remote()
        return reading

    def begin(self, plans: list[CasePlan], calibration: Calibration, nonce: bool, events: asyncio.Queue[Any]) -> None:
        for w, plan in enumerate(plans):
            stream = self._case[w].run.options(num_returns="streaming").remote(plan, self._settings, calibration, nonce)
            pump = asyncio.ensure_future(self._pump(w, stream, events))
            self._pumps.add(pump)
            pump.add_done_callback(self._pumps.discard)

    async def _pump(self, w: int, stream: AsyncIterator[Any], events: asyncio.Queue[Any]) -> None:
        """Actor w's batches into the events queue; its death as a "lost" event."""
        actor_died = self._ray.exceptions.RayActorError
        try:
            async for ref in stream:
                events.put_nowait((w, "batch", await ref))
        except actor_died as exc:
            self._forget(self._case[w])
            events.put_nowait((w, "lost", f"Ray actor {w} died: {_first_line(exc)}"))
        except self._ray.exceptions.RayError as exc:  # the share itself failed in a way Ray reports
            events.put_nowait((w, "batch", Batch(error=(type(exc).__name__, _first_line(exc)))))

    def _forget(self, actor: Any) -> None:
        if actor in self._live:
            self._live.remove(actor)

    def go(self, w: int, start_s: float) -> None:
        self._case[w].go.remote(start_s)

    def stop(self, w: int) -> None:
        self._case[w].stop.remote()

    def close(self) -> None:
        for pump in self._pumps:
            pump.cancel()
        for actor in self._live:
            self._ray.kill(actor)
        self._ray.shutdown()


def _import_ray() -> Any:
    if not ray_installed():
        raise ClusterError(RAY_MISSING)
    import ray

    return ray


def _init(ray: Any, address: str, per_node: int) -> None:
    quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
    local = {"num_cpus": max(per_node, workers._usable_cores()), "object_store_memory": OBJECT_STORE_BYTES}
    try:
        if address == "local":
            ray.init(address="local", namespace=NAMESPACE, **quiet, **local)
        elif address in ("", "auto"):
            try:
                ray.init(address="auto", namespace=NAMESPACE, **quiet)
            except ConnectionError:
                ray.init(address="local", namespace=NAMESPACE, **quiet, **local)
        else:
            ray.init(address=address, namespace=NAMESPACE, **quiet)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        raise ClusterError(f"cannot reach the Ray cluster at {address!r}: {_first_line(exc)}") from None


def _place(ray: Any, nodes: list[dict[str, Any]], per_node: int) -> list[Any]:
    """per_node actors pinned to each node (a CPU each), created node by node in turn, so that
    a case on k < all actors still spreads over as many nodes as it can."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    short = [n for n in nodes if n["Resources"]["CPU"] < per_node]
    if short:
        cpus = int(short[0]["Resources"]["CPU"])
        raise ClusterError(
            f"--ray-workers-per-node {per_node}: node {short[0]['NodeManagerAddress']} has {cpus} CPU(s) for Ray"
        )
    remote = ray.remote(num_cpus=1, max_restarts=0)(ShareActor)
    return [
        remote.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()
        for _ in range(per_node)
        for node in nodes
    ]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
