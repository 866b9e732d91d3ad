"""Eviction or partial reuse, from the order of hits and misses alone (measure/workloads.py).

The sequences are ones the simulator produced: the first on a loaded machine, three
conversations through a 120-block cache, where the truth log's cache_lost_tokens showed four
requests losing reuse to eviction after nine full hits, and two hitting again once the first
conversation had ended and freed room."""

from __future__ import annotations

from benchy.measure.records import RequestRecord
from benchy.measure.workloads import case_figures

# (conversation, turn, expected cached, reported cached), in send order
EVICTED_THEN_FREED = [
    (0, 1, 0, 32), (1, 1, 0, 32), (2, 1, 0, 32),
    (0, 2, 186, 176), (0, 3, 360, 352), (1, 2, 186, 176), (2, 2, 186, 176), (0, 4, 534, 528),
    (1, 3, 360, 352), (2, 3, 360, 352), (0, 5, 708, 704), (1, 4, 534, 528),
    (2, 4, 534, 400), (0, 6, 882, 576), (1, 5, 708, 224), (2, 5, 708, 48),
    (1, 6, 882, 880), (2, 6, 882, 880),
]  # fmt: skip


def records(sequence) -> list[RequestRecord]:
    return [
        RequestRecord(
            case="multi",
            run=0,
            index=i,
            warmup=False,
            request_id=f"r{i}",
            nonce="n",
            target_prompt_tokens=150,
            target_output_tokens=16,
            sent_mono_s=100.0 + i,
            end_s=0.5,
            prompt_tokens=expected + 190,
            cached_tokens=cached,
            expected_cached_tokens=expected,
            conversation=conversation,
            turn=turn,
        )
        for i, (conversation, turn, expected, cached) in enumerate(sequence)
    ]


def test_reuse_that_worked_then_fell_short_is_eviction_even_when_it_came_back():
    figures = case_figures("multi_turn", {"turns": 6}, records(EVICTED_THEN_FREED))
    assert figures.partial_reuse is None
    assert figures.eviction is not None
    assert (figures.eviction.conversation, figures.eviction.turn, figures.eviction.requests) == (2, 4, 4)


def test_misses_from_the_start_with_hits_between_stay_partial_reuse():
    """The same hits and misses, the misses first: a router without affinity, not a full cache."""
    judged = [r for r in EVICTED_THEN_FREED if r[2]]
    shuffled = EVICTED_THEN_FREED[:3] + judged[9:13] + judged[:9] + judged[13:]
    figures = case_figures("multi_turn", {"turns": 6}, records(shuffled))
    assert figures.eviction is None and figures.partial_reuse is not None
