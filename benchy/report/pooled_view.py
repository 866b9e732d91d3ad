"""A pooling run's tables (--endpoint embeddings, rerank): only the figures such an endpoint has.

Why: a pooling request generates nothing, so every stream and output figure of its case is
withheld (code `pooled`, its reason kept in results.json). Shown as columns of n/a under a
footnote they said nothing five times a row; a run whose cases all went to a pooling endpoint
shows latency, requests/s, inputs/s, input tokens/s and errors instead, in the terminal, report.md,
report.html and the CSV alike. A run that mixes pooling and generation cases keeps the full
table, where the footnote says why a pooling row has no TTFT.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from benchy.measure import stats
from benchy.measure.registry import Metric
from benchy.measure.unavailable import POOLED
from benchy.results.pooling import is_pooling
from benchy.results.types import CaseResult, MetricSummary


def is_pooled(case: CaseResult) -> bool:
    return is_pooling(case.endpoint)


def output_text(case: CaseResult) -> str:
    """The output length as a figure names a case (" tg128"); a pooling case generates nothing,
    so none (its batch is in its label and the table's)."""
    return "" if is_pooled(case) else f" tg{case.tg}"


def all_pooled(cases: Sequence[CaseResult]) -> bool:
    return bool(cases) and all(is_pooled(c) for c in cases)


def withheld(case: CaseResult, metric: str) -> bool:
    """A figure the case has not because its endpoint pools (not for any other reason)."""
    return is_pooled(case) and case.summary.get(metric) is None and case.reason(metric).code == POOLED


def existing(metrics: Sequence[Metric], cases: Sequence[CaseResult]) -> list[Metric]:
    """The metrics some of the cases can have: those a pooling endpoint withholds in all of them dropped."""
    return [m for m in metrics if not cases or not all(withheld(c, m.name) for c in cases)]


RESULTS_HEAD = (
    "A pooling endpoint: latency is send to the answer's end; requests/s, inputs/s and input tokens/s "
    "are the successful requests' over (last end − first send) of the case (n = successful requests)."
)


def tail_lines(cases: Sequence[CaseResult], ms: Callable[[MetricSummary | None, str], str]) -> list[str]:
    """The report's "Spread and tail latency" of a pooling run: latency p50 / p90 / p99 alone."""
    out = [
        "## Spread and tail latency",
        "",
        f"p50/p90/p99: the latency that 50/90/99% of requests stayed under ('{stats.TOO_FEW}': a p90 "
        f"needs {stats.SHOWN_FROM['p90']} requests, a p99 {stats.SHOWN_FROM['p99']}).",
        "",
        "| test | total latency p50 / p90 / p99 ms |",
        "|---|---|",
    ]
    for case in cases:
        e2e = case.summary.get("e2e_s")
        out.append(f"| {case.label} | {ms(e2e, 'median')} / {ms(e2e, 'p90')} / {ms(e2e, 'p99')} |")
    return out + [""]
