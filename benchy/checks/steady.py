"""A closed loop whose whole-run figures differ beyond noise from those of its steady state
(measure/steady.py): the ramp-up or the drain moved the whole-run medians."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import WARNING, Code, Warning_
from benchy.measure import steady
from benchy.measure.registry import METRICS
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.view import RunView


def steady_state_differs(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    window = case.steady
    if window is None:
        return
    moved = []
    for name, inside in window.summary.items():
        whole = case.summary.get(name)
        if whole and steady.moved(whole.median, whole.ci95, inside.median, inside.ci95):
            moved.append((name, whole.median, inside.median))
    if not moved:
        return
    said = ", ".join(
        f"{METRICS[name].title} {whole * METRICS[name].scale:.1f} over the whole run, "
        f"{inside * METRICS[name].scale:.1f} while every stream was busy"
        for name, whole, inside in moved
    )
    yield Warning_(
        Code.STEADY_STATE_DIFFERS,
        WARNING,
        case.label,
        f"the ramp-up or the drain moved the medians beyond noise and by {steady.MATERIAL_SHIFT:.0%} or more ({said}; 95% intervals apart; "
        f"{window.requests} requests in the window {window.start_s:.2f}–{window.end_s:.2f} s).",
        "The steady-state figures (results.json case steady, report.md) are what the server does "
        "under this load; run more requests (--runs) so that the ramp-up and drain weigh less.",
        metrics=tuple(name for name, _, _ in moved),
        evidence=tuple(Evidence(f"{name} steady median", inside, whole, "s") for name, whole, inside in moved),
    )
