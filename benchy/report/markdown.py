"""report.md from a saved results file: setup, table, warnings. Reads nothing else."""
from __future__ import annotations

from benchy.report import table


def setup_lines(results: dict) -> list[str]:
    setup = results.get("setup", {})
    cal = setup.get("calibration") or {}
    rows = [
        ("Server", setup.get("base_url")),
        ("Model", setup.get("model")),
        ("Server version", setup.get("server_version") or "not reported"),
        ("Endpoint", setup.get("endpoint")),
        ("Hardware profile", setup.get("hardware")),
        ("Model profile", setup.get("model_profile")),
        ("Prompt nonce", "yes (no prefix cache can serve a request)" if results.get("prompt_nonce")
         else "NO (--no-nonce: requests share prefixes; the server's cache may serve them)"),
        ("Runs per case", f"{setup.get('runs')} (+{setup.get('warmup')} warmup, not counted)"),
        ("Chat template", f"{cal.get('overhead_tokens', 0):.0f} tokens (calibrated from the server's usage)"),
        ("benchy", setup.get("benchy_version")),
        ("Command", f"`{setup.get('command_line')}`" if setup.get("command_line") else None),
        ("Started (UTC)", setup.get("started_utc")),
        ("Host", setup.get("host")),
    ]
    return [f"| {k} | {v} |" for k, v in rows if v is not None]


def warning_lines(results: dict) -> list[str]:
    warnings = results.get("warnings", [])
    if not warnings:
        return ["No warnings: every case is clean."]
    out = []
    for w in warnings:
        where = f" ({w['case']})" if w.get("case") else ""
        out.append(f"- **{w['severity']}: `{w['code']}`**{where}: {w['message']}  \n  Hint: {w['hint']}")
    return out


def render(results: dict, figures: list[tuple[str, str]] | None = None) -> str:
    """figures: (title, relative path) pairs to embed."""
    title = f"# benchy report: {results.get('setup', {}).get('model', 'unknown model')}"
    parts = [title, ""]
    if results.get("partial"):
        parts += ["> **Partial run**: interrupted or stopped early; only finished requests are shown.", ""]
    parts += ["## Setup", "", "| | |", "|---|---|", *setup_lines(results), ""]
    parts += ["## Results", "",
              "Median ± sample standard deviation over the measured requests of each case "
              "(n = successful requests). e2e t/s = completion tokens ÷ total request time.", "",
              table.markdown(results), ""]
    parts += ["## Warnings", "", *warning_lines(results), ""]
    for fig_title, path in figures or []:
        parts += [f"### {fig_title}", "", f"![{fig_title}]({path})", ""]
    return "\n".join(parts)
