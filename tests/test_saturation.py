"""A saturation sweep in one flag and its knee (issue 54, item 4): `--saturation N` runs one
stream, then the highest throughput, then N rates between; every rate sweep names its knee,
judged against the capacity the simulator's truth log shows."""

from __future__ import annotations

import json
import statistics

import pytest

from benchy import saturation
from tests.conftest import run_benchy_here


def _run(sim, out, *args: str) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), "--quiet", "--no-report", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


def _knee(results: dict) -> dict:
    (note,) = [w for w in results["warnings"] if w["code"] == "rate_knee"]
    return note


def test_the_knee_lies_at_the_capacity_the_truth_shows(start_sim, tmp_path):
    # One request at a time: the server's capacity is 1 / its service time, which the truth gives.
    sim = start_sim("--max-running", "1", "--decode-tps", "100", "--prefill-tps", "500000")
    results = _run(sim, tmp_path / "out", "--pp", "64", "--tg", "16", "--rate", "2", "3", "12", "--duration", "3")
    served = [t["last_token_event_s"] - t["admitted_s"] for t in sim.truth() if t.get("request_id")]
    capacity = 1 / statistics.mean(served)  # ~6 requests/s
    note = _knee(results)
    (knee,) = note["evidence"]
    assert knee["observed"] is not None and knee["observed"] < capacity  # kept up: below what it can serve
    assert "at 12 requests/s it fell behind" in note["message"] and capacity < 12
    assert note["severity"] == "info"


def test_rates_run_from_one_stream_to_past_the_highest_throughput():
    assert saturation.rates_between(2.0, 10.0, 5) == [2.0, 4.62, 7.25, 9.88, 12.5]
    assert saturation.rates_between(3.0, 2.0, 2) == [3.0, 3.75]  # a server no faster with more streams


def test_one_flag_runs_the_phases_and_names_the_knee(start_sim, tmp_path):
    sim = start_sim("--max-running", "2", "--decode-tps", "200", "--prefill-tps", "500000")
    out = tmp_path / "out"
    results = _run(sim, out, "--pp", "64", "--tg", "16", "-c", "4", "--saturation", "3", "--duration", "1.5")
    phases = {
        name: json.loads((out / f"saturation-{name}" / "results.json").read_text())["cases"][0]
        for name in ("single", "throughput")
    }
    assert phases["single"]["concurrency"] == 1 and phases["throughput"]["concurrency"] == 4
    single, many = phases["single"]["request_rate"], phases["throughput"]["request_rate"]
    rates = [c["rate"] for c in results["cases"]]
    assert rates == saturation.rates_between(single, many, 3)
    assert rates[0] == pytest.approx(single, rel=0.01) and rates[-1] == pytest.approx(1.25 * many, rel=0.01)
    assert _knee(results)["message"].startswith("Knee of pp64 tg16")


def test_a_saturation_sweep_takes_one_plain_case():
    proc = run_benchy_here("run", "--pp", "64", "128", "--saturation", "3")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--saturation runs one --pp and one --tg" in proc.stderr
