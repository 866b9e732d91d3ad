"""How a stream delivered its tokens: how many each event carried, when they arrived, and
whether they arrived as they were made. Its own module because it asks a question after the one
measure/evidence.py answers: evidence weighs how many tokens there were; this takes that count
and spreads it over the stream's events and time.

  how many per event?   vLLM's per-chunk usage (continuous_usage_stats), else the local count
                        of each event's text, scaled to the chosen total       → `event_tokens`
  when did they arrive? events arriving within a small share of the stream's mean gap per
                        token are one arrival (a burst); ITL is measured between arrivals,
                        per arrival (median gap) and per token (gaps ÷ tokens)  → `arrivals`
  a first token with    llama.cpp holds the bytes of a character split across tokens: when the
  no text?              first token is such a byte, its role chunk goes out alone at that
                        token's time and the next event brings both tokens' text. The decode
                        window then starts at that chunk                     → `textless_first`
  buffered or live?     decided by timing: the whole answer in one arrival (one event, or one
                        read: a compressing proxy), with nothing left to time; a first arrival
                        carrying many tokens (it waited for the rest) where lumps are the
                        server's habit, not one late read; or
                        most tokens arriving in bursts larger than any draft length.
                        Speculative decoding (vLLM: steps of 1-8 tokens per event; llama.cpp:
                        bursts of one-token events no longer than the draft, after a first
                        token that arrives alone) is not buffering; nor is a server's stream
                        interval (the first token alone, then N tokens an event, one event an
                        arrival, at a steady cadence per token)   → `buffering`, `server_interval`

Functions take plain values (times, per-event texts, counts), so they hold for records, saved
results and tests alike. Nothing here reads a file or the network.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import islice
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from benchy.measure import stats
from benchy.measure.evidence import local_event_tokens

# Two events are one arrival when the gap between them is below this share of the stream's
# mean time per token (a live stream's gaps are about 1×; bursts are microseconds apart) or
# below ARRIVAL_TINY_S (events read from one socket read share a timestamp).
ARRIVAL_GAP_SHARE = 0.1
ARRIVAL_TINY_S = 50e-6
# The first token comes alone at the end of prefill; vLLM merges 2-3 tokens into one event
# under load. A first arrival with more tokens than this waited for the ones after it.
FIRST_ARRIVAL_MAX_TOKENS = 4.0
# ...and only counts when the time it hid is a material share of TTFT (figures are judged
# within 5%) and more than timer noise.
FIRST_ARRIVAL_HIDDEN_SHARE = 0.05
FIRST_ARRIVAL_HIDDEN_MIN_S = 0.005
# Speculative decoding delivers at most draft + 1 tokens at once (llama.cpp's default
# --draft-max is 16; EAGLE/MTP drafts up to 7). Bursts beyond it carrying most tokens are a
# buffer, when the largest took more than FIRST_ARRIVAL_HIDDEN_MIN_S to make (an instant
# server's whole answer in one read hides nothing).
SPEC_MAX_ARRIVAL_TOKENS = 17
BURSTY_TOKEN_SHARE = 0.5


@dataclass(frozen=True)
class EventTokens:
    counts: list[float]  # tokens per token-bearing event, summing to the chosen total
    source: str  # "per-chunk usage" | "local tokenizer"


def per_chunk_tokens(cumulative: list[int]) -> list[int] | None:
    """Tokens per event from the cumulative completion_tokens each chunk reported (vLLM's
    continuous_usage_stats), None when missing or not rising."""
    if not cumulative:
        return None
    counts = list(np.diff([0, *cumulative]))
    return [int(c) for c in counts] if all(c >= 0 for c in counts) else None


def event_tokens(
    texts: list[str], total: int, cumulative: list[int] | None = None, local: list[int] | None = None
) -> EventTokens:
    """Tokens per event: the server's own per-chunk counts when it gave them for every event
    and they sum to `total`; else one each and the rest of `total` shared by the local count
    of each event's text beyond its first token (so `total` = events means one token each).
    `local`: local_event_tokens(texts), when the caller has it already."""
    return event_tokens_of(local if local is not None else local_event_tokens(texts), total, cumulative)


def event_tokens_of(local: list[int], total: int, cumulative: list[int] | None = None) -> EventTokens:
    """event_tokens from each event's local count (local_event_tokens), without the texts."""
    server = _per_chunk(cumulative, len(local), total)
    if server is not None:
        return server
    return EventTokens(_at_least_one_each([c - 1 for c in local], total), "local tokenizer")


def event_tokens_by_chars(chars: list[int], total: int, cumulative: list[int] | None = None) -> EventTokens:
    """Tokens per event without the text: per-chunk usage, else one each and the rest shared by
    each event's characters."""
    server = _per_chunk(cumulative, len(chars), total)
    if server is not None:
        return server
    return EventTokens(_at_least_one_each([float(c) for c in chars], total), "characters")


def _per_chunk(cumulative: list[int] | None, events: int, total: int) -> EventTokens | None:
    server = per_chunk_tokens(cumulative or [])
    if server is not None and len(server) == events and sum(server) == total:
        return EventTokens([float(c) for c in server], "per-chunk usage")
    return None


def _at_least_one_each(weights: list[float], total: int) -> list[float]:
    """`total` tokens over len(weights) events: every event carried at least one token; the
    tokens beyond that go by weight (evenly when no event weighs anything)."""
    n = len(weights)
    if not n:
        return []
    extra, weight = max(0, total - n), sum(weights)
    if weight <= 0:
        return [1 + extra / n] * n
    return [1 + extra * w / weight for w in weights]


# ---------------------------------------------------------------- arrivals and buffering


class Arrival(NamedTuple):
    """Events that arrived together. A named tuple, not a frozen dataclass: a record makes
    one an event of a live stream, and a frozen dataclass's __init__ costs three times as much."""

    t_s: float  # when its first event arrived
    events: int
    tokens: float


def arrivals(times: list[float], tokens: list[float]) -> list[Arrival]:
    """Events grouped into arrivals: one that follows the previous within ARRIVAL_GAP_SHARE of
    the stream's mean time per token (or ARRIVAL_TINY_S) joins it."""
    if not times:
        return []
    total = sum(tokens)
    span = times[-1] - times[0]
    per_token = span / (total - tokens[0]) if total > tokens[0] else 0.0
    join = max(ARRIVAL_TINY_S, ARRIVAL_GAP_SHARE * per_token)
    out: list[Arrival] = []
    start, events, carried = times[0], 1, tokens[0]
    for prev, t, k in zip(times, islice(times, 1, None), islice(tokens, 1, None)):
        if t - prev <= join:
            events += 1
            carried += k
        else:
            out.append(Arrival(start, events, carried))
            start, events, carried = t, 1, k
    out.append(Arrival(start, events, carried))
    return out


def itl_per_token(arr: list[Arrival]) -> float | None:
    """Per token: the gaps between arrivals ÷ the tokens they brought (each arrival's gap ÷ its
    tokens, weighted by its tokens), i.e. (last arrival − first) ÷ tokens after the first. A
    median of per-arrival ratios would lean to the longest steps of speculative decoding, and
    a burst read in two parts would halve it."""
    rate = decode_rate(arr)
    return 1 / rate if rate else None


def itl_per_arrival(arr: list[Arrival]) -> float | None:
    """Median gap between arrivals (an event, or a burst of events arriving together)."""
    if len(arr) < 2:
        return None
    return _median([b.t_s - a.t_s for a, b in zip(arr, islice(arr, 1, None))])


def _median(values: list[float]) -> float:
    """numpy's median of a short list, bit for bit ((a + b) / 2 of the middle two), without
    the cost of an array for each request."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else float((ordered[mid - 1] + ordered[mid]) / 2)


# A role-only chunk stands for a first token without text when it came between these
# multiples of the stream's median gap between events before the first text (one token's
# time); one sent at once (before prefill) or with the first text is no token.
TEXTLESS_FIRST_GAP = (0.5, 2.0)


def textless_first(first_chunk_s: float | None, times: list[float], tokens: int) -> bool:
    """Whether the first token made a chunk without text (see the module docstring): the
    stream has more tokens than events, and a chunk came one token's time before the first text."""
    if first_chunk_s is None or len(times) < 3 or tokens <= len(times):
        return False
    gap, typical = times[0] - first_chunk_s, stats.median(np.diff(times))
    low, high = TEXTLESS_FIRST_GAP
    return typical > 0 and low * typical <= gap <= high * typical


def decode_rate(arr: list[Arrival]) -> float | None:
    """Tokens after the first arrival ÷ time from the first arrival to the last."""
    if len(arr) < 2 or arr[-1].t_s <= arr[0].t_s:
        return None
    after_first: float = sum(map(_TOKENS, islice(arr, 1, None)))
    return after_first / (arr[-1].t_s - arr[0].t_s)


_TOKENS = itemgetter(2)  # an Arrival's tokens, for sums run in C (a record's metrics take three)


@dataclass(frozen=True)
class Buffering:
    buffered: bool
    reason: str  # why it is (or is not) called buffered, with the figures
    first_tokens: float
    hidden_s: float  # how much later the first token arrived than it was made, at least
    largest_arrival: float
    bursty_share: float  # share of tokens arriving in arrivals above SPEC_MAX_ARRIVAL_TOKENS


def _lumps_by_habit(arr: list[Arrival]) -> bool:
    """A lumpy first arrival is the server's doing when the server wrote it as one event, or
    when the rest of the stream arrives in lumps too. A client that read a live stream late
    once (a busy machine) shows a lump of one-token events first and single tokens after."""
    later = arr[1:]
    if arr[0].events == 1 or not later:
        return True
    return sum(a.tokens for a in later) / len(later) > FIRST_ARRIVAL_MAX_TOKENS


# A server's stream interval (vLLM --stream-interval, TensorRT-LLM stream_interval) writes the
# first token alone and then each event when its last token is made, so no event comes sooner
# than its tokens take to make. A server (or proxy) releasing tokens it held shows the opposite:
# events that follow the one before faster than the tokens in them could be made, or several
# events in one read. So the cadence is judged one-sided: at least CADENCE_SHARE of the later
# arrivals are one event each and take at least 1/CADENCE_SPREAD of the median time a token.
# A slow or uneven server (a CPU engine on a busy machine: steps from 0.4× to 5× the median on
# real vLLM) holds nothing back, and is not called a buffer for being slow.
CADENCE_SPREAD = 2.0
CADENCE_SHARE = 0.8
# Fewer later arrivals give no cadence to judge (one gap is no rhythm), and a stream that shows
# none is not cleared of buffering: 29 tokens in 2 events is the buffer the field report met.
CADENCE_MIN_ARRIVALS = 2


def server_interval(arr: list[Arrival]) -> bool:
    """Whether large arrivals are the server's own stream interval, not a buffer: the first
    token came alone, and the later arrivals are (mostly) one event each, none of those
    sooner after the one before than its tokens take to make. Such a stream loses no time: the
    first token is on time and each event leaves when its last token is made, so TTFT and
    decode (first arrival to last) stand."""
    first, later = arr[0], arr[1:]
    if first.events != 1 or first.tokens > FIRST_ARRIVAL_MAX_TOKENS or len(later) < CADENCE_MIN_ARRIVALS:
        return False
    steps = [((b.t_s - a.t_s) / b.tokens, b.events) for a, b in zip(arr, later) if b.tokens > 0]
    typical = _median([step for step, _ in steps]) if steps else 0.0
    if typical <= 0:
        return False
    on_time = sum(events == 1 and step >= typical / CADENCE_SPREAD for step, events in steps)
    return on_time >= CADENCE_SHARE * len(steps)


def buffering(arr: list[Arrival], ttft_s: float | None) -> Buffering:
    """Buffering by timing, not by tokens per event alone (see the module docstring)."""
    if not arr:
        return Buffering(False, "no event carried text", 0.0, 0.0, 0.0, 0.0)
    tokens = list(map(_TOKENS, arr))
    total = sum(tokens)
    rate = decode_rate(arr)
    first = tokens[0]
    hidden = (first - 1) / rate if rate and first > 1 else 0.0
    largest = max(tokens)
    bursty = sum(t for t in islice(tokens, 1, None) if t > SPEC_MAX_ARRIVAL_TOKENS) / total if total else 0.0
    material = hidden >= max(FIRST_ARRIVAL_HIDDEN_MIN_S, FIRST_ARRIVAL_HIDDEN_SHARE * (ttft_s or 0.0))
    figures = dict(first_tokens=first, hidden_s=hidden, largest_arrival=largest, bursty_share=bursty)
    if len(arr) == 1 and first > FIRST_ARRIVAL_MAX_TOKENS:
        why = (
            f"all {first:.0f} tokens arrived at once (one event or one read), so the first token "
            "waited for all the others and there is no interval to time"
        )
        return Buffering(True, why, **figures)
    if first > FIRST_ARRIVAL_MAX_TOKENS and material and _lumps_by_habit(arr):
        why = (
            f"the first arrival carried {first:.0f} tokens, so the first token waited about "
            f"{hidden * 1000:.0f} ms for the ones after it"
        )
        return Buffering(True, why, **figures)
    burst_hides = (largest - 1) / rate if rate else 0.0  # how long the largest burst took to make
    if bursty >= BURSTY_TOKEN_SHARE and burst_hides >= FIRST_ARRIVAL_HIDDEN_MIN_S and not server_interval(arr):
        why = (
            f"{bursty:.0%} of the tokens arrived in bursts of more than {SPEC_MAX_ARRIVAL_TOKENS} "
            f"(up to {largest:.0f}), longer than any speculative draft"
        )
        return Buffering(True, why, **figures)
    return Buffering(False, "tokens arrive as they are made", **figures)
