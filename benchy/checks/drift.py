"""Drift over a case (results/drift.py): its rates moved steadily with time, so their median is
no single rate; the warning qualifies the rates that moved, with the first and last."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import WARNING, Warning_
from benchy.results import drift as drift_figures
from benchy.results.types import CaseResult, CheckWarning, Evidence, RunResult, WarningDetails

DRIFT_HINT = (
    "The server slowed (or sped up) as the case ran: a GPU throttling as it heats (a DGX Spark, a "
    "laptop), another load sharing it, a cache warming. Let it reach a steady state first "
    "(--warmup), watch its clocks and temperature (nvidia-smi -q -d CLOCK,TEMPERATURE,PERFORMANCE), "
    "and compare cases that ran under the same conditions."
)
_NAMES = {"decode_tps": "decode", "e2e_tps": "end-to-end"}


def rate_drift(case: CaseResult, run: RunResult) -> Iterable[CheckWarning]:
    found = drift_figures.case_drift(case)
    if not found:
        return
    lead = found[0]
    moved = ", ".join(f"{_NAMES[d.metric]} {d.first:,.1f} → {d.last:,.1f} t/s ({d.change:+.0%})" for d in found)
    yield Warning_(
        "rate_drift",
        WARNING,
        case.label,
        f"The case's rates moved steadily from its first request to its last ({lead.requests} requests "
        f"in send order, Kendall p = {lead.p_value:.1g}): {moved}. Their median is no single rate.",
        DRIFT_HINT,
        metrics=tuple(d.metric for d in found),
        details=WarningDetails(
            requests=lead.requests,
            first_tps=lead.first,
            last_tps=lead.last,
            drift_pct=100 * lead.change,
            p_value=lead.p_value,
        ),
        evidence=(Evidence(f"{lead.metric}_drift", abs(lead.change), drift_figures.DRIFT_MIN, "share"),),
    )


CASE_CHECKS = (rate_drift,)
