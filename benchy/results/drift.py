"""Drift over a case: identical requests whose rate moves steadily with time have no single rate.

Why: a GPU that throttles under sustained load (a DGX Spark, a laptop) decodes each request a
little slower than the one before; the median of eight such requests is printed as "the" rate
and set beside cases that ran cooler. The test is on the case's own order: Kendall's tau of the
rate against each request's send time (a trend, whatever its shape, beyond chance: p below
DRIFT_P), and the Theil–Sen line through them (robust to a stray request) for its size, from the
first request to the last; a change past DRIFT_MIN of the first is drift. Only cases whose
requests are alike and run alone (a sweep or shared-prefix case at concurrency 1): a
conversation's turns slow as their context grows, and under load each request's rates hold
what ran beside it (the first wave, a router's misses queued behind its hits), a trend of the
load's, not of the machine.

Across cases: cases whose requests are of one shape (the same prompt and output lengths and
endpoint, at concurrency 1) recur in a run (a plain sweep case beside a cached-context or
shared-prefix one; the same pp/tg under another dataset or scenario): their requests, pooled
in send order, are tested the same way for decode (which a cache does not move), so a GPU that
slows between the first such case and the last is seen even where each case alone is too short.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchy.measure import stats
from benchy.results.types import CaseResult
from benchy.results.verdicts.codes import ACROSS_METRICS, DRIFT_METRICS

DRIFT_MIN = 0.10  # the fitted change from the first request to the last, as a share of the first
DRIFT_P = 0.01  # Kendall's tau must be this unlikely without a trend
MIN_REQUESTS = 6  # fewer show no trend (6 in order: p ≈ 0.003)


@dataclass(frozen=True)
class Drift:
    metric: str
    first: float  # the Theil–Sen line at the first request's send time
    last: float  # and at the last's
    p_value: float  # Kendall's tau against send time
    requests: int

    @property
    def change(self) -> float:
        return self.last / self.first - 1.0 if self.first > 0 else 0.0

    @property
    def found(self) -> bool:
        return self.p_value < DRIFT_P and abs(self.change) > DRIFT_MIN


def alike(case: CaseResult) -> bool:
    return case.kind in ("sweep", "shared_prefix") and case.rate is None and case.concurrency == 1


def drift(case: CaseResult, metric: str) -> Drift | None:
    """The trend of `metric` over the case's measured requests in send order (None: too few)."""
    return _trend(_points(case, metric), metric)


def _points(case: CaseResult, metric: str) -> list[tuple[float, float]]:
    return [
        (r.sent_unix_s, v) for r in case.measured_ok() if not r.control and (v := r.metrics.get(metric)) is not None
    ]


def _trend(unsorted: list[tuple[float, float]], metric: str) -> Drift | None:
    points = sorted(unsorted)
    if len(points) < MIN_REQUESTS:
        return None
    x = np.array([t for t, _ in points]) - points[0][0]
    y = np.array([v for _, v in points])
    if np.ptp(x) <= 0 or np.ptp(y) <= 0:
        return None
    p_value, intercept, slope = stats.trend(x, y)
    return Drift(metric, intercept, float(intercept + slope * x[-1]), p_value, len(points))


def case_drift(case: CaseResult) -> list[Drift]:
    """The rates of an alike case that drift (measure every DRIFT_METRICS of it)."""
    if not alike(case):
        return []
    found = [d for d in (drift(case, m) for m in DRIFT_METRICS) if d is not None]
    return [d for d in found if d.found]


@dataclass(frozen=True)
class ShapeDrift:
    """A drift over the pooled requests of cases of one shape, in run order."""

    cases: tuple[str, ...]  # their labels, in the order they ran
    drifts: tuple[Drift, ...]


def shape(case: CaseResult) -> tuple[int, int, str | None] | None:
    """What makes cases' requests alike for decode: prompt and output lengths and the endpoint,
    one request at a time (None: a case whose requests are not alike, or that ran under load)."""
    if not alike(case):
        return None
    return (case.depth + case.pp, case.tg, case.endpoint)


def shape_drift(cases: list[CaseResult]) -> list[ShapeDrift]:
    """The drifts across cases that share a shape (two or more), each group in run order."""
    groups: dict[tuple[int, int, str | None], list[CaseResult]] = {}
    for case in cases:
        key = shape(case)
        if key is not None:
            groups.setdefault(key, []).append(case)
    found = []
    for group in groups.values():
        if len(group) < 2:
            continue
        group = sorted(group, key=_started)
        trends = [_trend([p for c in group for p in _points(c, m)], m) for m in ACROSS_METRICS]
        drifts = tuple(d for d in trends if d is not None and d.found)
        if drifts:
            found.append(ShapeDrift(tuple(c.label for c in group), drifts))
    return found


def _started(case: CaseResult) -> float:
    return min((r.sent_unix_s for r in case.measured_ok()), default=float("inf"))
