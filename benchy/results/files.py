"""results.json on disk: saving it atomically, reading it back (any minor of this major), and the
JSON Schema generated from the typed classes (benchy/data/results.schema.json, `make schema`).
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

from benchy import jsontypes
from benchy.measure import records
from benchy.results.types import SCHEMA, SCHEMA_MAJOR, SCHEMA_MINOR, RunResult

SCHEMA_FILE = Path(__file__).parent.parent / "data" / "results.schema.json"
_SCHEMA_ID = re.compile(r"benchy/results/(\d+)(?:\.(\d+))?")


class ResultsError(ValueError):
    """A results file benchy cannot read; one line."""


def save(results: dict | RunResult, directory: Path) -> Path:
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
        for n, row in enumerate(case.requests):
            fh.write(("," if n else "") + "\n  " + records.dumps(row.to_dict()))
        fh.write("\n  ]" if case.requests else "]")
    fh.write(text)


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
    """A results file as RunResult; raises ResultsError (one line) for one benchy cannot read."""
    try:
        data = _parse(Path(path).read_bytes())
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    check_schema(data.get("schema") if isinstance(data, dict) else None, str(path))
    try:
        return RunResult.from_dict(data)
    except jsontypes.ShapeError as exc:
        raise ResultsError(f"{path}: malformed: {exc}") from None


def _parse(text: bytes) -> Any:
    """JSON through orjson (a long run's results.json parses 3x faster), else json, which also
    reads what orjson refuses (NaN, written by benchy before 1.7) and words the errors."""
    try:
        return _orjson_loads(text)
    except ValueError:
        return json.loads(text.decode("utf-8"))


try:
    from orjson import loads as _orjson_loads
except ImportError:  # pragma: no cover
    _orjson_loads = json.loads  # type: ignore[assignment]


def load(path: Path) -> dict:
    """A results file as the dict of the current schema (older minors filled with defaults)."""
    return read(path).to_dict()


def json_schema() -> dict:
    return jsontypes.json_schema(RunResult, SCHEMA, "benchy results.json")


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Regenerates the shipped JSON Schema (`make schema`)."""
    path.write_text(json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
