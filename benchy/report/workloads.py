"""report.md sections and figures of the cache-aware workloads, from saved results only.

multi_turn: a table per case of TTFT, prefill rate of the new tokens, new tokens and cached
tokens reported vs expected, turn by turn, and a figure of TTFT and reuse by turn.
shared_prefix: TTFT and hit rates by shared fraction, the gain against the same lengths with
nothing shared, and a figure of TTFT by shared fraction. trace: expected vs reported reuse
(and a figure of it per request) and how closely the sends kept the trace's times.
Everything here is read from `case.workload` (benchy/measure/workloads.py) and the requests.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from benchy.measure.workloads import Reuse, ThinkSpec, WorkloadFigures
from benchy.report import agents_view
from benchy.results.types import CaseResult, RunResult

SECTION_TITLES = {
    "multi_turn": "Multi-turn conversations",
    "shared_prefix": "Shared prefixes",
    "trace": "Trace replay",
}


def cases_of(results: RunResult, kind: str) -> list[CaseResult]:
    return [c for c in results.cases if c.kind == kind and c.workload]


def sweep_results(results: RunResult) -> RunResult:
    """The results without workload cases, for the sweep's own figures (prompt-length axes
    mean nothing for a conversation or a trace)."""
    return dataclasses.replace(results, cases=[c for c in results.cases if c.kind == "sweep"])


def _num(value: float | None, fmt: str = ",.0f") -> str:
    return "n/a" if value is None else format(value, fmt)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    ms = seconds * 1000
    return f"{ms:,.0f}" if ms >= 100 else f"{ms:.1f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _reuse_line(reuse: Reuse) -> str:
    return (
        f"Reuse over {reuse.requests} requests: an ideal prefix cache would have served "
        f"{reuse.expected_tokens:,} of {reuse.prompt_tokens:,} prompt tokens "
        f"({_pct(reuse.expected_hit_rate)}); the server reported {reuse.reported_tokens:,} cached "
        f"({_pct(reuse.reported_hit_rate)})."
        + (f" {reuse.unreported} requests reported no cached tokens at all." if reuse.unreported else "")
    )


def _problem_lines(figures: WorkloadFigures) -> list[str]:
    out = []
    ev = figures.eviction
    if ev:
        where = f"turn {ev.turn}" if ev.turn else f"{ev.after_s:.1f} s in"
        out.append(
            f"**Eviction** from {where} ({ev.in_flight} in flight, {ev.held_tokens:,} prompt tokens held): "
            f"{ev.requests} of {ev.of_requests} requests reused less than expected (warning `cache_eviction`)."
        )
    part = figures.partial_reuse
    if part:
        out.append(
            f"**Partial reuse**: {part.hit_requests} of {part.requests} requests reused all they should have "
            f"({part.hit_fraction:.0%}), {part.partial_requests} part of it, {part.missed_requests} none"
            + (f"; {part.pattern}" if part.pattern else "")
            + " (`cache_partial_reuse`)."
        )
    if figures.no_reuse:
        expiry = figures.no_reuse.cause == "expiry"
        out.append(
            "**No reuse**: the server reported none of the resent tokens as cached"
            + (f", each after at least {figures.no_reuse.miss_idle_min_s:.2f} s idle: expiry likely" if expiry else "")
            + " (`cache_not_reused`)."
        )
    if figures.leakage:
        leak = figures.leakage
        out.append(
            f"**Leakage**: {leak.requests} requests reported more cached tokens than they could share (`cache_leakage`)."
        )
    return out


def figures_of(case: CaseResult) -> WorkloadFigures:
    """A workload case's figures (cases_of keeps only cases that have them)."""
    assert case.workload is not None
    return case.workload


def multi_turn_lines(case: CaseResult) -> list[str]:
    figures = figures_of(case)
    spec = figures.spec
    think = spec.think or ThinkSpec()
    think_text = f"{think.mean_s:g} s" if think.kind == "fixed" else f"{think.kind}, mean {think.mean_s:g} s"
    out = [
        f"### TTFT by turn: {case.label}",
        "",
        f"{case.concurrency} conversations of {spec.turns} turns; each turn resends the history "
        f"and adds a {case.pp}-token message (the first: {spec.first_tokens or case.pp}), answered "
        f"in {case.tg} tokens; think time {think_text}; earlier reasoning "
        f"{'sent back' if spec.keep_reasoning else 'dropped'}. Medians per turn; *expected* is the history "
        "the server had already prefilled (the previous turn's prompt).",
    ]
    rows = figures.turns
    cold = spec.cold_baseline and any(row.cold_ttft_s for row in rows)
    header = (
        "| turn | n | TTFT ms | prefill t/s (new tokens) | new tokens | cached reported | cached expected | e2e ms |"
    )
    if cold:
        out[-1] += (
            " *cold TTFT*: the same prompt length sent again with nothing shared, as many at once; "
            "*gain*: cold TTFT ÷ TTFT."
        )
        header += " cold TTFT ms | gain |"
    called = any(row.ttftc_s for row in rows)  # answers of tool calls (--tools): when the first came
    if called:
        header += " first tool call ms |"
    out += ["", header, "|" + "---:|" * (header.count("|") - 1)]
    for row in rows:
        failed = f" ({row.n_failed} failed)" if row.n_failed else ""
        line = (
            f"| {row.turn} | {row.n_ok}{failed} | {_ms(row.ttft_s)} | {_num(row.prefill_tps)} | "
            f"{_num(row.new_tokens)} | {_num(row.cached_tokens)} | {_num(row.expected_cached_tokens)} | "
            f"{_ms(row.e2e_s)} |"
        )
        if cold:
            gain = row.ttft_gain
            line += f" {_ms(row.cold_ttft_s)} | {f'{gain:.2f}×' if gain else 'n/a'} |"
        if called:
            line += f" {_ms(row.ttftc_s)} |"
        out.append(line)
    out += _withheld_turn_lines(rows)
    out += ["", _reuse_line(figures.reuse)]
    if figures.conversations_cut:
        out.append(f"{figures.conversations_cut} conversations ended early at a failed turn.")
    return out + _problem_lines(figures) + agents_view.lines(case, figures) + [""]


def _withheld_turn_lines(rows: list[Any]) -> list[str]:
    """Why a turn's figure reads n/a: each reason once, with the metrics it took."""
    reasons: dict[str, list[str]] = {}
    for row in rows:
        for name, why in row.unavailable.items():
            if name not in reasons.setdefault(why, []):
                reasons[why].append(name)
    return ["", *(f"n/a ({', '.join(names)}): {why}." for why, names in reasons.items())] if reasons else []


def shared_prefix_lines(cases: list[CaseResult]) -> list[str]:
    out = [
        "### TTFT by shared fraction",
        "",
        "Each prompt is a group's shared prefix then a unique, nonce-led suffix; fraction 0 is the "
        "same length with nothing shared, the baseline of the gain (baseline TTFT ÷ TTFT).",
        "",
        "| case | prefix | suffix | groups | TTFT ms | gain | hit rate expected | hit rate reported |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for case in cases:
        figures = figures_of(case)
        speedup = figures.ttft_gain.speedup if figures.ttft_gain else None
        ttft = case.summary.get("ttft_s")
        reuse = figures.reuse
        out.append(
            f"| {case.label} | {case.depth or 0:,} | {case.pp:,} | {figures.spec.groups} | "
            f"{_ms(ttft.median if ttft else None)} | {_num(speedup, '.2f') + '×' if speedup else '—'} | "
            f"{_pct(reuse.expected_hit_rate)} | {_pct(reuse.reported_hit_rate)} |"
        )
    for case in cases:
        out += [f"{case.label}: {line}" for line in _problem_lines(figures_of(case))]
    return out + [""]


def trace_lines(case: CaseResult) -> list[str]:
    figures = figures_of(case)
    spec = figures.spec
    lag = case.send_lag
    out = [
        f"### {case.label}",
        "",
        f"Trace `{spec.path}` at {spec.speed or 1:g}× its own times"
        + (f", first {spec.limit} requests" if spec.limit else "")
        + f": {case.n_ok} requests succeeded, {case.n_failed} failed.",
        "",
        _reuse_line(figures.reuse),
    ]
    if lag:
        out.append(
            f"Sends kept the trace's times to a median of {_ms(lag.median)} ms late "
            f"(p99 {_ms(lag.p99)} ms, worst {_ms(lag.max)} ms)."
        )
    return out + _problem_lines(figures) + agents_view.lines(case, figures) + [""]


CACHE_HEAD = (
    "Cache, expected against observed: the hit rate the workload implies (what an ideal prefix "
    "cache would serve of all prompt tokens), the hit rate the server reported, and the TTFT gain "
    "measured (shared prefix: against the same lengths with nothing shared; multi-turn: against "
    "--cold-baseline's cold prompts, median over turns 2 on)."
)


def cache_rows(results: RunResult) -> list[list[str]]:
    """One row per workload case: test, implied, reported, gain, finding."""
    rows = []
    for case in results.cases:
        figures = case.workload
        if figures is None or case.kind == "sweep":
            continue
        reuse = figures.reuse
        rows.append(
            [
                case.label,
                _pct(reuse.expected_hit_rate),
                _pct(reuse.reported_hit_rate) if reuse.requests else "not reported",
                _gain_text(figures),
                _finding(figures),
            ]
        )
    return rows


def _gain_text(figures: WorkloadFigures) -> str:
    if figures.kind == "shared_prefix":
        gain = figures.ttft_gain.speedup if figures.ttft_gain else None
        if figures.spec.fraction == 0:
            return "baseline"
        return f"{gain:.2f}×" if gain else "n/a (no baseline case)"
    if figures.kind == "multi_turn":
        gains = sorted(row.ttft_gain for row in figures.turns if row.turn > 1 and row.ttft_gain)
        if not gains:
            return "n/a (needs --cold-baseline)"
        return f"{gains[len(gains) // 2]:.2f}×"
    return "n/a"


def _finding(figures: WorkloadFigures) -> str:
    if figures.partial_reuse:
        part = figures.partial_reuse
        return f"partial reuse: {part.hit_fraction:.0%} of requests hit" + (
            f", ~{part.replicas} replicas" if part.replicas else ""
        )
    if figures.no_reuse:
        return "no reuse reported" + (": expiry likely" if figures.no_reuse.cause == "expiry" else "")
    if figures.eviction:
        return f"eviction: {figures.eviction.requests} of {figures.eviction.of_requests} short"
    if figures.leakage:
        return "leakage"
    if not figures.reuse.requests:
        return "not reported" if figures.reuse.unreported else "—"
    return "as implied"


def section_lines(results: RunResult) -> list[str]:
    """The workload sections of report.md (nothing when the run has no workload case)."""
    out: list[str] = []
    for kind, title in SECTION_TITLES.items():
        cases = cases_of(results, kind)
        if not cases:
            continue
        out += [f"## {title}", ""]
        if kind == "multi_turn":
            for case in cases:
                out += multi_turn_lines(case)
        elif kind == "shared_prefix":
            out += shared_prefix_lines(cases)
        else:
            for case in cases:
                out += trace_lines(case)
    return out
