"""report.md from a saved results file: setup, table, warnings. Reads nothing else."""

from __future__ import annotations

from typing import Any

from benchy.measure import stats
from benchy.measure.ceiling import CeilingSetup
from benchy.measure.registry import METRICS
from benchy.measure.sanity.canary import Canary
from benchy.report import gpu_view, images_view, pooled_view, server_view, table, tails, workloads
from benchy.results.types import MetricSummary, PromptLengths, RunResult, Setup


def setup_lines(results: RunResult) -> list[str]:
    return [f"| {k} | {v} |" for k, v in setup_rows(results)]


def setup_rows(results: RunResult) -> list[tuple[str, str]]:
    """The setup table's (name, value) rows, for report.md and report.html alike."""
    setup = results.setup
    template = setup.calibration.overhead_tokens if setup.calibration else 0.0
    rows = [
        ("Server", setup.base_url),
        ("Model", setup.model),
        ("Server version", server_version_text(setup.server_version)),
        ("Endpoint", setup.endpoint),
        *server_view.setup_rows(results),
        *gpu_view.setup_rows(results),
        ("Hardware profile", hardware_text(setup.hardware, setup.ceiling)),
        ("Model profile", setup.model_profile),
        ("Decode ceiling", ceiling_text(setup.ceiling)),
        (
            "Prompt nonce",
            "yes (no prefix cache can serve a request)"
            if results.prompt_nonce
            else "NO (--no-nonce: requests share prefixes; the server's cache may serve them)",
        ),
        ("Runs per case", f"{setup.runs} (+{setup.warmup} warmup, not counted)"),
        ("Chat template", f"{template:.0f} tokens (calibrated from the server's usage)"),
        ("Prompt lengths", prompt_lengths_text(setup.calibration.lengths if setup.calibration else None)),
        ("Canary", canary_text(setup.canary)),
        ("benchy", setup.benchy_version),
        ("Command", f"`{setup.command_line}`" if setup.command_line else None),
        ("Started (UTC)", setup.started_utc),
        ("Host", setup.host),
        ("Client ceiling", client_ceiling_text(setup)),
    ]
    return [(k, v) for k, v in _without_repeats(rows) if v is not None]


def canary_text(found: Canary | None) -> str | None:
    """--canary's outcome in one line: passed of asked, each failure by name, the perplexity."""
    if found is None:
        return None
    failed = [a.name for a in found.answers if not a.passed]
    said = f"{found.passed} of {len(found.answers)} fixed prompts answered right"
    said += f" (wrong: {', '.join(failed)})" if failed else ""
    if found.perplexity is not None:
        return f"{said}; perplexity of the fixed passage {found.perplexity:.3f}"
    return f"{said}; no perplexity ({found.perplexity_unavailable})"


LENGTH_SOURCES = {
    "server_tokenize": "exact: counted by the server's /tokenize",
    "tokenizer_file": "exact: counted by --tokenizer",
    "server_usage": "exact: counted by the server's usage of tiny requests",
    "o200k_calibrated": "estimated: benchy's o200k count, calibrated",
}


def prompt_lengths_text(lengths: PromptLengths | None) -> str | None:
    """How prompt lengths were made (load/lengths.py), with why an exact source was not used."""
    if lengths is None:
        return None
    text = LENGTH_SOURCES.get(lengths.method, lengths.method)
    if lengths.words is not None:
        text += f" ({lengths.words} filler words one token each there)"
    return text + (f" ({lengths.reason})" if lengths.reason else "")


def client_ceiling_text(setup: Setup) -> str | None:
    """This host's cached `benchy selftest`, and the share a case may drive before it is flagged."""
    found = setup.client_ceiling
    if not found or found.requests_per_s is None or found.events_per_s is None:
        return None
    return (
        f"{found.requests_per_s:,.0f} requests/s, {found.events_per_s:,.0f} SSE events/s per worker process "
        f"(benchy selftest, {found.measured_utc}); a case driving over half of either is flagged client_bound"
    )


def _without_repeats(rows: list[tuple[str, str | None]]) -> list[tuple[str, str | None]]:
    """The Engine row drops when the Server version row already says the same (benchy-sim
    0.1.0 twice); an engine that adds something (vllm 0.11 beside a server header) stays."""
    version = next((v for k, v in rows if k == "Server version"), None) or ""
    return [(k, v) for k, v in rows if not (k == "Engine" and v and version.startswith(v))]


def hardware_text(hardware: str | None, ceiling: CeilingSetup | None) -> str | None:
    """The hardware profile and what vouches for it: a GPU's own name, or only --hardware."""
    if not hardware or ceiling is None or ceiling.hardware_confirmed is None:
        return hardware
    if ceiling.hardware_confirmed:
        return f"{hardware} (the GPU's own name, read by --gpu-metrics)"
    return (
        f"{hardware} (stated by --hardware, not confirmed: no GPU name was read; --gpu-metrics "
        "reads it, and nothing else a server answers names its device)"
    )


def ceiling_text(ceiling: CeilingSetup | None) -> str | None:
    """How the bandwidth ceiling was set, and that it is a conservative bound."""
    if not ceiling:
        return None
    if ceiling.missing:
        return f"none: {ceiling.missing}"
    if ceiling.bandwidth_gbs is None or ceiling.active_bytes_per_token is None:
        raise ValueError("setup.ceiling has neither its bandwidth and weights nor why they are missing")
    source = ceiling.model_profile_source
    profile = f"{ceiling.model_profile} ({source})" if ceiling.model_profile else "custom"
    return (
        f"{ceiling.bandwidth_gbs:g} GB/s ÷ ({ceiling.active_bytes_per_token / 1e9:.2f} GB of "
        f"weights + the KV cache) per token, {profile}: a conservative upper bound on one "
        "stream's decode rate (peak bandwidth, weights at their smallest); a rate above it is "
        "impossible"
    )


def warning_lines(results: RunResult) -> list[str]:
    warnings = results.warnings
    if all(w.severity == "info" for w in warnings):
        out = ["No warnings: every case is clean."] + ([""] if warnings else [])
    else:
        out = []
    for w in warnings:
        where = f" ({w.case})" if w.case else ""
        out.append(f"- **{w.severity}: `{w.code}`**{where}: {w.message}  \n  Hint: {w.hint}")
    return out


def server_version_text(version: str | None) -> str:
    if not version:
        return "not reported"
    if version.startswith("benchy-sim"):  # say it where a reader looks, not only in a README
        return f"{version} (benchy's embedded simulator: simulated timings, no GPU)"
    return version


def overview_line(results: RunResult) -> str:
    cases = results.cases
    ok = sum(c.n_ok for c in cases)
    failed = sum(c.n_failed for c in cases)
    scenarios = list(dict.fromkeys(c.scenario for c in cases if c.scenario))
    text = f"{len(cases)} case{'' if len(cases) == 1 else 's'}" + (
        f" (scenarios: {', '.join(scenarios)})" if scenarios else ""
    )
    text += f", {ok} measured request{'' if ok == 1 else 's'} succeeded"
    text += f", {failed} failed." if failed else ", none failed."
    return (
        text + " Every number below comes from `results.json` in this folder; "
        "per-request details are in `requests.jsonl`."
    )


def figure_lines(figures: list[tuple[Any, ...]]) -> list[str]:
    """figures: (title, relative path) or (title, relative path, caption)."""
    if not figures:
        return []
    out = ["## Figures", ""]
    for fig_title, path, *caption in figures:
        out += [f"### {fig_title}", ""] + ([f"![{fig_title}]({path})", ""] if path else [])
        if caption and caption[0]:
            out += [caption[0], ""]
    return out


def terminal(results: RunResult) -> str:
    """What `benchy run` prints: the table, then what the whole-run latencies can hide (an open
    loop's latencies from the schedule, a closed loop's steady state), as report.md has them."""
    extra = images_view.lines(results) + tails.schedule_lines(results, _ms) + tails.steady_lines(results, _ms)
    return table.markdown(results) + ("\n\n" + "\n".join(extra).rstrip() if extra else "")


def _ms(summary: MetricSummary | None, key: str) -> str:
    value = getattr(summary, key) if summary else None
    if value is None:
        return "n/a"
    if summary and not stats.enough_for(key, summary.n):
        return stats.TOO_FEW
    low, high = (getattr(summary, f"{key}_{end}", None) for end in ("low", "high")) if summary else (None, None)
    bounds = f" [{_ms_text(low)}–{_ms_text(high)}]" if low is not None and high is not None else ""
    return _ms_text(value) + bounds


def _ms_text(seconds: float) -> str:
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def _ci(summary: MetricSummary | None) -> str:
    if not summary:
        return "n/a"
    if not stats.enough_for("ci95", summary.n) or not summary.ci95:
        return f"{stats.TOO_FEW} (n = {summary.n})"
    low, high = summary.ci95
    return f"{low:.1f} – {high:.1f}"


def detail_lines(results: RunResult) -> list[str]:
    """Spread and tails: what a median ± std hides."""
    cases = results.cases
    if not cases:
        return []
    if pooled_view.all_pooled(cases):  # no throughput, TTFT or event to show: the latency alone
        return pooled_view.tail_lines(cases, _ms)
    out = [
        "## Spread and tail latency",
        "",
        "95% CI: a bootstrap confidence interval of the median e2e t/s (the range that likely holds "
        "the true median). p50/p90/p99: the latency that 50/90/99% of requests stayed under. "
        "[low–high] after a p90 or p99: the true percentile is at least low with 99% confidence, and "
        "at most high, whatever the distribution (order statistics). "
        f"'{stats.TOO_FEW}': fewer requests than the figure needs: a CI {stats.SHOWN_FROM['ci95']}; a p90 "
        f"{stats.SHOWN_FROM['p90']} and a p99 {stats.SHOWN_FROM['p99']}, the fewest whose high end lies "
        "below the largest value (MLPerf's early-stopping rule). "
        "tokens/event: generated tokens per streamed event (about 1 when the stream is live; "
        "much more means the server buffers its output).",
        "",
        "| test | e2e t/s 95% CI | TTFT p50 / p90 / p99 ms | total latency p50 / p90 / p99 ms | tokens/event |",
        "|---|---|---|---|---|",
    ]
    for case in cases:
        summary = case.summary
        ttft, e2e, tpe = summary.get("ttft_s"), summary.get("e2e_s"), summary.get("tokens_per_event")
        out.append(
            f"| {case.label} | {_ci(summary.get('e2e_tps'))} | "
            f"{_ms(ttft, 'median')} / {_ms(ttft, 'p90')} / {_ms(ttft, 'p99')} | "
            f"{_ms(e2e, 'median')} / {_ms(e2e, 'p90')} / {_ms(e2e, 'p99')} | "
            + (f"{tpe.median:.1f} |" if tpe else "n/a |")
        )
    return out + [""]


def metric_lines() -> list[str]:
    """One bullet per metric the report shows, from the registry (registry.METRICS)."""
    out = []
    for m in (m for m in METRICS.values() if m.glossary):
        meaning = f" {m.explanation[0].upper()}{m.explanation[1:]}" if m.explanation else ""
        out.append(f"- **{m.title}** = {m.definition}.{meaning}")
    return out


GLOSSARY_HEAD = """## How to read this report

- **Case** (`pp512 tg128 c4 @ d4096`): 512 prompt tokens, 128 generated tokens, 4 requests in
  flight at once, after 4,096 tokens of earlier context. Warmup requests run first and are not counted.
  `r4` instead of `c4`: open loop, requests arriving at 4 per second whether or not earlier ones finished."""

GLOSSARY_TAIL = """- **median ± std, n**: the middle value of the measured requests, their sample standard deviation, and
  how many succeeded. Failed requests are counted in *errors*, never averaged in.
- **n/a [k]**: benchy could not measure that number honestly; footnote k says why (for example a
  buffered stream, where event times show the buffer, not the model). It prints no number rather than
  a wrong one.
- **Prompt nonce**: every prompt starts with a unique random string, so no server-side prefix cache can
  serve any part of it beyond the chat template; the server really processed every prompt token.
  Without it (`--no-nonce`) repeated prompts may be served from cache and prefill looks far faster.
- **ceiling t/s** (when a hardware profile is set): the fastest one stream could decode if every
  token read the model's active weights and KV cache at the memory's peak bandwidth. Real servers
  stay well below it; a rate above 100% was not measured correctly.
- **Figures**: points are medians, error bars ± one standard deviation; a metric benchy could not
  measure is left out of a figure, and the text under it says which and why.
- **Warnings** are benchy's checks on these results; each says what is affected and what to do.
"""


def glossary() -> str:
    return "\n".join([GLOSSARY_HEAD, *metric_lines(), GLOSSARY_TAIL])


def render(
    results: RunResult,
    figures: list[tuple[Any, ...]] | None = None,
    server_figure: tuple[Any, ...] | None = None,
    gpu_figure: tuple[Any, ...] | None = None,
) -> str:
    """figures: (title, relative path[, caption]) tuples to embed; server_figure and gpu_figure:
    the same for the server view's and the GPUs' figures, embedded in their sections."""
    title = f"# benchy report: {results.setup.model}"
    parts = [title, "", overview_line(results), ""]
    if results.partial:
        parts += ["> **Partial run**: interrupted or stopped early; only finished requests are shown.", ""]
    parts += ["## Setup", "", "| | |", "|---|---|", *setup_lines(results), ""]
    parts += [
        "## Results",
        "",
        pooled_view.RESULTS_HEAD
        if pooled_view.all_pooled(results.cases)
        else "Median ± sample standard deviation over the measured requests of each case "
        "(n = successful requests). e2e t/s = completion tokens ÷ total request time.",
        "",
        table.markdown(results),
        "",
    ]
    parts += images_view.lines(results)
    parts += [f"- Not measured: {item.case} ({item.reason})" for item in results.not_measured]
    parts += [""] if results.not_measured else []
    parts += workloads.section_lines(results)
    parts += ["## Warnings", "", *warning_lines(results), ""]
    parts += server_view.section_lines(results, server_figure)
    parts += gpu_view.section_lines(results, gpu_figure)
    parts += figure_lines(figures or [])
    parts += detail_lines(results)
    parts += tails.schedule_lines(results, _ms)
    parts += tails.steady_lines(results, _ms)
    parts += [glossary()]
    return "\n".join(parts)
