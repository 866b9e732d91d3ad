"""`benchy browse`: one page over many run folders, from real runs of `benchy sim` at two decode
rates (the simulator's own setting is the truth the comparison must find), checked as a file and
in a real headless Chromium: rows, the filter, sorting, and two runs compared in two clicks."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from benchy.report import compare
from tests import browser
from tests.conftest import run_benchy_here, start_benchy
from tests.forkserver import ForkedSim

RATES = {"slow": 200, "fast": 800}  # the simulator's decode tokens/s: what "faster" must mean


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs under one folder: the same cases at two decode rates, and one of other cases."""
    root = tmp_path_factory.mktemp("browse")
    plans = {
        "slow": (RATES["slow"], ("--pp", "64", "128", "--tg", "24", "--runs", "5")),
        "fast": (RATES["fast"], ("--pp", "64", "128", "--tg", "24", "--runs", "5")),
        "other": (RATES["fast"], ("--pp", "96", "--tg", "8", "--runs", "3")),
    }
    for name, (rate, args) in plans.items():
        with ForkedSim("--decode-tps", str(rate), "--prefill-tps", "50000") as sim:
            proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(root / "runs" / name), *args)
        assert proc.returncode == 0, proc.stderr
    (root / "runs" / "stray").mkdir()
    (root / "runs" / "stray" / "results.json").write_text("{not json", encoding="utf-8")
    return root


def browse_data(index) -> dict:
    found = re.search(r'<script id="browse" type="application/json">(.*?)</script>', index.read_text(), re.S)
    assert found
    return json.loads(found.group(1))


def test_browse_lists_every_run_and_compares_each_pair_that_shares_a_case(runs, tmp_path):
    proc = run_benchy_here("browse", str(runs / "runs"), "-o", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    assert "skipped" in proc.stderr and "stray" in proc.stderr  # said, and the page still made
    data = browse_data(tmp_path / "site" / "index.html")
    ids = [r["id"] for r in data["runs"]]
    assert sorted(ids) == ["fast", "other", "slow"]
    slow, fast, other = (ids.index(n) for n in ("slow", "fast", "other"))
    pair = data["pairs"][f"{slow},{fast}"]
    e2e = [c for c in pair["changes"] if c["metric"].startswith("e2e")]
    # 4x the decode rate: faster, unless benchy itself fell behind on this busy machine, which
    # compare then says instead of a verdict; never slower, never no difference
    assert len(e2e) == 2 and all(c["verdict"] in ("faster", compare.CLIENT_DELAY) and c["pct"] > 0 for c in e2e)
    assert "error" in data["pairs"][f"{slow},{other}"]  # no case in common: said, not hidden
    for row in data["runs"]:
        assert (tmp_path / "site" / row["report"]).resolve() == (runs / "runs" / row["id"] / "report.html").resolve()


def test_browse_of_nothing_is_one_line_and_exit_1(tmp_path):
    proc = run_benchy_here("browse", str(tmp_path), "-o", str(tmp_path / "site"))
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1 and "no results.json" in proc.stderr


@browser.needs_browser
def test_browse_page_in_a_real_browser(runs, tmp_path):
    """No console error; the filter hides the runs that do not match; sorting orders the rows;
    ticking two runs (two clicks) draws their comparison, whose verdicts follow the decode rates."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run_benchy_here("browse", str(runs / "runs"), "-o", str(tmp_path / "site"))
    driver = browser.chromium()
    try:
        driver.get((tmp_path / "site" / "index.html").as_uri())
        browser.wait_drawn(driver)

        def visible() -> list[str]:
            return driver.execute_script(
                "return [...document.querySelectorAll('#runs tbody tr')].filter(r => !r.hidden).map(r => r.cells[1].textContent)"
            )

        assert sorted(visible()) == ["fast", "other", "slow"]
        driver.find_element(By.ID, "filter").send_keys("slow")
        assert visible() == ["slow"]
        driver.find_element(By.ID, "filter").clear()
        driver.execute_script("document.getElementById('filter').dispatchEvent(new Event('input'))")
        assert len(visible()) == 3

        header = driver.find_element(By.XPATH, "//table[@id='runs']//th[normalize-space()='best e2e t/s']")
        header.click()
        header.click()  # descending: the fastest run first
        assert visible()[0] in ("fast", "other") and visible()[-1] == "slow"

        for name in ("slow", "fast"):  # the two clicks
            driver.find_element(By.XPATH, f"//tr[td[2][normalize-space()='{name}']]//input[@type='checkbox']").click()
        WebDriverWait(driver, 20).until(lambda d: d.execute_script("return document.body.dataset.compared") == "1")
        points = driver.execute_script("return document.querySelectorAll('#compare .scatterlayer .point').length")
        assert points >= 2
        verdicts = driver.execute_script(
            "return [...document.querySelectorAll('#compare table:last-of-type tbody tr')]"
            ".filter(r => r.cells[1].textContent.startsWith('e2e')).map(r => r.cells[8].textContent)"
        )
        assert verdicts and all(v.startswith(("faster", compare.CLIENT_DELAY)) for v in verdicts), verdicts
        intervals = driver.execute_script(  # in % of the first run's median, as the change beside it (issue 54)
            "return [...document.querySelectorAll('#compare table:last-of-type tbody tr')]"
            ".filter(r => r.cells[1].textContent.startsWith('e2e')).map(r => [r.cells[5].textContent, r.cells[6].textContent])"
        )
        assert all(change.endswith("%") and ci.endswith("%") and " … " in ci for change, ci in intervals), intervals
        browser.screenshot(driver, tmp_path / "browse-compare.png")
        assert browser.console_errors(driver) == []

        report = driver.find_element(By.LINK_TEXT, "fast")
        report.click()
        assert browser.wait_drawn(driver) >= 3 and browser.console_errors(driver) == []
    finally:
        driver.quit()


def test_browse_serve_serves_the_page_and_each_runs_report_over_http(runs, tmp_path):
    """--serve: the index and a run's report (by the index's own relative link) over real HTTP on
    127.0.0.1, until ^C, which ends it with no traceback."""
    import signal
    import subprocess
    import urllib.parse
    import urllib.request

    proc = start_benchy("browse", str(runs / "runs"), "-o", str(tmp_path / "site"), "--serve", "--port", "0",
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        line = ""
        while "serving " not in line:
            line = proc.stderr.readline()
            assert line, "browse --serve ended before it served"
        url = line.split("serving ", 1)[1].split()[0]
        with urllib.request.urlopen(url, timeout=30) as page:  # closed unread, as a browser may
            assert page.status == 200
        data = browse_data(tmp_path / "site" / "index.html")
        row = next(r for r in data["runs"] if r["id"] == "fast")
        with urllib.request.urlopen(urllib.parse.urljoin(url, row["report"]), timeout=30) as report:
            assert report.status == 200 and b"benchy report" in report.read()
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert "Traceback" not in stderr, stderr


def test_browse_shows_the_endpoint_no_client_hostname_and_writes_beside_the_runs(runs, tmp_path):
    """Issue 54: the endpoint each run measured is a column; 'hardware' is never benchy's own
    host name; with no -o the site goes inside the first folder, not the current one; --serve
    keeps off port 8000 (benchy sim's and vLLM's)."""
    import socket

    from benchy.report import browse_cli

    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "benchy", "browse", str(runs / "runs")], cwd=elsewhere, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert not list(elsewhere.iterdir())  # nothing written where the command was typed
    index = runs / "runs" / "benchy-browse" / "index.html"
    rows = browse_data(index)["runs"]
    saved = {r["id"]: json.loads((runs / "runs" / r["id"] / "results.json").read_text()) for r in rows}
    for row in rows:
        assert row["endpoint"] == saved[row["id"]]["cases"][0]["endpoint"] == "chat"
        assert socket.gethostname() not in row["hardware"]
    assert "<th>endpoint</th>" in index.read_text()
    assert browse_cli.SERVE_PORT != 8000


@browser.needs_browser
def test_browse_page_fits_1400_px(runs, tmp_path):
    proc = run_benchy_here("browse", str(runs / "runs"), "-o", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    driver = browser.chromium()
    try:
        driver.set_window_size(1400, 900)
        driver.get((tmp_path / "site" / "index.html").as_uri())
        table = driver.find_element("id", "runs")
        overflow = driver.execute_script("return [arguments[0].scrollWidth, arguments[0].clientWidth]", table)
        assert overflow[0] <= overflow[1], overflow  # every column in view, no sideways scroll
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 1400
        table.screenshot(str(tmp_path / "browse.png"))
    finally:
        driver.quit()


def test_browse_lists_a_capacity_search_by_its_answer_and_a_probe_not_its_rounds(tmp_path):
    """Issue 54: a capacity search is one row with its answer (its rounds are not runs), and a
    cache probe is listed with its verdicts, as their own files say."""
    root = tmp_path / "mix"
    with ForkedSim("--decode-tps", "1000", "--prefill-tps", "100000") as sim:
        cap = run_benchy_here(
            "capacity", "--base-url", sim.base_url, "--pp", "64", "--tg", "16", "--slo", "ttft=1s", "--max", "2",
            "-q", "-o", str(root / "cap"),
        )  # fmt: skip
        probed = run_benchy_here(
            "probe-cache", "--base-url", sim.base_url, "--lengths", "256", "-n", "3", "-o", str(root / "probe")
        )
    assert cap.returncode in (0, 8), cap.stderr  # found, or every load passed up to --max
    assert probed.returncode == 0, probed.stderr
    proc = run_benchy_here("browse", str(root), "-o", str(tmp_path / "site"))
    assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "site" / "index.html").read_text()
    assert browse_data(tmp_path / "site" / "index.html")["runs"] == []  # no round listed as a run
    found = json.loads((root / "cap" / "capacity.json").read_text())
    assert "<h2>Capacity searches</h2>" in page and f"<td>{found['answer']['kind']}</td>" in page
    assert f"<td>{len(found['points'])}</td>" in page
    verdict = json.loads((root / "probe" / "probe.json").read_text())["lengths"][0]["verdict"]
    assert "<h2>Cache probes</h2>" in page and f"256: {verdict.replace('_', ' ')}" in page
