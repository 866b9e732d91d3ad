"""A warning's numbers say what its verdict decided, and they add up (issue 51).

Against `benchy sim` over real HTTP; the saved bundle is the run's own, its witnesses edited
where a test needs a server that behaves otherwise, then analysed again by `benchy rebuild`.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from tests.conftest import run_benchy_here


def _run_into(sim, out: Path, *flags: str) -> None:
    proc = run_benchy_here("run", "--base-url", sim.base_url, "-q", "-o", str(out), *flags)
    assert proc.returncode in (0, 3), proc.stderr  # 3: the run's own warnings


def _rewrite_prompt_ms(out: Path, prompt_s_by_rank: list[float]) -> None:
    """Gives the measured records server prompt times by their TTFT rank (the fastest first):
    a server whose prompt time does not follow its TTFT."""
    lines = (out / "requests.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    measured = [r for r in records if not r.get("warmup") and r.get("server_timings") and r.get("token_event_s")]
    assert len(measured) == len(prompt_s_by_rank)
    for rank, rec in enumerate(sorted(measured, key=lambda r: r["token_event_s"][0])):
        rec["server_timings"]["prompt_ms"] = prompt_s_by_rank[rank] * 1000
    (out / "requests.jsonl").write_text("\n".join([lines[0], *map(json.dumps, records)]) + "\n")


def test_ttft_not_prefill_says_numbers_that_subtract(start_sim, tmp_path):
    """The warning read "TTFT 401 ms, server prompt time 261 ms: 106 ms not prefill": medians of
    TTFT and prompt time beside the median of each request's difference, which is neither's
    difference. Its three numbers now come from the same medians and subtract."""
    sim = start_sim("--preset", "llamacpp-ram-cache", "--decode-tps", "500", "--max-running", "1")
    out = tmp_path / "run"
    # One token per answer: a busy machine's simulator writing a longer answer in bursts made
    # benchy rightly withhold the case's stream timing (sse_buffering), TTFT and its gap with it,
    # and the warning never came. One token cannot arrive in a burst.
    _run_into(sim, out, "--pp", "2048", "--tg", "1", "-c", "2", "--runs", "3")
    ttfts = sorted(
        json.loads(line)["token_event_s"][0]
        for line in (out / "requests.jsonl").read_text().splitlines()[1:]
        if not json.loads(line).get("warmup") and json.loads(line).get("token_event_s")
    )
    # Prompt times that fall as TTFT rises, then jump: the median of the differences is far from
    # the difference of the medians (the test means something only where they differ).
    prompts = [0.05 * ttfts[0], 0.5 * ttfts[0], 0.05 * ttfts[0], 0.6 * ttfts[-1], 0.1 * ttfts[0], 0.5 * ttfts[-1]]
    gaps = [t - p for t, p in zip(ttfts, prompts)]
    apart = statistics.median(ttfts) - statistics.median(prompts) - statistics.median(gaps)
    assert abs(apart) > 0.02, (ttfts, prompts)
    _rewrite_prompt_ms(out, prompts)
    (out / "results.json").unlink()
    made = run_benchy_here("rebuild", str(out))
    assert made.returncode == 0, made.stderr
    results = json.loads((out / "results.json").read_text())
    (w,) = [w for w in results["warnings"] if w["code"] == "ttft_not_prefill"]
    d = w["details"]
    assert abs(d["ttft_s_median"] - statistics.median(ttfts)) < 1e-6
    assert abs(d["server_prompt_s_median"] - statistics.median(prompts)) < 1e-6
    assert abs(d["ttft_s_median"] - d["server_prompt_s_median"] - d["not_prefill_s_median"]) < 1e-9
    ttft_ms, prompt_ms, gap_ms = (
        float(x.replace(",", ""))
        for x in re.search(r"([\d,]+) ms \(median\).*?([\d,]+) ms: ([\d,]+) ms", w["message"]).groups()
    )
    assert abs(ttft_ms - prompt_ms - gap_ms) <= 1, w["message"]  # each rounded to a ms
