"""--dataset against a real llama.cpp server (xllamacpp, tiny model with its own small BPE
vocabulary): the shipped sample in its natural, fitted and conversations modes, each request
judged by the server's own counts (usage, timings, /tokenize of the text benchy meant to send).

Kept short (a dozen small requests a mode) so that it runs with `pytest -m realserver`.
"""

from __future__ import annotations

import json
import urllib.request

import pytest

from benchy.load.dataset_load import NONCE_SEPARATOR
from benchy.workloads import dataset
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver


def run_results(server, out, *args: str) -> dict:
    proc = run_benchy("run", "--base-url", server.base_url, "--quiet", "--output", str(out), *args)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads((out / "results.json").read_text())


def post(server, path: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(server.root_url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def chat_tokens(server, *messages: str) -> int:
    """The server's own count of these user messages in its chat template: /apply-template,
    then /tokenize of the prompt it makes (special tokens as a request gets them)."""
    prompt = post(server, "/apply-template", {"messages": [{"role": "user", "content": m} for m in messages]})["prompt"]
    return len(post(server, "/tokenize", {"content": prompt, "add_special": True})["tokens"])


@pytest.fixture(params=["sharegpt", "parquet"])
def path(request, tmp_path) -> str:
    """The shipped sample as it is (ShareGPT JSON), or the same conversations as Parquet."""
    if request.param == "sharegpt":
        return "sample"
    pq = pytest.importorskip("pyarrow.parquet")
    rows = json.loads(dataset.dataset_path("sample").read_text(encoding="utf-8"))
    out = tmp_path / "sample.parquet"
    pq.write_table(pytest.importorskip("pyarrow").Table.from_pylist(rows), out)
    return str(out)


def measured(case: dict) -> list[dict]:
    return sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["index"])


def test_natural_sends_the_entries_text_and_their_answer_lengths(llama_server, tmp_path, path):
    results = run_results(
        llama_server, tmp_path / "out", "--dataset", path, "-c", "2", "--requests", "8", "--seed", "3"
    )
    (case,) = results["cases"]
    rows = measured(case)
    drawn = dataset.select(dataset.DatasetSpec(path), 8, 3, lambda text: 1).entries
    for r, entry in zip(rows, drawn):  # each carried its drawn entry's text, led by its nonce
        assert r["prompt_tokens"] == chat_tokens(llama_server, r["nonce"] + NONCE_SEPARATOR + entry.prompt)
    for r in rows:
        assert (
            r["status"] == "ok"
            and r["completion_tokens"] == r["target_output_tokens"] == r["server_timings"]["predicted_n"]
        )
    assert len({r["target_output_tokens"] for r in rows}) > 2
    assert results["setup"]["dataset"]["sampling"][case["label"]]["sampled"] == 8
    # benchy's estimate of real text on this 4k vocabulary is no target: no request is taken for
    # a prompt the server truncated, and prefill t/s stands
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}
    assert case["summary"]["prefill_tps"] is not None


def test_fitted_prompts_are_real_text_of_the_sweep_lengths(llama_server, tmp_path, path):
    pp = (64, 128, 256, 512, 2048)
    results = run_results(
        llama_server, tmp_path / "out", "--dataset", path, "--pp", *map(str, pp), "--tg", "8", "--runs", "3"
    )
    served = {}
    for case in results["cases"]:
        rows = measured(case)
        assert len(rows) == 3 and all(
            r["status"] == "ok"
            and r["prompt_tokens"] == r["server_timings"]["prompt_n"] + r["server_timings"]["cache_n"]
            for r in rows
        )
        # cut by the server's own /tokenize: every request its target, as the server counts it
        assert case["prompt_lengths"] == "server_tokenize"
        served[case["pp"]] = [r["prompt_tokens"] for r in rows]
    print(f"\n[realserver] fitted to {pp}, the server counted: {served}")
    assert served == {n: [n] * 3 for n in pp}
    assert "prompt_length_mismatch" not in {w["code"] for w in results["warnings"]}


def test_conversations_replay_the_sampled_turns(llama_server, tmp_path, path):
    results = run_results(
        llama_server,
        tmp_path / "out",
        "--dataset",
        path,
        "--turns",
        "3",
        "-c",
        "1",
        "--tg",
        "8",
        "--warmup",
        "0",
        "--seed",
        "1",
    )
    (case,) = results["cases"]
    turns = sorted((r for r in case["requests"] if r.get("turn")), key=lambda r: r["turn"])
    assert [r["turn"] for r in turns] == [1, 2, 3] and all(r["status"] == "ok" for r in turns)
    cached = [r["cached_tokens"] for r in turns]
    assert cached[0] < cached[1] < cached[2], cached
    for r in turns[1:]:  # the history reused, as the server's own timings say
        assert r["cached_tokens"] >= r["expected_cached_tokens"] - 1
        assert r["server_timings"]["cache_n"] == r["cached_tokens"]
    spec = dataset.DatasetSpec(path, mode="conversations", turns=3)
    (entry,) = dataset.select(spec, 1, 1, lambda text: 1).entries
    assert turns[0]["prompt_tokens"] == chat_tokens(
        llama_server, turns[0]["nonce"] + NONCE_SEPARATOR + entry.user_messages[0]
    )
