"""What every view may show of one case's metric: its figure, or why it is withheld, and whether a
warning qualifies it. The table, report.html's figures and the PNG figures all ask here, so a
figure never draws what the table withholds and marks what the table flags (issue 51: the
figures drew medians the table had withheld as too noisy, and never showed a ⚠).

It reads the saved result only: the analysis's verdicts (a metric withheld, with its reason),
the warnings that name the metric, and one rule of presentation, `too_noisy`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from benchy.measure.registry import Metric
from benchy.measure.unavailable import Unavailable
from benchy.results.types import CaseResult, CheckWarning, MetricSummary, RunResult

FLAG = "⚠"  # on a cell or point a warning qualifies (impossible, inflated by a cache, client-delayed…)
FAILED_MARK = "✗"  # beside a point some of whose requests failed: it rests on the rest only

# A rate whose spread is more than this many times its median is shown as n/a: "105 ± 931" reads as a
# figure and is none (requests that streamed a little at a time mixed with ones that came at once, or
# ones that did not). The statistics stay in results.json and the CSV.
NOISE_RATIO = 2.0


@dataclass(frozen=True)
class Shown:
    """One case's metric as the views show it: `summary` to draw, or None and `why` not."""

    summary: MetricSummary | None
    why: Unavailable | None  # None: drawn
    qualified: bool  # a warning (not an info note) names the metric of this case
    failed: int  # the case's failed requests: a point drawn from the others is marked

    @property
    def drawn(self) -> bool:
        return self.summary is not None


def too_noisy(summary: MetricSummary, metric: Metric) -> str | None:
    """Why a rate's median ± std is not shown, or None when it is a figure."""
    std, median = summary.std, summary.median
    if metric.unit != "tokens/s" or std is None or median <= 0 or std <= NOISE_RATIO * median:
        return None
    scale, decimals = metric.scale, metric.decimals
    return (
        f"{metric.title}: the spread (± {std * scale:,.{decimals}f}) is {std / median:.0f}× the median "
        f"({median * scale:,.{decimals}f}): the requests disagree too much for one figure "
        "(see the warnings, and each request in requests.jsonl)"
    )


TOO_NOISY = "too_noisy"  # the code of a figure too_noisy withholds from every view
SHORT_REASONS = {TOO_NOISY: "spread over twice the median"}  # a figure's caption groups by these


def shown(case: CaseResult, metric: Metric, flagged: Iterable[str] = ()) -> Shown:
    """The case's `metric` as every view shows it; `flagged`: the metrics its warnings name."""
    summary = case.summary.get(metric.name)
    if summary is None:
        return Shown(None, case.reason(metric.name), False, case.n_failed)
    noise = too_noisy(summary, metric)
    if noise is not None:
        return Shown(None, Unavailable(TOO_NOISY, noise), False, case.n_failed)
    return Shown(summary, None, metric.name in set(flagged), case.n_failed)


def case_warnings(results: RunResult) -> dict[str, list[CheckWarning]]:
    """Warnings and errors (not info notes) by case label."""
    out: dict[str, list[CheckWarning]] = {}
    for w in results.warnings:
        if w.case and w.severity != "info":
            out.setdefault(w.case, []).append(w)
    return out


def flagged_metrics(warnings: Iterable[CheckWarning]) -> set[str]:
    return {name for w in warnings for name in w.metrics}


def flags_by_case(results: RunResult) -> dict[str, set[str]]:
    """The metrics each case's warnings qualify."""
    return {label: flagged_metrics(found) for label, found in case_warnings(results).items()}
