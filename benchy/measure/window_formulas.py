"""Formulas of figures taken over a case rather than one request: the GPU's energy per output
token and per request, the server's rates and cache hit rate over its /metrics window, benchy's
own event-loop lag and CPU share, the means of the server's histograms, and a TTFT gain. Like the request formulas, each takes
what it reads and the values of the metrics it depends on (the registry passes them forward
in its order), and never calls another formula."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from benchy.measure import stats
from benchy.measure.unavailable import (
    NO_IDLE_BASELINE,
    NO_LOOP_SAMPLE,
    NO_OUTPUT_TOKENS,
    NO_SERVER_FIGURE,
    NO_SUCCESS,
    NOT_MEASURED,
    Unavailable,
)


@dataclass(frozen=True)
class EnergyWindow:
    """What the energy figures read of a case besides its energy: the output tokens and
    successful requests measured in it, the idle draw sampled before the run, the window."""

    output_tokens: int
    requests: int
    idle_power_w: float | None
    window_s: float


def joules_per_token(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.output_tokens <= 0:
        return Unavailable(NO_OUTPUT_TOKENS, "no output token was counted in the case")
    return energy_j / window.output_tokens


def joules_per_request(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.requests <= 0:
        return Unavailable(NO_SUCCESS, "no request succeeded in the case")
    return energy_j / window.requests


def marginal_joules_per_token(window: EnergyWindow, energy_j: float) -> float | Unavailable:
    if window.idle_power_w is None:
        return Unavailable(NO_IDLE_BASELINE, "no idle baseline was sampled before the run")
    if window.output_tokens <= 0:
        return Unavailable(NO_OUTPUT_TOKENS, "no output token was counted in the case")
    return (energy_j - window.idle_power_w * window.window_s) / window.output_tokens


@dataclass(frozen=True)
class NoInput:
    """For formulas that read nothing but the values they depend on."""


NOTHING = NoInput()


NO_MEDIAN = Unavailable(NOT_MEASURED, "no median: no request had the figure")


def ttft_speedup(_: object, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return baseline_ttft_s / ttft_s if baseline_ttft_s and ttft_s else NO_MEDIAN


def ttft_saved(_: object, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return 1 - ttft_s / baseline_ttft_s if baseline_ttft_s and ttft_s else NO_MEDIAN


class Histogram(Protocol):
    """A histogram's observations over the case (server.metrics.HistogramDelta)."""

    @property
    def count(self) -> float: ...
    @property
    def sum(self) -> float: ...


@dataclass(frozen=True)
class ServerWindow:
    """What the server-window formulas read: the server's counters and histograms over the
    case (their changes between two /metrics snapshots) and the requests it counted finishing."""

    counters: Mapping[str, float]
    histograms: Mapping[str, Histogram]
    requests: float | None


def server_cache_hit_rate(window: ServerWindow) -> float | Unavailable:
    c = window.counters
    if c.get("cache_queries"):
        return c.get("cache_hits", 0.0) / c["cache_queries"]
    if "cache_queries" in c:
        return Unavailable(NO_SERVER_FIGURE, "no prompt token was looked up in the cache during the case")
    return Unavailable(NO_SERVER_FIGURE, "the server publishes no prefix-cache counters")


def server_window_prefill_tps(window: ServerWindow) -> float | Unavailable:
    c, h = window.counters, window.histograms
    uncached = c["prompt_tokens"] - c.get("cache_hits", 0.0) if "prompt_tokens" in c else None
    prefill_time = c.get("prompt_seconds") or (h["prefill_s"].sum if "prefill_s" in h else None)
    if uncached is None or not prefill_time:
        return Unavailable(NO_SERVER_FIGURE, "the server publishes no prefill time (or no prompt tokens) for the case")
    return uncached / prefill_time


def server_window_decode_tps(window: ServerWindow) -> float | Unavailable:
    """llama.cpp's tokens ÷ its decode seconds; vLLM's decode interval runs from the first
    token to the last, so it holds one token fewer per request."""
    c, h = window.counters, window.histograms
    generated = c.get("generation_tokens")
    if generated is not None and c.get("decode_seconds"):
        return generated / c["decode_seconds"]
    if generated is not None and "decode_s" in h and h["decode_s"].sum > 0 and window.requests:
        return (generated - h["decode_s"].count) / h["decode_s"].sum
    return Unavailable(NO_SERVER_FIGURE, "the server publishes no decode time (or no generated tokens) for the case")


def histogram_mean(name: str) -> Callable[[ServerWindow], float | Unavailable]:
    """The formula of the mean of the server's histogram `name` over the case: sum ÷ count."""

    def of_histogram(window: ServerWindow) -> float | Unavailable:
        h = window.histograms.get(name)
        if h is None:
            return Unavailable(NO_SERVER_FIGURE, f"the server publishes no {name} histogram")
        if h.count <= 0:
            return Unavailable(NO_SERVER_FIGURE, f"the server observed no {name} during the case")
        return h.sum / h.count

    return of_histogram


STALL_MS = 10.0  # a wake-up this late is a stall: the loop was busy (or descheduled) that long


@dataclass(frozen=True)
class LoopSamples:
    """benchy's event-loop samples taken while a request was in flight: how late each wake-up
    came (ms), and the process's CPU and wall time over them."""

    lags_ms: np.ndarray
    cpu_s: float
    wall_s: float


_NO_LAG = Unavailable(NO_LOOP_SAMPLE, "no event-loop sample was taken while a request was in flight")
_NO_WALL = Unavailable(NO_LOOP_SAMPLE, "no in-flight time was sampled")


def loop_lag_ms_max(loop: LoopSamples) -> float | Unavailable:
    return round(float(loop.lags_ms.max()), 3) if loop.lags_ms.size else _NO_LAG


def loop_lag_ms_p99(loop: LoopSamples) -> float | Unavailable:
    return round(stats.percentile(loop.lags_ms, 99), 3) if loop.lags_ms.size else _NO_LAG


def loop_lag_ms_p95(loop: LoopSamples) -> float | Unavailable:
    return round(stats.percentile(loop.lags_ms, 95), 3) if loop.lags_ms.size else _NO_LAG


def loop_lag_ms_median(loop: LoopSamples) -> float | Unavailable:
    return round(stats.median(loop.lags_ms), 3) if loop.lags_ms.size else _NO_LAG


def stalled_share(loop: LoopSamples) -> float | Unavailable:
    """Stalls weighed by their time: one long stall is one late sample but much lost time."""
    if loop.wall_s <= 0:
        return _NO_WALL
    return round(float(loop.lags_ms[loop.lags_ms >= STALL_MS].sum()) / 1000 / loop.wall_s, 4)


def cpu_share(loop: LoopSamples) -> float | Unavailable:
    return round(loop.cpu_s / loop.wall_s, 3) if loop.wall_s > 0 else _NO_WALL
