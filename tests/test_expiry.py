"""Issue 36, item 6 outside partial reuse: a prompt cache with a lifetime, in a shared-prefix
case whose groups take turns. Each group's prefix, sent ahead, is found by the first request
that follows it at once; every later one comes after the other groups' requests, longer than
the lifetime, and misses. Hits then misses look like eviction (a cache too small) or, for a
prefix sent ahead, a cache that is off: the idle time before each miss against each hit says
expiry. Judged by the simulator's truth log: which requests lost cached blocks, with none
evicted for room."""

from __future__ import annotations

import json

from tests.conftest import run_benchy_here, warning_codes


def test_a_cache_lifetime_is_named_expiry_when_hits_come_first(start_sim, tmp_path):
    # 4 groups, ~0.5 s a request: a group's prefix idle behind three others sits ~1.5 s, past the
    # 1 s lifetime, while the next request of the same group follows within a turnaround (a lifetime
    # this long against the gaps keeps the hits on a machine whose simulator lags by a fraction of it).
    sim = start_sim("--preset", "cache-ttl", "--cache-ttl-s", "1.0")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report",
        "--shared-prefix", "0.75", "--groups", "4", "--pp", "400", "--tg", "1500", "-c", "1", "--requests", "16",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = [c for c in results["cases"] if c["workload"]["spec"].get("groups") == 4]
    truth = {t["request_id"]: t for t in sim.truth(expect=sum(len(c["requests"]) for c in results["cases"]))}
    judged = [r for r in case["requests"] if not r["warmup"] and r.get("expected_cached_tokens")]
    lost = {r["request_id"] for r in judged if truth[r["request_id"]]["cache_lost_tokens"]}
    # The truth: some requests found their prefix, the rest lost it, and nothing was evicted for room.
    assert lost and not any(t.get("cache_evicted_blocks") for t in truth.values())
    codes = warning_codes(results, case["label"])
    if len(lost) == len(judged):
        # The one hit is the first measured request, right after its group's warmup: on a loaded
        # machine benchy's own start of the case (the collector's pass, the server's metrics window
        # opened) kept it past the lifetime too (a CI run: 1.0 s), and the truth log has every
        # request losing its prefix. With no hit to set against the misses, benchy must say what
        # it saw, a context prefilled again, and claim neither a partial reuse nor an eviction.
        assert "depth_cache_miss" in codes and not codes & {"cache_partial_reuse", "cache_eviction"}
        return
    part = case["workload"]["partial_reuse"]
    assert part is not None and part["cause"] == "expiry" and case["workload"]["eviction"] is None
    assert part["missed_requests"] + part["partial_requests"] == len(lost)
    assert part["miss_idle_min_s"] > part["hit_idle_max_s"]
    assert "cache_partial_reuse" in codes and not codes & {"depth_cache_miss", "cache_eviction", "cache_not_reused"}
    (w,) = [w for w in results["warnings"] if w["code"] == "cache_partial_reuse"]
    assert "expire" in w["message"] and "replicas" not in w["message"] and "router" not in w["hint"]


def test_a_prefix_that_never_expires_is_not_called_expiry(start_sim, tmp_path):
    # The control: the same load, no lifetime: every request finds its group's prefix.
    sim = start_sim("--preset", "cache-ttl", "--cache-ttl-s", "0")
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report",
        "--shared-prefix", "0.75", "--groups", "4", "--pp", "400", "--tg", "300", "-c", "1", "--requests", "16",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = [c for c in results["cases"] if c["workload"]["spec"].get("groups") == 4]
    truth = {t["request_id"]: t for t in sim.truth(expect=sum(len(c["requests"]) for c in results["cases"]))}
    assert not any(t["cache_lost_tokens"] for t in truth.values())
    assert case["workload"]["partial_reuse"] is None
    assert not warning_codes(results, case["label"]) & {"cache_partial_reuse", "depth_cache_miss"}


def trace_file(path, gaps_ms: list[int]) -> str:
    """A Mooncake trace: every request shares two 512-token blocks and adds one of its own."""
    t, rows = 0, []
    for i, gap in enumerate([0, *gaps_ms]):
        t += gap
        rows.append({"timestamp": t, "input_length": 1100, "output_length": 8, "hash_ids": [1, 2, 100 + i]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_a_cache_lifetime_in_a_trace_is_expiry_not_routing(start_sim, tmp_path):
    # Requests 50 ms apart find the shared blocks; those after 1.5 s, well past the 0.5 s lifetime
    # (a loaded machine's late sends and slow answers stay far from it either way), not.
    sim = start_sim("--preset", "cache-ttl")
    trace = trace_file(tmp_path / "trace.jsonl", [50, 1500] * 5)
    out = tmp_path / "out"
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report", "--trace", trace,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}
    judged = [r for r in case["requests"] if not r["warmup"] and r.get("expected_cached_tokens")]
    lost = {r["request_id"] for r in judged if truth[r["request_id"]]["cache_lost_tokens"]}
    assert lost and len(lost) < len(judged)  # the truth: the blocks expired before some requests
    assert not any(t.get("cache_evicted_blocks") for t in truth.values())  # none evicted for room
    assert {t["replica"] for t in truth.values()} == {0}  # one server: no routing at all
    part = case["workload"]["partial_reuse"]
    assert part is not None and part["cause"] == "expiry" and part["replicas"] is None
    assert part["missed_requests"] + part["partial_requests"] == len(lost)
    (w,) = [w for w in results["warnings"] if w["code"] == "cache_partial_reuse"]
    assert "expire" in w["message"] and "replicas" not in w["message"]


TTL_S = 0.5  # the simulator's cache lifetime (its cache-ttl preset's)
THINK = ("--turns", "3", "--think-time", "1s", "--pp", "400", "--tg", "50", "-c", "2")


def conversation_case(sim, tmp_path) -> tuple[dict, dict, dict]:
    """Two conversations whose think time (1 s) outlasts the lifetime: (results, the case, truth)."""
    out = tmp_path / "out"
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), "--no-report", *THINK)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth(expect=len(case["requests"]))}
    return results, case, truth


def server_quiet_before_lost_starts(truth: dict, case: dict) -> list[float]:
    """On the simulator's clock, for each of the case's requests that got nothing cached after
    the first: the quiet since every earlier request's last token was written. benchy's end of a
    request is no earlier than its read of that token (where the answer can be whole); the
    server's last write may come later (a loaded CI run: its usage
    event and [DONE] 2.3 ms after the last token, and a quiet taken from them 1.4 ms shorter than
    benchy's)."""
    arrived = sorted((truth[r["request_id"]] for r in case["requests"]), key=lambda t: t["arrival_s"])
    quiet, latest = [], None
    for prev, t in zip(arrived, arrived[1:]):
        end = prev["last_token_event_s"]
        latest = end if latest is None else max(latest, end)
        if t.get("cached_tokens") == 0:
            quiet.append(t["arrival_s"] - latest)
    return quiet


def test_every_turn_missing_after_think_times_past_the_lifetime_is_expiry(start_sim, tmp_path):
    # No turn finds its history, so no hit to compare with; the start every prompt shares (the
    # chat template) shows the cache at work between requests sent close together.
    sim = start_sim("--preset", "cache-ttl", "--cache-ttl-s", str(TTL_S))
    results, case, truth = conversation_case(sim, tmp_path)
    judged = [r for r in case["requests"] if not r["warmup"] and r.get("expected_cached_tokens")]
    # The truth: every later turn lost its history to the lifetime, none evicted for room, and the
    # server did cache (and serve) the shared start elsewhere.
    assert judged and all(truth[r["request_id"]]["cache_lost_tokens"] for r in judged)
    assert not any(t.get("cache_evicted_blocks") for t in truth.values())
    assert any(t.get("cached_tokens") for t in truth.values())
    miss = case["workload"]["no_reuse"]
    assert miss is not None and miss["cause"] == "expiry" and miss["requests"] == len(judged)
    # benchy's evidence for expiry: every miss and every lost start waited longer than any hit's
    # gap, and the misses waited past the lifetime (a think time of 1 s after each answer). A
    # hit's gap runs from the previous send, an upper bound of its idle: on a loaded machine it
    # may pass the lifetime while the server's idle (from that request's end) did not.
    assert miss["hit_idle_max_s"] < min(miss["miss_idle_min_s"], miss["lost_idle_min_s"])
    assert miss["miss_idle_min_s"] >= TTL_S
    # A lost start's quiet, as benchy saw it, is a lower bound of the server's (from every earlier
    # request's last token written to its arrival), which the truth shows past the lifetime.
    quiet = server_quiet_before_lost_starts(truth, case)
    assert quiet and min(quiet) >= TTL_S
    assert miss["lost_idle_min_s"] <= min(quiet)
    codes = warning_codes(results, case["label"])
    assert "cache_not_reused" in codes and not codes & {"cache_partial_reuse", "cache_eviction"}
    (w,) = [w for w in results["warnings"] if w["code"] == "cache_not_reused"]
    assert "expire" in w["message"] and "is off" not in w["message"] and "Enable" not in w["hint"]
    assert w["details"]["cause"] == "expiry" and w["details"]["miss_idle_min_s"] >= TTL_S


def test_every_turn_missing_with_nothing_cached_anywhere_is_not_called_expiry(start_sim, tmp_path):
    # The control: the same gaps, the prefix cache off. Nothing was cached, so nothing shows
    # whether a cache is off or expires: the finding says it cannot tell.
    sim = start_sim("--preset", "cache-ttl", "--cache-ttl-s", str(TTL_S), "--no-prefix-cache")
    results, case, truth = conversation_case(sim, tmp_path)
    assert not any(t.get("cached_tokens") for t in truth.values())
    miss = case["workload"]["no_reuse"]
    assert miss is not None and miss["cause"] is None and miss["miss_idle_min_s"] >= TTL_S
    (w,) = [w for w in results["warnings"] if w["code"] == "cache_not_reused"]
    assert "off" in w["message"] and "expire" in w["message"] and "likely" not in w["message"]
    assert "Enable" in w["hint"] and "--think-time" in w["hint"]
