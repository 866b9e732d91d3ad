"""Drift over a case (results/drift.py): its rates moved steadily with time, so their median is
no single rate; the warning qualifies the rates that moved, with the first and last."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchy.checks.check import Check
from benchy.checks.registry import Code, Warning_
from benchy.measure.gpu import GpuThermal
from benchy.results import drift as drift_figures
from benchy.results.drift import Drift
from benchy.results.types import CaseResult, CheckWarning, Evidence
from benchy.results.verdicts.details import RateDrift
from benchy.results.view import RunView

DRIFT_HINT = (
    "The server slowed (or sped up) as the case ran: a GPU throttling as it heats (a DGX Spark, a "
    "laptop), another load sharing it, a cache warming. Let it reach a steady state first "
    "(--warmup), watch its clocks and temperature (nvidia-smi -q -d CLOCK,TEMPERATURE,PERFORMANCE), "
    "and compare cases that ran under the same conditions."
)
_NAMES = {"decode_tps": "decode", "e2e_tps": "end-to-end"}


@dataclass(frozen=True)
class Drifted:
    """The case's rates that moved (results/drift.py, the leading one first) and the GPUs meanwhile."""

    drifts: tuple[Drift, ...]
    heat: GpuThermal | None


class RateDriftCheck(Check[Drifted]):
    code = Code.RATE_DRIFT

    def detect(self, case: CaseResult, run: RunView) -> Drifted | None:
        found = drift_figures.case_drift(case)
        if not found:
            return None
        return Drifted(tuple(found), case.gpu.thermal if case.gpu is not None else None)

    def words(self, case: CaseResult, found: Drifted) -> CheckWarning:
        lead, heat = found.drifts[0], found.heat
        return Warning_(
            Code.RATE_DRIFT,
            self.severity,
            case.label,
            f"The case's rates moved steadily from its first request to its last ({lead.requests} requests "
            f"in send order, Kendall p = {lead.p_value:.1g}): {moved_words(found.drifts)}. Their median is no "
            f"single rate.{gpu_words(heat)}",
            DRIFT_HINT,
            metrics=tuple(d.metric for d in found.drifts),
            details=RateDrift(**drift_fields(lead, heat)),
            evidence=(drift_evidence(lead),),
        )


rate_drift = RateDriftCheck()  # registered by this name (checks/warnings.py)


def moved_words(drifts: Sequence[Drift]) -> str:
    """Each rate that moved, first to last: "decode 50.0 → 40.0 t/s (-20%)"."""
    return ", ".join(f"{_NAMES[d.metric]} {d.first:,.1f} → {d.last:,.1f} t/s ({d.change:+.0%})" for d in drifts)


def drift_fields(lead: Drift, heat: GpuThermal | None) -> dict[str, Any]:
    """The figures of a drift warning (RateDrift's fields): the leading rate's trend and the GPUs'."""
    return {
        "requests": lead.requests,
        "first_tps": lead.first,
        "last_tps": lead.last,
        "drift_pct": 100 * lead.change,
        "p_value": lead.p_value,
        "sm_clock_mhz_first": heat.sm_clock_mhz_first if heat else None,
        "sm_clock_mhz_last": heat.sm_clock_mhz_last if heat else None,
        "temp_c_first": heat.temp_c_first if heat else None,
        "temp_c_last": heat.temp_c_last if heat else None,
        "throttle_reasons": heat.throttle_reasons if heat else None,
    }


def drift_evidence(lead: Drift) -> Evidence:
    return Evidence(f"{lead.metric}_drift", abs(lead.change), drift_figures.DRIFT_MIN, "share")


def gpu_words(heat: GpuThermal | None) -> str:
    """The GPUs' clock, temperature and throttle reasons over the case, where --gpu-metrics gave them."""
    if heat is None:
        return ""
    said = []
    if heat.sm_clock_mhz_first is not None and heat.sm_clock_mhz_last is not None:
        said.append(f"SM clock {heat.sm_clock_mhz_first:,.0f} → {heat.sm_clock_mhz_last:,.0f} MHz")
    if heat.temp_c_first is not None and heat.temp_c_last is not None:
        said.append(f"temperature {heat.temp_c_first:.0f} → {heat.temp_c_last:.0f} °C")
    if heat.throttle_reasons:
        said.append(f"throttle reasons: {', '.join(heat.throttle_reasons)}")
    return f" The GPUs meanwhile: {'; '.join(said)}." if said else ""


CASE_CHECKS = (rate_drift,)
