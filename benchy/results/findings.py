"""The traps the analysis decides before any result exists: one class each, in one registry.

Why: a trap's detection, the metrics it withholds and its words lived apart (build.py decided,
a case's `withhold` wrote, checks/ worded), joined only by an order in comments. Each class here
owns its detection (a pure function of the cases' figures), names its warning code, and takes
the metrics it withholds from that code's one entry (verdicts/codes.py VERDICTS), where its
typed details and severity are too; checks/ words the warning from the result (its renderer).
`DECIDED` is the order they are decided in: each reads the cases as the ones before left them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from benchy.measure import classify, metrics
from benchy.measure.unavailable import BUFFERED, Unavailable
from benchy.results import latency
from benchy.results.figures import CaseFigures, CaseView
from benchy.results.types import Queueing
from benchy.results.verdicts import queueing
from benchy.results.verdicts.codes import VERDICTS, Code
from benchy.results.verdicts.queueing import QueueVerdict


@dataclass(frozen=True)
class Judgment:
    """A finding's verdict on one case: why its metrics are withheld (None: kept), and the
    figures it records in the case (a queueing judgment)."""

    why: Unavailable | None
    queueing: Queueing | None = None


@dataclass(frozen=True)
class Decision:
    """A finding's verdicts by case label, and what it found across the run."""

    by_case: Mapping[str, Judgment]
    fixed_latency: tuple[latency.Found, ...] = field(default=())  # FixedLatency's, for the checks to word


class Finding(ABC):
    """One trap: its code, its detection, and (by the code) the metrics it withholds."""

    code: ClassVar[Code]

    @property
    def withholds(self) -> tuple[str, ...]:
        return VERDICTS[self.code].withholds

    @abstractmethod
    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        """The verdicts on `cases` (pure: the figures are read, never written)."""

    def judged(self, cases: Sequence[CaseFigures], decision: Decision) -> list[CaseFigures]:
        """`cases` under the decision: new figures where it judged, the same ones elsewhere."""
        return [
            _judged(c, decision.by_case[c.label], self.withholds) if c.label in decision.by_case else c for c in cases
        ]


def _judged(case: CaseFigures, judgment: Judgment, withholds: tuple[str, ...]) -> CaseFigures:
    verdicts = case.verdicts
    if judgment.queueing is not None:
        verdicts = replace(verdicts, queueing=judgment.queueing)
    if judgment.why is not None:
        verdicts = verdicts.withholding(withholds, judgment.why)
    return case.judged(verdicts)


def _queue_judgments(found: Mapping[str, QueueVerdict | None]) -> dict[str, Judgment]:
    return {label: Judgment(v.why, v.queueing) for label, v in found.items() if v is not None}


class QueuedAlone(Finding):
    """A loaded case's TTFT past the same prompt sent alone before it (load/alone.py): the
    requests waited, and a prefill rate from TTFT would count the wait."""

    code = Code.PREFILL_HOLDS_QUEUEING

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        found = {c.label: queueing.judge_alone(c, c.alone_ttft_s, c.alone_points) for c in cases}
        return Decision(_queue_judgments(found))


class BufferedTrend(Finding):
    """Single-stream cases at one prompt whose TTFT grows with the output length: the stream
    was buffered (a proxy, a server that holds its events), so its timings are not the server's."""

    code = Code.SSE_BUFFERING

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        return Decision({label: Judgment(why) for label, why in buffered_trend(cases).items()})


def buffered_trend(cases: Sequence[CaseView]) -> dict[str, Unavailable]:
    """Single-stream cases at one prompt whose TTFT grows with the output length (metrics.
    buffered_trend), unless usage shows one token per event: why, by label."""
    groups: dict[tuple[Any, ...], list[CaseView]] = {}
    for case in cases:
        if case.concurrency == 1 and case.summary.get("ttft_s") and case.summary.get("e2e_s"):
            groups.setdefault((case.pp, case.depth, case.depth_mode, case.endpoint), []).append(case)
    found: dict[str, Unavailable] = {}
    for group in groups.values():
        short, long = min(group, key=lambda c: c.tg), max(group, key=lambda c: c.tg)
        if short.tg == long.tg or (_streams_token_by_token(short) and _streams_token_by_token(long)):
            continue
        why = metrics.buffered_trend(_trend_point(short), _trend_point(long))
        if why is not None:
            found |= dict.fromkeys((case.label for case in group), why)
    return found


def _trend_point(case: CaseView) -> tuple[int, float, float]:
    return case.tg, case.summary["ttft_s"].median, case.summary["e2e_s"].median  # type: ignore[union-attr]


def _streams_token_by_token(case: CaseView) -> bool:
    """The server's own usage shows about one token per event: direct evidence of a live
    stream, which outweighs a TTFT trend (on a fast small model, load noise in TTFT can
    rival the whole decode time)."""
    facts = case.facts()
    per_event = case.median("tokens_per_event")
    return (
        bool(facts.n_ok)
        and facts.n_usage_reported == facts.n_ok  # every one carried usage
        and per_event is not None
        and per_event <= classify.LIVE_STREAM_TOKENS_PER_EVENT
    )


class QueuedAgainstConcurrency1(Finding):
    """A loaded sweep case without alone requests, against the run's concurrency-1 case of the
    same prompt (no queueing is judged on TTFTs a trend withheld)."""

    code = Code.PREFILL_HOLDS_QUEUEING

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        return Decision(_queue_judgments(queueing.judge_against_concurrency_1(cases)))


class FixedLatency(Finding):
    """A fixed part of TTFT in front of the engine in a sweep family (results/latency.py); a
    case already queued keeps that cause."""

    code = Code.FIXED_LATENCY

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        found = latency.find(cases)
        by_case = {label: Judgment(why) for label, why in latency.withhold_fixed_latency(cases, found).items()}
        return Decision(by_case, found)


DECIDED: tuple[Finding, ...] = (QueuedAlone(), BufferedTrend(), QueuedAgainstConcurrency1(), FixedLatency())


class CaseFinding(ABC):
    """A trap decided on one case's own requests, before the case has figures: its verdict
    judges every row the case's statistics are then taken from (results/build.case_figures),
    so it cannot wait for the figures as DECIDED's findings do."""

    code: ClassVar[Code]

    @property
    def withholds(self) -> tuple[str, ...]:
        return VERDICTS[self.code].withholds

    @abstractmethod
    def decide(self, reasons: Sequence[str | None]) -> Unavailable | None:
        """The case's verdict from what each of its measured, successful requests showed
        (None: nothing), in order; None: no verdict."""


class BufferedStreams(CaseFinding):
    """A case whose requests' streams arrived buffered (each judged by its own reading:
    measure/classify.is_buffered), at least half of them: event times measure the buffer, not
    the model, so every request's stream timings are withheld. One request that a busy client
    read late looks lumpy; a buffer does not pick one request in two."""

    code = Code.SSE_BUFFERING

    def decide(self, reasons: Sequence[str | None]) -> Unavailable | None:
        shown = [r for r in reasons if r is not None]
        if not reasons or 2 * len(shown) < len(reasons):
            return None
        n, of = len(shown), len(reasons)
        return Unavailable(BUFFERED, shown[0] if n == of else f"{n} of {of} requests: {shown[0]}")


BUFFERED_STREAMS = BufferedStreams()  # the one CaseFinding: decided as each case's rows are read
