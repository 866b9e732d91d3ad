"""Facts about llama.cpp's server (via xllamacpp) that benchy relies on, pinned as assertions.

Plain aiohttp on purpose: these tests describe the server, not benchy. Every request goes
through ``_session()``, whose connector has ``force_close=True``: llama.cpp closes the TCP
connection after every *streamed* response although it answers ``Keep-Alive: timeout=5``,
so reusing a pooled connection right after a stream fails about every other time with
``ClientOSError: Can not write request body`` (see test_streamed_response_closes_connection).
"""

from __future__ import annotations

import asyncio
import json
import random
import socket
import time
import uuid
from dataclasses import dataclass, field

import aiohttp
import pytest

pytestmark = pytest.mark.realserver

TIMING_KEYS = {
    "prompt_n",
    "prompt_ms",
    "prompt_per_token_ms",
    "prompt_per_second",
    "predicted_n",
    "predicted_ms",
    "predicted_per_token_ms",
    "predicted_per_second",
    "cache_n",
}

_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike "
    "november oscar papa quebec romeo sierra tango uniform victor whiskey xray"
).split()


def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(force_close=True), timeout=aiohttp.ClientTimeout(total=120)
    )


def _text(seed: str, n_words: int) -> str:
    rng = random.Random(seed)
    return " ".join(f"{rng.choice(_WORDS)}{rng.randint(0, 999)}" for _ in range(n_words))


@dataclass
class Stream:
    chunks: list = field(default_factory=list)  # parsed JSON of every data: line but [DONE]
    t_chunks: list = field(default_factory=list)  # perf_counter() of each, same order
    t_start: float = 0.0
    done: bool = False  # saw data: [DONE]
    headers: dict = field(default_factory=dict)

    def content_events(self) -> list[str]:
        out = []
        for c in self.chunks:
            for ch in c.get("choices") or []:
                piece = ch["delta"].get("content") if "delta" in ch else ch.get("text")
                if piece:
                    out.append(piece)
        return out

    @property
    def ttft(self) -> float:
        for c, t in zip(self.chunks, self.t_chunks):
            for ch in c.get("choices") or []:
                if ch["delta"].get("content") if "delta" in ch else ch.get("text"):
                    return t - self.t_start
        raise AssertionError("no content event")

    @property
    def usage_chunks(self) -> list[dict]:
        return [c for c in self.chunks if c.get("usage")]

    @property
    def last(self) -> dict:
        return self.chunks[-1]


async def _stream(s: aiohttp.ClientSession, url: str, body: dict) -> Stream:
    body = {**body, "stream": True}
    st = Stream(t_start=time.perf_counter())
    async with s.post(url, json=body) as r:
        assert r.status == 200, await r.text()
        st.headers = dict(r.headers)
        async for raw in r.content:
            line = raw.strip()
            if not line.startswith(b"data: "):
                continue
            if line == b"data: [DONE]":
                st.done = True
                continue
            st.chunks.append(json.loads(line[6:]))
            st.t_chunks.append(time.perf_counter())
    return st


async def _post(s: aiohttp.ClientSession, url: str, body: dict) -> dict:
    async with s.post(url, json=body) as r:
        assert r.status == 200, await r.text()
        return await r.json()


def _chat(srv, content: str, max_tokens: int = 8, **extra) -> dict:
    return {
        "model": srv.model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


def _completion(srv, prompt: str, max_tokens: int = 8, **extra) -> dict:
    return {
        "model": srv.model,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream_options": {"include_usage": True},
        **extra,
    }


async def _prompt_of_tokens(s, srv, n_tokens: int, seed: str) -> str:
    """Text that tokenizes to ~n_tokens (first n pieces of a longer text)."""
    text = _text(seed, n_tokens)  # ~3 tokens a word: comfortably longer than needed
    toks = (await _post(s, srv.root_url + "/tokenize", {"content": text, "with_pieces": True}))["tokens"]
    assert len(toks) > n_tokens
    return "".join(t["piece"] for t in toks[:n_tokens])


async def _chat_prompt_tokens(s, srv, content: str) -> list[int]:
    prompt = (await _post(s, srv.root_url + "/apply-template", {"messages": [{"role": "user", "content": content}]}))[
        "prompt"
    ]
    return (await _post(s, srv.root_url + "/tokenize", {"content": prompt}))["tokens"]


def _lcp(a: list, b: list) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


# --------------------------------------------------------------------------------------------


def test_health_models_and_props(llama_server):
    async def go():
        async with _session() as s:
            async with s.get(llama_server.root_url + "/health") as r:
                assert r.status == 200 and (await r.json()) == {"status": "ok"}
            async with s.get(llama_server.base_url + "/models") as r:
                models = await r.json()
            async with s.get(llama_server.root_url + "/props") as r:
                props = await r.json()
            return models, props

    models, props = asyncio.run(go())
    assert [m["id"] for m in models["data"]] == ["benchy-tiny"] == [llama_server.model]
    assert models["data"][0]["meta"]["n_ctx"] == 3072  # per slot: n_ctx / n_parallel
    assert props["total_slots"] == 4


def test_tokenize_matches_usage(llama_server):
    """/tokenize {"content": ...} -> {"tokens": [int]}; counts equal usage.prompt_tokens,
    for /v1/completions directly and for chat after /apply-template (no BOS is added)."""
    srv = llama_server
    text = "The cache hit rate of a prompt: 42 tokens, " + _text("tok", 30)

    async def go():
        async with _session() as s:
            toks = (await _post(s, srv.root_url + "/tokenize", {"content": text}))["tokens"]
            pieces = (await _post(s, srv.root_url + "/tokenize", {"content": text, "with_pieces": True}))["tokens"]
            comp = await _stream(s, srv.base_url + "/completions", _completion(srv, text, 2))
            chat_toks = await _chat_prompt_tokens(s, srv, text)
            chat = await _stream(s, srv.base_url + "/chat/completions", _chat(srv, text, 2))
            return toks, pieces, comp, chat_toks, chat

    toks, pieces, comp, chat_toks, chat = asyncio.run(go())
    assert toks and all(isinstance(t, int) for t in toks)
    assert [p["id"] for p in pieces] == toks
    assert "".join(p["piece"] for p in pieces) == text
    assert comp.usage_chunks[-1]["usage"]["prompt_tokens"] == len(toks)
    assert chat.usage_chunks[-1]["usage"]["prompt_tokens"] == len(chat_toks)


@pytest.mark.parametrize("endpoint", ["chat/completions", "completions"])
def test_stream_usage_timings_and_one_token_per_event(llama_server, endpoint):
    srv = llama_server
    make = _chat if endpoint == "chat/completions" else _completion
    body = make(srv, f"{uuid.uuid4().hex} " + _text("usage", 60), max_tokens=32)

    async def go():
        async with _session() as s:
            return await _stream(s, f"{srv.base_url}/{endpoint}", body)

    st = asyncio.run(go())

    assert st.done and st.headers["Content-Type"].startswith("text/event-stream")
    # exactly one chunk carries usage: the last one
    assert len(st.usage_chunks) == 1 and st.usage_chunks[0] is st.last
    usage = st.last["usage"]
    assert usage["completion_tokens"] == 32  # ignore_eos + max_tokens
    assert usage["total_tokens"] == usage["prompt_tokens"] + 32
    assert isinstance(usage["prompt_tokens_details"]["cached_tokens"], int)
    # one SSE content event per generated token
    assert len(st.content_events()) == usage["completion_tokens"]
    # llama.cpp's own timings, in the usage chunk only
    timings = st.last["timings"]
    assert TIMING_KEYS <= set(timings)
    assert [c for c in st.chunks if "timings" in c] == [st.last]
    assert timings["predicted_n"] == usage["completion_tokens"]
    assert timings["prompt_n"] + timings["cache_n"] == usage["prompt_tokens"]
    assert timings["cache_n"] == usage["prompt_tokens_details"]["cached_tokens"]
    assert timings["prompt_ms"] > 0 and timings["predicted_per_second"] > 0

    if endpoint == "chat/completions":
        # first chunk: role only; then content deltas; finish chunk; then usage with choices []
        assert st.chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": None}
        assert st.chunks[-2]["choices"][0]["finish_reason"] == "length"
        assert st.last["choices"] == []
    else:
        # completions: usage rides on the finish_reason chunk (choices not empty, text "")
        assert st.last["choices"][0]["finish_reason"] == "length"
        assert st.last["choices"][0]["text"] == ""


def test_include_usage_needed_for_chat_not_for_completions(llama_server):
    srv = llama_server

    async def go():
        async with _session() as s:
            chat = await _stream(
                s,
                srv.base_url + "/chat/completions",
                {
                    "model": srv.model,
                    "max_tokens": 4,
                    "ignore_eos": True,
                    "messages": [{"role": "user", "content": "hello"}],
                },
            )
            comp = await _stream(
                s,
                srv.base_url + "/completions",
                {"model": srv.model, "max_tokens": 4, "ignore_eos": True, "prompt": "hello"},
            )
            return chat, comp

    chat, comp = asyncio.run(go())
    assert chat.usage_chunks == [] and "timings" in chat.last  # timings still sent
    assert comp.usage_chunks and comp.last["usage"]["completion_tokens"] == 4


@pytest.mark.parametrize("stream", [True, False])
def test_ignore_eos_gives_exactly_max_tokens(llama_server, stream):
    srv = llama_server

    async def go():
        async with _session() as s:
            out = []
            for endpoint, body in (
                ("chat/completions", _chat(srv, "Tell me about caches.", 32)),
                ("completions", _completion(srv, "Once upon a time", 32)),
            ):
                url = f"{srv.base_url}/{endpoint}"
                if stream:
                    st = await _stream(s, url, body)
                    out.append((st.last["usage"]["completion_tokens"], len(st.content_events())))
                else:
                    r = await _post(s, url, body)
                    assert r["choices"][0]["finish_reason"] == "length"
                    out.append((r["usage"]["completion_tokens"], 32))
            return out

    for completion_tokens, events in asyncio.run(go()):
        assert completion_tokens == 32 == events


def test_repeated_prompt_is_cached_and_faster(llama_server, record_property):
    """Cold ~2,000-token prompt vs the identical repeat: all but the last token come from the
    cache (cached_tokens == prompt_tokens - 1) and TTFT drops by far (measured ~60x)."""
    srv = llama_server

    async def go():
        async with _session() as s:
            text = await _prompt_of_tokens(s, srv, 1990, seed=uuid.uuid4().hex)
            body = _chat(srv, text, max_tokens=4)
            cold = await _stream(s, srv.base_url + "/chat/completions", body)
            warm = await _stream(s, srv.base_url + "/chat/completions", body)
            return cold, warm

    cold, warm = asyncio.run(go())
    cu, wu = cold.last["usage"], warm.last["usage"]
    record_property("cold_ttft_s", round(cold.ttft, 4))
    record_property("warm_ttft_s", round(warm.ttft, 4))
    record_property("prompt_tokens", cu["prompt_tokens"])
    print(
        f"\n[facts] ~2k prompt: {cu['prompt_tokens']} tokens; cold TTFT {cold.ttft * 1000:.1f} ms "
        f"(prefill {cold.last['timings']['prompt_per_second']:.0f} tok/s), repeat TTFT "
        f"{warm.ttft * 1000:.1f} ms, cached {wu['prompt_tokens_details']['cached_tokens']}"
    )
    assert 1900 <= cu["prompt_tokens"] <= 2100
    assert cu["prompt_tokens_details"]["cached_tokens"] <= 3  # template prefix at most
    assert wu["prompt_tokens"] == cu["prompt_tokens"]
    assert wu["prompt_tokens_details"]["cached_tokens"] == wu["prompt_tokens"] - 1
    assert warm.last["timings"]["prompt_n"] == 1
    assert warm.ttft < cold.ttft / 5


def test_unique_nonce_prefix_gets_no_cache_beyond_template(llama_server):
    srv = llama_server

    async def go():
        async with _session() as s:
            body_text = _text("shared-body", 300)
            template_prefix = await _chat_prompt_tokens(s, srv, "")  # <|im_start|>user\n<|im_end|>...
            out = []
            for lead in ("A", "B", "C"):  # distinct first characters -> distinct first tokens
                content = f"{lead}{uuid.uuid4().hex} {body_text}"
                toks = await _chat_prompt_tokens(s, srv, content)
                st = await _stream(s, srv.base_url + "/chat/completions", _chat(srv, content, 2))
                out.append((toks, st.last))
            return template_prefix, out

    template_prefix, out = asyncio.run(go())
    n_template = _lcp(template_prefix, out[0][0])  # tokens before the user content
    assert n_template == 3  # <|im_start|> user \n
    for toks, last in out:
        cached = last["usage"]["prompt_tokens_details"]["cached_tokens"]
        assert last["usage"]["prompt_tokens"] == len(toks)
        assert cached <= n_template
        assert last["timings"]["prompt_n"] == len(toks) - cached


def test_shared_prefix_is_reused_up_to_divergence(llama_server):
    """Same ~1,000-token prefix, different suffixes: cached_tokens == longest common token
    prefix of the two templated prompts (the point where they diverge)."""
    srv = llama_server

    async def go():
        async with _session() as s:
            prefix = f"Q{uuid.uuid4().hex} " + _text("prefix", 330)
            c1, c2 = prefix + " first question here", prefix + " second one differs"
            t1, t2 = await _chat_prompt_tokens(s, srv, c1), await _chat_prompt_tokens(s, srv, c2)
            await _stream(s, srv.base_url + "/chat/completions", _chat(srv, c1, 2))
            st = await _stream(s, srv.base_url + "/chat/completions", _chat(srv, c2, 2))
            return t1, t2, st

    t1, t2, st = asyncio.run(go())
    lcp = _lcp(t1, t2)
    assert lcp > 900
    assert st.last["usage"]["prompt_tokens_details"]["cached_tokens"] == lcp


def test_cache_prompt_false_disables_reuse(llama_server):
    srv = llama_server

    async def go():
        async with _session() as s:
            text = f"N{uuid.uuid4().hex} " + _text("nocache", 200)
            a = await _stream(s, srv.base_url + "/chat/completions", _chat(srv, text, 2))
            b = await _stream(s, srv.base_url + "/chat/completions", _chat(srv, text, 2, cache_prompt=False))
            return a, b

    a, b = asyncio.run(go())
    assert b.last["usage"]["prompt_tokens"] == a.last["usage"]["prompt_tokens"]
    assert b.last["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_metrics_counters(llama_server):
    srv = llama_server

    def scrape(text: str) -> dict[str, float]:
        return {k: float(v) for k, v in (ln.split() for ln in text.splitlines() if ln and not ln.startswith("#"))}

    async def go():
        async with _session() as s:
            async with s.get(srv.root_url + "/metrics") as r:
                assert r.status == 200
                before = scrape(await r.text())
            text = f"M{uuid.uuid4().hex} " + _text("metrics", 50)
            await _stream(s, srv.base_url + "/chat/completions", _chat(srv, text, 5))
            await _stream(s, srv.base_url + "/chat/completions", _chat(srv, text, 5))
            async with s.get(srv.root_url + "/metrics") as r:
                after = scrape(await r.text())
            return before, after

    before, after = asyncio.run(go())
    for k in (
        "llamacpp:prompt_tokens_total",
        "llamacpp:prompt_tokens_cached_total",
        "llamacpp:tokens_predicted_total",
        "llamacpp:requests_processing",
    ):
        assert k in after
    assert after["llamacpp:tokens_predicted_total"] - before["llamacpp:tokens_predicted_total"] == 10
    assert after["llamacpp:prompt_tokens_cached_total"] > before["llamacpp:prompt_tokens_cached_total"]


@pytest.mark.parametrize("cache_ram", [None, 0])
def test_ram_prompt_cache_is_controllable(llama_server_factory, cache_ram):
    """One slot, prompts A, B, A: with the host-RAM prompt cache (default 8 GiB) the second A
    is restored from RAM; with --cache-ram 0 it is recomputed (only the template prefix and
    any accidental common start are reused)."""
    srv = llama_server_factory(parallel=1, cache_ram=cache_ram)

    async def go():
        async with _session() as s:
            a, b = "A" + _text("ram-a", 300), "B" + _text("ram-b", 300)
            return [await _stream(s, srv.base_url + "/chat/completions", _chat(srv, x, 2)) for x in (a, b, a)]

    r = asyncio.run(go())
    cached = [x.last["usage"]["prompt_tokens_details"]["cached_tokens"] for x in r]
    n_a = r[2].last["usage"]["prompt_tokens"]
    if cache_ram is None:
        assert cached[2] == n_a - 1
    else:
        assert cached[2] <= 3
        assert "--cache-idle-slots requires --cache-ram, disabling" in srv.stderr_tail(200)


def test_concurrent_requests_fill_slots_then_queue(llama_server):
    """4 slots: 8 concurrent streams all complete with exact token counts; the last 4 wait
    for a free slot, so none of them gets a first token before one of the first 4 ended."""
    srv = llama_server

    async def go():
        async with _session() as s:
            bodies = [_chat(srv, f"{i}{uuid.uuid4().hex} " + _text(f"conc{i}", 60), 64) for i in range(8)]
            return await asyncio.gather(*[_stream(s, srv.base_url + "/chat/completions", b) for b in bodies])

    res = asyncio.run(go())
    assert all(r.last["usage"]["completion_tokens"] == 64 == len(r.content_events()) for r in res)
    by_first_token = sorted(res, key=lambda r: r.t_start + r.ttft)
    first_wave, queued = by_first_token[:4], by_first_token[4:]
    first_end = min(r.t_chunks[-1] for r in first_wave)
    assert all(r.t_start + r.ttft > first_end for r in queued)


def test_streamed_response_closes_connection(llama_server):
    """Root cause of aiohttp's 'Can not write request body' on keep-alive reuse: the server
    answers 'Keep-Alive: timeout=5, max=100' to a streamed request and then closes the TCP
    connection right after the final chunk; after a non-streamed response it stays open."""
    host, port = "127.0.0.1", llama_server.port

    def exchange(stream: bool) -> tuple[bytes, bool]:
        body = json.dumps({"prompt": "hi", "max_tokens": 3, "stream": stream}).encode()
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.sendall(
                b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
            )
            data = b""
            sock.settimeout(1.0)
            while True:
                try:
                    chunk = sock.recv(65536)
                except TimeoutError:
                    return data, False  # still open after 1 s of silence
                if not chunk:
                    return data, True  # server closed
                data += chunk

    data, closed = exchange(stream=True)
    head = data.split(b"\r\n\r\n", 1)[0].lower()
    assert b"keep-alive: timeout=5" in head and b"connection: close" not in head
    assert data.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n")
    assert closed
    data, closed = exchange(stream=False)
    assert b"content-length:" in data.lower() and not closed


def test_aiohttp_force_close_survives_back_to_back_streams(llama_server):
    srv = llama_server

    async def go():
        async with _session() as s:
            for i in range(20):
                st = await _stream(s, srv.base_url + "/completions", _completion(srv, f"back to back {i}", 2))
                assert st.last["usage"]["completion_tokens"] == 2

    asyncio.run(go())
