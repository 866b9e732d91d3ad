"""A request's workload tags: what its plan says of it, kept on the plan, joined by request id.

Why apart from the record: the record (records.RequestRecord) is the exchange, what was asked
and what the client saw, made once when the answer closes. Where a request stands in its
workload (its conversation and turn, its group, the cached tokens an ideal cache would serve
it, the calibration's scale of its local count, its images, when the schedule wanted it sent)
is known before it is sent, and no part of sending it reads it. So the plan keeps it
(load/plan.PlannedRequest.tags), requests.jsonl writes it on a plan line of its own as the
request is sent (plan_line), and the analysis joins the two by request id into one row
(`Tagged`, results/types.RequestResult), as it joins the late witnesses.

requests.jsonl before 2.0 wrote the tags inline on each record line; a reader of those files
reads them from there (records.read_records).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from benchy.jsontypes import described
from benchy.records.record import RequestRecord


# The tag fields, declared once: RequestTags is them alone, Tagged a record joined with them.
# kw_only: they follow the record's fields (which have no default) in Tagged; no slots of its
# own (`__slots__ = ()`), so each slotted subclass lays them out beside its other base's.
@dataclass(frozen=True, kw_only=True)
class TagFields:
    __slots__ = ()

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
    # A conversation's later turn carries its own: its target is the middle of a window over a
    # history the server renders (load/conversations._target_prompt), never below the previous
    # prompt and the new message, so a cut history still misses it.
    prompt_slack: int | None = None
    # (1.27) --images: the images the request carried and their encoded bytes (the plan's, known
    # before it is sent).
    images: int | None = described("(1.27) --images: images the request carried", omit=True)
    image_bytes: int | None = described("(1.27) --images: the images' encoded bytes (PNG)", omit=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestTags(TagFields):
    """A planned request's workload tags (TagFields): made by the plan, never by the client."""


NO_TAGS = RequestTags()


@dataclass(frozen=True, slots=True, kw_only=True)
class Tagged(TagFields, RequestRecord):
    """A record joined with its plan's tags by request id: what the analysis reads (a results
    row is one, with its figures). Made by the join (records.read_records; a probe's own
    records: `joined`), never sent."""

    def tags(self) -> RequestTags:
        return RequestTags(**{name: getattr(self, name) for name in TAG_NAMES})

    def to_dict(self) -> dict[str, Any]:
        """The record's fields (RequestRecord.to_dict) and its tags."""
        return {**RequestRecord.to_dict(self), **{name: getattr(self, name) for name in TAG_NAMES}}

    @classmethod
    def saved_order(cls) -> tuple[str, ...]:
        """Its fields (record first, tags, then a subclass's own) in the order a row was always
        saved (results.json; requests.jsonl before 2.0): each run of tags after the record
        field it followed (jsontypes.serialized_fields reads it)."""
        tags = list(TAG_NAMES)
        out: list[str] = []
        for name in (f.name for f in fields(cls) if f.name not in TAG_NAMES):
            out.append(name)
            for anchor, count in _AFTER:
                if name == anchor:
                    out.extend(tags[:count])
                    del tags[:count]
        return (*out, *tags)

    @classmethod
    def joined(cls, rec: RequestRecord, tags: RequestTags) -> Tagged:
        """`rec` joined with `tags` in memory (a probe's records, analysed as they are)."""
        made = {f.name: getattr(rec, f.name) for f in fields(RequestRecord)}
        return cls(**made, **{name: getattr(tags, name) for name in TAG_NAMES})


TAG_NAMES = tuple(f.name for f in fields(RequestTags))
# Where each run of tags stood among the record's fields: after the one named, in TagFields' order.
_AFTER = (("token_event_usage", 4), ("server_timings", 11), ("inputs", 2))


@dataclass(frozen=True, slots=True)
class Sent:
    """A request as it leaves: its planned record (its key and targets; sent_mono_s when it
    was sent) and its plan's tags. A worker hands these to its parent (load/handoff.Batch), which
    writes each as a plan line and knows the request in flight until its record comes."""

    record: RequestRecord
    tags: RequestTags


PLAN_OF = "plan_of"  # a plan line's key: the request id it belongs to (it comes first)
_PLAN_PREFIX = b'{"' + PLAN_OF.encode() + b'"'


def plan_fields(tags: RequestTags) -> dict[str, Any]:
    """The tags that differ from a request with none (the others are read back as defaults)."""
    return {name: value for name in TAG_NAMES if (value := getattr(tags, name)) != getattr(NO_TAGS, name)}


def plan_line(request_id: str, tags: RequestTags) -> dict[str, Any]:
    """A request's plan line: PLAN_OF first (so a reader finds it by its first bytes), then its
    tags; written when the request is sent, before its record (records.RecordWriter.sent)."""
    return {PLAN_OF: request_id, **plan_fields(tags)}


def is_plan_line(line: bytes) -> bool:
    return line.startswith(_PLAN_PREFIX)
