"""Issue 36, item 8: a fixed latency in front of the engine (a gateway's pre-call guardrails, an
API manager, a long network path). TTFT holds it and is right; a prefill rate taken from TTFT
is not the engine's. benchy separates the fixed part (the intercept of TTFT against prompt
length across a single-stream sweep), shows it, withholds the TTFT-based prefill rate and gives
the engine's (the slope). Judged against the simulator's truth log: how long its proxy held
each request, and how fast its engine prefilled.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchy.results import latency
from tests.conftest import truth_slack_s, wrote_in_bursts
from tests.test_checks import bench, codes, measured, truth_of, warning

FAST = ("--prefill-tps", "20000", "--decode-tps", "400")
SWEEP = (512, 2048, 8192)


def delivered_engine_tps(results: dict, truth: dict[str, dict], fixed_s: float) -> tuple[float, float]:
    """The least and most engine prefill rate benchy can have read from the longest prompt's
    requests, as the truth has them delivered: each one's uncached tokens over its TTFT from when
    the proxy got it, less `fixed_s`, that TTFT anywhere within its measured slack (benchy's loop
    lag plus the simulator's). Medians of the bounds bound the median."""
    longest = max(results["cases"], key=lambda c: c["pp"])
    low, high = [], []
    for r in measured(longest):
        t = truth[r["request_id"]]
        tokens, slack = t["prompt_tokens"] - t["cached_tokens"], truth_slack_s(longest, t)
        engine_s = t["first_token_event_s"] - t["arrival_s"] + t["proxy_held_s"] - fixed_s
        low.append(tokens / (engine_s + slack))
        high.append(tokens / (engine_s - slack) if engine_s > slack else math.inf)
    return float(np.median(low)), float(np.median(high))


def unless_the_headers_came_too_late(case: dict, held: list[dict]) -> None:
    """At one prompt length the headers carry the fixed part only where the first token came well
    after them (latency.GAP_MIN_S, GAP_SHARE of TTFT). A busy machine can hold the simulator's
    headers or benchy's reading of them back, nearer the first token than that: benchy then rightly
    cannot tell the hold from prefill. Then benchy's medians are the truth's, within the measured
    slack at each of the two (benchy's lag plus the simulator's), and the test skips saying so."""
    if case["summary"]["ttft_s"] is None:  # withheld as buffered: rightly only where the truth has bursts
        assert sum(map(wrote_in_bursts, held)) >= len(held) / 2
        pytest.skip("the simulator wrote its streams in bursts on this busy machine: benchy withheld TTFT")
    ttft = float(np.median([r["metrics"]["ttft_s"] for r in measured(case)]))
    headers = float(np.median([r["headers_s"] for r in measured(case)]))
    if ttft - headers >= max(latency.GAP_MIN_S, latency.GAP_SHARE * ttft):
        return
    since = [t["arrival_s"] - t["proxy_held_s"] for t in held]  # when the proxy got each request
    truth_ttft = float(np.median([t["first_token_event_s"] - s for t, s in zip(held, since)]))
    truth_headers = float(np.median([t["headers_s"] - s for t, s in zip(held, since)]))
    slack = max(truth_slack_s(case, t) for t in held)
    assert abs(ttft - truth_ttft) <= slack and abs(headers - truth_headers) <= slack
    pytest.skip(
        f"the first token came {(ttft - headers) * 1000:.0f} ms after the headers (TTFT {ttft * 1000:.0f} ms) "
        "on this busy machine: too near for the headers to be the fixed part"
    )


def test_a_gateway_delay_is_separated_from_prefill(start_sim):
    sim = start_sim("--preset", "gateway-250ms", *FAST)
    results = bench(sim, pp=SWEEP, tg=(8,), runs=3)
    truth = truth_of(sim, results)
    held = [truth[r["request_id"]] for c in results["cases"] for r in measured(c)]
    w = warning(results, "fixed_latency")
    d = w["details"]
    slack = 2 * max(truth_slack_s(c, truth[r["request_id"]]) for c in results["cases"] for r in measured(c)) + 0.02
    # The fixed part is what the proxy held (the truth), not prefill.
    assert d["fixed_s"] == pytest.approx(float(np.median([t["proxy_held_s"] for t in held])), abs=slack)
    # The engine's rate is the longest prompt's tokens over the rest of its TTFT, as the simulator
    # delivered it: on a quiet machine its own prefill rate (--prefill-tps), on a busy one slower by
    # what the machine held it back, which its measured lag bounds.
    low, high = delivered_engine_tps(results, truth, d["fixed_s"])
    assert low <= d["engine_prefill_tps"] <= high
    (evidence,) = w["evidence"]
    assert evidence["observed"] > evidence["threshold"]
    assert "cannot tell" not in w["message"]  # a sweep shows the hold stays put
    for case in results["cases"]:
        # TTFT stays (a user waits it); the TTFT-based prefill rate is withheld with its reason.
        assert case["summary"]["ttft_s"] is not None and case["summary"]["prefill_tps"] is None
        assert case["unavailable_codes"]["prefill_tps"] == "fixed_latency"
        assert "prefill_tps" in w["withheld"]


def test_a_healthy_sweep_has_no_fixed_part(start_sim):
    sim = start_sim(*FAST)
    results = bench(sim, pp=SWEEP, tg=(8,), runs=3)
    assert "fixed_latency" not in codes(results)
    assert all(c["summary"]["prefill_tps"] is not None for c in results["cases"])


def test_one_prompt_length_is_enough_where_the_headers_come_first(start_sim):
    # No sweep to draw a line through: the headers, sent before prefill, carry the fixed part. A
    # prefill of 0.4 s puts the first token well past the headers (GAP_SHARE of TTFT), busy or not.
    sim = start_sim("--preset", "gateway-250ms", "--prefill-tps", "5000", "--decode-tps", "400")
    results = bench(sim, pp=(2048,), tg=(8,), runs=3)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    held = [truth[r["request_id"]] for r in measured(case)]
    unless_the_headers_came_too_late(case, held)
    w = warning(results, "fixed_latency")
    d = w["details"]
    slack = 2 * max(truth_slack_s(case, t) for t in held) + 0.02
    assert d["fixed_s"] == pytest.approx(float(np.median([t["proxy_held_s"] for t in held])), abs=slack)
    # One length cannot show the headers stay put as the prompt grows: the cause is left open.
    assert "cannot tell" in w["message"] and "second --pp" in w["hint"]
    low, high = delivered_engine_tps(results, truth, d["fixed_s"])
    assert low <= d["engine_prefill_tps"] <= high
    assert case["unavailable_codes"]["prefill_tps"] == "fixed_latency"


def test_headers_that_come_later_for_longer_prompts_are_no_fixed_part(start_sim):
    """A server that works on the prompt before it answers (llama.cpp with its host-RAM prompt
    cache on the H200: headers at 76 ms for 512 tokens, 0.98 s for 8,192) moves its headers with
    the prompt: what passed before them is not a gateway's hold, and its prefill is the engine's."""
    per_token_s = 0.0002
    sim = start_sim("--header-delay-per-token-s", str(per_token_s), *FAST)
    results = bench(sim, pp=SWEEP, tg=(8,), runs=3)
    truth = truth_of(sim, results)
    by_case = {c["label"]: [truth[r["request_id"]] for r in measured(c)] for c in results["cases"]}
    # The truth: the headers waited in proportion to the prompt, and no request was held in front.
    shortest, longest = by_case[f"pp{SWEEP[0]} tg8"], by_case[f"pp{SWEEP[-1]} tg8"]
    wait = [t["headers_s"] - t["arrival_s"] for t in longest]
    assert min(wait) > 4 * max(t["headers_s"] - t["arrival_s"] for t in shortest)
    assert max(t["proxy_held_s"] for ts in by_case.values() for t in ts) < min(wait) / 10
    assert "fixed_latency" not in codes(results)


def test_the_fixed_part_is_found_once_and_worded_from_that_finding(start_sim, monkeypatch):
    """Issue 51: fixed_part was worked out by the builder (to withhold) and again by each check
    that words it. The analysis now finds it once (latency.find, before the result is made);
    the checks word that finding, and saved results re-checked find the same."""
    from benchy.checks import warnings as checks
    from benchy.results import findings, latency
    from benchy.results.types import RunResult
    from benchy.results.view import RunView

    calls: list[tuple[str, ...]] = []
    real = latency.fixed_part

    def counted(group):
        calls.append(tuple(c.label for c in group))
        return real(group)

    monkeypatch.setattr(latency, "fixed_part", counted)
    sim = start_sim("--preset", "gateway-250ms", *FAST)
    results = bench(sim, pp=SWEEP, tg=(8,), runs=3)
    assert "fixed_latency" in codes(results)
    assert len(calls) == len(set(calls)) == 1  # one sweep family, judged once
    calls.clear()
    again = checks.check(RunResult.from_dict(results))  # read from disk: judged again from its rows
    assert [w.to_dict() for w in again] == results["warnings"] and len(calls) == 1
    # its words are the finding's (results/findings.py FixedLatency), not the check's
    found = latency.found_in(RunView.of(RunResult.from_dict(results)))
    worded = [findings.FIXED_PART.words(f, llamacpp=False).to_dict() for f in found]
    assert worded == [w for w in results["warnings"] if w["code"] == "fixed_latency"]
