"""Latency against load and throughput against latency (issue 54, item 1): report.html's load
figures of a concurrency sweep and a rate sweep against `benchy sim`, read back from the page's
own figure specs and opened in a headless Chromium. Each p50/p90/p99 is drawn with its interval
or said to be too few, and failed requests are marked on every load figure, in the number the
simulator's truth log gives."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.browser import chromium, console_errors, needs_browser, wait_drawn
from tests.conftest import run_benchy_here
from tests.forkserver import ForkedSim

LATENCIES = ("ttft_s", "itl_s", "e2e_s")


def _figures(folder: Path) -> dict:
    page = (folder / "report.html").read_text()
    found = re.search(r'<script id="figures" type="application/json">(.*?)</script>', page, re.S)
    assert found
    return json.loads(found.group(1).replace("<\\/", "</"))


def _run(sim, out: Path, *args: str) -> dict:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(out), "--quiet", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads((out / "results.json").read_text())


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory):
    root = tmp_path_factory.mktemp("load-figures")
    with ForkedSim("--decode-tps", "400", "--prefill-tps", "500000", "--max-running", "64") as fast:
        conc = _run(fast, root / "conc", "--pp", "64", "--tg", "16", "-c", "1", "4", "--requests", "70")
    # One request at a time, 0.16 s each (~6/s): 20 requests/s for 2 s leaves a queue the
    # drain (2 s) cuts; 2/s does not.
    with ForkedSim(
        "--decode-tps", "100", "--prefill-tps", "500000", "--max-running", "1", truth_log=root / "truth.jsonl"
    ) as slow:
        rate = _run(slow, root / "rate", "--pp", "64", "--tg", "16", "--rate", "2", "20", "--duration", "2")
        truth = slow.truth()
    return {"conc": (root / "conc", conc), "rate": (root / "rate", rate, truth)}


def test_latency_percentiles_against_concurrency_with_intervals_or_too_few(sweeps):
    folder, results = sweeps["conc"]
    figures = _figures(folder)
    cases = {c["concurrency"]: c for c in results["cases"]}
    for name in LATENCIES:
        fig = figures[f"{name}-vs-concurrency"]
        by_pct = {t["name"].rsplit(" ", 1)[1]: t for t in fig["data"]}
        p50 = by_pct["p50"]
        # Drawn where measured; a level where the metric is withheld (a busy machine can merge a
        # stream's reads) is named with its reason instead.
        measured = [float(c) for c in sorted(cases) if cases[c]["summary"].get(name)]
        assert p50["x"] == measured and measured
        page = (folder / "report.html").read_text()
        for c in sorted(cases):
            if not cases[c]["summary"].get(name):
                assert f"c{c} ({cases[c]['unavailable'][name]})" in page
        for x, y, low, high in zip(p50["x"], p50["y"], p50["error_y"]["arrayminus"], p50["error_y"]["array"]):
            summary = cases[int(x)]["summary"][name]
            assert y == pytest.approx(summary["median"] * 1000)
            assert y - low == pytest.approx(summary["ci95"][0] * 1000)
            assert y + high == pytest.approx(summary["ci95"][1] * 1000)
        # 70 requests bound a p90 (64 needed) but no p99 (662): p90 drawn with its bounds,
        # p99 left out and said to be too few.
        p90 = by_pct["p90"]
        for x, y, high in zip(p90["x"], p90["y"], p90["error_y"]["array"]):
            summary = cases[int(x)]["summary"][name]
            assert y + high == pytest.approx(summary["p90_high"] * 1000)
        assert "p99" not in by_pct
    caption_figure = figures["ttft_s-vs-concurrency"]
    assert not caption_figure["layout"]["annotations"]  # nothing failed, nothing marked
    assert "p99 at c1, c4 (too few: it needs 662 requests)" in page


def test_failed_requests_are_marked_on_every_load_figure_as_the_truth_counts_them(sweeps):
    folder, results, truth = sweeps["rate"]
    by_rate = {c["rate"]: c for c in results["cases"]}
    saturated, calm = by_rate[20.0], by_rate[2.0]
    ids = {r["request_id"] for r in saturated["requests"] if not r["warmup"]}
    aborted = sum(1 for t in truth if t["request_id"] in ids and t["finish_reason"] == "abort")
    assert saturated["n_failed"] == aborted > 0 and calm["n_failed"] == 0
    figures = _figures(folder)
    marked = f"✕ {aborted} of {len(ids)} failed ({aborted} cut)"
    for name in LATENCIES:
        notes = figures[f"{name}-vs-rate"]["layout"]["annotations"]
        assert [n["text"] for n in notes] == [marked]
    tradeoff = figures["throughput-vs-latency"]
    (crosses,) = [t for t in tradeoff["data"] if t["name"] == "had failed requests"]
    assert crosses["y"] == [saturated["aggregate_tps"]]
    line = next(t for t in tradeoff["data"] if t["name"] != "had failed requests")
    assert line["text"] == ["r2", "r20"] and line["y"] == [calm["aggregate_tps"], saturated["aggregate_tps"]]


@needs_browser
def test_the_load_figures_draw_in_a_browser(sweeps, tmp_path):
    for key in ("conc", "rate"):
        folder = sweeps[key][0]
        driver = chromium()
        try:
            driver.get((folder / "report.html").as_uri())
            assert wait_drawn(driver) >= 4
            assert not console_errors(driver)
            axis = "concurrency" if key == "conc" else "rate"
            shown = driver.execute_script(f"return document.querySelector('#fig-ttft_s-vs-{axis} .main-svg') !== null")
            assert shown
            driver.find_element("css selector", f"#panel-ttft_s-vs-{axis}").screenshot(str(tmp_path / f"{key}.png"))
            assert (tmp_path / f"{key}.png").stat().st_size > 10_000
        finally:
            driver.quit()
