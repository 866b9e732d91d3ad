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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchy.measure import stats
from benchy.results.types import CaseResult

DRIFT_METRICS = ("decode_tps", "e2e_tps")  # the rates a throttling GPU moves
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
    points = sorted(
        (r.sent_unix_s, v) for r in case.measured_ok() if not r.control and (v := r.metrics.get(metric)) is not None
    )
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
