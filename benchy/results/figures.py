"""A case as measured, before any result exists: what the run's verdicts are decided from.

Why: a verdict that needs several cases (a TTFT trend across output lengths, a loaded case
against the same prompt at concurrency 1, a fixed latency in front of a sweep family) used to
be written into results already built, in an order only comments kept. Now each case's figures
(`CaseFigures`) are read by the findings (results/findings.py) that results/decide.py runs in
their registry's order, which return the verdicts; results/build.py then
makes each CaseResult once, from its figures and its verdicts. A verdict decided is also one
that later verdicts see: `CaseFigures.judged` is a new value with it, never a write.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, overload

from benchy.measure import registry
from benchy.measure.unavailable import Unavailable
from benchy.measure.workloads import GainCase, WorkloadFigures
from benchy.results.facts import CaseFacts
from benchy.results.rows import OK, WARMUP, Rows
from benchy.results.types import MetricSummary, Queueing, RequestResult, RowScan
from benchy.results.verdicts.codes import VERDICTS, Code


@dataclass(frozen=True)
class Withhold:
    """Metrics made unavailable for one reason, in a case and in each of its requests: a
    figure computed moves to `withheld` (audit only)."""

    names: tuple[str, ...]  # with every metric computed from them (registry.with_dependents)
    why: Unavailable

    @classmethod
    def of(cls, names: Iterable[str], why: Unavailable) -> Withhold:
        return cls(registry.with_dependents(names), why)


@dataclass(frozen=True)
class Verdicts:
    """What the analysis decided about one case, in the order it was decided."""

    buffered: Unavailable | None = None  # findings.BufferedStreams': every successful request's stream timings
    withholds: tuple[Withhold, ...] = ()
    queueing: Queueing | None = None

    def withholding(self, names: Iterable[str], why: Unavailable) -> Verdicts:
        return replace(self, withholds=(*self.withholds, Withhold.of(names, why)))

    def withheld_names(self) -> set[str]:
        return {name for w in self.withholds for name in w.names}


class CaseView(GainCase, Protocol):
    """What a verdict reads of a case: its figures (decide) or a saved CaseResult (the checks,
    which judge a file read from disk again with the same functions)."""

    @property
    def depth_mode(self) -> str | None: ...
    @property
    def kind(self) -> str: ...
    @property
    def rate(self) -> float | None: ...
    @property
    def summary(self) -> Mapping[str, MetricSummary | None]: ...
    @property
    def queueing(self) -> Queueing | None: ...

    def median(self, metric: str) -> float | None: ...
    def measured_ok(self) -> Sequence[RequestResult]: ...
    def measured_values(self, metric: str) -> list[float]: ...
    def facts(self) -> CaseFacts: ...


@dataclass(frozen=True)
class Judged:
    """A case's figures as its verdicts leave them: the case-level dicts, made anew."""

    summary: dict[str, MetricSummary | None]
    unavailable: dict[str, str]
    unavailable_codes: dict[str, str]
    withheld: dict[str, MetricSummary]


# What a verdict reads of a case's shape: fields of CaseFigures, as of the CaseResult to be.
SHAPE = ("label", "pp", "tg", "depth", "depth_mode", "endpoint", "kind", "concurrency", "rate", "workload")


@dataclass(frozen=True)
class CaseFigures:
    """One case as measured (results/build.py `case_figures`): CaseResult's own fields with
    the case's buffering verdict applied to its statistics; its rows as written (each judged
    alone) and their scan with that verdict; the requests sent alone before it. `verdicts`:
    what the analysis decided of it so far."""

    label: str
    pp: int
    tg: int
    depth: int
    depth_mode: str | None
    endpoint: str | None
    kind: str
    concurrency: int | None
    rate: float | None
    workload: WorkloadFigures | None
    rest: dict[str, Any]  # CaseResult's other fields as measured, but summary, unavailable*, withheld, requests
    measured: Judged  # the case-level figures as measured (withheld: none yet)
    rows: Rows
    scan: RowScan
    alone_ttft_s: list[float] = field(default_factory=list)
    alone_points: list[tuple[float, float]] = field(default_factory=list)
    verdicts: Verdicts = Verdicts()

    @classmethod
    def of(cls, fields: dict[str, Any], measured: Judged, rows: Rows, scan: RowScan, **more: Any) -> CaseFigures:
        """`fields`: CaseResult's fields as measured (SHAPE's among them)."""
        rest = {name: value for name, value in fields.items() if name not in SHAPE}
        return cls(**{name: fields[name] for name in SHAPE}, rest=rest, measured=measured, rows=rows, scan=scan, **more)

    def result_fields(self) -> dict[str, Any]:
        """CaseResult's fields as measured: the shape and the rest."""
        return {**{name: getattr(self, name) for name in SHAPE}, **self.rest}

    @property
    def queueing(self) -> Queueing | None:
        return self.verdicts.queueing

    # ---- its figures as the verdicts so far leave them

    def judged(self, verdicts: Verdicts) -> CaseFigures:
        """These figures under `verdicts`: a new value, these stay as they are."""
        return replace(self, verdicts=verdicts)

    def judged_dicts(self) -> Judged:
        """The case-level figures with each withhold applied in turn: a figure computed moves to
        `withheld`, and the reason replaces any other (as the saved files have it)."""
        m = self.measured
        summary, why, codes, withheld = dict(m.summary), dict(m.unavailable), dict(m.unavailable_codes), {}
        for w in self.verdicts.withholds:
            for name in w.names:
                found = summary.get(name)
                if found is not None:
                    withheld[name] = found
                summary[name] = None
                why[name], codes[name] = w.why.message, w.why.code
        return Judged(summary, why, codes, withheld)

    @property
    def summary(self) -> dict[str, MetricSummary | None]:
        return self.judged_dicts().summary

    def median(self, metric: str) -> float | None:
        found = self.judged_dicts().summary.get(metric)
        return found.median if found else None

    def measured_ok(self) -> Sequence[RequestResult]:
        """The measured, successful requests under the verdicts so far: each judged as it is
        read (a long case's rows stay on disk, read a row at a time)."""
        return _Judged(self.rows.where(lambda flags: flags & (WARMUP | OK) == OK), self.verdicts)

    def measured_values(self, metric: str) -> list[float]:
        if metric in self.verdicts.withheld_names():
            return []  # every request's value withheld
        return list(self.scan.columns.values.get(metric, ()))

    def facts(self) -> CaseFacts:
        return self.scan.tally.facts()


class _Judged(Sequence[RequestResult]):
    """Rows under verdicts, each judged as it is read."""

    def __init__(self, rows: Sequence[RequestResult], verdicts: Verdicts) -> None:
        self._rows, self._verdicts = rows, verdicts

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[RequestResult]:
        return judged_rows(self._rows, self._verdicts)

    @overload
    def __getitem__(self, i: int) -> RequestResult: ...
    @overload
    def __getitem__(self, i: slice) -> list[RequestResult]: ...
    def __getitem__(self, i: int | slice) -> RequestResult | list[RequestResult]:
        if isinstance(i, slice):
            return list(judged_rows(self._rows[i], self._verdicts))
        return judged_row(self._rows[i], self._verdicts)


def judged_rows(rows: Iterable[RequestResult], verdicts: Verdicts) -> Iterator[RequestResult]:
    """Each row under `verdicts`: a new row where one changes, the same one where none does."""
    for row in rows:
        yield judged_row(row, verdicts)


def judged_row(row: RequestResult, verdicts: Verdicts) -> RequestResult:
    """The buffering verdict on a successful request (its stream timings unavailable for the
    case's reason, in the registry's order), then each withhold on any request that has the
    figure (its value moves to `withheld`)."""
    metrics, why, codes, withheld = row.metrics, row.unavailable, row.unavailable_codes, row.withheld
    changed = False
    if verdicts.buffered is not None and row.ok:
        buffered = verdicts.buffered
        metrics = {**metrics, **dict.fromkeys(_BUFFERED_WITHHOLDS)}
        gone = dict.fromkeys(_BUFFERED_WITHHOLDS, buffered.message)
        why = _in_metric_order({**why, **gone})
        codes = _in_metric_order({**codes, **dict.fromkeys(_BUFFERED_WITHHOLDS, buffered.code)})
        changed = True
    for w in verdicts.withholds:
        for name in w.names:
            value = metrics.get(name)
            if value is None:
                continue
            if metrics is row.metrics:
                metrics, why, codes = dict(metrics), dict(why), dict(codes)
            if withheld is row.withheld:
                withheld = dict(withheld)
            changed = True
            withheld[name], metrics[name] = value, None
            why[name], codes[name] = w.why.message, w.why.code
    if not changed:
        return row
    return replace(row, metrics=metrics, unavailable=why, unavailable_codes=codes, withheld=withheld)


_METRIC_ORDER = {name: i for i, name in enumerate(registry.REQUEST_METRICS)}
# what findings.BufferedStreams withholds: its code's one entry, as every finding's
_BUFFERED_WITHHOLDS = VERDICTS[Code.SSE_BUFFERING].withholds


def _in_metric_order(by_metric: dict[str, str]) -> dict[str, str]:
    """`by_metric` in the registry's order (a name it does not know sorts with its first)."""
    if by_metric.keys() <= _METRIC_ORDER.keys():  # every name known: picked in order, not sorted
        return {name: by_metric[name] for name in _METRIC_ORDER if name in by_metric}
    return dict(sorted(by_metric.items(), key=lambda kv: _METRIC_ORDER.get(kv[0], 0)))
