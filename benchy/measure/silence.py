"""The longest span of a case in which no stream that was mid-answer received anything: the
evidence that the server itself stopped (issue 52, item 1).

Why: a server that freezes its own process (a GC pause, a synchronous step in its API server,
an engine stall) stops writing to every stream at once, and leaves requests sent meanwhile
unread in its socket; its own TTFT starts when it reads them, so the client's TTFT exceeds it.
A hold in front of the server (a proxy, a gateway) delays requests but not the answers already
flowing; a stalled client shows in its own loop lag; an engine busy with a long prefill stops
its streams too, but its API server still answers new requests' headers. A silence on every
stream at once, while benchy's loop was awake, and requests sent during it that got their
headers only after it (they waited unread) tell a stopped server apart. How many requests it
held is the count sent during it (`sent`): a server that sends headers when a slot takes the
request (llama.cpp) answers those that find a free slot at the resume inside the silence.

Memory stays flat in the case's length: text events are kept as the BIN_S bins they fell in
(a set, at most one entry per 10 ms of the case), each stream as its first and last event.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from benchy.jsontypes import Saved
from benchy.jsontypes import described as _opt
from benchy.records import RequestRecord

BIN_S = 0.01
MIN_SILENCE_S = 0.1  # shorter gaps are not looked at (a decode step, a scheduler tick)


@dataclass(frozen=True, slots=True)
class Silence(Saved):
    """The case's longest silence on every stream mid-answer (case.silence)."""

    silence_s: float = _opt("seconds in which no stream mid-answer received a text event", 0.0)
    streams: int = _opt("streams that were mid-answer through it (events before and after it)", 0)
    after_s: float = _opt("its start, seconds after the case's first send", 0.0)
    unread: int = _opt("requests sent during it whose response headers came only after it", 0)
    sent: int = _opt(
        "(1.29) requests sent during it, whenever their headers came: a server that sends a request's headers "
        "when a slot takes it (llama.cpp) answers some held ones inside it, so `unread` is a floor",
        0,
    )


class SilenceTracker:
    """Gathers a case's text events (measured requests), then finds its longest silence."""

    def __init__(self) -> None:
        self.bins: set[int] = set()
        self.spans: list[tuple[float, float]] = []  # each stream's first and last text event
        self.heads: list[tuple[float, float]] = []  # each request's send and its response headers
        self.sends: list[float] = []  # every request's send, headers or none
        self.first_send: float | None = None

    def add(self, rec: RequestRecord) -> None:
        sent = rec.sent_mono_s
        self.first_send = sent if self.first_send is None else min(self.first_send, sent)
        self.sends.append(sent)
        if rec.headers_s is not None:
            self.heads.append((sent, sent + rec.headers_s))
        times = rec.token_event_s
        if len(times) < 2:
            return
        self.bins.update(int((sent + t) / BIN_S) for t in times)
        self.spans.append((sent + times[0], sent + times[-1]))

    def longest(self) -> Silence | None:
        """The longest gap between text events through which some stream was mid-answer
        (None: none of MIN_SILENCE_S)."""
        occupied, sends = sorted(self.bins), sorted(self.sends)
        best: Silence | None = None
        for a, b in zip(occupied, occupied[1:], strict=False):
            start, end = (a + 1) * BIN_S, b * BIN_S
            if end - start < max(MIN_SILENCE_S, best.silence_s if best else 0.0):
                continue
            through = sum(first < start and last >= end for first, last in self.spans)
            if through:
                unread = sum(start <= sent < end <= head for sent, head in self.heads)
                during = bisect.bisect_left(sends, end) - bisect.bisect_left(sends, start)
                after = round(start - (start if self.first_send is None else self.first_send), 3)
                best = Silence(round(end - start, 3), through, after, unread, during)
        return best
