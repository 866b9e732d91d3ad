"""report.html: the run's report as one self-contained page, from real runs of `benchy sim`, checked
as a file (offline, the figures' data the saved results) and in a real headless Chromium (every
figure drawn, no console error, a request's hover, the table's sorting), judged against the
simulator's truth log."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchy.report import html
from benchy.results.types import RunResult
from tests import browser
from tests.conftest import client_slack_s, run_benchy_here, run_python
from tests.forkserver import ForkedSim

FETCHES = re.compile(
    r"""(<script[^>]*\ssrc=|<link[^>]*\shref=|<img[^>]*\ssrc=["']?https?:|url\(["']?https?:|@import)""", re.I
)


def benchy(*args: str) -> None:
    proc = run_benchy_here(*args)
    assert proc.returncode in (0, 3, 4), f"benchy {' '.join(args)} → {proc.returncode}: {proc.stderr}"


@pytest.fixture(scope="module")
def faulty_run(tmp_path_factory):
    """Two prompt lengths at concurrency 1 and 2, some requests failed (HTTP 500): every figure
    of a sweep, failed dots among them."""
    out = tmp_path_factory.mktemp("html")
    truth = out / "truth.jsonl"
    with ForkedSim(
        "--decode-tps", "400", "--prefill-tps", "40000", "--fault", "http500:0.2", "--seed", "5", truth_log=truth
    ) as sim:
        benchy("run", "--base-url", sim.base_url, "--pp", "64", "256", "--tg", "16", "--concurrency", "1", "2",
               "--runs", "4", "--output", str(out / "run"), "-q")  # fmt: skip
    records = [json.loads(line) for line in truth.read_text().splitlines() if line.strip()]
    return out / "run", records


@pytest.fixture(scope="module")
def buffered_run(tmp_path_factory):
    """A stream buffered into 2 events: TTFT is withheld in every case."""
    out = tmp_path_factory.mktemp("html-buffered")
    with ForkedSim("--events-per-response", "2", "--decode-tps", "400", "--prefill-tps", "40000") as sim:
        benchy("run", "--base-url", sim.base_url, "--pp", "64", "96", "--tg", "48", "--runs", "4",
               "--output", str(out / "run"), "-q")  # fmt: skip
    return out / "run"


def results_of(folder: Path) -> RunResult:
    from benchy.results import files

    return files.read(folder / "results.json")


def figure_specs(page: str) -> dict:
    found = re.search(r'<script id="figures" type="application/json">(.*?)</script>', page, re.S)
    assert found, "the page carries no figure specs"
    return json.loads(found.group(1))


def test_every_run_folder_gets_a_report_html_that_fetches_nothing(faulty_run):
    folder, _ = faulty_run
    page = (folder / "report.html").read_text(encoding="utf-8")
    assert not FETCHES.findall(page), "report.html must open offline: nothing linked or fetched"
    assert (
        "newPlot" in page and page.count("<script") == 3
    )  # specs, plotly.js (as text, run when needed), the page's own
    results = results_of(folder)
    for case in results.cases:
        assert case.label in page
    assert (folder / "report.html").stat().st_size < 10_000_000


def test_the_vendored_plotly_js_is_the_file_its_note_names():
    """assets/ carries plotly.js beside a note of its version, source, sha256 and licence: the
    note must describe the file that ships (a bundle swapped without its note fails here)."""
    import hashlib
    from importlib import resources

    assets = resources.files("benchy.report").joinpath("assets")
    bundle = assets.joinpath(html.PLOTLY_JS).read_bytes()
    note = assets.joinpath("plotly-basic.LICENSE.txt").read_text(encoding="utf-8")
    stated = re.search(r"^sha256 ([0-9a-f]{64})  " + re.escape(html.PLOTLY_JS) + "$", note, re.M)
    assert stated and stated.group(1) == hashlib.sha256(bundle).hexdigest()
    version = re.search(rb"plotly\.js \(basic - minified\) v([0-9.]+)", bundle[:300])
    assert version and f"plotly.js {version.group(1).decode()}" in note
    assert "MIT License" in note and "Permission is hereby granted" in note
    assert b"</script" not in bundle.lower(), "inlined in a <script> element, it would end it early"


def test_the_figures_draw_the_saved_medians_and_every_request(faulty_run):
    folder, _ = faulty_run
    results = results_of(folder)
    specs = figure_specs((folder / "report.html").read_text(encoding="utf-8"))
    drawn = {
        label: y
        for trace in specs["e2e_tps-vs-prompt"]["data"]
        for (label, *_), y in zip(trace["customdata"], trace["y"])
    }
    assert drawn == {c.label: c.median("e2e_tps") for c in results.cases if c.summary.get("e2e_tps")}
    dots = specs["requests"]["data"]
    failed = sum(len(t["x"]) for t in dots if t["name"].endswith("failed"))
    measured = [r for c in results.cases for r in c.requests if not r.warmup]
    assert failed == sum(r.status != "ok" for r in measured) > 0, "the injected failures are drawn, apart"
    assert sum(len(t["x"]) for t in dots) == len(measured)
    scaling = specs["concurrency"]["data"]
    assert {x for t in scaling for x in t["x"]} == {1, 2}
    for trace in specs["e2e_tps-vs-prompt"]["data"]:  # an error bar never reaches below zero
        assert all(y - low >= 0 for y, low in zip(trace["y"], trace["error_y"]["arrayminus"]))


def test_a_long_case_draws_a_sample_keeping_every_failure_and_the_slowest(faulty_run):
    """The scatter's cap (html_figures.MAX_DOTS) on the run's own requests, with a small cap: the
    failed requests and the slowest survive, the count stays within the cap, send order is kept."""
    from benchy.report.html_figures import _dots, thin

    results = results_of(faulty_run[0])
    dots = [d for case in results.cases for d in _dots(case)]
    keep = max(4, len(dots) // 3)
    kept = thin(dots, keep)
    failed = [d for d in dots if not d[2]]
    assert len(kept) <= max(keep, len(failed) + max(1, keep // 5)) < len(dots)
    assert all(d in kept for d in failed)
    slowest = max((d for d in dots if d[2]), key=lambda d: d[4] or 0.0)
    assert slowest in kept
    assert [d[1] for d in kept] == sorted(d[1] for d in kept)
    assert thin(dots, len(dots)) == dots


def test_a_withheld_metric_says_why_instead_of_a_figure(buffered_run):
    results = results_of(buffered_run)
    page = (buffered_run / "report.html").read_text(encoding="utf-8")
    assert not any(c.summary.get("ttft_s") for c in results.cases)
    reason = results.cases[0].reason("ttft_s").message
    section = re.search(r'<section class="figure" id="panel-ttft_s-vs-prompt">(.*?)</section>', page, re.S)
    assert section and "Not drawn" in section.group(1) and html.esc(reason) in section.group(1)
    assert "ttft_s-vs-prompt" not in figure_specs(page)


def test_benchy_report_remakes_report_html_from_results_only(faulty_run, tmp_path):
    folder, _ = faulty_run
    benchy("report", str(folder / "results.json"), "--output", str(tmp_path / "again"))
    again = (tmp_path / "again" / "report.html").read_text(encoding="utf-8")
    assert figure_specs(again) == figure_specs((folder / "report.html").read_text(encoding="utf-8"))


def test_report_html_needs_no_plotly_and_a_missing_dependency_leaves_out_only_it(faulty_run, tmp_path):
    """plotly.js ships in benchy's own assets, so report.html is written without plotly.py; a
    hand-made environment (a GPU host's carried wheels) that lacks markdown-it gets the rest of the
    report all the same, report.html left out with one line saying why."""
    folder, _ = faulty_run
    for blocked in ("plotly", "markdown_it"):
        out = tmp_path / blocked
        program = (
            f"import sys; sys.modules[{blocked!r}] = None\n"  # an import of it then fails, as where it is missing
            "from benchy.report import render\n"
            f"render.write_from_file({str(folder / 'results.json')!r}, {str(out)!r})\n"
        )
        proc = run_python("-c", program)
        assert proc.returncode == 0, proc.stderr
        assert (out / "report.md").is_file() and (out / "results.csv").is_file()
        if blocked == "plotly":
            assert figure_specs((out / "report.html").read_text(encoding="utf-8")), proc.stderr
        else:
            assert not (out / "report.html").exists()
            assert "report.html not written: markdown_it is not installed" in proc.stderr


@browser.needs_browser
def test_report_html_in_a_real_browser(faulty_run, tmp_path):
    """Every figure drawn with its marks, no console error, a request's hover shows its id and
    the latency the simulator's truth log bounds, and the results table sorts."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    folder, truth = faulty_run
    results = results_of(folder)
    driver = browser.chromium()
    try:
        driver.get((folder / "report.html").as_uri())
        specs = figure_specs((folder / "report.html").read_text(encoding="utf-8"))
        assert browser.wait_drawn(driver) == len(specs)
        for key in specs:
            marks = driver.execute_script(
                "return document.querySelectorAll(arguments[0]).length",
                f"#fig-{key} .scatterlayer .point, #fig-{key} .barlayer .point, #fig-{key} .scatterlayer path.js-line",
            )
            assert marks > 0, f"figure {key} drew nothing"
        assert browser.drawn_types(driver) == {k: [t["type"] for t in f["data"]] for k, f in specs.items()}
        browser.screenshot(driver, tmp_path / "report.png")

        # hover the slowest successful request of the first case: a real mouse over its dot
        case = results.cases[0]
        request = max((r for r in case.requests if r.status == "ok" and not r.warmup), key=lambda r: r.metrics["e2e_s"])
        trace_index = next(i for i, t in enumerate(specs["requests"]["data"]) if t["name"] == case.label)
        point = next(
            i for i, t in enumerate(specs["requests"]["data"][trace_index]["text"]) if t.startswith(request.request_id)
        )
        div = driver.find_element(By.ID, "fig-requests")
        driver.execute_script("arguments[0].scrollIntoView()", div)
        dx, dy = driver.execute_script(
            """const gd = arguments[0], t = gd.data[arguments[1]], i = arguments[2];
            const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
            return [xa._offset + xa.l2p(t.x[i]) - box.width / 2, ya._offset + ya.l2p(t.y[i]) - box.height / 2];""",
            div, trace_index, point,
        )  # fmt: skip
        ActionChains(driver).move_to_element_with_offset(div, int(dx), int(dy)).perform()
        label = driver.execute_script("return document.querySelector('#fig-requests .hoverlayer').textContent")
        assert request.request_id in label, label
        shown_ms = float(re.search(r"([\d,]+\.\d) ms", label).group(1).replace(",", ""))
        served = next(t for t in truth if t.get("request_id") == request.request_id)
        true_s = served["last_token_event_s"] - served["arrival_s"]  # the server's own span of the request
        slack_ms = 1000 * client_slack_s(json.loads((folder / "results.json").read_text())["cases"][0]) + 50
        assert true_s * 1000 - 0.1 <= shown_ms <= true_s * 1000 + slack_ms, (shown_ms, true_s)
        browser.screenshot(driver, tmp_path / "report-hover.png")

        # sort the results table by e2e t/s, twice: ascending then descending
        header = driver.find_element(By.XPATH, "//table[@id='results']//th[normalize-space()='e2e t/s']")
        column = driver.execute_script("return arguments[0].cellIndex", header)
        for order in (1, -1):
            header.click()
            cells = driver.execute_script(
                "return [...document.querySelectorAll('#results tbody tr')].map(r => r.cells[arguments[0]].textContent)",
                column,
            )
            values = [float(c.split()[0].replace(",", "")) for c in cells]
            assert values == sorted(values, reverse=order < 0)
        assert browser.console_errors(driver) == []
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def probe_folder(tmp_path_factory):
    """A prefix-cache probe of two lengths and a capacity sweep of a 4,096-token cache."""
    out = tmp_path_factory.mktemp("probe-html")
    with ForkedSim("--prefill-tps", "50000", "--decode-tps", "3000", "--cache-blocks", "256") as sim:
        for name, args in (
            ("lengths", ("--lengths", "1000", "4000", "-n", "3")),
            ("capacity", ("--capacity", "--capacity-prefix-tokens", "256", "--capacity-max-tokens", "8192")),
        ):
            proc = run_benchy_here(
                "probe-cache", "--base-url", sim.base_url, "--tg", "2", "-q", "-o", str(out / name), *args
            )
            assert proc.returncode == 0, proc.stderr
    return out


def capacity_folder(tmp_path) -> Path:
    """A saved capacity search whose answer (c4) is beaten on both axes by c2, which also passes."""
    from benchy.report import capacity as capacity_report
    from benchy.results.capacity import CapacityAnswer, CapacityPoint, CapacityResult, CapacitySetup

    points = [(1, 100.0, 50.0, "pass"), (2, 300.0, 48.0, "pass"), (4, 250.0, 40.0, "pass"), (5, 260.0, 20.0, "fail")]
    result = CapacityResult(
        setup=CapacitySetup(case="pp512 tg128", slo={"ttft_s": 0.5}),
        answer=CapacityAnswer("found", 4, 5),
        points=[CapacityPoint(load=c, throughput_tps=t, per_user_tps=u, verdict=v) for c, t, u, v in points],
    )
    capacity_report.write(result, tmp_path / "search")
    return tmp_path / "search"


def test_probe_and_capacity_folders_get_a_report_html_too(probe_folder, tmp_path):
    lengths = (probe_folder / "lengths" / "report.html").read_text(encoding="utf-8")
    probe = json.loads((probe_folder / "lengths" / "probe.json").read_text())
    assert not FETCHES.findall(lengths)
    ttfts = figure_specs(lengths)["probe"]["data"]
    drawn = sorted(y for t in ttfts for y in t["y"])
    saved = sorted(
        round(v * 1000, 2)
        for e in probe["lengths"]
        for s in ("shared", "unique")
        for v in e[s]["ttft_s"]
        if v is not None
    )
    assert drawn == saved
    cap = json.loads((probe_folder / "capacity" / "probe.json").read_text())["capacity"]
    page = (probe_folder / "capacity" / "report.html").read_text(encoding="utf-8")
    assert f"cliff at {cap['cliff_tokens']:,.0f}" in page
    capacity = (capacity_folder(tmp_path) / "report.html").read_text(encoding="utf-8")
    assert not FETCHES.findall(capacity)
    assert "c2 beats it on both axes and also passes" in capacity
    names = [t["name"] for t in figure_specs(capacity)["pareto"]["data"]]
    assert "Pareto front" in names and "capacity: c4" in names


@browser.needs_browser
def test_probe_and_capacity_pages_in_a_real_browser(probe_folder, tmp_path):
    driver = browser.chromium()
    try:
        pages = [probe_folder / "lengths", probe_folder / "capacity", capacity_folder(tmp_path)]
        for folder in pages:
            driver.get((folder / "report.html").as_uri())
            assert browser.wait_drawn(driver) == 1
            marks = driver.execute_script("return document.querySelectorAll('.scatterlayer .point').length")
            assert marks > 0, folder
            specs = figure_specs((folder / "report.html").read_text(encoding="utf-8"))
            assert browser.drawn_types(driver) == {k: [t["type"] for t in f["data"]] for k, f in specs.items()}
            assert browser.console_errors(driver) == [], folder
            browser.screenshot(driver, tmp_path / f"{folder.name}.png")
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """Two simulated GPUs read through the simulator's dcgm-exporter page."""
    out = tmp_path_factory.mktemp("html-gpu") / "run"
    with ForkedSim("--decode-tps", "200", "--gpus", "2", "--gpu-watts", "350", "--gpu-idle-watts", "100") as sim:
        benchy("run", "--base-url", sim.base_url, "--pp", "64", "256", "--tg", "64", "--runs", "3", "-q",
               "--gpu-metrics", sim.base_url.removesuffix("/v1") + "/dcgm/metrics", "--output", str(out))  # fmt: skip
    return out


def test_the_gpu_panels_draw_the_saved_power_and_energy(gpu_run, tmp_path):
    results = results_of(gpu_run)
    specs = figure_specs((gpu_run / "report.html").read_text(encoding="utf-8"))
    energy = specs["energy"]["data"][0]
    saved = {c.label: c.gpu.joules_per_token for c in results.cases if c.gpu and c.gpu.joules_per_token is not None}
    assert saved and dict(zip(energy["x"], energy["y"])) == saved
    power = {t["name"]: len(t["y"]) for t in specs["gpu"]["data"]}
    assert power == {c.label: len(c.gpu.series) for c in results.cases if c.gpu and c.gpu.series}
    if browser.MISSING:
        pytest.skip(browser.MISSING)
    driver = browser.chromium()
    try:
        driver.get((gpu_run / "report.html").as_uri())
        assert browser.wait_drawn(driver) == len(specs)
        for key in ("gpu", "energy"):
            marks = driver.execute_script("return document.querySelectorAll(arguments[0]).length", f"#fig-{key} .point")
            assert marks > 0, key
        assert browser.console_errors(driver) == []
        browser.screenshot(driver, tmp_path / "report-gpu.png")
    finally:
        driver.quit()


def test_the_cache_ledger_sets_the_implied_hit_rate_beside_the_reported(tmp_path):
    """A shared-prefix workload: the ledger's bars are the saved expected and reported hit rates,
    and the simulator's truth log says how much the cache really served."""
    truth = tmp_path / "truth.jsonl"
    with ForkedSim("--decode-tps", "1000", "--prefill-tps", "50000", truth_log=truth) as sim:
        benchy("run", "--base-url", sim.base_url, "--shared-prefix", "0.5", "0.9", "--groups", "2", "--pp", "1000",
               "--tg", "4", "-c", "2", "-q", "--output", str(tmp_path / "run"))  # fmt: skip
    results = results_of(tmp_path / "run")
    cases = [c for c in results.cases if c.workload is not None and c.kind != "sweep"]
    ledger = figure_specs((tmp_path / "run" / "report.html").read_text(encoding="utf-8"))["cache"]["data"]
    expected, reported = ({x: y for x, y in zip(t["x"], t["y"])} for t in ledger)
    for case in cases:
        reuse = case.workload.reuse  # type: ignore[union-attr]
        assert expected[case.label] == pytest.approx(100 * reuse.expected_hit_rate)
        assert reported[case.label] == pytest.approx(100 * reuse.reported_hit_rate)
        ids = {r.request_id for r in case.requests if not r.warmup and r.status == "ok"}
        served = [json.loads(line) for line in truth.read_text().splitlines() if line.strip()]
        served = [t for t in served if t.get("request_id") in ids]
        true_rate = sum(t["cached_tokens"] for t in served) / sum(t["prompt_tokens"] for t in served)
        assert reported[case.label] == pytest.approx(100 * true_rate, abs=0.5)  # the sim reports what it served
