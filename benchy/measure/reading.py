"""How benchy reads one request's stream: every piece of evidence weighed once, for all metrics.

A record holds what arrived (event times, each event's text, usage, the server's timings); a
`Reading` is benchy's verdict on it (evidence.py explains each rule):

  count        the completion tokens the figures use: usage when the events or the locally
               counted text confirm it, else the local count (an estimate), else the events
  per_event    tokens per token-bearing event: per-chunk usage, else local counts scaled to `count`
  arrivals     events joined into arrivals (bursts); ITL and decode are measured between them
  buffering    whether the event times show a buffer rather than the model
  kinds        event kinds once an inline <think>…</think> block is read as reasoning
  reasoning    reasoning tokens: usage's, else the reasoning text counted locally

The local count is scaled by the record's `local_token_scale` (server tokens per o200k token,
from calibration). `read` keeps the last readings, so the metrics of one record share one.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from benchy.measure import evidence
from benchy.measure.records import CONTENT, REASONING, RequestRecord

_CACHE_SIZE = 4096
_cache: OrderedDict[int, tuple[RequestRecord, Reading]] = OrderedDict()


@dataclass(frozen=True)
class Reading:
    count: evidence.TokenCount
    per_event: list[float]
    per_event_source: str
    arrivals: list[evidence.Arrival]
    buffering: evidence.Buffering
    kinds: str
    think: evidence.ThinkSplit
    reasoning_tokens: float | None
    reasoning_source: str | None  # "usage" | "local" | None

    @property
    def first_content_event(self) -> int:
        """Index of the first event of the answer (-1: none came)."""
        return self.kinds.find(CONTENT)


def read(rec: RequestRecord) -> Reading:
    """The reading of `rec`, computed once per record (by identity) while it is recent."""
    key = id(rec)
    hit = _cache.get(key)
    if hit is not None and hit[0] is rec:
        _cache.move_to_end(key)
        return hit[1]
    reading = _read(rec)
    _cache[key] = (rec, reading)
    if len(_cache) > _CACHE_SIZE:
        _cache.popitem(last=False)
    return reading


def count_entry(rec: RequestRecord) -> dict:
    """The token count's evidence for results.json: what each witness said, which one the
    figures use and why usage was disbelieved (checks read it: usage_mismatch, no_usage)."""
    count = read(rec).count
    return {
        "tokens": count.tokens,
        "source": count.source,
        "estimate": count.estimate,
        "usage": count.usage,
        "local": None if count.local is None else round(count.local, 1),
        "events": count.events,
        "mismatch": count.mismatch,
    }


def _read(rec: RequestRecord) -> Reading:
    texts = _event_texts(rec)
    scale = rec.local_token_scale or 1.0
    local = evidence.local_event_tokens(texts) if texts else []
    has_text = bool(rec.token_event_text)
    count = evidence.token_count(
        rec.completion_tokens, scale * sum(local) if has_text else None, len(rec.token_event_s)
    )
    if has_text:
        tokens = evidence.event_tokens(texts, count.tokens, rec.token_event_usage)
    else:  # a record without its text (an older one): each event's share of the characters
        tokens = evidence.event_tokens_by_chars(rec.token_event_chars, count.tokens, rec.token_event_usage)
    per_event = tokens.counts
    arrivals = evidence.arrivals(rec.token_event_s, per_event)
    ttft = rec.token_event_s[0] if rec.token_event_s else None
    think = evidence.split_think(texts, rec.token_event_kinds) if has_text else _no_think(rec.token_event_kinds)
    reasoning, source = _reasoning(rec, think.kinds, per_event, local, scale)
    return Reading(
        count=count,
        per_event=per_event,
        per_event_source=tokens.source,
        arrivals=arrivals,
        buffering=evidence.buffering(arrivals, ttft),
        kinds=think.kinds,
        think=think,
        reasoning_tokens=reasoning,
        reasoning_source=source,
    )


def _event_texts(rec: RequestRecord) -> list[str]:
    """Each event's text; records from before the text was kept give empty texts."""
    if len(rec.token_event_text) != sum(rec.token_event_chars):
        return [""] * len(rec.token_event_s)
    return evidence.event_texts(rec.token_event_text, rec.token_event_chars)


def _no_think(kinds: str) -> evidence.ThinkSplit:
    return evidence.ThinkSplit(kinds, 0, False, False)


def _reasoning(
    rec: RequestRecord, kinds: str, per_event: list[float], local: list[int], scale: float
) -> tuple[float | None, str | None]:
    """usage's reasoning_tokens when the server counted some (a server without a reasoning
    parser, or a raw Harmony completion, reports 0); else the reasoning events' tokens."""
    if rec.reasoning_tokens:
        return float(rec.reasoning_tokens), "usage"
    if REASONING not in kinds:
        return (0.0, "usage") if rec.reasoning_tokens == 0 else (None, None)
    mine = [i for i, k in enumerate(kinds) if k == REASONING]
    if per_event and not local:
        return sum(per_event[i] for i in mine), "events"
    return scale * sum(local[i] for i in mine), "local"
