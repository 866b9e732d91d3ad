"""Both transports (benchy.client.http1, the default, and aiohttp) end to end on 127.0.0.1 / ::1: against
`benchy sim` judged by its truth log, through a relay and a proxy that log what went over the
wire, and against scripted servers for the framing edge cases (chunks split at every byte, a
body read until close, a keep-alive connection the server closed, 100 Continue, redirects)."""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from benchy import run as run_mod
from benchy.client.client import Client
from benchy.client.http1 import Response, _Connection, _Exchange
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord
from benchy.workloads.case import Case
from tests.conftest import SimSince, shared_sim
from tests.netservers import LoggingProxy, Relay, Scripted, Seen
from tests.test_faults import new_record as record
from tests.test_secrets import self_signed, tls_server_context

TRANSPORTS = ["lean", "aiohttp"]
PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")

# One instant simulator for the module's tests (each reads its own part of the truth log).
instant_sim = shared_sim("--instant")


@pytest.fixture(autouse=True)
def no_proxy_from_outside(monkeypatch):
    """Each test says itself which proxy the environment names."""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


def stream(settings: ClientSettings, n: int = 1, tg: int = 4) -> list[RequestRecord]:
    """n streamed requests one after another, over one Client (so connections are reused)."""

    async def go() -> list[RequestRecord]:
        async with Client(settings) as client:
            return [await client.stream(record(i), "hi", tg, "chat") for i in range(n)]

    return asyncio.run(go())


def assert_as_sent(recs: list[RequestRecord], truth_log: list[dict], tokens: int) -> None:
    """Each record holds what the simulator's truth log says it sent that request."""
    truth = {t["request_id"]: t for t in truth_log}
    for rec in recs:
        t = truth[rec.request_id]
        assert rec.status == "ok" and rec.anomalies == [], rec.error
        assert rec.completion_tokens == t["completion_tokens"] == tokens
        assert len(rec.token_event_s) == sum(1 for e in t["events"] if e["tokens"])


def execute(base_url: str, transport: str, concurrency: int = 2, runs: int = 2, **client) -> dict:
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=base_url, transport=transport, **client),
        cases=[Case(pp=64, tg=8, concurrency=concurrency)],
        runs=runs,
        warmup=1,
        progress=False,
    )
    return run_mod.execute(settings).to_dict()


def measured_records(results: dict) -> list[dict]:
    return [r for c in results["cases"] for r in c["requests"] if not r["warmup"]]


# ---- against the simulator ------------------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_each_transport_records_what_the_simulator_sent(instant_sim, transport):
    sim = SimSince(instant_sim)
    recs = stream(ClientSettings(base_url=sim.base_url, model="benchy-sim", transport=transport), n=3, tg=12)
    assert_as_sent(recs, sim.truth(expect=3), 12)
    for rec in recs:
        assert rec.headers_s <= rec.token_event_s[0] <= rec.end_s


def test_connections_read_into_one_buffer_and_each_stream_stays_its_own(instant_sim):
    """The lean client's connections share one read buffer (an idle pooled connection holds no
    64 KiB of its own: issue 53's many agent sessions); 16 streams at once, each on its own
    connection, still record exactly what the simulator sent each of them."""
    sim = SimSince(instant_sim)
    settings = ClientSettings(base_url=sim.base_url, model="benchy-sim", transport="lean")

    async def go() -> list[RequestRecord]:
        async with Client(settings) as client:
            return list(await asyncio.gather(*(client.stream(record(i), "hi", 48, "chat") for i in range(16))))

    recs = asyncio.run(go())
    assert_as_sent(recs, sim.truth(expect=16), 48)
    assert _Connection()._view is _Connection()._view


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_query_string_of_the_base_url_is_on_every_request(instant_sim, transport):
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1])) as relay:
        results = execute(f"{relay.url}/v1?api-version=2024-02-01", transport)
    # The client's own requests (the model list, calibration and its /tokenize of an answer, the
    # streams); benchy.server's identity probes (/props, /metrics, …) go through Client.page and
    # build their own URLs.
    own = [r.target for r in relay.requests if r.method == "POST"] + [relay.requests[0].target]
    assert {t.split("?")[0] for t in own} == {"/v1/models", "/v1/chat/completions", "/tokenize"}
    assert all(t.endswith("?api-version=2024-02-01") for t in own), own
    assert results["setup"]["base_url"].endswith("/v1?api-version=2024-02-01")
    assert all(r["status"] == "ok" for r in measured_records(results))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_one_connection_per_stream_is_open_before_the_first_measured_request(instant_sim, tmp_path, transport):
    """TLS handshakes that the server starts only 0.3 s after each connection: every connection
    that carries a measured request was ready before the first measured request arrived, so no
    measured TTFT paid for one."""
    cert, key = self_signed(tmp_path)
    tls = tls_server_context(cert, key)
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1]), tls=tls, handshake_delay_s=0.3) as relay:
        results = execute(f"{relay.url}/v1", transport, concurrency=4, runs=2, insecure=True)
    measured_ids = {r["request_id"] for r in measured_records(results)}
    measured = [r for r in relay.requests if r.headers.get("x-request-id") in measured_ids]
    assert len(measured) == 8 and all(r["status"] == "ok" for r in measured_records(results))
    first_arrived = min(r.at for r in measured)
    carrying = {r.connection for r in measured}
    assert len(carrying) >= 4  # four streams in flight need four connections
    assert all(relay.ready_at[c] < first_arrived for c in carrying)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_ipv6_loopback(instant_sim, transport):
    if not socket.has_ipv6:
        pytest.skip("this Python has no IPv6")
    try:
        socket.socket(socket.AF_INET6).bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback on this machine: {exc}")
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1]), host="::1") as relay:
        assert relay.url.startswith("http://[::1]:")
        recs = stream(ClientSettings(base_url=f"{relay.url}/v1", model="benchy-sim", transport=transport), n=2)
    assert [r.status for r in recs] == ["ok", "ok"]
    assert [r.headers["host"] for r in relay.requests] == [f"[::1]:{relay.port}"] * 2


# ---- proxies from the environment ----------------------------------------------------------


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_http_proxy_from_the_environment_carries_every_request(instant_sim, monkeypatch, transport):
    sim = SimSince(instant_sim)
    with LoggingProxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", f"http://user:pw-SECRET@127.0.0.1:{proxy.port}")
        results = execute(sim.base_url, transport)
        seen = proxy.requests
    assert all(r["status"] == "ok" for r in measured_records(results))
    assert {r.target.split("?")[0] for r in seen} >= {f"{sim.url}/v1/models", f"{sim.url}/v1/chat/completions"}
    assert all(r.headers.get("proxy-authorization") == "Basic dXNlcjpwdy1TRUNSRVQ=" for r in seen)
    assert "SECRET" not in json.dumps(results)
    truth = sim.truth()
    assert {r.headers.get("x-request-id") for r in seen} >= {t["request_id"] for t in truth if t["request_id"]}


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("how", ["no_proxy", "flag"])
def test_a_proxy_is_bypassed_by_no_proxy_or_the_flag(instant_sim, monkeypatch, transport, how):
    sim = SimSince(instant_sim)
    with LoggingProxy() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url)
        if how == "no_proxy":
            monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
        recs = stream(
            ClientSettings(base_url=sim.base_url, model="benchy-sim", transport=transport, env_proxy=how != "flag")
        )
        assert recs[0].status == "ok" and proxy.requests == []
    assert len(sim.truth(expect=1)) == 1


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_https_goes_through_the_proxy_in_a_connect_tunnel(instant_sim, tmp_path, monkeypatch, transport):
    cert, key = self_signed(tmp_path)
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1]), tls=tls_server_context(cert, key)) as tls, LoggingProxy() as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        base = f"https://127.0.0.1:{tls.port}/v1"
        unverified = stream(ClientSettings(base_url=base, model="benchy-sim", transport=transport))
        insecure = stream(ClientSettings(base_url=base, model="benchy-sim", transport=transport, insecure=True))
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        trusted = stream(ClientSettings(base_url=base, model="benchy-sim", transport=transport))
        seen = proxy.requests
    assert unverified[0].error_kind == "tls" and "certificate" in unverified[0].error
    assert insecure[0].status == "ok" and trusted[0].status == "ok", (insecure[0].error, trusted[0].error)
    assert [r.method for r in seen] == ["CONNECT"] * 3 and {r.target for r in seen} == {f"127.0.0.1:{tls.port}"}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_proxy_that_refuses_is_named_in_the_error(instant_sim, monkeypatch, transport):
    sim = SimSince(instant_sim)
    with LoggingProxy(refuse=407) as proxy:
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        [rec] = stream(ClientSettings(base_url=sim.base_url.replace("http:", "https:"), model="m", transport=transport))
    assert rec.error_kind == "proxy" and "407" in rec.error


# ---- redirects -------------------------------------------------------------------------------


def redirector(sim_url: str, status: int = 307) -> Scripted:
    """Sends every request on to the simulator (another origin) with `status`."""

    async def script(seen: Seen, writer) -> bool:
        writer.write(
            f"HTTP/1.1 {status} Moved\r\nLocation: {sim_url}{seen.target}\r\nContent-Length: 0\r\n\r\n".encode()
        )
        return True

    return Scripted(script)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_redirects_are_followed_and_credentials_stay_with_their_origin(instant_sim, transport):
    sim = SimSince(instant_sim)
    with redirector(sim.url) as front:
        results = execute(f"{front.url}/v1", transport, api_key="sk-REDIRECT-KEY")
        seen = front.requests
    recs = measured_records(results)
    assert recs and all(r["status"] == "ok" and r["anomalies"] == ["redirected"] for r in recs)
    assert all(r["anomaly_counts"] == {"redirected": 1} for r in recs)
    assert {r.method for r in seen} == {"GET", "POST"}  # models, version, calibration, streams
    assert all(r.headers["authorization"] == "Bearer sk-REDIRECT-KEY" for r in seen)
    assert all(t["authorization_sha256"] is None for t in sim.truth())  # never sent to another origin


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("status", [301, 302, 303])
def test_a_post_moved_by_301_302_303_is_an_error_naming_the_new_url(instant_sim, transport, status):
    sim = SimSince(instant_sim)
    with redirector(sim.url, status) as front:
        [rec] = stream(ClientSettings(base_url=f"{front.url}/v1", model="m", transport=transport))
    assert rec.error_kind == "redirect" and f"{sim.url}/v1/chat/completions" in rec.error
    assert sim.truth() == []


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_redirect_loop_ends_as_an_error(transport):
    async def script(seen: Seen, writer) -> bool:
        writer.write(b"HTTP/1.1 308 Again\r\nLocation: /v1/chat/completions\r\nContent-Length: 0\r\n\r\n")
        return True

    with Scripted(script) as front:
        [rec] = stream(ClientSettings(base_url=f"{front.url}/v1", model="m", transport=transport))
        assert len(front.requests) == 6  # the request and five redirects
    assert rec.error_kind == "redirect" and "more than 5 redirects" in rec.error


# ---- framing edge cases, scripted --------------------------------------------------------------

CONTENTS = ["Hel", "lo", " wörld", " ✓"]


def sse_body() -> bytes:
    events = [{"choices": [{"index": 0, "delta": {"content": c}, "finish_reason": None}]} for c in CONTENTS]
    events.append({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": len(CONTENTS)}})
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"


def chunked(body: bytes, size: int = 7) -> bytes:
    pieces = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"


SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
CHUNKED_RESPONSE = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunked(sse_body())


def assert_whole(rec: RequestRecord) -> None:
    assert rec.status == "ok" and rec.anomalies == [], rec.error
    assert rec.content_chars == sum(map(len, CONTENTS)) and len(rec.token_event_s) == len(CONTENTS)
    assert rec.completion_tokens == len(CONTENTS)


def scripted(response: bytes, keep_open: bool = True, byte_by_byte: bool = False) -> Scripted:
    async def script(seen: Seen, writer) -> bool:
        if byte_by_byte:
            for i in range(len(response)):
                writer.write(response[i : i + 1])
                await writer.drain()
        else:
            writer.write(response)
        return keep_open

    return Scripted(script)


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize(
    "name, response, keep_open",
    [
        ("chunked", CHUNKED_RESPONSE, True),
        ("content-length", SSE_HEAD + b"Content-Length: %d\r\n\r\n" % len(sse_body()) + sse_body(), True),
        ("read until close", SSE_HEAD + b"\r\n" + sse_body(), False),
        ("100 Continue first", b"HTTP/1.1 100 Continue\r\n\r\n" + CHUNKED_RESPONSE, True),
        ("closed after each answer", CHUNKED_RESPONSE, False),
    ],
)
def test_framings_deliver_the_same_record(transport, name, response, keep_open):
    with scripted(response, keep_open) as server:
        recs = stream(ClientSettings(base_url=f"{server.url}/v1", model="m", transport=transport), n=3)
        connections = len(server.log.connections)
    for rec in recs:
        assert_whole(rec)
    assert connections == (1 if keep_open else 3)  # kept alive only when the framing allows it


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_response_written_one_byte_at_a_time(transport):
    with scripted(CHUNKED_RESPONSE, byte_by_byte=True) as server:
        [rec] = stream(ClientSettings(base_url=f"{server.url}/v1", model="m", transport=transport))
    assert_whole(rec)


def test_the_lean_parser_gives_the_same_record_for_every_split_of_the_response():
    """Every cut point of the whole response (head, chunk sizes, CRLFs, multi-byte characters),
    fed to the exchange as two reads, and all of it one byte per read."""

    async def parse(pieces: list[bytes]) -> RequestRecord:
        from benchy.client.draft import Draft
        from benchy.client.reader import StreamReader

        rec = record(0)
        reader = StreamReader(Draft(rec))
        response = Response()
        conn = _Connection()
        exchange = _Exchange(conn, response, lambda r: True, lambda b, now: reader.feed(b, now), stall_s=60)
        for piece in pieces:
            exchange.received(piece, 0.5)
        assert exchange.done.done() and exchange.reusable, name_of(pieces)
        exchange.done.result()
        reader.close(1.0)
        rec = reader.rec.record()
        return rec

    def name_of(pieces: list[bytes]) -> str:
        return f"cut at {len(pieces[0])}"

    raw = CHUNKED_RESPONSE
    cases = [[raw[:k], raw[k:]] for k in range(1, len(raw))] + [[raw[i : i + 1] for i in range(len(raw))]]
    for pieces in cases:
        assert_whole(asyncio.run(parse(pieces)))


def test_a_reads_events_reach_the_reader_in_one_call_stamped_with_that_reads_time():
    """One HTTP chunk per SSE event, several chunks a read (a server writing faster than the
    client reads): the sink gets each read once, and every event keeps the time of the read that
    brought it, the same record as one event a read would give."""
    events = [b"data: " + e for e in sse_body().split(b"data: ")[1:]]  # 4 contents, usage, [DONE]
    per_event = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
    head = SSE_HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
    reads = [head + b"".join(per_event[:3]), b"".join(per_event[3:5]), b"".join(per_event[5:])]
    times = [0.25, 0.5, 0.75]

    async def parse() -> tuple[RequestRecord, list[float]]:
        from benchy.client.draft import Draft
        from benchy.client.reader import StreamReader

        rec, calls = record(0), []
        reader = StreamReader(Draft(rec))

        def sink(data: bytes, now: float):
            calls.append(now)
            return reader.feed(data, now)

        exchange = _Exchange(_Connection(), Response(), lambda r: True, sink, stall_s=60)
        for data, now in zip(reads, times):
            exchange.received(data, now)
        assert exchange.done.done() and exchange.reusable
        reader.close(1.0)
        rec = reader.rec.record()
        return rec, calls

    rec, calls = asyncio.run(parse())
    assert_whole(rec)
    assert calls == times  # one call a read
    assert rec.token_event_s == [times[0]] * 3 + [times[1]]  # three contents in the first read, one in the second
    assert rec.first_chunk_s == times[0] and rec.sse_events == len(events)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_keep_alive_connection_the_server_closed_is_sent_again_on_a_fresh_one(transport):
    """The server closes each connection right after its answer without saying so: the next
    request finds the idle connection dead, or sends on it and is reset; either way it is
    retried on a fresh connection and nothing is lost."""

    async def script(seen: Seen, writer) -> bool:
        writer.write(CHUNKED_RESPONSE)
        await writer.drain()
        writer.transport.abort()  # no FIN handshake courtesy: as a server killing idle sockets
        return False

    with Scripted(script) as server:
        recs = stream(ClientSettings(base_url=f"{server.url}/v1", model="m", transport=transport), n=4)
    for rec in recs:
        assert_whole(rec)
    assert all(r.retried is None or r.retried.startswith("reset") for r in recs)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_stream_cut_mid_body_is_a_disconnect(transport):
    cut = CHUNKED_RESPONSE[: len(CHUNKED_RESPONSE) // 2]
    with scripted(cut, keep_open=False) as server:
        [rec] = stream(ClientSettings(base_url=f"{server.url}/v1", model="m", transport=transport))
    assert rec.error_kind == "disconnect" and rec.http_status == 200


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_tls_verification_and_insecure(instant_sim, tmp_path, transport):
    cert, key = self_signed(tmp_path)
    sim = SimSince(instant_sim)
    with Relay(int(sim.url.rsplit(":", 1)[1]), tls=tls_server_context(cert, key)) as tls:
        base = f"https://127.0.0.1:{tls.port}/v1"
        [refused] = stream(ClientSettings(base_url=base, model="benchy-sim", transport=transport))
        [insecure] = stream(ClientSettings(base_url=base, model="benchy-sim", transport=transport, insecure=True))
    assert refused.error_kind == "tls" and "certificate" in refused.error
    assert insecure.status == "ok" and insecure.completion_tokens == 4, insecure.error


def test_a_kept_alive_connections_next_response_has_its_own_stall_bound():
    """The lean transport carries a connection's parser and stall timer from one response to
    the next: the second response on the connection, cut after its first chunk, still fails
    as a stall of its own, no sooner than --stall-timeout after its last byte, and the first
    response's record is untouched by it."""
    stall_s = 0.4
    whole_head = CHUNKED_RESPONSE.split(b"\r\n\r\n", 1)[0] + b"\r\n\r\n"
    first_chunk = chunked(sse_body()).split(b"\r\n", 2)
    cut = whole_head + first_chunk[0] + b"\r\n" + first_chunk[1] + b"\r\n"

    async def script(seen: Seen, writer) -> bool:
        writer.write(CHUNKED_RESPONSE if len(server.requests) == 1 else cut)
        return True  # kept open: the second answer just stops

    with Scripted(script) as server:
        settings = ClientSettings(
            base_url=f"{server.url}/v1", model="m", transport="lean", stall_timeout_s=stall_s, timeout_s=30.0
        )
        first, second = stream(settings, n=2)
    assert_whole(first)
    assert [s.connection for s in server.requests] == [0, 0]  # the second went over the kept-alive one
    assert second.status == "error" and second.error_kind == "stall", second.error
    assert second.headers_s is not None and second.end_s - second.headers_s >= stall_s
