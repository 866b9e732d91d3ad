"""--endpoint responses and messages, and --no-stream, against a real vLLM server (CPU build,
tiny random model): vLLM serves /v1/responses and /v1/messages (vllm.entrypoints.anthropic)
over the chat path, so the same prompt costs the same tokens, and each endpoint's counts are
the server's own, by its usage and its /metrics counters over the case. Opt-in: `make
test-vllm` (see conftest.py); skipped without $BENCHY_VLLM_PYTHON."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.vllmserver.test_vllm_server import benchy_run, measured

pytestmark = pytest.mark.vllm


def prompt_median(results: dict) -> float:
    return statistics.median(r["prompt_tokens"] for c in results["cases"] for r in measured(c))


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_each_api_counts_what_vllm_counts(vllm_server, tmp_path, endpoint):
    chat = benchy_run(vllm_server, *"--pp 128 --tg 16 --runs 2".split(), out=tmp_path / "chat")
    results = benchy_run(
        vllm_server, "--endpoint", endpoint, *"--pp 128 --tg 16 -c 1 -c 4 --runs 2".split(), out=tmp_path / endpoint
    )
    assert results["setup"]["endpoint"] == endpoint
    # The same template either way: prompts of one length cost the same tokens (nonces vary by a few).
    assert abs(prompt_median(results) - prompt_median(chat)) <= 2
    for case in results["cases"]:
        requests = measured(case)
        assert case["n_failed"] == 0 and all(r["anomalies"] == [] for r in requests)
        counters = case["server"]["counters"]
        assert counters["generation_tokens"] == sum(r["completion_tokens"] for r in requests)
        assert counters["prompt_tokens"] == sum(r["prompt_tokens"] for r in requests)  # warmups outside the window


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_no_stream_keeps_e2e_and_withholds_stream_figures(vllm_server, tmp_path, endpoint):
    results = benchy_run(
        vllm_server, "--endpoint", endpoint, "--no-stream", *"--pp 128 --tg 16 --runs 2".split(), out=tmp_path
    )
    (case,) = results["cases"]
    assert case["n_ok"] == 2 and case["unavailable_codes"]["ttft_s"] == "not_streamed"
    assert all(r["streamed"] is False and r["metrics"]["e2e_s"] > 0 for r in measured(case))


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_multi_turn_on_each_api(vllm_server, tmp_path: Path, endpoint):
    results = benchy_run(
        vllm_server, "--endpoint", endpoint, *"--turns 3 -c 1 --pp 200 --tg 8 --warmup 0".split(), out=tmp_path
    )
    turns = sorted(measured(results["cases"][0]), key=lambda r: r["turn"])
    assert [r["turn"] for r in turns] == [1, 2, 3] and all(r["status"] == "ok" for r in turns)
    # vLLM caches whole blocks: by turn 3 the history holds at least one.
    assert turns[2]["cached_tokens"] > 0
