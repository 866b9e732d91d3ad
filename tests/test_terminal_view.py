"""The terminal (issue 54, item 6): a loaded run prints a short aligned view by default (the long
sections stay in report.md and `--view full`), and with --format json|csv the warnings still
reach the reader, on stderr, while stdout stays data. Against `benchy sim` and its truth log."""

from __future__ import annotations

import csv
import io
import json

import pytest

from benchy.measure.classify import DRAIN_CUT
from tests.conftest import run_benchy_here

LONG_SECTIONS = ("## Open loops", "## Closed loops", "Under load, median")


@pytest.fixture(scope="module")
def saturated(tmp_path_factory):
    """A rate sweep whose top rate the server cannot keep up with (one request at a time, 0.16 s
    each): the drain cuts some of its requests, and warnings follow."""
    from tests.forkserver import ForkedSim

    root = tmp_path_factory.mktemp("terminal")
    with ForkedSim(
        "--max-running", "1", "--decode-tps", "100", "--prefill-tps", "500000", truth_log=root / "truth.jsonl"
    ) as sim:
        args = ("--pp", "64", "--tg", "16", "--rate", "2", "20", "--duration", "2")
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(root / "out"), *args)
        as_json = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--format", "json", *args)
        as_csv = run_benchy_here("run", "--base-url", sim.base_url, "-q", "--format", "csv", *args)
        truth = sim.truth()
    results = json.loads((root / "out" / "results.json").read_text())
    return proc, results, truth, as_json, as_csv, root / "out"


def test_a_loaded_run_prints_a_short_aligned_view(saturated):
    proc, results, truth, *_, out = saturated
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout.split("\nwarning:")[0]  # the tables, before the warnings
    assert not any(section in shown for section in LONG_SECTIONS)
    assert "## Open loops" in (out / "report.md").read_text()  # the long sections stay there
    view = shown.split("Latency under load:")[1].split("More (p90")[0]
    lines = [line for line in view.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 120  # fits a terminal
    header, rule, *rows = lines
    assert "TTFT ms p50 / p99" in header and set(rule.replace(" ", "")) == {"-"}
    assert len({len(line) for line in lines}) == 1  # aligned: every line as wide as the rule
    for case in results["cases"]:
        (row,) = [r for r in rows if r.split()[2] == f"r{case['rate']:g}"]
        cells = row.split()
        cut = case["errors"].get(DRAIN_CUT, 0)
        ids = {r["request_id"] for r in case["requests"] if not r["warmup"]}
        aborted = sum(t["finish_reason"] == "abort" for t in truth if t["request_id"] in ids)
        assert cut == aborted  # the cut the view shows is the cut the server saw
        assert cells[3:6] == [str(case["n_ok"]), str(case["n_failed"] - cut), str(cut)]
        ttft = case["summary"]["ttft_s"]["median"] * 1000
        assert cells[6] == (f"{ttft:,.0f}" if ttft >= 100 else f"{ttft:.1f}")
    assert "report.md, or --view full" in proc.stdout


def test_json_and_csv_keep_stdout_data_and_warnings_on_stderr(saturated):
    proc, results, _truth, as_json, as_csv, _out = saturated
    for done in (as_json, as_csv):
        assert done.returncode == 0, done.stderr
        assert "warning: saturated [pp64 tg16 r20]" in done.stderr
        assert "warning:" not in done.stdout
    assert json.loads(as_json.stdout)["cases"]
    assert list(csv.DictReader(io.StringIO(as_csv.stdout)))
