"""Issue 36, item 5: drift over a run. A GPU that throttles under sustained load (a DGX Spark,
a laptop) decodes identical requests slower and slower: they have no single rate, and their
median is no more "the" rate than any other. benchy tests the case's send order for a trend,
warns, and qualifies the figures it moves. Judged against the simulator's truth log: the rate
at which its engine produced each request's tokens.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.measure import stats
from benchy.results import drift as drift_mod
from benchy.workloads.scenario import sweep
from tests.conftest import warning_codes
from tests.test_checks import bench, codes, measured, truth_of, warning


def truth_decode_tps(truth: dict) -> float:
    """The timing model's decode rate for the request (when its tokens were due: a busy test
    machine makes them late, and that is no property of the simulated GPU)."""
    times = truth["token_due_s"]
    return (len(times) - 1) / (times[-1] - times[0])


def delivered_drift(truth: dict, rows: list[dict]) -> bool:
    """Whether the rates the simulator truly delivered (its tokens' send times, which a busy
    machine's stalls bend) drift by benchy's own test: a stall of a fifth of a request makes one
    rate an outlier, and where that hides the trend from Kendall's tau, no warning is owed."""
    x = [r["sent_unix_s"] - rows[0]["sent_unix_s"] for r in rows]
    sent = [truth[r["request_id"]]["token_times_s"] for r in rows]
    y = [(len(t) - 1) / (t[-1] - t[0]) for t in sent]
    p_value, intercept, slope = stats.trend(x, y)
    return p_value < drift_mod.DRIFT_P and abs(slope * x[-1] / intercept) > drift_mod.DRIFT_MIN


def test_a_throttling_gpu_is_drift_not_a_rate(start_sim):
    # 16 requests, so that one a stall bent cannot hide the trend; heating over 20 s, so that
    # they all fall on the slope rather than the plateau.
    sim = start_sim("--preset", "throttling", "--throttle-s", "20")
    results = bench(sim, pp=(64,), tg=(64,), runs=16)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    rows = sorted(measured(case), key=lambda r: r["sent_unix_s"])
    rates = [truth_decode_tps(truth[r["request_id"]]) for r in rows]
    # The truth: each request decoded slower than the one before, by a fifth or more in all.
    assert all(b <= a for a, b in zip(rates, rates[1:], strict=False)) and rates[-1] < 0.85 * rates[0]
    if not delivered_drift(truth, rows):
        pytest.skip("the simulator's stalls on this busy machine hid its own trend")
    w = warning(results, "rate_drift")
    assert w["case"] == case["label"] and "decode_tps" in w["metrics"]
    d = w["details"]
    assert d["first_tps"] == pytest.approx(rates[0], rel=0.1)
    assert d["last_tps"] == pytest.approx(rates[-1], rel=0.1)
    assert d["drift_pct"] == pytest.approx(100 * (rates[-1] / rates[0] - 1), abs=6)
    (evidence,) = w["evidence"]
    assert abs(evidence["observed"]) > evidence["threshold"]


def test_a_steady_gpu_has_no_drift(start_sim):
    sim = start_sim("--decode-tps", "100")
    results = bench(sim, pp=(64,), tg=(64,), runs=8)
    truth = truth_of(sim, results)
    rates = [truth_decode_tps(truth[r["request_id"]]) for r in measured(results["cases"][0])]
    assert max(rates) == pytest.approx(min(rates), rel=1e-6)  # the truth: one rate
    assert "rate_drift" not in codes(results)
    assert np.isfinite(results["cases"][0]["summary"]["decode_tps"]["median"])


def test_the_gpus_clock_and_temperature_are_shown_beside_the_drift(start_sim):
    sim = start_sim("--preset", "throttling", "--gpus", "1")
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url),
        cases=sweep([64], [64], [1]),
        runs=8,
        warmup=1,
        progress=False,
        gpu_metrics=sim.base_url.removesuffix("/v1") + "/dcgm/metrics",
    )
    results = run_mod.execute(settings).to_dict()
    (case,) = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t.get("request_id")}  # GPU lines have none
    rows = sorted(measured(case), key=lambda r: r["sent_unix_s"])
    rates = [truth_decode_tps(truth[r["request_id"]]) for r in rows]
    d = warning(results, "rate_drift")["details"]
    # The simulated GPU clocks down with its decode rate: the clock fell by about the share the
    # truth's decode did over the case (the samples bracket the requests, so a little more).
    fell = d["sm_clock_mhz_last"] / d["sm_clock_mhz_first"]
    assert fell < 1 and fell == pytest.approx(rates[-1] / rates[0], abs=0.08)
    assert d["temp_c_last"] > d["temp_c_first"] and "sw_thermal_slowdown" in d["throttle_reasons"]


def test_a_drift_warning_is_excused_in_an_exact_set_only_where_the_truth_shows_the_drift():
    """tests/conftest.warning_codes with the truth: rate_drift is true of a simulator that a busy
    machine slowed steadily (the test then drops it), and stays where the truth's rates held."""

    def run(slowing: float) -> tuple[dict, dict]:
        requests, truth = [], {}
        for i in range(8):
            step = 0.01 * (1 + slowing * i)  # seconds per token, as the simulator wrote them
            arrival = 10.0 * i
            truth[f"r{i}"] = {"arrival_s": arrival, "token_times_s": [arrival + 0.05 + step * k for k in range(16)]}
            requests.append({"request_id": f"r{i}", "warmup": False, "sent_mono_s": arrival})
        warning = {"code": "rate_drift", "case": "c"}
        return {"cases": [{"label": "c", "requests": requests}], "warnings": [warning]}, truth

    slowed, truth = run(0.1)
    assert warning_codes(slowed) == {"rate_drift"} and warning_codes(slowed, truth=truth) == set()
    steady, truth = run(0.0)
    assert warning_codes(steady, truth=truth) == {"rate_drift"}


def test_sse_buffering_is_excused_in_an_exact_set_only_where_the_simulator_wrote_bursts():
    """tests/conftest.warning_codes with the truth: a simulator that fell behind its schedule
    and wrote a request's tokens all at once made a buffered stream; one on schedule did not."""
    due = [1.0 + 0.0025 * k for k in range(24)]  # 400 tokens/s
    behind = {"token_due_s": due, "token_times_s": [1.06 + 0.00001 * k for k in range(24)]}
    on_time = {"token_due_s": due, "token_times_s": [t + 0.0001 for t in due]}
    for kind, expected in ((behind, set()), (on_time, {"sse_buffering"})):
        truth = {f"r{i}": kind for i in range(4)}
        requests = [{"request_id": f"r{i}", "warmup": False} for i in range(4)]
        results = {
            "cases": [{"label": "c", "requests": requests}],
            "warnings": [{"code": "sse_buffering", "case": "c"}],
        }
        assert warning_codes(results, truth=truth) == expected
