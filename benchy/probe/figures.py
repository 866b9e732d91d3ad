"""Every figure `benchy probe-cache` prints, defined once: its unit, its source, what it is, and
the statistic (measure/stats.py) that makes it from a sample.

Why a table of its own: the run's registry (measure/metrics.py) describes per-request figures
summarised over a case; the probe's are medians, ratios of medians and one-sided tests over a
length's two sides or a capacity pass, figures that registry has no shape for. Here each has
one name that the verdicts, probe.json and the report share, and one way to compute it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from benchy.measure import stats

CLIENT, SERVER = "client", "server"  # who measured the values a figure is made of


def _ratio_of_medians(numerator: Sequence[float], denominator: Sequence[float]) -> float:
    return stats.median(numerator) / stats.median(denominator)


def _welch(a: Sequence[float], b: Sequence[float]) -> float:
    return stats.log_welch_less(np.asarray(a, float), np.asarray(b, float))


def _rank(a: Sequence[float], b: Sequence[float]) -> float | None:
    return stats.exact_rank_less(np.asarray(a, float), np.asarray(b, float))


@dataclass(frozen=True)
class ProbeMetric:
    """One figure of the probe; `of(*samples)` computes it."""

    name: str
    unit: str
    source: str  # CLIENT or SERVER
    definition: str
    formula: Callable[..., float | None]

    def of(self, *samples: Sequence[float]) -> float | None:
        return self.formula(*samples)


PROBE_METRICS: dict[str, ProbeMetric] = {
    m.name: m
    for m in (
        ProbeMetric("ttft_s", "s", CLIENT, "median time to first token of a set of requests", stats.median),
        ProbeMetric(
            "speedup", "×", CLIENT, "median unique-prefix TTFT ÷ median repeat (or hit) TTFT", _ratio_of_medians
        ),
        ProbeMetric("p_faster", "p", CLIENT, "one-sided Welch t on log TTFT: the first sample is faster", _welch),
        ProbeMetric("rank_p", "p", CLIENT, "exact one-sided Mann–Whitney U: the first sample is faster", _rank),
        ProbeMetric("prompt_tokens", "tokens", SERVER, "median of the server's usage.prompt_tokens", stats.median),
        ProbeMetric("cached_tokens", "tokens", SERVER, "median of the server's usage.cached_tokens", stats.median),
        ProbeMetric("server_prompt_ms", "ms", SERVER, "median of llama.cpp's timings.prompt_ms", stats.median),
    )
}


def figure(name: str, *samples: Sequence[float]) -> float:
    """The named figure of non-empty samples (a test that may say nothing: see `p_value`)."""
    value = PROBE_METRICS[name].of(*samples)
    assert value is not None, name
    return value


def p_value(name: str, a: Sequence[float], b: Sequence[float]) -> float | None:
    """A p-value figure; None where the samples are too small for the test to reach α."""
    return PROBE_METRICS[name].of(a, b)
