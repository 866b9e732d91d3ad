"""Writes a run folder's report from its results: report.md, the PNG figures it embeds,
report.html (the same, interactive, in one file), and results.csv (the table's figures with their ceilings and warning codes, for spreadsheets).

Reads saved results only, so `benchy report` can re-make the same report later, anywhere.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchy.report import exporters
from benchy.results.types import RunResult


def write_report(results: RunResult, directory: Path) -> Path:
    """Every report file of a run folder whose results.json is saved (exporters.REPORT_EXPORTERS);
    returns report.md."""
    exporters.export(results, directory, exporters.REPORT_EXPORTERS)
    return directory / "report.md"


def results_path(path: Path) -> Path:
    """A run folder stands for the results.json (or probe.json) inside it."""
    if path.is_dir():
        for name in ("results.json", "probe.json"):
            if (path / name).is_file():
                return path / name
        return path / "results.json"  # load() then says it cannot be read
    return path


def write_from_file(path: Path, directory: Path | None = None) -> Path:
    """Re-makes the report of a saved run (results.json) or cache probe (probe.json) in
    `directory` (default: beside the file); returns the Markdown file written. Raises
    results.ResultsError for a file benchy cannot read."""
    from benchy.results import files as results_files

    path = results_path(Path(path))
    directory = Path(directory) if directory is not None else path.parent
    probe = None
    try:
        data = results_files.read(path)
    except results_files.ResultsError:
        probe = _probe_data(path)
        if probe is None:
            raise
    try:
        if probe is not None:
            exporters.export(probe, directory, exporters.PROBE_EXPORTERS)
            return directory / "probe.md"
        return write_report(data, directory)
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # right schema, wrong content
        raise results_files.ResultsError(f"{path}: malformed ({type(exc).__name__}: {exc})") from None


def _probe_data(path: Path) -> dict[str, Any] | None:
    import json

    from benchy.results.probe import is_probe_data

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if is_probe_data(data) else None
