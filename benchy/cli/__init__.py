"""benchy's command line: parses, calls and prints. No logic a test would want to reach.

Exit codes follow from the results (outcome.py, which tables them; docs/exit-codes.md).
"""

from __future__ import annotations

import os
import sys

import click

from benchy import __version__
from benchy.cli import capacity, compare, demo, probe_cache, rebuild, report, run, selftest
from benchy.outcome import EXIT_INTERRUPTED, EXIT_USAGE


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchy")
def cli() -> None:
    """Cache-aware throughput/latency benchmark for OpenAI-compatible LLM servers."""


for _command in (
    run.run,
    capacity.capacity,
    demo.demo,
    report.report,
    rebuild.rebuild,
    compare.compare,
    selftest.selftest,
    probe_cache.probe_cache,
):
    cli.add_command(_command)


def _register_subcommands() -> None:
    from benchy.report.browse_cli import browse
    from benchy.sim.cli import sim

    cli.add_command(sim)
    cli.add_command(browse)


def main(argv: list[str] | None = None) -> None:
    """Entry point: every error is one line on stderr and a non-zero exit, never a traceback."""
    _register_subcommands()
    try:
        rv = cli.main(args=argv, prog_name="benchy", standalone_mode=False)
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
