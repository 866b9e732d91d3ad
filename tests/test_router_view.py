"""Issue 36, items 10 and 11: behind a cache-aware router (vllm-router, sglang-router).

10. The router answers /metrics for one replica: its counts are part of the run, never a lie
    about usage. benchy reads the router's own page naming its replicas (/list_workers) and
    scrapes each; their sum is the server's account.
11. Some shared-prefix requests go to the replica that does not hold the prefix: the cause is
    partial reuse (routing), the same in the table and the warning, never "enable the cache".

Judged against the simulator's truth log: which replica served each request, what it generated
and what it really had cached.
"""

from __future__ import annotations

import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.workloads.cases import shared_prefix_cases
from tests.conftest import run_benchy, shared_sim
from tests.test_checks import codes, measured, truth_of

router = shared_sim("--preset", "vllm-router", "--prefill-tps", "20000", "--decode-tps", "400", "--seed", "3")


@pytest.fixture(scope="module")
def run_through_router(router):
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=router.base_url),
        cases=shared_prefix_cases([512], [16], [4], [0.75]),
        load=LoadSettings(requests=16),
        progress=False,
    )
    results = run_mod.execute(settings).to_dict()
    return results, truth_of(router, results)


def shared_case(results: dict) -> dict:
    return next(c for c in results["cases"] if c["workload"]["spec"]["fraction"])


def test_metrics_behind_a_router_are_every_replicas(run_through_router):
    results, truth = run_through_router
    for case in results["cases"]:
        served = [truth[r["request_id"]] for r in measured(case)]
        generated = sum(t["completion_tokens"] for t in served)
        assert case["server"]["counters"]["generation_tokens"] == pytest.approx(generated, abs=1)
    assert "server_token_mismatch" not in codes(results)
    status = results["setup"]["server_metrics"]
    assert status["router"] == "/list_workers" and len(status["replicas"]) == 2


def test_a_routers_misses_are_partial_reuse_not_a_cache_that_is_off(run_through_router):
    results, truth = run_through_router
    case = shared_case(results)
    served = [truth[r["request_id"]] for r in measured(case)]
    depth = case["depth"]
    hits = [t for t in served if t["cached_tokens"] >= depth - 16]  # a block short at most
    assert 0 < len(hits) < len(served)  # the truth: some went where the prefix was not
    assert len({t["replica"] for t in served}) == 2
    part = case["workload"]["partial_reuse"]
    assert part["hit_requests"] == len(hits)
    found = {w["code"] for w in results["warnings"] if w["case"] == case["label"]}
    assert "cache_partial_reuse" in found and "depth_cache_miss" not in found
    w = next(w for w in results["warnings"] if w["code"] == "cache_partial_reuse" and w["case"] == case["label"])
    assert "router" in w["message"] and "2 replicas" in w["message"]


def test_replicas_the_user_names_are_scraped_in_place_of_the_router(router):
    root = router.base_url.removesuffix("/v1")
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=router.base_url),
        cases=shared_prefix_cases([512], [16], [4], [0.75]),
        load=LoadSettings(requests=8),
        progress=False,
        replicas=(f"{root}/replicas/0", f"{root}/replicas/1/"),
    )
    results = run_mod.execute(settings).to_dict()
    status = results["setup"]["server_metrics"]
    assert status["router"] == "--replica" and status["replicas"] == [f"{root}/replicas/{i}/metrics" for i in (0, 1)]
    assert "server_token_mismatch" not in codes(results)


def test_a_replica_that_is_no_url_is_one_line_and_exit_2():
    proc = run_benchy("run", "--base-url", "http://127.0.0.1:9/v1", "--replica", "replica-a:8000")
    assert proc.returncode == 2 and "--replica 'replica-a:8000'" in proc.stderr
    assert "Traceback" not in proc.stderr
