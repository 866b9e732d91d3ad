"""Issue 36, item 7: queueing behind a cache-aware router's hot spot. A cache-aware policy
(SGLang's cache_aware, llm-d's prefix scorer) sends every request that shares a system prompt
to the replica that holds it; they queue there while the other replicas idle. A shared-prefix
case must pass the same queueing test as any loaded case: its requests against what their
uncached tokens take alone. Judged against the simulator's truth log: which replica served each
request and how long it waited for a slot.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchy.workloads.cases import shared_prefix_cases
from tests.conftest import client_slack_s, wrote_in_bursts
from tests.test_checks import measured, truth_of
from tests.test_queueing import alone_requests, run_cases, waited_for_others_s

QUIET_SERVER = ("--decode-tps", "400", "--no-metrics", "--no-timings")


def by_fraction(results: dict) -> dict[float, dict]:
    return {c["workload"]["spec"]["fraction"]: c for c in results["cases"]}


def queueing_or_bursts(case: dict, truth: dict[str, dict]) -> dict | None:
    """The case's queueing judgment; None where benchy withheld its TTFT as buffered, which the
    truth must back (most of its requests written in bursts): no TTFT, nothing to judge by."""
    if case.get("queueing") is not None:
        return case["queueing"]
    assert case["unavailable_codes"]["ttft_s"] == "buffered"
    assert sum(wrote_in_bursts(truth[r["request_id"]]) for r in measured(case)) >= len(measured(case)) / 2
    return None


def truth_excess_s(case: dict, truth: dict[str, dict]) -> float:
    """What a queueing verdict measures, from the truth: the median time from benchy's send to
    the simulator's first token under the case's load, less that of the same prompt alone. It
    holds the wait for a slot or the prefill queue, and also the simulator's own falling behind
    on a busy machine (one process tokenizing and streaming four prompts at once): all of it
    the server's. The client's TTFT of each differs from it only by its own lateness."""

    def ttft(requests: list[dict]) -> float:
        return float(np.median([truth[r["request_id"]]["first_token_event_s"] - r["sent_mono_s"] for r in requests]))

    return ttft(measured(case)) - ttft(alone_requests(case))


def test_a_hot_spot_behind_a_cache_aware_router_is_queueing(start_sim):
    sim = start_sim("--preset", "cache-aware-router", *QUIET_SERVER)
    results = run_cases(sim, shared_prefix_cases([1024], [32], [4], [0.75], runs=3), warmup=1)
    truth = truth_of(sim, results)
    cases = by_fraction(results)
    shared, control = cases[0.75], cases[0.0]
    hot = [truth[r["request_id"]] for r in measured(shared)]
    spread = [truth[r["request_id"]] for r in measured(control)]
    # The truth: the shared requests all went to one replica and waited there; the unshared
    # ones were spread and did not.
    assert len({t["replica"] for t in hot}) == 1 and len({t["replica"] for t in spread}) > 1
    wait = float(np.median([waited_for_others_s(t) for t in hot]))
    q = shared["queueing"]
    assert q["source"] == "alone" and q["queued"] and wait > q["threshold_s"]
    assert q["excess_s"] == pytest.approx(wait, abs=2 * client_slack_s(shared) + 0.03)
    assert len(alone_requests(shared)) == 6  # three at the unique part's length, three at the whole prompt's
    assert shared["summary"]["prefill_tps"] is None and shared["unavailable_codes"]["prefill_tps"] == "queued"
    w = next(w for w in results["warnings"] if w["code"] == "prefill_holds_queueing" and w["case"] == shared["label"])
    assert "prefill_tps" in w["withheld"]
    # The control: no wait for a slot in the truth, and no verdict of queueing beyond what the
    # truth shows (a busy machine's simulator falling behind; see the test below).
    calm = queueing_or_bursts(control, truth)
    if calm is None:
        return
    assert float(np.median([waited_for_others_s(t) for t in spread])) < calm["threshold_s"]
    assert calm["excess_s"] == pytest.approx(truth_excess_s(control, truth), abs=2 * client_slack_s(control))
    assert calm["queued"] == (calm["excess_s"] > calm["threshold_s"])
    assert (control["summary"]["prefill_tps"] is None) == calm["queued"]


def test_shared_prefix_on_a_server_with_slots_to_spare_raises_no_queueing(start_sim):
    sim = start_sim("--max-running", "8", "--prefill-tps", "200000", *QUIET_SERVER)  # a prefill queue of ms
    results = run_cases(sim, shared_prefix_cases([1024], [32], [4], [0.75], runs=3), warmup=1)
    truth = truth_of(sim, results)
    warned = {w["case"] for w in results["warnings"] if w["code"] == "prefill_holds_queueing"}
    for case in results["cases"]:
        q = queueing_or_bursts(case, truth)
        if q is None:
            continue
        # No verdict of queueing that the truth does not back. The slots never fill, but a
        # machine so busy that the simulator itself falls behind makes loaded requests really
        # take longer than alone (two busy cores: 32 ms longer, 10 ms of it the prefill queue):
        # then it may be said. The excess is the truth's, give or take the client's lateness.
        excess = truth_excess_s(case, truth)
        assert q["excess_s"] == pytest.approx(excess, abs=2 * client_slack_s(case))
        assert q["queued"] == (q["excess_s"] > q["threshold_s"]) == (case["label"] in warned)
        if excess + 2 * client_slack_s(case) < q["threshold_s"]:
            assert not q["queued"]
