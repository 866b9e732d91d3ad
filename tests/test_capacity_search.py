"""The capacity search's decisions (benchy/capacity/search.py), driven by made-up servers whose
goodput at every load is known, and the goodput interval it judges by (stats.proportion_interval)."""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats as sps

from benchy.capacity.runner import passed_despite_client_delay
from benchy.capacity.search import (
    ALL_PASS,
    CLIENT_LIMITED,
    FOUND,
    NONE_PASS,
    Observation,
    Search,
    SearchSettings,
)
from benchy.measure.stats import proportion_interval


def drive(settings: SearchSettings, goodput_at, overloaded_at=lambda load: False, max_steps: int = 200) -> Search:
    """Runs the search against a server whose requests meet the SLO with chance goodput_at(load),
    each round's good count its exact expected value (rounded down), so the test is deterministic."""
    search = Search(settings)
    for _ in range(max_steps):
        probe = search.next_probe()
        if probe is None:
            return search
        good = math.floor(goodput_at(probe.load) * probe.requests)
        why = "loop lag" if overloaded_at(probe.load) else None
        search.record(probe.load, Observation(probe.requests, good, why))
    raise AssertionError("the search never ended")


def step_server(capacity: float, beyond: float = 0.5):
    """Every request meets the SLO up to `capacity`; beyond it only the share `beyond` does."""
    return lambda load: 1.0 if load <= capacity else beyond


@pytest.mark.parametrize("capacity", [1, 3, 4, 12, 100, 255])
def test_concurrency_search_finds_the_step_exactly(capacity):
    search = drive(SearchSettings(limit=256), step_server(capacity))
    answer = search.answer()
    assert (answer.kind, answer.capacity, answer.failing) == (FOUND, capacity, capacity + 1)
    assert answer.confident


def test_requests_go_to_the_bracket_ends():
    """Far from the boundary one round decides the direction; the two ends get the requests that
    make their verdict clear (35 clean requests are the fewest whose 95% Wilson interval lies
    above 0.9), and no point gets more than it needs."""
    s = SearchSettings(limit=256, min_requests=20)
    search = drive(s, step_server(12, beyond=0.84))
    far = [p for p in search.points.values() if p.load < 8]
    assert far and all(p.requests == 20 for p in far)
    assert search.points[12].requests >= 35 and search.points[12].verdict(s) == "pass"
    assert search.points[13].verdict(s) == "fail"
    assert proportion_interval(34, 34)[0] < 0.9 <= proportion_interval(35, 35)[0]


def test_a_point_that_stays_undecided_is_said_uncertain():
    """Goodput exactly at the target never clears its interval: the point gets --max-requests and
    the answer says it is not confident."""
    s = SearchSettings(limit=64, max_requests=80)
    search = drive(s, lambda load: 1.0 if load <= 4 else (0.9 if load == 5 else 0.3))
    answer = search.answer()
    assert (answer.capacity, answer.failing) == (5, 6)  # 0.9 meets "at least 0.9"
    assert not answer.confident and search.points[5].requests == 80


def test_every_point_passing_up_to_the_limit_is_an_answer():
    search = drive(SearchSettings(limit=48), step_server(1000))
    answer = search.answer()
    assert (answer.kind, answer.capacity, answer.failing) == (ALL_PASS, 48, None)
    assert max(search.points) == 48


def test_even_the_lowest_load_failing_is_an_answer():
    search = drive(SearchSettings(start=8, limit=64), lambda load: 0.2)
    answer = search.answer()
    assert (answer.kind, answer.capacity, answer.failing) == (NONE_PASS, None, 1)
    assert sorted(search.points) == [1, 2, 4, 8]  # halved down from --start


def test_rounds_where_the_client_fell_behind_are_not_evidence():
    """A server that would pass everything, measured by a client that falls behind from 16 on:
    those rounds are not counted, and the answer is a lower bound that says why."""
    search = drive(SearchSettings(limit=256, client_retries=1), step_server(1000), lambda load: load >= 16)
    answer = search.answer()
    assert (answer.kind, answer.capacity, answer.client_limited_at) == (CLIENT_LIMITED, 8, 16)
    assert search.points[16].requests == 0 and search.points[16].discarded == 2


def test_one_overloaded_round_is_retried_and_then_counts():
    calls = {"n": 0}

    def once(load):
        calls["n"] += load == 4
        return load == 4 and calls["n"] == 1

    search = drive(SearchSettings(limit=256), step_server(6), once)
    assert search.answer().capacity == 6 and search.points[4].discarded == 1


def test_rate_search_stops_within_the_resolution():
    s = SearchSettings(by="rate", start=1, limit=64, floor=1 / 16, resolution=0.05)
    search = drive(s, lambda rate: 1.0 if rate <= 7.3 else 0.4)
    answer = search.answer()
    assert answer.kind == FOUND and answer.capacity <= 7.3 < answer.failing
    assert answer.failing - answer.capacity <= 0.05 * answer.failing


def test_a_random_server_is_found_at_its_step():
    """Bernoulli requests (seeded), goodput 0.97 up to c=10 and 0.6 beyond: the search answers 10."""
    rng = random.Random(7)
    s = SearchSettings(limit=128)
    search = Search(s)
    while (probe := search.next_probe()) is not None:
        p = 0.97 if probe.load <= 10 else 0.6
        good = sum(rng.random() < p for _ in range(probe.requests))
        search.record(probe.load, Observation(probe.requests, good))
    assert (search.answer().capacity, search.answer().failing) == (10, 11)


@pytest.mark.parametrize("k, n", [(0, 10), (7, 10), (10, 10), (95, 100), (1, 3)])
def test_exact_interval_is_clopper_pearson(k, n):
    """Clopper–Pearson from its definition: the beta quantiles (Clopper & Pearson, 1934)."""
    low, high = proportion_interval(k, n, 0.95, "exact")
    assert low == pytest.approx(0.0 if k == 0 else sps.beta.ppf(0.025, k, n - k + 1), abs=1e-9)
    assert high == pytest.approx(1.0 if k == n else sps.beta.ppf(0.975, k + 1, n - k), abs=1e-9)


@pytest.mark.parametrize("k, n", [(0, 10), (7, 10), (10, 10), (40, 50)])
def test_wilson_interval_is_the_score_interval(k, n):
    """Wilson (1927): (p + z²/2n ± z·sqrt(p(1−p)/n + z²/4n²)) / (1 + z²/n)."""
    z, p = sps.norm.ppf(0.975), k / n
    centre, half = p + z * z / (2 * n), z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    low, high = proportion_interval(k, n)
    assert (low, high) == pytest.approx(((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)))


def test_bad_settings_are_one_line():
    for bad in (SearchSettings(target=0), SearchSettings(start=3, limit=2), SearchSettings(start=1.5)):
        with pytest.raises(ValueError, match="--"):
            bad.check()
    with pytest.raises(ValueError):
        proportion_interval(3, 2)


def test_a_late_round_proves_a_pass_only_for_figures_a_late_client_can_only_worsen():
    """benchy fell behind: its timestamps are late, so a TTFT, a latency or an e2e rate it measured
    within the SLO was delivered within it; a pass counts. A decode rate or an ITL can look better
    for a late read (gaps squeezed after a stall), and a failure may be benchy's own: neither counts."""
    late = Observation(10, 9, "loop lag")
    for slo in ({"ttft_s": 0.2}, {"e2e_s": 1.0, "e2e_tps": 20.0}, {"ttfc_s": 0.3}):
        assert passed_despite_client_delay(slo, 0.9, late)
    assert not passed_despite_client_delay({"ttft_s": 0.2, "decode_tps": 30.0}, 0.9, late)
    assert not passed_despite_client_delay({"itl_s": 0.05}, 0.9, late)
    assert not passed_despite_client_delay({"ttft_s": 0.2}, 0.9, Observation(10, 8, "loop lag"))
    assert not passed_despite_client_delay({"ttft_s": 0.2}, 0.9, Observation(10, 9, None))  # not late: counted anyway
    assert not passed_despite_client_delay({}, 0.9, late)
