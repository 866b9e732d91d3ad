"""--endpoint embeddings against a real llama.cpp server in embedding mode (xllamacpp, the tiny
model, mean pooling): benchy's input counts are the server's (its usage, and its own /tokenize
of each input), every input of a --batch run is exactly --pp tokens as the server counts them,
and the figures a pooling endpoint has (requests/s, input tokens/s, latency) stand while the
output and stream ones are withheld with code pooled. The same for --endpoint rerank on a
server with rank pooling (serve.py --reranking, as llama-server's flag): each (query, document)
pair is the query's tokens, the document's and a constant of separators by the server's own
count, and every pair of a run exactly --pp tokens.

Run alone: `pytest -m realserver tests/realserver/test_embeddings_realserver.py`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from benchy.client import rerank
from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver


@pytest.fixture(scope="module")
def embedding_server(llama_server_factory):
    return llama_server_factory(parallel=2, extra_args=("--embedding",))


@pytest.fixture(scope="module")
def rerank_server(llama_server_factory):
    return llama_server_factory(parallel=2, extra_args=("--reranking",))


def tokenized(server, text: str, special: bool = True) -> int:
    """The server's own count of one input, as it embeds it (its special tokens included, or not)."""
    body = json.dumps({"content": text, "add_special": special}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", body, {"Content-Type": "application/json"})
    return len(json.loads(urllib.request.urlopen(req, timeout=10).read())["tokens"])


def test_benchy_counts_the_inputs_as_the_server_does(embedding_server):
    texts = ["the quick brown fox jumps", "over the lazy dog, twice and again", "one"]
    rec = RequestRecord(
        case="c", run=0, index=0, warmup=False, request_id="emb-1", nonce=None, target_prompt_tokens=0,
        target_output_tokens=1,
    )  # fmt: skip

    async def send() -> RequestRecord:
        async with Client(ClientSettings(base_url=embedding_server.base_url)) as client:
            return await client.stream(rec, "", 1, "embeddings", {"input": texts})

    got = asyncio.run(send())
    assert got.ok and got.streamed is False and got.inputs == len(texts)
    assert got.prompt_tokens == sum(tokenized(embedding_server, t) for t in texts)


def test_benchy_counts_the_pairs_as_the_server_does(rerank_server):
    """Each document costs the query, itself and the same few separators, by the server's count."""

    async def send(documents: list[str]) -> RequestRecord:
        rec = RequestRecord("c", 0, 0, False, "rr", nonce=None, target_prompt_tokens=0, target_output_tokens=1)
        async with Client(ClientSettings(base_url=rerank_server.base_url)) as client:
            return await client.stream(rec, "", 1, "rerank", {"input": documents})

    one, three = ["the quick brown fox"], ["the quick brown fox", "jumps over the lazy dog, twice", "one"]
    got = {n: asyncio.run(send(docs)) for n, docs in ((1, one), (3, three))}
    assert all(r.ok and r.streamed is False for r in got.values()) and got[3].inputs == 3
    query = tokenized(rerank_server, rerank.QUERY, special=False)
    separators = got[1].prompt_tokens - query - tokenized(rerank_server, one[0], special=False)
    assert separators >= 0
    assert got[3].prompt_tokens == sum(query + tokenized(rerank_server, d, special=False) + separators for d in three)


@pytest.mark.parametrize("endpoint", ["embeddings", "rerank"])
def test_a_batch_run_has_exact_inputs_and_pooled_figures(request, endpoint):
    server = request.getfixturevalue("embedding_server" if endpoint == "embeddings" else "rerank_server")
    pp, batch = 64, 3
    proc = run_benchy(
        "run", "--base-url", server.base_url, "--quiet", "--format", "json", "--endpoint", endpoint,
        "--batch", str(batch), "--pp", str(pp), "-c", "1", "2", "--runs", "3", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert [c["label"] for c in results["cases"]] == [f"pp{pp} b{batch} {endpoint}", f"pp{pp} b{batch} c2 {endpoint}"]
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_failed"] == 0 and case["n_ok"] == len(reqs) == 3 * case["concurrency"]
        assert all(r["prompt_tokens"] == pp * batch and r["inputs"] == batch for r in reqs)
        for name in ("ttft_s", "itl_s", "decode_tps", "e2e_tps", "aggregate_tps"):
            assert case["unavailable_codes"][name] == "pooled"
        start = min(r["sent_mono_s"] for r in reqs)
        span = max(r["sent_mono_s"] + r["end_s"] for r in reqs) - start
        assert case["input_tps"] == pytest.approx(pp * batch * len(reqs) / span, rel=1e-6)
        assert case["input_rate"] == pytest.approx(batch * len(reqs) / span, rel=1e-6)
        assert case["summary"]["e2e_s"]["n"] == len(reqs)
