"""The one builder of results: records and metrics in, typed results out, made once.

What each figure is, and whether it is withheld, is decided here (with the case's buffering
verdict, and a loaded case's queueing: its TTFT against the same prompt alone), then each
case's ceiling and each shared-prefix case's TTFT gain; nothing changes a result after it is
built but the warnings, which checks/ adds beside it.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable
from copy import deepcopy
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from benchy.measure import case_formulas, classify, metrics, reading, registry, steady
from benchy.measure import gpu as gpu_figures
from benchy.measure.ceiling import CeilingSetup, case_ceiling
from benchy.measure.gpu import GpuCase
from benchy.measure.health import ClientHealth
from benchy.measure.images import ImageTally
from benchy.measure.sanity.tally import SanityTally
from benchy.measure.silence import SilenceTracker
from benchy.measure.slo import goodput_figures
from benchy.measure.unavailable import LEGACY, NO_SUCCESS, NO_TOOL_CALL, POOLED_WHY, PROMPT_LENGTH_MISSED, Unavailable
from benchy.measure.workloads import WorkloadFigures, case_figures, ttft_gains, withhold_turns
from benchy.records import RequestRecord
from benchy.results import latency
from benchy.results.rows import CONTROL, OK, WARMUP, Rows
from benchy.results.types import (
    CaseCeiling,
    CaseResult,
    Goodput,
    MetricSummary,
    NotMeasured,
    RequestResult,
    RowScan,
    RunResult,
    Setup,
    SteadyState,
    Stopped,
)
from benchy.results.verdicts import queueing
from benchy.server.cache_reset import CacheReset
from benchy.server.metrics import NoServerFigures, ServerCaseMetrics
from benchy.workloads.case import POOLING_ENDPOINTS, Case


class CaseRows:
    """A case's requests as results.json keeps them, made a record at a time as the analysis
    reads the bundle: its RequestResult (no per-event arrays: requests.jsonl keeps those) and
    its own buffering reason. Holding these, not the records, keeps the analysis's memory small
    per request; a workload case also keeps its records (its figures re-read the streams)."""

    def __init__(self, keep_records: bool = False, spill_dir: Path | None = None) -> None:
        self.rows = Rows(spill_dir, parse=RequestResult.of_own_line)  # past rows.IN_MEMORY, on disk: a line each
        self.buffer_reasons: list[str | None] = []  # per row: why its own stream looks buffered
        self._reasons: dict[str, str] = {}  # the distinct reasons: a long buffered case repeats a few
        self.records: list[RequestRecord] | None = [] if keep_records else None
        self.alone_ttft_s: list[float] = []  # TTFTs of the requests sent alone (load/alone.py), as measured
        self.alone_points: list[tuple[float, float]] = []  # their (uncached prompt tokens, TTFT)
        self.silence = SilenceTracker()  # the longest silence on every stream mid-answer (measure/silence.py)
        self.sanity = SanityTally()  # output sanity of the measured answers (benchy/measure/sanity)

    @classmethod
    def of(cls, records: Iterable[RequestRecord], keep_records: bool = False) -> CaseRows:
        rows = cls(keep_records)
        for rec in records:
            rows.add(rec)
        return rows

    def add(self, rec: RequestRecord) -> RequestResult:
        """The record as the case counts it (classify.classify); judged alone until the case's
        buffering verdict is known (case_result applies it)."""
        rec = classify.classify(rec)  # an empty output is a failure, not a success
        read = reading.read(rec) if rec.ok else None  # once, for its metrics and its buffering
        values = registry.request_metrics(rec, False, read)
        row = RequestResult.of(rec, values, read)
        ttft = values["ttft_s"]
        if rec.alone and rec.ok and not isinstance(ttft, Unavailable):
            self.alone_ttft_s.append(ttft)
            if rec.prompt_tokens is not None:
                self.alone_points.append((rec.prompt_tokens - (rec.cached_tokens or 0), ttft))
        self.rows.append(row)
        self.sanity.add(rec)
        why = classify.buffering_reason(rec, read) if read and classify.is_buffered(rec, read) else None
        self.buffer_reasons.append(None if why is None else self._reasons.setdefault(why, why))  # one copy each
        if self.records is not None:
            self.records.append(rec)
        if not (rec.warmup or rec.control):
            self.silence.add(rec)
        return row

    def __len__(self) -> int:
        return len(self.rows)


def case_result(
    case: Case,
    endpoint: str,
    runs: int,
    records: list[RequestRecord] | CaseRows,
    slo: dict[str, float] | None = None,
    client: ClientHealth | dict[str, Any] | None = None,
    server: ServerCaseMetrics | NoServerFigures | None = None,
    planned_requests: int | None = None,
    gpu: GpuCase | None = None,
    idle_power_w: float | None = None,
    cache_reset: CacheReset | None = None,
) -> CaseResult:
    made = records if isinstance(records, CaseRows) else CaseRows.of(records, keep_records=bool(case.workload))
    rows = made.rows
    reasons = [why for f, why in zip(rows.flags, made.buffer_reasons) if f & (WARMUP | OK | CONTROL) == OK]
    buffered: Unavailable | Literal[False] = classify.buffering_verdict(reasons) or False  # one late read is no buffer
    if buffered:
        rows.apply(lambda row: _judge_buffered(row, buffered))
    tally = _Tally(slo)
    scan = RowScan() if rows.spilled else None  # what the checks and reports read, in the same pass
    shown = ImageTally()  # --images: the images' figures
    for row in rows:  # one pass: a spilled case is read a row at a time
        tally.add(row)
        shown.add(row)
        if scan is not None:
            scan.add(row)
    if scan is not None:
        rows.remember(RowScan.KEY, scan)  # until a row changes (a withheld figure: read again)
    summary, unavailable, send_lag = tally.summaries()
    measured = tally.measured
    per_case = registry.case_metrics(measured, _light_tokens)  # type: ignore[arg-type]
    cut = case_formulas.cut_short(len(measured), planned_requests)
    pooled = endpoint in POOLING_ENDPOINTS  # no output tokens: input tokens/s stands in for them
    names = ("aggregate_tps", "request_rate") + (("input_tps", "input_rate") if pooled else ())
    rates = {name: cut or per_case[name] for name in names}
    if cut:
        unavailable |= dict.fromkeys(rates, cut)
    if pooled:
        rates["aggregate_tps"] = unavailable["aggregate_tps"] = POOLED_WHY
    result = CaseResult(
        label=case.label,
        scenario=case.scenario,
        pp=case.pp,
        tg=case.tg,
        concurrency=None if case.kind == "trace" else case.concurrency,  # its arrivals set its load
        depth=case.depth,
        endpoint=endpoint,
        runs=runs,
        depth_mode=case.depth_mode if case.depth else None,
        pp_stddev=case.pp_stddev or None,
        tg_stddev=case.tg_stddev or None,
        n_ok=tally.n_ok,
        n_failed=len(measured) - tally.n_ok,
        n_warmup=tally.n_warmup,  # the requests sent alone first too
        errors=dict(tally.errors),
        anomalies=dict(tally.anomalies),
        retried=dict(tally.retried),
        summary=summary,
        unavailable={k: v.message for k, v in unavailable.items()},
        unavailable_codes={k: v.code for k, v in unavailable.items()},
        aggregate_tps=_value(rates["aggregate_tps"]),
        mode="open" if case.rate is not None or case.kind == "trace" else "closed",
        rate=case.rate,
        achieved_rate=_value(per_case["achieved_rate"]),
        request_rate=_value(rates["request_rate"]),
        input_tps=_value(rates["input_tps"]) if pooled else None,
        input_rate=_value(rates["input_rate"]) if pooled else None,
        images=shown.result(),
        send_lag=send_lag,
        from_schedule=tally.schedule_summaries(),
        steady=tally.steady_state(case.concurrency or 1) if case.rate is None and case.kind != "trace" else None,
        goodput=_goodput(measured, slo) if slo else None,
        requests=rows,  # type: ignore[arg-type]  # a Sequence: on disk past rows.IN_MEMORY
        client=_client(client),
        server=server,
        planned_requests=planned_requests,
        kind=case.kind,
        workload=_workload_figures(case, made) if case.workload else None,
        gpu=_gpu(gpu, tally.ok_tokens, tally.n_ok, idle_power_w),
        cache_reset=cache_reset,
        silence=made.silence.longest(),
        sanity=made.sanity.result(),
    )
    queueing.judge_alone(result, made.alone_ttft_s, made.alone_points)
    return result


def _client(client: ClientHealth | dict[str, Any] | None) -> ClientHealth | None:
    if isinstance(client, ClientHealth):
        return deepcopy(client)  # the result's own: the analysis never writes into its inputs
    return ClientHealth.from_dict(client, strict=True) if client else None  # an unknown key: a field forgot


def _gpu(gpu: GpuCase | None, tokens: int, n_ok: int, idle_power_w: float | None) -> GpuCase | None:
    """The case's GPU figures with the per-token ones: the energy of the measured window ÷ the
    output tokens of its successful requests (failed ones' tokens are not known)."""
    if gpu is None:
        return None
    return gpu_figures.per_token(gpu, tokens, n_ok, idle_power_w)


class _Light:
    """What the case-level figures (registry.case_metrics, goodput) read of a measured request:
    a few numbers in place of its row, so that a long case's rows need not be held."""

    __slots__ = ("ok", "sent_mono_s", "end_s", "tokens", "prompt_tokens", "inputs", "slo_values")

    def __init__(self, row: RequestResult, slo: dict[str, float] | None) -> None:
        self.ok, self.sent_mono_s, self.end_s = row.ok, row.sent_mono_s, row.end_s
        self.prompt_tokens, self.inputs = row.prompt_tokens, row.inputs  # inputs: a pooling request's
        self.tokens = _row_tokens(row)
        self.slo_values = None  # what goodput judges, with --slo only
        if slo and row.ok:
            values = _row_values(row)
            self.slo_values = {name: values[name] for name in slo if name in values}


def _light_tokens(light: _Light) -> int:
    return light.tokens


class _Tally:
    """A case's counts and per-metric values, gathered in one pass over its rows: its
    summaries are made from compact float arrays, never from every row held at once."""

    def __init__(self, slo: dict[str, float] | None) -> None:
        self.slo = slo
        self.measured: list[_Light] = []
        self.n_ok = self.n_warmup = self.ok_tokens = 0
        self.errors: Counter[str] = Counter()
        self.anomalies: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self.lags = array("d")
        self.from_schedule = {name: array("d") for name in FROM_SCHEDULE}
        self.ok_times = array("d")  # each successful request's send, then its end
        self.steady_values = {name: array("d") for name in steady.STEADY_METRICS}  # NaN: none
        self.values = {name: array("d") for name in registry.REQUEST_METRICS}
        self.missing: dict[str, Counter[tuple[str, str]]] = {name: Counter() for name in registry.REQUEST_METRICS}

    def add(self, row: RequestResult) -> None:
        self.n_warmup += row.warmup
        if row.warmup or row.control:  # a workload's cold controls: figures of their own
            return
        self.measured.append(_Light(row, self.slo))
        lag = case_formulas.send_lag_s(row)
        if not isinstance(lag, Unavailable):
            self.lags.append(lag)
        if row.retried_kind:
            self.retried[row.retried_kind] += 1
        if not row.ok:
            self.errors[str(row.error_kind)] += 1
            return
        self.n_ok += 1
        self.ok_tokens += _row_tokens(row)
        self.ok_times.extend((row.sent_mono_s, row.sent_mono_s + (row.end_s or 0.0)))
        for name, found in self.steady_values.items():
            value = row.metrics.get(name)
            found.append(math.nan if value is None else value)
        self.anomalies.update(row.anomalies)
        codes, why = row.unavailable_codes, row.unavailable  # _row_values, without an Unavailable a value
        for name, value in row.metrics.items():
            if value is None:
                self.missing[name][(codes.get(name, LEGACY), why.get(name, "not measured"))] += 1
            else:
                self.values[name].append(value)
                if name in self.from_schedule and not isinstance(lag, Unavailable):
                    self.from_schedule[name].append(value + lag)

    def summaries(self) -> tuple[dict[str, MetricSummary | None], dict[str, Unavailable], MetricSummary | None]:
        """A metric is summarized only if every successful request has it: averaging the subset
        that happened to be measurable would hide the rest. Then the send lags' summary. The
        bootstraps of all of them are drawn together (MetricSummary.of_all)."""
        summary: dict[str, MetricSummary | None] = {}
        unavailable: dict[str, Unavailable] = {}
        complete: list[str] = []
        for name in registry.REQUEST_METRICS:
            missing, measured = self.missing[name], self.values[name]
            n_missing = sum(missing.values())
            summary[name] = None
            if not self.n_ok:
                unavailable[name] = Unavailable(NO_SUCCESS, "no request succeeded")
            elif n_missing == self.n_ok and {code for code, _ in missing} == {NO_TOOL_CALL}:
                continue  # no answer called a tool: the figure does not apply (tool_choice_ignored says if one should have)
            elif _few_missed_lengths(missing, self.n_ok):  # the case's figure is the others'
                complete.append(name)
            elif n_missing or len(measured) < self.n_ok:
                (code, message), _ = missing.most_common(1)[0] if missing else ((LEGACY, "not measured"), 0)
                if n_missing < self.n_ok:
                    message = f"{n_missing} of {self.n_ok} requests: {message}"
                unavailable[name] = Unavailable(code, message)
            else:
                complete.append(name)
        made = MetricSummary.of_all([self.values[name] for name in complete] + ([self.lags] if self.lags else []))
        summary.update(zip(complete, made))  # in the registry's order, as before
        return summary, unavailable, made[-1] if self.lags else None

    def steady_state(self, streams: int) -> SteadyState | None:
        """The closed loop's steady window (measure/steady.py) and each STEADY_METRICS summary
        over its requests, where every one of them has the metric."""
        sends = np.array([light.sent_mono_s for light in self.measured], dtype=float)
        ends = np.array([light.sent_mono_s + light.end_s for light in self.measured if light.end_s is not None])
        span = steady.window(sends, ends, streams)
        if span is None or not self.n_ok:
            return None
        times = np.frombuffer(self.ok_times, dtype=float).reshape(-1, 2)
        mask = steady.inside(times[:, 0], times[:, 1], span)
        picked = {name: np.frombuffer(found, dtype=float)[mask] for name, found in self.steady_values.items()}
        whole = [name for name, values in picked.items() if values.size and not np.isnan(values).any()]
        first = float(sends.min())
        return SteadyState(
            start_s=span[0] - first,
            end_s=span[1] - first,
            requests=int(mask.sum()),
            summary=dict(zip(whole, MetricSummary.of_all([picked[name] for name in whole]), strict=True)),
        )

    def schedule_summaries(self) -> dict[str, MetricSummary]:
        """FROM_SCHEDULE's latencies timed from each request's intended send (open loop), where
        every successful request has one: a stall that held sends back stays in the tail it
        caused (no coordinated omission)."""
        whole = [name for name, found in self.from_schedule.items() if self.n_ok and len(found) == self.n_ok]
        return dict(zip(whole, MetricSummary.of_all([self.from_schedule[name] for name in whole]), strict=True))


def _few_missed_lengths(missing: Counter[tuple[str, str]], n_ok: int) -> bool:
    """Whether the only requests without the figure are a minority the server counted at
    another prompt length: they are another prompt's, so they are left out, and the case's
    figure is that of the requests it was labelled for (prompt_length_mismatch says so)."""
    codes = {code for code, _ in missing}
    return codes == {PROMPT_LENGTH_MISSED} and 2 * sum(missing.values()) < n_ok


def _workload_figures(case: Case, made: CaseRows) -> WorkloadFigures:
    """The workload's own figures from its records, each request's metrics as its row has
    them (with the case's verdict)."""
    records = made.records if made.records is not None else []
    measured = [r for r in records if not r.warmup and not r.control]
    controls = [r for r in records if r.control]
    values = {r.request_id: _row_values(r) for r in made.rows if r.ok and not r.warmup}
    ahead = [r for r in records if r.warmup and not r.alone]  # a prefix sent ahead, a conversation's opening
    return case_figures(case.kind, case.workload.to_dict(), measured, controls, values, ahead)  # type: ignore[union-attr]


def _judge_buffered(row: RequestResult, why: Unavailable) -> None:
    """The case's buffering verdict on one successful request: its stream timings are
    unavailable for the case's reason, as registry.request_metrics(rec, verdict) makes them."""
    if not row.ok:
        return
    for name in registry.STREAM_TIMING_METRICS:
        row.metrics[name] = None
        row.unavailable[name], row.unavailable_codes[name] = why.message, why.code
    row.unavailable = _in_metric_order(row.unavailable)
    row.unavailable_codes = _in_metric_order(row.unavailable_codes)


FROM_SCHEDULE = ("ttft_s", "e2e_s")  # latencies an open loop also times from the schedule
_METRIC_ORDER = {name: i for i, name in enumerate(registry.REQUEST_METRICS)}


def _in_metric_order(by_metric: dict[str, str]) -> dict[str, str]:
    """`by_metric` in the registry's order (a name it does not know sorts with its first)."""
    if by_metric.keys() <= _METRIC_ORDER.keys():  # every name known: picked in order, not sorted
        return {name: by_metric[name] for name in _METRIC_ORDER if name in by_metric}
    return dict(sorted(by_metric.items(), key=lambda kv: _METRIC_ORDER.get(kv[0], 0)))


def _row_tokens(row: RequestResult) -> int:
    """The completion count the figures use (reading.count_entry, kept on every successful row)."""
    return row.token_count.tokens if row.token_count is not None else 0


def _row_values(row: RequestResult) -> dict[str, float | Unavailable]:
    """A row's metrics as registry.request_metrics returned them: a value, or why there is none."""
    return {
        name: Unavailable(row.unavailable_codes.get(name, LEGACY), row.unavailable.get(name, "not measured"))
        if value is None
        else value
        for name, value in row.metrics.items()
    }


def run_result(
    setup: dict[str, Any],
    cases: list[CaseResult],
    partial: bool,
    stopped: dict[str, Any] | None,
    version: str,
    not_measured: list[NotMeasured] | None = None,
) -> RunResult:
    """The run's results, complete but for the warnings (checks.py adds those): what no single
    case can decide (a TTFT trend across output lengths) is withheld here, then each case is
    finished with what the run's setup says, and each shared-prefix case's TTFT gain."""
    parsed = Setup.from_dict(setup, strict=True)  # an unknown key: a field someone forgot
    withhold_buffered_trend(cases)
    queueing.judge_against_concurrency_1(cases)
    fixed = latency.find(cases)  # after queueing: a queued case keeps that cause
    latency.withhold_fixed_latency(cases, fixed)
    finished = [_finished(case, parsed) for case in cases]
    ttft_gains(finished)  # shared prefix: each against the same lengths with nothing shared
    return RunResult(
        benchy_version=version,
        prompt_nonce=setup.get("prompt_nonce"),
        partial=partial,
        stopped=Stopped(**stopped) if stopped else None,
        setup=parsed,
        cases=finished,
        not_measured=not_measured or [],
        fixed_latency=fixed,
    )


def _finished(case: CaseResult, setup: Setup) -> CaseResult:
    """The case with what only the run's setup says (its ceiling, its prompt-length method) and
    its turns as its verdicts leave them: a new CaseResult, no write into the one measured."""
    return replace(
        case,
        ceiling=_case_ceiling(case, setup.ceiling),
        prompt_lengths=_prompt_lengths(setup, case.endpoint, case.label),
        workload=withhold_turns(case.workload, case.unavailable) if case.workload is not None else None,
    )


def _prompt_lengths(setup: Setup, endpoint: str | None, label: str) -> str | None:
    """The case's length method: a fitted dataset case's cuts' (setup.dataset.lengths), else
    its endpoint's calibration's (load/lengths.py)."""
    if setup.dataset is not None and label in setup.dataset.lengths:
        return setup.dataset.lengths[label]
    cal = setup.calibrations.get(endpoint or "") or setup.calibration
    return cal.lengths.method if cal is not None and cal.lengths is not None else None


def withhold_buffered_trend(cases: list[CaseResult]) -> None:
    """Single-stream cases at one prompt whose TTFT grows with the output length (metrics.
    buffered_trend) lose their stream timings, unless usage shows one token per event."""
    groups: dict[tuple[Any, ...], list[CaseResult]] = {}
    for case in cases:
        if case.concurrency == 1 and case.summary.get("ttft_s") and case.summary.get("e2e_s"):
            groups.setdefault((case.pp, case.depth, case.depth_mode, case.endpoint), []).append(case)
    for group in groups.values():
        short, long = min(group, key=lambda c: c.tg), max(group, key=lambda c: c.tg)
        if short.tg == long.tg or (_streams_token_by_token(short) and _streams_token_by_token(long)):
            continue
        why = metrics.buffered_trend(_trend_point(short), _trend_point(long))
        if why is not None:
            for case in group:
                case.withhold(registry.STREAM_TIMING_METRICS, why)


def _trend_point(case: CaseResult) -> tuple[int, float, float]:
    return case.tg, case.summary["ttft_s"].median, case.summary["e2e_s"].median  # type: ignore[union-attr]


def _streams_token_by_token(case: CaseResult) -> bool:
    """The server's own usage shows about one token per event: direct evidence of a live
    stream, which outweighs a TTFT trend (on a fast small model, load noise in TTFT can
    rival the whole decode time)."""
    facts = case.facts()
    per_event = case.median("tokens_per_event")
    return (
        bool(facts.n_ok)
        and facts.n_usage_reported == facts.n_ok  # every one carried usage
        and per_event is not None
        and per_event <= classify.LIVE_STREAM_TOKENS_PER_EVENT
    )


def _case_ceiling(case: CaseResult, setup: CeilingSetup | None) -> CaseCeiling | None:
    """The case's decode ceiling and its measured medians as a % of it."""
    found = case_ceiling(case.pp, case.tg, case.depth or 0, setup)
    if found is None:
        return None
    decode, e2e = case.median("decode_tps"), case.median("e2e_tps")
    return CaseCeiling(
        tokens_per_s=found.tokens_per_s,
        context_tokens=found.context_tokens,
        weight_bytes_per_token=found.weight_bytes_per_token,
        kv_bytes_per_token=found.kv_bytes_per_token,
        decode_pct=None if decode is None else found.percent_of(decode),
        e2e_pct=None if e2e is None else found.percent_of(e2e),
    )


def _goodput(measured: list[_Light], slo: dict[str, float]) -> Goodput:
    """Each request judged on the figures the case reports: by the case's buffering verdict,
    which its rows already carry."""
    fraction, rate = goodput_figures(measured, slo, values=_slo_values)  # type: ignore[arg-type]
    if isinstance(fraction, Unavailable):
        return Goodput(slo=slo, unavailable=fraction.message)
    return Goodput(slo=slo, fraction=fraction, rate=_value(rate))


def _slo_values(light: _Light) -> dict[str, float | Unavailable]:
    return light.slo_values or {}


def _value(value: float | Unavailable) -> float | None:
    return None if isinstance(value, Unavailable) else value
