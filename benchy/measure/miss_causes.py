"""Why a case's prefix reuse fell short, told by when: how long each request's prefix sat idle
before it (a cache lifetime expiring shows as misses after longer idle gaps than any hit), and
how many turns back a conversation's partial hits reached (a router rotating over replicas).
Its own module because these timelines are a question of their own, asked by the reuse
findings in measure/workloads.py (partial_reuse, no_reuse) and nowhere else.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence

from benchy.records.plan import Tagged

STEADY_LAG_SHARE = 0.6  # partial hits that reused the same turn distance: a rotation
# Misses whose idle gaps all exceed every hit's by this factor and this many seconds (a busy
# client's timer and the answer's own decode time blur a gap by less) point to a cache lifetime.
EXPIRY_GAP_RATIO, EXPIRY_GAP_MIN_S = 1.25, 0.05
EXPIRY_MIN_MISSES = 2


def start_reuse(sent: list[Tagged]) -> tuple[int, float, float | None] | None:
    """(requests that reported cached tokens, the longest gap since the previous send before
    one of them, the shortest quiet since every earlier request ended before one that reported
    none), over requests in send order after the first; None when none reported any. A block
    last used no earlier than the previous send sat idle at most that long; one last used no
    later than the latest end, at least the quiet since."""
    hit_gaps: list[float] = []
    lost_quiet: list[float] = []
    latest_end: float | None = None
    for prev, r in zip(sent, sent[1:], strict=False):
        end = prev.sent_mono_s + prev.end_s if prev.end_s is not None else None
        if end is not None:
            latest_end = end if latest_end is None else max(latest_end, end)
        if r.cached_tokens is None:
            continue
        if r.cached_tokens > 0:
            hit_gaps.append(r.sent_mono_s - prev.sent_mono_s)
        elif latest_end is not None:
            lost_quiet.append(max(0.0, r.sent_mono_s - latest_end))
    if not hit_gaps:
        return None
    return len(hit_gaps), max(hit_gaps), min(lost_quiet) if lost_quiet else None


def past_lifetime(miss_min_s: float, hit_max_s: float) -> bool:
    """Whether the shortest idle before a miss lies beyond the longest before a hit by both
    margins: a cache lifetime between the two, not a timer's blur."""
    return miss_min_s >= max(EXPIRY_GAP_RATIO * hit_max_s, hit_max_s + EXPIRY_GAP_MIN_S)


def idle_split(ended: Sequence[Tagged], judged: list[tuple[Tagged, bool]]) -> tuple[float, float] | None:
    """(shortest idle before a miss, longest idle before a hit), each request's idle time being
    since the last request that left what it reuses ended (its conversation's previous turn, else
    its group's requests sent before it; one still in flight leaves no idle time); None without
    EXPIRY_MIN_MISSES misses and a hit to set apart."""
    idle = IdleTimes(ended)
    miss: list[float] = []
    hit: list[float] = []
    for r, fine in judged:
        gap = idle.before(r)
        if gap is not None:
            (hit if fine else miss).append(gap)
    if len(miss) < EXPIRY_MIN_MISSES or not hit:
        return None
    return min(miss), max(hit)


class IdleTimes:
    """When each conversation's turns ended, and for each group the requests' send times with
    the latest end among those sent so far, indexed once (a case may hold thousands of requests).
    A group's request sent while an earlier one was still in flight (an open loop's sends, or
    a late one that a busy client sent together with the next) found the prefix in use, not idle."""

    def __init__(self, ok: Sequence[Tagged]) -> None:
        self._turn_end: dict[tuple[int, int], float] = {}
        by_group: dict[int, list[tuple[float, float]]] = {}
        for o in ok:
            if o.end_s is None:
                continue
            end = o.sent_mono_s + o.end_s
            if o.conversation is not None and o.turn is not None:
                self._turn_end[(o.conversation, o.turn)] = end
            if o.group is not None:
                by_group.setdefault(o.group, []).append((o.sent_mono_s, end))
        self._group_sent: dict[int, list[float]] = {}
        self._group_latest_end: dict[int, list[float]] = {}
        for g, spans in by_group.items():
            spans.sort()
            self._group_sent[g] = [sent for sent, _ in spans]
            self._group_latest_end[g] = list(itertools.accumulate((end for _, end in spans), max))

    def before(self, r: Tagged) -> float | None:
        """Idle since its conversation's previous turn, or since its group's latest request
        ended; an agent call has both (its agent, its session: a sub-agent's answers keep the
        parent's history warm) and the shorter counts."""
        gaps = []
        if r.conversation is not None and r.turn is not None:
            end = self._turn_end.get((r.conversation, r.turn - 1))
            if r.group is None:
                return r.sent_mono_s - end if end is not None and end <= r.sent_mono_s else None
            if end is not None and end <= r.sent_mono_s:
                gaps.append(r.sent_mono_s - end)
        if r.group is not None and (sent := self._group_sent.get(r.group)):
            i = bisect.bisect_left(sent, r.sent_mono_s)  # the group's requests sent before this one
            if i:
                gaps.append(max(0.0, r.sent_mono_s - self._group_latest_end[r.group][i - 1]))
        return min(gaps) if gaps else None


def steady_turn_lag(ok: list[Tagged], some: list[Tagged], granularity: int = 1) -> int | None:
    """Multi-turn: how many turns back the history reused by partial hits reached, when most of
    them agree (None: no conversations, or no steady distance)."""
    lags = []
    for r in some:
        if r.conversation is None or r.turn is None:
            continue
        earlier = [o for o in ok if o.conversation == r.conversation and o.turn is not None and o.turn < r.turn]
        served = [
            o.turn
            for o in earlier
            if o.turn is not None and o.prompt_tokens and o.prompt_tokens <= (r.cached_tokens or 0) + granularity
        ]
        if served:
            lags.append(r.turn - max(served))
    if len(lags) < 2:  # one partial hit is no pattern
        return None
    lag, count = max(((v, lags.count(v)) for v in set(lags)), key=lambda item: item[1])
    return lag if count >= STEADY_LAG_SHARE * len(lags) else None
