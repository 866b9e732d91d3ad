"""Drift across cases of one shape (results/drift.py shape_drift): the run's requests of one
shape, pooled in send order, slowed (or sped up) from the first such case to the last, so each
case's median is one point on a slope, not a rate to set beside the others."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import RunLevelCheck
from benchy.checks.drift import DRIFT_HINT, drift_evidence, drift_fields, gpu_words, moved_words
from benchy.checks.registry import Code, Warning_
from benchy.measure.gpu import GpuThermal
from benchy.results import drift as drift_figures
from benchy.results.drift import ShapeDrift
from benchy.results.types import CaseResult, CheckWarning
from benchy.results.verdicts.details import RateDriftAcrossCases
from benchy.results.view import RunView


@dataclass(frozen=True)
class DriftedCase:
    """One case of a shape whose rates drifted across its cases, and the GPUs over those cases."""

    case: str
    shape: ShapeDrift
    heat: GpuThermal | None


class RateDriftAcrossCasesCheck(RunLevelCheck[DriftedCase]):
    """One warning per case of a drifting shape: each case's figures are qualified."""

    code = Code.RATE_DRIFT_ACROSS_CASES

    def detect(self, run: RunView) -> Sequence[DriftedCase]:
        by_label = {case.label: case for case in run.cases}
        found = []
        for shape in drift_figures.shape_drift(run.cases):
            heat = _across([by_label[label] for label in shape.cases])
            found += [DriftedCase(label, shape, heat) for label in shape.cases]
        return found

    def words(self, run: RunView, found: DriftedCase) -> CheckWarning:
        drifts, lead = found.shape.drifts, found.shape.drifts[0]
        return Warning_(
            Code.RATE_DRIFT_ACROSS_CASES,
            self.severity,
            found.case,
            f"Cases of one request shape ({'; '.join(found.shape.cases)}) moved steadily as the run went on "
            f"({lead.requests} requests in send order, Kendall p = {lead.p_value:.1g}): {moved_words(drifts)}. "
            f"This case's median is one point on that slope, not a rate to compare with the others."
            f"{gpu_words(found.heat)}",
            DRIFT_HINT,
            metrics=tuple(d.metric for d in drifts),
            details=RateDriftAcrossCases(cases=list(found.shape.cases), **drift_fields(lead, found.heat)),
            evidence=(drift_evidence(lead),),
        )


rate_drift_across_cases = RateDriftAcrossCasesCheck()  # registered by this name (checks/warnings.py)


def _across(group: list[CaseResult]) -> GpuThermal | None:
    """The GPUs from the first case's first sample to the last case's last (--gpu-metrics)."""
    heats = [c.gpu.thermal for c in group if c.gpu is not None and c.gpu.thermal is not None]
    if not heats:
        return None
    reasons = list(dict.fromkeys(r for h in heats for r in h.throttle_reasons))
    first, last = heats[0], heats[-1]
    return GpuThermal(
        sm_clock_mhz_first=first.sm_clock_mhz_first,
        sm_clock_mhz_last=last.sm_clock_mhz_last,
        temp_c_first=first.temp_c_first,
        temp_c_last=last.temp_c_last,
        throttle_reasons=reasons,
    )
