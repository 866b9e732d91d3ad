"""A rate search's rounds last long enough for an open loop's queue to show (issue 54, item 7):
each is at least arrivals.SETTLE_S seconds of arrivals, whatever --min-requests says."""

from __future__ import annotations

import pytest

from benchy.capacity.search import BY_RATE, FOUND, Observation, Search, SearchSettings
from benchy.load import arrivals


def queue_server(sustains: float, slo_wait_s: float):
    """A server that answers `sustains` requests/s, one at a time, first come first served; a
    request is good while its wait in the queue is within slo_wait_s. Arrivals are evenly
    spaced at the rate, so a round's good count follows from its size and rate alone."""

    def good(rate: float, requests: int) -> int:
        service, gap = 1 / sustains, 1 / rate
        free_at, count = 0.0, 0
        for i in range(requests):
            arrives = i * gap
            start = max(arrives, free_at)
            count += start - arrives <= slo_wait_s
            free_at = start + service
        return count

    return good


def search_by_rate(good_at, **settings) -> Search:
    search = Search(SearchSettings(by=BY_RATE, start=1, limit=64, floor=1 / 16, resolution=0.05, **settings))
    while (probe := search.next_probe()) is not None:
        search.record(probe.load, Observation(probe.requests, good_at(probe.load, probe.requests)))
    return search


def test_an_overloaded_rate_does_not_pass_a_short_round():
    """The server sustains 6/s and the SLO allows a 2 s wait: a rate r over 6 builds a queue
    of (r − 6) × t requests after t seconds, which a round of 20 requests (2.5 s at 8/s) never
    shows. In a round of SETTLE_S seconds the requests past the first 2 / (1/6 − 1/r) wait too
    long, so with goodput 0.9 wanted any rate above 6 × (1 + 2 / (0.9 × SETTLE_S)) fails."""
    sustains, wait, target = 6.0, 2.0, 0.9
    answer = search_by_rate(queue_server(sustains, wait), target=target).answer()
    assert answer.kind == FOUND
    assert sustains <= answer.failing and answer.capacity <= sustains * (1 + wait / (target * arrivals.SETTLE_S))


@pytest.mark.parametrize("rate", [0.25, 1, 4, 32, 64])
def test_each_rate_round_is_at_least_the_settling_time(rate):
    search = Search(SearchSettings(by=BY_RATE, start=rate, limit=64, floor=1 / 16, min_requests=20, max_requests=200))
    probe = search.next_probe()
    assert probe is not None and probe.load == rate
    assert probe.requests >= 20 and probe.requests / rate >= arrivals.SETTLE_S
    assert probe.requests == max(20, round(rate * arrivals.SETTLE_S))  # no longer than it needs


def test_a_concurrency_round_keeps_its_size():
    """Two requests a stream, --min-requests at least: a closed loop has no arrival window."""
    probe = Search(SearchSettings(start=64, limit=256)).next_probe()
    assert probe is not None and probe.requests == 128


def test_a_saturation_sweeps_rates_each_settle():
    """--saturation's rates: a --requests too few for the highest rate's SETTLE_S seconds is
    raised to that count (each lower rate then has a longer window); --duration is kept."""
    from benchy.load.plan import LoadSettings
    from benchy.saturation import sweep_load

    rates = [1.5, 6.0, 12.0]
    raised = sweep_load(LoadSettings(requests=20), rates)
    assert raised.requests is not None and min(raised.requests / r for r in rates) >= arrivals.SETTLE_S
    assert sweep_load(LoadSettings(requests=500), rates).requests == 500
    timed = LoadSettings(requests=20, duration_s=30.0)
    assert sweep_load(timed, rates) == timed
    assert sweep_load(LoadSettings(), rates) == LoadSettings()  # each rate: 10 s of arrivals by default
    assert arrivals.rate_requests(12.0, None, None) / 12.0 >= arrivals.SETTLE_S


def test_capacity_compare_prints_no_p90_from_too_few_requests():
    """One 'too few' policy (stats.enough_for): compare's 'TTFT p90 at capacity' from 20 requests
    reads too few, as run's tables and the points table do; from 700 it is the p90."""
    from benchy.measure import stats
    from benchy.report import capacity as report
    from benchy.results.capacity import CapacityAnswer, CapacityPoint, CapacityResult, CapacitySetup
    from benchy.results.types import MetricSummary

    def at_capacity(n: int) -> tuple[CapacityResult, MetricSummary]:
        ttft = MetricSummary.of([0.1 + 0.001 * i for i in range(n)])
        point = CapacityPoint(load=2, verdict="pass", clear=True, requests=n, good=n, goodput=1.0, ttft=ttft)
        return CapacityResult(setup=CapacitySetup(), answer=CapacityAnswer("found", 2, 3), points=[point]), ttft

    def row(result: CapacityResult) -> str:
        text = report.compare_markdown([result, result], ["a", "b"])
        return next(line for line in text.splitlines() if line.startswith("| TTFT p90 at capacity"))

    few, _ = at_capacity(20)
    assert row(few) == f"| TTFT p90 at capacity, ms | {stats.TOO_FEW} | {stats.TOO_FEW} | n/a |"
    many, ttft = at_capacity(700)
    assert ttft.p90 is not None and f"| {ttft.p90 * 1000:,.0f} | {ttft.p90 * 1000:,.0f} | +0% |" in row(many)
