"""--no-stream (and a scenario's `stream = false`): whole answers on every endpoint, judged by
the simulator's truth log: e2e, output rates and goodput stand; the stream figures (TTFT,
inter-token latency, decode and prefill rates) are withheld with code not_streamed, and no
buffering is claimed of an answer that was never a stream."""

from __future__ import annotations

import pytest

from tests.conftest import SimSince, client_slack_s, run_json, shared_sim, warning_codes

sim_fixture = shared_sim("--prefill-tps", "20000", "--decode-tps", "400", "--reasoning-tokens", "4")
STREAM_FIGURES = ("ttft_s", "ttfc_s", "decode_tps", "prefill_tps", "itl_s")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


@pytest.mark.parametrize("endpoint", ["chat", "completions", "responses", "messages"])
def test_no_stream_keeps_e2e_and_withholds_stream_figures(sim, tmp_path, endpoint):
    results = run_json(
        sim, tmp_path, "--endpoint", endpoint, "--no-stream", *"--pp 128 --tg 24 -c 1 2 --runs 2 --slo e2e=5s".split()
    )
    truth = {t["request_id"]: t for t in sim.truth()}
    assert warning_codes(results, truth=truth) == set()  # no buffering claimed, nothing else amiss
    for case in results["cases"]:
        slack = client_slack_s(case)
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_ok"] == len(reqs) == 2 * case["concurrency"]
        for name in STREAM_FIGURES:
            assert case["summary"].get(name) is None and case["unavailable_codes"][name] == "not_streamed"
        assert case["summary"]["e2e_s"]["n"] == len(reqs) and case["goodput"] is not None
        for r in reqs:
            t = truth[r["request_id"]]
            assert t["endpoint"] == endpoint and t["stream"] is False and r["streamed"] is False
            assert r["completion_tokens"] == t["completion_tokens"] == 24
            assert r["prompt_tokens"] == t["prompt_tokens"]
            assert all(r["metrics"][name] is None for name in STREAM_FIGURES)
            # Both from benchy's send (the same clock). The simulator wrote the body after its
            # headers_s stamp and before stamping the body's event: benchy read it no earlier
            # than the one and at most `slack` (its own measured stall) after the other. How
            # late a busy machine's simulator ran is the server's time in both.
            began = t["headers_s"] - r["sent_mono_s"]
            written = max(e["t_s"] for e in t["events"]) - r["sent_mono_s"]
            assert began <= r["metrics"]["e2e_s"] <= written + slack
            assert r["metrics"]["e2e_tps"] == pytest.approx(24 / r["metrics"]["e2e_s"])


def test_a_scenario_with_stream_false_asks_for_whole_answers(sim, tmp_path):
    path = tmp_path / "gateway.toml"
    path.write_text('pp = 64\ntg = 8\nruns = 2\nendpoint = "responses"\nstream = false\n')
    results = run_json(sim, tmp_path, "--scenario", str(path), "--warmup", "0")
    ids = {r["request_id"] for c in results["cases"] for r in c["requests"]}
    traces = [t for t in sim.truth() if t["request_id"] in ids]
    assert len(traces) == 2 and all(t["stream"] is False and t["endpoint"] == "responses" for t in traces)
    assert results["cases"][0]["unavailable_codes"]["ttft_s"] == "not_streamed"
