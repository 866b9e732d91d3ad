"""The prefix-cache probe's report, from a probe dict only: a Markdown table (shared prefix:
first, then repeats; unique prefix; speed-up; cached tokens; verdict), a PNG of every TTFT, and
probe.json / probe.md / probe.png in an output folder."""

from __future__ import annotations

import json
from pathlib import Path

from tabulate import tabulate

VERDICT_TEXT = {
    "detected": "cache detected",
    "not_detected": "not detected",
    "cache_hit_no_gain": "cache hit reported, no TTFT gain",
    "inconclusive": "inconclusive",
}


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _ttfts(values: list) -> str:
    return ", ".join(seconds(v) for v in values) or "none"


def _cached(side: dict) -> str:
    values = [c for c in side["cached_tokens"] if c is not None]
    if not values:
        return "not reported"
    return f"{min(values):,}" if min(values) == max(values) else f"{min(values):,}–{max(values):,}"


def table(probe: dict) -> str:
    headers = [
        "prompt tokens",
        "shared prefix TTFT (first, then repeats)",
        "unique prefix TTFT",
        "speed-up",
        "cached tokens (repeats / unique)",
        "verdict",
    ]
    with_gpu = any(e.get("gpu") for e in probe["lengths"])
    if with_gpu:
        headers.append("GPU J/request (W)")
    rows = []
    for e in probe["lengths"]:
        shared = e["shared"]["ttft_s"]
        first, repeats = (shared[0], shared[1:]) if shared else (None, [])
        speedup = f"{e['speedup']:.2f}×" if e.get("speedup") else "n/a"
        tokens = f"{e['prompt_tokens']:,}" if e.get("prompt_tokens") else f"~{e['length']:,}"
        cached = f"{_cached({'cached_tokens': e['shared']['cached_tokens'][1:]})} / {_cached(e['unique'])}"
        rows.append(
            [
                tokens,
                f"{seconds(first)}, then {_ttfts(repeats)}",
                _ttfts(e["unique"]["ttft_s"]),
                speedup,
                cached,
                VERDICT_TEXT[e["verdict"]],
            ]
            + ([gpu_cell(e.get("gpu"))] if with_gpu else [])
        )
    return tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True)


def gpu_cell(gpu: dict | None) -> str:
    """Energy per request over both sides of a length (--gpu-metrics), or why there is none."""
    if not gpu:
        return "n/a"
    per_request = gpu.get("joules_per_request")
    if per_request is None:
        why = (gpu.get("unavailable") or {}).get("joules_per_request", "not measured")
        return f"n/a ({why})"
    watts = gpu.get("power_w")
    return f"{per_request:.3g}" + (f" ({watts:,.0f} W)" if watts is not None else "")


def reasons(probe: dict) -> list[str]:
    out = []
    for e in probe["lengths"]:
        capped = (
            f" (capped from {e['length_asked']:,} by the model's context)" if e["length_asked"] != e["length"] else ""
        )
        failed = f"; {e['n_failed']} requests failed ({_kinds(e['errors'])})" if e["n_failed"] else ""
        failed += "".join(f"; first {k}: {msg}" for k, msg in sorted((e.get("first_errors") or {}).items()))
        out.append(f"- {e['length']:,} tokens{capped}: **{VERDICT_TEXT[e['verdict']]}**: {e['reason']}{failed}")
    return out


def _kinds(errors: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))


def markdown(probe: dict, figure: str | None = None) -> str:
    setup = probe["setup"]
    lines = [
        f"# benchy prefix-cache probe: {setup['model']}",
        "",
        "| | |",
        "|---|---|",
        f"| Server | {setup['base_url']} |",
        f"| Server version | {setup.get('server_version') or 'not reported'} |",
        f"| Context | {setup['context_length'] or 'not reported'} tokens |",
        f"| Requests | {setup['n']} shared-prefix + {setup['n']} unique-prefix per length, interleaved, "
        f"{setup['output_tokens']} output tokens each |",
        f"| Test | one-sided Welch t on log TTFT (α = {setup['alpha']}), speed-up ≥ {setup['min_speedup']}× "
        "to count as a cache; Mann–Whitney U where n allows |",
        f"| Started (UTC) | {setup['started_utc']} |",
        "",
        "The first shared-prefix request pays for prefill; the repeats may be served from cache. "
        "Speed-up = median unique TTFT ÷ median repeat TTFT.",
        "",
        table(probe),
        "",
        *reasons(probe),
        "",
    ]
    if figure:
        lines += [f"![TTFT, shared vs unique prefix]({figure})", ""]
    return "\n".join(lines)


def plot(probe: dict, path: Path) -> Path:
    """Every TTFT of the probe, in ms on a log axis (a cache hit is 10-100x faster), one column
    per length: the first shared-prefix request, its repeats, the unique-prefix requests. A
    length whose requests failed says how many and why in its column; the legend sits below
    the axes, never on a point."""
    from benchy.report import plots  # the headless backend and the axis helpers

    plt = plots.plt
    lengths = probe["lengths"]
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    groups = (
        ("first shared prefix", "#d62728", "o"),
        ("shared prefix, repeats", "#1f77b4", "s"),
        ("unique prefix", "#7f7f7f", "^"),
    )
    for i, e in enumerate(lengths):
        shared = e["shared"]["ttft_s"]
        values = (shared[:1], shared[1:], e["unique"]["ttft_s"])
        for j, ((label, color, marker), ys) in enumerate(zip(groups, values)):
            ms = [y * 1000 for y in ys if y is not None]
            xs = [i + (j - 1) * 0.22] * len(ms)
            ax.scatter(xs, ms, color=color, marker=marker, s=30, label=label if i == 0 else None, zorder=3)
        if e.get("n_failed"):
            ax.annotate(
                _failed_text(e),
                (i, 0.03),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="bottom",
                fontsize=8,
                color="#d62728",
            )
    ax.set_xticks(range(len(lengths)))
    ax.set_xticklabels([f"{e['length']:,} tokens\n{VERDICT_TEXT[e['verdict']]}" for e in lengths])
    ax.set_xlim(-0.6, len(lengths) - 0.4)
    measured = [t for e in lengths for side in ("shared", "unique") for t in e[side]["ttft_s"] if t is not None]
    if measured:
        ax.set_yscale("log")
        low, high = min(measured) * 1000, max(measured) * 1000
        ax.set_ylim(low / 3, high * 2)  # room below for the failure notes
        ax.yaxis.set_major_locator(plots.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_minor_locator(plots.NullLocator())
        ax.yaxis.set_major_formatter(plots.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}"))
        ax.set_ylabel("TTFT, ms (log scale)")
    else:  # every TTFT unavailable: say so rather than draw empty axes
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no TTFT could be measured", transform=ax.transAxes, ha="center")
    ax.set_title(f"Prefix-cache probe: {probe['setup']['model']}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, fontsize=8, frameon=False)
    return plots.save(fig, path)


def _failed_text(entry: dict) -> str:
    """ "4 of 6 failed: timeout" (the kinds, most frequent first)."""
    total = entry["n_ok"] + entry["n_failed"]
    kinds = ", ".join(k for k, _ in sorted(entry.get("errors", {}).items(), key=lambda kv: -kv[1]))
    return f"{entry['n_failed']} of {total} failed" + (f": {kinds}" if kinds else "")


def write(probe: dict, directory: Path) -> list[Path]:
    """probe.json, probe.png and probe.md in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / "probe.json"
    tmp = data.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(probe, indent=1) + "\n", encoding="utf-8")
    tmp.replace(data)
    png = plot(probe, directory / "probe.png")
    md = directory / "probe.md"
    md.write_text(markdown(probe, png.name), encoding="utf-8")
    return [data, png, md]
