"""probe-cache counts each length's requests on stderr as they end (issue 54, item 7): a
27,000-token length takes a minute, which used to pass without a line."""

from __future__ import annotations

import re

from benchy.load.progress import PLAIN_LINE_EVERY_S
from tests.conftest import run_benchy_here

LINE = re.compile(r"^\[(\d+)/(\d+)\] ([\d,]+)-token prompts: (\d+)/(\d+) requests")


def _counts(stderr: str) -> list[tuple[int, int, int]]:
    """(length, requests ended, requests planned) of each progress line, in order."""
    found = [LINE.match(line) for line in stderr.splitlines()]
    return [(int(m[3].replace(",", "")), int(m[4]), int(m[5])) for m in found if m]


def test_a_long_length_prints_its_count_while_it_measures(start_sim):
    """Prefill at 1,000 tokens/s: each uncached 2,000-token request takes 2 s, so the length
    (four uncached of its six) outlasts one plain-line interval and must say how far it is."""
    sim = start_sim("--prefill-tps", "1000")
    n = 3
    proc = run_benchy_here("probe-cache", "--base-url", sim.base_url, "--lengths", "200", "2000", "-n", str(n))
    assert proc.returncode == 0, proc.stderr
    counts = _counts(proc.stderr)
    assert [c for c in counts if c[0] == 2000][-1] == (2000, 2 * n, 2 * n)  # every request counted
    assert [c for c in counts if c[0] == 200][-1] == (200, 2 * n, 2 * n)
    assert [length for length, _, _ in counts] == sorted(length for length, _, _ in counts)  # one length after another
    during = [done for length, done, total in counts if length == 2000 and 0 < done < total]
    uncached_s = 4 * 2000 / 1000
    assert uncached_s > PLAIN_LINE_EVERY_S and during, proc.stderr
    sent = [t for t in sim.truth() if t["prompt_tokens"] >= 2000]
    assert len(sent) == 2 * n


def test_quiet_prints_no_progress(start_sim):
    sim = start_sim("--instant")
    proc = run_benchy_here("probe-cache", "--base-url", sim.base_url, "--lengths", "200", "-n", "3", "-q")
    assert proc.returncode == 0 and _counts(proc.stderr) == []
