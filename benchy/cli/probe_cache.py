"""`benchy probe-cache`: does the server cache prompt prefixes, and how much."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from benchy.cli.options import MultiValueCommand, client_options, endpoint_option, gpu_metrics_option
from benchy.cli.output import claim_folder
from benchy.cli.urls import with_url_hint
from benchy.client.redact import redacted_command_line
from benchy.outcome import probe_exit_code

if TYPE_CHECKING:
    from benchy.client.settings import ClientSettings
    from benchy.probe.bundle import ImagePlan


class ProbeCommand(MultiValueCommand):
    multi_value = ("--lengths",)


@click.command("probe-cache", cls=ProbeCommand)
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
@click.option(
    "--images",
    "probe_images",
    is_flag=True,
    help="Instead of the per-length probe, ask whether the server caches image processing: the same image "
    "again against unique images of --image-size, each after its own unique text (docs/images.md).",
)
@click.option("--image-size", default="448x448", show_default=True, metavar="WxH", help="--images: the image's size.")
def probe_cache(
    client: ClientSettings,
    endpoint: str,
    lengths: tuple[int, ...],
    n: int,
    tg: int,
    output: Path | None,
    force: bool,
    fmt: str,
    quiet: bool,
    capacity: bool,
    capacity_prefix_tokens: int,
    capacity_max_tokens: int,
    cache_reset: bool,
    gpu_metrics: str | None,
    probe_images: bool,
    image_size: str,
) -> int:
    """Does the server cache prompt prefixes? Shared- vs unique-prefix TTFTs and a verdict per length."""
    from benchy import probe
    from benchy.client.errors import ServerError
    from benchy.load.prompts import PromptError
    from benchy.report import probe_report
    from benchy.server.gpu import GpuError

    if n < 3 or tg < 1 or any(length < 1 for length in lengths):
        raise click.UsageError("--requests must be ≥ 3, --tg ≥ 1 and --lengths ≥ 1")
    if capacity and lengths:
        raise click.UsageError("--capacity replaces the per-length probe: give --capacity-prefix-tokens, not --lengths")
    if capacity_prefix_tokens > capacity_max_tokens:
        raise click.UsageError("--capacity-prefix-tokens must not exceed --capacity-max-tokens")
    size = _image_plan(probe_images, image_size, capacity, lengths, endpoint)
    if output is not None:
        claim_folder(output, force)
    settings = probe.ProbeSettings(
        client=client,
        lengths=list(lengths) or list(probe.DEFAULT_LENGTHS),
        n=n,
        tg=tg,
        endpoint=endpoint,
        command_line=redacted_command_line(sys.argv[1:]),
        progress=not quiet,  # each length's requests counted as they end: a long one takes a minute
        capacity=capacity,
        capacity_prefix_tokens=capacity_prefix_tokens,
        capacity_max_tokens=capacity_max_tokens,
        cache_reset=cache_reset,
        gpu_metrics=gpu_metrics,
        records_path=output / "requests.jsonl" if output is not None else None,
        images=size,
    )
    try:
        result = probe.run_probe(settings)
    except probe.ProbeTooLong as exc:
        raise click.UsageError(str(exc)) from None
    except (ServerError, PromptError) as exc:
        raise click.ClickException(with_url_hint(str(exc), client.base_url)) from None
    except GpuError as exc:
        raise click.ClickException(str(exc)) from None
    if output is not None:
        probe_report.write(result, output)
    if fmt == "json":
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        click.echo(probe_report.text(result))
    return probe_exit_code(result.to_dict())


def _image_plan(wanted: bool, size: str, capacity: bool, lengths: tuple[int, ...], endpoint: str) -> ImagePlan | None:
    """--images' size, or None; UsageError where it cannot be probed."""
    from benchy.load.images import parse_size
    from benchy.probe.bundle import ImagePlan

    if not wanted:
        if size != "448x448":
            raise click.UsageError("--image-size needs --images")
        return None
    if capacity or lengths:
        raise click.UsageError("--images replaces the per-length probe and --capacity: give --image-size only")
    if endpoint == "completions":
        raise click.UsageError("--images needs --endpoint chat, responses or messages: /v1/completions takes no image")
    try:
        return ImagePlan(*parse_size(size))
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
