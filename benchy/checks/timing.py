"""Checks of the stream's timing: a buffered stream (sse_buffering, by the events or by a TTFT
that grows with the output length), a first chunk long before the first token
(first_chunk_before_prefill) and TTFT beyond the server's own prompt time (ttft_not_prefill).
A buffered stream is worded by the finding that withheld its timings (results/findings.py); the
queueing trap has its own module (checks/queueing.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from benchy.checks import latency as latency_checks
from benchy.checks import queueing as queueing_checks
from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import Code, Warning_
from benchy.measure import stats
from benchy.measure.silence import Silence
from benchy.results import findings, latency
from benchy.results.stop import STOP_HINT, stop_cause, stop_holding
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
)
from benchy.results.verdicts import queueing
from benchy.results.verdicts.details import (
    FirstChunkBeforePrefill as FirstChunkFigures,
)
from benchy.results.verdicts.details import (
    TtftNotPrefill as NotPrefillFigures,
)
from benchy.results.view import RunView

# A first chunk this much ahead of the first token (and this share of TTFT) is worth a note.
FIRST_CHUNK_LEAD_MIN_S = 0.02
FIRST_CHUNK_LEAD_SHARE = 0.2


class SseBuffering(Check[findings.Buffered]):
    """A case whose streams arrived buffered: the finding that withheld them (results/findings.py
    BUFFERED_STREAMS) owns its detection and its words; this check asks it for both."""

    code = Code.SSE_BUFFERING

    def detect(self, case: CaseResult, run: RunView) -> findings.Buffered | None:
        return findings.BUFFERED_STREAMS.found_in(case)

    def words(self, case: CaseResult, found: findings.Buffered) -> CheckWarning:
        return findings.BUFFERED_STREAMS.words(found)


sse_buffering = SseBuffering()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class Lead:
    """The first chunk's lead on the first token and TTFT (medians), and the lead it passed."""

    lead_s: float
    ttft_s: float
    threshold_s: float


class FirstChunkBeforePrefill(Check[Lead]):
    """The registry's first_chunk_lead_s against TTFT, both summarized with the case (files
    before 1.12 carry no lead: no note for them)."""

    code = Code.FIRST_CHUNK_BEFORE_PREFILL

    def detect(self, case: CaseResult, run: RunView) -> Lead | None:
        lead, ttft = case.median("first_chunk_lead_s"), case.median("ttft_s")
        if lead is None or ttft is None:
            return None
        threshold = max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft)
        return Lead(lead, ttft, threshold) if lead >= threshold else None

    def words(self, case: CaseResult, found: Lead) -> CheckWarning:
        lead, ttft = found.lead_s, found.ttft_s
        return Warning_(
            Code.FIRST_CHUNK_BEFORE_PREFILL,
            self.severity,
            case.label,
            f"A role-only or empty first chunk arrived {lead * 1000:.0f} ms (median) before "
            f"the first token: TTFT ({ttft * 1000:.0f} ms) is taken from the first token, "
            "not from that chunk.",
            "Nothing to fix; tools that time the first chunk report a TTFT this much too low.",
            details=FirstChunkFigures(lead_s_median=lead, ttft_s_median=ttft),
            evidence=(Evidence("first_chunk_lead_s_median", lead, found.threshold_s, "s"),),
        )


first_chunk_before_prefill = FirstChunkBeforePrefill()


# Where the server reports its own prompt time, TTFT minus it beyond this share of TTFT (and
# this many seconds) is time that is not prefill: queueing, a host cache copy, scheduling.
NOT_PREFILL_SHARE = 0.25
NOT_PREFILL_MIN_S = 0.02
NOT_PREFILL_HINT = (
    "TTFT is what a user waits; prefill t/s taken from it is not the server's prefill speed. "
    "For llama.cpp, --cache-ram 0 removes the host-RAM cache copy; no more requests in flight "
    "than slots removes the queueing."
)


@dataclass(frozen=True)
class ServerStopped:
    """The server's stop (results/stop.py) holds the gap: its silence, the n requests the median
    is of, the gap, and the other cause, named for what passes beyond the stop."""

    stop: Silence
    n: int
    gap_s: float
    rest: Cause


@dataclass(frozen=True)
class FixedBefore:
    """A fixed part found in the case's sweep family (results/latency.py); unsure: one prompt
    length, so a hold is not told from the server's own work; llamacpp: the server is llama.cpp."""

    fixed_s: float
    unsure: bool
    llamacpp: bool


# The load's shape where nothing more is known: an open loop, a trace replay, other requests
# in flight, or one request alone.
LoadShape: TypeAlias = Literal["open_loop", "replay", "others", "alone"]
Cause: TypeAlias = ServerStopped | FixedBefore | queueing_checks.OverSlots | LoadShape


@dataclass(frozen=True)
class NotPrefill:
    """TTFT and the server's own prompt time (medians of the same requests), their gap, the gap
    that counts, the prefill rates from each side and what holds the gap."""

    ttft_s: float
    prompt_s: float
    limit_s: float
    client_tps: float | None
    server_tps: float | None
    cause: Cause

    @property
    def gap_s(self) -> float:
        return self.ttft_s - self.prompt_s


class TtftNotPrefill(Check[NotPrefill]):
    """Time inside TTFT that the server's own prompt time does not hold."""

    code = Code.TTFT_NOT_PREFILL

    def detect(self, case: CaseResult, run: RunView) -> NotPrefill | None:
        facts = case.facts()  # (TTFT, prompt_ms) of each request with llama.cpp's timings
        if not facts.pair_ttft or case.median("ttft_gap_s") is None:  # no gap the case believes (TTFT withheld)
            return None
        # Three numbers of the same requests that subtract: the median of each request's own gap
        # (ttft_gap_s) beside these two medians is neither's difference ("401 ms, 261 ms: 106 ms").
        ttft = stats.median(facts.pair_ttft)
        prompt = stats.median(facts.pair_prompt_s)
        gap = ttft - prompt
        limit = max(NOT_PREFILL_MIN_S, NOT_PREFILL_SHARE * ttft)
        if gap < limit:
            return None
        client, server = case.median("prefill_tps"), case.median("server_prefill_tps")
        return NotPrefill(ttft, prompt, limit, client, server, _not_prefill_why(case, run, gap, len(facts.pair_ttft)))

    def words(self, case: CaseResult, found: NotPrefill) -> CheckWarning:
        ttft, prompt, gap = found.ttft_s, found.prompt_s, found.gap_s
        rates = ""
        if found.client_tps is not None and found.server_tps is not None:
            rates = f" Prefill: {found.client_tps:,.0f} t/s from TTFT, against the server's own {found.server_tps:,.0f} t/s."
        return Warning_(
            Code.TTFT_NOT_PREFILL,
            self.severity,
            case.label,
            f"TTFT is {ttft * 1000:,.0f} ms (median) but the server's own prompt time is "
            f"{prompt * 1000:,.0f} ms: {gap * 1000:,.0f} ms ({gap / ttft:.0%}) of TTFT is not prefill "
            f"({_cause_words(found.cause)}).{rates}",
            STOP_HINT if isinstance(found.cause, ServerStopped) else NOT_PREFILL_HINT,
            details=NotPrefillFigures(ttft_s_median=ttft, server_prompt_s_median=prompt, not_prefill_s_median=gap),
            evidence=(Evidence("not_prefill_s_median", gap, found.limit_s, "s"),),
        )


ttft_not_prefill = TtftNotPrefill()


def _not_prefill_why(case: CaseResult, run: RunView, gap: float, n: int) -> Cause:
    """What holds the gap. The server's stop first (results/stop.py) where it held most of the
    n requests the median is of: up to its length it is the cause whatever the cache evidence
    says (llama.cpp's cache copy cannot hold a request the server never read); the other cause
    is named for what passes beyond it."""
    rest = _not_prefill_cause(case, run)
    stop = stop_holding(case, n)
    return rest if stop is None else ServerStopped(stop, n, gap, rest)


def _not_prefill_cause(case: CaseResult, run: RunView) -> Cause:
    fixed = latency.found_for(case, latency.found_in(run))
    if fixed is not None:
        llamacpp = fixed.unsure_cause and latency_checks.served_by_llamacpp(run)
        return FixedBefore(fixed.fixed_s, fixed.unsure_cause, llamacpp)
    slots, in_flight = queueing.server_slots(run), case.concurrency
    if case.rate is not None:  # an open loop: its arrivals set the load, not its concurrency of 1
        return "open_loop"
    if in_flight is None:  # a trace replay: its arrivals set the load
        return "replay"
    if slots is not None and in_flight > slots:
        return queueing_checks.OverSlots(in_flight, slots)
    return "others" if in_flight > 1 else "alone"


LOAD_SHAPE_WORDS: dict[LoadShape, str] = {
    "open_loop": "queueing behind the open loop's other requests in flight, or work before prefill",
    "replay": "queueing behind the replay's other requests in flight, or work before prefill",
    "others": "queueing behind the other requests in flight, or work before prefill",
    "alone": "work before prefill, e.g. llama.cpp's host-RAM prompt cache copying slots",
}


def _cause_words(cause: Cause) -> str:
    """What holds the gap, in words."""
    if isinstance(cause, ServerStopped):
        return stop_cause(cause.stop, cause.n, cause.gap_s, _cause_words(cause.rest))
    if isinstance(cause, FixedBefore):
        if not cause.unsure:
            return f"a fixed {cause.fixed_s * 1000:,.0f} ms before the server takes the request: see fixed_latency"
        before = f"a fixed {cause.fixed_s * 1000:,.0f} ms before the server answers"  # one prompt length: its cause is not known
        if cause.llamacpp:
            return f"{before}: llama.cpp's host-RAM prompt cache copy or a hold in front of it, see fixed_latency"
        return f"{before}: a hold in front of it or its own work on the prompt, see fixed_latency"
    if isinstance(cause, queueing_checks.OverSlots):
        return f"{cause.in_flight} requests in flight on {queueing.slots_text(cause.slots)}: they queue"
    return LOAD_SHAPE_WORDS[cause]


class TtftGrowsWithOutput(RunLevelCheck[findings.Trend]):
    """The cases withheld because TTFT grew with the output length, one warning each: the
    finding that withheld them (results/findings.py BufferedTrend) owns their detection and
    words; this check asks it for both."""

    code = Code.SSE_BUFFERING

    def detect(self, run: RunView) -> Sequence[findings.Trend]:
        return findings.BUFFERED_BY_TREND.found_in(run.cases)

    def words(self, run: RunView, found: findings.Trend) -> CheckWarning:
        return findings.BUFFERED_BY_TREND.words(found)


ttft_grows_with_output = TtftGrowsWithOutput()
