"""A --dataset run's lengths: what each case asked for and what the server counted, prompt and
output, as a table (beside the load table) and a figure. Real text has no single pp or tg: a
natural case's lengths are each entry's own, and a fitted one is only as exact as its count."""

from __future__ import annotations

import math
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
    named = f" [{data.name}]"  # the endpoint may follow it (workloads/case.py)
    return [c for c in results.cases if c.kind == "dataset" or named in c.label]


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
                ax.hist(asked, bins=token_bins(asked), histtype="step", linestyle="--", label=f"{case.label}: asked")
            if served:
                ax.hist(served, bins=token_bins(served), histtype="step", label=f"{case.label}: served")
        # whole tokens and whole requests: a constant length drew ticks at 15.6, 15.8 … and 0.5 requests
        low, high = ax.get_xlim()
        if high - low < MIN_SPAN:  # one length: a bar amid a few tokens of room, not the whole panel
            middle = (low + high) / 2
            ax.set_xlim(middle - MIN_SPAN / 2, middle + MIN_SPAN / 2)
        ax.xaxis.set_major_locator(plots.MaxNLocator(integer=True, min_n_ticks=1))
        ax.yaxis.set_major_locator(plots.MaxNLocator(integer=True, min_n_ticks=1))
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


MAX_BINS = 20
MIN_SPAN = 10  # tokens: the narrowest x range a lengths panel shows


def token_bins(values: list[int]) -> list[float]:
    """Bin edges for token counts: whole tokens wide (or a whole multiple), each centred on its
    counts, at most MAX_BINS; a constant length is one bar over its value, not a sliver of the
    20 bins matplotlib spreads over [v − 0.5, v + 0.5]."""
    low, high = min(values), max(values)
    width = max(1, math.ceil((high - low + 1) / MAX_BINS))
    count = math.ceil((high - low + 1) / width)
    return [low - 0.5 + k * width for k in range(count + 1)]
