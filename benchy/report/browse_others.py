"""What `benchy browse` lists beside runs (issue 54): capacity searches and cache probes.

A capacity search keeps every round as a run folder of its own (rounds/NN/results.json), so the
page listed its 22 rounds as 22 runs and its answer nowhere. A search is now one row with its
answer (the highest load that met the SLO, the lowest that failed) and its rounds are not
listed as runs; a prefix-cache probe (probe.json), which the page skipped, is a row too. Both
read their saved files only.
"""

from __future__ import annotations

import os
from pathlib import Path

from benchy.report import html
from benchy.results import capacity, probe

CAPACITY_HEADERS = ("search", "case", "SLO", "answer", "highest passing", "lowest failing", "rounds")
PROBE_HEADERS = ("probe", "model", "lengths probed: verdict")


def inside_capacity(folder: Path) -> bool:
    """Whether a run folder is a capacity search's round (a capacity.json above it)."""
    return any((p / capacity.CAPACITY_FILE).is_file() for p in folder.parents)


def find(roots: list[Path]) -> tuple[list[Path], list[Path]]:
    """capacity.json and probe.json files under the roots."""
    searches, probes = [], []
    for root in roots:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("figures", "node_modules"))
            if capacity.CAPACITY_FILE in files:
                searches.append(Path(folder) / capacity.CAPACITY_FILE)
            if "probe.json" in files:
                probes.append(Path(folder) / "probe.json")
    return sorted(set(searches)), sorted(set(probes))


def _link(path: Path, site: Path, text: str) -> str:
    report = next((path.parent / n for n in ("report.html", "report.md") if (path.parent / n).is_file()), None)
    if report is None:
        return html.esc(text)
    return f'<a href="{html.esc(os.path.relpath(report, site))}">{html.esc(text)}</a>'


def capacity_row(path: Path, site: Path) -> list[str]:
    found = capacity.read(path)
    s, answer = found.setup, found.answer
    slo = ", ".join(f"{k} {v:g}" for k, v in s.slo.items()) + f" for {s.goodput:.0%}"
    return [
        _link(path, site, path.parent.name),
        html.esc(s.case or ""),
        html.esc(slo),
        html.esc(answer.kind if answer else "not answered (stopped)"),
        html.esc(capacity.load_text(s.by, answer.capacity if answer else None)),
        html.esc(capacity.load_text(s.by, answer.failing if answer else None)),
        str(len(found.points)),
    ]


def probe_row(path: Path, site: Path) -> list[str]:
    found = probe.read(path)
    lengths = ", ".join(f"{e.length:,}: {e.verdict.replace('_', ' ')}" for e in found.lengths) or "none"
    return [_link(path, site, path.parent.name), html.esc(found.setup.model or ""), html.esc(lengths)]


def section(roots: list[Path], site: Path) -> tuple[str, list[str]]:
    """The page's capacity and probe tables (empty without any), and a line for each file
    that could not be read."""
    searches, probes = find(roots)
    parts, skipped = [], []
    for title, headers, paths, row in (
        ("Capacity searches", CAPACITY_HEADERS, searches, capacity_row),
        ("Cache probes", PROBE_HEADERS, probes, probe_row),
    ):
        rows = []
        for path in paths:
            try:
                rows.append(row(path, site))
            except (ValueError, OSError) as exc:
                skipped.append(f"{path}: {str(exc).splitlines()[0]}")
        if rows:
            head = "".join(f"<th>{html.esc(h)}</th>" for h in headers)
            body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
            parts.append(f"<h2>{title}</h2><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
    return "".join(parts), skipped
