"""Metrics: the notation every formula uses and the TTFT-trend judgment. The rest lives in its
own module, imported from there:
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
stream — decided by timing (delivery.buffering: a first arrival carrying many tokens, bursts
longer than any speculative draft), for most of a case's requests (results/findings.BufferedStreams) — the event
times measure the buffer flushing, not the model: every stream-timing metric is then
Unavailable with code `buffered`; e2e_s and e2e_tps stay valid.
"""

from __future__ import annotations

from benchy.measure.unavailable import BUFFERED_TREND, Unavailable

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
