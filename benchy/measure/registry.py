"""The registry: every metric's name, unit, display, meaning and source, and the order the
metrics are computed in.

A metric's `depends` names metrics only; what it reads of the record is its `reads`. The
dependencies form a graph whose topological order is computed once, at import (a cycle or a
name that is no metric fails the import). Per request the values are computed in that order
and passed forward: a formula receives the values of the metrics it depends on, and a
dependency that is Unavailable makes its dependents Unavailable for the same reason.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from benchy.measure import reading
from benchy.measure import turn_formulas as turn
from benchy.measure import window_formulas as window
from benchy.measure.case_formulas import achieved_rate, aggregate_output_tps, input_tps, request_rate
from benchy.measure.classify import buffering_reason, is_buffered
from benchy.measure.reading import Reading
from benchy.measure.request_formulas import (
    decode_tps,
    e2e_s,
    e2e_tps,
    first_chunk_lead_s,
    itl_event_s,
    itl_s,
    prefill_tps,
    reasoning_tokens,
    server_decode_tps,
    server_prefill_tps,
    tokens_per_event,
    ttfc_s,
    ttft_gap_s,
    ttft_s,
    ttftc_s,
)
from benchy.measure.unavailable import BUFFERED, NOT_STREAMED_WHY, POOLED_WHY, REQUEST_FAILED, Unavailable
from benchy.records import RequestRecord

REQUEST = "request"  # measured per request, summarized per case (median ± std …)
CASE = "case"  # one figure per case, from all its measured requests
# Figures kept beside a case's own (each in its own entry of results.json, under `stored_as`):
SERVER_WINDOW = "server_window"  # the server's /metrics over the case (server/metrics.py)
GPU_WINDOW = "gpu_window"  # the GPU's counters over the case (measure/gpu.py)
LOOP = "loop"  # benchy's event loop while the case's requests were in flight (load/monitor.py)
TURN = "turn"  # one turn index of a multi-turn case: medians over its requests (measure/workloads.py)
GAIN = "gain"  # a shared-prefix case against the same lengths with nothing shared (measure/workloads.py)
LEVELS = (REQUEST, CASE, SERVER_WINDOW, GPU_WINDOW, LOOP, TURN, GAIN)

# Where a metric's evidence comes from.
CLIENT: Final = "client"  # benchy's own clock and the stream it read
SERVER: Final = "server"  # the server's own account (timings, /metrics)
GPU: Final = "gpu"  # the GPU's counters sampled during the case
WORKLOAD: Final = "workload"  # the shape of the workload (turns of a conversation, a cache's reuse)
CLIENT_HEALTH: Final = "client_health"  # benchy's own health: send lag, event-loop lag
Source: TypeAlias = Literal["client", "server", "gpu", "workload", "client_health"]
SOURCES: tuple[Source, ...] = (CLIENT, SERVER, GPU, WORKLOAD, CLIENT_HEALTH)

# A request formula: (record, its reading, the values of `depends` in order) → value. Its
# arity follows `depends`, so it is typed by the call, not by a fixed signature.
RequestFormula: TypeAlias = Callable[..., "float | Unavailable"]
CaseFormula: TypeAlias = Callable[..., "float | Unavailable"]  # the case's measured records (, tokens)


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
    depends: tuple[str, ...] = ()  # the metrics it is computed from, their values passed to the
    # formula in this order: a metric withheld takes those computed from it along (with_dependents)
    reads: tuple[str, ...] = ()  # the record fields it reads (documentation; never a metric)
    level: str = REQUEST
    formula: RequestFormula | CaseFormula | None = None  # REQUEST level: (record, reading,
    # *depends' values); CASE level: the case's measured records → value | Unavailable;
    # None: computed with more than records (goodput: the SLO)
    source: Source = CLIENT
    stored_as: str = ""  # its key in the entry that holds it, where that is not `name`
    in_table: bool = False  # a column of the results table
    in_compare: bool = False  # compared by `benchy compare`
    glossary: bool = False  # explained in the report's "How to read this report"

    @property
    def key(self) -> str:
        """Its key in the results entry that holds it (results.json's case, its `server`,
        `gpu`, `client` or a turn row)."""
        return self.stored_as or self.name

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


def _stored_time(level: str, source: Source, key: str, title: str, formula: Callable, definition: str) -> Metric:
    """A time of a level kept beside a case's own figures, named `{level}_{key}`, stored as `key`."""
    return _time(
        f"{level}_{key}", title, level=level, source=source, stored_as=key, formula=formula, definition=definition
    )


def _turn_median(key: str, title: str, words: str) -> Metric:
    """One turn index's median of a per-request time."""
    definition = f"the median {words} of one turn index's successful requests"
    return _stored_time(TURN, WORKLOAD, key, title, turn.metric_median(key), definition)


def _request_rate(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="requests/s", scale=1.0, decimals=2, higher_is_better=True, **more)


_PER_CASE = (
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
        depends=("e2e_s",),
        reads=("completion_tokens",),
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
        reads=("token_event_s",),
        formula=ttft_s,
        in_compare=True,
    ),
    _time(
        "ttfc_s",
        "TTFC ms",
        late_only_worsens=True,
        stream_timing=True,
        definition="send → first event carrying content or a tool call (not reasoning)",
        explanation="time to first content: the first token of the answer, after any reasoning.",
        slo="ttfc",
        reads=("token_event_s", "token_event_kinds"),
        formula=ttfc_s,
    ),
    _time(
        "ttftc_s",
        "TTF tool call ms",
        late_only_worsens=True,
        stream_timing=True,
        definition="send → first event of a tool call (its name or arguments)",
        explanation="time to first tool call: when an agent could start running the tool's call.",
        reads=("token_event_s", "token_event_kinds"),
        formula=ttftc_s,
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
        reads=("completion_tokens", "token_event_s", "token_event_text", "token_event_usage", "first_chunk_s"),
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
        depends=("ttft_s",),
        reads=("prompt_tokens", "cached_tokens", "reused_context_tokens"),
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
        reads=("token_event_s", "token_event_text", "token_event_usage", "completion_tokens"),
        formula=itl_s,
    ),
    _time(
        "itl_event_s",
        "ITL/event ms",
        stream_timing=True,
        definition="median gap between arrivals (an event, or a burst of events arriving together): per event",
        explanation="inter-token latency per event, as a reader sees text appear; above ITL per token when "
        "events carry several tokens (speculative decoding, stream intervals).",
        reads=("token_event_s",),
        formula=itl_event_s,
    ),
    _time(
        "e2e_s",
        "total latency ms",
        late_only_worsens=True,
        definition="end of stream − send",
        explanation="the request's total time.",
        slo="e2e",
        reads=("end_s",),
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
        reads=("completion_tokens", "token_event_s"),
        formula=tokens_per_event,
    ),
    _time(
        "first_chunk_lead_s",
        "first-chunk lead ms",
        stream_timing=True,
        definition="TTFT − the first SSE event of any kind (a role-only or empty chunk)",
        explanation="how much sooner than the first token a first chunk came: TTFT timed from that chunk "
        "is this much too low.",
        depends=("ttft_s",),
        reads=("first_chunk_s",),
        formula=first_chunk_lead_s,
    ),
    _time(
        "ttft_gap_s",
        "TTFT gap ms",
        stream_timing=True,
        definition="TTFT − the server's own `timings.prompt_ms` (llama.cpp): what the server's figure leaves out",
        explanation="the part of TTFT the server's own prompt time does not show.",
        depends=("ttft_s",),
        reads=("server_timings",),
        formula=ttft_gap_s,
        source=SERVER,
    ),
    _token_rate(
        "server_prefill_tps",
        "server prefill t/s",
        decimals=0,
        definition="`timings.prompt_n` ÷ `timings.prompt_ms` (llama.cpp): the server's own prefill rate",
        explanation="prefill as the server clocked it, without queueing or HTTP.",
        reads=("server_timings",),
        formula=server_prefill_tps,
        source=SERVER,
    ),
    _token_rate(
        "server_decode_tps",
        "server decode t/s",
        definition="`timings.predicted_n` ÷ `timings.predicted_ms` (llama.cpp): the server's own decode rate",
        explanation="decode as the server clocked it.",
        reads=("server_timings",),
        formula=server_decode_tps,
        source=SERVER,
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
        reads=("reasoning_tokens", "token_event_text", "token_event_kinds", "local_token_scale"),
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
        reads=("completion_tokens", "sent_mono_s", "end_s"),
        formula=aggregate_output_tps,
    ),
    _token_rate(
        "input_tps",
        "input t/s",
        level=CASE,
        definition="all prompt tokens (usage) of the successful requests ÷ (last end − first send) of the case, "
        "failed requests included; kept for pooling cases (--endpoint embeddings)",
        explanation="the input a pooling endpoint got through, every input of every request counted.",
        reads=("prompt_tokens", "sent_mono_s", "end_s"),
        formula=input_tps,
    ),
    _request_rate(
        "request_rate",
        "req/s",
        level=CASE,
        definition="successful requests ÷ (last end − first send) of the case, failed requests included",
        reads=("sent_mono_s", "end_s"),
        formula=request_rate,
    ),
    _request_rate(
        "achieved_rate",
        "offered req/s",
        level=CASE,
        definition="(sent requests − 1) ÷ (last send − first send): the arrival rate offered",
        reads=("sent_mono_s",),
        formula=achieved_rate,
    ),
    _time(
        "send_lag_s",
        "send lag ms",
        level=CASE,
        definition="(open loop) actual send − scheduled send of a request: client-side queue delay",
        reads=("sent_mono_s", "scheduled_mono_s"),
        source=CLIENT_HEALTH,
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
        reads=("status", "slo"),
    ),
    _request_rate(
        "goodput_rate",
        "goodput req/s",
        level=CASE,
        definition="requests that succeeded and met every `--slo` target ÷ (last end − first send) of the case, failed requests included",
        depends=("goodput", "request_rate"),
    ),
)


def _share(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="fraction", scale=100.0, decimals=0, **more)


def _count(name: str, title: str, **more: Any) -> Metric:
    return Metric(name, title, unit="tokens", scale=1.0, decimals=0, higher_is_better=False, **more)


def _ms(name: str, title: str, **more: Any) -> Metric:
    """Stored in milliseconds (benchy's own loop lag); lower is better."""
    return Metric(name, title, unit="ms", scale=1.0, decimals=3, higher_is_better=False, **more)


# The server's histograms whose means are metrics, each kept as its histogram's `mean` in the
# case's `server` entry: (histogram, title, words).
SERVER_HISTOGRAMS = (
    ("ttft_s", "server TTFT ms", "TTFT"),
    ("queue_s", "server queue ms", "queue-time"),
    ("prefill_s", "server prefill ms", "prefill-time"),
    ("decode_s", "server decode ms", "decode-time"),
    ("inference_s", "server inference ms", "inference-time"),
    ("e2e_s", "server latency ms", "end-to-end latency"),
)

# Figures beside a case's own: where they come from, and how each derived one is made.
_BESIDE = (
    Metric(
        "server_window_requests",
        "server requests",
        unit="requests",
        scale=1.0,
        decimals=0,
        higher_is_better=True,
        level=SERVER_WINDOW,
        source=SERVER,
        stored_as="requests",
        definition="requests the server counted finishing during the case (its e2e latency histogram, else its request counter)",
    ),
    _share(
        "server_window_cache_hit_rate",
        "server cache hit rate",
        higher_is_better=True,
        level=SERVER_WINDOW,
        source=SERVER,
        stored_as="cache_hit_rate",
        formula=window.server_cache_hit_rate,
        definition="prefix-cache hit tokens ÷ prompt tokens looked up in the cache, over the case (the server's counters)",
    ),
    _token_rate(
        "server_window_prefill_tps",
        "server prefill t/s (/metrics)",
        decimals=0,
        level=SERVER_WINDOW,
        source=SERVER,
        stored_as="prefill_tps",
        formula=window.server_window_prefill_tps,
        definition="(prompt tokens − prefix-cache hits) ÷ the server's prefill seconds over the case (llama.cpp's "
        "prompt-seconds counter, else the prefill histogram's sum)",
    ),
    _token_rate(
        "server_window_decode_tps",
        "server decode t/s (/metrics)",
        level=SERVER_WINDOW,
        source=SERVER,
        stored_as="decode_tps",
        formula=window.server_window_decode_tps,
        definition="generated tokens ÷ llama.cpp's decode-seconds counter, else (generated tokens − requests) ÷ the "
        "decode histogram's sum (vLLM's interval starts at each request's first token)",
    ),
    *(
        _stored_time(
            SERVER_WINDOW,
            SERVER,
            key,
            title,
            window.histogram_mean(key),
            f"the mean of the server's {words} histogram over the case (sum ÷ count)",
        )
        for key, title, words in SERVER_HISTOGRAMS
    ),
    Metric(
        "gpu_energy_j",
        "energy J",
        unit="J",
        scale=1.0,
        decimals=0,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="energy_j",
        definition="Σ over GPUs of the energy counter's change over the case, else the integral of the sampled power",
    ),
    Metric(
        "gpu_power_w",
        "power W",
        unit="W",
        scale=1.0,
        decimals=0,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="power_w",
        definition="energy ÷ the sampled window: the average draw of all GPUs over the case",
    ),
    Metric(
        "gpu_bandwidth_gbs",
        "bandwidth GB/s",
        unit="GB/s",
        scale=1.0,
        decimals=0,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="bandwidth_gbs",
        definition="Σ over GPUs of the share of time its memory was active × its peak bandwidth (hardware profile): "
        "the memory bandwidth the case used",
    ),
    Metric(
        "gpu_joules_per_token",
        "J/token",
        unit="J/token",
        scale=1.0,
        decimals=3,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="joules_per_token",
        depends=("gpu_energy_j",),
        formula=window.joules_per_token,
        definition="energy ÷ output tokens of the case's measured requests",
    ),
    Metric(
        "gpu_joules_per_request",
        "J/request",
        unit="J/request",
        scale=1.0,
        decimals=1,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="joules_per_request",
        depends=("gpu_energy_j",),
        formula=window.joules_per_request,
        definition="energy ÷ successful measured requests of the case",
    ),
    Metric(
        "gpu_marginal_joules_per_token",
        "marginal J/token",
        unit="J/token",
        scale=1.0,
        decimals=3,
        higher_is_better=False,
        level=GPU_WINDOW,
        source=GPU,
        stored_as="marginal_joules_per_token",
        depends=("gpu_energy_j",),
        formula=window.marginal_joules_per_token,
        definition="(energy − idle power sampled before the run × window) ÷ output tokens: what the load cost "
        "above idling",
    ),
    *(
        _ms(
            f"loop_lag_ms_{which}",
            f"loop lag {which} ms",
            level=LOOP,
            source=CLIENT_HEALTH,
            formula=formula,
            definition=f"the {words} of how late benchy's event-loop sampler woke, over the samples taken while a "
            "request was in flight: the delay any timestamp taken then could have suffered",
        )
        for which, words, formula in (
            ("max", "largest", window.loop_lag_ms_max),
            ("p99", "99th percentile", window.loop_lag_ms_p99),
            ("p95", "95th percentile", window.loop_lag_ms_p95),
            ("median", "median", window.loop_lag_ms_median),
        )
    ),
    _share(
        "stalled_share",
        "stalled share",
        higher_is_better=False,
        level=LOOP,
        source=CLIENT_HEALTH,
        formula=window.stalled_share,
        definition="the in-flight time benchy's event loop spent in stalls of 10 ms or more ÷ the in-flight time",
    ),
    Metric(
        "cpu_share",
        "client CPU share",
        unit="cores",
        scale=1.0,
        decimals=3,
        higher_is_better=False,
        level=LOOP,
        source=CLIENT_HEALTH,
        formula=window.cpu_share,
        definition="benchy's process CPU time ÷ wall time while requests were in flight (1.0: one core busy)",
    ),
    _turn_median("ttft_s", "turn TTFT ms", "TTFT"),
    _turn_median("ttftc_s", "turn TTF tool call ms", "time to first tool call"),
    _token_rate(
        "turn_prefill_tps",
        "turn prefill t/s",
        decimals=0,
        level=TURN,
        source=WORKLOAD,
        stored_as="prefill_tps",
        formula=turn.metric_median("prefill_tps"),
        definition="the median prefill rate (new tokens ÷ TTFT) of one turn index's successful requests",
    ),
    _time(
        "turn_e2e_s",
        "turn latency ms",
        level=TURN,
        source=WORKLOAD,
        stored_as="e2e_s",
        formula=turn.metric_median("e2e_s"),
        definition="the median total latency of one turn index's successful requests",
    ),
    *(
        _count(
            f"turn_{key}",
            f"turn {words}",
            level=TURN,
            source=WORKLOAD,
            stored_as=key,
            formula=formula,
            definition=f"the median {words} of one turn index's successful requests",
        )
        for key, words, formula in (
            ("prompt_tokens", "prompt tokens", turn.prompt_tokens),
            ("new_tokens", "new (uncached) prompt tokens", turn.new_tokens),
            ("cached_tokens", "cached tokens reported", turn.cached_tokens),
            ("expected_cached_tokens", "cached tokens expected (the history)", turn.expected_cached_tokens),
        )
    ),
    _time(
        "turn_cold_ttft_s",
        "cold TTFT ms",
        level=TURN,
        source=WORKLOAD,
        stored_as="cold_ttft_s",
        formula=turn.cold_ttft_s,
        definition="(--cold-baseline) the median TTFT of the same prompt length with nothing shared",
    ),
    Metric(
        "turn_ttft_gain",
        "turn TTFT gain",
        unit="×",
        scale=1.0,
        decimals=2,
        higher_is_better=True,
        level=TURN,
        source=WORKLOAD,
        stored_as="ttft_gain",
        depends=("turn_cold_ttft_s", "turn_ttft_s"),
        formula=window.ttft_speedup,
        definition="cold TTFT ÷ the turn's TTFT (medians)",
    ),
    _time(
        "gain_baseline_ttft_s",
        "baseline TTFT ms",
        level=GAIN,
        source=WORKLOAD,
        stored_as="baseline_ttft_s",
        definition="the median TTFT of the case with the same lengths, load and endpoint and nothing shared",
    ),
    _time(
        "gain_ttft_s",
        "shared TTFT ms",
        level=GAIN,
        source=WORKLOAD,
        stored_as="ttft_s",
        definition="the median TTFT of a shared-prefix case",
    ),
    Metric(
        "ttft_speedup",
        "TTFT speed-up",
        unit="×",
        scale=1.0,
        decimals=2,
        higher_is_better=True,
        level=GAIN,
        source=WORKLOAD,
        stored_as="speedup",
        depends=("gain_baseline_ttft_s", "gain_ttft_s"),
        formula=window.ttft_speedup,
        definition="baseline TTFT ÷ the shared-prefix case's TTFT (medians)",
    ),
    _share(
        "ttft_saved",
        "TTFT saved",
        higher_is_better=True,
        level=GAIN,
        source=WORKLOAD,
        depends=("gain_baseline_ttft_s", "gain_ttft_s"),
        formula=window.ttft_saved,
        definition="1 − the shared-prefix case's TTFT ÷ the baseline TTFT (medians)",
    ),
)
_REGISTRY = _PER_CASE + _BESIDE


def computing_order(registry: Sequence[Metric]) -> tuple[Metric, ...]:
    """The metrics in an order where each comes after every metric it depends on (registry
    order among those free to go). Raises ValueError on a name that is no metric, a metric
    named twice, or a cycle: the registry is checked once, at import."""
    by_name = {m.name: m for m in registry}
    if len(by_name) != len(registry):
        raise ValueError("metric registry: a metric is named twice")
    for m in registry:
        unknown = [d for d in m.depends if d not in by_name]
        if unknown:
            raise ValueError(f"metric registry: {m.name} depends on {', '.join(unknown)}, which is no metric")
    sorter = graphlib.TopologicalSorter({m.name: m.depends for m in registry})
    try:
        names = tuple(sorter.static_order())
    except graphlib.CycleError as cycle:
        raise ValueError(f"metric registry: a dependency cycle: {' → '.join(cycle.args[1])}") from None
    return tuple(by_name[name] for name in names)


ORDER = computing_order(_REGISTRY)
METRICS: dict[str, Metric] = {m.name: m for m in _REGISTRY}
REQUEST_METRICS = tuple(m.name for m in _REGISTRY if m.level == REQUEST)  # summarized per case
STREAM_TIMING_METRICS = tuple(m.name for m in _REGISTRY if m.stream_timing)
TABLE_METRICS = tuple(m for m in _REGISTRY if m.in_table)
COMPARE_METRICS = tuple(m for m in _REGISTRY if m.in_compare)
SLO_METRICS = {m.slo: m for m in _REGISTRY if m.slo}  # --slo name → metric
CASE_FORMULA_METRICS = tuple(m.name for m in _REGISTRY if m.level == CASE and m.formula is not None)
_REQUEST_ORDER = tuple((m.name, m.depends, m.formula) for m in ORDER if m.level == REQUEST and m.formula)
_CASE_ORDER = tuple((m.name, m.formula) for m in ORDER if m.level == CASE and m.formula)
_ORDERS = {
    level: tuple((m.name, m.depends, m.formula) for m in ORDER if m.level == level and m.formula) for level in LEVELS
}


def of_level(level: str) -> tuple[Metric, ...]:
    """The registry's metrics of one level, in registry order."""
    return tuple(m for m in _REGISTRY if m.level == level)


def compute(level: str, given: object, base: Mapping[str, float | Unavailable]) -> dict[str, float | Unavailable]:
    """Every metric of `level` with a formula, in the registry's order: `base` holds the values
    measured rather than derived (a GPU's energy), `given` what the formulas read (an
    EnergyWindow); each formula gets `given` and the values it depends on, and a dependency
    that is Unavailable makes its dependents Unavailable for the same reason. Returns `base`
    with the derived values added."""
    values = dict(base)
    for name, depends, formula in _ORDERS[level]:
        deps = [values[d] for d in depends]
        missing = next((v for v in deps if isinstance(v, Unavailable)), None)
        values[name] = missing if missing is not None else formula(given, *deps)
    return values


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
    for name, formula in _CASE_ORDER:
        out[name] = formula(measured, tokens) if formula is aggregate_output_tps else formula(measured)
    return {name: out[name] for name in CASE_FORMULA_METRICS}


PerRequest = dict[str, dict[str, "float | Unavailable"]]  # request_id → its metrics, computed once


def computed(rec: RequestRecord, read: Reading) -> dict[str, float | Unavailable]:
    """Every per-request metric of one request, each computed once in the registry's order
    with the values it depends on passed forward; keyed in registry order."""
    values: dict[str, float | Unavailable] = {}
    for name, depends, formula in _REQUEST_ORDER:
        given = [values[d] for d in depends]
        missing = next((v for v in given if isinstance(v, Unavailable)), None)
        values[name] = missing if missing is not None else formula(rec, read, *given)
    return {name: values[name] for name in REQUEST_METRICS}


def request_metrics(
    rec: RequestRecord, buffered: Unavailable | Literal[False] | None = None, read: Reading | None = None
) -> dict[str, float | Unavailable]:
    """Every per-request metric of one request. Stream-timing metrics are Unavailable when the
    stream is buffered: by the case's verdict when given (`buffered`: case_buffering's reason,
    or False for a live case), else by this request's own evidence. `read`: the record's
    reading where the caller holds it for more than its metrics."""
    if not rec.ok:
        failed = Unavailable(REQUEST_FAILED, f"request failed ({rec.error_kind})")
        return {name: failed for name in REQUEST_METRICS}
    read = read or reading.read(rec)
    values = computed(rec, read)
    if buffered is None and is_buffered(rec, read):
        buffered = Unavailable(BUFFERED, buffering_reason(rec, read))
    if buffered:
        values.update({name: buffered for name in STREAM_TIMING_METRICS})
    if not rec.streamed:
        values.update({name: NOT_STREAMED_WHY for name in STREAM_TIMING_METRICS})
    if rec.inputs is not None:  # a pooling request: only its latency is a figure
        values.update({name: POOLED_WHY for name in REQUEST_METRICS if name != "e2e_s"})
    return values
