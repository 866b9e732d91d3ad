"""Checks of the stream's timing: a buffered stream (sse_buffering, by the events or by a TTFT
that grows with the output length), a first chunk long before the first token
(first_chunk_before_prefill) and TTFT beyond the server's own prompt time (ttft_not_prefill).
A buffered stream is worded by the finding that withheld its timings (results/findings.py); the
queueing trap has its own module (checks/queueing.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks import latency as latency_checks
from benchy.checks.registry import (
    INFO,
    WARNING,
    Code,
    Warning_,
)
from benchy.measure import stats
from benchy.results import findings, latency
from benchy.results.stop import STOP_HINT, stop_cause, stop_holding
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
)
from benchy.results.verdicts import queueing
from benchy.results.verdicts.details import (
    FirstChunkBeforePrefill,
    TtftNotPrefill,
)
from benchy.results.view import RunView

# A first chunk this much ahead of the first token (and this share of TTFT) is worth a note.
FIRST_CHUNK_LEAD_MIN_S = 0.02
FIRST_CHUNK_LEAD_SHARE = 0.2


def sse_buffering(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """A case whose streams arrived buffered, in the words of the finding that withheld them."""
    found = findings.BUFFERED_STREAMS.warning_of(case)
    if found is not None:
        yield found


def first_chunk_before_prefill(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """The registry's first_chunk_lead_s against TTFT, both summarized with the case (files
    before 1.12 carry no lead: no note for them)."""
    lead, ttft = case.median("first_chunk_lead_s"), case.median("ttft_s")
    if lead is None or ttft is None:
        return
    if lead >= max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft):
        yield Warning_(
            Code.FIRST_CHUNK_BEFORE_PREFILL,
            INFO,
            case.label,
            f"A role-only or empty first chunk arrived {lead * 1000:.0f} ms (median) before "
            f"the first token: TTFT ({ttft * 1000:.0f} ms) is taken from the first token, "
            "not from that chunk.",
            "Nothing to fix; tools that time the first chunk report a TTFT this much too low.",
            details=FirstChunkBeforePrefill(lead_s_median=lead, ttft_s_median=ttft),
            evidence=(
                Evidence(
                    "first_chunk_lead_s_median", lead, max(FIRST_CHUNK_LEAD_MIN_S, FIRST_CHUNK_LEAD_SHARE * ttft), "s"
                ),
            ),
        )


# Where the server reports its own prompt time, TTFT minus it beyond this share of TTFT (and
# this many seconds) is time that is not prefill: queueing, a host cache copy, scheduling.
NOT_PREFILL_SHARE = 0.25
NOT_PREFILL_MIN_S = 0.02
NOT_PREFILL_HINT = (
    "TTFT is what a user waits; prefill t/s taken from it is not the server's prefill speed. "
    "For llama.cpp, --cache-ram 0 removes the host-RAM cache copy; no more requests in flight "
    "than slots removes the queueing."
)


def ttft_not_prefill(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    """Time inside TTFT that the server's own prompt time does not hold."""
    facts = case.facts()  # (TTFT, prompt_ms) of each request with llama.cpp's timings
    if not facts.pair_ttft or case.median("ttft_gap_s") is None:  # no gap the case believes (TTFT withheld)
        return
    # Three numbers of the same requests that subtract: the median of each request's own gap
    # (ttft_gap_s) beside these two medians is neither's difference ("401 ms, 261 ms: 106 ms").
    ttft = stats.median(facts.pair_ttft)
    prompt = stats.median(facts.pair_prompt_s)
    gap = ttft - prompt
    limit = max(NOT_PREFILL_MIN_S, NOT_PREFILL_SHARE * ttft)
    if gap < limit:
        return
    client, server = case.median("prefill_tps"), case.median("server_prefill_tps")
    rates = ""
    cause, hint = _not_prefill_why(case, run, gap, len(facts.pair_ttft))
    if client is not None and server is not None:
        rates = f" Prefill: {client:,.0f} t/s from TTFT, against the server's own {server:,.0f} t/s."
    yield Warning_(
        Code.TTFT_NOT_PREFILL,
        WARNING,
        case.label,
        f"TTFT is {ttft * 1000:,.0f} ms (median) but the server's own prompt time is "
        f"{prompt * 1000:,.0f} ms: {gap * 1000:,.0f} ms ({gap / ttft:.0%}) of TTFT is not prefill "
        f"({cause}).{rates}",
        hint,
        details=TtftNotPrefill(ttft_s_median=ttft, server_prompt_s_median=prompt, not_prefill_s_median=gap),
        evidence=(Evidence("not_prefill_s_median", gap, limit, "s"),),
    )


def _not_prefill_why(case: CaseResult, run: RunView, gap: float, n: int) -> tuple[str, str]:
    """(what holds the gap, the hint). The server's stop first (results/stop.py) where it held
    most of the n requests the median is of: up to its length it is the cause whatever the cache
    evidence says (llama.cpp's cache copy cannot hold a request the server never read); the
    other causes are named for what passes beyond it."""
    rest = _not_prefill_cause(case, run)
    stop = stop_holding(case, n)
    if stop is None:
        return rest, NOT_PREFILL_HINT
    return stop_cause(stop, n, gap, rest), STOP_HINT


def _not_prefill_cause(case: CaseResult, run: RunView) -> str:
    fixed = latency.found_for(case, latency.found_in(run))
    if fixed is not None and fixed.unsure_cause:  # one prompt length: its cause is not known
        before = f"a fixed {fixed.fixed_s * 1000:,.0f} ms before the server answers"
        if latency_checks.served_by_llamacpp(run):
            return f"{before}: llama.cpp's host-RAM prompt cache copy or a hold in front of it, see fixed_latency"
        return f"{before}: a hold in front of it or its own work on the prompt, see fixed_latency"
    if fixed is not None:
        return f"a fixed {fixed.fixed_s * 1000:,.0f} ms before the server takes the request: see fixed_latency"
    slots, in_flight = queueing.server_slots(run), case.concurrency
    if case.rate is not None:  # an open loop: its arrivals set the load, not its concurrency of 1
        return "queueing behind the open loop's other requests in flight, or work before prefill"
    if in_flight is None:  # a trace replay: its arrivals set the load
        return "queueing behind the replay's other requests in flight, or work before prefill"
    if slots is not None and in_flight > slots:
        return f"{in_flight} requests in flight on {queueing.slots_text(slots)}: they queue"
    if in_flight > 1:
        return "queueing behind the other requests in flight, or work before prefill"
    return "work before prefill, e.g. llama.cpp's host-RAM prompt cache copying slots"


def ttft_grows_with_output(run: RunView) -> Iterable[CheckWarning]:
    """The cases withheld because TTFT grew with the output length, one warning each, in the
    words of the finding that withheld them (results/findings.py BufferedTrend)."""
    return findings.BUFFERED_BY_TREND.warnings_of(run.cases)
