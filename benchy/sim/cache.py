"""Automatic prefix cache, modelled on vLLM's: 16-token blocks keyed by a chained hash, LRU."""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict

from benchy.sim.config import BLOCK_SIZE


def block_hashes(ids: list[int], block_size: int = BLOCK_SIZE) -> list[bytes]:
    """One hash per full block; each covers its block and, through the chain, all before it."""
    hashes = []
    prev = b""
    for start in range(0, len(ids) - block_size + 1, block_size):
        block = array("I", ids[start : start + block_size]).tobytes()
        prev = hashlib.blake2b(prev + block, digest_size=16).digest()
        hashes.append(prev)
    return hashes


class PrefixCache:
    def __init__(self, capacity_blocks: int, block_size: int = BLOCK_SIZE):
        self.capacity = capacity_blocks
        self.block_size = block_size
        self._blocks: OrderedDict[bytes, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._blocks)

    def lookup(self, ids: list[int]) -> int:
        """Cached tokens for this prompt: leading blocks found, never the whole prompt
        (the last token must be recomputed to produce the first output token)."""
        usable = (len(ids) - 1) // self.block_size
        hits = 0
        for h in block_hashes(ids, self.block_size)[:usable]:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            hits += 1
        return hits * self.block_size

    def insert(self, ids: list[int]) -> None:
        for h in block_hashes(ids, self.block_size):
            self._blocks[h] = None
            self._blocks.move_to_end(h)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)
