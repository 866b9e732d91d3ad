"""One analysis of a run: its bundle (or the rows the live run made of the same records) in,
its RunResult out, warnings included.

Why one: `benchy rebuild` must give what the run gave. The live run analyses its bundle as
`benchy rebuild` does, once its requests are done (a run that saves no folder writes its bundle
to a temporary one): nothing is analysed while requests are in flight, and there is no second
way to make a result that could drift from the first.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchy import __version__
from benchy import records as records_mod
from benchy.analysis.bundle import KILLED, MANIFEST, BundleError, Manifest, read_manifest
from benchy.checks import warnings as checks
from benchy.results import build as results_build
from benchy.results import types as results_mod
from benchy.results.build import CaseRows
from benchy.results.rows import WARMUP
from benchy.results.types import RequestResult

REQUESTS = "requests.jsonl"


@dataclass(frozen=True)
class Bundle:
    """A run folder's manifest and the path of its records."""

    manifest: Manifest
    directory: Path

    @classmethod
    def read(cls, directory: Path) -> Bundle:
        """BundleError (one line) when the folder has no readable manifest or no records."""
        manifest = read_manifest(directory)
        if not (Path(directory) / REQUESTS).is_file():
            raise BundleError(f"{directory}: no {REQUESTS} beside {MANIFEST}: nothing to rebuild from")
        return cls(manifest, Path(directory))

    def records(self) -> Iterator[RequestResult]:
        """The records in the order they were written, each with the late witnesses that
        its witness lines (records.witness_line) brought; a last line cut by a kill is skipped.
        Each is read as its results row (a RequestResult is a record, streams and all): the
        builder adds its figures by replace, with no copy of the record into another type."""
        path = self.directory / REQUESTS
        late = _witnesses(path)
        for rec in records_mod.read_records(path, kind=RequestResult):
            found = late.get(rec.request_id)
            yield replace(rec, **found) if found else rec  # joined by request id, the record not written into


def _witnesses(path: Path) -> dict[str, dict[str, Any]]:
    """request id → the late fields of its witness lines (a few per case: read first, so that
    each record is analysed once, whole)."""
    found: dict[str, dict[str, Any]] = {}
    with open(path, "rb") as fh:
        for line in fh:
            if records_mod.is_witness_line(line):
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue  # cut by a kill
                rid = data.pop(records_mod.WITNESS_OF)
                found.setdefault(rid, {}).update({k: v for k, v in data.items() if k in records_mod.LATE_FIELDS})
    return found


def analyze(bundle: Bundle) -> results_mod.RunResult:
    """The run's results from its bundle alone: every record through CaseRows.add, in the order the run wrote them, then
    analyze_rows."""
    rows = {label: _rows(bundle.manifest, label, bundle.directory) for label in bundle.manifest.started}
    for rec in bundle.records():
        made = rows.get(rec.case)
        if made is None:
            made = rows[rec.case] = CaseRows(spill_dir=bundle.directory)
        made.add(rec)
    return analyze_rows(bundle.manifest, rows)


def _rows(manifest: Manifest, label: str, spill_dir: Path | None) -> CaseRows:
    """A started case's rows, made as the live run made them when the case began."""
    case = next((c for c in (p.case() for p in manifest.cases) if c.label == label), None)
    return CaseRows(case is not None and case.workload is not None, spill_dir)


def analyze_rows(manifest: Manifest, by_case: dict[str, CaseRows]) -> results_mod.RunResult:
    """The results of the cases' rows under the manifest's plans and windows: each case's
    figures, what needs several cases, then the warnings (checks only read), and the one
    RunResult with them."""
    setup = manifest.setup
    slo = setup.load.slo if setup.load is not None else None
    idle = setup.gpu.baseline.power_w if setup.gpu is not None and setup.gpu.baseline is not None else None
    plans = [(p, p.case()) for p in manifest.cases]
    measured = [(p, c) for p, c in plans if _has_measured(by_case, c.label)]
    cases = []
    for plan, case in measured:
        windows = manifest.windows.get(case.label)
        cases.append(
            results_build.case_figures(
                case,
                plan.endpoint,
                plan.runs,
                by_case[case.label],
                slo,
                client=windows.client if windows else None,
                server=windows.server if windows else None,
                planned_requests=plan.planned_requests,
                gpu=windows.gpu if windows else None,
                idle_power_w=idle,
                cache_reset=windows.cache_reset if windows else None,
            )
        )
    stopped = manifest.stopped
    if not manifest.finished and stopped is None:
        stopped = results_mod.Stopped(KILLED, _killed_reason(manifest, by_case))
    partial = manifest.interrupted or stopped is not None or len(cases) < len(plans)
    labels = {c.label for _, c in measured}
    not_measured = list(manifest.skipped) + [
        results_mod.NotMeasured(c.label, "stopped during its warmup" if c.label in by_case else "not started")
        for _, c in plans
        if c.label not in labels
    ]
    view = results_build.run_view(setup, cases, partial, stopped, __version__, not_measured)
    # The warnings read every metric, so they are checked on the run's view; the RunResult is
    # then made once, with them.
    return view.result(checks.check(view))


def _killed_reason(manifest: Manifest, by_case: dict[str, CaseRows]) -> str:
    """Names the cut of a run whose process ended before it saved (its manifest never said
    finished): the case under way then, and how many of its requests had finished."""
    under_way = [label for label in manifest.started if label not in manifest.windows]
    if not under_way:
        return "the run's process ended (killed) between cases, before it saved its results: rebuilt from its bundle"
    label = under_way[-1]
    rows = by_case.get(label)
    done = rows.rows.count(lambda flags: not flags & WARMUP) if rows is not None else 0
    return (
        f"the run's process ended (killed) during case {label!r}, before it saved its results; "
        f"{done} measured requests of that case had finished: rebuilt from its bundle"
    )


def _has_measured(by_case: dict[str, CaseRows], label: str) -> bool:
    rows = by_case.get(label)
    return rows is not None and rows.rows.count(lambda flags: not flags & WARMUP) > 0
