"""report.md's section on what the whole-run latencies can hide: an open loop's latencies timed
from the schedule beside those timed from the actual send (coordinated omission)."""

from __future__ import annotations

from collections.abc import Callable

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
