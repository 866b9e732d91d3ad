"""results.json: the one saved form of a run, from which every report is made.

The file is the JSON form of `RunResult` and the classes it holds (Setup, CaseResult, RequestResult,
MetricSummary, Goodput, CheckWarning, …): built once, by build.py, from the records and the metrics,
written and read (files.py) through `to_dict` / `from_dict`. The JSON Schema shipped as
benchy/data/results.schema.json is generated from them (tests/test_schema.py fails when it is stale).

Version policy: the schema id is `benchy/results/MAJOR.MINOR`. A field added is a new MINOR
(older files still load: the field takes its default); a field renamed, removed or changing
meaning is a new MAJOR. `read` takes any minor of its own major, including files that say
`benchy/results/1` (= 1.0), and refuses another major or a newer minor with one line.
  1.0  the first typed version (`benchy/results/1`)
  1.1  unavailable_codes (case and request): the stable code of each unavailable figure;
       setup.server, setup.server_metrics, case.server (issue 17); request local_token_scale
  1.2  cache-aware workloads (issue 18): case kind and workload (benchy/measure/workloads.py);
       request conversation, turn, group, expected_cached_tokens, unique_tokens, control
  1.3  case planned_requests; run not_measured (planned cases without a measured request);
       stopped.by server-gone (issue 16)
  1.4  setup.load.ray and ray_workers_per_node (--ray, issue 19); case.client (a free dict) gains
       per_worker, busiest, clock_uncertainty_s and lost_workers
  1.5  request token_count (the completion count's witnesses: usage, the local count of the
       streamed text, the events; which one the figures use, and why usage was doubted);
       metrics itl_event_s and reasoning_tokens (issue 15)
  1.6  workload turns[].unavailable: a turn withholds what its case withholds, with the reason (issue 22)
  1.7  setup.gpu and case.gpu (--gpu-metrics, issue 28): power, energy, joules per output
       token and per request, utilization, measured memory bandwidth (measure/gpu.py)
  1.8  request token_count is typed (TokenCountEntry) and gains the server's other witnesses
       (predicted_n, per_chunk, server_tokenize), backed_by, disagreed and local_mismatch (issue 23)
  1.9  case queueing (the loaded TTFT against the same prompt alone; prefill_tps withheld with
       code `queued`); request alone (issue 23)
  1.10 setup.cache_reset and case.cache_reset (--cache-reset, issue 24); workload reuse gains
       partial_reuse (hit, partial and missed requests, the replica pattern); case.cache_reuse
  1.11 case.concurrency is null for a trace replay (it was 1: the replay's arrivals set its
       load, not a concurrency; issue 27); a case the run stopped inside has aggregate_tps and
       request_rate null, code cut_short in unavailable
  1.12 every object typed (issue 22): setup.calibration(s) (Calibration, LengthCheck), setup.server
       (ServerIdentity), setup.server_metrics (MetricsStatus), setup.cache_reset and case.cache_reset
       (CacheReset, with calls), setup.dangerous_stops, setup.ceiling.kv_shape, case.client
       (ClientHealth, per_worker WorkerHealth), case.server (ServerCaseMetrics, or NoServerFigures:
       why none), workload spec (WorkloadSpec: a kind's settings only), warning details
       (only the figures its check set; client_overloaded's under `client`);
       request anomalies are codes (records.Anomaly) with their counts apart in anomaly_counts,
       and retried_kind; metric first_chunk_lead_s
  1.13 setup.event_loop: the event loop the requests ran on ('uvloop 0.23.0' or 'asyncio')
  1.14 request local_scale_from_usage: its local count's scale was fitted on usage (no witness on it);
       workload partial_reuse (and its warning's details) cause, miss_idle_min_s, hit_idle_max_s
  1.15 setup.extra_body (--extra-body, secrets as ***); setup.endpoint may be responses or messages;
       request streamed (false: --no-stream, stream-timing figures withheld with code not_streamed)
  1.16 setup.calibration(s).lengths and case.prompt_lengths: how prompt lengths were made
       (server_tokenize | tokenizer_file | server_usage | o200k_calibrated; load/lengths.py, issue 35);
       request prompt_slack: how far the server's prompt count may miss the target (2 where exact)
  1.17 warning details for issue 36's findings (a fixed latency before the engine, drift, a
       router's partial view); prefill_tps withheld with code `fixed_latency`
  1.18 setup.dataset (--dataset: name, sha256, mode, sampling; issue 35); case kind "dataset"
  1.19 summary p90_low, p90_high, p99_low, p99_high (99% order-statistic bounds; a high end absent:
       too few); case from_schedule (open loop: latencies from the intended send); case steady
       (closed loop: the span where every stream was busy, its figures); setup.client_ceiling
       (`benchy selftest`)
  1.20 setup.dataset.lengths: a fitted case's label → how its cuts were counted (its
       case.prompt_lengths too: o200k_calibrated where the cuts are an estimate)
  1.21 warning details: one class per code (results/verdicts/details.py) in place of one class of
       every figure; each warning's details keeps the same keys
  1.22 case.queueing.basis: "ttft_gap_s" where the server timed every prefill (llama.cpp), so
       the wait is judged beyond the server's own prompt time
  1.23 workload.no_reuse (and cache_not_reused's details): miss_idle_min_s, hit_idle_max_s,
       lost_idle_min_s, start_hits, cause ("expiry" when the idle gaps point to a lifetime)
  1.24 setup.receive_stamps: the kernel's arrival stamp of each read (SO_TIMESTAMPNS) or the read's own
  1.25 request local_scale_generated (its local scale fitted on a calibration answer ended by length),
       setup.calibration.output_method "max_tokens"; server_token_mismatch details counted_tokens
  1.26 request tool_chars, tool_calls (tool calls are output: client/tools.py); metric ttftc_s
       (time to first tool call), workload.turns[].ttftc_s; setup.tools, setup.tool_choice; warning
       tool_choice_ignored; case.server counter_resets (added up over every scrape as rate() does),
       several_processes (why the scrapes answer for several processes: counts withheld);
       warnings server_counter_reset, server_several_processes; case.silence (the longest span
       in which no stream mid-answer received anything) and ttft_outside_server details cause,
       silence_s, loop_lag_s (issue 52); workload max_gap_s: an agent trace's idle gaps capped (--max-gap, issue 53); workload
       subagents: the child agents each turn forks (--turns --subagents); request history_reasoning
       (an agent call's new user message makes a last-turn-reasoning template drop earlier reasoning);
       case.sanity: output sanity of the measured answers (benchy/measure/sanity; issue 55), warning
       output_garbage; setup.canary (--canary: fixed prompts, their answers, a passage's perplexity);
       setup.ceiling stated_hardware and gpu_reports: a --hardware that the GPUs' own names
       contradicted (its ceiling is the GPU's profile, or none), warning hardware_contradicted;
       request token_count.local_by: --tokenizer counts the answers' text too (tokenizer_file);
       setup.calibration.output_usage and request usage_at_known: usage checked at a known length;
       setup.load.drain_s (--drain); warning code saturated; error kind drain_cut: a request still
       in flight when the drain after --duration ran out, cut by benchy (issue 54); case
       pp_stddev / tg_stddev (--pp-stddev / --tg-stddev: each request's lengths drawn around pp, tg);
       warning code rate_knee (results/knee.py); --endpoint embeddings: request inputs, case
       input_tps; output and stream figures withheld with code pooled; warning canary_failed
  1.27 --images (docs/images.md): setup.load.images; request images, image_bytes, server_image_tokens,
       image_tokens (the server's own count, or usage minus the exact text), image_tokens_from; case
       images; setup.ceiling hardware_confirmed (false where only --hardware says so, issue 52)
  1.28 --endpoint rerank (docs/embeddings.md); case input_rate (inputs or documents a second)
  1.29 case.silence.sent: requests sent during it (`unread` misses those llama.cpp answers at the resume)

A figure that cannot be measured is null, with the reason in `unavailable` (words) and
`unavailable_codes` (a stable code, metrics.py). Requests with an empty or zero-token output
are counted as failed here (error_kind empty_output / zero_tokens), though requests.jsonl
keeps the raw status the client saw.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchy import jsontypes, records
from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.measure import images as image_figures
from benchy.measure import reading, registry, stats, unavailable
from benchy.measure.gpu import GpuCase
from benchy.measure.health import ClientHealth, LoopHealth, WorkerClock, WorkerHealth  # noqa: F401  (re-exported)
from benchy.measure.reading import Reading
from benchy.measure.sanity.tally import OutputSanity
from benchy.measure.silence import Silence
from benchy.measure.unavailable import Unavailable
from benchy.measure.workloads import WorkloadFigures
from benchy.records.plan import Tagged
from benchy.results.facts import CaseFacts, FactsTally
from benchy.results.rows import OK, WARMUP, Rows

# the run's setup (results/setup.py), re-exported: where readers of results.json have found it
from benchy.results.setup import Calibration as Calibration
from benchy.results.setup import LengthCheck as LengthCheck
from benchy.results.setup import LoadSetup as LoadSetup
from benchy.results.setup import PromptLengths as PromptLengths
from benchy.results.setup import Setup as Setup
from benchy.results.verdicts.codes import (  # noqa: F401  (the severities re-exported)
    ERROR,
    INFO,
    SEVERITY_ORDER,
    WARNING,
    details_by_code,
    details_class,
)
from benchy.results.verdicts.details import Details, NoFigures
from benchy.server.cache_reset import CacheReset
from benchy.server.identity import ServerIdentity as ServerIdentity
from benchy.server.metrics import MetricsStatus as MetricsStatus
from benchy.server.metrics import NoServerFigures as NoServerFigures
from benchy.server.metrics import ServerCaseMetrics as ServerCaseMetrics

SCHEMA_MAJOR, SCHEMA_MINOR = 1, 29
SCHEMA = f"benchy/results/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
PROBE_SCHEMA = "benchy/probe/1"  # probe.json (`benchy probe-cache`)


# ------------------------------------------------------------------ the classes


@dataclass(frozen=True)
class MetricSummary(Saved):
    """Statistics of one metric over a case's measured, successful requests (stats.py)."""

    median: float
    std: float | None = _opt("sample standard deviation (n − 1); null for one value")
    n: int = _opt("values summarized", 0)
    ci95: list[float] | None = _opt("percentile-bootstrap 95% interval of the median; null below 3 values")
    mean: float | None = None
    min: float | None = None
    max: float | None = None
    p90: float | None = None
    p99: float | None = None
    p90_low: float | None = _opt("the true p90 is at least this with 99% confidence (an order statistic)", omit=True)
    p90_high: float | None = _opt("…at most this with 99% confidence; absent: too few values (under 64)", omit=True)
    p99_low: float | None = _opt("the true p99 is at least this with 99% confidence (an order statistic)", omit=True)
    p99_high: float | None = _opt("…at most this with 99% confidence; absent: too few values (under 662)", omit=True)

    @classmethod
    def of(cls, values: Sequence[float]) -> MetricSummary:
        return cls(**stats.summarize(values))

    @classmethod
    def of_all(cls, samples: Sequence[Sequence[float]]) -> list[MetricSummary]:
        """`of` each sample, their bootstraps drawn together (stats.summarize_all)."""
        return [cls(**found) for found in stats.summarize_all(samples)]


@dataclass(frozen=True)
class SteadyState(Saved):
    """A closed loop's span where every stream was busy (measure/steady.py) and its figures."""

    start_s: float = _opt("seconds from the case's first send to the window's start (the last stream's first send)")
    end_s: float = _opt("seconds from the case's first send to the window's end (the first end after the last send)")
    requests: int = _opt("successful requests sent and ended inside the window", 0)
    summary: dict[str, MetricSummary] = _opt("metric → statistics over the window's requests", factory=dict)


@dataclass(frozen=True)
class Goodput(Saved):
    """--slo: the share of measured requests that succeeded and met every target, and their rate."""

    slo: dict[str, float] = _opt("metric → threshold", factory=dict)
    fraction: float | None = None
    rate: float | None = _opt("good requests per second (slo.goodput_rate)")
    unavailable: str | None = _opt("why the fraction is unknown", omit=True)


@dataclass(frozen=True)
class CaseCeiling(Saved):
    """A case's memory-bandwidth decode ceiling and its measured medians as a % of it."""

    tokens_per_s: float
    context_tokens: float | None = None
    weight_bytes_per_token: float | None = None
    kv_bytes_per_token: float | None = None
    decode_pct: float | None = None
    e2e_pct: float | None = None


@dataclass(frozen=True)
class Queueing(Saved):
    """A loaded case's TTFT against the same prompt with nothing else in flight (1.9): where the
    loaded median passes the alone one by more than threshold_s, requests queued."""

    source: str = _opt('"alone" (requests sent alone before the case) or the concurrency-1 case\'s label', "")
    alone_ttft: MetricSummary | None = _opt("TTFT of the baseline requests")
    loaded_ttft_s: float | None = _opt("the case's TTFT median")
    excess_s: float | None = _opt("loaded median − alone median")
    threshold_s: float | None = _opt("noise: max(20 ms, half the alone median, the alone spread)")
    queued: bool = False
    basis: str = _opt(
        '(1.22) what was compared: "ttft_s", or "ttft_gap_s" (TTFT less the server\'s own prompt time, where '
        "the server reports it for every request of both cases: its prefill's own swings are then no noise)",
        "ttft_s",
    )


@dataclass(frozen=True)
class TokenCountEntry(Saved):
    """(1.5, typed in 1.8) A request's completion count and its witnesses (evidence.token_count):
    what each said, which one the figures use, who backed it and who disagreed."""

    tokens: int
    source: str = _opt("the witness the figures use: usage, timings.predicted_n, per-chunk usage, events, local…")
    estimate: bool = _opt("the count rests on benchy's own tokenizer or the events alone", False)
    usage: int | None = _opt("usage.completion_tokens as the server claimed")
    local: float | None = _opt(
        "the streamed text counted with benchy's tokenizer × calibration scale, or --tokenizer's"
    )
    local_by: str | None = _opt(
        "(1.26) what counted `local`: tokenizer_file (--tokenizer) or o200k_calibrated", omit=True
    )
    events: int = _opt("text events", 0)
    predicted_n: int | None = _opt("(1.8) llama.cpp's timings.predicted_n")
    per_chunk: int | None = _opt("(1.8) the last cumulative count of per-chunk usage (continuous_usage_stats)")
    server_tokenize: int | None = _opt("(1.8) the server's own /tokenize of the streamed text")
    backed_by: list[str] = _opt("(1.8) witnesses that agree with the count used", factory=list)
    disagreed: list[str] = _opt("(1.8) witnesses that disagree with it", factory=list)
    mismatch: str | None = _opt("why usage was not believed (two witnesses agreed against it, or it was impossible)")
    local_mismatch: str | None = _opt("(1.8) the local count alone disagreed: benchy's tokenizer is not this model's")


@dataclass(frozen=True, slots=True)  # one per request, held for the whole run; a record, so frozen as it is
class RequestResult(Saved, Tagged):  # a record joined with its plan's tags (records/plan.py)
    """One request: a RequestRecord less its per-event arrays (requests.jsonl's), with its metrics."""

    # server_tokenize and tokenizer_tokens are saved in token_count, beside the other witnesses.
    _NOT_SAVED = (
        "token_event_s",
        "token_event_chars",
        "token_event_kinds",
        "token_event_text",
        "token_event_usage",
        "server_tokenize",
        "tokenizer_tokens",
    )

    events: int = _opt("text events (len of token_event_s)", 0)
    metrics: dict[str, float | None] = _opt("metric → value, null when unavailable", factory=dict)
    unavailable: dict[str, str] = _opt("metric → why (successful requests only)", factory=dict, omit=True)
    unavailable_codes: dict[str, str] = _opt("metric → reason code (1.1)", factory=dict, omit=True)
    withheld: dict[str, float] = _opt("metric → the value withheld (audit only)", factory=dict, omit=True)
    token_count: TokenCountEntry | None = _opt("(1.5) the completion count's evidence", omit=True)
    image_tokens: int | None = _opt("(1.27) --images: the images' tokens as the server counted them", omit=True)
    image_tokens_from: str | None = _opt(
        "(1.27) whence image_tokens: server (usage's image_tokens) or usage_minus_text (prompt_tokens - the exact text)",
        omit=True,
    )

    @classmethod
    def of_line(cls, line: bytes) -> RequestResult:
        """One saved request: a line of results.json's requests (its comma too) or of a spill file."""
        return cls.from_dict(jsontypes.loads(line.rstrip(b",\r\n \t")))

    @classmethod
    def of_own_line(cls, line: bytes) -> RequestResult:
        """A line this process wrote from a row's to_dict (a spill file, rows.py), built without
        checking each value's type as of_line does a saved file's: the same row, in about half
        the time (each spilled row is read again at the run's end)."""
        data = {sys.intern(k): v for k, v in jsontypes.loads(line).items()}  # interned: ** matches them at once
        count = data.get("token_count")
        if count is not None:
            data["token_count"] = TokenCountEntry(**count)  # the one dataclass a row holds
        return cls(**data)

    @classmethod
    def of(
        cls, rec: Tagged, values: dict[str, float | Unavailable] | None = None, read: Reading | None = None
    ) -> RequestResult:
        """The row with its figures, less its streams, by replace (the analysis reads each line as a
        row; a plain record is copied first). `values`, `read`: the builder's (None: made here, alone)."""
        values = values if values is not None else registry.request_metrics(rec)
        gone = {k: v for k, v in values.items() if isinstance(v, Unavailable)} if rec.ok else {}
        skip = cls._NOT_SAVED
        row = rec if isinstance(rec, cls) else cls(**{k: v for k, v in rec.to_dict().items() if k not in skip})
        return replace(
            row,
            **records.blank(skip),
            token_count=TokenCountEntry(**reading.count_entry(rec, read)) if rec.ok else None,
            events=len(rec.token_event_s),
            metrics={k: (None if isinstance(v, Unavailable) else v) for k, v in values.items()},
            unavailable={k: v.message for k, v in gone.items()},
            unavailable_codes={k: v.code for k, v in gone.items()},
            **image_figures.request_fields(rec),
        )


@dataclass(frozen=True)
class CaseResult(Saved):
    """One case (a prompt length × output length × load × depth), with every request."""

    # Built once (results/build.py, or read back by files.py), never written into after.

    _NOT_SAVED = ("scan",)

    label: str
    pp: int
    tg: int
    concurrency: int | None = _opt(
        "requests in flight (closed loop); null for a trace replay (1.11), whose arrivals set the load"
    )
    scenario: str | None = None
    depth: int = 0
    endpoint: str | None = None
    runs: int | None = None
    depth_mode: str | None = _opt('"cold" | "cached"; null without depth')
    pp_stddev: float | None = _opt("--pp-stddev: each prompt length drawn around pp (1.26)", omit=True)
    tg_stddev: float | None = _opt("--tg-stddev: each output length drawn around tg (1.26)", omit=True)
    planned_requests: int | None = _opt("measured requests planned (1.3); null when --duration alone bounds the case")
    n_ok: int = 0
    n_failed: int = 0
    n_warmup: int = 0
    errors: dict[str, int] = _opt("error kind → failed measured requests", factory=dict)
    anomalies: dict[str, int] = _opt(
        "anomaly code (records.Anomaly: no_done, no_usage, malformed_events …) → successful requests", factory=dict
    )
    retried: dict[str, int] = _opt("kind → requests sent again after a reused connection dropped", factory=dict)
    summary: dict[str, MetricSummary | None] = _opt("metric → statistics, null when unavailable", factory=dict)
    unavailable: dict[str, str] = _opt("metric → why it is null", factory=dict)
    unavailable_codes: dict[str, str] = _opt("metric → reason code (1.1)", factory=dict)
    aggregate_tps: float | None = None
    mode: str = _opt('"closed" | "open"', "closed")
    rate: float | None = _opt("asked arrival rate, requests/s (open loop)")
    achieved_rate: float | None = None
    request_rate: float | None = None
    input_tps: float | None = _opt("(1.26) pooling cases (--endpoint embeddings): input tokens/s", omit=True)
    input_rate: float | None = _opt("(1.28) pooling cases: inputs/s (embeddings inputs, rerank documents)", omit=True)
    images: image_figures.ImageFigures | None = _opt(
        "(1.27) --images: the requests' images and their tokens beside the text's", omit=True
    )
    send_lag: MetricSummary | None = _opt("open loop: how late sends left their schedule, s")
    steady: SteadyState | None = _opt("closed loop: the span where every stream was busy", omit=True)
    from_schedule: dict[str, MetricSummary] = _opt(
        "open loop: ttft_s, e2e_s timed from each request's intended send (its schedule), not its actual one, s",
        factory=dict,
        omit=True,
    )
    goodput: Goodput | None = None
    requests: list[RequestResult] = field(default_factory=list)
    client: ClientHealth | None = _opt("benchy's own health while it ran (monitor.py)", omit=True)
    ceiling: CaseCeiling | None = _opt("with a ceiling setup", omit=True)
    server: ServerCaseMetrics | NoServerFigures | None = _opt(
        "the server's own figures for the case (server/metrics.py), or why there are none", omit=True
    )
    withheld: dict[str, MetricSummary] = _opt("metric → a withheld summary (audit only)", factory=dict, omit=True)
    kind: str = _opt('"sweep" | "multi_turn" | "shared_prefix" | "trace" (1.2) | "dataset" (1.14)', "sweep")
    workload: WorkloadFigures | None = _opt("a cache-aware workload's own figures (1.2)", omit=True)
    gpu: GpuCase | None = _opt("(1.7) the GPUs during the case: power, energy, J/token, bandwidth", omit=True)
    queueing: Queueing | None = _opt(
        "closed loop, concurrency > 1: TTFT against the same prompt alone (1.9)", omit=True
    )
    cache_reset: CacheReset | None = _opt("(1.10) --cache-reset before this case", omit=True)
    silence: Silence | None = _opt("(1.26) the longest silence on every stream mid-answer (silence.py)", omit=True)
    prompt_lengths: str | None = _opt(
        "(1.16) how this case's prompt lengths were made: server_tokenize | tokenizer_file | server_usage "
        "| o200k_calibrated",
        omit=True,
    )
    sanity: OutputSanity | None = _opt("(1.26) output sanity: does the answers' text still read as language", omit=True)
    # One pass over the requests, made with them by whoever builds the case (the builder as it
    # writes the rows, files.read as it reads them); None (a case made by hand): made per ask.
    scan: RowScan | None = field(default=None, compare=False, repr=False)

    def server_figures(self) -> ServerCaseMetrics | None:
        """The server's /metrics figures for the case, or None (none scraped, or the window lost)."""
        return self.server if isinstance(self.server, ServerCaseMetrics) and self.server.engine else None

    def reason(self, metric: str) -> Unavailable:
        """Why `metric` is null in this case (code and message)."""
        message = self.unavailable.get(metric, "not measured")
        code = self.unavailable_codes.get(metric) or legacy_code(message)
        return Unavailable(code, message)

    def median(self, metric: str) -> float | None:
        summary = self.summary.get(metric)
        return summary.median if summary else None

    def mean(self, metric: str) -> float | None:
        """The mean of the case's measured requests (cold controls apart), as the server's
        histograms give means; None where the figure is withheld."""
        summary = self.summary.get(metric)
        return summary.mean if summary else None

    def figure(self, metric: str) -> MetricSummary | None:
        """The summary of `metric`, or the one withheld (for the checks that judge why)."""
        return self.summary.get(metric) or self.withheld.get(metric)

    def measured_ok(self) -> Sequence[RequestResult]:
        """The measured (not warmup), successful requests; of a long case's rows on disk
        (rows.Rows), a view that reads them as it is iterated."""
        if isinstance(self.requests, Rows):
            return self.requests.where(_measured_ok)
        return [r for r in self.requests if not r.warmup and r.ok]

    def measured_values(self, metric: str) -> list[float]:
        """Per-request values of `metric` over the measured (not warmup), successful requests."""
        if isinstance(self.requests, Rows) and self.requests.spilled:
            return list(self.columns().values.get(metric, ()))
        return [v for v in (r.metrics.get(metric) for r in self.measured_ok()) if v is not None]

    def columns(self) -> RequestColumns:
        """What the reports read of every request, gathered in one pass over them (made once:
        a long case's rows on disk are parsed once, not once per figure that reads them)."""
        return self._scan().columns

    def facts(self) -> CaseFacts:
        """What the checks read of every request (results/facts.py), from the same one pass."""
        return self._scan().tally.facts()

    def _scan(self) -> RowScan:
        return self.scan if self.scan is not None else RowScan.of(self.requests)

    def dots(self) -> list[Dot]:
        """The measured requests as report.html's scatter draws them, from the same one pass."""
        return self._scan().dots


@dataclass(frozen=True)
class RequestColumns:
    """A case's per-request figures as the reports read them, a compact array each."""

    values: dict[str, array[float]]  # metric → its values over the measured, successful requests, in order
    completion_tokens: int | None  # summed over the measured requests; None unless each has a count


def scanned(case: CaseResult) -> CaseResult:
    """`case` with its scan: itself where it has one (built or read from disk), else a new
    CaseResult made with one (a case made by hand)."""
    return case if case.scan is not None else replace(case, scan=RowScan.of(case.requests))


Dot = tuple[str, float, bool, str | None, float | None]  # id, sent (unix s), ok, error kind, latency s


def dot(r: RequestResult) -> Dot:
    """A measured request as report.html's scatter draws it."""
    return (r.request_id, r.sent_unix_s, r.status == "ok", r.error_kind, r.metrics.get("e2e_s") if r.ok else r.end_s)


class RowScan:
    """One pass over a case's rows: the reports' columns, the checks' facts and the scatter's
    dots at once. Made with the rows (CaseResult.scan), then only read."""

    def __init__(self) -> None:
        self.tally = FactsTally()  # the checks' facts, gathered; CaseResult.facts() makes them
        self.dots: list[Dot] = []
        self._values: dict[str, array[float]] = {}
        self._tokens: int | None = 0
        self._counted = 0

    @classmethod
    def of(cls, requests: Iterable[RequestResult]) -> RowScan:
        scan = cls()
        for r in requests:
            scan.add(r)
        return scan

    def add(self, r: RequestResult) -> None:
        self.tally.add(r)
        if r.warmup:
            return
        self.dots.append(dot(r))
        self._counted += 1
        tokens = self._tokens
        self._tokens = None if tokens is None or r.completion_tokens is None else tokens + r.completion_tokens
        if not r.ok:
            return
        values = self._values
        for name, value in r.metrics.items():
            if value is not None:
                values.setdefault(name, array("d")).append(value)

    @property
    def columns(self) -> RequestColumns:
        return RequestColumns(self._values, self._tokens if self._counted else None)


def _measured_ok(flags: int) -> bool:
    return flags & (WARMUP | OK) == OK


@dataclass(frozen=True)
class Stopped(Saved):
    """Why a run ended early."""

    by: str = _opt("SIGINT | SIGTERM | max-errors | max-error-rate | server-gone", "")
    reason: str = ""


@dataclass(frozen=True)
class NotMeasured(Saved):
    """A planned case that has no measured request: the run ended first, or --skip-unfit
    left it out (its prompt does not fit the server's context)."""

    case: str
    reason: str = _opt("not started | stopped during its warmup | skipped (--skip-unfit): why", "")


@dataclass(frozen=True)
class Evidence(Saved):
    """A figure behind a warning: what was observed against what threshold."""

    name: str
    observed: float | str | None
    threshold: float | None = None
    unit: str = ""


@dataclass(frozen=True)
class CheckWarning(Saved):
    """A finding of checks.py about these results."""

    code: str
    severity: str = _opt("error | warning | info", "warning")
    case: str | None = _opt("the case's label; null for the whole run")
    message: str = ""
    hint: str = ""
    metrics: list[str] = _opt("metrics it qualifies (the table marks them)", factory=list)
    withheld: list[str] = _opt("metrics made unavailable for the reason it reports", factory=list)
    details: Details = field(
        default_factory=NoFigures,
        metadata={
            "doc": "the figures behind the message: those of its code's class (1.21)",
            "tag": "code",
            "variant": details_class,
            "variants": details_by_code,
        },
    )
    evidence: list[Evidence] = _opt("typed figures behind the message", factory=list, omit=True)


@dataclass(frozen=True)
class RunResult(Saved):
    """A whole run: results.json."""

    schema: str = _opt("benchy/results/MAJOR.MINOR", SCHEMA)
    benchy_version: str | None = None
    prompt_nonce: bool | None = _opt("true unless --no-nonce")
    partial: bool = _opt("interrupted or stopped early", False)
    stopped: Stopped | None = None
    setup: Setup = field(default_factory=Setup)
    cases: list[CaseResult] = field(default_factory=list)
    not_measured: list[NotMeasured] = _opt("planned cases the run ended before measuring (1.3)", factory=list)
    warnings: list[CheckWarning] = field(default_factory=list)
    # results/latency.find's finding, decided once by the analysis for the checks to word; not
    # saved (None: read from disk, judged again from the saved rows by latency.found_in)
    fixed_latency: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)

    _NOT_SAVED = ("fixed_latency",)

    def to_dict(self) -> dict[str, Any]:
        return {**jsontypes.to_json(self), "schema": SCHEMA}


# Old files (1.0) carry no reason codes: the few reasons that decide something are recognised
# once, here, by the words benchy 1.0 wrote.
_LEGACY_CODES = (
    ("SSE buffering", unavailable.BUFFERED),
    ("'TTFT' grows with output length", unavailable.BUFFERED_TREND),
)


def legacy_code(message: str) -> str:
    return next((code for words, code in _LEGACY_CODES if words in message), unavailable.LEGACY)
