"""The llama-bench-style results table, rendered from saved results only."""
from __future__ import annotations

import csv
import io

from tabulate import tabulate

# (summary metric, column title, scale from stored unit, decimals)
COLUMNS = (
    ("e2e_tps", "e2e t/s", 1.0, 1),
    ("ttft_s", "TTFT ms", 1000.0, 1),
    ("decode_tps", "decode t/s", 1.0, 1),
    ("prefill_tps", "prefill t/s", 1.0, 0),
)


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


def cell(summary: dict | None, scale: float, decimals: int) -> str:
    median = summary["median"] * scale
    std = summary.get("std")
    if std is None:
        return f"{median:.{decimals}f}"
    return f"{median:.{decimals}f} ± {std * scale:.{decimals}f}"


def rows(results: dict, notes: Footnotes) -> tuple[list[str], list[list[str]]]:
    cases = results.get("cases", [])
    loaded = any(c["concurrency"] > 1 for c in cases)
    headers = ["test", "n"] + [title for _, title, _, _ in COLUMNS]
    if loaded:
        headers.append("aggregate t/s")
    headers.append("errors")
    body = []
    for case in cases:
        row = [case["label"], str(case["n_ok"])]
        for name, _, scale, decimals in COLUMNS:
            summary = case["summary"].get(name)
            row.append(cell(summary, scale, decimals) if summary else
                       notes.mark(case["unavailable"].get(name, "not measured")))
        if loaded:
            agg = case.get("aggregate_tps")
            row.append(f"{agg:.1f}" if agg is not None else "n/a")
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
    return text


def csv_text(results: dict) -> str:
    """One row per case and metric: machine-friendly, no formatting."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["label", "pp", "tg", "concurrency", "depth", "metric", "median", "std", "n",
                     "ci95_low", "ci95_high", "unavailable_reason"])
    for case in results.get("cases", []):
        for metric, summary in case["summary"].items():
            key = [case["label"], case["pp"], case["tg"], case["concurrency"], case["depth"], metric]
            if summary:
                ci = summary.get("ci95") or [None, None]
                writer.writerow(key + [summary["median"], summary["std"], summary["n"], ci[0], ci[1], ""])
            else:
                writer.writerow(key + ["", "", 0, "", "", case["unavailable"].get(metric, "")])
    return out.getvalue()
