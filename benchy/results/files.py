"""results.json on disk: saving it atomically, reading it back (any minor of this major), and the
JSON Schema generated from the typed classes (benchy/data/results.schema.json, `make schema`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from benchy import jsontypes, records
from benchy.results import rows as rows_mod
from benchy.results.rows import Rows
from benchy.results.types import SCHEMA, SCHEMA_MAJOR, SCHEMA_MINOR, CaseResult, RequestResult, RowScan, RunResult

SCHEMA_FILE = Path(__file__).parent.parent / "data" / "results.schema.json"
_SCHEMA_ID = re.compile(r"benchy/results/(\d+)(?:\.(\d+))?")


class ResultsError(ValueError):
    """A results file benchy cannot read; one line."""


def save(results: dict[str, Any] | RunResult, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "results.json"
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        if isinstance(results, RunResult):
            _write_run(results, fh)
        else:
            fh.write(json.dumps(results, indent=1))
        fh.write("\n")
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


def _write_run(run: RunResult, fh: IO[str]) -> None:
    """The run's JSON with each case's requests written one row at a time, a line each: the
    text (and dict) of every request never exists at once, so saving a long run's results
    takes memory for one request, not for all of them. The file is the JSON of run.to_dict()."""
    bare = replace(run, cases=[replace(c, requests=[]) for c in run.cases])
    data = bare.to_dict()
    for i, case in enumerate(data["cases"]):
        case["requests"] = _ROWS.format(i)
    text = json.dumps(data, indent=1)
    for i, case in enumerate(run.cases):
        before, text = text.split(json.dumps(_ROWS.format(i)), 1)
        fh.write(before + "[")
        for n, line in enumerate(_row_lines(case.requests)):
            fh.write(("," if n else "") + "\n  " + line)
        fh.write("\n  ]" if case.requests else "]")
    fh.write(text)


def _row_lines(requests: Sequence[RequestResult]) -> Iterator[str]:
    """Each request's compact JSON: a spilled case's lines as its spill file holds them (the
    same text, rows.Rows.lines: a long case is copied, not parsed again), else each row's."""
    lines = requests.lines() if isinstance(requests, Rows) else None
    if lines is not None:
        return (line.decode() for line in lines)
    return (records.dumps(row.to_dict()) for row in requests)


_ROWS = "\u0000requests of case {}\u0000"  # a placeholder no saved string holds (a NUL)


def check_schema(schema: object, where: str) -> None:
    """Raises ResultsError (one line) unless this benchy reads `schema`."""
    match = _SCHEMA_ID.fullmatch(schema) if isinstance(schema, str) else None
    if match is None:
        raise ResultsError(f"{where}: schema {schema!r} is not a benchy results schema ({SCHEMA})")
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    if major != SCHEMA_MAJOR:
        raise ResultsError(
            f"{where}: schema {schema} is major version {major}; this benchy reads "
            f"benchy/results/{SCHEMA_MAJOR}.x only (up to {SCHEMA})"
        )
    if minor > SCHEMA_MINOR:
        raise ResultsError(f"{where}: schema {schema} is newer than this benchy understands ({SCHEMA}): upgrade benchy")


def read(path: Path) -> RunResult:
    """A results file as RunResult; raises ResultsError (one line) for one benchy cannot read.
    A file written a request a line (save) is read without holding its long cases' requests:
    those stay on disk (rows.Rows), read again each time they are iterated."""
    try:
        lazy = _read_by_lines(Path(path))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    return lazy if lazy is not None else _read_whole(path)


def _read_whole(path: Path) -> RunResult:
    try:
        data = jsontypes.loads(Path(path).read_bytes())
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    check_schema(data.get("schema") if isinstance(data, dict) else None, str(path))
    try:
        run = RunResult.from_dict(data)
    except jsontypes.ShapeError as exc:
        raise ResultsError(f"{path}: malformed: {exc}") from None
    return replace(run, cases=[_with_rows(case, case.requests) for case in run.cases])


def _with_rows(case: CaseResult, requests: Sequence[RequestResult]) -> CaseResult:
    """The case read back, made again with its requests and their scan (the one pass every
    report and check reads: results/types.py RowScan), as the builder makes it."""
    return replace(case, requests=requests, scan=RowScan.of(requests))  # type: ignore[arg-type]


_OPEN_ROWS = b'   "requests": [\n'  # a case's requests as save writes them: a row a line, then
_CLOSE_ROWS = (b"  ]\n", b"  ],\n")  # the closing bracket alone on its line


def _read_by_lines(path: Path) -> RunResult | None:
    """The file read a line at a time, each case's request lines indexed, not kept: None when
    it is not laid out as save writes it (an older benchy's file, or one written by hand).
    Cases of up to rows.IN_MEMORY requests are read whole."""
    # long cases' rows are read from it for as long as they live: not a `with`
    fh = open(path, "rb")  # noqa: SIM115
    skeleton: list[bytes] = []
    spans: list[list[tuple[int, int]]] = []
    inside = False
    offset = 0
    for line in fh:
        end = offset + len(line)
        if inside and line.startswith(b"  {"):
            spans[-1].append((offset, end))
        elif inside and line not in _CLOSE_ROWS:
            fh.close()
            return None
        else:
            inside = line == _OPEN_ROWS
            if inside:
                spans.append([])
            skeleton.append(line)
        offset = end
    try:
        run = _typed(jsontypes.loads(b"".join(skeleton)), path)
    except (ValueError, ResultsError):
        fh.close()
        return None  # the whole file's reading words what is wrong
    if len(spans) != len(run.cases) or any(c.requests for c in run.cases):
        fh.close()
        return None
    lazy = False
    cases = []
    try:
        for case, where in zip(run.cases, spans):
            requests: Sequence[RequestResult]
            if len(where) > rows_mod.IN_MEMORY:
                requests, lazy = Rows.of_file(fh, where, parse=RequestResult.of_line), True
            else:
                requests = [RequestResult.of_line(os.pread(fh.fileno(), end - start, start)) for start, end in where]
            cases.append(_with_rows(case, requests))
    except (ValueError, jsontypes.ShapeError):
        lazy = False
        return None  # a bad request: the whole file's reading names its path
    finally:
        if not lazy:
            fh.close()
    return replace(run, cases=cases)


def _typed(data: Any, path: Path) -> RunResult:
    check_schema(data.get("schema") if isinstance(data, dict) else None, str(path))
    try:
        return RunResult.from_dict(data)
    except jsontypes.ShapeError as exc:
        raise ResultsError(f"{path}: malformed: {exc}") from None


def load(path: Path) -> dict[str, Any]:
    """A results file as the dict of the current schema (older minors filled with defaults)."""
    return read(path).to_dict()


def json_schema() -> dict[str, Any]:
    return jsontypes.json_schema(RunResult, SCHEMA, "benchy results.json")


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Regenerates the shipped JSON Schema (`make schema`)."""
    return jsontypes.write_schema_file(path, json_schema())
