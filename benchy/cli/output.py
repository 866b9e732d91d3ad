"""What the commands share about their output: claiming the --output folder, and the lines on
stderr and stdout that say why a run stopped and what it warns of."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from benchy.cli.errors import cannot_write
from benchy.outcome import measured_lines

if TYPE_CHECKING:
    from benchy.results.types import RunResult


def claim_folder(directory: Path, force: bool, keep: tuple[Path, ...] = ()) -> None:
    """Before anything is sent: a folder benchy may not write into (folders.claim's rules, one
    for every command) is one line and a failed exit now, not a lost run later."""
    from benchy.folders import FolderInUse, claim

    try:
        claim(directory, force, keep)
    except FolderInUse as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise cannot_write(exc, directory) from None


def echo_stop(results: RunResult, output: Path | None) -> None:
    """On stderr, when the run ended early: why, what was and was not measured, where it is."""
    if results.stopped:
        click.echo(f"benchy: stopped early: {results.stopped.reason}", err=True)
    for line in measured_lines(results):
        click.echo(f"  {line}", err=True)
    if results.partial and output is not None:
        click.echo(f"  partial results saved in {output}", err=True)


def echo_warnings(results: RunResult, quiet: bool = False, err: bool = False) -> None:
    """After the table on stdout (on stderr where stdout is JSON or CSV): the warnings, one line
    per cause, or that every case is clean."""
    from benchy.checks.warnings import is_clean
    from benchy.report.warning_lines import terminal_lines

    lines = list(terminal_lines(results.warnings, quiet))  # one per cause, the cases listed
    if is_clean(results.warnings):
        every = "every case measured" if results.partial else "every case"
        notes = " (notes below)" if any(line.strip() for line in lines) else ""
        click.echo(f"\nNo warnings: {every} is clean{notes}.", err=err)
    for line in lines:
        click.echo(line, err=err)
