"""benchy's event loop (benchy/client/loop.py): uvloop where it is installed, asyncio's own when
asked, recorded in results.json, and the two things uvloop would otherwise change."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import threading
from pathlib import Path

import pytest

from benchy.client import loop as event_loop
from tests.conftest import run_benchy, sim_env

uvloop = pytest.importorskip("uvloop")


@pytest.fixture
def loop_choice(monkeypatch):
    """Sets BENCHY_EVENT_LOOP for this process's event_loop.run (its choice is cached)."""

    def choose(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("BENCHY_EVENT_LOOP", raising=False)
        else:
            monkeypatch.setenv("BENCHY_EVENT_LOOP", value)
        event_loop._uvloop.cache_clear()

    yield choose
    event_loop._uvloop.cache_clear()


async def _running_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_run_is_uvloop_where_installed_and_asyncio_when_asked(loop_choice):
    loop_choice(None)
    assert isinstance(event_loop.run(_running_loop()), uvloop.Loop)
    assert event_loop.name() == f"uvloop {uvloop.__version__}"
    loop_choice("asyncio")
    assert not isinstance(event_loop.run(_running_loop()), uvloop.Loop)
    assert event_loop.name() == "asyncio"


def test_uvloop_add_reader_makes_a_pipe_non_blocking_and_watch_does_not(loop_choice):
    """Why `watch`: a worker's pipe left non-blocking cuts a big batch mid-message (the parent
    then loses the worker: every request it had in flight was recorded worker_lost)."""
    loop_choice(None)
    ours, theirs = multiprocessing.Pipe()

    async def blocking_after(watched: bool) -> bool:
        loop = asyncio.get_running_loop()
        if watched:
            event_loop.watch(ours, lambda: None)
        else:
            loop.add_reader(ours.fileno(), lambda: None)
        blocking = os.get_blocking(ours.fileno())
        loop.remove_reader(ours.fileno())
        return blocking

    try:
        assert event_loop.run(blocking_after(watched=False)) is False  # uvloop's doing
        os.set_blocking(ours.fileno(), True)
        assert event_loop.run(blocking_after(watched=True)) is True
    finally:
        ours.close()
        theirs.close()


def test_a_watched_pipe_carries_a_message_far_larger_than_its_buffer(loop_choice):
    """From inside the loop, as a worker sends its batches: 8 MiB through a socket pair whose
    buffer holds a few hundred KiB, read by a thread as the parent reads it."""
    loop_choice(None)
    ours, theirs = multiprocessing.Pipe()
    big = os.urandom(8 * 2**20)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(theirs.recv_bytes()))
    reader.start()

    async def send() -> None:
        event_loop.watch(ours, lambda: None)
        ours.send_bytes(big)
        asyncio.get_running_loop().remove_reader(ours.fileno())

    try:
        event_loop.run(send())
        reader.join(timeout=30)
        assert got == [big]
    finally:
        ours.close()
        theirs.close()


@pytest.mark.parametrize("choice", [None, "asyncio"])
def test_results_say_which_loop_the_requests_ran_on(start_sim, tmp_path, choice):
    sim = start_sim(truth_log=False)
    env = {**sim_env(), **({"BENCHY_EVENT_LOOP": choice} if choice else {})}
    out = tmp_path / "out"
    args = ("run", "--base-url", sim.base_url, "--pp", "128", "--tg", "8", "-c", "2", "--requests", "4")
    proc = run_benchy(*args, "--workers", "2", "--quiet", "--no-report", "--output", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    results = json.loads(Path(out / "results.json").read_text())
    expected = "asyncio" if choice else f"uvloop {uvloop.__version__}"
    assert results["setup"]["event_loop"] == expected
    (case,) = results["cases"]
    assert sum(not r["warmup"] and r["status"] == "ok" for r in case["requests"]) == 4
