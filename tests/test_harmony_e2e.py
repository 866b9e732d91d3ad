"""gpt-oss's Harmony format end to end: `benchy run --endpoint completions --template harmony`
against `benchy sim --harmony`, checked against the simulator's ground-truth log and against
the chat endpoint, whose server splits the channels itself.

R analysis tokens, then the final message: a raw completion of n tokens is
  <|channel|>analysis<|message|> (3) + R + <|end|><|start|>assistant<|channel|>final<|message|> (6)
  + n - R - 10 + <|return|> (1).
"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest

from benchy import cli
from benchy import run as run_mod
from benchy.client.client import Client
from benchy.client.draft import Draft
from benchy.client.reader import StreamReader
from benchy.client.settings import ClientSettings
from benchy.load.prompts import Template
from benchy.records import CONTENT, REASONING, RequestRecord, read_records
from benchy.workloads.scenario import sweep
from tests.conftest import SimSince, client_slack_s, shared_sim
from tests.conftest import warning_codes as codes
from tests.test_harmony import EXPECTED_PROMPT

R = 12  # analysis tokens
HEAD, MARKERS = 3, 10  # marker tokens before the analysis text, and in all
# 400 tokens/s: a 40-token answer lasts 100 ms, so a busy client reading late (tens of ms) still
# sees a stream, not the whole answer in one read (which is buffering: nothing to time)
FAST = ("--harmony", "--reasoning-tokens", str(R), "--decode-tps", "400", "--prefill-tps", "100000")

# One Harmony simulator for the tests that use it as is (each reads its own part of the truth log).
harmony_sim = shared_sim(*FAST)
EARLY_S = 0.001  # as tests/test_checks.py: late reads are allowed the case's measured client slack


def bench(
    sim,
    endpoint: str,
    template: Template,
    tmp_path,
    tg: int = 40,
    runs: int = 3,
    stop: tuple[str, ...] = (),
    extra_body: dict | None = None,
) -> tuple[dict, dict]:
    """results, and the full records (token_event_kinds included) by request id."""
    out = tmp_path / f"{endpoint}-{template.name}-{len(stop)}"
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url, extra_body=extra_body),
        cases=sweep([128], [tg], [1]),
        runs=runs,
        warmup=1,
        endpoint=endpoint,
        output_dir=out,
        progress=False,
        template=template,
        stop=stop,
    )
    results = run_mod.execute(settings).to_dict()
    return results, {r.request_id: r for r in read_records(out / "requests.jsonl")}


def measured(results: dict) -> list[dict]:
    return [r for r in results["cases"][0]["requests"] if not r["warmup"]]


def truth_by_id(sim, results: dict) -> dict[str, dict]:
    n = len(results["cases"][0]["requests"]) + 2  # and the two calibration requests
    return {t["request_id"]: t for t in sim.truth(expect=n) if t["request_id"]}


def first_event(truth: dict, kind: str) -> tuple[float, float]:
    """(when its last token was made, when it was written) of the first event of a kind."""
    tokens = 0
    for event in truth["events"]:
        tokens += event["tokens"]
        if event["kind"] == kind:
            return truth["token_times_s"][tokens - 1], event["t_s"]
    raise AssertionError(f"no {kind} event")


def assert_matches_truth(case: dict, measured_s: float, truth: dict, kind: str, sent_s: float) -> None:
    made, written = first_event(truth, kind)
    assert made - sent_s - EARLY_S <= measured_s <= written - sent_s + client_slack_s(case)


def test_benchy_renders_the_pinned_harmony_prompt_for_completions_only():
    # The snapshot lives in test_harmony.py; this pins benchy's send path to it.
    assert Template("harmony").render("What is 2 + 2?", "completions") == EXPECTED_PROMPT
    high = Template("harmony", "high").render("What is 2 + 2?", "completions")
    assert high == EXPECTED_PROMPT.replace("Reasoning: medium", "Reasoning: high")
    assert Template("harmony", "high").render("What is 2 + 2?", "chat") == "What is 2 + 2?"
    assert Template("none").render("What is 2 + 2?", "completions") == "What is 2 + 2?"
    assert Template("harmony").request_options("completions") == {"skip_special_tokens": False}
    assert Template("none", "low").request_options("chat") == {"reasoning_effort": "low"}


def test_completions_with_harmony_template_count_reasoning_and_content_as_chat_does(harmony_sim, tmp_path):
    sim = SimSince(harmony_sim)
    tg = 40
    chat, chat_records = bench(sim, "chat", Template("none", "high"), tmp_path, tg)
    raw, raw_records = bench(sim, "completions", Template("harmony", "high"), tmp_path, tg)
    truth = truth_by_id(sim, chat) | truth_by_id(sim, raw)
    split = REASONING * R + CONTENT * (tg - R - MARKERS)
    for results, records in ((chat, chat_records), (raw, raw_records)):
        assert codes(results, truth=truth) == set(), results["warnings"]
        case = results["cases"][0]
        assert case["n_ok"] == 3 and case["summary"]["ttfc_s"] and case["summary"]["ttft_s"]
        for req in measured(results):
            rec, t = records[req["request_id"]], truth[req["request_id"]]
            # One event per token; the marker tokens carry none on either endpoint.
            assert rec.token_event_kinds == split
            assert t["completion_tokens"] == rec.completion_tokens == tg and t["reasoning_tokens"] == R
            assert rec.reasoning_chars > 0 and rec.content_chars > 0
            assert_matches_truth(case, req["metrics"]["ttft_s"], t, "reasoning", req["sent_mono_s"])
            assert_matches_truth(case, req["metrics"]["ttfc_s"], t, "content", req["sent_mono_s"])
            assert req["metrics"]["ttfc_s"] >= req["metrics"]["ttft_s"]  # equal when one read held both
            assert t["reasoning_effort"] == "high"  # the body field, or the rendered Reasoning line
    for req in measured(raw):
        t = truth[req["request_id"]]
        assert t["skip_special_tokens"] is False and t["stop"] is None
        # Calibration measured the rendered prompt: the server saw pp tokens, template included.
        assert abs(t["prompt_tokens"] - 128) <= 2
    assert raw["setup"]["template"] == "harmony" and raw["setup"]["reasoning_effort"] == "high"
    assert raw["setup"]["calibration"]["overhead_tokens"] > chat["setup"]["calibration"]["overhead_tokens"]


def send(sim, endpoint: str, text: str, template: Template) -> RequestRecord:
    async def go() -> RequestRecord:
        async with Client(ClientSettings(base_url=sim.base_url, model="benchy-sim")) as client:
            rec = RequestRecord("t", 0, 0, False, f"{endpoint}-same", None, 0, 48)
            extra = {"ignore_eos": True, **template.request_options(endpoint)}
            return await client.stream(
                rec, template.render(text, endpoint), 48, endpoint, extra, harmony=template.parses(endpoint)
            )

    return asyncio.run(go())


def test_same_question_gives_the_same_split_on_both_endpoints_with_straddling_events(start_sim):
    # 3 tokens per event: some events hold the end of the analysis, markers and the answer's start.
    sim = start_sim(*FAST, "--tokens-per-event", "3")
    question = "What is the capital of France?"
    chat = send(sim, "chat", question, Template("harmony"))
    raw = send(sim, "completions", question, Template("harmony"))
    assert chat.ok and raw.ok
    assert (raw.reasoning_chars, raw.content_chars) == (chat.reasoning_chars, chat.content_chars)
    assert raw.completion_tokens == chat.completion_tokens == 48
    # The server's own split, non-streamed, is the reference.
    import urllib.request

    body = json.dumps(
        {
            "model": "benchy-sim",
            "messages": [{"role": "user", "content": question}],
            "max_tokens": 48,
            "ignore_eos": True,
        }
    ).encode()
    request = urllib.request.Request(sim.base_url + "/chat/completions", body, {"Content-Type": "application/json"})
    message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    assert chat.reasoning_chars == len(message["reasoning_content"])
    assert chat.content_chars == len(message["content"])
    # Event by event, benchy's kinds are the simulator's: marker-only events carry no token.
    truth = {t["request_id"]: t for t in sim.truth(expect=3)}
    for rec in (chat, raw):
        kinds = [e["kind"] for e in truth[rec.request_id]["events"] if e["kind"] in ("reasoning", "content")]
        assert rec.token_event_kinds == "".join(REASONING if k == "reasoning" else CONTENT for k in kinds)
    assert any(e["kind"] == "marker" for e in truth[raw.request_id]["events"])
    assert "special_tokens_stripped" not in raw.anomalies


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_message_stop_is_detected_as_zero_token_answers(harmony_sim, tmp_path, endpoint):
    sim = SimSince(harmony_sim)
    template = Template("harmony" if endpoint == "completions" else "none")
    results, _ = bench(sim, endpoint, template, tmp_path, runs=2, stop=("<|message|>",))
    case = results["cases"][0]
    assert codes(results) == {"empty_output", "dangerous_stop"}
    stop_warning = next(w for w in results["warnings"] if w["code"] == "dangerous_stop")
    assert stop_warning["severity"] == "error" and "<|message|>" in stop_warning["message"]
    assert "0 tokens" in stop_warning["message"]
    assert case["n_ok"] == 0 and case["errors"] == {"empty_output": 2}
    assert results["setup"]["stop"] == ["<|message|>"]
    assert [d["stop"] for d in results["setup"]["dangerous_stops"]] == ["<|message|>"]
    truth = truth_by_id(sim, results)
    for req in measured(results):
        t = truth[req["request_id"]]
        # The stop really acted (benchy sent no min_tokens to hold it off): 2 tokens, no text.
        assert t["stop"] == ["<|message|>"] and t["completion_tokens"] == 2 and t["finish_reason"] == "stop"
        assert req["content_chars"] == req["reasoning_chars"] == 0


@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_end_stop_leaves_reasoning_only_on_both_endpoints(harmony_sim, tmp_path, endpoint):
    sim = SimSince(harmony_sim)
    template = Template("harmony" if endpoint == "completions" else "none")
    results, records = bench(sim, endpoint, template, tmp_path, runs=2, stop=("<|end|>",))
    case = results["cases"][0]
    assert codes(results) == {"reasoning_only", "output_length_mismatch", "dangerous_stop"}
    short = next(w for w in results["warnings"] if w["code"] == "output_length_mismatch")
    assert "'<|end|>', from --stop" in short["message"] and "Drop --stop" in short["hint"]
    assert case["summary"]["ttfc_s"] is None and case["summary"]["ttft_s"] is not None
    truth = truth_by_id(sim, results)
    for req in measured(results):
        assert records[req["request_id"]].token_event_kinds == REASONING * R
        assert truth[req["request_id"]]["completion_tokens"] == HEAD + R


def test_dangerous_stop_is_warned_before_anything_is_sent(capsys):
    with socket.socket() as s:  # a port nothing listens on: the run itself must fail
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(SystemExit) as exc:
        cli.main(
            [
                "run",
                "-q",
                "--base-url",
                f"http://127.0.0.1:{port}/v1",
                "--endpoint",
                "completions",
                "--template",
                "harmony",
                "--stop",
                "<|return|>",
                "<|end|>",
                "<|message|>",
            ]
        )
    err = capsys.readouterr().err.splitlines()
    assert exc.value.code == 1
    assert err[0].startswith("benchy: warning: --stop '<|end|>' occurs inside every Harmony")
    assert err[1].startswith("benchy: warning: --stop '<|message|>'") and "0 tokens" in err[1]
    assert err[2].startswith("benchy: error: cannot reach the server") and len(err) == 3


def test_stripped_special_tokens_are_detected_and_ttfc_withheld(harmony_sim, tmp_path):
    sim = SimSince(harmony_sim)
    # A proxy that forces skip_special_tokens back on: "analysisWe …assistantfinalThe …".
    results, records = bench(
        sim, "completions", Template("harmony"), tmp_path, extra_body={"skip_special_tokens": True}
    )
    case = results["cases"][0]
    assert codes(results) == {"special_tokens_stripped"}, results["warnings"]
    assert case["summary"]["ttfc_s"] is None
    assert "without its special tokens" in case["unavailable"]["ttfc_s"]
    assert case["summary"]["e2e_tps"] is not None
    truth = truth_by_id(sim, results)
    for req in measured(results):
        assert truth[req["request_id"]]["skip_special_tokens"] is True
        assert "special_tokens_stripped" in req["anomalies"]
        assert set(records[req["request_id"]].token_event_kinds) == {CONTENT}


def test_template_none_sends_the_prompt_as_is(harmony_sim, tmp_path):
    sim = SimSince(harmony_sim)
    results, records = bench(sim, "completions", Template("none"), tmp_path, runs=2)
    truth = truth_by_id(sim, results)
    for req in measured(results):
        t = truth[req["request_id"]]
        # No system message was rendered, skip_special_tokens was not sent, and without a
        # template benchy does not parse channels: the raw text is all content.
        assert t["reasoning_effort"] is None and t["skip_special_tokens"] is True
        assert abs(t["prompt_tokens"] - 128) <= 2
        assert set(records[req["request_id"]].token_event_kinds) == {CONTENT}
    assert results["setup"]["template"] == "none"


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--template", "harmony"], "--template harmony is for --endpoint completions"),
        (["--endpoint", "completions", "--reasoning-effort", "low"], "needs --template harmony"),
        (["--endpoint", "completions", "--template", "harmony", "--stop", ""], "must not be empty"),
        (["--reasoning-effort", "max"], "--reasoning-effort"),
    ],
)
def test_bad_harmony_flags_are_one_line_usage_errors(capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        cli.main(["run", "--base-url", "http://127.0.0.1:9/v1", *argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and words in err and len(err.strip().splitlines()) == 1


def test_a_split_marker_left_at_the_end_of_the_stream_still_counts():
    rec = RequestRecord("t", 0, 0, False, "x", None, 0, 4)
    reader = StreamReader(Draft(rec), harmony=True)
    for i, text in enumerate(["<|channel|>final<|mess", "age|>Hi <", "|"]):
        event = {"choices": [{"index": 0, "text": text, "finish_reason": "stop" if i == 2 else None}]}
        reader.feed(f"data: {json.dumps(event)}\n\n".encode(), [0.1, 0.2, 0.3][i])
    reader.close(0.5)
    rec = reader.rec.record()
    # "<|" could have begun a marker, so it was held back; at the end it is answer text.
    assert rec.content_chars == len("Hi <|") and rec.reasoning_chars == 0
    assert rec.token_event_s == [0.2, 0.3] and rec.token_event_kinds == CONTENT * 2
    assert rec.token_event_chars == [len("Hi "), len("<|")]
