"""benchy against a real vLLM server (CPU build, tiny random model): the checks the simulator
and llama.cpp tests make, with vLLM's own /version, /v1/models and Prometheus /metrics as
the judge. Opt-in: `make test-vllm` (see conftest.py); skipped without $BENCHY_VLLM_PYTHON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm

REPO_ROOT = Path(__file__).resolve().parents[2]
SERVER_CODES = {"server_cache_hit", "server_token_mismatch", "ttft_outside_server"}


def benchy_run(server, *args: str, out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-m", "benchy", "run", "--base-url", server.base_url, "--output", str(out), *args],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO_ROOT,
        env=env,
    )
    assert proc.returncode in (0, 2), f"rc={proc.returncode}\n{proc.stderr[-3000:]}\n{server.log_tail()}"
    print(proc.stderr.splitlines()[0] if proc.stderr else "")  # the start banner, for the record
    return json.loads((out / "results.json").read_text())


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())


def measured(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def test_identity_metrics_and_server_view(vllm_server, tmp_path):
    results = benchy_run(vllm_server, "--pp", "128", "--tg", "16", "-c", "1", "-c", "4", "--runs", "2", out=tmp_path)
    ident = results["setup"]["server"]
    version = get_json(f"{vllm_server.root_url}/version")["version"]
    assert (ident["engine"], ident["version"], ident["model"]) == ("vLLM", version, vllm_server.model)
    assert ident["context_length"] == vllm_server.max_model_len
    assert ident["context_source"] == "/v1/models max_model_len"
    assert ident["slots"] is None and "max_num_seqs" in ident["unavailable"]["slots"]
    status = results["setup"]["server_metrics"]
    assert status["available"] and status["engine"] == "vllm"
    for figure in ("ttft_s", "queue_s", "prefill_s", "decode_s", "e2e_s", "prompt_tokens", "generation_tokens"):
        assert figure in status["found"], figure
    for case in results["cases"]:
        server, requests = case["server"], measured(case)
        assert all(r["status"] == "ok" for r in requests)
        assert server["histograms"]["e2e_s"]["count"] == len(requests)  # warmups outside the window
        assert server["counters"]["generation_tokens"] == sum(r["completion_tokens"] for r in requests)
        assert server["counters"]["prompt_tokens"] == sum(r["prompt_tokens"] for r in requests)
        client_ttft = sum(r["metrics"]["ttft_s"] for r in requests) / len(requests)
        assert server["histograms"]["ttft_s"]["mean"] <= client_ttft  # the server sees less of it
        assert server["derived"]["decode_tps"] > 0
    assert not {w["code"] for w in results["warnings"]} & SERVER_CODES
    report = (tmp_path / "report.md").read_text()
    assert "## Server view" in report and "vllm names at" in report
    print(
        "[vllm] "
        + "; ".join(
            f"{c['label']}: server TTFT {c['server']['histograms']['ttft_s']['mean'] * 1000:.1f} ms, "
            f"queue {c['server']['histograms']['queue_s']['mean'] * 1000:.1f} ms, "
            f"decode {c['server']['derived']['decode_tps']:.0f} t/s"
            for c in results["cases"]
        )
    )


def test_repeated_prompts_are_cache_hits_on_the_server(vllm_server, tmp_path):
    """--no-nonce: the same prompt again; vLLM's prefix cache (on by default) counts the hits, the
    same tokens its responses report cached (whole blocks: 128 tokens on the CPU backend)."""
    results = benchy_run(vllm_server, "--pp", "256", "--tg", "4", "--runs", "3", "--no-nonce", out=tmp_path)
    case = results["cases"][0]
    hits = case["server"]["counters"]["cache_hits"]
    assert hits > 0 and hits == sum(r["cached_tokens"] for r in measured(case))
    assert case["server"]["derived"]["cache_hit_rate"] == hits / case["server"]["counters"]["prompt_tokens"]


def test_requests_beyond_max_num_seqs_wait_in_the_servers_queue(vllm_server, tmp_path):
    """8 in flight on a server that runs 4 sequences: half of them wait, and vLLM's queue
    histogram says so; at 1 in flight nobody waits."""
    results = benchy_run(vllm_server, "--pp", "64", "--tg", "64", "-c", "1", "-c", "8", "--runs", "2", out=tmp_path)
    alone, crowded = (c["server"]["histograms"]["queue_s"] for c in results["cases"])
    assert crowded["count"] == 16 and crowded["mean"] > 10 * max(alone["mean"], 1e-4)
    print(f"[vllm] queue at c1 {alone['mean'] * 1000:.2f} ms, at c8 on 4 sequences {crowded['mean'] * 1000:.1f} ms")
