"""Issue 35: every prompt of a sweep is counted by a real llama.cpp server at its target, on a
vocabulary that splits benchy's filler words.

The model here is the tiny one with a 4,096-token BPE trained on a corpus without half of
benchy's filler words (tiny_model's `split_words`), so those are several tokens on this server,
as on a small or non-English-first vocabulary. benchy asks the server's /tokenize which words
are one token there before calibrating (load/lengths.py); each measured request's usage, the
server's own count, must then be its row's length, every request, not a median.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from benchy.load import lengths
from benchy.measure import tokenizer
from tests.conftest import run_benchy
from tests.realserver.conftest import harness

pytestmark = pytest.mark.realserver

SWEEP = (64, 128, 256, 512, 2048)


@pytest.fixture(scope="module")
def split_server(tiny_model_path, tmp_path_factory):
    """A llama.cpp server on the tiny model whose vocabulary splits half of benchy's words
    (built beside the shared model, in the same cache)."""
    path = harness.load_tiny_model().build(
        tiny_model_path.with_name("tiny-llama-split.gguf"), config={"vocab_size": 4096, "split_words": True}
    )
    try:
        server = harness.start_server(path, tmp_path_factory.mktemp("split-server-logs"), parallel=2)
    except harness.ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def tokens_of(server, text: str) -> int:
    body = json.dumps({"content": text, "add_special": False}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return len(json.loads(r.read())["tokens"])


def test_every_request_of_the_sweep_is_counted_at_its_target(split_server, tmp_path):
    split = [w for w in tokenizer.filler_words() if tokens_of(split_server, " " + w) > 1]
    assert len(split) >= 20  # the premise: this vocabulary does not keep benchy's words whole
    pp = [str(n) for n in SWEEP]
    proc = run_benchy(
        "run", "--base-url", split_server.base_url, "--quiet", "--output", str(tmp_path), "--pp", *pp,
        "--tg", "1", "--runs", "3",
    )  # fmt: skip
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["setup"]["calibration"]["lengths"]["method"] == lengths.SERVER_TOKENIZE
    counted = {}
    for case in results["cases"]:
        assert case["prompt_lengths"] == lengths.SERVER_TOKENIZE
        counted[case["pp"]] = [r["prompt_tokens"] for r in case["requests"] if not r["warmup"]]
    assert sorted(counted) == list(SWEEP)
    for target, requests in counted.items():
        assert requests == [target] * 3, (target, requests)  # each request, by the server's usage
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}
    print(f"\n[realserver] {len(split)} of benchy's filler words split here; server counts: {counted}")
