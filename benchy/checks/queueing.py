"""prefill_holds_queueing: TTFT under load holds a wait for the server. Where the analysis
judged it (results/findings.py Queued: the case's Queueing, prefill t/s withheld) the finding
finds and words its own warning; files before 1.9 carry no judgment, and are read here for the load
against the server's slots or a TTFT that grows with concurrency (a cause inferred, so the
prefill rate is qualified, not withheld). queue_dominates_ttft: the server's own queue time
(its /metrics) past half its TTFT, detected by results/verdicts/queueing.queue_figures beside
the trap's thresholds, worded here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import Code, Warning_
from benchy.results import findings
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.verdicts.details import PrefillHoldsQueueing as QueueingFigures
from benchy.results.verdicts.details import QueueDominatesTtft as QueueFigures
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


@dataclass(frozen=True)
class OverSlots:
    """More requests in flight than the server has slots: they queue (here and ttft_not_prefill's cause)."""

    in_flight: int
    slots: int


@dataclass(frozen=True)
class TtftGrew:
    """TTFT (medians) at concurrency 1 and under the case's load, past QUEUE_TTFT_GROWTH."""

    c1_s: float
    loaded_s: float


@dataclass(frozen=True)
class Inferred:
    """A case of a file without the analysis's queueing judgment (before 1.9) whose load or TTFT
    growth says its requests queued: a cause inferred, so the prefill rate is qualified."""

    case: str
    concurrency: int | None
    slots: int | None
    why: OverSlots | TtftGrew


class PrefillHoldsQueueing(RunLevelCheck[findings.Waited | Inferred]):
    """Each case the analysis found queued, as the finding that judged it finds and words it
    (results/findings.py Queued); then, in files without that judgment, TTFT growing with
    concurrency or more requests in flight than slots."""

    code = Code.PREFILL_HOLDS_QUEUEING

    def detect(self, run: RunView) -> Sequence[findings.Waited | Inferred]:
        found: list[findings.Waited | Inferred] = []
        for judged in run.cases:  # closed and open loops, workloads: results/build.py judged them
            if judged.queueing is not None:
                waited = findings.queued_by(judged.queueing).found_in(judged, run)
                if waited is not None:
                    found.append(waited)
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
                found.append(Inferred(case.label, case.concurrency, slots, why))
        return found

    def words(self, run: RunView, found: findings.Waited | Inferred) -> CheckWarning:
        if isinstance(found, findings.Waited):
            return findings.queued_by(found).words(found)
        return Warning_(
            Code.PREFILL_HOLDS_QUEUEING,
            self.severity,
            found.case,
            f"{_evidence_words(found)}: requests wait for a free slot, and that wait is in TTFT, so prefill t/s "
            "here holds queue time; it is not the server's prefill speed.",
            findings.QUEUEING_HINT,
            withheld=(),  # qualified: a cause inferred from slots, not measured
            details=QueueingFigures(concurrency=found.concurrency, slots=found.slots),
        )


prefill_holds_queueing = PrefillHoldsQueueing()  # registered by this name (checks/warnings.py)


def _same_shape(a: CaseResult, b: CaseResult) -> bool:
    return (a.pp, a.tg, a.depth, a.depth_mode, a.endpoint) == (b.pp, b.tg, b.depth, b.depth_mode, b.endpoint)


def _queue_evidence(case: CaseResult, base: CaseResult | None, slots: int | None) -> OverSlots | TtftGrew | None:
    in_flight = case.concurrency or 1
    if slots is not None and in_flight > slots:
        return OverSlots(in_flight, slots)
    if base is None:
        return None
    ttft, ttft_1 = case.figure("ttft_s"), base.figure("ttft_s")
    if ttft is None or ttft_1 is None:
        return None
    if ttft.median > QUEUE_TTFT_GROWTH * ttft_1.median and ttft.median - ttft_1.median > QUEUE_TTFT_MIN_S:
        return TtftGrew(ttft_1.median, ttft.median)
    return None


def _evidence_words(found: Inferred) -> str:
    if isinstance(found.why, OverSlots):
        return f"{found.why.in_flight} requests in flight on a server with {slots_text(found.why.slots)}"
    return (
        f"TTFT grows with concurrency ({found.why.c1_s * 1000:,.0f} ms at c1, "
        f"{found.why.loaded_s * 1000:,.0f} ms at c{found.concurrency})"
    )


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


class QueueDominatesTtft(Check[QueueFigures]):
    """The server's own queue time (its /metrics) past half its TTFT: its figures, as
    results/verdicts/queueing.queue_figures finds them, are what this check finds."""

    code = Code.QUEUE_DOMINATES_TTFT

    def detect(self, case: CaseResult, run: RunView) -> QueueFigures | None:
        return queue_figures(case)

    def words(self, case: CaseResult, found: QueueFigures) -> CheckWarning:
        return Warning_(
            Code.QUEUE_DOMINATES_TTFT,
            self.severity,
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


queue_dominates_ttft = QueueDominatesTtft()  # registered by checks/server.py's CASE_CHECKS
