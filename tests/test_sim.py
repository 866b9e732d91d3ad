"""benchy sim, over real HTTP, checked against its own truth log."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict
from scipy import stats as sps

from benchy import __version__
from benchy.load.monitor import INTERVAL_S as MONITOR_INTERVAL_S
from benchy.load.monitor import LoopMonitor
from benchy.measure import tokenizer
from benchy.sim import prose, vocab
from benchy.sim.cache import PrefixCache
from benchy.sim.config import PRESET_HELP, build_config
from benchy.sim.render import event_groups
from tests.conftest import run_benchy

REPO_ROOT = Path(__file__).resolve().parent.parent

MODEL = "benchy-sim"
FAST = ("--decode-tps", "5000", "--prefill-tps", "1000000")


# --- a small client that records when each SSE line arrives ---


@dataclass
class Observed:
    status: int | None = None
    headers: dict = field(default_factory=dict)
    sent_s: float = 0.0
    headers_s: float | None = None
    lines: list[tuple[float, str]] = field(default_factory=list)  # (arrival, data payload)
    body: bytes = b""
    error: str | None = None  # exception class name when the connection broke

    @property
    def chunks(self) -> list[dict]:
        """Parsed data: payloads, without [DONE]; a malformed one raises."""
        return [json.loads(data) for _, data in self.lines if data != "[DONE]"]

    @property
    def done(self) -> bool:
        return bool(self.lines) and self.lines[-1][1] == "[DONE]"

    def json(self) -> dict:
        return json.loads(self.body)


async def fetch(session: aiohttp.ClientSession, url: str, body, headers=None) -> Observed:
    obs = Observed(sent_s=time.perf_counter())
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    try:
        async with session.post(url, data=data, headers=headers or {}) as resp:
            obs.headers_s = time.perf_counter()
            obs.status, obs.headers = resp.status, CIMultiDict(resp.headers)
            if resp.headers.get("Content-Type", "").startswith("text/event-stream"):
                async for raw in resp.content:
                    line = raw.decode().rstrip("\n")
                    if line.startswith("data: "):
                        obs.lines.append((time.perf_counter(), line[len("data: ") :]))
            else:
                obs.body = await resp.read()
    except (aiohttp.ClientError, ConnectionError) as exc:
        obs.error = type(exc).__name__
    return obs


async def _fetch_all(url: str, bodies: list, headers: list | None = None) -> list[Observed]:
    headers = headers or [None] * len(bodies)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        return await asyncio.gather(*(fetch(session, url, b, h) for b, h in zip(bodies, headers)))


def post_many(url: str, bodies: list, headers: list | None = None) -> list[Observed]:
    """Sends all bodies at once (concurrently)."""
    return asyncio.run(_fetch_all(url, bodies, headers))


def post(url: str, body, headers=None) -> Observed:
    return post_many(url, [body], [headers])[0]


def get_json(url: str) -> tuple[dict, dict]:
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read()), dict(resp.headers)


def chat(text: str = "hello", **params) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": text}], **params}


def stream_chat(text: str = "hello", **params) -> dict:
    return chat(text, stream=True, stream_options={"include_usage": True}, **params)


def content_of(obs: Observed, key: str = "content") -> str:
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in obs.chunks if c["choices"])


def usage_of(obs: Observed) -> dict:
    return [c for c in obs.chunks if not c["choices"]][-1]["usage"]


def by_request_id(records: list[dict]) -> dict[str, dict]:
    return {r["request_id"]: r for r in records}


def token_events(record: dict) -> list[dict]:
    return [e for e in record["events"] if e["kind"] in ("content", "reasoning")]


# --- endpoints and shapes ---


def test_info_endpoints_and_server_header(start_sim):
    sim = start_sim(truth_log=False)
    assert get_json(sim.url + "/health")[0] == {"status": "ok"}
    version, headers = get_json(sim.url + "/version")
    assert version == {"version": f"benchy-sim {__version__}"}
    assert headers["Server"] == f"benchy-sim/{__version__}"
    models, _ = get_json(sim.base_url + "/models")
    assert models == {
        "object": "list",
        "data": [{"id": MODEL, "object": "model", "owned_by": "benchy-sim", "max_model_len": 32768}],
    }


def test_streamed_chat_matches_truth(start_sim):
    sim = start_sim(*FAST)
    obs = post(sim.base_url + "/chat/completions", stream_chat(max_tokens=12, ignore_eos=True), {"x-request-id": "r1"})
    assert obs.status == 200 and obs.done and obs.error is None
    assert obs.headers["x-request-id"] == "r1"
    first = obs.chunks[0]["choices"][0]
    assert first["delta"]["role"] == "assistant"
    content = content_of(obs)
    usage = usage_of(obs)
    assert vocab.count(content) == usage["completion_tokens"] == 12
    assert obs.chunks[-2]["choices"][0]["finish_reason"] == "length"
    rendered_count = tokenize(sim, {"model": MODEL, "messages": chat()["messages"]})["count"]
    assert usage["prompt_tokens"] == rendered_count
    assert usage["total_tokens"] == usage["prompt_tokens"] + 12
    assert usage["completion_tokens_details"] == {"reasoning_tokens": 0}

    [record] = sim.truth(expect=1)
    assert record["request_id"] == "r1" and record["endpoint"] == "chat" and record["stream"]
    assert record["prompt_tokens"] == rendered_count and record["completion_tokens"] == 12
    assert len(record["token_times_s"]) == 12 and record["status"] == 200
    assert [e["kind"] for e in record["events"]] == ["content"] * 12 + ["usage", "done"]
    assert record["arrival_s"] <= record["headers_s"] <= record["prefill_start_s"]
    assert record["prefill_end_s"] <= record["token_times_s"][0] <= record["first_token_event_s"]
    assert record["last_token_event_s"] == record["events"][11]["t_s"]
    assert record["fault"] is None and record["finish_reason"] == "length"


def test_non_stream_chat_and_completions(start_sim):
    sim = start_sim(*FAST)
    prompt = "The quick brown fox jumps over the lazy dog"
    chat_obs, cmpl_obs, default_obs = post_many(
        sim.base_url + "/chat/completions", [chat(max_completion_tokens=7, ignore_eos=True)]
    ) + post_many(
        sim.base_url + "/completions",
        [
            {"model": MODEL, "prompt": prompt, "max_tokens": 9, "ignore_eos": True},
            {"model": MODEL, "prompt": prompt, "min_tokens": 100},
        ],
    )
    body = chat_obs.json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["role"] == "assistant" and vocab.count(message["content"]) == 7
    assert body["usage"]["completion_tokens"] == 7
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cmpl = cmpl_obs.json()
    assert cmpl["object"] == "text_completion"
    assert vocab.count(cmpl["choices"][0]["text"]) == 9
    assert cmpl["usage"]["prompt_tokens"] == vocab.count(prompt)
    # /v1/completions caps at 16 tokens by default, like OpenAI and vLLM.
    assert default_obs.json()["usage"]["completion_tokens"] == 16
    records = sim.truth(expect=3)
    assert {r["endpoint"] for r in records} == {"chat", "completions"}
    assert all(r["stream"] is False and len(r["events"]) == 1 for r in records)


def test_streamed_completions(start_sim):
    sim = start_sim(*FAST)
    obs = post(
        sim.base_url + "/completions",
        {
            "model": MODEL,
            "prompt": "one two three",
            "max_tokens": 6,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    text = "".join(c["choices"][0]["text"] for c in obs.chunks if c["choices"])
    assert vocab.count(text) == 6 and obs.done
    assert obs.chunks[0]["object"] == "text_completion"
    assert usage_of(obs)["prompt_tokens"] == vocab.count("one two three")
    no_usage = post(sim.base_url + "/completions", {"model": MODEL, "prompt": "x", "max_tokens": 3, "stream": True})
    assert all(c["choices"] for c in no_usage.chunks) and no_usage.done


def test_errors_unknown_model_and_invalid_json(start_sim):
    sim = start_sim(*FAST)
    unknown = post(sim.base_url + "/chat/completions", {**chat(), "model": "nope"}, {"x-request-id": "u"})
    assert unknown.status == 404
    assert unknown.json()["error"]["type"] == "NotFoundError"
    assert unknown.json()["error"]["code"] == 404
    broken = post(sim.base_url + "/completions", b"{not json", {"x-request-id": "b"})
    assert broken.status == 400 and broken.json()["error"]["code"] == 400
    too_long = post(
        sim.base_url + "/completions", {"model": MODEL, "prompt": "x", "max_tokens": 10**6}, {"x-request-id": "l"}
    )
    assert too_long.status == 400
    truth = by_request_id(sim.truth(expect=3))
    assert truth["u"]["status"] == 404 and truth["u"]["model"] == "nope"
    assert truth["b"]["status"] == 400 and truth["l"]["status"] == 400


def tokenize(sim, body) -> dict:
    obs = post(sim.url + "/tokenize", body)
    assert obs.status == 200
    return obs.json()


def test_tokenize_both_styles(start_sim):
    sim = start_sim(truth_log=False)
    text = "Hello there, general Kenobi"
    vllm = tokenize(sim, {"model": MODEL, "prompt": text})
    assert vllm == {"count": vocab.count(text), "tokens": vocab.encode(text), "max_model_len": 32768}
    assert tokenize(sim, {"content": text}) == {"tokens": vocab.encode(text)}
    messages = tokenize(sim, {"model": MODEL, "messages": [{"role": "user", "content": text}]})
    # The chat template adds a system preamble longer than one 16-token cache block.
    assert messages["count"] > vocab.count(text) + 16
    assert messages["tokens"][0] == vocab.encode("<|start|>")[0]


# --- output length ---


def test_ignore_eos_min_tokens_and_natural_length(start_sim):
    sim = start_sim(*FAST, "--natural-min", "20", "--natural-max", "40")
    url = sim.base_url + "/chat/completions"
    natural, again, capped, floored, exact = [
        o.json()
        for o in post_many(
            url,
            [
                chat("same prompt"),
                chat("same prompt"),
                chat("same prompt", max_tokens=5),
                chat("same prompt", min_tokens=60),
                chat("same prompt", max_tokens=50, ignore_eos=True),
            ],
        )
    ]
    n = natural["usage"]["completion_tokens"]
    assert 20 <= n <= 40 and natural["choices"][0]["finish_reason"] == "stop"
    assert again["usage"]["completion_tokens"] == n  # deterministic in the prompt
    assert again["choices"][0]["message"]["content"] == natural["choices"][0]["message"]["content"]
    assert capped["usage"]["completion_tokens"] == 5
    assert capped["choices"][0]["finish_reason"] == "length"
    assert floored["usage"]["completion_tokens"] == 60
    assert exact["usage"]["completion_tokens"] == 50
    assert exact["choices"][0]["finish_reason"] == "length"
    lengths = {post(url, chat(f"prompt {i}")).json()["usage"]["completion_tokens"] for i in range(8)}
    assert len(lengths) > 1 and all(20 <= n <= 40 for n in lengths)


def test_stop_strings(start_sim):
    sim = start_sim(*FAST)
    url = sim.base_url + "/chat/completions"
    full = post(url, chat("stop me", max_tokens=30, ignore_eos=True)).json()
    text = full["choices"][0]["message"]["content"]
    tokens = vocab.pieces(text)
    stop = tokens[10]
    expected = text[: text.find(stop)]
    streamed, whole = post_many(
        url,
        [
            stream_chat("stop me", max_tokens=30, ignore_eos=True, stop=[stop, "zzz-never"]),
            chat("stop me", max_tokens=30, stop=stop),
        ],
    )
    assert content_of(streamed) == expected == whole.json()["choices"][0]["message"]["content"]
    assert usage_of(streamed)["completion_tokens"] == vocab.count(expected)
    assert streamed.chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert whole.json()["choices"][0]["finish_reason"] == "stop"
    # A stop string starting inside a token ends the output before that whole token.
    inside = stop[2:]
    mid = post(url, chat("stop me", max_tokens=30, ignore_eos=True, stop=[inside])).json()
    cut, kept = text.find(inside), 0
    while len("".join(tokens[: kept + 1])) <= cut:
        kept += 1
    assert mid["choices"][0]["message"]["content"] == "".join(tokens[:kept])
    assert mid["usage"]["completion_tokens"] == kept


# --- pure pieces, in process ---


@given(n=st.integers(0, 300), k=st.integers(1, 40), reasoning=st.integers(0, 50))
def test_tokens_per_event_groups_cover_every_token(n, k, reasoning):
    cfg = build_config(tokens_per_event=k)
    groups = event_groups(n, min(reasoning, n), cfg)
    assert sum(tokens for _, tokens in groups) == n
    assert sum(tokens for kind, tokens in groups if kind == "reasoning") == min(reasoning, n)
    if reasoning == 0 and n:
        assert len(groups) == math.ceil(n / k)


@given(n=st.integers(1, 300), e=st.integers(1, 10))
def test_events_per_response_groups(n, e):
    sizes = [t for _, t in event_groups(n, 0, build_config(events_per_response=e))]
    assert len(sizes) == min(n, e) and sum(sizes) == n and max(sizes) - min(sizes) <= 1


def test_prefix_cache_blocks_lru_and_last_token():
    cache = PrefixCache(capacity_blocks=3)
    a = list(range(48))  # exactly three blocks
    assert cache.lookup(a) == 0
    cache.insert(a)
    assert cache.lookup(a) == 32  # never the whole prompt: the last token is recomputed
    assert cache.lookup(a + [7]) == 48
    assert cache.lookup(a[:16] + [999] * 32) == 16  # the chain stops at the first miss
    # Two new blocks evict the two least recently used: a's 2nd and 3rd, not its 1st.
    cache.insert([500 + i for i in range(32)])
    assert cache.lookup(a + [7]) == 16


# --- timing model ---


def pace(times: list[float]) -> float:
    """Seconds per token: the Theil–Sen slope (median of pairwise slopes) of token times against
    their index. A token is never early (absolute deadlines) but a busy machine makes some late,
    a stall several in a row; a least-squares slope leans on those, the median slope does not."""
    return float(sps.theilslopes(times).slope)


def post_watched(url: str, body, headers=None) -> tuple[Observed, float]:
    """post(), with how late this client may have read a line: the longest its event loop was
    seen to stall meanwhile (benchy's loop monitor) plus a few ms of scheduling, as
    conftest.client_slack_s, rather than a constant a busy machine can exceed."""

    async def watched() -> tuple[Observed, float]:
        async with LoopMonitor() as monitor:
            [obs] = await _fetch_all(url, [body], [headers])
            end = time.perf_counter()
        lag_ms = monitor.figures([(obs.sent_s, end)]).loop_lag_ms_max or 0.0
        return obs, 0.010 + MONITOR_INTERVAL_S + lag_ms / 1000

    return asyncio.run(watched())


def test_client_observations_match_truth_timing(start_sim):
    sim = start_sim("--decode-tps", "100", "--prefill-tps", "2000")
    obs, slack_s = post_watched(
        sim.base_url + "/chat/completions",
        stream_chat(filler_text(400), max_tokens=30, ignore_eos=True),
        {"x-request-id": "t"},
    )
    [record] = sim.truth(expect=1)
    assert pace(record["token_times_s"]) == pytest.approx(0.01, rel=0.03)
    prefill = record["prefill_end_s"] - record["prefill_start_s"]
    assert prefill == pytest.approx(record["prompt_tokens"] / 2000)
    token_lines = [t for t, data in obs.lines if data != "[DONE]"][:30]
    written = [e["t_s"] for e in token_events(record)]  # stamped as each write returned
    made = record["token_times_s"]  # one token per event
    # One monotonic clock: each line is read after its token was made, and soon after its write.
    assert all(m <= a <= w + slack_s for a, m, w in zip(token_lines, made, written))
    client_ttft = token_lines[0] - obs.sent_s
    assert made[0] - record["arrival_s"] <= client_ttft <= record["first_token_event_s"] - record["arrival_s"] + slack_s
    # The last token is due after prefill and 29 intervals, and never made sooner (a busy
    # machine makes it later: the pace above, a median slope, is what judges the rate).
    assert record["token_due_s"][-1] - record["prefill_end_s"] == pytest.approx(29 / 100)
    truth_e2e_s = record["last_token_event_s"] - record["arrival_s"]
    assert prefill + 29 / 100 <= truth_e2e_s
    assert all(m >= d for m, d in zip(made, record["token_due_s"]))


def filler_text(n_tokens: int, seed: int = 1) -> str:
    return tokenizer.filler(n_tokens, seed)


def test_prefix_cache_repeat_is_cached_and_faster(start_sim):
    sim = start_sim("--decode-tps", "1000", "--prefill-tps", "10000")
    url = sim.base_url + "/chat/completions"
    long_prompt = filler_text(3000)
    cold = post(url, stream_chat(long_prompt, max_tokens=2, ignore_eos=True), {"x-request-id": "1"})
    warm = post(url, stream_chat(long_prompt, max_tokens=2, ignore_eos=True), {"x-request-id": "2"})
    other = post(url, stream_chat(filler_text(3000, seed=2), max_tokens=2, ignore_eos=True), {"x-request-id": "3"})
    truth = by_request_id(sim.truth(expect=3))
    prompt_tokens = truth["1"]["prompt_tokens"]
    assert usage_of(cold)["prompt_tokens_details"]["cached_tokens"] == 0
    warm_cached = usage_of(warm)["prompt_tokens_details"]["cached_tokens"]
    assert warm_cached == (prompt_tokens - 1) // 16 * 16 == truth["2"]["cached_tokens"]
    # A different prompt still shares the chat template's leading blocks.
    ids_a, ids_b = (
        tokenize(sim, {"model": MODEL, "messages": chat(p)["messages"]})["tokens"]
        for p in (long_prompt, filler_text(3000, seed=2))
    )
    shared = next(i for i, (a, b) in enumerate(zip(ids_a, ids_b)) if a != b)
    assert shared > 16
    assert usage_of(other)["prompt_tokens_details"]["cached_tokens"] == shared // 16 * 16
    for rid, cached in (("1", 0), ("2", warm_cached)):
        r = truth[rid]
        assert r["prefill_end_s"] - r["prefill_start_s"] == pytest.approx((prompt_tokens - cached) / 10000)
    cold_ttft = cold.lines[0][0] - cold.sent_s
    warm_ttft = warm.lines[0][0] - warm.sent_s
    assert warm_ttft < cold_ttft  # as a client saw it (exact times above: a busy machine delays reads)


def test_no_prefix_cache_flag(start_sim):
    sim = start_sim(*FAST, "--no-prefix-cache")
    url = sim.base_url + "/chat/completions"
    body = chat(filler_text(200), max_tokens=2)
    post(url, body)
    assert post(url, body).json()["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert [r["cached_tokens"] for r in sim.truth(expect=2)] == [0, 0]


def test_queueing_beyond_max_running_and_serial_prefill(start_sim):
    sim = start_sim("--max-running", "2", "--decode-tps", "200", "--prefill-tps", "20000")
    bodies = [stream_chat(filler_text(1000, seed=i), max_tokens=10, ignore_eos=True) for i in range(4)]
    post_many(sim.base_url + "/chat/completions", bodies)
    records = sorted(sim.truth(expect=4), key=lambda r: r["arrival_s"])
    admitted = [r["admitted_s"] for r in records]
    assert admitted == sorted(admitted)  # FIFO
    finished = sorted(r["token_times_s"][-1] for r in records[:2])
    assert records[2]["admitted_s"] >= finished[0] - 1e-3
    assert records[3]["admitted_s"] >= finished[1] - 1e-3
    for r in records:  # each admitted request occupies a slot from admission to its last token
        busy = sum(1 for o in records if o["admitted_s"] <= r["admitted_s"] < o["token_times_s"][-1])
        assert busy <= 2
    prefills = sorted((r["prefill_start_s"], r["prefill_end_s"]) for r in records)
    assert all(a_end <= b_start + 1e-9 for (_, a_end), (b_start, _) in zip(prefills, prefills[1:]))


def test_aggregate_decode_is_sublinear_in_batch(start_sim):
    sim = start_sim("--decode-tps", "200", "--batch-slowdown", "0.5", "--prefill-tps", "1000000")
    url = sim.base_url + "/chat/completions"
    post(url, stream_chat("alone", max_tokens=40, ignore_eos=True))
    post_many(url, [stream_chat(f"batch {i}", max_tokens=40, ignore_eos=True) for i in range(4)])
    alone, *batch = sim.truth(expect=5)

    def mean_interval(record):
        # Over the first 30 tokens, while all four run (they speed up as others finish), as the
        # timing model set them (a busy machine delays the tokens themselves: their pace is judged
        # above, by pace's median slope).
        return pace(record["token_due_s"][:31])

    assert mean_interval(alone) == pytest.approx(1 / 200, rel=0.02)
    per_request = statistics.mean(mean_interval(r) for r in batch)
    assert per_request == pytest.approx((1 + 0.5 * 3) / 200, rel=0.02)
    aggregate_gain = (4 / per_request) / (1 / mean_interval(alone))
    assert 1.0 < aggregate_gain < 4.0 and aggregate_gain == pytest.approx(1.6, rel=0.03)


def test_header_delay(start_sim):
    sim = start_sim(*FAST, "--header-delay-s", "0.2")
    obs = post(sim.base_url + "/chat/completions", stream_chat(max_tokens=2))
    [record] = sim.truth(expect=1)
    assert record["headers_s"] - record["arrival_s"] >= 0.2
    assert obs.headers_s - obs.sent_s >= 0.2


# --- SSE shaping ---


def test_tokens_per_event_buffering(start_sim):
    sim = start_sim(*FAST, "--tokens-per-event", "4")
    obs = post(sim.base_url + "/chat/completions", stream_chat(max_tokens=10, ignore_eos=True))
    token_chunks = [c for c in obs.chunks if c["choices"]]
    assert len(token_chunks) == math.ceil(10 / 4)
    assert [vocab.count(c["choices"][0]["delta"]["content"]) for c in token_chunks] == [4, 4, 2]
    [record] = sim.truth(expect=1)
    assert [e["tokens"] for e in token_events(record)] == [4, 4, 2]
    # each event goes out once its last token exists
    ends = [record["token_times_s"][i] for i in (3, 7, 9)]
    assert all(e["t_s"] >= t for e, t in zip(token_events(record), ends))


def test_events_per_response_like_the_buffered_report(start_sim):
    # The report: 29 tokens in 2 SSE events made "772 tok/s" out of ~38.
    sim = start_sim("--preset", "buffered", "--decode-tps", "300")
    obs = post(
        sim.base_url + "/chat/completions", stream_chat(max_tokens=29, ignore_eos=True, model="openai/gpt-oss-120b")
    )
    token_chunks = [c for c in obs.chunks if c["choices"]]
    assert len(token_chunks) == 2
    [record] = sim.truth(expect=1)
    assert [e["tokens"] for e in token_events(record)] == [15, 14]
    between_events = record["last_token_event_s"] - record["first_token_event_s"]
    e2e = record["last_token_event_s"] - record["arrival_s"]
    assert 29 / e2e < 300 < 29 / between_events / 1.5  # the naive rate is wildly inflated
    one = start_sim(*FAST, "--events-per-response", "1")
    post(one.base_url + "/chat/completions", stream_chat(max_tokens=9, ignore_eos=True))
    [single] = one.truth(expect=1)
    assert [e["tokens"] for e in token_events(single)] == [9]
    assert token_events(single)[0]["t_s"] >= single["token_times_s"][-1]


def test_role_chunk_first_goes_before_prefill(start_sim):
    sim = start_sim("--role-chunk-first", "--decode-tps", "1000", "--prefill-tps", "5000")
    obs = post(sim.base_url + "/chat/completions", stream_chat(filler_text(500), max_tokens=3))
    first = obs.chunks[0]["choices"][0]["delta"]
    assert first == {"role": "assistant", "content": ""}
    assert "role" not in obs.chunks[1]["choices"][0]["delta"]
    [record] = sim.truth(expect=1)
    role = record["events"][0]
    assert role["kind"] == "role" and role["tokens"] == 0
    assert role["t_s"] < record["prefill_start_s"] + 1e-3 < record["prefill_end_s"]
    prefill = record["prefill_end_s"] - record["prefill_start_s"]
    assert record["events"][1]["t_s"] - role["t_s"] >= prefill  # the prefill sits between them
    assert obs.lines[1][0] >= obs.lines[0][0]  # (the client's gap shrinks when it reads late)


def test_reasoning_split(start_sim):
    sim = start_sim(*FAST, "--reasoning-tokens", "5")
    url = sim.base_url + "/chat/completions"
    obs = post(url, stream_chat(max_tokens=12, ignore_eos=True))
    assert vocab.count(content_of(obs, "reasoning_content")) == 5
    assert vocab.count(content_of(obs)) == 7
    assert usage_of(obs)["completion_tokens_details"]["reasoning_tokens"] == 5
    assert usage_of(obs)["completion_tokens"] == 12
    whole = post(url, chat(max_tokens=12, ignore_eos=True)).json()
    assert vocab.count(whole["choices"][0]["message"]["reasoning_content"]) == 5
    record = sim.truth(expect=2)[0]
    assert [e["kind"] for e in token_events(record)] == ["reasoning"] * 5 + ["content"] * 7
    assert record["reasoning_tokens"] == 5


def test_null_content_keeps_usage(start_sim):
    sim = start_sim(*FAST, "--null-content")
    url = sim.base_url + "/chat/completions"
    obs = post(url, stream_chat(max_tokens=6, ignore_eos=True))
    deltas = [c["choices"][0]["delta"] for c in obs.chunks if c["choices"]]
    assert all(d["content"] is None for d in deltas)
    assert usage_of(obs)["completion_tokens"] == 6
    whole = post(url, chat(max_tokens=6, ignore_eos=True)).json()
    assert whole["choices"][0]["message"]["content"] is None
    assert whole["usage"]["completion_tokens"] == 6
    assert [r["completion_tokens"] for r in sim.truth(expect=2)] == [6, 6]


# --- faults ---

ALL_FAULTS = (
    "http500",
    "http429",
    "http429_retry",
    "cut_stream",
    "reset",
    "stall",
    "malformed_json",
    "not_sse",
    "no_done",
    "no_usage",
    "null_content",
)
STALL_S = 0.3


def check_streamed_fault(kind: str, obs: Observed, record: dict) -> None:
    status = {"http500": 500, "http429": 429, "http429_retry": 429, "reset": None}.get(kind, 200)
    assert obs.status == status == record["status"], kind
    if kind == "reset":
        assert obs.error and record["headers_s"] is None
    elif kind == "http500":
        assert obs.json()["error"]["code"] == 500
    elif kind == "http429":
        assert "Retry-After" not in obs.headers
    elif kind == "http429_retry":
        assert obs.headers["Retry-After"] == "1"
    elif kind == "not_sse":
        assert obs.headers["Content-Type"].startswith("text/html") and b"<html>" in obs.body
    elif kind == "cut_stream":
        assert obs.error and not obs.done and 0 < len(obs.lines) < 8
        assert record["completion_tokens"] == 4
    elif kind == "stall":
        gaps = [b[0] - a[0] for a, b in zip(obs.lines, obs.lines[1:])]
        assert max(gaps) >= STALL_S - 0.01 and obs.done and content_of(obs)
    elif kind == "malformed_json":
        broken = [d for _, d in obs.lines if d != "[DONE]" and not _parses(d)]
        assert len(broken) == 1 and obs.done
    elif kind == "no_done":
        assert not obs.done and obs.error is None and usage_of(obs)["completion_tokens"] == 8
    elif kind == "no_usage":
        assert obs.done and all(c["choices"] for c in obs.chunks)
    elif kind == "null_content":
        assert content_of(obs) == "" and usage_of(obs)["completion_tokens"] == 8


def check_non_stream_fault(kind: str, obs: Observed) -> None:
    if kind in ("reset", "cut_stream"):
        assert obs.error and obs.status is None, kind
    elif kind == "malformed_json":
        assert obs.status == 200 and not _parses(obs.body)
    elif kind == "no_usage":
        assert "usage" not in obs.json()
    elif kind == "null_content":
        assert obs.json()["choices"][0]["message"]["content"] is None
    elif kind in ("stall", "no_done"):
        assert obs.json()["usage"]["completion_tokens"] == 8


def _parses(data) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def test_every_fault_kind(start_sim):
    rate = f"{1 / len(ALL_FAULTS) - 1e-9:.12f}"
    flags = [*FAST, "--stall-s", str(STALL_S), "--seed", "7"]
    for kind in ALL_FAULTS:
        flags += ["--fault", f"{kind}:{rate}"]
    sim = start_sim(*flags)
    url = sim.base_url + "/chat/completions"
    seen: dict[tuple[str, bool], tuple[Observed, str]] = {}
    for i in range(400):
        stream = i % 2 == 0
        body = stream_chat(max_tokens=8, ignore_eos=True) if stream else chat(max_tokens=8)
        obs = post(url, body, {"x-request-id": str(i)})
        kind = by_request_id(sim.truth(expect=i + 1))[str(i)]["fault"]
        seen.setdefault((kind, stream), (obs, str(i)))
        if len(seen) >= 2 * len(ALL_FAULTS):
            break
    assert {k for k, _ in seen} == set(ALL_FAULTS)
    truth = by_request_id(sim.truth())
    for (kind, stream), (obs, rid) in seen.items():
        if stream:
            check_streamed_fault(kind, obs, truth[rid])
        else:
            check_non_stream_fault(kind, obs)
    assert "Traceback" not in sim.stderr()

    # The same seed draws the same faults in the same order.
    again = start_sim(*flags)
    for i in range(12):
        post(again.base_url + "/chat/completions", chat(max_tokens=2), {"x-request-id": str(i)})
    replay = by_request_id(again.truth(expect=12))
    assert [replay[str(i)]["fault"] for i in range(12)] == [truth[str(i)]["fault"] for i in range(12)]


def test_client_disconnect_frees_the_slot(start_sim):
    sim = start_sim("--max-running", "1", "--decode-tps", "100", "--prefill-tps", "1000000")
    url = sim.base_url + "/chat/completions"

    async def leave_early():
        async with aiohttp.ClientSession() as session:
            async with session.post(
                url, json=stream_chat(max_tokens=200, ignore_eos=True), headers={"x-request-id": "gone"}
            ) as resp:
                await resp.content.readline()
                resp.close()

    asyncio.run(leave_early())
    after = post(url, chat(max_tokens=3, ignore_eos=True), {"x-request-id": "next"})
    assert after.status == 200
    truth = by_request_id(sim.truth(expect=2))
    assert truth["gone"]["finish_reason"] == "abort" and truth["gone"]["completion_tokens"] < 200
    assert truth["next"]["completion_tokens"] == 3


# --- instant mode and presets ---


def test_instant_mode_256_streams(start_sim):
    sim = start_sim("--preset", "instant")
    bodies = [stream_chat(f"stream {i}", max_tokens=32, ignore_eos=True) for i in range(256)]
    observed = post_many(sim.base_url + "/chat/completions", bodies)
    assert all(o.done and usage_of(o)["completion_tokens"] == 32 for o in observed)
    records = sim.truth(expect=256)
    assert len(records) == 256
    assert all(r["prefill_end_s"] == r["prefill_start_s"] for r in records)
    # No sleeps, judged by the truth log rather than by the wall time a busy machine stretches:
    # no prefill time and every token due at once.
    assert all(r["token_due_s"] == [r["token_due_s"][0]] * 32 for r in records)


def test_presets_and_explicit_overrides(start_sim):
    dgx = build_config("dgx-spark-gpt-oss-120b")
    # The report's chat_short: a 167-token prompt and 256 output tokens at about 37-38 tok/s.
    e2e = 256 / (167 / dgx.prefill_tps + 255 / dgx.decode_tps)
    assert 37.0 <= e2e <= 38.0
    sim = start_sim(
        "--preset", "dgx-spark-gpt-oss-120b", "--decode-tps", "500", "--prefill-tps", "100000", truth_log=True
    )
    models, _ = get_json(sim.base_url + "/models")
    assert models["data"][0]["id"] == "openai/gpt-oss-120b"
    assert models["data"][0]["max_model_len"] == 131072
    obs = post(
        sim.base_url + "/chat/completions",
        {**stream_chat(max_tokens=20, ignore_eos=True), "model": "openai/gpt-oss-120b"},
    )
    assert obs.done
    truth = sim.truth(expect=1)[0]
    # Token k is due at prefill end + k/500 s: never sooner (bar the event loop's clock slack),
    # later only by loop lag on a busy machine; the preset's own pace would be 13x slower.
    spacing = (truth["token_times_s"][-1] - truth["prefill_end_s"]) / 19
    assert 0.95 / 500 <= spacing < 0.5 / dgx.decode_tps
    assert build_config("fp4-null-content").null_content
    assert build_config("buffered").events_per_response == 2
    assert build_config("instant").instant


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signals_stop_cleanly(start_sim, sig):
    sim = start_sim("--decode-tps", "20")
    url = sim.base_url + "/chat/completions"

    async def stop_mid_stream():
        async with aiohttp.ClientSession() as session:
            async with session.post(url, json=stream_chat(max_tokens=500, ignore_eos=True)) as resp:
                await resp.content.readline()
                sim.proc.send_signal(sig)
                with contextlib.suppress(aiohttp.ClientError):
                    await resp.read()

    asyncio.run(stop_mid_stream())
    assert sim.proc.wait(timeout=10) == 0
    assert "Traceback" not in sim.stderr()
    [record] = sim.truth(expect=1)
    assert record["completion_tokens"] < 500


def test_sigterm_right_after_the_listening_line_is_clean():
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchy", "sim", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=sim_env(),
        cwd=REPO_ROOT,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith("benchy sim listening on http://127.0.0.1:")
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        url = line.split()[-1]  # stderr holds the one line saying how to measure it, nothing else
        assert proc.stderr.read() == f"benchy sim: measure it with: benchy run --base-url {url}/v1\n"
    finally:
        proc.kill()
        proc.communicate()


@pytest.mark.parametrize(
    "flags, fragment",
    [
        (["--decode-tps", "-5"], "decode-tps"),
        (["--prefill-tps", "0"], "prefill-tps"),
        (["--preset", "no-such-preset"], "preset"),
        (["--fault", "http500:1.5"], "between 0 and 1"),
        (["--fault", "gremlins:0.1"], "unknown kind"),
        (["--tokens-per-event", "0"], "tokens-per-event"),
        (["--decode-tps", "fast"], "decode-tps"),
    ],
)
def test_bad_flags_fail_in_one_line(flags, fragment):
    proc = run_benchy("sim", *flags, timeout=30)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and fragment in proc.stderr
    assert proc.stdout == ""


def sim_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def test_the_simulator_has_a_tokenizer_of_its_own():
    """No real server counts with benchy's o200k: nor may the simulator, or benchy's local count
    would always agree with its usage. Its outputs must count differently in o200k."""
    for path in (REPO_ROOT / "benchy" / "sim").glob("*.py"):
        text = path.read_text()
        assert "benchy.measure" not in text and "tiktoken" not in text, path.name
    output = "".join(vocab.words(200, seed=1))  # --output garbage: made-up words
    assert vocab.count(output) == 200 and tokenizer.count(output) == 2 * 200  # two each, as chosen
    prompt = tokenizer.filler(300)  # benchy's filler counts alike in both, as on most servers
    assert vocab.count(prompt) == tokenizer.count(prompt) == 300


def test_help_is_short_and_the_docs_document_every_behaviour():
    proc = run_benchy("sim", "--help", timeout=30)
    assert proc.returncode == 0
    help_text = proc.stdout
    prose = help_text.split("Options:")[0]
    assert len(prose.splitlines()) <= 12 and "docs/sim.md" in prose  # the details live in the docs
    assert "8000" in prose  # where it listens, which is where `benchy run` looks by default
    for flag in ("--instant", "--prefix-cache", "--tokens-per-event", "--events-per-response", "--role-chunk-first"):
        assert flag in help_text, flag
    docs = (REPO_ROOT / "docs" / "sim.md").read_text()
    for needle in (
        "--instant",
        "--prefix-cache",
        "--tokens-per-event",
        "--events-per-response",
        "--role-chunk-first",
        "--reasoning-tokens",
        "--null-content",
        "--header-delay-s",
        "--fault",
        "--truth-log",
        "--port 0",
        "dgx-spark-gpt-oss-120b",
        "buffered",
        "fp4-null-content",
        "instant",
        "batch-slowdown",
        "--spec-draft",
        "--proxy-buffer-bytes",
        "--usage-scale",
        "--truncate-prompt",
        "--think-inline",
        "--host-copy-tps",
        "--timings",
        "--hold-open-s",
        "--silent-tokens",
        "own tokenizer",
        *ALL_FAULTS,
        *PRESET_HELP,
        "/tokenize",
    ):
        assert needle in docs, needle


def test_the_simulators_prose_is_counted_in_its_own_tokens_and_exactly_so_by_o200k():
    """The default output (sim/prose.py) is plain English whose every token is one o200k token
    too (no number of several digits, no word o200k splits): benchy's local count of an answer
    is then exact, with no per-text wobble for tests to allow, while the truth log still counts
    in the simulator's own tokens. The broken modes stay one simulator token a piece."""
    for seed in range(50):
        texts, broken = prose.texts("prose", 300, seed)
        text = "".join(texts)
        assert broken == 0 and vocab.pieces(text) == texts and tokenizer.count(text) == 300
    first = "".join(prose.texts("prose", 64, 1)[0])
    assert first != "".join(prose.texts("prose", 64, 2)[0])  # each prompt its own answer
    assert first.startswith(" ") and first[1].isupper()  # a sentence, led by a space as every token
