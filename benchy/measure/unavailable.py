"""Unavailable: a figure benchy will not report, with a stable reason code (checks and reports
match on the code, never on the message) and words for people."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unavailable:
    """A figure benchy will not report, with a stable reason code and a message for people."""

    code: str
    message: str

    @property
    def reason(self) -> str:
        return self.message


# Reason codes of Unavailable (stable: checks and reports match on them, never on the message).
NOT_FINISHED = "not_finished"
NO_TEXT_EVENT = "no_text_event"
NO_CONTENT_EVENT = "no_content_event"
NO_TOOL_CALL = "no_tool_call"  # no tool call arrived: no time to the first one
TOO_FEW_EVENTS = "too_few_events"  # (files of earlier versions; now TOO_FEW_ARRIVALS)
NO_PROMPT_TOKENS = "no_prompt_tokens"
NO_CACHED_TOKENS = "no_cached_tokens"
NO_SERVER_TIMINGS = "no_server_timings"
NO_FIRST_CHUNK = "no_first_chunk"  # no SSE event was timed before the first token
BUFFERED = "buffered"  # several tokens per event: event times show the buffer
BUFFERED_TREND = "buffered_trend"  # TTFT grows with output length at a fixed prompt (results.py)
REQUEST_FAILED = "request_failed"
NO_SUCCESS = "no_success"
SOME_REQUESTS = "some_requests"  # measurable for only part of the successful requests
ZERO_WALL_TIME = "zero_wall_time"
CLOSED_LOOP = "closed_loop"
TOO_FEW_SENDS = "too_few_sends"
NOT_MEASURED = "not_measured"
NO_REQUEST = "no_request"
SLO_UNJUDGED = "slo_unjudged"
LEGACY = "legacy"  # read from a file written before reason codes existed
SPECIAL_TOKENS_STRIPPED = "special_tokens_stripped"  # Harmony text without its markers
THINK_UNCLOSED = "think_unclosed"  # an inline <think> block that never closed: all reasoning
THINK_NO_ANSWER = "think_no_answer"  # an inline <think> block closed by the last token: no answer after it
THINK_ONLY = (THINK_UNCLOSED, THINK_NO_ANSWER)  # every output token was thought: one verdict, reasoning_only
PROMPT_LENGTH_MISSED = "prompt_length_missed"  # the server counted another prompt length
TOO_FEW_ARRIVALS = "too_few_arrivals"
QUEUED = "queued"  # TTFT under load holds a wait for the server, seen against the same request alone
FIXED_LATENCY = "fixed_latency"  # TTFT holds a fixed part no prompt length explains (results/latency.py)
CUT_SHORT = "cut_short"  # the run stopped before the case sent all it planned: no rate over part of it
NOT_STREAMED = "not_streamed"  # --no-stream: the answer came whole, no token's arrival was seen
NO_ENERGY = "no_energy"  # the GPU samples gave no energy figure for the case
NO_OUTPUT_TOKENS = "no_output_tokens"  # no output token was counted in the case
NO_IDLE_BASELINE = "no_idle_baseline"  # no idle draw was sampled before the run
NO_LOOP_SAMPLE = "no_loop_sample"  # benchy's event loop was not sampled while requests were in flight
NO_SERVER_FIGURE = "no_server_figure"  # the server's /metrics publish nothing to make the figure from
POOLED = "pooled"  # --endpoint embeddings: the server embeds its inputs and generates no token

# A few words per code, where a report groups figures by why they are missing.
REASON_TITLES = {
    BUFFERED: "SSE buffering",
    BUFFERED_TREND: "'TTFT' grows with output length",
    NO_TEXT_EVENT: "no text event",
    NO_CONTENT_EVENT: "no content token",
    NO_TOOL_CALL: "no tool call",
    TOO_FEW_EVENTS: "fewer than two text events",
    NO_PROMPT_TOKENS: "no prompt token count",
    NO_CACHED_TOKENS: "no cached_tokens",
    NO_SERVER_TIMINGS: "no server timings",
    NO_SUCCESS: "no request succeeded",
    SPECIAL_TOKENS_STRIPPED: "Harmony special tokens stripped",
    THINK_UNCLOSED: "<think> never closed",
    THINK_NO_ANSWER: "no answer after </think>",
    PROMPT_LENGTH_MISSED: "prompt truncated or padded",
    TOO_FEW_ARRIVALS: "fewer than two text arrivals",
    QUEUED: "TTFT holds queueing",
    NOT_STREAMED: "not streamed (--no-stream)",
    FIXED_LATENCY: "a fixed latency before the engine",
    POOLED: "a pooling endpoint (no output tokens)",
}
POOLED_WHY = Unavailable(
    POOLED,
    "a pooling endpoint (--endpoint embeddings or rerank): the server reads the inputs and generates no token, "
    "so no output or stream figure "
    "exists (TTFT, inter-token latency, decode and output rates); latency, requests/s and input tokens/s stand",
)
NOT_STREAMED_WHY = Unavailable(
    NOT_STREAMED,
    "--no-stream: each answer came whole, so no token's arrival was seen (TTFT, inter-token latency and the "
    "decode and prefill rates are stream figures; e2e and output rates stand)",
)
