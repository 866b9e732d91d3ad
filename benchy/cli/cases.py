"""The flags that choose a run's cases (lengths, workloads, datasets, traces) and its load."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import click

from benchy.cli.help_sections import SectionedHelp
from benchy.cli.images import IMAGE_OPTIONS, image_settings
from benchy.cli.options import Decorator, MultiValueCommand

if TYPE_CHECKING:
    from benchy.load.plan import LoadSettings
    from benchy.workloads.case import Case


class RunCommand(SectionedHelp, MultiValueCommand):
    """`run` and `capacity`: the case flags that take several values after one flag, the help in sections."""

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


CASE_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--pp", type=int, multiple=True, help="Prompt lengths in tokens, e.g. --pp 512 2048 8192  [default: 512]."
    ),
    click.option("--tg", type=int, multiple=True, help="Output lengths in tokens, e.g. --tg 32 128  [default: 128]."),
    click.option(
        "--pp-stddev",
        type=click.FloatRange(min=0),
        default=0.0,
        metavar="N",
        help="Vary each request's prompt length: drawn from a normal around --pp with this standard "
        "deviation (tokens, seeded by --seed), each built exactly as drawn and recorded.",
    ),
    click.option(
        "--tg-stddev",
        type=click.FloatRange(min=0),
        default=0.0,
        metavar="N",
        help="Vary each request's output length likewise around --tg (each asked for exactly as drawn).",
    ),
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
        "--subagents",
        type=click.IntRange(min=1),
        default=None,
        metavar="N",
        help="With --turns: each turn but the last forks N sub-agents that share the conversation's history "
        "and run at once; the next turn resumes with their results. Reuse per agent and turn.",
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
        "--max-gap",
        type=click.FloatRange(min=0),
        default=None,
        metavar="S",
        help="With an agent --trace: cap each idle gap (tool time, think time, between sessions) at S "
        "seconds; 0: as fast as the answers come.",
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


def cases_from_flags(
    pp: tuple[int, ...],
    tg: tuple[int, ...],
    concurrency: tuple[int, ...],
    rate: tuple[float, ...],
    depth: tuple[int, ...],
    depth_mode: str | None,
    scenario: tuple[str, ...],
    turns: int | None,
    first_tokens: int | None,
    think_time: str | None,
    keep_reasoning: bool,
    cold_baseline: bool,
    shared_prefix: tuple[float, ...],
    groups: int | None,
    trace_file: str | None,
    speed: float | None,
    dataset: str | None = None,
    dataset_min_tokens: int | None = None,
    dataset_max_tokens: int | None = None,
    max_gap: float | None = None,
    subagents: int | None = None,
    pp_stddev: float = 0.0,
    tg_stddev: float = 0.0,
) -> list[Case]:
    from benchy.workloads.case import ScenarioError, once_each
    from benchy.workloads.scenario import select_cases
    from benchy.workloads.selection import CaseSelection, WorkloadSelection
    from benchy.workloads.spec import WorkloadError

    workload = WorkloadSelection(
        turns,
        first_tokens,
        think_time,
        keep_reasoning,
        cold_baseline,
        shared_prefix,
        groups,
        trace_file,
        speed,
        max_gap,
        subagents,
    )
    chosen = CaseSelection(scenario, pp, tg, concurrency, depth, depth_mode, rate, workload)
    try:
        cases = select_cases(chosen)
        if dataset is None:
            if dataset_min_tokens or dataset_max_tokens:
                raise ScenarioError("--dataset-min-tokens and --dataset-max-tokens need --dataset")
        else:
            from benchy.workloads import dataset_cases

            cases = dataset_cases.apply(cases, dataset, chosen, dataset_min_tokens, dataset_max_tokens)
        cases, repeated = once_each(spread_lengths(cases, pp_stddev, tg_stddev))
    except (ScenarioError, WorkloadError) as exc:
        raise click.UsageError(str(exc)) from None
    for label in repeated:
        click.echo(
            f"benchy: note: the case {label} is asked for more than once: measured once (more: --runs)", err=True
        )
    return cases


def spread_lengths(cases: list[Case], pp_stddev: float, tg_stddev: float) -> list[Case]:
    """The sweep cases with lengths that vary (--pp-stddev / --tg-stddev, workloads/spread.py);
    ScenarioError where a case's lengths are not --pp and --tg (a workload or a dataset)."""
    if not (pp_stddev or tg_stddev):
        return cases
    from benchy.workloads.case import ScenarioError

    other = next((c for c in cases if c.kind != "sweep" or c.dataset is not None), None)
    if other is not None:
        raise ScenarioError(f"--pp-stddev and --tg-stddev vary --pp/--tg sweeps only, not {other.label}")
    return [dataclasses.replace(c, pp_stddev=pp_stddev, tg_stddev=tg_stddev) for c in cases]


LOAD_OPTIONS: tuple[Decorator, ...] = (
    click.option(
        "--batch",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        metavar="N",
        help="With --endpoint embeddings: N inputs a request, each of --pp tokens and unique; with --endpoint rerank: "
        "N documents a request, each (query, document) pair --pp tokens (docs/embeddings.md).",
    ),
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
        help="Send no request after S seconds of a case (those in flight get --drain to finish).",
    ),
    click.option(
        "--drain",
        type=click.FloatRange(min=0),
        default=None,
        metavar="S",
        help="With --duration: requests still in flight S seconds after it are cut and counted as cut "
        "(default: a quarter of --duration, at least 10 s, at most --duration).",
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
    *IMAGE_OPTIONS,
)


def load_settings(
    max_inflight: int | None,
    n_requests: int | None,
    duration: float | None,
    drain: float | None,
    seed: int,
    workers: int | None,
    ray: str | None,
    ray_workers_per_node: int | None,
    slo: str | None,
    batch: int = 1,
    images: int = 0,
    image_size: str = "448x448",
    shared_images: bool = False,
    image_url: bool = False,
) -> LoadSettings:
    from benchy.load import cluster
    from benchy.load.plan import LoadSettings
    from benchy.measure.slo import parse_slo

    if ray is not None and not cluster.ray_installed():
        raise click.UsageError(cluster.RAY_MISSING)
    if ray_workers_per_node is not None and ray is None:
        raise click.UsageError("--ray-workers-per-node needs --ray")
    if drain is not None and duration is None:
        raise click.UsageError("--drain needs --duration: it bounds the wait after the duration")

    try:
        slo_targets = parse_slo(slo) if slo is not None else None
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return LoadSettings(
        requests=n_requests,
        duration_s=duration,
        drain_s=drain,
        max_inflight=max_inflight,
        seed=seed,
        workers=workers,
        slo=slo_targets,
        ray=ray,
        ray_workers_per_node=ray_workers_per_node,
        batch=batch,
        images=image_settings(images, image_size, shared_images, image_url),
    )
