"""The one builder of results: records and metrics in, typed results out, made once.

Three steps: each case's figures from its records (`case_figures`: its statistics, with its
buffering verdict), the run's verdicts on them (results/decide.py), then each CaseResult made
once from its figures and verdicts (`run_view`), its rows written with them. A result is a
frozen dataclass: nothing changes it after. The run's view is checked (checks/), and its one
RunResult made from the view and those warnings (RunView.result).
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable
from copy import deepcopy
from dataclasses import replace
from pathlib import Path

import numpy as np

from benchy.measure import case_formulas, classify, reading, registry, steady
from benchy.measure import gpu as gpu_figures
from benchy.measure.ceiling import CeilingSetup, case_ceiling
from benchy.measure.gpu import GpuCase
from benchy.measure.health import ClientHealth
from benchy.measure.images import ImageTally
from benchy.measure.sanity.tally import SanityTally
from benchy.measure.silence import SilenceTracker
from benchy.measure.slo import goodput_figures
from benchy.measure.unavailable import LEGACY, NO_SUCCESS, NO_TOOL_CALL, POOLED_WHY, PROMPT_LENGTH_MISSED, Unavailable
from benchy.measure.workloads import TtftGain, WorkloadFigures, withhold_turns
from benchy.measure.workloads import case_figures as workload_figures
from benchy.records.plan import Tagged
from benchy.results.decide import decide
from benchy.results.figures import CaseFigures, Judged, Verdicts, judged_rows
from benchy.results.findings import BUFFERED_STREAMS
from benchy.results.rows import CONTROL, OK, WARMUP, Rows
from benchy.results.types import (
    CaseCeiling,
    CaseResult,
    Goodput,
    MetricSummary,
    NotMeasured,
    RequestResult,
    RowScan,
    Setup,
    SteadyState,
    Stopped,
)
from benchy.results.view import RunView
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
        self.records: list[Tagged] | None = [] if keep_records else None
        self.alone_ttft_s: list[float] = []  # TTFTs of the requests sent alone (load/alone.py), as measured
        self.alone_points: list[tuple[float, float]] = []  # their (uncached prompt tokens, TTFT)
        self.silence = SilenceTracker()  # the longest silence on every stream mid-answer (measure/silence.py)
        self.sanity = SanityTally()  # output sanity of the measured answers (benchy/measure/sanity)

    @classmethod
    def of(cls, records: Iterable[Tagged], keep_records: bool = False) -> CaseRows:
        rows = cls(keep_records)
        for rec in records:
            rows.add(rec)
        return rows

    def add(self, rec: Tagged) -> RequestResult:
        """The record as the case counts it (classify.classify); judged alone until the case's
        buffering verdict is known (case_figures applies it as it reads the rows)."""
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


def case_figures(
    case: Case,
    endpoint: str,
    runs: int,
    records: list[Tagged] | CaseRows,
    slo: dict[str, float] | None = None,
    client: ClientHealth | None = None,
    server: ServerCaseMetrics | NoServerFigures | None = None,
    planned_requests: int | None = None,
    gpu: GpuCase | None = None,
    idle_power_w: float | None = None,
    cache_reset: CacheReset | None = None,
) -> CaseFigures:
    """The case as measured: its statistics in one pass over its rows, each judged by the
    case's buffering verdict as it is read (one late read is no buffer)."""
    made = records if isinstance(records, CaseRows) else CaseRows.of(records, keep_records=bool(case.workload))
    rows = made.rows
    reasons = [why for f, why in zip(rows.flags, made.buffer_reasons) if f & (WARMUP | OK | CONTROL) == OK]
    verdicts = Verdicts(buffered=BUFFERED_STREAMS.decide(reasons))
    tally, scan = _Tally(slo), RowScan()  # what the checks and reports read, in the same pass
    shown = ImageTally()  # --images: the images' figures
    for row in judged_rows(rows, verdicts):  # one pass: a spilled case is read a row at a time
        tally.add(row)
        scan.add(row)
        shown.add(row)
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
    fields = dict(
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
        client=_client(client),
        server=server,
        planned_requests=planned_requests,
        kind=case.kind,
        workload=_workload_figures(case, made, verdicts) if case.workload else None,
        gpu=_gpu(gpu, tally.ok_tokens, tally.n_ok, idle_power_w),
        cache_reset=cache_reset,
        silence=made.silence.longest(),
        sanity=made.sanity.result(),
    )
    measured_figures = Judged(
        summary,
        {k: v.message for k, v in unavailable.items()},
        {k: v.code for k, v in unavailable.items()},
        {},
    )
    return CaseFigures.of(
        fields,
        measured_figures,
        rows,
        scan,
        alone_ttft_s=made.alone_ttft_s,
        alone_points=made.alone_points,
        verdicts=verdicts,
    )


def _client(client: ClientHealth | None) -> ClientHealth | None:
    """The case's client figures, typed as the manifest read them (no dict parsed back)."""
    return deepcopy(client)  # the result's own: the analysis never writes into its inputs


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


def _workload_figures(case: Case, made: CaseRows, verdicts: Verdicts) -> WorkloadFigures:
    """The workload's own figures from its records, each request's metrics as its row has
    them (with the case's buffering verdict)."""
    records = made.records if made.records is not None else []
    measured = [r for r in records if not r.warmup and not r.control]
    controls = [r for r in records if r.control]
    values = {r.request_id: _row_values(r) for r in judged_rows(made.rows, verdicts) if r.ok and not r.warmup}
    ahead = [r for r in records if r.warmup and not r.alone]  # a prefix sent ahead, a conversation's opening
    return workload_figures(case.kind, case.workload.spec(), measured, controls, values, ahead)  # type: ignore[union-attr]


FROM_SCHEDULE = ("ttft_s", "e2e_s")  # latencies an open loop also times from the schedule


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


def run_view(
    setup: Setup,
    figures: list[CaseFigures],
    partial: bool,
    stopped: Stopped | None,
    version: str,
    not_measured: list[NotMeasured] | None = None,
) -> RunView:
    """The run's results but for the warnings, which are checked on it (RunView.result makes
    the RunResult with them): the run's verdicts on its cases' figures (decide), then each case
    made once from them. The setup comes typed as the run built it (run_setup.py) or its manifest
    read it: no dict parsed back."""
    decided = decide(figures)
    return RunView(
        benchy_version=version,
        prompt_nonce=setup.prompt_nonce,
        partial=partial,
        stopped=stopped,
        setup=setup,
        cases=[_case_result(case, setup, decided.gains.get(case.label)) for case in decided.cases],
        not_measured=not_measured or [],
        fixed_latency=decided.fixed_latency,
    )


def _case_result(figures: CaseFigures, setup: Setup, gain: TtftGain | None) -> CaseResult:
    """The case, made once: its figures under its verdicts, its rows written with them, what
    only the run's setup says (its ceiling, its prompt-length method), its turns as its verdicts
    leave them and its TTFT gain."""
    judged = figures.judged_dicts()
    requests, scan = _written(figures)
    workload = figures.workload
    if workload is not None:
        workload = withhold_turns(workload, judged.unavailable)
        workload = replace(workload, ttft_gain=gain) if gain is not None else workload
    return CaseResult(
        **{**figures.result_fields(), "workload": workload},
        summary=judged.summary,
        unavailable=judged.unavailable,
        unavailable_codes=judged.unavailable_codes,
        withheld=judged.withheld,
        requests=requests,  # type: ignore[arg-type]  # a Sequence: on disk past rows.IN_MEMORY
        scan=scan,
        queueing=figures.verdicts.queueing,
        ceiling=_case_ceiling(figures, judged, setup.ceiling),
        prompt_lengths=_prompt_lengths(setup, figures.endpoint, figures.label),
    )


def _written(figures: CaseFigures) -> tuple[Rows, RowScan]:
    """The case's rows as saved, each written once with the case's verdicts, and their scan
    from the same pass; the rows measured where no verdict changes a row."""
    verdicts = figures.verdicts
    if verdicts.buffered is None and not verdicts.withholds:
        return figures.rows, figures.scan
    rows, scan = figures.rows.like(), RowScan()
    for row in judged_rows(figures.rows, verdicts):
        rows.append(row)
        scan.add(row)
    return rows, scan


def _prompt_lengths(setup: Setup, endpoint: str | None, label: str) -> str | None:
    """The case's length method: a fitted dataset case's cuts' (setup.dataset.lengths), else
    its endpoint's calibration's (load/lengths.py)."""
    if setup.dataset is not None and label in setup.dataset.lengths:
        return setup.dataset.lengths[label]
    cal = setup.calibrations.get(endpoint or "") or setup.calibration
    return cal.lengths.method if cal is not None and cal.lengths is not None else None


def _case_ceiling(case: CaseFigures, judged: Judged, setup: CeilingSetup | None) -> CaseCeiling | None:
    """The case's decode ceiling and its medians as shown as a % of it."""
    found = case_ceiling(case.pp, case.tg, case.depth or 0, setup)
    if found is None:
        return None
    decode, e2e = (_median(judged.summary.get(name)) for name in ("decode_tps", "e2e_tps"))
    return CaseCeiling(
        tokens_per_s=found.tokens_per_s,
        context_tokens=found.context_tokens,
        weight_bytes_per_token=found.weight_bytes_per_token,
        kv_bytes_per_token=found.kv_bytes_per_token,
        decode_pct=None if decode is None else found.percent_of(decode),
        e2e_pct=None if e2e is None else found.percent_of(e2e),
    )


def _median(summary: MetricSummary | None) -> float | None:
    return None if summary is None else summary.median


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
