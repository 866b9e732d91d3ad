"""Faults from the server: each is recorded on its request with a kind, the run goes on, and
summaries count errors by kind, all checked against the simulator's ground truth."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time
from collections import Counter

import pytest
from aiohttp import web

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.records import RequestRecord, read_records
from benchy.sim.config import FAULT_KINDS
from tests.conftest import run_benchy_here

FAST = ("--decode-tps", "4000", "--prefill-tps", "200000")

# What benchy must record for each fault the simulator injected (by its truth log).
EXPECTED = {
    None: "ok",
    "null_content": "ok+null_content",
    "http500": "http_500",
    "http429": "http_429",
    "http429_retry": "http_429",
    "cut_stream": "disconnect",
    "reset": "reset",
    "stall": "stall",
    "not_sse": "not_sse",
    "malformed_json": "ok+malformed_events:1",
    "no_done": "ok+no_done",
    "no_usage": "ok+no_usage",
}


def observed(rec: RequestRecord | dict) -> str:
    r = rec if isinstance(rec, dict) else rec.to_dict()
    if r["status"] != "ok":
        return r["error_kind"]
    counts = r["anomaly_counts"]  # a count stays apart from its anomaly's code
    marks = [f"{a}:{counts[a]}" if a in counts else a for a in r["anomalies"]]
    if r["content_null_events"] and not r["content_chars"]:
        marks.append("null_content")
    return "+".join(["ok"] + marks)


def new_record(i: int) -> RequestRecord:
    return RequestRecord(
        case="faults",
        run=0,
        index=i,
        warmup=False,
        request_id=f"fault-{i}",
        nonce=None,
        target_prompt_tokens=8,
        target_output_tokens=16,
    )


async def send_all(base_url: str, n: int, concurrency: int, **settings) -> list[RequestRecord]:
    """n streamed requests through the real client, `concurrency` at a time (closed loop)."""
    records: list[RequestRecord] = []
    queue = iter(range(n))
    async with Client(
        ClientSettings(base_url=base_url, model="benchy-sim", connections=concurrency, **settings)
    ) as client:

        async def worker() -> None:
            for i in queue:
                rec = await client.stream(new_record(i), f"question number {i}", 16, "chat", {"ignore_eos": True})
                records.append(rec)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return records


def truth_by_request(sim, records: list, timeout: float = 10.0) -> dict[str, list[dict]]:
    """The truth log grouped by request id, once every attempt of every record is in it (a
    stalled request is logged only when the simulator gives up on it, after the client did)."""
    records = [r if isinstance(r, dict) else r.to_dict() for r in records]
    deadline = time.monotonic() + timeout
    while True:
        by_id: dict[str, list[dict]] = {}
        for t in sim.truth():
            by_id.setdefault(t["request_id"], []).append(t)
        if (
            all(len(by_id.get(r["request_id"], [])) >= 1 + bool(r["retried"]) for r in records)
            or time.monotonic() > deadline
        ):
            return by_id
        time.sleep(0.05)


def check_against_truth(rec: dict, entries: list[dict]) -> None:
    """The record's outcome is what the simulator did last; a first attempt that the client
    retried was a reset on a reused connection and is named on the record."""
    assert entries, f"{rec['request_id']} never reached the simulator"
    assert 1 <= len(entries) <= 2
    if len(entries) == 2:
        assert entries[0]["fault"] == "reset" and (rec["retried"] or "").startswith("reset:")
        # the timestamps are the retry's, not the failed attempt's (one monotonic clock for both)
        assert entries[0]["arrival_s"] < rec["sent_mono_s"] <= entries[1]["arrival_s"]
    else:
        assert rec["retried"] is None
    assert observed(rec) == EXPECTED[entries[-1]["fault"]], (entries[-1]["fault"], rec["error"])


def test_every_simulator_fault_is_recorded_with_its_kind(start_sim):
    every_fault = [f for kind in FAULT_KINDS for f in ("--fault", f"{kind}:0.06")]  # 2/3 of requests
    sim = start_sim(*FAST, "--seed", "11", "--stall-s", "1.0", *every_fault)
    records = asyncio.run(send_all(sim.base_url, 200, 4, stall_timeout_s=0.3))
    assert len(records) == 200  # every request recorded, none raised
    truth = truth_by_request(sim, records)
    for rec in records:
        check_against_truth(rec.to_dict(), truth.get(rec.request_id, []))
    seen = Counter(t["fault"] for entries in truth.values() for t in entries)
    assert set(FAULT_KINDS) <= set(seen), f"not every fault was drawn: {seen}"
    by_kind = {observed(r) for r in records}
    assert {"http_500", "http_429", "disconnect", "stall", "not_sse", "ok+no_done"} <= by_kind
    fault_of = {r.request_id: truth[r.request_id][-1]["fault"] for r in records}
    retry_after = [r.error for r in records if fault_of[r.request_id] == "http429_retry"]
    plain_429 = [r.error for r in records if fault_of[r.request_id] == "http429"]
    assert retry_after and all("Retry-After: 1" in e for e in retry_after)
    assert plain_429 and not any("Retry-After" in e for e in plain_429)


def test_reused_connection_reset_is_retried_once_on_a_fresh_one(start_sim):
    """One request at a time: after the first, each goes over a kept-alive connection, so a
    reset there is retried; a reset on the fresh connection (first request, or the retry
    itself) is an error. Which path each took is read from the truth log."""
    sim = start_sim(*FAST, "--seed", "5", "--fault", "reset:0.4")
    records = asyncio.run(send_all(sim.base_url, 40, 1))
    truth = truth_by_request(sim, records)
    for rec in records:
        check_against_truth(rec.to_dict(), truth[rec.request_id])
    retried = [r for r in records if r.retried]
    assert any(r.ok for r in retried), "no retry succeeded"
    assert any(r.error_kind == "reset" for r in retried), "no retry was itself reset (and kept as an error)"
    assert records[0].retried is None  # the very first request had a fresh connection: never retried


def test_request_over_timeout_is_recorded_as_timeout(start_sim):
    sim = start_sim("--decode-tps", "20")  # 16 tokens: 0.8 s, well past the 0.3 s limit
    [rec] = asyncio.run(send_all(sim.base_url, 1, 1, timeout_s=0.3))
    assert rec.error_kind == "timeout" and "--timeout" in rec.error
    assert rec.end_s > 0.25  # not before the limit; how much after it depends on the machine
    [truth] = sim.truth(expect=1)
    assert truth["completion_tokens"] < 16  # the server really was cut off mid-answer


def test_connection_refused_is_recorded_as_connect():
    with socket.socket() as sock:  # bound but not listening: connecting is refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        [rec] = asyncio.run(send_all(f"http://127.0.0.1:{port}/v1", 1, 1))
    assert rec.status == "error" and rec.error_kind == "connect" and rec.http_status is None


CANNED = {
    "fault-0": b'data: {"error": {"message": "CUDA out of memory"}}\n\n',
    "fault-1": b"",  # an event stream with no event at all
    "fault-2": (
        b'data: {"choices": 3}\n\ndata: {"choices": [{"delta": {"content": "hi"}}]}\n\n'
        b'data: {"usage": {"prompt_tokens": "x", "completion_tokens": 1}}\n\ndata: [DONE]\n\n'
    ),
}


async def serve_canned(handler_body: dict[str, bytes]):
    async def chat(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(handler_body[request.headers["X-Request-Id"]])
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


def test_error_event_empty_stream_and_bad_shapes_from_a_real_socket():
    async def scenario() -> list[RequestRecord]:
        runner, port = await serve_canned(CANNED)
        try:
            return await send_all(f"http://127.0.0.1:{port}/v1", 3, 1)
        finally:
            await runner.cleanup()

    recs = {r.request_id: r for r in asyncio.run(scenario())}
    assert (recs["fault-0"].error_kind, recs["fault-0"].error) == ("server_error", "CUDA out of memory")
    assert recs["fault-1"].error_kind == "bad_stream"
    garbage = recs["fault-2"]
    assert garbage.ok and garbage.content_chars == 2 and garbage.prompt_tokens is None
    assert garbage.completion_tokens == 1 and "malformed_events" in garbage.anomalies
    assert garbage.anomaly_counts == {"malformed_events": 2}


SOME_FAULTS = {
    "http500": 0.04,
    "http429": 0.03,
    "http429_retry": 0.03,
    "cut_stream": 0.04,
    "reset": 0.04,
    "stall": 0.02,
    "malformed_json": 0.03,
    "not_sse": 0.03,
    "no_done": 0.02,
    "no_usage": 0.02,
}


def test_run_with_30_percent_faults_counts_every_kind_exactly(start_sim, tmp_path):
    assert abs(sum(SOME_FAULTS.values()) - 0.30) < 1e-9
    flags = [f for k, v in SOME_FAULTS.items() for f in ("--fault", f"{k}:{v}")]
    sim = start_sim(*FAST, "--seed", "3", "--stall-s", "1.0", *flags)
    out = tmp_path / "run"
    proc = run_benchy_here(
        *f"run --base-url {sim.base_url} --pp 64 --tg 24 -c 4 --runs 40 --stall-timeout 0.3 -q".split(),
        "--no-report",
        "-o",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    results = json.loads((out / "results.json").read_text())
    [case] = results["cases"]
    measured = [r for r in case["requests"] if not r["warmup"]]
    assert len(measured) == 160 and case["n_ok"] + case["n_failed"] == 160  # nothing dropped
    assert results["partial"] is False and results["stopped"] is None

    truth = truth_by_request(sim, case["requests"])
    for rec in case["requests"]:
        check_against_truth(rec, truth.get(rec["request_id"], []))
    final = [truth[r["request_id"]][-1]["fault"] for r in measured]
    expected_errors = Counter(EXPECTED[f] for f in final if not EXPECTED[f].startswith("ok"))
    expected_anomalies = Counter(EXPECTED[f].split("+")[1].split(":")[0] for f in final if "+" in EXPECTED[f])
    assert case["errors"] == dict(expected_errors) and sum(expected_errors.values()) >= 20
    assert case["anomalies"] == dict(expected_anomalies)
    assert case["retried"] == (
        {"reset": sum(len(truth[r["request_id"]]) == 2 for r in measured)} if case["retried"] else {}
    )
    assert sum(len(truth[r["request_id"]]) == 2 for r in measured) == sum(case["retried"].values())
    # statistics cover exactly the successes, and the failures are reported by kind
    assert case["summary"]["e2e_tps"]["n"] == case["n_ok"]
    [warning] = [w for w in results["warnings"] if w["code"] == "request_errors"]
    assert all(f"{kind}: {n}" in warning["message"] for kind, n in expected_errors.items())
    on_disk = [r.to_dict() for r in read_records(out / "requests.jsonl")]
    assert [r["request_id"] for r in on_disk] == [r["request_id"] for r in case["requests"]]


def run_with_limit(sim, tmp_path, *flags: str) -> tuple[subprocess.CompletedProcess, dict, list[dict]]:
    out = tmp_path / "limited"
    proc = run_benchy_here(
        *f"run --base-url {sim.base_url} --pp 64 --tg 8 -c 2 --runs 50 -q".split(),
        "--no-report",
        "-o",
        str(out),
        *flags,
    )
    results = json.loads((out / "results.json").read_text())
    lines = [r.to_dict() for r in read_records(out / "requests.jsonl")]
    return proc, results, lines


def test_max_errors_stops_early_keeping_everything(start_sim, tmp_path):
    sim = start_sim(*FAST, "--seed", "1", "--fault", "http500:0.3")
    proc, results, lines = run_with_limit(sim, tmp_path, "--max-errors", "3")
    assert proc.returncode == 5, proc.stderr
    line = proc.stderr.strip().splitlines()[0]
    assert "stopped early" in line and "--max-errors 3" in line
    assert results["partial"] is True and results["stopped"]["by"] == "max-errors"
    [case] = results["cases"]
    # the 4th failure (warmups count: they are real requests) stops the run; the requests then
    # in flight are cancelled, not recorded as failures of their own
    assert sum(r["status"] == "error" for r in lines) == 4
    assert case["n_ok"] + case["n_failed"] < 100  # it did stop early
    assert [r["request_id"] for r in lines] == [r["request_id"] for r in case["requests"]]
    assert len(sim.truth()) >= len(lines)


def test_max_error_rate_stops_early(start_sim, tmp_path):
    sim = start_sim(*FAST, "--seed", "2", "--fault", "http500:0.5")
    proc, results, lines = run_with_limit(sim, tmp_path, "--max-error-rate", "0.2")
    assert proc.returncode == 5, proc.stderr
    assert "--max-error-rate 0.2" in proc.stderr and results["stopped"]["by"] == "max-error-rate"
    failed = sum(r["status"] == "error" for r in lines)
    assert len(lines) >= 10 and failed > 0.2 * len(lines) and len(lines) < 101


@pytest.mark.parametrize("flag", ["--max-errors=-1", "--max-error-rate=1.5"])
def test_error_limits_reject_nonsense(flag):
    proc = run_benchy_here("run", flag)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
