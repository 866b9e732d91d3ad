"""`benchy report` on a long run parses each saved request once (issue 54, item 8): the figures'
and checks' scan and report.html's scatter of every request come from one pass over the rows,
made as the results are read (results/files.py: each case's scan, a value of the case). The
time it buys is a benchmark's (`make bench-scale`: report CPU at 20,000 requests against
2,000); this holds the property that buys it."""

from __future__ import annotations

import json

from benchy.report import render
from benchy.results import files, rows
from benchy.results.types import RequestResult
from tests.conftest import run_benchy_here


def rows_on_disk(case) -> bool:
    return isinstance(case.requests, rows.Rows) and case.requests.spilled


def test_the_report_reads_each_saved_request_once(start_sim, tmp_path, monkeypatch):
    sim = start_sim("--preset", "instant")
    out = tmp_path / "run"
    args = ("--pp", "64", "--tg", "8", "-c", "4", "--requests", "60", "--warmup", "2", "--no-report", "-q")
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), *args)
    assert proc.returncode == 0, proc.stderr
    saved = json.loads((out / "results.json").read_text())
    n_rows = sum(len(c["requests"]) for c in saved["cases"])

    parsed = []
    real = RequestResult.of_line.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(RequestResult, "of_line", classmethod(lambda cls, line: parsed.append(1) or real(cls, line)))
    monkeypatch.setattr(rows, "IN_MEMORY", 8)  # these cases read back as a long run's are: from disk
    results = files.read(out / "results.json")  # rows stay on disk, indexed, each parsed once for the scan
    assert len(parsed) == n_rows and all(rows_on_disk(c) for c in results.cases)
    render.write_report(results, out)
    assert len(parsed) == n_rows  # each once, for every figure, table and check of the report
    page = (out / "report.html").read_text()
    assert page.count("benchy-") >= 60  # the scatter still names every measured request
