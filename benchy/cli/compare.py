"""`benchy compare`: runs (or capacity searches) set against a baseline."""

from __future__ import annotations

from pathlib import Path

import click

from benchy.cli.output import claim_folder


@click.command()
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
def compare(
    results_files: tuple[Path, ...],
    output: Path | None,
    test: str,
    alpha: float,
    min_effect: float,
    allow_nonce_mismatch: bool,
    force: bool,
) -> None:
    """Compare runs case by case: the first file is the baseline, each other one is set against it."""
    from benchy.report import compare as compare_mod
    from benchy.report import compare_write, render
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
        claim_folder(output, force, keep=tuple(paths))  # one rule for every output folder
    for comp in comparisons:
        for warning in comp.warnings:
            click.echo(f"benchy: warning: {warning}", err=True)
    if output is not None:
        try:
            compare_write.write(comparisons, output)
        except OSError as exc:
            raise click.ClickException(f"cannot write the comparison: {exc}") from None
    click.echo(compare_mod.markdown(comparisons))


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
