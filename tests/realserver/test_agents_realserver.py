"""Trace replays against a real llama.cpp server (xllamacpp, tiny model): an agent trajectory
and a Mooncake trace, each request's cached tokens (the server's own, its timings' cache_n
too) set against the reuse benchy expected before sending it (issue 53).

One slot, so where each request's prefix sits is known: the slot holds the last prompt
processed, and a request finds there the prefix it shares with that one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchy.workloads import agent_trace, trace

pytestmark = pytest.mark.realserver

REPO_ROOT = Path(__file__).resolve().parents[2]
SAMPLE = REPO_ROOT / "benchy" / "data" / "agent_sample_messages.jsonl"


def run(server, out: Path, *args: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, "-m", "benchy", "run", "--base-url", server.base_url, "-q", "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=REPO_ROOT,
        env=env,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]  # 1: warnings (a real server's own)
    return json.loads((out / "results.json").read_text())


def measured(case: dict) -> list[dict]:
    return sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["index"])


@pytest.fixture(scope="module")
def one_slot(llama_server_factory):
    return llama_server_factory(parallel=1, ctx_per_slot=6144)


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_agent_trajectory_is_served_its_history_turn_by_turn(one_slot, tmp_path, endpoint):
    """A SWE-style trajectory (system, task, tool calls and results): every call is served
    exactly the prompt of the call before it, as llama.cpp counts it, and no more; on the
    Responses and Messages APIs too (function_call items, tool_use / tool_result blocks)."""
    one = tmp_path / "one.jsonl"
    one.write_text(SAMPLE.read_text().splitlines()[0] + "\n")
    results = run(one_slot, tmp_path / "out", "--trace", str(one), "--max-gap", "0.1", "--endpoint", endpoint)
    [case] = results["cases"]
    calls = agent_trace.load(str(one)).calls
    sent = measured(case)
    assert len(sent) == len(calls) >= 4 and all(r["status"] == "ok" for r in sent)
    assert [r["turn"] for r in sent] == list(range(1, len(calls) + 1))
    for before, r in zip(sent, sent[1:]):
        assert r["expected_cached_tokens"] == before["prompt_tokens"] > 0
        assert r["cached_tokens"] == r["expected_cached_tokens"]
        if endpoint != "messages":  # llama.cpp's Messages answers carry no timings
            assert r["cached_tokens"] == r["server_timings"]["cache_n"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "Trace lint: every call was served the reuse expected" in report


@pytest.mark.parametrize("endpoint", ["chat", "responses", "messages"])
def test_sub_agents_reuse_their_parents_history_on_the_slots_holding_it(llama_server, tmp_path, endpoint):
    """Four slots: llama.cpp gives a forked child the slot that holds the parent's history when
    it is free; its other children land on other slots. Each fork has a child served the
    whole history; every figure is the server's own."""
    subs = tmp_path / "subs.jsonl"
    subs.write_text("\n".join(SAMPLE.read_text().splitlines()[1:4]) + "\n")  # the session with sub-agents
    results = run(llama_server, tmp_path / "out", "--trace", str(subs), "--max-gap", "0.1", "--endpoint", endpoint)
    [case] = results["cases"]
    calls = agent_trace.load(str(subs)).calls
    sent = measured(case)
    assert len(sent) == len(calls) and all(r["status"] == "ok" for r in sent)
    if endpoint != "messages":  # llama.cpp's Messages answers carry no timings
        assert all(r["cached_tokens"] == r["server_timings"]["cache_n"] for r in sent)
    firsts = [r for r, c in zip(sent, calls) if c.parent is not None and r["turn"] == 1]
    assert len(firsts) == 2 and max(r["cached_tokens"] for r in firsts) >= firsts[0]["expected_cached_tokens"] > 0
    # the lint lists exactly the calls served short of expected
    short = [
        r for r in sent if r["cached_tokens"] < r["expected_cached_tokens"] - max(1, r["expected_cached_tokens"] // 100)
    ]
    report = (tmp_path / "out" / "report.md").read_text()
    if short:
        assert f"Trace lint: {len(short)} calls served less than expected" in report
    else:
        assert "Trace lint: every call was served the reuse expected" in report


def test_mooncake_trace_is_served_what_the_slot_shares(one_slot, tmp_path):
    """The shipped Mooncake sample on /v1/completions: each request is served what the block
    ids say it shares with the prompt the slot held (the request processed before it), and
    never more than the trace's ideal cache would give it, but for a word two different blocks
    begin with by chance (block texts are drawn from a finite list of one-token words, so a
    block after the shared ones opens with the slot's next word once in |words| times; the
    server then rightly serves that word too, and benchy's leakage check allows that one token)."""
    results = run(one_slot, tmp_path / "out", "--trace", "sample", "--endpoint", "completions", "--requests", "20")
    [case] = results["cases"]
    requests = trace.load("sample", 20)
    sent = measured(case)
    assert len(sent) == 20 and all(r["status"] == "ok" for r in sent)
    by_order = sorted(sent, key=lambda r: r["sent_mono_s"])
    exact = 0
    for previous, r in zip([None, *by_order], by_order):
        assert r["cached_tokens"] == r["server_timings"]["cache_n"]
        assert r["cached_tokens"] <= r["expected_cached_tokens"] + 1
        if previous is None:
            continue
        pair = [requests[previous["index"]], requests[r["index"]]]
        in_slot = trace.expected_reuse(pair)[1]  # what it shares with the slot's prompt
        assert r["cached_tokens"] >= in_slot
        exact += r["cached_tokens"] == r["expected_cached_tokens"]
    assert exact >= len(sent) // 2
