"""The interactive figures of report.html, as plotly.js figure specs (plain dicts) made from saved
results only. Each function returns a `Panel`: a figure, or, where the run holds nothing it could
honestly draw (a metric withheld in every case), the words that say why instead.

Specs are built as dicts rather than through plotly.graph_objects: a 20,000-request scatter
validated object by object costs seconds, and the page needs nothing the dict does not say.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from benchy.measure.registry import METRICS, Metric
from benchy.report import pooled_view, server_view, shown, workloads
from benchy.report.table import case_name, case_warnings
from benchy.results.types import CaseResult, Dot, RunResult
from benchy.results.verdicts.codes import Code

MAX_DOTS = 6_000  # the scatter's dots over all cases (SVG): more cost the page seconds to open
FAILED_COLOR = "#d62728"
# The codes that concern a figure of no metric of their own: the cache ledgers, the GPU's draw.
CACHE_CODES = tuple(c.value for c in Code if "cache" in c.value and c is not Code.CACHE_RESET_UNAVAILABLE)
GPU_CODES = (Code.GPU_SAMPLES_FAILED.value, Code.GPU_IDLE_DOMINATES.value)


@dataclass
class Panel:
    """One figure of the page: `figure` is None when `why` says why nothing is drawn."""

    key: str
    title: str
    caption: str
    figure: dict[str, Any] | None = None
    why: str = ""
    cases: list[str] = field(default_factory=list)  # the cases it draws: the warnings it carries
    # what it draws, by metric name: a warning qualifies it when it names one of them (as the table
    # flags a cell), or when its code is one of `codes` (a figure of no metric: the cache ledger)
    metrics: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()


def _layout(x_title: str, y_title: str, **more: object) -> dict[str, Any]:
    return {
        "margin": {"l": 70, "r": 20, "t": 30, "b": 60},
        "height": 380,
        "xaxis": {"title": {"text": x_title}, "automargin": True},
        "yaxis": {"title": {"text": y_title}, "automargin": True, "rangemode": "tozero"},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "closest",
        **more,
    }


def _display(metric: Metric, value: float | None) -> float | None:
    return None if value is None else value * metric.scale


def _sweep(results: RunResult) -> list[CaseResult]:
    return [c for c in workloads.sweep_results(results).cases if c.n_ok]


def _series_key(case: CaseResult) -> str:
    """Every case parameter but the prompt length: the cases one line joins."""
    load = f"c{case.concurrency}" if case.rate is None else f"r{case.rate:g}"
    depth = f" @ d{case.depth}" if case.depth else ""
    return f"{pooled_view.output_text(case)} {load}{depth}".lstrip() + (f" [{case.endpoint}]" if case.endpoint else "")


def metric_vs_prompt(results: RunResult, name: str) -> Panel | None:
    """A metric's median against prompt length, one line per output length and load; error bars
    ± one standard deviation, cut at zero (a rate or a time is never negative)."""
    metric = METRICS[name]
    cases = _sweep(results)
    if len({c.pp for c in cases}) < 2:
        return None  # one prompt length is no curve: the table has its numbers
    title = f"{metric.title} vs prompt length"
    key = f"{name}-vs-prompt"
    flags = shown.flags_by_case(results)
    seen = {c.label: shown.shown(c, metric, flags.get(c.label, ())) for c in cases}
    drawn = [c for c in cases if seen[c.label].drawn]
    if not drawn:
        reasons = sorted({_why(seen[c.label]) for c in cases})
        return Panel(key, title, "", why=f"{metric.title} is withheld in every case: " + "; ".join(reasons))
    series: dict[str, list[CaseResult]] = {}
    for case in sorted(drawn, key=lambda c: c.pp):
        series.setdefault(_series_key(case), []).append(case)
    traces = [_metric_trace(metric, label, [seen[c.label] for c in group], group) for label, group in series.items()]
    left = [c for c in cases if not seen[c.label].drawn]
    caption = "Medians; error bars ± one standard deviation (cut at zero). Click a legend entry to hide its line."
    caption += _marks_sentence([seen[c.label] for c in drawn])
    if left:
        caption += " Not drawn: " + "; ".join(f"{c.label} ({_why(seen[c.label])})" for c in left) + "."
    layout = _layout("prompt tokens", metric.title)
    lengths = sorted({c.pp for c in drawn})
    if len(lengths) > 2 and lengths[-1] >= 8 * lengths[0]:  # ticks at the lengths run, not log's 2…9
        layout["xaxis"].update(type="log", tickvals=lengths, ticktext=[f"{v:,}" for v in lengths])
    return Panel(
        key, title, caption, {"data": traces, "layout": layout}, cases=[c.label for c in drawn], metrics=(name,)
    )


def _why(seen: shown.Shown) -> str:
    return seen.why.message if seen.why else "not measured"


def _mark(seen: shown.Shown) -> str:
    """A point's marks: ⚠ where a warning qualifies it, ✗ where some of its requests failed."""
    marks = [shown.FLAG] if seen.qualified else []
    if seen.failed:
        marks.append(f"{shown.FAILED_MARK} {seen.failed} failed")
    return " ".join(marks)


def _marks_sentence(points: list[shown.Shown]) -> str:
    words = []
    if any(p.qualified for p in points):
        words.append(f"{shown.FLAG}: a warning qualifies the point (see Warnings)")
    if any(p.failed for p in points):
        words.append(f"{shown.FAILED_MARK}: some of the case's requests failed; the point is the rest")
    return (" " + "; ".join(words) + ".") if words else ""


def _metric_trace(metric: Metric, label: str, points: list[shown.Shown], group: list[CaseResult]) -> dict[str, object]:
    """One line of metric_vs_prompt: the drawn medians, a marked symbol and text on the points a
    warning qualifies or whose requests partly failed."""
    summaries = [p.summary for p in points if p.summary is not None]
    y = [_display(metric, s.median) for s in summaries]
    std = [_display(metric, s.std or 0.0) for s in summaries]
    marks = [_mark(p) for p in points]
    return {
        "type": "scatter",
        "mode": "lines+markers+text" if any(marks) else "lines+markers",
        "name": label,
        "x": [c.pp for c in group],
        "y": y,
        "text": marks,
        "textposition": "top center",
        "marker": {
            "symbol": ["diamond-open" if m else "circle" for m in marks],
            "size": [11 if m else 7 for m in marks],
        },
        "error_y": {
            "type": "data",
            "array": std,
            "arrayminus": [min(s or 0.0, v or 0.0) for s, v in zip(std, y)],
            "visible": True,
        },
        "customdata": [[c.label, s.n, e, m] for c, s, e, m in zip(group, summaries, std, marks)],
        "hovertemplate": "%{customdata[0]}<br>"
        + metric.title
        + " %{y:,.1f} ± %{customdata[2]:,.1f}<br>n = %{customdata[1]} %{customdata[3]}<extra></extra>",
    }


def concurrency_scaling(results: RunResult) -> Panel | None:
    """Aggregate output t/s against concurrency, one line per case shape; no 'perfect scaling'
    line (it dwarfs the data), the caption gives each line's scaling instead."""
    metric = METRICS["aggregate_tps"]
    cases = [c for c in _sweep(results) if c.rate is None and c.concurrency and c.aggregate_tps is not None]
    levels = {c.concurrency for c in cases}
    if len(levels) < 2:
        return None
    series: dict[str, list[CaseResult]] = {}
    for case in sorted(cases, key=lambda c: c.concurrency or 0):
        series.setdefault(case_name(case).split(" c")[0], []).append(case)
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": label,
            "x": [c.concurrency for c in group],
            "y": [c.aggregate_tps for c in group],
            "customdata": [[c.label, c.n_ok] for c in group],
            "hovertemplate": "%{customdata[0]}<br>"
            + metric.title
            + " %{y:,.1f}<br>n = %{customdata[1]}<extra></extra>",
        }
        for label, group in series.items()
    ]
    caption = "Output tokens per second over all streams of a case, against requests in flight."
    layout = _layout("concurrency (requests in flight)", metric.title)
    layout["xaxis"]["type"] = "log"
    layout["xaxis"]["dtick"] = 0.30102999566  # log10(2): ticks at 1, 2, 4, 8 …
    return Panel(
        "concurrency",
        "Throughput vs concurrency",
        caption,
        {"data": traces, "layout": layout},
        cases=[c.label for c in cases],
        metrics=("aggregate_tps",),
    )


def _dots(case: CaseResult) -> list[Dot]:
    """The measured requests as the scatter draws them: from the pass that made the case's
    scan (a long case's rows are read back from disk once, whatever else reads them)."""
    return case.dots()


def thin(dots: list[Dot], keep: int) -> list[Dot]:
    """At most `keep` of a case's dots (all of them when they fit): every failed request, the
    slowest fifth of `keep` (the tail a reader looks for), then every n-th of the rest in send
    order, so the shape over time stays; returned in send order."""
    if len(dots) <= keep:
        return dots
    failed = [d for d in dots if not d[2]]
    ok = sorted((d for d in dots if d[2]), key=lambda d: d[4] or 0.0, reverse=True)
    tail = ok[: max(1, keep // 5)]
    rest = ok[len(tail) :]
    room = max(0, keep - len(failed) - len(tail))
    spread = sorted(rest, key=lambda d: d[1])[:: -(-len(rest) // room)] if room and rest else []
    return sorted(failed + tail + spread, key=lambda d: d[1])


def requests_scatter(results: RunResult) -> Panel | None:
    """Every measured request as a dot: when it was sent against its total latency; failed
    requests in red at the time they ended. Hover: its id, case, status and the case's warnings."""
    warned = case_warnings(results)
    every = {case.label: _dots(case) for case in results.cases}
    total = sum(len(ds) for ds in every.values())
    dots = {label: thin(ds, max(1, MAX_DOTS * len(ds) // total)) for label, ds in every.items()} if total else every
    shown = sum(len(ds) for ds in dots.values())
    starts = [d[1] for ds in dots.values() for d in ds if d[1]]
    if not starts:
        return None
    t0 = min(starts)
    traces = []
    for ok in (True, False):
        for case in results.cases:
            codes = ", ".join(w.code for w in warned.get(case.label, [])) or "none"
            xs, ys, ids = [], [], []
            for request_id, sent, good, error_kind, latency in dots[case.label]:
                if good != ok or latency is None:
                    continue
                xs.append(round(sent - t0, 3))
                ys.append(round(latency * 1000, 1))
                ids.append(request_id if ok else f"{request_id}<br>failed: {error_kind or 'error'}")
            if not xs:
                continue
            marker = {"size": 7, "opacity": 0.75} if ok else {"size": 8, "symbol": "x", "color": FAILED_COLOR}
            # what every dot of the trace shares (its case, status, warnings) is said once, in the
            # template: a 20,000-request page carries only each dot's id and numbers
            shared = f"{html.escape(case.label)}<br>{'ok' if ok else ''}<br>warnings: {html.escape(codes)}"
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers",
                    "name": case.label if ok else f"{case.label} failed",
                    "legendgroup": case.label,
                    "x": xs,
                    "y": ys,
                    "text": ids,
                    "marker": marker,
                    "hovertemplate": "%{text}<br>"
                    + shared.replace("<br><br>", "<br>")
                    + "<br>%{y:,.1f} ms at %{x:.2f} s<extra></extra>",
                }
            )
    if not traces:
        return None
    caption = (
        "Each measured request: when it was sent (seconds from the first) and its total latency; "
        "failed requests as red crosses at the time they ended. Hover a dot for its request id, "
        "status and its case's warnings (requests.jsonl holds the rest)."
    )
    if shown < total:
        caption += (
            f" {shown:,} of {total:,} requests drawn, to keep the page quick to open: every failed one, "
            "each case's slowest, and an even sample of the rest over time."
        )
    layout = _layout("seconds since the first request", "total latency ms")
    return Panel(
        "requests",
        "Every request",
        caption,
        {"data": traces, "layout": layout},
        cases=[c.label for c in results.cases],
        metrics=("e2e_s",),
    )


def server_split(results: RunResult) -> Panel | None:
    """Client against server figures per case, only the pairs where both sides were measured;
    the caption names what one side lacks."""
    rows = [(c.label, server_view.case_row(results, c)) for c in results.cases if c.n_ok]
    pairs = (
        ("TTFT ms", "client_ttft_s", "server_ttft_s", 1000.0),
        ("decode t/s", "client_decode_tps", "server_decode_tps", 1.0),
        ("prefill t/s", "client_prefill_tps", "server_prefill_tps", 1.0),
    )
    shown = [(t, c, s, k) for t, c, s, k in pairs if any(r[c] is not None and r[s] is not None for _, r in rows)]
    if not shown:
        return None
    traces = []
    axes: dict[str, Any] = {}
    for i, (title, client, server, scale) in enumerate(shown):
        axis = "" if i == 0 else str(i + 1)
        both = [(label, r) for label, r in rows if r[client] is not None and r[server] is not None]
        for side, key, color in (("client", client, "#1f77b4"), ("server", server, "#ff7f0e")):
            traces.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": side,
                    "legendgroup": side,
                    "showlegend": i == 0,
                    "marker": {"color": color},
                    "y": [label for label, _ in both],
                    "x": [r[key] * scale for _, r in both],
                    "xaxis": f"x{axis}",
                    "yaxis": f"y{axis}",
                    "hovertemplate": f"%{{y}}<br>{side} {title} %{{x:,.1f}}<extra></extra>",
                }
            )
        axes[f"xaxis{axis}"] = {
            "title": {"text": title},
            "domain": [i / len(shown) + 0.02, (i + 1) / len(shown) - 0.02],
            "anchor": f"y{axis}",
            "rangemode": "tozero",
        }
        axes[f"yaxis{axis}"] = {
            "anchor": f"x{axis}",
            "automargin": True,
            "showticklabels": i == 0,
            "matches": "y" if i else None,
        }
    missing = [f"{t} (no server figure)" for t, c, s, _ in pairs if (t, c, s) not in [x[:3] for x in shown]]
    caption = "The same figure as the client measured it and as the server reported it, per case."
    if missing:
        caption += " Not drawn, one side missing: " + ", ".join(missing) + "."
    layout = {
        "barmode": "group",
        "height": 140 + 40 * len(rows),
        "margin": {"l": 20 + 7 * max(len(label) for label, _ in rows), "r": 20, "t": 40, "b": 50},
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        **axes,
    }
    drawn = tuple(client.removeprefix("client_") for _, client, _, _ in shown)
    return Panel(
        "server",
        "Client vs server",
        caption,
        {"data": traces, "layout": layout},
        cases=[label for label, _ in rows],
        metrics=drawn + tuple(f"server_{name}" for name in drawn),
    )


def cache_ledger(results: RunResult) -> Panel | None:
    """Workload cases: the prefix-cache hit rate their prompts imply against the one reported."""
    cases = [c for c in results.cases if c.workload is not None and c.kind != "sweep"]
    if not cases:
        return None
    traces = []
    for name, attr in (
        ("expected (implied by the prompts)", "expected_hit_rate"),
        ("reported by the server", "reported_hit_rate"),
    ):
        values = [getattr(c.workload.reuse, attr) for c in cases]  # type: ignore[union-attr]
        traces.append(
            {
                "type": "bar",
                "name": name,
                "x": [c.label for c in cases],
                "y": [None if v is None else v * 100 for v in values],
                "hovertemplate": "%{x}<br>" + name + " %{y:.1f}%<extra></extra>",
            }
        )
    layout = _layout("case", "prefix-cache hit rate %", barmode="group")
    layout["yaxis"]["range"] = [0, 100]
    caption = "Cache ledger: the share of prompt tokens a cache could serve, and the share the server said it did."
    return Panel(
        "cache",
        "Cache: expected vs reported",
        caption,
        {"data": traces, "layout": layout},
        cases=[c.label for c in cases],
        codes=CACHE_CODES,
    )


def gpu_power(results: RunResult) -> Panel | None:
    """The GPUs' draw over the run, one line per case window."""
    cases = [c for c in results.cases if c.gpu and c.gpu.series]
    if not cases:
        return None
    traces = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": c.label,
            "x": [p[0] for p in c.gpu.series],  # type: ignore[union-attr]
            "y": [p[1] for p in c.gpu.series],  # type: ignore[union-attr]
            "hovertemplate": c.label + "<br>%{y:,.0f} W at %{x:.1f} s<extra></extra>",
        }
        for c in cases
    ]
    layout = _layout("seconds since the first GPU sample", "W, all GPUs")
    caption = "The GPUs' total draw during each case's measured requests."
    gpu = results.setup.gpu
    idle = gpu.baseline.power_w if gpu and gpu.baseline else None
    if idle is not None:
        layout["shapes"] = [
            {
                "type": "line",
                "xref": "paper",
                "x0": 0,
                "x1": 1,
                "y0": idle,
                "y1": idle,
                "line": {"dash": "dash", "color": "grey"},
            }
        ]
        caption += f" Dashed: {idle:,.0f} W, the draw before the run with nothing sent."
    return Panel(
        "gpu",
        "GPU power",
        caption,
        {"data": traces, "layout": layout},
        cases=[c.label for c in cases],
        metrics=("gpu_power_w",),
        codes=GPU_CODES,
    )


def gpu_energy(results: RunResult) -> Panel | None:
    """Joules per output token per case; a case without the figure is named with its reason."""
    cases = [c for c in results.cases if c.gpu]
    drawn = [c for c in cases if c.gpu and c.gpu.joules_per_token is not None]
    if not cases:
        return None
    if not drawn:
        reasons = sorted({(c.gpu.unavailable.get("joules_per_token") or "not measured") for c in cases if c.gpu})
        return Panel("energy", "GPU energy per token", "", why="No case has J/token: " + "; ".join(reasons))
    trace = {
        "type": "bar",
        "name": "J/token",
        "x": [c.label for c in drawn],
        "y": [c.gpu.joules_per_token for c in drawn],  # type: ignore[union-attr]
        "customdata": [[c.gpu.power_w, c.gpu.output_tokens] for c in drawn],  # type: ignore[union-attr]
        "hovertemplate": "%{x}<br>%{y:.3f} J/token<br>%{customdata[0]:,.0f} W, %{customdata[1]:,} tokens<extra></extra>",
    }
    caption = "The GPUs' energy over a case's measured requests, divided by the output tokens they made."
    left = [c.label for c in cases if c not in drawn]
    if left:
        caption += " No figure for: " + ", ".join(left) + "."
    return Panel(
        "energy",
        "GPU energy per token",
        caption,
        {"data": [trace], "layout": _layout("case", "J per output token")},
        cases=[c.label for c in drawn],
        metrics=("gpu_joules_per_token",),
        codes=GPU_CODES,
    )


def panels(results: RunResult) -> list[Panel]:
    made = [
        metric_vs_prompt(results, "e2e_tps"),
        metric_vs_prompt(results, "ttft_s"),
        metric_vs_prompt(results, "decode_tps"),
        concurrency_scaling(results),
        requests_scatter(results),
        server_split(results),
        cache_ledger(results),
        gpu_power(results),
        gpu_energy(results),
    ]
    return [p for p in made if p is not None]
