"""PNG figures of a run, drawn from its saved results only (matplotlib, headless Agg backend).

Each figure function takes the results (RunResult) and a folder, writes one PNG and returns a
`Figure` (title, path, caption), or None when the run holds nothing that figure could show.
Error bars are ± one sample standard deviation over a case's measured requests.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display
import matplotlib.pyplot as _pyplot  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402
from matplotlib.figure import Figure as MplFigure  # noqa: E402
from matplotlib.ticker import FuncFormatter as FuncFormatter  # noqa: E402  (re-exported: figures import them here)
from matplotlib.ticker import LogLocator as LogLocator  # noqa: E402
from matplotlib.ticker import MaxNLocator as MaxNLocator  # noqa: E402
from matplotlib.ticker import NullLocator as NullLocator  # noqa: E402

from benchy.measure import registry, unavailable  # noqa: E402
from benchy.report import pooled_view, shown, value_labels  # noqa: E402
from benchy.report.series import (  # noqa: E402
    case_ceiling_tps,
    depth_text,
    is_open_loop,
    lightest_load_cases,
    output_lengths_meet,
    points_sentence,
    prompt_lengths,
    series_by_output,
    series_words,
)
from benchy.report.table import case_name  # noqa: E402
from benchy.results.types import CaseResult, RunResult  # noqa: E402

plt = _pyplot  # the one pyplot every figure module takes from here, after matplotlib.use("Agg")

DPI = 100  # small PNGs that stay sharp on screen
WIDE = (11.0, 4.6)
ANNOTATE_MAX_POINTS = 8  # beyond this, value labels clutter more than they help
BOX_MIN_REQUESTS = 10  # fewer requests than this: dots and their median, no quartile box
CEILING_STYLE: dict[str, Any] = dict(linestyle="--", linewidth=1.2, alpha=0.8)  # Line2D properties
# boxplot's `vert` is deprecated from matplotlib 3.10, which added `orientation`
_MPL_VERSION = tuple(int(p) for p in re.findall(r"\d+", matplotlib.__version__)[:2])
HORIZONTAL_BOX = {"orientation": "horizontal"} if _MPL_VERSION >= (3, 10) else {"vert": False}


@dataclass(frozen=True)
class Figure:
    title: str
    path: Path | None  # None: nothing to draw, the caption says why
    caption: str


@dataclass(frozen=True)
class LeftOut:
    """A point not drawn because its metric is unavailable for that case."""

    metric: str
    case: str
    reason: str
    code: str = ""  # the reason's code (metrics.py): what the caption groups by

    @property
    def short_reason(self) -> str:
        return unavailable.REASON_TITLES.get(self.code) or shown.SHORT_REASONS.get(self.code) or self.reason


# ------------------------------------------------------------------ drawing helpers


def _x_axis(ax: Axes, values: list[float], label: str) -> None:
    values = sorted(set(values))
    if values and values[0] > 0 and values[-1] / values[0] >= 8:
        ax.set_xscale("log")
        ax.set_xlim(values[0] / 1.4, values[-1] * 1.4)
    elif values:
        pad = 0.08 * (values[-1] - values[0]) or 0.5 * values[0] or 1.0
        ax.set_xlim(values[0] - pad, values[-1] + pad)
    ax.set_xticks(values)
    ax.set_xticklabels(
        [f"{v:,.0f}" if v == int(v) else f"{v:g}" for v in values], rotation=30 if len(values) > 5 else 0
    )
    ax.minorticks_off()
    ax.set_xlabel(label)
    ax.grid(True, alpha=0.3)


def _plot_metric_vs(
    ax: Axes,
    series: dict[str, list[CaseResult]],
    metric: str,
    x_key: str,
    title: str,
    fmt: str = "{:.1f}",
    flags: Mapping[str, set[str]] | None = None,
) -> list[LeftOut]:
    """Draws one line per series with error bars (in the registry's display unit: TTFT in ms, as
    in the tables), what shown.py lets every view show: a point the table withholds is left
    out, one a warning qualifies or whose requests partly failed gets a hollow diamond around
    it. Returns the points left out. Value labels are placed once the axes are laid out
    (value_labels.place), where they collide with nothing."""
    scale = registry.METRICS[metric].scale
    left_out: list[LeftOut] = []
    points = sum(len(cases) for cases in series.values())
    for name, cases in series.items():
        xs, ys, errs, marked = [], [], [], []
        for case in cases:
            seen = shown.shown(case, registry.METRICS[metric], (flags or {}).get(case.label, ()))
            if seen.summary is None:
                why = seen.why or case.reason(metric)
                left_out.append(LeftOut(title, case_name(case), why.message, why.code))
                continue
            xs.append(getattr(case, x_key))
            ys.append(seen.summary.median * scale)
            errs.append((seen.summary.std or 0.0) * scale)
            marked.append(seen.qualified or bool(seen.failed))
        if not xs:
            continue
        alone = len(xs) == 1  # one case is a point, not a line: nothing was swept
        # a rate or a time is never negative: the lower bar stops at zero instead of below the axis
        low = [min(err, y) for err, y in zip(errs, ys)]
        line = ax.errorbar(
            xs, ys, yerr=[low, errs], marker="o", capsize=4, label=name, linestyle="none" if alone else "-"
        )
        if any(marked):
            ax.scatter(
                [x for x, m in zip(xs, marked) if m],
                [y for y, m in zip(ys, marked) if m],
                marker="D",
                s=110,
                facecolors="none",
                edgecolors=line.lines[0].get_color(),
                zorder=3,
            )
        if points <= ANNOTATE_MAX_POINTS:
            color = line.lines[0].get_color()
            value_labels.PENDING.setdefault(ax.figure, []).extend(
                (ax, x, y, err, fmt.format(y), color) for x, y, err in zip(xs, ys, errs)
            )
    return left_out


def _ceiling_lines(ax: Axes, series: dict[str, list[CaseResult]]) -> bool:
    drawn = False
    for i, (_name, cases) in enumerate(series.items()):
        pts = [(c.pp, case_ceiling_tps(c)) for c in cases]
        pts = [(x, y) for x, y in pts if y]
        if not pts:
            continue
        xs, ys = zip(*pts)
        ax.plot(
            xs,
            ys,
            color=f"C{i}",
            marker="_",
            markersize=14,
            **CEILING_STYLE,
            label=None if drawn else "bandwidth ceiling, single stream (dashed)",
        )
        drawn = True
    return drawn


def _mark_unavailable(ax: Axes, metric_title: str, notes: list[LeftOut]) -> None:
    reason = notes[0].reason if notes else "not measured"
    ax.text(
        0.5,
        0.5,
        f"{metric_title} unavailable\n{_wrap(reason)}",
        ha="center",
        va="center",
        transform=ax.transAxes,
        fontsize=9,
        color="0.3",
        bbox=dict(facecolor="white", edgecolor="0.7", boxstyle="round"),
    )


def _wrap(text: str, width: int = 60) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + len(word) + 1 > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join(lines + [line])


def save(fig: MplFigure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    value_labels.place(fig)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _figure(fig: MplFigure, axes: Sequence[Axes], path: Path, title: str, caption: str, notes: list[LeftOut]) -> Figure:
    """Saves the figure, or none when no panel has a measured point (an empty chart says less
    than the sentence that replaces it)."""
    if any(_has_data(ax) for ax in axes):
        return Figure(title, save(fig, path), caption + _left_out_sentence(notes))
    plt.close(fig)
    path.unlink(missing_ok=True)  # a stale PNG from an earlier report of this folder
    why = f" (the results table's footnotes say why): {left_out_clauses(notes)}" if notes else ""
    return Figure(title, None, f"Not drawn, because benchy could not measure any of its values{why}.")


def _has_data(ax: Axes) -> bool:
    """Measured points are drawn with errorbar (a container); reference lines are plain lines."""
    return bool(ax.containers)


def _finish_axis(
    ax: Axes, title: str, ylabel: str, metric_title: str, notes: list[LeftOut], log_if_wide: bool = False
) -> None:
    """log_if_wide: a log y axis when values span a factor of 10 or more (TTFT from 50 ms to 5 s)."""
    ax.set_title(title)
    if ax.get_lines() or ax.containers:
        if log_if_wide and _spread(ax) >= 10:
            _log_axis(ax)
            ylabel += " (log scale)"
        else:
            ax.set_ylim(0, ax.get_ylim()[1] * 1.1)  # from zero, so ratios read true; room for labels
        ax.legend(fontsize=8, loc="best")
    else:
        ax.set_yticks([])
    ax.set_ylabel(ylabel)
    if not _has_data(ax):
        _mark_unavailable(ax, metric_title, notes)


def _log_axis(ax: Axes) -> None:
    """A log y axis that reads like a linear one: ticks at 1, 2 and 5 of each decade, written
    as plain numbers (20, 50, 100 ms), never as 10⁻¹ with two labels for the whole axis."""
    ax.set_yscale("log")
    low, high = _positive_range(ax, bars=True)
    ax.set_ylim(low / 1.6, high * 1.6)  # room for the value labels above and below
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))


def _thousands(ax: Axes) -> None:
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))


def _positive_range(ax: Axes, bars: bool = False) -> tuple[float, float]:
    """The points' range; with `bars`, widened to their error bars' tops (kept on the axis)."""
    drawn = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]  # the measured points
    values = [float(y) for cont in drawn for y in np.asarray(cont.lines[0].get_ydata(), dtype=float) if y > 0]
    if not values:
        return (1.0, 1.0)
    tops = [p[1] for c in drawn for b in c.lines[2] for seg in b.get_segments() for p in seg] if bars else []
    return min(values), max([*values, *tops])


def _spread(ax: Axes) -> float:
    low, high = _positive_range(ax)
    return high / low


def left_out_clauses(notes: list[LeftOut]) -> str:
    """One clause per (metric, reason), e.g. "decode t/s of pp128 tg16, pp512 tg16 (SSE buffering)"."""
    groups: dict[tuple[str, str], list[str]] = {}
    for note in notes:
        groups.setdefault((note.metric, note.short_reason), []).append(note.case)
    return "; ".join(f"{metric} of {', '.join(cases)} ({reason})" for (metric, reason), cases in groups.items())


def _left_out_sentence(notes: list[LeftOut]) -> str:
    if not notes:
        return ""
    # A figure the table withholds as too noisy was measured: "could not measure" is not its why.
    why = "withheld, as in the results table" if all(n.code == shown.TOO_NOISY for n in notes) else None
    return (
        f" Not plotted ({why}): {left_out_clauses(notes)}."
        if why
        else " Not plotted, because benchy could not measure them (the results table's footnotes say "
        f"why): {left_out_clauses(notes)}."
    )


# ------------------------------------------------------------------ the figures


def throughput_vs_prompt(results: RunResult, directory: Path) -> Figure | None:
    cases = results.cases
    if not cases:
        return None
    chosen, load = lightest_load_cases(cases)
    if prompt_lengths(chosen) < 2:
        return None  # one prompt length is no curve: the table has its numbers
    series = series_by_output(chosen)
    flags = shown.flags_by_case(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=WIDE)
    e2e_notes = _plot_metric_vs(left, series, "e2e_tps", "pp", "e2e t/s", flags=flags)
    decode_notes = _plot_metric_vs(right, series, "decode_tps", "pp", "decode t/s", flags=flags)
    ceiling = _ceiling_lines(right, series)
    _ceiling_lines(left, series)
    for ax in (left, right):
        _x_axis(ax, [c.pp for c in chosen], "prompt length (tokens)")
    _finish_axis(left, "End-to-end throughput", "tokens/s per request (output ÷ total time)", "e2e t/s", e2e_notes)
    _finish_axis(right, "Decode throughput (after first token)", "tokens/s per request", "decode t/s", decode_notes)
    notes = e2e_notes + decode_notes
    fig.suptitle(f"Throughput vs prompt length, {load}")
    caption = (
        f"Per-request output speed at {load}, {series_words(series)}; points are "
        "medians, error bars ± one standard deviation. End-to-end throughput counts the whole "
        "request (queueing, prefill and decode); decode throughput only the tokens after the "
        "first one."
    )
    caption += points_sentence(series) + _marks_sentence(chosen, ("e2e_tps", "decode_tps"), flags)
    if ceiling:
        caption += (
            " Dashed lines: the memory-bandwidth ceiling of single-stream decode for the "
            "recorded hardware and model profile, a conservative upper bound; a point above "
            "it was not measured correctly."
        )
    return _figure(
        fig, (left, right), directory / "throughput_vs_prompt.png", "Throughput vs prompt length", caption, notes
    )


def ttft_vs_prompt(results: RunResult, directory: Path) -> Figure | None:
    cases = results.cases
    if not cases:
        return None
    chosen, load = lightest_load_cases(cases)
    if prompt_lengths(chosen) < 2:
        return None
    series = series_by_output(chosen)
    flags = shown.flags_by_case(results)
    fig, (left, right) = plt.subplots(1, 2, figsize=WIDE)
    ttft_notes = _plot_metric_vs(left, series, "ttft_s", "pp", "TTFT", fmt="{:,.0f}", flags=flags)
    prefill_notes = _plot_metric_vs(right, series, "prefill_tps", "pp", "prefill t/s", fmt="{:,.0f}", flags=flags)
    for ax in (left, right):
        _x_axis(ax, [c.pp for c in chosen], "prompt length (tokens)")
    _finish_axis(left, "Time to first token", "milliseconds", "TTFT", ttft_notes, log_if_wide=True)
    _finish_axis(right, "Prefill rate", "uncached prompt tokens/s", "prefill t/s", prefill_notes)
    _thousands(right)
    notes = ttft_notes + prefill_notes
    fig.suptitle(f"Time to first token vs prompt length, {load}")  # as the report's heading
    caption = (
        "Time from sending a request to its first generated token (left), and the uncached "
        "prompt tokens processed per second of that time (right; TTFT includes queueing and "
        "one decode step, so this is a floor on the true prefill speed)."
    )
    if output_lengths_meet(series):  # the rule needs two output lengths at one prompt length
        caption += (
            " TTFT should grow with prompt length and not with output length: lines that differ "
            "by output length point to a buffered stream."
        )
    caption += points_sentence(series) + _marks_sentence(chosen, ("ttft_s", "prefill_tps"), flags)
    return _figure(
        fig, (left, right), directory / "ttft_vs_prompt.png", "Time to first token vs prompt length", caption, notes
    )


def concurrency_scaling(results: RunResult, directory: Path) -> Figure | None:
    closed = [c for c in results.cases if not is_open_loop(c)]
    if len({c.concurrency for c in closed}) < 2:
        return None
    caption = (
        "Left: all output tokens the server delivered per second of wall time while the case ran "
        "(dotted: what perfect scaling from the lowest concurrency would give). Right: what each "
        "single request experienced (median end-to-end throughput ± one standard deviation). "
        "Batching raises the total while each request gets slower."
    )
    return _scaling(
        closed,
        "concurrency",
        "concurrent requests",
        lambda x, first_x, first_y, case: first_y * x / first_x,
        "perfect scaling from the lowest concurrency",
        "Throughput vs concurrency",
        caption,
        directory / "concurrency.png",
        shown.flags_by_case(results),
    )


def rate_scaling(results: RunResult, directory: Path) -> Figure | None:
    opened = [c for c in results.cases if is_open_loop(c)]
    if len({c.rate for c in opened}) < 2:
        return None
    caption = (
        "Open loop: requests arrive at the given rate (Poisson) whether or not earlier ones "
        "finished. Left: output tokens the server delivered per second of the case's wall time; "
        "where it stops rising with the arrival rate, the server is saturated and requests queue. "
        "Right: what each request experienced (median end-to-end throughput ± one standard "
        "deviation)."
    )
    return _scaling(
        opened,
        "rate",
        "arrival rate (requests/s)",
        None,
        "",
        "Throughput vs arrival rate",
        caption,
        directory / "rate.png",
        shown.flags_by_case(results),
    )


def _scaling(
    cases: list[CaseResult],
    x_key: str,
    x_label: str,
    reference: Callable[[float, float, float, CaseResult], float] | None,
    reference_label: str,
    title: str,
    caption: str,
    path: Path,
    flags: Mapping[str, set[str]] | None = None,
) -> Figure:
    """Aggregate (left) and per-request (right) throughput against the load, one line per shape;
    `reference(x, first x, first y, case)` draws a dotted comparison line when given."""
    groups: dict[str, list[CaseResult]] = {}
    for case in sorted(cases, key=lambda c: getattr(c, x_key)):
        groups.setdefault(_shape_label(case), []).append(case)
    fig, (left, right) = plt.subplots(1, 2, figsize=WIDE)
    for i, (name, group) in enumerate(groups.items()):
        pts = [(getattr(c, x_key), c.aggregate_tps, c) for c in group if c.aggregate_tps is not None]
        if pts:
            xs, ys, measured = zip(*pts)
            left.errorbar(xs, ys, marker="o", color=f"C{i}", label=name)
            if len(cases) <= ANNOTATE_MAX_POINTS:
                value_labels.PENDING.setdefault(fig, []).extend(
                    (left, x, y, 0.0, f"{y:,.0f}", f"C{i}") for x, y in zip(xs, ys)
                )
            if reference:
                left.plot(
                    xs,
                    [reference(x, xs[0], ys[0], c) for x, c in zip(xs, measured)],
                    color=f"C{i}",
                    linestyle=":",
                    alpha=0.6,
                    scalex=False,
                    scaley=False,  # the axis is the data's: the line leaves it where it outgrows them
                )
    notes = _plot_metric_vs(right, groups, "e2e_tps", x_key, "e2e t/s", flags=flags)
    caption += _marks_sentence(cases, ("e2e_tps",), flags or {})
    for ax in (left, right):
        _x_axis(ax, [getattr(c, x_key) for c in cases], x_label)
    if reference:
        left.plot([], [], color="0.4", linestyle=":", label=reference_label)
    _finish_axis(
        left,
        "Aggregate throughput (server total)",
        "output tokens/s, all requests",
        "aggregate t/s",
        [LeftOut("aggregate t/s", "", "no successful request")],
    )
    _finish_axis(right, "Per-request throughput", "tokens/s per request (e2e)", "e2e t/s", notes)
    if reference and _has_data(left):
        left.set_ylim(0, 1.25 * max(y for c in left.containers for y in c.lines[0].get_ydata()))
    fig.suptitle(title)
    return _figure(fig, (left, right), path, title, caption, notes)


def _marks_sentence(cases: list[CaseResult], metrics: Sequence[str], flags: Mapping[str, set[str]]) -> str:
    """What the hollow diamonds of _plot_metric_vs mark, case by case."""
    qualified, failed = [], []
    for case in cases:
        seen = [shown.shown(case, registry.METRICS[m], flags.get(case.label, ())) for m in metrics]
        if any(p.qualified for p in seen):
            qualified.append(case_name(case))
        if any(p.drawn and p.failed for p in seen):
            failed.append(f"{case_name(case)} ({case.n_failed} failed)")
    words = []
    if qualified:
        words.append(f"a warning qualifies the point ({', '.join(qualified)}: see Warnings)")
    if failed:
        words.append(f"some of its requests failed and it rests on the rest ({', '.join(failed)})")
    return (" Hollow diamonds: " + "; ".join(words) + ".") if words else ""


def _single_stream(case: CaseResult) -> bool:
    return case.concurrency == 1 and not is_open_loop(case)


def _shape_label(case: CaseResult) -> str:
    return case_name(case, f"pp{case.pp}{pooled_view.output_text(case)}{depth_text(case)}")


DISTRIBUTION_TITLE = "Every request's end-to-end throughput"


def request_distribution(results: RunResult, directory: Path) -> Figure | None:
    cases = results.cases
    if not cases:
        return None
    fig, ax = plt.subplots(figsize=(WIDE[0], max(3.2, 1.6 + 0.45 * len(cases))))
    rng = np.random.default_rng(0)  # fixed jitter: the same results always draw the same figure
    rows = list(reversed(cases))  # first case on top
    data = [c.measured_values("e2e_tps") for c in rows]
    positions = [i for i, values in enumerate(data) if values]
    path = directory / "requests_e2e.png"
    if not positions:
        return _figure(fig, [], path, DISTRIBUTION_TITLE, "", [])
    boxed = [i for i in positions if len(data[i]) >= BOX_MIN_REQUESTS]  # quartiles of 3 dots say nothing
    if boxed:
        ax.boxplot(
            [data[i] for i in boxed],
            positions=boxed,
            widths=0.55,
            showfliers=False,
            medianprops=dict(color="black"),
            **HORIZONTAL_BOX,
        )
    for i, case in enumerate(rows):
        values = data[i]
        ax.scatter(values, i + rng.uniform(-0.15, 0.15, len(values)), s=14, alpha=0.7, color="C0", zorder=3)
        median = case.median("e2e_tps")  # the registered metric's, as the table shows it
        if values and i not in boxed and median is not None:
            ax.plot([median] * 2, [i - 0.3, i + 0.3], color="black", linewidth=1.5, zorder=4)
        ceiling = case_ceiling_tps(case) if _single_stream(case) else None
        if ceiling:
            ax.plot([ceiling], [i], marker="|", markersize=18, color="C3", zorder=4)
        _row_note(ax, i, case, values)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([case_name(c) for c in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    highest = max(
        [v for values in data for v in values] + [case_ceiling_tps(c) or 0 for c in rows if _single_stream(c)]
    )
    ax.set_xlim(0, highest * 1.06)  # from zero, so ratios read true; the fastest dot fully inside
    ax.set_xlabel("end-to-end throughput per request (tokens/s)")
    ax.grid(True, axis="x", alpha=0.3)
    ax.scatter([], [], s=14, color="C0", label="one measured request")
    ax.plot([], [], color="black", linewidth=1.5, label="median")
    if any(case_ceiling_tps(c) for c in cases if _single_stream(c)):
        ax.plot([], [], marker="|", markersize=12, linestyle="none", color="C3", label="bandwidth ceiling")
    # below the axes, never on top of a dot; anchored in font sizes, not in a share of the height
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=4.2, ncol=3, frameon=False)
    ax.set_title("Every measured request, per case" + (" (box: quartiles)" if boxed else ""))
    caption = (
        "Each dot is one measured request (warmups excluded), the black line its case's median"
        + (f"; cases of {BOX_MIN_REQUESTS} or more requests get a box spanning their middle half" if boxed else "")
        + ". A dot far from the rest is an outlier worth a look in requests.jsonl. Failed requests "
        "have no throughput and are counted right of their case's row."
    )
    return Figure(DISTRIBUTION_TITLE, save(fig, path), caption)


def _row_note(ax: Axes, row: int, case: CaseResult, values: list[float]) -> None:
    notes = []
    if case.n_failed:
        notes.append(f"{case.n_failed} failed")
    if not values:
        notes.append("no successful request")
    if notes:  # right of the axes, where no dot can be (at the left it covered slow requests' dots)
        ax.annotate(
            ", ".join(notes),
            (1.0, row),
            xycoords=("axes fraction", "data"),
            xytext=(6, 0),
            textcoords="offset points",
            ha="left",
            va="center",
            fontsize=8,
            color="C3",
        )


FIGURES = (throughput_vs_prompt, ttft_vs_prompt, concurrency_scaling, rate_scaling, request_distribution)


def write_figures(sweep: RunResult, directory: Path) -> list[Figure]:
    """Every figure that applies to these sweep results, written as PNGs under `directory`
    (a conversation or a trace has no prompt-length axis: report/workloads.py draws those)."""
    made = [make(sweep, directory) for make in FIGURES if sweep.cases]
    return [fig for fig in made if fig is not None]
