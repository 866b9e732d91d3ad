"""Issue 23 end to end: servers benchy did not write. benchy against `benchy sim` behaving as
real deployments do (a token that makes no event, speculative bursts, one arrival for the whole
answer, no [DONE] with the connection kept open, an unclosed <think>, Harmony on raw
completions), on both transports; every figure judged against the simulator's truth log."""

from __future__ import annotations

import pytest

from benchy import run as run_mod
from benchy.client.stream import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.workloads.scenario import sweep
from tests.test_checks import assert_e2e_matches_truth, measured, truth_of

FAST_PREFILL = ("--prefill-tps", "100000")
TRANSPORTS = ("lean", "aiohttp")


def bench(sim, transport="lean", pp=(64,), tg=(32,), runs=3, endpoint="chat", **settings) -> dict:
    return run_mod.execute(
        run_mod.RunSettings(
            client=ClientSettings(base_url=sim.base_url, transport=transport),
            cases=sweep(list(pp), list(tg), [1]),
            runs=runs,
            warmup=1,
            endpoint=endpoint,
            progress=False,
            load=LoadSettings(),
            **settings,
        )
    )


def only_case(results: dict) -> dict:
    (case,) = results["cases"]
    return case


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stream_without_done_ends_at_its_answer_not_at_the_connections_close(start_sim, transport):
    sim = start_sim("--preset", "no-done-open", *FAST_PREFILL)
    results = bench(sim, transport)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert t["done_sent"] is False and t["held_open_s"] > 0
        assert_e2e_matches_truth(req, t)  # ends at the usage event, long before the body would
        assert req["metrics"]["e2e_s"] < t["held_open_s"] / 4
        assert "no_done" in req["anomalies"]
    assert case["n_failed"] == 0
