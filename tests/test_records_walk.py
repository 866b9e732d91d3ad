"""A request's walk from the socket to the report (docs/records.md): the steps where its data
changes shape, named here by the code that does each, so that the list (and the doc's table)
follows the code: a step renamed or added fails here until both say so."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# One process, one case: each reshape and the code that makes it (docs/records.md, rows 1-6).
WALK = (
    "benchy.client.reader.StreamReader",  # socket bytes → the record's fields
    "benchy.records.record_line",  # record → its requests.jsonl line
    "benchy.records.read_records",  # line → record (the analysis' bundle; witnesses joined)
    "benchy.results.build.CaseRows.add",  # record → RequestResult row
    "benchy.report.exporters.RESULTS_JSON",  # row → results.json
    "benchy.results.types.RunResult.from_dict",  # results.json → rows (report, compare, browse)
)
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


@pytest.mark.parametrize("dotted", WALK + SPLIT + HANDOFF)
def test_each_step_of_the_walk_is_code_that_exists(dotted):
    assert _resolve(dotted) is not None


def test_the_doc_counts_the_walk_the_code_makes():
    """docs/records.md says how many reshapes a one-process run makes, and names each step's
    code in its table."""
    doc = (ROOT / "docs" / "records.md").read_text(encoding="utf-8")
    now = re.search(r"Now: \*\*(\d+) reshapes\*\* on a one-process run, \*\*(\d+)\*\* with", doc)
    assert now, "docs/records.md lost its 'Now:' count"
    assert (int(now[1]), int(now[2])) == (len(WALK), len(WALK) + len(SPLIT))
    for dotted in WALK + SPLIT + HANDOFF:
        leaf = dotted.rsplit(".", 2)
        assert ".".join(leaf[-2:]) in doc or leaf[-1] in doc, f"docs/records.md does not name {dotted}"


@pytest.mark.xfail(strict=True, reason="issue 51 asks for 5: the report still re-reads every row (docs/records.md)")
def test_the_walk_is_at_most_five_reshapes():
    assert len(WALK) <= 5


def test_no_record_is_written_into_after_the_client():
    """Outside the client (and the drain, which cuts a request still in flight), no code
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
