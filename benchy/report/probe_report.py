"""The prefix-cache probe's report, from a probe dict only: a Markdown table like field report
003's (shared prefix: first, then repeats; unique prefix; speed-up; cached tokens; verdict), a
PNG of every TTFT, and probe.json / probe.md / probe.png in an output folder."""

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
        )
    return tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True)


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
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    groups = (("first shared", "#d62728", "o"), ("shared repeats", "#1f77b4", "s"), ("unique", "#7f7f7f", "^"))
    for i, e in enumerate(probe["lengths"]):
        shared = e["shared"]["ttft_s"]
        values = (shared[:1], shared[1:], e["unique"]["ttft_s"])
        for j, ((label, color, marker), ys) in enumerate(zip(groups, values)):
            ys = [y for y in ys if y is not None]
            xs = [i + (j - 1) * 0.22] * len(ys)
            ax.scatter(xs, ys, color=color, marker=marker, s=28, label=label if i == 0 else None, zorder=3)
    ax.set_xticks(range(len(probe["lengths"])))
    ax.set_xticklabels([f"{e['length']:,} tok\n{VERDICT_TEXT[e['verdict']]}" for e in probe["lengths"]])
    if any(t is not None for e in probe["lengths"] for side in ("shared", "unique") for t in e[side]["ttft_s"]):
        ax.set_yscale("log")
    else:  # every TTFT unavailable (e.g. a buffered stream): say so rather than plot nothing
        ax.text(0.5, 0.5, "no TTFT could be measured", transform=ax.transAxes, ha="center")
    ax.set_ylabel("TTFT (s, log scale)")
    ax.set_title(f"Prefix-cache probe: {probe['setup']['model']}")
    ax.grid(True, which="both", axis="y", alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


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
