"""A closed loop whose whole-run figures differ beyond noise from those of its steady state
(measure/steady.py): the ramp-up or the drain moved the whole-run medians."""

from __future__ import annotations

from dataclasses import dataclass

from benchy.checks.check import Check
from benchy.checks.registry import Code, Warning_
from benchy.measure import steady
from benchy.measure.registry import METRICS
from benchy.results.types import CaseResult, CheckWarning, Evidence, SteadyState
from benchy.results.view import RunView


@dataclass(frozen=True)
class Moved:
    """The steady window and each metric whose whole-run median it moved: (name, whole, inside)."""

    window: SteadyState
    metrics: tuple[tuple[str, float, float], ...]


class SteadyStateDiffers(Check[Moved]):
    code = Code.STEADY_STATE_DIFFERS

    def detect(self, case: CaseResult, run: RunView) -> Moved | None:
        window = case.steady
        if window is None:
            return None
        moved = []
        for name, inside in window.summary.items():
            whole = case.summary.get(name)
            if whole and steady.moved(whole.median, whole.ci95, inside.median, inside.ci95):
                moved.append((name, whole.median, inside.median))
        return Moved(window, tuple(moved)) if moved else None

    def words(self, case: CaseResult, found: Moved) -> CheckWarning:
        window, moved = found.window, found.metrics
        said = ", ".join(
            f"{METRICS[name].title} {whole * METRICS[name].scale:.1f} over the whole run, "
            f"{inside * METRICS[name].scale:.1f} while every stream was busy"
            for name, whole, inside in moved
        )
        return Warning_(
            Code.STEADY_STATE_DIFFERS,
            self.severity,
            case.label,
            f"the ramp-up or the drain moved the medians beyond noise and by {steady.MATERIAL_SHIFT:.0%} or more ({said}; 95% intervals apart; "
            f"{window.requests} requests in the window {window.start_s:.2f}–{window.end_s:.2f} s).",
            "The steady-state figures (results.json case steady, report.md) are what the server does "
            "under this load; run more requests (--runs) so that the ramp-up and drain weigh less.",
            metrics=tuple(name for name, _, _ in moved),
            evidence=tuple(Evidence(f"{name} steady median", inside, whole, "s") for name, whole, inside in moved),
        )


steady_state_differs = SteadyStateDiffers()  # registered by this name (checks/warnings.py)
