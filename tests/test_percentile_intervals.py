"""Each p90/p99 with a distribution-free interval from order statistics, and "too few" decided by
that interval alone (MLPerf's early-stopping rule), judged against scipy's binomial and the
simulator's truth log."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from scipy import stats as sps

from benchy.measure import stats
from benchy.report import markdown
from benchy.results.types import MetricSummary
from tests.conftest import client_slack_s, run_benchy_here


def scipy_ranks(n: int, q: float, confidence: float = 0.99) -> tuple[int | None, int | None]:
    """The ranks, found by scipy: the largest j with P(count ≥ j) ≥ conf, the smallest k < n with
    P(count ≤ k − 1) ≥ conf, count ~ Binomial(n, q/100) values below the true percentile."""
    ranks = np.arange(1, n + 1)
    lows = ranks[sps.binom.sf(ranks - 1, n, q / 100) >= confidence]
    highs = ranks[:-1][sps.binom.cdf(ranks[:-1] - 1, n, q / 100) >= confidence]
    return (int(lows.max()) if lows.size else None), (int(highs.min()) if highs.size else None)


def test_ranks_are_the_binomial_order_statistics_and_decide_too_few():
    for n in (1, 5, 30, 63, 64, 65, 100, 400, 661, 662, 663, 2000):
        for q in (90, 99):
            assert stats.percentile_ranks(n, q) == scipy_ranks(n, q), (n, q)
    # MLPerf's early-stopping minimums at 99% confidence: 64 values for a p90, 662 for a p99
    assert stats.SHOWN_FROM["p90"] == 64 and stats.SHOWN_FROM["p99"] == 662
    for n in range(1, 800):
        for q in (90, 99):
            assert stats.enough_for(f"p{q}", n) == (stats.percentile_ranks(n, q)[1] is not None), (n, q)


def test_each_bound_covers_the_true_percentile_at_least_99_percent_of_the_time():
    rng = np.random.default_rng(7)
    trials, n = 4000, 700
    samples = np.sort(rng.lognormal(0.0, 1.0, (trials, n)), axis=1)
    for q in (90, 99):
        truth = float(np.exp(sps.norm.ppf(q / 100)))  # the lognormal(0, 1)'s own percentile
        low, high = stats.percentile_ranks(n, q)
        assert low is not None and high is not None
        # Each side misses at most 1% of the time; 4,000 draws put 1% within ±0.5% (3 sigma).
        assert np.mean(samples[:, low - 1] <= truth) >= 0.985
        assert np.mean(samples[:, high - 1] >= truth) >= 0.985
        # and neither is a trivially wide bound: each misses sometimes
        assert np.mean(samples[:, high - 1] >= truth) < 1 and np.mean(samples[:, low - 1] <= truth) < 1


def test_report_shows_the_interval_or_too_few_from_the_same_rule():
    values = list(np.random.default_rng(3).exponential(0.1, 700))
    big, small = MetricSummary.of(values), MetricSummary.of(values[:300])
    assert big.p99_high is not None and big.p99_low is not None
    assert big.p99_low <= big.p99 <= big.p99_high
    cell = markdown._ms(big, "p99")
    assert f"[{markdown._ms_text(big.p99_low)}–{markdown._ms_text(big.p99_high)}]" in cell
    assert small.p99_high is None and markdown._ms(small, "p99") == stats.TOO_FEW
    assert small.p90_high is not None and "[" in markdown._ms(small, "p90")


def test_intervals_in_results_match_the_truth_logs_order_statistics(start_sim, tmp_path):
    # Four slots for eight streams: queueing spreads the latencies, so the ranks matter.
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "2000", "--max-running", "4")
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    proc = run_benchy_here(
        "run", "--base-url", sim.base_url, "--quiet", "--output", str(out),
        "--pp", "64", "--tg", "8", "-c", "8", "--runs", "84", "--warmup", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    (case,) = results["cases"]
    truth = {t["request_id"]: t for t in sim.truth()}
    reqs = [r for r in case["requests"] if not r["warmup"] and r["status"] == "ok"]
    n = len(reqs)
    assert n >= 662
    slack = client_slack_s(case)
    truths = {
        "ttft_s": sorted(
            truth[r["request_id"]]["first_token_event_s"] - truth[r["request_id"]]["arrival_s"] for r in reqs
        ),
        "e2e_s": sorted(
            max(e["t_s"] for e in truth[r["request_id"]]["events"]) - truth[r["request_id"]]["arrival_s"] for r in reqs
        ),
    }
    for name, ordered in truths.items():
        summary = case["summary"][name]
        assert summary["n"] == n
        for q in (90, 99):
            low, high = scipy_ranks(n, q)
            assert low is not None and high is not None
            # The k-th smallest measured value is within benchy's slack of the k-th smallest true one.
            assert abs(summary[f"p{q}_low"] - ordered[low - 1]) <= slack, (name, q)
            assert abs(summary[f"p{q}_high"] - ordered[high - 1]) <= slack, (name, q)
            assert summary[f"p{q}_low"] <= summary[f"p{q}"] <= summary[f"p{q}_high"]
    header, *rows = (out / "results.csv").read_text().splitlines()
    columns = header.split(",")
    ttft_row = next(row.split(",") for row in rows if row.split(",")[columns.index("metric")] == "ttft_s")
    assert float(ttft_row[columns.index("p99_high")]) == case["summary"]["ttft_s"]["p99_high"]
