"""The cache-aware workloads' figures (turns, shared fractions, trace reuse), from saved results:
apart from workloads.py, whose sections and table rows the terminal table reads without matplotlib."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from benchy.measure.workloads import TurnRow
from benchy.report import agents_view, dataset_view, plots, workloads
from benchy.report.plots import Figure
from benchy.results.types import CaseResult, RunResult


def figures(results: RunResult, directory: Path) -> list[Figure]:
    made = []
    for i, case in enumerate(workloads.cases_of(results, "multi_turn"), 1):
        made.append(_turns_figure(plots, case, directory / f"workload-turns-{i}.png"))
    shared = workloads.cases_of(results, "shared_prefix")
    if shared:
        made.append(_shared_figure(plots, shared, directory / "workload-shared.png"))
    for i, case in enumerate(workloads.cases_of(results, "trace"), 1):
        made.append(_reuse_figure(plots, case, directory / f"workload-reuse-{i}.png"))
        made.append(agents_view.figure(plots, case, directory / f"workload-agents-{i}.png"))
    made += dataset_view.figures(plots, results, directory)  # --dataset: asked and served lengths
    return [fig for fig in made if fig is not None]


def _turns_figure(plots: ModuleType, case: CaseResult, path: Path) -> Figure | None:
    every = workloads.figures_of(case).turns
    rows = [r for r in every if r.ttft_s is not None]
    if not rows:
        return _turns_not_drawn(case, every)
    fig, (left, right) = plots.plt.subplots(1, 2, figsize=plots.WIDE)
    turns = [r.turn for r in rows]
    ttft_ms = [r.ttft_s * 1000 for r in rows if r.ttft_s is not None]  # every row (mypy narrows here)
    # each request's own TTFT behind the median: with two conversations a turn's median is two
    # values, and a spike of one is visible as one dot, not a trend
    dots = [
        (r.turn, ms * 1000)
        for r in case.requests
        if not r.warmup
        and not r.control
        and r.status == "ok"
        and r.turn
        and (ms := r.metrics.get("ttft_s")) is not None
    ]
    if dots:
        left.scatter(*zip(*dots), s=14, color="C0", alpha=0.35, label="each request")
    left.plot(turns, ttft_ms, marker="o", label="TTFT (median)")
    cold = [(r.turn, r.cold_ttft_s * 1000) for r in rows if r.cold_ttft_s]
    if cold:
        left.plot(*zip(*cold), marker="x", linestyle="--", label="same length, nothing shared")
    called = [(r.turn, r.ttftc_s * 1000) for r in rows if r.ttftc_s]  # --tools: the first call's time
    if called:
        left.plot(*zip(*called), marker="^", linestyle=":", label="first tool call (median)")
    left.set_xlabel("turn")
    left.set_ylabel("ms")
    left.set_title("TTFT by turn")
    left.set_ylim(0, max(ttft_ms + [ms for _, ms in cold + called] + [ms for _, ms in dots]) * 1.15)
    right.plot(turns, [r.cached_tokens or 0 for r in rows], marker="o", label="cached, reported")
    right.plot(
        turns, [r.expected_cached_tokens or 0 for r in rows], marker="x", linestyle="--", label="expected (history)"
    )
    right.plot(turns, [r.prompt_tokens or 0 for r in rows], color="grey", alpha=0.5, label="prompt")
    right.set_xlabel("turn")
    right.set_ylabel("tokens")
    right.set_title("Cached tokens by turn")
    for ax in (left, right):
        ax.set_xticks(turns, [f"{r.turn}\nn = {r.n_ok}" for r in rows])  # how many requests each median is
        ax.legend(fontsize=8)
    fig.suptitle(case.label)
    caption = (
        "Left: each request's TTFT (dots) and the median of each turn (n under the turn: with few "
        "conversations one slow request moves a median). Right: median cached tokens the server reported beside the "
        "history it had already prefilled (expected) and the whole prompt; reported below expected "
        "is eviction, above the prompt's shareable part is leakage."
    )
    return Figure(f"TTFT and reuse by turn: {case.label}", plots.save(fig, path), caption)


def _turns_not_drawn(case: CaseResult, rows: list[TurnRow]) -> Figure | None:
    """No turn has a TTFT (withheld, or none measured): the figure's place says why, rather
    than a reader finding it gone."""
    reasons = sorted({r.unavailable["ttft_s"] for r in rows if r.unavailable.get("ttft_s")})
    if not rows:
        return None
    why = f": {'; '.join(reasons)}" if reasons else ""
    return Figure(f"TTFT and reuse by turn: {case.label}", None, f"Not drawn, because no turn has a TTFT{why}.")


def _fraction(case: CaseResult) -> float:
    """A shared-prefix case's shared fraction (its spec always has one)."""
    return workloads.figures_of(case).spec.fraction or 0.0


def _shared_figure(plots: ModuleType, cases: list[CaseResult], path: Path) -> Figure | None:
    series: dict[tuple[Any, ...], list[CaseResult]] = {}
    for case in cases:
        key = (case.pp + (case.depth or 0), case.tg, case.concurrency)
        series.setdefault(key, []).append(case)
    fig, (left, right) = plots.plt.subplots(1, 2, figsize=plots.WIDE)
    drawn = False
    for (total, tg, c), group in series.items():
        group.sort(key=_fraction)
        points = [(_fraction(x), ttft.median * 1000) for x in group if (ttft := x.summary.get("ttft_s"))]
        if not points:
            continue
        drawn = True
        name = f"pp{total} tg{tg}" + (f" c{c}" if c != 1 else "")
        left.plot(*zip(*points), marker="o", label=name)
        fractions = [_fraction(x) for x in group]
        right.plot(
            fractions,
            [workloads.figures_of(x).reuse.reported_hit_rate or 0 for x in group],
            marker="o",
            label=f"{name} reported",
        )
        right.plot(
            fractions,
            [workloads.figures_of(x).reuse.expected_hit_rate or 0 for x in group],
            marker="x",
            linestyle="--",
            label=f"{name} expected",
        )
    if not drawn:
        plots.plt.close(fig)
        return None
    left.set_xlabel("shared fraction of the prompt")
    left.set_ylabel("TTFT ms (median)")
    left.set_title("TTFT by shared fraction")
    left.set_ylim(0, left.get_ylim()[1] * 1.1)
    right.set_xlabel("shared fraction of the prompt")
    right.set_ylabel("cached ÷ prompt tokens")
    right.set_title("Hit rate, reported vs expected")
    for ax in (left, right):
        ax.legend(fontsize=8)
    caption = (
        "Left: median TTFT as more of each prompt is a shared prefix (fraction 0: nothing shared). "
        "Right: the share of prompt tokens the server reported cached beside the shared fraction."
    )
    return Figure("TTFT by shared fraction", plots.save(fig, path), caption)


def _reuse_figure(plots: ModuleType, case: CaseResult, path: Path) -> Figure | None:
    from collections import Counter

    measured = [r for r in case.requests if not r.warmup and r.expected_cached_tokens is not None]
    points = Counter(
        (r.expected_cached_tokens, r.cached_tokens)
        for r in measured
        if r.status == "ok" and r.cached_tokens is not None
    )
    failed = [r.expected_cached_tokens or 0 for r in measured if r.status != "ok"]
    if not points:
        return None
    fig, ax = plots.plt.subplots(figsize=(6.0, 4.6))
    xs, ys = zip(*points)
    counts = list(points.values())
    # requests at one identical point are one marker sized by how many: none hides another
    ax.scatter(xs, ys, s=[14 + 10 * (n - 1) ** 0.75 for n in counts], alpha=0.7, label="requests (size: how many)")
    for x, y, n in zip(xs, ys, counts):
        if n > 1:
            ax.annotate(f"×{n}", (x, y), textcoords="offset points", xytext=(6, 4), fontsize=7, color="0.3")
    if failed:  # failed requests have no cached figure: shown on the axis at their expected reuse
        ax.scatter(failed, [0] * len(failed), marker="x", color="tab:red", s=30, clip_on=False,
                   label=f"failed ({len(failed)}): no figure")  # fmt: skip
    top = max(max(xs), max(ys), 1)
    ax.plot([0, top], [0, top], linestyle="--", color="grey", label="reported = expected")
    ax.set_xlabel("expected cached tokens (from the trace's block ids)")
    ax.set_ylabel("cached tokens the server reported")
    ax.set_title(f"Expected vs reported reuse: {case.label}")
    ax.legend(fontsize=8)
    caption = (
        "One point per request (a larger point: several at the same place, ×n); red crosses: failed requests. "
        "The reuse an unbounded prefix cache would give a request (earlier requests' "
        "identical blocks) against what the server reported. Below the line: the cache had evicted "
        "(or never held) those blocks; above: a chat template's shared head, or leakage."
    )
    return Figure(f"Expected vs reported reuse: {case.label}", plots.save(fig, path), caption)
