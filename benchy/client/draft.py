"""A request's answer as it arrives: the client's own mutable state, made into the frozen
RequestRecord once, when the answer closes (ok, failed, timed out, retried, cut by the drain).

Why apart from the record: a record that the client fills field by field while it streams can
be written into by anyone who holds it; handed on, it was still the client's object. The draft
is the reader's alone (client/reader.py books into it); downstream sees only the record it
makes, which refuses writes. Its fields are the record's answer fields, of the same names and
defaults (tests/test_draft.py holds them to the record's); the plan's fields (ids, targets,
workload tags) are the planned record's, copied once into the made record.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from benchy.records import Anomaly, RequestRecord


@dataclass(slots=True, eq=False)  # the reader writes its fields once per event: no __dict__
class Draft:
    planned: RequestRecord  # the plan's record: its ids, targets and workload tags
    sent_mono_s: float = 0.0
    sent_unix_s: float = 0.0
    status: str = "ok"
    error_kind: str | None = None
    error: str | None = None
    retried: str | None = None
    retried_kind: str | None = None
    http_status: int | None = None
    headers_s: float | None = None
    first_chunk_s: float | None = None
    end_s: float | None = None
    token_event_s: list[float] = field(default_factory=list)
    token_event_chars: list[int] = field(default_factory=list)
    token_event_usage: list[int] = field(default_factory=list)
    sse_events: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    usage_reported: bool = False
    content_chars: int = 0
    reasoning_chars: int = 0
    content_null_events: int = 0
    tool_chars: int = 0
    tool_calls: int = 0
    finish_reason: str | None = None
    anomalies: list[str] = field(default_factory=list)
    anomaly_counts: dict[str, int] = field(default_factory=dict)
    server_timings: dict[str, Any] | None = None
    streamed: bool = True
    inputs: int | None = None
    server_image_tokens: int | None = None
    # Each token event's text and kind, joined into the record's token_event_text and
    # token_event_kinds when it is made (a str += per event is O(n²)).
    texts: list[str] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    made: RequestRecord | None = None  # the record, once made: a draft closes once

    def __post_init__(self) -> None:
        self.inputs = self.planned.inputs  # a pooling request's: the client counts them from its body

    @property
    def request_id(self) -> str:
        return self.planned.request_id

    def note(self, anomaly: Anomaly, count: int | None = None) -> None:
        """Notes an anomaly of the stream, with its count where one goes with it."""
        self.anomalies.append(anomaly.value)
        if count is not None:
            self.anomaly_counts[anomaly.value] = count

    def retry(self) -> None:
        """A first attempt that failed on a reused connection before any response byte: kept as
        `retried`, and the answer starts again (its timestamps are the retry's)."""
        self.retried, self.retried_kind = f"{self.error_kind}: {self.error}", self.error_kind
        self.status, self.error_kind, self.error, self.end_s = "ok", None, None, None

    def record(self) -> RequestRecord:
        """The request's record, made once (the same one on every later call). The streams go
        into it as they are, not copied: the draft is dropped with the request."""
        if self.made is None:
            answer = {name: getattr(self, name) for name in ANSWER_FIELDS}
            text, kinds = "".join(self.texts), "".join(self.kinds)
            self.made = replace(self.planned, **answer, token_event_text=text, token_event_kinds=kinds)
        return self.made

    def cut(self, kind: str, message: str, end_s: float) -> RequestRecord:
        """The record of a request stopped from outside while in flight (the drain): what
        arrived is kept, and it fails with `kind`. One that had already closed is left as it was."""
        if self.made is None and self.end_s is None:
            self.status, self.error_kind, self.error, self.end_s = "error", kind, message, end_s
        return self.record()


ANSWER_FIELDS = tuple(name for name in Draft.__dataclass_fields__ if name not in ("planned", "texts", "kinds", "made"))
