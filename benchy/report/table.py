"""The llama-bench-style results table, rendered from saved results only."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from typing import Any

from tabulate import tabulate

from benchy.measure import agents, stats
from benchy.measure.classify import DRAIN_CUT
from benchy.measure.registry import CASE, METRICS, REQUEST_METRICS, TABLE_METRICS, Metric
from benchy.measure.unavailable import CUT_SHORT
from benchy.report import dataset_view, gpu_view
from benchy.report.shown import FLAG, NOISE_RATIO, case_warnings, flagged_metrics, shown, too_noisy
from benchy.results.types import CaseResult, CheckWarning, Goodput, MetricSummary, RunResult

__all__ = ["FLAG", "NOISE_RATIO", "case_warnings", "flagged_metrics", "too_noisy"]  # their home: shown.py
from benchy.report import pooled_view
from benchy.report.pooled_view import existing, withheld
from benchy.results.pooling import is_pooling
from benchy.results.verdicts.details import OutputLengthMismatch

LOAD_COLUMNS = (METRICS["aggregate_tps"], METRICS["request_rate"])  # when a case ran under load
FLAG_LEGEND = f"{FLAG} qualified by a warning below (see Warnings)."


class Footnotes:
    """Numbers each distinct reason once, so a table of n/a cells stays readable."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def mark(self, reason: str) -> str:
        if reason not in self.reasons:
            self.reasons.append(reason)
        return f"n/a [{self.reasons.index(reason) + 1}]"

    def lines(self) -> list[str]:
        return [f"[{i}] {reason}" for i, reason in enumerate(self.reasons, 1)]


def cell(summary: MetricSummary, metric: Metric) -> str:
    scale, decimals = metric.scale, metric.decimals
    median = summary.median * scale
    std = summary.std
    if std is None:
        return f"{median:,.{decimals}f}"
    return f"{median:,.{decimals}f} ± {std * scale:,.{decimals}f}"


def load_cell(case: CaseResult, metric: Metric, notes: Footnotes) -> str:
    """A case-level rate, or why it is withheld (a case cut short has no rate)."""
    value = getattr(case, metric.name)
    if value is None and metric.name in case.unavailable:
        return notes.mark(case.unavailable[metric.name])
    return number(value, metric)


def errors_cell(case: CaseResult) -> str:
    """Failed requests; those the drain cut (--duration, --drain) named apart: benchy cut them,
    the server did not fail them (load/drain.py)."""
    cut = case.errors.get(DRAIN_CUT, 0)
    return f"{case.n_failed - cut} + {cut} cut" if cut else str(case.n_failed)


# A pooling endpoint's own figures (--endpoint embeddings): its input rate and its latency.
POOLED_HEADERS = [METRICS["input_tps"].title, "latency ms p50 / p90 / p99"]


def pooled_cells(case: CaseResult, notes: Footnotes) -> list[str]:
    """Input tokens/s and the latency percentiles of a pooling case (n/a for a generation case)."""
    latency = case.summary.get("e2e_s")
    if latency is None:
        spread = "n/a"
    else:
        parts = (latency.median, latency.p90, latency.p99)
        spread = " / ".join("n/a" if v is None else number(v, METRICS["e2e_s"]) for v in parts)
    return [load_cell(case, METRICS["input_tps"], notes), spread]


def number(value: float | None, metric: Metric) -> str:
    return "n/a" if value is None else f"{value * metric.scale:,.{metric.decimals}f}"


def case_name(case: CaseResult, label: str | None = None) -> str:
    """How a case is shown in tables and figures: its scenario's name, when it has one, beside
    the llama-bench-style label (`chat_short (pp167 tg256)`)."""
    label = label or case.label
    return f"{case.scenario} ({label})" if case.scenario else label


def row_label(case: CaseResult, warnings: list[CheckWarning]) -> str:
    """The case's name, but never claiming an output length the server did not deliver, and
    saying when the run stopped inside it."""
    cut = f" {FLAG} (cut short)" if case.reason("aggregate_tps").code == CUT_SHORT else ""
    return _shape_label(case, warnings) + cut


def _shape_label(case: CaseResult, warnings: list[CheckWarning]) -> str:
    for w in warnings:
        if isinstance(w.details, OutputLengthMismatch):  # the output_length_mismatch warning
            if not case.tg:  # a dataset's own answer lengths: no single tg to relabel
                return case_name(case) + f" {FLAG} (short outputs)"
            got = w.details.delivered_median
            label = case.label.replace(f"tg{case.tg}", f"tg{got}", 1)
            return case_name(case, label) + f" {FLAG} (asked {case.tg})"
    return case_name(case)


def ceiling_cells(case: CaseResult) -> list[str]:
    ceiling = case.ceiling
    if not ceiling:
        return ["n/a", "n/a"]
    pcts = [ceiling.decode_pct, ceiling.e2e_pct]
    shown = " / ".join("n/a" if p is None else f"{p:.0f}%" for p in pcts)
    impossible = any(p is not None and p > 100 for p in pcts)
    return [f"{ceiling.tokens_per_s:,.1f}", shown + (f" {FLAG}" if impossible else "")]


def goodput_cell(goodput: Goodput | None, notes: Footnotes) -> str:
    """Share of requests meeting every --slo target (and their rate), or why it is unknown."""
    if not goodput:
        return "n/a"
    if goodput.fraction is None:
        return notes.mark(goodput.unavailable or "not measured")
    rate = goodput.rate
    return f"{goodput.fraction:.0%}" + (f" ({rate:.2f}/s)" if rate is not None else "")


def rows(results: RunResult, notes: Footnotes) -> tuple[list[str], list[list[str]]]:
    cases = results.cases
    if pooled_view.all_pooled(cases):  # only the columns a pooling endpoint has
        return pooled_rows(results, notes)
    loaded = any(is_loaded(c) for c in cases)
    with_goodput = any(c.goodput for c in cases)
    with_ceiling = any(c.ceiling for c in cases)
    with_gpu = gpu_view.has_gpu(results)
    pooled = any(is_pooling(c.endpoint) for c in cases)
    warned = case_warnings(results)
    headers = ["test", "n"] + [m.title for m in TABLE_METRICS]
    if loaded:
        headers += [m.title for m in LOAD_COLUMNS]
    if pooled:
        headers += POOLED_HEADERS
    if with_goodput:
        headers.append("goodput")
    if with_ceiling:
        headers += ["ceiling t/s", "% of ceiling (decode / e2e)"]
    if with_gpu:
        headers.append("J/token (GPU W)")
    headers.append("errors")
    body = []
    for case in cases:
        flagged = flagged_metrics(warned.get(case.label, []))
        row = [row_label(case, warned.get(case.label, [])), str(case.n_ok)]
        for metric in TABLE_METRICS:
            seen = shown(case, metric, flagged)
            if seen.summary is None:
                row.append(notes.mark(seen.why.message if seen.why else "not measured"))
            else:
                row.append(cell(seen.summary, metric) + (f" {FLAG}" if seen.qualified else ""))
        if loaded:
            row += [load_cell(case, m, notes) for m in LOAD_COLUMNS]
        if pooled:
            row += pooled_cells(case, notes)
        if with_goodput:
            row.append(goodput_cell(case.goodput, notes))
        if with_ceiling:
            row += ceiling_cells(case)
        if with_gpu:
            row.append(gpu_view.table_cell(case, notes.mark))
        row.append(errors_cell(case))
        body.append(row)
    return headers, body


def markdown(results: RunResult, loaded: bool = True) -> str:
    """The table plus its footnotes, as Markdown; under load (unless `loaded` is False: the
    terminal's short view, short_view.py), a second table of percentiles."""
    notes = Footnotes()
    headers, body = rows(results, notes)
    text: str = tabulate(body, headers=headers, tablefmt="pipe", stralign="right", disable_numparse=True)
    if notes.reasons:
        text += "\n\n" + "\n".join(notes.lines())
    if any(FLAG in c for row in body for c in row):
        text += "\n\n" + FLAG_LEGEND
    percentiles = load_markdown(results) if loaded else None
    cache = cache_markdown(results)
    lengths = dataset_view.markdown(results)  # --dataset: asked and served lengths
    text += "".join("\n\n" + part for part in (percentiles, cache, lengths) if part)
    return text


def cache_markdown(results: RunResult) -> str | None:
    """Workload cases: the hit rate implied, the one reported, the TTFT gain (None without one)."""
    from benchy.report import workloads

    rows = workloads.cache_rows(results)
    if not rows:
        return None
    headers = ["test", "hit rate implied", "hit rate reported", "TTFT gain", "finding"]
    table: str = tabulate(rows, headers=headers, tablefmt="pipe", stralign="right", disable_numparse=True)
    return workloads.CACHE_HEAD + "\n\n" + table


# ------------------------------------------------------------------ loaded cases: percentiles

PERCENTILE_METRICS = (METRICS["ttft_s"], METRICS["itl_s"], METRICS["e2e_s"])
LOAD_HEAD = (
    "Under load, median ± std hides the tail: p50 / p90 / p99 of the measured requests "
    f"(the value 50 / 90 / 99% of them stayed under; '{stats.TOO_FEW}': a p90 needs "
    f"{stats.SHOWN_FROM['p90']} requests, a p99 {stats.SHOWN_FROM['p99']}, to be bounded at 99% confidence)."
)


def is_loaded(case: CaseResult) -> bool:
    """More than one request in flight, or open loop (a --rate or a trace replay)."""
    return case.mode == "open" or case.rate is not None or (case.concurrency or 1) > 1


def percentiles_cell(summary: MetricSummary | None, metric: Metric) -> str:
    """p50 / p90 / p99, each only from as many requests as it needs (stats.SHOWN_FROM)."""
    if not summary:
        return "n/a"
    values = {"median": summary.median, "p90": summary.p90, "p99": summary.p99}
    return " / ".join(_percentile_text(k, v, summary.n, metric) for k, v in values.items())


def _percentile_text(statistic: str, value: float | None, n: int, metric: Metric) -> str:
    if value is None:
        return "n/a"
    return _short(value * metric.scale) if stats.enough_for(statistic, n) else stats.TOO_FEW


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.1f}"


def load_markdown(results: RunResult) -> str | None:
    """Percentiles of the loaded cases (concurrency > 1 or open loop), and for open loops the
    rate asked, the rate offered and how late sends left their schedule. None without one."""
    cases = [c for c in results.cases if is_loaded(c) and c.n_ok]  # no success: no tail to show
    if not cases:
        return None

    opened = any(c.mode == "open" for c in cases)
    lag, offered = METRICS["send_lag_s"], METRICS["achieved_rate"]
    shown = existing(PERCENTILE_METRICS, cases)  # a pooling run: latency only
    headers = ["test", "n"] + [f"{m.title} p50 / p90 / p99" for m in shown]
    if opened:
        headers += ["asked req/s", offered.title, f"{lag.title} p50 / p90 / p99"]
    body = []
    for case in cases:
        row = [case_name(case), str(case.n_ok)]
        row += [percentiles_cell(case.summary.get(m.name), m) for m in shown]
        if opened:
            open_loop = case.mode == "open"
            row += [
                asked_rate(case),
                number(case.achieved_rate, offered) if open_loop else "",
                percentiles_cell(case.send_lag, lag) if open_loop else "",
            ]
        body.append(row)
    table: str = tabulate(body, headers=headers, tablefmt="pipe", stralign="right", disable_numparse=True)
    replayed = [replayed_line(c) for c in cases if c.kind == "trace"]
    return LOAD_HEAD + "\n\n" + table + "".join(f"\n\n{line}" for line in replayed)


def asked_rate(case: CaseResult) -> str:
    if case.kind == "trace":
        return "the trace's times"
    return f"{case.rate:g}" if case.rate is not None else "closed loop"


def replayed_line(case: CaseResult) -> str:
    """The lengths a trace replay asked for: it has no single pp or tg."""
    sent = [(r.target_prompt_tokens, r.target_output_tokens) for r in case.requests if not r.warmup]
    prompts = [p for p, _ in sent]
    outputs = [o for _, o in sent]
    if not sent:
        return f"{case_name(case)} replayed no request."
    if agents.is_agent_replay(case.requests):  # its own messages, no length asked; the server counted them
        counted = [r.prompt_tokens for r in case.requests if not r.warmup and r.prompt_tokens]
        asked = f"prompts of {_spread(counted)} as the server counted them" if counted else "its own messages"
        return f"{case_name(case)} replayed {len(sent)} calls: {asked}, outputs of {_spread(outputs)} (as the trace asked)."
    return (
        f"{case_name(case)} replayed {len(sent)} requests: prompts of {_spread(prompts)}, "
        f"outputs of {_spread(outputs)} (as the trace asked)."
    )


def _spread(values: list[int]) -> str:
    low, high = min(values), max(values)
    middle = sorted(values)[len(values) // 2]
    return f"{low:,} tokens" if low == high else f"{low:,}–{high:,} tokens (median {middle:,})"


# ------------------------------------------------------------------ CSV

# Stable CSV columns (docs/results.md): one row per case and per-request metric, with every
# statistic results.json holds for it; then the case's own figures (its CASE-level metrics from
# the registry, a summary as p50/p90/p99), repeated on each of its rows; the last four carry what
# the Markdown report shows beside a number, so no flag is lost in a spreadsheet.
CASE_KEYS = ("label", "scenario", "pp", "tg", "concurrency", "mode", "rate", "depth")


def case_key_cells(case: CaseResult) -> list[Any]:
    """The CASE_KEYS cells of a case, as every CSV benchy writes keys it."""
    open_loop = case.mode == "open" or case.rate is not None
    replay = case.kind in ("trace", "dataset")  # its lengths are each request's own (requests.jsonl)
    return [
        case.label,
        case.scenario or "",
        "" if replay else case.pp,
        "" if replay else case.tg,
        "" if open_loop else case.concurrency,  # an open loop has a rate, not a concurrency
        case.mode,
        _blank(case.rate),
        case.depth,
    ]


STAT_COLUMNS: tuple[str, ...] = ("median", "std", "n", "ci95_low", "ci95_high", "p90", "p99", "mean", "min", "max")
STAT_COLUMNS += ("p90_low", "p90_high", "p99_low", "p99_high")  # each bound at 99% (stats.percentile_ranks)
CASE_METRICS = tuple(m for m in METRICS.values() if m.level == CASE)
SUMMARIZED_CASE_METRICS = ("send_lag_s",)  # stored as a summary: p50 / p90 / p99 columns


def _case_metric_columns() -> tuple[str, ...]:
    out: list[str] = []
    for m in CASE_METRICS:
        out += [f"{m.name}_{p}" for p in ("p50", "p90", "p99")] if m.name in SUMMARIZED_CASE_METRICS else [m.name]
    return tuple(out)


CSV_COLUMNS = (
    *CASE_KEYS,
    "metric",
    "unit",
    *STAT_COLUMNS,
    "unavailable_reason",
    "n_ok",
    "n_failed",
    *_case_metric_columns(),
    *gpu_view.CSV_COLUMNS,
    "ceiling_tps",
    "flagged_by",
    "case_warnings",
    "run_warnings",
    *(f"{part}_{k}" for part in ("from_schedule", "steady") for k in ("median", "p90", "p99", "n")),
)
CODE_SEPARATOR = ";"


def tail_cells(summary: MetricSummary | None) -> list[Any]:
    """median, p90, p99, n of a second view of a metric (from the schedule, or the steady state),
    blank where it has none or too few values, as the report's "too few"."""
    if not summary:
        return [""] * 4
    shown = [_blank(getattr(summary, k) if stats.enough_for(k, summary.n) else None) for k in ("median", "p90", "p99")]
    return [*shown, summary.n]


def codes_cell(warnings: Iterable[CheckWarning]) -> str:
    """Distinct warning codes in the results' order (errors first), as one cell."""
    return CODE_SEPARATOR.join(dict.fromkeys(w.code for w in warnings))


def summary_cells(summary: MetricSummary | None, reason: str) -> list[Any]:
    """The statistics of STAT_COLUMNS, then unavailable_reason: all empty but the reason when
    the metric could not be measured (never a made-up number). A p90, p99 or interval from
    fewer values than carry it is empty, as the report's "too few" (stats.SHOWN_FROM)."""
    if not summary:
        return [""] * len(STAT_COLUMNS) + [reason]
    low, high = summary.ci95 or (None, None)
    figures = {**summary.to_dict(), "ci95_low": low, "ci95_high": high}
    return [
        _blank(figures.get(k) if stats.enough_for(k.removesuffix("_low").removesuffix("_high"), summary.n) else None)
        for k in STAT_COLUMNS
    ] + [""]


def case_metric_cells(case: CaseResult) -> list[Any]:
    """The case's CASE-level figures in CSV_COLUMNS order; empty where the case has none."""
    goodput = case.goodput
    stored = {
        "aggregate_tps": case.aggregate_tps,
        "request_rate": case.request_rate,
        "input_tps": case.input_tps,  # a pooling case's (pooled_view.py)
        "input_rate": case.input_rate,
        "achieved_rate": case.achieved_rate,
        "goodput": goodput.fraction if goodput else None,
        "goodput_rate": goodput.rate if goodput else None,
    }
    cells: list[Any] = []
    for m in CASE_METRICS:
        if m.name in SUMMARIZED_CASE_METRICS:
            lag = case.send_lag
            shown = [k for k in ("median", "p90", "p99") if lag and stats.enough_for(k, lag.n)]
            cells += [_blank(getattr(lag, k) if k in shown else None) for k in ("median", "p90", "p99")]
        else:
            cells.append(_blank(stored.get(m.name)))
    return cells


def _blank(value: object) -> object:
    return "" if value is None else value


def csv_text(results: RunResult) -> str:
    """One row per case and metric: machine-friendly, no formatting. A figure the Markdown
    table marks with ⚠ names the warnings behind it in `flagged_by`. A pooling case has no row
    for the figures its endpoint cannot have (results.json keeps why: pooled_view.py)."""

    warnings = results.warnings
    flagging = case_warnings(results)  # the same warnings that put ⚠ on a Markdown cell
    run_wide = codes_cell(w for w in warnings if not w.case)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for case in results.cases:
        label = case.label
        ceiling = case.ceiling.tokens_per_s if case.ceiling else None
        of_case = codes_cell(w for w in warnings if w.case == label)
        keys = case_key_cells(case)
        own = [case.n_ok, case.n_failed, *case_metric_cells(case), *gpu_view.csv_cells(case)]
        for metric in (m for m in REQUEST_METRICS if m in case.summary and not withheld(case, m)):  # registry order
            summary = case.summary[metric]
            flagged = [w for w in flagging.get(label, []) if summary and metric in w.metrics]
            writer.writerow(
                keys
                + [metric, METRICS[metric].unit]
                + summary_cells(summary, case.unavailable.get(metric, ""))
                + own
                + ["" if ceiling is None else ceiling, codes_cell(flagged), of_case, run_wide]
                + tail_cells(case.from_schedule.get(metric))
                + tail_cells(case.steady.summary.get(metric) if case.steady else None)
            )
    return out.getvalue()


POOLED_RATES = (METRICS["request_rate"], METRICS["input_rate"])
POOLED_TABLE_HEADERS = ["test", "n", POOLED_HEADERS[1], *(m.title for m in POOLED_RATES), POOLED_HEADERS[0]]


def pooled_rows(results: RunResult, notes: Footnotes) -> tuple[list[str], list[list[str]]]:
    """The case table of a pooling run: latency p50 / p90 / p99, requests/s, inputs/s (documents
    of a rerank), input tokens/s, errors."""
    warned = case_warnings(results)
    with_goodput = any(c.goodput for c in results.cases)
    headers = POOLED_TABLE_HEADERS + (["goodput"] if with_goodput else []) + ["errors"]
    body = []
    for case in results.cases:
        input_rate, latency = pooled_cells(case, notes)
        row = [row_label(case, warned.get(case.label, [])), str(case.n_ok), latency]
        row += [*(load_cell(case, m, notes) for m in POOLED_RATES), input_rate]
        row += [goodput_cell(case.goodput, notes)] if with_goodput else []
        body.append(row + [errors_cell(case)])
    return headers, body
