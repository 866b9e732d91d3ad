"""One interface for every file benchy writes from a result, and the registries that list them.

An exporter has a `name` (what it is called in messages), the `file_name` it writes in the output
folder, and `export(result, directory)`, which writes it from the saved result only and returns
its path (None when the result holds nothing for it). `benchy run`, `benchy report` and `benchy
rebuild` write a run folder by going through RUN_EXPORTERS (render.write_report); a capacity
search through CAPACITY_EXPORTERS (kept in capacity.py, which writes through them); a cache probe
through PROBE_EXPORTERS. A new output is one
class added to a registry, not one more call in each command.

report.md embeds the PNGs: the figures exporter keeps what it drew for a folder, and the Markdown
exporter takes it from there (drawing them itself when it runs alone).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from benchy.folders import FIGURES_DIR
from benchy.report import capacity
from benchy.results.capacity import CapacityResult
from benchy.results.probe import ProbeResult
from benchy.results.types import RunResult

R_contra = TypeVar("R_contra", contravariant=True)
R = TypeVar("R")

Embedded = tuple[str, str | None, str]  # (title, path relative to the folder, caption), as report.md embeds it


class Exporter(Protocol[R_contra]):
    """Writes one file (or folder) of an output folder from a result."""

    name: str
    file_name: str

    def export(self, result: R_contra, directory: Path) -> Path | None: ...


class ResultsJson:
    name = "results"
    file_name = "results.json"

    def export(self, result: RunResult, directory: Path) -> Path:
        from benchy.results import files

        return files.save(result, directory)


@dataclass
class Drawn:
    """The PNGs drawn for a run folder, as report.md embeds them."""

    figures: list[Embedded]
    server: Embedded | None
    gpu: Embedded | None


class Figures:
    """figures/: the sweep's, the workloads', the server view's and the GPUs' PNGs."""

    name = "figures"
    file_name = FIGURES_DIR

    def __init__(self) -> None:
        self._drawn: dict[Path, Drawn] = {}

    def export(self, result: RunResult, directory: Path) -> Path:
        self._drawn[directory.resolve()] = self.draw(result, directory)
        return directory / FIGURES_DIR

    def drawn(self, result: RunResult, directory: Path) -> Drawn:
        """What export() drew for this folder (taken, so a later report draws afresh), else drawn now."""
        return self._drawn.pop(directory.resolve(), None) or self.draw(result, directory)

    @staticmethod
    def draw(result: RunResult, directory: Path) -> Drawn:
        # matplotlib is imported only when a figure is drawn
        from benchy.folders import clear_figures
        from benchy.report import gpu_plot, plots, server_view, workload_plots, workloads

        folder = directory / FIGURES_DIR
        directory.mkdir(parents=True, exist_ok=True)
        clear_figures(folder)  # no figure of an earlier report stays beside this one
        figures = plots.write_figures(workloads.sweep_results(result), folder)
        figures += workload_plots.figures(result, folder)
        embedded = [(f.title, f"{FIGURES_DIR}/{f.path.name}" if f.path else None, f.caption) for f in figures]
        server = server_view.figure(result, folder)
        gpu = gpu_plot.figure(result, folder)
        return Drawn(
            embedded,
            (server.title, f"{FIGURES_DIR}/{server.path.name}", server.caption) if server and server.path else None,
            (gpu.title, f"{FIGURES_DIR}/{gpu.path.name}", gpu.caption) if gpu and gpu.path else None,
        )


class ReportMarkdown:
    name = "report"
    file_name = "report.md"

    def __init__(self, figures: Figures) -> None:
        self.figures = figures

    def export(self, result: RunResult, directory: Path) -> Path:
        from benchy.report import markdown

        drawn = self.figures.drawn(result, directory)
        path = directory / self.file_name
        text = markdown.render(result, figures=drawn.figures, server_figure=drawn.server, gpu_figure=drawn.gpu)
        path.write_text(text, encoding="utf-8")
        return path


class ReportHtml:
    name = "report.html"
    file_name = "report.html"

    def export(self, result: RunResult, directory: Path) -> Path | None:
        try:
            from benchy.report import html

            return html.write(result, directory)
        except ImportError as exc:  # markdown-it is a dependency: an install without it still gets the rest
            missing = (exc.name or "a dependency").split(".")[0]
            sys.stderr.write(f"benchy: report.html not written: {missing} is not installed (pip install benchy)\n")
            return None


class ResultsCsv:
    name = "csv"
    file_name = "results.csv"

    def export(self, result: RunResult, directory: Path) -> Path:
        from benchy.report import table

        path = directory / self.file_name
        path.write_text(table.csv_text(result), encoding="utf-8")
        return path


class ServerCsv:
    name = "server csv"
    file_name = "server.csv"

    def export(self, result: RunResult, directory: Path) -> Path:
        from benchy.report import server_view

        return server_view.write_csv(result, directory)


class ProbeReport:
    """probe.json's reports: probe.md, its PNGs and report.html (report/probe_report.py)."""

    name = "probe report"
    file_name = "probe.md"

    def export(self, result: ProbeResult | dict[str, Any], directory: Path) -> Path:
        from benchy.report import probe_report

        probe_report.write(result, directory)
        return directory / self.file_name


_FIGURES = Figures()
RESULTS_JSON = ResultsJson()
# In the order they are written: the figures before the report.md that embeds them.
RUN_EXPORTERS: tuple[Exporter[RunResult], ...] = (
    RESULTS_JSON,
    _FIGURES,
    ReportMarkdown(_FIGURES),
    ResultsCsv(),
    ServerCsv(),
    ReportHtml(),
)
REPORT_EXPORTERS = tuple(e for e in RUN_EXPORTERS if e is not RESULTS_JSON)  # from a results.json already saved
CAPACITY_EXPORTERS: tuple[Exporter[CapacityResult], ...] = capacity.CAPACITY_EXPORTERS
PROBE_EXPORTERS: tuple[Exporter[ProbeResult | dict[str, Any]], ...] = (ProbeReport(),)


def export(result: R, directory: Path, exporters: Sequence[Exporter[R]]) -> dict[str, Path | None]:
    """Runs each exporter in order; returns what each wrote, by file name."""
    directory.mkdir(parents=True, exist_ok=True)
    return {e.file_name: e.export(result, directory) for e in exporters}
