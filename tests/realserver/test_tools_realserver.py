"""Tool calls a real llama.cpp server emits (xllamacpp, tiny random model), read by benchy on
chat, Responses and Messages, streamed and whole, held to the server's own counts (usage, and
on chat its `timings.predicted_n`).

The server runs a chat template with tools (tools_template.jinja: the Qwen2.5/Hermes layout,
each call in <tool_call>…</tool_call>). Verified on this llama.cpp (xllamacpp 2026.10): with
`tool_choice: required` its grammar still lets text come before the first <tool_call> (the
call's grammar is lazy, started by that tag), so a random-weight model writes text until
max_tokens and never calls (test_required_alone_does_not_make_a_random_model_call says so).
Once the assistant turn opens with <tool_call> (a prefilled assistant message), the grammar
holds every token after it: the model emits a call of the tool's schema, which the server
parses and streams as each API's tool-call events. Those are the answers measured here.

Run alone: `pytest -m realserver tests/realserver/test_tools_realserver.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request
from pathlib import Path

import pytest

from benchy.client.client import Client
from benchy.client.settings import ClientSettings
from benchy.measure import classify, reading
from benchy.records import TOOL, RequestRecord
from benchy.records.plan import NO_TAGS, Tagged
from benchy.workloads import tools as tool_defs
from tests.conftest import bare_record, run_benchy

pytestmark = pytest.mark.realserver

TEMPLATE = Path(__file__).resolve().parent / "tools_template.jinja"
APIS = ("chat", "responses", "messages")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "maxLength": 12}},
                "required": ["city"],
            },
        },
    }
]
OPENED = [
    {"role": "user", "content": "What is the weather in Oslo?"},
    {"role": "assistant", "content": "<tool_call>\n"},
]


@pytest.fixture(scope="module")
def tool_server(llama_server_factory):
    return llama_server_factory(parallel=2, extra_args=("--chat-template-file", str(TEMPLATE)))


def send(server, api: str, stream: bool, messages: list[dict], max_tokens: int = 160) -> Tagged:
    settings = ClientSettings(
        base_url=server.base_url, model=server.model, stream=stream, tools=TOOLS, tool_choice="required"
    )

    async def one() -> RequestRecord:
        async with Client(settings) as client:
            rec = dataclasses.replace(
                bare_record(), request_id=f"tools-{api}-{stream}", target_output_tokens=max_tokens
            )
            return await client.stream(rec, "unused", max_tokens, api, extra={"messages": messages})

    return Tagged.joined(asyncio.run(one()), NO_TAGS)  # as the analysis reads it: a record with no plan tags


def tokenize(server, text: str) -> int:
    body = json.dumps({"content": text, "add_special": False}).encode()
    req = urllib.request.Request(server.root_url + "/tokenize", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return len(json.loads(r.read())["tokens"])


def applied(server, tools: list | None) -> str:
    """The prompt the server's chat template makes of one user message (and `tools`)."""
    body: dict = {"messages": [{"role": "user", "content": "hello"}], **({"tools": tools} if tools else {})}
    req = urllib.request.Request(
        server.root_url + "/apply-template", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())["prompt"]


def test_required_alone_does_not_make_a_random_model_call(tool_server):
    """What the module docstring says of this llama.cpp: `tool_choice: required` without the
    opened call lets the random model write text (no call): benchy then reads content."""
    rec = send(tool_server, "chat", False, OPENED[:1], max_tokens=24)
    assert rec.ok and rec.tool_calls == 0 and rec.content_chars > 0 and rec.finish_reason == "length"


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", APIS)
def test_real_tool_calls_are_output_counted_as_the_server_counts_them(tool_server, api, stream):
    rec = send(tool_server, api, stream, OPENED)
    assert rec.ok, rec.error
    # the server parsed a call out of what the model generated, and benchy read it as output
    assert rec.tool_calls >= 1 and rec.tool_chars > 0 and rec.content_chars == 0
    assert "get_weather" in rec.token_event_text and classify.output_failure(rec) is None
    assert rec.finish_reason in ("tool_calls", "length", "stop")
    # benchy's count is the server's: usage, and on chat llama.cpp's own predicted_n beside it
    read = reading.read(rec)
    assert rec.completion_tokens and read.count.tokens == rec.completion_tokens
    if rec.server_timings is not None:
        assert rec.server_timings["predicted_n"] == rec.completion_tokens
        assert "timings.predicted_n" in read.count.backed_by
    # the text read is what the model generated, less the call's frame the parser kept
    # (<tool_call>, "name", "arguments"): the server's own tokenizer counts no more than usage
    assert 0 < tokenize(tool_server, rec.token_event_text) <= rec.completion_tokens
    if stream:
        assert set(rec.token_event_kinds) == {TOOL} and len(rec.token_event_s) > 1
        # TTFT is the first token of any kind: here the call's, so the two figures are one
        assert read.first_tool_event == 0 and rec.token_event_s[0] > 0


@pytest.mark.parametrize("api", APIS)
def test_tools_sent_by_benchy_run_are_in_the_prompt_it_fits_to_pp(tool_server, api):
    """`--tools builtin`: the server renders the definitions into the prompt (its template's
    <tools> block), and benchy's calibration, which sends them too, counts them: the server
    counts exactly --pp prompt tokens on each API, with hundreds of tokens of overhead more than
    the same run without tools."""

    def run(*args: str) -> dict:
        proc = run_benchy(
            "run", "--base-url", tool_server.base_url, "--endpoint", api, "--quiet", "--format", "json",
            *"--pp 1024 --tg 16 --runs 2".split(), *args, timeout=300,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        return json.loads(proc.stdout)

    with_tools, plain = run("--tools", "builtin", "--tool-choice", "required"), run()
    reqs = [r for c in with_tools["cases"] for r in c["requests"] if not r["warmup"]]
    assert reqs and all(r["status"] == "ok" and r["prompt_tokens"] == 1024 for r in reqs)
    assert all("prefill_tps" not in r["unavailable_codes"] for r in reqs)
    grown = with_tools["setup"]["calibration"]["overhead_tokens"] - plain["setup"]["calibration"]["overhead_tokens"]
    # the server's own account of what the definitions add: its template applied with and
    # without them (/apply-template), each counted by its /tokenize
    rendered = [applied(tool_server, tools) for tools in (tool_defs.BUILTIN_TOOLS, None)]
    added = tokenize(tool_server, rendered[0]) - tokenize(tool_server, rendered[1])
    assert added > 0 and abs(grown - added) <= 2, (grown, added)
    assert with_tools["setup"]["tool_choice"] == "required" and len(with_tools["setup"]["tools"]) == 2
    # the random model wrote text, as the module docstring says: benchy says the choice was ignored
    assert all(r["tool_calls"] == 0 for r in reqs)
    assert "tool_choice_ignored" in {w["code"] for w in with_tools["warnings"]}
