"""`benchy rebuild`: re-make results.json and the report from a run folder's bundle."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from benchy.cli.output import echo_stop

if TYPE_CHECKING:
    from benchy.results.types import RunResult


@click.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--no-report", is_flag=True, help="Write results.json (and results.csv) only: no report.md, no figures.")
def rebuild(run_dir: Path, no_report: bool) -> None:
    """Re-make results.json and its report from a run folder's bundle (manifest.json and
    requests.jsonl) alone: a run killed before it saved, or one analysed again; a probe-cache or
    capacity folder gets its probe.json or capacity.json again. Needs no server."""
    if (made := rebuild_other(run_dir, report=not no_report)) is not None:
        click.echo(str(made))
        return
    results = rebuild_folder(run_dir, report=not no_report)
    echo_stop(results, run_dir)
    click.echo(str(run_dir / "results.json"))


def rebuild_other(folder: Path, report: bool) -> Path | None:
    """A probe-cache or capacity folder's probe.json / capacity.json made again from its bundle;
    None for any other folder."""
    from benchy.capacity.runner import rebuild_folder as capacity_folder
    from benchy.probe import rebuild_folder as probe_folder

    for other in (probe_folder, capacity_folder):
        try:
            made = other(folder, report=report)
        except ValueError as exc:  # its bundle cannot be read: one line
            raise click.UsageError(str(exc)) from None
        if made is not None:
            return made
    return None


def rebuild_folder(folder: Path, report: bool) -> RunResult:
    """The analysis run again on `folder`'s bundle (`benchy report` uses it too, for a folder
    whose results.json is lost); a folder saved before bundles gets its manifest first."""
    from benchy import run as run_mod
    from benchy.analysis import legacy
    from benchy.analysis.bundle import MANIFEST, BundleError
    from benchy.records import RecordsError

    try:
        if not (folder / MANIFEST).exists() and (folder / legacy.RESULTS).is_file():
            legacy.manifest_from_results(folder)
            click.echo(
                f"benchy: {folder} has no {MANIFEST} (written before bundles): made from its results.json", err=True
            )
        return run_mod.rebuild(folder, report)
    except (BundleError, RecordsError) as exc:
        raise click.UsageError(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot rebuild {folder}: {exc.strerror or exc}") from None
