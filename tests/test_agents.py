"""Agent trace replay (issue 53): trajectories read from their formats, replayed against
`benchy sim` on their own clock with sub-agents, judged by the simulator's truth log."""

from __future__ import annotations

import asyncio
import json
import re
import time
from importlib import resources
from pathlib import Path

import pytest

from benchy.load import agent_lengths
from benchy.load.agent_replay import word_floor
from benchy.workloads import agent_samples, agent_trace, trace
from tests import browser
from tests.conftest import client_slack_s, run_benchy_here

FAST = ("--prefill-tps", "100000", "--decode-tps", "3000", "--max-running", "64")
BLOCK = 16  # the simulator's cache block


def run_cli(sim, out: Path, *flags: str, expect_rc: int = 0) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode == expect_rc, proc.stderr
    return json.loads((out / "results.json").read_text())


def measured(case: dict) -> list[dict]:
    return sorted((r for r in case["requests"] if not r["warmup"]), key=lambda r: r["index"])


# ------------------------------------------------------------------ formats


def test_the_shipped_samples_are_made_here():
    for name, text in agent_samples.generate_samples().items():
        assert resources.files("benchy").joinpath("data", name).read_text(encoding="utf-8") == text


def _shape(trace: agent_trace.AgentTrace) -> list[tuple]:
    return [
        (c.session, c.parent is None, c.messages, round(c.start_s or 0, 3), round(c.end_s or 0, 3)) for c in trace.calls
    ]


def test_each_format_is_detected_by_content_and_reads_the_same_trajectories():
    """The same sessions written as chat messages, as OTel GenAI spans and (those without
    sub-agents) as OpenHands events give the same calls: the same messages, times and forks."""
    messages, openhands, otel = (agent_trace.load(n) for n in agent_trace.SAMPLES)
    assert (messages.format, otel.format, openhands.format) == ("messages", "otel", "openhands")
    assert _shape(messages) == _shape(otel)
    assert [c.after for c in messages.calls] == [c.after for c in otel.calls]
    alone = [c for c in messages.calls if c.session != 1]  # the session with sub-agents
    assert [c.messages for c in alone] == [c.messages for c in openhands.calls]
    # sub-agents: two of session 1, forked from its second call, which resumes after both
    subs = {c.agent for c in messages.calls if c.parent is not None}
    assert len(subs) == 2 and messages.sessions == 4
    calls = messages.calls
    firsts = [next(i for i, c in enumerate(calls) if c.agent == a) for a in subs]
    fork = {calls[i].after[0] for i in firsts}
    assert len(fork) == 1 and calls[fork.pop()].parent is None
    resume = next(c for c in calls if c.session == 1 and c.parent is None and len(c.after) == 3)
    lasts = [max(i for i, c in enumerate(calls) if c.agent == a) for a in subs]
    assert sorted(resume.after[1:]) == sorted(lasts)


def test_the_trace_is_read_uncounted_and_the_load_stage_counts_its_lengths():
    """Reading a trajectory counts nothing (the workloads stage holds text); the load stage
    counts each answer's text in o200k where the trace states no usage, takes the usage where
    it does (OTel's gen_ai.usage.output_tokens), and estimates each prompt from its words."""
    from benchy.measure import tokenizer

    messages, _, otel = (agent_trace.load(n) for n in agent_trace.SAMPLES)
    assert all(c.output_tokens is None and c.answer is not None for c in messages.calls)
    assert all(c.output_tokens for c in otel.calls)  # the sample states usage on every span
    requests = agent_lengths.trace_requests("agent-sample")
    assert len(requests) == len(messages.calls)
    for call, req, stated in zip(messages.calls, requests, otel.calls):
        counted = tokenizer.count(agent_trace.message_text(call.answer))
        assert req.output_tokens == agent_lengths.answer_tokens(call) == max(1, counted)
        words = sum(tokenizer.count(agent_trace.message_text(m)) for m in call.messages)
        assert req.input_tokens == words + agent_lengths.MESSAGE_OVERHEAD * len(call.messages)
        assert agent_lengths.answer_tokens(stated) == stated.output_tokens
    assert agent_lengths.trace_requests("agent-sample", 3) == requests[:3]
    assert agent_lengths.trace_requests("sample", 5) == trace.load("sample", 5)  # a request trace as it states


def test_a_file_that_is_no_agent_trace_or_a_broken_one_says_so(tmp_path):
    assert not agent_trace.is_agent_trace(str(tmp_path / "missing.jsonl"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "wizard", "content": "x"}]}\n')
    with pytest.raises(agent_trace.WorkloadError, match="role"):
        agent_trace.load(str(bad))
    proc = run_benchy_here("run", "--trace", str(bad), "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "role" in proc.stderr


def test_unique_part_is_a_floor_of_any_tokenizer():
    message = {"role": "tool", "content": "  12  def parse(x): return x[0] + 345"}
    assert word_floor([message]) == 8  # 12 def parse x return x 0 345: runs of letters or of digits
    from benchy.measure import tokenizer
    from benchy.sim import vocab

    for call in agent_trace.load("agent-sample").calls:
        for m in call.messages:
            text = agent_trace.message_text(m)
            assert word_floor([m]) <= min(vocab.count(text), tokenizer.count(text))


# ------------------------------------------------------------------ replay on the simulator


def test_agent_trace_replays_its_calls_messages_clock_and_sub_agents(start_sim, tmp_path):
    sim = start_sim(*FAST)
    speed = 2.0
    results = run_cli(sim, tmp_path / "out", "--trace", "agent-sample", "--speed", str(speed))
    [case] = results["cases"]
    calls = agent_trace.load("agent-sample").calls
    sent = measured(case)
    assert len(sent) == len(calls) == case["n_ok"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    by_index = {r["index"]: r for r in sent}

    def end(r: dict) -> float:
        return r["sent_mono_s"] + r["end_s"]

    for r, call in zip(sent, calls):
        t = truth[r["request_id"]]
        assert t["completion_tokens"] == agent_lengths.answer_tokens(call)
        assert (r["conversation"], r["group"]) == (call.agent, call.session)
        # Sent only once what it waits for has answered, the trace's own gap ÷ speed after.
        if call.after:
            ready = max(end(by_index[j]) for j in call.after)
            assert r["sent_mono_s"] >= ready + call.gap_s / speed - 0.002
        # The history it shares with an earlier call was sent byte for byte: the simulator
        # served at least that call's prompt (to its last full block) from its cache ...
        assert t["cached_tokens"] >= r["expected_cached_tokens"] // BLOCK * BLOCK
        # ... and nothing of what no other call has (the salt keeps other runs out).
        assert t["cached_tokens"] <= t["prompt_tokens"] - r["unique_tokens"]
    # Calls that waited for an earlier one expected its prompt, as the server counted it.
    extending = 0
    for r, c in zip(sent, calls):
        previous = [by_index[j] for j in c.after if calls[j].agent == c.agent]
        if previous:
            extending += 1
            assert r["expected_cached_tokens"] == truth[previous[0]["request_id"]]["prompt_tokens"]
    assert extending >= len(calls) // 2
    # Sub-agents ran at once: the two children's calls overlap in time.
    subs = sorted({c.agent for c in calls if c.parent is not None})
    spans = [
        (
            min(r["sent_mono_s"] for r in sent if r["conversation"] == a),
            max(end(r) for r in sent if r["conversation"] == a),
        )
        for a in subs
    ]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    assert not {w["code"] for w in results["warnings"]} & {"cache_eviction", "cache_leakage", "cache_not_reused"}


def test_a_call_waiting_out_its_gap_holds_a_timer_not_a_task():
    """An idle session (a call waiting out the trace's tool time) holds one timer until just
    before its due time, and its task only then (issue 53, scale: a sleeping task is about
    fifteen objects that every young collection walks); the task still sends at the due time."""
    from benchy.load import agent_replay

    call = agent_trace.AgentCall(0, 0, None, [{"role": "user", "content": "x"}], 1, after=[], gap_s=0.0)
    waits = agent_trace.AgentCall(0, 0, None, [{"role": "user", "content": "y"}], 1, after=[0], gap_s=0.3)
    started: list[tuple[int, float, float]] = []

    class Watched(agent_replay.AgentReplay):
        async def _call(self, i: int, due: float) -> None:
            while (delay := due - time.perf_counter()) > 0:
                await asyncio.sleep(delay)
            started.append((i, due, time.perf_counter()))
            self._ended(i)

    async def scene() -> tuple[int, int]:
        replay = Watched(None, None, agent_trace.AgentTrace("messages", [call, waits]))  # type: ignore[arg-type]
        replay._ended(0)  # the first call answered: the second is due in 0.3 s
        idle = (len(replay.timers), len(replay.tasks))
        [timer] = replay.timers.values()  # asyncio's own handle here: every timer shares these two
        assert timer._callback is replay._fire_cb and timer._context is replay._context
        await asyncio.wait_for(replay.all_done.wait(), 5)
        return idle

    assert asyncio.run(scene()) == (1, 0)
    [(i, due, sent)] = started
    assert i == 1 and sent >= due  # never early; how late is the benchmark's (make bench-agents)


def test_max_gap_zero_sends_each_call_as_its_answers_come(start_sim, tmp_path):
    sim = start_sim(*FAST)
    results = run_cli(sim, tmp_path / "out", "--trace", "agent-sample-otel", "--max-gap", "0")
    [case] = results["cases"]
    calls = agent_trace.load("agent-sample-otel").calls
    sent = measured(case)
    assert len(sent) == len(calls) and case["workload"]["spec"]["max_gap_s"] == 0
    firsts = [r for r, c in zip(sent, calls) if not c.after]
    # every session starts at once, every other call the moment its last dependency ended
    assert max(r["scheduled_mono_s"] for r in firsts) - min(r["scheduled_mono_s"] for r in firsts) < 1e-6
    by_index = {r["index"]: r for r in sent}
    for r, c in zip(sent, calls):
        if c.after:
            ready = max(by_index[j]["sent_mono_s"] + by_index[j]["end_s"] for j in c.after)
            assert ready - 0.002 <= r["scheduled_mono_s"] <= ready + client_slack_s(case)
    # the trace spans 12 s; without its idle gaps the replay takes a fraction of that
    span = max(r["sent_mono_s"] + r["end_s"] for r in sent) - min(r["sent_mono_s"] for r in sent)
    assert span < calls[-1].end_s / 2


def test_agent_workloads_need_a_history_api_before_anything_is_sent(start_sim, tmp_path):
    sim = start_sim(*FAST)
    for flags in (
        ["--trace", "agent-sample", "--endpoint", "completions"],
        ["--turns", "2", "--subagents", "1", "--endpoint", "completions"],
    ):
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(tmp_path / "out"), *flags)
        assert proc.returncode == 2 and "--endpoint chat, responses or messages" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert sim.truth() == []  # refused before the first request (calibration included)


def _served(sim, case: dict) -> list[tuple[int, int, int]]:
    """(prompt tokens, cached tokens, expected cached) of each measured call, by the truth log."""
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    return [
        (truth[r["request_id"]]["prompt_tokens"], truth[r["request_id"]]["cached_tokens"], r["expected_cached_tokens"])
        for r in measured(case)
    ]


@pytest.mark.parametrize("endpoint", ["responses", "messages"])
def test_agent_traces_and_subagents_replay_on_responses_and_messages(start_sim, tmp_path, endpoint):
    """The agent sample (tool calls and results in its history) and sub-agents on the Responses
    and Messages APIs (function_call / function_call_output items; tool_use / tool_result
    blocks): every call answered, each the same history the server renders on chat (the same
    prompt but for the run's salt, by the simulator's truth), so each is served what it shares."""
    workloads = (
        ["--trace", "agent-sample", "--max-gap", "0"],
        ["--turns", "2", "--subagents", "2", "--pp", "64", "--tg", "8"],
    )
    for k, flags in enumerate(workloads):
        runs = {}
        for api in ("chat", endpoint):
            sim = start_sim(*FAST)
            [case] = run_cli(sim, tmp_path / f"{api}{k}", *flags, "--endpoint", api)["cases"]
            assert case["n_ok"] == len(measured(case)) > 0 and case["endpoint"] == api
            runs[api] = _served(sim, case)
        # the run's salt (a few tokens, each run its own) leads every call: the rest is the same
        shift = {p - q for (p, _, _), (q, _, _) in zip(runs[endpoint], runs["chat"], strict=True)}
        assert len(shift) == 1 and abs(shift.pop()) <= 8
        for prompt, cached, expected in runs[endpoint]:
            assert expected // BLOCK * BLOCK <= cached < prompt  # what it shares is served, the rest is not
        assert sum(e for _, _, e in runs[endpoint]) > 0


def test_scenario_files_take_max_gap_and_subagents(start_sim, tmp_path):
    """A scenario's `max_gap` caps an agent trace's gaps as --max-gap does, and its `subagents`
    forks children each turn as --subagents does (issue 53): the same sends, the same spec."""
    sim = start_sim(*FAST)
    trace = tmp_path / "trace.toml"
    trace.write_text('name = "agents"\nkind = "trace"\ntrace = "agent-sample-otel"\nmax_gap = 0\n')
    [case] = run_cli(sim, tmp_path / "t", "--scenario", str(trace))["cases"]
    calls = agent_trace.load("agent-sample-otel").calls
    sent = measured(case)
    assert len(sent) == len(calls) and case["workload"]["spec"]["max_gap_s"] == 0
    span = max(r["sent_mono_s"] + r["end_s"] for r in sent) - min(r["sent_mono_s"] for r in sent)
    assert span < calls[-1].end_s / 2  # the trace's 12 s of idle gaps left out
    forks = tmp_path / "forks.toml"
    forks.write_text(
        'name = "forks"\nkind = "multi_turn"\nturns = 2\nsubagents = 3\npp = 64\ntg = 8\nconcurrency = 2\n'
    )
    [case] = run_cli(sim, tmp_path / "f", "--scenario", str(forks))["cases"]
    assert case["workload"]["spec"]["subagents"] == 3
    sent = measured(case)
    assert len(sent) == case["n_ok"] == 2 * (2 + 3 * 1)  # -c × (T + N × (T − 1))
    assert len({r["conversation"] for r in sent}) == 2 * (1 + 3)


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('kind = "trace"\ntrace = "agent-sample"\nmax_gap = -1\n', "max_gap must be a number of seconds"),
        ('kind = "trace"\ntrace = "agent-sample"\nmax_gap = "1s"\n', "max_gap must be a number of seconds"),
        ('kind = "trace"\ntrace = "sample"\nmax_gap = 1\n', "agent trace"),
        ('kind = "multi_turn"\nturns = 2\nsubagents = -2\npp = 64\ntg = 8\n', "subagents must be a whole number"),
        ('kind = "multi_turn"\nturns = 2\nsubagents = true\npp = 64\ntg = 8\n', "subagents must be a whole number"),
        ('kind = "multi_turn"\nturns = 1\nsubagents = 2\npp = 64\ntg = 8\n', "--turns 2 or more"),
        ('kind = "trace"\ntrace = "agent-sample"\nsubagents = 2\n', "does not apply to kind"),
    ],
)
def test_bad_scenario_agent_keys_are_one_line_errors(tmp_path, table, words):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\n' + table)
    proc = run_benchy_here("run", "--scenario", str(path), "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_max_gap_needs_an_agent_trace(tmp_path):
    proc = run_benchy_here("run", "--trace", "sample", "--max-gap", "1", "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "agent trace" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ trace lint: causes


def _trace_with_gaps(path: Path, gaps: list[float], sessions: int = 2, words: int = 120) -> Path:
    """Sessions of tool-calling steps whose tool times are `gaps` (s), in the messages format."""
    rows = []
    for s in range(sessions):
        t = 0.01 * s
        messages = [
            {"role": "system", "content": f"Agent {s}. " + " ".join(f"rule{k}" for k in range(words)), "timestamp": t},
            {"role": "user", "content": f"Task {s}: " + " ".join(f"item{s}x{k}" for k in range(words)), "timestamp": t},
        ]
        for k, gap in enumerate(gaps):
            t += 0.05
            call = {"id": f"c{s}_{k}", "type": "function", "function": {"name": "bash", "arguments": f'{{"n": {k}}}'}}
            messages.append({"role": "assistant", "content": f"step {k}", "tool_calls": [call], "timestamp": t})
            t += gap
            result = " ".join(f"out{s}y{k}z{j}" for j in range(words))
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": result, "timestamp": t})
        messages.append({"role": "assistant", "content": "done", "timestamp": t + 0.05})
        rows.append(json.dumps({"session": f"s{s}", "messages": messages}))
    path.write_text("\n".join(rows) + "\n")
    return path


def _lint_of(out: Path) -> tuple[dict, str]:
    results = json.loads((out / "results.json").read_text())
    return results, (out / "report.md").read_text()


def test_lint_names_expiry_when_misses_follow_the_long_tool_times(start_sim, tmp_path):
    """A cache lifetime of 0.5 s: the calls after a 1.5 s tool time find their history gone,
    those after 0.05 s find it; the case's evidence says expiry and the lint repeats it."""
    sim = start_sim(*FAST, "--cache-ttl-s", "0.5")
    trace = _trace_with_gaps(tmp_path / "gaps.jsonl", [0.05, 1.5, 0.05, 1.5, 0.05, 1.5])
    out = tmp_path / "out"
    results = run_cli(sim, out, "--trace", str(trace))
    [case] = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    calls = agent_trace.load(str(trace)).calls
    sent = measured(case)
    lost = [r for r in sent if truth[r["request_id"]]["cached_tokens"] < r["expected_cached_tokens"] // BLOCK * BLOCK]
    long_after = [r for r, c in zip(sent, calls) if c.gap_s > 1.0]
    assert lost and {r["request_id"] for r in lost} == {r["request_id"] for r in long_after}
    _, report = _lint_of(out)
    assert f"Trace lint: {len(lost)} calls served less than expected" in report
    assert "Cause the evidence supports: expiry" in report


def test_lint_names_routing_over_replicas_without_affinity(start_sim, tmp_path):
    sim = start_sim(*FAST, "--replicas", "2", "--route", "rr")
    trace = _trace_with_gaps(tmp_path / "gaps.jsonl", [0.05] * 6, sessions=1)
    out = tmp_path / "out"
    results = run_cli(sim, out, "--trace", str(trace))
    [case] = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    sent = measured(case)
    # the truth: round robin over two replicas, so each call lands where its predecessor was not
    replicas = [truth[r["request_id"]]["replica"] for r in sent]
    assert all(a != b for a, b in zip(replicas, replicas[1:]))
    _, report = _lint_of(out)
    assert "Cause the evidence supports: routing over replicas" in report


def test_report_shows_agents_turns_tasks_and_a_clean_lint(start_sim, tmp_path):
    sim = start_sim(*FAST)
    out = tmp_path / "out"
    results = run_cli(sim, out, "--trace", "agent-sample", "--max-gap", "0.2")
    [case] = results["cases"]
    calls = agent_trace.load("agent-sample").calls
    _, report = _lint_of(out)
    assert "#### Agents" in report and "| sub-agent |" in report
    counted = sorted(r["prompt_tokens"] for r in measured(case))
    assert f"replayed {len(calls)} calls: prompts of {counted[0]:,}–{counted[-1]:,} tokens" in report
    # one row per agent with its number of calls
    for agent in {c.agent for c in calls}:
        n = sum(c.agent == agent for c in calls)
        assert any(line.startswith(f"| {agent} | ") and f"| {n} | 0 |" in line for line in report.splitlines())
    # the tasks' end-to-end latency against the truth: each task's first arrival to its last event
    sent = measured(case)
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    tasks = sorted({c.session for c in calls})
    spans = sorted(
        max(truth[r["request_id"]]["last_token_event_s"] for r in sent if r["group"] == task)
        - min(truth[r["request_id"]]["arrival_s"] for r in sent if r["group"] == task)
        for task in tasks
    )
    match = re.search(r"Tasks: (\d+) finished; .* median ([0-9.]+) s, longest ([0-9.]+) s", report)
    assert match and int(match[1]) == len(tasks)
    # benchy's span runs from its send to its read of the last event: a little wider, never narrower
    slack = client_slack_s(case) + 0.006  # the report rounds to 10 ms
    assert spans[len(spans) // 2] - 0.006 <= float(match[2]) <= spans[len(spans) // 2] + slack
    assert spans[-1] - 0.006 <= float(match[3]) <= spans[-1] + slack
    assert "Trace lint: every call was served the reuse expected" in report
    assert (out / "figures" / "workload-agents-1.png").is_file()


# ------------------------------------------------------------------ sub-agents (--turns --subagents)


def test_subagents_fork_share_the_history_run_at_once_and_the_parent_resumes(start_sim, tmp_path):
    sim = start_sim(*FAST)
    out = tmp_path / "out"
    turns, subs, conversations = 3, 2, 2
    results = run_cli(sim, out, "--turns", str(turns), "--subagents", str(subs), "-c", str(conversations),
                      "--pp", "64", "--tg", "16", "--think-time", "100ms")  # fmt: skip
    [case] = results["cases"]
    sent = measured(case)
    assert len(sent) == case["n_ok"] == conversations * (turns + subs * (turns - 1))
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    for task in range(conversations):
        mine = [r for r in sent if r["group"] == task]
        main = min(r["conversation"] for r in mine)
        mains = sorted((r for r in mine if r["conversation"] == main), key=lambda r: r["turn"])
        children = [r for r in mine if r["conversation"] != main]
        assert [r["turn"] for r in mains] == list(range(1, turns + 1)) and len(children) == subs * (turns - 1)
        for t in range(1, turns):
            fork_end = mains[t - 1]["sent_mono_s"] + mains[t - 1]["end_s"]
            batch = [c for c in children if fork_end <= c["sent_mono_s"] < mains[t]["sent_mono_s"]]
            assert len(batch) == subs
            # each child was served the parent's history: the turn's prompt, as the server counted it
            for c in batch:
                assert c["expected_cached_tokens"] == truth[mains[t - 1]["request_id"]]["prompt_tokens"]
                assert truth[c["request_id"]]["cached_tokens"] >= c["expected_cached_tokens"] // BLOCK * BLOCK
            # run at once: every child of the fork sent before any of them answered
            assert max(c["sent_mono_s"] for c in batch) < min(c["sent_mono_s"] + c["end_s"] for c in batch)
            # the parent resumes after all its children answered and the think time passed
            assert mains[t]["sent_mono_s"] >= max(c["sent_mono_s"] + c["end_s"] for c in batch) + 0.1 - 0.002
    report = (out / "report.md").read_text()
    assert "#### Agents" in report and report.count("| sub-agent |") == conversations * subs * (turns - 1)
    assert results["cases"][0]["workload"]["spec"]["subagents"] == subs


def test_subagents_need_turns_and_chat(tmp_path):
    proc = run_benchy_here("run", "--subagents", "2", "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "--subagents needs --turns" in proc.stderr
    proc = run_benchy_here("run", "--turns", "1", "--subagents", "2", "--base-url", "http://127.0.0.1:9/v1")
    assert proc.returncode == 2 and "--turns 2 or more" in proc.stderr and "Traceback" not in proc.stderr


def _reasoning_trace(path: Path, words: int = 80) -> Path:
    """One session of two user turns, each a tool loop whose assistant messages carry reasoning."""
    messages: list[dict] = [{"role": "system", "content": " ".join(f"rule{k}" for k in range(words))}]
    for turn in range(2):
        messages.append(
            {"role": "user", "content": f"Task {turn}: " + " ".join(f"item{turn}x{k}" for k in range(words))}
        )
        for step in range(3):
            call = {"id": f"c{turn}_{step}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            thought = " ".join(f"think{turn}y{step}z{k}" for k in range(words // 2))
            messages.append(
                {"role": "assistant", "content": f"step {step}", "reasoning_content": thought, "tool_calls": [call]}
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": " ".join(f"out{turn}y{step}z{k}" for k in range(words)),
                }
            )
        messages.append({"role": "assistant", "content": f"answer {turn}", "reasoning_content": "done thinking"})
    path.write_text(json.dumps({"messages": messages}) + "\n")
    return path


def test_lint_names_a_template_that_drops_earlier_reasoning(start_sim, tmp_path):
    """A template that renders reasoning for the last turn only: the first call after the new
    user message finds its history rewritten (the truth counts the reasoning dropped), the tool
    loop's calls do not; benchy's lint names the template, and without it the lint is clean."""
    trace = _reasoning_trace(tmp_path / "reasoning.jsonl")
    sim = start_sim(*FAST, "--reasoning-last-turn")
    out = tmp_path / "out"
    results = run_cli(sim, out, "--trace", str(trace), "--max-gap", "0")
    [case] = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    sent = measured(case)
    short = [r for r in sent if truth[r["request_id"]]["cached_tokens"] < r["expected_cached_tokens"] // BLOCK * BLOCK]
    rewritten = [r for r in sent if r["history_reasoning"]]
    assert len(rewritten) == 1 and [r["request_id"] for r in short] == [r["request_id"] for r in rewritten]
    assert truth[rewritten[0]["request_id"]]["reasoning_dropped"] == 4  # the first turn: 3 steps, its answer
    report = (out / "report.md").read_text()
    assert "Trace lint: 1 calls served less than expected" in report
    assert "a chat template that rewrites history" in report
    plain = start_sim(*FAST)
    run_cli(plain, tmp_path / "plain", "--trace", str(trace), "--max-gap", "0")
    assert "Trace lint: every call was served the reuse expected" in (tmp_path / "plain" / "report.md").read_text()


def test_lint_names_eviction_when_the_cache_drops_part_of_the_history(start_sim, tmp_path):
    """A cache of 200 blocks under six agents' growing histories: LRU drops blocks inside the
    histories (the truth's cache_lost_tokens), and the calls are served prefixes that end
    there, not at an earlier call's end as a replica would: the lint says eviction."""
    sim = start_sim(*FAST, "--cache-blocks", "200")
    out = tmp_path / "out"
    results = run_cli(sim, out, "--trace", "agent-sample", "--max-gap", "0.3")
    [case] = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth() if t["request_id"]}
    sent = measured(case)
    short = [r for r in sent if truth[r["request_id"]]["cached_tokens"] < r["expected_cached_tokens"] // BLOCK * BLOCK]
    evicted = [r for r in short if truth[r["request_id"]]["cache_lost_tokens"]]
    assert short and len(evicted) * 2 > len(short)
    report = (out / "report.md").read_text()
    assert f"Trace lint: {len(short)} calls served less than expected" in report
    assert "Cause the evidence supports: eviction" in report


@browser.needs_browser
def test_agent_report_html_draws_its_agents_in_a_real_browser(start_sim, tmp_path):
    """report.html of an agent replay: the agent tables and the lint as text, and the agents'
    figures drawn with a line a drawn agent, no console error."""
    sim = start_sim(*FAST)
    out = tmp_path / "out"
    run_cli(sim, out, "--trace", "agent-sample", "--max-gap", "0.2")
    agents = len({c.agent for c in agent_trace.load("agent-sample").calls})
    driver = browser.chromium()
    try:
        driver.get((out / "report.html").as_uri())
        browser.wait_drawn(driver)
        text = driver.find_element("tag name", "body").text
        assert "Agents" in text and "sub-agent" in text and "Trace lint" in text
        lines = driver.execute_script(
            "return document.querySelectorAll('#fig-agents-ttft-0 .scatterlayer .trace').length"
        )
        assert lines == agents
        assert browser.console_errors(driver) == []
        browser.screenshot(driver, tmp_path / "report.png")
    finally:
        driver.quit()
