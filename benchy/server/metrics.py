"""The server's own account of each case, from its Prometheus /metrics, beside the client's.

Why: the client sees TTFT; only the server knows how much of it was queueing and how much
prefill, whether a prompt hit its prefix cache, how many tokens it really generated and how
many requests it ran at once. A snapshot before and after a case turns the server's cumulative
counters and histograms into figures for exactly that case; gauges (running, waiting, KV-cache
use) are sampled about once a second while it runs. The text is parsed by prometheus-client's
own parser, not by hand.

Names differ by engine (vLLM `vllm:`, SGLang `sglang:`, llama.cpp `llamacpp:` with --metrics);
each engine's names map onto one set of figures here, with the same meaning everywhere:
  prompt_tokens      prompt tokens of the case's requests, cached ones included
  cache_hits         of those, tokens served from the prefix cache
  generation_tokens  tokens generated
  ttft_s, queue_s, prefill_s, decode_s, inference_s, e2e_s   per-request time histograms
  prompt_seconds, decode_seconds   time summed over requests (llama.cpp's counters)
Derived: cache_hit_rate = cache_hits / prompt tokens looked up; prefill_tps = uncached prompt
tokens / prefill time; decode_tps = generated tokens / decode time. Their clocks differ: vLLM's
prefill and decode histograms time each request (a per-request rate), while llama.cpp's
prompt_seconds counter, with several prompts batched together, held about 40% of the sum of
the responses' timings.prompt_ms (xllamacpp 2026.10, 4 slots): its prefill rate is then
nearer the server's total prompt throughput than one request's. At one request in flight
the two agree. Which names were found is recorded, and a figure the server does not publish
is absent with the reason. Histograms give exact means (sum / count) and medians interpolated within a bucket,
as Prometheus' histogram_quantile does, with the bucket's bounds kept beside them.
"""

from __future__ import annotations

import asyncio
import math
import time
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from benchy.jsontypes import Saved
from benchy.measure import registry
from benchy.measure.unavailable import Unavailable
from benchy.measure.window_formulas import ServerWindow
from benchy.server import series
from benchy.server.pages import PageSource

SCRAPE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class EngineNames:
    """One engine's metric names for each figure (alternatives in order of preference)."""

    engine: str
    prefix: str
    counters: dict[str, tuple[str, ...]]
    histograms: dict[str, tuple[str, ...]]
    gauges: dict[str, tuple[str, ...]]
    request_count: str  # the histogram or counter whose delta is the number of finished requests


VLLM = EngineNames(
    engine="vllm",
    prefix="vllm:",
    counters={
        "prompt_tokens": ("vllm:prompt_tokens_total",),
        "generation_tokens": ("vllm:generation_tokens_total",),
        "cache_queries": ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "cache_hits": ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "preemptions": ("vllm:num_preemptions_total",),
        "requests": ("vllm:request_success_total",),
    },
    histograms={
        "ttft_s": ("vllm:time_to_first_token_seconds",),
        "queue_s": ("vllm:request_queue_time_seconds",),
        "prefill_s": ("vllm:request_prefill_time_seconds",),
        "decode_s": ("vllm:request_decode_time_seconds",),
        "inference_s": ("vllm:request_inference_time_seconds",),
        "e2e_s": ("vllm:e2e_request_latency_seconds",),
    },
    gauges={
        "running": ("vllm:num_requests_running",),
        "waiting": ("vllm:num_requests_waiting",),
        "kv_cache_usage": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    request_count="e2e_s",
)
SGLANG = EngineNames(
    engine="sglang",
    prefix="sglang:",
    counters={
        "prompt_tokens": ("sglang:prompt_tokens_total",),
        "generation_tokens": ("sglang:generation_tokens_total",),
        "cache_hits": ("sglang:cached_tokens_total",),
        "requests": ("sglang:num_requests_total",),
    },
    histograms={
        "ttft_s": ("sglang:time_to_first_token_seconds",),
        "queue_s": ("sglang:queue_time_seconds",),
        "e2e_s": ("sglang:e2e_request_latency_seconds",),
    },
    gauges={
        "running": ("sglang:num_running_reqs",),
        "waiting": ("sglang:num_queue_reqs",),
        "kv_cache_usage": ("sglang:token_usage",),
    },
    request_count="e2e_s",
)
LLAMACPP = EngineNames(
    engine="llama.cpp",
    prefix="llamacpp:",
    counters={
        "prompt_tokens_uncached": ("llamacpp:prompt_tokens_total",),  # llama.cpp leaves cached ones out
        "cache_hits": ("llamacpp:prompt_tokens_cached_total",),
        "prompt_seconds": ("llamacpp:prompt_seconds_total",),
        "generation_tokens": ("llamacpp:tokens_predicted_total",),
        "decode_seconds": ("llamacpp:tokens_predicted_seconds_total",),
    },
    histograms={},
    gauges={
        "running": ("llamacpp:requests_processing",),
        "waiting": ("llamacpp:requests_deferred",),
        "kv_cache_usage": ("llamacpp:kv_cache_usage_ratio",),
    },
    request_count="",
)
ENGINES = (VLLM, SGLANG, LLAMACPP)
# Gauges that are shares, not counts: several engines (data parallel) are not summed but maxed.
_SHARE_GAUGES = ("kv_cache_usage",)


class ScrapeError(Exception):
    """/metrics could not be read or parsed; the message is the reason, one line."""


@dataclass
class Snapshot:
    """One scrape: every sample summed over its label sets (but `le`), at perf_counter `t_s`."""

    t_s: float
    values: dict[str, float] = field(default_factory=dict)  # sample name → value
    buckets: dict[str, dict[float, float]] = field(default_factory=dict)  # histogram → {le: cumulative}
    maxed: dict[str, float] = field(default_factory=dict)  # sample name → max over label sets
    identity: frozenset[tuple[str, str]] = frozenset()  # the process labels it names (series.py)


def parse(text: str, t_s: float, model: str | None = None) -> Snapshot:
    """A snapshot of the exposition text; with `model`, samples labelled for another model
    (model_name) are left out, unless no sample names it at all."""
    try:
        samples = [s for family in text_string_to_metric_families(text) for s in family.samples]
    except (ValueError, TypeError, IndexError) as exc:
        raise ScrapeError(f"/metrics is not Prometheus text ({type(exc).__name__}: {str(exc)[:120]})") from None
    if model is not None and any(s.labels.get("model_name") == model for s in samples):
        samples = [s for s in samples if s.labels.get("model_name", model) == model]
    snap = Snapshot(t_s)
    snap.identity = frozenset((k, v) for s in samples for k, v in s.labels.items() if k in series.IDENTITY_LABELS)
    for s in samples:
        value = float(s.value)
        if math.isnan(value):
            continue
        if s.name.endswith("_bucket") and "le" in s.labels:
            le = float(s.labels["le"])  # "+Inf" parses as inf
            into = snap.buckets.setdefault(s.name[: -len("_bucket")], {})
            into[le] = into.get(le, 0.0) + value
            continue
        snap.values[s.name] = snap.values.get(s.name, 0.0) + value
        snap.maxed[s.name] = max(snap.maxed.get(s.name, -math.inf), value)
    return snap


def detect(snap: Snapshot) -> EngineNames | None:
    """The engine whose names the snapshot holds most of, or None."""
    names = list(snap.values) + list(snap.buckets)
    counts = [sum(n.startswith(e.prefix) for n in names) for e in ENGINES]
    best = max(range(len(ENGINES)), key=counts.__getitem__)
    return ENGINES[best] if counts[best] else None


def found_names(snap: Snapshot, engine: EngineNames) -> tuple[dict[str, str], dict[str, str]]:
    """({figure: metric name found}, {figure: why it is missing}) for this engine."""
    found, missing = {}, {}
    for kind, table in (("counter", engine.counters), ("histogram", engine.histograms), ("gauge", engine.gauges)):
        for figure, names in table.items():
            pool = snap.buckets if kind == "histogram" else snap.values
            name = next((n for n in names if n in pool), None)
            if name:
                found[figure] = name
            else:
                missing[figure] = f"{' or '.join(names)} ({kind}) is not in /metrics"
    return found, missing


# ------------------------------------------------------------------ per-case figures


# A quantile is placed within its bucket only when the bucket is narrow enough to say something:
# its width at most this share of its upper bound ([0.3, 0.5] s yes, vLLM's first [0, 0.3] s no).
MAX_BUCKET_SPREAD = 0.5


@dataclass(frozen=True, slots=True)
class HistogramDelta(Saved):
    """A histogram's observations during the case: count, exact mean, interpolated quantiles
    (None, with the reason in `quantile_note`, when their bucket is too coarse to place them)."""

    count: float
    sum: float
    mean: float | None = None
    median: float | None = None
    median_bounds: list[float | None] | None = None  # the bucket the median lies in (None above: +Inf)
    p90: float | None = None
    quantile_note: str | None = None


def histogram_delta(snaps: list[Snapshot], name: str, resets: int = 0) -> HistogramDelta:
    """Over a case's scrapes; after a counter reset only its count and sum (as rate() adds them
    up), the buckets of the first and last scrape being of different lives."""
    before, after = snaps[0], snaps[-1]
    b_buckets, a_buckets = before.buckets.get(name, {}), after.buckets.get(name, {})
    cumulative = sorted((le, a_buckets[le] - b_buckets.get(le, 0.0)) for le in a_buckets)
    count = _increase(snaps, f"{name}_count")
    if count is None:
        count = cumulative[-1][1] if cumulative else 0.0
    total = _increase(snaps, f"{name}_sum") or 0.0
    if count <= 0:
        return HistogramDelta(0.0, 0.0, None, None, None, None)
    if resets:
        return HistogramDelta(count, total, quantile_note=f"{_resets(resets)} during the case: the mean is exact")
    median, bounds = bucket_quantile(cumulative, 0.5)
    p90, p90_bounds = bucket_quantile(cumulative, 0.9)
    note = None
    if not _narrow(bounds):
        note = f"the median lies in the bucket {_bucket_text(bounds)}, too wide to place it; the mean is exact"
        median = None
    if not _narrow(p90_bounds):
        p90 = None
    finite = [None if bound is None or math.isinf(bound) else bound for bound in bounds] if bounds else None
    return HistogramDelta(count, total, None, median, finite, p90, note)  # its mean: a metric (_derive)


def _narrow(bounds: tuple[float, float] | None) -> bool:
    return bounds is not None and not math.isinf(bounds[1]) and bounds[1] - bounds[0] <= MAX_BUCKET_SPREAD * bounds[1]


def _bucket_text(bounds: tuple[float, float] | None) -> str:
    if bounds is None:
        return "(none)"
    return f"({bounds[0]:g}, {bounds[1]:g}] s" if not math.isinf(bounds[1]) else f"above {bounds[0]:g} s"


def bucket_quantile(cumulative: list[tuple[float, float]], q: float) -> tuple[float | None, tuple[Any, ...] | None]:
    """The q-quantile of cumulative bucket counts [(le, count)], linear within its bucket
    (the lowest bucket starts at 0); in the +Inf bucket, the last finite bound. Returns
    (value, (lower, upper) bounds of that bucket)."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None, None
    rank = q * cumulative[-1][1]
    lower, below = 0.0, 0.0
    for le, count in cumulative:
        if count >= rank and count > below:
            if math.isinf(le):
                return lower, (lower, le)
            return lower + (le - lower) * (rank - below) / (count - below), (lower, le)
        lower, below = (le if not math.isinf(le) else lower), count
    return lower, (lower, math.inf)


@dataclass(frozen=True, slots=True)
class GaugeStats(Saved):
    """A gauge over the case's scrapes."""

    min: float
    mean: float
    max: float
    samples: int


def gauge_stats(snaps: list[Snapshot], name: str, share: bool) -> GaugeStats | None:
    seen = [(s.maxed if share else s.values).get(name) for s in snaps]
    values = [v for v in seen if v is not None]
    if not values:
        return None
    return GaugeStats(min(values), sum(values) / len(values), max(values), len(values))


@dataclass(frozen=True, slots=True)
class ServerCaseMetrics(Saved):
    """The server's figures for one case (the `server` entry of a case in results.json)."""

    engine: str
    window_s: float
    rtt_s: float | None = None  # the quickest /metrics round trip of the case: a bound on the network's share
    # (1.26, issue 52) counter resets during the case (a restart: counted as rate() counts), and
    # why the scrapes are of several processes behind one address (its counts then withheld)
    counter_resets: int = 0
    several_processes: str | None = None
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramDelta] = field(default_factory=dict)
    gauges: dict[str, GaugeStats] = field(default_factory=dict)
    derived: dict[str, float] = field(default_factory=dict)  # cache_hit_rate, prefill_tps, decode_tps
    unavailable: dict[str, str] = field(default_factory=dict)  # figure → reason

    def histogram_mean(self, name: str) -> float | None:
        """The exact mean of a histogram's observations in the case, or None (none observed)."""
        h = self.histograms.get(name)
        return h.mean if h and h.count else None


@dataclass(frozen=True, slots=True)
class NoServerFigures(Saved):
    """A case whose /metrics window was given up (the case ended before its measured requests
    began, no snapshot came, or an error limit cut it short): why it has no server figures."""

    unavailable: str


def case_metrics(
    before: Snapshot,
    after: Snapshot,
    engine: EngineNames,
    gauges: list[Snapshot] | None = None,
    cut: bool = True,
    confirming: list[Snapshot] | None = None,
    rtt_s: float | None = None,
) -> ServerCaseMetrics:
    """The server's figures for the window between two snapshots (pure), made once. `cut`: the
    client saw requests cut or refused in the window, without which a fall of the counters is no
    restart. `confirming`: the scrapes taken back to back at open and close, judged only for
    whether the scrapes are of one series (several processes answer them each for itself)."""
    found, missing = found_names(after, engine)
    unavailable = dict(missing)
    sampled = [before, *(gauges or []), after]
    counted = [found[f] for f in engine.counters if f in found]
    counted += [f"{found[f]}_count" for f in engine.histograms if f in found]
    judged = sorted([*sampled, *(confirming or [])], key=lambda snap: snap.t_s)
    verdict = series.judge(judged, counted, cut)
    counters: dict[str, float] = {}
    histograms: dict[str, HistogramDelta] = {}
    for figure in (*engine.counters, *engine.histograms):
        if figure in found and verdict.several:
            unavailable[figure] = (
                f"/metrics at this address answers for one of several processes a scrape ({verdict.several}): "
                "no difference of two scrapes is this case's count"
            )
        elif figure in engine.histograms and figure in found:
            histograms[figure] = histogram_delta(sampled, found[figure], verdict.resets)
        elif figure in found and (value := _increase(sampled, found[figure])) is not None:
            counters[figure] = value
    gauged = {f: gauge_stats(sampled, found[f], f in _SHARE_GAUGES) for f in engine.gauges if f in found}
    _canonical_counters(counters, unavailable)
    derived = _derive(counters, histograms, unavailable)
    return ServerCaseMetrics(
        engine=engine.engine,
        window_s=round(after.t_s - before.t_s, 6),
        rtt_s=rtt_s,
        counter_resets=verdict.resets,
        several_processes=verdict.several,
        counters=counters,
        histograms=histograms,
        gauges={f: s for f, s in gauged.items() if s is not None},
        derived=derived,
        unavailable=unavailable,
    )


def _increase(snaps: list[Snapshot], name: str) -> float | None:
    """A counter's increase over the scrapes, resets counted as rate() counts them."""
    if name not in snaps[-1].values:
        return None
    return series.increase([s.values[name] for s in snaps if name in s.values])[0]


def _resets(n: int) -> str:
    return f"{n} counter reset{'s' if n != 1 else ''}"


def _delta(before: Snapshot, after: Snapshot, name: str) -> float | None:
    if name not in after.values:
        return None
    return after.values[name] - before.values.get(name, 0.0)


def _canonical_counters(c: dict[str, float], unavailable: dict[str, str]) -> None:
    """llama.cpp counts uncached prompt tokens: add the cached ones back, so that prompt_tokens
    means the same everywhere; a server that looks every prompt token up has queries = prompt.
    (Run on the case's counters as they are gathered, before its figures are made.)"""
    if "prompt_tokens_uncached" in c:
        c["prompt_tokens"] = c.pop("prompt_tokens_uncached") + c.get("cache_hits", 0.0)
        unavailable.pop("prompt_tokens", None)
    if "cache_queries" not in c and "prompt_tokens" in c and "cache_hits" in c:
        c["cache_queries"] = c["prompt_tokens"]


_HISTOGRAM_MEANS = {key for key, _, _ in registry.SERVER_HISTOGRAMS}


def _derive(c: dict[str, float], h: dict[str, HistogramDelta], unavailable: dict[str, str]) -> dict[str, float]:
    """The requests the server counted (its own account), then the figures derived from its
    counters and histograms: the registry's server_window metrics, made by its formulas in its
    order (a histogram's mean kept in its entry, the entry made again with it)."""
    d: dict[str, float] = {}
    requests = h["e2e_s"].count if "e2e_s" in h else c.get("requests")
    if requests is not None:
        d["requests"] = requests
    values = registry.compute(registry.SERVER_WINDOW, ServerWindow(c, h, requests), {})
    for metric in registry.of_level(registry.SERVER_WINDOW):
        if metric.formula is None:
            continue
        value = values[metric.name]
        if metric.key in _HISTOGRAM_MEANS:  # kept as its histogram's mean, where it has one
            if metric.key in h and not isinstance(value, Unavailable):
                h[metric.key] = replace(h[metric.key], mean=value)
        elif isinstance(value, Unavailable):
            unavailable[metric.key] = value.message
        else:
            d[metric.key] = value
    return d


# ------------------------------------------------------------------ scraping


@dataclass(frozen=True, slots=True)
class MetricsStatus(Saved):
    """Whether /metrics can be used for this run, and what it holds (setup.server_metrics)."""

    url: str
    available: bool
    engine: str | None = None
    found: dict[str, str] = field(default_factory=dict)  # figure → metric name
    missing: dict[str, str] = field(default_factory=dict)
    reason: str | None = None  # why it is unavailable (off, 404, unknown names…)
    # (1.14) behind a router (server/router.py): the page that named its replicas, and the
    # replicas' /metrics that were scraped and added up in place of the router's own
    router: str | None = None
    replicas: list[str] = field(default_factory=list)


class MetricsScraper:
    """Reads /metrics through the client's page source (its credentials, TLS and proxy
    settings, its redirect policy: vLLM answers /metrics with a 307 to /metrics/, on
    connections of its own, never the measured streams'). `probe()` once before the run; then
    for each case a `window()`: `open()` before its measured requests, `close()` after, and
    `result` is a ServerCaseMetrics or the reason there is none."""

    def __init__(self, pages: PageSource, url: str, model: str | None, replicas: list[str] | None = None) -> None:
        self.pages = pages
        self.url = url
        self.replicas = replicas or []  # replicas' /metrics URLs: each scraped, the texts added up
        self.model = model
        self.engine: EngineNames | None = None
        self.status = MetricsStatus(url, available=False, reason="not probed")
        self.round_trips: list[float] = []  # seconds per successful scrape, for the case's rtt_s

    async def scrape(self) -> Snapshot:
        return parse(await self.fetch_text(), time.perf_counter(), self.model)

    async def fetch_text(self) -> str:
        """/metrics as text; behind a router whose replicas are known, every replica's, one
        after the other (parse adds a sample up over them as over its label sets)."""
        sent = time.perf_counter()
        if self.replicas:
            texts = await asyncio.gather(*(self._fetch(url) for url in self.replicas))
            self.round_trips.append((time.perf_counter() - sent) / len(texts))
            return "\n".join(texts)
        text = await self._fetch(self.url)
        self.round_trips.append(time.perf_counter() - sent)
        return text

    async def _fetch(self, url: str) -> str:
        where = f"GET {_shown(url)}" if self.replicas else "GET /metrics"
        # a connection of its own each time: a kept-alive one would stick to one process of
        # several behind a balancer, and its view would cover that one silently (series.py)
        page = await self.pages.page("GET", url, None, SCRAPE_TIMEOUT_S, fresh=True)
        if page.failure == "timeout":
            raise ScrapeError(f"{where} gave no answer within {SCRAPE_TIMEOUT_S:g} s")
        if page.failure is not None:
            raise ScrapeError(f"{where} failed: {page.failure} ({page.message})")
        if page.status != 200:
            raise ScrapeError(f"{where} answered HTTP {page.status}{_enable_hint(page.status)}")
        return page.body.decode("utf-8", errors="replace")

    async def probe(self) -> MetricsStatus:
        try:
            snap = await self.scrape()
        except ScrapeError as exc:
            self.status = MetricsStatus(self.url, available=False, reason=str(exc))
            return self.status
        engine = detect(snap)
        if engine is None:
            self.status = MetricsStatus(
                self.url,
                available=False,
                reason=f"/metrics answered, but none of its {len(snap.values) + len(snap.buckets)} metrics "
                "has a vLLM (vllm:), SGLang (sglang:) or llama.cpp (llamacpp:) name",
            )
            return self.status
        found, missing = found_names(snap, engine)
        self.engine = engine
        self.status = MetricsStatus(self.url, True, engine.engine, found, missing, replicas=list(self.replicas))
        return self.status


def _shown(url: str) -> str:
    """A replica's URL fit for a message: no user:password, no query."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def _enable_hint(status: int) -> str:
    if status != 404:
        return ""
    return " (llama.cpp serves it with --metrics, SGLang with --enable-metrics)"
