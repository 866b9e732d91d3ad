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
from benchy.results.types import CaseResult, CheckWarning
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
class LoopLag:
    """The event loop woke late: its p95 (or, merged without one, its p99) and its most, ms."""

    p95_ms: float
    most_ms: float


@dataclass(frozen=True)
class Stalled:
    """The share of the time the event loop was stalled, and its longest stall, ms."""

    share: float
    most_ms: float


@dataclass(frozen=True)
class CpuBusy:
    """The share of a CPU core benchy used."""

    share: float


Sign = LoopLag | Stalled | CpuBusy


@dataclass(frozen=True)
class Behind:
    """The signs of one loop that fell behind: the case's (worker None), or a worker's, named
    when there are several."""

    worker: WorkerHealth | None
    signs: tuple[Sign, ...]


@dataclass(frozen=True)
class LateSends:
    """An open loop's sends behind their schedule: median and p90, s."""

    median: float
    p90: float


@dataclass(frozen=True)
class Overloaded:
    """Each loop that fell behind, in order, then the late sends (if any); never empty."""

    behind: tuple[Behind, ...]
    late: LateSends | None


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
    for entry in per_worker:
        signs = _overload_signs(entry)
        if signs:
            named = entry if isinstance(entry, WorkerHealth) and len(per_worker) > 1 else None
            found.append(Behind(named, signs))
    return tuple(found)


def _overload_signs(loop: LoopHealth) -> tuple[Sign, ...]:
    signs: list[Sign] = []
    # Results merged from several worker processes may carry no p95: their worst p99 stands in.
    p95 = loop.loop_lag_ms_p95 if loop.loop_lag_ms_p95 is not None else loop.loop_lag_ms_p99
    most = loop.loop_lag_ms_max or 0.0
    if (loop.lag_samples or 0) >= MIN_LAG_SAMPLES and p95 is not None and p95 > LAG_P95_LIMIT_MS:
        signs.append(LoopLag(p95, most))
    if loop.stalled_share is not None and loop.stalled_share > STALLED_SHARE_LIMIT:
        signs.append(Stalled(loop.stalled_share, most))
    if loop.cpu_share is not None and loop.cpu_share > CPU_SHARE_LIMIT:
        signs.append(CpuBusy(loop.cpu_share))
    return tuple(signs)


def _behind_text(loop: Behind) -> list[str]:
    """A named worker's signs as one reason ("worker W on NODE: …"); the case's, one each."""
    said = [_sign_text(sign) for sign in loop.signs]
    if loop.worker is None:
        return said
    return [f"worker {loop.worker.worker} on {loop.worker.node}: {', '.join(said)}"]


def _sign_text(sign: Sign) -> str:
    if isinstance(sign, LoopLag):
        return f"event-loop lag p95 {sign.p95_ms:.0f} ms > {LAG_P95_LIMIT_MS:.0f} ms, max {sign.most_ms:.0f} ms"
    if isinstance(sign, Stalled):
        return f"the event loop was stalled {sign.share:.0%} of the time (stalls up to {sign.most_ms:.0f} ms)"
    return f"benchy used {sign.share:.0%} of a CPU core"


def _late_sends(case: CaseResult, run: RunView) -> LateSends | None:
    lag = case.send_lag
    capped = run.setup.load is not None and run.setup.load.max_inflight is not None
    if lag and lag.p90 is not None and not capped and lag.p90 > SEND_LAG_P90_LIMIT_S:
        return LateSends(lag.median, lag.p90)
    return None


def _late_text(late: LateSends) -> str:
    return (
        f"sends fell behind their schedule (median {late.median * 1000:.0f} ms, "
        f"p90 {late.p90 * 1000:.0f} ms late), so the offered rate was lower than asked"
    )
