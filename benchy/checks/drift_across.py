"""Drift across cases of one shape (results/drift.py shape_drift): the run's requests of one
shape, pooled in send order, slowed (or sped up) from the first such case to the last, so each
case's median is one point on a slope, not a rate to set beside the others."""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.drift import DRIFT_HINT, drift_evidence, drift_fields, gpu_words
from benchy.checks.registry import WARNING, Code, Warning_
from benchy.measure.gpu import GpuThermal
from benchy.results import drift as drift_figures
from benchy.results.types import CaseResult, CheckWarning
from benchy.results.verdicts.details import RateDriftAcrossCases
from benchy.results.view import RunView

_NAMES = {"decode_tps": "decode", "e2e_tps": "end-to-end"}


def rate_drift_across_cases(run: RunView) -> Iterable[CheckWarning]:
    """One warning per case of a drifting shape: each case's figures are qualified."""
    by_label = {case.label: case for case in run.cases}
    for found in drift_figures.shape_drift(run.cases):
        group = [by_label[label] for label in found.cases]
        lead = found.drifts[0]
        moved = ", ".join(
            f"{_NAMES[d.metric]} {d.first:,.1f} → {d.last:,.1f} t/s ({d.change:+.0%})" for d in found.drifts
        )
        heat = _across(group)
        names = "; ".join(found.cases)
        for case in group:
            yield Warning_(
                Code.RATE_DRIFT_ACROSS_CASES,
                WARNING,
                case.label,
                f"Cases of one request shape ({names}) moved steadily as the run went on "
                f"({lead.requests} requests in send order, Kendall p = {lead.p_value:.1g}): {moved}. "
                f"This case's median is one point on that slope, not a rate to compare with the others."
                f"{gpu_words(heat)}",
                DRIFT_HINT,
                metrics=tuple(d.metric for d in found.drifts),
                details=RateDriftAcrossCases(cases=list(found.cases), **drift_fields(lead, heat)),
                evidence=(drift_evidence(lead),),
            )


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
