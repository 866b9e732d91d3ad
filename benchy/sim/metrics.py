"""The simulator's Prometheus /metrics, driven by its ground truth: each finished request's
truth record is what the counters and histograms observe, so a test can recompute every figure
from the truth log. Two flavours, with the real engines' names and types:

  vllm      vllm:time_to_first_token_seconds, request_queue_time_seconds,
            request_prefill_time_seconds, request_decode_time_seconds,
            request_inference_time_seconds, e2e_request_latency_seconds (histograms, vLLM's
            buckets); prompt_tokens, generation_tokens, prefix_cache_queries,
            prefix_cache_hits, num_preemptions, request_success (counters);
            num_requests_running, num_requests_waiting, kv_cache_usage_perc (gauges).
  llamacpp  llamacpp:prompt_tokens (uncached), prompt_tokens_cached, prompt_seconds,
            tokens_predicted, tokens_predicted_seconds (counters); requests_processing,
            requests_deferred (gauges).

From a truth record (all perf_counter seconds): queue = admitted − queued (as vLLM's, it
starts once the request is parsed and tokenized, which TTFT includes); prefill = first
token − admitted (vLLM's "scheduled → first token"); decode = last token − first token;
inference = last token − admitted; e2e = last token − arrival; TTFT = first token − arrival.
llama.cpp's prompt_seconds is prefill_end − prefill_start and tokens_predicted_seconds is
last token − prefill end. `token_factor` (--metrics-token-factor) multiplies the generated
tokens the counters report, to imitate a server whose count disagrees with what it streamed.

Uses prometheus-client (the library vLLM itself uses); imports nothing from benchy's client.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from benchy.sim.config import BLOCK_SIZE, FLAVORS

if TYPE_CHECKING:  # engine imports nothing from here; the import is for the type alone
    from benchy.sim.engine import Trace

# neither vLLM's nor llama.cpp's text has _created samples (prometheus_client leaves this one unannotated)
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# vLLM's buckets (vllm/v1/metrics/loggers.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0)


def intervals(trace: Trace) -> dict[str, float] | None:
    """vLLM's per-request intervals of a truth record; None when no token was generated."""
    times = trace.token_times_s
    if not times or trace.admitted_s is None or trace.queued_s is None:
        return None
    first, last = times[0], times[-1]
    return {
        "ttft_s": first - trace.arrival_s,
        "queue_s": trace.admitted_s - trace.queued_s,
        "prefill_s": first - trace.admitted_s,
        "decode_s": last - first,
        "inference_s": last - trace.admitted_s,
        "e2e_s": last - trace.arrival_s,
    }


def reported_cached(trace: Trace) -> int:
    """The cached tokens the server admits to (usage's count), as its counters would."""
    reported = trace.reported_cached_tokens
    return reported if reported is not None else trace.cached_tokens or 0


class SimMetrics:
    """The registry behind GET /metrics; `observe` each truth record once, as it is logged."""

    def __init__(self, flavor: str, model: str, token_factor: float = 1.0, cache_blocks: int | None = None) -> None:
        if flavor not in FLAVORS:
            raise ValueError(f"unknown metrics flavor {flavor!r}")
        self.flavor = flavor
        self.model = model
        self.token_factor = token_factor
        self.cache_blocks = cache_blocks  # vLLM's cache_config_info num_gpu_blocks (None: no cache)
        self.registry = CollectorRegistry()
        if flavor == "vllm":
            self._build_vllm()
        else:
            self._build_llamacpp()

    # --- vLLM ---

    def _build_vllm(self) -> None:
        labels = ["model_name", "engine"]
        reg, values = self.registry, (self.model, "0")

        def hist(name: str, doc: str, buckets: Sequence[float]) -> Histogram:
            return Histogram(name, doc, labels, buckets=buckets, registry=reg).labels(*values)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, labels, registry=reg).labels(*values)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, labels, registry=reg).labels(*values)

        self.hist = {
            "ttft_s": hist(
                "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
            ),
            "queue_s": hist("vllm:request_queue_time_seconds", "Time spent in WAITING phase.", REQUEST_BUCKETS),
            "prefill_s": hist("vllm:request_prefill_time_seconds", "Time spent in PREFILL phase.", REQUEST_BUCKETS),
            "decode_s": hist("vllm:request_decode_time_seconds", "Time spent in DECODE phase.", REQUEST_BUCKETS),
            "inference_s": hist("vllm:request_inference_time_seconds", "Time spent in RUNNING phase.", REQUEST_BUCKETS),
            "e2e_s": hist("vllm:e2e_request_latency_seconds", "End-to-end request latency.", REQUEST_BUCKETS),
        }
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.cache_queries = counter("vllm:prefix_cache_queries", "Prefix cache queries, in queried tokens.")
        self.cache_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemptions.")
        self.success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*labels, "finished_reason"],
            registry=reg,
        )
        for reason in ("stop", "length", "abort"):  # vLLM creates one series per finish reason up front
            self.success.labels(self.model, "0", reason)
        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage: Gauge | None = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        if self.cache_blocks is not None:  # vLLM's info gauge: the KV cache's size, one replica's
            info = Gauge(
                "vllm:cache_config_info",
                "Information of the LLMEngine CacheConfig",
                ["block_size", "num_gpu_blocks", "enable_prefix_caching"],
                registry=reg,
            )
            info.labels(str(BLOCK_SIZE), str(self.cache_blocks), "True").set(1)

    def _observe_vllm(self, trace: Trace, spans: dict[str, float]) -> None:
        for name, value in spans.items():
            self.hist[name].observe(value)
        prompt = trace.prompt_tokens or 0
        self.prompt_tokens.inc(prompt)
        self.generation_tokens.inc(trace.completion_tokens * self.token_factor)
        self.cache_queries.inc(prompt)
        self.cache_hits.inc(reported_cached(trace))
        self.success.labels(self.model, "0", trace.finish_reason or "abort").inc()

    # --- llama.cpp ---

    def _build_llamacpp(self) -> None:
        reg = self.registry
        self.prompt_tokens = Counter(
            "llamacpp:prompt_tokens", "Number of prompt tokens processed, excluding cached tokens", registry=reg
        )
        self.cached_tokens = Counter(
            "llamacpp:prompt_tokens_cached", "Number of prompt tokens reused from the cache", registry=reg
        )
        self.prompt_seconds = Counter("llamacpp:prompt_seconds", "Total time spent processing prompts", registry=reg)
        self.generation_tokens = Counter(
            "llamacpp:tokens_predicted", "Number of generation tokens processed", registry=reg
        )
        self.decode_seconds = Counter(
            "llamacpp:tokens_predicted_seconds", "Total time spent generating tokens", registry=reg
        )
        self.running = Gauge("llamacpp:requests_processing", "Number of requests processing", registry=reg)
        self.waiting = Gauge("llamacpp:requests_deferred", "Number of requests deferred", registry=reg)
        self.kv_usage = None

    def _observe_llamacpp(self, trace: Trace) -> None:
        assert trace.prefill_start_s is not None and trace.prefill_end_s is not None  # observe() checked
        prompt, cached = trace.prompt_tokens or 0, reported_cached(trace)
        self.prompt_tokens.inc(prompt - cached)
        self.cached_tokens.inc(cached)
        self.prompt_seconds.inc(trace.prefill_end_s - trace.prefill_start_s)
        self.generation_tokens.inc(trace.completion_tokens * self.token_factor)
        self.decode_seconds.inc(trace.token_times_s[-1] - trace.prefill_end_s)

    # --- shared ---

    def observe(self, trace: Trace) -> None:
        """Counts a finished request (one that got through prefill and generated a token)."""
        spans = intervals(trace)
        if spans is None or trace.prefill_end_s is None:
            return
        if self.flavor == "vllm":
            self._observe_vllm(trace, spans)
        else:
            self._observe_llamacpp(trace)

    def exposition(self, running: int, waiting: int, kv_usage: float) -> bytes:
        """The /metrics body with the gauges set to the engine's state right now."""
        self.running.set(running)
        self.waiting.set(waiting)
        if self.kv_usage is not None:
            self.kv_usage.set(kv_usage)
        return generate_latest(self.registry)
