"""benchy's command line: parses, calls and prints. No logic a test would want to reach."""
from __future__ import annotations

import sys

import click

from benchy import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchy")
def cli() -> None:
    """Cache-aware throughput/latency benchmark for OpenAI-compatible LLM servers."""


def _register_subcommands() -> None:
    from benchy.sim.cli import sim

    cli.add_command(sim)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error is one line on stderr and a non-zero exit, never a traceback."""
    _register_subcommands()
    try:
        rv = cli.main(args=argv, prog_name="benchy", standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("benchy: interrupted", err=True)
        sys.exit(130)
    except click.UsageError as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
