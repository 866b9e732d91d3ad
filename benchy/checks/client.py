"""benchy's own health while requests were in flight: its event loop, CPU and sends against
their schedule (client_overloaded). A case that drove the host's client ceiling is
client_bound.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchy.checks.check import Check
from benchy.checks.registry import (
    WARNING,
    Code,
    Warning_,
)
from benchy.measure.health import ClientHealth, LoopHealth, WorkerHealth
from benchy.results.types import CaseResult, CheckWarning, MetricSummary
from benchy.results.verdicts.details import (
    ClientOverloaded,
)
from benchy.results.view import RunView

# benchy's event loop (monitor.py) counts as overloaded when, with requests in flight, one
# sample in 20 woke more than 20 ms late (p95, so that one hiccup of the OS is not enough: a
# timestamp that late distorts any inter-token gap), it spent over 5% of the time in stalls
# (long blocks are few samples but much time), or its CPU time passed 90% of the wall time
# (one core saturated); or, in an open loop without --max-inflight (whose queue delays sends
# on purpose), one send in ten left more than 20 ms after its scheduled time.
LAG_P95_LIMIT_MS = 20.0
STALLED_SHARE_LIMIT = 0.05
SEND_LAG_P90_LIMIT_S = 0.02
CPU_SHARE_LIMIT = 0.9
MIN_LAG_SAMPLES = 10


@dataclass(frozen=True)
class Behind:
    """One event loop that fell behind, by its own figures: the case's (worker None) or a
    worker's (named when there are several); its lag p95 past the limit (its p99 standing in
    where merged results carry none), a share of the time stalled, a busy core."""

    loop: LoopHealth
    worker: WorkerHealth | None
    lag_ms: float | None
    stalled: bool
    busy: bool


@dataclass(frozen=True)
class Overloaded:
    """Each loop that fell behind, in order, then an open loop's sends behind their schedule
    (case.send_lag, if late); never empty."""

    behind: tuple[Behind, ...]
    late: MetricSummary | None


class ClientOverloadedCheck(Check[Overloaded]):
    code = Code.CLIENT_OVERLOADED

    def detect(self, case: CaseResult, run: RunView) -> Overloaded | None:
        behind = _overloaded_workers(case.client or ClientHealth())
        late = _late_sends(case, run)
        return Overloaded(behind, late) if behind or late else None

    def words(self, case: CaseResult, found: Overloaded) -> CheckWarning:
        reasons = [said for loop in found.behind for said in _behind_text(loop)]
        if found.late is not None:
            reasons.append(_late_text(found.late))
        return Warning_(
            Code.CLIENT_OVERLOADED,
            WARNING,
            case.label,
            f"benchy itself fell behind while requests were in flight ({'; '.join(reasons)}): "
            "chunks were timestamped late, so TTFT, inter-token latency and decode rate "
            "include client delay.",
            _overloaded_hint(case),
            details=ClientOverloaded(client=case.client),
        )


client_overloaded = ClientOverloadedCheck()  # registered by this name (checks/warnings.py)


def _overloaded_hint(case: CaseResult) -> str:
    """At one request in flight the load is not what overloads benchy: the machine is."""
    elsewhere = "run benchy on an idle machine (not beside the server)"
    if case.kind == "trace":
        return f"Replay the trace slower (--speed below 1), {elsewhere}, or split the load over --workers."
    if case.rate is not None:
        return f"Lower --rate, {elsewhere}, or split the load over several benchy processes (--workers)."
    if (case.concurrency or 1) > 1:
        return f"Lower --concurrency, {elsewhere}, or split the load over several benchy processes (--workers)."
    return (
        "At one request in flight the load is light: the machine benchy runs on is busy. "
        f"{elsewhere[0].upper()}{elsewhere[1:]}, or give it a core of its own."
    )


def _overloaded_workers(client: ClientHealth) -> tuple[Behind, ...]:
    """Each worker judged on its own figures (workers.py, cluster.py); one that fell behind is
    named with its node, so the host to relieve is known."""
    per_worker: list[LoopHealth] = list(client.per_worker) or [client]
    found = []
    for loop in per_worker:
        named = loop if isinstance(loop, WorkerHealth) and len(per_worker) > 1 else None
        # Results merged from several worker processes may carry no p95: their worst p99 stands in.
        p95 = loop.loop_lag_ms_p95 if loop.loop_lag_ms_p95 is not None else loop.loop_lag_ms_p99
        lagged = (loop.lag_samples or 0) >= MIN_LAG_SAMPLES and p95 is not None and p95 > LAG_P95_LIMIT_MS
        stalled = (loop.stalled_share or 0) > STALLED_SHARE_LIMIT
        busy = (loop.cpu_share or 0) > CPU_SHARE_LIMIT
        if lagged or stalled or busy:
            found.append(Behind(loop, named, p95 if lagged else None, stalled, busy))
    return tuple(found)


def _behind_text(behind: Behind) -> list[str]:
    """A named worker's signs as one reason ("worker W on NODE: …"); the case's, one each."""
    loop, most = behind.loop, behind.loop.loop_lag_ms_max or 0.0
    said = []
    if behind.lag_ms is not None:
        said.append(f"event-loop lag p95 {behind.lag_ms:.0f} ms > {LAG_P95_LIMIT_MS:.0f} ms, max {most:.0f} ms")
    if behind.stalled:
        said.append(f"the event loop was stalled {loop.stalled_share:.0%} of the time (stalls up to {most:.0f} ms)")
    if behind.busy:
        said.append(f"benchy used {loop.cpu_share:.0%} of a CPU core")
    if behind.worker is None:
        return said
    return [f"worker {behind.worker.worker} on {behind.worker.node}: {', '.join(said)}"]


def _late_sends(case: CaseResult, run: RunView) -> MetricSummary | None:
    lag = case.send_lag
    capped = run.setup.load is not None and run.setup.load.max_inflight is not None
    if lag and lag.p90 is not None and not capped and lag.p90 > SEND_LAG_P90_LIMIT_S:
        return lag
    return None


def _late_text(late: MetricSummary) -> str:
    return (
        f"sends fell behind their schedule (median {late.median * 1000:.0f} ms, "
        f"p90 {(late.p90 or 0) * 1000:.0f} ms late), so the offered rate was lower than asked"
    )
