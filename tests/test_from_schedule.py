"""Open loops without coordinated omission: every open-loop latency is also timed from the
request's intended send (the schedule), judged against the simulator's truth log."""

from __future__ import annotations

import csv
import json
import statistics
import tempfile
from pathlib import Path

from benchy.report.markdown import _ms_text
from tests.conftest import client_slack_s, run_benchy_here


def run(sim, tmp_path, *args: str) -> tuple[dict, Path]:
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here("run", "--base-url", sim.base_url, "--quiet", "--output", str(out), "--view", "full", *args)
    assert proc.returncode == 0, proc.stderr
    (out / "stdout.txt").write_text(proc.stdout)  # the table the terminal's full view showed
    return json.loads((out / "results.json").read_text()), out


def csv_rows(out: Path) -> dict[str, dict[str, str]]:
    """results.csv's rows by metric (one case)."""
    with (out / "results.csv").open(newline="") as fh:
        return {row["metric"]: row for row in csv.DictReader(fh)}


def test_held_sends_stay_in_the_latency_timed_from_the_schedule(start_sim, tmp_path):
    # One request in flight at 400/s against ~30 ms responses: sends fall behind their schedule by
    # ~27 ms a request (a median over a second by the 80th), far beyond what a busy machine's own
    # stalls make (up to 0.5 s seen), which the latency from the actual send hides and the one from
    # the schedule keeps.
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "1000")
    results, out = run(
        sim, tmp_path, "--pp", "64", "--tg", "32", "--rate", "400", "--max-inflight", "1", "--requests", "80"
    )
    (case,) = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth()}
    reqs = [r for r in case["requests"] if not r["warmup"] and r["status"] == "ok"]
    slack = client_slack_s(case)
    shown = (out / "stdout.txt").read_text()
    assert "## Open loops: latency from the schedule" in shown
    terminal_row = next(line for line in shown.split("from the schedule")[1].splitlines() if case["label"] in line)
    held = [truth[r["request_id"]]["arrival_s"] - r["scheduled_mono_s"] for r in reqs]
    assert statistics.median(held) > 2 * slack  # the truth: the server saw most requests late
    for name, truth_end in (
        ("ttft_s", lambda t: t["first_token_event_s"]),
        ("e2e_s", lambda t: max(e["t_s"] for e in t["events"])),
    ):
        due = [truth_end(truth[r["request_id"]]) - r["scheduled_mono_s"] for r in reqs]
        sent = [truth_end(truth[r["request_id"]]) - truth[r["request_id"]]["arrival_s"] for r in reqs]
        scheduled, actual = case["from_schedule"][name], case["summary"][name]
        assert scheduled["n"] == len(reqs) == actual["n"]
        assert abs(scheduled["median"] - statistics.median(due)) <= slack
        assert abs(scheduled["max"] - max(due)) <= slack
        assert abs(actual["median"] - statistics.median(sent)) <= slack  # the other clock, beside it
        # where a user reads it: the CSV's row of the metric, and the terminal's table
        row = csv_rows(out)[name]
        assert abs(float(row["from_schedule_median"]) - statistics.median(due)) <= slack
        assert int(row["from_schedule_n"]) == len(reqs)
        assert row["from_schedule_p99"] == ""  # 80 values: too few for a p99, as the report says
        assert _ms_text(scheduled["median"]) in terminal_row
    report = (out / "report.md").read_text()
    assert (
        "## Open loops: latency from the schedule" in report and case["label"] in report.split("from the schedule")[1]
    )


def test_a_closed_loop_has_no_schedule_to_time_from(start_sim, tmp_path):
    sim = start_sim("--instant")
    results, out = run(sim, tmp_path, "--pp", "64", "--tg", "4", "-c", "2", "--runs", "2")
    assert all("from_schedule" not in case for case in results["cases"])
    assert all(row["from_schedule_median"] == "" for row in csv_rows(out).values())
    assert "latency from the schedule" not in (out / "report.md").read_text()
