"""What a load tester reads first (issue 54): latency against load and throughput against latency,
as report.html's plotly figures, made from saved results only.

Latency against load: for TTFT, ITL and total latency, the p50, p90 and p99 of each case against
its concurrency (closed loops) or its request rate (open loops), one figure per load axis. A
percentile is drawn with its interval (the median's bootstrap 95% interval; p90's and p99's 99%
order-statistic bounds) or not at all: a p99 of 20 requests is no figure, and the caption names
the cases where it was too few. Throughput against latency: each case's aggregate output t/s
against its median total latency (the curve GuideLLM and vLLM users read), the load level by
each point. Failed requests are marked on every one of them: a red count above the load level
whose case lost requests, so a flattering tail made of survivors never stands alone.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable

from benchy.jsontypes import JsonObject
from benchy.measure import stats
from benchy.measure.registry import METRICS
from benchy.report import pooled_view
from benchy.report.html_figures import FAILED_COLOR, Panel, _layout, _sweep
from benchy.results.types import CaseResult, MetricSummary, RunResult

LATENCIES = ("ttft_s", "itl_s", "e2e_s")
# (name, the value, its interval's low and high end; None: too few to bound it)
Percentile = tuple[str, Callable[[MetricSummary], float | None], Callable[[MetricSummary], tuple[float, float] | None]]


def _bounds(low: float | None, high: float | None) -> tuple[float, float] | None:
    """An interval with both ends known, else None (too few values to bound it)."""
    return (low, high) if low is not None and high is not None else None


PERCENTILES: tuple[Percentile, ...] = (
    ("p50", lambda s: s.median, lambda s: _bounds(*s.ci95) if s.ci95 else None),
    ("p90", lambda s: s.p90, lambda s: _bounds(s.p90_low, s.p90_high)),
    ("p99", lambda s: s.p99, lambda s: _bounds(s.p99_low, s.p99_high)),
)
DASH = {"p50": "solid", "p90": "dash", "p99": "dot"}


def _axes(results: RunResult) -> list[tuple[str, str, Callable[[CaseResult], float], list[CaseResult]]]:
    """(key, axis title, the case's load level, its cases) for each load axis run over at least
    two levels: concurrency for closed loops, request rate for open ones."""
    cases = [c for c in _sweep(results) if c.kind != "trace"]
    closed = [c for c in cases if c.rate is None and c.concurrency]
    opened = [c for c in cases if c.rate is not None]
    axes = []
    if len({c.concurrency for c in closed}) >= 2:
        axes.append(("concurrency", "concurrency (requests in flight)", lambda c: float(c.concurrency or 0), closed))
    if len({c.rate for c in opened}) >= 2:
        axes.append(("rate", "request rate asked (requests/s)", lambda c: float(c.rate or 0), opened))
    return axes


def _shape(case: CaseResult, endpoints: bool) -> str:
    """Every case parameter but the load: the cases one line joins (the endpoint where several ran)."""
    depth = f" @ d{case.depth}" if case.depth else ""
    text = f"pp{case.pp}{pooled_view.output_text(case)}{depth}"
    return text + (f" [{case.endpoint}]" if endpoints and case.endpoint else "")


def _series(cases: list[CaseResult], level: Callable[[CaseResult], float]) -> dict[str, list[CaseResult]]:
    endpoints = len({c.endpoint for c in cases}) > 1
    series: dict[str, list[CaseResult]] = {}
    for case in sorted(cases, key=level):
        series.setdefault(_shape(case, endpoints), []).append(case)
    return series


def _failures(cases: list[CaseResult], x: Callable[[CaseResult], float], log: bool) -> list[JsonObject]:
    """A red "✕ N failed" above each load level whose case lost requests (cut ones named too);
    on a log axis an annotation's x is the level's log10, as plotly places it."""
    marks = []
    for case in cases:
        if not case.n_failed:
            continue
        cut = case.errors.get("drain_cut", 0)
        words = f"✕ {case.n_failed} of {case.n_ok + case.n_failed} failed" + (f" ({cut} cut)" if cut else "")
        marks.append(
            {
                "x": math.log10(x(case)) if log else x(case),
                "y": 1.0,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "text": words,
                "showarrow": False,
                "font": {"color": FAILED_COLOR, "size": 11},
                "hovertext": html.escape(case.label),
            }
        )
    return marks


def _load(case: CaseResult) -> str:
    return f"c{case.concurrency}" if case.rate is None else f"r{case.rate:g}"


def _too_few_words(too_few: dict[str, list[str]]) -> str:
    """Which percentiles were too few to bound, where: never drawn, so said."""
    said = [
        f"{pct} at {', '.join(dict.fromkeys(loads))} ({stats.TOO_FEW}: it needs {stats.SHOWN_FROM.get(pct, 3)} requests)"
        for pct, loads in too_few.items()
    ]
    return " Not drawn: " + "; ".join(said) + "." if said else ""


def _log_x(layout: JsonObject, levels: list[float]) -> bool:
    """Load levels spread over an order of magnitude on a log axis, ticked at the levels run."""
    log = len(levels) > 2 and levels[-1] >= 8 * levels[0]
    if log:
        layout["xaxis"].update(type="log", tickvals=levels, ticktext=[f"{v:g}" for v in levels])
    return log


def latency_vs_load(results: RunResult, name: str) -> list[Panel]:
    """`name`'s p50/p90/p99 against each load axis, with intervals; percentiles too few to bound
    left out and said so."""
    metric = METRICS[name]
    made = []
    for axis, axis_title, level, cases in _axes(results):
        traces: list[JsonObject] = []
        too_few: dict[str, list[str]] = {}
        withheld: dict[str, None] = {}
        for shape, group in _series(cases, level).items():
            for pct, value, interval in PERCENTILES:
                xs, ys, lows, highs, labels = [], [], [], [], []
                for case in group:
                    summary = case.summary.get(name)
                    if summary is None:
                        withheld.setdefault(f"{_load(case)} ({case.reason(name).message})", None)
                        continue
                    bounds = interval(summary)
                    v = value(summary)
                    if bounds is None or v is None:
                        too_few.setdefault(pct, []).append(_load(case))
                        continue
                    xs.append(level(case))
                    ys.append(v * metric.scale)
                    lows.append(max(0.0, (v - bounds[0]) * metric.scale))
                    highs.append(max(0.0, (bounds[1] - v) * metric.scale))
                    labels.append([case.label, summary.n])
                if not xs:
                    continue
                traces.append(
                    {
                        "type": "scatter",
                        "mode": "lines+markers",
                        "name": f"{shape} {pct}",
                        "legendgroup": shape,
                        "line": {"dash": DASH[pct]},
                        "x": xs,
                        "y": ys,
                        "error_y": {"type": "data", "array": highs, "arrayminus": lows, "visible": True},
                        "customdata": labels,
                        "hovertemplate": f"%{{customdata[0]}}<br>{metric.title} {pct} %{{y:,.1f}}"
                        "<br>n = %{customdata[1]}<extra></extra>",
                    }
                )
        title = f"{metric.title} against {axis}"
        key = f"{name}-vs-{axis}"
        if not traces:
            made.append(Panel(key, title, "", why=f"{metric.title} is withheld or too few in every case"))
            continue
        caption = (
            "p50 (solid), p90 (dashed), p99 (dotted) of the successful requests; bars: the median's 95% "
            "interval, p90's and p99's 99% bounds. Red: failed requests at that load."
        )
        caption += _too_few_words(too_few)
        if withheld:
            caption += f" {metric.title} withheld at " + "; ".join(withheld) + "."
        layout = _layout(axis_title, metric.title)
        log = _log_x(layout, sorted({level(c) for c in cases}))
        layout["annotations"] = _failures(cases, level, log)
        layout["margin"]["t"] = 40
        drawn = [c.label for c in cases if c.summary.get(name)]
        made.append(Panel(key, title, caption, {"data": traces, "layout": layout}, cases=drawn, metrics=(name,)))
    return made


def throughput_vs_latency(results: RunResult) -> Panel | None:
    """Aggregate output t/s against median total latency, each point its load level: where more
    load stops buying throughput and only buys latency."""
    latency, tps = METRICS["e2e_s"], METRICS["aggregate_tps"]
    traces, every = [], []
    for _axis, _title, level, cases in _axes(results):
        drawn = [c for c in cases if c.aggregate_tps is not None and c.median("e2e_s") is not None]
        every += drawn
        for shape, group in _series(drawn, level).items():
            loads = [_load(c) for c in group]
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers+text",
                    "name": shape,
                    "x": [(c.median("e2e_s") or 0.0) * latency.scale for c in group],
                    "y": [c.aggregate_tps for c in group],
                    "text": loads,
                    "textposition": "top left",
                    "marker": {"size": 8},
                    "customdata": [[c.label, c.n_ok, c.n_failed] for c in group],
                    "hovertemplate": "%{customdata[0]}<br>%{y:,.1f} t/s at %{x:,.0f} ms"
                    "<br>%{customdata[1]} ok, %{customdata[2]} failed<extra></extra>",
                }
            )
    failed = [c for c in every if c.n_failed]
    if failed:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "had failed requests",
                "x": [(c.median("e2e_s") or 0.0) * latency.scale for c in failed],
                "y": [c.aggregate_tps for c in failed],
                "marker": {"symbol": "x-open", "size": 16, "color": FAILED_COLOR, "line": {"width": 2}},
                "hoverinfo": "skip",
            }
        )
    if not traces:
        return None
    caption = (
        "Each case's aggregate output t/s against its median total latency; the label is its load "
        "(c: requests in flight, r: requests/s). A red cross: that case had failed requests."
    )
    if failed:
        caption += " Failed: " + "; ".join(f"{c.label} {c.n_failed} of {c.n_ok + c.n_failed}" for c in failed) + "."
    layout = _layout(f"{latency.title} p50", tps.title)
    return Panel(
        "throughput-vs-latency",
        "Throughput against latency",
        caption,
        {"data": traces, "layout": layout},
        cases=[c.label for c in every],
        metrics=("e2e_s", "aggregate_tps"),
    )


def panels(results: RunResult) -> list[Panel]:
    made = [p for name in LATENCIES for p in latency_vs_load(results, name)]
    tradeoff = throughput_vs_latency(results)
    return made + ([tradeoff] if tradeoff is not None else [])
