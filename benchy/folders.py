"""Output folders: one folder holds one run, and everything in it comes from that run.

An earlier run's results.json and requests.jsonl were silently replaced by a new one written to
the same `-o DIR`, and its figures stayed beside the new report as if the new results had made
them. So a folder that already holds files is refused unless `--force`; with `--force` the files
benchy writes there (and only those: a user's own files stay) are removed before anything new is
written. `benchy demo` owns its folder and always replaces it.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

# Everything benchy may write into an output folder (run, report, probe-cache, compare).
OWN_FILES = (
    "results.json",
    "results.json.tmp",
    "requests.jsonl",
    "manifest.json",
    "manifest.json.tmp",
    "report.md",
    "report.html",
    "results.csv",
    "probe.json",
    "probe.json.tmp",
    "probe.md",
    "probe.png",
    "compare.md",
    "compare.png",
    "compare.json",
)
FIGURES_DIR = "figures"  # holds only figures benchy drew


class FolderInUse(Exception):
    """An output folder that already holds files, without --force; one line."""


def claim(directory: Path, force: bool, keep: tuple[Path, ...] = ()) -> None:
    """Makes `directory` ready for a new run's files: refuses a non-empty one unless `force`,
    then removes benchy's own files from it (never those in `keep`, e.g. the results a
    `benchy report` reads from that folder)."""
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise FolderInUse(f"{directory} is a file, not a folder")
    _check_writable(directory)
    present = sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
    if present and not force:
        shown = ", ".join(present[:4]) + (", …" if len(present) > 4 else "")
        raise FolderInUse(
            f"{directory} is not empty ({shown}): pass --force to replace benchy's files there, or choose another folder"
        )
    keep_resolved = {p.resolve() for p in keep}
    for name in OWN_FILES:
        path = directory / name
        if path.is_file() and path.resolve() not in keep_resolved:
            path.unlink()
    clear_figures(directory / FIGURES_DIR)


def _check_writable(directory: Path) -> None:
    """OSError now, when the folder could not be made or written, rather than after the run
    has calibrated and sent its first requests; creates nothing (the folder is made with the
    first file a run saves, so a run refused before it measured anything leaves none behind)."""
    probe = directory.absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(probe))
    if not os.access(probe, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(probe))


def clear_figures(figures: Path) -> None:
    """Removes the figures of an earlier report, so that only the current results' remain."""
    for png in figures.glob("*.png") if figures.is_dir() else ():
        png.unlink()


def copy_run(source: Path, directory: Path) -> Path:
    """Copies a saved run (results.json or probe.json, and the bundle beside it: requests.jsonl
    and manifest.json) into `directory`, so that a report written there has its numbers' source
    beside it; returns the copy of `source`."""
    directory.mkdir(parents=True, exist_ok=True)
    copied = Path(shutil.copyfile(source, directory / source.name))
    copy_bundle(source.parent, directory)
    return copied


def copy_bundle(source: Path, directory: Path) -> None:
    """Copies a run folder's bundle (manifest.json and requests.jsonl) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in ("requests.jsonl", "manifest.json"):
        if (source / name).is_file():
            shutil.copyfile(source / name, directory / name)
