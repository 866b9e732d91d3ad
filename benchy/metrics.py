"""Every per-request metric, defined once. Nothing else in benchy computes a metric.

Notation for one request (times in seconds, relative to the moment it was sent):
  t_end        end of the response stream
  t_1 … t_m    arrival times of the m SSE events that carried generated text
               (reasoning or content; a role-only or empty chunk is not a token)
  N            completion tokens, from the server's `usage` (see `completion_tokens`)
  k_1          tokens carried by the first text event ≈ N × chars(event 1) / chars(all)
  P, C         prompt tokens and cached prompt tokens, from the server's `usage`

  e2e_s        = t_end                                   end-to-end latency
  e2e_tps      = N / t_end                               end-to-end throughput (the headline:
                                                         valid however the stream is chunked)
  ttft_s       = t_1                                     time to first token
  ttfc_s       = t_j, j the first content event          time to first content (non-reasoning) token
  decode_tps   = (N − k_1) / (t_m − t_1)                 decode rate after the first token
  prefill_tps  = (P − C) / t_1                           uncached prompt tokens per second of TTFT
                                                         (TTFT also holds queueing and one decode
                                                         step, so this is a floor on prefill speed)
  itl_s        = median over i of (t_i − t_{i−1}) / k_i  inter-token latency
  tokens_per_event = N / m                               stream granularity

When the server buffers its stream (tokens_per_event above BUFFERED_TOKENS_PER_EVENT), the event
times measure the buffer flushing, not the model: ttft_s, ttfc_s, decode_tps, prefill_tps and
itl_s are then `Unavailable`, with the reason. e2e_s and e2e_tps stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchy.records import CONTENT, RequestRecord

# vLLM merges 2-3 tokens into one event under load; beyond this the stream is buffered.
BUFFERED_TOKENS_PER_EVENT = 4.0

STREAM_TIMING_METRICS = ("ttft_s", "ttfc_s", "decode_tps", "prefill_tps", "itl_s")
ALL_METRICS = ("e2e_tps", "e2e_s") + STREAM_TIMING_METRICS + ("tokens_per_event",)


@dataclass(frozen=True)
class Unavailable:
    reason: str



def completion_tokens(rec: RequestRecord) -> int:
    """The server's usage count; without usage, the number of text events, which is a lower
    bound (every event carries at least one token), so rates are never inflated."""
    if rec.completion_tokens is not None:
        return rec.completion_tokens
    return len(rec.token_event_s)


def tokens_per_event(rec: RequestRecord) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable("no event carried generated text")
    return completion_tokens(rec) / len(rec.token_event_s)


def is_buffered(rec: RequestRecord) -> bool:
    tpe = tokens_per_event(rec)
    return not isinstance(tpe, Unavailable) and tpe > BUFFERED_TOKENS_PER_EVENT


def buffering_reason(rec: RequestRecord) -> str:
    return (f"SSE buffering: {completion_tokens(rec)} tokens arrived in "
            f"{len(rec.token_event_s)} events, so event times measure the buffer, not the model")


def e2e_s(rec: RequestRecord) -> float | Unavailable:
    if rec.end_s is None or rec.end_s <= 0:
        return Unavailable("request did not finish")
    return rec.end_s


def e2e_tps(rec: RequestRecord) -> float | Unavailable:
    total = e2e_s(rec)
    if isinstance(total, Unavailable):
        return total
    return completion_tokens(rec) / total


def ttft_s(rec: RequestRecord) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable("no event carried generated text")
    return rec.token_event_s[0]


def ttfc_s(rec: RequestRecord) -> float | Unavailable:
    first = rec.token_event_kinds.find(CONTENT)
    if first < 0:
        return Unavailable("no content token arrived (empty or reasoning-only output)")
    return rec.token_event_s[first]


def first_event_tokens(rec: RequestRecord) -> float:
    total_chars = sum(rec.token_event_chars)
    if total_chars <= 0:
        return 1.0
    return completion_tokens(rec) * rec.token_event_chars[0] / total_chars


def decode_tps(rec: RequestRecord) -> float | Unavailable:
    times = rec.token_event_s
    if len(times) < 2 or times[-1] <= times[0]:
        return Unavailable("fewer than two text events: no decode interval to measure")
    return (completion_tokens(rec) - first_event_tokens(rec)) / (times[-1] - times[0])


def prefill_tps(rec: RequestRecord) -> float | Unavailable:
    first = ttft_s(rec)
    if isinstance(first, Unavailable):
        return first
    if rec.prompt_tokens is None:
        return Unavailable("server reported no prompt token count")
    return (rec.prompt_tokens - (rec.cached_tokens or 0)) / first


def itl_s(rec: RequestRecord) -> float | Unavailable:
    times = rec.token_event_s
    if len(times) < 2:
        return Unavailable("fewer than two text events")
    tokens_per_char = completion_tokens(rec) / max(1, sum(rec.token_event_chars))
    gaps = np.diff(np.asarray(times))
    tokens = np.maximum(1.0, np.asarray(rec.token_event_chars[1:]) * tokens_per_char)
    return float(np.median(gaps / tokens))


_FORMULAS = {
    "e2e_tps": e2e_tps, "e2e_s": e2e_s, "ttft_s": ttft_s, "ttfc_s": ttfc_s,
    "decode_tps": decode_tps, "prefill_tps": prefill_tps, "itl_s": itl_s,
    "tokens_per_event": tokens_per_event,
}


def request_metrics(rec: RequestRecord) -> dict[str, float | Unavailable]:
    """Every metric of one request; stream-timing metrics are Unavailable when buffered."""
    if not rec.ok:
        reason = Unavailable(f"request failed ({rec.error_kind})")
        return {name: reason for name in ALL_METRICS}
    values = {name: formula(rec) for name, formula in _FORMULAS.items()}
    if is_buffered(rec):
        reason = Unavailable(buffering_reason(rec))
        values.update({name: reason for name in STREAM_TIMING_METRICS})
    return values


def aggregate_output_tps(records: list[RequestRecord]) -> float | Unavailable:
    """Case-level: all completion tokens of successful requests ÷ (last end − first send),
    over the case's measured requests. The throughput a loaded server delivers."""
    done = [r for r in records if r.ok and r.end_s is not None]
    if not done:
        return Unavailable("no request succeeded")
    start = min(r.sent_mono_s for r in done)
    end = max(r.sent_mono_s + r.end_s for r in done)
    if end <= start:
        return Unavailable("zero wall time")
    return sum(completion_tokens(r) for r in done) / (end - start)
