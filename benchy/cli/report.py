"""`benchy report`: re-make a run's (or a capacity search's) report from its saved files."""

from __future__ import annotations

from pathlib import Path

import click

from benchy.cli.output import claim_folder
from benchy.cli.rebuild import rebuild_folder, rebuild_other


@click.command()
@click.argument("results_file", type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for report.md, report.html and figures/ (default: the results file's folder); the results "
    "and requests.jsonl are copied there. Refused if it holds files, unless --force.",
)
@click.option("--force", is_flag=True, help="Replace benchy's files in a non-empty --output folder.")
def report(results_file: Path, output: Path | None, force: bool) -> None:
    """Re-make report.md, report.html and the PNG figures from a saved results.json (or a run
    folder, or a probe.json); a run folder without results.json is rebuilt from its bundle.
    Needs no server."""
    from benchy.folders import copy_run
    from benchy.report import render
    from benchy.results.files import ResultsError

    saved = ("results.json", "probe.json", "capacity.json")
    if output is None and Path(results_file).is_dir() and not any((Path(results_file) / n).is_file() for n in saved):
        if (made := rebuild_other(Path(results_file), report=True)) is not None:  # a probe or capacity bundle
            click.echo(str(made))
            return
    if _report_capacity(Path(results_file), output):
        return
    source = render.results_path(Path(results_file))
    if output is not None and source.is_file() and output.resolve() != source.parent.resolve():
        claim_folder(output, force)
        try:
            source = copy_run(source, output)
        except OSError as exc:
            raise click.ClickException(f"cannot copy {source} to {output}: {exc.strerror or exc}") from None
    try:
        written = render.write_from_file(source, output)
    except ResultsError as exc:
        if not (source.parent / "manifest.json").is_file():
            raise click.ClickException(str(exc)) from None
        written = _rebuild_for_report(source.parent, output, force, why=str(exc))
    except OSError as exc:
        raise click.ClickException(f"cannot write the report: {exc}") from None
    click.echo(str(written))


def _rebuild_for_report(folder: Path, output: Path | None, force: bool, why: str) -> Path:
    """`benchy report` of a folder whose results.json is missing or unreadable but whose
    bundle is there (a killed run): the results are made again from the bundle first."""
    from benchy.folders import copy_bundle

    click.echo(f"benchy: {why}: rebuilding the results from the run's bundle", err=True)
    if output is not None and output.resolve() != folder.resolve():
        claim_folder(output, force)
        copy_bundle(folder, output)
        folder = output
    rebuild_folder(folder, report=True)
    return folder / "report.md"


def _report_capacity(path: Path, output: Path | None) -> bool:
    """`benchy report` of a capacity.json (or its folder); False when it is not one."""
    from benchy.report import capacity as capacity_report
    from benchy.results import capacity as capacity_types

    if not capacity_types.is_capacity_file(path):
        return False
    try:
        result = capacity_types.read(path)
        folder = output or (path if path.is_dir() else path.parent)
        click.echo(str(capacity_report.write(result, folder)))
    except capacity_types.CapacityFileError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write the report: {exc}") from None
    return True
