"""report.html: the run's report as one self-contained page a browser opens offline.

Made from the saved results only, like report.md, and from the same pieces (the results table,
the setup rows, the warnings, the cache ledger); its figures are plotly.js specs
(html_figures.py) drawn by plotly.js's "basic" bundle (scatter and bar, the only trace types the
pages draw), vendored in assets/ and inlined in the page, so nothing is fetched when it opens.
Tables sort by a click on their header (page.js).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchy.report import gpu_view, images_view, load_figures, markdown, server_view, table, workloads
from benchy.report.agents_html import agent_panels
from benchy.report.html_figures import Panel, panels
from benchy.results.types import CheckWarning, RunResult

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

FILE = "report.html"


PLOTLY_JS = "plotly-basic.min.js"  # its version, source and licence: assets/plotly-basic.LICENSE.txt


@lru_cache(maxsize=8)
def asset(name: str) -> str:
    return resources.files("benchy.report").joinpath(f"assets/{name}").read_text(encoding="utf-8")


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def script_json(value: object) -> str:
    """JSON safe inside a <script> element (no '</' to close it early)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")


def table_html(headers: list[str], rows: list[list[str]], table_id: str = "", cls: str = "sortable") -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    return f'<table{ident} class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def warning_id(index: int) -> str:
    return f"warning-{index}"


def qualifying(panel: Panel, warnings: list[CheckWarning]) -> list[int]:
    """The warnings (by index) that qualify a figure: of a case it draws or of the run, naming a
    metric it draws (as the table flags a cell) or of a code that concerns it. A warning about
    something else (the canary's answers, a --hardware the GPUs contradict) qualifies no figure."""
    drawn, metrics = set(panel.cases), set(panel.metrics)
    return [
        i
        for i, w in enumerate(warnings)
        if w.severity != "info"
        and (w.case is None or w.case in drawn)
        and (metrics.intersection(w.metrics) or w.code in panel.codes)
    ]


def panel_html(panel: Panel, warnings: list[CheckWarning]) -> str:
    marks = qualifying(panel, warnings) if panel.figure is not None else []
    badge = ""
    if marks:
        links = ", ".join(
            f'<a href="#{warning_id(i)}">{esc(warnings[i].code)}{" (" + esc(warnings[i].case) + ")" if warnings[i].case else ""}</a>'
            for i in marks
        )
        badge = f'<p class="qualified">⚠ qualified by: {links}</p>'
    if panel.figure is None:
        body = f'<p class="withheld">Not drawn. {esc(panel.why)}</p>'
    else:
        body = f'<div class="plot" id="fig-{esc(panel.key)}" data-figure="{esc(panel.key)}"></div>'
    caption = f'<p class="caption">{esc(panel.caption)}</p>' if panel.caption else ""
    return f'<section class="figure" id="panel-{esc(panel.key)}"><h3>{esc(panel.title)}</h3>{badge}{body}{caption}</section>'


def warnings_html(results: RunResult, shown: list[Panel]) -> str:
    warnings = results.warnings
    if not warnings:
        return "<p>No warnings: every case is clean.</p>"
    items = []
    for i, w in enumerate(warnings):
        figures = [p.title for p in shown if p.figure is not None and i in qualifying(p, warnings)]
        qualifies = f'<div class="qualifies">Qualifies: {esc(", ".join(figures))}</div>' if figures else ""
        items.append(
            f'<li id="{warning_id(i)}" class="warn {esc(w.severity)}"><b>{esc(w.severity)}: <code>{esc(w.code)}</code></b>'
            f"{' (' + esc(w.case) + ')' if w.case else ''}: {esc(w.message)}"
            f'<div class="hint">Hint: {esc(w.hint)}</div>{qualifies}</li>'
        )
    return '<ul class="warnings">' + "".join(items) + "</ul>"


def setup_html(results: RunResult) -> str:
    rows = markdown.setup_rows(results)
    body = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v.strip('`'))}</td></tr>" for k, v in rows)
    return f'<table class="setup">{body}</table>'


def results_html(results: RunResult) -> str:
    notes = table.Footnotes()
    headers, rows = table.rows(results, notes)
    out = table_html(headers, rows, "results")
    if notes.reasons:
        out += '<ol class="notes">' + "".join(f"<li>{esc(r)}</li>" for r in notes.reasons) + "</ol>"
    return out


@lru_cache(maxsize=1)
def _markdown_it() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")  # raw HTML in the text stays text


def markdown_html(lines: list[str]) -> str:
    """report.md's own sections (the same words and tables, made by the same code) as HTML; its
    tables sort like the page's others. Image lines are dropped: the page draws its own figures."""
    kept = [line for line in lines if not line.startswith("![")]
    rendered: str = _markdown_it().render("\n".join(kept))
    return rendered.replace("<table>", '<table class="sortable">')


def cache_html(results: RunResult) -> str:
    rows = workloads.cache_rows(results)
    if not rows:
        return ""
    headers = ["test", "implied hit rate", "reported hit rate", "TTFT gain", "finding"]
    return "<h2>Cache ledger</h2>" + table_html(headers, rows, "cache")


def page(title: str, body: str, figures: dict[str, dict[str, Any]], extra_js: str = "") -> str:
    """The whole document: styles, plotly.js, the figures' specs and the page's own script, inline.
    plotly.js is carried as text and run by page.js when the first figure is about to be seen: the
    text and tables need none of it. Its basic bundle (1.2 MB) is evaluated in a fifth of the time or less
    the full one (4.8 MB, maps, 3D and WebGL included) took, which had been most of the opening."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><title>{esc(title)}</title>'
        f"<style>{asset('page.css')}</style></head><body>{body}"
        f'<script id="figures" type="application/json">{script_json(figures)}</script>'
        f'<script id="plotly-js" type="text/plain">{asset(PLOTLY_JS)}</script>'
        f"<script>{asset('page.js')}</script>"
        + (f"<script>{extra_js}</script>" if extra_js else "")
        + "</body></html>\n"
    )


def render(results: RunResult, inner: Sequence[str] = ()) -> str:
    """The page; `inner`: reports in the folder's sub-folders (folder_reports), linked at the top."""
    # latency against load after the sweep's own, then an agent replay's (agents_html draws with html_figures' Panel)
    shown = panels(results) + load_figures.panels(results) + agent_panels(results)
    title = f"benchy report: {results.setup.model}"
    parts = [f"<header><h1>{esc(title)}</h1><p>{esc(markdown.overview_line(results))}</p>{inner_html(inner)}</header>"]
    if results.partial:
        parts.append(
            '<p class="partial"><b>Partial run</b>: interrupted or stopped early; only finished requests are shown.</p>'
        )
    parts += ["<h2>Results</h2>", results_html(results)]
    loaded = table.load_markdown(results)
    parts += [markdown_html(loaded.splitlines()) if loaded else "", cache_html(results)]
    parts += [markdown_html(images_view.lines(results) + workloads.section_lines(results))]
    parts += ["<h2>Warnings</h2>", warnings_html(results, shown)]
    parts += ["<h2>Figures</h2>", *(panel_html(p, results.warnings) for p in shown)]
    parts += [markdown_html(server_view.section_lines(results) + gpu_view.section_lines(results))]
    parts += [markdown_html(markdown.detail_lines(results))]
    parts += ["<h2>Setup</h2>", setup_html(results)]
    parts += ["<details><summary>How to read this report</summary>", markdown_html([markdown.glossary()]), "</details>"]
    figures = {p.key: p.figure for p in shown if p.figure is not None}
    return page(title, "<main>" + "".join(parts) + "</main>", figures)


def write(results: RunResult, directory: Path) -> Path:
    path = Path(directory) / FILE
    path.write_text(render(results, folder_reports(path.parent)), encoding="utf-8")
    return path


def folder_reports(directory: Path) -> list[str]:
    """The reports one folder down (`benchy demo`'s dataset/, --saturation's two phases), as
    links relative to this one: a reader of the folder's page would not find them otherwise."""
    return sorted(p.relative_to(directory).as_posix() for p in directory.glob(f"*/{FILE}"))


def inner_html(inner: Sequence[str]) -> str:
    if not inner:
        return ""
    links = ", ".join(f'<a href="{esc(link)}">{esc(link.rsplit("/", 1)[0])}</a>' for link in inner)
    return f'<p class="inner">Reports in this folder: {links}</p>'
