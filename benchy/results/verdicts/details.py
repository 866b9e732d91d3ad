"""The figures behind each warning (results.json warnings[].details): one small frozen class per
code, or per family of codes that share their figures, holding only that check's figures
(results/verdicts/codes.py says which code carries which). Each figure is left out of the file
while it is null, so a warning's `details` object holds the keys its check set, as it always has.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from benchy.jsontypes import Saved
from benchy.measure.health import ClientHealth


def _n(doc: str) -> Any:
    """A figure: null, and left out of the file, unless its check set it."""
    return field(default=None, metadata={"doc": doc, "omit_none": True})


@dataclass(frozen=True)
class Details(Saved):
    """The figures of a warning; a code's own class holds them."""


D = TypeVar("D", bound=Details)


@dataclass(frozen=True)
class NoFigures(Details):
    """A warning whose message and evidence say all: no figures of its own."""


@dataclass(frozen=True)
class DangerousStop(Saved):
    """A --stop string that occurs inside a Harmony response, and why."""

    stop: str
    reason: str = ""


@dataclass(frozen=True)
class SseBuffering(Details):
    """Tokens per event where the first arrival carried many; or, where TTFT grew with the output length, each output length's TTFT."""

    tokens_per_event_median: float | None = _n("tokens per streamed event (median)")
    ttft_s_by_tg: dict[str, float] | None = _n("tg<N> → TTFT median, s, of cases at one prompt")


@dataclass(frozen=True)
class AboveBandwidthCeiling(Details):
    """The ceiling and each rate above it as a share of it."""

    ceiling_tps: float | None = _n("the decode ceiling, tokens/s")
    decode_pct: float | None = _n("decode median as % of the ceiling")
    e2e_pct: float | None = _n("end-to-end median as % of the ceiling")


@dataclass(frozen=True)
class PrefixCacheHit(Details):
    """Requests partly served from the prefix cache beyond the chat template."""

    requests: int | None = _n("requests the finding is about")
    template_tokens: float | None = _n("chat template tokens (calibration's overhead)")
    cached_tokens_max: int | None = _n("most cached prompt tokens of a request")


@dataclass(frozen=True)
class CacheEviction(Details):
    """The first request that reused less than the server had prefilled (measure/workloads.py Eviction)."""

    requests: int | None = _n("requests the finding is about")
    of_requests: int | None = _n("requests it could have been about")
    request_id: str | None = _n("the first request concerned")
    turn: int | None = _n("its turn")
    conversation: int | None = _n("its conversation")
    after_s: float | None = _n("seconds into the case")
    in_flight: int | None = _n("requests in flight then")
    held_tokens: int | None = _n("prompt tokens held across conversations or requests")
    expected_tokens: int | None = _n("cached tokens expected")
    reported_tokens: int | None = _n("cached tokens reported")
    lost_tokens: int | None = _n("tokens prefilled again")


@dataclass(frozen=True)
class CacheNotReused(Details):
    """Requests that resent prefilled tokens, none reported cached (measure/workloads.py NoReuse)."""

    requests: int | None = _n("requests the finding is about")
    expected_tokens: int | None = _n("cached tokens expected")
    miss_idle_min_s: float | None = _n("the shortest idle time before a miss, seconds")
    hit_idle_max_s: float | None = _n("the longest gap before a request served the prompts' shared start, seconds")
    lost_idle_min_s: float | None = _n("the shortest quiet after which even that start was lost, seconds")
    start_hits: int | None = _n("requests the server reported the prompts' shared start cached for")
    cause: str | None = _n("what the idle gaps point to: expiry, or null when they cannot tell")


@dataclass(frozen=True)
class CachePartialReuse(Details):
    """Hits, partial hits and misses, and the pattern they point to (measure/workloads.py PartialReuse)."""

    requests: int | None = _n("requests the finding is about")
    expected_tokens: int | None = _n("cached tokens expected")
    reported_tokens: int | None = _n("cached tokens reported")
    hit_requests: int | None = _n("requests that reused all they could")
    partial_requests: int | None = _n("requests that reused part of it")
    missed_requests: int | None = _n("requests that reused none of it")
    hit_fraction: float | None = _n("hit_requests ÷ requests")
    replicas: int | None = _n("replicas the reuse pattern points to")
    pattern: str | None = _n("that pattern in words")
    turn_lag: int | None = _n("the steady distance to the turn whose history was reused")
    cause: str | None = _n("what the reuse pattern points to: rotation | expiry | routing")
    miss_idle_min_s: float | None = _n("the shortest idle time before a miss, seconds")
    hit_idle_max_s: float | None = _n("the longest idle time before a hit, seconds")


@dataclass(frozen=True)
class CacheResetUnavailable(Details):
    """The cases whose reset failed, and the first failure (server/cache_reset.py CacheReset)."""

    endpoint: str | None = _n("the endpoint (or reset call) concerned")
    cases: list[str] | None = _n("cases concerned")
    ok: bool | None = _n("the reset worked")
    message: str | None = _n("the reset's outcome in words")
    calls: int | None = _n("HTTP calls the reset made")


@dataclass(frozen=True)
class CacheLeakage(Details):
    """Requests that reported more cached tokens than they could share (measure/workloads.py Leakage)."""

    requests: int | None = _n("requests the finding is about")
    of_requests: int | None = _n("requests it could have been about")
    request_id: str | None = _n("the first request concerned")
    turn: int | None = _n("its turn")
    max_excess_tokens: float | None = _n("cached tokens beyond what could be shared (most)")


@dataclass(frozen=True)
class EmptyOutput(Details):
    """Requests with no content although tokens were claimed."""

    requests: int | None = _n("requests the finding is about")
    claimed_tokens_median: int | None = _n("empty outputs: completion tokens the server claimed (median)")
    content_null_events: int | None = _n("`content: null` deltas")


@dataclass(frozen=True)
class ZeroTokens(Details):
    """Requests that generated no token, and how they finished."""

    requests: int | None = _n("requests the finding is about")
    finish_reasons: list[str] | None = _n("finish_reason of the requests concerned")


@dataclass(frozen=True)
class OutputLengthMismatch(Details):
    """Output tokens asked against delivered."""

    finish_reasons: list[str] | None = _n("finish_reason of the requests concerned")
    asked: int | None = _n("output tokens asked (tg)")
    delivered_median: int | None = _n("output tokens delivered (median)")
    delivered_min: int | None = _n("output tokens delivered (least)")
    delivered_max: int | None = _n("output tokens delivered (most)")
    short_requests: int | None = _n("requests that got fewer tokens than asked")


@dataclass(frozen=True)
class NoUsage(Details):
    """Requests counted by estimate, and the scale of that estimate."""

    requests: int | None = _n("requests the finding is about")
    scale: float | None = _n("calibration's server tokens per local token")


@dataclass(frozen=True)
class UsageMismatch(Details):
    """Requests whose usage was overruled: usage against the count used."""

    requests: int | None = _n("requests the finding is about")
    usage_median: float | None = _n("usage's completion count (median)")
    counted_median: float | None = _n("the count the figures use (median)")


@dataclass(frozen=True)
class LocalTokenizerMismatch(Details):
    """Requests whose local count alone disagreed with usage, and what backed usage."""

    requests: int | None = _n("requests the finding is about")
    backed_by: list[str] | None = _n("witnesses that agreed with usage")


@dataclass(frozen=True)
class PromptLengthMismatch(Details):
    """Prompt tokens sent against counted: a case's requests, or (case null) calibration's check of the longest prompt (LengthCheck) at an endpoint."""

    requests: int | None = _n("requests the finding is about")
    target_tokens: int | None = _n("prompt tokens sent")
    server_tokens: int | None = _n("prompt tokens the server counted")
    server_tokens_median: int | None = _n("prompt tokens the server counted (median)")
    missed: bool | None = _n("the server counted fewer prompt tokens than sent")
    error: str | None = _n("why a check request failed")
    endpoint: str | None = _n("the endpoint (or reset call) concerned")


@dataclass(frozen=True)
class TtftNotPrefill(Details):
    """TTFT against the server's own prompt time."""

    ttft_s_median: float | None = _n("TTFT (median), s")
    server_prompt_s_median: float | None = _n("the server's own prompt time (median), s")
    not_prefill_s_median: float | None = _n("TTFT − the server's prompt time (median), s")


@dataclass(frozen=True)
class PrefillHoldsQueueing(Details):
    """The loaded TTFT against the same prompt alone (or, in files before 1.9, the load against the server's slots)."""

    ttft_s_median: float | None = _n("TTFT (median), s")
    concurrency: int | None = _n("the case's concurrency")
    slots: int | None = _n("requests the server runs at once")
    source: str | None = _n('the queueing baseline: "alone" or the concurrency-1 case')
    alone_ttft_s_median: float | None = _n("TTFT of the same prompt alone (median), s")
    server_prefill_tps: float | None = _n("the server's own prefill rate, tokens/s")


@dataclass(frozen=True)
class FixedLatency(Details):
    """The fixed part of TTFT over a sweep family, the engine's own rate and the headers' time."""

    cases: list[str] | None = _n("cases concerned")
    fixed_s: float | None = _n("TTFT's fixed part: its intercept against prompt length, s")
    engine_prefill_tps: float | None = _n("the engine's prefill rate: the inverse of that line's slope, tokens/s")
    headers_s_median: float | None = _n("response headers' time (median) of the shortest prompt, s")


@dataclass(frozen=True)
class RateDrift(Details):
    """The rate's trend from the first request to the last, and the GPUs' meanwhile."""

    requests: int | None = _n("requests the finding is about")
    first_tps: float | None = _n("the rate's trend line at the first request, tokens/s")
    last_tps: float | None = _n("the rate's trend line at the last request, tokens/s")
    drift_pct: float | None = _n("last_tps against first_tps, %")
    p_value: float | None = _n("Kendall's tau of the rate against send time: its p-value")
    sm_clock_mhz_first: float | None = _n("--gpu-metrics: the GPUs' SM clock at the case's first sample, MHz")
    sm_clock_mhz_last: float | None = _n("and at its last, MHz")
    temp_c_first: float | None = _n("--gpu-metrics: the GPUs' temperature at the case's first sample, °C")
    temp_c_last: float | None = _n("and at its last, °C")
    throttle_reasons: list[str] | None = _n("--gpu-metrics: the clock-event (throttle) reasons any sample gave")


@dataclass(frozen=True)
class RateDriftAcrossCases(RateDrift):
    """The same trend over the requests of several cases of one shape, pooled in send order."""

    cases: list[str] | None = _n("the cases of that shape, in send order")


@dataclass(frozen=True)
class RequestErrors(Details):
    """Failures by kind, with the first message of each."""

    errors: dict[str, int] | None = _n("error kind → failed measured requests")
    first_errors: dict[str, str] | None = _n("error kind → the first failure's message")


@dataclass(frozen=True)
class ClientOverloaded(Details):
    """benchy's own health in the case."""

    client: ClientHealth | None = _n("benchy's own health in the case")


@dataclass(frozen=True)
class CaseCutShort(Details):
    """Requests measured against planned."""

    measured: int | None = _n("measured requests")
    planned: int | None = _n("measured requests planned")


@dataclass(frozen=True)
class FirstChunkBeforePrefill(Details):
    """How far the first chunk led the first token, against TTFT."""

    lead_s_median: float | None = _n("first chunk ahead of the first token (median), s")
    ttft_s_median: float | None = _n("TTFT (median), s")


@dataclass(frozen=True)
class DangerousStopFound(Details):
    """Requests a stop string ended before their answer, and the stops."""

    requests: int | None = _n("requests the finding is about")
    stop: list[str] | None = _n("--stop strings")
    dangerous_stops: list[DangerousStop] | None = _n("stops that fire inside a Harmony response")


@dataclass(frozen=True)
class ServerCacheHit(Details):
    """The server's /metrics cache hits against what the template explains."""

    requests: int | None = _n("requests the finding is about")
    server_cache_hits: float | None = _n("prefix-cache hit tokens the server counted")
    explained_hits: float | None = _n("hit tokens the chat template (and contexts sent ahead) explain")
    server_cache_hit_rate: float | None = _n("the server's cache hit rate")
    usage_cached_tokens: int | None = _n("cached tokens usage reported, summed (null: not every request said)")


@dataclass(frozen=True)
class ServerTokenMismatch(Details):
    """Tokens the server counted as generated against the responses' usage."""

    requests: int | None = _n("requests the finding is about")
    server_generation_tokens: float | None = _n("tokens the server counted as generated")
    client_tokens: int | None = _n("completion tokens of the responses' usage, summed")
    counted_tokens: int | None = _n("(1.25) completion tokens benchy's rates counted, summed (usage where believed)")
    difference: float | None = _n("|server − client| tokens")
    slack: float | None = _n("difference allowed, tokens")


@dataclass(frozen=True)
class TtftOutsideServer(Details):
    """Client TTFT against the server's own, and the round trip."""

    client_ttft_s: float | None = _n("client TTFT (mean), s")
    server_ttft_s: float | None = _n("server TTFT (mean), s")
    outside_s: float | None = _n("client − server TTFT, s")
    rtt_s: float | None = _n("the quickest /metrics round trip, s")
    bound_s: float | None = _n("the gap allowed, s")
    # (1.26) what the evidence says holds it: "client" (benchy's own loop or sends were late),
    # "server_stopped" (every stream mid-answer fell silent at once while benchy's loop was
    # awake) or "in_front" (neither: a proxy, a gateway, connection set-up)
    cause: str | None = _n("client | server_stopped | in_front: what the evidence points to")
    silence_s: float | None = _n("the longest span with no text event on any stream mid-answer, s")
    silent_streams: int | None = _n("the streams mid-answer through that silence")
    unread: int | None = _n("requests sent during that silence whose headers came only after it")
    client_lag_s: float | None = _n(
        "benchy's sustained lateness: its loop lag at p95 or send lag at p90, the larger, s"
    )
    loop_peak_s: float | None = _n("benchy's worst loop lag in the case, s")


@dataclass(frozen=True)
class ServerCounterReset(Details):
    """The server's counters fell back during the case (a restart), and what it still counted."""

    counter_resets: int | None = _n("counter resets during the case")
    server_requests: float | None = _n("requests the server counted, resets added up as rate() does")
    requests: int | None = _n("the case's measured requests")


@dataclass(frozen=True)
class QueueDominatesTtft(Details):
    """The server's queue time against its TTFT, and the load."""

    concurrency: int | None = _n("the case's concurrency")
    rate: float | None = _n("the case's arrival rate, requests/s")
    queue_s: float | None = _n("server queue time (mean), s")
    ttft_s: float | None = _n("server (else client) TTFT (mean), s")
    queue_share: float | None = _n("queue_s ÷ ttft_s")
    running_max: float | None = _n("most requests the server ran at once")


@dataclass(frozen=True)
class RequestCount(Details):
    """The requests a finding is about."""

    requests: int | None = _n("requests the finding is about")


@dataclass(frozen=True)
class CanaryFailed(Details):
    """The canary (--canary, issue 55): its fixed prompts answered wrong, by name."""

    asked: int | None = _n("canary prompts asked")
    failed: list[str] | None = _n("the prompts answered wrong or not at all, by name")


@dataclass(frozen=True)
class OutputGarbage(Details):
    """Output sanity (issue 55): the case's answers that look broken and why, quoted."""

    answers: int | None = _n("successful measured answers")
    judged: int | None = _n("answers long enough to judge")
    broken: int | None = _n("judged answers that look broken")
    reasons: dict[str, int] | None = _n("sign → answers (benchy/measure/sanity/text.py)")
    identical: int | None = _n("long answers equal to another answer of the case")
    stopped_at_once: int | None = _n("answers of at most one token that ended by a stop")
    examples: list[str] | None = _n("broken answers, quoted (their first characters)")


def taken_from(cls: type[D], source: object, **more: Any) -> D:
    """`cls`'s figures read off `source` (a finding of measure/ or server/ whose fields bear the
    same names), with `more` beside them."""
    names = [f.name for f in fields(cls) if f.name not in more and hasattr(source, f.name)]
    return cls(**{name: getattr(source, name) for name in names}, **more)
