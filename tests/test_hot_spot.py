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
from tests.conftest import client_slack_s
from tests.test_checks import measured, truth_of
from tests.test_queueing import alone_requests, run_cases, waited_for_others_s

QUIET_SERVER = ("--decode-tps", "400", "--no-metrics", "--no-timings")


def by_fraction(results: dict) -> dict[float, dict]:
    return {c["workload"]["spec"]["fraction"]: c for c in results["cases"]}


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
    # The control: no wait in the truth, no verdict of queueing.
    calm = float(np.median([waited_for_others_s(t) for t in spread]))
    if calm < 0.5 * control["queueing"]["threshold_s"]:  # unless the simulator itself fell behind
        assert not control["queueing"]["queued"] and control["summary"]["prefill_tps"] is not None


def test_shared_prefix_on_a_server_with_slots_to_spare_raises_no_queueing(start_sim):
    sim = start_sim("--max-running", "8", "--prefill-tps", "200000", *QUIET_SERVER)  # a prefill queue of ms
    results = run_cases(sim, shared_prefix_cases([1024], [32], [4], [0.75], runs=3), warmup=1)
    truth = truth_of(sim, results)
    warned = {w["case"] for w in results["warnings"] if w["code"] == "prefill_holds_queueing"}
    for case in results["cases"]:
        wait = float(np.median([waited_for_others_s(truth[r["request_id"]]) for r in measured(case)]))
        q = case["queueing"]
        # No verdict of queueing that the truth does not back (a machine so busy that the
        # simulator itself fell behind makes requests really wait: then it may be said).
        if wait < 0.5 * q["threshold_s"]:
            assert not q["queued"] and case["label"] not in warned
        assert q["queued"] == (case["label"] in warned)
