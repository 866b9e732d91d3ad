"""`benchy run`: sweep cases against a server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from benchy.cli.cases import CASE_OPTIONS, LOAD_OPTIONS, RunCommand, cases_from_flags, load_settings
from benchy.cli.errors import Interrupted, cannot_write
from benchy.cli.options import (
    TEMPLATE_OPTIONS,
    Decorator,
    client_options,
    gpu_metrics_option,
    option_group,
    run_endpoint_option,
    template_settings,
)
from benchy.cli.output import claim_folder, echo_stop, echo_warnings
from benchy.cli.run_options import ErrorLimits, RunOptions, as_one
from benchy.cli.urls import with_url_hint
from benchy.client.redact import redacted_command_line
from benchy.outcome import exit_code

if TYPE_CHECKING:
    from benchy.measure.ceiling import CeilingInputs

CEILING_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--hardware",
        default=None,
        metavar="NAME",
        help="Hardware profile for the decode ceiling (gb10, h100-sxm, h200, b200, rtx-5090, "
        "m3-ultra, …): rates above memory bandwidth ÷ bytes per token are flagged impossible.",
    ),
    click.option(
        "--model-profile",
        default=None,
        metavar="NAME",
        help="Model profile for the ceiling (gpt-oss-120b, gpt-oss-20b, llama-3-8b, …); "
        "with --hardware and no profile, guessed from the served model id.",
    ),
    click.option("--bandwidth-gbs", type=float, default=None, help="Memory bandwidth in GB/s (overrides --hardware)."),
    click.option(
        "--active-bytes-per-token",
        type=float,
        default=None,
        help="Weight bytes read per decoded token, e.g. 2.5e9 (overrides --model-profile).",
    ),
)


def _ceiling_inputs(
    hardware: str | None, model_profile: str | None, bandwidth_gbs: float | None, active_bytes_per_token: float | None
) -> CeilingInputs:
    from benchy.measure.ceiling import CeilingInputs
    from benchy.measure.profiles import ProfileError

    inputs = CeilingInputs(hardware, model_profile, bandwidth_gbs, active_bytes_per_token)
    try:
        inputs.validate()
    except ProfileError as exc:
        raise click.UsageError(str(exc)) from None
    return inputs


# When a run stops early, keeping what it measured: RunSettings' fields of the same names.
ERROR_LIMIT_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--max-errors",
        type=click.IntRange(min=0),
        default=None,
        metavar="N",
        help="Stop the run once more than N requests have failed (exit 5); what was measured is kept.",
    ),
    click.option(
        "--max-error-rate",
        type=click.FloatRange(0, 1),
        default=None,
        metavar="X",
        help="Stop the run once more than this fraction of its requests has failed, judged from "
        "the 10th finished request on (exit 5); what was measured is kept.",
    ),
    click.option(
        "--max-connect-failures",
        type=click.IntRange(min=0),
        default=3,
        show_default=True,
        metavar="N",
        help="Stop the run once N requests in a row could not connect: the server is gone (exit 6); "
        "what was measured is kept. 0: never stop for this.",
    ),
)


@click.command(cls=RunCommand)
@client_options
@run_endpoint_option
@option_group("cases", CASE_OPTIONS, cases_from_flags)
@option_group("load", LOAD_OPTIONS, load_settings)
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True, help="Measured runs per case.")
@click.option(
    "--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Warmup requests per case (not counted)."
)
@click.option("--no-nonce", is_flag=True, help="Send identical prompts (shows what prefix caching does).")
@click.option(
    "--no-stream",
    is_flag=True,
    help="Ask for whole answers, not streams (a server or gateway that streams nothing): e2e, output "
    "t/s, goodput and load figures; TTFT, inter-token latency and decode are withheld, saying why.",
)
@click.option(
    "--tokenizer",
    "tokenizer_file",
    default=None,
    metavar="FILE|DIR",
    help="The model's Hugging Face tokenizer.json (or a local model folder holding one), for exact prompt "
    "lengths on a server without /tokenize (needs benchy[tokenizer]; read offline).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for results.json, requests.jsonl and report.md; refused if it holds files, unless --force.",
)
@click.option("--force", is_flag=True, help="Replace benchy's files in a non-empty --output folder.")
@click.option(
    "--no-report",
    is_flag=True,
    help="With --output: save results.json and requests.jsonl only (no report.md, figures or results.csv); "
    "`benchy report DIR` draws them later.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json", "csv"]),
    default="md",
    show_default=True,
    help="What to print on stdout.",
)
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="Nothing on stderr but errors and warnings (no progress); after the table, the warnings "
    "without the notes (info).",
)
@click.option("--strict", is_flag=True, help="Exit non-zero on any warning (for CI).")
@click.option(
    "--view",
    type=click.Choice(["short", "full"]),
    default="short",
    show_default=True,
    help="With --format md: the short terminal view, or every section report.md has.",
)
@click.option(
    "--saturation",
    type=click.IntRange(min=2),
    default=None,
    metavar="N",
    help="A saturation sweep: one stream, then the highest throughput (-c streams, default 32), then N "
    "request rates from the first to past the second; names the knee. Each rate sends for --duration, "
    "else at least 10 s of arrivals.",
)
@option_group("limits", ERROR_LIMIT_OPTIONS, ErrorLimits)
@option_group("ceiling", CEILING_OPTIONS, _ceiling_inputs)
@option_group("template", TEMPLATE_OPTIONS, template_settings)
@click.option(
    "--stop",
    multiple=True,
    metavar="TEXT",
    help="Stop strings sent with every request, e.g. --stop '<|return|>' '<|call|>'. They "
    "replace min_tokens (which would hold them off); ones that occur inside a Harmony "
    "response (<|message|>, <|channel|>, <|end|>, <|start|>) are warned about first.",
)
@click.option(
    "--no-server-metrics",
    is_flag=True,
    help="Do not scrape the server's Prometheus /metrics around each case (on when it answers).",
)
@click.option(
    "--replica",
    "replicas",
    multiple=True,
    metavar="URL",
    help="Behind a router, a replica's root URL (repeat for each): their /metrics are scraped and added up "
    "in place of the router's, which answers for one. Found by itself where the router lists them (/list_workers).",
)
@gpu_metrics_option
@click.option(
    "--cache-reset",
    is_flag=True,
    help="Empty the server's prefix cache before each case through the engine's own endpoint (vLLM "
    "POST /reset_prefix_cache, SGLang POST /flush_cache, llama.cpp slot erase); says so when it has none.",
)
@click.option(
    "--skip-unfit",
    is_flag=True,
    help="Run the cases whose prompt fits the server's context and list the others as skipped, "
    "instead of refusing the whole sweep.",
)
@click.option(
    "--canary",
    is_flag=True,
    help="Before the sweep, send a few fixed prompts with checkable answers (greedy) and measure a fixed "
    "passage's perplexity where the server gives log-probabilities; saved in the run, shown by "
    "`benchy compare` (docs/sanity.md).",
)
@as_one(RunOptions.of)
def run(opts: RunOptions) -> int:
    """Sweep prompt × output lengths against a server; print median ± std per case."""
    from benchy import run as run_mod
    from benchy import saturation as saturation_mod
    from benchy.client.errors import ServerError
    from benchy.client.extra_body import check_cases as check_extra_bodies
    from benchy.load import prompt_floor
    from benchy.load.cluster import ClusterError
    from benchy.load.context_fit import PromptTooLong
    from benchy.load.prompts import PromptError
    from benchy.report import table
    from benchy.server.gpu import GpuError
    from benchy.workloads.case import with_endpoint
    from benchy.workloads.cases import check_workload_endpoints
    from benchy.workloads.spec import WorkloadError

    server, work, output = opts.server, opts.workload, opts.output.output
    cases, endpoint, template, stop = work.cases, server.endpoint, work.template, work.stop
    saturation = opts.load.saturation
    try:
        if saturation is not None:
            saturation_mod.check(cases)
        else:
            opts.load.load.check(cases, endpoint)
        template.check({c.endpoint or endpoint for c in cases}, stop)
        check_workload_endpoints(cases, endpoint)
        check_extra_bodies(cases)
        prompt_floor.check(cases, nonce=not work.no_nonce)  # before connecting: benchy's own share of a prompt
        if work.tokenizer_file is not None:
            from benchy.load.lengths import FileTokenizer

            FileTokenizer(work.tokenizer_file)  # read once here: a bad file is one line and exit 2
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for text, reason in template.risky_stops(stop):
        click.echo(
            f"benchy: warning: --stop {text!r} occurs inside every Harmony (gpt-oss) response: {reason}", err=True
        )
    bad = [r for r in server.replicas if not r.startswith(("http://", "https://"))]
    if bad:
        raise click.UsageError(f"--replica {bad[0]!r}: expected an http:// or https:// URL")
    cases = with_endpoint(cases, endpoint, opts.load.load.batch)  # labels name a non-chat endpoint (and a batch)
    if output is not None:
        claim_folder(output, opts.output.force)
    client = server.client
    if work.no_stream:
        from dataclasses import replace

        client = replace(client, stream=False)
    settings = run_mod.RunSettings(
        client=client,
        cases=cases,
        runs=opts.load.runs,
        warmup=opts.load.warmup,
        endpoint=endpoint,
        nonce=not work.no_nonce,
        output_dir=output,
        command_line=redacted_command_line(sys.argv[1:]),
        progress=False if opts.output.quiet else None,
        ceiling=opts.checks.ceiling,
        template=template,
        stop=tuple(stop),
        load=opts.load.load,
        server_metrics=not server.no_server_metrics,
        replicas=tuple(server.replicas),
        gpu_metrics=server.gpu_metrics,
        cache_reset=server.cache_reset,
        tokenizer=work.tokenizer_file,
        announce=None if opts.output.quiet else lambda line: click.echo(line, err=True),
        report=not opts.output.no_report,
        skip_unfit=work.skip_unfit,
        canary=opts.checks.canary,
        **opts.load.limits,
    )
    try:
        # saved with its report in `output`
        typed = saturation_mod.execute(settings, saturation) if saturation else run_mod.execute(settings)
    except (ServerError, PromptError) as exc:
        raise click.ClickException(with_url_hint(str(exc), client.base_url)) from None
    except (ClusterError, GpuError) as exc:
        raise click.ClickException(str(exc)) from None
    except saturation_mod.SaturationError as exc:
        raise click.ClickException(str(exc)) from None
    except (PromptTooLong, WorkloadError) as exc:  # WorkloadError: a --dataset with nothing to send
        raise click.UsageError(str(exc)) from None
    except run_mod.NothingMeasured as exc:
        raise Interrupted(str(exc)) from None
    except OSError as exc:  # an output folder that cannot be written
        raise cannot_write(exc, output) from None
    echo_stop(typed, output)
    if not typed.partial:  # else echo_stop listed them
        for item in typed.not_measured:
            click.echo(f"benchy: not measured: {item.case} ({item.reason})", err=True)
    fmt, quiet = opts.output.fmt, opts.output.quiet
    if fmt == "json":
        click.echo(json.dumps(typed.to_dict(), indent=1))  # as saved
        echo_warnings(typed, quiet, err=True)  # stdout is data: the warnings still reach the reader
    elif fmt == "csv":
        click.echo(table.csv_text(typed), nl=False)
        echo_warnings(typed, quiet, err=True)
    elif typed.cases:
        from benchy.report import markdown as report_md
        from benchy.report import short_view

        click.echo(report_md.terminal(typed) if opts.output.view == "full" else short_view.terminal(typed))
        echo_warnings(typed, quiet)
    else:
        click.echo("No case was measured.")
    return exit_code(typed, opts.checks.strict)
