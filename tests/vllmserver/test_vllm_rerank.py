"""--endpoint rerank on a real vLLM (CPU, a tiny random cross-encoder, prefix caching on),
judged by vLLM's own /metrics over each case's window: the prompt tokens it counted are every
measured pair's (each pair exactly --pp tokens, --batch of them a request), it ran one
sequence per document, and no nonce-led document was served from its prefix cache — while
identical documents (--no-nonce, the control) are.

Run: `make test-vllm` (BENCHY_VLLM_PYTHON set), or pytest this file with it set.
"""

from __future__ import annotations

import json

from tests.conftest import run_benchy


def rerank_run(server, *args: str) -> dict:
    proc = run_benchy(
        "run", "--base-url", server.base_url, "--quiet", "--format", "json", "--endpoint", "rerank",
        "--batch", "4", *args, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_each_document_is_a_pair_the_server_counts_and_none_is_cached(vllm_rerank_server):
    pp, batch = 512, 4  # pairs of several KV blocks: a prefix cache could serve them
    results = rerank_run(vllm_rerank_server, "--pp", str(pp), "-c", "1", "2", "--runs", "4")
    for case in results["cases"]:
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_failed"] == 0 and all(r["prompt_tokens"] == pp * batch and r["inputs"] == batch for r in reqs)
        counted = case["server"]["counters"]  # vLLM's own, over the case's measured requests
        assert counted["prompt_tokens"] == sum(r["prompt_tokens"] for r in reqs)
        assert counted["requests"] == batch * len(reqs)  # vLLM scores each (query, document) pair apart
        assert counted["cache_hits"] == 0  # every document led by its own nonce
        assert case["unavailable_codes"]["ttft_s"] == "pooled" and case["input_rate"] is not None


def test_without_the_nonce_the_prefix_cache_serves_the_documents(vllm_rerank_server):
    results = rerank_run(vllm_rerank_server, "--no-nonce", "--pp", "512", "--runs", "4")
    [case] = results["cases"]
    assert case["server"]["counters"]["cache_hits"] > 0
