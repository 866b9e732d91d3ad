"""Per-request formulas: one request's record, its reading and the values of the metrics it
depends on (the registry's `depends`, in that order) → one value or Unavailable (notation:
metrics.py). A formula never calls another: the registry computes each metric once, in
dependency order, and passes the values forward; a dependency that is Unavailable makes its
dependents Unavailable for the same reason before their formula runs."""

from __future__ import annotations

from benchy.measure import delivery, evidence, images, reading
from benchy.measure.reading import Reading
from benchy.measure.unavailable import (
    NO_CACHED_TOKENS,
    NO_CONTENT_EVENT,
    NO_FIRST_CHUNK,
    NO_PROMPT_TOKENS,
    NO_SERVER_TIMINGS,
    NO_TEXT_EVENT,
    NO_TOOL_CALL,
    NOT_FINISHED,
    PROMPT_LENGTH_MISSED,
    SPECIAL_TOKENS_STRIPPED,
    THINK_NO_ANSWER,
    THINK_UNCLOSED,
    TOO_FEW_ARRIVALS,
    Unavailable,
)
from benchy.records import Anomaly
from benchy.records.plan import Tagged


def completion_tokens(rec: Tagged) -> int:
    """The count the figures use (reading.py): usage when the events or the local count of the
    streamed text confirm it; else the events where the text shows one token each; else the
    local count × calibration scale (an estimate); else the events (a floor)."""
    return reading.read(rec).count.tokens


def tokens_per_event(rec: Tagged, read: Reading) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable(NO_TEXT_EVENT, "no event carried generated text")
    return read.count.tokens / len(rec.token_event_s)


def e2e_s(rec: Tagged, read: Reading) -> float | Unavailable:
    if rec.end_s is None or rec.end_s <= 0:
        return Unavailable(NOT_FINISHED, "request did not finish")
    return rec.end_s


def e2e_tps(rec: Tagged, read: Reading, total_s: float) -> float | Unavailable:
    return read.count.tokens / total_s


def ttft_s(rec: Tagged, read: Reading) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable(NO_TEXT_EVENT, "no event carried generated text")
    return rec.token_event_s[0]


def ttfc_s(rec: Tagged, read: Reading) -> float | Unavailable:
    if Anomaly.SPECIAL_TOKENS_STRIPPED in rec.anomalies:
        return Unavailable(
            SPECIAL_TOKENS_STRIPPED,
            "the response came back as Harmony text without its special tokens, so reasoning and "
            "answer cannot be told apart",
        )
    first = read.first_content_event  # an inline <think> block is reasoning
    if first < 0:
        if read.think.opened and not read.think.closed:
            return Unavailable(THINK_UNCLOSED, "the <think> block never closed: every token was reasoning")
        if read.think.opened:  # </think> was the last token: the answer never started either
            return Unavailable(THINK_NO_ANSWER, "the <think> block closed with the last token: no answer followed")
        return Unavailable(NO_CONTENT_EVENT, "no content token arrived (empty or reasoning-only output)")
    return rec.token_event_s[first]


def ttftc_s(rec: Tagged, read: Reading) -> float | Unavailable:
    """Time to the first tool call: the first event of a call's name or arguments."""
    first = read.first_tool_event
    if first < 0:
        return Unavailable(NO_TOOL_CALL, "no tool call arrived")
    return rec.token_event_s[first]


def decode_tps(rec: Tagged, read: Reading) -> float | Unavailable:
    rate = delivery.decode_rate(read.arrivals)
    if rate is None:
        return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals: no decode interval to measure")
    return rate


def prefill_tps(rec: Tagged, read: Reading, first: float) -> float | Unavailable:
    if rec.prompt_tokens is None:
        return Unavailable(NO_PROMPT_TOKENS, "server reported no prompt token count")
    text = images.text_tokens(rec)  # with images: the text's part, where the server told it apart
    if (
        rec.target_prompt_tokens
        and text is not None
        and evidence.prompt_length_missed(rec.target_prompt_tokens, text, rec.prompt_slack)
    ):
        way = "more" if text > rec.target_prompt_tokens else "fewer"
        window = evidence.history_window(rec.turn, rec.control, rec.target_prompt_tokens, rec.prompt_slack)
        sent = (
            f"the {rec.target_prompt_tokens} sent"
            if window is None
            else "its history could make ({}-{})".format(*window)
        )
        return Unavailable(
            PROMPT_LENGTH_MISSED,
            f"the server counted {text} prompt tokens, {way} than {sent}: a prefill rate of another prompt than the row's",
        )
    if rec.reused_context_tokens and rec.cached_tokens is None:
        # Counting the reused context as prefilled would inflate the rate by depth / pp.
        return Unavailable(
            NO_CACHED_TOKENS,
            "server reported no cached_tokens, so the new tokens of a request reusing a cached context are unknown",
        )
    return (rec.prompt_tokens - (rec.cached_tokens or 0)) / first


def itl_s(rec: Tagged, read: Reading) -> float | Unavailable:
    value = delivery.itl_per_token(read.arrivals)
    return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals") if value is None else value


def itl_event_s(rec: Tagged, read: Reading) -> float | Unavailable:
    value = delivery.itl_per_arrival(read.arrivals)
    return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals") if value is None else value


def reasoning_tokens(rec: Tagged, read: Reading) -> float | Unavailable:
    value = read.reasoning_tokens
    return 0.0 if value is None else value


def first_chunk_lead_s(rec: Tagged, read: Reading, first: float) -> float | Unavailable:
    """TTFT minus the first SSE event of any kind: how far a role-only or empty first chunk ran
    ahead of the first token (what a tool that times the first chunk leaves out of TTFT)."""
    if rec.first_chunk_s is None:
        return Unavailable(NO_FIRST_CHUNK, "no SSE event was timed")
    return first - rec.first_chunk_s


def ttft_gap_s(rec: Tagged, read: Reading, first: float) -> float | Unavailable:
    """TTFT minus the server's own prompt time (llama.cpp's `timings.prompt_ms`): what the
    server's figure leaves out (HTTP, queueing, cache restores, the first decode step)."""
    prompt_ms = (rec.server_timings or {}).get("prompt_ms")
    if not isinstance(prompt_ms, (int, float)):
        return Unavailable(NO_SERVER_TIMINGS, "the server reports no timings.prompt_ms (llama.cpp does)")
    return first - prompt_ms / 1000


def server_prefill_tps(rec: Tagged, read: Reading) -> float | Unavailable:
    """The server's own prefill rate from its per-response timings (llama.cpp)."""
    return _timings_rate(rec, "prompt_n", "prompt_ms")


def server_decode_tps(rec: Tagged, read: Reading) -> float | Unavailable:
    """The server's own decode rate from its per-response timings (llama.cpp)."""
    return _timings_rate(rec, "predicted_n", "predicted_ms")


def _timings_rate(rec: Tagged, count: str, ms: str) -> float | Unavailable:
    timings = rec.server_timings or {}
    n, elapsed = timings.get(count), timings.get(ms)
    if not isinstance(n, (int, float)) or not isinstance(elapsed, (int, float)) or elapsed <= 0:
        return Unavailable(NO_SERVER_TIMINGS, f"the server reports no timings.{count} / {ms} (llama.cpp does)")
    return 1000 * n / elapsed
