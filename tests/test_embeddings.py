"""--endpoint embeddings (a pooling endpoint), judged by the simulator's truth log: each input
has the exact length asked and its own nonce (no cache serves it), --batch N sends N inputs a
request, benchy's input counts are the server's, requests/s, input tokens/s and latency are what
the truth shows, and the output and stream figures are withheld with code pooled. --endpoint
rerank likewise: each (query, document) pair exactly --pp tokens as the server counted it, no
document served from a cache, inputs/s the truth's documents over benchy's own clock."""

from __future__ import annotations

import json

import pytest

from benchy.client import embeddings, rerank
from benchy.client.draft import Draft
from benchy.client.reader import StreamReader
from benchy.records import RequestRecord
from tests.conftest import SimSince, client_slack_s, run_benchy_here, run_json, shared_sim, warning_codes

sim_fixture = shared_sim("--prefill-tps", "20000", "--max-running", "4")
WITHHELD = ("ttft_s", "ttfc_s", "decode_tps", "prefill_tps", "itl_s", "e2e_tps")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


@pytest.mark.parametrize(("endpoint", "batch"), [("embeddings", 1), ("embeddings", 3), ("rerank", 1), ("rerank", 4)])
def test_pooling_figures_match_the_truth(sim, tmp_path, endpoint, batch):
    pp = 96
    results = run_json(
        sim, tmp_path, "--endpoint", endpoint, "--batch", str(batch), *f"--pp {pp} -c 1 3 --runs 2".split()
    )
    truth = {t["request_id"]: t for t in sim.truth()}
    assert warning_codes(results, truth=truth) == set()
    assert [c["label"] for c in results["cases"]] == [f"pp{pp} b{batch} {endpoint}", f"pp{pp} b{batch} c3 {endpoint}"]
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_ok"] == len(reqs) == 2 * case["concurrency"] and case["n_failed"] == 0
        for name in WITHHELD:
            assert case["summary"].get(name) is None and case["unavailable_codes"][name] == "pooled"
        assert case["aggregate_tps"] is None and case["unavailable_codes"]["aggregate_tps"] == "pooled"
        slack = client_slack_s(case)
        for r in reqs:
            t = truth[r["request_id"]]
            assert t["endpoint"] == endpoint and r["streamed"] is False and r["inputs"] == batch
            assert t["input_tokens"] == [pp] * batch  # every input (a rerank's each pair) exactly as long as asked
            # each input led by its own nonce: no cache served any of it (of a rerank pair, the shared query at most)
            assert t["cached_tokens"] <= batch * ((t.get("query_tokens") or -1) + 1)
            assert r["prompt_tokens"] == t["prompt_tokens"] == pp * batch
            # the simulator wrote the body after its headers_s stamp and before stamping its event
            began = t["headers_s"] - r["sent_mono_s"]
            written = t["events"][-1]["t_s"] - r["sent_mono_s"]
            assert began <= r["metrics"]["e2e_s"] <= written + slack
        # rates: the truth's counts over the span benchy's own clock saw
        start = min(r["sent_mono_s"] for r in reqs)
        span = max(r["sent_mono_s"] + r["end_s"] for r in reqs) - start
        tokens = sum(truth[r["request_id"]]["prompt_tokens"] for r in reqs)
        inputs = sum(len(truth[r["request_id"]]["input_tokens"]) for r in reqs)
        assert case["input_tps"] == pytest.approx(tokens / span, rel=1e-6)
        assert case["input_rate"] == pytest.approx(inputs / span, rel=1e-6)
        assert case["request_rate"] == pytest.approx(len(reqs) / span, rel=1e-6)
        assert case["summary"]["e2e_s"]["n"] == len(reqs) and case["summary"]["e2e_s"]["p99"] is not None


def test_without_the_nonce_the_cache_serves_the_inputs(sim, tmp_path):
    """The control for the nonce: identical inputs are served from the simulator's cache."""
    results = run_json(sim, tmp_path, "--endpoint", "embeddings", "--no-nonce", *"--pp 96 -c 1 --runs 3".split())
    truth = {t["request_id"]: t for t in sim.truth()}
    reqs = [r for r in results["cases"][0]["requests"] if not r["warmup"]]
    assert reqs and all(truth[r["request_id"]]["cached_tokens"] > 0 for r in reqs)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("run", "--batch", "2"), "--batch needs --endpoint embeddings"),
        (("run", "--endpoint", "rerank", "--turns", "2"), "--endpoint rerank sends plain inputs"),
        (("run", "--endpoint", "embeddings", "--turns", "2"), "--endpoint embeddings sends plain inputs"),
        (("capacity", "--batch", "2", "--slo", "e2e=1s"), "--batch needs --endpoint embeddings"),
        (("probe-cache", "--endpoint", "embeddings"), "'embeddings' is not one of"),  # it judges TTFT
    ],
)
def test_bad_pooling_flags_are_one_line_errors(sim, tmp_path, args, words):
    proc = run_benchy_here(*args, "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "out"))
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr


def test_an_answer_missing_an_embedding_is_no_answer():
    """A server that dropped an input did not embed it: the answer reads as an error."""
    whole = {"data": [{"embedding": [0.1]}, {"index": 1}], "usage": {"prompt_tokens": 8, "total_tokens": 8}}
    assert "error" in embeddings.as_chat(whole)
    ok = embeddings.as_chat({"data": [{"embedding": [0.1]}], "usage": {"prompt_tokens": 8, "total_tokens": 8}})
    assert ok["usage"] == {"prompt_tokens": 8, "completion_tokens": 0} and ok["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("endpoint", ["embeddings", "rerank"])
def test_failed_pooling_requests_are_recorded_and_counted(start_sim, tmp_path, endpoint):
    """A pooling request the server fails is a failed request of the case, of the kind it had,
    one for each the simulator's truth log shows failing; the others' figures stand."""
    sim = start_sim("--prefill-tps", "20000", "--seed", "3", "--fault", "http500:0.3")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), "--endpoint", endpoint,
        "--batch", "2", "--pp", "64", "-c", "2", "--runs", "10", "--warmup", "0",
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    [case] = json.loads((out / "results.json").read_text())["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    measured = [r for r in case["requests"] if not r["warmup"]]
    failed = [r for r in measured if truth[r["request_id"]]["status"] == 500]
    assert failed and case["n_failed"] == len(failed) == case["errors"]["http_500"]
    assert len(measured) == 20 and case["n_ok"] == 20 - len(failed)
    assert case["input_tps"] is not None and case["input_rate"] is not None


def test_an_answer_that_drops_a_document_is_no_answer():
    """A server that scored fewer documents than it was sent did not serve them all."""
    sent = rerank.payload("m", "doc", 1, False, {"input": ["a", "b"], "max_tokens": 4, "stream": True})
    assert sent["documents"] == ["a", "b"] and sent["top_n"] == 2 and "max_tokens" not in sent and "stream" not in sent
    assert rerank.inputs(sent) == 2
    answer = rerank.as_chat({"results": [{"index": 0, "relevance_score": 0.5}], "usage": {"total_tokens": 9}})
    assert answer["scored"] == 1 and answer["usage"] == {"prompt_tokens": 9, "completion_tokens": 0}
    unscored = rerank.as_chat({"results": [{"index": 0}], "usage": {"total_tokens": 9}})
    assert "error" in unscored
    for results, status in (([0], "error"), ([0, 1], "ok")):  # as the client reads it: 2 sent
        rec = RequestRecord("c", 0, 0, False, "r", nonce=None, target_prompt_tokens=9, target_output_tokens=0, inputs=2)
        reader = StreamReader(Draft(rec), api=rerank, whole=True)
        body = {"results": [{"index": i, "relevance_score": 0.5} for i in results], "usage": {"total_tokens": 9}}
        reader.feed(json.dumps(body).encode(), 0.1)
        reader.close(0.2)
        rec = reader.rec.record()
        assert rec.status == status and (rec.error_kind == "server_error") == (status == "error"), rec.error
