"""The router in front of --replicas: round robin, random, or cache-aware by prefix."""

from __future__ import annotations

import itertools
import random

from benchy.sim.cache import PrefixCache
from benchy.sim.config import SimConfig


class Router:
    """Picks the replica for each request and counts what each has in flight."""

    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        self._rng = random.Random(cfg.seed)
        self._next = itertools.count()
        # --route prefix: the router's own view of what each replica holds (it inserts a prompt
        # as it routes it, as SGLang's approximate radix tree does) and what each has in flight.
        self._routed = [PrefixCache(1 << 20) for _ in range(cfg.replicas)]
        self.in_flight = [0] * cfg.replicas

    def route(self) -> int:
        """The replica a router sends the next request to (round robin, or at random)."""
        if self.cfg.route == "random":
            return self._rng.randrange(self.cfg.replicas)
        if self.cfg.route == "prefix":
            return 0  # decided once the prompt is read (route_by_prefix)
        return next(self._next) % self.cfg.replicas

    def by_prefix(self, ids: list[int]) -> int:
        """Cache-aware: the replica that shares most of this prompt's prefix when that is at least
        half of it, else (or when it has --route-balance more requests in flight than the idlest)
        the one with the fewest requests in flight (the lowest index on a tie)."""
        matched = [routed.lookup(ids) for routed in self._routed]
        best = max(range(len(matched)), key=lambda r: matched[r])
        idlest = min(range(len(matched)), key=lambda r: self.in_flight[r])
        balance = self.cfg.route_balance
        if matched[best] * 2 < len(ids) or (balance and self.in_flight[best] - self.in_flight[idlest] >= balance):
            best = idlest
        self._routed[best].insert(ids)
        return best
