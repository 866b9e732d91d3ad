"""benchy sim's real-server behaviours (issue 15), each checked on the wire and in the truth log.

These tests hold the simulator to what it claims to reproduce, so that the end-to-end tests
(test_cross.py) can judge benchy against its truth log: speculative decoding in vLLM's and
llama.cpp's shapes, a buffering proxy, miscounted or missing usage, prompt truncation, inline
<think> blocks, llama.cpp's timings and its host cache copy before prefill.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchy.sim import vocab
from benchy.sim.config import ConfigError, build_config
from benchy.sim.engine import prompt_hash, spec_steps, think_inline
from tests.test_sim import chat, content_of, post, stream_chat, token_events, tokenize, usage_of

FAST_PREFILL = ("--prefill-tps", "200000")
STEP_S = 0.001  # tokens of one speculative step are made within this of each other


def one(sim, body: dict, endpoint: str = "chat/completions"):
    obs = post(f"{sim.base_url}/{endpoint}", body)
    (truth,) = sim.truth(expect=1)
    return obs, truth


# --- speculative decoding ---


@given(st.integers(0, 300), st.integers(1, 9), st.floats(0, 1), st.integers(0, 10**6))
def test_spec_steps_cover_every_token_with_a_lone_first(n, draft, accept, seed):
    cfg = build_config(spec_draft=draft, spec_accept=accept)
    steps = spec_steps(cfg, n, seed)
    assert sum(steps) == n
    assert all(1 <= s <= draft + 1 for s in steps)
    assert steps[:1] == ([1] if n else [])


def test_spec_vllm_events_carry_one_step_each(start_sim):
    sim = start_sim("--preset", "spec-vllm", "--decode-tps", "400", *FAST_PREFILL)
    body = stream_chat(max_tokens=120, ignore_eos=True)
    obs, truth = one(sim, body)
    events = token_events(truth)
    sizes = [e["tokens"] for e in events]
    assert sum(sizes) == 120 and sizes[0] == 1 and max(sizes) > 2 and max(sizes) <= 8
    # One event per step: the request's own steps (seeded by its prompt), whatever the timing;
    # each event's tokens were made together.
    ids = tokenize(sim, {"model": body["model"], "messages": body["messages"]})["tokens"]
    assert sizes == spec_steps(build_config("spec-vllm"), 120, prompt_hash(ids))
    made, starts = truth["token_times_s"], [sum(sizes[:i]) for i in range(len(sizes))]
    assert all(made[i + 1] - made[i] < STEP_S for s, n in zip(starts, sizes) for i in range(s, s + n - 1))
    assert vocab.count(content_of(obs)) == 120


def test_spec_llamacpp_sends_a_step_as_a_burst_of_one_token_events(start_sim):
    sim = start_sim("--preset", "spec-llamacpp", "--decode-tps", "400", *FAST_PREFILL)
    body = stream_chat(max_tokens=120, ignore_eos=True)
    obs, truth = one(sim, body)
    events = token_events(truth)
    assert [e["tokens"] for e in events] == [1] * 120
    # The request's own steps (seeded by its prompt), not guessed from timing a busy machine blurs.
    ids = tokenize(sim, {"model": body["model"], "messages": body["messages"]})["tokens"]
    sizes = spec_steps(build_config("spec-llamacpp"), 120, prompt_hash(ids))
    assert sizes[0] == 1 and max(sizes) <= 9 and len(sizes) < 80
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    made = truth["token_times_s"]
    # the events of a step leave together (each write may yield to a busy machine, so a few
    # may not: 3 of 94 once under full load): far closer than the gap between steps
    step_gap = (made[starts[-1]] - made[starts[1]]) / (len(sizes) - 2)
    within = [events[i + 1]["t_s"] - events[i]["t_s"] for s, n in zip(starts, sizes) for i in range(s, s + n - 1)]
    assert sum(g < step_gap / 10 for g in within) >= 0.9 * len(within)
    assert any("timings" in c for c in obs.chunks)


# --- delivery and counts ---


def test_proxy_buffer_delivers_bursts_and_the_first_token_late(start_sim):
    sim = start_sim("--proxy-buffer-bytes", "2048", "--decode-tps", "400", *FAST_PREFILL)
    obs, truth = one(sim, stream_chat(max_tokens=60, ignore_eos=True))
    events = token_events(truth)
    assert [e["tokens"] for e in events] == [1] * 60
    bursts = len({e["t_s"] for e in events})
    assert 2 <= bursts <= 10
    first_made, first_sent = truth["token_times_s"][0], events[0]["t_s"]
    assert first_sent - first_made > 5 / 400  # the first token waited for the buffer
    arrivals = sorted({round(t, 3) for t, _ in obs.lines})
    assert len(arrivals) <= bursts + 3  # the client sees the bursts too


def test_usage_scale_claims_a_multiple_and_continuous_usage_counts_each_chunk(start_sim):
    sim = start_sim("--usage-scale", "2", "--decode-tps", "2000", *FAST_PREFILL)
    body = stream_chat(max_tokens=20, ignore_eos=True)
    body["stream_options"]["continuous_usage_stats"] = True
    obs, truth = one(sim, body)
    assert truth["completion_tokens"] == 20 and truth["usage_completion_tokens"] == 40
    assert usage_of(obs)["completion_tokens"] == 40
    per_chunk = [c["usage"]["completion_tokens"] for c in obs.chunks if c["choices"]]
    assert per_chunk == list(range(2, 41, 2))


def test_ignored_stream_options_drop_usage_from_streams_only(start_sim):
    sim = start_sim("--preset", "no-usage-8-per-event", "--decode-tps", "2000", *FAST_PREFILL)
    obs, truth = one(sim, stream_chat(max_tokens=32, ignore_eos=True))
    assert all("usage" not in c for c in obs.chunks)
    assert [e["tokens"] for e in token_events(truth)] == [8] * 4
    whole = post(f"{sim.base_url}/chat/completions", chat(max_tokens=4))
    assert whole.json()["usage"]["completion_tokens"] == 4


def test_truncation_keeps_the_last_tokens_and_says_so_only_in_the_truth(start_sim):
    sim = start_sim("--truncate-prompt", "100", *FAST_PREFILL)
    obs, truth = one(sim, stream_chat("word " * 400, max_tokens=4))
    assert usage_of(obs)["prompt_tokens"] == truth["prompt_tokens"] == 100
    assert truth["prompt_tokens_sent"] > 400


# --- reasoning inline ---


@given(st.integers(0, 60), st.integers(0, 40))
def test_think_inline_opens_and_closes_in_place(n, reasoning):
    texts = [f" w{i}" for i in range(n)]
    out = think_inline(texts, reasoning)
    assert len(out) == n
    if n and reasoning:
        assert out[0] == "<think>"
        assert ("</think>" in out) == (n >= min(reasoning, n - 1) + 2)


def test_think_inline_stream_and_an_unclosed_block(start_sim):
    sim = start_sim("--think-inline", "--reasoning-tokens", "10", "--decode-tps", "500", *FAST_PREFILL)
    obs, truth = one(sim, stream_chat(max_tokens=30, ignore_eos=True))
    text = content_of(obs)
    assert text.startswith("<think>") and "</think>" in text and not content_of(obs, "reasoning_content")
    assert truth["reasoning_tokens"] == 12 and usage_of(obs)["completion_tokens_details"]["reasoning_tokens"] == 0
    assert truth["first_content_token_s"] == truth["token_times_s"][12]
    short = post(f"{sim.base_url}/chat/completions", stream_chat("other", max_tokens=8, ignore_eos=True))
    assert "</think>" not in content_of(short)
    record = sim.truth(expect=2)[1]
    assert record["reasoning_tokens"] == 8 and record["first_content_token_s"] is None


# --- time inside TTFT that is not prefill ---


def test_timings_and_host_copy_before_prefill(start_sim):
    sim = start_sim("--timings", "--host-copy-tps", "20000", "--prefill-tps", "50000", "--decode-tps", "1000")
    obs, truth = one(sim, stream_chat("word " * 2000, max_tokens=8, ignore_eos=True))
    (timings,) = [c["timings"] for c in obs.chunks if "timings" in c]
    prompt = truth["prompt_tokens"]
    assert truth["host_copy_s"] == pytest.approx(prompt / 20000)
    assert timings["prompt_ms"] == pytest.approx(1000 * prompt / 50000, rel=1e-6)
    assert timings["prompt_n"] == prompt and timings["predicted_n"] == 8
    assert truth["prefill_start_s"] - truth["admitted_s"] >= truth["host_copy_s"] - 1e-6
    whole = post(f"{sim.base_url}/chat/completions", chat("again", max_tokens=2))
    assert whole.json()["timings"]["predicted_n"] == 2


@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"spec_draft": 4, "tokens_per_event": 2}, "--spec-draft"),
        ({"spec_accept": 1.5}, "--spec-accept"),
        ({"spec_style": "sglang"}, "--spec-style"),
        ({"usage_scale": 0}, "--usage-scale"),
        ({"truncate_prompt": -1}, "--truncate-prompt"),
        ({"host_copy_tps": -1}, "--host-copy-tps"),
    ],
)
def test_bad_behaviour_settings_are_one_line_errors(overrides, fragment):
    with pytest.raises(ConfigError, match=fragment):
        build_config(**overrides)


@pytest.mark.parametrize(
    "preset",
    [
        "spec-vllm",
        "spec-llamacpp",
        "proxy-buffered",
        "usage-double",
        "no-usage-8-per-event",
        "truncating",
        "think-inline",
        "llamacpp-ram-cache",
    ],
)
def test_every_behaviour_preset_is_valid(preset):
    assert build_config(preset).preset == preset
