"""A run's raw bundle: manifest.json (typed) beside requests.jsonl, all the analysis reads.

Why: a run killed at any moment (SIGKILL included) must still be analysable, and a run's
results must be remade from what it saved alone (`benchy rebuild DIR`). So everything the
analysis needs besides the records is in the manifest, written before the first measured
request and rewritten (atomically) as each case starts and ends and when the run ends:
the setup (identity, calibration, load), each planned case, each case's windows (the
server's /metrics, the GPUs, benchy's own loop, a cache reset) and how the run stopped. A
witness that comes after its request was written (the server's /tokenize count) is appended
to requests.jsonl as a line of its own naming the request (records.witness_line).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchy import jsontypes
from benchy.jsontypes import Saved
from benchy.measure.gpu import GpuCase
from benchy.measure.health import ClientHealth
from benchy.results.types import NotMeasured, Setup, Stopped
from benchy.server.cache_reset import CacheReset
from benchy.server.metrics import NoServerFigures, ServerCaseMetrics
from benchy.workloads.case import Case
from benchy.workloads.dataset import DatasetSpec
from benchy.workloads.spec import MultiTurn, SharedPrefix, TraceReplay

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "benchy/manifest/1"

KILLED = "killed"  # Stopped.by for a run whose process ended without saving (SIGKILL, a crash)


class BundleError(ValueError):
    """A run folder that cannot be rebuilt; one line."""


@dataclass
class PlannedCase(Saved):
    """One case as it was planned: the Case's fields, the workload's spec under its kind, and
    what the run settled for it (endpoint, runs, measured requests planned)."""

    pp: int
    tg: int
    endpoint: str  # the one it was sent to (the case's own, else the run's)
    runs: int  # the case's own, else the run's --runs
    concurrency: int = 1
    depth: int = 0
    scenario: str | None = None
    case_runs: int | None = None  # Case.runs as given (None: the run's)
    case_endpoint: str | None = None  # Case.endpoint as given
    depth_mode: str = "cold"
    rate: float | None = None
    planned_requests: int | None = None  # None: --duration alone bounds it
    multi_turn: MultiTurn | None = None
    shared_prefix: SharedPrefix | None = None
    trace: TraceReplay | None = None
    extra_body: str | None = None  # a scenario's extra_body, canonical JSON
    stream: bool = True  # a scenario's `stream = false`
    dataset: dict[str, Any] | None = None  # --dataset: the DatasetSpec's fields
    pp_stddev: float = 0.0  # --pp-stddev / --tg-stddev
    tg_stddev: float = 0.0
    batch: int = 1  # --batch of a pooling case (its label shows it)

    @classmethod
    def of(cls, case: Case, endpoint: str, runs: int, planned_requests: int | None) -> PlannedCase:
        w = case.workload
        return cls(
            pp=case.pp,
            tg=case.tg,
            endpoint=endpoint,
            runs=runs,
            concurrency=case.concurrency,
            depth=case.depth,
            scenario=case.scenario,
            case_runs=case.runs,
            case_endpoint=case.endpoint,
            depth_mode=case.depth_mode,
            rate=case.rate,
            planned_requests=planned_requests,
            multi_turn=w if isinstance(w, MultiTurn) else None,
            shared_prefix=w if isinstance(w, SharedPrefix) else None,
            trace=w if isinstance(w, TraceReplay) else None,
            extra_body=case.extra_body,
            stream=case.stream,
            dataset=_dataset_fields(case.dataset),
            pp_stddev=case.pp_stddev,
            tg_stddev=case.tg_stddev,
            batch=case.batch,
        )

    def case(self) -> Case:
        return Case(
            pp=self.pp,
            tg=self.tg,
            concurrency=self.concurrency,
            depth=self.depth,
            scenario=self.scenario,
            runs=self.case_runs,
            endpoint=self.case_endpoint,
            depth_mode=self.depth_mode,
            rate=self.rate,
            workload=self.multi_turn or self.shared_prefix or self.trace,
            extra_body=self.extra_body,
            stream=self.stream,
            dataset=_dataset_spec(self.dataset),
            pp_stddev=self.pp_stddev,
            tg_stddev=self.tg_stddev,
            batch=self.batch,
        )


def _dataset_fields(spec: DatasetSpec | None) -> dict[str, Any] | None:
    """The spec as the analysis needs it: its fitted bodies (the prompts' text) are the load's alone."""
    if spec is None:
        return None
    return {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.name != "bodies"}


def _dataset_spec(fields: dict[str, Any] | None) -> DatasetSpec | None:
    if fields is None:
        return None
    text_fit = fields.get("text_fit")
    return DatasetSpec(**{**fields, "text_fit": tuple(text_fit) if text_fit else None})


@dataclass
class CaseWindows(Saved):
    """What was gathered around a case besides its records: benchy's own loop and clocks
    (client), the server's /metrics window, the GPUs' window, the cache reset before it."""

    client: ClientHealth | None = None
    server: ServerCaseMetrics | NoServerFigures | None = None
    gpu: GpuCase | None = None
    cache_reset: CacheReset | None = None


@dataclass
class Manifest(Saved):
    """Everything a run's analysis reads but its records (requests.jsonl)."""

    setup: Setup
    schema: str = MANIFEST_SCHEMA
    cases: list[PlannedCase] = field(default_factory=list)
    started: list[str] = field(default_factory=list)  # labels of the cases begun, in order
    skipped: list[NotMeasured] = field(default_factory=list)  # cases --skip-unfit left out, and why
    windows: dict[str, CaseWindows] = field(default_factory=dict)  # case label → its windows
    interrupted: bool = False
    stopped: Stopped | None = None
    finished: bool = False  # the run saved its results; False on disk: it was killed first


def write_manifest(manifest: Manifest, directory: Path) -> Path:
    """Writes manifest.json atomically (a reader, or a kill, never meets half a file)."""
    return jsontypes.write_manifest_file(directory / MANIFEST, manifest)


def read_manifest(directory: Path) -> Manifest:
    """The folder's manifest.json; BundleError (one line) when there is none or it is unreadable."""
    missing = " (a run folder written by a benchy without bundles, or not a run folder): nothing to rebuild from"
    return jsontypes.read_manifest_file(Path(directory) / MANIFEST, Manifest, MANIFEST_SCHEMA, BundleError, missing)
