"""Usage that over-claims, in front of the real llama.cpp server: a small real proxy (aiohttp)
that doubles `usage.completion_tokens`, drops llama.cpp's `timings` (as gateways that pass only
OpenAI's fields do) and joins the token events two by two after the first. Left to judge the
count are the streamed text, the server's own /tokenize of it (passed through) and benchy's
local count: they agree on about half of what usage claims, so usage is overruled and the
figures count what streamed."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import ClientSession, TCPConnector, web

from benchy.measure import evidence
from tests.conftest import run_benchy

pytestmark = pytest.mark.realserver

TG = 32


def rewritten(obj: dict) -> dict:
    obj.pop("timings", None)
    usage = obj.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        usage["total_tokens"] = usage.get("total_tokens", 0) + usage["completion_tokens"]
        usage["completion_tokens"] *= 2
    return obj


def content_of(obj: dict) -> str | None:
    choices = obj.get("choices") or []
    delta = choices[0].get("delta") if choices else None
    if not isinstance(delta, dict) or choices[0].get("finish_reason") or set(delta) - {"content", "role"}:
        return None
    content = delta.get("content")
    return content if isinstance(content, str) and content else None


class UsageDoublingProxy:
    """Forwards every request to the server; rewrites JSON bodies and SSE events (above)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.port = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> UsageDoublingProxy:
        self._thread.start()
        assert self.ready.wait(10)
        return self

    def __exit__(self, *exc) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def _serve(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_until_complete(self._main())

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        # No upstream keep-alive (as nginx.py's proxy and the other realserver clients): llama.cpp
        # closes a streamed response's connection while advertising keep-alive
        # (test_server_facts.test_streamed_response_closes_connection), and a request this pool
        # sent on such a dead connection failed in the proxy ("Server disconnected") on a loaded
        # CI machine: the proxy's own race, not what this test judges.
        async with ClientSession(connector=TCPConnector(force_close=True)) as session:
            self.session = session
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._forward)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.port = runner.addresses[0][1]
            self.ready.set()
            await self._stop.wait()
            await runner.cleanup()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
        async with self.session.request(
            request.method, self.upstream + request.path_qs, data=await request.read(), headers=headers
        ) as up:
            if up.content_type == "text/event-stream":
                return await self._stream(request, up)
            body = await up.read()
            try:
                obj = json.loads(body)
            except ValueError:
                return web.Response(status=up.status, body=body, content_type=up.content_type)
            if isinstance(obj, dict):
                obj = rewritten(obj)
            return web.json_response(obj, status=up.status)

    async def _stream(self, request: web.Request, up) -> web.StreamResponse:
        resp = web.StreamResponse(status=up.status, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        held: dict | None = None  # a token event waiting for the next, to go out joined
        sent_tokens = 0
        async for raw in up.content:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            obj = None if data == "[DONE]" else rewritten(json.loads(data))
            text = content_of(obj) if obj is not None else None
            if text is not None and sent_tokens:  # after the first token: two an event
                if held is None:
                    held = obj
                    continue
                held["choices"][0]["delta"]["content"] += text
                obj, held = held, None
            elif held is not None:
                await resp.write(f"data: {json.dumps(held)}\n\n".encode())
                held = None
            sent_tokens += text is not None
            await resp.write(f"data: {data if obj is None else json.dumps(obj)}\n\n".encode())
        await resp.write_eof()
        return resp


def test_usage_doubled_behind_a_real_proxy_is_overruled_by_the_streamed_text(llama_server, tmp_path):
    with UsageDoublingProxy(llama_server.root_url) as proxy:
        proc = run_benchy(
            "run", "--base-url", proxy.base_url, "--quiet", "--output", str(tmp_path),
            "--pp", "128", "--tg", str(TG), "--runs", "3",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "results.json").read_text())
    assert "usage_mismatch" in {w["code"] for w in results["warnings"]}
    # The calibration answer ended by length: the local scale rests on the tokens it made, not on
    # the doubled usage nor on /tokenize (which this random-weight model's text does not survive).
    assert results["setup"]["calibration"]["output_method"] == "max_tokens"
    (case,) = results["cases"]
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert [(r["status"], r["error"]) for r in measured if r["status"] != "ok"] == []
    for req in measured:
        count = req["token_count"]
        # llama.cpp made TG tokens (max_tokens with ignore_eos); usage claims twice that, and
        # the events, joined two by two, can say neither. The request ended by length, so it made
        # its max_tokens: the count is TG exactly, whatever the server's /tokenize of this
        # random-weight model's text says (it re-tokenizes a few more or fewer: 38 of 32 seen).
        assert count["usage"] == 2 * TG and count["events"] < TG and count["predicted_n"] is None
        assert count["tokens"] == TG and count["server_tokenize"] == pytest.approx(TG, rel=0.35)
        assert evidence.USAGE in count["disagreed"] and count["source"] == evidence.MAX_TOKENS
        assert req["metrics"]["e2e_tps"] == pytest.approx(count["tokens"] / req["metrics"]["e2e_s"])
    print(
        f"\n[realserver] usage {2 * TG} through the proxy; counted {case['requests'][-1]['token_count']['tokens']} "
        f"(the request's max_tokens: it ended by length); e2e t/s median {case['summary']['e2e_tps']['median']:.1f}"
    )
