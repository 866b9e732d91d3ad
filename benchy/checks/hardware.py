"""Checks against the hardware: a rate above the memory-bandwidth ceiling
(above_bandwidth_ceiling) or no ceiling to judge by (ceiling_unknown), a --hardware that the
GPUs contradict (hardware_contradicted), and the GPUs' samples
(--gpu-metrics: gpu_samples_failed, gpu_idle_dominates).
"""

from __future__ import annotations

from collections.abc import Iterable

from benchy.checks.registry import (
    ERROR,
    INFO,
    WARNING,
    Code,
    Warning_,
)
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


def above_bandwidth_ceiling(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    ceiling, setup = case.ceiling, run.setup.ceiling
    if not ceiling or not setup:
        return
    pcts = {"decode_tps": ceiling.decode_pct, "e2e_tps": ceiling.e2e_pct}
    over = [name for name, pct in pcts.items() if (pct or 0) > 100.0]
    if not over:
        return
    rates = ", ".join(f"{_RATE_NAMES[n]} {case.median(n):.1f} tok/s = {pcts[n]:.0f}%" for n in over)
    read_gb = ((ceiling.weight_bytes_per_token or 0) + (ceiling.kv_bytes_per_token or 0)) / 1e9
    yield Warning_(
        Code.ABOVE_BANDWIDTH_CEILING,
        ERROR,
        case.label,
        f"Impossible rate: {rates} of the {ceiling.tokens_per_s:.1f} tok/s ceiling "
        f"({setup.bandwidth_gbs:g} GB/s ÷ {read_gb:.2f} GB read per token). One stream "
        "cannot decode faster than memory bandwidth allows, so this number was not measured "
        "as it looks.",
        "The ceiling is a conservative upper bound (peak bandwidth, every weight at its "
        "smallest size), so a rate above it is wrong: look for buffered or cached output "
        "and token counts the server did not generate. Only speculative decoding can "
        "legitimately beat it. If the profile does not fit the server (hardware, tensor "
        "parallelism, a smaller quantization), pass --bandwidth-gbs / "
        "--active-bytes-per-token.",
        metrics=tuple(over),
        details=AboveBandwidthCeiling(
            ceiling_tps=ceiling.tokens_per_s,
            decode_pct=pcts["decode_tps"] if "decode_tps" in over else None,
            e2e_pct=pcts["e2e_tps"] if "e2e_tps" in over else None,
        ),
        evidence=tuple(Evidence(n, case.median(n), ceiling.tokens_per_s, "tokens/s") for n in over),
    )


def ceiling_unknown(run: RunView) -> Iterable[CheckWarning]:
    ceiling = run.setup.ceiling
    if ceiling and ceiling.missing:
        yield Warning_(
            Code.CEILING_UNKNOWN,
            WARNING,
            None,
            f"No bandwidth ceiling, so impossible rates cannot be caught: {ceiling.missing}.",
            f"Known hardware: {', '.join(profiles.hardware_names())}; known models: "
            f"{', '.join(profiles.model_names())}.",
        )


def hardware_contradicted(run: RunView) -> Iterable[CheckWarning]:
    """--hardware named another device than the GPUs report (--gpu-metrics): the ceiling used
    the GPU's own profile, or had none; said, since the stated figure was set aside."""
    ceiling = run.setup.ceiling
    if not ceiling or not ceiling.stated_hardware:
        return
    stated = profiles.hardware(ceiling.stated_hardware)
    used = (
        f"the ceiling uses the GPU's own profile, {ceiling.hardware} ({ceiling.bandwidth_gbs:,.0f} GB/s)"
        if ceiling.hardware and ceiling.bandwidth_gbs
        else "no hardware profile knows that GPU, so there is no ceiling"
    )
    yield Warning_(
        Code.HARDWARE_CONTRADICTED,
        WARNING,
        None,
        f"--hardware {stated.name} ({stated.bandwidth_gbs:,.0f} GB/s) is not the GPU this run measured "
        f"(it reports {ceiling.gpu_reports!r}): {used}, not the stated one.",
        "Pass the --hardware of the GPU the server runs on, or --bandwidth-gbs for a figure of your own "
        "(a stated bandwidth is never overruled).",
    )


IDLE_SHARE_NOTE = 0.5  # the idle draw is over half the case's: J/token is mostly idle power


def gpu_samples_failed(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    gpu = case.gpu
    if gpu is None or not gpu.failed_samples:
        return
    tried = gpu.samples + gpu.failed_samples
    yield Warning_(
        Code.GPU_SAMPLES_FAILED,
        WARNING,
        case.label,
        f"{gpu.failed_samples} of {tried} GPU samples failed ({'; '.join(gpu.sample_errors)}); the GPU "
        "figures cover the samples that were taken" + ("" if gpu.energy_j is not None else ", and give no energy"),
        "Check the exporter's health and load (a scrape times out after 5 s); a failed sample is never "
        "counted as zero.",
        evidence=(Evidence("failed_samples", gpu.failed_samples, 0, "samples"),),
    )


def gpu_idle_dominates(case: CaseResult, run: RunView) -> Iterable[CheckWarning]:
    gpu = case.gpu
    if gpu is None or not gpu.power_w or gpu.idle_power_w is None:
        return
    share = gpu.idle_power_w / gpu.power_w
    if share <= IDLE_SHARE_NOTE:
        return
    marginal = gpu.marginal_joules_per_token
    yield Warning_(
        Code.GPU_IDLE_DOMINATES,
        INFO,
        case.label,
        f"The GPUs' idle draw ({gpu.idle_power_w:,.0f} W) is {share:.0%} of their draw in this case "
        f"({gpu.power_w:,.0f} W): its J/token is mostly idle power spread over its tokens"
        + (f"; the load added {marginal:.3g} J/token" if marginal is not None else ""),
        "Compare marginal J/token across servers at low load, or load the server more (concurrency, "
        "rate) to see the energy a token costs when the GPU is busy.",
        evidence=(Evidence("idle_share", share, IDLE_SHARE_NOTE, "ratio"),),
    )
