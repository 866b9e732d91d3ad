"""load/turns.py: when many streams do their turnover work at once, each turn of the event
loop holds at most its share of it, so the sockets are read between shares. Counted by turns,
not timed: a callback that re-arms itself runs once a turn and counts the work done since."""

from __future__ import annotations

import asyncio
import time

import pytest

from benchy.client import loop as event_loop
from benchy.load.turns import Turns

WORK_S = 0.001
STREAMS = 60


def busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def most_work_in_one_turn(use_turns: bool, runner) -> tuple[int, int]:
    """(the most work items done in one turn of the loop, the items done in all)."""
    done = [0]
    per_turn: list[int] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        turns = Turns()
        seen = [0]
        finished = loop.create_future()

        def tick() -> None:  # once a turn
            per_turn.append(done[0] - seen[0])
            seen[0] = done[0]
            if not finished.done():
                loop.call_soon(tick)

        async def stream() -> None:
            if use_turns:
                await turns.share()
            busy(WORK_S)
            done[0] += 1

        gate = loop.create_future()

        async def waiting() -> None:  # every stream wakes in the same turn, as a batch's ends do
            await gate
            await stream()

        tasks = [asyncio.ensure_future(waiting()) for _ in range(STREAMS)]
        await asyncio.sleep(0)
        loop.call_soon(tick)
        gate.set_result(None)
        await asyncio.gather(*tasks)
        finished.set_result(None)
        await asyncio.sleep(0)

    runner(main())
    return max(per_turn), done[0]


RUNNERS = [pytest.param(asyncio.run, id="asyncio"), pytest.param(event_loop.run, id="benchy's loop")]


@pytest.mark.parametrize("runner", RUNNERS)
def test_a_turnover_of_many_streams_is_spread_over_turns(runner):
    most, total = most_work_in_one_turn(True, runner)
    assert total == STREAMS
    # A turn takes work while less than TURN_S of it is done: at most TURN_S / WORK_S + 1 items.
    assert most <= round(Turns().turn_s / WORK_S) + 1, most


@pytest.mark.parametrize("runner", RUNNERS)
def test_without_shares_the_whole_turnover_holds_one_turn(runner):
    """The control: the same work, unshared, all in one turn."""
    most, total = most_work_in_one_turn(False, runner)
    assert most == total == STREAMS
