"""A --dataset run's lengths: what each case asked for and what the server counted, prompt and
output, as a table (beside the load table) and a figure. Real text has no single pp or tg: a
natural case's lengths are each entry's own, and a fitted one is only as exact as its count."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from tabulate import tabulate

from benchy.results.types import CaseResult, RunResult

HEAD = (
    "Lengths of the dataset's requests (measured, in tokens): asked is the length benchy cut each "
    "prompt to (fitted; a natural prompt's is its own) and the output it asked for; served is what "
    "the server counted (usage)."
)


def dataset_cases(results: RunResult) -> list[CaseResult]:
    """The cases whose prompts came from --dataset: a natural case, or one labelled with its name."""
    data = results.setup.dataset
    if data is None:
        return []
    return [c for c in results.cases if c.kind == "dataset" or c.label.endswith(f"[{data.name}]")]


def _lengths(case: CaseResult) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"prompt asked": [], "prompt served": [], "output asked": [], "output served": []}
    for r in case.requests:
        if r.warmup or r.control:
            continue
        pairs = (
            ("prompt asked", r.target_prompt_tokens),
            ("prompt served", r.prompt_tokens),
            ("output asked", r.target_output_tokens),
            ("output served", r.completion_tokens),
        )
        for key, value in pairs:
            if value:  # a prompt target of 0: none asked (the text's own length)
                out[key].append(value)
    return out


def spread(values: list[int]) -> str:
    """`median (min–max)`, or one number when they are all equal; "its own" for none (a
    natural prompt or a dataset's message asks for no length)."""
    if not values:
        return "its own"
    ordered = sorted(values)
    low, high, middle = ordered[0], ordered[-1], ordered[len(ordered) // 2]
    return f"{low:,}" if low == high else f"{middle:,} ({low:,}–{high:,})"


def markdown(results: RunResult) -> str | None:
    """The lengths table of a --dataset run, None for any other run."""
    cases = dataset_cases(results)
    if not cases:
        return None
    headers = ["test", "prompt asked", "prompt served", "output asked", "output served"]
    rows = [[c.label, *(spread(v) for v in _lengths(c).values())] for c in cases]
    data = results.setup.dataset
    assert data is not None
    source = f"Dataset {data.name} ({data.format}, {data.entries} entries, sha256 {data.sha256[:12]}…), {data.mode}."
    table: str = tabulate(rows, headers=headers, tablefmt="pipe", stralign="right")
    return HEAD + " " + source + "\n\n" + table


def figures(plots: ModuleType, results: RunResult, directory: Path) -> list[Any]:  # of plots.Figure
    """One figure of the dataset cases' prompt and output lengths, asked against served
    (`plots`: report/plots.py, passed in as workload_plots does, since it imports the table)."""
    cases = [c for c in dataset_cases(results) if any(_lengths(c).values())]
    if not cases:
        return []
    fig, axes = plots.plt.subplots(1, 2, figsize=plots.WIDE)
    for ax, what in zip(axes, ("prompt", "output")):
        for case in cases:
            lengths = _lengths(case)
            asked, served = lengths[f"{what} asked"], lengths[f"{what} served"]
            if asked:
                ax.hist(asked, bins=20, histtype="step", linestyle="--", label=f"{case.label}: asked")
            if served:
                ax.hist(served, bins=20, histtype="step", label=f"{case.label}: served")
        ax.set_xlabel(f"{what} tokens")
        ax.set_ylabel("requests")
        ax.set_title(f"{what.capitalize()} lengths")
        ax.legend(fontsize=7)
    caption = (
        "Histograms of the measured requests' lengths: dashed, what benchy asked for (the prompt it "
        "built, the output it asked); solid, what the server counted. Apart curves mean the server "
        "counts the text otherwise than benchy's estimate, or cut an answer short."
    )
    path = plots.save(fig, directory / "dataset-lengths.png")
    return [plots.Figure("Dataset lengths: asked and served", path, caption)]
