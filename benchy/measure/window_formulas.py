"""Formulas of figures taken over a case rather than one request: the GPU's energy per output
token and per request, the server's rates and cache hit rate over its /metrics window, and a
shared prefix's TTFT gain. Like the request formulas, each takes
what it reads and the values of the metrics it depends on (the registry passes them forward
in its order), and never calls another formula."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from benchy.measure.unavailable import NO_IDLE_BASELINE, NO_OUTPUT_TOKENS, NO_SERVER_FIGURE, NO_SUCCESS, Unavailable


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


def ttft_speedup(_: NoInput, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return baseline_ttft_s / ttft_s


def ttft_saved(_: NoInput, baseline_ttft_s: float, ttft_s: float) -> float | Unavailable:
    return 1 - ttft_s / baseline_ttft_s


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
