"""What `benchy run` prints by default (issue 54): a short, aligned view a terminal can hold.

A loaded run used to print every Markdown section report.md has, rows of 230 characters that
wrap into noise. The terminal now shows the case table, then, for loaded cases, one aligned
table of the latencies a load tester reads first: TTFT, ITL and total latency at p50 and p99
(each "too few" where the requests cannot bound it, as everywhere), with each case's failed
requests and those the drain cut (--duration, --drain) beside them. The long sections (the full percentile table with rates
asked and offered, latency from the schedule, the steady state) stay in report.md and
report.html, and `--view full` prints them here as before.
"""

from __future__ import annotations

from tabulate import tabulate

from benchy.measure import stats
from benchy.measure.classify import DRAIN_CUT
from benchy.measure.registry import METRICS, Metric
from benchy.report import pooled_view, table
from benchy.results.types import CaseResult, MetricSummary, RunResult

SHOWN = (METRICS["ttft_s"], METRICS["itl_s"], METRICS["e2e_s"])
POINTER = "More (p90, rates asked and offered, latency from the schedule, steady state): report.md, or --view full."


def terminal(results: RunResult) -> str:
    """The case table, then the loaded cases' latencies, aligned, and where the rest is."""
    text = table.markdown(results, loaded=False)
    loaded = [c for c in results.cases if table.is_loaded(c) and (c.n_ok or c.n_failed)]
    if not loaded:
        return text
    cuts = any(c.errors.get(DRAIN_CUT) for c in loaded)
    shown = pooled_view.existing(SHOWN, loaded)  # a pooling run: total latency only
    headers = ["test", "ok", "failed"] + (["cut"] if cuts else []) + [f"{m.title} p50 / p99" for m in shown]
    rows = [_row(case, cuts, shown) for case in loaded]
    aligned = tabulate(rows, headers=headers, tablefmt="simple", stralign="right", disable_numparse=True)
    replays = "".join(f"\n\n{table.replayed_line(c)} Sent at the trace's times." for c in loaded if c.kind == "trace")
    return f"{text}\n\nLatency under load:\n\n{aligned}{replays}\n\n{POINTER}"


def _row(case: CaseResult, cuts: bool, shown: list[Metric]) -> list[str]:
    """A case's line: its requests that finished, failed and were cut by the drain (not failures)."""
    cut = case.errors.get(DRAIN_CUT, 0)
    counts = [str(case.n_ok), str(case.n_failed - cut)] + ([str(cut)] if cuts else [])
    return [table.case_name(case), *counts] + [_p50_p99(case.summary.get(m.name), m.scale) for m in shown]


def _p50_p99(summary: MetricSummary | None, scale: float) -> str:
    if not summary:
        return "n/a"
    return " / ".join(
        stats.TOO_FEW if value is None or not stats.enough_for(key, summary.n) else table._short(value * scale)
        for key, value in (("median", summary.median), ("p99", summary.p99))
    )
