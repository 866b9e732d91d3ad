"""Tool calls are output (issue 53, item 1): each API's tool-call events read as text, over real
HTTP against `benchy sim` answering sent tools with calls, judged by its truth log: the calls,
their tokens, when the first one left, a parser that holds the arguments back."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest

from benchy.client import messages, responses, tools
from benchy.client.draft import Draft
from benchy.client.reader import StreamReader
from benchy.measure import classify
from benchy.records import RequestRecord
from benchy.workloads import tools as tool_defs
from tests.conftest import SimSince, bare_record, client_slack_s, run_benchy_here, shared_sim, warning_codes

APIS = ("chat", "responses", "messages")
REASONING = 5
CALLS = 2
sim_fixture = shared_sim(
    "--prefill-tps", "20000", "--decode-tps", "300", "--reasoning-tokens", str(REASONING), "--tool-calls", str(CALLS)
)


@pytest.fixture
def sim(sim_fixture):
    return SimSince(sim_fixture)


def read(stream: bytes, api=None, whole: bool = False, cut: int = 7) -> RequestRecord:
    """The record a reader makes of `stream`, fed in `cut`-byte reads."""
    rec = bare_record()
    reader = StreamReader(Draft(rec), api=api, whole=whole)
    for start in range(0, len(stream), cut):
        reader.feed(stream[start : start + cut], 0.1 + start / 1000)
    reader.close(5.0)
    rec = reader.rec.record()
    return rec


def sse(*objs: dict, named: bool = False) -> bytes:
    head = (lambda o: f"event: {o['type']}\n") if named else (lambda o: "")
    return b"".join(f"{head(o)}data: {json.dumps(o)}\n\n".encode() for o in objs)


# ------------------------------------------------------------------ the readers


def chat_call(index: int, name: str | None = None, arguments: str = "") -> dict:
    fn = {"arguments": arguments} if name is None else {"name": name, "arguments": arguments}
    entry = {"index": index, "function": fn} if name is None else {"index": index, "id": f"c{index}", "function": fn}
    return {"choices": [{"index": 0, "delta": {"content": None, "tool_calls": [entry]}, "finish_reason": None}]}


def test_chat_reader_books_parallel_calls_as_output_and_tool_calls_as_success():
    stream = (
        sse(
            {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
            chat_call(0, "search"),
            chat_call(0, None, '{"q": "a'),
            chat_call(1, "read_file", '{"path"'),
            chat_call(0, None, ' b"}'),
            chat_call(1, None, ': "x"}'),
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
            {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 14}},
        )
        + b"data: [DONE]\n\n"
    )
    for cut in (1, 7, 4096):
        rec = read(stream, cut=cut)
        text = 'search{"q": "aread_file{"path" b"}: "x"}'
        assert rec.ok and rec.token_event_text == text and rec.token_event_kinds == "t" * 5
        assert (rec.tool_calls, rec.tool_chars, rec.content_chars) == (2, len(text), 0)
        # content: null beside a call is no empty delta, and a call is no empty output
        assert rec.content_null_events == 0 and classify.output_failure(rec) is None
        assert rec.finish_reason == "tool_calls" and rec.completion_tokens == 14 and rec.anomalies == []


def test_whole_chat_answer_of_calls_is_output():
    calls = [{"id": "a", "type": "function", "function": {"name": "search", "arguments": '{"q":"x"}'}}] * 2
    body = {
        "choices": [
            {"message": {"role": "assistant", "content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}
        ]
    }
    rec = read(json.dumps({**body, "usage": {"prompt_tokens": 3, "completion_tokens": 8}}).encode(), whole=True)
    assert rec.ok and rec.tool_calls == 2 and rec.token_event_text == 'search{"q":"x"}' * 2
    assert rec.finish_reason == "tool_calls" and classify.output_failure(rec) is None


def test_responses_reader_books_function_calls_and_their_arguments():
    item = {"type": "function_call", "id": "fc_1", "call_id": "c", "name": "search", "arguments": ""}
    stream = sse(
        {"type": "response.created", "response": {"status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": '{"q":'},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "item_id": "fc_1", "delta": '"x"}'},
        {
            "type": "response.function_call_arguments.done",
            "output_index": 0,
            "item_id": "fc_1",
            "arguments": '{"q":"x"}',
        },
        # a server that sends a call's arguments only whole, in its .done
        {"type": "response.output_item.added", "output_index": 1, "item": {**item, "id": "fc_2"}},
        {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_2", "arguments": "{}"},
        {
            "type": "response.completed",
            "response": {"status": "completed", "usage": {"input_tokens": 5, "output_tokens": 9}},
        },
        named=True,
    )
    rec = read(stream, responses)
    assert rec.ok and rec.token_event_text == 'search{"q":"x"}search{}' and rec.tool_calls == 2
    assert rec.finish_reason == "tool_calls" and rec.completion_tokens == 9 and classify.output_failure(rec) is None
    whole = {"object": "response", "status": "completed", "output": [{**item, "arguments": '{"q":"x"}'}]}
    rec = read(json.dumps({**whole, "usage": {"input_tokens": 5, "output_tokens": 6}}).encode(), responses, whole=True)
    assert rec.ok and rec.token_event_text == 'search{"q":"x"}' and rec.finish_reason == "tool_calls"


def test_messages_reader_books_tool_use_blocks_and_input_json():
    block = {"type": "tool_use", "id": "t1", "name": "search", "input": {}}
    stream = sse(
        {"type": "message_start", "message": {"usage": {"input_tokens": 4, "output_tokens": 1}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '{"q":'}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": '"x"}'}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {**block, "id": "t2"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
        {"type": "message_stop"},
        named=True,
    )
    rec = read(stream, messages)
    assert rec.ok and rec.token_event_text == 'search{"q":"x"}search' and rec.tool_calls == 2
    assert rec.finish_reason == "tool_calls" and rec.completion_tokens == 9
    whole = {"type": "message", "content": [{**block, "input": {"q": "x"}}], "stop_reason": "tool_use"}
    rec = read(json.dumps({**whole, "usage": {"input_tokens": 4, "output_tokens": 6}}).encode(), messages, whole=True)
    assert rec.ok and rec.token_event_text == 'search{"q":"x"}' and rec.finish_reason == "tool_calls"


def test_tools_go_in_each_apis_words():
    listed = tool_defs.load("builtin")
    chat = tools.request_fields(listed, "required", "chat")
    assert chat["tools"] == listed and chat["tool_choice"] == "required"
    resp = tools.request_fields(listed, "search", "responses")
    assert resp["tools"][0]["name"] == "search" and resp["tool_choice"] == {"type": "function", "name": "search"}
    msgs = tools.request_fields(listed, "required", "messages")
    assert msgs["tools"][0]["input_schema"]["required"] == ["query"] and msgs["tool_choice"] == {"type": "any"}


def test_a_scenarios_tools_go_over_the_runs_and_an_apis_own_shape_goes_as_given():
    listed = tool_defs.load("builtin")
    one = [listed[1]]
    sent = tools.with_tools({"tools": one, "temperature": 0.5}, listed, "required", "messages")
    assert [t["name"] for t in sent["tools"]] == ["read_file"] and sent["tool_choice"] == {"type": "any"}
    assert sent["temperature"] == 0.5
    own = [{"name": "x", "input_schema": {"type": "object"}}]
    assert tools.with_tools({"tools": own}, None, None, "messages") == {"tools": own}
    extra = {"temperature": 0}
    assert tools.with_tools(extra, None, None, "chat") is extra  # no tools: the request as it was


# ------------------------------------------------------------------ against the simulator


def run_json(sim, tmp_path, *args: str, code: int = 0) -> dict:
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), *args)
    assert proc.returncode == code, proc.stderr
    return json.loads((out / "results.json").read_text())


def measured(results: dict) -> list[dict]:
    return [r for c in results["cases"] for r in c["requests"] if not r["warmup"]]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", APIS)
def test_tool_call_answers_give_the_truths_figures_on_each_api(sim, tmp_path, api, stream):
    args = ["--endpoint", api, "--tools", "builtin", "--tool-choice", "required", *"--pp 128 --tg 48 --runs 3".split()]
    results = run_json(sim, tmp_path, *args, *([] if stream else ["--no-stream"]))
    truth = {t["request_id"]: t for t in sim.truth()}
    assert warning_codes(results, truth=truth) == set()
    assert results["setup"]["tool_choice"] == "required"
    assert [t["function"]["name"] for t in results["setup"]["tools"]] == ["search", "read_file"]
    [case] = results["cases"]
    slack = client_slack_s(case)
    reqs = measured(results)
    assert case["n_ok"] == len(reqs) == 3
    for r in reqs:
        t, m = truth[r["request_id"]], r["metrics"]
        assert t["endpoint"] == api and t["stream"] is stream
        # every output token after the reasoning made a call, two calls an answer
        assert t["tool_calls"] == CALLS == r["tool_calls"] and t["tool_tokens"] == 48 - REASONING
        assert r["status"] == "ok" and r["completion_tokens"] == t["completion_tokens"] == 48
        assert r["token_count"]["tokens"] == 48 and r["content_chars"] == 0 and r["tool_chars"] > 0
        # the text read, counted by the server's own /tokenize where benchy asked it: what it
        # generated, give or take a word joined across the reasoning/name/arguments seams
        told = r["token_count"]["server_tokenize"]
        assert told is None or abs(told - t["completion_tokens"]) <= CALLS + 1
        assert "local" in r["token_count"]["backed_by"]
        if not stream:
            assert m["ttft_s"] is None and m["ttftc_s"] is None and r["unavailable_codes"]["ttftc_s"] == "not_streamed"
            continue
        sent = r["sent_mono_s"]
        first_tool = min(e["t_s"] for e in t["events"] if e["kind"] == "tool")
        # TTFT is the first token of any kind (the reasoning here); the first call comes later
        assert abs(m["ttft_s"] - (t["first_token_event_s"] - sent)) <= slack
        assert abs(m["ttftc_s"] - (first_tool - sent)) <= slack and m["ttftc_s"] >= m["ttft_s"]
        assert m["ttfc_s"] == m["ttftc_s"]  # the answer's first token is the call's


def test_an_answer_that_ends_by_its_calls_succeeds_and_tool_choice_none_gets_text(start_sim, tmp_path):
    natural = start_sim("--ignore-ignore-eos", "--natural-min", "20", "--natural-max", "30", "--decode-tps", "2000")
    for api in APIS:
        results = run_json(
            natural, tmp_path, "--endpoint", api, "--tools", "builtin", *"--pp 64 --tg 64 --runs 2".split()
        )
        truth = {t["request_id"]: t for t in natural.truth()}
        for r in measured(results):
            assert truth[r["request_id"]]["finish_reason"] == "tool_calls" == r["finish_reason"], api
            assert r["status"] == "ok" and r["tool_calls"] == 1 and r["completion_tokens"] < 64
        # short of the 64 asked: said, with the cause the finish_reason shows
        [short] = [w for w in results["warnings"] if w["code"] == "output_length_mismatch"]
        assert "ended with their tool calls" in short["message"]
        assert short["details"]["finish_reasons"] == ["tool_calls"]
    results = run_json(natural, tmp_path, "--tools", "builtin", "--tool-choice", "none", *"--pp 64 --tg 16".split())
    truth = {t["request_id"]: t for t in natural.truth()}
    for r in measured(results):
        assert truth[r["request_id"]]["tool_calls"] is None and r["tool_calls"] == 0 and r["content_chars"] > 0


def test_a_server_that_ignores_tool_choice_required_is_said_to(start_sim, tmp_path):
    """--tool-choice required, and a server that answers text all the same (the sim's
    --tool-calls 0, as llama.cpp lets a random model do): the answers are counted as text, no
    time to first tool call is made up, and tool_choice_ignored says why; with auto it is not."""
    text = start_sim("--tool-calls", "0", "--decode-tps", "2000")
    results = run_json(text, tmp_path, "--tools", "builtin", "--tool-choice", "required", *"--pp 64 --tg 16".split())
    truth = {t["request_id"]: t for t in text.truth()}
    reqs = measured(results)
    assert all(truth[r["request_id"]]["tool_calls"] is None and r["tool_calls"] == 0 for r in reqs)
    assert all(r["status"] == "ok" and r["unavailable_codes"]["ttftc_s"] == "no_tool_call" for r in reqs)
    [ignored] = [w for w in results["warnings"] if w["code"] == "tool_choice_ignored"]
    assert ignored["details"]["requests"] == len(reqs) and "required" in ignored["message"]
    results = run_json(text, tmp_path, "--tools", "builtin", "--tool-choice", "auto", *"--pp 64 --tg 16".split())
    assert "tool_choice_ignored" not in warning_codes(results)


def test_a_request_that_forbids_parallel_calls_gets_one(start_sim, tmp_path):
    two = start_sim("--tool-calls", "2", "--decode-tps", "2000")
    forbid = ("--extra-body", '{"parallel_tool_calls": false}')
    for allowed, extra in ((2, ()), (1, forbid)):
        results = run_json(two, tmp_path, "--tools", "builtin", *extra, *"--pp 64 --tg 32".split())
        truth = {t["request_id"]: t for t in two.truth()}
        assert all(truth[r["request_id"]]["tool_calls"] == allowed == r["tool_calls"] for r in measured(results))


@pytest.mark.parametrize("api", APIS)
def test_a_parser_that_holds_the_arguments_is_buffering(start_sim, tmp_path, api):
    held = start_sim("--tool-parser-buffer", "--decode-tps", "300")
    results = run_json(held, tmp_path, "--endpoint", api, "--tools", "builtin", *"--pp 64 --tg 64 --runs 3".split())
    truth = held.truth()
    # the truth: each call's arguments went out in one event once the call was whole
    assert all(
        max(e["tokens"] for e in t["events"] if e["kind"] == "tool") > 32
        for t in truth
        if t["tool_calls"] and t["stream"]
    )
    assert "sse_buffering" in warning_codes(results)
    [held_back] = [w for w in results["warnings"] if w["code"] == "sse_buffering"]
    assert "tool-call parser" in held_back["message"]
    [case] = results["cases"]
    assert case["unavailable_codes"]["ttft_s"] == "buffered" and case["unavailable_codes"]["ttftc_s"] == "buffered"
    assert all(r["status"] == "ok" and r["completion_tokens"] == 64 for r in measured(results))


def test_a_scenarios_tools_and_choice_are_sent(start_sim, tmp_path):
    sim = start_sim("--decode-tps", "2000", "--tool-calls", "3")
    (tmp_path / "fns.json").write_text(json.dumps({"tools": tool_defs.BUILTIN_TOOLS}))
    scenario = tmp_path / "agent.toml"
    scenario.write_text(
        'name = "agent"\npp = 64\ntg = 40\nendpoint = "messages"\ntools = "fns.json"\ntool_choice = "read_file"\n'
    )
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "--no-report", "-o", str(out), "--scenario", str(scenario)
    )
    assert proc.returncode == 0, proc.stderr
    truth = {t["request_id"]: t for t in sim.truth()}
    lines = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()[1:]]
    records = [r for r in lines if "request_id" in r and not r["warmup"]]
    assert records
    for r in records:
        assert truth[r["request_id"]]["endpoint"] == "messages" and truth[r["request_id"]]["tool_calls"] == 3
        # the forced tool, three times: each call opens with its name
        assert r["status"] == "ok" and r["tool_calls"] == 3 and r["token_event_text"].count("read_file{") == 3


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--tools", "/nonexistent/tools.json"], "cannot read it"),
        (["--tools", "builtin", "--tool-choice", "fly"], "not one of auto, required, none"),
        (["--tool-choice", "required"], "needs tools"),
    ],
)
def test_bad_tools_are_a_one_line_usage_error(args, words):
    proc = run_benchy_here("run", "--base-url", "http://127.0.0.1:9/v1", *args)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and words in err[0], proc.stderr


def test_a_conversations_turns_report_their_first_tool_call(sim, tmp_path):
    """--turns with --tools: each turn's median time to first tool call, from each request's
    own (the truth's first tool event), beside its TTFT; the report shows the column."""
    out = tmp_path / "turns"
    args = ["--tools", "builtin", "--turns", "3", "-c", "2", "--pp", "96", "--tg", "24"]
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    truth = {t["request_id"]: t for t in sim.truth()}
    [case] = results["cases"]
    slack = client_slack_s(case)
    for row in case["workload"]["turns"]:
        reqs = [r for r in measured(results) if r["turn"] == row["turn"]]
        firsts = [min(e["t_s"] for e in truth[r["request_id"]]["events"] if e["kind"] == "tool") for r in reqs]
        assert all(r["tool_calls"] == CALLS for r in reqs)
        told = sorted(f - r["sent_mono_s"] for f, r in zip(firsts, reqs))
        assert told[0] - slack <= row["ttftc_s"] <= told[-1] + slack  # a median of the truth's
        assert row["ttftc_s"] >= row["ttft_s"]  # the reasoning came first
    assert all("first tool call ms" in (out / name).read_text() for name in ("report.md", "report.html"))
