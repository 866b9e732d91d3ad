"""Tool calls a real vLLM server emits (CPU build, tiny random model, vLLM's hermes tool parser),
read by benchy on chat, Responses and Messages, held to the server's own counts and parse.

Why `tool_choice: required` made no call here before (vLLM 0.32): the required and named
choices are xgrammar structural tags over the Hermes frame `<tool_call>{"name": …, "arguments":
…}</tool_call>`, and (1) the tiny tokenizer had no `<`, `>` or `/`, so no token could start the
frame: every token was masked, the sampler took token 0 and the engine ended the request ("grammar
rejected tokens [0]", a 500); (2) with the tags as tokens, a tool without `strict: true` has its
arguments free at the default `--tool-strict-level auto` (structural_tag_registry.py:
resolve_tool_strictness, get_function_parameters returns True), and a random model writes a JSON
number that never ends. The tool model (`tiny_hf_model.py OUT tools`) has the tags; the server runs with
`--tool-strict-level parameter` (conftest.vllm_tool_server), and every answer is calls.

Opt-in: `make test-vllm` (see conftest.py); skipped without $BENCHY_VLLM_PYTHON.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import urllib.request

import pytest

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.measure import classify, reading
from benchy.records import TOOL, RequestRecord
from benchy.records.plan import NO_TAGS, Tagged
from tests.conftest import bare_record
from tests.vllmserver.test_vllm_server import benchy_run, measured

pytestmark = pytest.mark.vllm

APIS = ("chat", "responses", "messages")
PROMPT = "What is the weather in Oslo, and the time there?"


def _short(name: str, arg: str) -> dict:
    """A tool whose one argument is at most 12 characters: its schema pinned, every call a
    random model makes is whole within a few dozen tokens."""
    params = {"type": "object", "properties": {arg: {"type": "string", "maxLength": 12}}, "required": [arg]}
    return {"type": "function", "function": {"name": name, "description": f"The {arg}.", "parameters": params}}


SHORT = [_short("get_weather", "city"), _short("get_time", "zone")]
# Sampled, seeded: at temperature 0 this model writes the whitespace JSON allows between tokens
# and never ends a call (test_whitespace_the_parser_holds_back_is_said_to_be_buffered); a seed makes a
# streamed and a whole answer the same generation.
SAMPLED = {"temperature": 1.0, "seed": 7}


def one_call(api: str) -> dict:
    """The request fields that allow one call an answer, in `api`'s words."""
    if api == "messages":
        return {"tool_choice": {"type": "any", "disable_parallel_tool_use": True}}
    return {"parallel_tool_calls": False}


def send(server, api: str, stream: bool, choice: str = "required", max_tokens: int = 160, **fields) -> Tagged:
    """One request through benchy's client, as a run sends it but without the exact-length
    options (ignore_eos, min_tokens), so that an answer can end by its calls."""
    settings = ClientSettings(
        base_url=server.base_url, model=server.model, stream=stream, tools=SHORT, tool_choice=choice
    )

    async def one() -> RequestRecord:
        async with Client(settings) as client:
            rec = dataclasses.replace(
                bare_record(), request_id=f"tools-{api}-{stream}", target_output_tokens=max_tokens
            )
            return await client.stream(rec, PROMPT, max_tokens, api, extra=fields)

    return Tagged.joined(asyncio.run(one()), NO_TAGS)  # as the analysis reads it: a record with no plan tags


def whole_chat(server, **fields) -> dict:
    """The server's own answer, read here (not by benchy): the calls its parser made."""
    body = {
        "model": server.model, "messages": [{"role": "user", "content": PROMPT}], "tools": SHORT,
        "max_tokens": 160, **fields,
    }  # fmt: skip
    req = urllib.request.Request(
        f"{server.base_url}/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=300) as resp:
        return json.loads(resp.read())


@pytest.mark.parametrize("api", APIS)
def test_required_makes_the_random_model_call_and_the_call_ends_the_answer(vllm_tool_server, api):
    rec = send(vllm_tool_server, api, True, **SAMPLED, **one_call(api))
    assert rec.ok, rec.error
    # one call, whole: the grammar ended the answer after it (an end of sequence, not max_tokens)
    assert rec.tool_calls == 1 and rec.tool_chars > 0 and rec.content_chars == 0
    assert rec.finish_reason == "tool_calls" and classify.output_failure(rec) is None
    assert 0 < rec.completion_tokens < 160
    read = reading.read(rec)
    assert read.count.tokens == rec.completion_tokens
    # streamed as made: the name, then the arguments in pieces; TTFT is the call's first token
    assert set(rec.token_event_kinds) == {TOOL} and len(rec.token_event_s) > 2
    assert read.first_tool_event == 0


def test_a_streamed_call_is_the_one_the_server_parses_whole(vllm_tool_server):
    """One seed: the same generation streamed (read by benchy) and whole (read here, the
    server's own parse): the same call, its name and arguments, the same usage."""
    whole = whole_chat(vllm_tool_server, tool_choice="required", parallel_tool_calls=False, **SAMPLED)
    [choice] = whole["choices"]
    [call] = choice["message"]["tool_calls"]
    assert choice["finish_reason"] == "tool_calls"
    rec = send(vllm_tool_server, "chat", True, parallel_tool_calls=False, **SAMPLED)
    assert rec.ok and rec.tool_calls == 1
    # the whole answer's arguments are re-serialized by the parser; the streamed ones are the
    # model's own text, whitespace and all: the same JSON
    fn = call["function"]
    name, streamed = rec.token_event_text[: len(fn["name"])], rec.token_event_text[len(fn["name"]) :]
    assert name == fn["name"] and json.loads(streamed) == json.loads(fn["arguments"])
    assert rec.completion_tokens == whole["usage"]["completion_tokens"]


def test_a_named_choice_calls_that_function(vllm_tool_server):
    """`tool_choice` naming get_time: the call is get_time (not the first tool), and vLLM ends a
    named call with finish_reason stop (OpenAI's words for a forced function), still output."""
    named = {"type": "function", "function": {"name": "get_time"}}
    whole = whole_chat(vllm_tool_server, tool_choice=named, **SAMPLED)
    [call] = whole["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "get_time"
    rec = send(vllm_tool_server, "chat", True, choice="get_time", **SAMPLED)
    assert rec.ok and rec.tool_calls == 1 and rec.token_event_text.startswith("get_time{")
    assert rec.finish_reason == whole["choices"][0]["finish_reason"] == "stop"
    assert classify.output_failure(rec) is None


def test_whitespace_the_parser_holds_back_is_said_to_be_buffered(vllm_tool_server):
    """Temperature 0: after the arguments' `{` this model writes only the whitespace JSON allows,
    to max_tokens (the whole answer, read here, is that raw text: no call parsed). vLLM's hermes
    parser strips a partial call's trailing whitespace (hermes_tool_parser.py,
    _extract_tool_call_jsons: `raw.strip()`), so the stream carries the name and `{`, then
    nothing: 150-odd tokens held back and never sent. benchy counts them by usage and calls the
    stream buffered, naming the tool-call parser, its stream figures withheld."""
    whole = whole_chat(vllm_tool_server, tool_choice="required", temperature=0)
    content = whole["choices"][0]["message"]["content"]
    head, opened, rest = content.partition('"arguments": {')
    assert opened and rest and not rest.strip()
    name = re.search(r'"name": "(\w+)"', head)[1]
    rec = send(vllm_tool_server, "chat", True, temperature=0)
    assert rec.ok and classify.output_failure(rec) is None
    assert rec.token_event_text == name + "{" and rec.tool_calls == 1
    assert rec.completion_tokens == whole["usage"]["completion_tokens"] == 160
    read = reading.read(rec)
    assert read.count.tokens == 160 and classify.is_buffered(rec, read)
    assert classify.TOOL_PARSER in classify.buffering_reason(rec, read)


@pytest.mark.parametrize("sampled", [False, True], ids=["greedy", "sampled"])
@pytest.mark.parametrize("api", APIS)
def test_benchy_run_with_builtin_tools_counts_vllms_calls(vllm_tool_server, tmp_path, api, sampled):
    """`benchy run --tools builtin --tool-choice required`, as a user runs it: exact-length
    options sent (ignore_eos, min_tokens), so every answer is calls to max_tokens (finish
    length). The figures are the server's: usage, and vLLM's /metrics over the case. Greedy,
    the parser holds the whitespace back (the test above) and the case says so; sampled, the
    arguments are text the parser streams as it is made."""
    args = ["--endpoint", api, "--tools", "builtin", "--tool-choice", "required", *"--pp 768 --tg 64 --runs 3".split()]
    if sampled:
        args += ["--extra-body", json.dumps(SAMPLED)]
    results = benchy_run(vllm_tool_server, *args, out=tmp_path)
    [case] = results["cases"]
    requests = measured(case)
    codes = {w["code"] for w in results["warnings"]}
    assert case["n_ok"] == len(requests) == 3 and not codes & {"empty_output", "tool_choice_ignored"}
    for r in requests:
        assert r["status"] == "ok" and r["tool_calls"] >= 1 and r["tool_chars"] > 0 and r["content_chars"] == 0
        # the tool definitions are in the prompt, and calibration counted them as vLLM does
        assert r["prompt_tokens"] == 768
        assert r["completion_tokens"] == 64 and r["token_count"]["tokens"] == 64
        m = r["metrics"]
        if m["ttftc_s"] is None:  # withheld, with the reason
            assert r["unavailable_codes"]["ttftc_s"] == "buffered"
            continue
        # the answer's first token is the call's name: the three first-token figures are one
        assert m["ttftc_s"] == m["ttfc_s"] == m["ttft_s"] and 0 < m["ttftc_s"] < m["e2e_s"]
    counters = case["server"]["counters"]
    assert counters["generation_tokens"] == sum(r["completion_tokens"] for r in requests)
    assert counters["prompt_tokens"] == sum(r["prompt_tokens"] for r in requests)
    held = [w for w in results["warnings"] if w["code"] == "sse_buffering"]
    assert all("tool-call parser" in w["message"] for w in held)
    print(f"[vllm tools] {api} {'sampled' if sampled else 'greedy'}: {'; '.join(map(_line, requests))}")
    print(f"[vllm tools] /metrics generation tokens {counters['generation_tokens']:.0f}; warnings {sorted(codes)}")


def _line(r: dict) -> str:
    ttftc = r["metrics"]["ttftc_s"]
    first = "withheld" if ttftc is None else f"{ttftc * 1000:.0f} ms"
    return f"{r['tool_calls']} call, {r['tool_chars']} chars in {r['sse_events']} events, usage {r['completion_tokens']}, ttftc {first}"


def test_whole_answers_cut_at_the_limit_are_said_so(vllm_tool_server, tmp_path):
    """--no-stream: benchy's exact length cuts each call (greedy: whitespace to max_tokens), and
    vLLM's whole-answer parser cannot parse a cut call (hermes_tool_parser.py: json.loads of its
    half raises; "Error in extracting tool call" in its log), so it answers the model's raw text
    as content. Its grammar did enforce the call: the text is the call's frame, and benchy's
    tool_choice_ignored says so instead of blaming the choice."""
    args = ["--tools", "builtin", "--tool-choice", "required", "--no-stream", *"--pp 768 --tg 64 --runs 3".split()]
    results = benchy_run(vllm_tool_server, *args, out=tmp_path)
    [case] = results["cases"]
    requests = measured(case)
    assert case["n_ok"] == len(requests) == 3
    assert all(r["tool_calls"] == 0 and r["finish_reason"] == "length" for r in requests)
    rows = [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()[1:]]
    texts = [row["token_event_text"] for row in rows if not row.get("warmup") and "token_event_text" in row]
    assert len(texts) == 3 and all(re.match(r'<tool_call>\s*\{"name": "(search|read_file)"', t) for t in texts)
    [ignored] = [w for w in results["warnings"] if w["code"] == "tool_choice_ignored"]
    assert "could not parse a call the limit cut" in ignored["message"]
    counters = case["server"]["counters"]
    assert counters["generation_tokens"] == sum(r["completion_tokens"] for r in requests) == 3 * 64
