"""Request classification: which records count as failed (an empty or zero-token output) and
which streams are buffered (decided by timing, delivery.buffering), per request: a case's
verdict on them is results/findings.BufferedStreams'."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from benchy.measure import reading
from benchy.measure.reading import Reading
from benchy.records import CONTENT, TOOL, RequestRecord
from benchy.records.plan import Tagged
from benchy.records.tokens import tokens_of

OUTPUT_FAILURES = ("empty_output", "zero_tokens")  # error kinds `classify` gives
DRAIN_CUT = "drain_cut"  # a request benchy cut, still in flight when --drain ran out (load/drain.py)
R = TypeVar("R", bound=RequestRecord)  # a record, or a row with its tags: returned as it came
LIVE_STREAM_TOKENS_PER_EVENT = 1.5  # usage showing about one token per event: a live stream


def output_failure(rec: RequestRecord) -> tuple[str, str] | None:
    """(error kind, message) when a request that ended normally delivered no output, else None."""
    if not rec.ok or rec.inputs is not None:  # a pooling request generates nothing by design
        return None
    claimed = tokens_of(rec)  # cheap: this runs as each request ends, inside the run's loop
    if claimed == 0:
        said = "completion_tokens 0" if rec.usage_reported else "no text and no usage"
        return "zero_tokens", f"the server generated nothing ({said}, finish_reason {rec.finish_reason!r})"
    # A tool call is output (client/tools.py): its name and arguments are the answer.
    if rec.content_chars == 0 and rec.tool_chars == 0 and (rec.reasoning_chars == 0 or rec.content_null_events):
        nulls = f"; {rec.content_null_events} deltas said content: null" if rec.content_null_events else ""
        return "empty_output", f"the server claimed {claimed} completion tokens but sent no content{nulls}"
    return None


def classify(rec: R) -> R:
    """The record as benchy counts it: an empty or zero-token output is a failed request
    (requests.jsonl keeps the status the client saw; results and --max-errors count this)."""
    failure = output_failure(rec)
    if failure is None:
        return rec
    return dataclasses.replace(rec, status="error", error_kind=failure[0], error=failure[1])


def is_buffered(rec: Tagged, read: Reading | None = None) -> bool:
    """Decided by timing (delivery.buffering), not by tokens per event alone: speculative
    decoding's multi-token events and bursts no longer than a draft are a live stream. A
    non-streamed answer is no buffered stream: its figures are withheld as not_streamed."""
    return rec.streamed and (read or reading.read(rec)).buffering.buffered


def buffering_reason(rec: Tagged, read: Reading | None = None) -> str:
    """`read`: the record's reading where the caller holds it (else it is read here)."""
    read = read or reading.read(rec)
    # An answer of tool calls: the usual holder is the server's tool-call parser (sglang#36272).
    parser = TOOL_PARSER if TOOL in read.kinds and CONTENT not in read.kinds else ""
    return (
        f"SSE buffering: {read.count.tokens} tokens arrived in {len(rec.token_event_s)} events; "
        f"{read.buffering.reason}, so event times measure the buffer, not the model{parser}"
    )


TOOL_PARSER = " (the answers are tool calls: a tool-call parser that holds a call's arguments back does this)"
