"""The server's view of each case beside the client's, from saved results only: who served
(setup.server), what its /metrics said per case (case.server), as setup rows, a Markdown
section, a figure and server.csv. A figure the server did not publish is left empty with the
reason; nothing is estimated here.

The columns, the same in the section's table and in server.csv (server_source: /metrics, or,
without it, llama.cpp's per-response timings, which give the two rates and the prefill time). Times are means over
the case's measured requests, on both sides, so that they compare (the server's medians come from
histogram buckets and are too coarse to set beside the client's); the client's rates are its
medians, the figures of the results table (a mean of per-request prefill t/s is pulled far above
the median by the few requests that did not queue), and the server's rates the medians of its
per-response timings where it sends them (llama.cpp), the same statistic; only without them
/metrics' tokens ÷ seconds over the case (server_rates says which):
  client TTFT | server TTFT | queue | prefill | client prefill t/s | server prefill t/s |
  client decode t/s | server decode t/s | cache hit rate | generated tokens (server / client)
  | running max | waiting max
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchy.measure.registry import METRICS
from benchy.report import table
from benchy.results.types import (
    CaseResult,
    MetricsStatus,
    MetricSummary,
    NoServerFigures,
    RunResult,
    ServerCaseMetrics,
    ServerIdentity,
)

if TYPE_CHECKING:  # matplotlib is imported only when the figure is drawn
    from matplotlib.axes import Axes

    from benchy.report.plots import Figure, LeftOut

SECTION_INTRO = (
    "What the server itself reported for each case (Prometheus /metrics, scraped before and after "
    "the case's measured requests), beside what benchy measured. Times are means over the measured "
    "requests on both sides; the client's rates are its medians, as in the results table. The "
    "server's TTFT runs from when it received a request; queue is the time the request waited "
    "for a slot, prefill from then to the first token. Client TTFT "
    "minus server TTFT passed outside the server (network, proxies, the client)."
)
RATES_PER_RESPONSE = "per-response timings (median per request)"
RATES_OVER_CASE = "/metrics (tokens ÷ seconds over the case)"
CASE_COLUMNS = table.CASE_KEYS  # as results.csv keys a case
CSV_COLUMNS = (
    *CASE_COLUMNS,
    "server_source",
    "client_ttft_s",
    "server_ttft_s",
    "server_queue_s",
    "server_prefill_s",
    "client_prefill_tps",
    "server_prefill_tps",
    "client_decode_tps",
    "server_decode_tps",
    "server_cache_hit_rate",
    "server_generation_tokens",
    "client_output_tokens",
    "server_running_max",
    "server_waiting_max",
    "server_kv_cache_usage_max",
    "server_rates",
    "unavailable",
)


def _server(case: CaseResult) -> ServerCaseMetrics | None:
    return case.server_figures()


def absent_reason(results: RunResult, case: CaseResult) -> str:
    """Why a case has no server figures."""
    if isinstance(case.server, NoServerFigures):
        return case.server.unavailable
    status = results.setup.server_metrics
    return (status.reason if status else None) or "the run recorded no server metrics (an older benchy?)"


def _shown_median(case: CaseResult, metric: str) -> MetricSummary | None:
    """The client's rate as the results table shows it: its median, unless withheld or noise."""
    summary = case.summary.get(metric)
    return None if summary is None or table.too_noisy(summary, METRICS[metric]) else summary


def _client_left_out(case: CaseResult, metric: str, title: str) -> LeftOut:
    """Why the client's bar is missing: withheld (its reason code, as the figures caption it),
    or too noisy for one figure."""
    from benchy.report import plots

    summary = case.summary.get(metric)
    if summary is not None:  # shown as n/a for its spread
        return plots.LeftOut(title, table.case_name(case), "too noisy for one figure")
    why = case.reason(metric)
    return plots.LeftOut(title, table.case_name(case), why.message, why.code)


def _median(case: CaseResult, metric: str) -> float | None:
    summary = _shown_median(case, metric)
    return summary.median if summary else None


def _gauge_max(server: ServerCaseMetrics | None, name: str) -> float | None:
    g = server.gauges.get(name) if server else None
    return g.max if g else None


def _client_tokens(case: CaseResult) -> int | None:
    """The completion tokens the client counted over the measured requests; None unless every
    one has a count (of a long case's rows on disk, counted in the one pass the report makes)."""
    return case.columns().completion_tokens


def case_row(results: RunResult, case: CaseResult) -> dict[str, Any]:
    """The section's figures of one case (None where unavailable)."""
    server = _server(case)
    derived, counters = (server.derived, server.counters) if server else ({}, {})
    row = {
        "server_source": f"/metrics ({server.engine})" if server else None,
        "client_ttft_s": case.mean("ttft_s"),
        "server_ttft_s": server.histogram_mean("ttft_s") if server else None,
        "server_queue_s": server.histogram_mean("queue_s") if server else None,
        "server_prefill_s": server.histogram_mean("prefill_s") if server else None,
        "client_prefill_tps": _median(case, "prefill_tps"),  # as the results table shows it
        "server_prefill_tps": derived.get("prefill_tps"),
        "client_decode_tps": _median(case, "decode_tps"),
        "server_decode_tps": derived.get("decode_tps"),
        "server_cache_hit_rate": derived.get("cache_hit_rate"),
        "server_generation_tokens": counters.get("generation_tokens"),
        "client_output_tokens": _client_tokens(case),
        "server_running_max": _gauge_max(server, "running"),
        "server_waiting_max": _gauge_max(server, "waiting"),
        "server_kv_cache_usage_max": _gauge_max(server, "kv_cache_usage"),
    }
    # Like with like: the client's rates are medians of per-request rates, so the server's are
    # the medians of its per-response timings where it sends them (llama.cpp). /metrics gives a
    # ratio of sums over the case instead (all tokens ÷ all seconds), which on a noisy host or
    # with requests batched is another statistic: it stands in only where no timings came.
    own = {rate: case.median(rate) for rate in ("server_prefill_tps", "server_decode_tps")}
    if any(v is not None for v in own.values()):
        row.update(own)
        row["server_rates"] = RATES_PER_RESPONSE
    elif row["server_prefill_tps"] is not None or row["server_decode_tps"] is not None:
        row["server_rates"] = RATES_OVER_CASE
    else:
        row["server_rates"] = ""
    if row["server_prefill_s"] is None:  # llama.cpp: no histogram, but each response's prompt_ms
        prompt_s = case.facts().pair_prompt_s
        row["server_prefill_s"] = sum(prompt_s) / len(prompt_s) if prompt_s else None
    row["unavailable"] = "" if server else absent_reason(results, case)
    if not server and any(row[rate] is not None for rate in ("server_prefill_tps", "server_decode_tps")):
        row["server_source"] = "response timings"  # no /metrics, but the server's own clock per response
    return row


def setup_rows(results: RunResult) -> list[tuple[str, str | None]]:
    """Rows for the report's Setup table: engine, context, slots, model path, metrics."""
    ident = results.setup.server
    if ident is None:
        return []
    engine = " ".join(p for p in (ident.engine, ident.version or ident.build) if p)
    return [
        ("Engine", engine or f"unknown: {ident.unavailable.get('engine', 'not identified')}"),
        ("Build", ident.build),
        (
            "Context length",
            _fact(ident, ident.context_length, "context_length", ident.context_source, "tokens per request"),
        ),
        ("Slots (requests run at once)", _fact(ident, ident.slots, "slots", ident.slots_source, "")),
        ("Model path", ident.model_path),
        ("Server metrics", _metrics_text(results.setup.server_metrics)),
    ]


def _fact(ident: ServerIdentity, value: int | None, key: str, source: str | None, unit: str) -> str:
    if value is None:
        return f"unknown: {ident.unavailable.get(key, 'not reported')}"
    return f"{value:,} {unit}".strip() + f" ({source})"


def _metrics_text(status: MetricsStatus | None) -> str | None:
    if status is None:
        return None
    if not status.available:
        return f"none: {status.reason}"
    missing = sorted(status.missing)
    return f"{status.engine} names at {status.url}" + (f"; not published: {', '.join(missing)}" if missing else "")


def _sums(row: dict[str, Any]) -> str:
    return " Σ" if row.get("server_rates") == RATES_OVER_CASE else ""


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value * 1000:,.1f}"


def _rate(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _count(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def section_lines(results: RunResult, figure: tuple[str, str | None, str] | None = None) -> list[str]:
    """The "Server view" section of report.md."""
    cases = results.cases
    if not cases:
        return []
    out = ["## Server view", "", SECTION_INTRO, ""]
    rows = [(case, case_row(results, case)) for case in cases]
    if not any(row["server_source"] for _, row in rows):
        reasons = sorted({row["unavailable"] for _, row in rows})
        return out + [f"No server figures: {'; '.join(reasons)}.", ""]
    out += [
        "| test | client TTFT ms | server TTFT ms | queue ms | prefill ms | prefill t/s client / server "
        "| decode t/s client / server | cache hit rate | tokens server / client | running / waiting max |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, row in rows:
        name = table.case_name(case)  # as the run's table names it: the scenario beside the label
        if not row["server_source"]:
            out.append(f"| {name} | {_ms(row['client_ttft_s'])} | n/a: {row['unavailable']} ||||||||")
            continue
        out.append(
            f"| {name} | {_ms(row['client_ttft_s'])} | {_ms(row['server_ttft_s'])} | "
            f"{_ms(row['server_queue_s'])} | {_ms(row['server_prefill_s'])} | "
            f"{_rate(row['client_prefill_tps'])} / {_rate(row['server_prefill_tps'])}{_sums(row)} | "
            f"{_rate(row['client_decode_tps'])} / {_rate(row['server_decode_tps'])}{_sums(row)} | "
            f"{_share(row['server_cache_hit_rate'])} | "
            f"{_count(row['server_generation_tokens'])} / {_count(row['client_output_tokens'])} | "
            f"{_count(row['server_running_max'])} / {_count(row['server_waiting_max'])} |"
        )
    out += [
        "",
        "– : a server figure the server does not publish (see Server metrics in Setup for what it lacks), "
        "or a client figure the results table withholds or shows as n/a (its footnotes say why).",
        "",
        "Rates: the client's are medians of its per-request rates; the server's are the medians of its "
        "per-response timings where it sends them (llama.cpp), the same statistic. Σ: the server sent none, "
        "so its rate is /metrics' tokens ÷ seconds over the whole case, a ratio of sums, which with requests "
        "batched or a noisy host is not one request's rate.",
        "",
    ]
    if figure:
        title, path, caption = figure
        out += [f"![{title}]({path})", ""] if path else []
        out += [caption, ""] if caption else []
    return out


def csv_text(results: RunResult) -> str:
    """server.csv: one row per case, the section's columns, unformatted (empty: unavailable)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for case in results.cases:
        row = case_row(results, case)
        writer.writerow(
            table.case_key_cells(case) + ["" if row[c] is None else row[c] for c in CSV_COLUMNS[len(CASE_COLUMNS) :]]
        )
    return out.getvalue()


def figure(results: RunResult, directory: Path) -> Figure | None:
    """server_view.png: per case, client TTFT beside the server's queue + prefill; prefill and
    decode rates of both sides (the client's as the results table shows them: medians). None
    when no case has server figures."""
    rows = [(c, case_row(results, c)) for c in results.cases]
    rows = [(c, r) for c, r in rows if r["server_source"]]
    if not rows:
        return None
    from benchy.report import plots

    plt = plots.plt
    labels = [table.case_name(c) for c, _ in rows]
    y = list(range(len(rows)))
    fig, (left, mid, right) = plt.subplots(1, 3, figsize=(plots.WIDE[0] * 1.2, 2.6 + 0.5 * len(rows)), sharey=True)
    _ttft_split(left, y, [r for _, r in rows])
    missing = _pair(mid, y, rows, "prefill_tps", "Prefill t/s")
    missing += _pair(right, y, rows, "decode_tps", "Decode t/s")
    left.set_yticks(y, labels)
    left.invert_yaxis()
    fig.suptitle("Server view: the server's own figures beside the client's")
    caption = (
        "Left: client TTFT (mean, as the server's histograms give means) against the server's own "
        "split of it: queue (waiting for a slot) and prefill (to the first token); the rest passed "
        "outside the server (a part too small to see in every case is left out; the table has it). Middle and right: prefill and decode rates, the client's as the results "
        "table shows them (medians), the server's as it reported them."
    )
    if missing:
        caption += f" No bar (the results table's footnotes say why): {plots.left_out_clauses(missing)}."
    path = plots.save(fig, directory / "server_view.png")
    return plots.Figure("Server view", path, caption)


# A part of the server's TTFT below this share of the axis for every case is no bar a reader
# could see: it gets none, and no legend entry (the section's table has its number).
VISIBLE_SHARE = 0.005


def _ttft_split(ax: Axes, y: list[int], rows: list[dict[str, Any]]) -> None:
    """Client TTFT beside the server's split of it; a part too small to see in every case (zero,
    or not reported) gets no bar and no legend entry."""
    height = 0.38
    client = [(r["client_ttft_s"] or 0) * 1000 for r in rows]
    queue = [(r["server_queue_s"] or 0) * 1000 for r in rows]
    prefill = [(r["server_prefill_s"] or 0) * 1000 for r in rows]
    other = [max(0.0, (r["server_ttft_s"] or 0) * 1000 - q - p) for r, q, p in zip(rows, queue, prefill)]
    ax.barh([v - height / 2 for v in y], client, height, color="C0", label="client TTFT")
    lower = [v + height / 2 for v in y]
    start = [0.0] * len(rows)
    visible = VISIBLE_SHARE * max([*client, *(q + p + o for q, p, o in zip(queue, prefill, other))], default=0.0)
    split = False
    for part, color, label in (
        (queue, "C3", "server: queue"),
        (prefill, "C1", "server: prefill"),
        (other, "C7", "server: other"),
    ):
        if max(part, default=0.0) > visible:
            ax.barh(lower, part, height, left=start, color=color, label=label)
            start = [a + b for a, b in zip(start, part)]
            split = True
    ax.set_xlabel("ms (mean)")
    # the title names only what is drawn: llama.cpp, for one, publishes no split of TTFT
    ax.set_title("TTFT: client vs server split" if split else "TTFT: client (the server reports no split)")
    _from_zero(ax)
    _legend_below(ax, 2)


def _pair(
    ax: Axes, y: list[int], rows: list[tuple[CaseResult, dict[str, Any]]], metric: str, title: str
) -> list[LeftOut]:
    """The client's median (the results table's figure) beside the server's rate; returns why
    each missing bar is missing. A missing figure gets no bar (a zero-length bar reads as a rate
    of 0) but a word where its bar would be; a side with no figure at all, no legend entry."""
    from benchy.report import plots

    height = 0.38
    client = [_shown_median(case, metric) for case, _ in rows]
    server = [r[f"server_{metric}"] for _, r in rows]
    sides = (
        ([s.median if s else None for s in client], -height / 2, "C0", "client (median)", "no client figure"),
        (server, height / 2, "C2", "server", "not published"),
    )
    for values, offset, color, label, absent in sides:
        drawn = [(v + offset, value) for v, value in zip(y, values) if value is not None]
        if drawn:
            ax.barh([at for at, _ in drawn], [value for _, value in drawn], height, color=color, label=label)
        for v, value in zip(y, values):
            if value is None:
                ax.text(
                    0, v + offset, f" {absent}", va="center", ha="left", fontsize="x-small", color="0.4", style="italic"
                )
    ax.set_xlabel("tokens/s")
    ax.set_title(title)
    _from_zero(ax)
    if ax.containers:
        _legend_below(ax, 2)
    missing = []
    for (case, _), summary, value in zip(rows, client, server):
        name = table.case_name(case)
        if summary is None:
            missing.append(_client_left_out(case, metric, f"client {title}"))
        if value is None:
            missing.append(plots.LeftOut(f"server {title}", name, "the server does not publish it"))
    return missing


def _from_zero(ax: Axes) -> None:
    """A value axis that starts at a labelled 0 and writes each tick in full (2.5M, never a
    '1e6' offset that makes 3.5 read as the rate)."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.set_xlim(left=0)
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))  # a third of the figure's width: few ticks
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _tick(v, ax.get_xlim()[1])))


def _tick(value: float, top: float | None = None) -> str:
    """2.5M, 40k, 2,500: short enough that a rate axis's labels never run together, and one unit
    for the whole axis (chosen by its top): 7.5k beside 10k, never 7,500 beside 10k."""
    top = value if top is None else top
    if top >= 1e6:
        return f"{value / 1e6:g}M" if value else "0"
    if top >= 1e4:
        return f"{value / 1e3:g}k" if value else "0"
    return f"{value:,.0f}"


def _legend_below(ax: Axes, columns: int) -> None:
    """Under the axis, so that no bar is hidden behind it."""
    # anchored in font sizes below the axes, not in a share of their height: as close under a
    # tall chart as under a short one
    ax.legend(
        fontsize="small", loc="upper center", bbox_to_anchor=(0.5, 0.0), borderaxespad=3.6, ncol=columns, frameon=False
    )


def write_csv(results: RunResult, directory: Path) -> Path:
    path = directory / "server.csv"
    path.write_text(csv_text(results), encoding="utf-8")
    return path
