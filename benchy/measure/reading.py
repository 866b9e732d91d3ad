"""How benchy reads one request's stream: every piece of evidence weighed once, for all metrics.

A record holds what arrived (event times, each event's text, usage, the server's timings); a
`Reading` is benchy's verdict on it (evidence.py explains each rule):

  count        the completion tokens the figures use, by witnesses ranked by what they know:
               usage, backed by timings.predicted_n, per-chunk usage, the server's /tokenize of
               the streamed text (asked after the case: load/tokenize.py), max_tokens where the
               request ended by length, or one token an event;
               the local count (an estimate) never overrules usage alone
  per_event    tokens per token-bearing event: per-chunk usage, else local counts scaled to `count`
  arrivals     events joined into arrivals (bursts); ITL and decode are measured between them;
               a first token that came as a chunk without text is an arrival of its own
  buffering    whether the event times show a buffer rather than the model
  kinds        event kinds once an inline <think>…</think> block is read as reasoning
  reasoning    reasoning tokens: usage's, else the reasoning events' share of `count`

The local count is scaled by the record's `local_token_scale` (server tokens per o200k token,
from calibration; where that scale was fitted on usage, the local count is no witness on usage).
A record is read once for all its metrics: the registry passes the reading to each formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchy.measure import delivery, evidence, think
from benchy.records import CONTENT, REASONING, TOOL
from benchy.records.plan import Tagged


@dataclass(frozen=True)
class Reading:
    count: evidence.TokenCount
    per_event: list[float]
    per_event_source: str
    arrivals: list[delivery.Arrival]
    buffering: delivery.Buffering
    kinds: str
    think: think.ThinkSplit
    reasoning_tokens: float | None
    reasoning_source: str | None  # "usage" | "local" | None

    @property
    def first_content_event(self) -> int:
        """Index of the first event of the answer, content or a tool call (-1: none came)."""
        found = [i for i in (self.kinds.find(CONTENT), self.kinds.find(TOOL)) if i >= 0]
        return min(found, default=-1)

    @property
    def first_tool_event(self) -> int:
        """Index of the first event of a tool call (-1: none came)."""
        return self.kinds.find(TOOL)


def read(rec: Tagged) -> Reading:
    """The reading of `rec` as it stands now. Nothing is kept: whoever reads a record for
    several figures holds its reading and passes it on (registry.request_metrics, the
    buffering verdict), so a witness that comes later (the server's /tokenize) is never
    hidden behind an earlier reading."""
    return _read(rec)


def count_entry(rec: Tagged, reading: Reading | None = None) -> dict[str, Any]:
    """The token count's evidence for results.json (results.types.TokenCountEntry): what each
    witness said, which one the figures use, who backed it and who disagreed, and why usage
    was disbelieved (checks read it: usage_mismatch, no_usage, local_tokenizer_mismatch)."""
    count = (reading or read(rec)).count
    return {
        "tokens": count.tokens,
        "source": count.source,
        "estimate": count.estimate,
        "usage": count.usage,
        "local": None if count.local is None else round(count.local, 1),
        "local_by": _local_by(rec, count),
        "events": count.events,
        "predicted_n": count.predicted_n,
        "per_chunk": count.per_chunk,
        "server_tokenize": count.server_tokenize,
        "backed_by": list(count.backed_by),
        "disagreed": list(count.disagreed),
        "mismatch": count.mismatch,
        "local_mismatch": count.local_mismatch,
    }


def _local_by(rec: Tagged, count: evidence.TokenCount) -> str | None:
    """Which tokenizer made the local count: --tokenizer's file, or benchy's o200k (scaled)."""
    if count.local is None:
        return None
    return evidence.LENGTHS_TOKENIZER_FILE if rec.tokenizer_tokens is not None else evidence.LENGTHS_O200K


def token_count(rec: Tagged) -> evidence.TokenCount:
    """read(rec).count alone: what a per-record decision on the event loop needs (whether the
    count is disputed, load/tokenize.py) without the arrivals, buffering and think split."""
    return _count(rec, _local_tokens(rec))


def _count(rec: Tagged, local: list[int]) -> evidence.TokenCount:
    if rec.tokenizer_tokens is not None and rec.token_event_text:
        # --tokenizer counted the text in the model's own vocabulary: no scale, no echo of usage
        return _counted(rec, float(rec.tokenizer_tokens), generated=True)
    scale = rec.local_token_scale or 1.0
    has_text = bool(rec.token_event_text)
    # A scale fitted on usage makes the local count an echo of usage: no witness on it.
    witness = has_text and not (rec.local_scale_from_usage and rec.completion_tokens is not None)
    return _counted(rec, scale * sum(local) if witness else None, rec.local_scale_generated)


def _counted(rec: Tagged, local: float | None, generated: bool) -> evidence.TokenCount:
    """evidence.token_count of the record's witnesses, with `local` the text's local count;
    `generated`: that count is a witness of its own on usage (evidence.token_count)."""
    return evidence.token_count(
        rec.completion_tokens,
        local,
        len(rec.token_event_s),
        predicted_n=_predicted_n(rec.server_timings),
        per_chunk=rec.token_event_usage[-1] if rec.token_event_usage else None,
        server_tokenize=rec.server_tokenize,
        max_tokens_reached=_max_tokens_reached(rec),
        hidden_max=evidence.HIDDEN_TOKENS_MAX if REASONING in rec.token_event_kinds else evidence.EVENT_SLACK_TOKENS,
        local_generated=generated,
        usage_at_known=rec.usage_at_known,
    )


def _read(rec: Tagged) -> Reading:
    scale = rec.local_token_scale or 1.0
    local = _local_tokens(rec)
    has_text = bool(rec.token_event_text)
    count = _count(rec, local)
    textless = delivery.textless_first(rec.first_chunk_s, rec.token_event_s, count.tokens)
    in_events = count.tokens - 1 if textless else count.tokens
    if has_text:
        tokens = delivery.event_tokens_of(local, in_events, rec.token_event_usage)
    else:  # a record without its text (an older one): each event's share of the characters
        tokens = delivery.event_tokens_by_chars(rec.token_event_chars, in_events, rec.token_event_usage)
    per_event = tokens.counts
    arrivals = delivery.arrivals(rec.token_event_s, per_event)
    if textless and rec.first_chunk_s is not None:
        arrivals.insert(0, delivery.Arrival(rec.first_chunk_s, 1, 1.0))
    ttft = rec.token_event_s[0] if rec.token_event_s else None
    think = _think(rec) if has_text else _no_think(rec.token_event_kinds)
    streamed = _streamed_tokens(count, per_event, tokens.source, local, scale)
    reasoning, source = _reasoning(rec, think.kinds, streamed, local)
    return Reading(
        count=count,
        per_event=per_event,
        per_event_source=tokens.source,
        arrivals=arrivals,
        buffering=delivery.buffering(arrivals, ttft),
        kinds=think.kinds,
        think=think,
        reasoning_tokens=reasoning,
        reasoning_source=source,
    )


def _max_tokens_reached(rec: Tagged) -> int | None:
    """The max_tokens sent (target_output_tokens) where the request ended by length: the count
    the server generated, known without usage (evidence.MAX_TOKENS)."""
    return rec.target_output_tokens if rec.finish_reason == "length" and rec.target_output_tokens > 0 else None


def _predicted_n(timings: dict[str, Any] | None) -> int | None:
    """llama.cpp's own count of the tokens it generated (timings.predicted_n)."""
    value = (timings or {}).get("predicted_n")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _local_tokens(rec: Tagged) -> list[int]:
    """Each event's local token count (evidence.local_event_tokens of _event_texts), straight
    from the record's text and per-event lengths."""
    chars = rec.token_event_chars
    if len(rec.token_event_text) != sum(chars):  # no text kept: empty texts, one token each
        return [1] * len(rec.token_event_s)
    return evidence.local_tokens_of(rec.token_event_text, chars) if chars else []


def _think(rec: Tagged) -> think.ThinkSplit:
    """think.split_think of the record's events. An answer of content events only, without
    a "<" and not opening with blanks, holds no think block: that needs no texts cut."""
    text, kinds, chars = rec.token_event_text, rec.token_event_kinds, rec.token_event_chars
    if REASONING not in kinds and "<" not in text and text[: sum(chars[:8])].strip():
        return _no_think(kinds)
    return think.split_think(_event_texts(rec), kinds)


def _event_texts(rec: Tagged) -> list[str]:
    """Each event's text; records from before the text was kept give empty texts."""
    if len(rec.token_event_text) != sum(rec.token_event_chars):
        return [""] * len(rec.token_event_s)
    return evidence.event_texts(rec.token_event_text, rec.token_event_chars)


def _no_think(kinds: str) -> think.ThinkSplit:
    return think.ThinkSplit(kinds, 0, False, False)


def _streamed_tokens(
    count: evidence.TokenCount, per_event: list[float], source: str, local: list[int], scale: float
) -> list[float]:
    """Tokens each event carried. per_event spreads the whole count over the events (the rates
    need every generated token), but where the local count shows one token an event, the
    tokens beyond the events made no event (Harmony's markers, an end-of-sequence token):
    then each event carried one."""
    if source == "per-chunk usage" or not local or count.tokens <= len(per_event):
        return per_event
    if scale * sum(local) <= len(per_event) * (1 + evidence.USAGE_RATIO_TOLERANCE):
        return [1.0] * len(per_event)
    return per_event


def _reasoning(rec: Tagged, kinds: str, per_event: list[float], local: list[int]) -> tuple[float | None, str | None]:
    """usage's reasoning_tokens when the server counted some (a server without a reasoning
    parser, or a raw Harmony completion, reports 0); else the reasoning events' tokens."""
    if rec.reasoning_tokens:
        return float(rec.reasoning_tokens), "usage"
    if REASONING not in kinds:
        return (0.0, "usage") if rec.reasoning_tokens == 0 else (None, None)
    mine = [i for i, k in enumerate(kinds) if k == REASONING]
    # The reasoning events' share of the believed count (per_event sums to it): one token an
    # event is exact, and a tokenizer that is not the model's only weighs the events.
    return sum(per_event[i] for i in mine), "local" if local else "events"
