"""`benchy demo`: `benchy run` against the embedded simulator."""

from __future__ import annotations

from pathlib import Path

import click

from benchy.cli.options import MultiValueCommand
from benchy.cli.run import run
from benchy.sim.config import PRESETS as SIM_PRESETS


class DemoCommand(MultiValueCommand):
    multi_value = ("--pp", "--tg")


@click.command(cls=DemoCommand)
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
def demo(ctx: click.Context, preset: str, pp: tuple[int, ...], tg: tuple[int, ...], runs: int, output: Path) -> int:
    """Start the embedded simulator, benchmark it with `benchy run`, write a report, stop it."""
    from benchy.sim.process import SimProcess

    _refuse_a_real_run(output)
    click.echo(f"Starting benchy sim --preset {preset} …", err=True)
    try:
        sim = SimProcess("--preset", preset).start()
    except RuntimeError as exc:
        raise click.ClickException(str(exc)) from None
    try:
        click.echo(f"Benchmarking {sim.base_url} (real time: this takes a minute or two) …", err=True)
        code: int = ctx.invoke(
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
        dataset_code: int = ctx.invoke(
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
    _link_inner_reports(output)
    click.echo(
        f"\nReport: {output / 'report.html'} (in a browser; report.md beside it)"
        f"\nDataset report: {output / 'dataset' / 'report.html'}",
        err=True,
    )
    return code or dataset_code


def _refuse_a_real_run(output: Path) -> None:
    """The demo replaces its folder's files: never those of a real run someone saved there (a
    results.json that `benchy run` or `capacity` saved), which -o pointed at by mistake."""
    import json

    saved = output / "results.json"
    if not saved.is_file():
        return
    try:
        command = str(json.loads(saved.read_text(encoding="utf-8")).get("setup", {}).get("command_line") or "")
    except (OSError, ValueError, AttributeError):
        command = ""
    if command.startswith(("benchy run", "benchy capacity")):
        raise click.ClickException(
            f"{output} holds a run's results ({command}): the demo replaces its folder's "
            "files, so give it a folder of its own (-o)"
        )


def _link_inner_reports(output: Path) -> None:
    """report.html again, from the saved results, now that dataset/report.html exists beside
    it: the page links the reports of its sub-folders (report/html.py folder_reports)."""
    from benchy.report import html
    from benchy.results import files

    if (output / "results.json").is_file() and (output / html.FILE).is_file():
        html.write(files.read(output / "results.json"), output)
