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
                                                         step, so this is a floor on prefill speed;
                                                         unavailable when a request reuses a cached
                                                         --depth context and C is not reported)
  itl_s        = median over i of (t_i − t_{i−1}) / k_i  inter-token latency
  tokens_per_event = N / m                               stream granularity
  ttft_gap_s   = t_1 − prompt_ms / 1000                  TTFT the server's own prompt time leaves
                                                         out (llama.cpp reports `timings.prompt_ms`)

When the server buffers its stream (tokens_per_event above BUFFERED_TOKENS_PER_EVENT), the event
times measure the buffer flushing, not the model: ttft_s, ttfc_s, decode_tps, prefill_tps,
itl_s and ttft_gap_s are then `Unavailable`, with the reason. e2e_s and e2e_tps stay valid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchy.records import CONTENT, RequestRecord

# vLLM merges 2-3 tokens into one event under load; beyond this the stream is buffered.
BUFFERED_TOKENS_PER_EVENT = 4.0

STREAM_TIMING_METRICS = ("ttft_s", "ttfc_s", "decode_tps", "prefill_tps", "itl_s", "ttft_gap_s")
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
    return (
        f"SSE buffering: {completion_tokens(rec)} tokens arrived in "
        f"{len(rec.token_event_s)} events, so event times measure the buffer, not the model"
    )


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
    if rec.reused_context_tokens and rec.cached_tokens is None:
        # Counting the reused context as prefilled would inflate the rate by depth / pp.
        return Unavailable(
            "server reported no cached_tokens, so the new tokens of a request reusing a cached context are unknown"
        )
    return (rec.prompt_tokens - (rec.cached_tokens or 0)) / first


def itl_s(rec: RequestRecord) -> float | Unavailable:
    times = rec.token_event_s
    if len(times) < 2:
        return Unavailable("fewer than two text events")
    tokens_per_char = completion_tokens(rec) / max(1, sum(rec.token_event_chars))
    gaps = np.diff(np.asarray(times))
    tokens = np.maximum(1.0, np.asarray(rec.token_event_chars[1:]) * tokens_per_char)
    return float(np.median(gaps / tokens))


def ttft_gap_s(rec: RequestRecord) -> float | Unavailable:
    """TTFT minus the server's own prompt time (llama.cpp's `timings.prompt_ms`): what the
    server's figure leaves out (HTTP, queueing, cache restores, the first decode step)."""
    first = ttft_s(rec)
    if isinstance(first, Unavailable):
        return first
    prompt_ms = (rec.server_timings or {}).get("prompt_ms")
    if not isinstance(prompt_ms, (int, float)):
        return Unavailable("the server reports no timings.prompt_ms (llama.cpp does)")
    return first - prompt_ms / 1000


_FORMULAS = {
    "e2e_tps": e2e_tps,
    "e2e_s": e2e_s,
    "ttft_s": ttft_s,
    "ttfc_s": ttfc_s,
    "decode_tps": decode_tps,
    "prefill_tps": prefill_tps,
    "itl_s": itl_s,
    "tokens_per_event": tokens_per_event,
    "ttft_gap_s": ttft_gap_s,
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


def _success_window(records: list[RequestRecord]) -> tuple[list[RequestRecord], float] | Unavailable:
    """The successful requests and the wall time from the first one's send to the last one's end."""
    done = [r for r in records if r.ok and r.end_s is not None]
    if not done:
        return Unavailable("no request succeeded")
    start = min(r.sent_mono_s for r in done)
    end = max(r.sent_mono_s + (r.end_s or 0.0) for r in done)
    if end <= start:
        return Unavailable("zero wall time")
    return done, end - start


def aggregate_output_tps(records: list[RequestRecord]) -> float | Unavailable:
    """Case-level: all completion tokens of successful requests ÷ (last end − first send),
    over the case's measured requests. The throughput a loaded server delivers."""
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    return sum(completion_tokens(r) for r in done) / seconds


# ---- loaded cases (--concurrency, --rate): case-level figures, over the measured requests ----
#   send_lag_s    = sent − scheduled                   (open loop) how far behind its schedule a
#                                                      request was sent: client queueing
#                                                      (--max-inflight) or a late event loop
#   achieved_rate = (n − 1) / (last send − first send)  arrival rate actually offered, requests/s
#   request_rate  = n_ok / (last end − first send)      completed requests/s (successful ones)
#   goodput       = requests meeting every SLO ÷ all measured requests (a failed one meets none)


def send_lag_s(rec: RequestRecord) -> float | Unavailable:
    if rec.scheduled_mono_s is None:
        return Unavailable("closed loop: a request is sent when a slot frees, not on a schedule")
    return rec.sent_mono_s - rec.scheduled_mono_s


def achieved_rate(records: list[RequestRecord]) -> float | Unavailable:
    sends = sorted(r.sent_mono_s for r in records)
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return Unavailable("fewer than two requests sent")
    return (len(sends) - 1) / (sends[-1] - sends[0])


def request_rate(records: list[RequestRecord]) -> float | Unavailable:
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    return len(done) / seconds


# SLO name → (metric, True when a request must stay at or below the threshold, is a time).
SLO_METRICS = {
    "ttft": ("ttft_s", True),
    "ttfc": ("ttfc_s", True),
    "e2e": ("e2e_s", True),
    "itl": ("itl_s", True),
    "e2e_tps": ("e2e_tps", False),
    "decode_tps": ("decode_tps", False),
}


def parse_slo(text: str) -> dict[str, float]:
    """`ttft=2s,e2e_tps=20` → {"ttft_s": 2.0, "e2e_tps": 20.0}; times take s or ms (default s).
    Raises ValueError with a one-line message."""
    slo: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SLO_METRICS:
            raise ValueError(f"--slo {part!r}: expected NAME=VALUE with NAME one of {', '.join(SLO_METRICS)}")
        metric, is_time = SLO_METRICS[name]
        value = value.strip()
        scale = 1.0
        if is_time and value.endswith("ms"):
            value, scale = value[:-2], 0.001
        elif is_time and value.endswith("s"):
            value = value[:-1]
        try:
            number = float(value) * scale
        except ValueError:
            raise ValueError(f"--slo {part!r}: {value!r} is not a number") from None
        if not 0 < number < float("inf"):
            raise ValueError(f"--slo {part!r}: the threshold must be positive")
        slo[metric] = number
    if not slo:
        raise ValueError("--slo: give at least one NAME=VALUE, e.g. ttft=2s,e2e_tps=20")
    return slo


def meets_slo(values: dict[str, float | Unavailable], slo: dict[str, float]) -> bool | Unavailable:
    """Whether one request's metrics meet every SLO; Unavailable when one cannot be judged."""
    upper = {metric for metric, is_upper in SLO_METRICS.values() if is_upper}
    for metric, limit in slo.items():
        value = values[metric]
        if isinstance(value, Unavailable):
            return value
        if (value > limit) if metric in upper else (value < limit):
            return False
    return True


def goodput(records: list[RequestRecord], slo: dict[str, float]) -> float | Unavailable:
    """Fraction of the measured requests that succeeded and met every SLO."""
    if not records:
        return Unavailable("no request was measured")
    good = 0
    for rec in records:
        if not rec.ok:
            continue
        verdict = meets_slo(request_metrics(rec), slo)
        if isinstance(verdict, Unavailable):
            return Unavailable(f"cannot judge the SLO: {verdict.reason}")
        good += verdict
    return good / len(records)
