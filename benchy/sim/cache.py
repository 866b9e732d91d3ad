"""Automatic prefix cache, modelled on vLLM's: 16-token blocks keyed by a chained hash, LRU.

As in vLLM, a prompt's blocks are touched last block first, so that its first blocks are the
most recently used: when the cache is full a chain loses its tail before its head, and a later
prompt still reuses what is left of its prefix.

With a lifetime (`ttl_s`, a hosted API's 5-10 minute prompt cache, an LMCache TTL), a block
not used for that long is gone: the next lookup finds it evicted. A running request uses its
prompt's blocks until it ends, so the lifetime runs from the end of the last one (as the
client sees the idle time), not from its prefill.

The cache holds at most `capacity` blocks; inserting past that evicts the least recently used
ones. Eviction is what a cache-aware workload must see under load, so the cache also remembers
which blocks it evicted: a lookup says how many prompt tokens it would have served had they
stayed (`lost_tokens`), and the truth log records both that and the blocks each insert evicted.
"""

from __future__ import annotations

import hashlib
import time
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from benchy.sim.config import BLOCK_SIZE

# Hashes of evicted blocks kept to tell "evicted" from "never seen": a multiple of the capacity,
# so memory stays bounded while a block evicted a long while ago still counts as lost.
EVICTED_MEMORY = 16


def block_hashes(ids: list[int], block_size: int = BLOCK_SIZE, chained: bool = True) -> list[bytes]:
    """One hash per full block; chained, each covers its block and, through the chain, all
    before it (a prefix cache); not chained, its block's content alone (a cache that reuses a
    block wherever it sits in the prompt)."""
    hashes = []
    prev = b""
    for start in range(0, len(ids) - block_size + 1, block_size):
        block = array("I", ids[start : start + block_size]).tobytes()
        digest = hashlib.blake2b(prev + block, digest_size=16).digest()
        prev = digest if chained else b""
        hashes.append(digest)
    return hashes


@dataclass(frozen=True)
class Lookup:
    """One prompt's lookup: tokens served from cache, and the tokens right after them that were
    cached once but had been evicted (what eviction cost this request)."""

    cached_tokens: int
    lost_tokens: int = 0
    leading_tokens: int | None = None  # anywhere-matching: the hits before the first miss (None: all of them)

    @property
    def prefix_tokens(self) -> int:
        """What a prefix cache would have served of it: the hits before the first miss."""
        return self.cached_tokens if self.leading_tokens is None else self.leading_tokens


class PrefixCache:
    """LRU blocks of prompt tokens. anywhere=False: a prefix cache (vLLM's, SGLang's radix
    tree): a prompt reuses its leading blocks up to the first miss. anywhere=True: a
    position-independent cache (LMCache/CacheBlend-style, KV shared by content): every block of
    the prompt whose content is cached is reused, wherever it sits."""

    def __init__(
        self,
        capacity_blocks: int,
        block_size: int = BLOCK_SIZE,
        anywhere: bool = False,
        ttl_s: float = 0.0,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.capacity = capacity_blocks
        self.block_size = block_size
        self.anywhere = anywhere
        self.ttl_s = ttl_s  # 0: blocks live until evicted for room
        self._clock = clock
        self._blocks: OrderedDict[bytes, float] = OrderedDict()  # block → when last used
        self._evicted: OrderedDict[bytes, None] = OrderedDict()
        self.evicted_total = 0  # blocks evicted since the start
        self._held: dict[bytes, int] = {}  # with a lifetime: blocks running requests use, how many

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, ids: list[int]) -> int:
        """Cached tokens for this prompt: leading blocks found, never the whole prompt
        (the last token must be recomputed to produce the first output token)."""
        return self.lookup_detail(ids).cached_tokens

    def lookup_detail(self, ids: list[int]) -> Lookup:
        """As lookup, and how many usable tokens after the hits had been evicted."""
        usable = block_hashes(ids, self.block_size, chained=not self.anywhere)[: (len(ids) - 1) // self.block_size]
        self._expire()
        if self.anywhere:
            return self._lookup_anywhere(usable)
        hits = 0
        for h in usable:
            if h not in self._blocks:
                break
            hits += 1
        self._touch(usable[:hits])
        lost = 0
        for h in usable[hits:]:
            if h not in self._evicted:
                break
            lost += 1
        return Lookup(hits * self.block_size, lost * self.block_size)

    def _lookup_anywhere(self, usable: list[bytes]) -> Lookup:
        found = [h in self._blocks for h in usable]
        leading = found.index(False) if False in found else len(found)
        self._touch([h for h, hit in zip(usable, found) if hit])
        return Lookup(sum(found) * self.block_size, 0, leading * self.block_size)

    def clear(self) -> int:
        """Forgets every block (a reset_prefix_cache); returns how many were held."""
        held = len(self._blocks)
        self._blocks.clear()
        self._evicted.clear()
        return held

    def insert(self, ids: list[int]) -> int:
        """Adds the prompt's full blocks (most recently used); returns how many blocks that evicted."""
        hashes = block_hashes(ids, self.block_size, chained=not self.anywhere)
        self._expire()
        for h in hashes:
            self._blocks[h] = 0.0
            self._evicted.pop(h, None)
        self._touch(hashes)
        evicted = 0
        while len(self._blocks) > self.capacity:
            h, _ = self._blocks.popitem(last=False)
            self._evicted[h] = None
            evicted += 1
        while len(self._evicted) > EVICTED_MEMORY * self.capacity:
            self._evicted.popitem(last=False)
        self.evicted_total += evicted
        return evicted

    def hold(self, ids: list[int]) -> None:
        """With a lifetime: a request now runs on this prompt's cached blocks, which do not
        expire under it (a server does not drop what a running request uses)."""
        if self.ttl_s:
            for h in self._held_hashes(ids):
                self._held[h] = self._held.get(h, 0) + 1

    def release(self, ids: list[int]) -> None:
        """With a lifetime: the request that held this prompt's blocks ended; their lifetime
        runs from now. Without one, the LRU order stays as lookups and inserts left it."""
        if not self.ttl_s:
            return
        hashes = self._held_hashes(ids)
        for h in hashes:
            count = self._held.get(h, 0) - 1
            if count > 0:
                self._held[h] = count
            else:
                self._held.pop(h, None)
        self._touch(hashes)

    def _held_hashes(self, ids: list[int]) -> list[bytes]:
        return [h for h in block_hashes(ids, self.block_size, chained=not self.anywhere) if h in self._blocks]

    def _touch(self, hashes: list[bytes]) -> None:
        """Most recently used, the first block last: eviction takes a chain's tail first."""
        now = self._clock()
        for h in reversed(hashes):
            self._blocks[h] = now
            self._blocks.move_to_end(h)

    def _expire(self) -> None:
        """Drops the blocks unused for longer than the lifetime (the least recently used come
        first, so the scan stops at the first one still alive)."""
        if not self.ttl_s:
            return
        now = self._clock()
        oldest = now - self.ttl_s
        while self._blocks:
            h, used = next(iter(self._blocks.items()))
            if used >= oldest:
                break
            if h in self._held:  # in use: used now
                self._blocks[h] = now
                self._blocks.move_to_end(h)
                continue
            del self._blocks[h]
            self._evicted[h] = None
            self.evicted_total += 1
