"""The simulator's truth log says how long its own loop stalled while it held each request
(sim/stalls.py): the witness tests need where a busy machine held a stamp back. Judged by
stopping the simulator's process (SIGSTOP) for a known while, over real HTTP."""

from __future__ import annotations

import os
import signal
import threading
import time

from benchy.sim import stalls
from tests.conftest import post_chat

STOP_S = 0.3
BODY = {"model": "benchy-sim", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4}


def _send(sim) -> tuple[threading.Thread, list[float]]:
    """POSTs BODY from a thread; the list gets the send time, on the simulator's clock (one
    monotonic clock per machine), then the HTTP status."""
    sent: list[float] = []

    def go() -> None:
        sent.append(time.perf_counter())
        sent.append(post_chat(sim.base_url, BODY)[0])

    thread = threading.Thread(target=go)
    thread.start()
    return thread, sent


def test_a_stall_before_the_arrival_stamp_is_in_the_record(start_sim):
    sim = start_sim("--prefill-tps", "100000", "--decode-tps", "1000")
    os.kill(sim.proc.pid, signal.SIGSTOP)
    try:
        thread, sent = _send(sim)
        time.sleep(STOP_S)  # the test's own stop: the simulator cannot read the request meanwhile
    finally:
        os.kill(sim.proc.pid, signal.SIGCONT)
    thread.join(30)
    assert sent[1] == 200
    (held,) = sim.truth(expect=1)
    # Its arrival was stamped late by what the stop kept it from reading, and by the turns of a
    # busy machine's loop after it; the record says so: its stalls from before the send to the stamp.
    late = held["arrival_s"] - sent[0]
    assert late >= STOP_S * 0.9
    assert held["loop_behind_s"] >= late - stalls.INTERVAL_S - 0.02
