"""report.html at scale: its size and how long a browser takes to open it, for a run of 20,000
requests (a benchmark, not a test: the machine may be shared; every open is printed).

Starts `benchy sim --preset instant`, runs `benchy run --pp 64 --tg 8 -c 32 --requests N -o DIR`
(N = 20,000), then opens DIR/report.html in Debian's headless Chromium (tests/browser.py, through
Selenium) --repeat times, in a 1280×1000 window. Four times on the page's own clock, from the
start of the navigation: "painted", the first contentful paint (the text and tables);
"plotly.js", when the inlined plotly.js has been evaluated (page.js does it when the first figure
nears the window); "open", when what the window shows is drawn, the figures in view included
(page.js sets body.dataset.opened); "all figures", when the last figure is drawn, those below the
fold being drawn while the browser is idle (body.dataset.drawn). Targets: < 3 s to open, < 10 MB
on disk.

  python benchmarks/bench_html.py [--requests 20000] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # bench_scale's simulator

TARGET_OPEN_S = 3.0
TARGET_MB = 10.0


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def make_run(folder: Path, requests: int) -> Path:
    from bench_scale import Sim, benchy_run

    with Sim() as sim:
        load = ["--pp", "64", "--tg", "8", "-c", "32", "--requests", str(requests)]
        done = subprocess.run(benchy_run(sim.base_url, folder, load), env=_env(), capture_output=True, text=True)
    if done.returncode not in (0, 3, 4):
        raise SystemExit(f"benchy run failed ({done.returncode}): {done.stderr.strip()}")
    return folder / "report.html"


def open_seconds(page: Path) -> tuple[float, float, float, float]:
    """(painted, plotly.js evaluated, open, all figures drawn) in seconds from the start of the
    navigation."""
    from selenium.webdriver.support.ui import WebDriverWait

    from tests import browser

    driver = browser.chromium()
    try:
        driver.get(page.as_uri())
        WebDriverWait(driver, 60).until(lambda d: d.execute_script("return document.body.dataset.drawn"))
        errors = browser.console_errors(driver)
        if errors:
            raise SystemExit(f"console errors: {errors}")
        times = driver.execute_script(
            "var p = performance.getEntriesByName('first-contentful-paint')[0];"
            "return [p ? p.startTime : null, window.__plotlyAt, window.__openAt, window.__drawnAt];"
        )
        painted, plotly, opened, drawn = (t / 1000 for t in times)
        return painted, plotly, opened, drawn
    finally:
        driver.quit()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the run here (and keep it), not in a temporary folder")
    parser.add_argument("--page", type=Path, help="open this report.html instead of making a run")
    args = parser.parse_args(argv)
    from tests import browser

    if browser.MISSING:
        raise SystemExit(browser.MISSING)
    with tempfile.TemporaryDirectory() as tmp:
        page = args.page
        if page is None:
            started = time.monotonic()
            page = make_run(args.keep or Path(tmp) / "run", args.requests)
            print(f"run of {args.requests:,} requests: {time.monotonic() - started:.0f} s")
        size_mb = page.stat().st_size / 1e6
        times = [open_seconds(page) for _ in range(args.repeat)]
        for i, (painted, plotly, opened, drawn) in enumerate(times, 1):
            print(f"open {i}: painted {painted:.2f} s, plotly.js {plotly:.2f} s, open {opened:.2f} s, "
                  f"all figures {drawn:.2f} s")  # fmt: skip
        print(f"all figures drawn (median): {statistics.median(t[3] for t in times):.2f} s")
        median = statistics.median(t[2] for t in times)
        print(f"report.html: {size_mb:.1f} MB (target < {TARGET_MB:g}): {'OK' if size_mb < TARGET_MB else 'MISSED'}")
        print(f"open (median of {len(times)}): {median:.2f} s (target < {TARGET_OPEN_S:g}): "
              f"{'OK' if median < TARGET_OPEN_S else 'MISSED'}")  # fmt: skip
        return 0 if size_mb < TARGET_MB and median < TARGET_OPEN_S else 1


if __name__ == "__main__":
    sys.exit(main())
