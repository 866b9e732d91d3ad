"""Checks against the hardware: a rate above the memory-bandwidth ceiling
(above_bandwidth_ceiling) or no ceiling to judge by (ceiling_unknown), a --hardware that the
GPUs contradict (hardware_contradicted), and the GPUs' samples
(--gpu-metrics: gpu_samples_failed, gpu_idle_dominates).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchy.checks.check import Check, RunLevelCheck
from benchy.checks.registry import Code, Warning_
from benchy.measure import profiles
from benchy.results.types import (
    CaseResult,
    CheckWarning,
    Evidence,
)
from benchy.results.verdicts.details import (
    AboveBandwidthCeiling,
)
from benchy.results.view import RunView

_RATE_NAMES = {"decode_tps": "decode", "e2e_tps": "end-to-end"}


@dataclass(frozen=True)
class Impossible:
    """The ceiling, what it was computed from, and each rate above it: (name, median, % of it)."""

    ceiling_tps: float
    bandwidth_gbs: float | None
    read_gb: float  # bytes read per token (weights and KV), GB
    over: tuple[tuple[str, float | None, float], ...]


class AboveBandwidthCeilingCheck(Check[Impossible]):
    code = Code.ABOVE_BANDWIDTH_CEILING

    def detect(self, case: CaseResult, run: RunView) -> Impossible | None:
        ceiling, setup = case.ceiling, run.setup.ceiling
        if not ceiling or not setup:
            return None
        pcts = {"decode_tps": ceiling.decode_pct, "e2e_tps": ceiling.e2e_pct}
        over = tuple((name, case.median(name), pct) for name, pct in pcts.items() if pct is not None and pct > 100.0)
        if not over:
            return None
        read_gb = ((ceiling.weight_bytes_per_token or 0) + (ceiling.kv_bytes_per_token or 0)) / 1e9
        return Impossible(ceiling.tokens_per_s, setup.bandwidth_gbs, read_gb, over)

    def words(self, case: CaseResult, found: Impossible) -> CheckWarning:
        rates = ", ".join(f"{_RATE_NAMES[n]} {median:.1f} tok/s = {pct:.0f}%" for n, median, pct in found.over)
        pcts = {n: pct for n, _, pct in found.over}
        return Warning_(
            Code.ABOVE_BANDWIDTH_CEILING,
            self.severity,
            case.label,
            f"Impossible rate: {rates} of the {found.ceiling_tps:.1f} tok/s ceiling "
            f"({found.bandwidth_gbs:g} GB/s ÷ {found.read_gb:.2f} GB read per token). One stream "
            "cannot decode faster than memory bandwidth allows, so this number was not measured "
            "as it looks.",
            "The ceiling is a conservative upper bound (peak bandwidth, every weight at its "
            "smallest size), so a rate above it is wrong: look for buffered or cached output "
            "and token counts the server did not generate. Only speculative decoding can "
            "legitimately beat it. If the profile does not fit the server (hardware, tensor "
            "parallelism, a smaller quantization), pass --bandwidth-gbs / "
            "--active-bytes-per-token.",
            metrics=tuple(pcts),
            details=AboveBandwidthCeiling(
                ceiling_tps=found.ceiling_tps, decode_pct=pcts.get("decode_tps"), e2e_pct=pcts.get("e2e_tps")
            ),
            evidence=tuple(Evidence(n, median, found.ceiling_tps, "tokens/s") for n, median, _ in found.over),
        )


above_bandwidth_ceiling = AboveBandwidthCeilingCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class NoCeiling:
    """Why the run has no bandwidth ceiling."""

    missing: str


class CeilingUnknownCheck(RunLevelCheck[NoCeiling]):
    code = Code.CEILING_UNKNOWN

    def detect(self, run: RunView) -> Sequence[NoCeiling]:
        ceiling = run.setup.ceiling
        return [NoCeiling(ceiling.missing)] if ceiling and ceiling.missing else []

    def words(self, run: RunView, found: NoCeiling) -> CheckWarning:
        return Warning_(
            Code.CEILING_UNKNOWN,
            self.severity,
            None,
            f"No bandwidth ceiling, so impossible rates cannot be caught: {found.missing}.",
            f"Known hardware: {', '.join(profiles.hardware_names())}; known models: "
            f"{', '.join(profiles.model_names())}.",
        )


ceiling_unknown = CeilingUnknownCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class Contradicted:
    """The --hardware stated (its name and bandwidth), what the GPUs report, and the profile the
    ceiling used instead: (name, GB/s), or None where no profile knows the GPU."""

    stated: str
    stated_gbs: float
    reports: str | None
    used: tuple[str, float] | None


class HardwareContradictedCheck(RunLevelCheck[Contradicted]):
    """--hardware named another device than the GPUs report (--gpu-metrics): the ceiling used
    the GPU's own profile, or had none; said, since the stated figure was set aside."""

    code = Code.HARDWARE_CONTRADICTED

    def detect(self, run: RunView) -> Sequence[Contradicted]:
        ceiling = run.setup.ceiling
        if not ceiling or not ceiling.stated_hardware:
            return []
        stated = profiles.hardware(ceiling.stated_hardware)
        used = (ceiling.hardware, ceiling.bandwidth_gbs) if ceiling.hardware and ceiling.bandwidth_gbs else None
        return [Contradicted(stated.name, stated.bandwidth_gbs, ceiling.gpu_reports, used)]

    def words(self, run: RunView, found: Contradicted) -> CheckWarning:
        used = (
            f"the ceiling uses the GPU's own profile, {found.used[0]} ({found.used[1]:,.0f} GB/s)"
            if found.used
            else "no hardware profile knows that GPU, so there is no ceiling"
        )
        return Warning_(
            Code.HARDWARE_CONTRADICTED,
            self.severity,
            None,
            f"--hardware {found.stated} ({found.stated_gbs:,.0f} GB/s) is not the GPU this run measured "
            f"(it reports {found.reports!r}): {used}, not the stated one.",
            "Pass the --hardware of the GPU the server runs on, or --bandwidth-gbs for a figure of your own "
            "(a stated bandwidth is never overruled).",
        )


hardware_contradicted = HardwareContradictedCheck()  # registered by this name (checks/warnings.py)


IDLE_SHARE_NOTE = 0.5  # the idle draw is over half the case's: J/token is mostly idle power


@dataclass(frozen=True)
class SamplesFailed:
    """GPU samples that failed, of those tried, their errors, and whether energy was still given."""

    failed: int
    tried: int
    errors: tuple[str, ...]
    energy: bool


class GpuSamplesFailedCheck(Check[SamplesFailed]):
    code = Code.GPU_SAMPLES_FAILED

    def detect(self, case: CaseResult, run: RunView) -> SamplesFailed | None:
        gpu = case.gpu
        if gpu is None or not gpu.failed_samples:
            return None
        tried = gpu.samples + gpu.failed_samples
        return SamplesFailed(gpu.failed_samples, tried, tuple(gpu.sample_errors), gpu.energy_j is not None)

    def words(self, case: CaseResult, found: SamplesFailed) -> CheckWarning:
        return Warning_(
            Code.GPU_SAMPLES_FAILED,
            self.severity,
            case.label,
            f"{found.failed} of {found.tried} GPU samples failed ({'; '.join(found.errors)}); the GPU "
            "figures cover the samples that were taken" + ("" if found.energy else ", and give no energy"),
            "Check the exporter's health and load (a scrape times out after 5 s); a failed sample is never "
            "counted as zero.",
            evidence=(Evidence("failed_samples", found.failed, 0, "samples"),),
        )


gpu_samples_failed = GpuSamplesFailedCheck()  # registered by this name (checks/warnings.py)


@dataclass(frozen=True)
class IdleDraw:
    """The GPUs' idle draw and their draw in the case, W; its share; the load's own J/token."""

    idle_w: float
    power_w: float
    share: float
    marginal_j_per_token: float | None


class GpuIdleDominatesCheck(Check[IdleDraw]):
    code = Code.GPU_IDLE_DOMINATES

    def detect(self, case: CaseResult, run: RunView) -> IdleDraw | None:
        gpu = case.gpu
        if gpu is None or not gpu.power_w or gpu.idle_power_w is None:
            return None
        share = gpu.idle_power_w / gpu.power_w
        if share <= IDLE_SHARE_NOTE:
            return None
        return IdleDraw(gpu.idle_power_w, gpu.power_w, share, gpu.marginal_joules_per_token)

    def words(self, case: CaseResult, found: IdleDraw) -> CheckWarning:
        marginal = found.marginal_j_per_token
        return Warning_(
            Code.GPU_IDLE_DOMINATES,
            self.severity,
            case.label,
            f"The GPUs' idle draw ({found.idle_w:,.0f} W) is {found.share:.0%} of their draw in this case "
            f"({found.power_w:,.0f} W): its J/token is mostly idle power spread over its tokens"
            + (f"; the load added {marginal:.3g} J/token" if marginal is not None else ""),
            "Compare marginal J/token across servers at low load, or load the server more (concurrency, "
            "rate) to see the energy a token costs when the GPU is busy.",
            evidence=(Evidence("idle_share", found.share, IDLE_SHARE_NOTE, "ratio"),),
        )


gpu_idle_dominates = GpuIdleDominatesCheck()  # registered by this name (checks/warnings.py)
