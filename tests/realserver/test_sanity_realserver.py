"""Output sanity against a real server (issue 55): llama.cpp serving the tiny random-weight
model (tiny_model.py: garbage by construction, a byte-level vocabulary that samples control
bytes and glued fragments) must draw `output_garbage` on every case, on all four APIs,
with its answers quoted from what the server streamed.
"""

from __future__ import annotations

import json

import pytest

from benchy.measure.sanity import tally
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver


@pytest.mark.parametrize("endpoint", ["chat", "completions", "responses", "messages"])
def test_a_random_weight_model_on_llama_cpp_is_flagged(llama_server, tmp_path, endpoint):
    out = tmp_path / "run"
    proc = run_benchy(
        "run", "--base-url", llama_server.base_url, "--quiet", "--output", str(out), "--endpoint", endpoint,
        *"--pp 128 --tg 256 -c 2 --runs 4".split(),
    )  # fmt: skip
    assert "Traceback" not in proc.stderr and (out / "results.json").exists(), proc.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    found = case["sanity"]
    assert case["n_ok"] == found["answers"] == found["judged"] > 0  # 256 tokens: none terse
    assert found["broken"] >= 0.5 * found["judged"], found  # measured: 14 of 16 at tg256 (8 of 16 at tg64)
    (warning,) = [w for w in results["warnings"] if w["code"] == "output_garbage"]
    assert warning["case"] == case["label"] and warning["details"]["examples"]
    # the quotes are the server's own text, as requests.jsonl kept it
    streamed = {}
    for line in (out / "requests.jsonl").read_text().splitlines()[1:]:
        rec = json.loads(line)
        if "request_id" in rec:
            streamed[rec["request_id"]] = rec["token_event_text"]
    for example in found["examples"]:
        assert tally.quote(streamed[example["request_id"]]) == example["text"]
    assert case["summary"]["decode_tps"] is not None  # the figures stay: they are what it did


def test_the_canary_of_a_random_weight_model_fails_every_prompt(llama_server, tmp_path):
    """Greedy answers of random weights are no answers: every canary prompt fails, each answer
    kept. llama.cpp's /v1/completions ignores `echo`, so it gives no prompt log-probabilities:
    the perplexity is unavailable, and says why."""
    out = tmp_path / "run"
    run_benchy(
        "run", "--base-url", llama_server.base_url, "--quiet", "--output", str(out), "--canary",
        *"--pp 64 --tg 8 --runs 1".split(),
    )  # fmt: skip
    found = json.loads((out / "results.json").read_text())["setup"]["canary"]
    assert [a["name"] for a in found["answers"]] == ["arithmetic", "copy", "count_words", "json"]
    assert all(a["answer"] and a["sha256"] and not a["passed"] for a in found["answers"])
    assert found["perplexity"] is None and "log-probabilities" in found["perplexity_unavailable"]
