"""compare and browse read consistently (issue 54, item 5): no faster/slower while the 95%
interval of the change in medians holds zero, and browse gives the change and its interval in
the same unit (%)."""

from __future__ import annotations

from benchy.report import compare
from benchy.report.browse import change_dict


def _change(ci: list[float], pct: float = 10.0) -> compare.MetricChange:
    return compare.MetricChange(
        case="pp64 tg8",
        metric="e2e_tps",
        title="e2e t/s",
        verdict=compare.UNAVAILABLE,
        a_median=100.0,
        b_median=100.0 + pct,
        change=pct,
        change_pct=pct,
        ci95=ci,
        p_adjusted=0.001,
    )


def test_a_significant_test_with_an_interval_over_zero_claims_no_direction():
    assert compare.verdict(_change([2.0, 18.0]), True, 0.05, 0.02) == compare.FASTER
    assert compare.verdict(_change([-1.0, 18.0]), True, 0.05, 0.02) == compare.UNSETTLED
    assert compare.verdict(_change([-18.0, -2.0], -10.0), True, 0.05, 0.02) == compare.SLOWER


def test_browse_gives_the_interval_in_percent_as_the_change():
    shown = change_dict(_change([2.0, 18.0]))
    assert shown["pct"] == 10.0 and shown["ci_pct"] == [2.0, 18.0]


def test_runs_of_two_endpoints_compare_and_say_so(start_sim, tmp_path):
    from tests.conftest import run_benchy_here

    sim = start_sim("--decode-tps", "500", "--prefill-tps", "100000")
    for endpoint in ("chat", "completions"):
        args = ("--pp", "64", "--tg", "16", "--runs", "4", "--endpoint", endpoint, "-q", "--no-report")
        proc = run_benchy_here("run", "--base-url", sim.base_url, "-o", str(tmp_path / endpoint), *args)
        assert proc.returncode == 0, proc.stderr
    proc = run_benchy_here("compare", str(tmp_path / "chat"), str(tmp_path / "completions"))
    assert proc.returncode == 0, proc.stderr
    shown = proc.stdout + proc.stderr
    assert "no case in common" not in shown
    assert "measured the chat endpoint" in shown and "completions" in shown
    assert "pp64 tg16" in proc.stdout  # the case, compared
