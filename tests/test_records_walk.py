"""A request's walk from the socket to the report (docs/records.md): the steps where its data
changes shape, named here by the code that does each, so that the list (and the doc's table)
follows the code: a step renamed or added fails here until both say so."""

from __future__ import annotations

import ast
import importlib
import re
import shutil
from pathlib import Path

import pytest

from benchy.analysis import analyze as analysis
from benchy.records import RequestRecord
from benchy.results import files as results_files
from benchy.results.types import RequestResult

ROOT = Path(__file__).resolve().parents[1]

# One process, one case: each reshape and the code that makes it (docs/records.md, rows 1-6).
WALK = (
    "benchy.client.reader.StreamReader",  # socket bytes → the record's fields
    "benchy.records.record_line",  # record → its requests.jsonl line
    "benchy.analysis.analyze.Bundle.records",  # line → its RequestResult row (records.read_records; witnesses joined)
    "benchy.report.exporters.RESULTS_JSON",  # row → results.json
    "benchy.results.types.RunResult.from_dict",  # results.json → rows (report, compare, browse)
)
# Steps that make a new object of the same type (dataclasses.replace), so no reshape: the row
# read from requests.jsonl gains its figures and drops its streams (before: record → dict → row).
SAME_TYPE = ("benchy.results.build.CaseRows.add", "benchy.results.types.RequestResult.of")
# A split case's (--workers, --ray) hand-off: the record pickled as it is, then put on the
# parent's clock by dataclasses.replace: the same type, so no reshape of its own.
SPLIT: tuple[str, ...] = ()
HANDOFF = ("benchy.load.worker_side.Share", "benchy.load.workers.Merge.take")


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


@pytest.mark.parametrize("dotted", WALK + SPLIT + HANDOFF + SAME_TYPE)
def test_each_step_of_the_walk_is_code_that_exists(dotted):
    assert _resolve(dotted) is not None


def test_the_doc_counts_the_walk_the_code_makes():
    """docs/records.md says how many reshapes a one-process run makes, and names each step's
    code in its table."""
    doc = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    now = re.search(r"Now: \*\*(\d+) reshapes\*\* on a one-process run, \*\*(\d+)\*\* with", doc)
    assert now, "docs/records.md lost its 'Now:' count"
    assert (int(now[1]), int(now[2])) == (len(WALK), len(WALK) + len(SPLIT))
    for dotted in WALK + SPLIT + HANDOFF + SAME_TYPE:
        leaf = dotted.rsplit(".", 2)
        assert ".".join(leaf[-2:]) in doc or leaf[-1] in doc, f"docs/records.md does not name {dotted}"


def test_the_walk_is_at_most_five_reshapes():
    """Issue 51 asks for at most 5 (docs/records.md)."""
    assert len(WALK) <= 5


def test_the_analysis_reads_each_line_as_its_row_and_copies_no_record(tmp_path, monkeypatch):
    """The shipped sim run's bundle (a real run's requests.jsonl): each line is read as its
    results row (a RequestResult), which gains its figures by replace; no record is turned
    into a dict on the way (RequestRecord.to_dict, the copy the row was made by, is never
    called), and the result is the one results.json keeps."""
    folder = tmp_path / "run"
    shutil.copytree(ROOT / "reports" / "dgx-spark-sim", folder)
    bundle = analysis.Bundle.read(folder)
    read = list(bundle.records())
    assert read and all(type(rec) is RequestResult for rec in read)
    assert any(rec.token_event_s for rec in read)  # as read: the streams the metrics need

    def no_copy(self: RequestRecord) -> dict[str, object]:
        raise AssertionError("a record copied into a dict on its way to its row")

    monkeypatch.setattr(RequestRecord, "to_dict", no_copy)
    built = analysis.analyze(bundle)
    saved = results_files.read(ROOT / "reports" / "dgx-spark-sim" / "results.json")
    rows = [row for case in built.cases for row in case.requests]
    assert rows == [row for case in saved.cases for row in case.requests]
    assert all(not row.token_event_s and row.token_event_text == "" for row in rows)  # streams dropped


def test_no_record_is_written_into_after_the_client():
    """Outside the client (whose Draft makes the record once: the drain's cut too), no code
    assigns a record's streams or sets its fields by name: a record handed on is final, and
    its memory goes by dropping it (load/send.py), not by emptying it in place."""
    streams = {"token_event_s", "token_event_chars", "token_event_kinds", "token_event_text", "token_event_usage"}
    found = []
    for path in (ROOT / "benchy").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("benchy/client/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = (
                node.targets
                if isinstance(node, ast.Assign)
                else [node.target]
                if isinstance(node, ast.AugAssign)
                else []
            )
            found += [f"{rel}:{node.lineno}" for t in targets if isinstance(t, ast.Attribute) and t.attr in streams]
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                if node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in ("rec", "record"):
                    found.append(f"{rel}:{node.lineno}")
    assert not found, found
