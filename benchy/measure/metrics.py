"""Every metric, defined once: its formula here, its name, unit, display and meaning in METRICS.

The registry METRICS is the one place a metric is described; the terminal table, CSV rows,
`benchy compare`, `--slo` parsing, the report glossary and the README's metric table are made
from it (tests/test_registry.py checks the README). Nothing else in benchy computes a metric.

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

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from benchy.measure import evidence, reading
from benchy.measure.records import Anomaly, RequestRecord


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

# A few words per code, where a report groups figures by why they are missing.
REASON_TITLES = {
    BUFFERED: "SSE buffering",
    BUFFERED_TREND: "'TTFT' grows with output length",
    NO_TEXT_EVENT: "no text event",
    NO_CONTENT_EVENT: "no content token",
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
}
NOT_STREAMED_WHY = Unavailable(
    NOT_STREAMED,
    "--no-stream: each answer came whole, so no token's arrival was seen (TTFT, inter-token latency and the "
    "decode and prefill rates are stream figures; e2e and output rates stand)",
)

OUTPUT_FAILURES = ("empty_output", "zero_tokens")  # error kinds `classify` gives
# TTFT that grows with output length by at least this share of the growth in total time, and
# by this much, is a buffer flushing (real TTFT does not depend on the output length).
TTFT_GROWTH_SHARE = 0.25
TTFT_GROWTH_MIN_S = 0.025
LIVE_STREAM_TOKENS_PER_EVENT = 1.5  # usage showing about one token per event: a live stream


def output_failure(rec: RequestRecord) -> tuple[str, str] | None:
    """(error kind, message) when a request that ended normally delivered no output, else None."""
    if not rec.ok:
        return None
    # usage, else the events: cheap, since this runs as each request ends, inside the run's loop
    claimed = rec.completion_tokens if rec.completion_tokens is not None else len(rec.token_event_s)
    if claimed == 0:
        said = "completion_tokens 0" if rec.usage_reported else "no text and no usage"
        return "zero_tokens", f"the server generated nothing ({said}, finish_reason {rec.finish_reason!r})"
    if rec.content_chars == 0 and (rec.reasoning_chars == 0 or rec.content_null_events):
        nulls = f"; {rec.content_null_events} deltas said content: null" if rec.content_null_events else ""
        return "empty_output", f"the server claimed {claimed} completion tokens but sent no content{nulls}"
    return None


def classify(rec: RequestRecord) -> RequestRecord:
    """The record as benchy counts it: an empty or zero-token output is a failed request
    (requests.jsonl keeps the status the client saw; results and --max-errors count this)."""
    failure = output_failure(rec)
    if failure is None:
        return rec
    return dataclasses.replace(rec, status="error", error_kind=failure[0], error=failure[1])


def completion_tokens(rec: RequestRecord) -> int:
    """The count the figures use (reading.py): usage when the events or the local count of the
    streamed text confirm it; else the events where the text shows one token each; else the
    local count × calibration scale (an estimate); else the events (a floor)."""
    return reading.read(rec).count.tokens


def tokens_per_event(rec: RequestRecord) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable(NO_TEXT_EVENT, "no event carried generated text")
    return completion_tokens(rec) / len(rec.token_event_s)


def is_buffered(rec: RequestRecord) -> bool:
    """Decided by timing (evidence.buffering), not by tokens per event alone: speculative
    decoding's multi-token events and bursts no longer than a draft are a live stream. A
    non-streamed answer is no buffered stream: its figures are withheld as not_streamed."""
    return rec.streamed and reading.read(rec).buffering.buffered


def buffering_reason(rec: RequestRecord) -> str:
    return (
        f"SSE buffering: {completion_tokens(rec)} tokens arrived in {len(rec.token_event_s)} events; "
        f"{reading.read(rec).buffering.reason}, so event times measure the buffer, not the model"
    )


def case_buffering(records: list[RequestRecord]) -> Unavailable | None:
    """A case's verdict: buffered (code BUFFERED) when at least half its successful requests
    show it. One request that a busy client read late looks lumpy; a buffer does not pick one
    request in two."""
    ok = [r for r in records if r.ok]
    return buffering_verdict([buffering_reason(r) if is_buffered(r) else None for r in ok])


def buffering_verdict(reasons: list[str | None]) -> Unavailable | None:
    """case_buffering from each successful request's own buffering reason (None: a live
    stream), so that a case's verdict can be reached without holding its records."""
    shown = [r for r in reasons if r is not None]
    if not reasons or 2 * len(shown) < len(reasons):
        return None
    n, of = len(shown), len(reasons)
    return Unavailable(BUFFERED, shown[0] if n == of else f"{n} of {of} requests: {shown[0]}")


def e2e_s(rec: RequestRecord) -> float | Unavailable:
    if rec.end_s is None or rec.end_s <= 0:
        return Unavailable(NOT_FINISHED, "request did not finish")
    return rec.end_s


def e2e_tps(rec: RequestRecord) -> float | Unavailable:
    total = e2e_s(rec)
    if isinstance(total, Unavailable):
        return total
    return completion_tokens(rec) / total


def ttft_s(rec: RequestRecord) -> float | Unavailable:
    if not rec.token_event_s:
        return Unavailable(NO_TEXT_EVENT, "no event carried generated text")
    return rec.token_event_s[0]


def ttfc_s(rec: RequestRecord) -> float | Unavailable:
    if Anomaly.SPECIAL_TOKENS_STRIPPED in rec.anomalies:
        return Unavailable(
            SPECIAL_TOKENS_STRIPPED,
            "the response came back as Harmony text without its special tokens, so reasoning and "
            "answer cannot be told apart",
        )
    read = reading.read(rec)  # an inline <think> block is reasoning
    first = read.first_content_event
    if first < 0:
        if read.think.opened and not read.think.closed:
            return Unavailable(THINK_UNCLOSED, "the <think> block never closed: every token was reasoning")
        if read.think.opened:  # </think> was the last token: the answer never started either
            return Unavailable(THINK_NO_ANSWER, "the <think> block closed with the last token: no answer followed")
        return Unavailable(NO_CONTENT_EVENT, "no content token arrived (empty or reasoning-only output)")
    return rec.token_event_s[first]


def decode_tps(rec: RequestRecord) -> float | Unavailable:
    rate = evidence.decode_rate(reading.read(rec).arrivals)
    if rate is None:
        return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals: no decode interval to measure")
    return rate


def prefill_tps(rec: RequestRecord) -> float | Unavailable:
    first = ttft_s(rec)
    if isinstance(first, Unavailable):
        return first
    if rec.prompt_tokens is None:
        return Unavailable(NO_PROMPT_TOKENS, "server reported no prompt token count")
    if rec.target_prompt_tokens and evidence.prompt_length_missed(
        rec.target_prompt_tokens, rec.prompt_tokens, rec.prompt_slack
    ):
        way = "more" if rec.prompt_tokens > rec.target_prompt_tokens else "fewer"
        return Unavailable(
            PROMPT_LENGTH_MISSED,
            f"the server counted {rec.prompt_tokens} prompt tokens, {way} than the {rec.target_prompt_tokens} "
            "sent: a prefill rate of another prompt than the row's",
        )
    if rec.reused_context_tokens and rec.cached_tokens is None:
        # Counting the reused context as prefilled would inflate the rate by depth / pp.
        return Unavailable(
            NO_CACHED_TOKENS,
            "server reported no cached_tokens, so the new tokens of a request reusing a cached context are unknown",
        )
    return (rec.prompt_tokens - (rec.cached_tokens or 0)) / first


def itl_s(rec: RequestRecord) -> float | Unavailable:
    value = evidence.itl_per_token(reading.read(rec).arrivals)
    return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals") if value is None else value


def itl_event_s(rec: RequestRecord) -> float | Unavailable:
    value = evidence.itl_per_arrival(reading.read(rec).arrivals)
    return Unavailable(TOO_FEW_ARRIVALS, "fewer than two text arrivals") if value is None else value


def reasoning_tokens(rec: RequestRecord) -> float | Unavailable:
    value = reading.read(rec).reasoning_tokens
    return 0.0 if value is None else value


def first_chunk_lead_s(rec: RequestRecord) -> float | Unavailable:
    """TTFT minus the first SSE event of any kind: how far a role-only or empty first chunk ran
    ahead of the first token (what a tool that times the first chunk leaves out of TTFT)."""
    first = ttft_s(rec)
    if isinstance(first, Unavailable):
        return first
    if rec.first_chunk_s is None:
        return Unavailable(NO_FIRST_CHUNK, "no SSE event was timed")
    return first - rec.first_chunk_s


def ttft_gap_s(rec: RequestRecord) -> float | Unavailable:
    """TTFT minus the server's own prompt time (llama.cpp's `timings.prompt_ms`): what the
    server's figure leaves out (HTTP, queueing, cache restores, the first decode step)."""
    first = ttft_s(rec)
    if isinstance(first, Unavailable):
        return first
    prompt_ms = (rec.server_timings or {}).get("prompt_ms")
    if not isinstance(prompt_ms, (int, float)):
        return Unavailable(NO_SERVER_TIMINGS, "the server reports no timings.prompt_ms (llama.cpp does)")
    return first - prompt_ms / 1000


def server_prefill_tps(rec: RequestRecord) -> float | Unavailable:
    """The server's own prefill rate from its per-response timings (llama.cpp)."""
    return _timings_rate(rec, "prompt_n", "prompt_ms")


def server_decode_tps(rec: RequestRecord) -> float | Unavailable:
    """The server's own decode rate from its per-response timings (llama.cpp)."""
    return _timings_rate(rec, "predicted_n", "predicted_ms")


def _timings_rate(rec: RequestRecord, count: str, ms: str) -> float | Unavailable:
    timings = rec.server_timings or {}
    n, elapsed = timings.get(count), timings.get(ms)
    if not isinstance(n, (int, float)) or not isinstance(elapsed, (int, float)) or elapsed <= 0:
        return Unavailable(NO_SERVER_TIMINGS, f"the server reports no timings.{count} / {ms} (llama.cpp does)")
    return 1000 * n / elapsed


# ---- loaded cases (--concurrency, --rate): case-level figures, over the measured requests ----


def send_lag_s(rec: RequestRecord) -> float | Unavailable:
    if rec.scheduled_mono_s is None:
        return Unavailable(CLOSED_LOOP, "closed loop: a request is sent when a slot frees, not on a schedule")
    return rec.sent_mono_s - rec.scheduled_mono_s


def _success_window(records: list[RequestRecord]) -> tuple[list[RequestRecord], float] | Unavailable:
    """The successful requests and the case's wall time: from the first send to the last end of
    any request, failed ones included. The server was busy with a failure too; a window that
    stopped at the last success would leave out the time a late failure held it."""
    done = [r for r in records if r.ok and r.end_s is not None]
    if not done:
        return Unavailable(NO_SUCCESS, "no request succeeded")
    ended = [r for r in records if r.end_s is not None]
    start = min(r.sent_mono_s for r in ended)
    end = max(r.sent_mono_s + (r.end_s or 0.0) for r in ended)
    if end <= start:
        return Unavailable(ZERO_WALL_TIME, "zero wall time")
    return done, end - start


def aggregate_output_tps(
    records: list[RequestRecord], tokens: Callable[[RequestRecord], int] | None = None
) -> float | Unavailable:
    """All completion tokens of successful requests ÷ (last end − first send), over the case's
    measured requests: the throughput a loaded server delivers. `tokens`: each request's count
    where the records no longer hold their streams (default: completion_tokens)."""
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    count = tokens or completion_tokens
    return sum(count(r) for r in done) / seconds


def cut_short(measured: int, planned: int | None) -> Unavailable | None:
    """A case the run stopped inside: its rates cover the ramp-up and miss the rest, so they
    understate what the server delivers over a whole case (a SIGINT at 11 of 12 requests
    showed half the case's t/s). Per-request figures stay, qualified by case_cut_short."""
    if not planned or measured >= planned:
        return None
    return Unavailable(
        CUT_SHORT,
        f"the case was cut short ({measured} of {planned} requests): a rate over part of a case is not the case's rate",
    )


def achieved_rate(records: list[RequestRecord]) -> float | Unavailable:
    sends = sorted(r.sent_mono_s for r in records)
    if len(sends) < 2 or sends[-1] <= sends[0]:
        return Unavailable(TOO_FEW_SENDS, "fewer than two requests sent")
    return (len(sends) - 1) / (sends[-1] - sends[0])


def request_rate(records: list[RequestRecord]) -> float | Unavailable:
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    done, seconds = window
    return len(done) / seconds


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


def meets_slo(values: dict[str, float | Unavailable], slo: dict[str, float]) -> bool | Unavailable:
    """Whether one request's metrics meet every SLO; Unavailable when one cannot be judged."""
    for metric, limit in slo.items():
        value = values[metric]
        if isinstance(value, Unavailable):
            return value
        if (value < limit) if METRICS[metric].higher_is_better else (value > limit):
            return False
    return True


Values = Callable[[RequestRecord], dict[str, "float | Unavailable"]]  # a request's metrics


def _good_requests(
    records: list[RequestRecord],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None,
    values: Values | None = None,
) -> int | Unavailable:
    good = 0
    for rec in records:
        if not rec.ok:
            continue
        verdict = meets_slo(values(rec) if values else request_metrics(rec, buffered), slo)
        if isinstance(verdict, Unavailable):
            return Unavailable(SLO_UNJUDGED, f"cannot judge the SLO: {verdict.message}")
        good += verdict
    return good


def goodput(
    records: list[RequestRecord],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None = None,
    values: Values | None = None,
) -> float | Unavailable:
    """Fraction of the measured requests that succeeded and met every SLO. `buffered`: the case's
    verdict (case_buffering), so each request is judged on the figures its case reports;
    `values`: each request's metrics already made with that verdict (instead of `buffered`)."""
    if not records:
        return Unavailable(NO_REQUEST, "no request was measured")
    good = _good_requests(records, slo, buffered, values)
    if isinstance(good, Unavailable):
        return good
    return good / len(records)


def goodput_rate(
    records: list[RequestRecord],
    slo: dict[str, float],
    buffered: Unavailable | Literal[False] | None = None,
    values: Values | None = None,
) -> float | Unavailable:
    """Requests that succeeded and met every SLO ÷ (last end − first send) of the successful
    ones: the request rate that counts. 0 when none met them."""
    if not records:
        return Unavailable(NO_REQUEST, "no request was measured")
    good = _good_requests(records, slo, buffered, values)
    if isinstance(good, Unavailable) or good == 0:
        return good
    window = _success_window(records)
    if isinstance(window, Unavailable):
        return window
    return good / window[1]


# ------------------------------------------------------------------ the registry

REQUEST = "request"  # measured per request, summarized per case (median ± std …)
CASE = "case"  # one figure per case, from all its measured requests


@dataclass(frozen=True)
class Metric:
    """One metric: everything the table, CSV, compare, --slo and the glossary say about it."""

    name: str  # key in results.json
    title: str  # column and axis title, in display units ("TTFT ms")
    unit: str  # unit of the stored value ("s", "tokens/s", …)
    scale: float  # display value = stored value × scale
    decimals: int  # decimals shown in the table
    higher_is_better: bool
    definition: str  # the formula in one line (README table, report glossary)
    stream_timing: bool = False  # taken from event arrival times: withheld when the stream is buffered
    explanation: str = ""  # what it means, in words (report glossary)
    slo: str | None = None  # name in --slo (ttft=2s)
    late_only_worsens: bool = False  # a late client timestamp can only make it worse (a later
    # TTFT, a longer latency, a lower e2e rate): a value within its SLO holds even when benchy fell behind
    depends: tuple[str, ...] = ()  # the record fields (or metrics) it is computed from: a metric
    # withheld takes those computed from it along (with_dependents)
    level: str = REQUEST
    formula: Callable | None = None  # RequestRecord (REQUEST level) or the case's measured records
    # (CASE level) → value | Unavailable; None: computed with more than records (goodput: the SLO)
    in_table: bool = False  # a column of the results table
    in_compare: bool = False  # compared by `benchy compare`
    glossary: bool = False  # explained in the report's "How to read this report"

    @property
    def summarized(self) -> bool:
        return self.level == REQUEST

    @property
    def is_time(self) -> bool:
        return self.unit == "s"


# Kinds of figure: how each is stored and shown.


def _time(name: str, title: str, **more: Any) -> Metric:
    """Stored in seconds, shown in ms; lower is better."""
    return Metric(name, title, unit="s", scale=1000.0, decimals=1, higher_is_better=False, **more)


def _token_rate(name: str, title: str, decimals: int = 1, **more: Any) -> Metric:
    return Metric(name, title, unit="tokens/s", scale=1.0, decimals=decimals, higher_is_better=True, **more)


def _request_rate(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="requests/s", scale=1.0, decimals=2, higher_is_better=True, **more)


_REGISTRY = (
    _token_rate(
        "e2e_tps",
        "e2e t/s",
        late_only_worsens=True,
        in_table=True,
        glossary=True,
        definition="completion tokens ÷ (end of stream − send)",
        explanation="end-to-end throughput: it holds whatever the server did (queueing, prefill, decode), and "
        "it stays valid however the server chunks its stream. The headline number.",
        slo="e2e_tps",
        depends=("completion_tokens", "end_s"),
        formula=e2e_tps,
        in_compare=True,
    ),
    _time(
        "ttft_s",
        "TTFT ms",
        late_only_worsens=True,
        in_table=True,
        glossary=True,
        stream_timing=True,
        definition="send → first SSE event carrying generated text (a role-only chunk is not a token)",
        explanation="time to first token.",
        slo="ttft",
        depends=("token_event_s",),
        formula=ttft_s,
        in_compare=True,
    ),
    _time(
        "ttfc_s",
        "TTFC ms",
        late_only_worsens=True,
        stream_timing=True,
        definition="send → first event carrying content (not reasoning)",
        explanation="time to first content: the first token of the answer, after any reasoning.",
        slo="ttfc",
        depends=("token_event_s", "token_event_kinds"),
        formula=ttfc_s,
    ),
    _token_rate(
        "decode_tps",
        "decode t/s",
        in_table=True,
        glossary=True,
        stream_timing=True,
        definition="(completion tokens − tokens of the first arrival) ÷ (last arrival − first arrival)",
        explanation="the decode rate after the first token; events arriving together (a burst) are one arrival; "
        "a first token whose role chunk came without text (llama.cpp, a split character) is the first arrival.",
        slo="decode_tps",
        depends=("completion_tokens", "token_event_s", "token_event_text", "token_event_usage", "first_chunk_s"),
        formula=decode_tps,
        in_compare=True,
    ),
    _token_rate(
        "prefill_tps",
        "prefill t/s",
        decimals=0,
        in_table=True,
        glossary=True,
        stream_timing=True,
        definition="(prompt tokens − cached prompt tokens) ÷ TTFT",
        explanation="a floor on prefill speed: TTFT also holds queueing and one decode step.",
        depends=("prompt_tokens", "cached_tokens", "reused_context_tokens", "ttft_s"),
        formula=prefill_tps,
    ),
    _time(
        "itl_s",
        "ITL/token ms",
        stream_timing=True,
        definition="gaps between arrivals ÷ the tokens they carried, (last arrival − first) ÷ tokens after "
        "the first: per token",
        explanation="inter-token latency per token: an event of 4 tokens 20 ms after the last is 5 ms a token, "
        "and a burst of one-token events (llama.cpp speculation) counts as one arrival, not as 0 ms gaps.",
        slo="itl",
        depends=("token_event_s", "token_event_text", "token_event_usage", "completion_tokens"),
        formula=itl_s,
    ),
    _time(
        "itl_event_s",
        "ITL/event ms",
        stream_timing=True,
        definition="median gap between arrivals (an event, or a burst of events arriving together): per event",
        explanation="inter-token latency per event, as a reader sees text appear; above ITL per token when "
        "events carry several tokens (speculative decoding, stream intervals).",
        depends=("token_event_s",),
        formula=itl_event_s,
    ),
    _time(
        "e2e_s",
        "total latency ms",
        late_only_worsens=True,
        definition="end of stream − send",
        explanation="the request's total time.",
        slo="e2e",
        depends=("end_s",),
        formula=e2e_s,
    ),
    Metric(
        "tokens_per_event",
        "tokens/event",
        unit="tokens/event",
        scale=1.0,
        decimals=1,
        higher_is_better=False,
        definition="completion tokens ÷ text events (about 1 on a live stream; more: the server buffers)",
        explanation="stream granularity.",
        depends=("completion_tokens", "token_event_s"),
        formula=tokens_per_event,
    ),
    _time(
        "first_chunk_lead_s",
        "first-chunk lead ms",
        stream_timing=True,
        definition="TTFT − the first SSE event of any kind (a role-only or empty chunk)",
        explanation="how much sooner than the first token a first chunk came: TTFT timed from that chunk "
        "is this much too low.",
        depends=("ttft_s", "first_chunk_s"),
        formula=first_chunk_lead_s,
    ),
    _time(
        "ttft_gap_s",
        "TTFT gap ms",
        stream_timing=True,
        definition="TTFT − the server's own `timings.prompt_ms` (llama.cpp): what the server's figure leaves out",
        explanation="the part of TTFT the server's own prompt time does not show.",
        depends=("ttft_s", "server_timings"),
        formula=ttft_gap_s,
    ),
    _token_rate(
        "server_prefill_tps",
        "server prefill t/s",
        decimals=0,
        definition="`timings.prompt_n` ÷ `timings.prompt_ms` (llama.cpp): the server's own prefill rate",
        explanation="prefill as the server clocked it, without queueing or HTTP.",
        depends=("server_timings",),
        formula=server_prefill_tps,
    ),
    _token_rate(
        "server_decode_tps",
        "server decode t/s",
        definition="`timings.predicted_n` ÷ `timings.predicted_ms` (llama.cpp): the server's own decode rate",
        explanation="decode as the server clocked it.",
        depends=("server_timings",),
        formula=server_decode_tps,
    ),
    Metric(
        "reasoning_tokens",
        "reasoning tokens",
        unit="tokens",
        scale=1.0,
        decimals=0,
        higher_is_better=False,
        definition="usage's reasoning_tokens, else the reasoning events' share of the believed completion "
        "count (reasoning_content, a Harmony analysis channel — also in raw completion text without "
        "`--template harmony` — an inline <think> block; each event weighed by benchy's o200k count of "
        "its text; exact at one token an event)",
        explanation="tokens spent reasoning; exact at one token an event, an estimate otherwise.",
        depends=("reasoning_tokens", "token_event_text", "token_event_kinds", "local_token_scale"),
        formula=reasoning_tokens,
    ),
    _token_rate(
        "aggregate_tps",
        "aggregate t/s",
        level=CASE,
        glossary=True,
        definition="all completion tokens of the successful requests ÷ (last end − first send) of the case, failed requests included",
        explanation="what the server delivered in total, over every request in flight; shown for cases "
        "under load (concurrency > 1, an open loop, a trace replay), withheld for a case the run stopped inside.",
        depends=("completion_tokens", "sent_mono_s", "end_s"),
        formula=aggregate_output_tps,
    ),
    _request_rate(
        "request_rate",
        "req/s",
        level=CASE,
        definition="successful requests ÷ (last end − first send) of the case, failed requests included",
        depends=("sent_mono_s", "end_s"),
        formula=request_rate,
    ),
    _request_rate(
        "achieved_rate",
        "offered req/s",
        level=CASE,
        definition="(sent requests − 1) ÷ (last send − first send): the arrival rate offered",
        depends=("sent_mono_s",),
        formula=achieved_rate,
    ),
    _time(
        "send_lag_s",
        "send lag ms",
        level=CASE,
        definition="(open loop) actual send − scheduled send of a request: client-side queue delay",
        depends=("sent_mono_s", "scheduled_mono_s"),
    ),
    Metric(
        "goodput",
        "goodput",
        unit="fraction",
        scale=100.0,
        decimals=0,
        higher_is_better=True,
        level=CASE,
        definition="requests that succeeded and met every `--slo` target ÷ measured requests",
        depends=("status", "slo"),
    ),
    _request_rate(
        "goodput_rate",
        "goodput req/s",
        level=CASE,
        definition="requests that succeeded and met every `--slo` target ÷ (last end − first send) of the case, failed requests included",
        depends=("goodput", "request_rate"),
    ),
)
METRICS: dict[str, Metric] = {m.name: m for m in _REGISTRY}
REQUEST_METRICS = tuple(m.name for m in _REGISTRY if m.level == REQUEST)  # summarized per case
STREAM_TIMING_METRICS = tuple(m.name for m in _REGISTRY if m.stream_timing)
TABLE_METRICS = tuple(m for m in _REGISTRY if m.in_table)
COMPARE_METRICS = tuple(m for m in _REGISTRY if m.in_compare)
SLO_METRICS = {m.slo: m for m in _REGISTRY if m.slo}  # --slo name → metric
_FORMULAS: dict[str, Callable] = {m.name: m.formula for m in _REGISTRY if m.formula is not None}
CASE_FORMULA_METRICS = tuple(m.name for m in _REGISTRY if m.level == CASE and m.formula is not None)


def with_dependents(names: Iterable[str]) -> tuple[str, ...]:
    """`names` and every metric computed from them, directly or not (by the registry's depends)."""
    found = list(dict.fromkeys(names))
    for name in found:  # grows while it is read: a breadth-first closure
        found += [m.name for m in _REGISTRY if name in m.depends and m.name not in found]
    return tuple(found)


def case_metrics(
    measured: list[RequestRecord], tokens: Callable[[RequestRecord], int] | None = None
) -> dict[str, float | Unavailable]:
    """Every case-level metric the registry computes from the case's measured records alone.
    `tokens`: each request's completion count, where the records no longer hold their streams
    (results/build.py's rows)."""
    out: dict[str, float | Unavailable] = {}
    for name in CASE_FORMULA_METRICS:
        formula = _FORMULAS[name]
        out[name] = formula(measured, tokens) if formula is aggregate_output_tps else formula(measured)
    return out


PerRequest = dict[str, dict[str, "float | Unavailable"]]  # request_id → its metrics, computed once


def request_metrics(
    rec: RequestRecord, buffered: Unavailable | Literal[False] | None = None
) -> dict[str, float | Unavailable]:
    """Every per-request metric of one request. Stream-timing metrics are Unavailable when the
    stream is buffered: by the case's verdict when given (`buffered`: case_buffering's reason,
    or False for a live case), else by this request's own evidence."""
    if not rec.ok:
        failed = Unavailable(REQUEST_FAILED, f"request failed ({rec.error_kind})")
        return {name: failed for name in REQUEST_METRICS}
    values = {name: _FORMULAS[name](rec) for name in REQUEST_METRICS}
    if buffered is None and is_buffered(rec):
        buffered = Unavailable(BUFFERED, buffering_reason(rec))
    if buffered:
        values.update({name: buffered for name in STREAM_TIMING_METRICS})
    if not rec.streamed:
        values.update({name: NOT_STREAMED_WHY for name in STREAM_TIMING_METRICS})
    return values


def parse_slo(text: str) -> dict[str, float]:
    """`ttft=2s,e2e_tps=20` → {"ttft_s": 2.0, "e2e_tps": 20.0}; times take s or ms (default s).
    Raises ValueError with a one-line message."""
    slo: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in SLO_METRICS:
            raise ValueError(f"--slo {part!r}: expected NAME=VALUE with NAME one of {', '.join(SLO_METRICS)}")
        metric = SLO_METRICS[name]
        value = value.strip()
        scale = 1.0
        if metric.is_time and value.endswith("ms"):
            value, scale = value[:-2], 0.001
        elif metric.is_time and value.endswith("s"):
            value = value[:-1]
        try:
            number = float(value) * scale
        except ValueError:
            raise ValueError(f"--slo {part!r}: {value!r} is not a number") from None
        if not 0 < number < float("inf"):
            raise ValueError(f"--slo {part!r}: the threshold must be positive")
        slo[metric.name] = number
    if not slo:
        raise ValueError("--slo: give at least one NAME=VALUE, e.g. ttft=2s,e2e_tps=20")
    return slo
