"""The capacity search, pure: which load to probe next, how many requests to send there, and when
the answer is known. No I/O: the runner measures each `Probe` and `record`s what it saw, so a
test can drive the search with a made-up server and check every decision.

Why this shape. A point's goodput (the share of requests within every SLO target) is a
binomial proportion, so its uncertainty is known from its counts alone (stats.proportion_interval).
Server time is spent where it decides something:
  * bracket: from --start the load doubles while goodput leans above the target (its point
    estimate), or halves while it leans below, until one passing and one failing load are known;
  * bisect between them until they are adjacent (concurrency: one apart; rate: within
    --resolution of each other);
  * confirm: only the two ends of the bracket must be *clear* (their interval wholly above or
    below the target); each gets more requests, doubling, until it is clear or holds
    --max-requests. A point far from the boundary is clear after its first round; one near it
    gets the requests. If more requests flip an end's verdict, the bracket moves and the
    search goes on.
Loads far below the answer are never confirmed on their own: goodput is assumed to fall as
load rises (a server does not get better at its SLO by being sent more), so the confirmed pass
at the bracket's lower end speaks for them.

A round in which benchy itself fell behind (the `client_overloaded` check) is no evidence about
the server: it is kept, marked, and not counted; a load whose rounds keep falling behind ends the
search there (`client_limited`), since a higher one would only fall further behind. (The runner
hands over as evidence a late round that passed an SLO a late client can only worsen.)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from benchy.load import arrivals
from benchy.measure.stats import proportion_interval

BY_CONCURRENCY, BY_RATE = "concurrency", "rate"
FOUND, ALL_PASS, NONE_PASS, CLIENT_LIMITED = "found", "all_pass", "none_pass", "client_limited"
PASS, FAIL, UNDECIDED = "pass", "fail", "undecided"


@dataclass(frozen=True)
class SearchSettings:
    by: str = BY_CONCURRENCY  # what is searched: requests in flight, or arrivals per second
    target: float = 0.9  # --goodput: the share of requests that must meet every SLO target
    confidence: float = 0.95  # of the goodput interval a verdict must be clear of
    method: str = "wilson"  # stats.INTERVAL_METHODS
    start: float = 1.0  # the first load probed
    limit: float = 256.0  # the highest load the search may probe (--max)
    floor: float = 1.0  # the lowest (concurrency 1; a rate: start / 16)
    min_requests: int = 20  # a point's first round sends at least this many
    max_requests: int = 200  # a point gets no more than this many, clear or not
    resolution: float = 0.1  # rate: bisect until (failing − passing) ≤ resolution × failing
    client_retries: int = 1  # rounds at one load that may fall behind before the search stops

    def check(self) -> None:
        """ValueError (one line) for settings no search can use."""
        if self.by not in (BY_CONCURRENCY, BY_RATE):
            raise ValueError(f"--by must be {BY_CONCURRENCY} or {BY_RATE}, got {self.by!r}")
        if not 0 < self.target <= 1:
            raise ValueError(f"--goodput must be in (0, 1], got {self.target:g}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"--confidence must be in (0, 1), got {self.confidence:g}")
        if not 0 < self.floor <= self.start <= self.limit:
            raise ValueError(
                f"the search needs 0 < lowest ≤ --start ≤ --max, got {self.floor:g}, {self.start:g}, {self.limit:g}"
            )
        if self.by == BY_CONCURRENCY and not all(float(v).is_integer() for v in (self.start, self.limit)):
            raise ValueError("--start and --max must be whole numbers with --by concurrency")
        if not 1 <= self.min_requests <= self.max_requests:
            raise ValueError(f"need 1 ≤ --min-requests ≤ --max-requests, got {self.min_requests}, {self.max_requests}")
        if not 0 < self.resolution < 1:
            raise ValueError(f"--resolution must be in (0, 1), got {self.resolution:g}")


@dataclass(frozen=True)
class Probe:
    """What to measure next: `requests` more requests at `load`."""

    load: float
    requests: int


@dataclass(frozen=True)
class Observation:
    """One round at a load: its measured requests (failed ones included) and how many were good.
    `overloaded`: why benchy itself fell behind (the round is then no evidence), else None."""

    requests: int
    good: int
    overloaded: str | None = None


@dataclass
class Point:
    """Everything observed at one load, rounds merged."""

    load: float
    requests: int = 0
    good: int = 0
    rounds: int = 0
    discarded: int = 0  # rounds not counted: the client fell behind

    @property
    def goodput(self) -> float | None:
        return self.good / self.requests if self.requests else None

    def interval(self, s: SearchSettings) -> list[float] | None:
        return proportion_interval(self.good, self.requests, s.confidence, s.method) if self.requests else None

    def verdict(self, s: SearchSettings) -> str:
        """pass / fail when the interval is clear of the target, else undecided."""
        interval = self.interval(s)
        if interval is None:
            return UNDECIDED
        if interval[0] >= s.target:
            return PASS
        if interval[1] < s.target:
            return FAIL
        return UNDECIDED

    def leans_pass(self, s: SearchSettings) -> bool:
        """The point estimate's side of the target: what the search steers by, and the verdict of
        a point that reached --max-requests undecided."""
        return self.goodput is not None and self.goodput >= s.target

    def settled(self, s: SearchSettings) -> bool:
        return self.verdict(s) != UNDECIDED or self.requests >= s.max_requests


@dataclass(frozen=True)
class Answer:
    """The search's result. capacity: the highest load that passed; failing: the lowest that
    failed (None when none did); confident: both ends' intervals are clear of the target."""

    kind: str  # FOUND | ALL_PASS | NONE_PASS | CLIENT_LIMITED
    capacity: float | None
    failing: float | None
    confident: bool
    client_limited_at: float | None = None


@dataclass
class Search:
    settings: SearchSettings
    points: dict[float, Point] = field(default_factory=dict)
    order: list[float] = field(default_factory=list)  # loads in the order first probed
    client_limited_at: float | None = None

    def next_probe(self) -> Probe | None:
        """The next round to measure, or None once the answer is known."""
        if self.client_limited_at is not None:
            return None
        load = self._next_load()
        return None if load is None else Probe(load, self._round_size(load))

    def record(self, load: float, seen: Observation) -> None:
        point = self.points.get(load)
        if point is None:
            point = self.points[load] = Point(load)
            self.order.append(load)
        if seen.overloaded is not None or seen.requests == 0:
            point.discarded += 1
            if point.discarded > self.settings.client_retries:
                self.client_limited_at = load
            return
        point.requests += seen.requests
        point.good += seen.good
        point.rounds += 1

    def answer(self) -> Answer:
        lo, hi = self._bracket()
        s = self.settings
        confident = all(self.points[x].verdict(s) != UNDECIDED for x in (lo, hi) if x is not None)
        if self.client_limited_at is not None:
            return Answer(CLIENT_LIMITED, lo, hi, confident, self.client_limited_at)
        if hi is None:
            return Answer(ALL_PASS, lo, None, confident)
        if lo is None:
            return Answer(NONE_PASS, None, hi, confident)
        return Answer(FOUND, lo, hi, confident)

    # ---------------------------------------------------------------- the steps

    def _bracket(self) -> tuple[float | None, float | None]:
        """(highest load leaning pass below the lowest leaning fail, lowest leaning fail)."""
        s = self.settings
        measured = [p for p in self.points.values() if p.requests]
        failing = [p.load for p in measured if not p.leans_pass(s)]
        hi = min(failing) if failing else None
        passing = [p.load for p in measured if p.leans_pass(s) and (hi is None or p.load < hi)]
        return (max(passing) if passing else None), hi

    def _next_load(self) -> float | None:
        s = self.settings
        if not any(p.requests for p in self.points.values()):
            return s.start
        lo, hi = self._bracket()
        if hi is None:  # everything passed so far: up, or confirm the limit
            assert lo is not None
            return self._grow(lo) if lo < s.limit else self._unsettled(lo)
        if lo is None:  # everything failed so far: down, or confirm the floor
            return self._shrink(hi) if hi > s.floor else self._unsettled(hi)
        if not self._adjacent(lo, hi):
            return self._middle(lo, hi)
        return self._unsettled(lo, hi)

    def _unsettled(self, *loads: float) -> float | None:
        return next((x for x in loads if not self.points[x].settled(self.settings)), None)

    def _round_size(self, load: float) -> int:
        """The first round: --min-requests, and at least two requests per stream (concurrency)
        or arrivals.SETTLE_S seconds of arrivals (rate: an open loop needs time for a queue to
        show, even past --max-requests); later rounds double the point's requests, up to
        --max-requests in all."""
        s = self.settings
        point = self.points.get(load)
        if s.by == BY_RATE:
            first = arrivals.settling_requests(load, s.min_requests)
        else:
            first = max(s.min_requests, math.ceil(2 * load))
        if point is None or point.requests == 0:
            return first
        return max(1, min(point.requests, s.max_requests - point.requests))

    def _grow(self, load: float) -> float:
        return min(self._tidy(load * 2), self.settings.limit)

    def _shrink(self, load: float) -> float:
        return max(self._tidy(load / 2), self.settings.floor)

    def _middle(self, lo: float, hi: float) -> float:
        if self.settings.by == BY_CONCURRENCY:
            return float((int(lo) + int(hi)) // 2)
        return self._tidy((lo + hi) / 2)

    def _adjacent(self, lo: float, hi: float) -> bool:
        if self.settings.by == BY_CONCURRENCY:
            return hi - lo <= 1
        return hi - lo <= self.settings.resolution * hi

    def _tidy(self, load: float) -> float:
        """Concurrency: a whole number; a rate: four significant digits (a readable label)."""
        if self.settings.by == BY_CONCURRENCY:
            return float(max(1, math.floor(load)))
        return float(f"{load:.4g}")
