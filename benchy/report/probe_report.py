"""The prefix-cache probe's report, from probe.json's content only (results/probe.py; the views
read its saved dict, the file's own form): a Markdown table (shared prefix:
first, then repeats; unique prefix; speed-up; cached tokens; verdict), a PNG of every TTFT, and
probe.json / probe.md / probe.png in an output folder. With --capacity: the cliff beside the
size the server states, a table of every working set tried, and capacity.png (hit rate against
working set)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tabulate import tabulate

from benchy.measure import stats
from benchy.report import html_probe
from benchy.results import probe as probe_file
from benchy.results.probe import ProbeResult

VERDICT_TEXT = {
    "detected": "cache detected",
    "not_detected": "not detected",
    "cache_hit_no_gain": "cache hit reported, no TTFT gain",
    "partial_hits": "cache hit on some repeats",
    "inconclusive": "inconclusive",
}


def seconds(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _ttfts(values: list[Any]) -> str:
    return ", ".join(seconds(v) for v in values) or "none"


def _cached(side: dict[str, Any]) -> str:
    values = [c for c in side["cached_tokens"] if c is not None]
    if not values:
        return "not reported"
    return f"{min(values):,}" if min(values) == max(values) else f"{min(values):,}–{max(values):,}"


def table(probe: dict[str, Any]) -> str:
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
        if e.get("hit_fraction") is not None:
            speedup = f"{e['gain_on_hits']:.1f}× on hits ({e['hit_fraction']:.0%} of repeats)"
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
    table: str = tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True)
    return table


def gpu_cell(gpu: dict[str, Any] | None) -> str:
    """Energy per request over both sides of a length (--gpu-metrics), or why there is none."""
    if not gpu:
        return "n/a"
    per_request = gpu.get("joules_per_request")
    if per_request is None:
        why = (gpu.get("unavailable") or {}).get("joules_per_request", "not measured")
        return f"n/a ({why})"
    watts = gpu.get("power_w")
    return f"{per_request:.3g}" + (f" ({watts:,.0f} W)" if watts is not None else "")


def reasons(probe: dict[str, Any]) -> list[str]:
    out = []
    for e in probe["lengths"]:
        capped = (
            f" (capped from {e['length_asked']:,} by the model's context)" if e["length_asked"] != e["length"] else ""
        )
        failed = f"; {e['n_failed']} requests failed ({_kinds(e['errors'])})" if e["n_failed"] else ""
        failed += "".join(f"; first {k}: {msg}" for k, msg in sorted((e.get("first_errors") or {}).items()))
        out.append(f"- {e['length']:,} tokens{capped}: **{VERDICT_TEXT[e['verdict']]}**: {e['reason']}{failed}")
    for skipped in probe["setup"].get("lengths_not_probed") or []:
        out.append(f"- {skipped['asked']:,} tokens: **not probed**: {skipped['reason']}")
    return out


def _kinds(errors: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))


def saved(probe: ProbeResult | dict[str, Any]) -> dict[str, Any]:
    """The probe as probe.json holds it: what every view here reads (a dict is checked against
    the typed form first, so a malformed one fails here with the field's name)."""
    typed = probe if isinstance(probe, ProbeResult) else ProbeResult.from_dict(probe)
    return typed.to_dict()


def text(result: ProbeResult | dict[str, Any]) -> str:
    """What the terminal shows: the length table and verdicts, and the capacity finding."""
    probe = saved(result)
    parts = []
    if probe["lengths"]:
        parts.append(table(probe) + "\n\n" + "\n".join(reasons(probe)))
    if probe.get("capacity"):
        parts.append("\n".join(capacity_lines(probe["capacity"])))
    if probe.get("images"):
        parts.append("\n".join(image_lines(probe["images"])))
    return "\n\n".join(parts)


def image_lines(entry: dict[str, Any]) -> list[str]:
    """probe-cache --images: the two sides' median TTFTs and the verdict, in a few lines."""
    repeats = [t for t in entry["shared"]["ttft_s"][1:] if t is not None]  # the first send fills the cache
    unique = [t for t in entry["unique"]["ttft_s"] if t is not None]
    medians = [seconds(stats.median(ts)) if ts else "n/a" for ts in (repeats, unique)]
    tokens = _tokens(entry.get("image_tokens"))
    return [
        f"Image cache: {entry['width']}x{entry['height']} PNG ({tokens} image tokens) after a "
        f"{entry['length']}-token unique text; median TTFT of the same image again {medians[0]}, "
        f"of a unique image {medians[1]}.",
        f"Verdict: {entry['verdict']}: {entry['reason']}",
        "",
    ]


def _tokens(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def capacity_lines(cap: dict[str, Any]) -> list[str]:
    """The capacity finding, the server's stated size, and one row per working set tried."""
    stated = cap.get("stated") or {}
    found = (
        f"**{_tokens(cap['cliff_tokens'])} ± {_tokens(cap['uncertainty_tokens'])} tokens**"
        if cap.get("cliff_tokens") is not None
        else "**not found**"
    )
    says = (
        f"{stated['tokens']:,} tokens ({stated['source']}{'; ' + stated['reason'] if stated.get('reason') else ''})"
        if stated.get("tokens")
        else f"not stated ({stated.get('reason') or 'not asked'})"
    )
    rows = [
        [
            p["prefixes"],
            _tokens(p["working_set_tokens"]),
            f"{p['hits']} / {p['judged']}",
            "n/a" if p["hit_fraction"] is None else f"{p['hit_fraction']:.0%}",
            p["evidence"],
            seconds(p["first_ttft_s"]),
            seconds(p["reuse_ttft_s"]),
            p["n_failed"],
        ]
        for p in cap["points"]
    ]
    headers = [
        "prefixes",
        "working set (tokens)",
        "re-uses hit",
        "hit rate",
        "judged by",
        "first TTFT",
        "re-use TTFT",
        "failed",
    ]
    return [
        "## Cache capacity for reuse",
        "",
        f"Prefixes of {_tokens(cap['prefix_tokens'] or cap['prefix_tokens_asked'])} tokens, each re-used after "
        "all the others were sent; "
        f"the cliff is where fewer than {cap['hit_share']:.0%} of re-uses hit.",
        "",
        f"- Measured: {found}: {cap['reason']}",
        f"- The server says its KV cache holds: {says}",
        "",
        tabulate(rows, headers=headers, tablefmt="pipe", disable_numparse=True),
        "",
    ]


def capacity_finding(cap: dict[str, Any]) -> str:
    """The finding in words; where no cliff was found, how far the sweep looked (≥ its largest set)."""
    if cap.get("cliff_tokens") is not None:
        return f"cliff at {cap['cliff_tokens']:,.0f} ± {cap['uncertainty_tokens'] or 0:,.0f} tokens"
    tried = [p["working_set_tokens"] for p in cap["points"] if p["working_set_tokens"]]
    return f"not found: ≥ {max(tried):,.0f} tokens (every working set tried was served)" if tried else "not found"


def plot_capacity(cap: dict[str, Any], path: Path) -> Path:
    """Hit rate against working set (log2 tokens): the cliff's bracket shaded, the server's
    stated size as a line."""
    from benchy.report import plots

    plt = plots.plt
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    points = [p for p in cap["points"] if p["hit_fraction"] is not None and p["working_set_tokens"]]
    ax.plot(
        [p["working_set_tokens"] for p in points],
        [100 * p["hit_fraction"] for p in points],
        marker="o",
        color="#1f77b4",
        label="re-uses that hit",
    )
    if cap.get("cliff_tokens") is not None and cap.get("uncertainty_tokens") is not None:
        low, high = cap["cliff_tokens"] - cap["uncertainty_tokens"], cap["cliff_tokens"] + cap["uncertainty_tokens"]
        ax.axvspan(max(low, 1), high, color="#ff7f0e", alpha=0.2, label="measured cliff")
    stated = (cap.get("stated") or {}).get("tokens")
    if stated:
        ax.axvline(stated, color="#d62728", linestyle="--", label="the server's stated KV cache")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(plots.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    ax.set_xlabel("working set: distinct prefixes × prompt tokens")
    ax.set_ylabel("re-uses served from cache, %")
    ax.set_ylim(-5, 105)
    ax.set_title(f"Prefix-cache capacity for reuse: {capacity_finding(cap).split(' (')[0]}")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)
    return plots.save(fig, path)


def _requests_row(probe: dict[str, Any]) -> str:
    """What was sent: the per-length probe's pairs, or --capacity's passes of distinct prefixes."""
    setup = probe["setup"]
    tg = f"{setup['output_tokens']} output tokens each"
    if probe["lengths"] or not probe.get("capacity"):
        return f"| Requests | {setup['n']} shared-prefix + {setup['n']} unique-prefix per length, interleaved, {tg} |"
    cap = probe["capacity"]
    return (
        f"| Requests | passes of K distinct {cap['prefix_tokens_asked']:,}-token prefixes, each sent once and then "
        f"again in the same order (K doubling, then bisected), {tg} |"
    )


def markdown(probe: dict[str, Any], figure: str | None = None, capacity_figure: str | None = None) -> str:
    setup = probe["setup"]
    lines = [
        f"# benchy prefix-cache probe: {setup['model']}",
        "",
        "| | |",
        "|---|---|",
        f"| Server | {setup['base_url']} |",
        f"| Server version | {setup.get('server_version') or 'not reported'} |",
        f"| Context | {setup['context_length'] or 'not reported'} tokens |",
        _requests_row(probe),
        f"| Test | one-sided Welch t on log TTFT (α = {setup['alpha']}), speed-up ≥ {setup['min_speedup']}× "
        "to count as a cache; Mann–Whitney U where n allows |",
        f"| Started (UTC) | {setup['started_utc']} |",
        "",
    ]
    if probe.get("stopped"):  # a probe killed before it saved, rebuilt from its bundle
        lines[-1:-1] = [f"| Stopped early | {probe['stopped']['reason']} |"]
    reset = setup.get("cache_reset")
    if reset:
        last = reset.get("last") or {}
        lines[-1:-1] = [f"| --cache-reset | {reset['calls']} call(s); {last.get('message', 'none made')} |"]
    if probe["lengths"]:
        lines += [
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
    if probe.get("images"):
        lines += image_lines(probe["images"])
    if probe.get("capacity"):
        lines += capacity_lines(probe["capacity"])
        if capacity_figure:
            lines += [f"![hit rate against working set]({capacity_figure})", ""]
    return "\n".join(lines)


def plot(probe: dict[str, Any], path: Path) -> Path:
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


def _failed_text(entry: dict[str, Any]) -> str:
    """ "4 of 6 failed: timeout" (the kinds, most frequent first)."""
    total = entry["n_ok"] + entry["n_failed"]
    kinds = ", ".join(k for k, _ in sorted(entry.get("errors", {}).items(), key=lambda kv: -kv[1]))
    return f"{entry['n_failed']} of {total} failed" + (f": {kinds}" if kinds else "")


def write(result: ProbeResult | dict[str, Any], directory: Path) -> list[Path]:
    """probe.json, probe.png, probe.md and report.html in `directory`."""
    typed = result if isinstance(result, ProbeResult) else ProbeResult.from_dict(result)
    probe = typed.to_dict()
    written = [probe_file.save(typed, directory)]
    png = plot(probe, directory / "probe.png") if probe["lengths"] else None
    cap = plot_capacity(probe["capacity"], directory / "capacity.png") if probe.get("capacity") else None
    md = directory / "probe.md"
    md.write_text(markdown(probe, png.name if png else None, cap.name if cap else None), encoding="utf-8")
    cap_dict = probe.get("capacity")
    text = html_probe.ProbeText(
        table(probe) if probe["lengths"] else "",
        reasons(probe),
        "\n".join(capacity_lines(cap_dict)) if cap_dict else "",
        capacity_finding(cap_dict) if cap_dict else "",
    )
    page = html_probe.write_probe(probe, directory, text)
    return written + [p for p in (png, cap) if p] + [md, page]
