"""--endpoint responses and --endpoint messages: each API's event reader, and benchy run,
multi-turn and probe-cache over real HTTP against `benchy sim`, judged by its truth log."""

from __future__ import annotations

import json

import pytest

from benchy.client import messages, responses
from benchy.client.draft import Draft
from benchy.client.reader import StreamReader
from benchy.records import RequestRecord
from tests.conftest import SimSince, bare_record, client_slack_s, run_benchy_here, run_json, shared_sim, warning_codes

APIS = ("responses", "messages")
REASONING = 5
sim_fixture = shared_sim("--prefill-tps", "20000", "--decode-tps", "400", "--reasoning-tokens", str(REASONING))


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


def events(*objs: dict) -> bytes:
    return b"".join(f"event: {o['type']}\ndata: {json.dumps(o)}\n\n".encode() for o in objs)


def read(api, stream: bytes, cut: int = 7) -> RequestRecord:
    """The record the reader of `api` makes of `stream`, fed in `cut`-byte reads (chunking must not matter)."""
    rec = bare_record()
    reader = StreamReader(Draft(rec), api=api)
    for start in range(0, len(stream), cut):
        reader.feed(stream[start : start + cut], 0.1 + start / 1000)
    reader.close(5.0)
    rec = reader.rec.record()
    return rec


# ------------------------------------------------------------------ the readers


def responses_stream(end: str = "response.completed", status: str = "completed") -> list[dict]:
    usage = {
        "input_tokens": 40,
        "input_tokens_details": {"cached_tokens": 32},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 43,
    }
    details = {"reason": "max_output_tokens"} if status == "incomplete" else None
    return [
        {"type": "response.created", "response": {"id": "r1", "status": "in_progress"}},
        {"type": "response.reasoning_text.delta", "delta": "hmm"},
        {"type": "response.output_text.delta", "delta": "Hel"},
        {"type": "response.output_text.delta", "delta": "lo"},
        {"type": "response.output_text.done", "text": "Hello"},
        {"type": end, "response": {"status": status, "incomplete_details": details, "usage": usage}},
    ]


def test_responses_reader_tells_reasoning_from_text_and_reads_usage_from_the_end_event():
    for cut in (1, 7, 4096):
        rec = read(responses, events(*responses_stream()), cut)
        assert rec.ok and rec.token_event_kinds == "rcc" and rec.token_event_text == "hmmHello"
        assert (rec.reasoning_chars, rec.content_chars) == (3, 5)
        assert (rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens, rec.reasoning_tokens) == (40, 32, 3, 1)
        assert rec.finish_reason == "stop" and rec.anomalies == []
        assert rec.sse_events == 6


def test_responses_reader_incomplete_is_length_and_a_stream_without_its_end_event_says_so():
    rec = read(responses, events(*responses_stream("response.incomplete", "incomplete")))
    assert rec.ok and rec.finish_reason == "length" and rec.completion_tokens == 3
    cut_short = read(responses, events(*responses_stream()[:-1]))
    assert cut_short.ok and {"no_done", "no_usage"} <= set(cut_short.anomalies)


@pytest.mark.parametrize(
    "failure",
    [
        {"type": "error", "code": "server_error", "message": "engine died"},
        {"type": "response.failed", "response": {"status": "failed", "error": {"message": "engine died"}}},
    ],
)
def test_responses_reader_counts_an_error_in_the_stream_as_a_failure(failure):
    rec = read(responses, events(*responses_stream()[:3], failure))
    assert rec.status == "error" and rec.error_kind == "server_error" and "engine died" in (rec.error or "")


def messages_stream(stop: str = "end_turn") -> list[dict]:
    start_usage = {"input_tokens": 8, "cache_read_input_tokens": 32, "output_tokens": 1}
    return [
        {"type": "message_start", "message": {"id": "m1", "usage": start_usage}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "x"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "ping"},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}},
        {"type": "message_stop"},
    ]


def test_messages_reader_tells_thinking_from_text_and_sums_anthropic_usage():
    for cut in (1, 7, 4096):
        rec = read(messages, events(*messages_stream()), cut)
        assert rec.ok and rec.token_event_kinds == "rcc" and rec.token_event_text == "hmmHello"
        # Anthropic's input_tokens leaves the cache read out: the prompt is both.
        assert (rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens) == (40, 32, 3)
        assert rec.finish_reason == "stop" and rec.anomalies == []


def test_messages_reader_max_tokens_is_length_and_a_stream_without_message_stop_says_so():
    assert read(messages, events(*messages_stream("max_tokens"))).finish_reason == "length"
    cut_short = read(messages, events(*messages_stream()[:-1]))
    assert cut_short.ok and "no_done" in cut_short.anomalies and cut_short.completion_tokens == 3


def test_messages_reader_counts_an_error_in_the_stream_as_a_failure():
    failure = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    rec = read(messages, events(*messages_stream()[:8], failure))
    assert rec.status == "error" and rec.error_kind == "server_error" and rec.error == "Overloaded"


def test_readers_count_garbage_as_malformed_never_raise():
    for reader in (responses, messages):
        junk = b'data: [1,2]\n\ndata: {"type": 3}\n\ndata: {"type": "content_block_delta", "delta": 4}\n\n'
        rec = read(reader, junk + b'data: {"type": "response.output_text.delta", "delta": 5}\n\n')
        assert rec.ok and rec.anomaly_counts.get("malformed_events", 0) >= 2


# ------------------------------------------------------------------ against the simulator


@pytest.mark.parametrize("api", APIS)
def test_sweep_and_concurrency_on_each_api_match_the_truth(sim, tmp_path, api):
    results = run_json(sim, tmp_path, "--endpoint", api, "--pp", "256", "--tg", "24", "-c", "1", "2", "--runs", "2")
    truth = {t["request_id"]: t for t in sim.truth()}
    shown = "" if api == "chat" else f" {api}"  # a label names an endpoint other than chat
    assert [c["label"] for c in results["cases"]] == [f"pp256 tg24{shown}", f"pp256 tg24 c2{shown}"]
    assert warning_codes(results, truth=truth) == set()
    for case in results["cases"]:
        slack = client_slack_s(case)
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["n_ok"] == len(reqs) == 2 * case["concurrency"]
        for r in reqs:
            t, m = truth[r["request_id"]], r["metrics"]
            assert t["endpoint"] == api and t["stream"] is True
            assert r["completion_tokens"] == t["completion_tokens"] == 24
            assert r["prompt_tokens"] == t["prompt_tokens"] and r["cached_tokens"] == t["reported_cached_tokens"]
            # Anthropic's usage has no reasoning count; Responses' has.
            assert t["reasoning_tokens"] == REASONING
            assert r["reasoning_tokens"] == (REASONING if api == "responses" else None)
            # Reasoning came first, told apart from the answer: the first content token is later.
            # (A client that a busy machine held up may read both in one read: then they tie.)
            assert r["reasoning_chars"] > 0 and r["content_chars"] > 0 and m["ttfc_s"] >= m["ttft_s"]
            assert t["first_content_token_s"] - t["arrival_s"] <= m["ttfc_s"]
            # From benchy's send (the same clock as the truth's): how late the simulator read the
            # request on a busy machine is the server's time, in both.
            sent = r["sent_mono_s"]
            assert abs(m["ttft_s"] - (t["first_token_event_s"] - sent)) <= slack
            assert abs(m["e2e_s"] - (max(e["t_s"] for e in t["events"]) - sent)) <= slack


def test_multi_turn_on_each_api_reuses_the_history_the_sim_cached(sim, tmp_path):
    for api in APIS:
        results = run_json(sim, tmp_path, "--endpoint", api, "--turns", "3", "-c", "2", "--pp", "120", "--tg", "12")
        [case] = results["cases"]
        truth = {t["request_id"]: t for t in sim.truth()}
        reqs = [r for r in case["requests"] if not r["warmup"]]
        assert case["kind"] == "multi_turn" and case["n_ok"] == 6 and case["n_failed"] == 0
        for r in reqs:
            t = truth[r["request_id"]]
            assert t["endpoint"] == api
            assert r["prompt_tokens"] == t["prompt_tokens"] and r["cached_tokens"] == t["reported_cached_tokens"]
            if r["turn"] > 1:
                assert t["cached_tokens"] >= r["expected_cached_tokens"] // 16 * 16 > 0
        assert not warning_codes(results) & {"cache_not_reused", "cache_eviction"}


@pytest.mark.parametrize("api", APIS)
def test_probe_cache_on_each_api_detects_the_sims_cache(sim, api):
    proc = run_benchy_here(
        "probe-cache",
        "--base-url",
        sim.base_url,
        "--endpoint",
        api,
        *"--lengths 3000 -n 4 --tg 4 --format json".split(),
    )
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["lengths"]
    assert entry["verdict"] == "detected", entry["reason"]
    truth = {t["request_id"]: t for t in sim.truth()}
    repeats = [truth[i] for i in entry["shared"]["request_ids"][1:]]
    assert all(t["endpoint"] == api and t["cached_tokens"] >= t["prompt_tokens"] - 16 for t in repeats)
    assert entry["shared"]["cached_tokens"][1:] == [t["reported_cached_tokens"] for t in repeats]


def test_reasoning_effort_on_messages_is_a_usage_error(capsys):
    from benchy.cli import main

    with pytest.raises(SystemExit) as done:
        main(["run", "--endpoint", "messages", "--reasoning-effort", "high"])
    err = capsys.readouterr().err.strip().splitlines()
    assert done.value.code == 2 and len(err) == 1 and "Messages API has no such field" in err[0]


@pytest.mark.parametrize("api", APIS)
def test_buffering_and_queueing_checks_work_on_each_api(start_sim, tmp_path, api):
    """The checks read the same records on every API: a buffering proxy (the sim's `buffered`
    preset, several tokens per event in its truth log) withholds TTFT as on chat, and requests
    that the truth log shows waiting for the one slot are said to hold queueing."""
    buffered = start_sim("--preset", "buffered")
    results = run_json(buffered, tmp_path, "--endpoint", api, *"--pp 128 --tg 64 --runs 3".split())
    assert any(e["tokens"] > 1 for t in buffered.truth() for e in t["events"])
    assert "sse_buffering" in warning_codes(results)
    assert results["cases"][0]["unavailable_codes"]["ttft_s"] == "buffered"

    one_slot = start_sim("--max-running", "1", "--decode-tps", "300")
    results = run_json(one_slot, tmp_path, "--endpoint", api, *"--pp 128 --tg 32 -c 4 --runs 2".split())
    waited = [t for t in one_slot.truth() if t["admitted_s"] - t["queued_s"] > 0.05]
    assert waited and {"prefill_holds_queueing", "queue_dominates_ttft"} & warning_codes(results)


@pytest.mark.parametrize("api", APIS)
def test_faults_on_each_api_are_recorded_as_on_chat(start_sim, tmp_path, api):
    """The sim's faults, drawn per request and named in its truth log: a stream cut halfway is a
    failed request (disconnect); a stream without its end event (Messages: no message_stop;
    Responses: no response.completed, which carries the usage) is an anomaly of a request that
    counts."""
    missing = "no_usage" if api == "responses" else "no_done"
    expected = {"no_usage", "no_done"} if api == "responses" else {"no_done"}
    sim = start_sim("--fault", "cut_stream:0.3", "--fault", f"{missing}:0.3", "--seed", "3", "--decode-tps", "2000")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--endpoint", api, *"--pp 64 --tg 16 --runs 12 --warmup 0 -q".split(),
        "--no-report", "-o", str(out),
    )  # fmt: skip
    assert proc.returncode in (0, 3), proc.stderr
    results = json.loads((out / "results.json").read_text())
    truth = {t["request_id"]: t for t in sim.truth()}
    reqs = [r for c in results["cases"] for r in c["requests"]]
    assert {"cut_stream", missing} <= {truth[r["request_id"]]["fault"] for r in reqs}  # the seed draws both
    for r in reqs:
        fault = truth[r["request_id"]]["fault"]
        if fault == "cut_stream":
            assert r["status"] == "error" and r["error_kind"] == "disconnect"
        elif fault == missing:
            assert r["status"] == "ok" and expected <= set(r["anomalies"]), r["anomalies"]
        else:
            assert r["status"] == "ok" and r["anomalies"] == []
