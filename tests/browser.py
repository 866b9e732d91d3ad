"""A headless Chromium (Debian's `chromium` and `chromium-driver`) driven through Selenium, for the
tests that open benchy's pages as a reader would. Nothing here downloads a browser or a driver:
the system's chromedriver is named, so Selenium Manager never runs; where none is installed the
tests skip, saying so."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = next((p for p in ("chromium", "chromium-browser", "google-chrome") if shutil.which(p)), None)
DRIVER = shutil.which("chromedriver")
MISSING = (
    "no headless browser: install Debian's chromium and chromium-driver (.ci/run does)"
    if not (CHROMIUM and DRIVER)
    else ""
)
try:
    import selenium  # noqa: F401
except ImportError:
    MISSING = MISSING or "selenium is not installed (pip install -e '.[test]')"

needs_browser = pytest.mark.skipif(bool(MISSING), reason=MISSING)


def chromium():
    """A headless Chromium whose console is read back by console_errors()."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which(CHROMIUM or "chromium") or ""
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        "--enable-unsafe-swiftshader",
        "--no-first-run",
        "--disable-background-networking",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(DRIVER or "chromedriver"), options=options)


def console_errors(driver) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def wait_drawn(driver, timeout: float = 30.0) -> int:
    """Waits until the page's script says every figure is drawn; returns how many."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, timeout).until(lambda d: d.execute_script("return document.body.dataset.drawn"))
    return int(driver.execute_script("return document.body.dataset.drawn"))


def screenshot(driver, path: Path) -> Path:
    """The whole page, not only the window: the window is stretched to the document first.
    With $BENCHY_SCREENSHOTS set (a CI's artefact folder), a copy goes there too."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(int(height) + 40, 12000))
    driver.save_screenshot(str(path))
    keep = os.environ.get("BENCHY_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(keep) / f"{path.parent.name}-{path.name}")
    return path


def drawn_types(driver) -> dict[str, list[str]]:
    """Each drawn figure's trace types as plotly.js took them (its full data, after defaults): a
    type the page's plotly.js bundle does not carry is quietly drawn as a scatter, so a figure
    drawn under another type than its spec names is a trace type missing from the bundle."""
    return driver.execute_script(
        "const out = {};"
        "document.querySelectorAll('[data-figure]').forEach(d => { out[d.dataset.figure] = d._fullData.map(t => t.type); });"
        "return out;"
    )
