"""--endpoint embeddings against a real llama.cpp server in embedding mode (xllamacpp, the tiny
model, mean pooling): benchy's input counts are the server's (its usage, and its own /tokenize
of each input), every input of a --batch run is exactly --pp tokens as the server counts them,
and the figures a pooling endpoint has (requests/s, input tokens/s, latency) stand while the
output and stream ones are withheld with code pooled.

Run alone: `pytest -m realserver tests/realserver/test_embeddings_realserver.py`.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver


@pytest.fixture(scope="module")
def embedding_server(llama_server_factory):
    return llama_server_factory(parallel=2, extra_args=("--embedding",))


def tokenized(server, text: str) -> int:
    """The server's own count of one input, as it embeds it (its special tokens included)."""
    body = json.dumps({"content": text, "add_special": True}).encode()
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


def test_a_batch_run_has_exact_inputs_and_pooled_figures(embedding_server):
    pp, batch = 64, 3
    proc = run_benchy(
        "run", "--base-url", embedding_server.base_url, "--quiet", "--format", "json", "--endpoint", "embeddings",
        "--batch", str(batch), "--pp", str(pp), "-c", "1", "2", "--runs", "3", timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_failed"] == 0 and case["n_ok"] == len(reqs) == 3 * case["concurrency"]
        assert all(r["prompt_tokens"] == pp * batch and r["inputs"] == batch for r in reqs)
        for name in ("ttft_s", "itl_s", "decode_tps", "e2e_tps", "aggregate_tps"):
            assert case["unavailable_codes"][name] == "pooled"
        start = min(r["sent_mono_s"] for r in reqs)
        end = max(r["sent_mono_s"] + r["end_s"] for r in reqs)
        assert case["input_tps"] == pytest.approx(pp * batch * len(reqs) / (end - start), rel=1e-6)
        assert case["summary"]["e2e_s"]["n"] == len(reqs)
