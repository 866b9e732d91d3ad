"""`benchy run --depth` in both modes against the simulator, checked against its truth log.

The truth of a prefill rate is the simulator's own: (prompt − cached tokens) ÷ (prefill end −
prefill start). TTFT also holds a few fixed milliseconds (HTTP) and the server's tokenizing of
the prompt, which grows with load on a shared machine; a slow prefill rate on short prompts
(500 tok/s, so ≥ 1 s of prefill) keeps both far inside the 2% the issue allows.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from benchy import run as run_mod
from benchy.checks import cache as cache_checks
from benchy.client.settings import ClientSettings
from benchy.load.prompts import Calibration, PromptFactory
from benchy.measure import reading, registry, tokenizer
from benchy.measure.unavailable import Unavailable
from benchy.records.plan import Tagged
from benchy.results.types import CaseResult, RequestResult, RunResult
from benchy.workloads.case import ScenarioError
from benchy.workloads.scenario import load_scenario, sweep
from tests.conftest import client_slack_s, run_benchy_here

SIM_FLAGS = ("--prefill-tps", "500", "--decode-tps", "5000")
PP, DEPTH, TG = 500, 500, 4
BLOCK = 16


def truth_rate(trace: dict) -> float:
    return (trace["prompt_tokens"] - trace["cached_tokens"]) / (trace["prefill_end_s"] - trace["prefill_start_s"])


def depth_case(results: dict) -> dict:
    (case,) = [c for c in results["cases"] if c["depth"] == DEPTH]
    return case


def measured(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def run_cli(sim, *flags: str) -> dict:
    proc = run_benchy_here(
        "run",
        "--base-url",
        sim.base_url,
        *f"--pp {PP} --tg {TG} --runs 3 --warmup 0 -q --format json".split(),
        *flags,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def assert_prefill_matches_truth(case: dict, sim) -> None:
    truth = {t["request_id"]: t for t in sim.truth()}
    rates = [truth_rate(truth[r["request_id"]]) for r in measured(case)]
    reported = case["summary"]["prefill_tps"]["median"]
    late = client_slack_s(case) / case["summary"]["ttft_s"]["median"]  # TTFT stamped late by benchy's lag
    assert abs(reported / np.median(rates) - 1) < 0.02 + late, (reported, rates)
    for r in measured(case):  # benchy's new tokens are the server's new tokens
        t = truth[r["request_id"]]
        assert r["prompt_tokens"] - r["cached_tokens"] == t["prompt_tokens"] - t["cached_tokens"]


def test_cached_depth_prefills_only_the_new_tokens_at_the_true_rate(start_sim):
    sim = start_sim(*SIM_FLAGS)
    results = run_cli(sim, "--depth", "0", str(DEPTH), "--depth-mode", "cached")
    assert [c["label"] for c in results["cases"]] == [f"pp{PP} tg{TG}", f"pp{PP} tg{TG} @ d{DEPTH} cached"]
    assert [c["depth_mode"] for c in results["cases"]] == [None, "cached"]
    case = depth_case(results)
    # The context went first, alone, and is recorded (as a warmup, not counted).
    context = case["requests"][0]
    assert context["warmup"] and context["request_id"].endswith("ctx") and context["completion_tokens"] == 1
    truth = {t["request_id"]: t for t in sim.truth()}
    for r in measured(case):
        t = truth[r["request_id"]]
        assert t["arrival_s"] > truth[context["request_id"]]["prefill_end_s"]
        assert t["cached_tokens"] >= DEPTH  # the whole context came from the cache …
        assert t["prompt_tokens"] - t["cached_tokens"] <= PP + 2 * BLOCK  # … only pp tokens were new
        assert abs(t["prompt_tokens"] - (DEPTH + PP)) <= 0.01 * (DEPTH + PP)
    assert_prefill_matches_truth(case, sim)
    codes = {w["code"] for w in results["warnings"]}
    assert not codes & {"depth_cache_miss", "prefix_cache_hit"}, results["warnings"]


def test_cold_depth_prefills_depth_plus_pp_at_the_true_rate(start_sim):
    sim = start_sim(*SIM_FLAGS)
    cases = sweep([PP], [TG], [1], [DEPTH], depth_mode="cold")
    results = run_mod.execute(
        run_mod.RunSettings(client=ClientSettings(base_url=sim.base_url), cases=cases, runs=3, warmup=0, progress=False)
    ).to_dict()
    case = depth_case(results)
    assert case["label"] == f"pp{PP} tg{TG} @ d{DEPTH}" and case["depth_mode"] == "cold"
    assert len(case["requests"]) == 3  # no context sent ahead
    truth = {t["request_id"]: t for t in sim.truth()}
    for r in measured(case):
        t = truth[r["request_id"]]
        assert t["cached_tokens"] <= 4 * BLOCK  # only the chat template: the context is unique
        assert abs(r["prompt_tokens"] - r["cached_tokens"] - (DEPTH + PP)) <= 0.01 * (DEPTH + PP) + 4 * BLOCK
    assert_prefill_matches_truth(case, sim)


def test_cached_depth_without_a_server_cache_warns_and_stays_honest(start_sim):
    sim = start_sim(*SIM_FLAGS, "--no-prefix-cache")
    results = run_cli(sim, "--depth", str(DEPTH), "--depth-mode", "cached", "--runs", "2")
    case = depth_case(results)
    (warning,) = [w for w in results["warnings"] if w["code"] == "depth_cache_miss"]
    assert warning["case"] == case["label"] and "2 of 2 requests" in warning["message"]
    # The server prefilled everything again, and the rate says so (depth + pp over TTFT).
    assert all(r["cached_tokens"] == 0 for r in measured(case))
    assert_prefill_matches_truth(case, sim)


def test_shared_context_is_a_token_prefix_of_every_request_and_starts_with_its_own_nonce():
    factory = PromptFactory(Calibration(overhead_tokens=30, scale=1.0))
    context = factory.context(DEPTH)
    assert context.local_tokens == DEPTH and context.text.startswith(context.nonce)
    assert PromptFactory().context(DEPTH).text[:16] != context.text[:16]  # another run, another nonce
    for nonce in (True, False):
        factory.nonce = nonce
        prompts = [factory.build(PP, DEPTH, context) for _ in range(2)]
        ids = tokenizer.encode(context.text)
        for p in prompts:
            assert tokenizer.encode(p.text)[: len(ids)] == ids
            assert p.local_tokens == DEPTH + PP - 30
        assert (prompts[0].text != prompts[1].text) is nonce  # each request's own nonce after it
    cold = [PromptFactory().build(PP, DEPTH) for _ in range(2)]
    assert [p.local_tokens for p in cold] == [DEPTH + PP] * 2 and cold[0].text[:16] != cold[1].text[:16]


def test_prefill_rate_is_unavailable_when_a_reused_context_is_not_confirmed():
    rec = Tagged(
        case="x",
        run=0,
        index=0,
        warmup=False,
        request_id="r",
        nonce=None,
        target_prompt_tokens=DEPTH + PP,
        target_output_tokens=TG,
        token_event_s=[0.5],
        token_event_chars=[3],
        prompt_tokens=DEPTH + PP,
        reused_context_tokens=DEPTH,
    )
    assert isinstance(registry.computed(rec, reading.read(rec))["prefill_tps"], Unavailable)
    rec = dataclasses.replace(rec, cached_tokens=DEPTH + 16)
    assert registry.computed(rec, reading.read(rec))["prefill_tps"] == (PP - 16) / 0.5
    row = dataclasses.replace(RequestResult.of(rec), cached_tokens=None)
    case = CaseResult(label="pp500 tg4 @ d500", pp=PP, tg=4, concurrency=1, depth=DEPTH, requests=[row])
    (w,) = cache_checks.depth_cache_miss(case, RunResult())
    assert w.code == "depth_cache_miss" and "reports no cached_tokens" in w.message


def test_bad_depth_input_is_one_line_usage_error():
    for flags in (["--depth-mode", "warm"], ["--depth", "-5"]):
        proc = run_benchy_here("run", *flags)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("benchy: error:") and proc.stderr.strip().count("\n") == 0


def test_scenario_files_take_depth_and_depth_mode(tmp_path):
    good = tmp_path / "deep.toml"
    good.write_text('pp = 512\ntg = 32\ndepth = [0, 4096]\ndepth_mode = "cached"\n')
    cases = load_scenario(str(good))
    assert [(c.label, c.depth_mode) for c in cases] == [
        ("pp512 tg32", "cached"),
        ("pp512 tg32 @ d4096 cached", "cached"),
    ]
    bad = tmp_path / "bad.toml"
    bad.write_text('pp = 512\ntg = 32\ndepth = 4096\ndepth_mode = "warm"\n')
    with pytest.raises(ScenarioError, match=r"bad\.toml(:\d+)?: depth mode must be one of cold, cached"):
        load_scenario(str(bad))
