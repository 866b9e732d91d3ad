"""report.md's sections on what the whole-run latencies can hide: an open loop's latencies timed
from the schedule beside those timed from the actual send (coordinated omission), and a closed
loop's steady state beside its whole run (the ramp-up and the drain)."""

from __future__ import annotations

from collections.abc import Callable

from benchy.report import pooled_view
from benchy.results.types import MetricSummary, RunResult

Formatter = Callable[[MetricSummary | None, str], str]  # markdown._ms: a summary's figure in ms


def _tails(summary: MetricSummary | None, ms: Formatter) -> str:
    return " / ".join(ms(summary, key) for key in ("median", "p90", "p99"))


def schedule_lines(results: RunResult, ms: Formatter) -> list[str]:
    """Open loops: TTFT and total latency from the actual send and from the intended one."""
    cases = [c for c in results.cases if c.from_schedule]
    if not cases:
        return []
    out = [
        "## Open loops: latency from the schedule",
        "",
        "An open loop sends each request at a time set in advance. *From send* times a request from "
        "when it actually left; *from schedule* from when it was due to leave, so a stall of the client "
        "or a full --max-inflight that held sends back stays in the latency it caused instead of hiding "
        "(coordinated omission). The two differ by the send lag. p50 / p90 / p99, ms.",
        "",
        "| test | send lag | TTFT from send | TTFT from schedule | total latency from send | total latency from schedule |",
        "|---|---|---|---|---|---|",
    ]
    for case in cases:
        sent, due = case.summary, case.from_schedule
        out.append(
            f"| {case.label} | {_tails(case.send_lag, ms)} | {_tails(sent.get('ttft_s'), ms)} | "
            f"{_tails(due.get('ttft_s'), ms)} | {_tails(sent.get('e2e_s'), ms)} | {_tails(due.get('e2e_s'), ms)} |"
        )
    return out + [""]


STEADY_TITLES = {"ttft_s": "TTFT", "itl_s": "ITL/token", "e2e_s": "total latency"}


def steady_lines(results: RunResult, ms: Formatter) -> list[str]:
    """Closed loops: each latency over the whole run and over the span where every stream was busy."""
    cases = [c for c in results.cases if c.steady and c.steady.summary]
    if not cases:
        return []
    names = [n for n in STEADY_TITLES if not all(pooled_view.withheld(c, n) for c in cases)]  # a pooling run: latency
    out = [
        "## Closed loops: steady state",
        "",
        "The steady state is the span where every stream was busy: from the last stream's first send "
        "to the first end after the last send (before it, streams were still starting; from it on, each "
        "that finished stayed idle). Its figures are over the requests sent and ended inside it; the whole run's over all. "
        "p50 / p90 / p99, ms.",
        "",
        "| test | window s | requests | "
        + " | ".join(f"{STEADY_TITLES[name]} {part}" for name in names for part in ("whole", "steady"))
        + " |",
        "|---|---|---|" + "---|" * 2 * len(names),
    ]
    for case in cases:
        window = case.steady
        assert window is not None
        cells = [_tails(summary.get(name), ms) for name in names for summary in (case.summary, window.summary)]
        out.append(
            f"| {case.label} | {window.start_s:.2f}–{window.end_s:.2f} | {window.requests} of {case.n_ok} | "
            + " | ".join(cells)
            + " |"
        )
    return out + [""]
