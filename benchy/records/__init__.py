"""One record per request: what the client saw, with raw timestamps, and nothing derived.

Times are seconds relative to the moment the request was sent (`sent_mono_s`, from
`time.perf_counter`), so a record can be compared with a server's own monotonic log.
Metrics are derived from records in metrics.py, never stored here.

requests.jsonl starts with a header line naming its schema (REQUESTS_SCHEMA,
`benchy/requests/MAJOR.MINOR`, versioned as results.json is); then one record per line, with
a request's plan line (its workload tags, records/plan.py) before it and its late witnesses'
lines after. Readers accept files without the header (written before it existed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Iterator
from dataclasses import Field, fields
from enum import Enum
from pathlib import Path
from typing import IO, Any, TypeVar, overload

from benchy.records import plan as _plan
from benchy.records.plan import RequestTags, Tagged
from benchy.records.record import _FIELD_NAMES
from benchy.records.record import RequestRecord as RequestRecord  # its home is records/record.py

# 1.1: alone; 1.2: anomaly codes apart from their counts, retried_kind; 1.3: local_scale_from_usage;
# 1.4: streamed; 1.5: prompt_slack; 1.6: witness lines (WITNESS_OF), a late witness of a request written before it came;
# 1.7: local_scale_generated; 1.8: tool_chars, tool_calls (tool calls are output: TOOL events),
# tokenizer_tokens (a late witness: --tokenizer's count of the text), usage_at_known, inputs (embeddings);
# 1.9: images, image_bytes, server_image_tokens (--images);
# 2.0: the workload tags (records/plan.py) on a plan line of their own (PLAN_OF), written as the
# request is sent, no longer on the record's line (a 1.x file's are read from there)
REQUESTS_SCHEMA = "benchy/requests/2.0"

# Event kinds, one character each so a 1,000-token stream stays a short string.
CONTENT = "c"
REASONING = "r"
TOOL = "t"  # a tool call's name or arguments (client/tools.py): output like content


class Anomaly(str, Enum):
    """What a successful request's stream got wrong (the client notes it; a case counts each).
    A count that goes with one (bad events, redirect hops) is kept apart, in anomaly_counts."""

    NO_DONE = "no_done"  # the stream ended without [DONE]
    NO_USAGE = "no_usage"  # no usage came with it
    MALFORMED_EVENTS = "malformed_events"  # events that were not JSON (count: how many)
    REDIRECTED = "redirected"  # sent again to the URL a redirect named (count: the hops)
    SPECIAL_TOKENS_STRIPPED = "special_tokens_stripped"  # Harmony text without its markers


def blank(names: Iterable[str]) -> dict[str, Any]:
    """The record's fields `names` as a new record has them (a list each its own): what a
    results row does not keep (its streams, its late witnesses) set back, not emptied in place."""
    made = {f.name: f for f in fields(RequestRecord)}
    return {name: _default(made[name]) for name in names}


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default


class RecordWriter:
    """Appends each record to requests.jsonl the moment it finishes and flushes it to the OS,
    so a killed run (even SIGKILL) keeps every finished request. No fsync: that guards against
    power loss, not a killed process, and would stall the event loop at high load. On an event
    loop the flush waits for the loop's next turn: the records that ended in one turn go to the
    OS in one write, not one a record (a system call was a tenth of a tiny request's CPU).

    The file (and its folder) is made with the first record, not before: a run refused or
    stopped before it measured anything leaves no file that would block its own rerun."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._fh: IO[bytes] | None = None
        self._done = False
        self._flushing = False  # a flush is due on the loop's next turn

    def start(self) -> None:
        """Creates the log with its header (a new run starts a new log); once per run."""
        if self.path is None or self._fh is not None or self._done:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "wb")
        self._fh.write(line_of(header()))
        self._fh.flush()

    @classmethod
    def appending(cls, path: Path) -> RecordWriter:
        """A writer that adds to an existing requests.jsonl (no new header)."""
        writer = cls(None)
        writer.path, writer._fh = path, open(path, "ab")  # noqa: SIM115 - closed by close()
        return writer

    def write(self, record: RequestRecord) -> None:
        self._append(record_line(record))

    def mark(self) -> int:
        """Where the next record will be written (records_since reads from there)."""
        self.flush()
        return self._fh.tell() if self._fh is not None else 0

    def records_since(self, mark: int) -> Iterator[Tagged]:
        """The records written since `mark`, read back from the file, in the order they were
        written, each with its plan's tags (those sent since `mark`); none where nothing was."""
        self.flush()
        if self._fh is None or self.path is None:
            return iter(())
        return read_records(self.path, mark, kind=Tagged)

    def sent(self, request_id: str, tags: RequestTags) -> None:
        """Writes a request's plan line (records/plan.py) as it is sent, before its record."""
        self._append(line_of(_plan.plan_line(request_id, tags)))

    def _append(self, line: bytes) -> None:
        """A line of the log, which the first one starts (start)."""
        if self.path is None:
            return
        self.start()
        if self._fh is None:
            return
        self._fh.write(line)
        self._flush_soon()

    def witness(self, record: RequestRecord) -> None:
        """Appends the witnesses that came after `record` was written (witness_line)."""
        if self._fh is None:
            return
        self._fh.write(line_of(witness_line(record)))
        self._flush_soon()

    def _flush_soon(self) -> None:
        if self._flushing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop: now
            self.flush()
            return
        self._flushing = True
        loop.call_soon(self.flush)

    def flush(self) -> None:
        self._flushing = False
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        self._done = True
        if self._fh is not None:
            self._fh.close()
            self._fh = None


WITNESS_OF = "witness_of"  # a witness line's key: the request id it belongs to (it comes first)
LATE_FIELDS = ("server_tokenize", "tokenizer_tokens")  # the record's fields a witness line may carry


def witness_line(record: RequestRecord) -> dict[str, Any]:
    """A line naming a request already written, with the late witnesses it has gained (those
    it holds: a later line for another witness never erases an earlier one's). Its first key
    is WITNESS_OF, so a reader finds such lines by their first bytes; a reader of an older
    schema skips it (it is no record)."""
    late = {name: getattr(record, name) for name in LATE_FIELDS}
    return {WITNESS_OF: record.request_id, **{name: value for name, value in late.items() if value is not None}}


def is_witness_line(line: bytes) -> bool:
    return line.startswith(b'{"' + WITNESS_OF.encode() + b'"')


def dumps(obj: dict[str, Any]) -> str:
    """Compact JSON, through orjson when it is installed (10x faster on a 256-token record:
    at high load this runs a thousand times a second). Anything orjson refuses gets json."""
    try:
        return _orjson_dumps(obj).decode()
    except (TypeError, ValueError):
        return json.dumps(obj, separators=(",", ":"))


def record_line(record: RequestRecord) -> bytes:
    """A record's requests.jsonl line. orjson reads the dataclass's slots itself, at about
    half the cost of a dict of its fields (a tiny request's line is written in the window its
    figures are measured in); server_tokenize, not asked yet, goes as null (a witness line
    follows where it is asked). Whatever orjson refuses goes through line_of."""
    try:
        return _orjson_dumps(record, option=_NEWLINE)
    except (TypeError, ValueError):
        return line_of({name: getattr(record, name) for name in _FIELD_NAMES})


def line_of(obj: dict[str, Any]) -> bytes:
    """dumps(obj) and a newline, as bytes: what a requests.jsonl line is (orjson writes the
    newline itself, and bytes go to the file with no text layer)."""
    try:
        return _orjson_dumps(obj, option=_NEWLINE)
    except (TypeError, ValueError):
        return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


try:
    from orjson import OPT_APPEND_NEWLINE as _NEWLINE
    from orjson import dumps as _orjson_dumps
    from orjson import loads as _loads
except ImportError:  # pragma: no cover
    _NEWLINE = 1

    def _orjson_dumps(obj: dict[str, Any], option: int = 0) -> bytes:  # type: ignore[misc]  # orjson's signature is wider
        return json.dumps(obj, separators=(",", ":")).encode() + (b"\n" if option else b"")

    _loads = json.loads  # type: ignore[assignment]  # orjson reads bytes too


def header() -> dict[str, Any]:
    from benchy import __version__

    return {"schema": REQUESTS_SCHEMA, "benchy_version": __version__}


class RecordsError(ValueError):
    """A requests.jsonl of a schema this benchy cannot read; one line."""


R = TypeVar("R", bound=RequestRecord)


@overload
def read_records(path: Path, offset: int = 0) -> Iterator[RequestRecord]: ...
@overload
def read_records(path: Path, offset: int = 0, *, kind: type[R]) -> Iterator[R]: ...
def read_records(path: Path, offset: int = 0, kind: type[Any] = RequestRecord) -> Iterator[Any]:
    """Records from a requests.jsonl (from byte `offset`, a line's start); a last line cut by a
    kill is skipped, not fatal. The header line is checked (another major version:
    RecordsError) and not returned. `kind`: the class each line is read into, a RequestRecord
    or a subclass (the analysis reads each line straight into its results row: one step, not
    a record copied into a row). A kind with the plan's tags (records.plan.Tagged) gets each
    record's from its plan line, joined by request id (a plan line comes before its record, so
    only those of requests in flight are held), or from the record's own line (requests 1.x)."""
    known = _KNOWN.get(kind) or _KNOWN.setdefault(kind, frozenset(f.name for f in fields(kind)))
    plans: dict[str, dict[str, Any]] | None = {} if known & _TAG_SET else None
    with open(path, "rb") as fh:
        fh.seek(offset)
        for line in fh:
            if _plan.is_plan_line(line):
                if plans is not None and (tags := _plan_of(line)) is not None:
                    plans[tags.pop(_plan.PLAN_OF)] = tags
                continue
            try:
                data = _loads(line)  # orjson: a long run's analysis reads every record again
            except ValueError:
                try:
                    data = json.loads(line)  # what orjson refuses (NaN) and json reads
                except ValueError:
                    continue  # a line cut by a kill
            if is_header(data):
                _check_header(path, data["schema"])
                continue
            if isinstance(data, dict) and WITNESS_OF in data:
                continue  # a late witness, not a record (witness_line)
            values = {k: v for k, v in data.items() if k in known}
            if plans and isinstance(rid := values.get("request_id"), str):
                values.update(plans.pop(rid, ()))
            try:
                yield kind(**values)
            except TypeError:
                continue


def _plan_of(line: bytes) -> dict[str, Any] | None:
    """A plan line's fields; None where a kill cut it."""
    try:
        data: dict[str, Any] = _loads(line)
    except ValueError:
        return None
    return {k: v for k, v in data.items() if k in _TAG_SET or k == _plan.PLAN_OF}


_KNOWN: dict[type[Any], frozenset[str]] = {}  # a kind's keys read from a line (others: a newer benchy's)


def is_header(data: object) -> bool:
    """Whether a parsed requests.jsonl line is the header, not a record."""
    return isinstance(data, dict) and "schema" in data


READS_MAJORS = ("1", "2")  # 1.x: the tags inline on each record's line (read from there)


def _check_header(path: Path, schema: object) -> None:
    prefix, _, version = str(schema).rpartition("/")
    if prefix != "benchy/requests" or version.split(".")[0] not in READS_MAJORS:
        majors = " and ".join(f"benchy/requests/{m}.x" for m in READS_MAJORS)
        raise RecordsError(f"{path}: schema {schema!r}: this benchy reads {majors} only")


_TAG_SET = frozenset(_plan.TAG_NAMES)
