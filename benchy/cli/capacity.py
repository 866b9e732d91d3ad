"""`benchy capacity`: the highest load at which goodput meets the SLO."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from benchy.cli.cases import CASE_OPTIONS, LOAD_OPTIONS, RunCommand, cases_from_flags, load_settings
from benchy.cli.errors import Unjudged, cannot_write
from benchy.cli.options import (
    TEMPLATE_OPTIONS,
    Decorator,
    client_options,
    endpoint_option,
    option_group,
    template_settings,
)
from benchy.cli.output import claim_folder
from benchy.cli.urls import with_url_hint
from benchy.client.redact import redacted_command_line

if TYPE_CHECKING:
    from benchy.capacity.search import SearchSettings
    from benchy.client.settings import ClientSettings
    from benchy.load.plan import LoadSettings
    from benchy.load.prompts import Template
    from benchy.workloads.case import Case


def _capacity_cases(concurrency: tuple[int, ...], rate: tuple[float, ...], **flags: Any) -> Case:
    """The case `capacity` searches: the flags' one case (a shared-prefix sweep's shared one,
    not its baseline); the search sets its load, so -c and --rate are refused. `flags`: the
    other case flags, as cases_from_flags takes them."""
    if concurrency or rate:
        raise click.UsageError("capacity chooses the load itself: drop -c / --rate (use --by, --start and --max)")
    cases = [
        c for c in cases_from_flags(concurrency=(), rate=(), **flags) if not (c.kind == "shared_prefix" and not c.depth)
    ]
    if any(c.kind == "trace" for c in cases):
        raise click.UsageError("--trace replays its own arrival times: capacity searches a concurrency or a rate")
    if len(cases) != 1:
        labels = ", ".join(c.label for c in cases[:4])
        raise click.UsageError(f"capacity searches one case at a time; these flags make {len(cases)} ({labels})")
    return cases[0]


CAPACITY_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--by",
        type=click.Choice(["concurrency", "rate"]),
        default="concurrency",
        show_default=True,
        help="Search requests in flight (closed loop) or arrivals per second (open loop, Poisson).",
    ),
    click.option(
        "--goodput",
        type=click.FloatRange(0, 1, min_open=True),
        default=0.9,
        show_default=True,
        help="The share of requests that must meet every --slo target.",
    ),
    click.option(
        "--confidence",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.95,
        show_default=True,
        help="Of each point's goodput interval: a verdict is clear once the interval is wholly on one side.",
    ),
    click.option(
        "--interval",
        type=click.Choice(["wilson", "exact"]),
        default="wilson",
        show_default=True,
        help="The goodput interval: Wilson's score interval or Clopper–Pearson's exact one (wider).",
    ),
    click.option("--start", type=click.FloatRange(min=0, min_open=True), default=None, help="First load (default 1)."),
    click.option(
        "--max",
        "limit",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="Highest load the search may probe (default: concurrency 256, rate 64 req/s).",
    ),
    click.option(
        "--min-requests",
        type=click.IntRange(min=1),
        default=20,
        show_default=True,
        help="Requests of a point's first round (at least 2 per stream; a rate's round: at least 10 s of "
        "arrivals, for its queue to show).",
    ),
    click.option(
        "--max-requests",
        type=click.IntRange(min=1),
        default=200,
        show_default=True,
        help="Most requests one point gets; a point still not clear then is decided by its estimate (uncertain).",
    ),
    click.option(
        "--resolution",
        type=click.FloatRange(0, 1, min_open=True, max_open=True),
        default=0.1,
        show_default=True,
        help="--by rate: bisect until the failing rate is within this fraction of the passing one.",
    ),
    click.option(
        "--client-retries",
        type=click.IntRange(min=0),
        default=1,
        show_default=True,
        help="Rounds at one load that may be thrown away because benchy itself fell behind "
        "(client_overloaded) before the search stops there (exit 9).",
    ),
)


def _search_settings(
    by: str,
    goodput: float,
    confidence: float,
    interval: str,
    start: float | None,
    limit: float | None,
    min_requests: int,
    max_requests: int,
    resolution: float,
    client_retries: int,
) -> SearchSettings:
    from benchy.capacity.search import BY_RATE, SearchSettings

    start = start if start is not None else 1.0
    limit = limit if limit is not None else (64.0 if by == BY_RATE else 256.0)
    floor = start / 16 if by == BY_RATE else 1.0
    settings = SearchSettings(
        by,
        goodput,
        confidence,
        interval,
        start,
        limit,
        min(floor, start),
        min_requests,
        max_requests,
        resolution,
        client_retries,
    )
    try:
        settings.check()
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return settings


@click.command(cls=RunCommand)
@client_options
@endpoint_option
@option_group("case", CASE_OPTIONS, _capacity_cases)
@option_group("load", LOAD_OPTIONS, load_settings)
@option_group("search", CAPACITY_OPTIONS, _search_settings)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="Warmup requests per round (not counted).",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for capacity.json, capacity.md, its figure and every round's results; refused if it "
    "holds files, unless --force.",
)
@click.option("--force", is_flag=True, help="Replace benchy's files in a non-empty --output folder.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json"]),
    default="md",
    show_default=True,
    help="What to print on stdout: the answer's line, or capacity.json.",
)
@click.option("--quiet", "-q", is_flag=True, help="Nothing on stderr but errors (no line per round).")
@option_group("template", TEMPLATE_OPTIONS, template_settings)
@click.option("--no-server-metrics", is_flag=True, help="Do not scrape the server's Prometheus /metrics.")
def capacity(
    client: ClientSettings,
    endpoint: str,
    case: Case,
    load: LoadSettings,
    search: SearchSettings,
    warmup: int,
    output: Path | None,
    force: bool,
    fmt: str,
    quiet: bool,
    template: Template,
    no_server_metrics: bool,
) -> int:
    """The highest concurrency (or request rate) at which --goodput of requests meet every --slo
    target: a bracket-and-bisect search that stops each point once its goodput interval is clear."""
    from benchy.capacity import runner
    from benchy.capacity.search import BY_RATE
    from benchy.client.errors import ServerError
    from benchy.load import prompt_floor
    from benchy.load.cluster import ClusterError
    from benchy.load.prompts import PromptError
    from benchy.outcome import capacity_exit_code
    from benchy.workloads.case import with_endpoint
    from benchy.workloads.cases import check_workload_endpoints

    if load.slo is None:
        raise click.UsageError("capacity needs --slo, e.g. --slo ttft=500ms,itl=50ms")
    if load.requests is not None or load.duration_s is not None:
        raise click.UsageError("capacity sizes each point itself: drop --requests / --duration (see --min-requests)")
    if search.by == BY_RATE and case.kind != "sweep":
        raise click.UsageError(f"--by rate needs a plain case: a {case.kind} workload runs a closed loop")
    try:
        load.check([runner.case_at(case, search.by, search.start)])
        template.check({case.endpoint or endpoint}, ())
        check_workload_endpoints([case], endpoint)
        prompt_floor.check([case], nonce=True)  # capacity always sends nonces
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    case = with_endpoint([case], endpoint)[0]  # its label names a non-chat endpoint, as run's do
    if output is not None:
        claim_folder(output, force)
    settings = runner.CapacitySettings(
        client=client,
        case=case,
        search=search,
        load=load,
        endpoint=endpoint,
        warmup=warmup,
        template=template,
        server_metrics=not no_server_metrics,
        output_dir=output,
        command_line=redacted_command_line(sys.argv[1:]),
        announce=None if quiet else lambda line: click.echo(line, err=True),
    )
    try:
        result = runner.search(settings)
        if output is not None:
            from benchy.report import capacity as capacity_report

            capacity_report.write(result, output)
    except (ServerError, PromptError) as exc:
        raise click.ClickException(with_url_hint(str(exc), client.base_url)) from None
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    except runner.CapacityError as exc:
        raise Unjudged(str(exc)) from None
    except OSError as exc:
        raise cannot_write(exc, output) from None
    if result.stopped is not None:
        click.echo(f"benchy: stopped early: {result.stopped.reason}", err=True)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif result.answer is not None:
        click.echo(result.answer.line)
    return capacity_exit_code(result)
