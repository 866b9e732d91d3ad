"""Eviction or partial reuse, from the order of hits and misses alone (measure/workloads.py).

The sequences are ones the simulator produced: the first on a loaded machine, three
conversations through a 120-block cache, where the truth log's cache_lost_tokens showed four
requests losing reuse to eviction after nine full hits, and two hitting again once the first
conversation had ended and freed room."""

from __future__ import annotations

import pytest

from benchy.measure.workloads import case_figures
from benchy.records.plan import Tagged
from benchy.workloads.spec import WorkloadSpec

# (conversation, turn, expected cached, reported cached), in send order
EVICTED_THEN_FREED = [
    (0, 1, 0, 32), (1, 1, 0, 32), (2, 1, 0, 32),
    (0, 2, 186, 176), (0, 3, 360, 352), (1, 2, 186, 176), (2, 2, 186, 176), (0, 4, 534, 528),
    (1, 3, 360, 352), (2, 3, 360, 352), (0, 5, 708, 704), (1, 4, 534, 528),
    (2, 4, 534, 400), (0, 6, 882, 576), (1, 5, 708, 224), (2, 5, 708, 48),
    (1, 6, 882, 880), (2, 6, 882, 880),
]  # fmt: skip


def records(sequence) -> list[Tagged]:
    return [
        Tagged(
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
    figures = case_figures("multi_turn", WorkloadSpec(turns=6), records(EVICTED_THEN_FREED))
    assert figures.partial_reuse is None
    assert figures.eviction is not None
    assert (figures.eviction.conversation, figures.eviction.turn, figures.eviction.requests) == (2, 4, 4)


def test_misses_from_the_start_with_hits_between_stay_partial_reuse():
    """The same hits and misses, the misses first: a router without affinity, not a full cache."""
    judged = [r for r in EVICTED_THEN_FREED if r[2]]
    shuffled = EVICTED_THEN_FREED[:3] + judged[9:13] + judged[:9] + judged[13:]
    figures = case_figures("multi_turn", WorkloadSpec(turns=6), records(shuffled))
    assert figures.eviction is None and figures.partial_reuse is not None


def conversation_records(turns: list[tuple[int, float, bool]]) -> list[Tagged]:
    """One conversation: (turn, idle seconds before it, reused its history), each answer 0.2 s."""
    out, t = [], 100.0
    for turn, idle, hit in turns:
        t += idle
        expected = 0 if turn == 1 else 160 * (turn - 1)
        out.append(
            Tagged(
                case="multi",
                run=0,
                index=turn,
                warmup=False,
                request_id=f"t{turn}",
                nonce="n",
                target_prompt_tokens=150,
                target_output_tokens=16,
                sent_mono_s=t,
                end_s=0.2,
                prompt_tokens=expected + 160,
                cached_tokens=expected if hit else 0,
                expected_cached_tokens=expected,
                conversation=0,
                turn=turn,
            )
        )
        t += 0.2
    return out


def test_misses_after_the_longest_idle_gaps_are_a_cache_lifetime():
    # Misses early and late, each after more than 2 s idle; every hit after less than 1 s.
    turns = [(1, 0, False), (2, 3.0, False), (3, 0.4, True), (4, 2.5, False), (5, 0.8, True), (6, 0.3, True)]
    part = case_figures("multi_turn", WorkloadSpec(turns=6), conversation_records(turns)).partial_reuse
    assert part is not None and part.cause == "expiry" and part.replicas is None
    assert (part.miss_idle_min_s, part.hit_idle_max_s) == pytest.approx((2.5, 0.8))


def test_misses_among_hits_at_the_same_idle_gaps_are_not_a_lifetime():
    # The same hits and misses, the idle gaps mixed: the lifetime has no evidence.
    turns = [(1, 0, False), (2, 0.4, False), (3, 3.0, True), (4, 0.8, False), (5, 2.5, True), (6, 0.3, True)]
    part = case_figures("multi_turn", WorkloadSpec(turns=6), conversation_records(turns)).partial_reuse
    assert part is not None and part.cause != "expiry"


def test_a_request_sent_while_its_group_was_in_flight_found_the_prefix_in_use_not_idle():
    """A trace's pairs 50 ms apart every 1.5 s, the cache's lifetime 0.5 s, as a busy client sent
    them (a run on two busy cores): the first of a pair went out 60 ms late, with its partner,
    and missed; the partner hit. The partner's idle time is not since the pair before ended
    (1.5 s, as long as a miss's) but none: its group's prefix was in use."""
    # (sent, end after, cached), send order; the first request has nothing to reuse.
    sends = [(0.0, 0.034, 0), (0.0005, 0.043, 1056), (1.5560, 0.059, 0), (1.5562, 0.068, 1056)]
    sends += [(3.0483, 0.023, 0), (3.0975, 0.006, 1056), (4.6012, 0.031, 0), (4.6507, 0.004, 1056)]
    made = [
        Tagged(
            case="trace",
            run=0,
            index=i,
            warmup=False,
            request_id=f"r{i}",
            nonce="n",
            target_prompt_tokens=1100,
            target_output_tokens=8,
            sent_mono_s=100.0 + sent,
            end_s=end,
            prompt_tokens=1100,
            cached_tokens=cached,
            expected_cached_tokens=1024 if i else 0,
            group=1,
        )
        for i, (sent, end, cached) in enumerate(sends)
    ]
    part = case_figures("trace", WorkloadSpec(), made).partial_reuse
    assert part is not None and part.cause == "expiry", part
    assert part.hit_idle_max_s == pytest.approx(3.0975 - (3.0483 + 0.023))
    assert part.miss_idle_min_s == pytest.approx(3.0483 - (1.5562 + 0.068))


def test_withheld_turns_are_new_rows_and_the_figures_given_stay():
    """Issue 51: withhold_turns wrote None into the case's turn rows after the case was made;
    it now returns new figures, the ones given untouched (a rebuild reads them again)."""
    from benchy.measure.workloads import TurnRow, WorkloadFigures, withhold_turns

    given = WorkloadFigures("multi_turn", turns=[TurnRow(1, 3, 0, ttft_s=0.2, e2e_s=1.0, ttft_gain=2.5)])
    made = withhold_turns(given, {"ttft_s": "SSE buffering"})
    (row,) = made.turns
    assert (row.ttft_s, row.ttft_gain, row.e2e_s, row.unavailable) == (None, None, 1.0, {"ttft_s": "SSE buffering"})
    assert given.turns[0].ttft_s == 0.2 and given.turns[0].ttft_gain == 2.5 and not given.turns[0].unavailable
    assert withhold_turns(given, {}).turns == given.turns
