"""Metrics: the notation every formula uses, the TTFT-trend and queueing judgments, and the names
of the modules that hold the rest (re-exported here for their importers):
  unavailable.py       Unavailable and its reason codes
  classify.py          failed outputs, buffered streams
  request_formulas.py  one request's record → a value
  case_formulas.py     a case's rates
  registry.py          METRICS: name, unit, display, meaning, source, dependencies, computing order
  slo.py               --slo parsing, meets_slo, goodput

The registry is the one place a metric is described; the terminal table, CSV rows, `benchy
compare`, `--slo` parsing, the report glossary and docs/metrics.md's table are made from it
(tests/test_registry.py checks the docs). Nothing else in benchy computes a metric.

Notation for one request (times in seconds, relative to the moment it was sent):
  t_end        end of the response stream
  t_1 … t_m    arrival times of the m SSE events that carried generated text
               (reasoning or content; a role-only or empty chunk is not a token)
  N            completion tokens: usage where the events or the streamed text counted locally
               confirm it, else that local count (reading.py, evidence.py)
  arrivals     events joined when they arrive together (a burst); a_1 … a_j, each carrying K_i
               tokens (per-chunk usage, else the local count of its text, scaled to N)
  P, C         prompt tokens and cached prompt tokens, from the server's `usage`
Each formula is the `definition` of its entry in METRICS.

A figure that cannot be measured honestly is `Unavailable(code, message)`: the code is stable
(checks and reports match on it), the message says why in words. When the server buffers its
stream — decided by timing (evidence.buffering: a first arrival carrying many tokens, bursts
longer than any speculative draft), for most of a case's requests (case_buffering) — the event
times measure the buffer flushing, not the model: every stream-timing metric is then
Unavailable with code `buffered`; e2e_s and e2e_tps stay valid.
"""

from __future__ import annotations

from benchy.measure.case_formulas import (
    achieved_rate as achieved_rate,
)
from benchy.measure.case_formulas import (
    aggregate_output_tps as aggregate_output_tps,
)
from benchy.measure.case_formulas import (
    cut_short as cut_short,
)
from benchy.measure.case_formulas import (
    request_rate as request_rate,
)
from benchy.measure.case_formulas import (
    send_lag_s as send_lag_s,
)
from benchy.measure.classify import (
    LIVE_STREAM_TOKENS_PER_EVENT as LIVE_STREAM_TOKENS_PER_EVENT,
)
from benchy.measure.classify import (
    OUTPUT_FAILURES as OUTPUT_FAILURES,
)
from benchy.measure.classify import (
    buffering_reason as buffering_reason,
)
from benchy.measure.classify import (
    buffering_verdict as buffering_verdict,
)
from benchy.measure.classify import (
    case_buffering as case_buffering,
)
from benchy.measure.classify import (
    classify as classify,
)
from benchy.measure.classify import (
    is_buffered as is_buffered,
)
from benchy.measure.classify import (
    output_failure as output_failure,
)
from benchy.measure.registry import (
    CASE as CASE,
)
from benchy.measure.registry import (
    CASE_FORMULA_METRICS as CASE_FORMULA_METRICS,
)
from benchy.measure.registry import (
    COMPARE_METRICS as COMPARE_METRICS,
)
from benchy.measure.registry import (
    METRICS as METRICS,
)
from benchy.measure.registry import (
    REQUEST as REQUEST,
)
from benchy.measure.registry import (
    REQUEST_METRICS as REQUEST_METRICS,
)
from benchy.measure.registry import (
    SLO_METRICS as SLO_METRICS,
)
from benchy.measure.registry import (
    STREAM_TIMING_METRICS as STREAM_TIMING_METRICS,
)
from benchy.measure.registry import (
    TABLE_METRICS as TABLE_METRICS,
)
from benchy.measure.registry import (
    Metric as Metric,
)
from benchy.measure.registry import (
    PerRequest as PerRequest,
)
from benchy.measure.registry import (
    case_metrics as case_metrics,
)
from benchy.measure.registry import (
    request_metrics as request_metrics,
)
from benchy.measure.registry import (
    with_dependents as with_dependents,
)
from benchy.measure.request_formulas import (
    completion_tokens as completion_tokens,
)
from benchy.measure.request_formulas import (
    decode_tps as decode_tps,
)
from benchy.measure.request_formulas import (
    e2e_s as e2e_s,
)
from benchy.measure.request_formulas import (
    e2e_tps as e2e_tps,
)
from benchy.measure.request_formulas import (
    first_chunk_lead_s as first_chunk_lead_s,
)
from benchy.measure.request_formulas import (
    itl_event_s as itl_event_s,
)
from benchy.measure.request_formulas import (
    itl_s as itl_s,
)
from benchy.measure.request_formulas import (
    prefill_tps as prefill_tps,
)
from benchy.measure.request_formulas import (
    reasoning_tokens as reasoning_tokens,
)
from benchy.measure.request_formulas import (
    server_decode_tps as server_decode_tps,
)
from benchy.measure.request_formulas import (
    server_prefill_tps as server_prefill_tps,
)
from benchy.measure.request_formulas import (
    tokens_per_event as tokens_per_event,
)
from benchy.measure.request_formulas import (
    ttfc_s as ttfc_s,
)
from benchy.measure.request_formulas import (
    ttft_gap_s as ttft_gap_s,
)
from benchy.measure.request_formulas import (
    ttft_s as ttft_s,
)
from benchy.measure.slo import (
    Values as Values,
)
from benchy.measure.slo import (
    goodput as goodput,
)
from benchy.measure.slo import (
    goodput_figures as goodput_figures,
)
from benchy.measure.slo import (
    goodput_rate as goodput_rate,
)
from benchy.measure.slo import (
    meets_slo as meets_slo,
)
from benchy.measure.slo import (
    parse_slo as parse_slo,
)
from benchy.measure.unavailable import (
    BUFFERED as BUFFERED,
)
from benchy.measure.unavailable import (
    BUFFERED_TREND as BUFFERED_TREND,
)
from benchy.measure.unavailable import (
    CLOSED_LOOP as CLOSED_LOOP,
)
from benchy.measure.unavailable import (
    CUT_SHORT as CUT_SHORT,
)
from benchy.measure.unavailable import (
    FIXED_LATENCY as FIXED_LATENCY,
)
from benchy.measure.unavailable import (
    LEGACY as LEGACY,
)
from benchy.measure.unavailable import (
    NO_CACHED_TOKENS as NO_CACHED_TOKENS,
)
from benchy.measure.unavailable import (
    NO_CONTENT_EVENT as NO_CONTENT_EVENT,
)
from benchy.measure.unavailable import (
    NO_FIRST_CHUNK as NO_FIRST_CHUNK,
)
from benchy.measure.unavailable import (
    NO_PROMPT_TOKENS as NO_PROMPT_TOKENS,
)
from benchy.measure.unavailable import (
    NO_REQUEST as NO_REQUEST,
)
from benchy.measure.unavailable import (
    NO_SERVER_TIMINGS as NO_SERVER_TIMINGS,
)
from benchy.measure.unavailable import (
    NO_SUCCESS as NO_SUCCESS,
)
from benchy.measure.unavailable import (
    NO_TEXT_EVENT as NO_TEXT_EVENT,
)
from benchy.measure.unavailable import (
    NOT_FINISHED as NOT_FINISHED,
)
from benchy.measure.unavailable import (
    NOT_MEASURED as NOT_MEASURED,
)
from benchy.measure.unavailable import (
    NOT_STREAMED as NOT_STREAMED,
)
from benchy.measure.unavailable import (
    NOT_STREAMED_WHY as NOT_STREAMED_WHY,
)
from benchy.measure.unavailable import (
    PROMPT_LENGTH_MISSED as PROMPT_LENGTH_MISSED,
)
from benchy.measure.unavailable import (
    QUEUED as QUEUED,
)
from benchy.measure.unavailable import (
    REASON_TITLES as REASON_TITLES,
)
from benchy.measure.unavailable import (
    REQUEST_FAILED as REQUEST_FAILED,
)
from benchy.measure.unavailable import (
    SLO_UNJUDGED as SLO_UNJUDGED,
)
from benchy.measure.unavailable import (
    SOME_REQUESTS as SOME_REQUESTS,
)
from benchy.measure.unavailable import (
    SPECIAL_TOKENS_STRIPPED as SPECIAL_TOKENS_STRIPPED,
)
from benchy.measure.unavailable import (
    THINK_NO_ANSWER as THINK_NO_ANSWER,
)
from benchy.measure.unavailable import (
    THINK_ONLY as THINK_ONLY,
)
from benchy.measure.unavailable import (
    THINK_UNCLOSED as THINK_UNCLOSED,
)
from benchy.measure.unavailable import (
    TOO_FEW_ARRIVALS as TOO_FEW_ARRIVALS,
)
from benchy.measure.unavailable import (
    TOO_FEW_EVENTS as TOO_FEW_EVENTS,
)
from benchy.measure.unavailable import (
    TOO_FEW_SENDS as TOO_FEW_SENDS,
)
from benchy.measure.unavailable import (
    ZERO_WALL_TIME as ZERO_WALL_TIME,
)
from benchy.measure.unavailable import (
    Unavailable as Unavailable,
)

# TTFT that grows with output length by at least this share of the growth in total time, and
# by this much, is a buffer flushing (real TTFT does not depend on the output length).
TTFT_GROWTH_SHARE = 0.25
TTFT_GROWTH_MIN_S = 0.025


def buffered_trend(short: tuple[int, float, float], long: tuple[int, float, float]) -> Unavailable | None:
    """(tg, TTFT median, e2e median) of the shortest and longest output at one prompt and load
    of 1: at a fixed prompt real TTFT does not depend on the output length, while a buffered
    stream's first event waits for a share of the output, so its 'TTFT' grows with it."""
    (tg_short, t_short, e2e_short), (tg_long, t_long, e2e_long) = short, long
    grew, total_grew = t_long - t_short, e2e_long - e2e_short
    if grew < TTFT_GROWTH_MIN_S or total_grew <= 0 or grew < TTFT_GROWTH_SHARE * total_grew:
        return None
    return Unavailable(
        BUFFERED_TREND,
        f"'TTFT' grows with output length at a fixed prompt ({t_short * 1000:,.0f} ms at "
        f"tg{tg_short}, {t_long * 1000:,.0f} ms at tg{tg_long}): the first event waits for "
        "a buffer to flush, so TTFT, inter-token latency, decode and prefill rates are "
        "withheld; end-to-end throughput is still valid",
    )
