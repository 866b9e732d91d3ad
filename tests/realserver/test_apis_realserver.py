"""--endpoint responses and --endpoint messages against a real llama.cpp server (xllamacpp,
tiny model): llama-server routes /v1/responses and /v1/messages (it turns both into its chat
path), so one prompt costs the same tokens on every endpoint, and benchy's figures on each are
held to the server's own account: its usage, its `timings` (chat and Responses carry them;
Messages does not) and its /metrics counters over the case (`case.server.derived`).

Run alone: `pytest -m realserver tests/realserver/test_apis_realserver.py`.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import uuid

import pytest

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord
from tests.conftest import loop_lag_s, run_benchy

pytestmark = pytest.mark.realserver

APIS = ("responses", "messages")
# The suite's measured tolerances (test_benchy_realserver.py says how they were measured).
TTFT_GAP_MAX_S, TTFT_GAP_MAX_SHARE = 0.030, 0.10
DECODE_RATIO_TOLERANCE = 0.10
PP_TOLERANCE = 0.01


def run_results(server, *args: str) -> dict:
    proc = run_benchy("run", "--base-url", server.base_url, "--quiet", "--format", "json", *args, timeout=300)
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def measured(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def record(tag: str) -> RequestRecord:
    return RequestRecord(
        case="c",
        run=0,
        index=0,
        warmup=False,
        request_id=f"api-{tag}",
        nonce=None,
        target_prompt_tokens=0,
        target_output_tokens=8,
    )


def test_one_prompt_costs_the_same_on_every_endpoint_and_is_cached_alike(llama_server):
    """One new text through chat, then responses and messages: the same prompt tokens on each
    (Messages' input_tokens + cache_read_input_tokens summed), exactly the asked output, and
    every send after the first served from the cache but for its last token, as each API
    reports it (the slot that holds the text takes it again)."""
    text = f"{uuid.uuid4().hex} " + " ".join(f"alpha{i} bravo{i * 7}" for i in range(60))

    async def send() -> list[tuple[str, RequestRecord]]:
        settings = ClientSettings(base_url=llama_server.base_url, model=llama_server.model)
        out = []
        async with Client(settings) as client:
            for endpoint in ("chat", *APIS, "chat"):
                rec = record(f"{endpoint}-{len(out)}")
                rec = await client.stream(rec, text, 8, endpoint, {"ignore_eos": True})
                out.append((endpoint, rec))
        return out

    sent = asyncio.run(send())
    for endpoint, rec in sent:
        assert rec.ok and rec.completion_tokens == 8 and "no_done" not in rec.anomalies, (endpoint, rec.error)
        assert rec.token_event_kinds.count("c") == len(rec.token_event_s) > 0
    first = sent[0][1]
    assert first.prompt_tokens and first.cached_tokens < first.prompt_tokens // 2
    for endpoint, rec in sent[1:]:
        assert rec.prompt_tokens == first.prompt_tokens, (endpoint, rec.prompt_tokens, first.prompt_tokens)
        assert rec.cached_tokens == rec.prompt_tokens - 1, (endpoint, rec.cached_tokens)
    responses = sent[1][1]
    assert responses.server_timings and responses.server_timings["cache_n"] == responses.cached_tokens


@pytest.mark.parametrize("api", APIS)
def test_each_api_figures_agree_with_the_servers_own(llama_server, record_property, api):
    """benchy's TTFT and decode rate on each API against llama.cpp's clock: per request its
    `timings` where the API carries them (Responses), and for every API the server's /metrics
    over the case (tokens predicted / decode seconds)."""
    results = run_results(llama_server, "--endpoint", api, "--pp", "512", "--tg", "128", "--runs", "5")
    (case,) = results["cases"]
    reqs = measured(case)
    assert case["n_ok"] == 5
    for r in reqs:
        assert r["status"] == "ok" and r["completion_tokens"] == 128 and r["anomalies"] == []
        assert abs(r["prompt_tokens"] - 512) <= PP_TOLERANCE * 512
    # The case's decode as /metrics sums it (tokens over decode seconds, every request), and
    # benchy's the same way: the sum of each request's decode tokens over its decode span.
    tokens = sum(r["completion_tokens"] - 1 for r in reqs)
    decode = tokens / sum((r["completion_tokens"] - 1) / r["metrics"]["decode_tps"] for r in reqs)
    counters = case["server"]["counters"]
    server_decode = counters["generation_tokens"] / counters["decode_seconds"]
    ratio = decode / server_decode
    line = f"\n[realserver] {api} pp512 tg128: decode {decode:.0f} vs /metrics {server_decode:.0f} tok/s (x{ratio:.3f})"
    if api == "responses":
        for r in reqs:
            t, m = r["server_timings"], r["metrics"]
            assert r["prompt_tokens"] - r["cached_tokens"] == t["prompt_n"] and t["predicted_n"] == 128
            assert m["ttft_s"] > t["prompt_ms"] / 1000 and r["end_s"] > (t["prompt_ms"] + t["predicted_ms"]) / 1000
        prompt_s = statistics.median(r["server_timings"]["prompt_ms"] / 1000 for r in reqs)
        gap = case["summary"]["ttft_s"]["median"] - prompt_s
        # Request by request against its own timings: the same decode steps, whatever the box did.
        paired = statistics.median(
            r["metrics"]["decode_tps"] / r["server_timings"]["predicted_per_second"] for r in reqs
        )
        record_property("ttft_gap_ms", round(gap * 1000, 2))
        line += f"; TTFT - server prompt_ms {gap * 1000:.1f} ms; decode / timings x{paired:.3f} (median of pairs)"
        assert 0 < gap <= TTFT_GAP_MAX_S + TTFT_GAP_MAX_SHARE * prompt_s + loop_lag_s(case)  # + its own stalls
        assert abs(paired - 1) <= DECODE_RATIO_TOLERANCE
    record_property("decode_ratio", round(ratio, 4))
    print(line)
    assert abs(ratio - 1) <= DECODE_RATIO_TOLERANCE


@pytest.mark.parametrize("api", APIS)
def test_multi_turn_on_each_api_is_served_from_the_growing_cache(llama_server, api):
    results = run_results(
        llama_server, "--endpoint", api, *"--turns 3 -c 1 --pp 64 --tg 12 --warmup 0".split()
    )  # fmt: skip
    [case] = results["cases"]
    turns = sorted(measured(case), key=lambda r: r["turn"])
    assert [r["turn"] for r in turns] == [1, 2, 3] and all(r["status"] == "ok" for r in turns)
    cached = [r["cached_tokens"] for r in turns]
    assert cached[0] < cached[1] < cached[2], cached
    assert all(r["cached_tokens"] >= r["expected_cached_tokens"] - 1 for r in turns[1:])
    assert not {w["code"] for w in results["warnings"]} & {"cache_eviction", "cache_leakage", "cache_not_reused"}


@pytest.mark.parametrize("api", APIS)
def test_probe_cache_on_each_api_detects_llamacpps_cache(llama_server, api):
    proc = run_benchy(
        "probe-cache", "--base-url", llama_server.base_url, "--endpoint", api,
        *"--lengths 2000 -n 5 --quiet --format json".split(), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (length,) = json.loads(proc.stdout)["lengths"]
    assert length["verdict"] == "detected", length["reason"]
    shared = length["shared"]
    assert all(c >= p - 1 for c, p in zip(shared["cached_tokens"][1:], shared["prompt_tokens"][1:]))


def test_sweep_runs_on_every_endpoint_with_no_error(llama_server):
    """--pp/--tg and -c sweeps on each endpoint: every request answered, none cut short."""
    for api in APIS:
        results = run_results(llama_server, "--endpoint", api, *"--pp 128 --tg 16 -c 1 2 --runs 2".split())
        assert [c["n_failed"] for c in results["cases"]] == [0, 0]
        assert all(r["completion_tokens"] == 16 for c in results["cases"] for r in c["requests"])


@pytest.mark.parametrize("endpoint", ["chat", *APIS])
def test_no_stream_on_each_endpoint_keeps_e2e_and_withholds_stream_figures(llama_server, endpoint):
    """--no-stream against llama-server: whole answers of exactly tg tokens, e2e and output rates
    kept, the stream figures withheld as not_streamed; where the answer carries llama.cpp's
    timings (chat), the answer cannot have ended before the server's prefill and decode did."""
    results = run_results(llama_server, "--endpoint", endpoint, "--no-stream", *"--pp 256 --tg 32 --runs 3".split())
    (case,) = results["cases"]
    assert case["n_ok"] == 3 and case["unavailable_codes"]["ttft_s"] == "not_streamed"
    assert case["summary"]["e2e_tps"]["n"] == 3
    for r in measured(case):
        assert r["streamed"] is False and r["completion_tokens"] == 32 and r["metrics"]["ttft_s"] is None
        t = r["server_timings"]
        if t is not None:
            assert r["end_s"] > (t["prompt_ms"] + t["predicted_ms"]) / 1000
    if endpoint == "chat":
        assert all(r["server_timings"] for r in measured(case))
