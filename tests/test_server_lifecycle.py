"""Issue 52, items 1, 2 and 8: a server that freezes its own process, one restarted mid-case,
and several server processes behind one address, judged against the simulator's truth log
(when it froze, when it was away, which process and which life of the server served each).

1. A freeze (the whole process stopped 1.5 s): requests sent meanwhile wait unread; the TTFT
   outside the server's own is named the server's stop, by the silence on every stream
   mid-answer while benchy's loop was awake, never a proxy or the client.

2. A restart (connections cut, refused for 2 s, back with empty caches and counters from zero):
   the closed loop waits for it (--reconnect-s) and sends its whole plan, the cut and refused
   requests counted by their kinds; the server view adds its counters up as rate() does and
   says "1 counter reset", never silently short.
8. Four processes on one port, each with its own /metrics: the scrapes are of several series;
   the server view says what it covers, its counts withheld, never "one of the two is wrong".
"""

from __future__ import annotations

from typing import Any, NamedTuple

from benchy import run as run_mod
from benchy.client.settings import ClientSettings
from benchy.load.plan import LoadSettings
from benchy.measure.silence import BIN_S
from benchy.workloads.case import Case
from tests.test_checks import codes, measured

FAST = ("--prefill-tps", "20000", "--natural-min", "8", "--natural-max", "24")


def truth_of(sim, results: dict) -> dict[str, dict]:
    """The truth by request id (the log's notes of a freeze or restart have none)."""
    n = sum(len(c["requests"]) for c in results["cases"])
    sim.truth(expect=n)
    return {t["request_id"]: t for t in sim.truth() if t.get("request_id")}


def _run(sim, case: Case, runs: int, **client) -> dict:
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url, **client), cases=[case], runs=runs, progress=False
    )
    return run_mod.execute(settings).to_dict()


def _open_loop(sim, case: Case, requests: int) -> dict:
    """A rate case of exactly `requests` measured requests (a seeded schedule)."""
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=sim.base_url), cases=[case], load=LoadSettings(requests=requests), progress=False
    )
    return run_mod.execute(settings).to_dict()


def test_a_restart_mid_case_is_waited_for_and_its_counter_reset_counted(start_sim):
    sim = start_sim("--preset", "restart", "--restart-after", "30", "--decode-tps", "200", *FAST)
    results = _run(sim, Case(pp=64, tg=32, concurrency=2), runs=20)
    truth = truth_of(sim, results)
    [restart] = [t for t in sim.truth() if t.get("event") == "restart"]
    assert 1.9 <= restart["to_s"] - restart["from_s"] < 3.0  # the truth: away 2 s

    # the closed loop waited for the server and sent its whole plan (it stopped after 3
    # refusals in a row, 1.4 ms after the cut, before --reconnect-s)
    assert results["stopped"] is None and not results["partial"]
    [case] = results["cases"]
    reqs = measured(case)
    assert len(reqs) == 40 and case["n_ok"] + case["n_failed"] == 40
    failed = [r for r in reqs if r["status"] != "ok"]
    kinds = {r["error_kind"] for r in failed}
    assert failed and kinds <= {"connect", "reset", "disconnect"}, kinds
    lives = {truth[r["request_id"]]["life"] for r in reqs if r["status"] == "ok"}
    assert lives == {0, 1}  # served before and after the restart

    # the server view spans the reset: at least what the new life counted, at most the truth
    server = case["server"]
    assert server["counter_resets"] == 1 and server["several_processes"] is None
    after = sum(
        truth[r["request_id"]]["completion_tokens"]
        for r in reqs
        if r["request_id"] in truth and truth[r["request_id"]]["life"] == 1
    )
    everything = sum(truth[r["request_id"]]["completion_tokens"] for r in reqs if r["request_id"] in truth)
    assert after <= server["counters"]["generation_tokens"] <= everything
    found = codes(results)
    assert "server_counter_reset" in found and "server_token_mismatch" not in found
    [w] = [w for w in results["warnings"] if w["code"] == "server_counter_reset"]
    assert "1 counter reset, the server restarted" in w["message"] and w["details"]["counter_resets"] == 1


def test_a_server_that_stays_away_stops_the_run_after_its_window(start_sim):
    sim = start_sim(
        "--preset", "restart", "--restart-after", "30", "--restart-down-s", "30", "--decode-tps", "400", *FAST
    )
    # a plan well past the restart's 30th arrival (calibration, the warmup and a retried
    # connection arrive too): the stop, not the plan's end, must end the run
    results = _run(sim, Case(pp=64, tg=16, concurrency=2), runs=40, reconnect_s=1.0)
    assert results["stopped"] is not None, "the plan ended before the server was found gone"
    assert results["stopped"]["by"] == "server-gone" and "--reconnect-s 1" in results["stopped"]["reason"]
    [case] = results["cases"]
    assert case["n_ok"] + case["n_failed"] < 80


def test_several_processes_behind_one_address_are_no_count(start_sim):
    sim = start_sim("--preset", "several-processes", "--decode-tps", "50", *FAST)
    results = _run(sim, Case(pp=64, tg=32, concurrency=4), runs=12)
    truth = truth_of(sim, results)
    [case] = results["cases"]
    assert len({truth[r["request_id"]]["process"] for r in measured(case)}) > 1  # the truth: several served
    server = case["server"]
    assert server["several_processes"] and server["counters"] == {}
    assert "several processes" in server["unavailable"]["generation_tokens"]
    found = codes(results)
    assert "server_several_processes" in found and "server_token_mismatch" not in found


def _truth_window(truth: list[dict], freeze: dict) -> tuple[float, float]:
    """The sim's own silence across the freeze: from its last event before the freeze began
    to its first after it ended, over every stream (the truth's event stamps)."""
    times = sorted(e["t_s"] for t in truth for e in t.get("events", ()) if e["tokens"])
    return max(t for t in times if t <= freeze["from_s"]), min(t for t in times if t >= freeze["to_s"])


def _truth_silence(truth: list[dict], freeze: dict) -> float:
    before, after = _truth_window(truth, freeze)
    return after - before


def _sent_within(reqs: list[dict], window: tuple[float, float], slack_s: float) -> tuple[int, int]:
    """(requests surely sent within the truth's silence, those sent within it or `slack_s` of it)."""
    start, end = window
    sure = sum(start + slack_s <= r["sent_mono_s"] < end - slack_s for r in reqs)
    return sure, sum(start - slack_s <= r["sent_mono_s"] < end + slack_s for r in reqs)


def test_a_frozen_server_is_named_by_the_silence_of_every_stream(start_sim):
    sim = start_sim("--preset", "frozen-process", "--freeze-after", "30", "--decode-tps", "100", *FAST)
    results = _run(sim, Case(pp=64, tg=32, rate=10.0), runs=60)
    truth_of(sim, results)
    [freeze] = [t for t in sim.truth() if t.get("event") == "freeze"]
    [case] = results["cases"]
    lag_s = case["client"]["loop_lag_ms_max"] / 1000
    truth_silence = _truth_silence(sim.truth(), freeze)
    assert abs(case["silence"]["silence_s"] - truth_silence) <= 2 * BIN_S + lag_s
    # requests sent before the freeze ended that it read only after: they waited unread (the
    # truth's arrival stamps; one sent a moment before the freeze, unread yet, is one of them)
    truth = truth_of(sim, results)
    waited = [r for r in measured(case) if r["sent_mono_s"] < freeze["to_s"] <= truth[r["request_id"]]["arrival_s"]]
    assert 1 <= case["silence"]["unread"] <= len(waited)
    # every request benchy sent within the truth's silence was held by it (to within two bins and
    # benchy's worst lag at either end), whenever its headers came
    sure, near = _sent_within(measured(case), _truth_window(sim.truth(), freeze), 2 * BIN_S + lag_s)
    assert sure <= case["silence"]["sent"] <= near and case["silence"]["sent"] >= case["silence"]["unread"]
    [w] = [w for w in results["warnings"] if w["code"] == "ttft_outside_server"]
    d = w["details"]
    assert d["cause"] == "server_stopped", d
    assert d["silence_s"] == case["silence"]["silence_s"]
    assert "the server stopped answering" in w["message"]
    assert "proxy" not in w["message"] and "benchy itself" not in w["message"]


# Generation requests the sim reads before a rate case's own: the chat template's calibration
# (3), the prompt sent alone (3, load/alone.py) and one warmup.
PRELUDE = 7


class Frozen(NamedTuple):
    sim: Any
    results: dict
    truth: dict[str, dict]
    freeze: dict
    case: dict
    reqs: list[dict]


def _frozen_llamacpp(start_sim, freeze_s: str, *flags: str) -> Frozen:
    """An open loop of 20 requests (pp 64, tg 64, 10/s) on the frozen-llamacpp preset, stopped
    `freeze_s` s at the case's third arrival; the truth by request id and the truth's freeze."""
    sim = start_sim(
        *("--preset", "frozen-llamacpp", "--freeze-after", str(PRELUDE + 3), "--freeze-s", freeze_s),
        *("--decode-tps", "100", *FAST, "--prefill-tps", "2000", *flags),  # 32 ms a prompt: headers bins apart
    )
    results = _open_loop(sim, Case(pp=64, tg=64, rate=10.0), requests=20)
    truth = truth_of(sim, results)
    [freeze] = [t for t in sim.truth() if t.get("event") == "freeze"]
    [case] = results["cases"]
    return Frozen(sim, results, truth, freeze, case, measured(case))


def test_a_frozen_llamacpp_is_the_cause_of_ttft_beyond_its_prompt_time(start_sim):
    """llama.cpp has no TTFT histogram (no ttft_outside_server): a freeze shows only as TTFT
    beyond its own prompt_ms (ttft_not_prefill) and as case.silence. Stopped 2.5 s at the case's
    third arrival, most of a seeded 2 s of arrivals wait in it, counted by their sends (the
    headers of those that find a slot free at the resume go out inside the silence, as
    llama.cpp's): the words name the stop, never llama.cpp's cache copy, a proxy or benchy."""
    sim, results, truth, freeze, case, reqs = _frozen_llamacpp(start_sim, "2.5")
    # the truth: the stop came inside the case, and most of its requests waited through it
    assert min(r["sent_mono_s"] for r in reqs) < freeze["from_s"], "PRELUDE changed? the stop came before the case"
    waited = [r for r in reqs if r["sent_mono_s"] < freeze["to_s"] <= truth[r["request_id"]]["arrival_s"]]
    assert 2 * len(waited) >= len(reqs) == 20
    assert "ttft_outside_server" not in codes(results)  # no TTFT histogram to set against
    silence = case["silence"]
    lag_s = case["client"]["loop_lag_ms_max"] / 1000
    assert abs(silence["silence_s"] - _truth_silence(sim.truth(), freeze)) <= 2 * BIN_S + lag_s
    window = _truth_window(sim.truth(), freeze)
    sure, near = _sent_within(reqs, window, 2 * BIN_S + lag_s)
    assert sure <= silence["sent"] <= near, (silence, sure, near)
    # as llama.cpp, the sim sent the headers of the held requests that found a slot free at the
    # resume before any stream's next token (the truth): `unread` misses them, `sent` does not
    answered = [r for r in reqs if window[0] <= r["sent_mono_s"] and truth[r["request_id"]]["headers_s"] < window[1]]
    assert answered and silence["unread"] <= silence["sent"] - len(answered) + 1, (silence, len(answered))
    [w] = [w for w in results["warnings"] if w["code"] == "ttft_not_prefill"]
    said = w["message"] + " " + w["hint"]
    assert f"the server stopped: for {silence['silence_s'] * 1000:,.0f} ms" in said, said
    assert f"{silence['sent']} of these {len(reqs)} requests were sent meanwhile" in said, said
    assert "cache" not in said and "proxy" not in said and "benchy itself" not in said, said
    # the wait beyond the prompt sent alone is the same stop: the queueing finding names it too,
    # not slots or a load the server cannot serve
    [q] = [w for w in results["warnings"] if w["code"] == "prefill_holds_queueing"]
    queued = q["message"] + " " + q["hint"]
    assert f"the server stopped: for {silence['silence_s'] * 1000:,.0f} ms" in queued, queued
    assert "fewer requests at once" not in queued and "concurrency 1" not in queued, queued


def test_a_frozen_llamacpp_that_answers_held_requests_at_the_resume_is_named_by_what_it_held(start_sim):
    """llama.cpp sends a request's headers when a slot takes it: after a stop, the held requests
    that find a slot free get them before any stream's next token, inside the silence, and are
    not `unread`. With 12 slots most of what a 1.5 s stop held is answered so: fewer than half
    of the case's requests unread, yet more than half sent during the stop (the truth log). Both
    findings still name the stop, counted by the sends."""
    sim, results, truth, freeze, case, reqs = _frozen_llamacpp(start_sim, "1.5", "--max-running", "12")
    start, end = window = _truth_window(sim.truth(), freeze)
    held = [r for r in reqs if start <= r["sent_mono_s"] < end]
    unread = [r for r in held if truth[r["request_id"]]["headers_s"] >= end]
    assert 2 * len(held) >= len(reqs) > 2 * len(unread), (len(held), len(unread))  # the truth
    for code in ("ttft_not_prefill", "prefill_holds_queueing"):
        [w] = [w for w in results["warnings"] if w["code"] == code]
        assert "the server stopped" in w["message"] and "fewer requests at once" not in w["message"], w["message"]
    silence = case["silence"]
    sure, near = _sent_within(reqs, window, 2 * BIN_S + case["client"]["loop_lag_ms_max"] / 1000)
    assert sure <= silence["sent"] <= near and 2 * silence["unread"] < len(reqs), (silence, sure, near)


def test_an_open_loop_on_llamacpp_that_queues_is_not_blamed_on_its_cache_copy(start_sim):
    """An open loop's concurrency is 1 only by its field: its arrivals set the load. Faster
    than one slot serves, its requests queue before the server's prompt_ms starts (the truth
    log's prefill start against arrival); ttft_not_prefill names queueing, not a cache copy."""
    sim = start_sim("--flavor", "llamacpp", "--max-running", "1", "--decode-tps", "200", *FAST)
    results = _open_loop(sim, Case(pp=64, tg=32, rate=12.0), requests=24)
    truth = truth_of(sim, results)
    [case] = results["cases"]
    waits = [truth[r["request_id"]]["prefill_start_s"] - truth[r["request_id"]]["arrival_s"] for r in measured(case)]
    [w] = [w for w in results["warnings"] if w["code"] == "ttft_not_prefill"]
    # the truth: most requests queued before the prefill that prompt_ms times, and the gap benchy
    # found is no more than the longest such wait (and its own worst lag)
    lag_s = case["client"]["loop_lag_ms_max"] / 1000
    assert sorted(waits)[len(waits) // 2] > 0.02
    assert w["details"]["not_prefill_s_median"] <= max(waits) + lag_s
    assert "queueing behind the open loop's other requests" in w["message"], w["message"]
    assert "cache" not in w["message"] and "stopped" not in w["message"]


def test_a_short_stop_that_holds_few_requests_does_not_take_the_cache_copys_gap(start_sim):
    """The stop is the cause only where it covers the median's gap: a 2 s stop mid-case that
    keeps a few of an open loop's requests unread, on llama.cpp whose cache copy (the truth log's
    host_copy_s) sits before every prefill, leaves that gap to the other causes."""
    sim = start_sim(
        *("--preset", "llamacpp-host-copy", "--freeze-after", str(PRELUDE + 10), "--freeze-s", "2"),
        *("--decode-tps", "150", "--natural-min", "8", "--natural-max", "24"),
    )
    results = _open_loop(sim, Case(pp=2048, tg=128, rate=1.5), requests=16)
    truth = truth_of(sim, results)
    [case] = results["cases"]
    reqs = measured(case)
    copy_s = sorted(truth[r["request_id"]]["host_copy_s"] for r in reqs)[len(reqs) // 2]
    [freeze] = [t for t in sim.truth() if t.get("event") == "freeze"]
    # the truth: a copy in every request, and a stop inside the case; benchy saw the stop as the
    # server's, keeping a few unread
    assert copy_s > 0.05 and min(r["sent_mono_s"] for r in reqs) < freeze["from_s"]
    silence = case["silence"]
    assert silence and 1 <= silence["unread"] and 2 * silence["unread"] < len(reqs), silence
    assert case["client"]["loop_lag_ms_max"] / 1000 < 0.5 * silence["silence_s"]  # benchy awake: the server's
    assert silence["silence_s"] > copy_s
    [w] = [w for w in results["warnings"] if w["code"] == "ttft_not_prefill"]
    assert "stopped" not in w["message"] and "work before prefill" in w["message"], w["message"]
