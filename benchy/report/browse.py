"""`benchy browse DIR…`: one static page over many saved runs, from their results.json only.

A row per run (when, server and engine, model, hardware, cases, headline figures, warnings) in a
table that sorts and filters; tick two or more runs and the page sets each against the first with
`benchy compare`'s own statistics (per-case medians, the change's 95% CI, the adjusted p-value and
verdict, the setup differences that may explain it). The comparisons are worked out here, for
every pair of runs that share a case, so the page needs no server: it opens as a file, or through
`python -m http.server` (`--serve`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import permutations
from pathlib import Path
from typing import Any

from benchy.measure.registry import METRICS
from benchy.report import browse_others, compare, html, shown
from benchy.results import files as results_files
from benchy.results.types import CaseResult, RunResult

SKIP_DIRS = {".git", ".venv", "node_modules", "__pycache__", "figures"}
MAX_PAIRED_RUNS = 60  # beyond this, pairs grow past what one page should carry (60 runs: 3,540)


@dataclass
class Run:
    ident: str
    path: Path  # results.json
    results: RunResult


def find_runs(roots: list[Path]) -> tuple[list[Path], list[str]]:
    """Every results.json under the roots (a root may be a run folder or the file itself), and
    one line for each that benchy could not read, so a stray file never stops the page."""
    found: list[Path] = []
    for root in roots:
        if root.is_file():
            found.append(root)
            continue
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            if "results.json" in files:
                found.append(Path(folder) / "results.json")
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return unique, []


def run_names(paths: list[Path]) -> list[str]:
    """Each run's folder by its shortest path tail no other run shares: 'demo', or
    'reports/dgx-spark-sim' beside 'runs/dgx-spark-sim'."""
    folders = [p.parent.parts if p.name == "results.json" else (*p.parent.parts, p.stem) for p in paths]
    depth = {i: 1 for i in range(len(paths))}
    while True:
        names = ["/".join(f[-depth[i] :]) for i, f in enumerate(folders)]
        clashes = [i for i, n in enumerate(names) if names.count(n) > 1 and depth[i] < len(folders[i])]
        if not clashes:
            return names
        for i in clashes:
            depth[i] += 1


def load_runs(paths: list[Path]) -> tuple[list[Run], list[str]]:
    runs, skipped = [], []
    names = run_names(paths)
    for path, name in zip(paths, names):
        try:
            runs.append(Run(name, path, results_files.read(path)))
        except results_files.ResultsError as exc:
            skipped.append(str(exc))
    runs.sort(key=lambda r: r.results.setup.started_utc or "")
    return runs, skipped


def _best(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None]
    return max(real) if real else None


def _drawn(case: CaseResult, name: str) -> float | None:
    """The case's median as the table shows it (shown.py): none where the table withholds it."""
    seen = shown.shown(case, METRICS[name])
    return seen.summary.median if seen.summary else None


def _fmt(value: float | None, scale: float = 1.0, decimals: int = 1) -> str:
    return "" if value is None else f"{value * scale:,.{decimals}f}"


def engine_text(results: RunResult) -> str:
    ident = results.setup.server
    engine = " ".join(p for p in (ident.engine, ident.version) if p) if ident else ""
    return engine or results.setup.server_version or "not reported"


def hardware_text(results: RunResult) -> str:
    """The server's hardware as the run knew it (--hardware, the GPUs read); never benchy's own
    host name, which names the client's machine, not the server's (issue 54)."""
    setup = results.setup
    gpus = sorted({name for name in (setup.gpu.gpus.values() if setup.gpu else []) if name})
    return ", ".join(p for p in (setup.hardware, " + ".join(gpus)) if p) or "not recorded"


def endpoint_text(results: RunResult) -> str:
    """The API each run measured (chat, completions, responses, messages): runs of different
    endpoints share no case, and the page says why."""
    return ", ".join(dict.fromkeys(c.endpoint for c in results.cases if c.endpoint)) or "not recorded"


def run_row(run: Run, site: Path) -> dict[str, Any]:
    """The index's figures of one run; the lightest-load TTFT is the lowest median of any case."""
    r = run.results
    cases = r.cases
    report = run.path.parent / html.FILE
    if not report.is_file():
        report = run.path.parent / "report.md"
    warnings = sorted({w.code for w in r.warnings if w.severity != "info"})
    return {
        "id": run.ident,
        "when": (r.setup.started_utc or "")[:19].replace("T", " "),
        "server": engine_text(r),
        "model": r.setup.model or "",
        "endpoint": endpoint_text(r),
        "hardware": hardware_text(r),
        "cases": f"{len(cases)}",
        "e2e": _fmt(_best([_drawn(c, "e2e_tps") for c in cases])),
        "ttft": _fmt(min((v for c in cases if (v := _drawn(c, "ttft_s")) is not None), default=None), 1000.0),
        "aggregate": _fmt(_best([c.aggregate_tps for c in cases])),
        "failed": str(sum(c.n_failed for c in cases)),
        "warnings": ", ".join(warnings) + (" (partial run)" if r.partial else ""),
        "report": os.path.relpath(report, site) if report.is_file() else "",
    }


HEADERS = (
    ("", ""),
    ("run", "id"),
    ("when (UTC)", "when"),
    ("server", "server"),
    ("model", "model"),
    ("endpoint", "endpoint"),
    ("hardware", "hardware"),
    ("cases", "cases"),
    ("best e2e t/s", "e2e"),
    ("lowest TTFT ms", "ttft"),
    ("peak aggregate t/s", "aggregate"),
    ("failed", "failed"),
    ("warnings", "warnings"),
)


def index_table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.esc(title)}</th>" for title, _ in HEADERS)
    body = []
    for i, row in enumerate(rows):
        cells = [
            f'<td><input type="checkbox" class="pick" value="{i}" aria-label="compare {html.esc(row["id"])}"></td>'
        ]
        for _, key in HEADERS[1:]:
            text = html.esc(row[key])
            if key == "id" and row["report"]:
                text = f'<a href="{html.esc(row["report"])}">{text}</a>'
            cells.append(f"<td>{text}</td>")
        body.append(f'<tr data-run="{i}">' + "".join(cells) + "</tr>")
    return f'<table id="runs" class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def change_dict(change: compare.MetricChange) -> dict[str, Any]:
    scale = METRICS[change.metric].scale

    def shown(value: float | None) -> float | None:
        return None if value is None else round(value * scale, 4)

    ci = [shown(v) for v in change.ci95] if change.ci95 else None
    return {
        "case": change.case,
        "metric": change.title,
        "a": shown(change.a_median),
        "b": shown(change.b_median),
        "n": [change.n_a, change.n_b],
        "pct": change.change_pct,
        "ci": ci,
        "ci_pct": [100 * v / change.a_median for v in change.ci95] if change.ci95 and change.a_median else None,
        "p": change.p_adjusted,
        "verdict": change.verdict,
        "reason": change.reason,
        "caveats": change.caveats,
    }


def comparisons(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """'i,j' → run j against run i (i the baseline), for every ordered pair that shares a case."""
    out: dict[str, dict[str, Any]] = {}
    if len(runs) > MAX_PAIRED_RUNS:
        return out
    for i, j in permutations(range(len(runs)), 2):
        a, b = runs[i], runs[j]
        try:
            comp = compare.compare(a.results, b.results, a.ident, b.ident, force=True)
        except compare.CompareError as exc:
            out[f"{i},{j}"] = {"error": str(exc)}
            continue
        out[f"{i},{j}"] = {
            "a": a.ident,
            "b": b.ident,
            "changes": [change_dict(c) for c in comp.changes],
            "setup": [list(d) for d in comp.setup_differences],
            "warnings": comp.warnings,
            "only_a": comp.only_in_a,
            "only_b": comp.only_in_b,
        }
    return out


def render(runs: list[Run], site: Path, others: str = "") -> str:
    rows = [run_row(run, site) for run in runs]
    pairs = comparisons(runs)
    note = (
        ""
        if len(runs) <= MAX_PAIRED_RUNS
        else f"<p>{len(runs)} runs: more than {MAX_PAIRED_RUNS}, so no comparisons were worked out; "
        "browse a smaller set of folders to compare.</p>"
    )
    body = (
        f'<main class="wide"><header><h1>benchy runs</h1><p>{len(runs)} runs, newest last. Click a header to sort; '
        "type to filter; tick two or more runs to set each against the first ticked.</p></header>"
        '<p><input type="search" data-filter="runs" id="filter" placeholder="filter runs: model, server, warning…"></p>'
        f"{note}{index_table(rows)}"
        '<section id="compare"><p class="caption">Tick two runs to compare them.</p></section>'
        f"{others}"
        f'<script id="browse" type="application/json">{html.script_json({"runs": rows, "pairs": pairs})}</script>'
        "</main>"
    )
    return html.page("benchy runs", body, {}, extra_js=html.asset("browse.js"))


def write(roots: list[Path], site: Path) -> tuple[Path, list[Run], list[str]]:
    """index.html in `site` over every run under `roots`; returns it, the runs and the skipped."""
    paths, _ = find_runs(roots)
    paths = [p for p in paths if not browse_others.inside_capacity(p.parent)]  # a search's rounds: its row
    runs, skipped = load_runs(paths)
    site.mkdir(parents=True, exist_ok=True)
    others, unread = browse_others.section(roots, site.resolve())
    index = site / "index.html"
    index.write_text(render(runs, site.resolve(), others), encoding="utf-8")
    return index, runs, skipped + unread
