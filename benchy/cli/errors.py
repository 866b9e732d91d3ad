"""How a command's failure reaches the user: one line on stderr and an exit code, never a
traceback (outcome.py tables the codes; docs/exit-codes.md explains them)."""

from __future__ import annotations

import os
import sys
from typing import NoReturn

import click

from benchy.outcome import EXIT_CHECK_FAILED, EXIT_INTERRUPTED, EXIT_USAGE


class Interrupted(click.ClickException):
    """A run that measured nothing before it was stopped."""

    exit_code = EXIT_INTERRUPTED


class Unjudged(click.ClickException):
    """A capacity search that could not reach a verdict."""

    exit_code = EXIT_CHECK_FAILED


def cannot_write(exc: OSError, where: object) -> click.ClickException:
    """The one line for an output that cannot be written: the file the OS names, else `where`."""
    return click.ClickException(f"cannot write {exc.filename or where}: {exc.strerror or exc}")


def run_to_exit(group: click.Group, argv: list[str] | None) -> NoReturn:
    """Runs the command line and exits with its code; every error is one line on stderr
    (BENCHY_DEBUG=1 lets benchy's own bugs raise, for their traceback)."""
    try:
        rv = group.main(args=argv, prog_name="benchy", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("benchy: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(EXIT_USAGE)
    except click.ClickException as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug of benchy's: still one line, the traceback on request
        if os.environ.get("BENCHY_DEBUG"):
            raise
        click.echo(
            f"benchy: internal error: {type(exc).__name__}: {exc} (set BENCHY_DEBUG=1 to see the traceback)", err=True
        )
        sys.exit(1)
    sys.exit(rv if isinstance(rv, int) else 0)
