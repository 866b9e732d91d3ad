"""report.html links the reports of its folder's sub-folders (issue 54, item 7): `benchy demo`
prints a dataset case whose report lives in dataset/, and its main page did not link it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import browser
from tests.conftest import run_benchy_here


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory) -> Path:
    """A short demo (the embedded simulator; one run of pp64 tg4, then the dataset case)."""
    out = tmp_path_factory.mktemp("demo") / "demo"
    proc = run_benchy_here("demo", "--pp", "64", "--tg", "4", "--runs", "1", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_demo_page_links_its_dataset_report(demo_folder):
    page = (demo_folder / "report.html").read_text(encoding="utf-8")
    assert 'Reports in this folder: <a href="dataset/report.html">dataset</a>' in page
    assert "Reports in this folder" not in (demo_folder / "dataset" / "report.html").read_text(encoding="utf-8")


def test_benchy_report_links_the_reports_found_below(demo_folder, tmp_path):
    """Remade from results.json alone: the link comes from the folder, not from the demo."""
    remade = tmp_path / "remade"
    proc = run_benchy_here("report", str(demo_folder), "-o", str(remade))
    assert proc.returncode == 0, proc.stderr
    assert "Reports in this folder" not in (remade / "report.html").read_text(encoding="utf-8")
    (remade / "inner").mkdir()
    (remade / "inner" / "report.html").write_text("<html></html>", encoding="utf-8")
    proc = run_benchy_here("report", str(demo_folder), "-o", str(remade), "--force")
    assert proc.returncode == 0, proc.stderr
    assert '<a href="inner/report.html">inner</a>' in (remade / "report.html").read_text(encoding="utf-8")


@browser.needs_browser
def test_a_reader_follows_the_link_to_the_dataset_report(demo_folder, tmp_path):
    from selenium.webdriver.common.by import By

    driver = browser.chromium()
    try:
        driver.get((demo_folder / "report.html").as_uri())
        link = driver.find_element(By.LINK_TEXT, "dataset")
        assert link.is_displayed()
        browser.screenshot(driver, tmp_path / "demo-report.png")
        link.click()
        assert driver.current_url == (demo_folder / "dataset" / "report.html").as_uri()
        results = driver.find_element(By.ID, "results").text
        assert "dataset sample c4" in results
        assert browser.console_errors(driver) == []
    finally:
        driver.quit()
