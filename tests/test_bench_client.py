"""`make bench-client` still runs from benchmarks/ (outside the package): a tiny configuration,
2 streams, against the instant simulator. A smoke test of the harness, not of its figures:
on a busy machine the CPU verdict may legitimately read FAIL, or NOT SHOWN when even the floor
(a reader that only counts events) is above the target."""

from __future__ import annotations

import re
import sys

import pytest

from tests.conftest import REPO_ROOT, run_python

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bench_client reads /proc (Linux)")


def test_bench_client_measures_benchy_and_the_floor():
    done = run_python(str(REPO_ROOT / "benchmarks" / "bench_client.py"), "--streams", "2", "--no-aiohttp")
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {
        cells[2]: cells
        for line in done.stdout.splitlines()
        if (cells := [c.strip() for c in line.split("|")])[1:2] == ["sim"]
    }
    assert set(rows) == {"benchy (lean)", "floor: a reader that only counts events"}, done.stdout
    for cells in rows.values():
        assert cells[3] == "2"  # streams
        assert float(cells[7].replace(",", "")) > 0  # aggregate tok/s: tokens were measured
    assert re.search(r"^(PASS|FAIL|NOT SHOWN): client CPU per token", done.stdout, re.M), done.stdout
