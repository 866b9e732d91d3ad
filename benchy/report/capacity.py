"""The report of a capacity search (capacity.json): capacity.md with the answer, its bracket and
every point probed, and the figure people plot for capacity: total throughput against per-user
throughput, each point a load, the Pareto front drawn through the ones no other point beats on
both axes, the chosen point marked. Reads the saved result only, so `benchy report` remakes it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchy.folders import FIGURES_DIR
from benchy.measure import stats
from benchy.report import html, html_probe
from benchy.results.capacity import CapacityPoint, CapacityResult, load_text, share_text

FIGURE_NAME = "capacity-pareto.png"
REPORT_NAME = "capacity.md"


def pareto_front(points: list[CapacityPoint]) -> list[CapacityPoint]:
    """The points that no other point beats on both per-user and total throughput, by per-user
    throughput ascending (points without both figures are left out)."""
    drawn = [p for p in points if p.per_user_tps is not None and p.throughput_tps is not None]
    front = [
        p
        for p in drawn
        if not any(
            q is not p
            and q.per_user_tps >= p.per_user_tps  # type: ignore[operator]
            and q.throughput_tps >= p.throughput_tps  # type: ignore[operator]
            and (q.per_user_tps, q.throughput_tps) != (p.per_user_tps, p.throughput_tps)
            for q in drawn
        )
    ]
    return sorted(front, key=lambda p: p.per_user_tps or 0.0)


def dominated_by(point: CapacityPoint, points: list[CapacityPoint]) -> CapacityPoint | None:
    """A passing point with both more total and more per-user throughput than `point`, if any."""
    if point.per_user_tps is None or point.throughput_tps is None:
        return None
    beats = [
        q
        for q in points
        if q.verdict == "pass"
        and q.per_user_tps is not None
        and q.throughput_tps is not None
        and q.per_user_tps >= point.per_user_tps
        and q.throughput_tps >= point.throughput_tps
        and (q.per_user_tps, q.throughput_tps) != (point.per_user_tps, point.throughput_tps)
    ]
    return max(beats, key=lambda q: q.throughput_tps or 0.0) if beats else None


def write(result: CapacityResult, directory: Path) -> Path:
    """capacity.md, its figure and report.html (CAPACITY_EXPORTERS); returns capacity.md."""
    directory.mkdir(parents=True, exist_ok=True)
    for exporter in CAPACITY_EXPORTERS:
        exporter.export(result, directory)
    return directory / REPORT_NAME


class CapacityMarkdown:
    """capacity.md with its Pareto figure (an exporter: report/exporters.py)."""

    name = "capacity report"
    file_name = REPORT_NAME

    def export(self, result: CapacityResult, directory: Path) -> Path:
        return write_markdown(result, directory)


class CapacityHtml:
    name = "capacity report.html"
    file_name = html.FILE

    def export(self, result: CapacityResult, directory: Path) -> Path:
        return write_html(result, directory)


CAPACITY_EXPORTERS = (CapacityMarkdown(), CapacityHtml())


def write_markdown(result: CapacityResult, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    figure = write_figure(result, directory / FIGURES_DIR / FIGURE_NAME)
    path = directory / REPORT_NAME
    path.write_text(markdown(result, f"{FIGURES_DIR}/{FIGURE_NAME}" if figure else None), encoding="utf-8")
    return path


def write_html(result: CapacityResult, directory: Path) -> Path:
    drawn = [p for p in result.points if p.per_user_tps is not None and p.throughput_tps is not None]
    best = result.point(result.answer.capacity) if result.answer else None
    text = html_probe.CapacityText(
        markdown(result, None),
        points_table(result),
        pareto_front(drawn),
        dominated_by(best, drawn) if best is not None else None,
        {p.load: _short(result, p.load) for p in result.points},
    )
    return html_probe.write_capacity(result, directory, text)


def write_figure(result: CapacityResult, path: Path) -> Path | None:
    """The Pareto figure, or None when no point has both throughputs (the report says so)."""
    from benchy.report import plots, value_labels  # matplotlib only when a figure is drawn

    plt = plots.plt
    drawn = [p for p in result.points if p.per_user_tps is not None and p.throughput_tps is not None]
    if not drawn:
        path.unlink(missing_ok=True)
        return None
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    for verdict, marker, color in (("pass", "o", "tab:green"), ("fail", "x", "tab:red")):
        xs, ys = _xy([p for p in drawn if p.verdict == verdict])
        ax.scatter(xs, ys, marker=marker, color=color, label=verdict)
    # each load's label where it covers no other label, point or line (value_labels, placed at
    # save): fixed offsets drew crowded loads' labels over each other; the points table has all,
    # and the capacity's star is named in the legend
    best = result.point(result.answer.capacity) if result.answer else None
    value_labels.PENDING.setdefault(fig, []).extend(
        (ax, p.per_user_tps or 0.0, p.throughput_tps or 0.0, 0.0, _short(result, p.load), "0.2")
        for p in drawn
        if p is not best
    )
    front = pareto_front(drawn)
    if len(front) >= 2:  # one point is no line: the legend lists only what is drawn
        ax.plot(*_xy(front), "--", color="grey", label="Pareto front")
    best = result.point(result.answer.capacity) if result.answer else None
    better = dominated_by(best, drawn) if best is not None else None
    if better is not None:  # the answer is the highest passing load, which need not be on the front
        ax.text(
            0.01, 0.01, f"{_short(result, better.load)} passes too and beats the capacity on both axes",
            transform=ax.transAxes, fontsize=8, color="0.3", va="bottom",
        )  # fmt: skip
    if best is not None and best in drawn:
        ax.scatter(
            *_xy([best]),
            s=260,
            marker="*",
            color="gold",
            edgecolor="black",
            zorder=5,
            label=f"capacity: {_short(result, best.load)}",
        )
    ax.set_xlabel("per-user throughput, tokens/s (median decode rate of a request)")
    ax.set_ylabel("total throughput, output tokens/s")
    ax.set_title(f"{result.setup.case or ''} · SLO {_slo_text(result)} · goodput ≥ {result.setup.goodput:.0%}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return plots.save(fig, path)


def _xy(points: list[CapacityPoint]) -> tuple[list[float], list[float]]:
    return [p.per_user_tps or 0.0 for p in points], [p.throughput_tps or 0.0 for p in points]


def _short(result: CapacityResult, load: float) -> str:
    return f"r{load:g}" if result.setup.by == "rate" else f"c{int(load)}"


def _slo_text(result: CapacityResult) -> str:
    from benchy.measure.registry import METRICS

    parts = []
    for name, limit in result.setup.slo.items():
        metric = METRICS.get(name)
        shown = f"{limit * 1000:g}ms" if metric and metric.is_time else f"{limit:g}"
        parts.append(f"{name.removesuffix('_s')}={shown}")
    return ",".join(parts)


def _ms(summary: object, field: str = "median") -> str:
    """A statistic in ms, or "too few" where its requests cannot bound it: the one policy
    `benchy run`'s tables follow (stats.enough_for), not a p99 of 20 requests (issue 54)."""
    value = getattr(summary, field, None) if summary is not None else None
    if value is None:
        return "n/a"
    n = getattr(summary, "n", 0)
    return f"{value * 1000:,.0f}" if stats.enough_for(field, n) else stats.TOO_FEW


def _number(value: float | None, digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def points_table(result: CapacityResult) -> str:
    """Every point, in the order probed."""
    head = (
        "| # | load | verdict | requests | goodput | interval | TTFT p50 / p90 / p99 ms | ITL p50 / p99 ms "
        "| total tok/s | per-user tok/s | cache hit | misses at round start | rounds not counted |"
    )
    rows = [head, "|" + "---|" * 13]
    for i, p in enumerate(result.points, 1):
        interval = f"{p.interval[0]:.0%}–{p.interval[1]:.0%}" if p.interval else "n/a"
        verdict = p.verdict if p.clear else f"{p.verdict} (uncertain)"
        goodput = "n/a" if p.goodput is None else share_text(p.goodput, result.setup.goodput)
        ttft = f"{_ms(p.ttft)} / {_ms(p.ttft, 'p90')} / {_ms(p.ttft, 'p99')}"
        itl = f"{_ms(p.itl)} / {_ms(p.itl, 'p99')}"
        hit = "n/a" if p.cache_hit is None else f"{p.cache_hit:.0%}"
        skipped = sum(not r.counted for r in p.rounds)
        start = "n/a" if p.start_misses is None else f"{p.start_misses} of {p.requests - p.good}"
        rows.append(
            f"| {i} | {_short(result, p.load)} | {verdict} | {p.requests} | {goodput} | {interval} | {ttft} | {itl} "
            f"| {_number(p.throughput_tps)} | {_number(p.per_user_tps, 1)} | {hit} | {start} | {skipped} |"
        )
    return "\n".join(rows)


def markdown(result: CapacityResult, figure: str | None) -> str:
    setup, answer = result.setup, result.answer
    lines = [f"# Capacity: {setup.case or ''}", ""]
    lines.append(f"**{answer.line if answer else 'no answer: nothing was measured'}**")
    lines.append("")
    if answer is not None:
        lines.append(
            f"Bracket: highest passing {load_text(setup.by, answer.capacity)}, lowest failing "
            f"{load_text(setup.by, answer.failing)}; both clear of the target: {'yes' if answer.confident else 'no'}."
        )
    lines += [
        "",
        f"SLO {_slo_text(result)}; a point passes when at least {setup.goodput:.0%} of its requests meet every "
        f"target, judged by the {setup.confidence:.0%} {'Wilson' if setup.interval == 'wilson' else 'Clopper–Pearson'}"
        " interval of its goodput (decided by the estimate, and marked uncertain, when the interval still straddles "
        f"the target after {setup.max_requests} requests). Rounds in which benchy itself fell behind are not counted, unless they passed an SLO that a late "
        "client can only worsen (TTFT, latency, e2e rate); their times are left out of the figures.",
        "",
        f"Server: {setup.server_version or 'unknown'} · model {setup.model or 'unknown'} · {setup.base_url or ''} · "
        f"{sum(p.requests for p in result.points)} requests counted over {len(result.points)} points.",
        "",
        points_table(result),
        "",
    ]
    if result.setup.by != "rate":
        lines += [
            "Each round is a closed loop whose streams all send their first request at once: *misses at round "
            "start* counts the SLO misses among those first requests, a burst steady traffic does not have (longer "
            "rounds, --min-requests, dilute it).",
            "",
        ]
    if result.stopped is not None:
        lines += [f"Stopped early: {result.stopped.reason}.", ""]
    lines += [f"Note: {n}" for n in result.notes]
    if figure:
        lines += [
            "## Total vs per-user throughput",
            "",
            f"![Pareto]({figure})",
            "",
            "Each point is one load; the dashed line is the Pareto front (no other point has both more total and "
            "more per-user throughput); the star is the capacity, the highest load that passes, which a point "
            "of less load can beat on both axes.",
        ]
    else:
        lines.append("No point has both a total and a per-user throughput, so there is no Pareto figure.")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ benchy compare of two searches


def setup_differences(a: CapacityResult, b: CapacityResult) -> list[str]:
    """What makes two answers answer different questions (a flag of the server may differ: that
    is the point of comparing; the case, the SLO and the target may not, silently)."""
    fields = ("case", "by", "slo", "goodput", "confidence", "interval", "endpoint")
    return [
        f"{name} differs: {getattr(a.setup, name)!r} vs {getattr(b.setup, name)!r}"
        for name in fields
        if name != "case" and getattr(a.setup, name) != getattr(b.setup, name)
    ] + ([f"case differs: {a.setup.case!r} vs {b.setup.case!r}"] if _case_key(a) != _case_key(b) else [])


def _case_key(result: CapacityResult) -> tuple[Any, ...]:
    s = result.setup
    return (s.kind, s.pp, s.tg, s.depth, str(s.workload))


def verdict(a: CapacityResult, b: CapacityResult) -> str:
    """More, less or the same, by the brackets: B serves more when its highest pass is at or above
    A's lowest failure (and the other way round); adjacent brackets overlap, so: the same."""
    ca, cb = (r.answer.capacity if r.answer else None for r in (a, b))
    fa, fb = (r.answer.failing if r.answer else None for r in (a, b))
    by = a.setup.by
    if ca == cb:
        return f"the same capacity ({load_text(by, ca)})"
    if cb is not None and (ca is None or (fa is not None and cb >= fa)):
        return f"more: {load_text(by, cb)} against {load_text(by, ca)}"
    if ca is not None and (cb is None or (fb is not None and ca >= fb)):
        return f"less: {load_text(by, cb)} against {load_text(by, ca)}"
    return f"not told apart: {load_text(by, cb)} against {load_text(by, ca)} (their brackets overlap)"


def compare_markdown(results: list[CapacityResult], names: list[str]) -> str:
    """The first search is the baseline; each other one is set against it."""
    base, base_name = results[0], names[0]
    lines: list[str] = []
    for other, name in zip(results[1:], names[1:]):
        lines += [f"## Capacity: {base_name} → {name}", "", f"**{name} serves {verdict(base, other)}.**", ""]
        lines += [f"- {n}: {r.answer.line if r.answer else 'no answer'}" for n, r in ((base_name, base), (name, other))]
        lines += [""] + [
            f"Warning: {d}: these answers are to different questions." for d in setup_differences(base, other)
        ]
        lines += ["", f"| | {base_name} | {name} | change |", "|---|---|---|---|"]
        lines += [_row(label, fa, fb, scale, digits) for label, fa, fb, scale, digits in _compared(base, other)]
        lines += ["", _common_loads(base, other, base_name, name), ""]
    return "\n".join(lines).rstrip() + "\n"


def _compared(
    a: CapacityResult, b: CapacityResult
) -> list[tuple[str, float | str | None, float | str | None, float, int]]:
    pa, pb = (r.point(r.answer.capacity) if r.answer else None for r in (a, b))

    def at(point: CapacityPoint | None, name: str) -> float | str | None:
        if point is None:
            return None
        if name != "ttft":
            figure: float | None = getattr(point, name)
            return figure
        value = point.ttft
        if value is not None and not stats.enough_for("p90", value.n):  # the one "too few" policy
            return stats.TOO_FEW
        p90: float | None = getattr(value, "p90", None)
        return p90

    return [
        ("capacity (highest passing load)", _cap(a), _cap(b), 1.0, 3),
        ("lowest failing load", _fail(a), _fail(b), 1.0, 3),
        ("total output tokens/s at capacity", at(pa, "throughput_tps"), at(pb, "throughput_tps"), 1.0, 0),
        ("per-user tokens/s at capacity", at(pa, "per_user_tps"), at(pb, "per_user_tps"), 1.0, 1),
        ("TTFT p90 at capacity, ms", at(pa, "ttft"), at(pb, "ttft"), 1000.0, 0),
        ("requests spent", _spent(a), _spent(b), 1.0, 0),
    ]


def _cap(r: CapacityResult) -> float | None:
    return r.answer.capacity if r.answer else None


def _fail(r: CapacityResult) -> float | None:
    return r.answer.failing if r.answer else None


def _spent(r: CapacityResult) -> float:
    return float(sum(rnd.requests for p in r.points for rnd in p.rounds))


def _row(label: str, a: float | str | None, b: float | str | None, scale: float, digits: int) -> str:
    def shown(v: float | str | None) -> str:
        if v is None or isinstance(v, str):
            return v or "n/a"
        return f"{v * scale:,.{digits}g}" if digits == 3 else f"{v * scale:,.{digits}f}"

    change = "n/a"
    if isinstance(a, float | int) and isinstance(b, float | int) and a:
        change = f"{(b - a) / a:+.0%}"
    return f"| {label} | {shown(a)} | {shown(b)} | {change} |"


def _common_loads(a: CapacityResult, b: CapacityResult, a_name: str, b_name: str) -> str:
    """Goodput at the loads both probed."""
    shared = sorted({p.load for p in a.points} & {p.load for p in b.points})
    if not shared:
        return "No load was probed by both."
    rows = [f"| load | goodput {a_name} | goodput {b_name} |", "|---|---|---|"]
    for load in shared:
        pa, pb = a.point(load), b.point(load)
        rows.append(f"| {_short(a, load)} | {_share(pa, a.setup.goodput)} | {_share(pb, b.setup.goodput)} |")
    return "\n".join(rows)


def _share(p: CapacityPoint | None, target: float) -> str:
    if p is None or p.goodput is None:
        return "n/a"
    mark = "" if p.clear else " (uncertain)"
    return f"{share_text(p.goodput, target)} ({p.good}/{p.requests}){mark}"
