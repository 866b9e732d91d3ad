"""The simulator's prefix cache: LRU capacity, and eviction as its truth log shows it."""

from __future__ import annotations

import json
import urllib.request

from benchy.measure import tokenizer
from benchy.sim.cache import PrefixCache, block_hashes


def blocks(first: int, n: int) -> list[int]:
    return list(range(first, first + 16 * n))


def test_lookup_says_what_eviction_cost():
    cache = PrefixCache(capacity_blocks=4)
    a, b = blocks(0, 3), blocks(1000, 3)
    assert cache.insert(a) == 0
    assert cache.lookup_detail(a + [1]).cached_tokens == 48
    # b's three blocks push out the two least recently used: a's tail, not its head.
    assert cache.insert(b) == 2 and len(cache) == 4 and cache.evicted_total == 2
    found = cache.lookup_detail(a + [1])
    assert (found.cached_tokens, found.lost_tokens) == (16, 32)
    # A prompt never seen loses nothing: "lost" means cached once, then evicted.
    assert cache.lookup_detail(blocks(5000, 3) + [1]).lost_tokens == 0
    # Re-inserting an evicted block makes it cached again, not lost.
    cache.insert(a)
    assert cache.lookup_detail(a + [1]).cached_tokens == 48


def test_evicted_memory_is_bounded():
    cache = PrefixCache(capacity_blocks=2)
    for i in range(200):
        cache.insert(blocks(100 * 16 * i, 2))
    assert len(cache) == 2 and len(cache._evicted) <= 16 * 2
    assert cache.evicted_total == 2 * 199


def test_a_lifetime_expires_what_sat_unused_and_keeps_what_was_used():
    now = [0.0]
    cache = PrefixCache(capacity_blocks=100, ttl_s=10.0, clock=lambda: now[0])
    a, b = blocks(0, 3), blocks(1000, 3)
    cache.insert(a)
    cache.insert(b)
    now[0] = 8.0
    assert cache.lookup_detail(a + [1]).cached_tokens == 48  # used at 8 s: alive until 18 s
    now[0] = 12.0
    assert cache.lookup_detail(a + [1]).cached_tokens == 48
    found = cache.lookup_detail(b + [1])  # unused for 12 s: expired, and says so
    assert (found.cached_tokens, found.lost_tokens) == (0, 48) and cache.evicted_total == 3
    forever = PrefixCache(capacity_blocks=100, clock=lambda: now[0])
    forever.insert(a)
    now[0] = 1e9
    assert forever.lookup_detail(a + [1]).cached_tokens == 48  # no lifetime: never expires


def test_a_lifetime_runs_from_the_end_of_the_request_that_used_the_blocks():
    """A request holds its prompt's blocks until it ends: they do not expire under a long
    answer (another prompt's lookup meanwhile), and the next request finds them within the
    lifetime of that end (a busy machine stretches answers: it must not run from their start)."""
    now = [0.0]
    cache = PrefixCache(capacity_blocks=100, ttl_s=0.2, clock=lambda: now[0])
    a, other = blocks(0, 3), blocks(1000, 3)
    cache.insert(a)
    cache.hold(a + [1])  # prefilled at 0 s, decoding until 0.5 s
    now[0] = 0.3
    cache.insert(other)  # expires what sat unused, not what is in use
    now[0] = 0.5
    cache.release(a + [1])
    now[0] = 0.65
    assert cache.lookup_detail(a + [1]).cached_tokens == 48
    now[0] = 0.9  # 0.25 s since that lookup, no request holding them: gone
    assert cache.lookup_detail(a + [1]).cached_tokens == 0
    lru = PrefixCache(capacity_blocks=10)  # no lifetime: the LRU order is the lookups' and inserts'
    lru.insert(a)
    lru.hold(a + [1])
    lru.insert(other)
    lru.release(a + [1])
    assert list(lru._blocks)[-1] == block_hashes(other)[0]


def post_chat(base_url: str, text: str, request_id: str) -> dict:
    body = {
        "model": "benchy-sim",
        "messages": [{"role": "user", "content": text}],
        "max_tokens": 2,
        "ignore_eos": True,
    }
    req = urllib.request.Request(
        base_url + "/chat/completions",
        json.dumps(body).encode(),
        {"Content-Type": "application/json", "X-Request-Id": request_id},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)


def test_truth_log_shows_eviction(start_sim):
    """Three 400-token prompts through a 40-block cache: the later ones evict the first one's
    tail, so its repeat finds only part of it, and the truth log says how much was lost."""
    sim = start_sim("--instant", "--cache-blocks", "40")
    texts = [tokenizer.filler(400, seed=s) for s in (1, 2, 3)]
    for i, text in enumerate(texts):
        post_chat(sim.base_url, text, f"first{i}")
    repeat = post_chat(sim.base_url, texts[0], "repeat0")
    truth = {r["request_id"]: r for r in sim.truth(expect=4)}
    assert truth["first0"]["cache_evicted_blocks"] == 0 and truth["first0"]["cache_lost_tokens"] == 0
    # The template block (shared by every chat prompt) stays; the rest fills past 40 blocks.
    assert truth["first1"]["cache_evicted_blocks"] > 0
    assert all(r["cache_used_blocks"] <= 40 for r in truth.values())
    lost = truth["repeat0"]["cache_lost_tokens"]
    cached = truth["repeat0"]["cached_tokens"]
    assert repeat["usage"]["prompt_tokens_details"]["cached_tokens"] == cached
    assert cached >= 16 and lost > 0  # the head survives (tail first), the rest was lost
    assert cached + lost == (truth["repeat0"]["prompt_tokens"] - 1) // 16 * 16
