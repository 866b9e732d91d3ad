"""A bundle for a run folder written before bundles: its manifest made from its results.json.

Why: such a folder has every record (requests.jsonl) but keeps the rest only inside results.json:
the setup, each case's shape and windows (benchy's loop, the server's /metrics, the GPUs), how
the run stopped, and each request's /tokenize witness (its row's token_count). All of that is
read back from there once, written as the folder's manifest.json (and witness lines), and the
folder is then rebuilt as any other. What the rebuild gives is today's analysis of the same
records, so its results.json may differ from the old one where the analysis has changed since.
Workload cases are refused: results.json does not keep their plans whole.
"""

from __future__ import annotations

from pathlib import Path

from benchy.analysis.bundle import BundleError, CaseWindows, Manifest, PlannedCase, write_manifest
from benchy.records import RecordWriter, RequestRecord, read_records
from benchy.results import files as results_files
from benchy.results.types import CaseResult, RunResult
from benchy.workloads.case import Case

RESULTS = "results.json"


def manifest_from_results(directory: Path) -> Manifest:
    """Writes `directory`'s manifest.json made from its results.json (and appends the /tokenize
    witnesses its rows hold to requests.jsonl, unless it has witness lines already); returns it.
    BundleError (one line) when results.json cannot be read or holds a workload case."""
    try:
        results = results_files.read(directory / RESULTS)
    except results_files.ResultsError as exc:
        raise BundleError(f"{exc}: no manifest.json either, nothing to rebuild from") from None
    manifest = Manifest(
        setup=results.setup,
        cases=[_planned(case, results) for case in results.cases],
        started=[c.label for c in results.cases]
        + [n.case for n in results.not_measured if n.reason == "stopped during its warmup"],
        windows={c.label: CaseWindows(c.client, c.server, c.gpu, c.cache_reset) for c in results.cases},
        interrupted=results.partial and results.stopped is None,
        stopped=results.stopped,
        finished=True,
    )
    _append_witnesses(results, directory / "requests.jsonl")
    write_manifest(manifest, directory)
    return manifest


def _planned(case: CaseResult, run: RunResult) -> PlannedCase:
    if case.kind != "sweep":
        raise BundleError(
            f"{case.label}: a {case.kind} case's plan is not kept whole in a results.json written "
            "before bundles: it cannot be rebuilt (run it again)"
        )
    setup = run.setup
    made = Case(
        pp=case.pp,
        tg=case.tg,
        concurrency=case.concurrency or 1,
        depth=case.depth,
        scenario=case.scenario,
        runs=case.runs,
        endpoint=case.endpoint,
        depth_mode=case.depth_mode or "cold",
        rate=case.rate,
    )
    if made.label != case.label:  # the records name their case by its label
        raise BundleError(f"{case.label}: its plan cannot be read back from {RESULTS} (read as {made.label!r})")
    return PlannedCase.of(
        made, case.endpoint or setup.endpoint or "chat", case.runs or setup.runs or 1, case.planned_requests
    )


def _append_witnesses(results: RunResult, path: Path) -> None:
    """The /tokenize counts that only the rows kept, as witness lines of the records."""
    if not path.is_file() or b'{"witness_of"' in path.read_bytes():
        return
    counted = {
        row.request_id: row.token_count.server_tokenize
        for case in results.cases
        for row in case.requests
        if row.token_count is not None and row.token_count.server_tokenize is not None
    }
    if not counted:
        return
    known = {rec.request_id for rec in read_records(path)}
    writer = RecordWriter.appending(path)  # as a run appends them
    try:
        for rid, n in counted.items():
            if rid in known:
                writer.witness(_named(rid, n))
    finally:
        writer.close()


def _named(request_id: str, server_tokenize: int) -> RequestRecord:
    return RequestRecord("", 0, 0, False, request_id, None, 0, 0, server_tokenize=server_tokenize)
