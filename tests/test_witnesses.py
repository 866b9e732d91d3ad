"""Issue 23 end to end: servers benchy did not write. benchy against `benchy sim` behaving as
real deployments do (a token that makes no event, speculative bursts, one arrival for the whole
answer, no [DONE] with the connection kept open, an unclosed <think>, Harmony on raw
completions), on both transports; every figure judged against the simulator's truth log."""

from __future__ import annotations

import pytest

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.workloads.scenario import sweep
from tests.conftest import without_environment_warnings
from tests.test_checks import assert_e2e_matches_truth, codes, measured, truth_of

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
    ).to_dict()


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
        assert_e2e_matches_truth(case, req, t)  # ends at the usage event, long before the body would
        assert req["metrics"]["e2e_s"] < t["held_open_s"] / 4
        assert "no_done" in req["anomalies"]
    assert case["n_failed"] == 0


def test_h200_a_token_that_makes_no_event_keeps_usage_backed_by_the_servers_timings(start_sim):
    # The H200 llama-server: usage 128, events 127, predicted_n 128, a foreign vocabulary.
    sim = start_sim("--preset", "llamacpp-silent-eos", *FAST_PREFILL)
    results = bench(sim, pp=(512,), tg=(128,))
    assert "usage_mismatch" not in codes(results)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["tokens"] == count["usage"] == count["predicted_n"] == t["completion_tokens"] == 128
        assert count["events"] == 127 and count["source"] == "usage" and count["mismatch"] is None
        assert {"timings.predicted_n", "events"} <= set(count["backed_by"])
        assert_e2e_matches_truth(case, req, t)
    server = case["summary"]["server_decode_tps"]["median"]
    assert case["summary"]["decode_tps"]["median"] == pytest.approx(server, rel=0.02)


def test_h200_a_first_token_without_text_starts_the_decode_window_at_its_role_chunk(start_sim):
    # The H200 gpt-oss llama-server: the first token was a byte of a split character, its role
    # chunk came alone, the next event brought both tokens' text (usage 32, events 31). Timing
    # 31 tokens from the second token overstated decode by 31/30; short answers show it most.
    # 25 tokens/s: 16 tokens last 600 ms, so a busy client's late read (17 ms seen in a full
    # test-fast at load 4: 5.7% of a 300 ms window at 50 t/s) stays within the 3% judged, while
    # the old reading is 15/14 (7%) over
    sim = start_sim("--preset", "llamacpp-textless-first", *FAST_PREFILL, "--decode-tps", "25")
    results = bench(sim, pp=(512,), tg=(16,))
    assert "usage_mismatch" not in codes(results)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["tokens"] == t["completion_tokens"] == 16 and count["events"] == 15
        made = t["token_times_s"]
        true_decode = (len(made) - 1) / (made[-1] - made[0])
        assert req["metrics"]["decode_tps"] == pytest.approx(true_decode, rel=0.03)
        assert_e2e_matches_truth(case, req, t)


def test_speculative_bursts_in_a_foreign_vocabulary_raise_no_usage_mismatch(start_sim):
    sim = start_sim("--preset", "spec-vllm", "--vocab", "syllable", *FAST_PREFILL)  # prose unlike o200k
    results = bench(sim, tg=(128,))
    assert not {"usage_mismatch", "sse_buffering"} & set(codes(results))
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert req["token_count"]["tokens"] == t["completion_tokens"] == 128
        made = t["token_times_s"]
        true_decode = (len(made) - t["spec_steps"][0]) / (made[-1] - made[0])
        assert req["metrics"]["decode_tps"] == pytest.approx(true_decode, rel=0.05)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("preset", ["one-event", "one-read"])
def test_the_whole_answer_in_one_arrival_is_buffered_and_counted_by_usage(start_sim, preset, transport):
    sim = start_sim("--preset", preset, *FAST_PREFILL)
    results = bench(sim, transport, tg=(64,))
    assert "sse_buffering" in codes(results) and "usage_mismatch" not in codes(results)
    case = only_case(results)
    for name in ("ttft_s", "itl_s", "decode_tps", "prefill_tps"):
        assert case["summary"][name] is None and "at once" in case["unavailable"][name]
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert req["token_count"]["tokens"] == req["token_count"]["usage"] == t["completion_tokens"]
        assert_e2e_matches_truth(case, req, t)


def test_a_think_block_that_never_closes_is_reasoning_only(start_sim):
    sim = start_sim("--preset", "think-unclosed", *FAST_PREFILL, "--decode-tps", "300")
    results = bench(sim, tg=(48,))
    assert "reasoning_only" in codes(results)
    case = only_case(results)
    assert case["summary"]["ttfc_s"] is None
    truth = truth_of(sim, results)
    for req in measured(case):
        assert req["metrics"]["reasoning_tokens"] == pytest.approx(truth[req["request_id"]]["reasoning_tokens"], abs=1)


def test_harmony_on_raw_completions_counts_its_analysis_channel_as_reasoning(start_sim):
    # gpt-oss on /v1/completions without --template harmony, its special tokens kept.
    sim = start_sim("--preset", "gpt-oss-harmony", *FAST_PREFILL, "--decode-tps", "400")
    results = run_mod.execute(
        run_mod.RunSettings(
            client=ClientSettings(base_url=sim.base_url, extra_body={"skip_special_tokens": False}),
            cases=sweep([256], [64], [1]),
            runs=2,
            warmup=0,
            endpoint="completions",
            progress=False,
        )
    ).to_dict()
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert t["reasoning_tokens"] == 24 and req["completion_tokens"] == t["completion_tokens"] == 64
        assert req["metrics"]["reasoning_tokens"] == pytest.approx(t["reasoning_tokens"], abs=1)
        assert req["metrics"]["ttfc_s"] > req["metrics"]["ttft_s"]  # the answer comes after the analysis


@pytest.mark.parametrize(
    "preset", ["default", "spec-vllm", "spec-llamacpp", "llamacpp-silent-eos", "llamacpp-textless-first"]
)
def test_healthy_streams_in_a_foreign_vocabulary_raise_no_warning(start_sim, preset):
    # --vocab syllable: the simulator's prose (one o200k token a piece in its default vocabulary)
    # counts several tokens a word here, as a vocabulary unlike o200k does
    sim = start_sim("--preset", preset, "--vocab", "syllable", *FAST_PREFILL, "--decode-tps", "200")
    results = bench(sim, tg=(64,))
    loud = [w for w in without_environment_warnings(results)["warnings"] if w["severity"] != "info"]
    assert loud == []
    truth = truth_of(sim, results)
    for req in measured(only_case(results)):
        assert req["token_count"]["tokens"] == truth[req["request_id"]]["completion_tokens"] == 64
