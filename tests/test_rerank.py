"""--endpoint rerank against `benchy sim`'s /v1/rerank, judged by its truth log: each document's
(query, document) pair exactly --pp tokens as the server counted it, no document served from a
cache, input tokens/s, inputs/s and requests/s from the truth's counts over benchy's own clock,
latency inside the truth's times, and stream figures withheld with code pooled."""

from __future__ import annotations

import json

import pytest

from benchy.client import rerank
from benchy.client.reader import StreamReader
from benchy.records import RequestRecord
from tests.conftest import SimSince, client_slack_s, run_benchy_here, run_json, shared_sim, warning_codes

sim_fixture = shared_sim("--prefill-tps", "20000", "--max-running", "4")
WITHHELD = ("ttft_s", "decode_tps", "prefill_tps", "itl_s", "e2e_tps")


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


@pytest.mark.parametrize("batch", [1, 4])
def test_rerank_figures_match_the_truth(sim, tmp_path, batch):
    pp = 80
    results = run_json(
        sim, tmp_path, "--endpoint", "rerank", "--batch", str(batch), *f"--pp {pp} -c 1 3 --runs 2".split()
    )
    truth = {t["request_id"]: t for t in sim.truth()}
    assert warning_codes(results, truth=truth) == set()
    assert [c["label"] for c in results["cases"]] == [f"pp{pp} b{batch} rerank", f"pp{pp} b{batch} c3 rerank"]
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_ok"] == len(reqs) == 2 * case["concurrency"] and case["n_failed"] == 0
        for name in WITHHELD:
            assert case["summary"].get(name) is None and case["unavailable_codes"][name] == "pooled"
        slack = client_slack_s(case)
        for r in reqs:
            t = truth[r["request_id"]]
            assert t["endpoint"] == "rerank" and r["streamed"] is False and r["inputs"] == batch
            assert t["input_tokens"] == [pp] * batch  # each pair as long as asked, as the server counts it
            assert t["cached_tokens"] <= batch * (t["query_tokens"] + 1)  # the shared query at most: no document
            assert r["prompt_tokens"] == t["prompt_tokens"] == pp * batch
            began, written = t["headers_s"] - r["sent_mono_s"], t["events"][-1]["t_s"] - r["sent_mono_s"]
            assert began <= r["metrics"]["e2e_s"] <= written + slack
        start = min(r["sent_mono_s"] for r in reqs)
        span = max(r["sent_mono_s"] + r["end_s"] for r in reqs) - start
        tokens = sum(truth[r["request_id"]]["prompt_tokens"] for r in reqs)
        documents = sum(len(truth[r["request_id"]]["input_tokens"]) for r in reqs)
        assert case["input_tps"] == pytest.approx(tokens / span, rel=1e-6)
        assert case["input_rate"] == pytest.approx(documents / span, rel=1e-6)
        assert case["request_rate"] == pytest.approx(len(reqs) / span, rel=1e-6)


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
        reader = StreamReader(rec, api=rerank, whole=True)
        body = {"results": [{"index": i, "relevance_score": 0.5} for i in results], "usage": {"total_tokens": 9}}
        reader.feed(json.dumps(body).encode(), 0.1)
        reader.close(0.2)
        assert rec.status == status and (rec.error_kind == "server_error") == (status == "error"), rec.error


def test_failed_reranks_are_recorded_and_counted(start_sim, tmp_path):
    """A rerank the server fails is a failed request of the case, one for each the truth log shows."""
    sim = start_sim("--prefill-tps", "20000", "--seed", "5", "--fault", "http500:0.3")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), "--endpoint", "rerank",
        "--batch", "2", "--pp", "64", "-c", "2", "--runs", "8", "--warmup", "0",
    )  # fmt: skip
    assert "Traceback" not in proc.stderr
    [case] = json.loads((out / "results.json").read_text())["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    measured = [r for r in case["requests"] if not r["warmup"]]
    failed = [r for r in measured if truth[r["request_id"]]["status"] == 500]
    assert failed and case["n_failed"] == len(failed) == case["errors"]["http_500"]
    assert len(measured) == 16 and case["n_ok"] == 16 - len(failed) and case["input_rate"] is not None


@pytest.mark.parametrize(("args", "words"), [(("--turns", "2"), "--endpoint rerank sends plain inputs")])
def test_bad_rerank_flags_are_one_line_errors(sim, tmp_path, args, words):
    proc = run_benchy_here(
        "run", "--endpoint", "rerank", *args, "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "o")
    )
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr
