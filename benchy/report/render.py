"""Writes a run folder's report from its results: report.md (and figures, where available)."""
from __future__ import annotations

from pathlib import Path

from benchy.report import markdown


def write_report(results: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "report.md"
    path.write_text(markdown.render(results), encoding="utf-8")
    return path
