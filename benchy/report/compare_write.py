"""What `benchy compare` writes: compare.png (one panel per metric, each case's change with its
95% CI), compare.md and compare.json. Its own module because drawing and writing files come after
the comparison (report/compare.py decides; this only renders what it decided), and matplotlib is
imported only here, when a figure is drawn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from benchy.measure.registry import COMPARE_METRICS
from benchy.report.compare import FASTER, SLOWER, Comparison, markdown

if TYPE_CHECKING:  # matplotlib is imported only when a figure is drawn
    from matplotlib.axes import Axes

_VERDICT_COLORS = {FASTER: "tab:green", SLOWER: "tab:red"}


LOWEST_MARGIN_PCT = 5.0  # room left of −100% on the change axis


def write_png(comparisons: list[Comparison], path: Path) -> Path:
    """One panel per metric: change in % of the baseline's median per case, with its 95% CI."""
    from benchy.report import plots  # sets the headless backend before pyplot

    plt = plots.plt

    cases = list(dict.fromkeys(c.case for comp in comparisons for c in comp.changes))
    fig, axes = plt.subplots(1, len(COMPARE_METRICS), figsize=(12, 1.6 + 0.45 * len(cases)), sharey=True)
    offsets = np.linspace(-0.2, 0.2, len(comparisons)) if len(comparisons) > 1 else [0.0]
    for ax, (metric, title, higher_better) in zip(
        axes, ((m.name, m.title, m.higher_is_better) for m in COMPARE_METRICS)
    ):
        for k, comp in enumerate(comparisons):
            _draw_changes(ax, comp, metric, cases, offsets[k], marker="osD^v"[k % 5])
        ax.axvline(0, color="0.3", linewidth=1)
        left, right = ax.get_xlim()  # no median falls below zero: a change stops at −100%
        ax.set_xlim(max(left, -100.0 - LOWEST_MARGIN_PCT), right)
        ax.set_title(f"{title} ({'higher' if higher_better else 'lower'} is better)")
        ax.set_xlabel(f"change vs {comparisons[0].a_name} (% of its median)")
        ax.grid(True, axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(cases)))
    axes[0].set_yticklabels(cases)
    axes[0].set_ylim(len(cases) - 0.5, -0.5)  # first case on top
    _legend(axes[-1], comparisons)
    others = ", ".join(c.b_name for c in comparisons)
    fig.suptitle(
        f"{others} against {comparisons[0].a_name}: change per case with 95% CI\n"
        "green: significantly faster · red: significantly slower · grey: no significant or only a negligible difference",
        fontsize=10,
    )
    return plots.save(fig, path)


def _draw_changes(ax: Axes, comp: Comparison, metric: str, cases: list[str], offset: float, marker: str) -> None:
    for change in comp.changes:
        if change.metric != metric or change.change_pct is None or change.ci95 is None or not change.a_median:
            continue
        y = cases.index(change.case) + offset
        base = change.a_median
        low, high = (100.0 * v / base for v in change.ci95)
        color = _VERDICT_COLORS.get(change.verdict, "0.55")
        # A time or a rate cannot fall by more than all of it: an interval past −100% (a bootstrap
        # of a difference on noisy medians) is cut there, and an arrow says it went on.
        cut = low < -100.0
        low, high = max(low, -100.0), max(high, -100.0)
        pct = max(change.change_pct, -100.0)
        xerr = [[max(0.0, pct - low)], [max(0.0, high - pct)]]
        ax.errorbar([pct], [y], xerr=xerr, fmt=marker, color=color, capsize=0 if cut else 3)
        if cut:
            ax.plot([-100.0], [y], marker="<", color=color, markersize=7)


def _legend(ax: Axes, comparisons: list[Comparison]) -> None:
    if len(comparisons) < 2:
        return
    for k, comp in enumerate(comparisons):
        ax.plot([], [], "osD^v"[k % 5], color="0.4", label=f"{comp.b_name} vs {comp.a_name}")
    ax.legend(fontsize=8, loc="lower right")


def write(comparisons: list[Comparison], directory: Path) -> Path:
    """compare.md, compare.png and compare.json in `directory`; returns the Markdown file."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    png = write_png(comparisons, directory / "compare.png")
    (directory / "compare.json").write_text(
        json.dumps({"schema": "benchy/compare/1", "comparisons": [c.to_dict() for c in comparisons]}, indent=1) + "\n",
        encoding="utf-8",
    )
    path = directory / "compare.md"
    path.write_text(markdown(comparisons, png.name), encoding="utf-8")
    return path
