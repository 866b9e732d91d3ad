"""Workload planning (no server): think times, traces and their expected reuse, prompts by
block id and by turn, cases from flags and scenario files."""

from __future__ import annotations

import itertools
import json
import statistics
from pathlib import Path

import pytest

from benchy.load.conversations import assistant_message
from benchy.load.generator import shared_contexts
from benchy.load.plan import CasePlan
from benchy.load.prompts import Calibration, PromptFactory
from benchy.load.replay import trace_requests
from benchy.measure import tokenizer
from benchy.records import CONTENT, REASONING, RequestRecord
from benchy.workloads import cases, trace
from benchy.workloads.case import ScenarioError
from benchy.workloads.scenario import load_scenario
from benchy.workloads.spec import ThinkTime, WorkloadError

# ------------------------------------------------------------------ think time


def take(think: ThinkTime, seed: int, n: int) -> list[float]:
    draws = think.draws(seed)
    return [next(draws) for _ in range(n)]


def test_think_time_specs():
    assert ThinkTime.parse("2") == ThinkTime("fixed", 2.0)
    assert ThinkTime.parse("500ms") == ThinkTime("fixed", 0.5)
    assert ThinkTime.parse(1.5) == ThinkTime("fixed", 1.5)
    assert ThinkTime.parse("exp:2s") == ThinkTime("exponential", 2.0)
    assert ThinkTime.parse("lognormal:1:0.8") == ThinkTime("lognormal", 1.0, 0.8)
    for bad in ("soon", "exp:", "gauss:1", "lognormal:1:-2", "-1", "exp:1:2"):
        with pytest.raises(WorkloadError):
            ThinkTime.parse(bad)


@pytest.mark.parametrize("spec", ["exp:2", "lognormal:2:0.5"])
def test_think_time_draws_are_seeded_with_the_mean_asked(spec):
    think = ThinkTime.parse(spec)
    assert take(think, 7, 5) == take(think, 7, 5) != take(think, 8, 5)
    draws = take(think, 1, 20_000)
    assert min(draws) >= 0 and statistics.fmean(draws) == pytest.approx(2.0, rel=0.05)
    assert take(ThinkTime.parse("0.25"), 3, 3) == [0.25] * 3


# ------------------------------------------------------------------ traces


def write_lines(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_mooncake_trace_expected_reuse(tmp_path):
    rows = [
        {"timestamp": 1000, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 1500, "input_length": 1600, "output_length": 6, "hash_ids": [1, 2, 4, 5]},
        {"timestamp": 1200, "input_length": 700, "output_length": 7, "hash_ids": [9, 2]},  # 2 after 9: new
        {"timestamp": 2500, "input_length": 1100, "output_length": 8, "hash_ids": [1, 2, 3]},  # a repeat
    ]
    requests = trace.load(str(write_lines(tmp_path / "t.jsonl", rows)))
    assert [r.offset_s for r in requests] == [0.0, 0.2, 0.5, 1.5]  # sorted by time, ms → s
    assert [r.input_tokens for r in requests] == [1100, 700, 1600, 1100]
    # The third request shares blocks 1 and 2 with the first; the repeat reuses all but its
    # last token; block id 2 behind 9 is another prefix, so it is not reused.
    assert trace.expected_reuse(requests) == [0, 0, 1024, 1099]
    info = trace.summary(requests)
    assert info["expected_reused_tokens"] == 2123 and info["block_ids"]


def test_what_a_trace_request_could_share_bounds_its_reuse_in_any_order(tmp_path):
    """A request's cached tokens are leakage only above what it could take from any other
    request of the trace: the first request of a pair that reaches the server swapped finds the
    second's blocks, and that is no leakage (a loaded run flagged it as such)."""
    rows = [
        {"timestamp": 1000, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 1500, "input_length": 1600, "output_length": 6, "hash_ids": [1, 2, 4, 5]},
        {"timestamp": 1200, "input_length": 700, "output_length": 7, "hash_ids": [9, 2]},
        {"timestamp": 2500, "input_length": 1100, "output_length": 8, "hash_ids": [1, 2, 3]},
        {"timestamp": 2600, "input_length": 300, "output_length": 8},  # no ids: a prefix of its own
    ]
    requests = trace.load(str(write_lines(tmp_path / "t.jsonl", rows)))
    could = trace.shareable(requests)
    # The first shares all but its last token with its repeat, wherever the repeat comes; the
    # one behind 9 and the one without ids share nothing with anyone.
    assert could == [1099, 0, 1024, 1099, 0]
    for order in itertools.permutations(range(len(requests))):
        reuse = trace.expected_reuse(requests, order)
        assert all(r <= c for r, c in zip(reuse, could)), order


def test_a_replayed_requests_unique_part_is_what_no_other_request_has(tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
        {"timestamp": 1, "input_length": 1100, "output_length": 5, "hash_ids": [1, 2, 3]},
    ]
    path = write_lines(tmp_path / "pair.jsonl", rows)
    requests = trace.load(str(path))
    plan = CasePlan(case=cases.trace_case(str(path)), index=0, runs=1, warmup=0, endpoint="chat", salt="s")
    planned = list(trace_requests(plan, requests, PromptFactory(Calibration(overhead_tokens=0.0, scale=1.0))))
    assert [p.tags.expected_cached_tokens for p in planned] == [0, 1099]  # the trace's order
    assert [p.tags.unique_tokens for p in planned] == [1, 1]  # either may come first


def test_plain_trace_shares_nothing(tmp_path):
    rows = [{"timestamp": t, "input": 600, "output": 4} for t in (0, 100, 200)]
    requests = trace.load(str(write_lines(tmp_path / "plain.jsonl", rows)))
    assert [r.hash_ids for r in requests] == [None] * 3
    assert trace.expected_reuse(requests) == [0, 0, 0]


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "not JSON"),
        ('{"timestamp": -1, "input_length": 5, "output_length": 5}', "timestamp"),
        ('{"timestamp": 0, "input_length": 0, "output_length": 5}', "input_length"),
        ('{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1]}', "one per 512"),
        ("[1, 2]", "JSON object"),
    ],
)
def test_bad_trace_lines_name_file_and_line(tmp_path, line, message):
    path = write_lines(tmp_path / "bad.jsonl", [{"timestamp": 0, "input_length": 5, "output_length": 5}, line])
    with pytest.raises(WorkloadError, match=message) as info:
        trace.load(str(path))
    assert f"{path}:2" in str(info.value) and "\n" not in str(info.value)


def test_missing_and_empty_traces(tmp_path):
    with pytest.raises(WorkloadError, match="not found"):
        trace.load(str(tmp_path / "nope.jsonl"))
    with pytest.raises(WorkloadError, match="no requests"):
        trace.load(str(write_lines(tmp_path / "empty.jsonl", [""])))


def test_shipped_sample_is_the_generated_one():
    shipped = trace.trace_path("sample").read_text(encoding="utf-8")
    assert shipped == trace.sample_text(trace.generate_sample())
    requests = trace.load("sample")
    info = trace.summary(requests)
    assert len(requests) == 40 and 5 < info["span_s"] < 20
    assert 0.2 < info["expected_hit_rate"] < 0.8  # reuse to see, and misses too


# ------------------------------------------------------------------ prompts


def test_trace_blocks_equal_ids_identical_others_disjoint():
    factory = PromptFactory(salt="a")
    one = tokenizer.encode(factory.blocks([1, 2, 3], 1200, 512).text)
    two = tokenizer.encode(factory.blocks([1, 2, 4], 1300, 512).text)
    assert len(one) == 1200 and len(two) == 1300  # exact lengths, partial last block
    assert one[:1024] == two[:1024]
    assert one[1024:1040] != two[1024:1040]  # a different id differs within one cache block
    assert sum(a != b for a, b in zip(one[1024:1040], two[1024:1040])) >= 12
    other_run = tokenizer.encode(PromptFactory(salt="b").blocks([1, 2, 3], 1200, 512).text)
    assert other_run[:16] != one[:16]  # salted per invocation: two replays share nothing


def test_trace_blocks_follow_the_calibration():
    cal = Calibration(overhead_tokens=30, scale=1.0, method="usage")
    prompt = PromptFactory(cal, salt="a").blocks([1, 2], 700, 512)
    assert tokenizer.count(prompt.text) == 670  # the chat template's 30 come on top


def test_turn_messages_are_nonce_led_and_exact():
    factory = PromptFactory(salt="x")
    first, second = factory.message(200), factory.message(200)
    assert tokenizer.count(first.text) == tokenizer.count(second.text) == 200
    assert first.text.startswith(first.nonce) and first.nonce != second.nonce
    assert tokenizer.encode(first.text)[0] != tokenizer.encode(second.text)[0]
    assert PromptFactory(salt="x", nonce=False).message(50).nonce is None


def test_assistant_message_drops_reasoning_unless_kept():
    rec = RequestRecord(
        "c", 0, 0, False, "r", None, 10, 10,
        token_event_text="We thinkThe answer", token_event_chars=[3, 5, 4, 6], token_event_kinds=REASONING * 2 + CONTENT * 2,
    )  # fmt: skip
    assert assistant_message(rec, keep_reasoning=False) == {"role": "assistant", "content": "The answer"}
    kept = assistant_message(rec, keep_reasoning=True)
    assert kept["reasoning_content"] == "We think" and kept["content"] == "The answer"


# ------------------------------------------------------------------ cases


def test_a_shared_prefix_case_expects_the_context_of_each_group():
    """The progress total (expected_records) counts what the load generator sends first: one
    context per group of a shared fraction, none for the unshared baseline."""
    for case in cases.shared_prefix_cases([2048], [32], [4], [0.5], groups=3):
        plan = CasePlan(case, 0, runs=2, warmup=1, endpoint="chat", salt="s")
        sent = shared_contexts(plan, PromptFactory(salt="s"))
        assert len(sent) == plan.contexts == (3 if case.depth else 0)
        assert plan.expected_records == 1 + 2 * 4 + len(sent)


def test_shared_prefix_sweep_includes_the_unshared_baseline():
    made = cases.shared_prefix_cases([2048], [32], [4], [0.5, 0.9], groups=3)
    assert [(c.workload.fraction, c.depth, c.pp, c.groups) for c in made] == [
        (0.0, 0, 2048, 1),
        (0.5, 1024, 1024, 3),
        (0.9, 1843, 205, 3),
    ]
    assert [c.depth_mode for c in made] == ["cold", "cached", "cached"]
    assert len({c.label for c in made}) == 3 and all(c.kind == "shared_prefix" for c in made)
    with pytest.raises(ScenarioError, match="unique part"):
        cases.shared_prefix_cases([100], [8], [1], [0.95])
    with pytest.raises(ScenarioError, match=r"\[0, 1\)"):
        cases.shared_prefix_cases([100], [8], [1], [1.0])


def test_workload_scenarios(tmp_path):
    mt = tmp_path / "chat.toml"
    mt.write_text('kind = "multi_turn"\npp = 128\ntg = 32\nconcurrency = 3\nturns = 5\nthink_time = "exp:1s"\n')
    [case] = load_scenario(str(mt))
    assert case.kind == "multi_turn" and case.concurrency == 3 and case.workload.turns == 5
    assert case.workload.think == ThinkTime("exponential", 1.0)
    sp = tmp_path / "sys.toml"
    sp.write_text('kind = "shared_prefix"\npp = 1000\ntg = 8\nshared_fraction = [0.5]\ngroups = 2\n')
    assert [c.workload.fraction for c in load_scenario(str(sp))] == [0.0, 0.5]
    tr = tmp_path / "replay.toml"
    tr.write_text('kind = "trace"\ntrace = "sample"\nspeed = 2\n')
    [case] = load_scenario(str(tr))
    assert case.kind == "trace" and case.label == "trace sample x2"
    bad = tmp_path / "bad.toml"
    bad.write_text('kind = "multi_turn"\npp = 128\ntg = 32\ngroups = 2\n')
    with pytest.raises(ScenarioError, match="does not apply"):
        load_scenario(str(bad))
    stray = tmp_path / "stray.toml"
    stray.write_text("pp = 128\ntg = 32\nturns = 2\n")
    with pytest.raises(ScenarioError, match="needs a workload kind"):
        load_scenario(str(stray))


def test_csv_traces_of_azure_and_burstgpt(tmp_path):
    azure = tmp_path / "azure.csv"
    azure.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
    )
    first, second = trace.load(str(azure))
    assert (first.input_tokens, first.output_tokens, first.hash_ids) == (374, 44, None)
    assert second.offset_s == pytest.approx(4.314579, abs=1e-5)
    burst = tmp_path / "burst.csv"
    burst.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "5,ChatGPT,472,18,490,Conversation log\n"
        "45,ChatGPT,1087,0,1087,Conversation log\n"
        "118,GPT-4,417,276,693,API log\n"
    )
    requests = trace.load(str(burst))
    assert [(r.offset_s, r.input_tokens) for r in requests] == [(0.0, 472), (113.0, 417)]  # a 0-token failure skipped
    bad = tmp_path / "other.csv"
    bad.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(WorkloadError, match="columns"):
        trace.load(str(bad))
