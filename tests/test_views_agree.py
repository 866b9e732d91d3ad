"""Every view shows a figure exactly where the table does (issue 51): report.html's figures and
the PNG figures ask report/shown.py, as the table does, whether a case's metric is withheld
(by the analysis, or as too noisy for one figure) or qualified by a warning, and mark a point
whose requests partly failed.

A real run of `benchy sim` with failed requests (HTTP 500) over two prompt lengths; where a test
needs a figure the table withholds as too noisy, the saved results.json says so (its spread
set 5× its median), as a run on a noisy server would have saved it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchy.measure.registry import METRICS
from benchy.report import html_figures, plots, shown, table
from benchy.results import files
from tests.conftest import run_benchy_here
from tests.forkserver import ForkedSim


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("views") / "run"
    with ForkedSim("--decode-tps", "400", "--prefill-tps", "40000", "--fault", "http500:0.25", "--seed", "3") as sim:
        proc = run_benchy_here(
            *["run", "--base-url", sim.base_url, "--pp", "64", "256", "--tg", "16", "--runs", "6"],
            *["--output", str(out), "-q"],
        )
    assert proc.returncode in (0, 3), proc.stderr
    return out


def _noisy_copy(run: Path, tmp_path: Path, metric: str) -> tuple[Path, str]:
    """results.json with the first case's `metric` spread 5× its median: a figure the table
    withholds as too noisy. Returns the file and the case's label."""
    data = json.loads((run / "results.json").read_text())
    case = data["cases"][0]
    summary = case["summary"][metric]
    summary["std"] = 5 * summary["median"]
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return path, case["label"]


def _x_of(panel: html_figures.Panel) -> set[int]:
    assert panel.figure is not None
    return {x for trace in panel.figure["data"] for x in trace["x"]}


def test_a_figure_the_table_withholds_is_drawn_by_no_figure(failing_run, tmp_path):
    path, label = _noisy_copy(failing_run, tmp_path, "decode_tps")
    results = files.read(path)
    case = next(c for c in results.cases if c.label == label)
    notes = table.Footnotes()
    headers, body = table.rows(results, notes)
    cell = body[[c.label for c in results.cases].index(label)][headers.index(METRICS["decode_tps"].title)]
    assert cell.startswith("n/a") and any("the spread" in n for n in notes.lines())  # the table withholds it

    panel = html_figures.metric_vs_prompt(results, "decode_tps")
    assert panel is not None and case.pp not in _x_of(panel)  # report.html draws no point for it
    assert f"{label} (" in panel.caption and "the spread" in panel.caption  # and says why
    other = html_figures.metric_vs_prompt(results, "e2e_tps")  # the case's other figures stay
    assert other is not None and case.pp in _x_of(other)

    figure = plots.throughput_vs_prompt(results, tmp_path)
    assert figure is not None and figure.path is not None
    assert f"decode t/s of {label} (spread over twice the median)" in figure.caption  # the PNG leaves it out
    assert "withheld, as in the results table" in figure.caption and "could not measure" not in figure.caption


def test_a_point_whose_requests_failed_is_marked_in_every_figure(failing_run, tmp_path):
    results = files.read(failing_run / "results.json")
    failed = [c for c in results.cases if c.n_failed]
    assert failed and all(c.n_ok for c in failed)  # the fault rate leaves both kinds of point
    panel = html_figures.metric_vs_prompt(results, "e2e_tps")
    assert panel is not None and panel.figure is not None
    marks = {x: text for trace in panel.figure["data"] for x, text in zip(trace["x"], trace["text"])}
    for case in results.cases:
        assert (f"{shown.FAILED_MARK} {case.n_failed} failed" in marks[case.pp]) == bool(case.n_failed)
    assert "some of the case's requests failed" in panel.caption
    figure = plots.throughput_vs_prompt(results, tmp_path)
    assert figure is not None
    for case in failed:
        assert f"{table.case_name(case)} ({case.n_failed} failed)" in figure.caption


def test_a_point_a_warning_qualifies_is_flagged_in_the_figure_as_in_the_table(failing_run, tmp_path):
    """A warning that names a case's metric puts ⚠ on its cell, and on its point; the saved
    results carry one such warning (as a run whose first case spent its output on reasoning
    would have saved it, naming e2e_tps here)."""
    data = json.loads((failing_run / "results.json").read_text())
    label = data["cases"][0]["label"]
    data["warnings"].append(
        {"code": "reasoning_only", "severity": "warning", "case": label, "message": "m", "hint": "h",
         "metrics": ["e2e_tps"], "withheld": [], "details": {"code": "reasoning_only", "requests": 1}}
    )  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(data))
    results = files.read(tmp_path / "results.json")
    notes = table.Footnotes()
    headers, body = table.rows(results, notes)
    column = headers.index(METRICS["e2e_tps"].title)
    assert [row[column].endswith(shown.FLAG) for row in body] == [c.label == label for c in results.cases]
    panel = html_figures.metric_vs_prompt(results, "e2e_tps")
    assert panel is not None and panel.figure is not None
    by_pp = {c.pp: c for c in results.cases}
    for trace in panel.figure["data"]:
        for x, text in zip(trace["x"], trace["text"]):
            assert (shown.FLAG in text) == (by_pp[x].label == label)
    assert "a warning qualifies the point" in panel.caption
    figure = plots.throughput_vs_prompt(results, tmp_path)
    assert (
        figure is not None
        and f"a warning qualifies the point ({table.case_name(by_pp[data['cases'][0]['pp']])}" in figure.caption
    )


def test_browse_lists_no_figure_the_table_withholds(failing_run, tmp_path):
    """benchy browse's index shows each run's best e2e t/s: never a median the table withholds."""
    from benchy.report import browse

    data = json.loads((failing_run / "results.json").read_text())
    best = max(data["cases"], key=lambda c: c["summary"]["e2e_tps"]["median"])
    best["summary"]["e2e_tps"]["std"] = 5 * best["summary"]["e2e_tps"]["median"]
    (tmp_path / "results.json").write_text(json.dumps(data))
    results = files.read(tmp_path / "results.json")
    row = browse.run_row(browse.Run("r", tmp_path / "results.json", results), tmp_path)
    rest = max(c["summary"]["e2e_tps"]["median"] for c in data["cases"] if c is not best)
    assert row["e2e"] == f"{rest:,.1f}"


def test_report_html_marks_a_figure_qualified_only_by_a_warning_that_names_what_it_draws(failing_run, tmp_path):
    """report.html's "qualified by" badge follows the table's flags: a warning naming ttft_s marks
    the TTFT figure and not the decode one; a run-level warning about something no figure draws
    (the canary's answers) marks none, though it is listed among the warnings."""
    from benchy.report import html

    data = json.loads((failing_run / "results.json").read_text())
    label = data["cases"][0]["label"]
    data["warnings"] += [
        {"code": "fixed_latency", "severity": "warning", "case": label, "message": "m", "hint": "h",
         "metrics": ["ttft_s"], "withheld": [], "details": {"code": "fixed_latency"}},
        {"code": "canary_failed", "severity": "warning", "case": None, "message": "c", "hint": "h",
         "metrics": [], "withheld": [], "details": {"code": "canary_failed"}},
    ]  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(data))
    results = files.read(tmp_path / "results.json")
    page = html.render(results)
    ttft, decode = (
        page.split(f'id="panel-{key}"')[1].split("</section>")[0]
        for key in ("ttft_s-vs-prompt", "decode_tps-vs-prompt")
    )
    assert "qualified by" in ttft and ">fixed_latency (" in ttft and "canary_failed" not in ttft
    assert "fixed_latency" not in decode and "canary_failed" not in decode
    assert "canary_failed" in page.split('class="warnings"')[1]  # still listed among the warnings
