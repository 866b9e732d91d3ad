"""Issue 52, item 3 on a real llama.cpp server: a CJK dataset fitted to the sweep's lengths on the
tiny model, whose 4k byte-level BPE (trained on English) splits each CJK character into its
three bytes and an emoji into four. Every request must be served at its target, by the server's
own usage, through its /tokenize and, on a server without one, through --tokenizer."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_benchy
from tests.test_fit_scripts import CJK_DATASET

pytestmark = pytest.mark.realserver


@pytest.fixture(scope="module")
def server(llama_server_factory):
    return llama_server_factory(parallel=2, ctx_per_slot=8192)  # the entries are long in bytes


def tokens_of(server, text: str) -> list[int]:
    import urllib.request

    body = json.dumps({"content": text, "add_special": False}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())["tokens"]


def test_a_cjk_dataset_is_served_at_every_target(server, tmp_path):
    assert len(tokens_of(server, "人工智能")) >= 8  # the premise: several tokens a character here
    path = tmp_path / "cjk.json"
    path.write_text(json.dumps(CJK_DATASET, ensure_ascii=False))
    out = tmp_path / "out"
    proc = run_benchy(
        "run", "--base-url", server.base_url, "-q", "--no-report", "-o", str(out), "--dataset", str(path),
        "--pp", "256", "700", "--tg", "4", "--runs", "3",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:] + proc.stdout[-2000:]
    results = json.loads((out / "results.json").read_text())
    for case in results["cases"]:
        assert case["prompt_lengths"] == "server_tokenize"
        served = [r["prompt_tokens"] for r in case["requests"] if not r["warmup"]]
        assert served == [case["pp"]] * 3, case["label"]  # the server's own count, each request
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}
