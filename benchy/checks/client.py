"""benchy's own health while requests were in flight: its event loop, CPU and sends against
their schedule (client_overloaded). A case that drove the host's client ceiling is
client_bound.py's.
"""

from __future__ import annotations

from collections.abc import Iterable

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


def client_overloaded(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    client = case.client or ClientHealth()
    reasons = _overloaded_workers(client) + _late_sends(case, run)
    if reasons:
        yield Warning_(
            Code.CLIENT_OVERLOADED,
            WARNING,
            case.label,
            f"benchy itself fell behind while requests were in flight ({'; '.join(reasons)}): "
            "chunks were timestamped late, so TTFT, inter-token latency and decode rate "
            "include client delay.",
            _overloaded_hint(case),
            details=ClientOverloaded(client=case.client),
        )


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


def _overloaded_workers(client: ClientHealth) -> list[str]:
    """Each worker judged on its own figures (workers.py, cluster.py); one that fell behind is
    named with its node, so the host to relieve is known."""
    per_worker: list[LoopHealth] = list(client.per_worker) or [client]
    found = []
    for entry in per_worker:
        reasons = _overload_reasons(entry)
        if reasons and isinstance(entry, WorkerHealth) and len(per_worker) > 1:
            found.append(f"worker {entry.worker} on {entry.node}: {', '.join(reasons)}")
        else:
            found += reasons
    return found


def _overload_reasons(loop: LoopHealth) -> list[str]:
    reasons = []
    # Results merged from several worker processes may carry no p95: their worst p99 stands in.
    p95 = loop.loop_lag_ms_p95 if loop.loop_lag_ms_p95 is not None else loop.loop_lag_ms_p99
    most = loop.loop_lag_ms_max or 0.0
    if (loop.lag_samples or 0) >= MIN_LAG_SAMPLES and p95 is not None and p95 > LAG_P95_LIMIT_MS:
        reasons.append(f"event-loop lag p95 {p95:.0f} ms > {LAG_P95_LIMIT_MS:.0f} ms, max {most:.0f} ms")
    if (loop.stalled_share or 0) > STALLED_SHARE_LIMIT:
        reasons.append(f"the event loop was stalled {loop.stalled_share:.0%} of the time (stalls up to {most:.0f} ms)")
    if (loop.cpu_share or 0) > CPU_SHARE_LIMIT:
        reasons.append(f"benchy used {loop.cpu_share:.0%} of a CPU core")
    return reasons


def _late_sends(case: CaseResult, run: RunView) -> list[str]:
    lag = case.send_lag
    capped = run.setup.load is not None and run.setup.load.max_inflight is not None
    if lag and lag.p90 is not None and not capped and lag.p90 > SEND_LAG_P90_LIMIT_S:
        return [
            f"sends fell behind their schedule (median {lag.median * 1000:.0f} ms, "
            f"p90 {lag.p90 * 1000:.0f} ms late), so the offered rate was lower than asked"
        ]
    return []
