"""One exporter interface (report/exporters.py): every file of a run folder is some registered
exporter's, and writing through the registry gives the files the shipped run folder holds."""

from __future__ import annotations

import shutil

from benchy.report import exporters
from benchy.results import files as results_files
from tests.conftest import REPO_ROOT

SHIPPED = REPO_ROOT / "reports" / "dgx-spark-sim"
BUNDLE = {"manifest.json", "requests.jsonl"}  # the run's own record, written while it runs


def test_every_file_of_a_run_folder_has_its_exporter_and_they_write_what_was_shipped(tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(SHIPPED, folder)
    for name in ("report.md", "results.csv", "server.csv", "report.html"):
        (folder / name).unlink(missing_ok=True)  # report.html is not kept in git: a clean clone has none
    shutil.rmtree(folder / "figures")
    results = results_files.read(folder / "results.json")
    written = exporters.export(results, folder, exporters.REPORT_EXPORTERS)
    names = {e.file_name for e in exporters.RUN_EXPORTERS}
    assert {p.name for p in SHIPPED.iterdir()} - BUNDLE <= names, "a file no exporter names"
    assert set(written) == names - {"results.json"}
    for name in ("report.md", "results.csv", "server.csv"):
        assert (folder / name).read_bytes() == (SHIPPED / name).read_bytes(), name
    assert sorted(p.name for p in (folder / "figures").iterdir()) == sorted(
        p.name for p in (SHIPPED / "figures").iterdir()
    )
    # report.md alone draws the figures it embeds, and says the same
    alone = tmp_path / "alone"
    shutil.copy(folder / "results.json", alone.mkdir() or alone / "results.json")
    markdown = next(e for e in exporters.RUN_EXPORTERS if e.file_name == "report.md")
    markdown.export(results, alone)
    assert (alone / "report.md").read_bytes() == (SHIPPED / "report.md").read_bytes()
    assert sorted(p.name for p in (alone / "figures").iterdir()) == sorted(
        p.name for p in (SHIPPED / "figures").iterdir()
    )
