"""Open-loop load (`--rate R`): requests arrive on a seeded Poisson schedule, whatever the server does.

A closed loop (generator.py) sends the next request when one ends, so a slow server slows its own
load. An open loop sends on a schedule made before the case starts: n arrival times drawn
uniformly over n / R seconds and sorted. That is a Poisson process conditioned on its count, so
the gaps are exponential (bursts included) while the case offers exactly R requests/s on
average over its window, and the same seed gives the same schedule in every worker process.

The send loop (send.py) sends on it. Each record keeps when the schedule wanted it sent
(`scheduled_mono_s`); a send that falls behind (the --max-inflight cap was full, or the event
loop was late) is measured as queue delay (case_formulas.send_lag_s), never hidden.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_RATE_SECONDS = 10.0  # a rate case with neither --requests nor --duration: 10 s of arrivals
MIN_RATE_REQUESTS = 10
SETTLE_S = DEFAULT_RATE_SECONDS  # a rate search's round: at least this long an arrival window


def settling_requests(rate: float, at_least: int) -> int:
    """Requests of a rate search's round (capacity --by rate, --saturation): `at_least`, and
    SETTLE_S seconds of arrivals. Why: an open loop above what the server sustains shows it by
    a queue that grows with time, not with the count; 20 requests at 32/s were 0.6 s, over
    before a queue could form, so an overloaded rate passed."""
    return max(at_least, math.ceil(rate * SETTLE_S - 1e-9))


def rate_requests(rate: float, requests: int | None, duration_s: float | None) -> int:
    """How many arrivals a rate case gets: --requests, else the rate × --duration (10 s). With
    --duration, the whole arrivals that fit: n arrivals span n / rate seconds (arrival_offsets),
    so a count rounded up would plan arrivals past the duration, never sent, and the case would
    read as cut short."""
    if requests is not None:
        return requests
    if duration_s is not None:
        return max(1, math.floor(rate * duration_s + 1e-9))
    return max(MIN_RATE_REQUESTS, round(rate * DEFAULT_RATE_SECONDS))


def arrival_offsets(n: int, rate: float, seed: int) -> list[float]:
    """n sorted send times (seconds from the case start) of a Poisson process at `rate` per s,
    conditioned on n arrivals in n / rate seconds."""
    rng = np.random.default_rng(seed)
    return sorted(rng.uniform(0.0, n / rate, size=n).tolist())


def share(total: int, worker: int, workers: int) -> range:
    """The global indices worker `worker` of `workers` takes of `total` (round robin), so the
    workers' shares are disjoint, cover everything and differ in size by one at most."""
    return range(worker, total, workers)


def duration_deadline(start_s: float, duration_s: float | None) -> float:
    """No request is sent after this perf_counter time (those in flight still finish)."""
    return start_s + duration_s if duration_s is not None else math.inf
