"""benchy's command line: parses, calls and prints. No logic a test would want to reach.

Exit codes: 0 clean; 1 an error (server unusable, bad input); 2 bad usage; 3 a check failed
hard (an impossible rate, every request of a case failed); 4 warnings under --strict;
130 interrupted (partial results are still saved).
"""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import click

from benchy import __version__

EXIT_CHECK_FAILED = 3
EXIT_STRICT_WARNINGS = 4
EXIT_INTERRUPTED = 130
SECRET_FLAGS = ("--api-key",)


class MultiValueCommand(click.Command):
    """Lets options marked in `multi_value` take several values after one flag, as in
    `--pp 512 2048 8192`, by rewriting them to `--pp 512 --pp 2048 --pp 8192` (multiple=True)."""

    multi_value: tuple[str, ...] = ()

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, expand_multi_values(args, self.multi_value))


def expand_multi_values(args: list[str], flags: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    current: str | None = None
    taken = 0
    for arg in args:
        if arg in flags:
            current, taken = arg, 0
            continue
        if current and (taken == 0 or not arg.startswith("-")):
            out += [current, arg]
            taken += 1
            continue
        if current and taken == 0:
            out.append(current)
        current = None
        out.append(arg)
    if current and taken == 0:
        out.append(current)  # let click report the missing value
    return out


def redacted_command_line(argv: list[str]) -> str:
    out, hide = [], False
    for arg in argv:
        if hide:
            out.append("***")
            hide = False
        elif arg in SECRET_FLAGS:
            out.append(arg)
            hide = True
        elif any(arg.startswith(f + "=") for f in SECRET_FLAGS):
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
    return "benchy " + shlex.join(out)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchy")
def cli() -> None:
    """Cache-aware throughput/latency benchmark for OpenAI-compatible LLM servers."""


class RunCommand(MultiValueCommand):
    multi_value = ("--pp", "--tg", "--concurrency", "--scenario")


@cli.command(cls=RunCommand)
@click.option("--base-url", envvar="OPENAI_BASE_URL", default="http://127.0.0.1:8000/v1", show_default=True,
              help="OpenAI-compatible API root (default from $OPENAI_BASE_URL).")
@click.option("--model", default=None, help="Model id (default: the first one /v1/models lists).")
@click.option("--api-key", envvar="OPENAI_API_KEY", default=None,
              help="Bearer token (default from $OPENAI_API_KEY). Never written anywhere.")
@click.option("--endpoint", type=click.Choice(["chat", "completions"]), default="chat", show_default=True)
@click.option("--pp", type=int, multiple=True, help="Prompt lengths in tokens, e.g. --pp 512 2048 8192.")
@click.option("--tg", type=int, multiple=True, help="Output lengths in tokens, e.g. --tg 32 128.")
@click.option("--concurrency", "-c", type=int, multiple=True, help="Requests in flight, e.g. -c 1 4 16.")
@click.option("--runs", type=int, default=5, show_default=True, help="Measured runs per case.")
@click.option("--warmup", type=int, default=1, show_default=True, help="Warmup requests per case (not counted).")
@click.option("--scenario", multiple=True, help="Shipped scenario name or a .toml file; several allowed.")
@click.option("--no-nonce", is_flag=True, help="Send identical prompts (shows what prefix caching does).")
@click.option("--output", "-o", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for results.json, requests.jsonl and report.md.")
@click.option("--format", "fmt", type=click.Choice(["md", "json", "csv"]), default="md", show_default=True,
              help="What to print on stdout.")
@click.option("--timeout", type=float, default=600.0, show_default=True, help="Seconds allowed per request.")
@click.option("--stall-timeout", type=float, default=120.0, show_default=True,
              help="Seconds of silence in a stream before the request counts as stalled.")
@click.option("--insecure", is_flag=True, help="Do not verify TLS certificates.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@click.option("--strict", is_flag=True, help="Exit non-zero on any warning (for CI).")
def run(base_url, model, api_key, endpoint, pp, tg, concurrency, runs, warmup, scenario, no_nonce,
        output, fmt, timeout, stall_timeout, insecure, quiet, strict):
    """Sweep prompt × output lengths against a server; print median ± std per case."""
    from benchy import run as run_mod
    from benchy.client import ClientSettings, ServerError
    from benchy.prompts import PromptError
    from benchy.report import table
    from benchy.scenario import ScenarioError, load_scenario, sweep

    _check_url(base_url)
    if runs < 1 or warmup < 0:
        raise click.UsageError("--runs must be ≥ 1 and --warmup ≥ 0")
    try:
        cases = [c for name in scenario for c in load_scenario(name)]
        if pp or tg or not cases:
            cases += sweep(list(pp) or [512], list(tg) or [128], list(concurrency) or [1])
        elif concurrency:
            cases = [c2 for c in cases for c2 in sweep([c.pp], [c.tg], list(concurrency), [c.depth],
                                                      c.scenario, c.runs, c.endpoint)]
    except ScenarioError as exc:
        raise click.UsageError(str(exc)) from None
    settings = run_mod.RunSettings(
        client=ClientSettings(base_url=base_url, api_key=api_key, model=model, timeout_s=timeout,
                              stall_timeout_s=stall_timeout, insecure=insecure),
        cases=cases, runs=runs, warmup=warmup, endpoint=endpoint, nonce=not no_nonce,
        output_dir=output, command_line=redacted_command_line(sys.argv[1:]),
        progress=False if quiet else None)
    try:
        results = run_mod.execute(settings)
    except (ServerError, PromptError) as exc:
        raise click.ClickException(str(exc)) from None
    if output is not None:
        from benchy.report import render

        render.write_report(results, output)
    if fmt == "json":
        click.echo(json.dumps(results, indent=1))
    elif fmt == "csv":
        click.echo(table.csv_text(results), nl=False)
    else:
        click.echo(table.markdown(results))
        _echo_warnings(results)
    return _exit_code(results, strict)


def _check_url(url: str) -> None:
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--base-url must start with http:// or https://, got {url.split('@')[-1]!r}")


def _echo_warnings(results: dict) -> None:
    warnings = results.get("warnings", [])
    if not warnings:
        click.echo("\nNo warnings: every case is clean.")
    for w in warnings:
        where = f" [{w['case']}]" if w.get("case") else ""
        click.echo(f"\n{w['severity']}: {w['code']}{where}: {w['message']}\n  hint: {w['hint']}")


def _exit_code(results: dict, strict: bool) -> int:
    warnings = results.get("warnings", [])
    if results.get("partial") and not results.get("cases"):
        return EXIT_INTERRUPTED
    if any(w["severity"] == "error" for w in warnings):
        return EXIT_CHECK_FAILED
    if strict and warnings:
        return EXIT_STRICT_WARNINGS
    return EXIT_INTERRUPTED if results.get("partial") else 0


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
        sys.exit(EXIT_INTERRUPTED)
    except click.UsageError as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(2)
    except click.ClickException as exc:
        click.echo(f"benchy: error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(rv if isinstance(rv, int) else 0)
