"""report.html of a prefix-cache probe (probe.json) and of a capacity search (capacity.json):
the same page as a run's (html.page: plotly.js inline, sortable tables), from the saved file only.
The tables are probe_report's and capacity's own Markdown tables, turned into HTML rows, so the
two reports can never disagree on a number."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchy.report.html import FILE, esc, page, table_html
from benchy.report.html_figures import Panel
from benchy.results.capacity import CapacityPoint, CapacityResult


@dataclass
class ProbeText:
    """The Markdown report's own words and tables (probe_report.py), passed in, not recomputed."""

    lengths_table: str = ""
    reasons: list[str] = field(default_factory=list)
    capacity_table: str = ""
    finding: str = ""


@dataclass
class CapacityText:
    """capacity.py's Markdown, table, Pareto front, the point that beats the answer, load labels."""

    markdown: str
    points_table: str
    front: list[CapacityPoint]
    better: CapacityPoint | None
    labels: dict[float, str]


def pipe_rows(markdown: str) -> tuple[list[str], list[list[str]]]:
    """A Markdown pipe table's header and rows (the separator line dropped)."""
    lines = [line.strip() for line in markdown.splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return (cells[0], cells[2:]) if len(cells) >= 2 else ([], [])


def _figure(panel: Panel) -> str:
    if panel.figure is None:
        return f'<section class="figure"><h3>{esc(panel.title)}</h3><p class="withheld">Not drawn. {esc(panel.why)}</p></section>'
    return (
        f'<section class="figure" id="panel-{esc(panel.key)}"><h3>{esc(panel.title)}</h3>'
        f'<div class="plot" id="fig-{esc(panel.key)}" data-figure="{esc(panel.key)}"></div>'
        f'<p class="caption">{esc(panel.caption)}</p></section>'
    )


def _page(title: str, parts: list[str], shown: list[Panel]) -> str:
    figures = {p.key: p.figure for p in shown if p.figure is not None}
    return page(title, "<main>" + "".join(parts) + "".join(_figure(p) for p in shown) + "</main>", figures)


# ------------------------------------------------------------------ probe-cache


def probe_ttfts(probe: dict[str, Any], text: ProbeText) -> Panel | None:
    """Every TTFT of the probe: per length, the first shared-prefix request, its repeats, the unique ones."""
    lengths = probe["lengths"]
    if not lengths:
        return None
    groups = (("first shared prefix", "#d62728"), ("shared prefix, repeats", "#1f77b4"), ("unique prefix", "#7f7f7f"))
    traces = []
    for g, (name, color) in enumerate(groups):
        xs, ys, hover = [], [], []
        for e in lengths:
            side = e["shared"] if g < 2 else e["unique"]
            values = side["ttft_s"][:1] if g == 0 else side["ttft_s"][1:] if g == 1 else side["ttft_s"]
            cached = (
                side["cached_tokens"][:1] if g == 0 else side["cached_tokens"][1:] if g == 1 else side["cached_tokens"]
            )
            for k, (v, c) in enumerate(zip(values, cached)):
                if v is None:
                    continue
                xs.append(f"{e['length']:,} tokens")
                ys.append(round(v * 1000, 2))
                hover.append(f"{name} #{k + 1}<br>cached tokens: {'not reported' if c is None else f'{c:,}'}")
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": name,
                "x": xs,
                "y": ys,
                "text": hover,
                "marker": {"color": color, "size": 9},
                "offsetgroup": str(g),
                "hovertemplate": "%{x}<br>%{text}<br>TTFT %{y:,.1f} ms<extra></extra>",
            }
        )
    layout = {
        "height": 400,
        "margin": {"l": 70, "r": 20, "t": 20, "b": 60},
        "hovermode": "closest",
        "scattermode": "group",
        "yaxis": {"type": "log", "title": {"text": "TTFT ms (log scale)"}},
        "xaxis": {"title": {"text": "prompt length"}},
        "legend": {"orientation": "h", "y": -0.2},
    }
    caption = (
        "The first shared-prefix request pays for prefill; its repeats may come from cache; unique prefixes "
        "never can. " + " ".join(text.reasons).replace("**", "").replace("- ", "")
    )
    return Panel("probe", "TTFT, shared vs unique prefix", caption, {"data": traces, "layout": layout})


def probe_capacity(cap: dict[str, Any], text: ProbeText) -> Panel:
    points = [p for p in cap["points"] if p["hit_fraction"] is not None and p["working_set_tokens"]]
    trace = {
        "type": "scatter",
        "mode": "lines+markers",
        "name": "re-uses that hit",
        "x": [p["working_set_tokens"] for p in points],
        "y": [100 * p["hit_fraction"] for p in points],
        "customdata": [[p["hits"], p["judged"], p["prefixes"]] for p in points],
        "hovertemplate": "%{x:,} tokens (%{customdata[2]} prefixes)<br>%{customdata[0]} of %{customdata[1]} "
        "re-uses hit: %{y:.0f}%<extra></extra>",
    }
    shapes, annotations = [], []
    stated = (cap.get("stated") or {}).get("tokens")
    if stated:
        shapes.append(
            {
                "type": "line",
                "x0": stated,
                "x1": stated,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"color": "#d62728", "dash": "dash"},
            }
        )
        annotations.append(
            {
                "x": math.log10(stated),  # plotly places annotations on a log axis by the exponent
                "y": 0.12,
                "yref": "paper",
                "text": "the server's stated KV cache ",
                "showarrow": False,
                "yanchor": "bottom",
                "xanchor": "right",
            }
        )
    if cap.get("cliff_tokens") is not None and cap.get("uncertainty_tokens") is not None:
        low, high = cap["cliff_tokens"] - cap["uncertainty_tokens"], cap["cliff_tokens"] + cap["uncertainty_tokens"]
        shapes.append(
            {
                "type": "rect",
                "x0": max(low, 1),
                "x1": high,
                "y0": 0,
                "y1": 1,
                "yref": "paper",
                "line": {"width": 0},
                "fillcolor": "#ff7f0e",
                "opacity": 0.2,
            }
        )
    annotations.append(
        {
            "x": 0.5,
            "y": 0.5,
            "xref": "paper",
            "yref": "paper",
            "text": esc(text.finding),
            "showarrow": False,
            "font": {"size": 14},
        }
    )
    layout = {
        "height": 380,
        "margin": {"l": 70, "r": 20, "t": 20, "b": 60},
        "shapes": shapes,
        "annotations": annotations,
        "xaxis": {
            "type": "log",
            "title": {"text": "working set, tokens"},
            "tickvals": [p["working_set_tokens"] for p in points],
            "ticktext": [f"{p['working_set_tokens']:,}" for p in points],
        },
        "yaxis": {"range": [-5, 105], "title": {"text": "re-uses served from cache, %"}},
    }
    return Panel(
        "capacity", "Prefix-cache capacity for reuse", cap.get("reason") or "", {"data": [trace], "layout": layout}
    )


def probe_page(probe: dict[str, Any], text: ProbeText) -> str:
    setup = probe["setup"]
    title = f"benchy prefix-cache probe: {setup.get('model')}"
    rows = [
        (k, setup.get(k)) for k in ("base_url", "server_version", "context_length", "n", "output_tokens", "started_utc")
    ]
    parts = [f"<header><h1>{esc(title)}</h1></header>", '<table class="setup">']
    parts += [f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows] + ["</table>"]
    shown = []
    if probe["lengths"]:
        headers, body = pipe_rows(text.lengths_table)
        parts += ["<h2>Lengths</h2>", table_html(headers, body, "lengths")]
        parts += ["<ul>"] + [f"<li>{esc(line[2:].replace('**', ''))}</li>" for line in text.reasons] + ["</ul>"]
        shown.append(probe_ttfts(probe, text))
    cap = probe.get("capacity")
    if cap:
        headers, body = pipe_rows(text.capacity_table)
        parts += [
            "<h2>Cache capacity for reuse</h2>",
            f"<p><b>{esc(text.finding)}</b>: {esc(cap.get('reason'))}</p>",
        ]
        parts.append(table_html(headers, body, "capacity-points"))
        shown.append(probe_capacity(cap, text))
    parts.append("<h2>Figures</h2>")
    return _page(title, parts, [p for p in shown if p is not None])


def write_probe(probe: dict[str, Any], directory: Path, text: ProbeText) -> Path:
    path = Path(directory) / FILE
    path.write_text(probe_page(probe, text), encoding="utf-8")
    return path


# ------------------------------------------------------------------ capacity search


def pareto(result: CapacityResult, text: CapacityText) -> Panel | None:
    drawn = [p for p in result.points if p.per_user_tps is not None and p.throughput_tps is not None]
    if not drawn:
        return Panel(
            "pareto", "Total vs per-user throughput", "", why="No point has both a total and a per-user throughput."
        )
    traces = []
    for verdict, symbol, color in (("pass", "circle", "#2ca02c"), ("fail", "x", "#d62728")):
        pts = [p for p in drawn if p.verdict == verdict]
        if pts:
            traces.append(
                {
                    "type": "scatter",
                    "mode": "markers+text",
                    "name": verdict,
                    "x": [p.per_user_tps for p in pts],
                    "y": [p.throughput_tps for p in pts],
                    "text": [text.labels[p.load] for p in pts],
                    "textposition": "top right",
                    "marker": {"symbol": symbol, "color": color, "size": 10},
                    "customdata": [
                        [p.good, p.requests, "n/a" if p.goodput is None else f"{p.goodput:.0%}"] for p in pts
                    ],
                    "hovertemplate": "%{text}: %{customdata[2]} goodput (%{customdata[0]} of %{customdata[1]})"
                    "<br>%{y:,.0f} tok/s total, %{x:,.1f} per user<extra></extra>",
                }
            )
    front = text.front
    if len(front) >= 2:  # one point is no front: the legend lists only what is drawn
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "Pareto front",
                "x": [p.per_user_tps for p in front],
                "y": [p.throughput_tps for p in front],
                "line": {"dash": "dash", "color": "grey"},
                "hoverinfo": "skip",
            }
        )
    caption = "Each point is one load; the dashed line joins the points no other beats on both axes."
    best = result.point(result.answer.capacity) if result.answer else None
    if best is not None and best in drawn:
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"capacity: {text.labels[best.load]}",
                "x": [best.per_user_tps],
                "y": [best.throughput_tps],
                "marker": {"symbol": "star", "size": 20, "color": "gold", "line": {"color": "black", "width": 1}},
                "hoverinfo": "skip",
            }
        )
        better = text.better
        caption += " The star is the capacity, the highest load that passes the SLO." + (
            f" {text.labels[better.load]} beats it on both axes and also passes: the search answers the highest "
            "passing load, not the best trade-off."
            if better
            else ""
        )
    layout = {
        "height": 440,
        "margin": {"l": 70, "r": 20, "t": 20, "b": 60},
        "hovermode": "closest",
        "xaxis": {"title": {"text": "per-user throughput, tokens/s"}, "rangemode": "tozero"},
        "yaxis": {"title": {"text": "total throughput, output tokens/s"}, "rangemode": "tozero"},
    }
    return Panel("pareto", "Total vs per-user throughput", caption, {"data": traces, "layout": layout})


def capacity_page(result: CapacityResult, text: CapacityText) -> str:
    title = f"benchy capacity: {result.setup.case or ''}"
    md = text.markdown
    lead = [line for line in md.splitlines()[2:] if line and not line.startswith(("|", "#", "No point"))]
    headers, body = pipe_rows(text.points_table)
    parts = [f"<header><h1>{esc(title)}</h1></header>"]
    parts += [f"<p>{esc(line.replace('**', ''))}</p>" for line in lead]
    parts += ["<h2>Every point</h2>", table_html(headers, body, "points"), "<h2>Figures</h2>"]
    panel = pareto(result, text)
    return _page(title, parts, [panel] if panel else [])


def write_capacity(result: CapacityResult, directory: Path, text: CapacityText) -> Path:
    path = Path(directory) / FILE
    path.write_text(capacity_page(result, text), encoding="utf-8")
    return path
