"""Cache-aware workloads end to end: `benchy run` against `benchy sim`, judged by its truth log.

The simulator's prefix cache (16-token blocks, LRU over --cache-blocks) logs, per request, the
cached tokens it served and the tokens it would have served had they not been evicted
(cache_lost_tokens): that is the truth each workload's figures and warnings are held to.
"""

from __future__ import annotations

import csv
import json
import statistics
from pathlib import Path

import pytest

from benchy.workloads import trace
from tests.conftest import run_benchy_here, truth_slack_s
from tests.test_run import truth_ttft

FAST = ("--prefill-tps", "100000", "--decode-tps", "3000", "--max-running", "64")
BLOCK = 16


def run_cli(sim, out: Path, *flags: str, expect_rc: int = 0) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode == expect_rc, proc.stderr
    return json.loads((out / "results.json").read_text())


def measured(case: dict) -> list[dict]:
    return [r for r in case["requests"] if not r["warmup"]]


def truth_of(sim, case: dict) -> dict:
    return {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}


def codes(results: dict) -> set[str]:
    return {w["code"] for w in results["warnings"]}


# ------------------------------------------------------------------ multi-turn


def test_multi_turn_reports_the_history_the_sim_reused(start_sim, tmp_path):
    # Tokens 20 ms apart: at FAST's 3,000 t/s a loaded CI run's client read 14 of an answer's 24
    # tokens in its first read, benchy rightly withheld TTFT for SSE buffering, and the TTFT-by-turn
    # figure this test reads was not drawn.
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "50", "--max-running", "64", "--reasoning-tokens", "5")
    results = run_cli(
        sim,
        tmp_path / "out",
        "--turns",
        "4",
        "-c",
        "3",
        "--pp",
        "120",
        "--tg",
        "24",
        "--think-time",
        "exp:20ms",
        "--seed",
        "4",
    )
    [case] = results["cases"]
    assert case["kind"] == "multi_turn" and case["n_ok"] == 12 and case["n_failed"] == 0
    truth = truth_of(sim, case)
    by_conversation: dict[int, list[dict]] = {}
    for r in measured(case):
        t = truth[r["request_id"]]
        assert r["cached_tokens"] == t["cached_tokens"] and r["prompt_tokens"] == t["prompt_tokens"]
        assert t["cache_lost_tokens"] == 0  # a large cache: nothing evicted
        if r["turn"] > 1:
            # The whole history the server had prefilled (its full blocks) was reused.
            assert t["cached_tokens"] == r["expected_cached_tokens"] // BLOCK * BLOCK > 0
        by_conversation.setdefault(r["conversation"], []).append(r)
    # Each turn adds the previous answer's content (its reasoning dropped), the new message and
    # the same few template tokens: the answer went back as the server streamed it.
    framing = set()
    for turns in by_conversation.values():
        turns.sort(key=lambda r: r["turn"])
        assert [r["turn"] for r in turns] == [1, 2, 3, 4]
        for before, after in zip(turns, turns[1:]):
            content = before["completion_tokens"] - before["reasoning_tokens"]
            framing.add(after["prompt_tokens"] - before["prompt_tokens"] - content - after["unique_tokens"])
    assert len(framing) == 1 and 0 < framing.pop() < 16
    figures = case["workload"]
    rows = figures["turns"]
    assert [row["turn"] for row in rows] == [1, 2, 3, 4] and all(row["n_ok"] == 3 for row in rows)
    assert rows[3]["cached_tokens"] > rows[2]["cached_tokens"] > rows[1]["cached_tokens"]
    assert figures["reuse"]["reported_tokens"] == sum(truth[r["request_id"]]["cached_tokens"] for r in measured(case))
    assert figures["eviction"] is None and figures["leakage"] is None
    assert not codes(results) & {
        "cache_eviction",
        "cache_leakage",
        "cache_not_reused",
        "prefix_cache_hit",
        "server_cache_hit",
    }
    assert case["server"]["counters"]["cache_hits"] > 0  # the server saw the hits (/metrics), as meant
    report = (tmp_path / "out" / "report.md").read_text()
    assert "TTFT by turn" in report and (tmp_path / "out" / "figures" / "workload-turns-1.png").is_file()


def test_eviction_warning_fires_at_the_turn_the_truth_shows(start_sim, tmp_path):
    """Three conversations through a 120-block cache: their histories outgrow it by turn 4 or
    5, and the first turn that loses reuse in the truth log is the one the warning names."""
    sim = start_sim(*FAST, "--cache-blocks", "120")
    results = run_cli(sim, tmp_path / "out", "--turns", "6", "-c", "3", "--pp", "150", "--tg", "16")
    [case] = results["cases"]
    truth = truth_of(sim, case)
    ours = {r["request_id"] for r in measured(case)}
    lost = sorted(
        (t for rid, t in truth.items() if rid in ours and t["cache_lost_tokens"]), key=lambda t: t["arrival_s"]
    )
    assert lost, "the cache was meant to be too small for this load"
    first = next(r for r in measured(case) if r["request_id"] == lost[0]["request_id"])
    [warning] = [w for w in results["warnings"] if w["code"] == "cache_eviction"]
    assert warning["details"]["request_id"] == first["request_id"]
    assert (warning["details"]["turn"], warning["details"]["conversation"]) == (first["turn"], first["conversation"])
    assert f"turn {first['turn']}" in warning["message"]
    # Every request that lost reuse in the truth is counted, and only those.
    assert warning["details"]["requests"] == len(lost)
    assert warning["details"]["lost_tokens"] >= sum(t["cache_lost_tokens"] for t in lost)


def test_broken_nonce_shows_as_leakage(start_sim, tmp_path):
    """--no-nonce makes every conversation the same text: the second one's first turn finds the
    first one's message cached, more than a conversation could share."""
    sim = start_sim(*FAST)
    results = run_cli(sim, tmp_path / "out", "--turns", "2", "-c", "2", "--pp", "100", "--tg", "8", "--no-nonce")
    assert "cache_leakage" in codes(results)
    results = run_cli(sim, tmp_path / "nonce", "--turns", "2", "-c", "2", "--pp", "100", "--tg", "8")
    assert "cache_leakage" not in codes(results)


# ------------------------------------------------------------------ shared prefix


def test_shared_prefix_hit_rates_equal_the_truth(start_sim, tmp_path):
    sim = start_sim("--prefill-tps", "20000", "--decode-tps", "3000", "--max-running", "64")
    results = run_cli(
        sim, tmp_path / "out", "--shared-prefix", "0.5", "0.9", "--groups", "2", "--pp", "2000", "--tg", "4", "-c", "2",
        "--runs", "3", "--warmup", "0",
    )  # fmt: skip
    cases = {c["workload"]["spec"]["fraction"]: c for c in results["cases"]}
    assert sorted(cases) == [0.0, 0.5, 0.9]
    truth = {t["request_id"]: t for t in sim.truth(expect=sum(len(c["requests"]) for c in cases.values()))}
    for fraction, case in cases.items():
        rows = [truth[r["request_id"]] for r in measured(case)]
        reuse = case["workload"]["reuse"]
        assert reuse["reported_hit_rate"] == pytest.approx(
            sum(t["cached_tokens"] for t in rows) / sum(t["prompt_tokens"] for t in rows)
        )
        # Each group's prefix is served whole (to its last full block), plus the template head.
        assert reuse["reported_hit_rate"] >= fraction * 0.95
        assert {r["group"] for r in measured(case)} == ({0, 1} if fraction else {None})
    # The TTFT gain is the one the simulator delivered: each median TTFT within the measured
    # slack of the truth's (benchy's own lag plus the simulator's), the speedup their ratio, and a
    # gain asserted where the truth's is clear of that slack (on a busy machine benchy's measured
    # lag alone can pass the 0.1-0.18 s the cache saves here).
    delivered = {f: _delivered_ttft(c, truth) for f, c in cases.items()}
    for fraction in (0.5, 0.9):
        gain = cases[fraction]["workload"]["ttft_gain"]
        assert gain["baseline"] == cases[0.0]["label"]
        assert gain["speedup"] == pytest.approx(gain["baseline_ttft_s"] / gain["ttft_s"])
        for ttft, f in ((gain["baseline_ttft_s"], 0.0), (gain["ttft_s"], fraction)):
            assert abs(ttft - delivered[f][0]) <= delivered[f][1]
        if _clearly_faster(delivered[fraction], delivered[0.0]):
            assert gain["speedup"] > 1
    if _clearly_faster(delivered[0.9], delivered[0.5]):
        assert cases[0.9]["workload"]["ttft_gain"]["speedup"] > cases[0.5]["workload"]["ttft_gain"]["speedup"]
    # The prefixes (and the chat template's head) are all that was served from cache.
    assert not codes(results) & {"cache_leakage", "depth_cache_miss", "prefix_cache_hit"}
    assert "TTFT by shared fraction" in (tmp_path / "out" / "report.md").read_text()


def _delivered_ttft(case: dict, truth: dict) -> tuple[float, float]:
    """(the truth's median TTFT over the case's requests, the most either side of it benchy's
    may lie): each request's TTFT within its slack makes the medians that close too."""
    rows = [(truth[r["request_id"]], case) for r in measured(case)]
    return statistics.median(truth_ttft(t) for t, _ in rows), max(truth_slack_s(c, t) for t, c in rows)


def _clearly_faster(faster: tuple[float, float], slower: tuple[float, float]) -> bool:
    """The truth's medians are apart by more than both slacks: any figure within them keeps the order."""
    return faster[0] + faster[1] < slower[0] - slower[1]


# ------------------------------------------------------------------ trace replay


def test_sample_trace_replays_its_lengths_times_and_reuse(start_sim, tmp_path):
    sim = start_sim(*FAST)
    speed = 2.0
    results = run_cli(sim, tmp_path / "out", "--trace", "sample", "--speed", str(speed), "--endpoint", "completions")
    [case] = results["cases"]
    requests = trace.load("sample")
    truth = truth_of(sim, case)
    sent = sorted(measured(case), key=lambda r: r["index"])
    assert len(sent) == len(requests) == case["n_ok"]
    # The reuse the simulator could serve, in the order it got the requests: a busy machine can
    # deliver two requests due close together swapped, and the later one then finds the prefix.
    arrived = sorted(range(len(sent)), key=lambda i: truth[sent[i]["request_id"]]["arrival_s"])
    expected = trace.expected_reuse(requests, arrived)
    start = sent[0]["scheduled_mono_s"] - requests[0].offset_s / speed
    for r, req, reuse in zip(sent, requests, expected):
        t = truth[r["request_id"]]
        assert t["prompt_tokens"] == req.input_tokens and t["completion_tokens"] == req.output_tokens
        # Each request is due at its trace time ÷ speed; one that left late (a busy machine can
        # hold a send back) says so in its record, and arrived that much later.
        assert r["scheduled_mono_s"] - start == pytest.approx(req.offset_s / speed, abs=1e-6)
        late = r["sent_mono_s"] - r["scheduled_mono_s"]
        assert late >= 0 and late <= case["send_lag"]["max"] + 1e-9
        # It reached the simulator (the same clock) after benchy sent it and before benchy
        # saw the answer's headers: a busy machine's late read is bounded by the record itself.
        assert r["sent_mono_s"] <= t["arrival_s"] <= r["sent_mono_s"] + r["headers_s"]
        # Without a chat template, blocks align with the cache's: the expected reuse is what
        # the simulator served, to the last full 16-token block.
        assert t["cached_tokens"] == reuse // BLOCK * BLOCK
    figures = case["workload"]
    assert figures["reuse"]["expected_tokens"] == sum(trace.expected_reuse(requests))
    assert figures["reuse"]["reported_tokens"] == sum(truth[r["request_id"]]["cached_tokens"] for r in sent)
    # Reuse beyond the trace's order is what benchy reports as leakage; where the simulator
    # truly got requests swapped, that reuse happened (the truth), so only eviction is ruled out.
    ruled_out = {"cache_eviction"} if arrived != sorted(arrived) else {"cache_eviction", "cache_leakage"}
    assert case["mode"] == "open" and not codes(results) & ruled_out
    assert (tmp_path / "out" / "figures" / "workload-reuse-1.png").is_file()


def test_a_trace_replay_is_shown_as_its_own_load_not_concurrency_1(start_sim, tmp_path):
    """A replay has arrivals, not a concurrency: results record none, the CSV leaves
    concurrency, pp and tg empty, and stdout shows its load figures and the lengths it replayed
    (held to the lengths the simulator was sent)."""
    sim = start_sim(*FAST)
    out = tmp_path / "out"
    flags = ("--trace", "sample", "--speed", "4", "--requests", "12", "--endpoint", "completions", "--warmup", "0")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode == 0, proc.stderr
    [case] = json.loads((out / "results.json").read_text())["cases"]
    assert case["concurrency"] is None and case["mode"] == "open"
    replayed = {r["request_id"] for r in case["requests"] if not r["warmup"]}  # not those sent alone first
    truth = [t for t in sim.truth(expect=12) if t["request_id"] in replayed]
    sent = [t["prompt_tokens"] for t in truth]
    outputs = [t["completion_tokens"] for t in truth]
    assert len(sent) == 12
    assert "aggregate t/s" in proc.stdout and "the trace's times" in proc.stdout
    assert f"replayed 12 requests: prompts of {min(sent):,}–{max(sent):,} tokens" in proc.stdout
    assert f"outputs of {min(outputs):,}–{max(outputs):,} tokens" in proc.stdout
    # Not labelled as concurrency 1 anywhere but in a warning's words (a loaded machine may queue
    # the replay, and the queueing hint names concurrency 1 as what to measure at).
    said = [
        line
        for line in (proc.stdout + proc.stderr).splitlines()
        if not line.lstrip().startswith(("hint:", "warning:", "info:"))
    ]
    assert not [line for line in said if "concurrency 1" in line]
    row = next(csv.DictReader((out / "results.csv").read_text().splitlines()))
    assert (row["concurrency"], row["pp"], row["tg"], row["mode"]) == ("", "", "", "open")


@pytest.mark.parametrize(
    "sim_flag, code",
    [("--no-prefix-cache", "cache_not_reused"), ("--no-prompt-details", "cache_not_reported")],
)
def test_a_server_that_does_not_reuse_or_does_not_say_is_named(start_sim, tmp_path, sim_flag, code):
    sim = start_sim(*FAST, sim_flag)
    results = run_cli(sim, tmp_path / "out", "--turns", "3", "-c", "2", "--pp", "100", "--tg", "8", "--warmup", "0")
    [case] = results["cases"]
    truth = truth_of(sim, case)
    if sim_flag == "--no-prefix-cache":
        assert all(truth[r["request_id"]]["cached_tokens"] == 0 for r in measured(case))
    else:
        assert all(r["cached_tokens"] is None for r in measured(case))
    assert code in codes(results) and "cache_eviction" not in codes(results)


def test_cold_baseline_sends_each_turns_length_with_nothing_shared(start_sim, tmp_path):
    # Decode at 200 t/s: 8 tokens over 35 ms. At 3,000 t/s they took 2 ms, one read for a busy
    # client reading late, and half of such one-read streams withhold the case's TTFT (buffered).
    sim = start_sim("--prefill-tps", "10000", "--decode-tps", "200", "--max-running", "64")
    results = run_cli(sim, tmp_path / "out", "--turns", "3", "-c", "2", "--pp", "400", "--tg", "8", "--cold-baseline")
    [case] = results["cases"]
    assert case["n_ok"] == 6  # the controls are not the case's requests
    truth = truth_of(sim, case)
    controls = [r for r in case["requests"] if r["control"]]
    turns = {row["turn"]: row for row in case["workload"]["turns"]}
    assert sorted(r["turn"] for r in controls) == [1, 1, 2, 2, 3, 3]
    for r in controls:
        t = truth[r["request_id"]]
        assert abs(t["prompt_tokens"] - turns[r["turn"]]["prompt_tokens"]) <= 0.02 * t["prompt_tokens"]
        assert t["cached_tokens"] <= 32  # the chat template's head at most: nothing else shared
    # Turn 3 reuses two turns of history; its cold control prefills all of it.
    assert turns[3]["ttft_gain"] > 1.5 and turns[3]["cold_ttft_s"] > turns[3]["ttft_s"]
    assert "cache_leakage" not in codes(results)
    assert "cold TTFT ms" in (tmp_path / "out" / "report.md").read_text()
