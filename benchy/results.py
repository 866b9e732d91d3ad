"""results.json: the one saved form of a run, from which every report is made.

Schema `benchy/results/1` (documented in the README):
  schema, benchy_version, prompt_nonce, partial, setup{...}, cases[{label, scenario, pp, tg,
  concurrency, depth, depth_mode ("cold" | "cached" | null without depth), endpoint, runs,
  n_ok, n_failed, errors{kind: n}, requests[...],
  summary{metric: {median, std, n, ci95, ...} | null}, unavailable{metric: reason},
  aggregate_tps}], warnings[{code, severity, case, message, hint}].
Added by checks.py and the run (all optional): setup{hardware, model_profile, ceiling{...}};
  case{ceiling{tokens_per_s, decode_pct, e2e_pct, ...}, client{loop_lag_ms_max, loop_lag_ms_p99,
  cpu_s, cpu_share, ...}, withheld{metric: summary}}; warnings[{..., metrics, withheld, details}].
  Requests with an empty or zero-token output are counted as failed (error_kind empty_output /
  zero_tokens) here, though requests.jsonl keeps the raw status the client saw.
Reliability (issue 8): top-level `stopped` (null, or {by: SIGINT | SIGTERM | max-errors |
  max-error-rate, reason}; `partial` is then true); setup{calibration_failures[...]}; case{
  anomalies{no_done | no_usage | malformed_events: requests}, retried{kind: requests sent again
  after a reused connection dropped}}; request{retried}.
Load (issue 9): case{mode ("closed" | "open"), rate, achieved_rate, request_rate, send_lag{summary}
  | null, goodput{slo, fraction, rate} | null, client{..., workers}}; request{scheduled_mono_s};
  setup{load{requests, duration_s, max_inflight, seed, workers, slo}}.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from benchy import checks, metrics, stats
from benchy.metrics import Unavailable
from benchy.records import RequestRecord
from benchy.scenario import Case

SCHEMA = "benchy/results/1"
SUMMARY_METRICS = (
    "e2e_tps",
    "ttft_s",
    "ttfc_s",
    "decode_tps",
    "prefill_tps",
    "itl_s",
    "e2e_s",
    "tokens_per_event",
    "ttft_gap_s",
)
# Bulky per-event arrays stay in requests.jsonl; results.json keeps per-request metrics.
_RECORD_FIELDS_DROPPED = ("token_event_s", "token_event_chars", "token_event_kinds")


class ResultsError(ValueError):
    """A results file benchy cannot read; one line."""


def request_entry(rec: RequestRecord) -> dict:
    entry = {k: v for k, v in rec.to_dict().items() if k not in _RECORD_FIELDS_DROPPED}
    entry["events"] = len(rec.token_event_s)
    values = metrics.request_metrics(rec)
    entry["metrics"] = {k: (None if isinstance(v, Unavailable) else v) for k, v in values.items()}
    unavailable = {k: v.reason for k, v in values.items() if isinstance(v, Unavailable)}
    if unavailable and rec.ok:
        entry["unavailable"] = unavailable
    return entry


def case_entry(
    case: Case, endpoint: str, runs: int, records: list[RequestRecord], slo: dict[str, float] | None = None
) -> dict:
    records = [checks.classify(r) for r in records]  # an empty output is a failure, not a success
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    summary, unavailable = _summaries(ok)
    aggregate = metrics.aggregate_output_tps(measured)
    return {
        "label": case.label,
        "scenario": case.scenario,
        "pp": case.pp,
        "tg": case.tg,
        "concurrency": case.concurrency,
        "depth": case.depth,
        "endpoint": endpoint,
        "runs": runs,
        "depth_mode": case.depth_mode if case.depth else None,
        "n_ok": len(ok),
        "n_failed": len(measured) - len(ok),
        "n_warmup": len(records) - len(measured),
        "errors": dict(Counter(r.error_kind for r in measured if not r.ok)),
        "anomalies": dict(Counter(a.split(":")[0] for r in ok for a in r.anomalies)),
        "retried": dict(Counter(r.retried.split(":")[0] for r in measured if r.retried)),
        "summary": summary,
        "unavailable": unavailable,
        "aggregate_tps": None if isinstance(aggregate, Unavailable) else aggregate,
        **load_entry(case, measured, slo),
        **workload_entry(case, measured),
        "requests": [request_entry(r) for r in records],
    }


def workload_entry(case: Case, measured: list[RequestRecord]) -> dict:
    """A cache-aware workload's kind and figures (benchy/workloads/figures.py); a sweep case:
    kind "sweep" and workload null."""
    if case.workload is None:
        return {"kind": "sweep", "workload": None}
    from benchy.workloads import figures

    return {"kind": case.kind, "workload": figures.case_figures(case.kind, case.workload.to_dict(), measured)}


def load_entry(case: Case, measured: list[RequestRecord], slo: dict[str, float] | None) -> dict:
    """Figures of a loaded case (issue 9): mode ("closed" | "open"), rate (asked, requests/s),
    achieved_rate (offered), request_rate (completed), send_lag (summary of the queue delay,
    open loop only) and goodput ({slo, fraction, rate} with --slo, else null)."""
    lags = [metrics.send_lag_s(r) for r in measured]
    lags = [v for v in lags if not isinstance(v, Unavailable)]
    return {
        "mode": "open" if case.rate is not None or case.kind == "trace" else "closed",
        "rate": case.rate,
        "achieved_rate": _value(metrics.achieved_rate(measured)),
        "request_rate": _value(metrics.request_rate(measured)),
        "send_lag": stats.summarize(lags) if lags else None,
        "goodput": _goodput(measured, slo) if slo else None,
    }


def _goodput(measured: list[RequestRecord], slo: dict[str, float]) -> dict:
    fraction = metrics.goodput(measured, slo)
    rate = metrics.request_rate(measured)
    if isinstance(fraction, Unavailable):
        return {"slo": slo, "fraction": None, "rate": None, "unavailable": fraction.reason}
    good_rate = None
    if not isinstance(rate, Unavailable) and fraction:
        n_ok = sum(r.ok for r in measured)
        good_rate = rate * fraction * len(measured) / n_ok  # good requests ÷ the same window
    return {"slo": slo, "fraction": fraction, "rate": good_rate if fraction else 0.0}


def _value(value: float | Unavailable) -> float | None:
    return None if isinstance(value, Unavailable) else value


def _summaries(ok: list[RequestRecord]) -> tuple[dict, dict]:
    """A metric is summarized only if every successful request has it: averaging the subset
    that happened to be measurable would hide the rest."""
    summary: dict = {}
    unavailable: dict = {}
    per_request = [metrics.request_metrics(r) for r in ok]
    for name in SUMMARY_METRICS:
        values = [m[name] for m in per_request]
        missing = [v for v in values if isinstance(v, Unavailable)]
        if not values:
            summary[name] = None
            unavailable[name] = "no request succeeded"
        elif missing:
            summary[name] = None
            reason = Counter(v.reason for v in missing).most_common(1)[0][0]
            unavailable[name] = (
                reason if len(missing) == len(values) else f"{len(missing)} of {len(values)} requests: {reason}"
            )
        else:
            summary[name] = stats.summarize(values)
    return summary, unavailable


def save(results: dict, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def load(path: Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    schema = data.get("schema") if isinstance(data, dict) else None
    if schema != SCHEMA:
        raise ResultsError(f"{path}: schema {schema!r} is not {SCHEMA!r}; this benchy cannot read it")
    return data
