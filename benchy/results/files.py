"""results.json on disk: saving it atomically, reading it back (any minor of this major), and the
JSON Schema generated from the typed classes (benchy/data/results.schema.json, `make schema`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from benchy import jsontypes
from benchy.results.types import SCHEMA, SCHEMA_MAJOR, SCHEMA_MINOR, RunResult

SCHEMA_FILE = Path(__file__).parent.parent / "data" / "results.schema.json"
_SCHEMA_ID = re.compile(r"benchy/results/(\d+)(?:\.(\d+))?")


class ResultsError(ValueError):
    """A results file benchy cannot read; one line."""


def save(results: dict | RunResult, directory: Path) -> Path:
    data = results.to_dict() if isinstance(results, RunResult) else results
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "results.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)  # atomic: a reader never sees half a file
    return path


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
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    check_schema(data.get("schema") if isinstance(data, dict) else None, str(path))
    try:
        return RunResult.from_dict(data)
    except jsontypes.ShapeError as exc:
        raise ResultsError(f"{path}: malformed: {exc}") from None


def load(path: Path) -> dict:
    """A results file as the dict of the current schema (older minors filled with defaults)."""
    return read(path).to_dict()


def json_schema() -> dict:
    return jsontypes.json_schema(RunResult, SCHEMA, "benchy results.json")


def write_schema(path: Path = SCHEMA_FILE) -> Path:
    """Regenerates the shipped JSON Schema (`make schema`)."""
    path.write_text(json.dumps(json_schema(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
