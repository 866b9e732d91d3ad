"""Issue 23, item 5: queueing on a server that reports no timings of its own.

`-c 4` on a server that runs one request at a time (vLLM --max-num-seqs 1, Ollama
OLLAMA_NUM_PARALLEL=1) and has no /metrics: TTFT holds the wait for the other requests, so a
prefill rate taken from it is no prefill speed. benchy sends the case's prompt alone first
(load/alone.py) and judges the loaded TTFT against it (results/build.py). Every verdict here is
judged against the simulator's truth log: how long each request really waited before its
prefill began.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.results import findings
from benchy.results.types import RunResult
from benchy.results.view import RunView
from benchy.workloads.case import Case
from benchy.workloads.cases import multi_turn_cases, trace_case
from benchy.workloads.scenario import sweep
from tests.conftest import client_slack_s, run_benchy_here
from tests.test_checks import bench, codes, measured, truth_of, warning

NO_SERVER_TIMINGS = ("--no-metrics", "--no-timings")  # the sim's only server-side accounts, off


def waited_s(truth: dict) -> float:
    """What the server knows and a timing-less server does not tell: the time from a request's
    arrival to the start of its prefill (a slot, then the serial prefill queue)."""
    return truth["prefill_start_s"] - truth["arrival_s"]


def waited_for_others_s(truth: dict) -> float:
    """The wait for other requests alone: from parsed and tokenized (a 4,000-token prompt takes
    the simulator a few ms, alone or not) to the start of its prefill."""
    return truth["prefill_start_s"] - truth["queued_s"]


def assert_really_alone(alone: list[dict], loaded: list[dict], n: int = 3) -> None:
    """The alone requests waited for no other request: each far less than the loaded ones did
    (a busy machine slows the simulator's own parsing, alone or not: that is no queueing)."""
    loaded_wait = float(np.median([waited_for_others_s(t) for t in loaded]))
    assert len(alone) == n and all(waited_for_others_s(t) < 0.1 * loaded_wait for t in alone)


def median_wait_over_alone(loaded: list[dict], alone: list[dict]) -> float:
    """How much longer the loaded requests waited before their prefill than the alone ones."""
    return float(np.median([waited_s(t) for t in loaded]) - np.median([waited_s(t) for t in alone]))


def prefill_s(truth: dict) -> float:
    return truth["prefill_end_s"] - truth["prefill_start_s"]


def alone_requests(case: dict) -> list[dict]:
    return [r for r in case["requests"] if r.get("alone")]


def bench_over(sim, transport: str, pp: int, tg: int, concurrency: int, runs: int) -> dict:
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url, transport=transport),
        cases=sweep([pp], [tg], [concurrency]),
        runs=runs,
        progress=False,
    )
    return run_mod.execute(settings).to_dict()


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_one_request_at_a_time_withholds_prefill_and_qualifies_ttft(start_sim, transport):
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = bench_over(sim, transport, pp=512, tg=24, concurrency=4, runs=2)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    alone = [truth[r["request_id"]] for r in alone_requests(case)]
    loaded = [truth[r["request_id"]] for r in measured(case)]
    assert_really_alone(alone, loaded)
    wait = float(np.median([waited_s(t) for t in loaded]))
    q = case["queueing"]
    assert q["source"] == "alone" and q["queued"]
    assert wait > q["threshold_s"]  # the truth says they queued, by more than the noise
    # The excess over alone is the wait the truth log shows (the prefill is the same).
    slack = 2 * client_slack_s(case) + 0.01
    assert q["excess_s"] == pytest.approx(median_wait_over_alone(loaded, alone), abs=slack)
    # Prefill t/s is withheld with its reason; TTFT stays (a user waits it) and is qualified.
    assert case["summary"]["prefill_tps"] is None and case["unavailable_codes"]["prefill_tps"] == "queued"
    assert case["summary"]["ttft_s"] is not None
    w = warning(results, "prefill_holds_queueing")
    assert "ttft_s" in w["metrics"] and "prefill_tps" in w["withheld"]
    (evidence,) = w["evidence"]
    assert evidence["observed"] > evidence["threshold"]
    # What would have been printed: far below the server's real prefill rate.
    true_prefill = float(np.median([(t["prompt_tokens"] - t["cached_tokens"]) / prefill_s(t) for t in loaded]))
    assert case["withheld"]["prefill_tps"]["median"] < 0.5 * true_prefill


def test_a_server_that_batches_raises_no_queueing(start_sim):
    # Eight slots for four streams; a prefill (0.1 s) short beside the decode (1.3 s), so the
    # serial prefill queue is empty after the first wave.
    sim = start_sim("--max-running", "8", "--decode-tps", "50", *NO_SERVER_TIMINGS)
    results = bench(sim, pp=(512,), tg=(64,), concurrency=(4,), runs=3)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    wait = float(np.median([waited_s(truth[r["request_id"]]) for r in measured(case)]))
    q = case["queueing"]
    assert wait < q["threshold_s"]  # the truth: no queueing beyond the noise
    assert not q["queued"] and "prefill_holds_queueing" not in codes(results)
    assert case["summary"]["prefill_tps"] is not None


def test_a_concurrency_1_case_of_the_same_prompt_is_the_baseline(start_sim):
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = bench(sim, pp=(512,), tg=(24,), concurrency=(1, 4), runs=2)
    single, loaded = results["cases"]
    assert not alone_requests(single) and not alone_requests(loaded)  # nothing sent twice
    assert loaded["queueing"]["source"] == single["label"] and loaded["queueing"]["queued"]
    assert single["summary"]["prefill_tps"] is not None and "queueing" not in single
    assert loaded["unavailable_codes"]["prefill_tps"] == "queued"
    (w,) = [w for w in results["warnings"] if w["code"] == "prefill_holds_queueing"]
    assert w["case"] == loaded["label"]
    assert_worded_by(findings.QUEUED_AGAINST_C1, results, w)


def assert_worded_by(finding: findings.Queued, results: dict, said: dict) -> None:
    """The warning is the words of the finding that judged the case (results/findings.py), as
    saved and as the saved results give them again."""
    run = RunResult.from_dict(results)
    (case,) = [c for c in run.cases if c.label == said["case"]]
    assert case.queueing is not None and findings.queued_by(case.queueing) is finding
    found = finding.found_in(case, RunView.of(run))
    assert found is not None and finding.words(found).to_dict() == said


def test_the_servers_own_prefill_is_shown_where_it_reports_one(start_sim):
    sim = start_sim("--max-running", "1", "--decode-tps", "400", "--no-metrics", "--timings")
    results = bench(sim, pp=(512,), tg=(24,), concurrency=(4,), runs=2)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    loaded = [truth[r["request_id"]] for r in measured(case)]
    own = float(np.median([(t["prompt_tokens"] - t["cached_tokens"]) / prefill_s(t) for t in loaded]))
    w = warning(results, "prefill_holds_queueing")
    assert w["details"]["server_prefill_tps"] == pytest.approx(own, rel=0.05)
    assert case["summary"]["server_prefill_tps"] is not None and case["summary"]["prefill_tps"] is None


# ------------------------------------------------------- open loops and workloads (issue 23)


def run_cases(sim, cases, **settings) -> dict:
    return run_mod.execute(
        run_mod.RunSettings(
            client=ClientSettings(base_url=sim.base_url), cases=cases, progress=False, endpoint="chat", **settings
        )
    ).to_dict()


def assert_queued_as_the_truth_says(case: dict, loaded: list[dict], alone: list[dict]) -> None:
    """The verdict and its figures against the truth: the alone requests waited for nothing, the
    loaded ones waited more than the noise, and the excess over alone is that wait."""
    assert_really_alone(alone, loaded)
    wait = float(np.median([waited_s(t) for t in loaded]))
    q = case["queueing"]
    assert q["source"] == "alone" and q["queued"] and wait > q["threshold_s"]
    same_prefill = float(np.median([prefill_s(t) for t in loaded])) - float(np.median([prefill_s(t) for t in alone]))
    expected = median_wait_over_alone(loaded, alone) + same_prefill
    assert q["excess_s"] == pytest.approx(expected, abs=2 * client_slack_s(case) + 0.01)
    assert case["summary"]["prefill_tps"] is None and case["unavailable_codes"]["prefill_tps"] == "queued"
    assert case["summary"]["ttft_s"] is not None  # what a user waits: kept, and qualified


def test_an_open_loop_on_a_server_that_runs_one_request_at_a_time_is_judged_against_alone(start_sim):
    # One slot, about 0.17 s a request (0.1 s prefill, 0.06 s decode): 20 requests/s overlap.
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = run_cases(sim, [Case(pp=512, tg=24, rate=20.0)], load=LoadSettings(requests=12), warmup=1)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    alone = [truth[r["request_id"]] for r in alone_requests(case)]
    assert_queued_as_the_truth_says(case, [truth[r["request_id"]] for r in measured(case)], alone)
    w = warning(results, "prefill_holds_queueing")
    assert "20 requests/s" in w["message"] and "prefill_tps" in w["withheld"]
    assert_worded_by(findings.QUEUED_ALONE, results, w)


def test_an_open_loop_the_server_keeps_up_with_raises_no_queueing(start_sim):
    sim = start_sim("--max-running", "8", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = run_cases(sim, [Case(pp=512, tg=24, rate=2.0)], load=LoadSettings(requests=6), warmup=1)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    wait = float(np.median([waited_s(truth[r["request_id"]]) for r in measured(case)]))
    q = case["queueing"]
    assert q["source"] == "alone" and wait < q["threshold_s"] and not q["queued"]
    assert "prefill_holds_queueing" not in codes(results) and case["summary"]["prefill_tps"] is not None


def test_a_multi_turn_workload_is_judged_by_its_first_turns_against_the_first_message_alone(start_sim):
    # Four conversations start at once on one slot: their first turns wait for each other.
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = run_cases(sim, multi_turn_cases([256], [16], [4], turns=2), warmup=0)
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    alone = [truth[r["request_id"]] for r in alone_requests(case)]
    first = [truth[r["request_id"]] for r in measured(case) if r["turn"] == 1]
    # The same shape: the first message alone is the first turn's prompt, to a few tokens.
    assert abs(np.median([t["prompt_tokens"] for t in alone]) - np.median([t["prompt_tokens"] for t in first])) <= 4
    assert_queued_as_the_truth_says(case, first, alone)
    assert all(turn["prefill_tps"] is None for turn in case["workload"]["turns"])  # withheld per turn too
    w = warning(results, "prefill_holds_queueing")
    assert "4 conversations at once" in w["message"]


def test_a_single_conversation_sends_nothing_alone(start_sim):
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = run_cases(sim, multi_turn_cases([256], [16], [1], turns=2), warmup=0)
    (case,) = results["cases"]
    assert not alone_requests(case) and "queueing" not in case


def test_a_trace_on_a_server_that_runs_one_request_at_a_time_is_judged_against_the_alone_line(start_sim):
    # Twelve requests of 1,300-4,800 tokens in 1.1 s on one slot: each waits for those before it.
    sim = start_sim("--max-running", "1", "--decode-tps", "400", *NO_SERVER_TIMINGS)
    results = run_cases(sim, [trace_case("sample", speed=2.0, limit=12)])
    (case,) = results["cases"]
    truth = truth_of(sim, results)
    alone = [truth[r["request_id"]] for r in alone_requests(case)]
    loaded = [truth[r["request_id"]] for r in measured(case)]
    # A short and a long prompt, each three times, with nothing else in flight.
    assert len({t["prompt_tokens"] for t in alone}) >= 2
    assert_really_alone(alone, loaded, n=6)
    wait = float(np.median([waited_for_others_s(t) for t in loaded]))
    q = case["queueing"]
    assert q["source"] == "alone" and q["queued"] and wait > q["threshold_s"]
    # Each request against the alone line at its own uncached length: the excess is its wait.
    assert q["excess_s"] == pytest.approx(wait, abs=2 * client_slack_s(case) + 0.02)
    assert case["summary"]["prefill_tps"] is None and case["unavailable_codes"]["prefill_tps"] == "queued"
    w = warning(results, "prefill_holds_queueing")
    assert "trace" in w["message"] and "prefill_tps" in w["withheld"]


def test_one_slot_is_said_in_the_singular(start_sim):
    """A llama-server with one slot (/props total_slots 1) at concurrency 4: "4 requests in
    flight on 1 slot", in the banner's words too, never "1 slots"."""
    sim = start_sim("--flavor", "llamacpp", "--max-running", "1", "--decode-tps", "400")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "--pp", "512", "--tg", "24", "-c", "4", "--runs", "2")
    assert proc.returncode == 0, proc.stderr
    said = proc.stdout + proc.stderr
    assert "1 slots" not in said
    assert "1 slot ·" in proc.stderr.splitlines()[0]  # the banner
    assert "4 requests in flight on 1 slot" in said
