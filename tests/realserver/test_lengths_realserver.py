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


def model_tokenizer_json(folder) -> str:
    """The split model's tokenizer as a Hugging Face tokenizer.json (its vocabulary and merges,
    byte-level, as tiny_model trains them): what a user would pass with --tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokens, merges = harness.load_tiny_model()._train_tokenizer(4096, split_words=True)
    tok = Tokenizer(
        models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=[tuple(m.split(" ")) for m in merges])
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.save(str(folder / "tokenizer.json"))
    return str(folder)


def tokens_of(server, text: str) -> int:
    body = json.dumps({"content": text, "add_special": False}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return len(json.loads(r.read())["tokens"])


def sweep(server, out, *extra: str) -> dict:
    pp = [str(n) for n in SWEEP]
    proc = run_benchy(
        "run", "--base-url", server.base_url, "--quiet", "--output", str(out), "--pp", *pp, "--tg", "1",
        "--runs", "3", *extra,
    )  # fmt: skip
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads((out / "results.json").read_text())


def counted_at_target(results: dict, method: str) -> dict[int, list[int]]:
    """Each case's measured requests as the server counted them (usage), all asserted at the
    case's target."""
    assert results["setup"]["calibration"]["lengths"]["method"] == method
    counted = {}
    for case in results["cases"]:
        assert case["prompt_lengths"] == method
        counted[case["pp"]] = [r["prompt_tokens"] for r in case["requests"] if not r["warmup"]]
    assert sorted(counted) == list(SWEEP)
    for target, requests in counted.items():
        assert requests == [target] * 3, (target, requests)  # each request, by the server's usage
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}
    return counted


def test_with_the_models_tokenizer_file_every_request_is_counted_at_its_target(split_server, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    results = sweep(split_server, tmp_path / "out", "--tokenizer", model_tokenizer_json(folder))
    counted = counted_at_target(results, lengths.TOKENIZER_FILE)
    print(f"\n[realserver] --tokenizer: server counts {counted}")


def test_every_request_of_the_sweep_is_counted_at_its_target(split_server, tmp_path):
    split = [w for w in tokenizer.filler_words() if tokens_of(split_server, " " + w) > 1]
    assert len(split) >= 20  # the premise: this vocabulary does not keep benchy's words whole
    counted = counted_at_target(sweep(split_server, tmp_path), lengths.SERVER_TOKENIZE)
    print(f"\n[realserver] {len(split)} of benchy's filler words split here; server counts: {counted}")
