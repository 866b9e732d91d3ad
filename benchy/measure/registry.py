"""The registry: every metric's name, unit, display, meaning and source, and the order the
metrics are computed in.

A metric's `depends` names metrics only; what it reads of the record is its `reads`. The
dependencies form a graph whose topological order is computed once, at import (a cycle or a
name that is no metric fails the import). Per request the values are computed in that order
and passed forward: a formula receives the values of the metrics it depends on, and a
dependency that is Unavailable makes its dependents Unavailable for the same reason.

A case's own metrics are written here; what a metric is (measure/metric.py) and the figures kept
beside a case's (measure/beside.py) have modules of their own, joined here into one registry.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal

from benchy.measure import reading
from benchy.measure.beside import BESIDE
from benchy.measure.beside import SERVER_HISTOGRAMS as SERVER_HISTOGRAMS  # (re-exported: views read it here)
from benchy.measure.case_formulas import achieved_rate, aggregate_output_tps, input_rate, input_tps, request_rate
from benchy.measure.classify import buffering_reason, is_buffered
from benchy.measure.metric import CASE as CASE  # the metric's vocabulary, re-exported: importers read it here
from benchy.measure.metric import (
    CLIENT_HEALTH,
    LEVELS,
    _request_rate,
    _time,
    _token_rate,
)
from benchy.measure.metric import GAIN as GAIN
from benchy.measure.metric import GPU_WINDOW as GPU_WINDOW
from benchy.measure.metric import LOOP as LOOP
from benchy.measure.metric import REQUEST as REQUEST
from benchy.measure.metric import SERVER as SERVER
from benchy.measure.metric import SERVER_WINDOW as SERVER_WINDOW
from benchy.measure.metric import SOURCES as SOURCES
from benchy.measure.metric import TURN as TURN
from benchy.measure.metric import Metric as Metric
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
from benchy.records.plan import Tagged

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
        "input_rate",
        "inputs/s",
        level=CASE,
        definition="inputs of the successful requests (embeddings inputs, rerank documents) ÷ (last end − first "
        "send) of the case, failed requests included; kept for pooling cases (--endpoint embeddings, rerank)",
        reads=("inputs", "sent_mono_s", "end_s"),
        formula=input_rate,
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


_REGISTRY = _PER_CASE + BESIDE


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
    measured: list[Tagged], tokens: Callable[[Tagged], int] | None = None
) -> dict[str, float | Unavailable]:
    """Every case-level metric the registry computes from the case's measured records alone.
    `tokens`: each request's completion count, where the records no longer hold their streams
    (results/build.py's rows)."""
    out: dict[str, float | Unavailable] = {}
    for name, formula in _CASE_ORDER:
        out[name] = formula(measured, tokens) if formula is aggregate_output_tps else formula(measured)
    return {name: out[name] for name in CASE_FORMULA_METRICS}


PerRequest = dict[str, dict[str, "float | Unavailable"]]  # request_id → its metrics, computed once


def computed(rec: Tagged, read: Reading) -> dict[str, float | Unavailable]:
    """Every per-request metric of one request, each computed once in the registry's order
    with the values it depends on passed forward; keyed in registry order."""
    values: dict[str, float | Unavailable] = {}
    for name, depends, formula in _REQUEST_ORDER:
        given = [values[d] for d in depends]
        missing = next((v for v in given if isinstance(v, Unavailable)), None)
        values[name] = missing if missing is not None else formula(rec, read, *given)
    return {name: values[name] for name in REQUEST_METRICS}


def request_metrics(
    rec: Tagged, buffered: Unavailable | Literal[False] | None = None, read: Reading | None = None
) -> dict[str, float | Unavailable]:
    """Every per-request metric of one request. Stream-timing metrics are Unavailable when the
    stream is buffered: by the case's verdict when given (`buffered`: results/findings.BufferedStreams' reason,
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
