"""The GPU's power over the run, drawn from saved results (gpu_view.py holds the table and CSV
cells; this module is apart so that the table never imports matplotlib)."""

from __future__ import annotations

from pathlib import Path

from benchy.report import plots
from benchy.results.types import RunResult


def figure(results: RunResult, directory: Path) -> plots.Figure | None:
    """gpu_power.png: the GPUs' total draw over the run, each case's window shaded and named,
    the idle baseline dashed. None without GPU samples."""
    cases = [c for c in results.cases if c.gpu and c.gpu.series]
    if not cases:
        return None
    plt = plots.plt
    fig, ax = plt.subplots(figsize=plots.WIDE)
    for i, case in enumerate(cases):
        assert case.gpu is not None
        t = [p[0] for p in case.gpu.series]
        w = [p[1] for p in case.gpu.series]
        ax.plot(t, w, color="C0", marker=".", markersize=3, linewidth=1)
        ax.axvspan(t[0], t[-1], color=f"C{1 + i % 8}", alpha=0.12, linewidth=0)
        ax.text((t[0] + t[-1]) / 2, 1.0, case.label, transform=ax.get_xaxis_transform(), ha="center",
                va="bottom", fontsize=7, rotation=30)  # fmt: skip
    idle = results.setup.gpu.baseline.power_w if results.setup.gpu and results.setup.gpu.baseline else None
    if idle is not None:
        ax.axhline(idle, color="C7", linestyle="--", linewidth=1, label=f"idle baseline {idle:,.0f} W")
        ax.legend(loc="lower right", fontsize=8)
    ax.set_xlabel("seconds since the first GPU sample")
    ax.set_ylabel("W, all GPUs")
    ax.set_ylim(bottom=0)
    fig.suptitle("GPU power over the run")
    caption = (
        "The GPUs' total draw at each sample during the cases' measured requests; shaded: each "
        "case's window (warmups and the gaps between cases are not sampled); dashed: the draw "
        "before the run, with nothing sent."
    )
    path = plots.save(fig, directory / "gpu_power.png")
    return plots.Figure("GPU power", path, caption)
