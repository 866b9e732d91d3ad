"""The server's side pages (identity, /metrics, a cache reset) through Client.page, benchy's own
HTTP/1.1 transport on connections of its own, over real HTTP on 127.0.0.1: vLLM's 307 of
/metrics to /metrics/ is followed, credentials stay with the base URL's origin, an empty POST
says Content-Length: 0, a page past the size cap is a failure and not a cut text, a scrape
never takes a streams' connection, and `benchy run`'s process never imports aiohttp."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable

import aiohttp
import pytest
from aiohttp import web

from benchy.client import client as client_mod
from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.server import cache_reset
from benchy.server.identity import ServerIdentity
from benchy.server.metrics import MetricsScraper, parse
from tests.conftest import SimSince, run_python, shared_sim
from tests.netservers import Relay, Scripted, Seen
from tests.test_faults import new_record as record

instant_sim = shared_sim("--instant")
KEY, HEADER_SECRET = "sk-PAGES-KEY", "tenant-SECRET-42"
SECRET_SETTINGS = {"api_key": KEY, "headers": (("X-Tenant", HEADER_SECRET),)}


class App:
    """A tiny aiohttp.web app in a thread of its own: `routes(app)` adds its handlers; every
    request's method, path and headers are logged in `seen`."""

    def __init__(self, routes: Callable[[App, web.Application], None]) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        self.routes = routes
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> App:
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.runner = asyncio.run_coroutine_threadsafe(self._start(), self.loop).result(10)
        return self

    async def _start(self) -> web.AppRunner:
        @web.middleware
        async def log(request: web.Request, handler):
            self.seen.append((request.method, request.path, {k.lower(): v for k, v in request.headers.items()}))
            return await handler(request)

        app = web.Application(middlewares=[log])
        self.routes(self, app)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return runner

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def vllm_like_metrics(sim_url: str, moved_to: str | None = None):
    """vLLM's /metrics: 307 to /metrics/ (or to `moved_to`, another origin), which relays the
    simulator's own /metrics text."""

    def routes(app: App, web_app: web.Application) -> None:
        async def moved(request: web.Request) -> web.Response:
            return web.Response(status=307, headers={"Location": moved_to or "/metrics/"})

        async def metrics(request: web.Request) -> web.Response:
            async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/metrics") as resp:
                return web.Response(body=await resp.read(), content_type="text/plain")

        web_app.router.add_get("/metrics", moved)
        web_app.router.add_get("/metrics/", metrics)

    return App(routes)


def sim_metrics_text(sim_url: str) -> str:
    async def go() -> str:
        async with aiohttp.ClientSession() as session, session.get(f"{sim_url}/metrics") as resp:
            return await resp.text()

    return asyncio.run(go())


def on_client(settings: ClientSettings, work):
    async def go():
        async with Client(settings) as client:
            return await work(client)

    return asyncio.run(go())


def test_vllms_307_of_metrics_to_metrics_slash_is_followed_with_the_credentials(instant_sim):
    sim = SimSince(instant_sim)
    with vllm_like_metrics(sim.url) as front:
        scraper = None

        async def probe(client: Client):
            nonlocal scraper
            scraper = MetricsScraper(client, f"{front.url}/metrics", None)
            return await scraper.probe(), await scraper.scrape()

        status, snap = on_client(ClientSettings(f"{front.url}/v1", **SECRET_SETTINGS), probe)
        seen = front.seen
    assert status.available and status.engine == "vllm", status.reason
    # What was read through the redirect is the simulator's own page (its counters stand still:
    # nobody sends it a request meanwhile).
    assert snap.values == parse(sim_metrics_text(sim.url), 0.0).values
    assert [path for _, path, _ in seen] == ["/metrics", "/metrics/"] * 2
    assert all(h["authorization"] == f"Bearer {KEY}" and h["x-tenant"] == HEADER_SECRET for _, _, h in seen)


def test_credentials_never_go_to_another_origin_a_redirect_names(instant_sim):
    sim = SimSince(instant_sim)
    with vllm_like_metrics(sim.url) as other:
        with vllm_like_metrics(sim.url, moved_to=f"{other.url}/metrics/") as front:
            settings = ClientSettings(f"{front.url}/v1", **SECRET_SETTINGS)
            page = on_client(settings, lambda c: c.page("GET", f"{front.url}/metrics"))
            first, moved = front.seen, other.seen
    assert page.failure is None and page.status == 200 and b"vllm:" in page.body
    assert [(m, p) for m, p, _ in first] == [("GET", "/metrics")]
    assert first[0][2]["authorization"] == f"Bearer {KEY}" and first[0][2]["x-tenant"] == HEADER_SECRET
    assert [(m, p) for m, p, _ in moved] == [("GET", "/metrics/")]
    assert "authorization" not in moved[0][2] and "x-tenant" not in moved[0][2]
    assert all(KEY not in v and HEADER_SECRET not in v for v in moved[0][2].values())


def test_a_cache_reset_is_an_empty_post_with_content_length_zero():
    def routes(app: App, web_app: web.Application) -> None:
        async def reset(request: web.Request) -> web.Response:
            return web.Response(text=str(len(await request.read())))

        web_app.router.add_post("/reset_prefix_cache", reset)

    with App(routes) as server:
        outcome = on_client(
            ClientSettings(f"{server.url}/v1"),
            lambda c: cache_reset.reset(c, c.base, ServerIdentity(engine="vLLM")),
        )
        [(method, path, headers)] = server.seen
    assert outcome.ok and outcome.endpoint == "POST /reset_prefix_cache", outcome.message
    assert (method, path, headers["content-length"]) == ("POST", "/reset_prefix_cache", "0")
    assert "content-type" not in headers  # no body, so nothing to type


def test_a_failed_reset_names_the_transports_failure_kind():
    outcome = on_client(
        ClientSettings("http://127.0.0.1:9/v1", api_key=KEY),  # discard port: nothing listens
        lambda c: cache_reset.reset(c, c.base, ServerIdentity(engine="vLLM")),
    )
    assert not outcome.ok and "POST /reset_prefix_cache: connect" in outcome.message
    assert KEY not in outcome.message


def test_the_server_version_is_a_side_page_read_whole_or_none(instant_sim):
    """probe-cache's setup.server_version: /version's version, else its Server header, else None."""
    sim = SimSince(instant_sim)

    async def sims_own() -> str:
        async with aiohttp.ClientSession() as session, session.get(f"{sim.url}/version") as resp:
            return (await resp.json())["version"]

    assert on_client(ClientSettings(sim.base_url), lambda c: c.server_version()) == asyncio.run(sims_own())

    def routes(app: App, web_app: web.Application) -> None:
        async def no_version(request: web.Request) -> web.Response:
            return web.Response(status=404, headers={"Server": "some-engine/1.2"})

        web_app.router.add_get("/version", no_version)

    with App(routes) as server:
        assert on_client(ClientSettings(f"{server.url}/v1"), lambda c: c.server_version()) == "some-engine/1.2"
    assert on_client(ClientSettings("http://127.0.0.1:9/v1"), lambda c: c.server_version()) is None


def test_a_page_past_the_size_cap_is_a_failure_not_a_cut_text(monkeypatch):
    cap = 64 * 1024
    monkeypatch.setattr(client_mod, "MAX_PAGE_BYTES", cap)

    def routes(app: App, web_app: web.Application) -> None:
        async def big(request: web.Request) -> web.Response:
            return web.Response(body=b"x" * int(request.query["n"]))

        web_app.router.add_get("/big", big)

    with App(routes) as server:

        async def both(client: Client):
            return await client.page("GET", f"{server.url}/big?n={cap}"), await client.page(
                "GET", f"{server.url}/big?n={cap + 1}"
            )

        at_cap, past = on_client(ClientSettings(f"{server.url}/v1"), both)
    assert at_cap.failure is None and len(at_cap.body) == cap
    assert past.failure == "too_large" and past.body == b""


def test_a_page_that_never_answers_is_a_timeout_not_an_exception():
    async def silent(seen: Seen, writer) -> bool:
        await asyncio.sleep(30)  # longer than the page's bound below
        return False

    with Scripted(silent) as server:
        page = on_client(
            ClientSettings(f"{server.url}/v1"), lambda c: c.page("GET", f"{server.url}/metrics", None, 0.3)
        )
    assert (page.failure, page.status) == ("timeout", 0) and "0.3 s" in page.message


def test_a_kept_alive_connection_dropped_before_the_answer_is_tried_once_more_on_a_fresh_one():
    """The server closes its kept-alive connection as the second page goes out on it (llama.cpp
    drops idle ones after 5 s): that page is sent again on a new connection, and answered."""
    answered: list[int] = []

    async def script(seen: Seen, writer) -> bool:
        if seen.connection == 0 and answered:  # the second request on the first connection
            return False  # closed without a byte of answer
        answered.append(seen.connection)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        return True

    with Scripted(script) as server:

        async def twice(client: Client):
            return [await client.page("GET", f"{server.url}/props") for _ in range(2)]

        pages = on_client(ClientSettings(f"{server.url}/v1"), twice)
        seen = [r.connection for r in server.requests]
    assert [(p.failure, p.status, p.body) for p in pages] == [(None, 200, b"ok")] * 2
    assert seen == [0, 0, 1] and answered == [0, 1]


@pytest.mark.parametrize("transport", ["lean", "aiohttp"])
def test_a_scrape_never_takes_a_connection_of_the_streams(instant_sim, transport):
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1])) as relay:

        async def work(client: Client):
            first = await client.stream(record(0), "hi", 4, "chat")
            page = await client.page("GET", f"{relay.url}/metrics")
            second = await client.stream(record(1), "hi", 4, "chat")
            return first, page, second

        first, page, second = on_client(
            ClientSettings(f"{relay.url}/v1", model="benchy-sim", transport=transport), work
        )
        seen = relay.requests
    assert first.status == second.status == "ok" and page.status == 200 and b"vllm:" in page.body
    streams = [r.connection for r in seen if r.method == "POST"]
    [scrape] = [r.connection for r in seen if r.target == "/metrics"]
    assert len(streams) == 2 and streams[0] == streams[1]  # the second stream had its kept-alive one
    assert scrape not in streams


RUN_AND_LIST_MODULES = """
import json, sys
from benchy import run
from benchy.client.settings import ClientSettings
from benchy.workloads.case import Case
settings = run.RunSettings(
    client=ClientSettings(base_url=sys.argv[1]), cases=[Case(pp=64, tg=8, concurrency=2)],
    runs=1, warmup=0, progress=False, cache_reset=True,
)
results = run.execute(settings).to_dict()
print(json.dumps({"modules": sorted(sys.modules), "setup": results["setup"]}))
"""


def test_a_run_reads_identity_metrics_and_resets_without_importing_aiohttp(instant_sim):
    sim = SimSince(instant_sim)
    done = run_python("-c", RUN_AND_LIST_MODULES, sim.base_url, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    setup = out["setup"]
    assert setup["server"]["engine"] == "benchy-sim" and setup["server"]["answered"]["/version"] == 200
    assert setup["server_metrics"]["available"] and setup["cache_reset"]["ok"]
    assert not [m for m in out["modules"] if m == "aiohttp" or m.startswith("aiohttp.")]
