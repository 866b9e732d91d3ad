"""prefill_holds_queueing: TTFT under load holds a wait for the server. Where the analysis
judged it (results/findings.py Queued: the case's Queueing, prefill t/s withheld) the finding
words its own warning; files before 1.9 carry no judgment, and are read here for the load
against the server's slots or a TTFT that grows with concurrency (a cause inferred, so the
prefill rate is qualified, not withheld). queue_dominates_ttft: the server's own queue time
(its /metrics) past half its TTFT, detected by results/verdicts/queueing.queue_figures beside
the trap's thresholds, worded here.
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import WARNING, Code, Warning_
from benchy.results import findings
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.verdicts.details import PrefillHoldsQueueing
from benchy.results.verdicts.queueing import (
    QUEUE_MIN_S,
    QUEUE_SHARE,
    QUEUE_TTFT_GROWTH,
    QUEUE_TTFT_MIN_S,
    queue_figures,
    server_slots,
    slots_text,
)
from benchy.results.view import RunView


def prefill_holds_queueing(run: RunView) -> Iterable[CheckWarning]:
    """Each case the analysis found queued, in the finding's words; then, in files without
    that judgment, TTFT growing with concurrency or more requests in flight than slots."""
    for judged in run.cases:  # closed and open loops, workloads: results/build.py judged them
        if judged.queueing is not None:
            found = findings.queued_by(judged.queueing).warning_of(judged, run)
            if found is not None:
                yield found
    cases = [c for c in run.cases if c.rate is None and c.concurrency is not None and c.figure("ttft_s")]
    slots = server_slots(run)
    for case in cases:
        if case.queueing is not None:
            continue
        if (case.concurrency or 1) <= 1 or case.facts().pair_ttft:
            continue  # ttft_not_prefill speaks where the server reports its own prompt time
        base = next((c for c in cases if c.concurrency == 1 and _same_shape(c, case)), None)
        why = _queue_evidence(case, base, slots)
        if why:
            yield Warning_(
                Code.PREFILL_HOLDS_QUEUEING,
                WARNING,
                case.label,
                f"{why}: requests wait for a free slot, and that wait is in TTFT, so prefill t/s "
                "here holds queue time; it is not the server's prefill speed.",
                findings.QUEUEING_HINT,
                withheld=(),  # qualified: a cause inferred from slots, not measured
                details=PrefillHoldsQueueing(concurrency=case.concurrency, slots=slots),
            )


def _same_shape(a: CaseResult, b: CaseResult) -> bool:
    return (a.pp, a.tg, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.tg, b.depth, b.depth_mode, b.endpoint)


def _queue_evidence(case: CaseResult, base: CaseResult | None, slots: int | None) -> str | None:
    if slots is not None and (case.concurrency or 1) > slots:
        return f"{case.concurrency} requests in flight on a server with {slots_text(slots)}"
    if base is None:
        return None
    ttft, ttft_1 = case.figure("ttft_s"), base.figure("ttft_s")
    if ttft is None or ttft_1 is None:
        return None
    if ttft.median > QUEUE_TTFT_GROWTH * ttft_1.median and ttft.median - ttft_1.median > QUEUE_TTFT_MIN_S:
        return (
            f"TTFT grows with concurrency ({ttft_1.median * 1000:,.0f} ms at c1, "
            f"{ttft.median * 1000:,.0f} ms at c{case.concurrency})"
        )
    return None


def load_text(case: CaseResult) -> str:
    """The case's load in words: a trace replay has arrivals, not a concurrency."""
    if case.kind == "trace":
        return "the trace's arrival times"
    if case.rate is not None:
        return f"{case.rate:g} requests/s"
    return f"concurrency {case.concurrency}"


def queue_hint(case: CaseResult) -> str:
    """What lowers the queue for this case's kind of load: the flag that sets it."""
    if case.kind == "trace":
        way = "replay the trace slower (--speed below 1) or cap it (--max-inflight)"
    elif case.rate is not None:
        way = "lower --rate below what the server sustains"
    else:
        way = "lower the concurrency to the requests the server runs at once"
    return f"To measure prefill, {way}; or read this case as a capacity figure."


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def _num(value: float | int | None) -> float:
    """A figure its check has set (a warning's figures are optional: files may lack any)."""
    assert value is not None
    return float(value)


def queue_dominates_ttft(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    found = queue_figures(case)
    if found is None:
        return
    yield Warning_(
        Code.QUEUE_DOMINATES_TTFT,
        WARNING,
        case.label,
        f"At {load_text(case)}, requests waited {_ms(_num(found.queue_s))} on average in the server's "
        f"queue, {_num(found.queue_share):.0%} of its {_ms(_num(found.ttft_s))} TTFT: the server is "
        "saturated, and TTFT and prefill t/s hold queue time.",
        queue_hint(case),
        details=found,
        evidence=(
            Evidence("queue_share", found.queue_share, QUEUE_SHARE, "fraction"),
            Evidence("queue_s", found.queue_s, QUEUE_MIN_S, "s"),
        ),
    )
