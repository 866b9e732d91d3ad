"""A closed loop's steady state (measure/steady.py): the span where every stream was busy, found by
rule from the sends, judged against the simulator's truth log of when each request was in it."""

from __future__ import annotations

import csv
import json
import statistics
import tempfile
from pathlib import Path

import numpy as np

from benchy.measure import steady as steady_mod
from tests.conftest import client_slack_s, run_benchy_here, warning_codes


def in_server(intervals: list[tuple[float, float]], t: np.ndarray) -> np.ndarray:
    """How many requests the server held at each time of `t` (arrival ≤ t < last event)."""
    return sum(((t >= a) & (t < b)).astype(int) for a, b in intervals)


def test_the_window_is_where_the_server_held_every_stream_and_its_figures_are_the_truths(start_sim, tmp_path):
    # Prefills queue one behind another: the first round's arrivals are staggered apart, then
    # every stream resends as its request ends, and the last sends leave a drain behind them.
    sim = start_sim("--prefill-tps", "40000", "--decode-tps", "1000", "--max-running", "8", "--batch-slowdown", "4")
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--view", "full",
        "--pp", "4096", "--tg", "64", "-c", "8", "--runs", "3", "--warmup", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    window, slack = case["steady"], client_slack_s(case)
    truth = {t["request_id"]: t for t in sim.truth()}
    reqs = [r for r in case["requests"] if not r["warmup"]]
    first = min(r["sent_mono_s"] for r in reqs)
    start, end = first + window["start_s"], first + window["end_s"]
    served = [
        (truth[r["request_id"]]["arrival_s"], max(e["t_s"] for e in truth[r["request_id"]]["events"])) for r in reqs
    ]

    # The truth: inside the window the server held all 8 streams' requests but for each resend's
    # gap (one per send in it: the end read at most `slack` late, the next request stamped by a
    # server on the same busy machine at most as late); after it (the first end after the last
    # send), never all 8 again.
    grid = np.linspace(start, end, 4000)
    resends = sum(start <= r["sent_mono_s"] <= end for r in reqs)
    assert in_server(served, grid).mean() >= 8 - resends * 2 * slack / (end - start)
    drain = np.linspace(end + slack, max(b for _, b in served), 4000)
    assert in_server(served, drain).max() <= 7
    # It starts at the last stream's first send and ends as the first stream goes idle for good.
    sends = sorted(r["sent_mono_s"] for r in reqs)
    assert sends[7] == start and sends[-1] < end
    assert end == min(r["sent_mono_s"] + r["end_s"] for r in reqs if r["sent_mono_s"] + r["end_s"] >= sends[-1])

    # The window's figures are the truth's over the requests sent and ended inside it.
    inside = [r for r in reqs if r["sent_mono_s"] >= start and r["sent_mono_s"] + r["end_s"] <= end]
    assert window["requests"] == len(inside) >= 3
    assert len(inside) < case["n_ok"]  # the ramp-up and the drain are left out
    e2e = [b - a for (a, b), r in zip(served, reqs, strict=True) if r in inside]
    ttft = [truth[r["request_id"]]["first_token_event_s"] - truth[r["request_id"]]["arrival_s"] for r in inside]
    assert abs(window["summary"]["e2e_s"]["median"] - statistics.median(e2e)) <= slack
    assert abs(window["summary"]["ttft_s"]["median"] - statistics.median(ttft)) <= slack
    assert window["summary"]["e2e_s"]["n"] == len(inside)

    # The warning follows the figures: beside the whole run's median, beyond noise or not.
    whole, steady = case["summary"]["e2e_s"], window["summary"]["e2e_s"]
    apart = whole["ci95"][1] < steady["ci95"][0] or steady["ci95"][1] < whole["ci95"][0]
    apart = apart and abs(whole["median"] - steady["median"]) >= 0.05 * steady["median"]
    assert apart == ("steady_state_differs" in warning_codes(results, case["label"]) and "e2e_s" in _qualified(results))
    report = (out / "report.md").read_text()
    assert "## Closed loops: steady state" in report and f"{len(inside)} of {case['n_ok']}" in report
    # where a user reads it too: the terminal's full view and the CSV's row of each metric
    shown = proc.stdout.split("## Closed loops: steady state")
    assert len(shown) == 2 and f"{len(inside)} of {case['n_ok']}" in shown[1]
    with (out / "results.csv").open(newline="") as fh:
        rows = {row["metric"]: row for row in csv.DictReader(fh)}
    assert abs(float(rows["e2e_s"]["steady_median"]) - statistics.median(e2e)) <= slack
    assert abs(float(rows["ttft_s"]["steady_median"]) - statistics.median(ttft)) <= slack
    assert int(rows["e2e_s"]["steady_n"]) == len(inside)
    assert rows["e2e_s"]["from_schedule_median"] == ""  # a closed loop has no schedule


def test_a_shift_of_milliseconds_in_seconds_is_not_a_ramp_up_though_outside_tight_intervals():
    """Seen on the simulator at c64: total latency 35,329 ms over the run against 35,335 ms
    steady, each interval a few ms wide. Apart, but no reading changes: no warning. A shift of
    a tenth is one."""
    assert steady_mod.beyond_noise([35.327, 35.331], [35.333, 35.337])
    assert not steady_mod.moved(35.329, [35.327, 35.331], 35.335, [35.333, 35.337])
    assert steady_mod.moved(31.8, [31.0, 32.5], 35.335, [35.333, 35.337])
    assert not steady_mod.moved(31.8, [31.0, 35.4], 35.335, [35.333, 35.337])  # within noise


def _qualified(results: dict) -> set[str]:
    return {m for w in results["warnings"] if w["code"] == "steady_state_differs" for m in w["metrics"]}


def test_a_lone_stream_has_no_steady_window(start_sim, tmp_path):
    sim = start_sim("--instant")
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--no-report",
        "--pp", "64", "--tg", "4", "--runs", "3", "-c", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert all("steady" not in case for case in json.loads((out / "results.json").read_text())["cases"])
    assert "steady state" not in proc.stdout


def test_the_steady_check_is_a_check_class_whose_detection_and_words_are_apart():
    """Issue 51 item 2's shape for the other checks (checks/check.py Check): the steady check
    detects a typed finding (which metrics the ramp-up moved) and words it apart; calling it
    yields what checks.check yields for the case, in its registered place."""
    from benchy.checks import steady
    from benchy.checks import warnings as checks
    from benchy.checks.check import Check
    from benchy.results.types import CaseResult, MetricSummary, RunResult, Setup, SteadyState
    from benchy.results.view import RunView

    whole = {"e2e_s": MetricSummary(31.8, n=40, ci95=[31.0, 32.5]), "ttft_s": MetricSummary(0.5, n=40, ci95=[0.4, 0.6])}
    inside = {"e2e_s": MetricSummary(35.335, n=20, ci95=[35.333, 35.337]), "ttft_s": whole["ttft_s"]}
    window = SteadyState(start_s=1.0, end_s=9.0, requests=20, summary=inside)
    case = CaseResult("pp64 tg4 c4", 64, 4, concurrency=4, summary=whole, steady=window)
    view = RunView(setup=Setup(), cases=[case])
    check = steady.steady_state_differs
    assert isinstance(check, Check) and check in checks.CASE_CHECKS
    found = check.detect(case, view)
    assert found is not None and found.window is window
    assert [name for name, _, _ in found.metrics] == ["e2e_s"]  # TTFT did not move
    (said,) = list(check(case, view))
    assert said == check.words(case, found) and said.metrics == ["e2e_s"] and said.severity == "warning"
    assert [w for w in checks.check(RunResult(setup=Setup(), cases=[case])) if w.code == check.code.value] == [said]
    assert check.detect(CaseResult("pp64 tg4", 64, 4, summary=whole), view) is None  # no steady window
