"""benchy's command line: parses, calls and prints. No logic a test would want to reach.

Exit codes follow from the results (outcome.py, which tables them; docs/exit-codes.md).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from benchy import __version__
from benchy.client.redact import URL_USERINFO, redact_query, redact_url, redacted_command_line
from benchy.outcome import (
    EXIT_CHECK_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    exit_code,
    measured_lines,
    probe_exit_code,
)
from benchy.sim.config import PRESETS as SIM_PRESETS

if TYPE_CHECKING:
    from benchy.results.types import RunResult


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="benchy")
def cli() -> None:
    """Cache-aware throughput/latency benchmark for OpenAI-compatible LLM servers."""


def option_group(name: str, options: tuple, build: Callable[..., object]) -> Callable:
    """A decorator that adds `options` to a command and hands the command one object made of
    their values, `build(**values)`, as the parameter `name`: commands take settings objects,
    not one parameter per flag. `build` may raise click.UsageError for values that disagree."""

    def decorate(command: Callable) -> Callable:
        probe = click.command()(_apply(options, lambda **_: None))
        names = [param.name for param in probe.params]

        @functools.wraps(command)
        def with_group(*args, **kwargs):
            kwargs[name] = build(**{key: kwargs.pop(key) for key in names})
            return command(*args, **kwargs)

        return _apply(options, with_group)

    return decorate


def _apply(options: tuple, command: Callable) -> Callable:
    for option in reversed(options):
        command = option(command)
    return command


CLIENT_OPTIONS = (
    click.option(
        "--base-url",
        envvar="OPENAI_BASE_URL",
        default="http://127.0.0.1:8000/v1",
        show_default=True,
        help="OpenAI-compatible API root (default from $OPENAI_BASE_URL).",
    ),
    click.option("--model", default=None, help="Model id (default: the first one /v1/models lists)."),
    click.option(
        "--api-key",
        envvar="OPENAI_API_KEY",
        default=None,
        help="Bearer token (default from $OPENAI_API_KEY). Never written anywhere.",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=600.0,
        show_default=True,
        help="Seconds allowed per request.",
    ),
    click.option(
        "--stall-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=120.0,
        show_default=True,
        help="Seconds of silence in a stream before the request counts as stalled.",
    ),
    click.option("--insecure", is_flag=True, help="Do not verify TLS certificates."),
    click.option(
        "--transport",
        type=click.Choice(["lean", "aiohttp"]),
        default="lean",
        show_default=True,
        help="HTTP client: benchy's lean HTTP/1.1 client (httptools) or aiohttp (20-40% more CPU per "
        "streamed token; the reference to compare against). Both honour proxies, redirects, "
        "--header and the base URL's query string alike.",
    ),
    click.option(
        "--header",
        "-H",
        "headers",
        multiple=True,
        metavar="'NAME: VALUE'",
        help="An extra header on every request, e.g. -H 'api-key: …' (Azure); repeatable. "
        "Values are treated as secrets: never written anywhere.",
    ),
    click.option(
        "--no-env-proxy",
        is_flag=True,
        help="Ignore HTTP_PROXY / HTTPS_PROXY / NO_PROXY (by default a proxy they name is used).",
    ),
    click.option(
        "--extra-body",
        metavar="JSON|@FILE",
        default=None,
        help="Fields merged into every request body: sampling options, chat_template_kwargs, "
        "response_format… A field benchy sets itself is refused; a credential-named key's value "
        "is never written.",
    ),
)


def _client_settings(
    base_url, model, api_key, timeout, stall_timeout, insecure, transport, headers, no_env_proxy, extra_body
):
    from benchy.client.extra_body import load as load_extra_body
    from benchy.client.stream import ClientSettings, parse_header

    _check_url(base_url)
    base_url = _api_root(base_url)
    try:
        parsed = tuple(parse_header(h) for h in headers)
        extra = load_extra_body(extra_body) if extra_body is not None else None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return ClientSettings(
        base_url=base_url,
        api_key=api_key,
        model=model,
        timeout_s=timeout,
        stall_timeout_s=stall_timeout,
        insecure=insecure,
        transport=transport,
        headers=parsed,
        env_proxy=not no_env_proxy,
        extra_body=extra,
    )


# Which server to talk to and how, on every command that talks to one: `client`, a ClientSettings.
client_options = option_group("client", CLIENT_OPTIONS, _client_settings)
endpoint_option = click.option(
    "--endpoint",
    type=click.Choice(["chat", "completions", "responses", "messages"]),
    default="chat",
    show_default=True,
    help="API to send to: /v1/chat/completions (messages, the server's chat template), "
    "/v1/completions (a raw prompt, no template), /v1/responses (OpenAI's Responses API) or "
    "/v1/messages (Anthropic's Messages API); docs/engines.md says which engine serves which.",
)


class RunCommand(MultiValueCommand):
    multi_value = (
        "--pp",
        "--tg",
        "--concurrency",
        "-c",
        "--scenario",
        "--depth",
        "--stop",
        "--rate",
        "--shared-prefix",
    )


CASE_OPTIONS = (
    click.option(
        "--pp", type=int, multiple=True, help="Prompt lengths in tokens, e.g. --pp 512 2048 8192  [default: 512]."
    ),
    click.option("--tg", type=int, multiple=True, help="Output lengths in tokens, e.g. --tg 32 128  [default: 128]."),
    click.option(
        "--concurrency", "-c", type=int, multiple=True, help="Requests in flight, e.g. -c 1 4 16  [default: 1]."
    ),
    click.option(
        "--rate",
        type=float,
        multiple=True,
        metavar="R",
        help="Open loop instead: Poisson arrivals at R requests/s, e.g. --rate 1 2 4 (case pp512 tg128 r4); "
        "sends behind schedule are measured as queue delay.",
    ),
    click.option(
        "--depth",
        type=int,
        multiple=True,
        help="Tokens of context before the pp tokens, e.g. --depth 0 4096 16384 (pp512 tg32 @ d4096).",
    ),
    click.option(
        "--depth-mode",
        type=click.Choice(["cold", "cached"]),
        default=None,
        help="cold (default): the context is unique per request, so the server prefills depth + pp. "
        "cached: the context is sent alone first and reused, so only the pp tokens are new "
        "(llama-bench's pp512 @ d4096); benchy checks the server's cached_tokens.",
    ),
    click.option("--scenario", multiple=True, help="Shipped scenario name or a .toml file; several allowed."),
    # Cache-aware workloads (benchy/workloads): one of --turns, --shared-prefix, --trace.
    click.option(
        "--turns",
        type=click.IntRange(min=1),
        default=None,
        metavar="T",
        help="Multi-turn conversations: -c conversations of T turns, each resending the history plus "
        "a new --pp-token message; per-turn TTFT and cached tokens vs the history.",
    ),
    click.option(
        "--first-tokens",
        type=click.IntRange(min=9),
        default=None,
        metavar="N",
        help="With --turns: the first message's tokens.",
    ),
    click.option(
        "--think-time",
        default=None,
        metavar="SPEC",
        help="With --turns: the pause before each next turn: 2s, 500ms, exp:2s or lognormal:2s[:SIGMA] "
        "(seeded by --seed).",
    ),
    click.option(
        "--keep-reasoning",
        is_flag=True,
        help="With --turns: send earlier answers' reasoning back (by default dropped, as gpt-oss's format does).",
    ),
    click.option(
        "--cold-baseline",
        is_flag=True,
        help="With --turns: then send each turn's length again with nothing shared (as many at once as "
        "there are conversations), for each turn's TTFT gain from the cache.",
    ),
    click.option(
        "--shared-prefix",
        type=float,
        multiple=True,
        metavar="F",
        help="Shared prefixes: a sweep over the shared fraction of each --pp prompt, e.g. --shared-prefix 0.5 0.9 "
        "(each beside the same lengths with nothing shared); TTFT gain and hit rate.",
    ),
    click.option(
        "--groups",
        type=click.IntRange(min=1),
        default=None,
        metavar="G",
        help="With --shared-prefix: G groups, each with its own prefix (default 1).",
    ),
    click.option(
        "--trace",
        "trace_file",
        default=None,
        metavar="FILE",
        help="Replay a trace (Mooncake JSONL with hash_ids, JSONL of timestamp/input_length/output_length, "
        "or an Azure / BurstGPT CSV) at its own times; `sample` is the shipped sample. --requests N "
        "replays the first N.",
    ),
    click.option(
        "--speed",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="X",
        help="With --trace: replay X times faster (0.5: half the rate).",
    ),
    click.option(
        "--dataset",
        default=None,
        metavar="FILE",
        help="Real prompts (docs/datasets.md): ShareGPT .json, .jsonl, .csv, .parquet/.arrow; `sample` is the "
        "shipped one. Alone: each entry's prompt and answer length; with --pp: real text cut to each "
        "length; with --turns: its conversations. Sampled with --seed.",
    ),
    click.option(
        "--dataset-min-tokens",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="With --dataset: skip entries whose prompt is shorter than N tokens.",
    ),
    click.option(
        "--dataset-max-tokens",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="With --dataset: skip entries whose prompt is longer than N tokens.",
    ),
)


def _cases(
    pp,
    tg,
    concurrency,
    rate,
    depth,
    depth_mode,
    scenario,
    turns,
    first_tokens,
    think_time,
    keep_reasoning,
    cold_baseline,
    shared_prefix,
    groups,
    trace_file,
    speed,
    dataset=None,
    dataset_min_tokens=None,
    dataset_max_tokens=None,
):
    from benchy.workloads.case import ScenarioError
    from benchy.workloads.scenario import CaseSelection, WorkloadSelection, select_cases
    from benchy.workloads.spec import WorkloadError

    workload = WorkloadSelection(
        turns, first_tokens, think_time, keep_reasoning, cold_baseline, shared_prefix, groups, trace_file, speed
    )
    chosen = CaseSelection(scenario, pp, tg, concurrency, depth, depth_mode, rate, workload)
    try:
        cases = select_cases(chosen)
        if dataset is None:
            if dataset_min_tokens or dataset_max_tokens:
                raise ScenarioError("--dataset-min-tokens and --dataset-max-tokens need --dataset")
            return cases
        from benchy.workloads import dataset_cases

        return dataset_cases.apply(cases, dataset, chosen, dataset_min_tokens, dataset_max_tokens)
    except (ScenarioError, WorkloadError) as exc:
        raise click.UsageError(str(exc)) from None


LOAD_OPTIONS = (
    click.option(
        "--max-inflight",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="With --rate, --trace (or a scenario's rate or trace): at most N requests in flight; later "
        "arrivals wait (and their delay is reported).",
    ),
    click.option(
        "--requests",
        "n_requests",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Measured requests per case (default: --runs × concurrency; with --rate, 10 s of arrivals).",
    ),
    click.option(
        "--duration",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="S",
        help="Send no request after S seconds of a case (those in flight finish and count).",
    ),
    click.option("--seed", type=int, default=0, show_default=True, help="Seed of the --rate arrival schedules."),
    click.option(
        "--workers",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="Spread each case over N processes, each its own event loop "
        "(default: one per 64 streams, at most one per core).",
    ),
    click.option(
        "--ray",
        "ray",
        is_flag=False,
        flag_value="auto",
        default=None,
        metavar="[ADDRESS]",
        help="Spread each case over Ray actors across a cluster (pip install 'benchy[ray]'): ADDRESS of the "
        "cluster (host:port, ray://host:10001), 'local' for a new local instance; none: this machine's cluster.",
    ),
    click.option(
        "--ray-workers-per-node",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="With --ray: N actors on each node (default 1; at most one per core).",
    ),
    click.option(
        "--slo",
        default=None,
        metavar="SPEC",
        help="Goodput: the share of requests meeting every target, e.g. --slo ttft=2s,e2e_tps=20 "
        "(ttft, ttfc, e2e, itl in s or ms; e2e_tps, decode_tps in tokens/s).",
    ),
)


def _load_settings(max_inflight, n_requests, duration, seed, workers, ray, ray_workers_per_node, slo):
    from benchy.load import cluster
    from benchy.load.plan import LoadSettings
    from benchy.measure.metrics import parse_slo

    if ray is not None and not cluster.ray_installed():
        raise click.UsageError(cluster.RAY_MISSING)
    if ray_workers_per_node is not None and ray is None:
        raise click.UsageError("--ray-workers-per-node needs --ray")

    try:
        slo_targets = parse_slo(slo) if slo is not None else None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return LoadSettings(
        requests=n_requests,
        duration_s=duration,
        max_inflight=max_inflight,
        seed=seed,
        workers=workers,
        slo=slo_targets,
        ray=ray,
        ray_workers_per_node=ray_workers_per_node,
    )


CEILING_OPTIONS = (
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


def _ceiling_inputs(hardware, model_profile, bandwidth_gbs, active_bytes_per_token):
    from benchy.measure.ceiling import CeilingInputs
    from benchy.measure.profiles import ProfileError

    inputs = CeilingInputs(hardware, model_profile, bandwidth_gbs, active_bytes_per_token)
    try:
        inputs.validate()
    except ProfileError as exc:
        raise click.UsageError(str(exc)) from None
    return inputs


# When a run stops early, keeping what it measured: RunSettings' fields of the same names.
ERROR_LIMIT_OPTIONS = (
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


TEMPLATE_OPTIONS = (
    click.option(
        "--template",
        type=click.Choice(["none", "harmony"]),
        default="none",
        show_default=True,
        help="For --endpoint completions: harmony renders gpt-oss's Harmony prompt client-side, "
        "asks for special tokens (skip_special_tokens: false) and counts the analysis "
        "channel as reasoning, the final one as content; none sends the prompt as is.",
    ),
    click.option(
        "--reasoning-effort",
        type=click.Choice(["low", "medium", "high"]),
        default=None,
        help="Chat: sent as reasoning_effort; completions with --template harmony: the "
        "system message's Reasoning line (default medium there).",
    ),
)


def _check_gpu_metrics(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A bad --gpu-metrics (neither a URL nor nvml, or nvml without nvidia-ml-py) fails here,
    before anything is sent."""
    if value is None:
        return None
    from benchy.server.gpu import GpuError, check_spec

    try:
        check_spec(value)
    except GpuError as exc:
        raise click.BadParameter(str(exc).removeprefix("--gpu-metrics "), ctx, param) from None
    return value


# Reusable by any command that sends load (run, probe-cache, capacity): the value goes to
# server/gpu.py's source_for / GpuSampler.
gpu_metrics_option = click.option(
    "--gpu-metrics",
    "gpu_metrics",
    metavar="URL|nvml",
    default=None,
    callback=_check_gpu_metrics,
    help="Sample the GPUs beside each case: a dcgm-exporter URL (http://HOST:9400/metrics) or nvml "
    "(this host's GPUs; pip install 'benchy[gpu]'): power, energy per token, bandwidth use (docs/gpu.md).",
)


def _template(template, reasoning_effort):
    from benchy.load.prompts import Template

    return Template(template, reasoning_effort)


@cli.command(cls=RunCommand)
@client_options
@endpoint_option
@option_group("cases", CASE_OPTIONS, _cases)
@option_group("load", LOAD_OPTIONS, _load_settings)
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
@option_group("limits", ERROR_LIMIT_OPTIONS, dict)
@option_group("ceiling", CEILING_OPTIONS, _ceiling_inputs)
@option_group("template", TEMPLATE_OPTIONS, _template)
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
def run(
    client,
    endpoint,
    cases,
    load,
    runs,
    warmup,
    no_nonce,
    no_stream,
    output,
    force,
    no_report,
    fmt,
    quiet,
    strict,
    limits,
    ceiling,
    template,
    stop,
    no_server_metrics,
    replicas,
    gpu_metrics,
    cache_reset,
    tokenizer_file,
    skip_unfit,
):
    """Sweep prompt × output lengths against a server; print median ± std per case."""
    from benchy import run as run_mod
    from benchy.client.extra_body import check_cases as check_extra_bodies
    from benchy.client.stream import ServerError
    from benchy.load.cluster import ClusterError
    from benchy.load.prompts import PromptError
    from benchy.report import table
    from benchy.server.gpu import GpuError
    from benchy.workloads.cases import check_workload_endpoints
    from benchy.workloads.spec import WorkloadError

    try:
        load.check(cases)
        template.check({c.endpoint or endpoint for c in cases}, stop)
        check_workload_endpoints(cases, endpoint)
        check_extra_bodies(cases)
        if tokenizer_file is not None:
            from benchy.load.lengths import FileTokenizer

            FileTokenizer(tokenizer_file)  # read once here: a bad file is one line and exit 2
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    for text, reason in template.risky_stops(stop):
        click.echo(
            f"benchy: warning: --stop {text!r} occurs inside every Harmony (gpt-oss) response: {reason}", err=True
        )
    bad = [r for r in replicas if not r.startswith(("http://", "https://"))]
    if bad:
        raise click.UsageError(f"--replica {bad[0]!r}: expected an http:// or https:// URL")
    if output is not None:
        _claim_folder(output, force)
    if no_stream:
        from dataclasses import replace

        client = replace(client, stream=False)
    settings = run_mod.RunSettings(
        client=client,
        cases=cases,
        runs=runs,
        warmup=warmup,
        endpoint=endpoint,
        nonce=not no_nonce,
        output_dir=output,
        command_line=redacted_command_line(sys.argv[1:]),
        progress=False if quiet else None,
        ceiling=ceiling,
        template=template,
        stop=tuple(stop),
        load=load,
        server_metrics=not no_server_metrics,
        replicas=tuple(replicas),
        gpu_metrics=gpu_metrics,
        cache_reset=cache_reset,
        tokenizer=tokenizer_file,
        announce=None if quiet else lambda line: click.echo(line, err=True),
        report=not no_report,
        skip_unfit=skip_unfit,
        **limits,
    )
    try:
        typed = run_mod.execute(settings)  # saved with its report in `output`
    except (ServerError, PromptError) as exc:
        raise click.ClickException(_with_url_hint(str(exc), client.base_url)) from None
    except (ClusterError, GpuError) as exc:
        raise click.ClickException(str(exc)) from None
    except (run_mod.PromptTooLong, WorkloadError) as exc:  # WorkloadError: a --dataset with nothing to send
        raise click.UsageError(str(exc)) from None
    except run_mod.NothingMeasured as exc:
        raise _Interrupted(str(exc)) from None
    except OSError as exc:  # an output folder that cannot be written
        raise click.ClickException(f"cannot write {exc.filename or output}: {exc.strerror or exc}") from None
    _echo_stop(typed, output)
    if not typed.partial:  # else _echo_stop listed them
        for item in typed.not_measured:
            click.echo(f"benchy: not measured: {item.case} ({item.reason})", err=True)
    if fmt == "json":
        click.echo(json.dumps(typed.to_dict(), indent=1))  # as saved
    elif fmt == "csv":
        click.echo(table.csv_text(typed), nl=False)
    elif typed.cases:
        from benchy.report import markdown as report_md

        click.echo(report_md.terminal(typed))
        _echo_warnings(typed, quiet)
    else:
        click.echo("No case was measured.")
    return exit_code(typed, strict)


class _Interrupted(click.ClickException):
    exit_code = EXIT_INTERRUPTED


def _claim_folder(directory: Path, force: bool, keep: tuple[Path, ...] = ()) -> None:
    from benchy.folders import FolderInUse, claim

    try:
        claim(directory, force, keep)
    except FolderInUse as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {exc.filename or directory}: {exc.strerror or exc}") from None


# What OpenSSL says when a TLS handshake meets a server speaking plain HTTP.
PLAIN_HTTP_ANSWERS = (
    "WRONG_VERSION_NUMBER",
    "wrong version number",
    "record layer failure",
    "PACKET_LENGTH_TOO_LONG",
    "an answer in plain HTTP",  # client/http1.py: a server that waits for a request line
)


def _with_url_hint(message: str, base_url: str) -> str:
    """A 404 from the API root usually means the /v1 was left out of --base-url, and a TLS
    'wrong version number' that https:// was given to a plain-http server. The suggestion shows
    the fixed URL (/v1 before any query string) and no secret (redact_url)."""
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if parts.scheme == "https" and any(sign in message for sign in PLAIN_HTTP_ANSWERS):
        suggested = redact_url(parts._replace(scheme="http").geturl())
        return f"{message} (the server answered in plain HTTP, not TLS: try --base-url {suggested})"
    if "HTTP 404" in message and not path.endswith("/v1"):
        suggested = redact_url(parts._replace(path=f"{path}/v1").geturl())
        return f"{message} (OpenAI-compatible servers serve the API under /v1: try --base-url {suggested})"
    return message


def _capacity_cases(concurrency, rate, **flags):
    """The case `capacity` searches: the flags' one case (a shared-prefix sweep's shared one,
    not its baseline); the search sets its load, so -c and --rate are refused."""
    if concurrency or rate:
        raise click.UsageError("capacity chooses the load itself: drop -c / --rate (use --by, --start and --max)")
    cases = [c for c in _cases(concurrency=(), rate=(), **flags) if not (c.kind == "shared_prefix" and not c.depth)]
    if any(c.kind == "trace" for c in cases):
        raise click.UsageError("--trace replays its own arrival times: capacity searches a concurrency or a rate")
    if len(cases) != 1:
        labels = ", ".join(c.label for c in cases[:4])
        raise click.UsageError(f"capacity searches one case at a time; these flags make {len(cases)} ({labels})")
    return cases[0]


CAPACITY_OPTIONS = (
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
        help="Requests of a point's first round (at least 2 per stream, or 2 s of arrivals).",
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
    by, goodput, confidence, interval, start, limit, min_requests, max_requests, resolution, client_retries
):
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


@cli.command(cls=RunCommand)
@client_options
@endpoint_option
@option_group("case", CASE_OPTIONS, _capacity_cases)
@option_group("load", LOAD_OPTIONS, _load_settings)
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
@option_group("template", TEMPLATE_OPTIONS, _template)
@click.option("--no-server-metrics", is_flag=True, help="Do not scrape the server's Prometheus /metrics.")
def capacity(client, endpoint, case, load, search, warmup, output, force, fmt, quiet, template, no_server_metrics):
    """The highest concurrency (or request rate) at which --goodput of requests meet every --slo
    target: a bracket-and-bisect search that stops each point once its goodput interval is clear."""
    from benchy.capacity import runner
    from benchy.capacity.search import BY_RATE
    from benchy.client.stream import ServerError
    from benchy.load.cluster import ClusterError
    from benchy.load.prompts import PromptError
    from benchy.outcome import capacity_exit_code
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
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if output is not None:
        _claim_folder(output, force)
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
        raise click.ClickException(_with_url_hint(str(exc), client.base_url)) from None
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None
    except runner.CapacityError as exc:
        raise _Unjudged(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot write {exc.filename or output}: {exc.strerror or exc}") from None
    if result.stopped is not None:
        click.echo(f"benchy: stopped early: {result.stopped.reason}", err=True)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=1))
    elif result.answer is not None:
        click.echo(result.answer.line)
    return capacity_exit_code(result)


class _Unjudged(click.ClickException):
    exit_code = EXIT_CHECK_FAILED


class DemoCommand(MultiValueCommand):
    multi_value = ("--pp", "--tg")


@cli.command(cls=DemoCommand)
@click.option(
    "--preset",
    type=click.Choice(list(SIM_PRESETS)),
    metavar="NAME",
    default="dgx-spark-gpt-oss-120b",
    show_default=True,
    help=f"Simulator preset (docs/sim.md says what each simulates): {', '.join(SIM_PRESETS)}.",
)
@click.option("--pp", type=int, multiple=True, help="Prompt lengths  [default: 512 2048 8192].")
@click.option("--tg", type=int, multiple=True, help="Output lengths  [default: 32 128].")
@click.option("--runs", type=click.IntRange(min=1), default=3, show_default=True, help="Measured runs per case.")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports/demo"),
    show_default=True,
    help="Folder for the demo's report; the demo owns it and replaces its files each time.",
)
@click.pass_context
def demo(ctx, preset, pp, tg, runs, output):
    """Start the embedded simulator, benchmark it with `benchy run`, write a report, stop it."""
    from benchy.sim.process import SimProcess

    click.echo(f"Starting benchy sim --preset {preset} …", err=True)
    try:
        sim = SimProcess("--preset", preset).start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        click.echo(f"Benchmarking {sim.base_url} (real time: this takes a minute or two) …", err=True)
        code = ctx.invoke(
            run,
            base_url=sim.base_url,
            pp=pp or (512, 2048, 8192),
            tg=tg or (32, 128),
            runs=runs,
            output=output,
            force=True,  # the demo's folder is its own: each demo replaces the last one's files
        )
        # Real text too: the shipped sample dataset, each entry's prompt and answer length.
        click.echo("Benchmarking the shipped sample dataset (--dataset sample -c 4 --requests 16) …", err=True)
        dataset_code = ctx.invoke(
            run,
            base_url=sim.base_url,
            dataset="sample",
            concurrency=(4,),
            n_requests=16,
            output=output / "dataset",
            force=True,
        )
    finally:
        sim.stop()
    click.echo(
        f"\nReport: {output / 'report.html'} (in a browser; report.md beside it)"
        f"\nDataset report: {output / 'dataset' / 'report.html'}",
        err=True,
    )
    return code or dataset_code


@cli.command()
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
def report(results_file, output, force):
    """Re-make report.md, report.html and the PNG figures from a saved results.json (or a run
    folder, or a probe.json); a run folder without results.json is rebuilt from its bundle.
    Needs no server."""
    from benchy.folders import copy_run
    from benchy.report import render
    from benchy.results.files import ResultsError

    if _report_capacity(Path(results_file), output):
        return
    source = render.results_path(Path(results_file))
    if output is not None and source.is_file() and output.resolve() != source.parent.resolve():
        _claim_folder(output, force)
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
        _claim_folder(output, force)
        copy_bundle(folder, output)
        folder = output
    _rebuild_folder(folder, report=True)
    return folder / "report.md"


@cli.command()
@click.argument("run_dir", type=click.Path(path_type=Path))
@click.option("--no-report", is_flag=True, help="Write results.json (and results.csv) only: no report.md, no figures.")
def rebuild(run_dir: Path, no_report: bool) -> None:
    """Re-make results.json and its report from a run folder's bundle (manifest.json and
    requests.jsonl) alone: a run killed before it saved, or one analysed again. Needs no server."""
    results = _rebuild_folder(run_dir, report=not no_report)
    _echo_stop(results, run_dir)
    click.echo(str(run_dir / "results.json"))


def _rebuild_folder(folder: Path, report: bool) -> RunResult:
    from benchy import run as run_mod
    from benchy.analysis import legacy
    from benchy.analysis.bundle import MANIFEST, BundleError
    from benchy.measure.records import RecordsError

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


@cli.command()
@click.argument("results_files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for compare.md, compare.png and compare.json; refused if it holds files, unless --force.",
)
@click.option(
    "--test",
    type=click.Choice(["mannwhitney", "welch"]),
    default="mannwhitney",
    show_default=True,
    help="Significance test on per-request values.",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level.")
@click.option(
    "--min-effect",
    type=float,
    default=2.0,
    show_default=True,
    help="Smallest change (%) called faster/slower; smaller significant changes are 'negligible'.",
)
@click.option(
    "--allow-nonce-mismatch",
    is_flag=True,
    help="Compare even when one run sent a prompt nonce and the other did not (warned loudly).",
)
@click.option("--force", is_flag=True, help="Replace benchy's files in a non-empty --output folder.")
def compare(results_files, output, test, alpha, min_effect, allow_nonce_mismatch, force):
    """Compare runs case by case: the first file is the baseline, each other one is set against it."""
    from benchy.report import compare as compare_mod
    from benchy.report import render
    from benchy.results.files import ResultsError

    if len(results_files) < 2:
        raise click.UsageError("compare needs at least two results files (the first is the baseline)")
    if _compare_capacities(results_files, output):
        return
    paths = [render.results_path(p) for p in results_files]
    try:
        comparisons = compare_mod.compare_files(
            paths, test=test, alpha=alpha, min_effect=min_effect / 100, force=allow_nonce_mismatch
        )
    except (ResultsError, compare_mod.CompareError) as exc:
        raise click.ClickException(str(exc)) from None
    if output is not None:  # a refused folder is the one line said, before any warning
        _claim_folder(output, force, keep=tuple(paths))  # one rule for every output folder
    for comp in comparisons:
        for warning in comp.warnings:
            click.echo(f"benchy: warning: {warning}", err=True)
    if output is not None:
        try:
            compare_mod.write(comparisons, output)
        except OSError as exc:
            raise click.ClickException(f"cannot write the comparison: {exc}") from None
    click.echo(compare_mod.markdown(comparisons))


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


def _compare_capacities(files: tuple[Path, ...], output: Path | None) -> bool:
    """`benchy compare` of capacity.json files (before/after a server flag); False when none is one."""
    from benchy.report import capacity as capacity_report
    from benchy.results import capacity as capacity_types

    kinds = [capacity_types.is_capacity_file(Path(f)) for f in files]
    if not any(kinds):
        return False
    if not all(kinds):
        raise click.UsageError("compare takes results files or capacity files, not both")
    try:
        results = [capacity_types.read(Path(f)) for f in files]
    except capacity_types.CapacityFileError as exc:
        raise click.ClickException(str(exc)) from None
    paths = [Path(f) / capacity_types.CAPACITY_FILE if Path(f).is_dir() else Path(f) for f in files]
    names = [p.parent.name or p.stem for p in paths]
    if len(set(names)) < len(names):
        names = [str(p) for p in paths]
    text = capacity_report.compare_markdown(results, names)
    if output is not None:
        try:
            output.mkdir(parents=True, exist_ok=True)
            (output / "compare.md").write_text(text, encoding="utf-8")
        except OSError as exc:
            raise click.ClickException(f"cannot write the comparison: {exc}") from None
    click.echo(text, nl=False)
    return True


def _check_url(url: str) -> None:
    from urllib.parse import urlsplit

    shown = redact_query(URL_USERINFO.sub(r"\1***@", url) if "://" in url else url.rpartition("@")[2])
    if not url.startswith(("http://", "https://")):
        raise click.UsageError(f"--base-url must start with http:// or https://, got {shown!r}")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError as exc:
        raise click.UsageError(f"--base-url {shown!r}: {exc}") from None
    if not parts.hostname:
        raise click.UsageError(f"--base-url {shown!r} names no host")


# Endpoint paths people paste from a server's docs or a curl line; benchy appends them itself.
PASTED_ENDPOINTS = ("/chat/completions", "/completions", "/responses", "/messages")


def _api_root(url: str) -> str:
    """--base-url is the API root (…/v1). The most common paste is a whole endpoint URL
    (…/v1/chat/completions): it is cut back to the root, with a note saying so, rather than
    sent as …/v1/chat/completions/chat/completions and answered with a 404."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    pasted = next((end for end in PASTED_ENDPOINTS if path.endswith(end)), None)
    if pasted is None:
        return url
    root = parts._replace(path=path[: -len(pasted)]).geturl()
    click.echo(f"benchy: note: --base-url is the API root: using {redact_url(root)} (dropped {pasted})", err=True)
    return root


def _echo_stop(results: RunResult, output: Path | None) -> None:
    """On stderr, when the run ended early: why, what was and was not measured, where it is."""
    if results.stopped:
        click.echo(f"benchy: stopped early: {results.stopped.reason}", err=True)
    for line in measured_lines(results):
        click.echo(f"  {line}", err=True)
    if results.partial and output is not None:
        click.echo(f"  partial results saved in {output}", err=True)


def _echo_warnings(results: RunResult, quiet: bool = False) -> None:
    from benchy.checks.warnings import is_clean
    from benchy.report.warning_lines import terminal_lines

    if is_clean(results.warnings):
        every = "every case measured" if results.partial else "every case"
        click.echo(f"\nNo warnings: {every} is clean.")
    for line in terminal_lines(results.warnings, quiet):  # one per cause, the cases listed
        click.echo(line)


@cli.command()
@click.option("--seconds", type=click.FloatRange(0.2, 60), default=1.5, show_default=True, help="Seconds per phase.")
@click.option("--streams", type=click.IntRange(1, 4096), default=64, show_default=True, help="Requests in flight.")
def selftest(seconds, streams):
    """This machine's client ceiling against a loopback stub: requests/s, SSE events/s and stamp
    lag, in seconds. Cached per host; every later run saves it in its setup and flags a case
    that drives more than half of it as client-bound."""
    from benchy.load import selftest as client_ceiling
    from benchy.measure.selftest import save

    try:
        found = client_ceiling.measure(streams, seconds)
        path = save(found)
    except (OSError, RuntimeError) as exc:
        raise click.ClickException(f"selftest: {exc}") from None
    click.echo(
        f"client ceiling of {found.host} ({found.event_loop}, {streams} streams): "
        f"{found.requests_per_s:,.0f} requests/s, {found.events_per_s:,.0f} SSE events/s, "
        f"stamp lag p50 {found.stamp_lag_ms_p50:.2f} ms, p99 {found.stamp_lag_ms_p99:.2f} ms"
    )
    click.echo(f"saved: {path}")


class ProbeCommand(MultiValueCommand):
    multi_value = ("--lengths",)


@cli.command("probe-cache", cls=ProbeCommand)
@client_options
@endpoint_option
@click.option(
    "--lengths",
    type=int,
    multiple=True,
    help="Prompt lengths in tokens (default 2000 8000 27000, capped by the model's context).",
)
@click.option(
    "--requests",
    "-n",
    "n",
    type=int,
    default=5,
    show_default=True,
    help="Shared-prefix requests per length (≥ 3), and as many unique-prefix ones.",
)
@click.option("--tg", type=int, default=8, show_default=True, help="Output tokens per request (kept short).")
@click.option(
    "--output",
    "-o",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Folder for probe.json, probe.md and probe.png; refused if it holds files, unless --force.",
)
@click.option("--force", is_flag=True, help="Replace benchy's files in a non-empty --output folder.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["md", "json"]),
    default="md",
    show_default=True,
    help="What to print on stdout.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress lines on stderr.")
@gpu_metrics_option
@click.option(
    "--capacity",
    is_flag=True,
    help="Instead of the per-length probe, measure how many prompt tokens the cache holds for reuse: grow "
    "the number of distinct cached prefixes (each re-used after all others) until hits fall, beside the "
    "size the server states (docs/cache.md).",
)
@click.option(
    "--capacity-prefix-tokens",
    type=click.IntRange(min=32),
    default=1024,
    show_default=True,
    help="--capacity: the length of each prefix.",
)
@click.option(
    "--capacity-max-tokens",
    type=click.IntRange(min=64),
    default=262144,
    show_default=True,
    help="--capacity: stop growing the working set past this many tokens.",
)
@click.option(
    "--cache-reset",
    is_flag=True,
    help="Empty the server's prefix cache before each length (each --capacity pass) through the engine's "
    "own endpoint; says so when it has none.",
)
def probe_cache(
    client,
    endpoint,
    lengths,
    n,
    tg,
    output,
    force,
    fmt,
    quiet,
    capacity,
    capacity_prefix_tokens,
    capacity_max_tokens,
    cache_reset,
    gpu_metrics,
):
    """Does the server cache prompt prefixes? Shared- vs unique-prefix TTFTs and a verdict per length."""
    from benchy import probe
    from benchy.client.stream import ServerError
    from benchy.load.prompts import PromptError
    from benchy.report import probe_report
    from benchy.server.gpu import GpuError

    if n < 3 or tg < 1 or any(length < 1 for length in lengths):
        raise click.UsageError("--requests must be ≥ 3, --tg ≥ 1 and --lengths ≥ 1")
    if capacity and lengths:
        raise click.UsageError("--capacity replaces the per-length probe: give --capacity-prefix-tokens, not --lengths")
    if capacity_prefix_tokens > capacity_max_tokens:
        raise click.UsageError("--capacity-prefix-tokens must not exceed --capacity-max-tokens")
    if output is not None:
        _claim_folder(output, force)
    settings = probe.ProbeSettings(
        client=client,
        lengths=list(lengths) or list(probe.DEFAULT_LENGTHS),
        n=n,
        tg=tg,
        endpoint=endpoint,
        command_line=redacted_command_line(sys.argv[1:]),
        on_length=None if quiet else _probe_progress,
        capacity=capacity,
        capacity_prefix_tokens=capacity_prefix_tokens,
        capacity_max_tokens=capacity_max_tokens,
        cache_reset=cache_reset,
        gpu_metrics=gpu_metrics,
        records_path=output / "requests.jsonl" if output is not None else None,
    )
    try:
        result = probe.run_probe(settings)
    except probe.ProbeTooLong as exc:
        raise click.UsageError(str(exc)) from None
    except (ServerError, PromptError) as exc:
        raise click.ClickException(_with_url_hint(str(exc), client.base_url)) from None
    except GpuError as exc:
        raise click.ClickException(str(exc)) from None
    if output is not None:
        probe_report.write(result, output)
    if fmt == "json":
        click.echo(json.dumps(result, indent=1))
    else:
        click.echo(probe_report.text(result))
    return probe_exit_code(result)


def _probe_progress(step: int | str) -> None:
    click.echo(f"probing {step:,}-token prompts …" if isinstance(step, int) else f"probing {step} …", err=True)


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
