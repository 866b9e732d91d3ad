"""Servers that behave as 2025-2026 deployments do, each judged against `benchy sim`'s truth log:
a stream interval that is not buffering, reasoning sent in two fields at once, usage that
over- or under-claims against the server's own /tokenize, a think block closed by the last
token, a failed request that ends a loaded case, and a prompt cache that expires while a
conversation thinks (not a router)."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchy import run as run_mod
from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.measure import evidence
from benchy.sim import vocab
from benchy.sim.config import ConfigError, build_config
from benchy.sim.process import SimProcess
from benchy.workloads.scenario import sweep
from tests.conftest import run_benchy_here
from tests.conftest import warning_codes as codes
from tests.test_checks import assert_ttft_matches_truth, measured, truth_of
from tests.test_sim import content_of, post, stream_chat

FAST_PREFILL = ("--prefill-tps", "100000")
REL = 0.05  # figures judged against the truth within 5%


def bench(sim, pp=(64,), tg=(32,), runs=3, concurrency=(1,), client: dict | None = None, **settings) -> dict:
    return run_mod.execute(
        run_mod.RunSettings(
            client=ClientSettings(base_url=sim.base_url, **(client or {})),
            cases=sweep(list(pp), list(tg), list(concurrency)),
            runs=runs,
            warmup=1,
            progress=False,
            load=LoadSettings(),
            **settings,
        )
    ).to_dict()


def only_case(results: dict) -> dict:
    (case,) = results["cases"]
    return case


def true_decode_tps(truth: dict) -> float:
    made = truth["token_times_s"]
    return (len(made) - 1) / (made[-1] - made[0])


# ------------------------------------------------------------------ 1. stream intervals


@pytest.mark.parametrize("interval", [18, 20])
def test_a_stream_interval_is_not_buffering_and_keeps_its_timings(start_sim, interval):
    # vLLM --stream-interval / TensorRT-LLM stream_interval: the first token alone when prefill
    # ends, then `interval` tokens an event, each written when its last token is made.
    sim = start_sim("--preset", "stream-interval-20", "--stream-interval", str(interval), *FAST_PREFILL)
    results = bench(sim, tg=(128,))
    assert "sse_buffering" not in codes(results)
    case = only_case(results)
    for name in ("ttft_s", "decode_tps", "prefill_tps"):
        assert case["summary"][name] is not None, case["unavailable"].get(name)
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert [e["tokens"] for e in t["events"] if e["tokens"]][:2] == [1, interval]
        assert_ttft_matches_truth(case, req, t)
        assert req["metrics"]["decode_tps"] == pytest.approx(true_decode_tps(t), rel=REL)


def test_a_buffering_proxy_in_front_of_a_stream_interval_is_still_buffering(start_sim):
    # The control: the same server behind a proxy that holds 4 KB, so several events arrive in
    # one read and the first token waits for them.
    sim = start_sim(
        "--preset", "stream-interval-20", "--proxy-buffer-bytes", "4096", "--decode-tps", "400", *FAST_PREFILL
    )
    results = bench(sim, tg=(256,))
    assert "sse_buffering" in codes(results)
    case = only_case(results)
    assert case["summary"]["ttft_s"] is None and case["summary"]["decode_tps"] is None
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert t["events"][0]["t_s"] - t["token_times_s"][0] > 5 / 400  # the first token truly waited


# ------------------------------------------------------------------ 2. two reasoning fields


def test_reasoning_in_both_fields_is_one_text_when_calibrating(start_sim):
    sim = start_sim("--preset", "reasoning-both", *FAST_PREFILL, "--decode-tps", "2000")
    obs = post(f"{sim.base_url}/chat/completions", stream_chat(max_tokens=40, ignore_eos=True))
    # On the wire: the same reasoning text in both fields.
    assert content_of(obs, "reasoning_content") == content_of(obs, "reasoning") != ""
    assert sim.truth(expect=1)[0]["reasoning_tokens"] == 32

    async def answer() -> str:
        async with Client(ClientSettings(base_url=sim.base_url)) as client:
            return (await client.answer_of("hello", "chat", 40))[0]

    text = asyncio.run(answer())
    whole = sim.truth(expect=2)[1]
    # The answer's text once: its tokens in the sim's vocabulary, the reasoning not repeated.
    assert whole["completion_tokens"] == 40 and vocab.count(text) == 40


def test_reasoning_in_both_fields_keeps_the_no_usage_rate_true(start_sim):
    # No /tokenize, no usage in the stream, 4 tokens an event: the count is the local one, at
    # the output scale fitted on the calibration answer (its max_tokens: it ended by length),
    # so its text must be counted once.
    sim = start_sim(
        "--preset", "reasoning-both", "--no-tokenize", "--ignore-stream-options", "--tokens-per-event", "4",
        *FAST_PREFILL,
    )  # fmt: skip
    results = bench(sim, tg=(64,))
    case = only_case(results)
    assert results["setup"]["calibration"]["output_method"] == "max_tokens"
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        # an estimate (benchy's tokenizer on the sim's words): within 10%, where the doubled text was a third low
        assert req["metrics"]["e2e_tps"] == pytest.approx(t["completion_tokens"] / req["metrics"]["e2e_s"], rel=0.1)


# ------------------------------------------------------------------ 3. usage against the stream


ONE_PER_EVENT_CLAIMS = [0.25, 0.5, 0.7, 1.3, 2.0, 3.0]
# Several tokens an event leave only the text, which re-tokenizing may shrink or grow: a claim
# is overruled from RETOKENIZED_MIN_SHARE of the text down, and from 1 / it up.
SHARE = evidence.RETOKENIZED_MIN_SHARE
SEVERAL_PER_EVENT_CLAIMS = [0.25, SHARE - 0.1, 1 / SHARE + 0.1, 2.0, 3.0]
TG = 128


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.sampled_from([(scale, 1) for scale in ONE_PER_EVENT_CLAIMS] + [(scale, 4) for scale in SEVERAL_PER_EVENT_CLAIMS])
)
def test_usage_that_the_stream_and_tokenize_contradict_is_flagged_whatever_it_claims(claim):
    """Whatever usage claims, a server whose streamed text and /tokenize agree against it is
    flagged, and the figures count what was streamed."""
    usage_scale, tokens_per_event = claim
    with tempfile.TemporaryDirectory() as tmp:
        flags = ("--usage-scale", str(usage_scale), "--tokens-per-event", str(tokens_per_event), "--decode-tps", "800")
        with SimProcess(*flags, *FAST_PREFILL, truth_log=Path(tmp) / "truth.jsonl") as sim:
            results = bench(sim, tg=(TG,))
            assert "usage_mismatch" in codes(results)
            case = only_case(results)
            truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert count["usage"] == t["usage_completion_tokens"] != t["completion_tokens"]
        assert count["tokens"] == t["completion_tokens"] == TG
        assert evidence.USAGE in count["disagreed"]
        assert req["metrics"]["e2e_tps"] == pytest.approx(TG / req["metrics"]["e2e_s"])


def test_a_scale_fitted_on_usage_never_backs_usage(start_sim):
    # No /tokenize, and the calibration answer stops before its max_tokens (the server ends
    # answers where it likes): the local count's scale comes from that answer's usage, which
    # claims double. That count merely echoes usage: it must not stand as its witness.
    natural = ("--ignore-ignore-eos", "--natural-min", "24", "--natural-max", "40")
    sim = start_sim("--preset", "usage-double", "--no-tokenize", *natural, *FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(48,))
    assert results["setup"]["calibration"]["output_method"] == "usage"
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t, count = truth[req["request_id"]], req["token_count"]
        assert req["local_scale_from_usage"] is True
        assert count["usage"] == 2 * t["completion_tokens"]
        assert evidence.LOCAL not in count["backed_by"] and count["local"] is None


# ------------------------------------------------------------------ 4. a think block without an answer


@pytest.mark.parametrize("tg", [20, 32], ids=["never-closed", "closed-by-the-last-token"])
def test_a_think_block_that_leaves_no_answer_is_reasoning_only(start_sim, tg):
    # 30 reasoning tokens and their two tags: at tg 32 </think> is the last token.
    sim = start_sim("--think-inline", "--reasoning-tokens", "30", *FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(tg,))
    assert "reasoning_only" in codes(results)
    case = only_case(results)
    assert case["summary"]["ttfc_s"] is None
    truth = truth_of(sim, results)
    for req in measured(case):
        assert truth[req["request_id"]]["first_content_token_s"] is None  # truly no answer token


def test_a_think_block_with_an_answer_after_it_is_not_reasoning_only(start_sim):
    sim = start_sim("--think-inline", "--reasoning-tokens", "30", *FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(40,))
    assert "reasoning_only" not in codes(results)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        t = truth[req["request_id"]]
        assert req["metrics"]["ttfc_s"] is not None and t["first_content_token_s"] is not None


# ------------------------------------------------------------------ 9. the aggregate window


def test_the_aggregate_window_runs_to_the_last_request_failed_or_not(start_sim):
    # A third of the requests stall mid-stream for 1.5 s (and hold up what is in flight with
    # them); the client gives up after 0.5 s of silence, so failures end the case, after every
    # success.
    sim = start_sim(
        "--fault", "stall:0.3", "--stall-s", "1.5", "--seed", "7", "--max-running", "64", "--decode-tps", "400",
        *FAST_PREFILL,
    )  # fmt: skip
    results = bench(sim, tg=(32,), runs=2, concurrency=(4,), client={"stall_timeout_s": 0.5})
    case = only_case(results)
    rows = measured(case)
    ok = [r for r in rows if r["status"] == "ok"]
    failed = [r for r in rows if r["status"] != "ok"]
    assert ok and failed and all(r["error_kind"] == "stall" for r in failed)
    truth = truth_of(sim, results)
    assert any(truth.get(r["request_id"], {}).get("fault") == "stall" for r in failed)  # the server stalled
    start = min(r["sent_mono_s"] for r in rows)
    last_ok = max(r["sent_mono_s"] + r["metrics"]["e2e_s"] for r in ok)
    last = max(r["sent_mono_s"] + r["end_s"] for r in rows)
    assert last > last_ok  # a failure ended the case
    tokens = sum(truth[r["request_id"]]["completion_tokens"] for r in ok)
    assert case["aggregate_tps"] == pytest.approx(tokens / (last - start), rel=1e-6)
    assert case["request_rate"] == pytest.approx(len(ok) / (last - start), rel=1e-6)


# ------------------------------------------------------------------ 6. cache expiry is not routing


def test_misses_after_long_idle_gaps_are_a_cache_lifetime_not_routing(start_sim, tmp_path):
    # One server whose cache forgets what sat unused for 0.5 s; conversations think for
    # exp(0.5 s) between turns, so some turns find their history and others do not.
    sim = start_sim("--preset", "cache-ttl")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report",
        "--turns", "8", "-c", "2", "--pp", "100", "--tg", "16", "--think-time", "exp:0.5s", "--warmup", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    case = only_case(results)
    truth = {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}
    judged = [r for r in case["requests"] if r.get("expected_cached_tokens")]
    expired = {r["request_id"] for r in judged if truth[r["request_id"]]["cache_lost_tokens"]}
    assert expired and len(expired) < len(judged)  # the seeded think times give both
    assert {t["replica"] for t in truth.values()} == {0}  # one server: no routing at all
    part = case["workload"]["partial_reuse"]
    assert part is not None and part["cause"] == "expiry" and part["replicas"] is None
    assert part["missed_requests"] + part["partial_requests"] == len(expired)
    assert part["miss_idle_min_s"] > part["hit_idle_max_s"]
    (w,) = [w for w in results["warnings"] if w["code"] == "cache_partial_reuse"]
    assert "replicas" not in w["message"] and "expire" in w["message"]
    assert "router" not in w["hint"]


# ------------------------------------------------------------------ controls: healthy servers


THESE_VERDICTS = {"sse_buffering", "usage_mismatch", "reasoning_only", "local_tokenizer_mismatch"}


@pytest.mark.parametrize(
    "flags",
    [
        (),
        ("--no-tokenize",),
        ("--preset", "spec-vllm"),
        ("--preset", "spec-llamacpp"),
        ("--preset", "llamacpp-silent-eos"),
        ("--tokens-per-event", "4"),
        ("--preset", "reasoning-both", "--no-tokenize"),
        ("--preset", "gpt-oss-harmony"),
        ("--preset", "think-inline"),
    ],
    ids=[
        "default",
        "no-tokenize",
        "spec-vllm",
        "spec-llamacpp",
        "silent-eos",
        "4-per-event",
        "reasoning-both",
        "harmony",
        "think-inline",
    ],
)
def test_healthy_servers_raise_none_of_these_verdicts(start_sim, flags):
    sim = start_sim(*flags, *FAST_PREFILL, "--decode-tps", "400")
    results = bench(sim, tg=(96,))
    assert not THESE_VERDICTS & codes(results)
    case = only_case(results)
    truth = truth_of(sim, results)
    for req in measured(case):
        assert req["token_count"]["tokens"] == truth[req["request_id"]]["completion_tokens"]


def test_misses_spread_by_a_router_are_not_called_expiry(start_sim, tmp_path):
    # The control of the lifetime test: no lifetime, two replicas picked at random, the same
    # think times. Hits and misses follow the router, not the idle gaps.
    sim = start_sim(
        "--preset", "cache-ttl", "--cache-ttl-s", "0", "--replicas", "2", "--route", "random", "--seed", "5"
    )
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report",
        "--turns", "8", "-c", "2", "--pp", "100", "--tg", "16", "--think-time", "exp:0.5s", "--warmup", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    case = only_case(json.loads((out / "results.json").read_text()))
    truth = {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}
    assert not any(t["cache_lost_tokens"] for t in truth.values())  # nothing expired or was evicted
    part = case["workload"]["partial_reuse"]
    assert part is None or part["cause"] != "expiry"


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"stream_interval": 20, "tokens_per_event": 2}, "--stream-interval"),
        ({"stream_interval": -1}, "--stream-interval"),
        ({"reasoning_field": "thoughts"}, "--reasoning-field"),
        ({"cache_ttl_s": -1.0}, "--cache-ttl-s"),
    ],
)
def test_this_rounds_sim_settings_refuse_what_cannot_be_simulated(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        build_config(**overrides)
