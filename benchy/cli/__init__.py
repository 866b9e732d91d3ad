"""benchy's command line: parses, calls and prints. No logic a test would want to reach.

One module per command: run, capacity, demo, report, rebuild, compare, selftest, probe_cache
(`benchy sim` is benchy/sim/cli.py, `benchy browse` benchy/report/browse_cli.py). What they
share: options.py (client, endpoint, template and GPU flags; option_group, MultiValueCommand),
cases.py (the flags that choose cases and load), urls.py (--base-url), output.py (output
folders, the stop and warning lines) and errors.py (one line and an exit code per failure).
Exit codes follow from the results (outcome.py, which tables them; docs/exit-codes.md).
"""

from __future__ import annotations

import click

from benchy import __version__
from benchy.cli import capacity, compare, demo, probe_cache, rebuild, report, run, selftest
from benchy.cli.errors import run_to_exit


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
    run_to_exit(cli, argv)
