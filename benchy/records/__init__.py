"""One record per request: what the client saw, with raw timestamps, and nothing derived.

Times are seconds relative to the moment the request was sent (`sent_mono_s`, from
`time.perf_counter`), so a record can be compared with a server's own monotonic log.
Metrics are derived from records in metrics.py, never stored here.

requests.jsonl starts with a header line naming its schema (REQUESTS_SCHEMA,
`benchy/requests/MAJOR.MINOR`, versioned as results.json is); then one record per line.
Readers accept files without the header (written before it existed).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterable, Iterator
from dataclasses import Field, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import IO, Any, TypeVar, overload

from benchy.jsontypes import described

# 1.1: alone; 1.2: anomaly codes apart from their counts, retried_kind; 1.3: local_scale_from_usage;
# 1.4: streamed; 1.5: prompt_slack; 1.6: witness lines (WITNESS_OF), a late witness of a request written before it came;
# 1.7: local_scale_generated; 1.8: tool_chars, tool_calls (tool calls are output: TOOL events),
# tokenizer_tokens (a late witness: --tokenizer's count of the text), usage_at_known, inputs (embeddings);
# 1.9: images, image_bytes, server_image_tokens (--images)
REQUESTS_SCHEMA = "benchy/requests/1.9"

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


# Frozen: made once, by the client when the answer closes (client/draft.py) or by the plan, and
# never written into after; slotted: no __dict__ per record (a long run holds one row per request).
@dataclass(frozen=True, slots=True)
class RequestRecord:
    case: str
    run: int
    index: int
    warmup: bool
    request_id: str
    nonce: str | None
    target_prompt_tokens: int
    target_output_tokens: int
    sent_mono_s: float = 0.0
    sent_unix_s: float = 0.0
    status: str = "ok"  # "ok" | "error"
    error_kind: str | None = None  # e.g. http_500, timeout, reset, disconnect, stall (client.py lists all)
    error: str | None = None
    # "kind: message" of a first attempt that failed on a reused keep-alive connection before
    # any response byte; the request was sent again on a fresh one (timestamps are the retry's).
    retried: str | None = None
    retried_kind: str | None = None  # (1.2) that first failure's error kind, apart from its message
    http_status: int | None = None
    headers_s: float | None = None  # response headers received
    first_chunk_s: float | None = None  # first SSE event of any kind (a role-only chunk counts)
    end_s: float | None = None  # stream finished (or failed)
    token_event_s: list[float] = field(default_factory=list)  # events that carried text
    token_event_chars: list[int] = field(default_factory=list)
    token_event_kinds: str = ""  # CONTENT / REASONING / TOOL per token-bearing event
    # The generated text as it streamed, reasoning and content in event order (token_event_chars
    # cuts it per event): metrics count it with benchy's own tokenizer (evidence.py).
    token_event_text: str = ""
    # vLLM's stream_options.continuous_usage_stats: the cumulative completion_tokens that came
    # with each token-bearing event; empty when the server sends no per-chunk usage.
    token_event_usage: list[int] = field(default_factory=list)
    # Server tokens per benchy-local (o200k) token, from calibration (of an answer's text where
    # the server let benchy measure it, else of the prompts): scales the local count of the
    # streamed text (None: not calibrated, e.g. a probe).
    local_token_scale: float | None = None
    # (1.3) That scale came from usage.completion_tokens of a calibration answer (the server had
    # no /tokenize): the local count then estimates a count without usage, but is no witness on
    # usage, being fitted on it.
    local_scale_from_usage: bool = False
    # (1.7) That scale came from the tokens a calibration answer was known to generate (it ended
    # by length at its max_tokens): the local count is then a witness of its own, on usage and
    # on the server's /tokenize alike.
    local_scale_generated: bool = False
    # (1.8) usage's claim over the tokens calibration's answer was known to make (it ended by
    # length): 1.5 where usage said 96 of 64; None: not known (load/prompts.Calibration)
    usage_at_known: float | None = None
    sse_events: int = 0  # every data event, token-bearing or not
    prompt_tokens: int | None = None  # from the server's usage
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    usage_reported: bool = False
    content_chars: int = 0
    reasoning_chars: int = 0
    content_null_events: int = 0  # deltas that said content: null with no other text
    # (1.8) Tool calls are output: the characters of their names and arguments as they came
    # (also in token_event_text, kind TOOL), and how many calls the answer held (parallel calls).
    tool_chars: int = 0
    tool_calls: int = 0
    finish_reason: str | None = None
    # Anomaly codes (files before requests 1.2 wrote a count after the code: malformed_events:N)
    anomalies: list[str] = field(default_factory=list)
    anomaly_counts: dict[str, int] = field(default_factory=dict)  # (1.2) code → its count, where one goes
    server_timings: dict[str, Any] | None = None  # llama.cpp's per-response `timings`, verbatim
    # --depth-mode cached: tokens of a context sent ahead that this request reuses, so the
    # server should report them as cached (0: nothing was sent ahead).
    reused_context_tokens: int = 0
    # Open loop (--rate): when the schedule wanted this request sent (perf_counter, as
    # sent_mono_s); a send behind schedule shows as sent_mono_s − scheduled_mono_s (queue delay).
    # None in a closed loop, where a request goes the moment a slot frees.
    scheduled_mono_s: float | None = None
    # Cache-aware workloads (benchy/workloads): where the request stands in its workload, the
    # prompt tokens an ideal prefix cache would serve it (a conversation's history, a group's
    # shared prefix, a trace's earlier blocks; None when unknown) and the tokens at its end that
    # no cache can hold (a nonce-led message or suffix): reported cached tokens above
    # prompt − unique are leakage, below expected are eviction (checks.py).
    conversation: int | None = None
    turn: int | None = None  # 1 for a conversation's first turn
    group: int | None = None  # shared-prefix group
    expected_cached_tokens: int | None = None
    unique_tokens: int | None = None
    # (1.26) An agent call whose last user message follows reasoning that the call it extends
    # sent as its last turn's: a template rendering only the last turn's reasoning (Qwen3,
    # DeepSeek-R1) now drops it, so the history this call resends differs from the cached one.
    history_reasoning: bool = False
    # A cold control of a workload (multi-turn --cold-baseline): the same length as a turn,
    # nothing shared, so that turn's TTFT can be set against it.
    control: bool = False
    # Sent with nothing else in flight, just before a loaded case (the case's prompt shape, one
    # output token): its TTFT is what the server takes unloaded, the baseline that queueing is
    # judged against (load/alone.py). Also marked warmup: never in the case's statistics.
    alone: bool = False
    # (1.3) Tokens the server's prompt count may miss target_prompt_tokens by before the row is
    # another prompt's: small where the prompt's words were fitted to the server's tokenizer
    # (load/lengths.py; a template's join), None: the o200k estimate's wider default (evidence.py).
    prompt_slack: int | None = None
    # The server's own token count of token_event_text (its /tokenize), asked after the case
    # for a request whose count was disputed, or a few to corroborate (load/tokenize.py); None:
    # not asked, or the server has no /tokenize. The record is written as it finishes, before
    # this is asked: requests.jsonl gets it later, on a witness line of its own (witness_line).
    server_tokenize: int | None = None
    # (1.8) --tokenizer's count of token_event_text (the model's own vocabulary, offline),
    # counted after the case for every answer (load/tokenize.py); a late witness as above.
    tokenizer_tokens: int | None = None
    # (1.3) False: sent with --no-stream, the answer read whole (client/whole.py); its one text
    # event is the answer's end, so no stream-timing figure is taken from it (metrics.py).
    streamed: bool = True
    # (1.26) A pooling request (--endpoint embeddings): how many inputs it embedded (None: a
    # generation request). It generates no token, so no output figure is taken from it.
    inputs: int | None = described("(1.26) --endpoint embeddings: the inputs the request embedded", omit=True)
    # (1.27) --images: the images the request carried and their encoded bytes (the plan's, known
    # before it is sent), and the server's own count of their tokens where its usage gives one
    # (prompt_tokens_details.image_tokens); None: no image, or no such count.
    images: int | None = described("(1.27) --images: images the request carried", omit=True)
    image_bytes: int | None = described("(1.27) --images: the images' encoded bytes (PNG)", omit=True)
    server_image_tokens: int | None = described(
        "(1.27) usage.prompt_tokens_details.image_tokens: the server's own count of the images' tokens", omit=True
    )

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        # Not dataclasses.asdict: it copies each list element through its recursion, 1-2 ms for
        # a 256-token record, more CPU than streaming it took. Fields hold scalars, flat lists
        # and one JSON object (server_timings).
        out = {}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value.__class__ is list:
                value = list(value)
            elif value.__class__ is dict:
                value = copy.deepcopy(value)
            out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RequestRecord:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def blank(names: Iterable[str]) -> dict[str, Any]:
    """The record's fields `names` as a new record has them (a list each its own): what a
    results row does not keep (its streams, its late witnesses) set back, not emptied in place."""
    made = {f.name: f for f in fields(RequestRecord)}
    return {name: _default(made[name]) for name in names}


def _default(f: Field[Any]) -> Any:
    return f.default_factory() if callable(f.default_factory) else f.default


_KNOWN = frozenset(f.name for f in fields(RequestRecord))  # a line's keys read (others: a newer benchy's)
_FIELD_NAMES = tuple(
    f.name for f in fields(RequestRecord) if f.name not in ("server_tokenize", "tokenizer_tokens")
)  # see the fields


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
        if self.path is None:
            return
        self.start()
        if self._fh is None:
            return
        self._fh.write(record_line(record))
        self._flush_soon()

    def mark(self) -> int:
        """Where the next record will be written (records_since reads from there)."""
        self.flush()
        return self._fh.tell() if self._fh is not None else 0

    def records_since(self, mark: int) -> Iterator[RequestRecord]:
        """The records written since `mark`, read back from the file, in the order they were
        written; none where nothing was."""
        self.flush()
        if self._fh is None or self.path is None:
            return iter(())
        return read_records(self.path, mark)

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
    a record copied into a row)."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        for line in fh:
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
            try:
                yield kind(**{k: v for k, v in data.items() if k in _KNOWN})
            except TypeError:
                continue


def is_header(data: object) -> bool:
    """Whether a parsed requests.jsonl line is the header, not a record."""
    return isinstance(data, dict) and "schema" in data


def _check_header(path: Path, schema: object) -> None:
    major = REQUESTS_SCHEMA.rsplit("/", 1)[1].split(".")[0]
    prefix, _, version = str(schema).rpartition("/")
    if prefix != "benchy/requests" or version.split(".")[0] != major:
        raise RecordsError(f"{path}: schema {schema!r}: this benchy reads {REQUESTS_SCHEMA.rsplit('.', 1)[0]}.x only")
