"""The server's view of each case beside the client's, from saved results only: who served
(setup.server), what its /metrics said per case (case.server), as setup rows, a Markdown
section, a figure and server.csv. A figure the server did not publish is left empty with the
reason; nothing is estimated here.

The columns, the same in the section's table and in server.csv (server_source: /metrics, or,
without it, llama.cpp's per-response timings, which give the two rates only) (times are means over the
case's measured requests, on both sides, so that they compare; the server's medians come from
histogram buckets and are too coarse to set beside the client's):
  client TTFT | server TTFT | queue | prefill | client prefill t/s | server prefill t/s |
  client decode t/s | server decode t/s | cache hit rate | generated tokens (server / client)
  | running max | waiting max
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from benchy.report import table
from benchy.results.types import CaseResult, RunResult

SECTION_INTRO = (
    "What the server itself reported for each case (Prometheus /metrics, scraped before and after "
    "the case's measured requests), beside what benchy measured. Times are means over the measured "
    "requests on both sides. The server's TTFT runs from when it received a request; queue is "
    "the time the request waited for a slot, prefill from then to the first token. Client TTFT "
    "minus server TTFT passed outside the server (network, proxies, the client)."
)
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
    "unavailable",
)


def _server(case: CaseResult) -> dict | None:
    server = case.server
    return server if isinstance(server, dict) and server.get("engine") else None


def absent_reason(results: RunResult, case: CaseResult) -> str:
    """Why a case has no server figures."""
    server = case.server or {}
    if server.get("unavailable"):
        return server["unavailable"]
    status = results.setup.server_metrics or {}
    return status.get("reason") or "the run recorded no server metrics (an older benchy?)"


def _mean(case: CaseResult, metric: str) -> float | None:
    summary = case.summary.get(metric)
    return summary.mean if summary else None


def _hist_mean(server: dict, name: str) -> float | None:
    h = (server.get("histograms") or {}).get(name)
    return h.get("mean") if h and h.get("count") else None


def _gauge_max(server: dict, name: str) -> float | None:
    g = (server.get("gauges") or {}).get(name)
    return g.get("max") if g else None


def _client_tokens(case: CaseResult) -> int | None:
    counts = [r.completion_tokens for r in case.requests if not r.warmup]
    return None if not counts or any(c is None for c in counts) else sum(c for c in counts if c is not None)


def case_row(results: RunResult, case: CaseResult) -> dict:
    """The section's figures of one case (None where unavailable)."""
    server = _server(case) or {}
    derived, counters = server.get("derived") or {}, server.get("counters") or {}
    row = {
        "server_source": f"/metrics ({server['engine']})" if server else None,
        "client_ttft_s": _mean(case, "ttft_s"),
        "server_ttft_s": _hist_mean(server, "ttft_s"),
        "server_queue_s": _hist_mean(server, "queue_s"),
        "server_prefill_s": _hist_mean(server, "prefill_s"),
        "client_prefill_tps": _mean(case, "prefill_tps"),
        "server_prefill_tps": derived.get("prefill_tps"),
        "client_decode_tps": _mean(case, "decode_tps"),
        "server_decode_tps": derived.get("decode_tps"),
        "server_cache_hit_rate": derived.get("cache_hit_rate"),
        "server_generation_tokens": counters.get("generation_tokens"),
        "client_output_tokens": _client_tokens(case),
        "server_running_max": _gauge_max(server, "running"),
        "server_waiting_max": _gauge_max(server, "waiting"),
        "server_kv_cache_usage_max": _gauge_max(server, "kv_cache_usage"),
    }
    for rate in ("server_prefill_tps", "server_decode_tps"):  # else llama.cpp's per-response timings
        if row[rate] is None:
            row[rate] = _mean(case, rate)
    row["unavailable"] = "" if server else absent_reason(results, case)
    if not server and any(row[rate] is not None for rate in ("server_prefill_tps", "server_decode_tps")):
        row["server_source"] = "response timings"  # no /metrics, but the server's own clock per response
    return row


def setup_rows(results: RunResult) -> list[tuple[str, str | None]]:
    """Rows for the report's Setup table: engine, context, slots, model path, metrics."""
    ident = results.setup.server or {}
    if not ident:
        return []
    why = ident.get("unavailable") or {}
    engine = " ".join(p for p in (ident.get("engine"), ident.get("version") or ident.get("build")) if p)
    status = results.setup.server_metrics or {}
    return [
        ("Engine", engine or f"unknown: {why.get('engine', 'not identified')}"),
        ("Build", ident.get("build")),
        ("Context length", _fact(ident, "context_length", "context_source", "tokens per request")),
        ("Slots (requests run at once)", _fact(ident, "slots", "slots_source", "")),
        ("Model path", ident.get("model_path")),
        ("Server metrics", _metrics_text(status)),
    ]


def _fact(ident: dict, key: str, source: str, unit: str) -> str:
    value = ident.get(key)
    if value is None:
        return f"unknown: {(ident.get('unavailable') or {}).get(key, 'not reported')}"
    return f"{value:,} {unit}".strip() + f" ({ident.get(source)})"


def _metrics_text(status: dict) -> str | None:
    if not status:
        return None
    if not status.get("available"):
        return f"none: {status.get('reason')}"
    missing = sorted(status.get("missing") or {})
    return f"{status.get('engine')} names at {status.get('url')}" + (
        f"; not published: {', '.join(missing)}" if missing else ""
    )


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
            f"{_rate(row['client_prefill_tps'])} / {_rate(row['server_prefill_tps'])} | "
            f"{_rate(row['client_decode_tps'])} / {_rate(row['server_decode_tps'])} | "
            f"{_share(row['server_cache_hit_rate'])} | "
            f"{_count(row['server_generation_tokens'])} / {_count(row['client_output_tokens'])} | "
            f"{_count(row['server_running_max'])} / {_count(row['server_waiting_max'])} |"
        )
    out += ["", "– : the server does not publish that figure (see Server metrics in Setup for what it lacks).", ""]
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


def figure(results: RunResult, directory: Path):
    """server_view.png: per case, client TTFT beside the server's queue + prefill; prefill and
    decode rates of both sides. None when no case has server figures."""
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
    _pair(mid, y, rows, "client_prefill_tps", "server_prefill_tps", "Prefill t/s")
    _pair(right, y, rows, "client_decode_tps", "server_decode_tps", "Decode t/s")
    left.set_yticks(y, labels)
    left.invert_yaxis()
    fig.suptitle("Server view: the server's own figures beside the client's")
    caption = (
        "Left: client TTFT (mean) against the server's own split of it: queue (waiting for a slot) "
        "and prefill (to the first token); the rest passed outside the server. Middle and right: "
        "prefill and decode rates as the client measured them and as the server reported them. A "
        "missing bar: that side does not publish the figure."
    )
    path = plots.save(fig, directory / "server_view.png")
    return plots.Figure("Server view", path, caption)


def _ttft_split(ax, y: list[int], rows: list[dict]) -> None:
    height = 0.38
    client = [(r["client_ttft_s"] or 0) * 1000 for r in rows]
    queue = [(r["server_queue_s"] or 0) * 1000 for r in rows]
    prefill = [(r["server_prefill_s"] or 0) * 1000 for r in rows]
    other = [max(0.0, (r["server_ttft_s"] or 0) * 1000 - q - p) for r, q, p in zip(rows, queue, prefill)]
    ax.barh([v - height / 2 for v in y], client, height, color="C0", label="client TTFT")
    lower = [v + height / 2 for v in y]
    ax.barh(lower, queue, height, color="C3", label="server: queue")
    ax.barh(lower, prefill, height, left=queue, color="C1", label="server: prefill")
    ax.barh(lower, other, height, left=[q + p for q, p in zip(queue, prefill)], color="C7", label="server: other")
    ax.set_xlabel("ms (mean)")
    ax.set_title("TTFT: client vs server split")
    _legend_below(ax, 2)


def _pair(ax, y: list[int], rows: list, client_key: str, server_key: str, title: str) -> None:
    height = 0.38
    client = [r[client_key] or 0 for _, r in rows]
    server = [r[server_key] or 0 for _, r in rows]
    ax.barh([v - height / 2 for v in y], client, height, color="C0", label="client")
    ax.barh([v + height / 2 for v in y], server, height, color="C2", label="server")
    ax.set_xlabel("tokens/s")
    ax.set_title(title)
    _legend_below(ax, 2)


def _legend_below(ax, columns: int) -> None:
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
