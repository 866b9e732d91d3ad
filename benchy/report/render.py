"""Writes a run folder's report from its results: report.md, the PNG figures it embeds,
report.html (the same, interactive, in one file), and results.csv (the table's figures with their ceilings and warning codes, for spreadsheets).

Reads saved results only, so `benchy report` can re-make the same report later, anywhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchy.folders import FIGURES_DIR, clear_figures
from benchy.report import html, markdown, server_view, table
from benchy.results.types import RunResult


def write_report(results: RunResult, directory: Path) -> Path:
    # matplotlib is imported only when a report is drawn
    from benchy.report import gpu_plot, plots, workload_plots, workloads

    directory.mkdir(parents=True, exist_ok=True)
    clear_figures(directory / FIGURES_DIR)  # no figure of an earlier report stays beside this one
    figures = plots.write_figures(workloads.sweep_results(results), directory / FIGURES_DIR)
    figures += workload_plots.figures(results, directory / FIGURES_DIR)
    embedded = [(f.title, f"{FIGURES_DIR}/{f.path.name}" if f.path else None, f.caption) for f in figures]
    server = server_view.figure(results, directory / FIGURES_DIR)
    server_embedded = (server.title, f"{FIGURES_DIR}/{server.path.name}", server.caption) if server else None
    gpu = gpu_plot.figure(results, directory / FIGURES_DIR)
    gpu_embedded = (gpu.title, f"{FIGURES_DIR}/{gpu.path.name}", gpu.caption) if gpu else None
    path = directory / "report.md"
    text = markdown.render(results, figures=embedded, server_figure=server_embedded, gpu_figure=gpu_embedded)
    path.write_text(text, encoding="utf-8")
    (directory / "results.csv").write_text(table.csv_text(results), encoding="utf-8")
    server_view.write_csv(results, directory)
    try:
        html.write(results, directory)
    except ImportError as exc:  # plotly is a dependency: an install without it still gets the rest
        missing = (exc.name or "a dependency").split(".")[0]
        sys.stderr.write(f"benchy: report.html not written: {missing} is not installed (pip install benchy)\n")
    return path


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
            from benchy.report import probe_report

            probe_report.write(probe, directory)
            return directory / "probe.md"
        return write_report(data, directory)
    except (KeyError, IndexError, TypeError, ValueError) as exc:  # right schema, wrong content
        raise results_files.ResultsError(f"{path}: malformed ({type(exc).__name__}: {exc})") from None


def _probe_data(path: Path) -> dict | None:
    import json

    from benchy.results.probe import is_probe_data

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if is_probe_data(data) else None
