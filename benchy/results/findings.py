"""The traps the analysis decides before any result exists: one class each, in one registry.

Why: a trap's detection, the metrics it withholds and its words lived apart (build.py decided,
a case's `withhold` wrote, checks/ worded), joined only by an order in comments. Each class here
owns its detection (a pure function of the cases' figures), names its warning code, and takes
the metrics it withholds from that code's one entry (verdicts/codes.py VERDICTS), where its
typed details and severity are too. Its warning is found, then worded: `found_in` reads the
result it judged (pure) into a frozen record of what the words need, and `words` makes the
warning (message, hint) from that record alone; checks/ asks the finding for both and registers
the warning in its place. `DECIDED` is
the order they are decided in: each reads the cases as the ones before left them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from benchy.measure import classify, delivery, metrics
from benchy.measure.silence import Silence
from benchy.measure.unavailable import BUFFERED, BUFFERED_TREND, Unavailable
from benchy.results import latency
from benchy.results.figures import CaseFigures, CaseView
from benchy.results.stop import STOP_HINT, stop_cause, stop_holding
from benchy.results.types import CaseResult, CheckWarning, Evidence, Queueing
from benchy.results.verdicts import details, queueing
from benchy.results.verdicts.codes import VERDICTS, Code
from benchy.results.verdicts.make import warning
from benchy.results.verdicts.queueing import QueueVerdict
from benchy.results.view import RunView


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


class Trap(ABC):
    """What every finding has by its code: the metrics it withholds and its warning's severity
    (the code's one entry, verdicts/codes.py)."""

    code: ClassVar[Code]

    @property
    def withholds(self) -> tuple[str, ...]:
        return VERDICTS[self.code].withholds

    @property
    def severity(self) -> str:
        return self.code.rule.severity


class Finding(Trap):
    """One trap decided across the run's cases: its code, its detection, and (by the code) the
    metrics it withholds."""

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


QUEUEING_HINT = (
    "TTFT under load is what a user waits, queue included. For the server's prefill speed, "
    "measure at concurrency 1, or keep requests in flight at or below the server's slots "
    "(llama.cpp -np, vLLM --max-num-seqs, OLLAMA_NUM_PARALLEL)."
)
ON_A_LINE = "what each request's uncached tokens take alone (the line through a short and a long prompt sent alone)"


@dataclass(frozen=True)
class Waited:
    """A case whose loaded TTFT passed the same prompt with nothing else in flight (its
    Queueing, judged by `source`), with what its words name: the load, the server's slots, a
    stop of the server that held the requests, and the server's own prefill rate."""

    case: str
    source: str  # "alone", or the concurrency-1 case's label
    basis: str  # what was compared (queueing.BASIS_WORDS)
    alone_ttft_s: float  # median
    loaded_ttft_s: float  # median
    excess_s: float
    threshold_s: float | None
    kind: str
    concurrency: int | None
    rate: float | None
    on_a_line: bool  # judged against a line through a short and a long prompt alone (load/alone.py)
    slots: int | None
    stop: Silence | None  # the server's stop, where it held most of the `n` requests the median is of
    n: int
    server_prefill_tps: float | None


class Queued(Finding):
    """A loaded case's TTFT judged against the same prompt with nothing else in flight (its
    Queueing): the words of a case it found queued. Each subclass names what it judged against."""

    code = Code.PREFILL_HOLDS_QUEUEING

    @abstractmethod
    def against(self, found: Waited, alone_ms: str) -> str:
        """What the loaded TTFT was judged against, in words."""

    def found_in(self, case: CaseResult, run: RunView) -> Waited | None:
        """The case's wait where its TTFT was found queued (None: not queued); reads, never words."""
        q = case.queueing
        if q is None or not q.queued or q.alone_ttft is None or q.excess_s is None or q.loaded_ttft_s is None:
            return None
        figure = case.figure(q.basis)
        n = figure.n if figure else case.facts().n_ok
        return Waited(
            case=case.label,
            source=q.source,
            basis=q.basis,
            alone_ttft_s=q.alone_ttft.median,
            loaded_ttft_s=q.loaded_ttft_s,
            excess_s=q.excess_s,
            threshold_s=q.threshold_s,
            kind=case.kind,
            concurrency=case.concurrency,
            rate=case.rate,
            on_a_line=case.kind == "trace" or (case.kind == "shared_prefix" and bool(case.depth)),
            slots=queueing.server_slots(run),
            stop=stop_holding(case, n),
            n=n,
            server_prefill_tps=server_prefill(case),
        )

    def words(self, found: Waited) -> CheckWarning:
        """The warning of a case found queued."""
        against = ON_A_LINE if found.on_a_line else self.against(found, f"{found.alone_ttft_s * 1000:,.0f} ms")
        load = queueing.load_words(found.kind, found.concurrency, found.rate)
        cause, hint = _queue_cause(found)
        return warning(
            Code.PREFILL_HOLDS_QUEUEING,
            self.severity,
            found.case,
            f"{queueing.BASIS_WORDS.get(found.basis, 'TTFT')} {load} is {found.loaded_ttft_s * 1000:,.0f} ms (median), "
            f"{found.excess_s * 1000:,.0f} ms more than {against}: "
            f"requests waited for the server ({cause}). TTFT holds that wait; "
            f"prefill t/s is withheld.{_server_prefill_text(found.server_prefill_tps)}",
            hint,
            metrics=("ttft_s",),
            details=details.PrefillHoldsQueueing(
                concurrency=found.concurrency,
                slots=found.slots,
                source=found.source,
                alone_ttft_s_median=found.alone_ttft_s,
                ttft_s_median=found.loaded_ttft_s,
                server_prefill_tps=found.server_prefill_tps,
            ),
            evidence=(Evidence("ttft_excess_s", found.excess_s, found.threshold_s, "s"),),
        )


def _queue_cause(found: Waited) -> tuple[str, str]:
    """(what the requests waited for, the hint): the server's stop where it held most of them
    (results/stop.py, as ttft_not_prefill judges it), then the slots or the load."""
    slots = found.slots
    if slots is not None and found.concurrency is not None and found.concurrency > slots:
        rest = f"{found.concurrency} requests in flight on {queueing.slots_text(slots)}"
    else:
        rest = "it serves fewer requests at once than were in flight, or slows each prefill under load"
    if found.stop is None:
        return rest, QUEUEING_HINT
    return stop_cause(found.stop, found.n, found.excess_s, rest), STOP_HINT


def server_prefill(case: CaseResult) -> float | None:
    """The server's own prefill rate: its per-response timings (llama.cpp), else its /metrics."""
    own = case.median("server_prefill_tps")
    if own is not None:
        return own
    server = case.server_figures()
    return server.derived.get("prefill_tps") if server else None


def _server_prefill_text(rate: float | None) -> str:
    return (
        f" The server's own prefill: {rate:,.0f} t/s."
        if rate is not None
        else " The server reports no prefill time of its own."
    )


class QueuedAlone(Queued):
    """A loaded case's TTFT past the same prompt sent alone before it (load/alone.py): the
    requests waited, and a prefill rate from TTFT would count the wait."""

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        found = {c.label: queueing.judge_alone(c, c.alone_ttft_s, c.alone_points) for c in cases}
        return Decision(_queue_judgments(found))

    def against(self, found: Waited, alone_ms: str) -> str:
        return f"the same prompt sent alone ({alone_ms})"


@dataclass(frozen=True)
class Trend:
    """A case withheld because TTFT grew with the output length at its prompt: why (the
    saved reason), and each (output length, TTFT median) of its group, in the run's order."""

    case: str
    why: str
    ttft_s_by_tg: tuple[tuple[int, float], ...]


class BufferedTrend(Finding):
    """Single-stream cases at one prompt whose TTFT grows with the output length: the stream
    was buffered (a proxy, a server that holds its events), so its timings are not the server's."""

    code = Code.SSE_BUFFERING

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        return Decision({label: Judgment(why) for label, why in buffered_trend(cases).items()})

    def found_in(self, cases: Sequence[CaseResult]) -> tuple[Trend, ...]:
        """Each case it withheld (known by the saved code: results read back from disk are
        worded alike), with every TTFT of the case's group."""
        trend = [c for c in cases if c.reason("ttft_s").code == BUFFERED_TREND and "ttft_s" in c.withheld]
        return tuple(
            Trend(
                case.label,
                case.unavailable["ttft_s"],
                tuple((c.tg, c.withheld["ttft_s"].median) for c in trend if _prompt_of(c) == _prompt_of(case)),
            )
            for case in trend
        )

    def words(self, found: Trend) -> CheckWarning:
        """The warning of a case withheld for its group's TTFT trend."""
        return warning(
            Code.SSE_BUFFERING,
            self.severity,
            found.case,
            found.why,
            BUFFERING_HINT,
            details=details.SseBuffering(ttft_s_by_tg={f"tg{tg}": ttft for tg, ttft in found.ttft_s_by_tg}),
        )


BUFFERING_HINT = (
    "The server sends several tokens per event (vLLM buffers Harmony output, for "
    "example). Compare servers by end-to-end throughput, or fix the server's streaming."
)


def _prompt_of(case: CaseView) -> tuple[Any, ...]:
    """What a TTFT trend is judged within: the same prompt, at every output length."""
    return case.pp, case.depth, case.depth_mode, case.endpoint


def buffered_trend(cases: Sequence[CaseView]) -> dict[str, Unavailable]:
    """Single-stream cases at one prompt whose TTFT grows with the output length (metrics.
    buffered_trend), unless usage shows one token per event: why, by label."""
    groups: dict[tuple[Any, ...], list[CaseView]] = {}
    for case in cases:
        if case.concurrency == 1 and case.summary.get("ttft_s") and case.summary.get("e2e_s"):
            groups.setdefault(_prompt_of(case), []).append(case)
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


class QueuedAgainstConcurrency1(Queued):
    """A loaded sweep case without alone requests, against the run's concurrency-1 case of the
    same prompt (no queueing is judged on TTFTs a trend withheld)."""

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        return Decision(_queue_judgments(queueing.judge_against_concurrency_1(cases)))

    def against(self, found: Waited, alone_ms: str) -> str:
        return f"the same prompt at concurrency 1 ({found.source}) ({alone_ms})"


class FixedLatency(Finding):
    """A fixed part of TTFT in front of the engine in a sweep family (results/latency.py); a
    case already queued keeps that cause."""

    code = Code.FIXED_LATENCY

    def decide(self, cases: Sequence[CaseFigures]) -> Decision:
        found = latency.find(cases)
        by_case = {label: Judgment(why) for label, why in latency.withhold_fixed_latency(cases, found).items()}
        return Decision(by_case, found)

    def words(self, found: latency.Found, llamacpp: bool) -> CheckWarning:
        """The run's warning of the fixed part found in one sweep family: the part, the engine's
        own prefill rate and the response headers' time; `llamacpp`: the server is llama.cpp,
        whose host-RAM cache copy one prompt length cannot tell from a hold."""
        part = found.part
        engine = (
            f" The engine prefills at {part.engine_prefill_tps:,.0f} t/s (the longest prompt's tokens over "
            "its TTFT less the fixed part)."
            if part.engine_prefill_tps
            else ""
        )
        witnesses = [f"the response headers came at {part.headers_s * 1000:,.0f} ms"] if part.headers_s else []
        if part.intercept_s is not None:
            witnesses.append(f"TTFT against prompt length meets zero tokens at {part.intercept_s * 1000:,.0f} ms")
        ms = f"{part.fixed_s * 1000:,.0f} ms"
        held = f"({part.evidence()}, over {', '.join(part.cases)}; {' and '.join(witnesses)})"
        withheld = f" Prefill t/s from TTFT is withheld.{engine}"
        llamacpp = part.unsure_cause and llamacpp
        if part.unsure_cause:
            words = f"TTFT holds {ms} before the server answers {held}: {_fixed_cause(llamacpp)}{withheld}"
        else:
            words = (
                f"TTFT holds a fixed {ms} that no prompt length explains {held}: it passes before the engine "
                f"takes the request, not prefilling.{withheld}"
            )
        return warning(
            Code.FIXED_LATENCY,
            self.severity,
            None,
            words,
            LLAMACPP_HINT if llamacpp else FIXED_HINT + (UNSURE_HINT if part.unsure_cause else ""),
            details=details.FixedLatency(
                fixed_s=part.fixed_s,
                engine_prefill_tps=part.engine_prefill_tps,
                headers_s_median=part.headers_s,
                cases=list(part.cases),
            ),
            evidence=(Evidence("fixed_s", part.fixed_s, part.threshold_s, "s"),),
        )


def _fixed_cause(llamacpp: bool) -> str:
    """What one prompt length leaves open: a hold, or the server's own work on the prompt."""
    if llamacpp:
        return f"{LLAMACPP_COPY} or a hold in front of the server; one prompt length cannot tell which."
    return (
        "a hold in front of the engine or the server's own work on the prompt before it answers; one "
        "prompt length cannot tell which (a hold stays put as the prompt grows, prompt work grows with it)."
    )


FIXED_HINT = (
    "Something holds each request before the engine sees it: a gateway's guardrails, an API "
    "manager, a content filter or a long network path. TTFT is what a user waits; for the "
    "engine's prefill speed benchmark it directly, or read the engine rate given here."
)
UNSURE_HINT = " To tell a hold from the server's own work on the prompt, add a second --pp (four times the first)."
# llama-server with default flags copies a slot's prompt cache to host RAM (--cache-ram) before it
# answers, outside its timings' prompt_ms: at one prompt length that looks like a hold in front.
LLAMACPP_COPY = "llama.cpp's own host-RAM prompt cache copy (--cache-ram, on by default; outside its prompt_ms)"
LLAMACPP_HINT = (
    "TTFT is what a user waits. To tell llama.cpp's cache copy from a hold in front of it, run once with "
    "--cache-ram 0 on the server (a hold stays, the copy goes) or add a second --pp (four times the first: "
    "the copy grows with the prompt, a hold stays put); for the engine's prefill speed read the rate given here."
)


QUEUED_ALONE, QUEUED_AGAINST_C1 = QueuedAlone(), QueuedAgainstConcurrency1()
BUFFERED_BY_TREND, FIXED_PART = BufferedTrend(), FixedLatency()
DECIDED: tuple[Finding, ...] = (QUEUED_ALONE, BUFFERED_BY_TREND, QUEUED_AGAINST_C1, FIXED_PART)


def queued_by(q: Queueing | Waited) -> Queued:
    """The finding that judged a case's Queueing (or found its wait): against its alone
    requests, or the run's concurrency-1 case (its label is the source)."""
    return QUEUED_ALONE if q.source == "alone" else QUEUED_AGAINST_C1


class CaseFinding(Trap):
    """A trap decided on one case's own requests, before the case has figures: its verdict
    judges every row the case's statistics are then taken from (results/build.case_figures),
    so it cannot wait for the figures as DECIDED's findings do."""

    @abstractmethod
    def decide(self, reasons: Sequence[str | None]) -> Unavailable | None:
        """The case's verdict from what each of its measured, successful requests showed
        (None: nothing), in order; None: no verdict."""


@dataclass(frozen=True)
class Buffered:
    """A case whose streams arrived buffered: why (the saved reason) and its tokens per event."""

    case: str
    why: str
    tokens_per_event: float | None  # median


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

    def found_in(self, case: CaseResult) -> Buffered | None:
        """The case, where its stream timings were withheld as buffered (None: not)."""
        why = case.reason("ttft_s")
        if case.summary.get("ttft_s") is not None or why.code != BUFFERED:
            return None
        return Buffered(case.label, why.message, case.median("tokens_per_event"))

    def words(self, found: Buffered) -> CheckWarning:
        """The warning of a case whose stream timings were withheld as buffered."""
        return warning(
            Code.SSE_BUFFERING,
            self.severity,
            found.case,
            f"{found.why}. TTFT, inter-token latency, decode and prefill rates are unavailable; "
            "end-to-end throughput is still valid.",
            BUFFERING_HINT,
            details=details.SseBuffering(tokens_per_event_median=found.tokens_per_event),
            evidence=(
                Evidence(
                    "tokens_per_event_median", found.tokens_per_event, delivery.FIRST_ARRIVAL_MAX_TOKENS, "tokens/event"
                ),
            ),
        )


BUFFERED_STREAMS = BufferedStreams()  # the one CaseFinding: decided as each case's rows are read
