"""Issue 36, item 5 across cases: a GPU that throttles over the whole run slows every case of
one request shape after the one before, though no case alone is long enough to show a trend.
The run pools such cases' requests in send order, tests them for a trend, qualifies each case's
decode and shows the simulated GPU's clocks beside it. Judged by the simulator's truth log: the
rate at which its engine produced each request's tokens."""

from __future__ import annotations

import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.results import drift as drift_figures
from benchy.workloads.scenario import sweep
from tests.test_checks import codes, measured
from tests.test_drift import truth_decode_tps

RUNS = 4  # a case alone: fewer requests than a trend needs (drift.MIN_REQUESTS)


def two_cases_of_one_shape(sim, gpu_metrics: str | None = None) -> dict:
    """pp64 @ d128 cold, then the same prompt length with its context sent ahead (cached):
    one request shape for decode, two cases."""
    cases = sweep([64], [64], [1], depth=[128]) + sweep([64], [64], [1], depth=[128], depth_mode="cached")
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url),
        cases=cases,
        runs=RUNS,
        warmup=1,
        progress=False,
        gpu_metrics=gpu_metrics,
    )
    return run_mod.execute(settings).to_dict()


def truth_rates(sim, results: dict) -> list[float]:
    """The engine's decode rate of every measured request of the run, in send order."""
    truth = {t["request_id"]: t for t in sim.truth() if t.get("request_id")}
    rows = sorted((r for c in results["cases"] for r in measured(c)), key=lambda r: r["sent_unix_s"])
    return [truth_decode_tps(truth[r["request_id"]]) for r in rows]


def test_a_gpu_that_throttles_over_the_run_drifts_across_cases_of_one_shape(start_sim):
    sim = start_sim("--preset", "throttling", "--throttle", "0.5", "--throttle-s", "20", "--gpus", "1")
    results = two_cases_of_one_shape(sim, sim.base_url.removesuffix("/v1") + "/dcgm/metrics")
    assert RUNS < drift_figures.MIN_REQUESTS <= 2 * RUNS
    rates = truth_rates(sim, results)
    # The truth: every request decoded slower than the one before, by a sixth or more in all.
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)) and rates[-1] < 0.85 * rates[0]
    found = [w for w in results["warnings"] if w["code"] == "rate_drift_across_cases"]
    labels = [c["label"] for c in results["cases"]]
    assert sorted(w["case"] for w in found) == sorted(labels)  # each case's decode is qualified
    assert "rate_drift" not in codes(results)  # no case alone could show it
    for w in found:
        d = w["details"]
        assert "decode_tps" in w["metrics"] and d["cases"] == labels and d["requests"] == 2 * RUNS
        assert d["first_tps"] == pytest.approx(rates[0], rel=0.1)
        assert d["last_tps"] == pytest.approx(rates[-1], rel=0.1)
        # The simulated GPU clocked down with it, and said why.
        assert d["sm_clock_mhz_last"] < d["sm_clock_mhz_first"] and d["temp_c_last"] > d["temp_c_first"]
        assert "sw_thermal_slowdown" in d["throttle_reasons"]
        assert "SM clock" in w["message"]


def test_cases_of_one_shape_on_a_steady_gpu_do_not_drift(start_sim):
    sim = start_sim("--decode-tps", "100")
    results = two_cases_of_one_shape(sim)
    rates = truth_rates(sim, results)
    assert max(rates) == pytest.approx(min(rates), rel=1e-6)  # the truth: one rate
    assert "rate_drift_across_cases" not in codes(results)
