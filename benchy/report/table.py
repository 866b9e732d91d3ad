"""The llama-bench-style results table, rendered from saved results only."""

from __future__ import annotations

import csv
import io

from tabulate import tabulate

from benchy.metrics import METRICS, REQUEST_METRICS, TABLE_METRICS, Metric

LOAD_COLUMNS = (METRICS["aggregate_tps"], METRICS["request_rate"])  # when a case ran under load
FLAG = "⚠"  # on a cell a warning qualifies (impossible, inflated by a cache, client-delayed…)
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


def cell(summary: dict, metric: Metric) -> str:
    scale, decimals = metric.scale, metric.decimals
    median = summary["median"] * scale
    std = summary.get("std")
    if std is None:
        return f"{median:.{decimals}f}"
    return f"{median:.{decimals}f} ± {std * scale:.{decimals}f}"


def number(value: float | None, metric: Metric) -> str:
    return "n/a" if value is None else f"{value * metric.scale:.{metric.decimals}f}"


def case_warnings(results: dict) -> dict[str, list[dict]]:
    """Warnings and errors (not info notes) by case label."""
    out: dict[str, list[dict]] = {}
    for w in results.get("warnings", []):
        if w.get("case") and w["severity"] != "info":
            out.setdefault(w["case"], []).append(w)
    return out


def flagged_metrics(warnings: list[dict]) -> set[str]:
    return {name for w in warnings for name in w.get("metrics", ())}


def row_label(case: dict, warnings: list[dict]) -> str:
    """The case label, but never claiming an output length the server did not deliver."""
    for w in warnings:
        if w["code"] == "output_length_mismatch":
            got = w["details"]["delivered_median"]
            return case["label"].replace(f"tg{case['tg']}", f"tg{got}", 1) + f" {FLAG} (asked {case['tg']})"
    return case["label"]


def ceiling_cells(case: dict) -> list[str]:
    ceiling = case.get("ceiling")
    if not ceiling:
        return ["n/a", "n/a"]
    pcts = [ceiling.get("decode_pct"), ceiling.get("e2e_pct")]
    shown = " / ".join("n/a" if p is None else f"{p:.0f}%" for p in pcts)
    impossible = any(p is not None and p > 100 for p in pcts)
    return [f"{ceiling['tokens_per_s']:.1f}", shown + (f" {FLAG}" if impossible else "")]


def goodput_cell(goodput: dict | None, notes: Footnotes) -> str:
    """Share of requests meeting every --slo target (and their rate), or why it is unknown."""
    if not goodput:
        return "n/a"
    if goodput.get("fraction") is None:
        return notes.mark(goodput.get("unavailable", "not measured"))
    rate = goodput.get("rate")
    return f"{goodput['fraction']:.0%}" + (f" ({rate:.2f}/s)" if rate is not None else "")


def rows(results: dict, notes: Footnotes) -> tuple[list[str], list[list[str]]]:
    cases = results.get("cases", [])
    loaded = any(c["concurrency"] > 1 or c.get("rate") for c in cases)
    with_goodput = any(c.get("goodput") for c in cases)
    with_ceiling = any(c.get("ceiling") for c in cases)
    warned = case_warnings(results)
    headers = ["test", "n"] + [m.title for m in TABLE_METRICS]
    if loaded:
        headers += [m.title for m in LOAD_COLUMNS]
    if with_goodput:
        headers.append("goodput")
    if with_ceiling:
        headers += ["ceiling t/s", "% of ceiling (decode / e2e)"]
    headers.append("errors")
    body = []
    for case in cases:
        flagged = flagged_metrics(warned.get(case["label"], []))
        row = [row_label(case, warned.get(case["label"], [])), str(case["n_ok"])]
        for metric in TABLE_METRICS:
            summary = case["summary"].get(metric.name)
            text = (
                cell(summary, metric) if summary else notes.mark(case["unavailable"].get(metric.name, "not measured"))
            )
            row.append(f"{text} {FLAG}" if summary and metric.name in flagged else text)
        if loaded:
            row += [number(case.get(m.name), m) for m in LOAD_COLUMNS]
        if with_goodput:
            row.append(goodput_cell(case.get("goodput"), notes))
        if with_ceiling:
            row += ceiling_cells(case)
        row.append(str(case["n_failed"]))
        body.append(row)
    return headers, body


def markdown(results: dict) -> str:
    """The table plus its footnotes, as Markdown."""
    notes = Footnotes()
    headers, body = rows(results, notes)
    text = tabulate(body, headers=headers, tablefmt="pipe", stralign="right", disable_numparse=True)
    if notes.reasons:
        text += "\n\n" + "\n".join(notes.lines())
    if any(FLAG in c for row in body for c in row):
        text += "\n\n" + FLAG_LEGEND
    return text


# Stable CSV columns (README, "Results file"): one row per case and metric. The last four
# carry what the Markdown report shows beside a number, so no flag is lost in a spreadsheet.
CSV_COLUMNS = (
    "label",
    "pp",
    "tg",
    "concurrency",
    "depth",
    "metric",
    "median",
    "std",
    "n",
    "ci95_low",
    "ci95_high",
    "unavailable_reason",
    "ceiling_tps",
    "flagged_by",
    "case_warnings",
    "run_warnings",
)
CODE_SEPARATOR = ";"


def codes_cell(warnings) -> str:
    """Distinct warning codes in the results' order (errors first), as one cell."""
    return CODE_SEPARATOR.join(dict.fromkeys(w["code"] for w in warnings))


def summary_cells(summary: dict | None, reason: str) -> list:
    """median, std, n, ci95_low, ci95_high, unavailable_reason: all empty but the reason when
    the metric could not be measured (never a made-up number)."""
    if not summary:
        return ["", "", "", "", "", reason]
    ci = summary.get("ci95") or [None, None]
    return [summary["median"], summary["std"], summary["n"], ci[0], ci[1], ""]


def csv_text(results: dict) -> str:
    """One row per case and metric: machine-friendly, no formatting. A figure the Markdown
    table marks with ⚠ names the warnings behind it in `flagged_by`."""
    warnings = results.get("warnings", [])
    flagging = case_warnings(results)  # the same warnings that put ⚠ on a Markdown cell
    run_wide = codes_cell(w for w in warnings if not w.get("case"))
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for case in results.get("cases", []):
        label = case["label"]
        ceiling = (case.get("ceiling") or {}).get("tokens_per_s")
        of_case = codes_cell(w for w in warnings if w.get("case") == label)
        for metric in (m for m in REQUEST_METRICS if m in case["summary"]):  # registry order
            summary = case["summary"][metric]
            key = [label, case["pp"], case["tg"], case["concurrency"], case["depth"], metric]
            flagged = [w for w in flagging.get(label, []) if summary and metric in w.get("metrics", ())]
            writer.writerow(
                key
                + summary_cells(summary, case["unavailable"].get(metric, ""))
                + ["" if ceiling is None else ceiling, codes_cell(flagged), of_case, run_wide]
            )
    return out.getvalue()
