"""`benchy probe-cache` against the simulator, checked against its truth log; the verdict rule.

The simulator's truth for the probe's speed-up is the ratio of its own TTFTs (arrival → first
token event) in the truth log, unique over repeats: that is the quantity benchy's TTFTs
estimate. `--header-delay-s` gives every request a fixed cost, as a real server's scheduling
and HTTP handling do, so a cache hit is not a ratio of two near-zero numbers; at 0.2 s, the
milliseconds of client-side jitter on a loaded machine stay far inside the 10% allowed.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.probe import (
    MIN_SPEEDUP,
    SCHEMA,
    VERDICTS,
    ProbeSettings,
    _timing_verdict,
    capped_lengths,
    decide,
    length_entry,
    run_probe,
)
from benchy.records import RequestRecord, read_records
from benchy.report import probe_report
from benchy.workloads.scenario import sweep
from tests.conftest import run_benchy_here

SIM_FLAGS = ("--prefill-tps", "20000", "--decode-tps", "5000", "--header-delay-s", "0.2")
LENGTHS = [2000, 6000]
TEMPLATE_BLOCKS = 64  # the sim's chat template fills at most this many cached tokens


def server_ttft(trace: dict) -> float:
    return trace["first_token_event_s"] - trace["arrival_s"]


def client_windows(truth: list[dict], returned_s: float) -> dict[str, tuple[float, float]]:
    """For each request of a client that sends one at a time, the span of the truth log its
    TTFT must lie in: it was sent after the request before it had made its last token (the
    client read that first), and its first token was read before the next request arrived (or
    before the probe returned, `returned_s`, on the same CLOCK_MONOTONIC as the simulator's)."""
    ordered = sorted(truth, key=lambda t: t["arrival_s"])
    windows = {}
    for i, t in enumerate(ordered):
        before = ordered[i - 1]["last_token_event_s"] if i else float("-inf")
        after = ordered[i + 1]["arrival_s"] if i + 1 < len(ordered) else returned_s
        windows[t["request_id"]] = (before, after)
    return windows


def assert_ttfts_match_truth(entry: dict, shared: list[dict], unique: list[dict], windows: dict) -> None:
    """Each TTFT the probe measured holds the server's own (the client sends before the
    server's arrival stamp and reads after the first token was made) and no more than the
    request's window in the truth log allows: no constant for how late a busy machine may be.
    The speedup is the measured medians' ratio, so it stands or falls with them."""
    for side, traces in (("shared", shared), ("unique", unique)):
        for measured, t in zip(entry[side]["ttft_s"], traces, strict=True):
            made = t["token_times_s"][0] - t["arrival_s"]
            sent_after, read_before = windows[t["request_id"]]
            assert made <= measured <= read_before - sent_after, (side, measured, server_ttft(t))
    ratio = np.median(entry["unique"]["ttft_s"]) / np.median(entry["shared"]["ttft_s"][1:])
    assert entry["speedup"] == pytest.approx(ratio)


def test_cache_on_is_detected_with_the_truths_speedup_and_leaves_no_reusable_prefix(start_sim):
    sim = start_sim(*SIM_FLAGS)
    result = run_probe(
        ProbeSettings(client=ClientSettings(base_url=sim.base_url), lengths=LENGTHS, n=5, tg=4)
    ).to_dict()
    returned = time.perf_counter()
    truth = {t["request_id"]: t for t in sim.truth()}
    windows = client_windows(sim.truth(), returned)
    assert [e["length"] for e in result["lengths"]] == LENGTHS
    for e in result["lengths"]:
        assert e["verdict"] == "detected", e["reason"]
        shared = [truth[i] for i in e["shared"]["request_ids"]]
        unique = [truth[i] for i in e["unique"]["request_ids"]]
        # The first shared request and every unique one paid; every repeat was a cache hit.
        assert all(t["cached_tokens"] <= TEMPLATE_BLOCKS for t in [shared[0], *unique])
        assert all(t["cached_tokens"] >= t["prompt_tokens"] - 16 for t in shared[1:])
        assert e["shared"]["cached_tokens"] == [t["cached_tokens"] for t in shared]
        assert_ttfts_match_truth(e, shared, unique, windows)

    # A later run with identical prompts (--no-nonce) finds nothing of the probe's in the cache.
    cases = sweep([LENGTHS[0]], [4], [1])
    later = run_mod.execute(
        run_mod.RunSettings(
            client=ClientSettings(base_url=sim.base_url), cases=cases, runs=1, warmup=0, nonce=False, progress=False
        )
    ).to_dict()
    first_id = later["cases"][0]["requests"][0]["request_id"]
    assert sim.truth(expect=len(truth) + 3)  # calibration ×2 + the request
    assert {t["request_id"]: t for t in sim.truth()}[first_id]["cached_tokens"] <= TEMPLATE_BLOCKS


def test_cache_off_is_not_detected_and_the_cli_writes_probe_files(start_sim, tmp_path):
    sim = start_sim(*SIM_FLAGS, "--no-prefix-cache")
    out = tmp_path / "probe"
    proc = run_benchy_here(
        "probe-cache",
        "--base-url",
        sim.base_url,
        "--lengths",
        *map(str, LENGTHS),
        *"-n 5 --tg 4 -q".split(),
        "-o",
        str(out),
    )
    returned = time.perf_counter()
    assert proc.returncode == 0, proc.stderr
    assert "cache detected" not in proc.stdout
    probe = json.loads((out / "probe.json").read_text())
    assert probe["schema"] == SCHEMA
    truth = {t["request_id"]: t for t in sim.truth()}
    windows = client_windows(sim.truth(), returned)
    for e in probe["lengths"]:
        # Never "detected". On a loaded machine a TTFT outlier can split the two tests, which
        # benchy then calls inconclusive, saying so, rather than choosing one.
        noisy = e["verdict"] == "inconclusive" and "disagrees" in e["reason"]
        assert e["verdict"] == "not_detected" or noisy, e["reason"]
        assert ("not detected" if e["verdict"] == "not_detected" else "inconclusive") in proc.stdout
        assert len(e["shared"]["ttft_s"]) == len(e["unique"]["ttft_s"]) == 5
        assert all(truth[i]["cached_tokens"] == 0 for i in e["shared"]["request_ids"])
        sides = ([truth[i] for i in e[side]["request_ids"]] for side in ("shared", "unique"))
        assert_ttfts_match_truth(e, *sides, windows)
    assert (out / "probe.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    md = (out / "probe.md").read_text()
    assert "shared prefix TTFT (first, then repeats)" in md and "![" in md
    # every probe request's record is on disk beside them, as the server served it
    records = {r.request_id: r for r in read_records(out / "requests.jsonl")}
    ids = [i for e in probe["lengths"] for side in ("shared", "unique") for i in e[side]["request_ids"]]
    assert sorted(records) == sorted(ids) and len(ids) == 2 * 5 * len(LENGTHS)
    assert all(records[i].prompt_tokens == truth[i]["prompt_tokens"] for i in ids)


def test_field_report_003_numbers_are_detected():
    # 27,300 tokens: 8.46 s, then 0.59 s, 0.60 s shared; 10.28, 10.32, 10.33 s unique.
    v = decide([0.59, 0.60], [10.28, 10.32, 10.33])
    assert v.verdict == "detected" and v.speedup > 17
    assert decide([0.52, 0.50], [2.21, 2.19, 2.21]).verdict == "detected"


def test_equal_ttfts_are_not_detected_and_noise_is_inconclusive():
    same = decide([1.00, 1.01, 0.99, 1.00], [1.00, 1.02, 0.98, 1.01, 1.0])
    assert same.verdict == "not_detected", same.reason
    noisy = decide([0.5, 1.6, 0.9], [1.0, 0.6, 1.5])
    assert noisy.verdict == "inconclusive", noisy.reason
    assert decide([0.5], [1.0, 1.0, 1.0]).verdict == "inconclusive"


def test_server_cached_tokens_that_contradict_the_timing_make_it_inconclusive():
    fast = ([0.1, 0.11, 0.1], [1.0, 1.02, 0.99])
    assert decide(*fast, repeat_cached=[1984, 1984, 1984], prompt_tokens=2000).verdict == "detected"
    v = decide(*fast, repeat_cached=[0, 0, 0], prompt_tokens=2000)
    assert v.verdict == "inconclusive" and "reports only 0" in v.reason
    assert decide(*fast, repeat_cached=[None, None, None], prompt_tokens=2000).verdict == "detected"


def test_rank_test_disagreeing_makes_the_timing_verdict_inconclusive():
    # Three repeats 1000× faster, two slower than every unique request: log means differ
    # (Welch p ≈ 0.04), ranks barely do (Mann–Whitney p ≈ 0.35).
    v = _timing_verdict([0.001, 0.001, 0.0011, 1.05, 1.06], [1.0, 1.01, 1.02, 1.03, 1.04], (), None)
    assert v.p_faster < 0.05 and v.rank_p > 0.05
    assert v.verdict == "inconclusive" and "Mann–Whitney" in v.reason


def test_bimodal_repeats_are_partial_hits():
    """The same TTFTs are two modes (issue 24): 3 of 5 repeats hit, ~1000× faster, the others as
    slow as unique prefixes: a hit fraction and the gain on hits, not one blurred verdict."""
    v = decide([0.001, 0.001, 0.0011, 1.05, 1.06], [1.0, 1.01, 1.02, 1.03, 1.04])
    assert v.verdict == "partial_hits" and v.hit_fraction == 0.6
    assert v.gain_on_hits == pytest.approx(1.02 / 0.001)
    assert "3 of 5 repeats" in v.reason and "replicas" in v.reason
    # Where the server reports cached_tokens for every repeat, they say which ones hit.
    cached = decide([0.01, 0.5, 0.01, 0.52], [0.5, 0.51, 0.5, 0.49], [1990, 0, 1990, 0], 2000)
    assert cached.verdict == "partial_hits" and cached.hit_fraction == 0.5 and "cached_tokens" in cached.reason
    # All hits, or none, is no partial verdict.
    assert decide([0.01, 0.01, 0.011], [0.5, 0.51, 0.5], [1990] * 3, 2000).verdict == "detected"


def test_misses_by_chance_faster_than_unique_on_a_loaded_machine_are_still_partial_hits():
    """TTFTs of one probe through a weighted round robin on two busy cores (ms): the server
    reports 2 of 7 repeats cached; the 5 misses' median is 1.34× below the unique prefixes'
    by chance (the same full prefill, TTFTs spread 436–1946 ms), which a ratio of medians
    took for "the misses were faster too". Welch says they are not (p ≈ 0.15)."""
    repeats = [768.1, 71.9, 1267.7, 773.3, 225.1, 884.6, 941.1]
    unique = [831.3, 1946.2, 1448.4, 436.3, 1740.8, 1011.8, 1189.4, 1181.3]
    cached = [3, 511, 3, 3, 511, 3, 3]
    v = decide([t / 1000 for t in repeats], [t / 1000 for t in unique], cached, 512)
    assert v.verdict == "partial_hits", v.reason
    assert v.hit_fraction == pytest.approx(2 / 7) and "not significantly faster" in v.reason
    # Misses that are truly faster (every one, consistently) still rule the two modes out.
    steady = decide([0.3, 0.01, 0.3, 0.31, 0.01], [0.6, 0.61, 0.6, 0.62, 0.6], [3, 511, 3, 3, 511], 512)
    assert steady.verdict != "partial_hits", steady.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.001, 100), min_size=0, max_size=8), st.lists(st.floats(0.001, 100), min_size=0, max_size=8))
def test_verdict_is_always_one_of_three_and_detected_means_a_real_speedup(repeats, unique):
    v = decide(repeats, unique)
    assert v.verdict in VERDICTS
    if v.verdict == "detected":
        assert v.speedup >= MIN_SPEEDUP and v.p_faster < 0.05
    if v.verdict == "not_detected":
        assert v.p_below_min < 0.05


def test_lengths_are_capped_by_the_context():
    # 8192 × 0.98 − 8 output tokens = 8020; two lengths capped to the same value are sent once.
    assert capped_lengths([2000, 8000, 27000], 8192, 8) == [(2000, 2000), (8000, 8000), (8020, 27000)]
    assert capped_lengths([9000, 27000], 8192, 8) == [(8020, 9000)]
    assert capped_lengths([2000, 27000], None, 8) == [(2000, 2000), (27000, 27000)]


def test_bad_probe_input_is_one_line_usage_error():
    proc = run_benchy_here("probe-cache", "-n", "2")
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "--requests must be ≥ 3" in proc.stderr


def test_a_length_whose_requests_all_failed_is_inconclusive_and_still_reported(tmp_path):
    records = [
        RequestRecord(
            case=f"probe 500 {side}",
            run=i,
            index=i,
            warmup=False,
            request_id=f"{side}{i}",
            nonce=None,
            target_prompt_tokens=500,
            target_output_tokens=4,
            status="error",
            error_kind="http_500",
            error="HTTP 500",
        )
        for i in range(3)
        for side in ("shared", "unique")
    ]
    entry = length_entry(500, 500, records).to_dict()
    assert entry["verdict"] == "inconclusive" and entry["n_failed"] == 6 and entry["errors"] == {"http_500": 6}
    probe = {
        "schema": SCHEMA,
        "setup": {
            "model": "m",
            "base_url": "u",
            "context_length": None,
            "n": 3,
            "output_tokens": 4,
            "alpha": 0.05,
            "min_speedup": MIN_SPEEDUP,
            "started_utc": "t",
        },
        "lengths": [entry],
    }
    paths = probe_report.write(probe, tmp_path)
    assert [p.name for p in paths] == ["probe.json", "probe.png", "probe.md", "report.html"]
    assert "6 requests failed (http_500: 6)" in (tmp_path / "probe.md").read_text()


def test_a_cache_hit_the_server_reports_without_a_ttft_gain_is_its_own_verdict():
    # llama-server's host-RAM cache: 1,999 of 2,000 tokens cached, TTFT barely moves.
    slow = ([0.33, 0.34, 0.35, 0.34], [0.36, 0.35, 0.37, 0.36, 0.35])
    v = decide(*slow, repeat_cached=[1999] * 4, prompt_tokens=2000, repeat_prompt_ms=[1.2, 1.1, 1.3, 1.2])
    assert v.verdict == "cache_hit_no_gain" and "1999 of 2000" in v.reason and "--cache-ram 0" in v.reason
    assert "own prompt time for them is 1 ms of a 340 ms TTFT" in v.reason
    assert decide(*slow, repeat_cached=[0] * 4, prompt_tokens=2000).verdict == "not_detected"
    assert decide(*slow, repeat_cached=[None] * 4, prompt_tokens=2000).verdict == "not_detected"
    fast = ([0.1, 0.11, 0.1], [1.0, 1.02, 0.99])
    assert decide(*fast, repeat_cached=[1999] * 3, prompt_tokens=2000).verdict == "detected"


def test_probe_cache_on_a_host_copying_server_says_cache_hit_no_gain(start_sim, tmp_path):
    # The sim's llama.cpp-like host cache copy (prompt tokens / 4,000 per s before every
    # prefill, 10x slower than prefill) hides most of what the prefix cache saves; its usage
    # still reports the hits.
    sim = start_sim("--preset", "llamacpp-ram-cache", "--prefill-tps", "40000", "--decode-tps", "500")
    proc = run_benchy_here("probe-cache", "--base-url", sim.base_url, *"--lengths 1500 -n 4 --format json".split())
    assert proc.returncode == 0, proc.stderr
    (entry,) = json.loads(proc.stdout)["lengths"]
    assert entry["verdict"] == "cache_hit_no_gain", entry["reason"]
    truth = {t["request_id"]: t for t in sim.truth()}
    repeats = [truth[i] for i in entry["shared"]["request_ids"][1:]]
    assert all(t["cached_tokens"] >= 0.9 * t["prompt_tokens"] for t in repeats)
    assert all(t["host_copy_s"] > t["prefill_end_s"] - t["prefill_start_s"] for t in repeats)


def test_a_default_length_the_context_cannot_hold_is_named_not_dropped(start_sim, tmp_path):
    """The default lengths (2,000, 8,000, 27,000) on a 4,096-token server: 8,000 is capped to
    the context and 27,000 would be the same prompt again, so it is not probed, and says so."""
    sim = start_sim("--context-length", "4096", "--instant")
    proc = run_benchy_here(
        "probe-cache", "--base-url", sim.base_url, *"-n 3 --tg 4 -q".split(), "-o", str(tmp_path / "out")
    )
    assert proc.returncode == 0, proc.stderr
    probe = json.loads((tmp_path / "out" / "probe.json").read_text())
    assert [e["length_asked"] for e in probe["lengths"]] == [2000, 8000]
    [skipped] = probe["setup"]["lengths_not_probed"]
    assert skipped["asked"] == 27000 and "4,096" in skipped["reason"]
    for said in (proc.stdout, (tmp_path / "out" / "probe.md").read_text()):
        assert "27,000 tokens: **not probed**" in said


def test_a_capacity_search_whose_requests_all_failed_says_why_and_what_it_asked():
    """Every capacity request refused: the finding names the server's own words and the prefix
    length asked, not "Prefixes of n/a tokens … not found" with no reason."""
    from benchy.probe import capacity_point, capacity_result

    def failed(i: int) -> RequestRecord:
        return RequestRecord(
            case="capacity 1 first", run=0, index=i, warmup=False, request_id=f"r{i}", nonce="n",
            target_prompt_tokens=3000, target_output_tokens=4,
            status="error", error_kind="http_400", error="maximum context length is 4096 tokens",
        )  # fmt: skip

    point = capacity_point(1, [failed(0)], [failed(1)])
    cap = capacity_result(3000, 262144, [point], None, None).to_dict()
    assert cap["verdict"] == "unmeasured" and "first http_400: maximum context length is 4096 tokens" in cap["reason"]
    lines = "\n".join(probe_report.capacity_lines(cap))
    assert "Prefixes of 3,000 tokens" in lines and "maximum context length" in lines
