"""The server-vs-client disagreement rules (benchy/checks/server.py) at their boundaries, on
hand-made cases read as saved results are: each fires past its threshold and stays quiet at it."""

from __future__ import annotations

from benchy.checks import server as sc
from benchy.measure.silence import BIN_S, SilenceTracker
from benchy.records import RequestRecord
from benchy.results import stop as stop_mod
from benchy.results.types import CaseResult, CheckWarning, RunResult
from benchy.results.verdicts import queueing


def case(server: dict | None = None, requests: list[dict] | None = None, **more) -> CaseResult:
    saved = {"label": "pp1 tg1", "pp": 1, "tg": 1, "concurrency": 4, "rate": None, "server": server, **more}
    return CaseResult.from_dict(
        {**saved, "requests": [{"request_id": str(i), **r} for i, r in enumerate(requests or [])]}
    )


def run(setup: dict) -> RunResult:
    return RunResult.from_dict({"setup": setup})


def findings(case: CaseResult, setup: dict) -> list[CheckWarning]:
    """Every server check's warnings about the case (as checks/warnings.py registers them)."""
    return [w for found in sc.CASE_CHECKS for w in found(case, run(setup))]


def request(**fields) -> dict:
    planned = {"case": "pp1 tg1", "run": 0, "index": 0, "nonce": None, "target_prompt_tokens": 1}
    return {
        **planned,
        "target_output_tokens": 1,
        "warmup": False,
        "status": "ok",
        "metrics": {},
        "cached_tokens": 0,
        "completion_tokens": 10,
        **fields,
    }


def server(**parts) -> dict:
    figures = {"engine": "vllm", "window_s": 1.0, "counters": {}, "histograms": {}, "gauges": {}, "derived": {}}
    return {**figures, "rtt_s": 0.001, **parts}


def hist(mean: float, count: int = 4) -> dict:
    return {"count": count, "sum": mean * count, "mean": mean}


SETUP = {"prompt_nonce": True, "calibration": {"overhead_tokens": 20}}


def test_cache_hits_within_the_template_allowance_are_quiet():
    reqs = [request() for _ in range(4)]
    allowed = 4 * (20 + sc.CACHE_BLOCK_SLACK)
    assert sc.cache_hit_figures(case(server(counters={"cache_hits": allowed}), reqs), run(SETUP)) is None
    found = sc.cache_hit_figures(case(server(counters={"cache_hits": allowed + 1}), reqs), run(SETUP))
    assert found is not None and found.explained_hits == allowed and found.usage_cached_tokens == 0
    assert (
        sc.cache_hit_figures(case(server(counters={"cache_hits": 10**6}), reqs), run({**SETUP, "prompt_nonce": False}))
        is None
    )


def test_a_context_sent_ahead_is_an_explained_hit():
    reqs = [request(reused_context_tokens=4096) for _ in range(2)]
    hits = 2 * 4096
    assert sc.cache_hit_figures(case(server(counters={"cache_hits": hits}), reqs), run(SETUP)) is None


def test_token_counts_within_one_a_request_agree():
    reqs = [request(completion_tokens=10) for _ in range(4)]
    assert sc.token_mismatch_figures(case(server(counters={"generation_tokens": 44}), reqs)) is None
    assert sc.token_mismatch_figures(case(server(counters={"generation_tokens": 45}), reqs)).client_tokens == 40  # type: ignore[union-attr]
    failed = [*reqs[:3], request(status="error")]
    assert sc.token_mismatch_figures(case(server(counters={"generation_tokens": 99}), failed)) is None
    no_usage = [*reqs[:3], request(completion_tokens=None)]
    assert sc.token_mismatch_figures(case(server(counters={"generation_tokens": 99}), no_usage)) is None


def summary(mean: float, n: int = 4) -> dict:
    return {"median": mean, "mean": mean, "n": n}


def test_ttft_outside_the_server_needs_more_than_round_trips_and_a_share():
    reqs = [request(metrics={"ttft_s": 0.100}) for _ in range(4)]
    figures = {"summary": {"ttft_s": summary(0.100)}}
    near = server(histograms={"ttft_s": hist(0.085)})  # 15 ms outside: under the 20 ms floor
    assert sc.outside_figures(case(near, reqs, **figures)) is None
    far = server(histograms={"ttft_s": hist(0.050)})
    assert sc.outside_figures(case(far, reqs, **figures)).outside_s == 0.05  # type: ignore[union-attr]
    slow_link = server(histograms={"ttft_s": hist(0.050)}, rtt_s=0.02)  # 3 round trips = 60 ms
    assert sc.outside_figures(case(slow_link, reqs, **figures)) is None


def test_the_warning_quotes_the_ttft_the_table_and_server_view_show():
    # A multi-turn case's cold controls (--cold-baseline) are no part of its figures: the
    # warning's client TTFT is the case's mean, as the server view draws it, not theirs too.
    reqs = [request(metrics={"ttft_s": 0.100}) for _ in range(4)]
    controls = [request(metrics={"ttft_s": 1.0}, control=True) for _ in range(2)]
    found = sc.outside_figures(
        case(server(histograms={"ttft_s": hist(0.050)}), reqs + controls, summary={"ttft_s": summary(0.100)})
    )
    assert found is not None and found.client_ttft_s == 0.100
    withheld = case(server(histograms={"ttft_s": hist(0.050)}), reqs, summary={})  # e.g. buffered: no TTFT
    assert sc.outside_figures(withheld) is None


def test_queueing_dominates_only_past_half_and_ten_ms():
    assert queueing.queue_figures(case(server(histograms={"queue_s": hist(0.006), "ttft_s": hist(0.008)}))) is None
    assert queueing.queue_figures(case(server(histograms={"queue_s": hist(0.04), "ttft_s": hist(0.1)}))) is None
    found = queueing.queue_figures(case(server(histograms={"queue_s": hist(0.06), "ttft_s": hist(0.1)})))
    assert found is not None and found.queue_share == 0.6 and found.concurrency == 4
    (finding,) = findings(case(server(histograms={"queue_s": hist(0.06), "ttft_s": hist(0.1)})), SETUP)
    assert finding.code == "queue_dominates_ttft" and "At concurrency 4" in finding.message
    assert [(e.name, e.observed, e.threshold, e.unit) for e in finding.evidence][0] == (
        "queue_share",
        0.6,
        queueing.QUEUE_SHARE,
        "fraction",
    )
    assert finding.severity == "warning" and finding.details.queue_share == 0.6


def test_no_server_figures_no_findings():
    assert findings(case(None, [request()]), SETUP) == []
    lost = case({"unavailable": "GET /metrics answered HTTP 404"}, [request()])  # the shape of every minor
    assert lost.server is not None and lost.server_figures() is None
    assert findings(lost, SETUP) == []


def test_the_queue_hint_names_the_flag_that_sets_the_load():
    """A closed loop lowers its concurrency, an open loop its --rate, a trace replay its speed:
    the warning names the case's own load and the knob that lowers it."""
    queued = server(histograms={"queue_s": hist(0.06), "ttft_s": hist(0.1)})
    loads = {
        "closed": ({}, "At concurrency 4", "lower the concurrency"),
        "open": ({"rate": 4.0, "mode": "open"}, "At 4 requests/s", "lower --rate"),
        "trace": ({"kind": "trace", "concurrency": None, "mode": "open"}, "the trace's arrival", "--speed below 1"),
    }
    for more, where, knob in loads.values():
        (finding,) = findings(case(queued, **more), SETUP)
        assert where in finding.message and knob in finding.hint, finding
        assert "concurrency" not in finding.hint or not more


def _num(value: float | None) -> float:
    assert value is not None
    return value


def _outside(**more) -> sc.TtftOutsideServer:
    """A case with 150 ms of TTFT outside the server's own, and `more` of the evidence."""
    reqs = [request(metrics={"ttft_s": 0.200}) for _ in range(4)]
    summary_ = {"ttft_s": summary(0.200), "itl_s": summary(0.010)}
    found = sc.outside_figures(case(server(histograms={"ttft_s": hist(0.050)}), reqs, summary=summary_, **more))
    assert found is not None and abs(_num(found.outside_s) - 0.15) < 1e-9
    return found


def test_ttft_outside_the_server_names_what_the_evidence_shows():
    """benchy's own lateness, a silence on every stream mid-answer while benchy was awake, or
    neither: each named only where its evidence is; a silence benchy's own lag explains, or
    one of a few inter-token gaps, is no server that stopped."""
    awake = {"client": {"loop_lag_ms_max": 5.0, "loop_lag_ms_p95": 2.0}}
    silent = {"silence": {"silence_s": 1.2, "streams": 3, "after_s": 2.0, "unread": 2}}
    assert _outside(**awake).cause == "in_front"
    stopped = _outside(**awake, **silent)
    assert stopped.cause == "server_stopped" and stopped.silence_s == 1.2 and stopped.silent_streams == 3
    busy = _outside(**awake, silence={"silence_s": 1.2, "streams": 3, "after_s": 2.0, "unread": 0})
    assert busy.cause == "in_front"  # every request answered at once: an engine busy, not stopped
    assert _outside(client={"loop_lag_ms_p95": 80.0}).cause == "client"  # late over half the 150 ms gap
    assert _outside(client={"loop_lag_ms_max": 212.0, "loop_lag_ms_p95": 9.0}).cause == "in_front"  # a peak
    lagging = _outside(
        client={"loop_lag_ms_max": 70.0, "loop_lag_ms_p95": 9.0},
        silence={"silence_s": 0.12, "streams": 1, "after_s": 0},
    )
    assert lagging.cause == "in_front"  # a 120 ms silence, with benchy 70 ms late: not the server's
    short = _outside(**awake, silence={"silence_s": 0.09, "streams": 2, "after_s": 0.0})
    assert short.cause == "in_front"  # 9 inter-token gaps: a slow step, not a stop
    late_sends = _outside(**awake, send_lag={"median": 0.1, "p90": 0.1})
    assert late_sends.cause == "client" and late_sends.client_lag_s == 0.1


def test_each_cause_is_worded_for_its_evidence():
    awake = {"client": {"loop_lag_ms_max": 5.0, "loop_lag_ms_p95": 2.0}}
    reqs = [request(metrics={"ttft_s": 0.200}) for _ in range(4)]
    summary_ = {"ttft_s": summary(0.200), "itl_s": summary(0.010)}
    silent = {"silence": {"silence_s": 1.2, "streams": 3, "after_s": 2.0, "unread": 2}}
    made = case(server(histograms={"ttft_s": hist(0.050)}), reqs, summary=summary_, **awake, **silent)
    [w] = [w for w in findings(made, SETUP) if w.code == "ttft_outside_server"]
    assert "the server stopped answering" in w.message and "1200 ms" in w.message
    assert "proxy" not in w.message and "benchy itself" not in w.message
    made = case(server(histograms={"ttft_s": hist(0.050)}), reqs, summary=summary_, **awake)
    [w] = [w for w in findings(made, SETUP) if w.code == "ttft_outside_server"]
    assert "in front of the server" in w.message and "stopped" not in w.message


def test_a_silence_on_every_stream_while_benchy_was_awake_outweighs_its_lag_peaks():
    """After a freeze the burst of answers makes benchy's loop lag (66 ms seen on a busy host
    against a 105 ms gap): the silence before it is still the server's."""
    found = _outside(
        client={"loop_lag_ms_max": 90.0}, silence={"silence_s": 1.5, "streams": 4, "after_s": 2.0, "unread": 5}
    )
    assert found.cause == "server_stopped"


def test_the_stop_holds_the_requests_sent_during_it_not_only_those_answered_after():
    """llama.cpp answers a held request's headers when a slot takes it: those that find a slot
    free at the resume get them inside the silence and are not `unread`. The stop holds every
    request sent during it (`sent`): with 3 of 4 sent meanwhile and 1 unread it holds the
    median; counted by `unread` alone it would not. A wait longer than the stop is the stop and
    then the other cause for what passes beyond it."""
    awake = {"client": {"loop_lag_ms_max": 5.0, "loop_lag_ms_p95": 2.0}}
    reqs = [request(metrics={"ttft_s": 0.200}) for _ in range(4)]
    summary_ = {"ttft_s": summary(0.200), "itl_s": summary(0.010)}
    held = {"silence_s": 1.2, "streams": 3, "after_s": 2.0, "unread": 1}
    made = case(server(), reqs, summary=summary_, **awake, silence=held | {"sent": 3})
    stop = stop_mod.stop_holding(made, len(reqs))
    assert stop is not None and stop.sent == 3
    alone = stop_mod.stop_cause(stop, 4, 0.15, "queueing")
    assert "3 of these 4 requests were sent meanwhile, 1 of them answered only after it" in alone
    assert "queueing" not in alone and "beyond" not in alone
    assert stop_mod.stop_cause(stop, 4, 1.5, "queueing").endswith("; the 300 ms beyond it: queueing")
    unread_only = case(server(), reqs, summary=summary_, **awake, silence=held | {"sent": 1})
    assert stop_mod.server_stop(unread_only) is not None and stop_mod.stop_holding(unread_only, 4) is None


def test_the_silence_counts_every_request_sent_during_it_and_those_answered_after_it():
    """Two streams mid-answer fall silent from 1.0 s to 2.0 s; of three requests sent in it, one
    gets its headers after it (unread), one inside it (a slot free at the resume), one none (it
    failed): all three were sent during it. One sent before it and one after are neither."""
    tracker = SilenceTracker()

    def add(sent: float, headers: float | None, events: tuple[float, ...] = ()) -> None:
        """A request sent at `sent` s of the case (its monotonic clock starts at 100 s)."""
        rec = RequestRecord(
            "c", 0, 0, False, f"r-{sent}", None, 64, 64, sent_mono_s=100 + sent,
            headers_s=None if headers is None else headers - sent, token_event_s=[t - sent for t in events],
        )  # fmt: skip
        tracker.add(rec)

    for stream in range(2):
        add(0.1 * stream, 0.15, tuple(0.2 + 0.05 * i for i in range(17)) + tuple(2.0 + 0.05 * i for i in range(10)))
    add(0.5, 0.55)  # before it
    add(1.2, 2.3)  # unread: its headers after the silence
    add(1.5, 1.9)  # answered inside it
    add(1.7, None)  # failed: no headers
    add(2.1, 2.15)  # after it
    silence = tracker.longest()
    assert silence is not None and abs(silence.silence_s - 1.0) < 2 * BIN_S and abs(silence.after_s - 1.0) < 2 * BIN_S
    assert silence.streams == 2 and silence.unread == 1 and silence.sent == 3, silence


def test_counters_that_fell_with_no_request_cut_are_no_restart():
    """A restart cuts the requests in flight and refuses the next ones; counters that fell while
    every request went through are not this server's restart, and the words say so."""
    ok = [request() for _ in range(4)]
    fell = server(counter_resets=1, derived={"requests": 3})
    [w] = [w for w in findings(case(fell, ok), SETUP) if w.code == "server_counter_reset"]
    assert "no request was cut or refused" in w.message and "several processes" in w.message
    cut = [*ok[:3], request(status="error", error_kind="disconnect", error="cut")]
    [w] = [w for w in findings(case(fell, cut), SETUP) if w.code == "server_counter_reset"]
    assert "1 counter reset, the server restarted" in w.message and w.details.counter_resets == 1  # type: ignore[union-attr]


def test_a_silence_benchy_slept_through_is_benchys_own():
    """benchy's loop stalled 1.1 s (a blocking call in the client): every stream fell silent
    because benchy read nothing; its typical lateness is small, but this silence was its own."""
    found = _outside(
        client={"loop_lag_ms_max": 1100.0, "loop_lag_ms_p95": 3.0},
        silence={"silence_s": 1.2, "streams": 3, "after_s": 2.0, "unread": 2},
    )
    assert found.cause == "client" and found.silence_s is None
