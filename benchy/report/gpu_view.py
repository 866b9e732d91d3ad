"""The GPU's side in reports: a table column, CSV columns, a report section and a figure of
power over the run with the case boundaries (from saved results only).

Why a section of its own: the energy of a case only means something beside the idle draw
(sampled before the run) and the window it covers, and measured bandwidth use only beside the
ceiling benchy computes; the section shows them together. A figure a run could not measure is
n/a with its footnote, as everywhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from benchy.measure.gpu import GpuCase
from benchy.results.types import CaseResult, RunResult

# CSV columns (docs/results.md), repeated on each row of a case; empty without --gpu-metrics.
CSV_COLUMNS = (
    "gpu_power_w",
    "gpu_idle_power_w",
    "gpu_energy_j",
    "gpu_joules_per_token",
    "gpu_marginal_joules_per_token",
    "gpu_joules_per_request",
    "gpu_util_pct",
    "gpu_bandwidth_gbs",
    "gpu_bandwidth_pct",
    "gpu_failed_samples",
)


def has_gpu(results: RunResult) -> bool:
    return any(c.gpu for c in results.cases)


def csv_cells(case: CaseResult) -> list[Any]:
    gpu = case.gpu
    if gpu is None:
        return [""] * len(CSV_COLUMNS)
    values = [getattr(gpu, name.removeprefix("gpu_")) for name in CSV_COLUMNS]
    return ["" if v is None else v for v in values]


def table_cell(case: CaseResult, mark: Callable[[str], str]) -> str:
    """The results table's `J/token (GPU W)` cell; `mark(reason)` numbers a footnote."""
    gpu = case.gpu
    if gpu is None:
        return "n/a"
    if gpu.joules_per_token is None:
        return mark(_why(gpu, "joules_per_token"))
    watts = f" ({gpu.power_w:,.0f} W)" if gpu.power_w is not None else ""
    return f"{gpu.joules_per_token:.3g}{watts}"


def _why(gpu: GpuCase, name: str) -> str:
    return gpu.unavailable.get(name) or gpu.unavailable.get("power_w") or "not measured"


def setup_rows(results: RunResult) -> list[tuple[str, str | None]]:
    gpu = results.setup.gpu
    if gpu is None:
        return []
    names = ", ".join(sorted({n or "unnamed" for n in gpu.gpus.values()}))
    where = gpu.url or "NVML on benchy's host"
    idle = gpu.baseline.power_w if gpu.baseline else None
    peak = f"{gpu.peak_bandwidth_gbs:g} GB/s each ({gpu.peak_source})" if gpu.peak_bandwidth_gbs else gpu.peak_source
    return [
        ("GPUs", f"{len(gpu.gpus)} × {names}, sampled every {gpu.interval_s:g} s via {gpu.source} ({where})"),
        ("GPU idle draw", f"{idle:,.0f} W (all GPUs, before the run)" if idle is not None else "not measured"),
        ("GPU peak bandwidth", peak),
    ]


HEAD = (
    "Sampled beside each case's measured requests (docs/gpu.md). Energy is the GPUs' own counter "
    "where they publish it, else the integral of their power; **J/token** = energy ÷ output tokens, "
    "and **marginal** = (energy − idle draw × window) ÷ output tokens: what the load added above the "
    "idle baseline. Bandwidth = DRAM activity × peak bandwidth, beside the decode rate as a % of the "
    "bandwidth ceiling (with a hardware profile); DRAM activity is averaged over the whole case, "
    "prefill included, the ceiling's % over decode alone."
)


def section_lines(results: RunResult, figure: tuple[Any, ...] | None = None) -> list[str]:
    cases = [c for c in results.cases if c.gpu]
    if not cases:
        return []
    reasons: list[str] = []

    def mark(reason: str) -> str:
        if reason not in reasons:
            reasons.append(reason)
        return f"n/a [{reasons.index(reason) + 1}]"

    out = ["## GPU", "", HEAD, ""]
    out += [
        "| test | window s | power W | energy J | J/token | marginal J/token | J/request | GPU util % "
        "| bandwidth GB/s (% of peak) | decode % of ceiling | failed samples |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in cases:
        out.append(_row(case, mark))
    out += [""] + [f"[{i}] {r}" for i, r in enumerate(reasons, 1)] + ([""] if reasons else [])
    if figure:
        title, path, caption = figure
        out += [f"![{title}]({path})", "", caption, ""]
    return out


def _row(case: CaseResult, mark: Callable[[str], str]) -> str:
    gpu = case.gpu
    assert gpu is not None

    def value(name: str, fmt: str) -> str:
        v = getattr(gpu, name)
        return mark(_why(gpu, name)) if v is None else format(v, fmt)

    bandwidth = value("bandwidth_gbs", ",.0f")
    if gpu.bandwidth_pct is not None:
        bandwidth += f" ({gpu.bandwidth_pct:.0f}%)"
    decode_pct = case.ceiling.decode_pct if case.ceiling else None
    failed = str(gpu.failed_samples) + (f" ({'; '.join(gpu.sample_errors)})" if gpu.sample_errors else "")
    cells = [
        case.label,
        f"{gpu.window_s:.2f}",
        value("power_w", ",.0f"),
        value("energy_j", ",.1f"),
        value("joules_per_token", ".3g"),
        value("marginal_joules_per_token", ".3g"),
        value("joules_per_request", ".3g"),
        value("util_pct", ".0f"),
        bandwidth,
        "n/a" if decode_pct is None else f"{decode_pct:.0f}%",
        failed,
    ]
    return "| " + " | ".join(cells) + " |"


# ------------------------------------------------------------------ the figure
